//! The NFS setup of a prediction (engine::nfs_setup) on hostile input
//! (issue 24 case 3): a server change outside the calls' time span.

use statstorm_engine::nfs_setup::{NfsFlags, NfsSetup};
use statstorm_trace::op::{Op, OpKind};

fn op(t_s: f64, kind: OpKind, path: &str) -> Op {
    Op {
        uid: 33,
        ..Op::new((t_s * 1e6) as i64, 7, kind, path)
    }
}

/// A change outside the calls' time span is kept but named in the notes.
#[test]
fn server_change_outside_the_trace_is_noted() {
    let ops = [
        op(100.0, OpKind::Stat, "/m/a.php"),
        op(200.0, OpKind::Stat, "/m/a.php"),
    ];
    let refs: Vec<&Op> = ops.iter().collect();
    let setup = |c: &str| {
        let f = NfsFlags {
            nfs_root: vec!["/m".into()],
            server_changes: vec![c.into()],
            ..NfsFlags::default()
        };
        NfsSetup::from_flags(&f, &refs).unwrap().unwrap()
    };
    let noted = |s: &NfsSetup| {
        s.notes
            .iter()
            .filter(|n| n.starts_with("--server-change"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(noted(&setup("150:/m/a.php")).is_empty());
    let after = noted(&setup("1764000000:/m/a.php"));
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after[0].contains("after the last traced call"), "{after:?}");
    assert!(after[0].contains("100.000000 to 200.000000 s"), "{after:?}");
    let before = noted(&setup("5:/m/a.php"));
    assert!(
        before[0].contains("before the first traced call"),
        "{before:?}"
    );
    let s = setup("1e13:/m/a.php");
    assert_eq!(noted(&s).len(), 1);
    assert_eq!(s.changes.len(), 1);
}

fn stat(path: &str, t_s: f64) -> Op {
    op(t_s, OpKind::Stat, path)
}

/// Several roots, each its own client under its own options: a call goes
/// to the longest root it lies under, a request's RPCs are the sum over
/// the mounts, and `--mount DIR:OPTS` changes one root only.
#[test]
fn several_roots_each_with_its_own_client_and_options() {
    // the same file stat()ed twice 10 s apart on each mount: under
    // actimeo=3600 the second is a cache hit, under the defaults
    // (acregmax 60 s... but acregmin 3 s for a file just seen) a GETATTR
    let ops = [
        stat("/code/a.php", 100.0),
        stat("/data/x/b.txt", 100.0),
        stat("/code/a.php", 110.0),
        stat("/data/x/b.txt", 110.0),
    ];
    let refs: Vec<&Op> = ops.iter().collect();
    let f = NfsFlags {
        nfs_root: vec!["/code:vers=3,actimeo=3600".into(), "/data:vers=3".into()],
        mount: vec!["/data:actimeo=3600".into()],
        ..NfsFlags::default()
    };
    let s = NfsSetup::from_flags(&f, &refs).unwrap().unwrap();
    assert_eq!(s.mounts.len(), 2);
    assert!(s.single().is_none());
    let code = s.mounts.iter().find(|m| m.root == "/code").unwrap();
    let data = s.mounts.iter().find(|m| m.root == "/data").unwrap();
    assert_eq!(code.recorded.render(), code.proposed.render());
    assert_ne!(data.recorded.render(), data.proposed.render());
    let getattrs = |c: &statstorm_nfs::RpcCounts| c.of(statstorm_nfs::client::RpcOp::Getattr);
    // each file on its own: before, /data revalidates b.txt; after, not
    let before = s.replay(&[&ops[..]], false);
    let after = s.replay(&[&ops[..]], true);
    assert!(
        getattrs(&before[0]) > getattrs(&after[0]),
        "{before:?} {after:?}"
    );
    // the sum over the mounts: one mount alone counts less
    let only_code = NfsSetup::from_flags(
        &NfsFlags {
            nfs_root: vec!["/code:vers=3,actimeo=3600".into()],
            ..NfsFlags::default()
        },
        &refs,
    )
    .unwrap()
    .unwrap();
    let one = only_code.replay(&[&ops[..]], false);
    assert!(one[0].total() < before[0].total(), "{one:?} {before:?}");
}

/// A `--mount DIR:OPTS` naming no root, and roots that hold no traced
/// call, are errors that say so.
#[test]
fn roots_that_match_nothing_are_errors() {
    let ops = [stat("/srv/www/a.php", 1.0)];
    let refs: Vec<&Op> = ops.iter().collect();
    let e = NfsSetup::from_flags(
        &NfsFlags {
            nfs_root: vec!["/srv/www".into()],
            mount: vec!["/elsewhere:nocto".into()],
            ..NfsFlags::default()
        },
        &refs,
    )
    .unwrap_err();
    assert!(e.contains("/elsewhere is not an NFS root"), "{e}");
    let e = NfsSetup::from_flags(
        &NfsFlags {
            nfs_root: vec!["/mnt/a".into(), "/mnt/b".into()],
            ..NfsFlags::default()
        },
        &refs,
    )
    .unwrap_err();
    assert!(
        e.contains("no traced path is under the NFS roots /mnt/a, /mnt/b"),
        "{e}"
    );
    assert!(e.contains("/srv/www"), "{e}");
    // one of two roots used: a note, not an error
    let s = NfsSetup::from_flags(
        &NfsFlags {
            nfs_root: vec!["/srv/www".into(), "/mnt/b".into()],
            ..NfsFlags::default()
        },
        &refs,
    )
    .unwrap()
    .unwrap();
    assert_eq!(s.mounts[0].root, "/srv/www");
    assert!(
        s.notes.iter().any(|n| n.contains("/mnt/b: no traced call")),
        "{:?}",
        s.notes
    );
}
