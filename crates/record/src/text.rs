//! The capture file: each [`Call`] as the line `strace -f -ttt -T -y`
//! prints for it, so that every reader of strace logs (analyze, predict,
//! diagnose, and a human with grep) reads a recording as it is.
//!
//! strace's `-y` decorations (`3</srv/www/index.php>`, `AT_FDCWD</srv/www>`)
//! come from a table of each process's fds and cwd kept here from the calls
//! themselves (opens, dups, closes, chdir, fork, exec): an fd opened before
//! the recording began is printed bare, as strace prints an fd it cannot
//! name. Buffers strace prints in full and the recorder does not keep
//! (a stat's other fields, a read's data past its first bytes, a
//! directory's entries) are elided the way strace elides them (`...`).

use crate::event::{Call, StatInfo, Syscall};
use std::collections::HashMap;
use std::fmt::Write as _;

const AT_FDCWD: i32 = -100;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_REMOVEDIR: u64 = 0x200;
const AT_EACCESS: u64 = 0x200;
const AT_NO_AUTOMOUNT: u64 = 0x800;
const AT_EMPTY_PATH: u64 = 0x1000;
const O_CLOEXEC: u64 = 0o2000000;
const CLONE_THREAD: u64 = 0x10000;

/// An open fd of a process: the file it names (None for a socket or an fd
/// opened before the recording) and its close-on-exec flag.
#[derive(Clone, Debug)]
struct Fd {
    path: Option<Vec<u8>>,
    cloexec: bool,
}

#[derive(Clone, Debug, Default)]
struct Proc {
    cwd: Option<Vec<u8>>,
    fds: HashMap<i32, Fd>,
}

/// Writes calls as strace lines, keeping each process's fds and cwd.
pub struct Text {
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, nanoseconds: the events carry
    /// monotonic times, the lines epoch times (`-ttt`).
    offset_ns: i128,
    procs: HashMap<u32, Proc>,
    /// The cwd of a process seen for the first time (the recorder reads
    /// /proc/PID/cwd; tests give none).
    cwd_of: Box<dyn FnMut(u32) -> Option<Vec<u8>> + Send>,
}

impl Text {
    pub fn new(offset_ns: i128, cwd_of: Box<dyn FnMut(u32) -> Option<Vec<u8>> + Send>) -> Text {
        Text {
            offset_ns,
            procs: HashMap::new(),
            cwd_of,
        }
    }

    /// Processes whose fds and cwd are kept (bounded by the followed
    /// processes alive: an exit is not a call, so a process is forgotten
    /// when its pid is reused by a fork).
    pub fn processes(&self) -> usize {
        self.procs.len()
    }

    fn proc(&mut self, pid: u32) -> &mut Proc {
        if !self.procs.contains_key(&pid) {
            let cwd = (self.cwd_of)(pid);
            self.procs.insert(
                pid,
                Proc {
                    cwd,
                    fds: HashMap::new(),
                },
            );
        }
        self.procs.get_mut(&pid).expect("inserted above")
    }

    /// Appends `c`'s line (with its newline) to `out`.
    pub fn line(&mut self, c: &Call, out: &mut String) {
        let t = c.ts_ns as i128 + self.offset_ns;
        let (sec, ns) = (t.div_euclid(1_000_000_000), t.rem_euclid(1_000_000_000));
        let _ = write!(
            out,
            "{} {}.{:06} {}(",
            c.tid,
            sec,
            ns / 1000,
            c.syscall.name()
        );
        self.args(c, out);
        out.push_str(") = ");
        let named = self.ret(c, out);
        let d = c.dur_ns / 1000;
        let _ = writeln!(out, " <{}.{:06}>", d / 1_000_000, d % 1_000_000);
        self.update(c, named);
    }

    fn fd(&mut self, pid: u32, fd: i32, out: &mut String) {
        let _ = write!(out, "{fd}");
        if let Some(p) = self.proc(pid).fds.get(&fd).and_then(|f| f.path.clone()) {
            out.push('<');
            deco(&p, out);
            out.push('>');
        }
    }

    fn dirfd(&mut self, pid: u32, fd: i32, out: &mut String) {
        if fd == AT_FDCWD {
            out.push_str("AT_FDCWD");
            if let Some(cwd) = self.proc(pid).cwd.clone() {
                out.push('<');
                deco(&cwd, out);
                out.push('>');
            }
        } else {
            self.fd(pid, fd, out);
        }
    }

    /// The absolute name of `path` as the call resolves it (lexically:
    /// joined to its directory fd or the cwd), when known.
    fn resolve(&mut self, pid: u32, dirfd: i32, path: &[u8]) -> Option<Vec<u8>> {
        if path.starts_with(b"/") {
            return Some(path.to_vec());
        }
        let p = self.proc(pid);
        let base = if dirfd == AT_FDCWD {
            p.cwd.clone()?
        } else {
            p.fds.get(&dirfd)?.path.clone()?
        };
        if path.is_empty() {
            return Some(base);
        }
        let mut out = base;
        if !out.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(path);
        Some(out)
    }

    fn args(&mut self, c: &Call, out: &mut String) {
        let a = c.args;
        let pid = c.pid;
        let path = c.path.unwrap_or(b"");
        let i = |x: u64| x as i64 as i32;
        match c.syscall {
            Syscall::Read | Syscall::Write => {
                self.fd(pid, i(a[0]), out);
                out.push_str(", ");
                match (c.syscall, c.path) {
                    (Syscall::Read, Some(d)) if c.ret > 0 => {
                        quoted(d, out);
                        if (d.len() as i64) < c.ret {
                            out.push_str("...");
                        }
                    }
                    _ => {
                        let _ = write!(out, "{:#x}", a[1]);
                    }
                }
                let _ = write!(out, ", {}", a[2]);
            }
            Syscall::Open => {
                quoted(path, out);
                open_flags(a[1], out);
                if a[1] & 0o100 != 0 || a[1] & 0o20000000 != 0 {
                    let _ = write!(out, ", 0{:o}", a[2]);
                }
            }
            Syscall::Openat => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                open_flags(a[2], out);
                if a[2] & 0o100 != 0 || a[2] & 0o20000000 != 0 {
                    let _ = write!(out, ", 0{:o}", a[3]);
                }
            }
            Syscall::Openat2 => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(", {flags=");
                let mut f = String::new();
                open_flags(c.extra, &mut f);
                out.push_str(f.trim_start_matches(", "));
                let _ = write!(out, "}}, {}", a[3]);
            }
            Syscall::Close | Syscall::Fchdir | Syscall::Dup => self.fd(pid, i(a[0]), out),
            Syscall::Dup2 => {
                self.fd(pid, i(a[0]), out);
                let _ = write!(out, ", {}", i(a[1]));
            }
            Syscall::Dup3 => {
                self.fd(pid, i(a[0]), out);
                let _ = write!(
                    out,
                    ", {}, {}",
                    i(a[1]),
                    if a[2] & O_CLOEXEC != 0 {
                        "O_CLOEXEC"
                    } else {
                        "0"
                    }
                );
            }
            Syscall::Fcntl => {
                self.fd(pid, i(a[0]), out);
                let cmd = if a[1] == 1030 {
                    "F_DUPFD_CLOEXEC"
                } else {
                    "F_DUPFD"
                };
                let _ = write!(out, ", {cmd}, {}", a[2]);
            }
            Syscall::Stat | Syscall::Lstat => {
                quoted(path, out);
                out.push_str(", ");
                stat_buf(c.stat, a[1], out);
            }
            Syscall::Fstat => {
                self.fd(pid, i(a[0]), out);
                out.push_str(", ");
                stat_buf(c.stat, a[1], out);
            }
            Syscall::Newfstatat => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(", ");
                stat_buf(c.stat, a[2], out);
                out.push_str(", ");
                at_flags(a[3], out);
            }
            Syscall::Statx => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(", ");
                at_flags(a[2], out);
                let _ = write!(out, ", {:#x}, ", a[3]);
                match c.stat {
                    Some(s) => {
                        out.push_str("{stx_mode=");
                        mode(s.mode, out);
                        let _ = write!(
                            out,
                            ", stx_size={}, stx_mtime={{tv_sec={}, tv_nsec={}}}, stx_ctime={{tv_sec={}, tv_nsec={}}}}}",
                            s.size, s.mtime, s.mtime_nsec, s.ctime, s.ctime_nsec
                        );
                    }
                    None => {
                        let _ = write!(out, "{:#x}", a[4]);
                    }
                }
            }
            Syscall::Access => {
                quoted(path, out);
                out.push_str(", ");
                access_mode(a[1], out);
            }
            Syscall::Faccessat | Syscall::Faccessat2 => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(", ");
                access_mode(a[2], out);
                if c.syscall == Syscall::Faccessat2 {
                    out.push_str(", ");
                    if a[3] & AT_EACCESS != 0 {
                        out.push_str("AT_EACCESS");
                    } else {
                        at_flags(a[3], out);
                    }
                }
            }
            Syscall::Readlink => {
                quoted(path, out);
                out.push_str(", ");
                readlink_buf(c, a[1], out);
                let _ = write!(out, ", {}", a[2]);
            }
            Syscall::Readlinkat => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(", ");
                readlink_buf(c, a[2], out);
                let _ = write!(out, ", {}", a[3]);
            }
            Syscall::Getdents | Syscall::Getdents64 => {
                self.fd(pid, i(a[0]), out);
                let _ = write!(out, ", {:#x} /* ? entries */, {}", a[1], a[2]);
            }
            Syscall::Getcwd => {
                match c.path {
                    Some(p) if c.ret > 0 => quoted(p, out),
                    _ => {
                        let _ = write!(out, "{:#x}", a[0]);
                    }
                }
                let _ = write!(out, ", {}", a[1]);
            }
            Syscall::Chdir | Syscall::Rmdir | Syscall::Unlink => quoted(path, out),
            Syscall::Mkdir => {
                quoted(path, out);
                let _ = write!(out, ", 0{:o}", a[1]);
            }
            Syscall::Mkdirat => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                let _ = write!(out, ", 0{:o}", a[2]);
            }
            Syscall::Unlinkat => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(if a[2] & AT_REMOVEDIR != 0 {
                    ", AT_REMOVEDIR"
                } else {
                    ", 0"
                });
            }
            Syscall::Rename => {
                quoted(path, out);
                out.push_str(", ");
                quoted(c.path2.unwrap_or(b""), out);
            }
            Syscall::Renameat | Syscall::Renameat2 => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                out.push_str(", ");
                self.dirfd(pid, i(a[2]), out);
                out.push_str(", ");
                quoted(c.path2.unwrap_or(b""), out);
                if c.syscall == Syscall::Renameat2 {
                    let _ = write!(out, ", {:#x}", a[4]);
                }
            }
            Syscall::Accept => {
                self.fd(pid, i(a[0]), out);
                out.push_str(", NULL, NULL");
            }
            Syscall::Accept4 => {
                self.fd(pid, i(a[0]), out);
                out.push_str(", NULL, NULL, ");
                out.push_str(if a[3] & O_CLOEXEC != 0 {
                    "SOCK_CLOEXEC"
                } else {
                    "0"
                });
            }
            Syscall::Clone => {
                out.push_str("child_stack=NULL, flags=");
                clone_flags(a[0], out);
            }
            Syscall::Clone3 => {
                out.push_str("{flags=");
                clone_flags(c.extra, out);
                let _ = write!(out, "}}, {}", a[1]);
            }
            Syscall::Fork | Syscall::Vfork => {}
            Syscall::Execve => {
                quoted(path, out);
                let _ = write!(out, ", {:#x}, {:#x}", a[1], a[2]);
            }
            Syscall::Execveat => {
                self.dirfd(pid, i(a[0]), out);
                out.push_str(", ");
                quoted(path, out);
                let _ = write!(out, ", {:#x}, {:#x}, {:#x}", a[2], a[3], a[4]);
            }
        }
    }

    /// Writes the result; returns the file a returned fd names (an open's
    /// resolved path, a dup's source), which [`Text::update`] keeps.
    fn ret(&mut self, c: &Call, out: &mut String) -> Option<Vec<u8>> {
        if c.ret < 0 && c.ret > -4096 {
            let e = (-c.ret) as i32;
            let _ = write!(out, "-1 {} ({})", errno_name(e), errno_text(e));
            return None;
        }
        let _ = write!(out, "{}", c.ret);
        // the returned fd's decoration
        let named = match c.syscall {
            Syscall::Open | Syscall::Openat | Syscall::Openat2 => {
                let (dirfd, p) = match c.syscall {
                    Syscall::Open => (AT_FDCWD, c.path.unwrap_or(b"")),
                    _ => (c.args[0] as i64 as i32, c.path.unwrap_or(b"")),
                };
                self.resolve(c.pid, dirfd, p)
            }
            Syscall::Dup | Syscall::Dup2 | Syscall::Dup3 | Syscall::Fcntl => self
                .proc(c.pid)
                .fds
                .get(&(c.args[0] as i64 as i32))
                .and_then(|f| f.path.clone()),
            _ => None,
        };
        if let Some(p) = &named {
            if c.ret >= 0 && c.ret <= i32::MAX as i64 {
                out.push('<');
                deco(p, out);
                out.push('>');
            }
        }
        named
    }

    /// The process's fds and cwd after `c`; `named`: what [`Text::ret`]
    /// found the returned fd to name.
    fn update(&mut self, c: &Call, named: Option<Vec<u8>>) {
        if c.ret < 0 {
            return;
        }
        let pid = c.pid;
        let a = c.args;
        let fd_of = |x: u64| x as i64 as i32;
        let ret_fd = c.ret as i32;
        match c.syscall {
            Syscall::Open | Syscall::Openat | Syscall::Openat2 => {
                let flags = match c.syscall {
                    Syscall::Open => a[1],
                    Syscall::Openat => a[2],
                    _ => c.extra,
                };
                self.proc(pid).fds.insert(
                    ret_fd,
                    Fd {
                        path: named,
                        cloexec: flags & O_CLOEXEC != 0,
                    },
                );
            }
            Syscall::Accept | Syscall::Accept4 => {
                let cloexec = c.syscall == Syscall::Accept4 && a[3] & O_CLOEXEC != 0;
                self.proc(pid).fds.insert(
                    ret_fd,
                    Fd {
                        path: None,
                        cloexec,
                    },
                );
            }
            Syscall::Dup | Syscall::Dup2 | Syscall::Dup3 | Syscall::Fcntl => {
                let cloexec = match c.syscall {
                    Syscall::Dup3 => a[2] & O_CLOEXEC != 0,
                    Syscall::Fcntl => a[1] == 1030,
                    _ => false,
                };
                self.proc(pid).fds.insert(
                    ret_fd,
                    Fd {
                        path: named,
                        cloexec,
                    },
                );
            }
            Syscall::Close => {
                self.proc(pid).fds.remove(&fd_of(a[0]));
            }
            Syscall::Chdir => {
                let cwd = self.resolve(pid, AT_FDCWD, c.path.unwrap_or(b""));
                self.proc(pid).cwd = cwd;
            }
            Syscall::Fchdir => {
                let p = self.proc(pid);
                p.cwd = p.fds.get(&fd_of(a[0])).and_then(|f| f.path.clone());
            }
            Syscall::Getcwd => {
                if let Some(cwd) = c.path {
                    self.proc(pid).cwd = Some(cwd.to_vec());
                }
            }
            Syscall::Clone | Syscall::Clone3 | Syscall::Fork | Syscall::Vfork => {
                let flags = match c.syscall {
                    Syscall::Clone => a[0],
                    Syscall::Clone3 => c.extra,
                    _ => 0,
                };
                if c.ret > 0 && flags & CLONE_THREAD == 0 {
                    let child = self.proc(pid).clone();
                    self.procs.insert(c.ret as u32, child);
                }
            }
            Syscall::Execve | Syscall::Execveat => {
                self.proc(pid).fds.retain(|_, f| !f.cloexec);
            }
            _ => {}
        }
    }
}

/// A string argument as strace quotes it: printable ASCII as is, `"` and
/// `\` escaped, other bytes as `\xNN`.
pub(crate) fn quoted(s: &[u8], out: &mut String) {
    out.push('"');
    for &b in s {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

/// A `-y` decoration: `>` and non-printable bytes escaped as strace does.
fn deco(s: &[u8], out: &mut String) {
    for &b in s {
        match b {
            b'>' | b'<' | b'\\' | b'"' => {
                let _ = write!(out, "\\x{b:02x}");
            }
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

fn flags_joined(v: u64, names: &[(u64, &str)], out: &mut String) {
    let mut rest = v;
    let mut first = true;
    for &(bit, name) in names {
        if bit != 0 && rest & bit == bit {
            if !first {
                out.push('|');
            }
            out.push_str(name);
            rest &= !bit;
            first = false;
        }
    }
    if rest != 0 || first {
        if !first {
            out.push('|');
        }
        let _ = write!(out, "{rest:#x}");
    }
}

/// `, O_RDONLY|O_CLOEXEC` (with the leading separator).
fn open_flags(f: u64, out: &mut String) {
    out.push_str(", ");
    out.push_str(match f & 3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        2 => "O_RDWR",
        _ => "O_ACCMODE",
    });
    let rest = f & !3;
    if rest != 0 {
        out.push('|');
        flags_joined(
            rest,
            &[
                (0o20200000, "O_TMPFILE"),
                (0o4010000, "O_SYNC"),
                (0o100, "O_CREAT"),
                (0o200, "O_EXCL"),
                (0o400, "O_NOCTTY"),
                (0o1000, "O_TRUNC"),
                (0o2000, "O_APPEND"),
                (0o4000, "O_NONBLOCK"),
                (0o10000, "O_DSYNC"),
                (0o20000, "O_ASYNC"),
                (0o40000, "O_DIRECT"),
                (0o100000, "O_LARGEFILE"),
                (0o400000, "O_NOFOLLOW"),
                (0o1000000, "O_NOATIME"),
                (0o2000000, "O_CLOEXEC"),
                (0o10000000, "O_PATH"),
                (0o200000, "O_DIRECTORY"),
            ],
            out,
        );
    }
}

fn at_flags(f: u64, out: &mut String) {
    if f == 0 {
        out.push('0');
        return;
    }
    flags_joined(
        f,
        &[
            (AT_SYMLINK_NOFOLLOW, "AT_SYMLINK_NOFOLLOW"),
            (AT_NO_AUTOMOUNT, "AT_NO_AUTOMOUNT"),
            (AT_EMPTY_PATH, "AT_EMPTY_PATH"),
        ],
        out,
    );
}

fn access_mode(m: u64, out: &mut String) {
    if m == 0 {
        out.push_str("F_OK");
        return;
    }
    flags_joined(m, &[(4, "R_OK"), (2, "W_OK"), (1, "X_OK")], out);
}

fn clone_flags(f: u64, out: &mut String) {
    let sig = f & 0xff;
    flags_joined(
        f & !0xff,
        &[
            (0x100, "CLONE_VM"),
            (0x200, "CLONE_FS"),
            (0x400, "CLONE_FILES"),
            (0x800, "CLONE_SIGHAND"),
            (0x1000, "CLONE_PIDFD"),
            (0x2000, "CLONE_PTRACE"),
            (0x4000, "CLONE_VFORK"),
            (0x8000, "CLONE_PARENT"),
            (0x10000, "CLONE_THREAD"),
            (0x20000, "CLONE_NEWNS"),
            (0x40000, "CLONE_SYSVSEM"),
            (0x80000, "CLONE_SETTLS"),
            (0x100000, "CLONE_PARENT_SETTID"),
            (0x200000, "CLONE_CHILD_CLEARTID"),
            (0x1000000, "CLONE_CHILD_SETTID"),
        ],
        out,
    );
    if sig == 17 {
        out.push_str("|SIGCHLD");
    } else if sig != 0 {
        let _ = write!(out, "|{sig}");
    }
}

fn mode(m: u32, out: &mut String) {
    let kind = match m & 0o170000 {
        0o140000 => "S_IFSOCK",
        0o120000 => "S_IFLNK",
        0o100000 => "S_IFREG",
        0o060000 => "S_IFBLK",
        0o040000 => "S_IFDIR",
        0o020000 => "S_IFCHR",
        0o010000 => "S_IFIFO",
        _ => "0",
    };
    let _ = write!(out, "{kind}|{:04o}", m & 0o7777);
}

/// A stat buffer: the fields kept (not followed by `...`: the reader takes
/// the mtime only from a struct that is not abbreviated); the pointer
/// when the call failed (strace does the same).
fn stat_buf(s: Option<StatInfo>, ptr: u64, out: &mut String) {
    match s {
        Some(s) => {
            out.push_str("{st_mode=");
            mode(s.mode, out);
            let _ = write!(
                out,
                ", st_size={}, st_mtime={}, st_mtime_nsec={}, st_ctime={}, st_ctime_nsec={}}}",
                s.size, s.mtime, s.mtime_nsec, s.ctime, s.ctime_nsec
            );
        }
        None => {
            let _ = write!(out, "{ptr:#x}");
        }
    }
}

fn readlink_buf(c: &Call, ptr: u64, out: &mut String) {
    match c.path2 {
        Some(t) if c.ret > 0 => quoted(t, out),
        _ => {
            let _ = write!(out, "{ptr:#x}");
        }
    }
}

/// The errno's name (asm-generic/errno-base.h, errno.h); `E<n>` for one
/// not listed.
pub fn errno_name(e: i32) -> String {
    let n = match e {
        1 => "EPERM",
        2 => "ENOENT",
        3 => "ESRCH",
        4 => "EINTR",
        5 => "EIO",
        6 => "ENXIO",
        7 => "E2BIG",
        8 => "ENOEXEC",
        9 => "EBADF",
        10 => "ECHILD",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        17 => "EEXIST",
        18 => "EXDEV",
        19 => "ENODEV",
        20 => "ENOTDIR",
        21 => "EISDIR",
        22 => "EINVAL",
        23 => "ENFILE",
        24 => "EMFILE",
        25 => "ENOTTY",
        26 => "ETXTBSY",
        27 => "EFBIG",
        28 => "ENOSPC",
        30 => "EROFS",
        31 => "EMLINK",
        32 => "EPIPE",
        34 => "ERANGE",
        36 => "ENAMETOOLONG",
        38 => "ENOSYS",
        39 => "ENOTEMPTY",
        40 => "ELOOP",
        61 => "ENODATA",
        95 => "EOPNOTSUPP",
        110 => "ETIMEDOUT",
        116 => "ESTALE",
        512 => "ERESTARTSYS",
        513 => "ERESTARTNOINTR",
        514 => "ERESTARTNOHAND",
        516 => "ERESTART_RESTARTBLOCK",
        _ => return format!("E{e}"),
    };
    n.to_string()
}

fn errno_text(e: i32) -> String {
    match e {
        512 | 514 => "To be restarted if SA_RESTART is set".into(),
        513 => "To be restarted".into(),
        516 => "Interrupted by signal".into(),
        _ => {
            let s = std::io::Error::from_raw_os_error(e).to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}

/// The capture's first lines: what wrote it and what it followed (comment
/// lines, `# statstorm record...`, which the strace reader counts and
/// passes over).
pub fn header(what: &str, started_epoch_s: i64, kernel: &str) -> String {
    format!(
        "# statstorm record {}: strace -f -ttt -T -y compatible lines (docs/record.md)\n\
         # statstorm record: started at {} (epoch seconds), kernel {}, following {}\n",
        env!("CARGO_PKG_VERSION"),
        started_epoch_s,
        kernel,
        what
    )
}

/// The capture's last lines: how many calls, how it ended, and, when
/// calls were lost, the line the reader turns into a warning
/// (`# statstorm record: lost N calls ...`).
pub fn trailer(s: &crate::recorder::Summary) -> String {
    let counted = if s.windows > 0 {
        format!(" counted in {} windows", s.windows)
    } else {
        String::new()
    };
    let mut out = format!(
        "# statstorm record: {} calls{counted} in {:.1} s, stopped: {}\n",
        s.calls,
        s.elapsed.as_secs_f64(),
        match s.stop {
            crate::recorder::Stop::Duration => "duration reached",
            crate::recorder::Stop::Signal => "interrupted",
            crate::recorder::Stop::CommandExited => "command exited",
            crate::recorder::Stop::TargetsGone => "followed processes exited",
        }
    );
    if s.lost() > 0 {
        let _ = writeln!(
            out,
            "# statstorm record: lost {} calls (ring buffer full: {}, in-flight slot taken: {}, undecodable: {})",
            s.lost(),
            s.lost_ring,
            s.lost_inflight,
            s.undecodable
        );
    }
    if !s.throttled.is_zero() {
        let _ = writeln!(
            out,
            "# statstorm record: the writer paused {:.3} s to keep to its CPU cap (--max-cpu): calls the ring buffer could not hold meanwhile are counted as lost",
            s.throttled.as_secs_f64()
        );
    }
    if s.counts_full > 0 {
        let _ = writeln!(
            out,
            "# statstorm record: {} calls found the counts map full: counted per syscall alone (`= ?` lines; --max-keys keeps more)",
            s.counts_full
        );
    }
    if s.cut_paths > 0 {
        let _ = writeln!(
            out,
            "# statstorm record: {} paths longer than {} bytes were cut",
            s.cut_paths,
            if s.windows > 0 { 255 } else { 511 }
        );
    }
    out
}
