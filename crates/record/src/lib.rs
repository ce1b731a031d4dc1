//! Live capture of the file syscalls of PHP processes with eBPF: what
//! `statstorm record` runs.
//!
//! A BPF program (src/bpf/record.bpf.c, compiled at build time, CO-RE)
//! on the syscall entry and exit tracepoints keeps the calls the models
//! read ([`event::Syscall`]) of the followed processes and sends each
//! finished call through a ring buffer ([`event::Call`]); the user side
//! writes each as the line `strace -f -ttt -T -y` would print
//! ([`text::Text`]), so the capture is read by everything that reads an
//! strace log. [`recorder::record`] runs a recording; docs/record.md says
//! why it is built so and what it needs of the kernel.
//!
//! ```no_run
//! use statstorm_record::recorder::{record, Config, DEFAULT_RING_BYTES};
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//!
//! let cfg = Config {
//!     pids: vec![],
//!     comm: Some("php-fpm".into()),
//!     command: None,
//!     duration: Duration::from_secs(10),
//!     ring_bytes: DEFAULT_RING_BYTES,
//!     counts: None,
//!     max_cpu: Some(0.5),
//! };
//! let mut out = Vec::new();
//! let summary = record(&cfg, &mut out, &AtomicBool::new(false), &mut |_| {})?;
//! assert_eq!(summary.lost(), 0);
//! # Ok::<(), statstorm_record::recorder::Error>(())
//! ```
pub mod counts;
mod cpu;
mod drain;
pub mod event;
pub mod recorder;
pub mod text;

#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    missing_docs,
    unused_imports,
    unsafe_op_in_unsafe_fn
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/record.skel.rs"));
}
