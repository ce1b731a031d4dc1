//! `diagnose`: what makes a capture's metadata calls, what to change, what
//! the change will do and what it risks (docs/diagnose.md).
//!
//! The capture is loaded once ([`Capture::load`]); the baseline is its
//! prediction under its own settings; each candidate change
//! ([`candidates::catalogue`]) is predicted on the same capture, in
//! parallel; the findings ([`findings::findings`]) are measured by those
//! predictions; plans combine the changes that help, each combination
//! predicted again, and are ranked by predicted p99 TTFB, then RPCs, then
//! metadata calls, then risk. Renderers put the [`Diagnosis`] into words.

pub mod candidates;
mod counters;
pub mod figures;
pub mod findings;

use crate::nfs_setup::under;
use crate::predict::{Capture, Change, PredictOptions, Report, Result};
use candidates::{Candidate, Layer, NotProposed, Risk, Setting};
use counters::{counters, with_counters};
pub use counters::{Compared, Counters, MixHint, MixRow, CALIBRATE_AT, MIX_AT, MIX_GAP, SLOT_WAIT};
use figures::{Effect, Predicted};
use findings::Finding;
use rayon::prelude::*;
use serde::Serialize;
use statstorm_nfs::mount::MountOptions;
use statstorm_php::workload::PhpOpKind;
use statstorm_php::Workload;
use statstorm_trace::event::Flags;
use statstorm_trace::op::{Op, OpKind};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// What to diagnose.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The capture, the settings it ran under (`from_php*`), its NFS mount
    /// (`nfs`) and the simulator's parameters (`sim`); the proposal fields
    /// (`php`, `php_ini`, `nfs.mount`) are not used.
    pub predict: PredictOptions,
    /// Directories written through other clients (shared uploads, caches):
    /// never `nocto` nor long attribute caching there.
    pub writable: Vec<String>,
    /// The php-fpm pool file the capture ran under: its php values (over
    /// the php.ini), `pm.max_children` and `listen.backlog` (unless the
    /// simulator options state them).
    pub fpm_conf: Option<std::path::PathBuf>,
    /// The pool of `fpm_conf` (default: its only pool, or the first).
    pub fpm_pool: Option<String>,
    /// `/proc/self/mountstats` of the recording machine: one snapshot
    /// (the mount's RPCs since it was mounted) or two (before and after
    /// the capture). Its RPC mix is set beside the model's, and its mean
    /// round trip is the simulator's time per RPC (unless stated).
    pub mountstats: Vec<std::path::PathBuf>,
    /// `nfsstat -c` output of the recording machine: its RPC mix set
    /// beside the model's.
    pub nfsstat: Option<std::path::PathBuf>,
}

/// The php-fpm pool read (`--fpm-conf`).
#[derive(Debug, Serialize)]
pub struct PoolOut {
    pub file: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_children: Option<u32>,
    /// The listen queue it gives (stated, or php-fpm 8.2's default).
    pub listen_backlog: u32,
    /// php values of the pool the model knows, `key=value`.
    pub php: Vec<String>,
    /// Lines php-fpm would refuse or the reader could not use
    /// (`FILE:LINE: why: text`).
    pub skipped: Vec<String>,
}

/// `opts` with the pool file's values, and what was read.
fn with_pool(opts: &Options) -> Result<(PredictOptions, Option<PoolOut>)> {
    use crate::evidence::fpm;
    let mut p = opts.predict.clone();
    let Some(path) = &opts.fpm_conf else {
        return Ok((p, None));
    };
    let file = path.display().to_string();
    let f = fpm::read(path).map_err(|e| crate::predict::Error::Evidence(e.to_string()))?;
    let pool = match &opts.fpm_pool {
        Some(n) => f.pool(n).ok_or_else(|| {
            crate::predict::Error::Evidence(format!(
                "{file}: no pool [{n}] (pools: {})",
                f.pools
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?,
        None => f.pools.first().ok_or_else(|| {
            crate::predict::Error::Evidence(format!("{file}: no pool section ([www] or the like)"))
        })?,
    };
    let pairs = pool.php_pairs(&file);
    let known: Vec<String> = pairs
        .iter()
        .filter(|q| statstorm_php::config::KEYS.contains(&q.key.as_str()))
        .map(|q| format!("{}={}", q.key, q.value))
        .collect();
    p.from_pool = pairs;
    if p.sim.workers.is_none() {
        p.sim.workers = pool.max_children;
    }
    if p.sim.listen_backlog.is_none() {
        p.sim.listen_backlog = Some(pool.backlog());
    }
    let mut skipped: Vec<String> = f.skipped.iter().map(|s| s.describe(&file)).collect();
    if f.pools.len() > 1 && opts.fpm_pool.is_none() {
        skipped.push(format!(
            "{file}: {} pools; the first, [{}], was read (--fpm-pool NAME for another)",
            f.pools.len(),
            pool.name
        ));
    }
    Ok((
        p,
        Some(PoolOut {
            file,
            name: pool.name.clone(),
            max_children: pool.max_children,
            listen_backlog: pool.backlog(),
            php: known,
            skipped,
        }),
    ))
}

/// The result of [`diagnose`].
#[derive(Debug, Serialize)]
pub struct Diagnosis {
    pub schema: &'static str,
    pub inputs: Vec<String>,
    /// Requests in the capture.
    pub requests: usize,
    /// How the requests were split.
    pub split: String,
    /// The capture under its own settings: the model's figures, and the
    /// calls the trace recorded (the model's "before" is checked against
    /// them: `before_check`).
    pub baseline: Baseline,
    /// Most important first.
    pub findings: Vec<Finding>,
    /// Best first.
    pub plans: Vec<Plan>,
    /// Changes predicted to do nothing here (or to make it worse).
    pub will_not_help: Vec<NoHelp>,
    /// Changes no released Linux kernel has (seed 002's patches) that
    /// would help, with their predicted effect: for comparison.
    pub unavailable: Vec<NoHelp>,
    /// Changes not proposed, and why.
    pub not_proposed: Vec<NotProposed>,
    /// What was not given and was inferred or defaulted, and how to give it.
    pub assumed: Vec<Assumed>,
    /// What the input could not show.
    pub unknown: Vec<Unknown>,
    /// The `strace -c` tables, when that is all the input is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<statstorm_trace::Summary>,
    /// The prediction's notes (what the capture hides, the models' inputs).
    pub notes: Vec<String>,
    /// What a report plots.
    pub plots: Plots,
    /// The php-fpm pool file read (`--fpm-conf`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolOut>,
    /// The NFS client's counters given (`--mountstats`, `--nfsstat`)
    /// beside the model's RPCs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<Counters>,
}

/// What a report plots, besides each plan's TTFB distribution.
#[derive(Debug, Default, Serialize)]
pub struct Plots {
    /// The first second of the series (trace clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_s: Option<i64>,
    /// Metadata calls in each second from `start_s` on (every process;
    /// empty when the trace spans more than [`MAX_SERIES_S`]).
    pub metadata_per_s: Vec<u64>,
    /// Seconds with several times the median (`analyze`'s bursts).
    pub bursts: Vec<crate::analyze::Burst>,
    /// Directories by metadata calls, most first (at most [`TOP_DIRS`]).
    pub top_dirs: Vec<(String, u64)>,
    /// The best plan's requests before and after (at most
    /// [`figures::MAX_POINTS`], in start order).
    pub requests: Vec<figures::RequestPoint>,
}

/// The longest series plotted, seconds.
pub const MAX_SERIES_S: i64 = 100_000;
/// Directories plotted.
pub const TOP_DIRS: usize = 12;

/// The plots' data of a capture's timeline and its best plan.
fn plots(t: &crate::capture::Timeline, best: Option<&figures::Predicted>) -> Plots {
    let mut p = Plots::default();
    if let (Some((&first, _)), Some((&last, _))) = (
        t.per_second.first_key_value(),
        t.per_second.last_key_value(),
    ) {
        if last - first < MAX_SERIES_S {
            let mut v = vec![0u64; (last - first + 1) as usize];
            for (&s, &n) in &t.per_second {
                v[(s - first) as usize] = n;
            }
            p.bursts = crate::analyze::find_bursts(first, &v).1;
            p.start_s = Some(first);
            p.metadata_per_s = v;
        }
    }
    let mut dirs: Vec<(String, u64)> = t.dirs.iter().map(|(d, &n)| (d.to_string(), n)).collect();
    dirs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    dirs.truncate(TOP_DIRS);
    p.top_dirs = dirs;
    if let Some(b) = best {
        p.requests = b.points.clone();
    }
    p
}

/// The capture's own figures.
#[derive(Debug, Serialize)]
pub struct Baseline {
    /// The model under the recorded settings.
    pub modelled: figures::Figures,
    /// What the trace recorded (the NFS model's RPCs for the recorded
    /// calls, with NFS).
    pub recorded: figures::Figures,
    pub before_check: crate::check::BeforeCheck,
    /// The NFS mount: root and recorded options (with NFS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs: Option<Mount>,
}

/// The NFS mount diagnosed.
#[derive(Debug, Serialize)]
pub struct Mount {
    pub root: String,
    pub options: String,
    /// Options in `options` the model does not know (kept as written, not
    /// modelled), each with the known option it is likely a misspelling
    /// of: no kernel mounts NFS with an option it does not know, so these
    /// are a typo or a file that is not the recording machine's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<UnknownOption>,
}

/// A mount option the model does not know.
#[derive(Debug, Serialize)]
pub struct UnknownOption {
    /// As written (`key` or `key=value`).
    pub option: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<&'static str>,
}

/// A plan: changes predicted together.
#[derive(Debug, Serialize)]
pub struct Plan {
    /// 1 = best.
    pub rank: usize,
    pub changes: Vec<Setting>,
    pub predicted: Predicted,
    pub effect: Effect,
    /// The highest risk of its changes.
    pub risk: Risk,
    /// Each change's risk, one sentence each.
    pub risks: Vec<String>,
    /// What a deploy must do with the plan in place.
    pub deploy: Vec<String>,
    pub snippets: Snippets,
    /// How to see that the plan works once applied.
    pub verify: Vec<Verify>,
}

/// The plan's lines, ready to paste.
#[derive(Debug, Default, Serialize)]
pub struct Snippets {
    /// php.ini lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub php_ini: Vec<String>,
    /// The same as php-fpm pool lines (they win over php.ini).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fpm_pool: Vec<String>,
    /// The mount's whole option string (fstab's fourth field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
    /// Directories the plan mounts apart from the root, each with its
    /// options (today's: the root's new options are for the rest).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub apart_mounts: Vec<(String, String)>,
    /// Settings of the plan stated in a file given (a pool's
    /// `php_admin_value` beats php.ini): (key, `FILE:LINE`) to edit there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_at: Vec<(String, String)>,
}

/// Where a counter is read.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CounterSource {
    /// A syscall count (`strace -c -f`, or `statstorm analyze` of a new capture).
    Syscalls,
    /// An NFS op count (`/proc/self/mountstats`, `nfsstat -c`).
    NfsOps,
}

/// A counter that must drop once the plan is applied.
#[derive(Debug, Serialize, PartialEq)]
pub struct Verify {
    pub source: CounterSource,
    pub counter: String,
    pub per_request_before: f64,
    pub per_request_after: f64,
}

/// A change predicted not to help (or, in `unavailable`, one no kernel
/// has).
#[derive(Debug, Serialize)]
pub struct NoHelp {
    pub changes: Vec<Setting>,
    pub effect: Effect,
    /// It makes some figure worse.
    pub worse: bool,
    /// In no released Linux kernel.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hypothetical: bool,
}

/// What the input could not show, and so what the diagnosis cannot say.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unknown {
    /// Only `strace -c` tables: no calls, paths, requests or times, so no
    /// mechanism can be measured and no change predicted.
    SummaryOnly,
    /// No timestamps: time windows (revalidate_freq, the attribute
    /// cache, the realpath cache's ttl) and latency cannot be judged.
    NoTimestamps,
    /// No `-T` durations: the capture's own call times are unknown.
    NoDurations,
    /// Neither php-fpm requests nor php-cli processes: PHP settings do
    /// not apply.
    NotPhp,
}

/// Where an input value came from when nobody stated it.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Shown by the trace.
    Inferred,
    /// A default.
    Default,
    /// Measured by the NFS client (`--mountstats`).
    Measured,
}

/// What an assumed value is about.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    /// A php.ini setting the capture ran under.
    Php,
    /// The storage and its mount.
    Storage,
    /// The latency simulation's pool, network and server.
    Simulator,
}

/// An input value that was not given.
#[derive(Debug, Serialize, PartialEq)]
pub struct Assumed {
    pub topic: Topic,
    pub what: String,
    pub value: String,
    pub basis: Basis,
    /// How to give it.
    pub supply: String,
}

/// The name of the first stage after reading: the baseline prediction.
pub const BASELINE: &str = "predicting under the recorded settings";
/// The stage that predicts each candidate.
pub const CANDIDATES: &str = "predicting candidate changes";
/// The stage that predicts combinations.
pub const COMBINING: &str = "predicting combined plans";

/// Diagnoses the capture of `opts`. `stage` is told each stage's name as
/// it starts.
pub fn diagnose(opts: &Options, stage: &mut dyn FnMut(&'static str)) -> Result<Diagnosis> {
    let (mut popts, pool) = with_pool(opts)?;
    let (measured, calibration) = with_counters(opts, &mut popts)?;
    let opts = &Options {
        predict: popts,
        ..opts.clone()
    };
    let cap = match Capture::load(&opts.predict, stage) {
        Ok(c) => c,
        Err(crate::predict::Error::SummaryOnly { summary, .. }) => {
            let empty = BTreeMap::new();
            let mut d = table_only(opts, summary);
            d.counters = measured
                .into_iter()
                .map(|m| counters(m, &empty, false))
                .collect();
            return Ok(d);
        }
        Err(e) => return Err(e),
    };
    stage(BASELINE);
    let sim = opts.predict.sim.clone();
    let mut base = cap.predict(
        &Change {
            sim: sim.clone(),
            ..Change::default()
        },
        &mut |_| {},
    )?;
    let requests = base.requests.len();
    let bp = Predicted::of(&base).map_err(crate::predict::Error::spill)?;
    // the baseline's rows end in its figures: let go before the
    // candidates' predictions (each makes rows of its own)
    base.requests = Default::default();
    let mount = match &base.nfs {
        Some(n) => Some((
            n.nfs_root.clone(),
            MountOptions::parse(&n.recorded_mount).map_err(|e| {
                crate::predict::Error::Nfs(format!("the recorded mount options: {e}"))
            })?,
        )),
        None => None,
    };
    let w = cap.workload();
    let written_by_requests = written_dirs(w).map_err(crate::predict::Error::spill)?;
    let mut written: Vec<String> = Vec::new();
    if let Some((root, _)) = &mount {
        // a directory the trace writes into is on the mount when it lies
        // under the root; a tree marked writable, when it overlaps it
        let traced = written_by_requests
            .iter()
            .cloned()
            .chain(cap.background_written())
            .filter(|d| under(d, root));
        let marked = opts
            .writable
            .iter()
            .filter(|d| under(d, root) || under(root, d))
            .cloned();
        for d in traced.chain(marked) {
            if !written.contains(&d) {
                written.push(d);
            }
        }
        written.sort();
    }
    let compiled = w.compiled_scripts();
    let scripts: BTreeSet<&str> = compiled.iter().map(String::as_str).collect();
    let mut unknown = Vec::new();
    let format = cap.format();
    if !format.timestamps {
        unknown.push(Unknown::NoTimestamps);
    }
    if !format.durations {
        unknown.push(Unknown::NoDurations);
    }
    // the whole trace as one request, and no script compiled in it
    let php = cap.mode() != statstorm_php::request::RequestMode::Whole || !scripts.is_empty();
    if !php {
        unknown.push(Unknown::NotPhp);
    }
    let ctx = candidates::Context {
        php: cap.recorded_settings(),
        not_php: !php,
        fpm: w.has_fpm(),
        cli: w.has_cli(),
        mount: mount.as_ref().map(|(r, m)| (r.as_str(), m)),
        written: &written,
        opcache_full: w.evidence.opcache_hash_full,
        scripts: scripts.len(),
    };
    let (cands, not_proposed) = candidates::catalogue(&ctx);
    stage(CANDIDATES);
    let predicted: Vec<Result<Predicted>> = cands
        .par_iter()
        .map(|c| predict_settings(&cap, &c.settings, &sim))
        .collect();
    let mut singles = Vec::new();
    for (c, p) in cands.into_iter().zip(predicted) {
        singles.push((c, p?));
    }
    let found = findings::findings(&findings::Inputs {
        base: &bp,
        singles: &singles,
        workload: w,
        written: &written_by_requests,
        php: cap.recorded_settings(),
        mount: mount.as_ref().map(|(_, m)| m),
        iops: sim.iops.filter(|&n| n > 0.0),
    })
    .map_err(crate::predict::Error::spill)?;
    // the changes that help, best first
    let mut helpful: Vec<(Vec<&Candidate>, Predicted)> = singles
        .iter()
        .filter(|(c, p)| !c.hypothetical && p.effect(requests).helps())
        .map(|(c, p)| (vec![c], p.clone()))
        .collect();
    insertion_sort(&mut helpful, |a, b| {
        rank(&a.1, risk_of(&a.0), &b.1, risk_of(&b.0))
    });
    let no_help = |(c, p): &(Candidate, Predicted)| {
        let effect = p.effect(requests);
        NoHelp {
            changes: c.settings.clone(),
            worse: effect.hurts(),
            effect,
            hypothetical: c.hypothetical,
        }
    };
    // (the changes that help only beside another are taken out below)
    let mut will_not_help: Vec<(&Candidate, NoHelp)> = singles
        .iter()
        .filter(|(_, p)| !p.effect(requests).helps())
        .map(|cp| (&cp.0, no_help(cp)))
        .collect();
    let unavailable = singles
        .iter()
        .filter(|(c, p)| c.hypothetical && p.effect(requests).helps())
        .map(no_help)
        .collect();
    stage(COMBINING);
    let mut plans = helpful.clone();
    // greedy: the best single, then each next helpful change of another
    // mechanism kept when the combination predicts better; once over all
    // of them, once over the low-risk ones only
    for max_risk in [Risk::High, Risk::Low] {
        let pool: Vec<&(Vec<&Candidate>, Predicted)> = helpful
            .iter()
            .filter(|(c, _)| c[0].risk <= max_risk)
            .collect();
        let Some(first) = pool.first() else { continue };
        let mut cur: (Vec<&Candidate>, Predicted) = (*first).clone();
        for (next, _) in pool.iter().skip(1) {
            let n = next[0];
            let clash = cur.0.iter().any(|c| {
                c.mechanism == n.mechanism
                    || c.settings
                        .iter()
                        .any(|a| n.settings.iter().any(|b| candidates::conflict(a, b)))
            });
            if clash {
                continue;
            }
            let mut with = cur.0.clone();
            with.push(n);
            let settings: Vec<Setting> = with.iter().flat_map(|c| c.settings.clone()).collect();
            let p = predict_settings(&cap, &settings, &sim)?;
            if rank(&p, risk_of(&with), &cur.1, risk_of(&cur.0)) == Ordering::Less
                && better_than(&p, &cur.1)
            {
                cur = (with, p);
                plans.push(cur.clone());
            }
        }
    }
    insertion_sort(&mut plans, |a, b| {
        rank(&a.1, risk_of(&a.0), &b.1, risk_of(&b.0))
    });
    // a change that does nothing alone can help beside another: the
    // realpath cache does nothing under open_basedir (R58) until
    // open_basedir goes, then it keeps the walks open_basedir's removal
    // leaves. Each change that changed nothing alone is tried once beside
    // the best plan; one that makes it better is a plan, not a change
    // that will not help.
    if let Some(best) = plans.first().cloned() {
        let tries: Vec<Vec<&Candidate>> = will_not_help
            .iter()
            .filter(|(c, h)| !c.hypothetical && !h.worse)
            .map(|(n, _)| *n)
            .filter(|n| {
                !best.0.iter().any(|c| {
                    c.mechanism == n.mechanism
                        || c.settings
                            .iter()
                            .any(|a| n.settings.iter().any(|b| candidates::conflict(a, b)))
                })
            })
            .map(|n| {
                let mut with = best.0.clone();
                with.push(n);
                with
            })
            .collect();
        let tried: Vec<Result<Predicted>> = tries
            .par_iter()
            .map(|with| {
                let settings: Vec<Setting> = with.iter().flat_map(|c| c.settings.clone()).collect();
                predict_settings(&cap, &settings, &sim)
            })
            .collect();
        // a material gain (a setting more for a hair's breadth is noise),
        // the best of each mechanism (actimeo=60 and actimeo=3600 alike)
        let mut beside: Vec<(Vec<&Candidate>, Predicted)> = Vec::new();
        for (with, p) in tries.into_iter().zip(tried) {
            let p = p?;
            if rank(&p, risk_of(&with), &best.1, risk_of(&best.0)) != Ordering::Less
                || !materially_better(&p, &best.1)
            {
                continue;
            }
            let n = with.last().expect("the change tried");
            match beside
                .iter_mut()
                .find(|(w, _)| w.last().is_some_and(|m| m.mechanism == n.mechanism))
            {
                Some(b) if rank(&p, risk_of(&with), &b.1, risk_of(&b.0)) == Ordering::Less => {
                    *b = (with, p)
                }
                Some(_) => {}
                None => beside.push((with, p)),
            }
        }
        will_not_help.retain(|(c, _)| {
            !beside
                .iter()
                .any(|(with, _)| with.last().is_some_and(|n| std::ptr::eq(*n, *c)))
        });
        plans.extend(beside);
        insertion_sort(&mut plans, |a, b| {
            rank(&a.1, risk_of(&a.0), &b.1, risk_of(&b.0))
        });
    }
    let will_not_help = will_not_help.into_iter().map(|(_, h)| h).collect();
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    plans.retain(|(c, _)| {
        let mut k: Vec<String> = c
            .iter()
            .flat_map(|c| c.settings.iter().map(Setting::assignment))
            .collect();
        k.sort();
        seen.insert(k)
    });
    let plots = plots(cap.timeline(), plans.first().map(|p| &p.1).or(Some(&bp)));
    let plans = plans
        .into_iter()
        .enumerate()
        .map(|(i, (c, p))| {
            let mut pl = plan(i + 1, &c, p, requests, mount.as_ref().map(|m| &m.1));
            pl.snippets.set_at = set_at(&pl.changes, &base);
            pl
        })
        .collect();
    let mut assumed = assumed(&base, opts);
    if !php {
        assumed.retain(|a| a.topic != Topic::Php);
    }
    if let Some(c) = calibration.filter(|_| base.nfs.is_some()) {
        assumed.push(Assumed {
            topic: Topic::Simulator,
            what: "NFS server time per RPC".into(),
            value: format!(
                "{:.3} ms: the mean round trip of {} RPCs in mountstats{}",
                c.server_ms,
                c.rpcs,
                if c.network_inside {
                    ", the network's included"
                } else {
                    " less the stated network round trip"
                }
            ),
            basis: Basis::Measured,
            supply: "--server-latency MS".into(),
        });
        if c.network_inside {
            assumed.push(Assumed {
                topic: Topic::Simulator,
                what: "network round trip to the NFS server".into(),
                value: format!("0 ms: inside the measured {:.3} ms", c.rtt_ms),
                basis: Basis::Measured,
                supply: "--rtt MS (then taken out of the measured time)".into(),
            });
        }
    }
    let recorded = figures::Predicted::recorded_of(&base);
    let empty = BTreeMap::new();
    let delegations_off = !opts.predict.nfs.delegations
        && mount
            .as_ref()
            .is_some_and(|(_, m)| m.vers.is_some_and(|v| v.is_v4()));
    let counters: Vec<Counters> = measured
        .into_iter()
        .map(|m| counters(m, recorded.rpcs.as_ref().unwrap_or(&empty), delegations_off))
        .collect();
    Ok(Diagnosis {
        schema: "statstorm.diagnose/1",
        inputs: base.inputs.clone(),
        requests,
        split: base.split.clone(),
        baseline: Baseline {
            modelled: bp.before.clone(),
            recorded,
            before_check: base.before_check.clone(),
            nfs: base.nfs.as_ref().map(|n| Mount {
                root: n.nfs_root.clone(),
                options: n.recorded_mount.clone(),
                unknown: mount
                    .as_ref()
                    .map(|(_, m)| {
                        m.unknown
                            .iter()
                            .map(|(k, v)| UnknownOption {
                                option: match v {
                                    Some(v) => format!("{k}={v}"),
                                    None => k.clone(),
                                },
                                suggestion: statstorm_nfs::mount::suggest(k),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
        },
        findings: found,
        plans,
        will_not_help,
        unavailable,
        not_proposed,
        assumed,
        unknown,
        summary: None,
        notes: base.notes.clone(),
        plots,
        pool,
        counters,
    })
}

/// The diagnosis of `strace -c` tables alone: their metadata calls, and
/// that nothing can be measured or predicted from totals.
fn table_only(opts: &Options, summary: statstorm_trace::Summary) -> Diagnosis {
    let mut recorded = figures::Figures::default();
    for r in &summary.rows {
        if statstorm_trace::event::Kind::from_name(r.name.as_bytes()).is_metadata() {
            *recorded.syscalls.entry(r.name.clone()).or_default() += r.calls;
            recorded.metadata_calls += r.calls;
        }
    }
    Diagnosis {
        schema: "statstorm.diagnose/1",
        inputs: opts
            .predict
            .traces
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        requests: 0,
        split: "an strace -c summary table: no requests".into(),
        baseline: Baseline {
            modelled: figures::Figures::default(),
            recorded,
            before_check: crate::check::BeforeCheck::default(),
            nfs: None,
        },
        findings: Vec::new(),
        plans: Vec::new(),
        will_not_help: Vec::new(),
        unavailable: Vec::new(),
        not_proposed: Vec::new(),
        assumed: Vec::new(),
        unknown: vec![Unknown::SummaryOnly],
        summary: Some(summary),
        notes: Vec::new(),
        plots: Plots::default(),
        pool: None,
        counters: Vec::new(),
    }
}

/// `settings` predicted on `cap`.
fn predict_settings(
    cap: &Capture,
    settings: &[Setting],
    sim: &crate::predict::SimOptions,
) -> Result<Predicted> {
    let mut ch = Change {
        sim: sim.clone(),
        ..Change::default()
    };
    let mount: Vec<String> = settings
        .iter()
        .filter(|s| s.layer == Layer::Mount)
        .map(Setting::assignment)
        .collect();
    // directories mounted apart keep the recorded options: the plan's
    // mount options go to their root alone
    let mut root = None;
    for s in settings.iter().filter(|s| s.layer == Layer::MountApart) {
        if !ch.mount_apart.contains(&s.key) {
            ch.mount_apart.push(s.key.clone());
        }
        root = Some(s.from.as_str());
    }
    if !mount.is_empty() {
        ch.mount.push(match root {
            Some(r) => format!("{r}:{}", mount.join(",")),
            None => mount.join(","),
        });
    }
    ch.php = settings
        .iter()
        .filter(|s| s.layer == Layer::Php)
        .map(Setting::assignment)
        .collect();
    let r: Report = cap.predict(&ch, &mut |_| {})?;
    Predicted::of(&r).map_err(crate::predict::Error::spill)
}

fn risk_of(c: &[&Candidate]) -> Risk {
    c.iter().map(|c| c.risk).max().unwrap_or(Risk::None)
}

/// Whether `a` differs from `b` by more than `rel` of the larger.
fn differs(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() > rel * a.abs().max(b.abs())
}

/// Plans in order: predicted p99 TTFB (beyond 2%), then RPCs (beyond
/// 1%), then metadata calls, then risk. "Beyond 2%" is no total order
/// (not transitive): plans are put in order by [`insertion_sort`], which
/// needs none.
fn rank(a: &Predicted, ra: Risk, b: &Predicted, rb: Risk) -> Ordering {
    if let (Some(x), Some(y)) = (&a.after.latency, &b.after.latency) {
        if differs(x.p99_ms, y.p99_ms, 0.02) {
            return x.p99_ms.total_cmp(&y.p99_ms);
        }
    }
    if let (Some(x), Some(y)) = (a.after.rpc_total, b.after.rpc_total) {
        if differs(x as f64, y as f64, 0.01) {
            return x.cmp(&y);
        }
    }
    a.after
        .metadata_calls
        .cmp(&b.after.metadata_calls)
        .then(ra.cmp(&rb))
}

/// A stable insertion sort by `cmp`, which may be no total order (the
/// standard sorts may panic on one); for the few plans a diagnosis has.
fn insertion_sort<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && cmp(&v[j - 1], &v[j]) == Ordering::Greater {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// `a` improves on `b` in some figure beyond the noise.
/// [`better_than`] by a margin worth a setting more: p99 TTFB beyond 2%
/// lower, or RPCs or metadata calls at least 5% fewer.
fn materially_better(a: &Predicted, b: &Predicted) -> bool {
    let lat = match (&a.after.latency, &b.after.latency) {
        (Some(x), Some(y)) => x.p99_ms < y.p99_ms && differs(x.p99_ms, y.p99_ms, 0.02),
        _ => false,
    };
    let fewer = |x: u64, y: u64| (x as f64) <= 0.95 * y as f64;
    let rpcs = matches!((a.after.rpc_total, b.after.rpc_total), (Some(x), Some(y)) if fewer(x, y));
    lat || rpcs || fewer(a.after.metadata_calls, b.after.metadata_calls)
}

fn better_than(a: &Predicted, b: &Predicted) -> bool {
    let lat = match (&a.after.latency, &b.after.latency) {
        (Some(x), Some(y)) => x.p99_ms < y.p99_ms && differs(x.p99_ms, y.p99_ms, 0.02),
        _ => false,
    };
    let rpcs = match (a.after.rpc_total, b.after.rpc_total) {
        (Some(x), Some(y)) => x < y && differs(x as f64, y as f64, 0.01),
        _ => false,
    };
    let calls = a.after.metadata_calls < b.after.metadata_calls
        && differs(
            a.after.metadata_calls as f64,
            b.after.metadata_calls as f64,
            0.01,
        );
    lat || rpcs || calls
}

fn plan(
    rank: usize,
    c: &[&Candidate],
    predicted: Predicted,
    requests: usize,
    mount: Option<&MountOptions>,
) -> Plan {
    let mut changes: Vec<Setting> = Vec::new();
    for s in c.iter().flat_map(|c| c.settings.iter()) {
        // a directory two changes mount apart is one mount
        if !changes.contains(s) {
            changes.push(s.clone());
        }
    }
    let php: Vec<&Setting> = changes.iter().filter(|s| s.layer == Layer::Php).collect();
    let mount_opts: Vec<String> = changes
        .iter()
        .filter(|s| s.layer == Layer::Mount)
        .map(Setting::assignment)
        .collect();
    let snippets = Snippets {
        php_ini: php
            .iter()
            .map(|s| format!("{} = {}", s.key, s.value).trim_end().to_string())
            .collect(),
        fpm_pool: php
            .iter()
            .map(|s| {
                format!("php_admin_value[{}] = {}", s.key, s.value)
                    .trim_end()
                    .to_string()
            })
            .collect(),
        mount_options: match (mount, mount_opts.is_empty()) {
            (Some(m), false) => Some(mount_line(m, &changes)),
            _ => None,
        },
        apart_mounts: changes
            .iter()
            .filter(|s| s.layer == Layer::MountApart)
            .map(|s| (s.key.clone(), s.value.clone()))
            .collect(),
        set_at: Vec::new(),
    };
    Plan {
        rank,
        changes,
        effect: predicted.effect(requests),
        verify: verify(&predicted, requests),
        predicted,
        risk: risk_of(c),
        risks: c.iter().map(|c| c.risk_text.clone()).collect(),
        deploy: c.iter().filter_map(|c| c.deploy.clone()).collect(),
        snippets,
    }
}

/// The plan's php settings stated in a file line (`FILE:LINE`): where to
/// change them (a pool's php_admin_value wins over any php.ini).
fn set_at(changes: &[Setting], base: &Report) -> Vec<(String, String)> {
    use crate::settings::Provenance;
    changes
        .iter()
        .filter(|s| s.layer == Layer::Php)
        .filter_map(|s| match base.recorded.provenance.get(&s.key) {
            Some(Provenance::Stated { at }) if !at.starts_with("--") => {
                Some((s.key.clone(), at.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The recorded options with the plan's mount changes in place of the
/// options they replace (`actimeo` the four `ac*` times, `nocto` `cto`),
/// as short as the mount command takes them.
fn mount_line(m: &MountOptions, changes: &[Setting]) -> String {
    let keys: Vec<&str> = changes
        .iter()
        .filter(|s| s.layer == Layer::Mount)
        .map(|s| s.key.as_str())
        .collect();
    let replaced = |k: &str| {
        keys.iter().any(|c| {
            *c == k
                || (*c == "actimeo" && k.starts_with("ac"))
                || (*c == "nocto" && k == "cto")
                || (*c == "noatime" && k.ends_with("atime"))
        })
    };
    let mut out: Vec<String> = m
        .render()
        .split(',')
        .filter(|o| !o.is_empty() && !replaced(o.split('=').next().unwrap_or(o)))
        .map(str::to_string)
        .collect();
    out.extend(
        changes
            .iter()
            .filter(|s| s.layer == Layer::Mount)
            .map(Setting::assignment),
    );
    out.join(",")
}

/// The syscall and the NFS op that drop the most.
fn verify(p: &Predicted, requests: usize) -> Vec<Verify> {
    let n = requests.max(1) as f64;
    let mut out = Vec::new();
    let most = |pairs: Vec<(String, u64, u64)>| {
        pairs
            .into_iter()
            .filter(|(_, b, a)| a < b)
            .max_by(|x, y| (x.1 - x.2).cmp(&(y.1 - y.2)).then(y.0.cmp(&x.0)))
    };
    let calls = p
        .before
        .syscalls
        .iter()
        .map(|(k, &b)| (k.clone(), b, p.after.calls(k)))
        .collect();
    if let Some((k, b, a)) = most(calls) {
        out.push(Verify {
            source: CounterSource::Syscalls,
            counter: k,
            per_request_before: b as f64 / n,
            per_request_after: a as f64 / n,
        });
    }
    let rpcs = p
        .before
        .rpcs
        .iter()
        .flatten()
        .map(|(k, &b)| (k.clone(), b, p.after.rpc(k)))
        .collect();
    if let Some((k, b, a)) = most(rpcs) {
        out.push(Verify {
            source: CounterSource::NfsOps,
            counter: k,
            per_request_before: b as f64 / n,
            per_request_after: a as f64 / n,
        });
    }
    out
}

/// What the report took from the trace or from defaults, and how to give it.
fn assumed(base: &Report, opts: &Options) -> Vec<Assumed> {
    use crate::settings::Provenance;
    let mut out = Vec::new();
    let php = "--php-ini FILE, --php-info FILE or --php KEY=VALUE";
    for (k, p) in &base.recorded.provenance {
        let basis = match p {
            Provenance::Inferred => Basis::Inferred,
            Provenance::Default => Basis::Default,
            Provenance::Stated { .. } => continue,
        };
        out.push(Assumed {
            topic: Topic::Php,
            what: k.clone(),
            value: base.recorded.settings.get(k).cloned().unwrap_or_default(),
            basis,
            supply: php.into(),
        });
    }
    if base.nfs.is_none() {
        out.push(Assumed {
            topic: Topic::Storage,
            what: "storage".into(),
            value: if base.latency.as_ref().is_some_and(|l| l.simulated) {
                "not NFS: no RPCs predicted; each call takes the capture's time for its kind (-T)"
                    .into()
            } else {
                "not NFS: no RPCs nor latency predicted (the capture has no -T times)".into()
            },
            basis: Basis::Default,
            supply: "--mounts FILE (a copy of /proc/mounts), --from-mount OPTS or --nfs-root DIR"
                .into(),
        });
    }
    if base.nfs.is_some() {
        out.push(Assumed {
            topic: Topic::Storage,
            what: "the calls' user".into(),
            value: "root (uid 0): strace does not show it; the NFS access cache is kept per user"
                .into(),
            basis: Basis::Default,
            supply: "no flag yet (a pool's workers run as one user)".into(),
        });
    }
    if let Some(p) = base.latency.as_ref().and_then(|l| l.params.as_ref()) {
        let s = &opts.predict.sim;
        let mut d = |what: &str, value: String, given: bool, supply: &str| {
            if !given {
                out.push(Assumed {
                    topic: Topic::Simulator,
                    what: what.into(),
                    value,
                    basis: Basis::Default,
                    supply: supply.into(),
                });
            }
        };
        d(
            "php-fpm workers (pm.max_children)",
            p.workers.to_string(),
            s.workers.is_some(),
            "--fpm-conf FILE or --workers N",
        );
        d(
            "php-fpm listen.backlog",
            format!("{} (php-fpm 8.2's default)", p.listen_backlog),
            s.listen_backlog.is_some(),
            "--fpm-conf FILE or --listen-backlog N",
        );
        let nfs = base.nfs.is_some();
        d(
            "network round trip to the NFS server",
            format!("{} ms", p.rtt_ms),
            s.rtt.is_some() || !nfs,
            "--rtt MS",
        );
        d(
            "NFS server time per RPC",
            format!("{} ms", p.server_latency_ms),
            s.server_latency.is_some() || !nfs,
            "--server-latency MS",
        );
        d(
            "NFS server IOPS budget",
            "none".into(),
            s.iops.is_some() || !nfs,
            "--iops N",
        );
    }
    out
}

/// The parent directory of `path`.
fn parent(path: &str) -> Option<&str> {
    match path.rsplit_once('/') {
        Some(("", _)) => Some("/"),
        Some((d, _)) => Some(d),
        None => None,
    }
}

/// Kernel filesystems, never on NFS (`/dev/null` opened for writing is
/// no write into a directory).
const PSEUDO: [&str; 4] = ["/dev", "/proc", "/sys", "/run"];

/// Whether `o` writes into its directory (creates, renames, removes, or
/// opens for writing) outside the kernel's own filesystems.
pub fn op_writes(o: &Op) -> bool {
    if PSEUDO.iter().any(|p| under(&o.path, p)) {
        return false;
    }
    match o.kind {
        OpKind::Mkdir | OpKind::Rmdir | OpKind::Unlink | OpKind::Rename => true,
        OpKind::Open => o.flags & (Flags::O_WRONLY | Flags::O_RDWR | Flags::O_CREAT) != 0,
        _ => false,
    }
}

/// The directories the requests of `w` write into, sorted.
pub fn written_dirs(w: &Workload) -> std::io::Result<Vec<String>> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    let add = |out: &mut BTreeSet<String>, o: &Op| {
        if op_writes(o) {
            if let Some(d) = parent(&o.path) {
                out.insert(d.to_string());
            }
            if let Some(d) = o.path2.as_deref().and_then(parent) {
                out.insert(d.to_string());
            }
        }
    };
    w.each_request(&mut |_, r| {
        for o in &r.ops {
            match &o.kind {
                PhpOpKind::Write { op } | PhpOpKind::Raw { op } => add(&mut out, op),
                PhpOpKind::Open { path, flags, .. }
                    if flags & (Flags::O_WRONLY | Flags::O_RDWR | Flags::O_CREAT) != 0
                        && !PSEUDO.iter().any(|p| under(path, p)) =>
                {
                    if let Some(d) = parent(path) {
                        out.insert(d.to_string());
                    }
                }
                _ => {}
            }
        }
    })?;
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insertion_sort_takes_a_comparison_within_a_tolerance() {
        // "equal within 2%" is not transitive: 100 ~ 101.5 ~ 103, 100 < 103
        let near = |a: &f64, b: &f64| {
            if differs(*a, *b, 0.02) {
                a.total_cmp(b)
            } else {
                Ordering::Equal
            }
        };
        let mut v = vec![103.0, 101.5, 100.0, 50.0, 101.5, 200.0];
        insertion_sort(&mut v, near);
        assert_eq!(v.len(), 6);
        assert_eq!(v[0], 50.0);
        assert_eq!(v[5], 200.0);
        // a total order: sorted as the standard sort sorts
        let mut w = vec![3, 1, 2, 5, 4];
        insertion_sort(&mut w, |a, b| a.cmp(b));
        assert_eq!(w, [1, 2, 3, 4, 5]);
    }

    #[test]
    fn under_and_parent() {
        assert!(under("/srv/www/a", "/srv/www"));
        assert!(under("/srv/www", "/srv/www"));
        assert!(!under("/srv/wwwx", "/srv/www"));
        assert!(under("/tmp", "/"));
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("a"), None);
    }
}
