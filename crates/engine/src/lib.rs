//! statstorm's engine: the chain (capture -> analyze -> lift -> lower ->
//! NFS client -> simulate -> explain) as a library of typed values.
//!
//! The model crates each hold one link (`statstorm-trace`: bytes ->
//! events; `statstorm-php`: the PHP model; `statstorm-nfs`: the Linux NFS
//! client model; `statstorm-sim`: the queueing simulator). This crate
//! joins them: it reads nothing from the command line and prints nothing;
//! renderers put its values into words.

pub mod analyze;
pub mod capture;
pub mod check;
pub mod predict;
pub mod settings;
