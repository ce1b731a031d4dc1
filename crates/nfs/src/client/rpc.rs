//! RPC names and counts, spelled as in `/proc/self/mountstats`.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::fmt;

/// One NFS RPC (a COMPOUND round trip on v4), named as `mountstats` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RpcOp {
    Getattr,
    Setattr,
    Lookup,
    Access,
    Readlink,
    Read,
    Write,
    Create,
    Mkdir,
    Remove,
    Rmdir,
    Rename,
    Readdir,
    Readdirplus,
    /// v4 OPEN (CLAIM_NULL, by name; every v4.0 open).
    Open,
    /// v4.1+ OPEN with CLAIM_FH of a cached positive dentry.
    OpenNoattr,
    Close,
    Delegreturn,
}

impl RpcOp {
    pub const ALL: [RpcOp; 18] = [
        RpcOp::Getattr,
        RpcOp::Setattr,
        RpcOp::Lookup,
        RpcOp::Access,
        RpcOp::Readlink,
        RpcOp::Read,
        RpcOp::Write,
        RpcOp::Create,
        RpcOp::Mkdir,
        RpcOp::Remove,
        RpcOp::Rmdir,
        RpcOp::Rename,
        RpcOp::Readdir,
        RpcOp::Readdirplus,
        RpcOp::Open,
        RpcOp::OpenNoattr,
        RpcOp::Close,
        RpcOp::Delegreturn,
    ];

    /// The name in `/proc/self/mountstats`.
    pub fn name(self) -> &'static str {
        match self {
            RpcOp::Getattr => "GETATTR",
            RpcOp::Setattr => "SETATTR",
            RpcOp::Lookup => "LOOKUP",
            RpcOp::Access => "ACCESS",
            RpcOp::Readlink => "READLINK",
            RpcOp::Read => "READ",
            RpcOp::Write => "WRITE",
            RpcOp::Create => "CREATE",
            RpcOp::Mkdir => "MKDIR",
            RpcOp::Remove => "REMOVE",
            RpcOp::Rmdir => "RMDIR",
            RpcOp::Rename => "RENAME",
            RpcOp::Readdir => "READDIR",
            RpcOp::Readdirplus => "READDIRPLUS",
            RpcOp::Open => "OPEN",
            RpcOp::OpenNoattr => "OPEN_NOATTR",
            RpcOp::Close => "CLOSE",
            RpcOp::Delegreturn => "DELEGRETURN",
        }
    }

    pub fn from_name(s: &str) -> Option<RpcOp> {
        RpcOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

impl fmt::Display for RpcOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for RpcOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Counts per RPC; serializes as `{"GETATTR": n, ...}` (nonzero only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RpcCounts(pub [u64; RpcOp::ALL.len()]);

impl RpcCounts {
    pub fn add(&mut self, op: RpcOp, n: u64) {
        self.0[op as usize] += n;
    }
    pub fn of(&self, op: RpcOp) -> u64 {
        self.0[op as usize]
    }
    /// Count by mountstats name; 0 for unknown names.
    pub fn get(&self, name: &str) -> u64 {
        RpcOp::from_name(name).map_or(0, |o| self.of(o))
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    pub fn merge(&mut self, other: &RpcCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
    /// Nonzero counts in [`RpcOp::ALL`] order.
    pub fn nonzero(&self) -> impl Iterator<Item = (RpcOp, u64)> + '_ {
        RpcOp::ALL
            .into_iter()
            .map(|o| (o, self.of(o)))
            .filter(|(_, n)| *n > 0)
    }
}

impl Serialize for RpcCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (op, n) in self.nonzero() {
            m.serialize_entry(op.name(), &n)?;
        }
        m.end()
    }
}

impl fmt::Display for RpcCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (op, n) in self.nonzero() {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{op}={n}")?;
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// One RPC the model says the client sent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rpc {
    pub t_us: i64,
    pub op: RpcOp,
    pub path: String,
    /// Process whose syscall caused it (0: the client itself, e.g. a
    /// delegation return on recall).
    pub pid: u32,
    /// Index of the causing op in the replayed stream (`usize::MAX` for
    /// RPCs caused by a server change).
    pub op_index: usize,
}
