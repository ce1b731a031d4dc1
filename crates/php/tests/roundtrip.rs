//! Round trip on every committed capture: lowering the lifted workload
//! under the config the capture was recorded with gives the recorded
//! per-request counts of stat-family, open, access and readlink calls.
//! Captures: tests/fixtures/php (regenerate: scripts/php-harness --apps).
//!
//! The synthetic workloads (tree, filecheck; php-fpm and php-cli) must match
//! exactly. WordPress and MediaWiki must match within 1% per request; the
//! remaining differences are printed. They come from calls the lift cannot
//! attribute to a PHP operation with certainty: lone lstat()s that may be a
//! realpath-cache miss under a cached parent or PHP's lstat() (the lift
//! decides from repetition, R54/R72), and stat()s of scripts that may be an
//! OPcache validation or the application's own filemtime()/is_file() (the
//! lift decides from how often each script is stat()ed, R64).

mod common;
use common::*;
use statstorm_php::lower::count_by_syscall;

/// Per-request tolerance for the applications, as a share of the checked
/// calls.
const APP_TOLERANCE: f64 = 0.01;

fn total(c: &Counts) -> u64 {
    c.values().sum()
}

#[test]
fn every_capture_round_trips() {
    let mut failures = Vec::new();
    let mut differences = Vec::new();
    let mut n_req = 0;
    for c in captures() {
        let app = matches!(c.workload.as_str(), "wordpress" | "mediawiki");
        let l = load(&c);
        let lowered = statstorm_php::lower(&l.workload, &c.config);
        assert_eq!(lowered.len(), l.real.len());
        for (i, (ops, real)) in lowered.iter().zip(&l.real).enumerate() {
            n_req += 1;
            let pred = checked(&count_by_syscall(ops));
            if &pred == real {
                continue;
            }
            let diff: u64 = pred
                .iter()
                .map(|(k, v)| v.abs_diff(real.get(k).copied().unwrap_or(0)))
                .sum();
            let share = diff as f64 / total(real).max(1) as f64;
            let line = format!(
                "{} request {i} (pid {}): real [{}] model [{}] ({:.2}%)",
                c.name,
                l.workload.requests[i].pid,
                fmt(real),
                fmt(&pred),
                share * 100.0
            );
            if app && share <= APP_TOLERANCE {
                differences.push(line);
            } else {
                failures.push(line);
            }
        }
    }
    println!("{n_req} requests checked");
    println!(
        "{} application requests differ within {}%:",
        differences.len(),
        APP_TOLERANCE * 100.0
    );
    for d in &differences {
        println!("  {d}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
