//! The simulator's results: computed once, rendered as JSON by serde and as
//! text by the command line.

use serde::Serialize;
use std::collections::BTreeMap;

/// JSON schema name of [`Report`].
pub const SCHEMA: &str = "statstorm.simulate/1";

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// Name of the scenario, when run from one.
    pub scenario: Option<String>,
    pub seed: u64,
    /// Arrivals stop at this time.
    pub duration_s: f64,
    /// Time of the last event (the last request in progress finished).
    pub end_s: f64,
    pub requests: Requests,
    pub ttfb_ms: Ttfb,
    pub stalls: Vec<Stall>,
    pub slots: Slots,
    pub server: ServerOut,
    pub pool: PoolOut,
    pub local_fs: LocalOut,
    pub validation: ValidationOut,
    pub littles_law: Vec<LittleCheck>,
    pub series: Series,
    pub engine: EngineOut,
}

#[derive(Clone, Debug, Serialize)]
pub struct Requests {
    pub arrived: u64,
    pub served: u64,
    /// Refused because every worker was busy and the listen backlog full (502).
    pub dropped: u64,
    pub drop_rate_pct: f64,
}

/// Time from arrival to the end of the PHP request (PHP buffers its output,
/// so the first byte leaves about when the script ends).
#[derive(Clone, Debug, Serialize)]
pub struct Ttfb {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Time a request spent in each part of the path, summed over requests.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Breakdown {
    /// Waiting in the listen backlog for a worker.
    pub backlog_ms: f64,
    pub cpu_ms: f64,
    /// Waiting for an RPC slot (session or transport).
    pub slot_wait_ms: f64,
    /// Waiting for a server thread.
    pub server_queue_ms: f64,
    /// Waiting for an IOPS token, or served slowly without one.
    pub iops_throttle_ms: f64,
    /// Network round trips and normal server service.
    pub rpc_ms: f64,
    /// Local filesystem operation cost.
    pub local_ms: f64,
    /// Sleeping on a local filesystem lock.
    pub local_lock_ms: f64,
}

impl Breakdown {
    pub(crate) fn from_ns(c: &[u64; 8]) -> Breakdown {
        let m = |v: u64| round3(v as f64 / 1e6);
        Breakdown {
            cpu_ms: m(c[0]),
            backlog_ms: m(c[1]),
            slot_wait_ms: m(c[2]),
            server_queue_ms: m(c[3]),
            iops_throttle_ms: m(c[4]),
            rpc_ms: m(c[5]),
            local_ms: m(c[6]),
            local_lock_ms: m(c[7]),
        }
    }

    /// Every part together: the requests' whole time.
    pub fn total_ms(&self) -> f64 {
        self.cpu_ms
            + self.backlog_ms
            + self.slot_wait_ms
            + self.server_queue_ms
            + self.iops_throttle_ms
            + self.rpc_ms
            + self.local_ms
            + self.local_lock_ms
    }

    /// The largest part other than CPU, by name.
    pub fn dominant(&self) -> &'static str {
        let parts = [
            ("backlog", self.backlog_ms),
            ("slot_wait", self.slot_wait_ms),
            ("server_queue", self.server_queue_ms),
            ("iops_throttle", self.iops_throttle_ms),
            ("rpc_latency", self.rpc_ms),
            ("local_fs", self.local_ms),
            ("local_lock", self.local_lock_ms),
        ];
        let mut best = ("cpu", self.cpu_ms);
        for p in parts {
            if p.1 > best.1 {
                best = p;
            }
        }
        best.0
    }
}

/// A window in which requests took longer than the stall threshold: the
/// union of the [arrival, end] intervals of those requests.
#[derive(Clone, Debug, Serialize)]
pub struct Stall {
    pub start_s: f64,
    pub duration_ms: f64,
    /// The largest non-CPU part of the slow requests' time
    /// (`backlog`, `slot_wait`, `server_queue`, `iops_throttle`,
    /// `rpc_latency`, `local_fs`, `local_lock`, `cpu`).
    pub cause: &'static str,
    /// Requests slower than the threshold in this window.
    pub requests: u64,
    pub max_ttfb_ms: f64,
    /// RPCs of those requests, and their mean time each (slot wait to reply).
    pub rpcs: u64,
    pub mean_rpc_ms: f64,
    /// Most workers doing keyed (validation) calls at the same time.
    pub max_workers_validating: u64,
    /// Most RPCs in flight (holding or waiting for a slot) at once.
    pub max_rpcs_in_flight: u64,
    /// Most RPCs waiting for a slot at once.
    pub max_slot_queue: u64,
    /// Requests refused (502) in this window.
    pub dropped: u64,
    pub breakdown: Breakdown,
}

#[derive(Clone, Debug, Serialize)]
pub struct Slots {
    pub session_slots: u32,
    pub nconnect: u32,
    pub xprt_slots: u32,
    pub rpcs: u64,
    /// RPCs that had to wait for a slot.
    pub waited: u64,
    pub max_wait_ms: f64,
    pub mean_wait_ms: f64,
    pub max_rpcs_in_flight: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ServerOut {
    /// Busy thread time / (threads x time); with unlimited threads, the mean
    /// number of operations in service.
    pub utilisation: f64,
    pub ops: BTreeMap<String, u64>,
    pub mean_queue_wait_ms: f64,
    pub max_queue_wait_ms: f64,
    /// Operations served without a token (`when_empty = "slow"`).
    pub throttled_ops: u64,
    /// Lowest token level seen (null: no IOPS budget).
    pub token_min: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PoolOut {
    pub max_children: u32,
    pub listen_backlog: u32,
    pub mean_backlog_wait_ms: f64,
    pub max_backlog: u64,
    pub max_busy_workers: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LocalOut {
    pub ops: u64,
    /// Eviction cycles started.
    pub evictions: u64,
    /// Calls that slept on a lock held by an eviction cycle.
    pub blocked_ops: u64,
    pub max_lock_wait_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ValidationOut {
    /// Keyed calls made (stamp stale) and skipped (stamp fresh).
    pub performed: u64,
    pub skipped: u64,
    /// Most workers doing keyed calls at the same time.
    pub max_workers_at_once: u64,
}

/// Little's law, L = X W, from two independent accountings: L is the time
/// average of a counter kept at every event, W the mean of per-item times.
/// `name` is `pool` (requests, backlog wait included) or `rpcs` (issued to
/// answered, slot wait included).
#[derive(Clone, Debug, Serialize)]
pub struct LittleCheck {
    pub name: &'static str,
    pub in_flight_mean: f64,
    pub throughput_per_s: f64,
    pub latency_mean_ms: f64,
    pub throughput_x_latency: f64,
    pub rel_err: f64,
}

/// Columns of a time series, one row per `step_s` from time 0.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Series {
    pub step_s: f64,
    pub served: Vec<u64>,
    pub dropped: Vec<u64>,
    pub ttfb_mean_ms: Vec<f64>,
    pub ttfb_max_ms: Vec<f64>,
    /// Requests in the pool (working or in the backlog) at the row's start.
    pub in_system: Vec<u64>,
    /// IOPS tokens at the row's start (empty without a budget).
    pub tokens: Vec<f64>,
    pub rpcs_in_flight_max: Vec<u64>,
    pub slot_queue_max: Vec<u64>,
    pub workers_validating_max: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EngineOut {
    pub events: u64,
    /// Wall-clock time of the run; filled by the caller (the model never
    /// reads a clock), null when not measured.
    pub wall_ms: Option<f64>,
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub(crate) fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
