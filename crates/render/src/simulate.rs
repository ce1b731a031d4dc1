//! `statstorm simulate` as text: the figures of the run and the causes of
//! its stalls and refusals in words.

use statstorm_engine::simulate::explain::{explain, Cause};
use statstorm_engine::simulate::scenario::Scenario;
use statstorm_sim::Report;
use std::fmt::Write as _;

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds, picking the unit.
fn dur(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1e3)
    } else if ms >= 1000.0 {
        format!("{:.2} s", ms / 1e3)
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.0} us", ms * 1e3)
    }
}

fn cause_text(c: &str) -> &'static str {
    match c {
        "backlog" => "waiting in the listen backlog for a free worker",
        "slot_wait" => "waiting for an RPC slot",
        "server_queue" => "waiting for a server thread",
        "iops_throttle" => "the server's IOPS budget ran out (operations queued or slowed)",
        "rpc_latency" => "sequential RPCs at their normal round trip",
        "local_fs" => "local filesystem calls",
        "local_lock" => "local filesystem calls sleeping on a lock",
        _ => "CPU time",
    }
}

/// The simulation's report as text, with the explanation of its stalls.
pub fn text(sc: &Scenario, r: &Report) -> String {
    let p = &sc.params;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "statstorm simulate: {} (seed {}, {} s of arrivals; an estimate from the model and the parameters below)",
        sc.name, r.seed, r.duration_s
    );
    if !sc.description.is_empty() {
        let _ = writeln!(o, "  {}", sc.description.trim());
    }
    let rq = &r.requests;
    let _ = writeln!(
        o,
        "\nrequests  arrived {}  served {}  refused (502) {} = {:.4}%",
        thousands(rq.arrived),
        thousands(rq.served),
        thousands(rq.dropped),
        rq.drop_rate_pct
    );
    let t = &r.ttfb_ms;
    let _ = writeln!(
        o,
        "TTFB      p50 {}  p90 {}  p99 {}  max {}  mean {}",
        dur(t.p50),
        dur(t.p90),
        dur(t.p99),
        dur(t.max),
        dur(t.mean)
    );
    let s = &r.slots;
    let session = if s.session_slots > 0 {
        format!("{} session slots", s.session_slots)
    } else {
        "no session".into()
    };
    let _ = writeln!(
        o,
        "slots     {session}, nconnect {} x {} transport slots: {} RPCs, {} waited (max {}, mean {}); at most {} RPCs in flight",
        s.nconnect,
        s.xprt_slots,
        thousands(s.rpcs),
        thousands(s.waited),
        dur(s.max_wait_ms),
        dur(s.mean_wait_ms),
        s.max_rpcs_in_flight
    );
    let sv = &r.server;
    let ops: Vec<String> = sv
        .ops
        .iter()
        .map(|(k, v)| format!("{k} {}", thousands(*v)))
        .collect();
    let busy = if p.server.threads == 0 {
        format!(
            "unlimited threads, {:.3} ops in service on average",
            sv.utilisation
        )
    } else {
        format!(
            "{} threads, utilisation {:.2}%",
            p.server.threads,
            sv.utilisation * 100.0
        )
    };
    let _ = writeln!(
        o,
        "server    rtt {} ms, {busy}; ops {}; queue wait mean {} max {}",
        p.server.rtt_ms,
        if ops.is_empty() {
            "none".into()
        } else {
            ops.join(", ")
        },
        dur(sv.mean_queue_wait_ms),
        dur(sv.max_queue_wait_ms)
    );
    if let (Some(i), Some(min)) = (&p.server.iops, sv.token_min) {
        let _ = writeln!(
            o,
            "          IOPS budget {}/s, burst {}, when empty: {:?}; lowest token level {min}; {} ops served throttled",
            i.rate_per_s,
            i.burst,
            i.when_empty,
            thousands(sv.throttled_ops)
        );
    }
    let pl = &r.pool;
    let _ = writeln!(
        o,
        "pool      {} workers, listen backlog {}: at most {} busy, backlog at most {}, mean backlog wait {}",
        pl.max_children,
        pl.listen_backlog,
        pl.max_busy_workers,
        pl.max_backlog,
        dur(pl.mean_backlog_wait_ms)
    );
    if r.local_fs.ops > 0 {
        let l = &r.local_fs;
        let _ = writeln!(
            o,
            "local fs  {} calls, {} evictions, {} calls slept on the lock (longest {})",
            thousands(l.ops),
            thousands(l.evictions),
            thousands(l.blocked_ops),
            dur(l.max_lock_wait_ms)
        );
    }
    let v = &r.validation;
    if v.performed + v.skipped > 0 {
        let _ = writeln!(
            o,
            "checks    {} timestamp checks made, {} skipped (stamp fresh); at most {} workers checking at once",
            thousands(v.performed),
            thousands(v.skipped),
            v.max_workers_at_once
        );
    }
    for l in &r.littles_law {
        let _ = writeln!(
            o,
            "Little    {}: mean in flight {:.4} vs throughput x latency {:.4} (rel err {:.1e})",
            l.name, l.in_flight_mean, l.throughput_x_latency, l.rel_err
        );
    }
    let _ = writeln!(
        o,
        "\nstalls    {} episodes with requests slower than {} ms",
        r.stalls.len(),
        p.stall_ms
    );
    if !r.stalls.is_empty() {
        let _ = writeln!(
            o,
            "  {:>9} {:>10} {:>8} {:>10} {:>8} {:>8} {:>6}  cause",
            "start_s", "length", "requests", "max TTFB", "workers", "in-fl.", "502"
        );
        for st in r.stalls.iter().take(12) {
            let _ = writeln!(
                o,
                "  {:>9.1} {:>10} {:>8} {:>10} {:>8} {:>8} {:>6}  {}",
                st.start_s,
                dur(st.duration_ms),
                st.requests,
                dur(st.max_ttfb_ms),
                st.max_workers_validating,
                st.max_rpcs_in_flight,
                st.dropped,
                st.cause
            );
        }
        if r.stalls.len() > 12 {
            let _ = writeln!(
                o,
                "  ... {} more (all in --format json)",
                r.stalls.len() - 12
            );
        }
    }
    let _ = writeln!(o, "\nwhy");
    for line in explain(sc, r).iter().map(words) {
        let _ = writeln!(o, "  - {line}");
    }
    let wall = r
        .engine
        .wall_ms
        .map(|w| format!(" in {}", dur(w)))
        .unwrap_or_default();
    let _ = writeln!(o, "\nengine    {} events{wall}", thousands(r.engine.events));
    o
}

/// One cause in words (the text report's explanation).
fn words(c: &Cause) -> String {
    match c {
        Cause::NoStall { stall_ms } => format!("No request took longer than {stall_ms} ms."),
        Cause::Episodes {
            count,
            recur_s,
            median_ms,
            longest_ms,
            causes,
        } => {
            let recur = recur_s
                .map(|g| format!(", recurring every {g:.0} s (median gap)"))
                .unwrap_or_default();
            format!(
                "{count} stall episodes{recur}, median length {} (longest {}); cause: {}.",
                dur(*median_ms),
                dur(*longest_ms),
                causes
                    .iter()
                    .map(|c| format!("{c} = {}", cause_text(c)))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
        Cause::SequentialChecks {
            rpcs_per_request,
            revalidate_freq_s,
            workers_median,
            workers_max,
        } => format!(
            "A PHP worker is one thread and each timestamp check is a blocking stat(): its {rpcs_per_request} \
             checks go out one after another, so one worker never has more than 1 RPC in flight. \
             OPcache keeps the revalidation stamp in shared memory (R64), so after each {revalidate_freq_s} s window the \
             first request re-checks every script and the requests that arrive while it is under way \
             catch up with it and check the same scripts alongside it: {workers_median} workers were checking at once \
             in the median episode ({workers_max} at most)."
        ),
        Cause::SlotUse {
            max_in_flight,
            slots,
            waited,
            max_wait_ms,
            mean_wait_ms,
        } => format!(
            "RPCs in flight never exceeded {max_in_flight} against {slots} slots, so slot waits are {} (max {}, mean {} per RPC).",
            if *waited { "present" } else { "nil" },
            dur(*max_wait_ms),
            dur(*mean_wait_ms)
        ),
        Cause::LongestEpisode {
            start_s,
            requests,
            rpcs_per_request: per_req,
            mean_rpc_ms,
            per_request: b,
        } => format!(
            "In the longest episode (at {start_s:.0} s) its {requests} slow requests made {per_req:.0} RPCs each at a \
             mean {} per RPC (slot wait + network + server): {per_req:.0} x {} = {} of sequential \
             waiting per request. Per request: IOPS throttle {}, server queue {}, normal RPC time {}, \
             slot wait {}, CPU {}.",
            dur(*mean_rpc_ms),
            dur(*mean_rpc_ms),
            dur(per_req * mean_rpc_ms),
            dur(b.iops_throttle_ms),
            dur(b.server_queue_ms),
            dur(b.rpc_ms),
            dur(b.slot_wait_ms),
            dur(b.cpu_ms)
        ),
        Cause::Drift {
            episodes: k,
            early_ms,
            late_ms,
            revalidate_freq_s,
        } => format!(
            "Episode length drifts: median {} over the first {k} episodes, {} over the last {k}. Each \
             script's stamp is set to request_time + {revalidate_freq_s} s by whichever worker checked it last (R64); \
             workers that joined a revalidation late carry later request times, so the scripts' stamps \
             spread over a few seconds and later revalidations split into smaller waves.",
            dur(*early_ms),
            dur(*late_ms),
        ),
        Cause::LockSleep {
            start_s,
            requests,
            lock_ms_per_request,
            held_ms_per_request,
            workers,
            capacity_per_s: capacity,
            arriving_per_s,
        } => {
            let rate = arriving_per_s
                .map(|r| format!(" against {r} arriving"))
                .unwrap_or_default();
            format!(
                "A worker's stat() calls are sequential, so a request that runs during an eviction cycle sleeps \
                 once per call that finds its lock held: in the longest episode (at {start_s:.0} s) the {requests} slow \
                 requests slept {} each on locks and held their worker {} in all, so {workers} workers \
                 could serve at most {capacity:.0} requests/s{rate}; the listen backlog then fills.",
                dur(*lock_ms_per_request),
                dur(*held_ms_per_request),
            )
        }
        Cause::Refused {
            dropped,
            arrived,
            rate_pct,
            workers,
            listen_backlog,
            max_backlog,
            lock_blocked_calls,
            max_lock_wait_ms,
        } => format!(
            "{} of {} requests were refused (502): {rate_pct:.4}%. Refusals happen when all {workers} workers are busy and {listen_backlog} \
             connections already wait in the listen backlog (it reached {max_backlog}); workers were held by {}.",
            thousands(*dropped),
            thousands(*arrived),
            if *lock_blocked_calls > 0 {
                format!(
                    "stat() calls sleeping on the eviction lock ({} calls slept, longest {})",
                    thousands(*lock_blocked_calls),
                    dur(*max_lock_wait_ms)
                )
            } else {
                "slow requests".to_string()
            }
        ),
        Cause::NoneRefused { arrived } => format!(
            "No request was refused (502 rate 0 of {}).",
            thousands(*arrived)
        ),
        Cause::PublishedQueue {
            workers: w,
            rpcs_per_worker: n,
            slots: s,
            rpc_ms,
            max_in_flight,
        } => {
            let total = *w as u64 * *n as u64;
            let claims: Vec<String> = rpc_ms
                .iter()
                .map(|ms| {
                    format!(
                        "({total}/{s}) x {ms} ms = {}",
                        dur(total as f64 / *s as f64 * ms)
                    )
                })
                .collect();
            let seq: Vec<String> = rpc_ms
                .iter()
                .map(|ms| format!("{n} x {ms} ms = {}", dur(*n as f64 * ms)))
                .collect();
            format!(
                "The source's arithmetic, {}, treats the {} RPCs of {w} workers as one queue drained {s} at a \
                 time. That needs {} RPCs waiting at once; with sequential calls there are at most {w} (one per \
                 worker, fewer than the {s} slots: no slot wait), and the simulation never had more than {max_in_flight} in \
                 flight. A revalidating request instead waits for its own {n} RPCs one after another: {}, whatever \
                 the number of workers, as long as they stay below the slot count.",
                claims.join(" and "),
                thousands(total),
                thousands(total),
                seq.join(" or ")
            )
        }
        Cause::PublishedConcurrent {
            workers: w,
            calls_per_worker: n,
            max_busy_workers,
        } => format!(
            "The source counts {w} busy workers x {n} calls = {} concurrent calls; a worker's {n} calls are \
             sequential, so at most one per busy worker is ever in progress; the simulation had at most {max_busy_workers} \
             workers busy, hence at most {max_busy_workers} calls in progress.",
            thousands(*w as u64 * *n as u64),
        ),
        Cause::PublishedStall {
            stall_ms,
            longest_ms,
            p99_ms,
        } => format!(
            "The source reports a stall of {}; the simulation's longest is {} and its p99 TTFB {}.",
            dur(*stall_ms),
            dur(*longest_ms),
            dur(*p99_ms)
        ),
        Cause::PublishedDrops {
            source_pct,
            simulated_pct,
        } => format!(
            "The source reports a 502 rate of about {source_pct}%; the simulation gives {simulated_pct:.4}%."
        ),
    }
}

/// `simulate`'s result: the scenario and the simulator's report.
pub struct View<'a> {
    pub scenario: &'a Scenario,
    pub report: &'a Report,
}

impl crate::Export for View<'_> {
    const FORMATS: &'static [crate::Format] = &[crate::Format::Text, crate::Format::Json];
    fn export(&self, format: crate::Format, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match format {
            crate::Format::Text => out.write_all(text(self.scenario, self.report).as_bytes()),
            crate::Format::Json => {
                serde_json::to_writer_pretty(&mut *out, self.report)?;
                out.write_all(b"\n")
            }
            f => Err(crate::unsupported("simulate's report", f, Self::FORMATS)),
        }
    }
}
