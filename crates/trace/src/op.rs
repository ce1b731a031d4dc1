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
//!   the fd refers to, known from the open that returned it (or from a
//!   `dup` of such an fd), from `-y` decorations, or else dropped (sockets,
//!   pipes, inherited fds).
//! - `dup`, `dup2`, `dup3` and `fcntl(F_DUPFD*)` make the new fd an alias of
//!   the old fd's open file and give no op of their own. A file is closed
//!   (one [`OpKind::Close`]) when its last fd goes: by `close`, or by a
//!   `dup2`/`dup3` onto an fd that held it (that `dup2` event gives the
//!   `Close`). Closing an fd while another fd still holds the file gives no
//!   op.
//! - relative paths are made absolute with the dirfd's path or the process's
//!   cwd when known (from `chdir`/`fchdir`/`getcwd`); otherwise they are kept
//!   as printed.

// the normalizer's maps (fds, files, pids, names): the fast hash of the
// parser's maps (crate::event::FastHash)
use crate::event::FastMap as HashMap;
use crate::event::FastSet as HashSet;
use crate::event::{Event, Flags, Interner, Kind, Ret};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

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

/// [`normalize_path`], borrowing `p` when it already is normalized (paths
/// the normalizer gave out: no copy for a model that takes them again).
pub fn normalized_path(p: &str) -> std::borrow::Cow<'_, str> {
    let already = p == "/"
        || (p.starts_with('/')
            && !p.ends_with('/')
            && p[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."));
    if already {
        std::borrow::Cow::Borrowed(p)
    } else {
        std::borrow::Cow::Owned(normalize_path(p))
    }
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
    /// Every kind, in declaration order (`ALL[k as usize] == k`).
    pub const ALL: [OpKind; 17] = [
        OpKind::Stat,
        OpKind::Lstat,
        OpKind::Fstat,
        OpKind::Access,
        OpKind::Open,
        OpKind::Close,
        OpKind::Read,
        OpKind::Mmap,
        OpKind::Write,
        OpKind::Readlink,
        OpKind::Getdents,
        OpKind::Chdir,
        OpKind::Getcwd,
        OpKind::Mkdir,
        OpKind::Rmdir,
        OpKind::Unlink,
        OpKind::Rename,
    ];

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

/// A path or an errno name of an [`Op`]: shared, immutable text.
pub type Name = std::sync::Arc<str>;

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
    /// The file operated on, absolute when it could be resolved (shared:
    /// a copy of an op does not copy its path).
    pub path: Name,
    /// Rename target; for a readlink, the target it returned (as stored
    /// in the link: relative to the link's directory, or absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path2: Option<Name>,
    #[serde(default)]
    pub flags: u32,
    /// errno name when the call failed (e.g. "ENOENT").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<Name>,
    /// Bytes read or written.
    #[serde(default)]
    pub bytes: u64,
    /// For a path the call gave relative to its cwd or a directory fd:
    /// the length of `path`'s prefix naming that directory, where the
    /// kernel's walk starts (0: the path was absolute, the walk starts at
    /// `/`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub walk_base: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Op {
    /// A successful call of `kind` on `path` by `pid` at `t_us`, with no
    /// duration, flags or bytes (what tests and synthetic workloads build).
    pub fn new(t_us: i64, pid: u32, kind: OpKind, path: &str) -> Op {
        Op {
            t_us,
            dur_us: None,
            pid,
            uid: 0,
            kind,
            path: path.into(),
            path2: None,
            flags: 0,
            errno: None,
            bytes: 0,
            walk_base: 0,
        }
    }

    pub fn ok(&self) -> bool {
        self.errno.is_none()
    }
    pub fn flags(&self) -> Flags {
        Flags(self.flags)
    }
}

/// An open file of a process (the kernel's `struct file`, an open file
/// description) and how many of the process's fds refer to it.
struct OpenFile {
    path: String,
    fds: u32,
}

#[derive(Default)]
struct ProcState {
    cwd: Option<String>,
    /// fd -> key in `files`.
    fds: HashMap<i32, u64>,
    files: HashMap<u64, OpenFile>,
}

impl ProcState {
    fn path_of(&self, fd: i32) -> Option<&str> {
        let id = self.fds.get(&fd)?;
        self.files.get(id).map(|f| f.path.as_str())
    }

    /// Points `fd` at open file `id` (one more reference to it). The file
    /// `fd` held before loses a reference; returns its path when that was
    /// the last one (the file is closed).
    fn install(&mut self, fd: i32, id: u64) -> Option<String> {
        if let Some(f) = self.files.get_mut(&id) {
            f.fds += 1;
        }
        let prev = self.fds.insert(fd, id)?;
        self.drop_ref(prev)
    }

    /// Removes `fd`; `Some((path, last))` when it referred to a known file,
    /// `last` when no other fd refers to that file any more.
    fn release(&mut self, fd: i32) -> Option<(String, bool)> {
        let id = self.fds.remove(&fd)?;
        match self.drop_ref(id) {
            Some(path) => Some((path, true)),
            None => Some((self.files.get(&id)?.path.clone(), false)),
        }
    }

    /// One reference less to file `id`; its path when that was the last.
    fn drop_ref(&mut self, id: u64) -> Option<String> {
        let f = self.files.get_mut(&id)?;
        f.fds = f.fds.saturating_sub(1);
        if f.fds > 0 {
            return None;
        }
        self.files.remove(&id).map(|f| f.path)
    }
}

/// Turns events into ops, tracking each process's fds (with the aliases
/// made by `dup`, `dup2`, `dup3` and `fcntl(F_DUPFD*)`) and cwd.
#[derive(Default)]
pub struct Normalizer {
    procs: HashMap<u32, ProcState>,
    next_file: u64,
    /// Every path and errno name given out, each stored once (bounded by
    /// the distinct paths of the trace).
    names: std::cell::RefCell<HashSet<Name>>,
    /// The name of each interned string asked for (an absolute path, an
    /// errno name), by its id in the interner of the generation kept:
    /// found without hashing and comparing its text again.
    by_id: std::cell::RefCell<(u64, Vec<Option<Name>>)>,
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

    /// A new open file at `fd` of `pid` with one reference; a file `fd` held
    /// before (a close the trace missed) loses its reference silently.
    fn open_file(&mut self, pid: u32, fd: i32, path: String) -> u64 {
        let id = self.next_file;
        self.next_file += 1;
        let st = self.procs.entry(pid).or_default();
        st.files.insert(id, OpenFile { path, fds: 0 });
        let _ = st.install(fd, id);
        id
    }

    /// `p` made absolute (borrowed when it is already: most paths).
    fn resolve<'a>(
        &self,
        pid: u32,
        dirfd: Option<i32>,
        fd_path: Option<&str>,
        p: &'a str,
    ) -> Cow<'a, str> {
        if p.starts_with('/') {
            return Cow::Borrowed(p);
        }
        let st = self.procs.get(&pid);
        let base = match dirfd {
            Some(fd) => fd_path
                .map(str::to_string)
                .or_else(|| st.and_then(|s| s.path_of(fd)).map(str::to_string)),
            None => st.and_then(|s| s.cwd.clone()),
        };
        Cow::Owned(match base {
            Some(b) if p.is_empty() => b,
            Some(b) => join(&b, p),
            None => p.to_string(),
        })
    }

    /// The file of `fd`: its `-y` decoration when absolute, else the file
    /// the process opened there.
    fn fd_file<'a>(
        &'a self,
        pid: u32,
        fd: Option<i32>,
        fd_path: Option<&'a str>,
    ) -> Option<Cow<'a, str>> {
        if let Some(p) = fd_path {
            if p.starts_with('/') {
                return Some(Cow::Borrowed(p));
            }
        }
        let fd = fd?;
        self.procs.get(&pid)?.path_of(fd).map(Cow::Borrowed)
    }

    /// `dup`, `dup2`, `dup3`, `fcntl(F_DUPFD*)`: the new fd refers to the
    /// old fd's open file (Linux `fs/file.c`: `dup`/`f_dupfd` take a new
    /// reference with `get_file` and install it in a free slot; `do_dup2`
    /// installs it in `newfd` and then `filp_close`s the file `newfd` held).
    /// Only the last reference's close is a close of the file (R32, R33;
    /// `fput`: the file's `release` runs when its count drops to zero; on NFS that is
    /// `nfs_file_release` in `fs/nfs/file.c` -> `nfs_file_clear_open_context`,
    /// where the open context goes and v4 sends CLOSE). Not modelled: the
    /// `->flush` of every `filp_close` (`nfs_file_flush`, close-to-open
    /// writeback of a file open for writing) also runs for a close that is
    /// not the last, so data written before such a close is flushed there,
    /// not at the [`OpKind::Close`]. Returns the path of the file the target
    /// fd held when this call closed it.
    fn dup(&mut self, ev: &Event, strings: &Interner) -> Option<String> {
        let (old, new) = ev.dup_of()?;
        if old == new {
            // dup2(fd, fd) returns fd and changes nothing (fs/file.c
            // SYSCALL_DEFINE2(dup2)); dup3(fd, fd) fails with EINVAL
            // (ksys_dup3).
            return None;
        }
        let abs = |id: Option<crate::PathId>| {
            id.map(|i| strings.str(i).into_owned())
                .filter(|p| p.starts_with('/'))
        };
        let known = self
            .procs
            .get(&ev.pid)
            .and_then(|s| s.fds.get(&old).copied());
        let file = match known {
            Some(id) => Some(id),
            // An fd this trace did not see opened: its `-y` decoration (or
            // the result's, the same file) names the file.
            None => abs(ev.fd_path)
                .or_else(|| abs(ev.ret_path))
                .map(|p| self.open_file(ev.pid, old, p)),
        };
        let st = self.procs.entry(ev.pid).or_default();
        let target_known = st.fds.contains_key(&new);
        let closed = match file {
            Some(id) => st.install(new, id),
            None => st.release(new).and_then(|(p, last)| last.then_some(p)),
        };
        if !matches!(ev.kind, Kind::Dup2 | Kind::Dup3) {
            // dup and F_DUPFD take a free fd: a file still held there is a
            // close the trace missed, dropped silently as for an open.
            return None;
        }
        if target_known {
            // As for `close`, the `-y` decoration names the file when given.
            closed.map(|p| abs(ev.path2).unwrap_or(p))
        } else {
            // A target fd not tracked here but named by its `-y` decoration
            // (dup2/dup3's second argument) is closed as by `close`.
            abs(ev.path2)
        }
    }

    /// Converts one event; returns `None` for events that are not
    /// filesystem operations (or fd calls on unknown fds).
    pub fn push(&mut self, ev: &Event, strings: &Interner) -> Option<Op> {
        let names = std::mem::take(&mut self.names);
        let by_id = std::mem::take(&mut self.by_id);
        let op = self.convert(ev, strings, &names, &by_id);
        self.names = names;
        self.by_id = by_id;
        op
    }

    fn convert(
        &mut self,
        ev: &Event,
        strings: &Interner,
        names: &std::cell::RefCell<HashSet<Name>>,
        by_id: &std::cell::RefCell<(u64, Vec<Option<Name>>)>,
    ) -> Option<Op> {
        if matches!(
            ev.kind,
            Kind::Accept | Kind::Accept4 | Kind::Recvfrom | Kind::Recvmsg | Kind::Other
        ) {
            // no filesystem operation: nothing of the event is looked up
            return None;
        }
        let name = |s: &str| -> Name {
            let mut set = names.borrow_mut();
            match set.get(s) {
                Some(n) => n.clone(),
                None => {
                    let n: Name = s.into();
                    set.insert(n.clone());
                    n
                }
            }
        };
        // the event's strings borrowed from the interner, not copied
        // (valid UTF-8, as paths are)
        let s = |id: Option<crate::PathId>| id.map(|i| strings.str(i));
        let id_name = |id: crate::PathId| -> Name {
            let mut c = by_id.borrow_mut();
            if c.0 != strings.generation() {
                *c = (strings.generation(), Vec::new());
            }
            let k = id.0 as usize;
            if let Some(Some(n)) = c.1.get(k) {
                return n.clone();
            }
            let n = name(&strings.str(id));
            if c.1.len() <= k {
                c.1.resize(k + 1, None);
            }
            c.1[k] = Some(n.clone());
            n
        };
        let abs_name = |id: Option<crate::PathId>| {
            id.filter(|&i| strings.bytes(i).first() == Some(&b'/'))
                .map(id_name)
        };
        // an absolute path is its own resolution, and the `-y` decoration
        // of an fd names its file when absolute: their names by id (the
        // texts are looked at only when a path must be joined to a
        // directory)
        let path_abs = abs_name(ev.path);
        let fd_abs = abs_name(ev.fd_path);
        let resolved = |this: &Self, dirfd: Option<i32>| -> Option<Name> {
            if let Some(n) = &path_abs {
                return Some(n.clone());
            }
            let (path, fd_path) = (s(ev.path), s(ev.fd_path));
            let full = this.resolve(ev.pid, dirfd, fd_path.as_deref(), path.as_deref()?);
            Some(name(&full))
        };
        let fd_named = |this: &Self| -> Option<Name> {
            if let Some(n) = &fd_abs {
                return Some(n.clone());
            }
            let fd_path = s(ev.fd_path);
            let file = this.fd_file(ev.pid, ev.fd, fd_path.as_deref())?;
            Some(name(&file))
        };
        let errno = ev.errno().map(|e| id_name(e.0));
        let ok = errno.is_none() && ev.ret != Ret::Unknown;
        let pid = ev.pid;
        let flags = ev.flags;
        let dirfd = if flags.has(Flags::AT_FDCWD) {
            None
        } else {
            ev.fd
        };
        let mk = |kind: OpKind, path: Name| Op {
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
            walk_base: 0,
        };
        let op = match ev.kind {
            Kind::Stat => mk(OpKind::Stat, resolved(self, None)?),
            Kind::Lstat => mk(OpKind::Lstat, resolved(self, None)?),
            Kind::Fstat => mk(OpKind::Fstat, fd_named(self)?),
            Kind::Newfstatat | Kind::Fstatat64 | Kind::Statx => {
                let empty = ev.path.is_none_or(|i| strings.bytes(i).is_empty());
                if empty && flags.has(Flags::AT_EMPTY_PATH) {
                    mk(OpKind::Fstat, fd_named(self)?)
                } else {
                    let full = match &path_abs {
                        Some(n) => n.clone(),
                        None => {
                            let p = s(ev.path);
                            let fd_path = s(ev.fd_path);
                            name(&self.resolve(
                                pid,
                                dirfd,
                                fd_path.as_deref(),
                                p.as_deref().unwrap_or(""),
                            ))
                        }
                    };
                    if flags.has(Flags::AT_SYMLINK_NOFOLLOW) {
                        mk(OpKind::Lstat, full)
                    } else {
                        mk(OpKind::Stat, full)
                    }
                }
            }
            Kind::Access | Kind::Faccessat | Kind::Faccessat2 => {
                mk(OpKind::Access, resolved(self, dirfd)?)
            }
            Kind::Open | Kind::Openat | Kind::Openat2 | Kind::Creat => {
                let full = resolved(self, dirfd)?;
                let mut op = mk(OpKind::Open, full.clone());
                if ev.kind == Kind::Creat {
                    op.flags |= Flags::O_CREAT | Flags::O_WRONLY | Flags::O_TRUNC;
                }
                if let (true, Ret::Ok(fd)) = (ok, ev.ret) {
                    let file = s(ev.ret_path)
                        .filter(|p| p.starts_with('/'))
                        .map_or_else(|| full.to_string(), Cow::into_owned);
                    self.open_file(pid, fd as i32, file);
                }
                op
            }
            Kind::Close => {
                let file = fd_named(self);
                let released = match (ev.fd, self.procs.get_mut(&pid)) {
                    (Some(fd), Some(st)) => st.release(fd),
                    _ => None,
                };
                if let Some((_, false)) = released {
                    // Another fd (a dup) still holds the file: close_fd ->
                    // filp_close only drops this fd's reference (fs/file.c,
                    // fs/open.c); the file is not closed.
                    return None;
                }
                mk(OpKind::Close, file?)
            }
            Kind::Dup | Kind::Dup2 | Kind::Dup3 | Kind::Fcntl => {
                // The close of the file a dup2/dup3 target held, if this
                // call closed it; else no op.
                mk(OpKind::Close, name(&self.dup(ev, strings)?))
            }
            Kind::Read | Kind::Pread64 | Kind::Write | Kind::Pwrite64 => {
                let file = fd_named(self)?;
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
            Kind::Mmap => mk(OpKind::Mmap, fd_named(self)?),
            Kind::Getdents64 => mk(OpKind::Getdents, fd_named(self)?),
            Kind::Readlink | Kind::Readlinkat => {
                let mut op = mk(OpKind::Readlink, resolved(self, dirfd)?);
                // the target it returned, as stored in the link
                op.path2 = s(ev.path2).filter(|_| ok).as_deref().map(name);
                op
            }
            Kind::Getcwd => {
                // getcwd's "path" is the returned directory.
                let p = s(ev.path)?.into_owned();
                if ok {
                    self.procs.entry(pid).or_default().cwd = Some(p.clone());
                }
                mk(OpKind::Getcwd, name(&p))
            }
            Kind::Chdir => {
                let full = resolved(self, None)?;
                if ok {
                    self.procs.entry(pid).or_default().cwd = Some(full.to_string());
                }
                mk(OpKind::Chdir, full)
            }
            Kind::Fchdir => {
                let fd_path = s(ev.fd_path);
                let file = self.fd_file(pid, ev.fd, fd_path.as_deref())?.into_owned();
                if ok {
                    self.procs.entry(pid).or_default().cwd = Some(file.clone());
                }
                mk(OpKind::Chdir, name(&file))
            }
            Kind::Mkdir | Kind::Mkdirat => mk(OpKind::Mkdir, resolved(self, dirfd)?),
            Kind::Rmdir => mk(OpKind::Rmdir, resolved(self, None)?),
            Kind::Unlink | Kind::Unlinkat => {
                let full = resolved(self, dirfd)?;
                if flags.has(Flags::AT_REMOVEDIR) {
                    mk(OpKind::Rmdir, full)
                } else {
                    mk(OpKind::Unlink, full)
                }
            }
            Kind::Rename | Kind::Renameat | Kind::Renameat2 => {
                // For renameat the second dirfd is not kept; relative targets
                // resolve against the cwd (PHP passes absolute paths).
                let from = resolved(self, dirfd)?;
                let to = s(ev.path2).map(|p| self.resolve(pid, None, None, &p).into_owned());
                let mut op = mk(OpKind::Rename, from);
                op.path2 = to.as_deref().map(name);
                op
            }
            // returned above already
            Kind::Accept | Kind::Accept4 | Kind::Recvfrom | Kind::Recvmsg | Kind::Other => {
                return None
            }
        };
        let mut op = op;
        // a relative path: the walk starts in the directory it was joined to
        let relative = ev
            .path
            .is_some_and(|i| strings.bytes(i).first().is_some_and(|&b| b != b'/'));
        if let Some(p) = s(ev.path.filter(|_| relative)).as_deref() {
            let full = op.path.as_bytes();
            if full.first() == Some(&b'/')
                && full.len() > p.len()
                && full.ends_with(p.as_bytes())
                && full[full.len() - p.len() - 1] == b'/'
            {
                op.walk_base = (full.len() - p.len() - 1) as u32;
            }
        }
        Some(op)
    }
}

#[cfg(test)]
mod tests {

    /// `OpKind::ALL` indexes by the kind's number, and a kind's syscall
    /// name does not depend on the flags (what a count by kind relies on).
    #[test]
    fn all_kinds_by_number_with_one_name_each() {
        for (i, k) in super::OpKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
            let f = crate::Flags::default();
            let all = crate::Flags(u32::MAX);
            assert_eq!(k.syscall_name(f), k.syscall_name(all), "{k:?}");
        }
    }

    #[test]
    fn normalized_path_borrows_only_what_is_already_normal() {
        for p in ["/", "/a", "/a/b.php", "/a/.b"] {
            assert!(
                matches!(normalized_path(p), std::borrow::Cow::Borrowed(_)),
                "{p}"
            );
        }
        for p in [
            "", "a/b", "/a/", "//a", "/a/./b", "/a/../b", "/a/.", "/a/..",
        ] {
            assert!(
                matches!(normalized_path(p), std::borrow::Cow::Owned(_)),
                "{p}"
            );
            assert_eq!(normalized_path(p), normalize_path(p), "{p}");
        }
    }
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
            mtime: None,
            ctime_us: None,
            input: 0,
            line: 1,
        }
    }

    #[test]
    fn names_follow_each_interner() {
        // two interners give the same ids to different paths; a clone
        // grows apart from its original under the same new ids
        let stat = |st: &mut Interner, p: &str| ev(st, Kind::Stat, Some(p), None, 0, Ret::Ok(0));
        let mut a = Interner::new();
        let mut b = Interner::new();
        let ea = stat(&mut a, "/srv/a.php");
        let eb = stat(&mut b, "/srv/b.php");
        assert_eq!(ea.path, eb.path);
        let mut c = a.clone();
        let ec = stat(&mut c, "/srv/c.php");
        let ed = stat(&mut a, "/srv/d.php");
        assert_eq!(ec.path, ed.path);
        let mut n = Normalizer::new();
        for _ in 0..2 {
            for (e, st, want) in [
                (&ea, &a, "/srv/a.php"),
                (&eb, &b, "/srv/b.php"),
                (&ec, &c, "/srv/c.php"),
                (&ed, &a, "/srv/d.php"),
            ] {
                assert_eq!(&*n.push(e, st).unwrap().path, want);
            }
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
        assert_eq!((f.kind, f.path.as_ref()), (OpKind::Fstat, "/m/a.php"));
        assert_eq!(n.push(&close, &st).unwrap().path, "/m/a.php".into());
        assert!(n.push(&read_after, &st).is_none(), "fd 3 was closed");
    }

    /// Events of one process, built by syscall; `fd` is the first fd
    /// argument, `deco`/`deco2` its and dup2's target's `-y` decorations.
    struct Seq {
        st: Interner,
        n: Normalizer,
    }

    impl Seq {
        fn new() -> Self {
            Seq {
                st: Interner::new(),
                n: Normalizer::new(),
            }
        }
        fn call(
            &mut self,
            kind: Kind,
            path: Option<&str>,
            fd: Option<i32>,
            flags: u32,
            ret: Ret,
        ) -> Option<Op> {
            let e = ev(&mut self.st, kind, path, fd, flags, ret);
            self.n.push(&e, &self.st)
        }
        fn deco(
            &mut self,
            kind: Kind,
            fd: i32,
            deco: Option<&str>,
            deco2: Option<&str>,
            flags: u32,
            ret: i64,
        ) -> Option<Op> {
            let mut e = ev(&mut self.st, kind, None, Some(fd), flags, Ret::Ok(ret));
            e.fd_path = deco.map(|p| self.st.intern(p.as_bytes()));
            e.path2 = deco2.map(|p| self.st.intern(p.as_bytes()));
            self.n.push(&e, &self.st)
        }
        fn open(&mut self, path: &str, fd: i64) -> Option<Op> {
            let flags = Flags::AT_FDCWD | Flags::O_WRONLY | Flags::O_CREAT;
            self.call(Kind::Openat, Some(path), None, flags, Ret::Ok(fd))
        }
        fn fd_op(&mut self, kind: Kind, fd: i32, ret: i64) -> Option<(OpKind, String, u64)> {
            self.call(kind, None, Some(fd), 0, Ret::Ok(ret))
                .map(|o| (o.kind, o.path.to_string(), o.bytes))
        }
    }

    fn close_of(p: &str) -> Option<(OpKind, String, u64)> {
        Some((OpKind::Close, p.to_string(), 0))
    }

    /// A shell's `echo tmp > f` (dash, as recorded in the NFS lab's
    /// dirmod_cli-modify_via_client trace, lines 237-248): save stdout with
    /// F_DUPFD, dup2 the file onto 1, close 3, write, restore stdout with
    /// dup2(10, 1), which closes the file.
    #[test]
    fn shell_redirection_closes_the_file_at_the_restoring_dup2() {
        let mut q = Seq::new();
        assert_eq!(q.open("/m/f", 3).unwrap().kind, OpKind::Open);
        assert!(q.fd_op(Kind::Fcntl, 1, 0).is_none(), "F_GETFD is no dup");
        let save = q.call(Kind::Fcntl, None, Some(1), Flags::F_DUPFD, Ret::Ok(10));
        assert!(save.is_none(), "stdout is not a known file");
        assert!(q.fd_op(Kind::Dup2, 3, 1).is_none(), "fd 1 held no file");
        assert!(
            q.fd_op(Kind::Close, 3, 0).is_none(),
            "fd 1 still holds /m/f"
        );
        assert_eq!(
            q.fd_op(Kind::Write, 1, 4),
            Some((OpKind::Write, "/m/f".into(), 4))
        );
        assert_eq!(q.fd_op(Kind::Dup2, 10, 1), close_of("/m/f"));
        assert!(q.fd_op(Kind::Close, 10, 0).is_none());
        assert!(q.fd_op(Kind::Write, 1, 4).is_none(), "fd 1 is stdout again");
        assert!(q.fd_op(Kind::Close, 1, 0).is_none());
    }

    #[test]
    fn the_last_fd_closes_the_file_in_either_order() {
        for first in [3, 5] {
            let mut q = Seq::new();
            q.open("/m/a", 3);
            assert!(q.fd_op(Kind::Dup, 3, 5).is_none());
            assert_eq!(
                q.fd_op(Kind::Read, 5, 7),
                Some((OpKind::Read, "/m/a".into(), 7))
            );
            let second = if first == 3 { 5 } else { 3 };
            assert!(q.fd_op(Kind::Close, first, 0).is_none());
            assert_eq!(q.fd_op(Kind::Fstat, second, 0).unwrap().1, "/m/a");
            assert_eq!(q.fd_op(Kind::Close, second, 0), close_of("/m/a"));
            assert!(q.fd_op(Kind::Read, second, 1).is_none());
        }
    }

    #[test]
    fn dup2_onto_an_open_file_closes_it_unless_another_fd_holds_it() {
        let mut q = Seq::new();
        q.open("/m/a", 3);
        q.open("/m/b", 4);
        // /m/b's only fd is replaced: closed by the dup2.
        assert_eq!(q.fd_op(Kind::Dup3, 3, 4), close_of("/m/b"));
        assert_eq!(q.fd_op(Kind::Write, 4, 1).unwrap().1, "/m/a");
        // dup2 onto an fd holding the same file: one reference traded for
        // another, nothing closed.
        assert!(q.fd_op(Kind::Dup2, 3, 4).is_none());
        q.open("/m/c", 6);
        assert!(q.fd_op(Kind::Dup, 6, 7).is_none());
        // /m/c still has fd 7 after fd 6 is replaced.
        assert!(q.fd_op(Kind::Dup2, 3, 6).is_none());
        assert_eq!(q.fd_op(Kind::Read, 7, 2).unwrap().1, "/m/c");
        assert_eq!(q.fd_op(Kind::Close, 7, 0), close_of("/m/c"));
        for fd in [3, 4] {
            assert!(q.fd_op(Kind::Close, fd, 0).is_none());
        }
        assert_eq!(q.fd_op(Kind::Close, 6, 0), close_of("/m/a"));
    }

    #[test]
    fn dup2_onto_itself_and_failed_dups_change_nothing() {
        let mut q = Seq::new();
        q.open("/m/a", 3);
        assert!(q.fd_op(Kind::Dup2, 3, 3).is_none());
        let ebadf = Errno(q.st.intern(b"EBADF"));
        assert!(q
            .call(Kind::Dup2, None, Some(9), 0, Ret::Err(ebadf))
            .is_none());
        assert!(q
            .call(Kind::Dup, None, Some(3), 0, Ret::Err(ebadf))
            .is_none());
        assert!(q.call(Kind::Dup2, None, Some(3), 0, Ret::Unknown).is_none());
        assert_eq!(q.fd_op(Kind::Close, 3, 0), close_of("/m/a"));
    }

    #[test]
    fn fcntl_dupfd_aliases_other_commands_do_not() {
        let mut q = Seq::new();
        q.open("/m/a", 3);
        // F_GETFL returns flags, not an fd.
        assert!(q.fd_op(Kind::Fcntl, 3, 0x8001).is_none());
        assert!(q.fd_op(Kind::Close, 0x8001, 0).is_none());
        let d = q.call(Kind::Fcntl, None, Some(3), Flags::F_DUPFD, Ret::Ok(12));
        assert!(d.is_none());
        assert!(q.fd_op(Kind::Close, 3, 0).is_none());
        assert_eq!(q.fd_op(Kind::Close, 12, 0), close_of("/m/a"));
    }

    #[test]
    fn decorated_fds_not_seen_opened() {
        let mut q = Seq::new();
        // dup2(5</m/x>, 1</m/y>): fd 1 held /m/y, closed by the call; fd 5's
        // file is now held by fds 1 and 5.
        let d = q.deco(Kind::Dup2, 5, Some("/m/x"), Some("/m/y"), 0, 1);
        assert_eq!(
            d.map(|o| (o.kind, o.path)),
            Some((OpKind::Close, "/m/y".into()))
        );
        assert!(q.fd_op(Kind::Close, 5, 0).is_none());
        assert_eq!(q.fd_op(Kind::Write, 1, 3).unwrap().1, "/m/x");
        assert_eq!(q.fd_op(Kind::Close, 1, 0), close_of("/m/x"));
        // Targets and sources that are not files give nothing.
        let pipe = q.deco(Kind::Dup2, 4, Some("pipe:[77]"), Some("/dev/pts/0"), 0, 2);
        assert_eq!(pipe.map(|o| o.path), Some("/dev/pts/0".into()));
        assert!(q
            .deco(Kind::Dup2, 4, Some("pipe:[77]"), Some("pipe:[78]"), 0, 2)
            .is_none());
        assert!(q.fd_op(Kind::Write, 2, 1).is_none());
    }

    #[test]
    fn fds_are_per_process() {
        let mut q = Seq::new();
        q.open("/m/a", 3);
        let mut e = ev(&mut q.st, Kind::Dup2, None, Some(3), 0, Ret::Ok(4));
        e.pid = 8;
        assert!(q.n.push(&e, &q.st).is_none());
        assert!(q.fd_op(Kind::Read, 4, 1).is_none(), "pid 8's dup");
        assert_eq!(q.fd_op(Kind::Close, 3, 0), close_of("/m/a"));
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
        assert_eq!(op.path, "/srv/rel/x".into());
        assert_eq!(op.errno.as_deref(), Some("ENOENT"));
        let _ = PathId(0);
    }
}
