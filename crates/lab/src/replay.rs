//! Replaying a capture's file syscalls: the script format, its parser, and
//! the host-side preparation (the script and the file tree the capture
//! shows). The `statstorm-replay` binary performs a script with the real
//! syscalls. See docs/lab.md, "Replaying a capture".
//!
//! A script is text: the header line [`HEADER`], then one op a line,
//!
//! ```text
//! statstorm-replay 1
//! # comment
//! 7472 0 cwd "/srv/t/app"
//! 7472 0 request-start
//! 7472 42635 openat AT_FDCWD "index.php" O_RDONLY = 3
//! 7472 43158 newfstatat 3 "" AT_EMPTY_PATH = 0
//! 7472 43221 read 3 115 = 115
//! 7472 44856 access "/srv/t/app/nope.php" F_OK = ENOENT
//! 7472 44901 fork 7473 = 7473
//! 7472 45001 close 3 = 0
//! 7472 45100 request-end
//! 7472 45100 exit
//! ```
//!
//! `PID T_US CALL ARGS... [= RESULT]`: the capture's process id, the time
//! in microseconds since the capture's first event, the call and its
//! arguments, and the result the capture saw (a number, an errno name, or
//! `?`; no `=` means none to compare).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::Path;

use statstorm_trace::{Event, Flags, Kind, Ret, Trace};

/// The first line of every script.
pub const HEADER: &str = "statstorm-replay 1";

/// The first line of the window file the replayer writes.
pub const WINDOW_HEADER: &str = "# statstorm-replay window 1";

/// The `getdents64` buffer size the replayer uses (PHP's and glibc's
/// `readdir` use 32 KiB).
pub const GETDENTS_BUF: usize = 32 * 1024;

/// The largest `read`/`write` count a script may give (bytes).
pub const MAX_COUNT: u64 = 16 << 20;

/// The calls of a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// Setup, not compared: the process's working directory at its start.
    Cwd,
    Stat,
    Lstat,
    Fstat,
    Newfstatat,
    Statx,
    Access,
    Faccessat,
    Faccessat2,
    Open,
    Openat,
    Close,
    Read,
    Write,
    Getdents64,
    Readlink,
    Readlinkat,
    Chdir,
    Fchdir,
    Mkdir,
    Mkdirat,
    Rmdir,
    Unlink,
    Unlinkat,
    Rename,
    Renameat,
    /// Starts the capture's process given as argument (a child of this
    /// one).
    Fork,
    /// The process ends.
    Exit,
    RequestStart,
    RequestEnd,
}

/// Argument kinds of a call's signature (see [`Call::signature`]).
///
/// - `d`: a directory fd, `AT_FDCWD` or the capture's fd number;
/// - `p`: a path, a quoted string;
/// - `a`: `AT_*` flags (`AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH|AT_REMOVEDIR`, or `0`);
/// - `m`: an access mode (`F_OK`, or `R_OK|W_OK|X_OK`);
/// - `o`: open flags (`O_RDONLY|O_WRONLY|O_RDWR` then `O_CREAT`, ...);
/// - `f`: the capture's fd number;
/// - `n`: a byte count;
/// - `c`: the capture's process id of a child.
const CALLS: [(Call, &str, &str); 30] = [
    (Call::Cwd, "cwd", "p"),
    (Call::Stat, "stat", "p"),
    (Call::Lstat, "lstat", "p"),
    (Call::Fstat, "fstat", "f"),
    (Call::Newfstatat, "newfstatat", "dpa"),
    (Call::Statx, "statx", "dpa"),
    (Call::Access, "access", "pm"),
    (Call::Faccessat, "faccessat", "dpm"),
    (Call::Faccessat2, "faccessat2", "dpma"),
    (Call::Open, "open", "po"),
    (Call::Openat, "openat", "dpo"),
    (Call::Close, "close", "f"),
    (Call::Read, "read", "fn"),
    (Call::Write, "write", "fn"),
    (Call::Getdents64, "getdents64", "f"),
    (Call::Readlink, "readlink", "p"),
    (Call::Readlinkat, "readlinkat", "dp"),
    (Call::Chdir, "chdir", "p"),
    (Call::Fchdir, "fchdir", "f"),
    (Call::Mkdir, "mkdir", "p"),
    (Call::Mkdirat, "mkdirat", "dp"),
    (Call::Rmdir, "rmdir", "p"),
    (Call::Unlink, "unlink", "p"),
    (Call::Unlinkat, "unlinkat", "dpa"),
    (Call::Rename, "rename", "pp"),
    (Call::Renameat, "renameat", "dpdp"),
    (Call::Fork, "fork", "c"),
    (Call::Exit, "exit", ""),
    (Call::RequestStart, "request-start", ""),
    (Call::RequestEnd, "request-end", ""),
];

impl Call {
    /// The call's name in a script (the syscall's name for syscalls).
    pub fn name(self) -> &'static str {
        CALLS.iter().find(|c| c.0 == self).map_or("?", |c| c.1)
    }
    /// The kinds of its arguments, one letter each: `d` a directory fd
    /// (`AT_FDCWD` or the capture's fd number), `p` a quoted path, `a`
    /// `AT_*` flags, `m` an access mode, `o` open flags, `f` the capture's
    /// fd number, `n` a byte count, `c` a child's capture pid.
    pub fn signature(self) -> &'static str {
        CALLS.iter().find(|c| c.0 == self).map_or("", |c| c.2)
    }
    pub fn from_name(name: &str) -> Option<Call> {
        CALLS.iter().find(|c| c.1 == name).map(|c| c.0)
    }
    /// Calls whose result is a new fd of the capture's numbering.
    pub fn returns_fd(self) -> bool {
        matches!(self, Call::Open | Call::Openat)
    }
    /// Calls whose result is a byte count the replay must match exactly
    /// (the tree is laid out so that it can).
    pub fn exact_count(self) -> bool {
        matches!(
            self,
            Call::Read | Call::Write | Call::Readlink | Call::Readlinkat
        )
    }
}

/// One argument of an op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// `None` is `AT_FDCWD`.
    Dir(Option<i32>),
    Path(Vec<u8>),
    /// `AT_*` flags, libc values.
    At(i32),
    /// access mode, libc values (`F_OK` is 0).
    Mode(i32),
    /// open flags, libc values.
    Open(i32),
    Fd(i32),
    Count(u64),
    Pid(u32),
}

/// The result the capture saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Nothing to compare (`?`, or no `=`).
    Any,
    Ok(i64),
    /// An errno name (`ENOENT`).
    Err(String),
}

/// One line of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub pid: u32,
    pub t_us: u64,
    pub call: Call,
    pub args: Vec<Arg>,
    pub expect: Expect,
    /// 1-based line number in the script (0 for ops not parsed).
    pub line: usize,
}

/// A parsed script: its ops in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    pub ops: Vec<Op>,
}

/// A script that does not parse: the line and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("script line {line}: {message}")]
pub struct ScriptError {
    pub line: usize,
    pub message: String,
}

const OPEN_FLAGS: [(&str, i32); 9] = [
    ("O_CREAT", libc::O_CREAT),
    ("O_EXCL", libc::O_EXCL),
    ("O_TRUNC", libc::O_TRUNC),
    ("O_DIRECTORY", libc::O_DIRECTORY),
    ("O_APPEND", libc::O_APPEND),
    ("O_NOFOLLOW", libc::O_NOFOLLOW),
    ("O_PATH", libc::O_PATH),
    ("O_CLOEXEC", libc::O_CLOEXEC),
    ("O_NONBLOCK", libc::O_NONBLOCK),
];
const AT_FLAGS: [(&str, i32); 3] = [
    ("AT_SYMLINK_NOFOLLOW", libc::AT_SYMLINK_NOFOLLOW),
    ("AT_EMPTY_PATH", libc::AT_EMPTY_PATH),
    ("AT_REMOVEDIR", libc::AT_REMOVEDIR),
];
const MODE_FLAGS: [(&str, i32); 3] = [
    ("R_OK", libc::R_OK),
    ("W_OK", libc::W_OK),
    ("X_OK", libc::X_OK),
];

/// Errno names the replayer knows, with their x86-64 Linux numbers.
const ERRNOS: [(&str, i32); 22] = [
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("EMFILE", libc::EMFILE),
    ("ENOSPC", libc::ENOSPC),
    ("EROFS", libc::EROFS),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("ESTALE", libc::ESTALE),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
];

/// The name of errno `n` (`E<n>` for those not in the table).
pub fn errno_name(n: i32) -> String {
    ERRNOS
        .iter()
        .find(|e| e.1 == n)
        .map_or_else(|| format!("E{n}"), |e| e.0.to_string())
}

/// Whether a result (`>= 0`, or `-errno`) of `call` is what the capture saw.
pub fn result_matches(call: Call, expect: &Expect, got: i64) -> bool {
    match expect {
        Expect::Any => true,
        Expect::Err(name) => got < 0 && errno_name((-got) as i32) == *name,
        Expect::Ok(n) => {
            if call.exact_count() {
                got == *n
            } else if call.returns_fd() || matches!(call, Call::Getdents64 | Call::Fork) {
                // fd numbers and directory sizes are the replayer's own
                got >= 0 && (call != Call::Getdents64 || (got == 0) == (*n == 0))
            } else {
                got == *n
            }
        }
    }
}

fn flags_text(v: i32, table: &[(&str, i32)], first: Option<&str>) -> String {
    let mut parts: Vec<&str> = first.into_iter().collect();
    for (name, bit) in table {
        if v & bit != 0 {
            parts.push(name);
        }
    }
    if parts.is_empty() {
        "0".to_string()
    } else {
        parts.join("|")
    }
}

fn open_text(v: i32) -> String {
    let acc = match v & libc::O_ACCMODE {
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_RDONLY",
    };
    flags_text(v, &OPEN_FLAGS, Some(acc))
}

/// Writes `s` as a quoted string: printable ASCII but `"` and `\` as is,
/// `\"`, `\\`, every other byte `\xNN`.
pub fn quote(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Dir(None) => f.write_str("AT_FDCWD"),
            Arg::Dir(Some(n)) | Arg::Fd(n) => write!(f, "{n}"),
            Arg::Path(p) => f.write_str(&quote(p)),
            Arg::At(v) => f.write_str(&flags_text(*v, &AT_FLAGS, None)),
            Arg::Mode(v) => {
                if *v == 0 {
                    f.write_str("F_OK")
                } else {
                    f.write_str(&flags_text(*v, &MODE_FLAGS, None))
                }
            }
            Arg::Open(v) => f.write_str(&open_text(*v)),
            Arg::Count(n) => write!(f, "{n}"),
            Arg::Pid(p) => write!(f, "{p}"),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.pid, self.t_us, self.call.name())?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        match &self.expect {
            Expect::Any => Ok(()),
            Expect::Ok(n) => write!(f, " = {n}"),
            Expect::Err(e) => write!(f, " = {e}"),
        }
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{HEADER}")?;
        for op in &self.ops {
            writeln!(f, "{op}")?;
        }
        Ok(())
    }
}

/// Splits a line into words; a quoted string is one word, decoded.
fn words(line: &str) -> Result<Vec<(bool, Vec<u8>)>, String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' => i += 1,
            b'"' => {
                let mut s = Vec::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err("unterminated string".into()),
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => match b.get(i + 1) {
                            Some(b'"') => {
                                s.push(b'"');
                                i += 2;
                            }
                            Some(b'\\') => {
                                s.push(b'\\');
                                i += 2;
                            }
                            Some(b'x') => {
                                let hex = line
                                    .get(i + 2..i + 4)
                                    .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                                    .ok_or("bad \\x escape")?;
                                s.push(hex);
                                i += 4;
                            }
                            _ => return Err("bad escape".into()),
                        },
                        Some(&c) => {
                            s.push(c);
                            i += 1;
                        }
                    }
                }
                if b.get(i).is_some_and(|c| !matches!(c, b' ' | b'\t')) {
                    return Err("text after a string".into());
                }
                out.push((true, s));
            }
            _ => {
                let start = i;
                while i < b.len() && !matches!(b[i], b' ' | b'\t' | b'"') {
                    i += 1;
                }
                out.push((false, b[start..i].to_vec()));
            }
        }
    }
    Ok(out)
}

fn parse_flags(w: &str, table: &[(&str, i32)], what: &str) -> Result<i32, String> {
    if w == "0" {
        return Ok(0);
    }
    let mut v = 0;
    for part in w.split('|') {
        let bit = table
            .iter()
            .find(|t| t.0 == part)
            .ok_or_else(|| format!("unknown {what} {part:?}"))?;
        v |= bit.1;
    }
    Ok(v)
}

fn parse_arg(kind: char, quoted: bool, w: &[u8]) -> Result<Arg, String> {
    if kind == 'p' {
        return if quoted {
            Ok(Arg::Path(w.to_vec()))
        } else {
            Err("a path must be a quoted string".into())
        };
    }
    if quoted {
        return Err("unexpected string".into());
    }
    let w = std::str::from_utf8(w).map_err(|_| "not UTF-8".to_string())?;
    let fd = |w: &str| {
        w.parse::<i32>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("bad fd {w:?}"))
    };
    Ok(match kind {
        'd' if w == "AT_FDCWD" => Arg::Dir(None),
        'd' => Arg::Dir(Some(fd(w)?)),
        'f' => Arg::Fd(fd(w)?),
        'a' => Arg::At(parse_flags(w, &AT_FLAGS, "AT_ flag")?),
        'm' if w == "F_OK" => Arg::Mode(0),
        'm' => Arg::Mode(parse_flags(w, &MODE_FLAGS, "access mode")?),
        'o' => {
            let mut v = 0;
            let mut acc = None;
            for part in w.split('|') {
                let a = match part {
                    "O_RDONLY" => Some(libc::O_RDONLY),
                    "O_WRONLY" => Some(libc::O_WRONLY),
                    "O_RDWR" => Some(libc::O_RDWR),
                    _ => None,
                };
                match (a, acc) {
                    (Some(_), Some(_)) => return Err("two access modes".into()),
                    (Some(a), None) => acc = Some(a),
                    (None, _) => v |= parse_flags(part, &OPEN_FLAGS, "open flag")?,
                }
            }
            Arg::Open(v | acc.ok_or("open flags without O_RDONLY|O_WRONLY|O_RDWR")?)
        }
        'n' => Arg::Count(
            w.parse::<u64>()
                .ok()
                .filter(|n| *n <= MAX_COUNT)
                .ok_or_else(|| format!("bad count {w:?} (at most {MAX_COUNT})"))?,
        ),
        'c' => Arg::Pid(w.parse().map_err(|_| format!("bad pid {w:?}"))?),
        _ => return Err(format!("bad argument kind {kind}")),
    })
}

fn parse_line(line: &str, no: usize) -> Result<Op, String> {
    let mut ws = words(line)?.into_iter();
    let mut plain = |what: &str| -> Result<String, String> {
        match ws.next() {
            Some((false, w)) => String::from_utf8(w).map_err(|_| format!("bad {what}")),
            _ => Err(format!("missing {what}")),
        }
    };
    let pid: u32 = plain("pid")?.parse().map_err(|_| "bad pid")?;
    let t_us: u64 = plain("time")?.parse().map_err(|_| "bad time")?;
    let name = plain("call")?;
    let call = Call::from_name(&name).ok_or_else(|| format!("unknown call {name:?}"))?;
    let mut args = Vec::new();
    for kind in call.signature().chars() {
        let (quoted, w) = ws
            .next()
            .ok_or_else(|| format!("{name}: missing argument {}", args.len() + 1))?;
        args.push(parse_arg(kind, quoted, &w).map_err(|e| format!("{name}: {e}"))?);
    }
    let expect = match ws.next() {
        None => Expect::Any,
        Some((false, eq)) if eq == b"=" => {
            let r = match ws.next() {
                Some((false, r)) => String::from_utf8(r).map_err(|_| "bad result")?,
                _ => return Err("missing result after =".into()),
            };
            if r == "?" {
                Expect::Any
            } else if let Ok(n) = r.parse::<i64>() {
                Expect::Ok(n)
            } else if r.len() > 1
                && r.starts_with('E')
                && r.bytes()
                    .skip(1)
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            {
                Expect::Err(r)
            } else {
                return Err(format!("bad result {r:?}"));
            }
        }
        Some(_) => return Err(format!("{name}: too many arguments")),
    };
    if ws.next().is_some() {
        return Err("text after the result".into());
    }
    Ok(Op {
        pid,
        t_us,
        call,
        args,
        expect,
        line: no,
    })
}

/// Parses a script. Errors name the line; nothing panics. Beyond each
/// line's syntax it checks what the replayer relies on: a process's ops
/// come after the `fork` that starts it (if any), no process is forked
/// twice or forks itself, and times do not go back.
pub fn parse_script(text: &str) -> Result<Script, ScriptError> {
    let err = |line: usize, message: String| ScriptError { line, message };
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim_end() == HEADER => {}
        _ => return Err(err(1, format!("the first line must be {HEADER:?}"))),
    }
    let mut ops: Vec<Op> = Vec::new();
    let mut seen: HashSet<u32> = HashSet::new();
    let mut forked: HashSet<u32> = HashSet::new();
    let mut exited: HashSet<u32> = HashSet::new();
    let mut last_t = 0;
    for (i, line) in lines {
        let no = i + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let op = parse_line(t, no).map_err(|m| err(no, m))?;
        if op.t_us < last_t {
            return Err(err(no, "time goes back".into()));
        }
        last_t = op.t_us;
        if exited.contains(&op.pid) {
            return Err(err(no, format!("process {} has exited", op.pid)));
        }
        seen.insert(op.pid);
        if op.call == Call::Exit {
            exited.insert(op.pid);
        }
        if let (Call::Fork, Some(Arg::Pid(c))) = (op.call, op.args.first()) {
            if *c == op.pid || seen.contains(c) || !forked.insert(*c) {
                return Err(err(no, format!("process {c} already exists")));
            }
        }
        ops.push(op);
    }
    Ok(Script { ops })
}

/// One entry of the tree a capture shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative to the root, never empty, no `.` or `..` components.
    pub path: Vec<u8>,
    pub kind: EntryKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    /// A regular file of this many bytes (zeros).
    File {
        size: u64,
    },
    /// A symbolic link to this target.
    Symlink {
        target: Vec<u8>,
    },
}

/// What [`prepare`] makes of a capture.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// The script's text ([`HEADER`] first).
    pub script: String,
    /// Sorted by path: every directory before what it holds.
    pub tree: Vec<TreeEntry>,
    /// File calls under the capture root left out of the script: fds not
    /// opened by a replayed call, relative paths from an unknown cwd, or
    /// calls the replayer does not make (`pread64`, `mmap`, `dup*`,
    /// `fcntl`, `openat2`, `creat`, ...).
    pub left_out: u64,
    /// The same, per call name.
    pub left_out_by_call: BTreeMap<String, u64>,
    /// File calls on paths outside the capture root (not replayed, not
    /// counted in `left_out`).
    pub outside_root: u64,
    /// The indexes in `trace.events` of the file calls left out (sorted):
    /// what a model of the replay must not see either.
    pub left_out_events: Vec<usize>,
    /// Where each request marker of the script falls among the capture's
    /// events, in script order.
    pub marks: Vec<MarkAt>,
    /// The processes whose script starts with a `cwd` line: pid and the
    /// directory in the capture's paths (the replayer enters it before the
    /// process's first request).
    pub cwds: Vec<(u32, Vec<u8>)>,
}

/// A request marker's place among the capture's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkAt {
    /// `true` at `request-start`, `false` at `request-end`.
    pub start: bool,
    pub pid: u32,
    /// The request's number in that process (from 1).
    pub request: u64,
    /// How many of the capture's events come before the marker.
    pub boundary: usize,
}

/// Lexically normalized absolute path: `.` and empty components dropped,
/// `..` removes the last one (symbolic links are not followed).
fn normalize(p: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in p.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::with_capacity(p.len());
    for c in parts {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

fn join(base: &[u8], rel: &[u8]) -> Vec<u8> {
    if rel.first() == Some(&b'/') {
        return normalize(rel);
    }
    let mut v = base.to_vec();
    v.push(b'/');
    v.extend_from_slice(rel);
    normalize(&v)
}

/// `p` (normalized) relative to `root` (normalized): `Some(b"")` for the
/// root itself, `None` outside.
fn under<'a>(p: &'a [u8], root: &[u8]) -> Option<&'a [u8]> {
    if root == b"/" {
        return Some(p.strip_prefix(b"/").unwrap_or(p));
    }
    let rest = p.strip_prefix(root)?;
    match rest.first() {
        None => Some(rest),
        Some(b'/') => Some(&rest[1..]),
        _ => None,
    }
}

/// What the capture shows of one path, in capture order.
#[derive(Default)]
struct PathState {
    /// Decided by the first call naming the path: `Some(true)` it existed
    /// before the capture, `Some(false)` it did not or the capture made it.
    initial: Option<bool>,
    dir: bool,
    symlink_len: Option<u64>,
    /// The target a `readlink` returned, when the capture printed it whole.
    symlink_target: Option<Vec<u8>>,
    size: u64,
}

/// Per capture process: its cwd (absolute, if known) and its fds opened by
/// replayed calls (capture fd -> the path opened, normalized).
#[derive(Clone, Default)]
struct Proc {
    cwd: Option<Vec<u8>>,
    fds: HashMap<i32, (Vec<u8>, u64)>,
}

fn is_fork(name: &[u8]) -> bool {
    matches!(name, b"clone" | b"clone3" | b"fork" | b"vfork")
}

/// The libc bits of the capture's flags in `table` (capture flag, libc bit).
fn bits(f: Flags, table: &[(u32, i32)]) -> i32 {
    table
        .iter()
        .filter(|(bit, _)| f.has(*bit))
        .fold(0, |v, (_, o)| v | o)
}

fn at_bits(f: Flags) -> i32 {
    bits(
        f,
        &[
            (Flags::AT_SYMLINK_NOFOLLOW, libc::AT_SYMLINK_NOFOLLOW),
            (Flags::AT_EMPTY_PATH, libc::AT_EMPTY_PATH),
            (Flags::AT_REMOVEDIR, libc::AT_REMOVEDIR),
        ],
    )
}

fn mode_bits(f: Flags) -> i32 {
    bits(
        f,
        &[
            (Flags::R_OK, libc::R_OK),
            (Flags::W_OK, libc::W_OK),
            (Flags::X_OK, libc::X_OK),
        ],
    )
}

fn open_bits(f: Flags) -> i32 {
    let access = if f.has(Flags::O_RDWR) {
        libc::O_RDWR
    } else if f.has(Flags::O_WRONLY) {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    access
        | bits(
            f,
            &[
                (Flags::O_CREAT, libc::O_CREAT),
                (Flags::O_EXCL, libc::O_EXCL),
                (Flags::O_TRUNC, libc::O_TRUNC),
                (Flags::O_DIRECTORY, libc::O_DIRECTORY),
                (Flags::O_APPEND, libc::O_APPEND),
                (Flags::O_NOFOLLOW, libc::O_NOFOLLOW),
                (Flags::O_PATH, libc::O_PATH),
            ],
        )
}

/// Builds the replay script and the file tree of a capture.
///
/// - Only calls on paths under `capture_root` are replayed, their absolute
///   paths rewritten to `target_root` (relative paths are kept: the
///   process's cwd is rewritten, by a `cwd` line at its start); fd calls
///   only on fds that a replayed open returned. Everything else is left
///   out and counted ([`Prepared::left_out`]).
/// - Every process of the capture is in the script (`fork` at its
///   `clone`/`fork`/`vfork`, `exit` after its last call), with request
///   markers: at each successful `accept`/`accept4` (php-fpm: the previous
///   request ends, a new one starts; nothing before the first accept is in
///   a request), or, in a process that never accepts, one request from its
///   first call to its last (php-cli), unless one of its descendants
///   accepts (a php-fpm master serves no request).
/// - The tree: the paths under the root that the first call naming them
///   shows existing (a success, or `EEXIST`), with their ancestors as
///   directories. A path the first call finds missing (`ENOENT`), or which
///   the capture creates first (`mkdir`, `open` with `O_CREAT`, a rename's
///   target) is not laid out. Directories: ancestors, `O_DIRECTORY`
///   opens, `getdents64`, `chdir`, `rmdir`; symbolic links: a successful
///   `readlink` (target: `_` repeated to the length the capture read, as
///   the capture does not show the target); files: the rest, as large as
///   the most the capture read through one open.
pub fn prepare(trace: &Trace, capture_root: &[u8], target_root: &[u8]) -> Prepared {
    let root = normalize(capture_root);
    let target = normalize(target_root);
    let st = &trace.strings;
    let t0 = trace.events.iter().find_map(|e| e.ts_us).unwrap_or(0);
    let t_of = |e: &Event| e.ts_us.map_or(0, |t| (t - t0).max(0) as u64);

    // The first and last event of each pid, and whether it ever accepts.
    let mut first: HashMap<u32, usize> = HashMap::new();
    let mut last: HashMap<u32, usize> = HashMap::new();
    let mut accepts: HashSet<u32> = HashSet::new();
    let mut child_of: HashMap<u32, (u32, usize)> = HashMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        first.entry(e.pid).or_insert(i);
        last.insert(e.pid, i);
        if matches!(e.kind, Kind::Accept | Kind::Accept4) && matches!(e.ret, Ret::Ok(_)) {
            accepts.insert(e.pid);
        }
        if e.kind == Kind::Other && is_fork(st.bytes(e.name)) {
            if let Ret::Ok(c) = e.ret {
                if c > 0 && c <= u32::MAX as i64 && c as u32 != e.pid {
                    child_of.entry(c as u32).or_insert((e.pid, i));
                }
            }
        }
    }
    // A child whose first event comes before its fork (not in a capture
    // in time order) is started as a root process instead.
    child_of.retain(|c, (_, at)| first.get(c).is_none_or(|f| f > at));
    let mut forks: HashMap<usize, u32> = HashMap::new();
    for (c, (_, at)) in &child_of {
        forks.insert(*at, *c);
    }
    // The processes above the ones that accept (a php-fpm master): they
    // serve no request.
    let mut masters: HashSet<u32> = HashSet::new();
    for &a in &accepts {
        let mut p = a;
        while let Some(&(parent, _)) = child_of.get(&p) {
            if !accepts.contains(&parent) && !masters.insert(parent) {
                break;
            }
            p = parent;
        }
    }

    // The initial cwd of each root process: the first `AT_FDCWD</dir>`
    // decoration or getcwd result, if it comes before any chdir.
    let mut procs: HashMap<u32, Proc> = HashMap::new();
    let mut cwd_done: HashSet<u32> = HashSet::new();
    for e in &trace.events {
        if cwd_done.contains(&e.pid) || child_of.contains_key(&e.pid) {
            continue;
        }
        let found = if e.flags.has(Flags::AT_FDCWD) {
            e.fd_path.map(|p| st.bytes(p))
        } else if e.kind == Kind::Getcwd && matches!(e.ret, Ret::Ok(_)) {
            e.path.map(|p| st.bytes(p))
        } else {
            None
        };
        if let Some(p) = found.filter(|p| p.first() == Some(&b'/')) {
            procs.entry(e.pid).or_default().cwd = Some(normalize(p));
            cwd_done.insert(e.pid);
        } else if matches!(e.kind, Kind::Chdir | Kind::Fchdir) {
            cwd_done.insert(e.pid);
        }
    }

    let mut ops: Vec<Op> = Vec::new();
    let mut paths: BTreeMap<Vec<u8>, PathState> = BTreeMap::new();
    let mut created: HashSet<Vec<u8>> = HashSet::new();
    let mut in_request: HashMap<u32, u64> = HashMap::new();
    let mut started: HashSet<u32> = HashSet::new();
    let mut left_out_by_call: BTreeMap<String, u64> = BTreeMap::new();
    let mut left_out = 0u64;
    let mut left_out_events: Vec<usize> = Vec::new();
    let mut outside_root = 0u64;
    let mut marks: Vec<MarkAt> = Vec::new();
    let mut cwds: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut mark = |start: bool, pid: u32, request: u64, boundary: usize| {
        marks.push(MarkAt {
            start,
            pid,
            request,
            boundary,
        })
    };

    let rewrite = |p: &[u8]| -> Vec<u8> {
        if p.first() != Some(&b'/') {
            return p.to_vec();
        }
        // The text after the root as the capture wrote it (`//`, `./`
        // kept), so the same string reaches the kernel; normalized when
        // the capture reached the root another way (`/a/../root`).
        let raw_rest = if root == b"/" {
            Some(p)
        } else {
            p.strip_prefix(root.as_slice())
                .filter(|r| r.is_empty() || r[0] == b'/')
        };
        match raw_rest {
            Some(rest) => {
                let mut out = target.clone();
                if out == b"/" && rest.first() == Some(&b'/') {
                    out.clear();
                }
                out.extend_from_slice(rest);
                out
            }
            None => {
                let n = normalize(p);
                join(&target, under(&n, &root).unwrap_or(b""))
            }
        }
    };

    for (i, e) in trace.events.iter().enumerate() {
        let pid = e.pid;
        let t = t_of(e);
        if !started.contains(&pid) {
            started.insert(pid);
            let p = procs.entry(pid).or_default();
            if !child_of.contains_key(&pid) {
                if let Some(cwd) = p.cwd.clone() {
                    if under(&cwd, &root).is_some() {
                        ops.push(op(pid, t, Call::Cwd, vec![Arg::Path(rewrite(&cwd))]));
                        cwds.push((pid, cwd));
                    }
                }
            }
            if !accepts.contains(&pid) && !masters.contains(&pid) {
                in_request.insert(pid, 1);
                ops.push(op(pid, t, Call::RequestStart, vec![]));
                mark(true, pid, 1, i);
            }
        }
        if matches!(e.kind, Kind::Accept | Kind::Accept4) && matches!(e.ret, Ret::Ok(_)) {
            let n = in_request.get(&pid).copied();
            if let Some(n) = n {
                ops.push(op(pid, t, Call::RequestEnd, vec![]));
                mark(false, pid, n, i);
            }
            let n = n.unwrap_or(0) + 1;
            in_request.insert(pid, n);
            ops.push(op(pid, t, Call::RequestStart, vec![]));
            mark(true, pid, n, i);
        }
        if let Some(&c) = forks.get(&i) {
            let mut o = op(pid, t, Call::Fork, vec![Arg::Pid(c)]);
            o.expect = Expect::Ok(c as i64);
            ops.push(o);
            let parent = procs.get(&pid).cloned().unwrap_or_default();
            procs.insert(c, parent);
        }
        let mut ctx = Ctx {
            root: &root,
            paths: &mut paths,
            created: &mut created,
        };
        let inside = touches_root(e, st, procs.entry(pid).or_default(), &root);
        match translate(e, trace, procs.entry(pid).or_default(), &mut ctx, &rewrite) {
            Some(Some((call, args))) => {
                let mut o = op(pid, t, call, args);
                o.expect = match e.ret {
                    Ret::Ok(n) => Expect::Ok(n),
                    Ret::Err(errno) => Expect::Err(st.str(errno.0).into_owned()),
                    Ret::Unknown => Expect::Any,
                };
                ops.push(o);
            }
            Some(None) if !inside => outside_root += 1,
            Some(None) => {
                left_out += 1;
                left_out_events.push(i);
                *left_out_by_call
                    .entry(st.str(e.name).into_owned())
                    .or_default() += 1;
            }
            None => {}
        }
        if last.get(&pid) == Some(&i) {
            let t_end = t + e.dur_us.unwrap_or(0);
            if let Some(&n) = in_request.get(&pid) {
                ops.push(op(pid, t_end, Call::RequestEnd, vec![]));
                mark(false, pid, n, i + 1);
            }
            ops.push(op(pid, t_end, Call::Exit, vec![]));
        }
    }
    // Times never go back in a script (an exit timed at the end of a long
    // call may pass the next call's start).
    let mut tmax = 0;
    for o in &mut ops {
        tmax = tmax.max(o.t_us);
        o.t_us = tmax;
    }

    // The links whose target the capture showed, relative to the root
    // (`None`: the target is outside it).
    let mut links: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    for (p, s) in &paths {
        let (Some(t), Some(rel)) = (&s.symlink_target, under(p, &root)) else {
            continue;
        };
        if s.initial == Some(true) && !rel.is_empty() {
            let parent = normalize(&p[..p.iter().rposition(|&b| b == b'/').unwrap_or(0)]);
            let abs = join(&parent, t);
            links.insert(rel.to_vec(), under(&abs, &root).map(<[u8]>::to_vec));
        }
    }
    let mut tree: BTreeMap<Vec<u8>, EntryKind> = BTreeMap::new();
    for (p, s) in &paths {
        if s.initial != Some(true) {
            continue;
        }
        let Some(rel) = under(p, &root) else { continue };
        if rel.is_empty() {
            continue;
        }
        // A path through a link is laid out where the link leads.
        let Some(rel) = through_links(rel, &links) else {
            continue;
        };
        let kind = if s.dir {
            EntryKind::Dir
        } else if let Some(n) = s.symlink_len {
            // an absolute target under the root moves with it; one the
            // capture did not show whole becomes `_` repeated to its length
            let target = match &s.symlink_target {
                Some(t) if t.first() == Some(&b'/') => match under(&normalize(t), &root) {
                    Some([]) => target.clone(),
                    Some(rest) => join(&target, rest),
                    None => t.clone(),
                },
                Some(t) => t.clone(),
                None => vec![b'_'; n.clamp(1, 4095) as usize],
            };
            EntryKind::Symlink { target }
        } else {
            EntryKind::File { size: s.size }
        };
        tree.insert(rel, kind);
    }
    // Ancestors are directories, whatever the capture showed of them (a
    // link whose target it did not show among them).
    let keys: Vec<Vec<u8>> = tree.keys().cloned().collect();
    for k in keys {
        let mut a = k.as_slice();
        while let Some(pos) = a.iter().rposition(|&b| b == b'/') {
            a = &a[..pos];
            tree.insert(a.to_vec(), EntryKind::Dir);
        }
    }
    Prepared {
        script: Script { ops }.to_string(),
        tree: tree
            .into_iter()
            .map(|(path, kind)| TreeEntry { path, kind })
            .collect(),
        left_out,
        left_out_by_call,
        left_out_events,
        outside_root,
        marks,
        cwds,
    }
}

/// `rel` (relative to the root) with each ancestor that is a link of
/// `links` replaced by the link's target, until none is (`None` when a
/// target leaves the root, or after 40 links: `ELOOP`).
fn through_links(rel: &[u8], links: &HashMap<Vec<u8>, Option<Vec<u8>>>) -> Option<Vec<u8>> {
    let mut cur = rel.to_vec();
    'hop: for _ in 0..40 {
        let comps: Vec<&[u8]> = cur.split(|&b| b == b'/').collect();
        for i in 1..comps.len() {
            if let Some(target) = links.get(&comps[..i].join(&b'/')) {
                let mut next = target.clone()?;
                for c in &comps[i..] {
                    if !next.is_empty() {
                        next.push(b'/');
                    }
                    next.extend_from_slice(c);
                }
                cur = next;
                continue 'hop;
            }
        }
        return Some(cur);
    }
    None
}

/// Whether a call names something under the root: its path (absolute, or
/// relative to its directory fd or the cwd), or its fd.
fn touches_root(e: &Event, st: &statstorm_trace::Interner, proc_: &Proc, root: &[u8]) -> bool {
    let fd_path = |fd: i32| -> Option<Vec<u8>> {
        proc_
            .fds
            .get(&fd)
            .map(|(p, _)| p.clone())
            .or_else(|| e.fd_path.map(|p| normalize(st.bytes(p))))
    };
    let inside = |p: &[u8]| under(p, root).is_some();
    match e.path.map(|p| st.bytes(p)) {
        Some(p) if p.first() == Some(&b'/') => inside(&normalize(p)),
        Some(p) => {
            let base = match e.fd {
                Some(fd) => fd_path(fd),
                None => proc_.cwd.clone(),
            };
            base.is_some_and(|b| inside(&join(&b, p)))
        }
        None => e.fd.and_then(fd_path).is_some_and(|p| inside(&p)),
    }
}

fn op(pid: u32, t_us: u64, call: Call, args: Vec<Arg>) -> Op {
    Op {
        pid,
        t_us,
        call,
        args,
        expect: Expect::Any,
        line: 0,
    }
}

struct Ctx<'a> {
    root: &'a [u8],
    paths: &'a mut BTreeMap<Vec<u8>, PathState>,
    created: &'a mut HashSet<Vec<u8>>,
}

impl Ctx<'_> {
    /// Records what a call shows of `p`. `exists`: whether the path
    /// existed before the call, when the call tells.
    fn see(&mut self, p: &[u8], exists: Option<bool>) -> &mut PathState {
        let fresh = !self.paths.contains_key(p);
        let after_create = self
            .created
            .iter()
            .any(|c| p == c.as_slice() || (p.starts_with(c) && p.get(c.len()) == Some(&b'/')));
        let s = self.paths.entry(p.to_vec()).or_default();
        if fresh {
            s.initial = if after_create {
                Some(false)
            } else {
                exists.or(Some(false))
            };
        }
        s
    }
    fn create(&mut self, p: &[u8]) {
        self.created.insert(p.to_vec());
    }
}

/// The script call for a capture event: `None` when the event is no file
/// call (not counted), `Some(None)` when it is one left out.
#[allow(clippy::type_complexity)]
fn translate(
    e: &Event,
    trace: &Trace,
    proc_: &mut Proc,
    ctx: &mut Ctx<'_>,
    rewrite: &dyn Fn(&[u8]) -> Vec<u8>,
) -> Option<Option<(Call, Vec<Arg>)>> {
    let st = &trace.strings;
    let ok = matches!(e.ret, Ret::Ok(_));
    let enoent = matches!(e.ret, Ret::Err(er) if st.bytes(er.0) == b"ENOENT");
    let eexist = matches!(e.ret, Ret::Err(er) if st.bytes(er.0) == b"EEXIST");
    let path = e.path.map(|p| st.bytes(p).to_vec());
    let path2 = e.path2.map(|p| st.bytes(p).to_vec());
    let root = ctx.root.to_vec();
    // The directory a path argument is relative to: `Some(None)` the cwd,
    // `Some(Some(fd))` a replayed fd; `None` when neither can be replayed.
    let dir_of = |proc_: &Proc| -> Option<(Option<i32>, Option<Vec<u8>>)> {
        match e.fd {
            Some(fd) => proc_.fds.get(&fd).map(|(p, _)| (Some(fd), Some(p.clone()))),
            None => Some((None, proc_.cwd.clone())),
        }
    };
    // A path argument: the call's dir and the resolved absolute path, if
    // the call can be replayed (the path is under the root, and a relative
    // path is relative to a directory under the root).
    let resolve = |proc_: &Proc, p: &[u8]| -> Option<(Option<i32>, Vec<u8>)> {
        let (dir, base) = dir_of(proc_)?;
        let abs = if p.first() == Some(&b'/') {
            normalize(p)
        } else {
            let base = base?;
            under(&base, &root)?;
            join(&base, p)
        };
        under(&abs, &root)?;
        Some((dir, abs))
    };
    let k = e.kind;
    let file_call = k.is_stat_family()
        || k.is_access()
        || k.is_open()
        || k.is_readlink()
        || matches!(
            k,
            Kind::Close
                | Kind::Read
                | Kind::Pread64
                | Kind::Write
                | Kind::Pwrite64
                | Kind::Getdents64
                | Kind::Chdir
                | Kind::Fchdir
                | Kind::Mkdir
                | Kind::Mkdirat
                | Kind::Rmdir
                | Kind::Unlink
                | Kind::Unlinkat
                | Kind::Rename
                | Kind::Renameat
                | Kind::Renameat2
                | Kind::Mmap
                | Kind::Dup
                | Kind::Dup2
                | Kind::Dup3
                | Kind::Fcntl
        );
    if !file_call {
        return None;
    }
    // A cwd change the replayer cannot follow still moves the capture's
    // cwd, so later relative paths resolve where the capture's did.
    if k == Kind::Chdir && ok {
        if let (Some(p), Some(base)) = (&path, &proc_.cwd) {
            let new = join(base, p);
            let replayed = resolve(proc_, p).is_some();
            proc_.cwd = Some(new.clone());
            if replayed {
                ctx.see(&new, Some(true)).dir = true;
                return Some(Some((Call::Chdir, vec![Arg::Path(rewrite(p))])));
            }
            return Some(None);
        } else if let Some(p) = &path {
            if p.first() == Some(&b'/') {
                proc_.cwd = Some(normalize(p));
            }
        }
    }
    if k == Kind::Fchdir && ok {
        let fd = e.fd?;
        match proc_.fds.get(&fd) {
            Some((p, _)) => {
                proc_.cwd = Some(p.clone());
                return Some(Some((Call::Fchdir, vec![Arg::Fd(fd)])));
            }
            None => {
                proc_.cwd = e.fd_path.map(|p| normalize(st.bytes(p)));
                return Some(None);
            }
        }
    }
    let fd_only = |proc_: &Proc| e.fd.filter(|fd| proc_.fds.contains_key(fd));
    let exists = if ok || eexist {
        Some(true)
    } else if enoent {
        Some(false)
    } else {
        None
    };
    let out = match k {
        Kind::Stat | Kind::Lstat | Kind::Access | Kind::Readlink => {
            let p = path?;
            let Some((_, abs)) = resolve(proc_, &p) else {
                return Some(None);
            };
            let s = ctx.see(&abs, exists);
            let arg = Arg::Path(rewrite(&p));
            match k {
                Kind::Stat => (Call::Stat, vec![arg]),
                Kind::Lstat => (Call::Lstat, vec![arg]),
                Kind::Access => (Call::Access, vec![arg, Arg::Mode(mode_bits(e.flags))]),
                _ => {
                    if let Ret::Ok(n) = e.ret {
                        s.symlink_len = Some(n.max(0) as u64);
                        if let Some(t) = e.path2.map(|t| st.bytes(t)) {
                            if t.len() as i64 == n && !t.is_empty() {
                                s.symlink_target = Some(t.to_vec());
                            }
                        }
                    }
                    (Call::Readlink, vec![arg])
                }
            }
        }
        Kind::Newfstatat
        | Kind::Statx
        | Kind::Faccessat
        | Kind::Faccessat2
        | Kind::Readlinkat
        | Kind::Mkdirat
        | Kind::Unlinkat
        | Kind::Openat => {
            let p = path?;
            let Some((dir, abs)) = resolve(proc_, &p) else {
                return Some(None);
            };
            let d = Arg::Dir(dir);
            let pa = Arg::Path(rewrite(&p));
            match k {
                Kind::Newfstatat | Kind::Statx => {
                    ctx.see(&abs, exists);
                    let call = if k == Kind::Statx {
                        Call::Statx
                    } else {
                        Call::Newfstatat
                    };
                    (call, vec![d, pa, Arg::At(at_bits(e.flags))])
                }
                Kind::Faccessat => {
                    ctx.see(&abs, exists);
                    (Call::Faccessat, vec![d, pa, Arg::Mode(mode_bits(e.flags))])
                }
                Kind::Faccessat2 => {
                    ctx.see(&abs, exists);
                    (
                        Call::Faccessat2,
                        vec![
                            d,
                            pa,
                            Arg::Mode(mode_bits(e.flags)),
                            Arg::At(at_bits(e.flags)),
                        ],
                    )
                }
                Kind::Readlinkat => {
                    let s = ctx.see(&abs, exists);
                    if let Ret::Ok(n) = e.ret {
                        s.symlink_len = Some(n.max(0) as u64);
                        if let Some(t) = e.path2.map(|t| st.bytes(t)) {
                            if t.len() as i64 == n && !t.is_empty() {
                                s.symlink_target = Some(t.to_vec());
                            }
                        }
                    }
                    (Call::Readlinkat, vec![d, pa])
                }
                Kind::Mkdirat => {
                    mkdir_seen(ctx, &abs, ok, eexist, enoent);
                    (Call::Mkdirat, vec![d, pa])
                }
                Kind::Unlinkat => {
                    let s = ctx.see(&abs, exists);
                    if e.flags.has(Flags::AT_REMOVEDIR) {
                        s.dir = true;
                    }
                    (Call::Unlinkat, vec![d, pa, Arg::At(at_bits(e.flags))])
                }
                _ => {
                    open_seen(ctx, proc_, e, &abs);
                    (Call::Openat, vec![d, pa, Arg::Open(open_bits(e.flags))])
                }
            }
        }
        Kind::Open => {
            let p = path?;
            let Some((_, abs)) = resolve(proc_, &p) else {
                return Some(None);
            };
            open_seen(ctx, proc_, e, &abs);
            (
                Call::Open,
                vec![Arg::Path(rewrite(&p)), Arg::Open(open_bits(e.flags))],
            )
        }
        Kind::Fstat | Kind::Close | Kind::Getdents64 => {
            let Some(fd) = fd_only(proc_) else {
                return Some(None);
            };
            if k == Kind::Close {
                proc_.fds.remove(&fd);
            }
            if k == Kind::Getdents64 {
                if let Some((p, _)) = proc_.fds.get(&fd) {
                    let p = p.clone();
                    ctx.see(&p, Some(true)).dir = true;
                }
            }
            let call = match k {
                Kind::Fstat => Call::Fstat,
                Kind::Close => Call::Close,
                _ => Call::Getdents64,
            };
            (call, vec![Arg::Fd(fd)])
        }
        Kind::Read | Kind::Write => {
            let Some(fd) = fd_only(proc_) else {
                return Some(None);
            };
            let n = match e.ret {
                Ret::Ok(n) if n > 0 => n as u64,
                _ => 8192,
            };
            if n > MAX_COUNT {
                return Some(None);
            }
            if let (Some((p, off)), Ret::Ok(got)) = (proc_.fds.get_mut(&fd), e.ret) {
                *off += got.max(0) as u64;
                let (p, off) = (p.clone(), *off);
                let s = ctx.see(&p, Some(true));
                if k == Kind::Read {
                    s.size = s.size.max(off);
                }
            }
            let call = if k == Kind::Read {
                Call::Read
            } else {
                Call::Write
            };
            (call, vec![Arg::Fd(fd), Arg::Count(n)])
        }
        Kind::Mkdir | Kind::Rmdir | Kind::Unlink => {
            let p = path?;
            let Some((_, abs)) = resolve(proc_, &p) else {
                return Some(None);
            };
            let call = match k {
                Kind::Mkdir => {
                    mkdir_seen(ctx, &abs, ok, eexist, enoent);
                    Call::Mkdir
                }
                Kind::Rmdir => {
                    ctx.see(&abs, exists).dir = true;
                    Call::Rmdir
                }
                _ => {
                    ctx.see(&abs, exists);
                    Call::Unlink
                }
            };
            (call, vec![Arg::Path(rewrite(&p))])
        }
        Kind::Rename | Kind::Renameat | Kind::Renameat2 => {
            let (Some(p), Some(p2)) = (path, path2) else {
                return Some(None);
            };
            // renameat's second dirfd is not decoded: taken as the first.
            let (Some((dir, a)), Some((_, b))) = (resolve(proc_, &p), resolve(proc_, &p2)) else {
                return Some(None);
            };
            if k == Kind::Renameat2 {
                return Some(None);
            }
            ctx.see(&a, exists);
            if ok {
                ctx.see(&b, Some(false));
                ctx.create(&b);
            }
            if k == Kind::Rename {
                (
                    Call::Rename,
                    vec![Arg::Path(rewrite(&p)), Arg::Path(rewrite(&p2))],
                )
            } else {
                (
                    Call::Renameat,
                    vec![
                        Arg::Dir(dir),
                        Arg::Path(rewrite(&p)),
                        Arg::Dir(dir),
                        Arg::Path(rewrite(&p2)),
                    ],
                )
            }
        }
        Kind::Chdir => {
            // a failed chdir, or one from an unknown cwd
            let p = path?;
            let Some((_, abs)) = resolve(proc_, &p) else {
                return Some(None);
            };
            let s = ctx.see(&abs, exists);
            if ok {
                s.dir = true;
            }
            (Call::Chdir, vec![Arg::Path(rewrite(&p))])
        }
        Kind::Fchdir => {
            let Some(fd) = fd_only(proc_) else {
                return Some(None);
            };
            (Call::Fchdir, vec![Arg::Fd(fd)])
        }
        _ => {
            // pread64, pwrite64, mmap, dup*, fcntl, openat2, creat,
            // fstatat64: counted when they touch a replayed fd or a path
            // under the root, not replayed.
            let touches = e.fd.is_some_and(|fd| proc_.fds.contains_key(&fd))
                || path.as_deref().is_some_and(|p| resolve(proc_, p).is_some());
            return touches.then_some(None);
        }
    };
    Some(Some(out))
}

fn mkdir_seen(ctx: &mut Ctx<'_>, abs: &[u8], ok: bool, eexist: bool, enoent: bool) {
    let exists = if ok || enoent {
        Some(false)
    } else if eexist {
        Some(true)
    } else {
        None
    };
    ctx.see(abs, exists).dir = true;
    if ok {
        ctx.create(abs);
    }
}

fn open_seen(ctx: &mut Ctx<'_>, proc_: &mut Proc, e: &Event, abs: &[u8]) {
    let creat = e.flags.has(Flags::O_CREAT);
    let ok = matches!(e.ret, Ret::Ok(_));
    let exists = match e.ret {
        // O_CREAT: the capture shows it created or opened; taken as made
        // by the capture unless O_EXCL failed.
        Ret::Ok(_) => Some(!creat),
        Ret::Err(_) => Some(false),
        Ret::Unknown => None,
    };
    let s = ctx.see(abs, exists);
    if e.flags.has(Flags::O_DIRECTORY) {
        s.dir = true;
    }
    if ok && creat && s.initial != Some(true) {
        ctx.create(abs);
    }
    if let Ret::Ok(fd) = e.ret {
        if (0..=i32::MAX as i64).contains(&fd) {
            proc_.fds.insert(fd as i32, (abs.to_vec(), 0));
        }
    }
}

/// Creates `tree` under `dir` (which is created if missing): directories,
/// files of their size (sparse, zeros), symbolic links.
pub fn lay_out(tree: &[TreeEntry], dir: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::create_dir_all(dir)?;
    for e in tree {
        let rel = std::ffi::OsStr::from_bytes(&e.path);
        if e.path.is_empty() || Path::new(rel).is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("tree path {:?} is not relative", rel),
            ));
        }
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match &e.kind {
            EntryKind::Dir => std::fs::create_dir_all(&p)?,
            EntryKind::File { size } => {
                let f = std::fs::File::create(&p)?;
                f.set_len(*size)?;
            }
            EntryKind::Symlink { target } => {
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &p)?
            }
        }
    }
    Ok(())
}

/// One boundary of a window file: the marker and the NFS sections of
/// `/proc/self/mountstats` read there (empty without an NFS mount).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowMark {
    /// `true` at `request-start`, `false` at `request-end`.
    pub start: bool,
    /// The capture's process id.
    pub pid: u32,
    /// The request's number in that process (from 1).
    pub request: u64,
    /// The script line of the marker.
    pub line: usize,
    pub mountstats: String,
}

/// Parses a window file the replayer wrote (see docs/lab.md).
pub fn parse_window(text: &str) -> Result<Vec<WindowMark>, ScriptError> {
    let mut out: Vec<WindowMark> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 && line == WINDOW_HEADER {
            continue;
        }
        if let Some(rest) = line.strip_prefix("@ ") {
            let f: Vec<&str> = rest.split(' ').collect();
            let bad = || ScriptError {
                line: i + 1,
                message: "bad marker".into(),
            };
            if f.len() != 4 {
                return Err(bad());
            }
            out.push(WindowMark {
                start: match f[0] {
                    "request-start" => true,
                    "request-end" => false,
                    _ => return Err(bad()),
                },
                pid: f[1].parse().map_err(|_| bad())?,
                request: f[2].parse().map_err(|_| bad())?,
                line: f[3].parse().map_err(|_| bad())?,
                mountstats: String::new(),
            });
        } else if let Some(m) = out.last_mut() {
            m.mountstats.push_str(line);
            m.mountstats.push('\n');
        } else if !line.is_empty() {
            return Err(ScriptError {
                line: i + 1,
                message: "text before the first marker".into(),
            });
        }
    }
    Ok(out)
}

/// The sections of a `/proc/self/mountstats` text whose file system is
/// NFS (`device ... with fstype nfs` or `nfs4`), as they are.
pub fn nfs_sections(mountstats: &str) -> String {
    let mut out = String::new();
    let mut keep = false;
    for line in mountstats.lines() {
        if line.starts_with("device ") {
            keep = line.contains(" with fstype nfs ") || line.contains(" with fstype nfs4 ");
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_round_trips() {
        let text = "statstorm-replay 1\n\
            # a comment\n\
            1 0 cwd \"/t/a\"\n\
            1 0 request-start\n\
            1 5 openat AT_FDCWD \"x\\\"\\\\\\x01.php\" O_RDONLY|O_DIRECTORY = 3\n\
            1 6 newfstatat 3 \"\" AT_EMPTY_PATH = 0\n\
            1 7 access \"/t/a/n\" F_OK = ENOENT\n\
            1 7 faccessat2 AT_FDCWD \"n\" R_OK|X_OK AT_SYMLINK_NOFOLLOW = ?\n\
            1 8 read 3 100 = 100\n\
            1 9 fork 2 = 2\n\
            2 10 stat \"b\" = 0\n\
            2 11 exit\n\
            1 12 renameat AT_FDCWD \"a\" AT_FDCWD \"b\" = 0\n\
            1 12 close 3 = 0\n\
            1 12 request-end\n\
            1 13 exit\n";
        let s = parse_script(text).unwrap();
        assert_eq!(s.ops.len(), 14);
        assert_eq!(s.ops[2].args[1], Arg::Path(b"x\"\\\x01.php".to_vec()));
        assert_eq!(s.ops[2].args[2], Arg::Open(libc::O_DIRECTORY));
        assert_eq!(s.ops[2].line, 5);
        assert_eq!(s.ops[4].expect, Expect::Err("ENOENT".into()));
        let again = parse_script(&s.to_string()).unwrap();
        let strip = |s: &Script| s.ops.iter().map(|o| o.to_string()).collect::<Vec<_>>();
        assert_eq!(strip(&again), strip(&s));
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line) in [
            ("", 1),
            ("statstorm-replay 2\n", 1),
            ("statstorm-replay 1\n1 0 stat x\n", 2),
            ("statstorm-replay 1\n\n1 0 stat \"x\n", 3),
            ("statstorm-replay 1\n1 0 bogus\n", 2),
            ("statstorm-replay 1\n1 5 exit\n2 4 exit\n", 3),
            (
                "statstorm-replay 1\n1 0 fork 2\n2 0 stat \"a\"\n1 1 fork 2\n",
                4,
            ),
            ("statstorm-replay 1\n1 0 exit\n1 1 stat \"a\"\n", 3),
            ("statstorm-replay 1\n1 0 read 3 99999999999\n", 2),
            ("statstorm-replay 1\n1 0 open \"a\" O_CREAT\n", 2),
            ("statstorm-replay 1\n1 0 stat \"a\" = ENOENT x\n", 2),
            ("statstorm-replay 1\n1 0 stat \"a\\q\"\n", 2),
            ("statstorm-replay 1\n1 0 stat \"a\\x4\"\n", 2),
        ] {
            let e = parse_script(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
        }
    }

    /// The tree as (path, kind) pairs, paths as text.
    fn tree_of(p: &Prepared) -> Vec<(String, EntryKind)> {
        p.tree
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(&e.path).into_owned(),
                    e.kind.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn links_keep_their_targets_and_paths_through_them_are_laid_out_where_they_lead() {
        let cap = "1 1795773741.000000 readlink(\"/c/app/abs\", \"/c/app/rel/1\", 4095) = 12 <0.000010>
1 1795773741.000100 readlink(\"/c/app/cur\", \"rel/1\", 4095) = 5 <0.000010>
1 1795773741.000200 readlink(\"/c/app/out\", \"/etc\", 4095) = 4 <0.000010>
1 1795773741.000300 readlink(\"/c/app/long\", \"/c/app/rel/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"..., 4095) = 80 <0.000010>
1 1795773741.000400 newfstatat(AT_FDCWD, \"/c/app/cur/x.php\", 0x7ffd, 0) = 0 <0.000010>
1 1795773741.000500 newfstatat(AT_FDCWD, \"/c/app/abs/y.php\", 0x7ffd, 0) = 0 <0.000010>
1 1795773741.000600 newfstatat(AT_FDCWD, \"/c/app/out/passwd\", 0x7ffd, 0) = 0 <0.000010>
1 1795773741.000700 newfstatat(AT_FDCWD, \"/c/app/long/z.php\", 0x7ffd, 0) = 0 <0.000010>
";
        let t = statstorm_trace::read_bytes("cap", cap.as_bytes());
        let p = prepare(&t, b"/c/app", b"/mnt/nfs");
        let tree = tree_of(&p);
        let link = |t: &str| EntryKind::Symlink {
            target: t.as_bytes().to_vec(),
        };
        let file = EntryKind::File { size: 0 };
        assert_eq!(
            tree,
            [
                ("abs".into(), link("/mnt/nfs/rel/1")),
                ("cur".into(), link("rel/1")),
                // strace cut the target: unknown, and a directory on the way
                ("long".into(), EntryKind::Dir),
                ("long/z.php".into(), file.clone()),
                // a target outside the root: kept, nothing laid out through it
                ("out".into(), link("/etc")),
                ("rel".into(), EntryKind::Dir),
                ("rel/1".into(), EntryKind::Dir),
                ("rel/1/x.php".into(), file.clone()),
                ("rel/1/y.php".into(), file),
            ]
        );
    }

    #[test]
    fn prepare_rewrites_the_root_and_lays_out_what_existed() {
        let cap = "1 1795773741.000000 openat(AT_FDCWD</c/app>, \"/c/app//x.php\", O_RDONLY) = 3</c/app/x.php> <0.000010>
1 1795773741.000100 read(3</c/app/x.php>, \"abc\", 8192) = 3 <0.000010>
1 1795773741.000200 read(3</c/app/x.php>, \"\", 8192) = 0 <0.000010>
1 1795773741.000300 close(3</c/app/x.php>) = 0 <0.000010>
1 1795773741.000400 access(\"/c/app/missing\", F_OK) = -1 ENOENT (No such file or directory) <0.000010>
1 1795773741.000500 newfstatat(AT_FDCWD</c/app>, \"sub/y\", 0x7ffd, 0) = 0 <0.000010>
1 1795773741.000600 newfstatat(AT_FDCWD</c/app>, \"/etc/passwd\", 0x7ffd, 0) = 0 <0.000010>
1 1795773741.000700 mkdir(\"/c/app/new\", 0777) = 0 <0.000010>
1 1795773741.000800 stat(\"/c/app/new/z\", 0x7ffd) = -1 ENOENT (No such file or directory) <0.000010>
1 1795773741.000900 exit_group(0) = ?
";
        let t = statstorm_trace::read_bytes("cap", cap.as_bytes());
        let p = prepare(&t, b"/c", b"/t");
        let s = parse_script(&p.script).unwrap();
        let text: Vec<String> = s.ops.iter().map(|o| o.to_string()).collect();
        assert_eq!(
            text,
            [
                "1 0 cwd \"/t/app\"",
                "1 0 request-start",
                "1 0 openat AT_FDCWD \"/t/app//x.php\" O_RDONLY = 3",
                "1 100 read 3 3 = 3",
                "1 200 read 3 8192 = 0",
                "1 300 close 3 = 0",
                "1 400 access \"/t/app/missing\" F_OK = ENOENT",
                "1 500 newfstatat AT_FDCWD \"sub/y\" 0 = 0",
                "1 700 mkdir \"/t/app/new\" = 0",
                "1 800 stat \"/t/app/new/z\" = ENOENT",
                "1 900 request-end",
                "1 900 exit",
            ]
        );
        // /etc/passwd: outside the root, not a call left out
        assert_eq!((p.left_out, p.outside_root), (0, 1));
        let tree = tree_of(&p);
        assert_eq!(
            tree,
            [
                ("app".to_string(), EntryKind::Dir),
                ("app/sub".to_string(), EntryKind::Dir),
                ("app/sub/y".to_string(), EntryKind::File { size: 0 }),
                ("app/x.php".to_string(), EntryKind::File { size: 3 }),
            ]
        );
    }

    #[test]
    fn requests_start_at_each_accept_and_children_follow_forks() {
        let cap = "10 1795773741.000000 clone(child_stack=NULL, flags=SIGCHLD) = 11 <0.000010>
11 1795773741.000100 accept4(3<TCP:[1]>, NULL, NULL, SOCK_CLOEXEC) = 4<TCP:[2]> <0.000010>
11 1795773741.000200 stat(\"/c/a.php\", 0x7ffd) = 0 <0.000010>
11 1795773741.000300 accept4(3<TCP:[1]>, NULL, NULL, SOCK_CLOEXEC) = 4<TCP:[3]> <0.000010>
11 1795773741.000400 stat(\"/c/b.php\", 0x7ffd) = -1 ENOENT (No such file or directory) <0.000010>
10 1795773741.000500 wait4(-1, NULL, 0, NULL) = 11 <0.000010>
";
        let t = statstorm_trace::read_bytes("cap", cap.as_bytes());
        let p = prepare(&t, b"/c", b"/t");
        let s = parse_script(&p.script).unwrap();
        let text: Vec<String> = s.ops.iter().map(|o| o.to_string()).collect();
        // 10 forks the process that accepts (a php-fpm master): no request
        assert_eq!(
            text,
            [
                "10 0 fork 11 = 11",
                "11 100 request-start",
                "11 200 stat \"/t/a.php\" = 0",
                "11 300 request-end",
                "11 300 request-start",
                "11 400 stat \"/t/b.php\" = ENOENT",
                "11 410 request-end",
                "11 410 exit",
                "10 510 exit",
            ]
        );
        assert_eq!(p.tree.len(), 1);
    }

    #[test]
    fn paths_resolve_under_the_root() {
        assert_eq!(normalize(b"/a//b/./c/../d/"), b"/a/b/d");
        assert_eq!(under(b"/a/b", b"/a"), Some(&b"b"[..]));
        assert_eq!(under(b"/a", b"/a"), Some(&b""[..]));
        assert_eq!(under(b"/ab", b"/a"), None);
        assert_eq!(join(b"/a", b"../c"), b"/c");
    }

    #[test]
    fn results_compare() {
        assert!(result_matches(Call::Openat, &Expect::Ok(3), 5));
        assert!(!result_matches(Call::Openat, &Expect::Ok(3), -2));
        assert!(result_matches(
            Call::Stat,
            &Expect::Err("ENOENT".into()),
            -2
        ));
        assert!(!result_matches(Call::Read, &Expect::Ok(10), 9));
        assert!(result_matches(Call::Getdents64, &Expect::Ok(400), 96));
        assert!(!result_matches(Call::Getdents64, &Expect::Ok(0), 96));
    }

    #[test]
    fn windows_parse() {
        let w = format!(
            "{WINDOW_HEADER}\n@ request-start 7 1 3\ndevice a mounted on /m with fstype nfs statvers=1.1\n@ request-end 7 1 9\n"
        );
        let m = parse_window(&w).unwrap();
        assert_eq!(m.len(), 2);
        assert!(m[0].start && !m[1].start);
        assert!(m[0].mountstats.starts_with("device a"));
        assert!(parse_window("junk\n").is_err());
        let ms = "device proc mounted on /proc with fstype proc\nx\ndevice s:/ mounted on /mnt/nfs with fstype nfs4 statvers=1.1\n\topts: a\n";
        assert_eq!(
            nfs_sections(ms),
            "device s:/ mounted on /mnt/nfs with fstype nfs4 statvers=1.1\n\topts: a\n"
        );
    }
}
