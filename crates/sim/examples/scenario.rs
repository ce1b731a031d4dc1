//! Runs a scenario file and prints the report's headline figures:
//! `cargo run --release -p statstorm-sim --example scenario -- scenarios/seed-000.toml [SEED]`.
//! (The full report is `statstorm simulate`.)

use statstorm_sim::scenario::Scenario;
use statstorm_sim::simulate_requests;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: scenario FILE.toml [SEED]");
        std::process::exit(2);
    };
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let sc = match Scenario::load(path.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match simulate_requests(&sc.requests, &sc.params, seed) {
        Ok(r) => {
            // A closed pipe (`| head`) ends the output quietly.
            let _ = writeln!(
                out,
                "{}: arrived {} served {} dropped {} ({:.4}%); ttfb ms p50 {} p90 {} p99 {} max {} mean {}",
                sc.name,
                r.requests.arrived,
                r.requests.served,
                r.requests.dropped,
                r.requests.drop_rate_pct,
                r.ttfb_ms.p50,
                r.ttfb_ms.p90,
                r.ttfb_ms.p99,
                r.ttfb_ms.max,
                r.ttfb_ms.mean
            );
            let _ = writeln!(
                out,
                "stalls {}; busy max {}; backlog max {}; blocked calls {}; events {}",
                r.stalls.len(),
                r.pool.max_busy_workers,
                r.pool.max_backlog,
                r.local_fs.blocked_ops,
                r.engine.events
            );
            for s in r.stalls.iter().take(8) {
                let _ = writeln!(
                    out,
                    "  {:>8.1} s {:>9.1} ms {:>5} req {:>4} dropped {}",
                    s.start_s, s.duration_ms, s.requests, s.dropped, s.cause
                );
            }
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    }
}
