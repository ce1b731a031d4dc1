//! Round trip on every committed capture: lowering the lifted workload
//! under the config the capture was recorded with gives the recorded
//! per-request counts of stat-family, open, access and readlink calls.
//! Captures: tests/fixtures/php (regenerate: scripts/php-harness --apps).
//!
//! The synthetic workloads (tree, filecheck; php-fpm and php-cli) must match
//! exactly. WordPress and MediaWiki must match within 1% per request
//! (`ROUND_TRIP_APP_TOLERANCE`); the remaining differences are printed.
//! They come from calls the lift cannot attribute to a PHP operation with
//! certainty: lone lstat()s that may be a realpath-cache miss under a
//! cached parent or PHP's lstat() (the lift decides from repetition,
//! R54/R72), and stat()s of scripts that may be an OPcache validation or
//! the application's own filemtime()/is_file() (the lift decides from how
//! often each script is stat()ed, R64).

mod common;
use common::*;

#[test]
fn every_capture_round_trips() {
    let caps = captures();
    let loaded: Vec<Loaded> = caps.iter().map(load).collect();
    let r = round_trip(&caps, &loaded);
    println!("{} requests checked", r.requests);
    println!(
        "{} application requests differ within {}%:",
        r.differences.len(),
        ROUND_TRIP_APP_TOLERANCE * 100.0
    );
    for d in &r.differences {
        println!("  {d}");
    }
    assert!(
        r.failures.is_empty(),
        "{} mismatches:\n{}",
        r.failures.len(),
        r.failures.join("\n")
    );
}
