//! statstorm-php: how PHP turns includes and file functions into syscalls.
//!
//! `PhpConfig` (php.ini settings that change file syscalls), `lift` (events of
//! one request -> PHP operations), `lower` (PHP operations + config + state
//! across requests -> syscalls). Rules: ../shared/design/SEMANTICS.md part B.

pub mod config;
pub mod file_cache;

pub use config::{ConfigError, PhpConfig};
pub mod lift;
pub mod lower;
pub mod realpath;
pub mod workload;

pub use lift::{lift, lift_with_reference, ReferenceError};
pub use lower::{count_by_syscall, lower};
pub use workload::{PhpOp, PhpOpKind, ReferenceUse, WorkRequest, Workload};
pub mod predict;

pub use predict::{predict_ops, predict_workload, predict_workload_with, RequestPrediction};
