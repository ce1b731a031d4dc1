//! Why the simulated requests stalled and were refused, as typed causes
//! computed from the report's own figures. Renderers put them into words.

use super::scenario::{Fs, Published, Scenario, Workload};
use serde::Serialize;
use statstorm_sim::{Arrivals, Breakdown, Report};

/// One cause, with the figures that back it.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// No request was slower than the stall threshold.
    NoStall { stall_ms: f64 },
    /// Stall episodes, how often and how long, and what they waited on.
    Episodes {
        count: usize,
        /// Median gap between episode starts, seconds (two or more).
        recur_s: Option<f64>,
        median_ms: f64,
        longest_ms: f64,
        /// The simulator's cause names (`slot_wait`, `backlog`, ...).
        causes: Vec<&'static str>,
    },
    /// A worker's timestamp checks are sequential; OPcache's shared stamp
    /// (R64) makes the requests that arrive during a revalidation check the
    /// same scripts alongside it.
    SequentialChecks {
        rpcs_per_request: usize,
        revalidate_freq_s: u64,
        workers_median: f64,
        workers_max: f64,
    },
    /// RPCs in flight against the slot table.
    SlotUse {
        max_in_flight: u64,
        slots: u32,
        waited: bool,
        max_wait_ms: f64,
        mean_wait_ms: f64,
    },
    /// The longest episode's requests, their RPCs and where their time went.
    LongestEpisode {
        start_s: f64,
        requests: u64,
        rpcs_per_request: f64,
        mean_rpc_ms: f64,
        /// Per request.
        per_request: Breakdown,
    },
    /// Episode lengths drift as stamps spread over a few seconds (R64).
    Drift {
        episodes: usize,
        early_ms: f64,
        late_ms: f64,
        revalidate_freq_s: u64,
    },
    /// Requests sleep on a local filesystem's lock during eviction cycles,
    /// so the pool's capacity falls below the arrival rate.
    LockSleep {
        start_s: f64,
        requests: u64,
        lock_ms_per_request: f64,
        held_ms_per_request: f64,
        workers: u32,
        capacity_per_s: f64,
        arriving_per_s: Option<f64>,
    },
    /// Requests refused (502): every worker busy and the backlog full.
    Refused {
        dropped: u64,
        arrived: u64,
        rate_pct: f64,
        workers: u32,
        listen_backlog: u32,
        max_backlog: u64,
        /// Calls that slept on the eviction lock (0: workers were held by
        /// slow requests).
        lock_blocked_calls: u64,
        max_lock_wait_ms: f64,
    },
    /// No request was refused.
    NoneRefused { arrived: u64 },
    /// The source's arithmetic treats every worker's RPCs as one queue.
    PublishedQueue {
        workers: u32,
        rpcs_per_worker: u32,
        slots: u32,
        rpc_ms: Vec<f64>,
        max_in_flight: u64,
    },
    /// The source counts every busy worker's calls as concurrent.
    PublishedConcurrent {
        workers: u32,
        calls_per_worker: u32,
        max_busy_workers: u64,
    },
    /// The stall the source reports, against the simulation's.
    PublishedStall {
        stall_ms: f64,
        longest_ms: f64,
        p99_ms: f64,
    },
    /// The 502 rate the source reports, against the simulation's.
    PublishedDrops { source_pct: f64, simulated_pct: f64 },
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A breakdown divided by `n` requests.
fn per(b: &Breakdown, n: f64) -> Breakdown {
    let mut o = b.clone();
    o.cpu_ms /= n;
    o.rpc_ms /= n;
    o.slot_wait_ms /= n;
    o.server_queue_ms /= n;
    o.iops_throttle_ms /= n;
    o.local_ms /= n;
    o.local_lock_ms /= n;
    o.backlog_ms /= n;
    o
}

/// The causes of the stalls and refusals of `r`, simulated from `sc`.
pub fn explain(sc: &Scenario, r: &Report) -> Vec<Cause> {
    let mut out = Vec::new();
    let p = &sc.params;
    let st = &r.stalls;
    let rpcs_per_req = sc.requests.iter().map(|q| q.rpc_count()).max().unwrap_or(0);
    if st.is_empty() {
        out.push(Cause::NoStall {
            stall_ms: p.stall_ms,
        });
    } else {
        let starts: Vec<f64> = st.iter().map(|s| s.start_s).collect();
        let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let lens: Vec<f64> = st.iter().map(|s| s.duration_ms).collect();
        let mut causes: Vec<&'static str> = st.iter().map(|s| s.cause).collect();
        causes.sort();
        causes.dedup();
        out.push(Cause::Episodes {
            count: st.len(),
            recur_s: (!gaps.is_empty()).then(|| median(gaps)),
            longest_ms: lens.iter().copied().fold(0.0, f64::max),
            median_ms: median(lens),
            causes,
        });
    }
    let validating =
        matches!(sc.workload, Workload::OpcacheIncludes { .. }) && r.validation.performed > 0;
    let on_nfs = match sc.workload {
        Workload::OpcacheIncludes { fs, .. } => fs == Fs::Nfs,
        Workload::File { .. } => r.local_fs.ops == 0,
    };
    let longest = st
        .iter()
        .max_by(|a, b| a.duration_ms.total_cmp(&b.duration_ms));
    if validating && on_nfs {
        let workers: Vec<f64> = st.iter().map(|s| s.max_workers_validating as f64).collect();
        out.push(Cause::SequentialChecks {
            rpcs_per_request: rpcs_per_req,
            revalidate_freq_s: p.validation.freq_s,
            workers_max: workers.iter().copied().fold(0.0, f64::max),
            workers_median: median(workers),
        });
        out.push(Cause::SlotUse {
            max_in_flight: r.slots.max_rpcs_in_flight,
            slots: if p.transport.session_slots > 0 {
                p.transport.session_slots
            } else {
                p.transport.xprt_slots
            },
            waited: r.slots.waited > 0,
            max_wait_ms: r.slots.max_wait_ms,
            mean_wait_ms: r.slots.mean_wait_ms,
        });
        if let Some(big) = longest.filter(|b| b.requests > 0 && b.rpcs > 0) {
            let n = big.requests as f64;
            out.push(Cause::LongestEpisode {
                start_s: big.start_s,
                requests: big.requests,
                rpcs_per_request: big.rpcs as f64 / n,
                mean_rpc_ms: big.mean_rpc_ms,
                per_request: per(&big.breakdown, n),
            });
        }
        if p.validation.freq_s > 0 && st.len() >= 6 {
            let k = st.len() / 3;
            out.push(Cause::Drift {
                episodes: k,
                early_ms: median(st[..k].iter().map(|s| s.duration_ms).collect()),
                late_ms: median(st[st.len() - k..].iter().map(|s| s.duration_ms).collect()),
                revalidate_freq_s: p.validation.freq_s,
            });
        }
    }
    if r.local_fs.blocked_ops > 0 {
        if let Some(big) = longest {
            let n = big.requests.max(1) as f64;
            let b = &big.breakdown;
            // Time a request holds its worker (the backlog wait is before that).
            let held = (b.cpu_ms + b.local_ms + b.local_lock_ms + b.rpc_ms) / n;
            out.push(Cause::LockSleep {
                start_s: big.start_s,
                requests: big.requests,
                lock_ms_per_request: b.local_lock_ms / n,
                held_ms_per_request: held,
                workers: p.pool.max_children,
                capacity_per_s: p.pool.max_children as f64 / (held / 1e3),
                arriving_per_s: match p.arrivals {
                    Arrivals::Poisson { rate_per_s } | Arrivals::Periodic { rate_per_s } => {
                        Some(rate_per_s)
                    }
                    Arrivals::Replay => None,
                },
            });
        }
    }
    if r.requests.dropped > 0 {
        out.push(Cause::Refused {
            dropped: r.requests.dropped,
            arrived: r.requests.arrived,
            rate_pct: r.requests.drop_rate_pct,
            workers: p.pool.max_children,
            listen_backlog: p.pool.listen_backlog,
            max_backlog: r.pool.max_backlog,
            lock_blocked_calls: r.local_fs.blocked_ops,
            max_lock_wait_ms: r.local_fs.max_lock_wait_ms,
        });
    } else if r.requests.arrived > 0 {
        out.push(Cause::NoneRefused {
            arrived: r.requests.arrived,
        });
    }
    if let Some(pb) = &sc.published {
        out.extend(compare_published(pb, r, on_nfs));
    }
    out
}

/// Where the source's own arithmetic differs from the simulation.
fn compare_published(pb: &Published, r: &Report, on_nfs: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    if let (Some(w), Some(n), Some(s), true) = (pb.workers, pb.rpcs_per_worker, pb.slots, on_nfs) {
        out.push(Cause::PublishedQueue {
            workers: w,
            rpcs_per_worker: n,
            slots: s,
            rpc_ms: pb.rpc_ms.clone(),
            max_in_flight: r.slots.max_rpcs_in_flight,
        });
    } else if let (Some(w), Some(n)) = (pb.workers, pb.rpcs_per_worker) {
        out.push(Cause::PublishedConcurrent {
            workers: w,
            calls_per_worker: n,
            max_busy_workers: r.pool.max_busy_workers,
        });
    }
    if let Some(ms) = pb.stall_ms {
        out.push(Cause::PublishedStall {
            stall_ms: ms,
            longest_ms: r.stalls.iter().map(|s| s.duration_ms).fold(0.0, f64::max),
            p99_ms: r.ttfb_ms.p99,
        });
    }
    if let Some(pct) = pb.drop_rate_pct {
        out.push(Cause::PublishedDrops {
            source_pct: pct,
            simulated_pct: r.requests.drop_rate_pct,
        });
    }
    out
}
