//! Properties of the engine that hold whatever the parameters.

use statstorm_sim::{
    simulate_replay_each, simulate_requests, simulate_requests_each, Arrivals, Dist, Iops, Params,
    Pool, RequestSpec, Scope, Server, Step, Transport, Validation, WhenEmpty,
};

fn rpc_request(n: u32, cpu_ms: f64) -> RequestSpec {
    RequestSpec::interleaved(
        (cpu_ms * 1e6) as u64,
        n,
        &["GETATTR".to_string()],
        false,
        false,
    )
}

fn busy_params(seed: u64) -> Params {
    // Overloaded on purpose: 8 workers, backlog 4, 40 req/s of ~0.3 s each.
    Params {
        arrivals: Arrivals::Poisson { rate_per_s: 40.0 },
        duration_s: 30.0,
        pool: Pool {
            max_children: 8,
            listen_backlog: 4,
        },
        transport: Transport {
            session_slots: 4,
            nconnect: 2,
            xprt_slots: 3,
        },
        server: Server {
            rtt_ms: 0.5,
            threads: 2,
            service: Dist::Exp { mean_ms: 0.8 },
            iops: Some(Iops {
                rate_per_s: 2000.0,
                burst: 50.0,
                when_empty: WhenEmpty::Queue,
                throttled_service: None,
            }),
            ..Server::default()
        },
        stall_ms: 500.0 + seed as f64,
        ..Params::default()
    }
}

#[test]
fn conservation_every_request_is_served_or_dropped() {
    let mut any_drop = false;
    for seed in 1..=6 {
        let p = busy_params(seed);
        let r =
            simulate_requests(&[rpc_request(120, 20.0), rpc_request(3, 1.0)], &p, seed).unwrap();
        assert!(r.requests.arrived > 0);
        assert_eq!(
            r.requests.arrived,
            r.requests.served + r.requests.dropped,
            "seed {seed}"
        );
        any_drop |= r.requests.dropped > 0;
        // Every RPC issued was answered by the server.
        assert_eq!(
            r.slots.rpcs,
            r.server.ops.values().sum::<u64>(),
            "seed {seed}"
        );
    }
    assert!(any_drop, "the overloaded pool must refuse some requests");
}

#[test]
fn determinism_same_seed_same_bytes() {
    let p = busy_params(0);
    let reqs = [rpc_request(50, 5.0)];
    let a = serde_json::to_string(&simulate_requests(&reqs, &p, 42).unwrap()).unwrap();
    let b = serde_json::to_string(&simulate_requests(&reqs, &p, 42).unwrap()).unwrap();
    let c = serde_json::to_string(&simulate_requests(&reqs, &p, 43).unwrap()).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn littles_law_holds_for_pool_and_rpcs() {
    let p = busy_params(0);
    let r = simulate_requests(&[rpc_request(60, 5.0)], &p, 9).unwrap();
    for l in &r.littles_law {
        assert!(l.in_flight_mean > 0.0, "{}", l.name);
        assert!(
            l.rel_err < 1e-9,
            "{}: L {} vs XW {}",
            l.name,
            l.in_flight_mean,
            l.throughput_x_latency
        );
    }
}

#[test]
fn sequential_calls_never_exceed_one_rpc_per_worker() {
    // 11 workers start 180 sequential GETATTRs each at the same moment.
    let reqs: Vec<RequestSpec> = (0..11)
        .map(|_| RequestSpec {
            start_ns: Some(0),
            ..rpc_request(180, 0.0)
        })
        .collect();
    let mut p = Params {
        arrivals: Arrivals::Replay,
        pool: Pool {
            max_children: 50,
            listen_backlog: 511,
        },
        transport: Transport {
            session_slots: 16,
            ..Transport::default()
        },
        server: Server {
            rtt_ms: 1.0,
            service: Dist::fixed_ms(19.0),
            ..Server::default()
        },
        ..Params::default()
    };
    let r = simulate_requests(&reqs, &p, 1).unwrap();
    assert_eq!(r.slots.max_rpcs_in_flight, 11);
    assert_eq!(r.slots.waited, 0);
    // 180 x 20 ms each, all in parallel: 3.6 s, not (1980/16) x 20 ms.
    assert_eq!(r.ttfb_ms.max, 3600.0);
    // With 4 slots the same 11 workers queue for slots: 11 RPCs share 4
    // slots, so each round of 11 takes ceil(11/4) = 3 service times.
    p.transport.session_slots = 4;
    let r = simulate_requests(&reqs, &p, 1).unwrap();
    assert!(r.slots.waited > 0);
    assert!(r.slots.max_wait_ms >= 40.0, "{}", r.slots.max_wait_ms);
    assert!(
        r.ttfb_ms.max > 3600.0 * 2.5 && r.ttfb_ms.max <= 3600.0 * 3.0,
        "{}",
        r.ttfb_ms.max
    );
}

#[test]
fn iops_bucket_caps_throughput_at_its_rate() {
    // 20 workers hammer the server; the budget is 100 ops/s after a burst of 10.
    let reqs: Vec<RequestSpec> = (0..20)
        .map(|_| RequestSpec {
            start_ns: Some(0),
            ..rpc_request(100, 0.0)
        })
        .collect();
    let p = Params {
        arrivals: Arrivals::Replay,
        pool: Pool {
            max_children: 20,
            listen_backlog: 0,
        },
        server: Server {
            rtt_ms: 0.1,
            service: Dist::fixed_ms(0.1),
            iops: Some(Iops {
                rate_per_s: 100.0,
                burst: 10.0,
                when_empty: WhenEmpty::Queue,
                throttled_service: None,
            }),
            ..Server::default()
        },
        ..Params::default()
    };
    let r = simulate_requests(&reqs, &p, 1).unwrap();
    // 2,000 ops: 10 from the burst, 1,990 at 100/s = 19.9 s, plus the last
    // op's service and round trip.
    assert!((r.end_s - 19.9002).abs() < 1e-3, "{}", r.end_s);
    assert_eq!(r.server.token_min, Some(0.0));
    assert!(
        r.stalls.iter().all(|s| s.cause == "iops_throttle"),
        "{:?}",
        r.stalls
    );
}

#[test]
fn replay_plays_each_request_at_its_time() {
    let reqs = vec![
        RequestSpec {
            start_ns: Some(2_000_000_000),
            steps: vec![Step::Cpu { ns: 1_000_000 }],
        },
        RequestSpec {
            start_ns: Some(1_000_000_000),
            steps: vec![Step::Cpu { ns: 3_000_000 }],
        },
    ];
    let p = Params {
        arrivals: Arrivals::Replay,
        ..Params::default()
    };
    let r = simulate_requests(&reqs, &p, 1).unwrap();
    assert_eq!(r.requests.served, 2);
    assert_eq!(r.end_s, 2.001);
    assert_eq!(r.ttfb_ms.max, 3.0);
}

#[test]
fn bad_parameters_are_errors_not_panics() {
    let mut p = Params::default();
    p.pool.max_children = 0;
    let e = simulate_requests(&[rpc_request(1, 1.0)], &p, 1).unwrap_err();
    assert!(e.contains("pool.max_children"), "{e}");
    let p = Params {
        arrivals: Arrivals::Replay,
        ..Params::default()
    };
    let e = simulate_requests(&[rpc_request(1, 1.0)], &p, 1).unwrap_err();
    assert!(e.contains("no start time"), "{e}");
    assert!(simulate_requests(&[], &Params::default(), 1).is_err());
}

/// `simulate_requests_each` reports each replayed request's own TTFB, and
/// its report is the one `simulate_requests` gives.
#[test]
fn each_request_outcome_matches_the_hand_computed_ttfb() {
    // One worker: request 0 (10 ms CPU + 3 RPCs of 2 ms) arrives at 0,
    // request 1 (5 ms CPU) at 1 ms and waits in the backlog until 16 ms.
    let mut a = rpc_request(3, 10.0);
    a.start_ns = Some(0);
    let b = RequestSpec {
        start_ns: Some(1_000_000),
        steps: vec![Step::Cpu { ns: 5_000_000 }],
    };
    let p = Params {
        arrivals: Arrivals::Replay,
        duration_s: 1.0,
        pool: Pool {
            max_children: 1,
            listen_backlog: 1,
        },
        server: Server {
            rtt_ms: 1.0,
            service: Dist::fixed_ms(1.0),
            ..Server::default()
        },
        ..Params::default()
    };
    let reqs = [a, b];
    let (r, each) = statstorm_sim::simulate_requests_each(&reqs, &p, 1).unwrap();
    assert_eq!(each.len(), 2);
    assert_eq!(each[0].mean_ttfb_ms, Some(16.0));
    assert_eq!(each[1].mean_ttfb_ms, Some(20.0)); // 16 - 1 + 5
    assert_eq!((each[0].served, each[1].dropped), (1, 0));
    let plain = simulate_requests(&reqs, &p, 1).unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&plain).unwrap()
    );
}

/// Request shapes made one at a time by an iterator (each freed once
/// compiled) give what the same shapes given as a slice give, and the
/// checks made after the compile still see every request.
#[test]
fn shapes_made_one_at_a_time_give_what_a_slice_gives() {
    let reqs: Vec<RequestSpec> = (0..60u32)
        .map(|i| {
            let mut r = rpc_request(1 + i % 7, 1.0 + f64::from(i % 5));
            r.start_ns = Some(u64::from(i) * 500_000);
            r
        })
        .collect();
    let p = Params {
        arrivals: Arrivals::Replay,
        ..busy_params(3)
    };
    let (a, each_a) = statstorm_sim::simulate_requests_each(&reqs, &p, 9).unwrap();
    let made = (0..reqs.len()).map(|i| reqs[i].clone());
    let (b, each_b) = statstorm_sim::simulate_requests_each(made, &p, 9).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert_eq!(each_a, each_b);
    assert!(
        a.requests.served > 0 && a.requests.dropped > 0,
        "{:?}",
        a.requests
    );
    let mut bad = reqs.clone();
    bad[31].start_ns = None;
    let e = statstorm_sim::simulate_requests_each(bad, &p, 9).unwrap_err();
    assert!(e.contains("request 31 has no start time"), "{e}");
}

/// A replay whose requests are made as they arrive
/// (`simulate_replay_each`) gives what the same requests compiled up
/// front give, whatever the scope of the validation stamps, a key first
/// used late, and with requests refused by a full backlog.
#[test]
fn requests_made_as_they_arrive_give_what_compiled_requests_give() {
    let mut x: u64 = 11;
    let mut next = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let names = ["GETATTR", "LOOKUP", "ACCESS", "READ"];
    let reqs: Vec<RequestSpec> = (0..400)
        .map(|i| {
            let mut steps = Vec::new();
            for _ in 0..next(12) {
                steps.push(Step::Cpu {
                    ns: next(3_000_000),
                });
                let ops = (0..next(3) + 1)
                    .map(|_| names[next(4) as usize].to_string())
                    .collect();
                // later requests use keys the first ones never did
                let key = (next(3) == 0).then(|| (next(5) + i / 40) as u32);
                steps.push(if next(5) == 0 {
                    Step::Local { key }
                } else {
                    Step::Rpcs { ops, key }
                });
            }
            RequestSpec {
                start_ns: Some(next(4_000_000_000)),
                steps,
            }
        })
        .collect();
    for (scope, backlog) in [(Scope::Pool, 511), (Scope::Worker, 511), (Scope::Worker, 2)] {
        let p = Params {
            arrivals: Arrivals::Replay,
            pool: Pool {
                max_children: 6,
                listen_backlog: backlog,
            },
            validation: Validation {
                freq_s: 1,
                scope,
                initial_stamp_s: None,
            },
            server: Server {
                rtt_ms: 0.5,
                service: Dist::fixed_ms(2.0),
                ..Server::default()
            },
            ..Params::default()
        };
        let all = simulate_requests_each(&reqs, &p, 7).unwrap();
        let starts: Vec<u64> = reqs.iter().map(|r| r.start_ns.unwrap()).collect();
        let mut made = vec![0u32; reqs.len()];
        let lazy = simulate_replay_each(
            &starts,
            |i| {
                made[i] += 1;
                reqs[i].clone()
            },
            &p,
            7,
        )
        .unwrap();
        assert!(made.iter().all(|&n| n == 1), "each request made once");
        let means: Vec<Option<f64>> = all.1.iter().map(|o| o.mean_ttfb_ms).collect();
        assert_eq!(lazy.1, means, "{scope:?} backlog {backlog}");
        assert_eq!(
            serde_json::to_string(&lazy.0).unwrap(),
            serde_json::to_string(&all.0).unwrap(),
            "{scope:?} backlog {backlog}"
        );
        if backlog == 2 {
            assert!(all.0.requests.dropped > 0, "the backlog refuses some");
        }
    }
    // made on demand needs a replay
    let p = Params::default();
    assert!(simulate_replay_each(&[0], |i| reqs[i].clone(), &p, 7).is_err());
}
