//! Engine speed, printed beside a baseline measured in the same run:
//! `cargo bench -p statstorm-sim --bench sim` (or `scripts/bench-sim`).
//!
//! 1. One hour of a 50-worker pool at 100 requests/s, 180 GETATTRs per
//!    request (20 ms CPU around them; 0.2 ms round trip, 0.1 ms service,
//!    16 nfsd threads, 64 session slots).
//! 2. The same number of events through a bare `BinaryHeap` push/pop loop
//!    with the same key type and a similar number of pending events: the
//!    floor any heap-based engine pays.

use statstorm_sim::{
    simulate_requests, Arrivals, Dist, Params, Pool, RequestSpec, Server, Transport,
};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::Instant;

fn hour_of_pool() -> (u64, u64, u64, f64) {
    let req = RequestSpec::interleaved(20_000_000, 180, &["GETATTR".to_string()], false, false);
    let p = Params {
        arrivals: Arrivals::Poisson { rate_per_s: 100.0 },
        duration_s: 3600.0,
        pool: Pool {
            max_children: 50,
            listen_backlog: 511,
        },
        transport: Transport {
            session_slots: 64,
            ..Transport::default()
        },
        server: Server {
            rtt_ms: 0.2,
            threads: 16,
            service: Dist::Exp { mean_ms: 0.1 },
            ..Server::default()
        },
        ..Params::default()
    };
    let t0 = Instant::now();
    let r = simulate_requests(&[req], &p, 1).expect("valid parameters");
    let wall = t0.elapsed().as_secs_f64();
    (r.engine.events, r.slots.rpcs, r.requests.served, wall)
}

/// Pops `n` events from a heap kept at `pending` entries, pushing one new
/// event a pseudo-random (xorshift) time later for each pop.
fn bare_heap(n: u64, pending: u64) -> f64 {
    let mut h: BinaryHeap<Reverse<u128>> = BinaryHeap::with_capacity(pending as usize + 1);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut seq: u128 = 0;
    for i in 0..pending {
        h.push(Reverse((i as u128) << 64 | seq << 24));
        seq += 1;
    }
    let t0 = Instant::now();
    let mut sum = 0u64;
    for _ in 0..n {
        let Reverse(k) = h.pop().expect("heap is kept non-empty");
        let t = (k >> 64) as u64;
        sum = sum.wrapping_add(t);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        h.push(Reverse(
            ((t + (x & 0xF_FFFF)) as u128) << 64 | (seq & 0xFF_FFFF_FFFF) << 24,
        ));
        seq += 1;
    }
    black_box(sum);
    t0.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; nothing else is accepted.
    let (events, rpcs, served, wall) = hour_of_pool();
    let base = bare_heap(events, 64);
    println!("statstorm-sim engine benchmark (one run each, same process)");
    println!(
        "  simulate 1 h, 50 workers, 100 req/s, 180 RPCs/request: {served} requests, {rpcs} RPCs, {events} events in {wall:.3} s"
    );
    println!(
        "    {:.2} M events/s, {:.2} M RPCs/s, {:.0}x faster than real time",
        events as f64 / wall / 1e6,
        rpcs as f64 / wall / 1e6,
        3600.0 / wall
    );
    println!(
        "  baseline: bare BinaryHeap<u128> push+pop of {events} events (64 pending): {base:.3} s = {:.2} M events/s",
        events as f64 / base / 1e6
    );
    println!("  engine / baseline time: {:.2}", wall / base);
}
