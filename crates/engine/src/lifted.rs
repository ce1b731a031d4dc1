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

use crate::column::{Bytes, Column, Fixed};
use crate::spill::{Blobs, CallRec, Names};
use serde::{Deserialize, Serialize};
use statstorm_php::workload::{PhpOp, PhpOpKind, RequestStore, Via, WorkRequest};
use std::io;

/// A request's operations as written (the rest of the request is its
/// [`Entry`]).
#[derive(Serialize, Deserialize)]
struct ReqRec {
    ops: Vec<OpRec>,
}

/// Where a request's operations lie, and the request without them (what
/// [`RequestStore::meta`] reads): one fixed-size record per request in a
/// [`Column`], on disk past a megabyte.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    offset: u64,
    len: u32,
    pid: u32,
    start_us: i64,
    end_us: i64,
    request_time_us: i64,
    cli: bool,
    from_template: bool,
    /// A number into the names (`u32::MAX`: none).
    script: u32,
    /// A number into the distinct settings (`u32::MAX`: none).
    settings: u32,
}

impl Fixed for Entry {
    const SIZE: usize = 8 + 4 + 4 + 8 + 8 + 8 + 1 + 1 + 4 + 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.start_us.to_le_bytes());
        out.extend_from_slice(&self.end_us.to_le_bytes());
        out.extend_from_slice(&self.request_time_us.to_le_bytes());
        out.push(self.cli as u8);
        out.push(self.from_template as u8);
        out.extend_from_slice(&self.script.to_le_bytes());
        out.extend_from_slice(&self.settings.to_le_bytes());
    }
    fn take(b: &mut Bytes<'_>) -> Entry {
        Entry {
            offset: b.u64(),
            len: b.u32(),
            pid: b.u32(),
            start_us: b.i64(),
            end_us: b.i64(),
            request_time_us: b.i64(),
            cli: b.u8() != 0,
            from_template: b.u8() != 0,
            script: b.u32(),
            settings: b.u32(),
        }
    }
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
    /// Per request, where its operations lie and the request without
    /// them.
    at: Column<Entry>,
    names: Names,
    /// The distinct command-line settings of the requests.
    settings: Vec<statstorm_php::request::CliSettings>,
    settings_ids: std::collections::HashMap<statstorm_php::request::CliSettings, u32>,
    buf: Vec<u8>,
}

impl LiftedSpill {
    /// An empty store (its temporary file made once more than
    /// [`Blobs::HELD_BYTES`] are written).
    pub fn new() -> io::Result<LiftedSpill> {
        Ok(LiftedSpill {
            blobs: Blobs::new(),
            at: Column::new(),
            names: Names::by_text(),
            settings: Vec::new(),
            settings_ids: Default::default(),
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

    fn entry(&self, i: usize) -> io::Result<Entry> {
        if i >= self.at.len() {
            return Err(io::Error::other(format!("no lifted request {i} stored")));
        }
        self.at.get(i)
    }

    /// Request `e` without its operations.
    fn request_of(&self, e: &Entry) -> io::Result<WorkRequest> {
        Ok(WorkRequest {
            pid: e.pid,
            start_us: e.start_us,
            end_us: e.end_us,
            request_time_us: e.request_time_us,
            cli: e.cli,
            script: match e.script {
                u32::MAX => None,
                id => Some(self.names.get(id)?.to_string()),
            },
            from_template: e.from_template,
            settings: match e.settings {
                u32::MAX => None,
                id => {
                    Some(self.settings.get(id as usize).cloned().ok_or_else(|| {
                        io::Error::other("a request's settings were never stored")
                    })?)
                }
            },
            ops: Vec::new(),
        })
    }
}

impl RequestStore for LiftedSpill {
    fn push(&mut self, r: &WorkRequest) -> io::Result<()> {
        let rec = ReqRec {
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
        let (offset, len) = placed?;
        let script = match &r.script {
            None => u32::MAX,
            Some(s) => self.names.id(&statstorm_trace::op::Name::from(s.as_str())),
        };
        let settings = match &r.settings {
            None => u32::MAX,
            Some(s) => match self.settings_ids.get(s) {
                Some(&id) => id,
                None => {
                    let id = self.settings.len() as u32;
                    self.settings.push(s.clone());
                    self.settings_ids.insert(s.clone(), id);
                    id
                }
            },
        };
        self.at.push(&Entry {
            offset,
            len,
            pid: r.pid,
            start_us: r.start_us,
            end_us: r.end_us,
            request_time_us: r.request_time_us,
            cli: r.cli,
            from_template: r.from_template,
            script,
            settings,
        })
    }

    fn get(&self, i: usize) -> io::Result<WorkRequest> {
        let e = self.entry(i)?;
        let buf = self.blobs.get(e.offset, e.len)?;
        let rec: ReqRec = postcard::from_bytes(&buf).map_err(io::Error::other)?;
        let mut r = self.request_of(&e)?;
        r.ops.reserve_exact(rec.ops.len());
        for o in rec.ops {
            r.ops.push(PhpOp {
                t_off_us: o.t_off_us,
                stat_us: o.stat_us,
                kind: o.kind.kind(&self.names)?,
            });
        }
        Ok(r)
    }

    fn meta(&self, i: usize) -> io::Result<WorkRequest> {
        self.request_of(&self.entry(i)?)
    }

    fn times(&self, i: usize) -> io::Result<(i64, i64)> {
        let e = self.entry(i)?;
        Ok((e.start_us, e.end_us))
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
        empty.settings = Some(vec![("opcache.enable_cli".to_string(), "1".to_string())].into());
        let mut s = LiftedSpill::new().unwrap();
        s.push(&r).unwrap();
        s.push(&empty).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(1).unwrap(), empty);
        assert_eq!(s.get(0).unwrap(), r);
        assert!(s.get(2).is_err());
        assert!(s.bytes() > 0);
        // the request without its operations
        let mut bare = r.clone();
        bare.ops.clear();
        assert_eq!(s.meta(0).unwrap(), bare);
        assert_eq!(s.meta(1).unwrap(), empty);
        assert!(s.meta(2).is_err());
    }

    /// Past a megabyte of requests the entries go to a file and still
    /// read back, with their scripts and settings shared.
    #[test]
    fn many_requests_read_back() {
        let mut s = LiftedSpill::new().unwrap();
        let r = |i: usize| WorkRequest {
            pid: i as u32 % 5,
            start_us: i as i64 * 10,
            end_us: i as i64 * 10 + 7,
            request_time_us: i as i64 * 10 + 1,
            cli: i % 3 == 0,
            script: (i % 4 != 0).then(|| format!("/w/{}.php", i % 7)),
            from_template: i % 2 == 0,
            settings: (i % 5 == 0).then(|| vec![("k".to_string(), (i % 3).to_string())].into()),
            ops: Vec::new(),
        };
        let n = 40_000;
        for i in 0..n {
            s.push(&r(i)).unwrap();
        }
        assert!(s.at.on_disk());
        assert_eq!(s.settings.len(), 3);
        for i in (0..n).step_by(13) {
            assert_eq!(s.meta(i).unwrap(), r(i), "request {i}");
            assert_eq!(s.get(i).unwrap(), r(i), "request {i}");
        }
    }
}
