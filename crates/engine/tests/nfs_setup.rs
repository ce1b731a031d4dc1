//! The NFS setup of a prediction (engine::nfs_setup) on hostile input
//! (issue 24 case 3): a server change outside the calls' time span.

use statstorm_engine::nfs_setup::{NfsFlags, NfsSetup};
use statstorm_trace::op::{Op, OpKind};

fn op(t_s: f64, kind: OpKind, path: &str) -> Op {
    Op {
        t_us: (t_s * 1e6) as i64,
        dur_us: None,
        pid: 7,
        uid: 33,
        kind,
        path: path.to_string(),
        path2: None,
        flags: 0,
        errno: None,
        bytes: 0,
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
            nfs_root: Some("/m".into()),
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
