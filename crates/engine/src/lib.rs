//! statstorm's engine: the chain (capture -> analyze -> lift -> lower ->
//! NFS client -> simulate -> explain) as a library of typed values.
//!
//! The model crates each hold one link (`statstorm-trace`: bytes ->
//! events; `statstorm-php`: the PHP model; `statstorm-nfs`: the Linux NFS
//! client model; `statstorm-sim`: the queueing simulator). This crate
//! joins them: it reads nothing from the command line and prints nothing;
//! renderers put its values into words.
//!
//! - [`analyze`]: events -> [`analyze::Profile`] (counts, paths, requests,
//!   realpath walks, bursts) and its findings.
//! - [`capture`]: every request's recorded calls and the activity outside
//!   requests, as the NFS client model needs them.
//! - [`settings`]: the settings a capture ran under, each with its
//!   provenance (stated, inferred from the trace, or PHP's default assumed).
//! - [`predict`]: a capture under another php.ini and other mount options
//!   -> [`predict::Report`] (per request: modelled before and after,
//!   recorded, RPCs, latency), or a typed [`predict::Error`]. A
//!   [`predict::Capture`] is read, split, lifted and lowered under its
//!   recorded settings once; each [`predict::Change`] predicted on it
//!   lowers the proposed side and replays each side once.
//! - [`check`]: the modelled "before" against the recorded calls.
//! - [`diagnose`]: findings, ranked plans with their predicted effect and
//!   risk, and the changes that will not help (docs/diagnose.md).
//! - [`evidence`]: configuration files of the recording machine (php-fpm pools).
//! - [`simulate`]: scenario files and the causes of a simulated run.
//!
//! ```
//! use statstorm_engine::predict::{predict, Capture, Change, PredictOptions};
//!
//! // a php-cli run that stats and opens one script
//! let dir = std::env::temp_dir().join(format!("statstorm-engine-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let trace = dir.join("cli.strace");
//! std::fs::write(
//!     &trace,
//!     r#"100 1700000000.000100 execve("/usr/bin/php", ["php", "/srv/a.php"], 0x7ffd0 /* 1 var */) = 0 <0.000100>
//! 100 1700000000.000200 newfstatat(AT_FDCWD, "/srv/a.php", {st_mode=S_IFREG|0644, st_size=10, ...}, 0) = 0 <0.000010>
//! 100 1700000000.000300 openat(AT_FDCWD, "/srv/a.php", O_RDONLY) = 3 <0.000009>
//! 100 1700000000.000400 close(3) = 0 <0.000005>
//! "#,
//! )?;
//! let opts = PredictOptions {
//!     traces: vec![trace],
//!     php: vec!["realpath_cache_size=0".into()],
//!     ..PredictOptions::default()
//! };
//! let report = predict(&opts, &mut |_stage| {})?;
//! assert_eq!(report.requests.len(), 1);
//! // the rows, read back (a large capture's wait in a temporary file)
//! let rows = report.requests.to_vec()?;
//! // the recorded calls of the request, as the trace shows them
//! assert_eq!(rows[0].recorded.get("openat"), 1);
//!
//! // one capture, several changes: read and lifted once
//! let capture = Capture::load(&opts, &mut |_stage| {})?;
//! for php in ["opcache.enable=0", "realpath_cache_size=0"] {
//!     let change = Change {
//!         php: vec![php.into()],
//!         ..Change::default()
//!     };
//!     let r = capture.predict(&change, &mut |_stage| {})?;
//!     assert_eq!(r.requests.to_vec()?[0].before.by_syscall, rows[0].before.by_syscall);
//! }
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod analyze;
pub mod capture;
pub mod check;
pub mod column;
pub mod diagnose;
pub mod evidence;
pub mod lifted;
mod memory;
pub mod nfs_setup;
pub mod predict;
pub mod settings;
pub mod simulate;
pub mod sorted;
pub mod spill;

/// Whether `v` is its type's zero: serde's `skip_serializing_if` for the
/// figures a report leaves out when nothing happened.
pub(crate) fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
