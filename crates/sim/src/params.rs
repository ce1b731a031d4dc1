//! Model parameters: arrivals, FPM pool, RPC transport, NFS server, local
//! filesystem, and the shared validation stamps. Units are in field names;
//! every struct deserializes from the matching section of a scenario file.

use crate::dist::Dist;
use serde::{Deserialize, Serialize};

/// How requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Arrivals {
    /// A Poisson process (exponential gaps) at `rate_per_s`.
    Poisson { rate_per_s: f64 },
    /// Evenly spaced at `rate_per_s`.
    Periodic { rate_per_s: f64 },
    /// The requests' own start times (`RequestSpec::start_ns`), e.g. from a
    /// trace; each request is played once.
    Replay,
}

/// The php-fpm pool (static: all `max_children` workers exist from the start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    /// `pm.max_children`.
    pub max_children: u32,
    /// `listen.backlog`: connections that may wait for a free worker. An
    /// arrival that finds all workers busy and this many waiting is refused
    /// (the web server answers 502).
    pub listen_backlog: u32,
}

/// The client transport: NFSv4.1 session slots (R44) and `nconnect` TCP
/// connections, each with a SunRPC slot table (R43, R45).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// Session slots shared by every process and connection (R44: min of the
    /// client's `max_session_slots`, default 64, and the server's grant).
    /// 0 = no session (NFSv3, v4.0).
    #[serde(default)]
    pub session_slots: u32,
    /// `nconnect` (R45), 1..=16.
    #[serde(default = "one")]
    pub nconnect: u32,
    /// SunRPC slots per connection (R43: `tcp_max_slot_table_entries`,
    /// default 65536).
    #[serde(default = "xprt_default")]
    pub xprt_slots: u32,
}

fn one() -> u32 {
    1
}
fn xprt_default() -> u32 {
    65_536
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            session_slots: 0,
            nconnect: 1,
            xprt_slots: xprt_default(),
        }
    }
}

/// What the server does when its IOPS bucket is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenEmpty {
    /// Operations wait in the server queue for the next token.
    Queue,
    /// Operations are served at once but take `throttled_service`.
    Slow,
}

/// An IOPS budget: a token bucket refilled at `rate_per_s` up to `burst`,
/// one token per operation, full at time 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Iops {
    pub rate_per_s: f64,
    pub burst: f64,
    pub when_empty: WhenEmpty,
    /// Service time of an operation served without a token (`slow` only).
    #[serde(default)]
    pub throttled_service: Option<Dist>,
}

/// Per-operation service time override.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpService {
    pub op: String,
    pub service: Dist,
}

/// The NFS server and the network to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// Network round trip, split evenly between request and reply.
    pub rtt_ms: f64,
    /// Concurrent operations (nfsd threads, R46). 0 = unlimited.
    #[serde(default)]
    pub threads: u32,
    /// Service time of an operation not listed in `op_service`.
    pub service: Dist,
    #[serde(default)]
    pub op_service: Vec<OpService>,
    #[serde(default)]
    pub iops: Option<Iops>,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            rtt_ms: 0.0,
            threads: 0,
            service: Dist::fixed_ms(0.0),
            op_service: Vec::new(),
            iops: None,
        }
    }
}

/// How contention windows of the local filesystem recur.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recurrence {
    /// Exponential gaps with mean `every_s`.
    Poisson,
    /// Exactly every `every_s`.
    Periodic,
}

/// A local filesystem: each call costs `op_us`. Eviction cycles (e.g. the
/// ZFS ARC reclaim thread) recur every `eviction_every_s` and run for
/// `eviction_length`; while one runs, a call finds the lock it needs held
/// with probability `block_probability` and then sleeps for `block` (the
/// lock hold) before it completes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalFs {
    pub op_us: f64,
    /// Mean (poisson) or exact (periodic) time between cycles; 0 = none.
    #[serde(default)]
    pub eviction_every_s: f64,
    #[serde(default = "poisson")]
    pub eviction_recurrence: Recurrence,
    #[serde(default = "zero_dist")]
    pub eviction_length: Dist,
    #[serde(default)]
    pub block_probability: f64,
    #[serde(default = "zero_dist")]
    pub block: Dist,
}

fn poisson() -> Recurrence {
    Recurrence::Poisson
}
fn zero_dist() -> Dist {
    Dist::fixed_ms(0.0)
}

impl Default for LocalFs {
    fn default() -> Self {
        LocalFs {
            op_us: 0.0,
            eviction_every_s: 0.0,
            eviction_recurrence: Recurrence::Poisson,
            eviction_length: zero_dist(),
            block_probability: 0.0,
            block: zero_dist(),
        }
    }
}

/// Who shares a validation stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One stamp per key for the whole pool (OPcache keeps
    /// `dynamic_members.revalidate` in shared memory: R64).
    Pool,
    /// One stamp per key per worker.
    Worker,
}

/// Keyed operations (`Step::Fs { key: Some(k), .. }`) are skipped while the
/// key's stamp is fresh: an operation is done when `request_time_s >
/// stamp`, and its completion sets `stamp = request_time_s + freq_s`, where
/// `request_time_s` is the whole second at which the worker took the request
/// (R64, `validate_timestamp_and_record`; `request_time` has 1 s resolution).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    pub freq_s: u64,
    #[serde(default = "pool_scope")]
    pub scope: Scope,
    /// Stamp of every key at time 0 (as if compiled at time 0: `freq_s`).
    #[serde(default)]
    pub initial_stamp_s: Option<i64>,
}

fn pool_scope() -> Scope {
    Scope::Pool
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            freq_s: 0,
            scope: Scope::Pool,
            initial_stamp_s: None,
        }
    }
}

/// Highest arrival rate (`arrivals.rate_per_s`): one request per ns.
pub const MAX_RATE_PER_S: f64 = 1e9;

/// Most requests a Poisson or periodic run may expect (`rate_per_s x
/// duration_s`); the largest seed scenario has 720,000.
pub const MAX_ARRIVALS: f64 = 1e9;

/// Everything but the requests themselves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub arrivals: Arrivals,
    /// Arrivals stop after this long; requests in progress then run to the end.
    pub duration_s: f64,
    pub pool: Pool,
    pub transport: Transport,
    pub server: Server,
    pub local_fs: LocalFs,
    pub validation: Validation,
    /// A request slower than this (TTFB) belongs to a stall episode.
    pub stall_ms: f64,
    /// Width of a time-series bucket.
    pub series_step_s: f64,
}

impl Params {
    /// Checks every value; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, what: &str| -> Result<(), String> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be a number > 0, got {v}"))
            }
        };
        let nonneg = |v: f64, what: &str| -> Result<(), String> {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be a number >= 0, got {v}"))
            }
        };
        match self.arrivals {
            Arrivals::Poisson { rate_per_s } | Arrivals::Periodic { rate_per_s } => {
                pos(rate_per_s, "arrivals.rate_per_s")?;
                // The clock counts whole ns and every gap is at least 1 ns:
                // a faster rate cannot be simulated as asked.
                if rate_per_s > MAX_RATE_PER_S {
                    return Err(format!(
                        "arrivals.rate_per_s must be at most 1e9 (one request per ns, the \
                         simulator's clock tick), got {rate_per_s}"
                    ));
                }
            }
            Arrivals::Replay => {}
        }
        nonneg(self.duration_s, "duration_s")?;
        if self.duration_s > 1e7 {
            return Err(format!(
                "duration_s must be at most 1e7 s, got {}",
                self.duration_s
            ));
        }
        if let Arrivals::Poisson { rate_per_s } | Arrivals::Periodic { rate_per_s } = self.arrivals
        {
            // Every arrival is an event, served or refused: a run of more
            // than MAX_ARRIVALS would take hours and look like a hang.
            let n = rate_per_s * self.duration_s;
            if n > MAX_ARRIVALS {
                return Err(format!(
                    "arrivals.rate_per_s x duration_s = {rate_per_s} x {} s = {n:.3e} requests; \
                     at most 1e9 are simulated: lower the rate or the duration",
                    self.duration_s
                ));
            }
        }
        if self.duration_s / self.series_step_s > 1e7 {
            return Err(format!(
                "series_step_s = {} gives more than 10 million rows over duration_s = {}",
                self.series_step_s, self.duration_s
            ));
        }
        if self.pool.max_children == 0 || self.pool.max_children > crate::engine::MAX_WORKERS {
            return Err(format!(
                "pool.max_children must be 1..={}, got {}",
                crate::engine::MAX_WORKERS,
                self.pool.max_children
            ));
        }
        if !(1..=16).contains(&self.transport.nconnect) {
            return Err(format!(
                "transport.nconnect must be 1..=16 (R45), got {}",
                self.transport.nconnect
            ));
        }
        if self.transport.xprt_slots == 0 {
            return Err("transport.xprt_slots must be >= 1".into());
        }
        nonneg(self.server.rtt_ms, "server.rtt_ms")?;
        if self.server.rtt_ms > crate::dist::MAX_MS {
            return Err(format!(
                "server.rtt_ms must be at most {} ms",
                crate::dist::MAX_MS
            ));
        }
        self.server.service.validate("server.service")?;
        for o in &self.server.op_service {
            o.service
                .validate(&format!("server.op_service[{}]", o.op))?;
        }
        if let Some(i) = &self.server.iops {
            pos(i.rate_per_s, "server.iops.rate_per_s")?;
            if !(i.burst.is_finite() && i.burst >= 1.0) {
                return Err(format!("server.iops.burst must be >= 1, got {}", i.burst));
            }
            match (&i.when_empty, &i.throttled_service) {
                (WhenEmpty::Slow, None) => {
                    return Err(
                        "server.iops.when_empty = \"slow\" needs server.iops.throttled_service"
                            .into(),
                    )
                }
                (_, Some(d)) => d.validate("server.iops.throttled_service")?,
                _ => {}
            }
        }
        nonneg(self.local_fs.op_us, "local_fs.op_us")?;
        if self.local_fs.op_us > crate::dist::MAX_MS * 1e3 {
            return Err("local_fs.op_us is too large".into());
        }
        nonneg(self.local_fs.eviction_every_s, "local_fs.eviction_every_s")?;
        let q = self.local_fs.block_probability;
        if !(0.0..=1.0).contains(&q) {
            return Err(format!(
                "local_fs.block_probability must be in [0, 1], got {q}"
            ));
        }
        self.local_fs
            .eviction_length
            .validate("local_fs.eviction_length")?;
        self.local_fs.block.validate("local_fs.block")?;
        pos(self.stall_ms, "stall_ms")?;
        pos(self.series_step_s, "series_step_s")?;
        Ok(())
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            arrivals: Arrivals::Poisson { rate_per_s: 1.0 },
            duration_s: 60.0,
            pool: Pool {
                max_children: 5,
                listen_backlog: 511,
            },
            transport: Transport::default(),
            server: Server::default(),
            local_fs: LocalFs::default(),
            validation: Validation::default(),
            stall_ms: 1000.0,
            series_step_s: 1.0,
        }
    }
}

/// The few numbers `statstorm predict` exposes as flags, turned into
/// [`Params`]:
///
/// | flag | field | meaning |
/// |---|---|---|
/// | `--workers N` | `pool.max_children` | php-fpm workers |
/// | `--rate R` | `arrivals` (Poisson) | requests per second |
/// | `--slots S` | `transport.session_slots` | NFSv4.1 session slots (0: none) |
/// | `--rtt MS` | `server.rtt_ms` | network round trip |
/// | `--server-latency MS` | `server.service` (fixed) | server time per RPC |
/// | `--iops N` | `server.iops.rate_per_s` (queue) | IOPS budget (0: none) |
/// | `--burst N` | `server.iops.burst` | bucket size (default: one second of `--iops`) |
#[derive(Clone, Debug, PartialEq)]
pub struct QuickParams {
    pub workers: u32,
    pub rate_per_s: f64,
    pub slots: u32,
    pub rtt_ms: f64,
    pub server_latency_ms: f64,
    pub iops: f64,
    pub burst: Option<f64>,
    pub duration_s: f64,
}

impl Default for QuickParams {
    fn default() -> Self {
        QuickParams {
            workers: 50,
            rate_per_s: 10.0,
            slots: 64,
            rtt_ms: 0.5,
            server_latency_ms: 0.5,
            iops: 0.0,
            burst: None,
            duration_s: 600.0,
        }
    }
}

impl QuickParams {
    pub fn to_params(&self) -> Params {
        let iops = (self.iops > 0.0).then(|| Iops {
            rate_per_s: self.iops,
            burst: self.burst.unwrap_or(self.iops).max(1.0),
            when_empty: WhenEmpty::Queue,
            throttled_service: None,
        });
        Params {
            arrivals: Arrivals::Poisson {
                rate_per_s: self.rate_per_s,
            },
            duration_s: self.duration_s,
            pool: Pool {
                max_children: self.workers,
                listen_backlog: 511,
            },
            transport: Transport {
                session_slots: self.slots,
                ..Transport::default()
            },
            server: Server {
                rtt_ms: self.rtt_ms,
                service: Dist::fixed_ms(self.server_latency_ms),
                iops,
                ..Server::default()
            },
            ..Params::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_params_map_onto_the_model() {
        let q = QuickParams {
            iops: 500.0,
            burst: None,
            slots: 16,
            ..QuickParams::default()
        };
        let p = q.to_params();
        p.validate().unwrap();
        assert_eq!(p.pool.max_children, 50);
        assert_eq!(p.transport.session_slots, 16);
        let i = p.server.iops.unwrap();
        assert_eq!(
            (i.rate_per_s, i.burst, i.when_empty),
            (500.0, 500.0, WhenEmpty::Queue)
        );
        assert!(QuickParams {
            iops: 0.0,
            ..QuickParams::default()
        }
        .to_params()
        .server
        .iops
        .is_none());
    }

    #[test]
    fn absurd_values_are_refused() {
        let mut p = Params {
            duration_s: 3600.0,
            series_step_s: 1e-9,
            ..Params::default()
        };
        assert!(p.validate().unwrap_err().contains("series_step_s"));
        p.series_step_s = 1.0;
        p.server.service = Dist::fixed_ms(1e300);
        assert!(p.validate().unwrap_err().contains("server.service"));
    }
}
