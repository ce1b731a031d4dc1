//! statstorm-php: how PHP turns includes and file functions into syscalls.
//!
//! `PhpConfig` (php.ini settings that change file syscalls), `lift` (events of
//! one request -> PHP operations), `lower` (PHP operations + config + state
//! across requests -> syscalls). Rules: ../shared/design/SEMANTICS.md part B.

pub mod config;
pub mod file_cache;

pub use config::{ConfigError, PhpConfig};
pub mod infer;
pub mod lift;
pub mod lower;
pub mod opcache;
pub mod paths;
pub mod realpath;
pub mod request;
pub mod workload;

pub use lift::ReferenceError;
pub use lower::{count_by_syscall, lower};
pub use workload::{PhpOp, PhpOpKind, ReferenceUse, WorkRequest, Workload};
pub mod predict;

pub use predict::{predict_ops, predict_workload, predict_workload_with, RequestPrediction};

/// Lifts every request of a split trace into a [`Workload`]
/// ([`lift::lift_parts`]), then infers the settings only trial lowerings
/// show ([`infer`]: OPcache's hash table size and revalidation window, the
/// realpath cache's budget and TTL).
pub fn lift(trace: &statstorm_trace::Trace, requests: &crate::request::Requests) -> Workload {
    let real = lift::request_ops(trace, requests);
    lift_from(&lift::TraceFacts::of(trace, requests), requests, &real)
}

/// [`lift()`] of the requests' calls `real` as [`lift::request_ops`] gives
/// them (normalized by the caller, held wherever it keeps them).
pub fn lift_from(
    facts: &lift::TraceFacts,
    requests: &crate::request::Requests,
    real: &dyn lift::CallSource,
) -> Workload {
    let (mut w, first) = lift::lift_parts_from(facts, requests, real);
    infer::infer_accel_hash(&mut w, &first);
    infer::infer_revalidate_freq(&mut w, &first);
    infer::infer_realpath_settings(&mut w, &first);
    w
}

/// [`lift_from`] with the requests kept outside memory, in stores `make`
/// gives ([`lift::lift_parts_stored`]).
pub fn lift_stored(
    facts: &lift::TraceFacts,
    requests: &dyn crate::request::RequestList,
    real: &dyn lift::CallSource,
    make: &mut dyn FnMut() -> std::io::Result<Box<dyn crate::workload::RequestStore>>,
) -> std::io::Result<Workload> {
    let (mut w, first) = lift::lift_parts_stored(facts, requests, real, make)?;
    infer::infer_accel_hash(&mut w, &first);
    infer::infer_revalidate_freq(&mut w, &first);
    infer::infer_realpath_settings(&mut w, &first);
    Ok(w)
}

/// [`lift()`] completed from a reference capture
/// ([`lift::lift_with_reference_parts`]), then the settings inference.
pub fn lift_with_reference(
    trace: &statstorm_trace::Trace,
    requests: &crate::request::Requests,
    reference: &Workload,
) -> Result<(Workload, ReferenceUse), ReferenceError> {
    let real = lift::request_ops(trace, requests);
    let facts = lift::TraceFacts::of(trace, requests);
    lift_with_reference_from(&facts, requests, reference, &real)
}

/// [`lift_with_reference`] of the requests' calls `real` as
/// [`lift::request_ops`] gives them (held wherever the caller keeps them).
pub fn lift_with_reference_from(
    facts: &lift::TraceFacts,
    requests: &crate::request::Requests,
    reference: &Workload,
    real: &dyn lift::CallSource,
) -> Result<(Workload, ReferenceUse), ReferenceError> {
    let (mut w, used, first) = lift::lift_with_reference_from(facts, requests, reference, real)?;
    // a capture complete by itself needs no inference
    if !used.capture_complete {
        infer::infer_accel_hash(&mut w, &first);
        infer::infer_revalidate_freq(&mut w, &first);
        infer::infer_realpath_settings(&mut w, &first);
    }
    Ok((w, used))
}
