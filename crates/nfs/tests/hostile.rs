//! Inputs that once hung the NFS model or took memory quadratic in the
//! path depth (issue 24, cases 3 and 4).

use statstorm_nfs::{replay, ClientParams, MountOptions, RpcOp, ServerChange};
use statstorm_trace::op::{Op, OpKind};

fn op(t_s: f64, kind: OpKind, path: &str) -> Op {
    Op {
        uid: 33,
        ..Op::new((t_s * 1e6) as i64, 7, kind, path)
    }
}

fn delegating_client() -> (MountOptions, ClientParams) {
    let mut p = ClientParams::new("/m");
    p.delegations = true;
    (MountOptions::parse("vers=4.1").unwrap(), p)
}

/// A change (or an op) far after the trace: the renew daemon
/// (`nfs4_renew_state`, fs/nfs/nfs4renewd.c, every 2/3 of the 90 s lease)
/// returns the idle delegation on its second pass, at 120 s, and the replay
/// ends. It stepped 60 s at a time up to the change and, at a time that
/// saturated to i64::MAX, never ended.
#[test]
fn renew_daemon_over_a_huge_idle_span_ends() {
    let (opts, params) = delegating_client();
    let ops = [
        op(0.0, OpKind::Open, "/m/a.php"),
        op(0.001, OpKind::Close, "/m/a.php"),
    ];
    for t in ["1e13", "9e12", "1e9", "-1e13"] {
        let ch = ServerChange::parse(&format!("{t}:/m/b.php")).unwrap();
        let r = replay(&ops, &opts, &params, &[ch]);
        let returns: Vec<i64> = r
            .rpcs
            .iter()
            .filter(|x| x.op == RpcOp::Delegreturn)
            .map(|x| x.t_us)
            .collect();
        let want: &[i64] = if t.starts_with('-') {
            &[]
        } else {
            &[120_000_000]
        };
        assert_eq!(returns, want, "change at {t}");
    }
    // the same through an op at ~31,700 years
    let mut far = ops.to_vec();
    far.push(op(1e12, OpKind::Stat, "/m/a.php"));
    let r = replay(&far, &opts, &params, &[]);
    assert_eq!(r.totals.of(RpcOp::Delegreturn), 1);
}

/// Renewal passes go on while a delegation is referenced between them:
/// jumping over idle spans leaves those passes alone.
#[test]
fn renew_daemon_keeps_a_referenced_delegation() {
    let (opts, params) = delegating_client();
    let mut ops = vec![op(0.0, OpKind::Open, "/m/a.php")];
    // referenced every 50 s (stat consults the delegation) until 500 s
    for k in 1..=10 {
        ops.push(op(k as f64 * 50.0, OpKind::Stat, "/m/a.php"));
    }
    ops.push(op(10_000.0, OpKind::Stat, "/m/b.php"));
    let r = replay(&ops, &opts, &params, &[]);
    let returns: Vec<i64> = r
        .rpcs
        .iter()
        .filter(|x| x.op == RpcOp::Delegreturn)
        .map(|x| x.t_us)
        .collect();
    // the passes at 60, 120, ... 540 s each find it referenced since the
    // previous one (the last stat is at 500 s); the pass at 600 s returns it
    assert_eq!(returns, [600_000_000]);
}

#[test]
fn server_change_at_a_non_finite_time_is_refused() {
    for s in [
        "nan:/m/x",
        "NaN:/m/x",
        "inf:/m/x",
        "-inf:/m/x",
        "infinity:/m/x",
    ] {
        let e = ServerChange::parse(s).unwrap_err();
        assert!(e.contains("finite"), "{s}: {e}");
    }
    assert!(ServerChange::parse("1.5:/m/x").is_ok());
}

/// With paths interned, a replay's JSON still spells each RPC's path, and
/// deep paths come back whole.
#[test]
fn replay_json_spells_paths() {
    let deep = format!("/m{}/f.php", "/d".repeat(300));
    let ops = [op(0.0, OpKind::Stat, &deep)];
    let r = replay(
        &ops,
        &MountOptions::parse("vers=3").unwrap(),
        &ClientParams::new("/m"),
        &[],
    );
    let v = serde_json::to_value(&r).unwrap();
    let rpcs = v["rpcs"].as_array().unwrap();
    assert_eq!(rpcs.len(), r.rpcs.len());
    assert_eq!(rpcs[0]["path"], "/m");
    let last = rpcs.last().unwrap();
    assert_eq!(
        (last["op"].as_str(), last["path"].as_str()),
        (Some("LOOKUP"), Some(deep.as_str()))
    );
    assert_eq!(r.path(r.rpcs.last().unwrap()), deep);
}
