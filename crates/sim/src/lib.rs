//! statstorm-sim: a deterministic discrete-event simulator of the path from
//! request arrival through php-fpm workers, RPC slots and the NFS server (or
//! a local filesystem) to time-to-first-byte, stalls and 502s.
//!
//! It knows requests and RPCs only, nothing of strace or PHP: a request is a
//! sequence of CPU time and synchronous filesystem calls ([`Step`]); each
//! call is a list of RPCs named by strings (`"GETATTR"`) or one local call.
//!
//! ```
//! use statstorm_sim::{simulate_requests, Arrivals, Params, RequestSpec};
//!
//! // 180 sequential GETATTRs of 2 ms each per request, 2 requests/s, 50 workers.
//! let req = RequestSpec::interleaved(45_000_000, 180, &["GETATTR".to_string()], false, false);
//! let mut p = Params::default();
//! p.arrivals = Arrivals::Poisson { rate_per_s: 2.0 };
//! p.pool.max_children = 50;
//! p.server.rtt_ms = 1.0;
//! p.server.service = statstorm_sim::Dist::fixed_ms(1.0);
//! let r = simulate_requests(&[req], &p, 7).unwrap();
//! assert_eq!(r.requests.arrived, r.requests.served + r.requests.dropped);
//! assert!((r.ttfb_ms.p50 - 405.0).abs() < 1.0); // 45 ms CPU + 180 x 2 ms
//! ```

pub mod closed_form;
mod dist;
mod engine;
mod hist;
mod params;
mod report;
mod request;
pub mod requests_file;

pub use dist::{ms_to_ns, Dist, MAX_MS};
pub use engine::{
    simulate_replay_each, simulate_replay_stream, simulate_requests, simulate_requests_each,
    RequestOutcome, MAX_WORKERS,
};
pub use params::{
    Arrivals, Iops, LocalFs, OpService, Params, Pool, QuickParams, Recurrence, Scope, Server,
    Transport, Validation, WhenEmpty,
};
pub use report::*;
pub use request::{RequestSpec, Step};
