//! Prediction: lower one lifted workload under the recorded and the
//! proposed settings, keeping the trace's request times and workers.

use crate::config::PhpConfig;
use crate::lower::lower;
use crate::workload::{WorkRequest, Workload};
use statstorm_trace::op::Op;
use statstorm_trace::request::Requests;
use statstorm_trace::Trace;

/// The syscalls of one request under both settings.
#[derive(Clone, Debug)]
pub struct RequestPrediction {
    pub pid: u32,
    pub start_us: i64,
    pub end_us: i64,
    pub script: Option<String>,
    pub from_template: bool,
    pub before: Vec<Op>,
    pub after: Vec<Op>,
}

/// Lowers `w` under `recorded` (before) and `proposed` (after).
pub fn predict_workload(
    w: &Workload,
    recorded: &PhpConfig,
    proposed: &PhpConfig,
) -> Vec<RequestPrediction> {
    let before = lower(w, recorded);
    let after = lower(w, proposed);
    w.requests
        .iter()
        .zip(before.into_iter().zip(after))
        .map(
            |(r, (b, a)): (&WorkRequest, (Vec<Op>, Vec<Op>))| RequestPrediction {
                pid: r.pid,
                start_us: r.start_us,
                end_us: r.end_us,
                script: r.script.clone(),
                from_template: r.from_template,
                before: b,
                after: a,
            },
        )
        .collect()
}

/// Lifts the trace and returns every request's ops before and after, in
/// request order, concatenated (the NFS model's input).
pub fn predict_ops(
    trace: &Trace,
    requests: &Requests,
    recorded: &PhpConfig,
    proposed: &PhpConfig,
) -> (Vec<Op>, Vec<Op>) {
    let w = crate::lift::lift(trace, requests);
    let mut b = Vec::new();
    let mut a = Vec::new();
    for r in predict_workload(&w, recorded, proposed) {
        b.extend(r.before);
        a.extend(r.after);
    }
    (b, a)
}

/// The recorded settings: PHP's defaults with what the trace says on top.
pub fn inferred_config(w: &Workload) -> Result<(PhpConfig, Vec<String>), crate::ConfigError> {
    let mut c = PhpConfig::default();
    let flags: Vec<String> = w
        .evidence
        .inferred
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    c.apply_flags(&flags)?;
    Ok((c, flags))
}

/// What a capture made with caches on cannot show, and what that means for
/// the prediction: one sentence per point, for the report's notes. Empty
/// when the lift saw every include and resolution
/// (`evidence.complete`).
///
/// A cached include (OPcache, R61-R63) and a resolution from a warm
/// realpath cache (R53-R54) make no syscall, so the trace shows neither
/// whether such an include was `include` or `include_once`, nor how many
/// `*_once` repeats there were, nor the walks and include_path candidates
/// a cold cache would make. The model replays what it saw (and, through
/// templates, what other requests showed): work no request showed is
/// missing from both columns, and a proposed setting that turns a cache
/// off would make it visible. Measured (docs/php-model.md): from the tree
/// capture with OPcache off, realpath_cache_size=0 is predicted at 1594
/// checked calls against 3370 real.
pub fn hidden_work_notes(w: &Workload, recorded: &PhpConfig, proposed: &PhpConfig) -> Vec<String> {
    if w.evidence.complete {
        return Vec::new();
    }
    let cli = w.requests.iter().any(|r| r.cli);
    let realpath_on = |c: &PhpConfig| c.realpath_cache_size > 0 && c.open_basedir.is_empty();
    let mut hiding = Vec::new();
    if recorded.opcache_on(cli) {
        hiding.push("OPcache on (a cached script's include makes no syscall)");
    }
    if realpath_on(recorded) {
        hiding.push("the realpath cache on (a warm resolution makes no lstat)");
    }
    let why = if hiding.is_empty() {
        "the trace shows fewer includes and resolutions than the requests made".to_string()
    } else {
        format!("it was made with {}", hiding.join(" and "))
    };
    let mut notes = vec![format!(
        "the capture hides operations: {why}, so it cannot show whether a cached include was include or include_once, how many include_once/require_once repeats there were, nor the lstat walks and include_path candidates of resolutions served from the cache; the predicted counts are a lower bound (record with opcache.enable=0 realpath_cache_size=0 for full information)"
    )];
    let mut turned_off = Vec::new();
    if recorded.opcache_on(cli) && !proposed.opcache_on(cli) {
        turned_off.push("OPcache off");
    }
    if realpath_on(recorded) && !realpath_on(proposed) {
        turned_off.push(if proposed.open_basedir.is_empty() {
            "the realpath cache off (realpath_cache_size=0)"
        } else {
            "the realpath cache off (open_basedir)"
        });
    }
    if !turned_off.is_empty() {
        notes.push(format!(
            "the proposed settings turn {}: the hidden work becomes syscalls the capture never showed, so the \"after\" counts are a lower bound and may be far below the real ones",
            turned_off.join(" and ")
        ));
    }
    notes
}
