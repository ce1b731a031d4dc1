//! Prediction: lower one lifted workload under the recorded and the
//! proposed settings, keeping the trace's request times and workers.

use crate::config::PhpConfig;
use crate::lower::lower;
use crate::request::Requests;
use crate::workload::{WorkRequest, Workload};
use statstorm_trace::op::{Op, OpKind};
use statstorm_trace::Trace;
use std::collections::BTreeMap;

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
    predict_workload_with(w, recorded, proposed, &BTreeMap::new())
}

/// [`predict_workload`] with the proposed side on a storage whose calls
/// take `latency` (µs per kind of call; [`crate::lower::lower_with`]).
pub fn predict_workload_with(
    w: &Workload,
    recorded: &PhpConfig,
    proposed: &PhpConfig,
    latency: &BTreeMap<OpKind, u64>,
) -> Vec<RequestPrediction> {
    let before = lower(w, recorded);
    let after = crate::lower::lower_with(w, proposed, latency);
    w.requests
        .iter()
        .zip(before.into_iter().zip(after))
        .map(|(r, (b, a))| RequestPrediction::of(r, b, a))
        .collect()
}

impl RequestPrediction {
    /// Request `r` lowered as `before` and as `after`.
    pub fn of(r: &WorkRequest, before: Vec<Op>, after: Vec<Op>) -> Self {
        RequestPrediction {
            pid: r.pid,
            start_us: r.start_us,
            end_us: r.end_us,
            script: r.script.clone(),
            from_template: r.from_template,
            before,
            after,
        }
    }
}

/// Lifts the trace and returns every request's ops before and after, in
/// request order, concatenated (the NFS model's input).
pub fn predict_ops(
    trace: &Trace,
    requests: &Requests,
    recorded: &PhpConfig,
    proposed: &PhpConfig,
) -> (Vec<Op>, Vec<Op>) {
    let w = crate::lift(trace, requests);
    let mut b = Vec::new();
    let mut a = Vec::new();
    for r in predict_workload(&w, recorded, proposed) {
        b.extend(r.before);
        a.extend(r.after);
    }
    (b, a)
}

pub use crate::infer::inferred_config;
