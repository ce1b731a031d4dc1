//! Inputs that once panicked or never ended (issue 24, cases 1 and 2).

use statstorm_sim::{simulate_requests, Arrivals, Params, Pool, RequestSpec, Step};

/// More replayed requests than a 20-bit event id holds: every one is
/// played once, in start order. (The engine packed the replay index into
/// 20 bits of the event key; request 1,048,576 wrapped into the kind bits
/// and the run panicked with "index out of bounds".)
#[test]
fn replay_of_more_than_2_pow_20_requests_runs_to_the_end() {
    let n: u64 = (1 << 20) + 5;
    let reqs: Vec<RequestSpec> = (0..n)
        .map(|i| RequestSpec {
            start_ns: Some(i * 1_000),
            steps: vec![Step::Cpu { ns: 500 }],
        })
        .collect();
    let p = Params {
        arrivals: Arrivals::Replay,
        duration_s: 0.0,
        pool: Pool {
            max_children: 4,
            listen_backlog: 16,
        },
        ..Params::default()
    };
    let r = simulate_requests(&reqs, &p, 1).unwrap();
    assert_eq!(r.requests.arrived, n);
    assert_eq!(r.requests.served, n);
    assert_eq!(r.requests.dropped, 0);
    // the last request started at (n-1) us and took 500 ns (end_s has 6
    // decimals)
    let end = ((n - 1) * 1_000 + 500) as f64 / 1e9;
    assert!((r.end_s - end).abs() <= 1e-6, "{} vs {end}", r.end_s);
    assert_eq!(r.ttfb_ms.max, 0.001); // 500 ns, 3 decimals
}

fn poisson(rate_per_s: f64, duration_s: f64) -> Params {
    Params {
        arrivals: Arrivals::Poisson { rate_per_s },
        duration_s,
        pool: Pool {
            max_children: 2,
            listen_backlog: 2,
        },
        ..Params::default()
    }
}

/// A rate whose mean gap is far below 1 ns: refused by name, not run
/// (the gap rounded to 0 ns and time never advanced).
#[test]
fn poisson_rate_beyond_the_clock_is_refused() {
    let req = [RequestSpec {
        start_ns: None,
        steps: vec![Step::Cpu { ns: 1_000 }],
    }];
    for rate in [1e11, 1e12, 1e300] {
        let e = simulate_requests(&req, &poisson(rate, 600.0), 1).unwrap_err();
        assert!(e.contains("arrivals.rate_per_s"), "{rate}: {e}");
        assert!(e.contains("1e9"), "{rate}: {e}");
    }
}

/// At the highest accepted rate (one arrival per ns on average) time still
/// advances: every gap is at least 1 ns, so a 2 us run has at most 2,000
/// arrivals, and about 2,000 * (1 - e^-1) of them once gaps that round to 0
/// are lifted to 1 ns.
#[test]
fn poisson_gaps_are_at_least_one_ns() {
    let req = [RequestSpec {
        start_ns: None,
        steps: vec![Step::Cpu { ns: 1 }],
    }];
    let r = simulate_requests(&req, &poisson(1e9, 2e-6), 7).unwrap();
    assert!(r.requests.arrived <= 2_000, "{}", r.requests.arrived);
    assert!(r.requests.arrived >= 1_000, "{}", r.requests.arrived);
    assert_eq!(r.requests.arrived, r.requests.served + r.requests.dropped);
}

/// A rate the clock can hold, over a duration that would mean more than a
/// billion arrivals: refused with the product named.
#[test]
fn more_than_a_billion_arrivals_are_refused() {
    let req = [RequestSpec {
        start_ns: None,
        steps: vec![Step::Cpu { ns: 1 }],
    }];
    let e = simulate_requests(&req, &poisson(1e9, 600.0), 1).unwrap_err();
    assert!(e.contains("rate_per_s x duration_s"), "{e}");
    let mut p = poisson(1e9, 600.0);
    p.arrivals = Arrivals::Periodic { rate_per_s: 1e7 };
    let e = simulate_requests(&req, &p, 1).unwrap_err();
    assert!(e.contains("6.000e9 requests"), "{e}");
}
