//! statstorm-nfs: which RPCs the Linux NFS client sends for a stream of
//! syscalls, under given mount options. Rules: ../shared/design/SEMANTICS.md
//! parts A and C (R-numbers in the code), checked against the lab
//! measurements in ../shared/fixtures/nfs-lab (see docs/nfs-model.md).
//!
//! ```
//! use statstorm_nfs::{replay, ClientParams, MountOptions};
//! use statstorm_trace::op::{Op, OpKind};
//! let opts = MountOptions::parse("vers=3,noatime").unwrap();
//! let params = ClientParams::new("/m");
//! let op = |t_us, kind| Op { t_us, dur_us: None, pid: 1, uid: 33, kind,
//!     path: "/m/a.php".into(), path2: None, flags: 0, errno: None, bytes: 0,
//!     walk_base: 0 };
//! let ops = [op(0, OpKind::Stat), op(10, OpKind::Open), op(20, OpKind::Close)];
//! let r = replay(&ops, &opts, &params, &[]);
//! // cold: ACCESS(root) + LOOKUP(a.php) for the stat; the open pays the
//! // close-to-open GETATTR (R30) and ACCESS(a.php) (no entry yet, R25)
//! assert_eq!(r.totals.to_string(), "GETATTR=1 LOOKUP=1 ACCESS=2");
//! ```

pub mod client;
pub mod mount;
pub mod mountstats;

pub use client::{
    replay, replay_groups, replay_groups_warm, replay_groups_warm_each, replay_warm, warm_shift,
    warmup_ops, Client, ClientParams, Feed, Replay, RpcCounts, RpcOp, ServerChange, WarmFilter,
};
pub use mount::{AtimeMode, LookupCache, MountEntry, MountError, MountOptions, Vers};
