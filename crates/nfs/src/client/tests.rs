//! Unit tests on constructed op streams. Expected counts are derived in
//! SEMANTICS.md part D (R23, D(i)) and FINDINGS.md; each test names the rule.

use super::*;

const ROOT: &str = "/m";
const F: &str = "/m/a/b/c/f.php";

fn op(t_s: f64, kind: OpKind, path: &str) -> Op {
    Op {
        uid: 33,
        ..Op::new((t_s * 1e6) as i64, 100, kind, path)
    }
}

fn with_flags(mut o: Op, flags: u32) -> Op {
    o.flags = flags;
    o
}

fn enoent(mut o: Op) -> Op {
    o.errno = Some("ENOENT".into());
    o
}

fn run(opts: &str, ops: &[Op]) -> RpcCounts {
    run_p(opts, ops, false)
}

fn run_p(opts: &str, ops: &[Op], deleg: bool) -> RpcCounts {
    let mut p = ClientParams::new(ROOT);
    p.delegations = deleg;
    p.root_attr_time_us = Some(0);
    replay(ops, &MountOptions::parse(opts).unwrap(), &p, &[]).totals
}

/// D(i) steps: lstat F, open, fstat, read, close.
fn include(t: f64) -> Vec<Op> {
    vec![
        op(t, OpKind::Lstat, F),
        op(t + 0.001, OpKind::Open, F),
        op(t + 0.002, OpKind::Fstat, F),
        Op {
            bytes: 300,
            ..op(t + 0.003, OpKind::Read, F)
        },
        op(t + 0.004, OpKind::Close, F),
    ]
}

fn counts(c: &RpcCounts) -> String {
    c.to_string()
}

#[test]
fn r23_cold_stat_is_8_rpcs() {
    let c = run("vers=3", &[op(1.0, OpKind::Stat, F)]);
    // A(R) L(a) A(A) L(b) A(B) L(c) A(C) L(f)
    assert_eq!(counts(&c), "LOOKUP=4 ACCESS=4");
}

#[test]
fn r23_warm_and_warm_expired() {
    let ops = [
        op(1.0, OpKind::Stat, F),
        op(1.5, OpKind::Stat, F),   // warm: 0
        op(100.0, OpKind::Stat, F), // warm-expired: G(R) G(A) G(B) G(C) G(F)
    ];
    let c = run("vers=3", &ops);
    assert_eq!(counts(&c), "GETATTR=5 LOOKUP=4 ACCESS=4");
}

#[test]
fn d_i_cold_include_v3_is_11_and_warm_is_1() {
    let c = run("vers=3", &include(1.0));
    // 8 (walk) + G(F) CTO + A(F) + R(F)
    assert_eq!(c.total(), 11, "{c}");
    let mut ops = include(1.0);
    ops.extend(include(1.5));
    let c2 = run("vers=3", &ops);
    // warm: only the CTO GETATTR
    assert_eq!(c2.total() - c.total(), 1, "{c2}");
}

#[test]
fn r30_nocto_removes_the_open_getattr() {
    let mut ops = include(1.0);
    ops.extend(include(1.5));
    let c = run("vers=3,nocto", &ops);
    assert_eq!(c.of(RpcOp::Getattr), 0, "{c}");
}

#[test]
fn r31_v4_open_close_and_delegation() {
    let mut ops = include(1.0);
    ops.extend(include(1.5));
    let c = run("vers=4.1,noatime", &ops);
    // cold: walk 8, OPEN_NOATTR (dentry cached by the lstat), READ, CLOSE;
    // warm: OPEN_NOATTR + CLOSE
    assert_eq!(c.of(RpcOp::OpenNoattr), 2, "{c}");
    assert_eq!(c.of(RpcOp::Close), 2, "{c}");
    assert_eq!(c.of(RpcOp::Getattr), 0, "{c}");
    let d = run_p("vers=4.1,noatime", &ops, true);
    // with a read delegation the second include is free (R39, R42)
    assert_eq!(d.total(), 11, "{d}");
}

#[test]
fn r12_v4_read_invalidates_atime_unless_noatime() {
    let mut ops = include(1.0);
    ops.push(op(1.5, OpKind::Stat, F));
    let rel = run_p("vers=4.1", &ops, true);
    let noat = run_p("vers=4.1,noatime", &ops, true);
    assert_eq!(rel.of(RpcOp::Getattr), 1, "{rel}");
    assert_eq!(noat.of(RpcOp::Getattr), 0, "{noat}");
    // v3: the READ reply refreshes the attributes
    let v3 = run("vers=3,nocto", &ops);
    assert_eq!(v3.of(RpcOp::Getattr), 0, "{v3}");
}

#[test]
fn r6_timeout_doubles_when_unchanged() {
    // File attributes at t=1 (LOOKUP), timeout 3 s. Stats at 4.5 (expired ->
    // GETATTR, timeout 6), 9 (within 6 s: free), 11 (expired -> 12 s), 20.
    let ops = [
        op(1.0, OpKind::Stat, "/m/x"),
        op(4.5, OpKind::Stat, "/m/x"),
        op(9.0, OpKind::Stat, "/m/x"),
        op(11.0, OpKind::Stat, "/m/x"),
        op(20.0, OpKind::Stat, "/m/x"),
    ];
    let c = run("vers=3,acdirmin=1000,acdirmax=1000", &ops);
    assert_eq!(c.of(RpcOp::Getattr), 2, "{c}");
    // actimeo=3: no growth -> 4.5, 9 (4.5+3 < 9), 11? 9+3 > 11 no, 20 yes
    let c = run(
        "vers=3,acregmin=3,acregmax=3,acdirmin=1000,acdirmax=1000",
        &ops,
    );
    assert_eq!(c.of(RpcOp::Getattr), 3, "{c}");
}

#[test]
fn r2_noac_two_getattrs_per_directory() {
    let ops = [op(1.0, OpKind::Stat, F), op(1.1, OpKind::Stat, F)];
    let c = run("vers=3,noac", &ops);
    // second stat: 2 G per directory level (4 levels incl. root) + 1 for F
    let first = run("vers=3,noac", &ops[..1]);
    assert_eq!(c.total() - first.total(), 9, "{c} vs {first}");
}

#[test]
fn r19_negative_dentries_and_lookupcache_pos() {
    let ops = [
        enoent(op(1.0, OpKind::Access, "/m/a/new.txt")),
        enoent(op(1.1, OpKind::Access, "/m/a/new.txt")),
        enoent(op(1.2, OpKind::Stat, "/m/a/new.txt")),
    ];
    let all = run("vers=3", &ops);
    let pos = run("vers=3,lookupcache=pos", &ops);
    assert_eq!(all.of(RpcOp::Lookup), 2, "{all}"); // a, new.txt once
    assert_eq!(pos.of(RpcOp::Lookup), 4, "{pos}"); // new.txt each time
}

#[test]
fn lookupcache_none_relooks_every_component() {
    let ops = [op(1.0, OpKind::Stat, F), op(1.1, OpKind::Stat, F)];
    let c = run("vers=3,lookupcache=none", &ops);
    assert_eq!(c.of(RpcOp::Lookup), 8, "{c}");
}

#[test]
fn r7_r16_server_change_forces_lookups_after_dir_timeout() {
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(0);
    let opts = MountOptions::parse("vers=3").unwrap();
    let files: Vec<String> = (0..5).map(|i| format!("/m/d/f{i}")).collect();
    let mut ops = Vec::new();
    for f in &files {
        ops.push(op(1.0, OpKind::Open, f));
        ops.push(op(1.0, OpKind::Close, f));
    }
    for f in &files {
        ops.push(op(10.0, OpKind::Open, f));
        ops.push(op(10.0, OpKind::Close, f));
    }
    for f in &files {
        ops.push(op(40.0, OpKind::Open, f));
        ops.push(op(40.0, OpKind::Close, f));
    }
    let ch = ServerChange {
        t_us: 5 * S,
        path: "/m/d/new".into(),
        entry: true,
    };
    let r = replay(&ops, &opts, &p, &[ch]);
    // t=10: directory timer (30 s) still valid -> change invisible: 5 CTO G.
    // t=40: G(d) shows the change: ACCESS(d) again, 5 LOOKUPs replace CTO G.
    let at10 = r.counts_between(9 * S, 11 * S, None);
    let at40 = r.counts_between(39 * S, 41 * S, None);
    assert_eq!(at10.to_string(), "GETATTR=5", "{at10}");
    assert_eq!(at40.of(RpcOp::Lookup), 5, "{at40}");
    assert_eq!(at40.of(RpcOp::Access), 1, "{at40}");
}

#[test]
fn hypothetical_noaccesscheck_has_no_access_rpcs_for_non_root() {
    let mut ops = include(1.0);
    ops.extend(include(10.0));
    let c = run("vers=3,noatime,noaccesscheck", &ops);
    assert_eq!(c.of(RpcOp::Access), 0, "{c}");
    let mut root_ops = ops.clone();
    for o in &mut root_ops {
        o.uid = 0;
    }
    let r = run("vers=3,noatime,noaccesscheck", &root_ops);
    assert!(r.of(RpcOp::Access) > 0, "uid 0 still asks: {r}");
}

#[test]
fn v3_create_write_rename_remove() {
    let tmp = "/m/d/.tmp";
    let new = "/m/d/.new";
    let mut ops = vec![
        op(0.5, OpKind::Stat, "/m/d/x"),
        with_flags(
            op(1.0, OpKind::Open, tmp),
            Flags::O_WRONLY | Flags::O_CREAT | Flags::O_TRUNC,
        ),
        Op {
            bytes: 4,
            ..op(1.001, OpKind::Write, tmp)
        },
        op(1.002, OpKind::Close, tmp),
        enoent(op(1.1, OpKind::Lstat, new)),
        Op {
            path2: Some(new.into()),
            ..op(1.2, OpKind::Rename, tmp)
        },
        op(1.3, OpKind::Lstat, new),
        op(1.4, OpKind::Unlink, new),
    ];
    ops[0].errno = None;
    let c = run("vers=3", &ops);
    assert_eq!(c.of(RpcOp::Create), 1, "{c}");
    assert_eq!(c.of(RpcOp::Write), 1, "{c}");
    assert_eq!(c.of(RpcOp::Rename), 1, "{c}");
    assert_eq!(c.of(RpcOp::Remove), 1, "{c}");
    // only the stat of the renamed file (marked for revalidation); the
    // WRITE reply refreshed the attributes before close (R32, lab)
    assert_eq!(c.of(RpcOp::Getattr), 1, "{c}");
}

#[test]
fn ops_outside_the_mount_cost_nothing() {
    let c = run(
        "vers=3",
        &[
            op(1.0, OpKind::Stat, "/mnt/other"),
            op(1.0, OpKind::Stat, "/mx"),
        ],
    );
    assert_eq!(c.total(), 0);
}

#[test]
fn seed000_lookupcache_pos_does_not_keep_positive_dentries() {
    // Seed 000 claims lookupcache=pos keeps positive dentries across a
    // parent change. R19/R20: `pos` only stops trusting *negative* dentries;
    // positive ones are revalidated against the parent the same way.
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(0);
    let files: Vec<String> = (0..10).map(|i| format!("/m/d/f{i}.php")).collect();
    let mut ops = Vec::new();
    for (k, t) in [1.0, 40.0].into_iter().enumerate() {
        for f in &files {
            ops.push(op(t + k as f64 * 0.001, OpKind::Stat, f));
        }
    }
    let ch = [ServerChange {
        t_us: 5 * S,
        path: "/m/d/new.css".into(),
        entry: true,
    }];
    let count = |o: &str| {
        replay(&ops, &MountOptions::parse(o).unwrap(), &p, &ch).counts_between(39 * S, 41 * S, None)
    };
    let all = count("vers=4.1,lookupcache=all");
    let pos = count("vers=4.1,lookupcache=pos");
    assert_eq!(all, pos);
    assert_eq!(all.of(RpcOp::Lookup), 10, "{all}");
}

#[test]
fn r27_login_time_is_a_kernel_parameter() {
    // Two workers of the same uid; the second starts later and walks the
    // same directories. 6.1: the first worker's access entries serve it.
    // 6.2+: entries older than the caller's login time are ignored.
    let mut ops = vec![op(1.0, OpKind::Stat, F)];
    let mut second = op(2.0, OpKind::Stat, F);
    second.pid = 200;
    ops.push(second);
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(0);
    let o = MountOptions::parse("vers=3").unwrap();
    let k61 = replay(&ops, &o, &p, &[]).totals;
    p.kernel = (6, 2);
    let k62 = replay(&ops, &o, &p, &[]).totals;
    assert_eq!(k61.of(RpcOp::Access), 4, "{k61}");
    assert_eq!(k62.of(RpcOp::Access), 8, "{k62}");
}

#[test]
fn odd_input_never_panics() {
    let mut ops = Vec::new();
    for (i, p) in [
        "",
        "/",
        "relative/x",
        "/m",
        "/m/",
        "/m//a/./b/../c",
        "/m/..",
        "/mm/x",
        "/m/a\u{fffd}",
    ]
    .iter()
    .enumerate()
    {
        for kind in [
            OpKind::Stat,
            OpKind::Open,
            OpKind::Close,
            OpKind::Read,
            OpKind::Getdents,
            OpKind::Unlink,
            OpKind::Rmdir,
            OpKind::Mkdir,
            OpKind::Rename,
            OpKind::Chdir,
            OpKind::Readlink,
            OpKind::Write,
            OpKind::Fstat,
        ] {
            let mut o = op(i as f64, kind, p);
            o.path2 = Some("/m/z".into());
            ops.push(o.clone());
            o.errno = Some("EACCES".into());
            ops.push(o);
        }
    }
    for opts in ["vers=3", "vers=4.1", "vers=4.0,noac,lookupcache=none"] {
        let mut p = ClientParams::new(ROOT);
        p.delegations = true;
        let _ = replay(&ops, &MountOptions::parse(opts).unwrap(), &p, &[]);
        let mut p = ClientParams::new("/");
        p.delegations = true;
        let _ = replay(&ops, &MountOptions::parse(opts).unwrap(), &p, &[]);
    }
}

#[test]
fn r31_v40_opens_by_name_and_r33_shared_open_state() {
    let mut ops = include(1.0);
    ops.extend(include(1.5));
    let c = run("vers=4.0,noatime", &ops);
    assert_eq!((c.of(RpcOp::Open), c.of(RpcOp::OpenNoattr)), (2, 0), "{c}");
    // two workers (same uid) holding the file open at the same time: two
    // OPENs, one CLOSE when the last one closes (R33, derived).
    let mut a = op(1.0, OpKind::Open, F);
    a.pid = 1;
    let mut b = op(1.1, OpKind::Open, F);
    b.pid = 2;
    let mut ca = op(1.2, OpKind::Close, F);
    ca.pid = 1;
    let mut cb = op(1.3, OpKind::Close, F);
    cb.pid = 2;
    let c = run("vers=4.1,noatime", &[a, b, ca, cb]);
    assert_eq!(c.of(RpcOp::Open) + c.of(RpcOp::OpenNoattr), 2, "{c}");
    assert_eq!(c.of(RpcOp::Close), 1, "{c}");
}

#[test]
fn r14_a_dot_component_is_one_more_search_permission_check() {
    // noac: every check of a directory revalidates it (one GETATTR)
    let plain = [op(1.0, OpKind::Stat, F), op(1.1, OpKind::Stat, F)];
    let dotted = [
        op(1.0, OpKind::Stat, F),
        op(1.1, OpKind::Stat, "/m/a/./b/c/f.php"),
    ];
    let (p, d) = (run("vers=3,noac", &plain), run("vers=3,noac", &dotted));
    assert_eq!(d.of(RpcOp::Getattr), p.of(RpcOp::Getattr) + 1, "{d} vs {p}");
    // a final `.` checks the directory it names
    let last = [
        op(1.0, OpKind::Stat, "/m/a/b"),
        op(1.1, OpKind::Stat, "/m/a/b/."),
    ];
    let plain_dir = [
        op(1.0, OpKind::Stat, "/m/a/b"),
        op(1.1, OpKind::Stat, "/m/a/b"),
    ];
    let (l, pd) = (run("vers=3,noac", &last), run("vers=3,noac", &plain_dir));
    // (b was never searched before: the check is an ACCESS)
    assert_eq!(l.of(RpcOp::Access), pd.of(RpcOp::Access) + 1, "{l} vs {pd}");
    assert_eq!(l.total(), pd.total() + 1, "{l} vs {pd}");
    // with valid caches the extra check costs nothing
    assert_eq!(run("vers=3", &dotted), run("vers=3", &plain));
}

#[test]
fn r14_a_relative_path_is_walked_from_its_directory() {
    // `c/f.php` from the cwd /m/a/b: neither the root nor a is searched,
    // nor a or b looked up (4 of the 9 GETATTRs of an absolute warm stat
    // under noac)
    let rel = Op {
        walk_base: "/m/a/b".len() as u32,
        ..op(1.1, OpKind::Stat, "/m/a/b/c/f.php")
    };
    let warm = [op(1.0, OpKind::Stat, F)];
    let first = run("vers=3,noac", &warm);
    let abs = run(
        "vers=3,noac",
        &[op(1.0, OpKind::Stat, F), op(1.1, OpKind::Stat, F)],
    );
    let relc = run("vers=3,noac", &[op(1.0, OpKind::Stat, F), rel.clone()]);
    assert_eq!(abs.total() - first.total(), 9, "{abs}");
    assert_eq!(relc.total() - first.total(), 5, "{relc}");
    // a `..` that climbs above the directory: walked from the root
    let up = Op {
        walk_base: "/m/a/b/c".len() as u32,
        ..op(1.1, OpKind::Stat, "/m/a/b/c/../c/f.php")
    };
    let upc = run("vers=3,noac", &[op(1.0, OpKind::Stat, F), up]);
    assert!(upc.total() - first.total() >= 9, "{upc}");
}

#[test]
fn with_a_complete_namespace_an_enoent_walk_stops_at_the_missing_directory() {
    let ops = [enoent(op(1.0, OpKind::Access, "/m/a/x/y.php"))];
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(0);
    p.namespace.insert("/m/a".into());
    let opts = MountOptions::parse("vers=3").unwrap();
    let guess = replay(&ops, &opts, &p, &[]).totals;
    p.namespace_complete = true;
    let known = replay(&ops, &opts, &p, &[]).totals;
    // A(R) L(a) A(a) L(x): x is missing, y never looked up
    assert_eq!(counts(&known), "LOOKUP=2 ACCESS=2");
    // the last component taken as the missing one: L(x) A(x) L(y)
    assert_eq!(counts(&guess), "LOOKUP=3 ACCESS=3");
}

#[test]
fn r38_a_listing_with_attributes_refreshes_the_entries_it_returns() {
    // f.php's attributes expire (acregmin 3 s); a listing of its directory
    // at 5 s brings them back, so its stat at 5.5 s sends nothing; without
    // the listing it sends a GETATTR. v4 lists in the same "plus" mode.
    for vers in ["vers=3", "vers=4.1"] {
        let getattrs_of_f = |list: bool| {
            let mut p = ClientParams::new(ROOT);
            p.root_attr_time_us = Some(0);
            let mut c = Client::new(MountOptions::parse(vers).unwrap(), p);
            let mut n = 0;
            let mut ops = vec![op(1.0, OpKind::Stat, F)];
            if list {
                ops.push(op(5.0, OpKind::Getdents, "/m/a/b/c"));
            }
            ops.push(op(5.5, OpKind::Stat, F));
            for o in &ops {
                c.apply(o);
                n += c
                    .take_rpcs()
                    .iter()
                    .filter(|r| r.op == RpcOp::Getattr && r.path == F && o.t_us == 5_500_000)
                    .count();
            }
            n
        };
        assert_eq!(getattrs_of_f(false), 1, "{vers}");
        assert_eq!(getattrs_of_f(true), 0, "{vers}");
    }
    // noac: no readdirplus, nothing primed
    let ops = [
        op(1.0, OpKind::Stat, F),
        op(5.0, OpKind::Getdents, "/m/a/b/c"),
    ];
    assert_eq!(run("vers=3,noac", &ops).of(RpcOp::Readdirplus), 0);
}

#[test]
fn r14_a_walk_through_a_symbolic_link_reads_it_and_goes_on_from_its_target() {
    let run_links = |ops: &[Op]| {
        let mut p = ClientParams::new(ROOT);
        p.root_attr_time_us = Some(0);
        p.symlinks.insert("/m/cur".into(), "a".into());
        p.symlinks.insert("/m/abs".into(), "/m/a".into());
        replay(ops, &MountOptions::parse("vers=3").unwrap(), &p, &[]).totals
    };
    // A(R) L(cur) READLINK(cur), then from /m: L(a) A(a) L(f.php)
    let cold = run_links(&[op(1.0, OpKind::Stat, "/m/cur/f.php")]);
    assert_eq!(counts(&cold), "LOOKUP=3 ACCESS=2 READLINK=1");
    // warm (within the caches): nothing; the link's page is cached
    let warm = run_links(&[
        op(1.0, OpKind::Stat, "/m/cur/f.php"),
        op(1.5, OpKind::Stat, "/m/cur/f.php"),
    ]);
    assert_eq!(warm, cold);
    // an absolute target, then the same file by its own path: cached
    let abs = run_links(&[
        op(1.0, OpKind::Stat, "/m/abs/f.php"),
        op(1.5, OpKind::Stat, "/m/a/f.php"),
    ]);
    assert_eq!(counts(&abs), "LOOKUP=3 ACCESS=2 READLINK=1");
    // lstat of the link itself does not follow it
    let l = run_links(&[op(1.0, OpKind::Lstat, "/m/cur")]);
    assert_eq!(counts(&l), "LOOKUP=1 ACCESS=1");
}

/// A directory first named as a call's last component (`access("d",
/// F_OK)`, made as a file's inode) keeps the directory's timeouts once a
/// walk goes through it: 3.5 s later (past acregmin, within acdirmin) the
/// walk into it is served from the caches, as the kernel's is (statstorm
/// lab on WordPress's wp-includes/blocks/*: 29 GETATTRs too many before).
#[test]
fn r3_a_directory_named_last_first_keeps_the_directory_timeouts() {
    let ops = [
        op(1.0, OpKind::Access, "/m/a/d"),
        op(1.001, OpKind::Access, "/m/a/d/block.json"),
        enoent(op(1.002, OpKind::Lstat, "/m/a/d/style.css")),
        op(4.5, OpKind::Access, "/m/a/d/block.json"),
        enoent(op(4.501, OpKind::Lstat, "/m/a/d/style.css")),
    ];
    // the walk: A(R) L(a) A(a) L(d) A(d) L(block.json) L(style.css); at
    // 4.5 s nothing (d's attributes are good for acdirmin = 30 s)
    assert_eq!(counts(&run("vers=3", &ops)), "LOOKUP=4 ACCESS=3");
    // the same directory known from the start (the lab's tree)
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(0);
    p.dirs.insert("/m/a/d".into());
    let c = replay(&ops, &MountOptions::parse("vers=3").unwrap(), &p, &[]).totals;
    assert_eq!(counts(&c), "LOOKUP=4 ACCESS=3");
}
