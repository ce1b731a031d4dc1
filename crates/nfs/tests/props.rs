//! Property tests over random op streams (random files in a small tree,
//! random times, stats/opens/reads/access/readdir, and changes by other
//! clients):
//! - RPC totals never go up when the attribute timeout grows (`actimeo=N`,
//!   which fixes min = max so the R6 doubling does not interfere), for
//!   streams without changes by other clients (see the exceptions below);
//! - they never go up when `nocto` is added;
//! - they never go down under `noac`.
//!
//! Exception the real client shows (and the model with it): with separate
//! min/max a *larger* acregmin can cost more. The doubling of R6 happens
//! only when a refresh comes after `attrtimeo_timestamp + attrtimeo`; a
//! forced refresh (close-to-open GETATTR) at 3.1 s doubles a 3 s timeout to
//! 6 s but leaves a 4 s timeout at 4 s, so the next stat at 7.5 s is free
//! with acregmin=3 and a GETATTR with acregmin=4.
//! `growth_exception_is_real` pins that case.
//!
//! Second exception: when another client changes a directory, the timeout
//! decides *when* this client sees it, and seeing it costs the follow-up
//! RPCs (ACCESS after the zapped access cache, one LOOKUP per child used,
//! R7/R20). A shorter timeout can revalidate just before the change and not
//! again before the stream ends, while a longer one revalidates after it:
//! `longer_timeout_can_see_a_change_the_shorter_missed` pins that case.

use proptest::prelude::*;
use statstorm_nfs::{replay, ClientParams, MountOptions, RpcOp, ServerChange};
use statstorm_trace::op::{Op, OpKind};
use statstorm_trace::Flags;

const ROOT: &str = "/m";

fn path(i: u8) -> String {
    let d = i % 3;
    let sub = (i / 3) % 2;
    format!("{ROOT}/d{d}/s{sub}/f{}.php", i % 7)
}

#[derive(Clone, Debug)]
enum Act {
    Stat(u8),
    Include(u8),
    AccessR(u8),
    Missing(u8),
    Change(u8),
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => any::<u8>().prop_map(Act::Stat),
        4 => any::<u8>().prop_map(Act::Include),
        2 => any::<u8>().prop_map(Act::AccessR),
        1 => any::<u8>().prop_map(Act::Missing),
        1 => any::<u8>().prop_map(Act::Change),
    ]
}

fn op(t_us: i64, kind: OpKind, p: &str) -> Op {
    Op {
        t_us,
        dur_us: None,
        pid: 1 + (t_us % 3) as u32,
        uid: 33,
        kind,
        path: p.into(),
        path2: None,
        flags: 0,
        errno: None,
        bytes: 0,
        walk_base: 0,
    }
}

/// (ops, server changes) from actions separated by gaps in ms.
fn build(acts: &[(Act, u32)]) -> (Vec<Op>, Vec<ServerChange>) {
    let mut ops = Vec::new();
    let mut ch = Vec::new();
    let mut t: i64 = 1_000_000;
    for (a, gap_ms) in acts {
        t += *gap_ms as i64 * 1000;
        match a {
            Act::Stat(i) => ops.push(op(t, OpKind::Stat, &path(*i))),
            Act::Include(i) => {
                let p = path(*i);
                ops.push(op(t, OpKind::Open, &p));
                ops.push(Op {
                    bytes: 100,
                    ..op(t + 10, OpKind::Read, &p)
                });
                ops.push(op(t + 20, OpKind::Close, &p));
            }
            Act::AccessR(i) => ops.push(Op {
                flags: Flags::R_OK,
                ..op(t, OpKind::Access, &path(*i))
            }),
            Act::Missing(i) => ops.push(Op {
                errno: Some("ENOENT".into()),
                ..op(t, OpKind::Stat, &format!("{}.missing", path(*i)))
            }),
            Act::Change(i) => ch.push(ServerChange {
                t_us: t,
                path: path(*i),
                entry: i % 2 == 0,
            }),
        }
    }
    (ops, ch)
}

fn total(opts: &str, deleg: bool, ops: &[Op], ch: &[ServerChange]) -> u64 {
    let mut p = ClientParams::new(ROOT);
    p.delegations = deleg;
    p.root_attr_time_us = Some(0);
    let o = MountOptions::parse(opts).unwrap();
    replay(ops, &o, &p, ch).totals.total()
}

fn stream() -> impl Strategy<Value = Vec<(Act, u32)>> {
    prop::collection::vec((act(), 0u32..8000), 1..80)
}

const VERS: [(&str, bool); 4] = [
    ("vers=3", false),
    ("vers=4.1", false),
    ("vers=4.1", true),
    ("vers=4.0", false),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn longer_actimeo_never_costs_more(s in stream(), a in 0u32..40, extra in 0u32..100, v in 0usize..4) {
        let (ops, _) = build(&s);
        let ch = [];
        let (vers, deleg) = VERS[v];
        let short = total(&format!("{vers},actimeo={a}"), deleg, &ops, &ch);
        let long = total(&format!("{vers},actimeo={}", a + extra), deleg, &ops, &ch);
        prop_assert!(long <= short, "actimeo {a}: {short}, actimeo {}: {long}", a + extra);
    }

    #[test]
    fn nocto_never_costs_more(s in stream(), v in 0usize..4, ac in prop::sample::select(vec!["", ",actimeo=10", ",noac"])) {
        let (ops, ch) = build(&s);
        let (vers, deleg) = VERS[v];
        let cto = total(&format!("{vers}{ac}"), deleg, &ops, &ch);
        let nocto = total(&format!("{vers}{ac},nocto"), deleg, &ops, &ch);
        prop_assert!(nocto <= cto, "cto {cto}, nocto {nocto}");
    }

    #[test]
    fn noac_never_costs_less(s in stream(), v in 0usize..4, extra in prop::sample::select(vec!["", ",nocto", ",lookupcache=pos", ",actimeo=5"])) {
        let (ops, ch) = build(&s);
        let (vers, deleg) = VERS[v];
        let base = total(&format!("{vers}{extra}"), deleg, &ops, &ch);
        let extra = if extra == ",actimeo=5" { "" } else { extra };
        let noac = total(&format!("{vers}{extra},noac"), deleg, &ops, &ch);
        prop_assert!(noac >= base, "default {base}, noac {noac}");
    }
}

#[test]
fn growth_exception_is_real() {
    // lookup at 0 s (timeout = acregmin), CTO GETATTR at 3.1 s, stat at 7.5 s
    let f = "/m/f.php";
    let mut ops = vec![op(0, OpKind::Stat, f)];
    ops.push(op(3_100_000, OpKind::Open, f));
    ops.push(op(3_100_010, OpKind::Close, f));
    ops.push(op(7_500_000, OpKind::Stat, f));
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(0);
    let g = |o: &str| {
        replay(&ops, &MountOptions::parse(o).unwrap(), &p, &[])
            .totals
            .of(RpcOp::Getattr)
    };
    let a3 = g("vers=3,acregmin=3,acdirmin=100,acdirmax=100");
    let a4 = g("vers=3,acregmin=4,acdirmin=100,acdirmax=100");
    assert_eq!(
        (a3, a4),
        (1, 2),
        "acregmin=3 -> {a3} GETATTR, acregmin=4 -> {a4}"
    );
}

#[test]
fn longer_timeout_can_see_a_change_the_shorter_missed() {
    // dir /m/d refreshed at 0; stats of /m/d/a at 34 s and 66 s; another
    // client creates /m/d/new at 40 s.
    let a = "/m/d/a";
    let ops = vec![
        op(0, OpKind::Stat, a),
        op(34_000_000, OpKind::Stat, a),
        op(66_000_000, OpKind::Stat, a),
    ];
    let ch = [ServerChange {
        t_us: 40_000_000,
        path: "/m/d/new".into(),
        entry: true,
    }];
    let short = total("vers=3,actimeo=33", false, &ops, &ch);
    let long = total("vers=3,actimeo=37", false, &ops, &ch);
    // 33 s: GETATTRs at 34 (root, d, a); at 66 everything is still valid
    // (34 + 33 > 66): the change stays unseen. 37 s: nothing at 34; at 66
    // GETATTR root, d (change seen: ACCESS d, LOOKUP a).
    assert!(long > short, "actimeo=33: {short}, actimeo=37: {long}");
}
