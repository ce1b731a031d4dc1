//! The engine against closed-form queueing results (run in release:
//! `cargo test --workspace --release`).
//!
//! Each case runs `REPS` independent replications (seeds 1..=REPS) and
//! compares the mean of their mean waits with the formula. The standard
//! error across replications is checked too, so that the tolerance is met
//! by the engine rather than by luck: `TOLERANCE` must be at least
//! `SE_MARGIN` standard errors wide.

use statstorm_sim::closed_form::{md1_wait, mm1_wait, mmc_wait};
use statstorm_sim::{
    simulate_requests, Arrivals, Dist, Params, Pool, RequestSpec, Server, Step, Transport,
};

/// Relative tolerance on the mean wait (the acceptance criterion).
const TOLERANCE: f64 = 0.02;
/// The tolerance must span this many standard errors of the estimate.
const SE_MARGIN: f64 = 3.0;
const REPS: u64 = 8;

/// Mean service time (1 ms), so rates are per second.
const SERVICE_MS: f64 = 1.0;

enum Station {
    /// The queue is the server's thread pool (`threads` = c).
    ServerThreads,
    /// The queue is the NFSv4.1 session slot table (`session_slots` = c);
    /// the server has unlimited threads and the RPC holds its slot for its
    /// service time.
    SessionSlots,
    /// The queue is the php-fpm listen backlog (`max_children` = c); the
    /// request is pure CPU time.
    FpmPool,
}

fn run(station: &Station, c: u32, rho: f64, exp_service: bool, customers: u64, seed: u64) -> f64 {
    let mu = 1000.0 / SERVICE_MS;
    let lambda = rho * c as f64 * mu;
    let service = if exp_service {
        Dist::Exp {
            mean_ms: SERVICE_MS,
        }
    } else {
        Dist::Fixed { ms: SERVICE_MS }
    };
    let mut p = Params {
        arrivals: Arrivals::Poisson { rate_per_s: lambda },
        duration_s: customers as f64 / lambda,
        ..Params::default()
    };
    let req;
    match station {
        Station::ServerThreads | Station::SessionSlots => {
            req = RequestSpec {
                start_ns: None,
                steps: vec![Step::Rpcs {
                    ops: vec!["GETATTR".into()],
                    key: None,
                }],
            };
            p.pool = Pool {
                max_children: 100_000,
                listen_backlog: 0,
            };
            p.server = Server {
                rtt_ms: 0.0,
                threads: 0,
                service,
                ..Server::default()
            };
            if let Station::ServerThreads = station {
                p.server.threads = c;
            } else {
                p.transport = Transport {
                    session_slots: c,
                    ..Transport::default()
                };
            }
        }
        Station::FpmPool => {
            // CPU time is fixed per step; an exponential CPU time needs a
            // per-request draw, so this station is used for M/D/c only.
            assert!(!exp_service);
            req = RequestSpec {
                start_ns: None,
                steps: vec![Step::Cpu {
                    ns: (SERVICE_MS * 1e6) as u64,
                }],
            };
            p.pool = Pool {
                max_children: c,
                listen_backlog: u32::MAX,
            };
        }
    }
    let r = simulate_requests(&[req], &p, seed).expect("valid parameters");
    assert_eq!(r.requests.arrived, r.requests.served + r.requests.dropped);
    assert_eq!(r.requests.dropped, 0);
    match station {
        Station::ServerThreads => r.server.mean_queue_wait_ms / 1e3,
        Station::SessionSlots => r.slots.mean_wait_ms / 1e3,
        Station::FpmPool => r.pool.mean_backlog_wait_ms / 1e3,
    }
}

fn check(
    name: &str,
    station: Station,
    c: u32,
    rho: f64,
    exp_service: bool,
    customers: u64,
    expected_s: f64,
) {
    let waits: Vec<f64> = (1..=REPS)
        .map(|s| run(&station, c, rho, exp_service, customers, s))
        .collect();
    let n = waits.len() as f64;
    let mean = waits.iter().sum::<f64>() / n;
    let var = waits.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let se = (var / n).sqrt() / expected_s;
    let err = (mean - expected_s) / expected_s;
    eprintln!(
        "{name}: rho={rho} c={c} expected {:.6} ms, simulated {:.6} ms, rel err {:+.4}, rel SE {:.4}",
        expected_s * 1e3,
        mean * 1e3,
        err,
        se
    );
    assert!(
        SE_MARGIN * se <= TOLERANCE,
        "{name} rho={rho}: too few customers, rel SE {se:.4}"
    );
    assert!(
        err.abs() <= TOLERANCE,
        "{name} rho={rho}: rel err {err:+.4} beyond {TOLERANCE}"
    );
}

const MU: f64 = 1000.0 / SERVICE_MS;

#[test]
fn closed_form_mm1_server_threads() {
    for (rho, n) in [(0.5, 400_000), (0.8, 1_500_000), (0.9, 4_000_000)] {
        check(
            "M/M/1",
            Station::ServerThreads,
            1,
            rho,
            true,
            n,
            mm1_wait(rho * MU, MU),
        );
    }
}

#[test]
fn closed_form_mmc_erlang_c_server_threads() {
    for (rho, n) in [(0.5, 600_000), (0.8, 1_000_000), (0.9, 2_500_000)] {
        check(
            "M/M/4",
            Station::ServerThreads,
            4,
            rho,
            true,
            n,
            mmc_wait(4, rho * 4.0 * MU, MU),
        );
    }
}

#[test]
fn closed_form_mmc_erlang_c_session_slots() {
    for (rho, n) in [(0.5, 600_000), (0.8, 1_000_000), (0.9, 2_500_000)] {
        check(
            "M/M/4 slots",
            Station::SessionSlots,
            4,
            rho,
            true,
            n,
            mmc_wait(4, rho * 4.0 * MU, MU),
        );
    }
}

#[test]
fn closed_form_md1_server_threads() {
    for (rho, n) in [(0.5, 300_000), (0.8, 800_000), (0.9, 2_000_000)] {
        check(
            "M/D/1",
            Station::ServerThreads,
            1,
            rho,
            false,
            n,
            md1_wait(rho * MU, MU),
        );
    }
}

#[test]
fn closed_form_md1_fpm_pool() {
    for (rho, n) in [(0.5, 300_000), (0.8, 800_000), (0.9, 2_000_000)] {
        check(
            "M/D/1 pool",
            Station::FpmPool,
            1,
            rho,
            false,
            n,
            md1_wait(rho * MU, MU),
        );
    }
}
