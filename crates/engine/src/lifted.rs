//! Lifted requests kept on disk: the store the lift writes each request
//! to and reads it back from ([`statstorm_php::workload::RequestStore`]),
//! so that a capture's lifted workload costs its distinct paths in
//! memory, not its length.
//!
//! Like [`crate::spill::Spill`]: one `postcard` record per request, held
//! in memory up to 32 MiB and then in an unnamed temporary file, paths as numbers into a table kept in memory
//! (`spill::Names`, by text: a lifted operation's paths are
//! not all shared with the calls'). `PhpOp` itself is not written through serde
//! (its JSON form flattens the kind into the operation, which postcard
//! cannot read back): `OpRec` mirrors it with numbers for names.

use crate::spill::{Blobs, CallRec, Names};
use serde::{Deserialize, Serialize};
use statstorm_php::workload::{PhpOp, PhpOpKind, RequestStore, Via, WorkRequest};
use std::io;

#[derive(Serialize, Deserialize)]
struct ReqRec {
    pid: u32,
    start_us: i64,
    end_us: i64,
    request_time_us: i64,
    cli: bool,
    script: Option<String>,
    from_template: bool,
    settings: Option<Vec<(String, String)>>,
    ops: Vec<OpRec>,
}

#[derive(Serialize, Deserialize)]
struct OpRec {
    t_off_us: i64,
    stat_us: Option<u32>,
    kind: KindRec,
}

/// [`PhpOpKind`] with its names as numbers.
#[derive(Serialize, Deserialize)]
enum KindRec {
    Compile {
        path: u32,
        resolve_as: Option<u32>,
        probes: Vec<u32>,
        via: Via,
        resolves: u32,
        fstats: u32,
        reads: u32,
        keep_open: bool,
    },
    Revalidate {
        path: u32,
        resolves: u32,
    },
    CachedUse {
        path: u32,
    },
    OnceRepeat {
        path: u32,
        probes: Vec<u32>,
        resolves: u32,
    },
    PrimaryResolve {
        path: u32,
    },
    Resolve {
        path: u32,
        lone: bool,
    },
    BasedirCheck {
        path: u32,
    },
    Probe {
        path: u32,
    },
    Lstat {
        path: u32,
    },
    UserIni {
        path: u32,
    },
    Access {
        path: u32,
        mode: u32,
        missing: bool,
    },
    Stat {
        path: u32,
        missing: bool,
    },
    Open {
        path: u32,
        resolve_as: Option<u32>,
        resolves: u32,
        flags: u32,
    },
    Write(CallRec),
    OpcacheStartup {
        lock_dir: String,
    },
    Raw(CallRec),
}

impl KindRec {
    fn of(k: &PhpOpKind, n: &mut Names) -> KindRec {
        use PhpOpKind as K;
        match k {
            K::Compile {
                path,
                resolve_as,
                probes,
                via,
                resolves,
                fstats,
                reads,
                keep_open,
            } => KindRec::Compile {
                path: n.id(path),
                resolve_as: resolve_as.as_ref().map(|p| n.id(p)),
                probes: probes.iter().map(|p| n.id(p)).collect(),
                via: *via,
                resolves: *resolves,
                fstats: *fstats,
                reads: *reads,
                keep_open: *keep_open,
            },
            K::Revalidate { path, resolves } => KindRec::Revalidate {
                path: n.id(path),
                resolves: *resolves,
            },
            K::CachedUse { path } => KindRec::CachedUse { path: n.id(path) },
            K::OnceRepeat {
                path,
                probes,
                resolves,
            } => KindRec::OnceRepeat {
                path: n.id(path),
                probes: probes.iter().map(|p| n.id(p)).collect(),
                resolves: *resolves,
            },
            K::PrimaryResolve { path } => KindRec::PrimaryResolve { path: n.id(path) },
            K::Resolve { path, lone } => KindRec::Resolve {
                path: n.id(path),
                lone: *lone,
            },
            K::BasedirCheck { path } => KindRec::BasedirCheck { path: n.id(path) },
            K::Probe { path } => KindRec::Probe { path: n.id(path) },
            K::Lstat { path } => KindRec::Lstat { path: n.id(path) },
            K::UserIni { path } => KindRec::UserIni { path: n.id(path) },
            K::Access {
                path,
                mode,
                missing,
            } => KindRec::Access {
                path: n.id(path),
                mode: *mode,
                missing: *missing,
            },
            K::Stat { path, missing } => KindRec::Stat {
                path: n.id(path),
                missing: *missing,
            },
            K::Open {
                path,
                resolve_as,
                resolves,
                flags,
            } => KindRec::Open {
                path: n.id(path),
                resolve_as: resolve_as.as_ref().map(|p| n.id(p)),
                resolves: *resolves,
                flags: *flags,
            },
            K::Write { op } => KindRec::Write(CallRec::of(op, n)),
            K::OpcacheStartup { lock_dir } => KindRec::OpcacheStartup {
                lock_dir: lock_dir.clone(),
            },
            K::Raw { op } => KindRec::Raw(CallRec::of(op, n)),
        }
    }

    fn kind(self, n: &Names) -> io::Result<PhpOpKind> {
        use PhpOpKind as K;
        let list = |v: Vec<u32>| -> io::Result<Box<[statstorm_trace::op::Name]>> {
            v.into_iter().map(|i| n.get(i)).collect()
        };
        Ok(match self {
            KindRec::Compile {
                path,
                resolve_as,
                probes,
                via,
                resolves,
                fstats,
                reads,
                keep_open,
            } => K::Compile {
                path: n.get(path)?,
                resolve_as: resolve_as.map(|i| n.get(i)).transpose()?,
                probes: list(probes)?,
                via,
                resolves,
                fstats,
                reads,
                keep_open,
            },
            KindRec::Revalidate { path, resolves } => K::Revalidate {
                path: n.get(path)?,
                resolves,
            },
            KindRec::CachedUse { path } => K::CachedUse { path: n.get(path)? },
            KindRec::OnceRepeat {
                path,
                probes,
                resolves,
            } => K::OnceRepeat {
                path: n.get(path)?,
                probes: list(probes)?,
                resolves,
            },
            KindRec::PrimaryResolve { path } => K::PrimaryResolve { path: n.get(path)? },
            KindRec::Resolve { path, lone } => K::Resolve {
                path: n.get(path)?,
                lone,
            },
            KindRec::BasedirCheck { path } => K::BasedirCheck { path: n.get(path)? },
            KindRec::Probe { path } => K::Probe { path: n.get(path)? },
            KindRec::Lstat { path } => K::Lstat { path: n.get(path)? },
            KindRec::UserIni { path } => K::UserIni { path: n.get(path)? },
            KindRec::Access {
                path,
                mode,
                missing,
            } => K::Access {
                path: n.get(path)?,
                mode,
                missing,
            },
            KindRec::Stat { path, missing } => K::Stat {
                path: n.get(path)?,
                missing,
            },
            KindRec::Open {
                path,
                resolve_as,
                resolves,
                flags,
            } => K::Open {
                path: n.get(path)?,
                resolve_as: resolve_as.map(|i| n.get(i)).transpose()?,
                resolves,
                flags,
            },
            KindRec::Write(c) => K::Write {
                op: Box::new(c.op(n)?),
            },
            KindRec::OpcacheStartup { lock_dir } => K::OpcacheStartup { lock_dir },
            KindRec::Raw(c) => K::Raw {
                op: Box::new(c.op(n)?),
            },
        })
    }
}

/// Lifted requests on disk; see the module docs.
pub struct LiftedSpill {
    blobs: Blobs,
    /// Where each request lies: offset, length.
    at: Vec<(u64, u32)>,
    names: Names,
    buf: Vec<u8>,
}

impl LiftedSpill {
    /// An empty store (its temporary file made once more than
    /// [`Blobs::HELD_BYTES`] are written).
    pub fn new() -> io::Result<LiftedSpill> {
        Ok(LiftedSpill {
            blobs: Blobs::new(),
            at: Vec::new(),
            names: Names::by_text(),
            buf: Vec::new(),
        })
    }

    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.blobs.bytes()
    }

    /// Whether the requests went to a temporary file.
    pub fn on_disk(&self) -> bool {
        self.blobs.on_disk()
    }
}

impl RequestStore for LiftedSpill {
    fn push(&mut self, r: &WorkRequest) -> io::Result<()> {
        let rec = ReqRec {
            pid: r.pid,
            start_us: r.start_us,
            end_us: r.end_us,
            request_time_us: r.request_time_us,
            cli: r.cli,
            script: r.script.clone(),
            from_template: r.from_template,
            settings: r.settings.as_ref().map(|s| s.to_vec()),
            ops: r
                .ops
                .iter()
                .map(|o| OpRec {
                    t_off_us: o.t_off_us,
                    stat_us: o.stat_us,
                    kind: KindRec::of(&o.kind, &mut self.names),
                })
                .collect(),
        };
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let res = postcard::to_io(&rec, &mut buf)
            .map(|_| ())
            .map_err(io::Error::other);
        if let Err(e) = res {
            self.buf = buf;
            return Err(e);
        }
        let placed = self.blobs.put(&buf);
        self.buf = buf;
        self.at.push(placed?);
        Ok(())
    }

    fn get(&self, i: usize) -> io::Result<WorkRequest> {
        let &(offset, len) = self
            .at
            .get(i)
            .ok_or_else(|| io::Error::other(format!("no lifted request {i} stored")))?;
        let buf = self.blobs.get(offset, len)?;
        let rec: ReqRec = postcard::from_bytes(&buf).map_err(io::Error::other)?;
        let mut ops = Vec::with_capacity(rec.ops.len());
        for o in rec.ops {
            ops.push(PhpOp {
                t_off_us: o.t_off_us,
                stat_us: o.stat_us,
                kind: o.kind.kind(&self.names)?,
            });
        }
        Ok(WorkRequest {
            pid: rec.pid,
            start_us: rec.start_us,
            end_us: rec.end_us,
            request_time_us: rec.request_time_us,
            cli: rec.cli,
            script: rec.script,
            from_template: rec.from_template,
            settings: rec.settings.map(Vec::into_boxed_slice),
            ops,
        })
    }

    fn len(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use statstorm_trace::op::{Op, OpKind};

    #[test]
    fn every_kind_of_operation_comes_back_as_written() {
        let n = |s: &str| -> statstorm_trace::op::Name { s.into() };
        let mut raw = Op::new(5, 10, OpKind::Getcwd, "/srv");
        raw.errno = Some(n("ENOENT"));
        raw.path2 = Some(n("/srv/b"));
        raw.dur_us = Some(3);
        let kinds = vec![
            PhpOpKind::Compile {
                path: n("/w/a.php"),
                resolve_as: Some(n("/w/./a.php")),
                probes: vec![n("/usr/share/php/a.php")].into(),
                via: Via::Once,
                resolves: 2,
                fstats: 1,
                reads: 3,
                keep_open: true,
            },
            PhpOpKind::Revalidate {
                path: n("/w/a.php"),
                resolves: 1,
            },
            PhpOpKind::CachedUse {
                path: n("/w/b.php"),
            },
            PhpOpKind::OnceRepeat {
                path: n("/w/a.php"),
                probes: Box::new([]),
                resolves: 1,
            },
            PhpOpKind::PrimaryResolve {
                path: n("/w/i.php"),
            },
            PhpOpKind::Resolve {
                path: n("/w/d"),
                lone: true,
            },
            PhpOpKind::BasedirCheck { path: n("/w/x") },
            PhpOpKind::Probe { path: n("/w/y") },
            PhpOpKind::Lstat { path: n("/w/z") },
            PhpOpKind::UserIni {
                path: n("/w/.user.ini"),
            },
            PhpOpKind::Access {
                path: n("/w/c"),
                mode: 4,
                missing: true,
            },
            PhpOpKind::Stat {
                path: n("/w/c"),
                missing: false,
            },
            PhpOpKind::Open {
                path: n("/w/data"),
                resolve_as: None,
                resolves: 1,
                flags: 0o100,
            },
            PhpOpKind::Write {
                op: Box::new(Op::new(6, 11, OpKind::Unlink, "/w/tmp")),
            },
            PhpOpKind::OpcacheStartup {
                lock_dir: "/tmp".into(),
            },
            PhpOpKind::Raw { op: Box::new(raw) },
        ];
        let r = WorkRequest {
            pid: 7,
            start_us: -3,
            end_us: 1 << 40,
            request_time_us: 12,
            cli: true,
            script: Some("/w/i.php".into()),
            from_template: true,
            settings: None,
            ops: kinds
                .into_iter()
                .enumerate()
                .map(|(i, kind)| PhpOp {
                    t_off_us: i as i64 * 7,
                    stat_us: (i % 2 == 0).then_some(i as u32),
                    kind,
                })
                .collect(),
        };
        let mut empty = r.clone();
        empty.ops.clear();
        empty.script = None;
        let mut s = LiftedSpill::new().unwrap();
        s.push(&r).unwrap();
        s.push(&empty).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(1).unwrap(), empty);
        assert_eq!(s.get(0).unwrap(), r);
        assert!(s.get(2).is_err());
        assert!(s.bytes() > 0);
    }
}
