//! Live ground truth: runs the real harness (`scripts/php-harness`: a
//! php-fpm pool of its own on loopback driven by cgi-fcgi, under strace) at
//! test time for the synthetic include tree under four settings, into a
//! temporary directory, then checks on those fresh captures what
//! `roundtrip.rs` and `cross.rs` check on the committed ones, with the
//! same tolerances:
//!
//! - nooc (`opcache.enable=0`), rp0 (`realpath_cache_size=0`), obd
//!   (`open_basedir`), rf2 (OPcache on, `revalidate_freq=2`); requests at
//!   0, 0.2, 0.5, 1.3, 2.6, 2.8, 4.9 and 7.6 s, inside and outside the 1 s
//!   (request_time) and 2 s (revalidate_freq) windows;
//! - round trip exact for every request;
//! - every pair from a complete source (rp0, obd) within 2% per request;
//!   the pairs from nooc and rf2 (caches on) are printed.
//!
//! A second test does the same for php-cli with OPcache on: fresh
//! cli-tree-oc and cli-filecheck-oc beside their rp0 and nooc twins; round
//! trip exact, rp0 -> oc asserted, OPcache's calls lifted as OPcache's.
//!
//! It fails if php-fpm8.2, cgi-fcgi, strace, php, gzip or zstd is missing.
//! The pool listens on a port the test gets free from the kernel; the lab
//! and the captures live in a fresh temporary directory; the harness runs
//! in a process group of its own that is killed if the test fails or the
//! harness overruns its time limit.

mod common;
use common::*;
use std::time::Duration;

/// The captures made: name globs for `--only`.
const CAPTURES: &[&str] = &[
    "fpm-tree-nooc",
    "fpm-tree-rp0",
    "fpm-tree-obd",
    "fpm-tree-rf2",
];
/// The harness normally takes ~40 s for these (four pools of 8 requests
/// over 7.6 s each); beyond this it is killed and the test fails.
const HARNESS_LIMIT: Duration = Duration::from_secs(150);

#[test]
fn live_harness_round_trip_and_cross_config() {
    let (_run, caps, loaded) = live_captures(CAPTURES, false, HARNESS_LIMIT, Some(8));
    assert_round_trip(&caps, &loaded);

    let c = cross(&caps, &loaded, &[]);
    assert_cross(&c);
    // rp0 and obd are complete sources (OPcache and the realpath cache
    // off): 2 sources x 3 targets
    assert_eq!(c.pairs, 12);
    assert_eq!(c.asserted, 6, "complete sources: rp0 and obd");
}

/// php-cli captures: OPcache on for the CLI and its twins.
const CLI_CAPTURES: &[&str] = &[
    "cli-filecheck-nooc",
    "cli-filecheck-oc",
    "cli-filecheck-rp0",
    "cli-tree-nooc",
    "cli-tree-oc",
    "cli-tree-rp0",
];
/// One php-cli process per capture, well under a second each.
const CLI_HARNESS_LIMIT: Duration = Duration::from_secs(90);

#[test]
fn live_cli_opcache_round_trip_and_cross_config() {
    use statstorm_php::workload::PhpOpKind;
    let (_run, caps, loaded) = live_captures(CLI_CAPTURES, false, CLI_HARNESS_LIMIT, None);
    let names: Vec<&str> = caps.iter().map(|c| c.name.as_str()).collect();
    assert_round_trip(&caps, &loaded);
    let c = cross(&caps, &loaded, &[]);
    assert_cross(&c);
    for wl in ["tree", "filecheck"] {
        let pair = (format!("cli-{wl}-rp0"), format!("cli-{wl}-oc"));
        assert!(c.asserted_pairs.contains(&pair), "{pair:?} not asserted");
        let i = names.iter().position(|n| *n == pair.1).unwrap();
        let w = &loaded[i].workload;
        let starts = w.requests[0]
            .ops
            .iter()
            .filter(|o| matches!(o.kind, PhpOpKind::OpcacheStartup { .. }))
            .count();
        assert_eq!(starts, 1, "{}: OPcache's start", pair.1);
        assert!(w
            .evidence
            .inferred
            .contains(&("opcache.enable_cli".into(), "1".into())));
    }
}
