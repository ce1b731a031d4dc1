//! The latency simulation sends, request by request, the RPCs the report's
//! RPC columns count: both come from one NFS replay per side, background
//! activity included (before, a second replay of the requests alone gave
//! the simulation RPCs that calls outside requests had already made
//! unnecessary: 141 against the columns' 134 on fpm-wordpress-rf2).

use statstorm_engine::predict::{predict, NfsOptions, PredictOptions};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

#[test]
fn the_simulation_sends_the_rpcs_the_columns_count() {
    for (file, cache) in [
        ("php/fpm-wordpress-rf2.strace.zst", "cold"),
        ("strace/fpm-opcache-bursts.strace.gz", "cold"),
        ("php/fpm-race-obd.strace.gz", "warm"),
        ("php/cli-tree-oc.strace.gz", "cold"),
    ] {
        let o = PredictOptions {
            traces: vec![fixture(file)],
            php: vec!["opcache.enable=0".into()],
            nfs: NfsOptions {
                from_mount: Some("vers=3".into()),
                nfs_root: vec!["/".into()],
                nfs_cache: if cache == "warm" {
                    statstorm_engine::predict::NfsCache::Warm
                } else {
                    statstorm_engine::predict::NfsCache::Cold
                },
                ..NfsOptions::default()
            },
            ..PredictOptions::default()
        };
        let r = predict(&o, &mut |_| {}).unwrap_or_else(|e| panic!("{file}: {e}"));
        let lat = r.latency.as_ref().expect("latency");
        let sum = |after: bool| -> u64 {
            r.requests
                .iter()
                .map(|q| {
                    let q = q.expect("rows read back");
                    let s = if after { &q.after } else { &q.before };
                    s.rpc.as_ref().map_or(0, |m| m.total())
                })
                .sum()
        };
        let (b, a) = (sum(false), sum(true));
        assert!(b > 0 && a > 0, "{file}: no RPC in the columns");
        assert_eq!(lat.before.as_ref().unwrap().rpcs, b, "{file}: before");
        assert_eq!(lat.after.as_ref().unwrap().rpcs, a, "{file}: after");
    }
}
