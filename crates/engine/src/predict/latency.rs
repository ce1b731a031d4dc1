//! The latency columns of `statstorm predict`: each request's filesystem
//! calls, with the RPCs the NFS model predicts for them, replayed through
//! the discrete-event simulator (`statstorm-sim`, docs/simulator.md) under
//! the recorded mount (before) and the proposed one (after).
//!
//! A request becomes a [`statstorm_sim::RequestSpec`]: its calls in time order, each the
//! list of RPCs the NFS model charges to it (sent one after another: a PHP
//! worker is single-threaded and every call is synchronous) or, when it
//! sends none (answered by the client caches, or not on NFS), one
//! local-filesystem call; between the calls, CPU time. The CPU time of a
//! request is what the trace shows outside its filesystem calls: recorded
//! wall time minus the recorded durations (`strace -T`) of the calls,
//! spread between the calls in proportion to the recorded gaps, the same
//! before and after. Every figure is an estimate and the report says so,
//! with the parameters assumed.
//!
//! A child module of `predict` so it can fill the report's fields; the
//! report's structs stay in `predict/mod.rs`.

use super::{Error, Result};
use crate::column::{AtTime, Column, Scattered};
use crate::nfs_setup::{Mount, OpRpcs, OpRpcsLists};
use crate::sorted::{Keyed, SortedSpill};
use serde::Serialize;
use statstorm_nfs::{MountOptions, Vers};
use statstorm_php::Workload;
use statstorm_sim::{
    simulate_replay_stream, simulate_requests_each, Arrivals, LocalFs, QuickParams, RequestSpec,
    Step, Transport,
};
use statstorm_trace::op::OpKind;
use std::collections::BTreeMap;

/// Cost of a filesystem call that sends no RPC, in microseconds: a cached
/// `stat()` measured on the development machine (Linux 6.18, ext4):
/// 1,000,000 `os.stat("/usr/share/php")` calls in `python3` minus an empty
/// loop gave 1.6 µs per call, the Python call overhead included (a PHP
/// loop of `clearstatcache(); stat()` gave 2.3 µs). docs/simulator.md has
/// the commands.
pub const LOCAL_OP_US: f64 = 1.6;

/// Seed of the simulator's random streams (fixed: the same input gives the
/// same report).
pub const SEED: u64 = 1;

/// Synthetic arrivals (`--rate`) stop after this many seconds, or earlier
/// so that about [`MAX_SYNTHETIC_REQUESTS`] requests arrive.
pub const SYNTHETIC_DURATION_S: f64 = 600.0;
pub const MAX_SYNTHETIC_REQUESTS: f64 = 20_000.0;

/// The simulator flags of `predict` (see [`QuickParams`]).
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// php-fpm workers (pm.max_children) for the latency simulation
    /// [default: 50].
    pub workers: Option<u32>,
    /// Synthetic Poisson arrivals at this many requests per second, the
    /// trace's requests used in turn [default: the trace's own start times].
    pub rate: Option<f64>,
    /// RPC slots: NFSv4.1+ session slots [default: 64], or the SunRPC slot
    /// table on NFSv3/v4.0 [default: 65536].
    pub slots: Option<u32>,
    /// Network round trip to the NFS server, ms [default: 0.5].
    pub rtt: Option<f64>,
    /// Server time per RPC, ms, fixed [default: 0.5].
    pub server_latency: Option<f64>,
    /// Server IOPS budget (token bucket; RPCs queue when it is empty)
    /// [default: 0 = none].
    pub iops: Option<f64>,
    /// IOPS bucket size [default: one second of --iops].
    pub burst: Option<f64>,
    /// php-fpm's listen queue (`listen.backlog`) [default:
    /// [`DEFAULT_LISTEN_BACKLOG`]].
    pub listen_backlog: Option<u32>,
}

/// php-fpm 8.2's listen queue when its pool states none: php-fpm passes
/// -1 to listen() (FPM_BACKLOG_DEFAULT since PHP 8.2), which Linux reads
/// as net.core.somaxconn, 4096 since Linux 5.4
/// ([`crate::evidence::fpm::DEFAULT_LISTEN_BACKLOG`]); 511 was php-fpm's
/// own default before 8.2.
pub const DEFAULT_LISTEN_BACKLOG: u32 = crate::evidence::fpm::DEFAULT_LISTEN_BACKLOG;

impl SimOptions {
    fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let flags: [(&'static str, bool); 8] = [
            ("--workers", self.workers.is_some()),
            ("--rate", self.rate.is_some()),
            ("--slots", self.slots.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--server-latency", self.server_latency.is_some()),
            ("--iops", self.iops.is_some()),
            ("--burst", self.burst.is_some()),
            ("--listen-backlog", self.listen_backlog.is_some()),
        ];
        for (f, on) in flags {
            if on {
                v.push(f);
            }
        }
        v
    }

    /// The flags over [`QuickParams`]' defaults, checked (messages name the
    /// flag).
    fn quick(&self) -> Result<QuickParams> {
        let d = QuickParams::default();
        let q = QuickParams {
            workers: self.workers.unwrap_or(d.workers),
            rate_per_s: self.rate.unwrap_or(d.rate_per_s),
            slots: self.slots.unwrap_or(d.slots),
            rtt_ms: self.rtt.unwrap_or(d.rtt_ms),
            server_latency_ms: self.server_latency.unwrap_or(d.server_latency_ms),
            iops: self.iops.unwrap_or(d.iops),
            burst: self.burst.or(d.burst),
            duration_s: d.duration_s,
        };
        if q.workers == 0 || q.workers > statstorm_sim::MAX_WORKERS {
            return Err(Error::Sim(format!(
                "--workers must be 1..={}, got {}",
                statstorm_sim::MAX_WORKERS,
                q.workers
            )));
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(Error::Sim(format!("--rate must be a number > 0, got {r}")));
            }
        }
        if self.slots == Some(0) {
            return Err(Error::Sim("--slots must be >= 1".into()));
        }
        for (flag, v) in [
            ("--rtt", q.rtt_ms),
            ("--server-latency", q.server_latency_ms),
            ("--iops", q.iops),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::Sim(format!("{flag} must be a number >= 0, got {v}")));
            }
        }
        if let Some(b) = q.burst {
            if !(b.is_finite() && b >= 1.0) {
                return Err(Error::Sim(format!(
                    "--burst must be a number >= 1, got {b}"
                )));
            }
            if q.iops == 0.0 {
                return Err(Error::Sim("--burst needs --iops".into()));
            }
        }
        Ok(q)
    }
}

/// `latency` of `statstorm.predict/1`.
#[derive(Debug, Serialize)]
pub struct LatencyOut {
    /// False without NFS options: no RPCs, so no latency is invented.
    pub simulated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<LatencySide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<LatencySide>,
    /// The trace's own request wall times (for comparison with `before`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Quantiles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<ParamsOut>,
    /// Everything assumed, one sentence each; printed with the figures.
    pub assumptions: Vec<String>,
}

/// Simulated TTFB of one side (estimates).
#[derive(Debug, Serialize)]
pub struct LatencySide {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Requests refused (502): every worker busy and the backlog full.
    pub dropped: u64,
    pub served: u64,
    /// RPCs the simulated requests carried (the NFS model's, per call).
    pub rpcs: u64,
    /// Calls that sent no RPC (charged the local cost).
    pub local_calls: u64,
    pub max_slot_wait_ms: f64,
    pub mean_slot_wait_ms: f64,
    pub server_utilisation: f64,
    /// The longest an RPC waited at the server for its IOPS budget
    /// (`--iops`; none by default: the server's threads are unlimited).
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub max_server_wait_ms: f64,
    /// RPCs the server served slowly for want of a token (an IOPS budget
    /// that slows rather than queues).
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub throttled_rpcs: u64,
    /// Of the stalled requests' time (the simulator's stalls), the share
    /// spent waiting for the server's IOPS budget.
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub stall_iops_share: f64,
}

/// Of `stalls`' time, the share waiting for the IOPS budget.
fn iops_share(stalls: &[statstorm_sim::Stall]) -> f64 {
    let (mut thr, mut all) = (0.0, 0.0);
    for s in stalls {
        thr += s.breakdown.iops_throttle_ms;
        all += s.breakdown.total_ms();
    }
    if all > 0.0 {
        (thr / all * 1e4).round() / 1e4
    } else {
        0.0
    }
}

/// Quantiles of the recorded wall times (nearest rank).
#[derive(Debug, Serialize)]
pub struct Quantiles {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The simulator parameters used (defaults or flags).
#[derive(Debug, Serialize)]
pub struct ParamsOut {
    /// "replay" (the trace's start times) or "poisson".
    pub arrivals: &'static str,
    pub rate_per_s: Option<f64>,
    pub duration_s: f64,
    pub workers: u32,
    pub listen_backlog: u32,
    pub slots_before: SlotsOut,
    pub slots_after: SlotsOut,
    pub rtt_ms: f64,
    pub server_latency_ms: f64,
    pub iops: Option<f64>,
    pub burst: Option<f64>,
    pub local_op_us: f64,
    pub seed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SlotsOut {
    pub vers: &'static str,
    pub session_slots: u32,
    pub nconnect: u32,
    pub xprt_slots: u32,
}

/// Per-request latencies by the workload's index (read back by index),
/// and the summary.
pub struct Computed {
    pub before: Column<Option<f64>>,
    pub after: Column<Option<f64>>,
    pub out: LatencyOut,
}

/// The report part when there is nothing to simulate.
pub fn not_simulated(a: &SimOptions) -> LatencyOut {
    let mut reason = "latency is not simulated: no NFS options (give --from-mount or --mounts \
        and --nfs-root) and no -T durations in the capture (record with strace -T): neither RPCs \
        nor call times to time"
        .to_string();
    let given = a.given();
    if !given.is_empty() {
        reason.push_str(&format!(" ({} ignored)", given.join(", ")));
    }
    LatencyOut {
        simulated: false,
        reason: Some(reason),
        before: None,
        after: None,
        recorded: None,
        params: None,
        assumptions: Vec::new(),
    }
}

/// The transport of one side: `--slots` is the session slot table on
/// NFSv4.1+ (R44), the SunRPC slot table otherwise (R43); `nconnect` from
/// the mount options (R45).
fn transport(m: &MountOptions, slots: Option<u32>) -> (Transport, SlotsOut) {
    let v = m.vers();
    let session = matches!(v, Vers::V4_1 | Vers::V4_2);
    let d = Transport::default();
    let t = Transport {
        session_slots: if session {
            slots.unwrap_or(QuickParams::default().slots)
        } else {
            0
        },
        nconnect: m.nconnect().clamp(1, 16),
        xprt_slots: if session {
            d.xprt_slots
        } else {
            slots.unwrap_or(d.xprt_slots)
        },
    };
    let o = SlotsOut {
        vers: v.as_str(),
        session_slots: t.session_slots,
        nconnect: t.nconnect,
        xprt_slots: t.xprt_slots,
    };
    (t, o)
}

/// Times a request started and ended, µs (the trace's clock).
#[derive(Clone, Copy)]
struct Span {
    start_us: i64,
    end_us: i64,
}

/// One request (`rpcs`: each of its calls' start and RPCs): CPU spread
/// over the recorded gaps, then each call.
fn spec(
    p: &Span,
    rpcs: &OpRpcs,
    cpu_us: u64,
    t0_us: i64,
    local: Option<&BTreeMap<OpKind, u64>>,
    calls: &mut (u64, u64),
) -> RequestSpec {
    let wall = (p.end_us - p.start_us).max(0) as u128;
    let cpu_ns = cpu_us as u128 * 1000;
    let mut steps = Vec::new();
    let mut spent: u128 = 0;
    let cpu_at = |pos_us: i64| -> u128 {
        if wall == 0 {
            return 0;
        }
        let pos = (pos_us - p.start_us).clamp(0, wall as i64) as u128;
        cpu_ns * pos / wall
    };
    // The simulator adds up a run of CPU steps as one (`Engine::advance`:
    // CPU time touches nothing shared), so a run is kept as one step.
    fn cpu(steps: &mut Vec<Step>, ns: u64) {
        if let Some(Step::Cpu { ns: last }) = steps.last_mut() {
            if let Some(sum) = last.checked_add(ns) {
                *last = sum;
                return;
            }
        }
        steps.push(Step::Cpu { ns });
    }
    if let Some(costs) = local {
        // storage that is not NFS: every step is CPU time (the calls', at
        // their kind's cost, and the request's own), so the request is one
        // step of their sum (the same as the steps one by one: see `cpu`)
        let ns = |k: Option<OpKind>| -> u128 {
            let us = k
                .and_then(|k| costs.get(&k).copied())
                .map_or(LOCAL_OP_US, |u| u as f64);
            (us * 1000.0) as u64 as u128
        };
        let listed = (0..rpcs.len()).map(|i| (rpcs.kind(i), 1u64));
        let counted = rpcs.counted().iter().map(|&(k, n)| (Some(k), n));
        let (mut n, mut total) = (0u64, cpu_ns);
        for (k, c) in listed.chain(counted) {
            n += c;
            total += c as u128 * ns(k);
        }
        calls.1 += n;
        if n > 0 || cpu_ns > 0 {
            loop {
                let part = total.min(u64::MAX as u128);
                steps.push(Step::Cpu { ns: part as u64 });
                total -= part;
                if total == 0 {
                    break;
                }
            }
        }
        return RequestSpec {
            start_ns: Some(((p.start_us - t0_us).max(0) as u64) * 1000),
            steps,
        };
    }
    // stable: calls at one time keep the order the NFS model replayed them in
    let mut order: Vec<usize> = (0..rpcs.len()).collect();
    order.sort_by_key(|&i| rpcs.t_us(i));
    for i in order {
        let c = cpu_at(rpcs.t_us(i)).saturating_sub(spent);
        if c > 0 {
            cpu(&mut steps, c as u64);
            spent += c;
        }
        let sent = rpcs.of(i);
        if sent.is_empty() {
            calls.1 += 1;
            steps.push(Step::Local { key: None });
        } else {
            calls.0 += sent.len() as u64;
            steps.push(Step::Rpcs {
                ops: sent.iter().map(|r| r.name().to_string()).collect(),
                key: None,
            });
        }
    }
    if cpu_ns > spent {
        cpu(&mut steps, (cpu_ns - spent) as u64);
    }
    RequestSpec {
        start_ns: Some(((p.start_us - t0_us).max(0) as u64) * 1000),
        steps,
    }
}

/// Nearest-rank quantiles of `n` values given in ascending order.
fn quantiles(
    n: usize,
    sorted: impl Iterator<Item = std::io::Result<f64>>,
) -> std::io::Result<Option<Quantiles>> {
    if n == 0 {
        return Ok(None);
    }
    let rank = |p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
    let (r50, r90, r99) = (rank(0.5), rank(0.9), rank(0.99));
    let mut q = Quantiles {
        p50_ms: 0.0,
        p90_ms: 0.0,
        p99_ms: 0.0,
        max_ms: 0.0,
    };
    for (k, v) in sorted.enumerate() {
        let v = v?;
        if k == r50 {
            q.p50_ms = v;
        }
        if k == r90 {
            q.p90_ms = v;
        }
        if k == r99 {
            q.p99_ms = v;
        }
        q.max_ms = v;
    }
    Ok(Some(q))
}

/// A request's recorded wall time, µs.
#[derive(Clone, Serialize, serde::Deserialize)]
struct Wall(i64);

impl Keyed for Wall {
    type Key = i64;
    fn key(&self) -> i64 {
        self.0
    }
}

/// Where the calls go: one NFS mount (one RPC transport), or storage that
/// is not NFS, where each call takes a time of its kind.
pub enum Storage<'a> {
    Nfs(&'a Mount),
    /// Per side (before, after), each kind's time per call, µs: the
    /// capture's median (`-T`) before; after, the same or the proposed
    /// `--call-latency`. A kind without one costs [`LOCAL_OP_US`].
    Local([&'a BTreeMap<OpKind, u64>; 2]),
}

/// Simulates both sides on `storage`.
/// The requests are `w`'s (their times read back as the simulator makes
/// each), `rec` the recorded calls (the time each request's spent in the
/// kernel: [`crate::capture::Recorded::fs_time`], in the same order),
/// `op_rpcs` each side's calls per request of `w`, with their starts
/// and RPCs (before, after: the side's own NFS replay,
/// `side::SideRun::op_rpcs`). The arrivals (by start) and the recorded
/// walls (for their quantiles) are sorted through temporary files, and
/// each request's TTFB is written out as the simulator finishes it: the
/// returned columns are read by `w`'s index, and what is held is the
/// requests in flight.
pub fn compute(
    a: &SimOptions,
    storage: Storage,
    rec: &crate::capture::Recorded,
    w: &Workload,
    op_rpcs: [&OpRpcsLists; 2],
) -> Result<Computed> {
    let q = a.quick()?;
    let n = w.len();
    if n == 0 {
        let mut o = not_simulated(a);
        o.reason = Some("latency is not simulated: the trace has no requests".into());
        return Ok(Computed {
            before: Column::new(),
            after: Column::new(),
            out: o,
        });
    }
    let mut assumptions = vec![
        "every latency figure is an estimate from the simulator (statstorm-sim), not a measurement"
            .to_string(),
    ];
    // CPU time: recorded wall time minus recorded filesystem call time
    // (each request's read back as the simulator makes it: `make` below);
    // the requests' first and last start, the calls with and without a
    // duration, and the recorded wall times (their quantiles), folded
    let fs_of = |i: usize| -> std::io::Result<crate::capture::FsTime> {
        if i < rec.len() {
            rec.fs_time(i)
        } else {
            Ok(crate::capture::FsTime::default())
        }
    };
    let (mut timed, mut untimed) = (0u64, 0u64);
    let (mut t0, mut last) = (i64::MAX, i64::MIN);
    // (the arrivals and the walls sorted on their way to a temporary file)
    let mut walls = SortedSpill::<Wall>::new();
    let mut by_start = SortedSpill::<AtTime>::new();
    let mut failed_fs = None;
    w.each_time(&mut |i, start_us, end_us| {
        match fs_of(i) {
            Ok(f) => {
                timed += f.timed;
                untimed += f.untimed;
            }
            Err(e) => {
                failed_fs.get_or_insert(e);
            }
        }
        t0 = t0.min(start_us);
        last = last.max(start_us);
        let put = u32::try_from(i)
            .map_err(|_| std::io::Error::other("more than 2^32 requests"))
            .and_then(|i| by_start.push(AtTime(start_us, i)))
            .and_then(|()| walls.push(Wall((end_us - start_us).max(0))));
        if let Err(e) = put {
            failed_fs.get_or_insert(e);
        }
    })
    .map_err(Error::spill)?;
    let (by_start, walls) = (by_start.finish(), walls.finish());
    if let Some(e) = failed_fs {
        return Err(Error::spill(e));
    }
    assumptions.push(
        "CPU (and any other non-filesystem) time of a request = its recorded wall time minus the \
         recorded durations (strace -T) of its filesystem calls, spread between the calls in \
         proportion to the recorded gaps, the same before and after"
            .into(),
    );
    assumptions.push(
        "the trace's timings include strace's own cost (ptrace stops: about 45 us per syscall on \
         the development machine, docs/simulator.md), which falls between the calls and so \
         counts as CPU time: latencies run high by that much per recorded syscall"
            .into(),
    );
    if untimed > 0 {
        assumptions.push(format!(
            "{untimed} of {} recorded filesystem calls have no duration (no strace -T); their time \
             counts as CPU time",
            timed + untimed
        ));
    }
    assumptions.push(match storage {
        Storage::Nfs(_) => format!(
            "the calls of a request run one after another (a PHP worker is single-threaded); a call \
             sends the RPCs the NFS model predicts for it in sequence; a call that sends none (client \
             caches, or not on NFS) costs {LOCAL_OP_US} µs (a cached stat() on the development \
             machine); RPCs caused by --server-change belong to no request"
        ),
        Storage::Local(_) => {
            "the calls of a request run one after another (a PHP worker is single-threaded)".into()
        }
    });
    // arrivals
    let (arrivals, duration_s, kind) = match a.rate {
        None => {
            let d = ((last - t0) as f64 / 1e6).max(1.0);
            assumptions.push(format!(
                "arrivals: the {} requests arrive at their recorded start times ({:.3} s from \
                 first to last); --rate R replays them as a Poisson stream instead",
                n,
                (last - t0) as f64 / 1e6
            ));
            (Arrivals::Replay, d, "replay")
        }
        Some(r) => {
            let d = SYNTHETIC_DURATION_S.min(MAX_SYNTHETIC_REQUESTS / r);
            assumptions.push(format!(
                "arrivals: Poisson at {r}/s for {d} s (--rate), the {} requests used in turn; each \
                 keeps the RPCs the NFS model predicted at its recorded time (the caches' \
                 dependence on the rate is not re-modelled); a request's latency_ms is the mean \
                 over its runs",
                n
            ));
            (Arrivals::Poisson { rate_per_s: r }, d, "poisson")
        }
    };
    let mut base = q.to_params();
    base.pool.listen_backlog = a.listen_backlog.unwrap_or(DEFAULT_LISTEN_BACKLOG);
    base.arrivals = arrivals;
    base.duration_s = duration_s;
    base.local_fs = LocalFs {
        op_us: LOCAL_OP_US,
        ..LocalFs::default()
    };
    let ((tb, sb), (ta, sa)) = match &storage {
        Storage::Nfs(m) => (
            transport(&m.recorded, a.slots),
            transport(&m.proposed, a.slots),
        ),
        Storage::Local(_) => {
            let none = || {
                (
                    Transport::default(),
                    SlotsOut {
                        vers: "none (not NFS)",
                        session_slots: 0,
                        nconnect: 0,
                        xprt_slots: 0,
                    },
                )
            };
            (none(), none())
        }
    };
    let flag = |f: &str, given: bool| {
        if given {
            format!("({f})")
        } else {
            format!("({f}, default)")
        }
    };
    assumptions.push(format!(
        "php-fpm pool: {} workers {}, listen.backlog {} {}; a full backlog refuses the \
         connection (502)",
        base.pool.max_children,
        flag("--workers", a.workers.is_some()),
        base.pool.listen_backlog,
        if a.listen_backlog.is_some() {
            "(--listen-backlog)".to_string()
        } else {
            "(--listen-backlog, default: php-fpm 8.2 listens with -1, i.e. net.core.somaxconn)"
                .to_string()
        }
    ));
    let slots_text = |s: &SlotsOut| {
        if s.session_slots > 0 {
            format!(
                "vers={}: {} session slots, nconnect={}",
                s.vers, s.session_slots, s.nconnect
            )
        } else {
            format!(
                "vers={}: no session, {} SunRPC slots per connection, nconnect={}",
                s.vers, s.xprt_slots, s.nconnect
            )
        }
    };
    if let Storage::Local(_) = &storage {
        let nfs_only: Vec<&str> = [
            ("--slots", a.slots.is_some()),
            ("--rtt", a.rtt.is_some()),
            ("--server-latency", a.server_latency.is_some()),
            ("--iops", a.iops.is_some()),
            ("--burst", a.burst.is_some()),
        ]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(f, _)| *f)
        .collect();
        if !nfs_only.is_empty() {
            assumptions.push(format!(
                "{} ignored: the storage is not NFS (no RPCs)",
                nfs_only.join(", ")
            ));
        }
    }
    if let Storage::Local([before, after]) = &storage {
        let list = |m: &BTreeMap<OpKind, u64>| {
            m.iter()
                .map(|(k, us)| format!("{} {us} µs", format!("{k:?}").to_lowercase()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        assumptions.push(format!(
            "storage not NFS: a call takes its kind's time, the capture's median (strace -T): {}; after: {}; a kind with no time costs {LOCAL_OP_US} µs; workers do not wait for each other at the storage (its own queueing, a lock or an eviction stall, is not modelled beyond the times recorded)",
            if before.is_empty() { "none".to_string() } else { list(before) },
            if after.is_empty() { "none".to_string() } else { list(after) },
        ));
    }
    if let Storage::Nfs(_) = &storage {
        assumptions.push(format!(
            "RPC slots {}: before {}; after {}",
            flag("--slots", a.slots.is_some()),
            slots_text(&sb),
            slots_text(&sa)
        ));
        assumptions.push(format!(
        "server: round trip {} ms {}, {} ms per RPC, fixed {}, unlimited nfsd threads, {}",
        q.rtt_ms,
        flag("--rtt", a.rtt.is_some()),
        q.server_latency_ms,
        flag("--server-latency", a.server_latency.is_some()),
        match base.server.iops.as_ref() {
            Some(i) => format!(
                "IOPS budget {}/s with a bucket of {} (--iops, --burst); RPCs queue when it is empty",
                i.rate_per_s, i.burst
            ),
            None => "no IOPS budget (--iops)".into(),
        }
    ));
    }
    assumptions.push(format!("random streams seeded with {SEED}"));
    // each request's arrival, ns after the first
    let at_ns = |s: i64| ((s - t0).max(0) as u64) * 1000;
    // build and run both sides
    let mut sides = Vec::new();
    for (after, t) in [(false, tb), (true, ta)] {
        let per_op = op_rpcs[usize::from(after)];
        let mut calls = (0u64, 0u64);
        let mut failed: Option<std::io::Error> = None;
        // request i's shape, made when the simulator needs it (its calls
        // read back from the side's lists)
        let local = match &storage {
            Storage::Local(c) => Some(c[usize::from(after)]),
            Storage::Nfs(_) => None,
        };
        let mut make = |i: usize| {
            let listed = per_op.get(i).unwrap_or_else(|e| {
                failed.get_or_insert(e);
                std::borrow::Cow::Owned(OpRpcs::default())
            });
            let (p, cpu_us) = match w.times(i).and_then(|(start_us, end_us)| {
                let wall = (end_us - start_us).max(0) as u64;
                Ok((Span { start_us, end_us }, wall.saturating_sub(fs_of(i)?.us)))
            }) {
                Ok(x) => x,
                Err(e) => {
                    failed.get_or_insert(e);
                    (
                        Span {
                            start_us: t0,
                            end_us: t0,
                        },
                        0,
                    )
                }
            };
            spec(&p, &listed, cpu_us, t0, local, &mut calls)
        };
        let mut params = base.clone();
        params.transport = t;
        // each request's TTFB as it is done, sorted by index on its way
        // to a temporary file
        let mut per = Scattered::<Option<f64>>::new();
        let mut put_failed: Option<std::io::Error> = None;
        let mut put = |i: usize, v: Option<f64>| {
            if let Err(e) = per.put(i, v) {
                put_failed.get_or_insert(e);
            }
        };
        let mut read_failed: Option<std::io::Error> = None;
        let r = if params.arrivals == Arrivals::Replay {
            // each request read back, made as it arrives and dropped once
            // done: the requests in flight in memory, not the capture's
            // calls, nor a list of arrivals or TTFBs
            let due = by_start.iter().map_while(|a| match a {
                Ok(AtTime(s, i)) => Some((at_ns(s), i)),
                Err(e) => {
                    read_failed.get_or_insert(e);
                    None
                }
            });
            simulate_replay_stream(due, at_ns(last), &mut make, &mut put, &params, SEED)
        } else {
            // (synthetic arrivals take the requests in turn: all compiled)
            simulate_requests_each((0..n).map(&mut make), &params, SEED).map(|(r, each)| {
                for (i, o) in each.iter().enumerate() {
                    put(i, o.mean_ttfb_ms);
                }
                r
            })
        }
        .map_err(Error::Sim)?;
        if let Some(e) = failed.or(read_failed).or(put_failed) {
            return Err(Error::spill(e));
        }
        let per = per.finish(n, &None).map_err(Error::spill)?;
        let side = LatencySide {
            p50_ms: r.ttfb_ms.p50,
            p90_ms: r.ttfb_ms.p90,
            p99_ms: r.ttfb_ms.p99,
            max_ms: r.ttfb_ms.max,
            mean_ms: r.ttfb_ms.mean,
            dropped: r.requests.dropped,
            served: r.requests.served,
            rpcs: calls.0,
            local_calls: calls.1,
            max_slot_wait_ms: r.slots.max_wait_ms,
            mean_slot_wait_ms: r.slots.mean_wait_ms,
            server_utilisation: r.server.utilisation,
            max_server_wait_ms: r.server.max_queue_wait_ms,
            throttled_rpcs: r.server.throttled_ops,
            stall_iops_share: iops_share(&r.stalls),
        };
        sides.push((side, per));
    }
    let (sa_side, a_per) = sides.pop().expect("after side");
    let (sb_side, b_per) = sides.pop().expect("before side");
    Ok(Computed {
        before: b_per,
        after: a_per,
        out: LatencyOut {
            simulated: true,
            reason: None,
            before: Some(sb_side),
            after: Some(sa_side),
            recorded: quantiles(
                walls.len(),
                walls.iter().map(|w| w.map(|w| w.0 as f64 / 1e3)),
            )
            .map_err(Error::spill)?,
            params: Some(ParamsOut {
                arrivals: kind,
                rate_per_s: a.rate,
                duration_s,
                workers: base.pool.max_children,
                listen_backlog: base.pool.listen_backlog,
                slots_before: sb,
                slots_after: sa,
                rtt_ms: q.rtt_ms,
                server_latency_ms: q.server_latency_ms,
                iops: base.server.iops.as_ref().map(|i| i.rate_per_s),
                burst: base.server.iops.as_ref().map(|i| i.burst),
                local_op_us: LOCAL_OP_US,
                seed: SEED,
            }),
            assumptions,
        },
    })
}
