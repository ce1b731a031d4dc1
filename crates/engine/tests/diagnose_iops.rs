//! The NFS server's IOPS budget (`--iops`, `--burst`) as a finding: on
//! seed 000's case (the PHP harness's php-fpm capture of a theme of 180
//! includes, OPcache revalidating every 60 s, NFSv4.1), a budget the
//! revalidation bursts spend makes the stalled requests wait for tokens,
//! and diagnose says how much of their time that is; a budget they never
//! reach, or none, is no finding.

use statstorm_engine::diagnose::findings::{Kind, STALL_SHARE};
use statstorm_engine::diagnose::{diagnose, Diagnosis, Options};
use statstorm_engine::predict::{NfsOptions, PredictOptions, SimOptions};
use std::path::PathBuf;

fn run(iops: Option<f64>) -> Diagnosis {
    let opts = Options {
        predict: PredictOptions {
            traces: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/php/fpm-theme-rf60.strace.gz")],
            nfs: NfsOptions {
                from_mount: Some("vers=4.1".into()),
                nfs_root: vec!["/tmp/statstorm-lab/site".into()],
                ..NfsOptions::default()
            },
            sim: SimOptions {
                slots: Some(16),
                workers: Some(50),
                server_latency: Some(2.0),
                iops,
                burst: iops.map(|_| 50.0),
                ..SimOptions::default()
            },
            ..PredictOptions::default()
        },
        ..Options::default()
    };
    diagnose(&opts, &mut |_| {}).unwrap()
}

fn throttling(d: &Diagnosis) -> Option<(f64, f64, f64)> {
    d.findings.iter().find_map(|f| match f.kind {
        Kind::ServerThrottling {
            stall_share,
            max_server_wait_ms,
            iops,
        } => Some((stall_share, max_server_wait_ms, iops)),
        _ => None,
    })
}

#[test]
fn a_spent_iops_budget_is_a_finding() {
    // 200 RPCs a second, 50 at once: a revalidation's 181 GETATTRs spend
    // it; the cold first request (600 RPCs) waits most
    let d = run(Some(200.0));
    let (share, wait, iops) = throttling(&d).expect("server throttling");
    assert_eq!(iops, 200.0);
    // one token every 5 ms once the burst is spent; a worker's next RPC
    // comes 2.5 ms after its last (2 ms at the server, a 0.5 ms round
    // trip) and waits out the rest: 2.5 ms. 44% of the stalled time
    assert!((2.0..=3.0).contains(&wait), "{wait}");
    assert!((0.3..0.6).contains(&share), "{share}");
    let base = d.baseline.modelled.latency.as_ref().unwrap();
    assert_eq!(base.stall_iops_share, share);
    // a budget ten times as large is never spent; none is no budget
    for free in [Some(2000.0), None] {
        let d = run(free);
        assert!(throttling(&d).is_none(), "{free:?}: {:?}", d.findings);
        let s = d
            .baseline
            .modelled
            .latency
            .as_ref()
            .unwrap()
            .stall_iops_share;
        assert!(s < STALL_SHARE, "{free:?}: {s}");
    }
}
