//! Round trip on every committed capture: lowering the lifted workload
//! under the config the capture was recorded with gives the recorded
//! per-request counts of stat-family, open, access and readlink calls.
//! Captures: tests/fixtures/php (regenerate: scripts/php-harness).

mod common;
use common::*;
use statstorm_php::lower::count_by_syscall;

#[test]
fn every_capture_round_trips_exactly() {
    let mut failures = Vec::new();
    let mut n_req = 0;
    for c in captures() {
        let l = load(&c);
        let lowered = statstorm_php::lower(&l.workload, &c.config);
        assert_eq!(lowered.len(), l.real.len());
        for (i, (ops, real)) in lowered.iter().zip(&l.real).enumerate() {
            n_req += 1;
            let pred = checked(&count_by_syscall(ops));
            if &pred != real {
                failures.push(format!(
                    "{} request {i} (pid {}): real [{}] model [{}]",
                    c.name,
                    l.workload.requests[i].pid,
                    fmt(real),
                    fmt(&pred)
                ));
            }
        }
    }
    println!("{n_req} requests checked");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
