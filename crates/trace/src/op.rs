//! Normalized filesystem operations: the common currency of the models.
//!
//! The PHP model lowers PHP operations into [`Op`]s; the NFS client model
//! turns [`Op`]s into RPCs. [`Normalizer`] makes the same [`Op`]s from strace
//! [`Event`]s, so a recorded trace and a predicted one are compared in one
//! vocabulary.
//!
//! Normalization rules (one place):
//! - `stat`, `newfstatat`/`fstatat64`/`statx` without `AT_SYMLINK_NOFOLLOW`
//!   -> [`OpKind::Stat`]; `lstat` and the `*at` forms with it -> `Lstat`;
//!   `fstat` and the `*at` forms with `AT_EMPTY_PATH` and an empty path ->
//!   `Fstat` on the fd's file.
//! - `access`/`faccessat`/`faccessat2` -> `Access` (mode in `flags`).
//! - `open`/`openat`/`openat2`/`creat` -> `Open` (flags kept; `creat` is
//!   `O_CREAT|O_WRONLY|O_TRUNC`).
//! - fd-based calls (`fstat`, `read`, `pread64`, `close`, `getdents64`,
//!   `mmap` of a file, `write`, `pwrite64`, `fchdir`) become ops on the file
//!   the fd refers to, known from the open that returned it, from `-y`
//!   decorations, or else dropped (sockets, pipes, inherited fds).
//! - relative paths are made absolute with the dirfd's path or the process's
//!   cwd when known (from `chdir`/`fchdir`/`getcwd`); otherwise they are kept
//!   as printed.

use crate::event::{Event, Flags, Interner, Kind, Ret};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Lexical path normalization shared by the models: collapses `//`, drops
/// `.`, resolves `..` against the component before it, no trailing slash
/// (`"/"` for the root). It does not follow symlinks: PHP's realpath and the
/// kernel's walk do that, each in its own model.
pub fn normalize_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(p.len());
    for c in parts {
        out.push('/');
        out.push_str(c);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// What a normalized operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Stat,
    Lstat,
    Fstat,
    Access,
    Open,
    Close,
    Read,
    Mmap,
    Write,
    Readlink,
    Getdents,
    Chdir,
    Getcwd,
    Mkdir,
    Rmdir,
    Unlink,
    Rename,
}

impl OpKind {
    /// The syscall name PHP 8.2 with glibc 2.36 on x86-64 issues for this
    /// operation (what `strace` prints).
    pub fn syscall_name(self, flags: Flags) -> &'static str {
        match self {
            OpKind::Stat | OpKind::Lstat | OpKind::Fstat => "newfstatat",
            OpKind::Access => "access",
            OpKind::Open => "openat",
            OpKind::Close => "close",
            OpKind::Read => "read",
            OpKind::Mmap => "mmap",
            OpKind::Write => "write",
            OpKind::Readlink => "readlink",
            OpKind::Getdents => "getdents64",
            OpKind::Chdir => "chdir",
            OpKind::Getcwd => "getcwd",
            OpKind::Mkdir => "mkdir",
            OpKind::Rmdir => "rmdir",
            OpKind::Unlink => "unlink",
            OpKind::Rename => {
                let _ = flags;
                "rename"
            }
        }
    }
}

/// One normalized filesystem operation of one process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Start time, microseconds (the trace's clock).
    pub t_us: i64,
    /// Time spent in the call, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur_us: Option<u64>,
    pub pid: u32,
    /// Credential of the caller (strace does not show it; 0 unless known).
    #[serde(default)]
    pub uid: u32,
    pub kind: OpKind,
    /// The file operated on, absolute when it could be resolved.
    pub path: String,
    /// Rename target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path2: Option<String>,
    #[serde(default)]
    pub flags: u32,
    /// errno name when the call failed (e.g. "ENOENT").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// Bytes read or written.
    #[serde(default)]
    pub bytes: u64,
}

impl Op {
    pub fn ok(&self) -> bool {
        self.errno.is_none()
    }
    pub fn flags(&self) -> Flags {
        Flags(self.flags)
    }
}

#[derive(Default)]
struct ProcState {
    cwd: Option<String>,
    fds: HashMap<i32, String>,
}

/// Turns events into ops, tracking each process's fds and cwd.
#[derive(Default)]
pub struct Normalizer {
    procs: HashMap<u32, ProcState>,
}

fn join(base: &str, rel: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{rel}")
    } else {
        format!("{base}/{rel}")
    }
}

impl Normalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the cwd of a process (e.g. known from the command line).
    pub fn set_cwd(&mut self, pid: u32, cwd: &str) {
        self.procs.entry(pid).or_default().cwd = Some(cwd.to_string());
    }

    fn resolve(&self, pid: u32, dirfd: Option<i32>, fd_path: Option<&str>, p: &str) -> String {
        if p.starts_with('/') {
            return p.to_string();
        }
        let st = self.procs.get(&pid);
        let base = match dirfd {
            Some(fd) => fd_path
                .map(str::to_string)
                .or_else(|| st.and_then(|s| s.fds.get(&fd).cloned())),
            None => st.and_then(|s| s.cwd.clone()),
        };
        match base {
            Some(b) if p.is_empty() => b,
            Some(b) => join(&b, p),
            None => p.to_string(),
        }
    }

    fn fd_file(&self, pid: u32, fd: Option<i32>, fd_path: Option<&str>) -> Option<String> {
        if let Some(p) = fd_path {
            if p.starts_with('/') {
                return Some(p.to_string());
            }
        }
        let fd = fd?;
        self.procs.get(&pid)?.fds.get(&fd).cloned()
    }

    /// Converts one event; returns `None` for events that are not
    /// filesystem operations (or fd calls on unknown fds).
    pub fn push(&mut self, ev: &Event, strings: &Interner) -> Option<Op> {
        let s = |id: Option<crate::PathId>| id.map(|i| strings.str(i).into_owned());
        let path = s(ev.path);
        let fd_path = s(ev.fd_path);
        let errno = ev.errno().map(|e| strings.str(e.0).into_owned());
        let ok = errno.is_none() && ev.ret != Ret::Unknown;
        let pid = ev.pid;
        let flags = ev.flags;
        let dirfd = if flags.has(Flags::AT_FDCWD) {
            None
        } else {
            ev.fd
        };
        let mk = |kind: OpKind, path: String| Op {
            t_us: ev.ts_us.unwrap_or(0),
            dur_us: ev.dur_us,
            pid,
            uid: 0,
            kind,
            path,
            path2: None,
            flags: flags.0,
            errno: errno.clone(),
            bytes: 0,
        };
        let op = match ev.kind {
            Kind::Stat => mk(
                OpKind::Stat,
                self.resolve(pid, None, None, path.as_deref()?),
            ),
            Kind::Lstat => mk(
                OpKind::Lstat,
                self.resolve(pid, None, None, path.as_deref()?),
            ),
            Kind::Fstat => mk(OpKind::Fstat, self.fd_file(pid, ev.fd, fd_path.as_deref())?),
            Kind::Newfstatat | Kind::Fstatat64 | Kind::Statx => {
                let p = path.as_deref().unwrap_or("");
                if p.is_empty() && flags.has(Flags::AT_EMPTY_PATH) {
                    mk(OpKind::Fstat, self.fd_file(pid, ev.fd, fd_path.as_deref())?)
                } else {
                    let full = self.resolve(pid, dirfd, fd_path.as_deref(), p);
                    if flags.has(Flags::AT_SYMLINK_NOFOLLOW) {
                        mk(OpKind::Lstat, full)
                    } else {
                        mk(OpKind::Stat, full)
                    }
                }
            }
            Kind::Access | Kind::Faccessat | Kind::Faccessat2 => {
                let full = self.resolve(pid, dirfd, fd_path.as_deref(), path.as_deref()?);
                mk(OpKind::Access, full)
            }
            Kind::Open | Kind::Openat | Kind::Openat2 | Kind::Creat => {
                let full = self.resolve(pid, dirfd, fd_path.as_deref(), path.as_deref()?);
                let mut op = mk(OpKind::Open, full.clone());
                if ev.kind == Kind::Creat {
                    op.flags |= Flags::O_CREAT | Flags::O_WRONLY | Flags::O_TRUNC;
                }
                if let (true, Ret::Ok(fd)) = (ok, ev.ret) {
                    let file = s(ev.ret_path)
                        .filter(|p| p.starts_with('/'))
                        .unwrap_or(full);
                    self.procs
                        .entry(pid)
                        .or_default()
                        .fds
                        .insert(fd as i32, file);
                }
                op
            }
            Kind::Close => {
                let file = self.fd_file(pid, ev.fd, fd_path.as_deref());
                if let (Some(fd), Some(st)) = (ev.fd, self.procs.get_mut(&pid)) {
                    st.fds.remove(&fd);
                }
                mk(OpKind::Close, file?)
            }
            Kind::Read | Kind::Pread64 | Kind::Write | Kind::Pwrite64 => {
                let file = self.fd_file(pid, ev.fd, fd_path.as_deref())?;
                let kind = if matches!(ev.kind, Kind::Read | Kind::Pread64) {
                    OpKind::Read
                } else {
                    OpKind::Write
                };
                let mut op = mk(kind, file);
                if let Ret::Ok(n) = ev.ret {
                    op.bytes = n.max(0) as u64;
                }
                op
            }
            Kind::Mmap => mk(OpKind::Mmap, self.fd_file(pid, ev.fd, fd_path.as_deref())?),
            Kind::Getdents64 => mk(
                OpKind::Getdents,
                self.fd_file(pid, ev.fd, fd_path.as_deref())?,
            ),
            Kind::Readlink | Kind::Readlinkat => {
                let full = self.resolve(pid, dirfd, fd_path.as_deref(), path.as_deref()?);
                mk(OpKind::Readlink, full)
            }
            Kind::Getcwd => {
                // getcwd's "path" is the returned directory.
                let p = path?;
                if ok {
                    self.procs.entry(pid).or_default().cwd = Some(p.clone());
                }
                mk(OpKind::Getcwd, p)
            }
            Kind::Chdir => {
                let full = self.resolve(pid, None, None, path.as_deref()?);
                if ok {
                    self.procs.entry(pid).or_default().cwd = Some(full.clone());
                }
                mk(OpKind::Chdir, full)
            }
            Kind::Fchdir => {
                let file = self.fd_file(pid, ev.fd, fd_path.as_deref())?;
                if ok {
                    self.procs.entry(pid).or_default().cwd = Some(file.clone());
                }
                mk(OpKind::Chdir, file)
            }
            Kind::Mkdir | Kind::Mkdirat => {
                let full = self.resolve(pid, dirfd, fd_path.as_deref(), path.as_deref()?);
                mk(OpKind::Mkdir, full)
            }
            Kind::Rmdir => mk(
                OpKind::Rmdir,
                self.resolve(pid, None, None, path.as_deref()?),
            ),
            Kind::Unlink | Kind::Unlinkat => {
                let full = self.resolve(pid, dirfd, fd_path.as_deref(), path.as_deref()?);
                if flags.has(Flags::AT_REMOVEDIR) {
                    mk(OpKind::Rmdir, full)
                } else {
                    mk(OpKind::Unlink, full)
                }
            }
            Kind::Rename | Kind::Renameat | Kind::Renameat2 => {
                // For renameat the second dirfd is not kept; relative targets
                // resolve against the cwd (PHP passes absolute paths).
                let from = self.resolve(pid, dirfd, fd_path.as_deref(), path.as_deref()?);
                let to = s(ev.path2).map(|p| self.resolve(pid, None, None, &p));
                let mut op = mk(OpKind::Rename, from);
                op.path2 = to;
                op
            }
            Kind::Accept | Kind::Accept4 | Kind::Recvfrom | Kind::Recvmsg | Kind::Other => {
                return None
            }
        };
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Errno, PathId};

    fn ev(
        strings: &mut Interner,
        kind: Kind,
        path: Option<&str>,
        fd: Option<i32>,
        flags: u32,
        ret: Ret,
    ) -> Event {
        Event {
            pid: 7,
            ts_us: Some(1_000_000),
            dur_us: Some(5),
            kind,
            name: strings.intern(kind.name().as_bytes()),
            path: path.map(|p| strings.intern(p.as_bytes())),
            path2: None,
            fd,
            fd_path: None,
            flags: Flags(flags),
            ret,
            ret_path: None,
            input: 0,
            line: 1,
        }
    }

    #[test]
    fn fd_calls_follow_the_open() {
        let mut st = Interner::new();
        let mut n = Normalizer::new();
        let open = ev(
            &mut st,
            Kind::Openat,
            Some("/m/a.php"),
            None,
            Flags::AT_FDCWD,
            Ret::Ok(3),
        );
        let fstat = ev(
            &mut st,
            Kind::Newfstatat,
            Some(""),
            Some(3),
            Flags::AT_EMPTY_PATH,
            Ret::Ok(0),
        );
        let close = ev(&mut st, Kind::Close, None, Some(3), 0, Ret::Ok(0));
        let read_after = ev(&mut st, Kind::Read, None, Some(3), 0, Ret::Ok(10));
        assert_eq!(n.push(&open, &st).unwrap().kind, OpKind::Open);
        let f = n.push(&fstat, &st).unwrap();
        assert_eq!((f.kind, f.path.as_str()), (OpKind::Fstat, "/m/a.php"));
        assert_eq!(n.push(&close, &st).unwrap().path, "/m/a.php");
        assert!(n.push(&read_after, &st).is_none(), "fd 3 was closed");
    }

    #[test]
    fn normalize_path_is_lexical() {
        assert_eq!(normalize_path("/m//a/./b/../c.php"), "/m/a/c.php");
        assert_eq!(normalize_path("/"), "/");
        assert_eq!(normalize_path("/.."), "/");
        assert_eq!(normalize_path("/a/b/"), "/a/b");
    }

    #[test]
    fn lstat_and_errors() {
        let mut st = Interner::new();
        let mut n = Normalizer::new();
        let enoent = Errno(st.intern(b"ENOENT"));
        let e = ev(
            &mut st,
            Kind::Newfstatat,
            Some("rel/x"),
            None,
            Flags::AT_FDCWD | Flags::AT_SYMLINK_NOFOLLOW,
            Ret::Err(enoent),
        );
        n.set_cwd(7, "/srv");
        let op = n.push(&e, &st).unwrap();
        assert_eq!(op.kind, OpKind::Lstat);
        assert_eq!(op.path, "/srv/rel/x");
        assert_eq!(op.errno.as_deref(), Some("ENOENT"));
        let _ = PathId(0);
    }
}
