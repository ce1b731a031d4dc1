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
