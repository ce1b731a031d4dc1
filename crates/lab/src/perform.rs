//! Performs a replay script ([`crate::replay`]) with the real syscalls:
//! the work of the `statstorm-replay` binary, which `statstorm lab` runs
//! inside the guest.
//!
//! One process per capture process: the script's first processes are
//! children of the caller, the others are forked by their parent at their
//! `fork` line. The capture's global order is kept across processes by a
//! turnstile: a counter in shared memory holds the index of the next op;
//! each process waits (futex) until it is its op's turn, sleeps until the
//! op's time (`t_us / speed` after the start; speed 0: no sleeping),
//! performs it, and moves the counter on. At each request marker the NFS
//! sections of `/proc/self/mountstats` are appended to the window file.
//! The [`Outcome`] says how many results matched the capture's, and the
//! first mismatches.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::replay::{
    nfs_sections, result_matches, Arg, Call, Expect, Op, Script, GETDENTS_BUF, WINDOW_HEADER,
};

/// How many mismatches an [`Outcome`] lists.
pub const MAX_MISMATCHES: usize = 10;

/// The state the processes share (an anonymous shared mapping).
#[repr(C)]
struct Shared {
    /// The index of the next op to perform (the futex word).
    turn: AtomicU32,
    /// Set when a process died before its ops were done: the others stop.
    abort: AtomicU32,
    matched: AtomicU64,
    mismatched: AtomicU64,
    /// Ops skipped because their fd was not open in the replay.
    skipped: AtomicU64,
    /// The first mismatches: (op index + 1, result), in slots taken with
    /// `mismatched`'s count.
    mis_op: [AtomicU64; MAX_MISMATCHES],
    mis_got: [AtomicU64; MAX_MISMATCHES],
}

struct Run<'a> {
    script: &'a Script,
    /// Per capture pid, the indexes of its ops.
    by_pid: HashMap<u32, Vec<usize>>,
    shared: &'a Shared,
    start: libc::timespec,
    speed: f64,
    window: Option<i32>,
}

/// What a replay did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ops performed (or skipped), in the script's order.
    pub done: usize,
    /// Ops in the script.
    pub total: usize,
    /// Results equal to the capture's.
    pub matched: u64,
    /// Results that were not.
    pub mismatched: u64,
    /// Ops skipped because their fd was not open in the replay.
    pub skipped: u64,
    /// The first mismatches (at most [`MAX_MISMATCHES`]): the op's index in
    /// the script and the result it got (`>= 0`, `-errno`, or
    /// [`FD_NOT_OPEN`]).
    pub first_mismatches: Vec<(usize, i64)>,
}

impl Outcome {
    /// Whether every op ran (`false`: a replay process died first).
    pub fn complete(&self) -> bool {
        self.done >= self.total
    }
}

/// The result recorded for an op whose fd the replay had not open.
pub const FD_NOT_OPEN: i64 = i64::MIN;

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum PerformError {
    #[error("{}: {source}", path.display())]
    Window {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the replay forks: the calling process must have one thread, it has {0}")]
    Threads(usize),
    #[error("mmap: {0}")]
    Map(std::io::Error),
    #[error("fork: {0}")]
    Fork(std::io::Error),
}

/// Performs `script`: forks its processes, waits for all of them and
/// returns what they did. `window`: the file the request markers and
/// mountstats sections are appended to. `speed`: times are divided by
/// it (0: no sleeping).
///
/// The calling process must have one thread (children of a forked
/// threaded process may block on a lock another thread held): a second
/// thread is refused with [`PerformError::Threads`]. Every descendant is
/// reparented to the caller (`PR_SET_CHILD_SUBREAPER`) and waited for.
pub fn perform(
    script: &Script,
    window: Option<&Path>,
    speed: f64,
) -> Result<Outcome, PerformError> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(1);
    if threads > 1 {
        return Err(PerformError::Threads(threads));
    }
    let window_fd = match window {
        Some(w) => {
            let err = |source| PerformError::Window {
                path: w.to_path_buf(),
                source,
            };
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(w)
                .map_err(err)?;
            writeln!(f, "{WINDOW_HEADER}").map_err(err)?;
            Some(std::os::fd::IntoRawFd::into_raw_fd(f))
        }
        None => None,
    };
    // SAFETY: an anonymous shared mapping of the struct's size, zeroed by
    // the kernel (all-zero atomics are valid); never unmapped.
    let shared: &Shared = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<Shared>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(PerformError::Map(std::io::Error::last_os_error()));
        }
        &*(p as *const Shared)
    };
    let mut by_pid: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut children = std::collections::HashSet::new();
    let mut roots = Vec::new();
    for (i, op) in script.ops.iter().enumerate() {
        let list = by_pid.entry(op.pid).or_default();
        if list.is_empty() && !children.contains(&op.pid) {
            roots.push(op.pid);
        }
        list.push(i);
        if let (Call::Fork, Some(Arg::Pid(c))) = (op.call, op.args.first()) {
            children.insert(*c);
        }
    }
    // Every descendant is reparented here when its parent exits first, so
    // the wait below sees them all.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut start = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut start) };
    let run = Run {
        script,
        by_pid,
        shared,
        start,
        speed,
        window: window_fd,
    };
    // the children would write again what stdout holds unwritten
    std::io::stdout().flush().ok();
    for pid in roots {
        // SAFETY: fork in a process with one thread; the child only runs
        // `process` and `_exit`s.
        match unsafe { libc::fork() } {
            -1 => return Err(PerformError::Fork(std::io::Error::last_os_error())),
            0 => run.process(pid, 0),
            _ => {}
        }
    }
    loop {
        let mut status = 0;
        // SAFETY: a valid status pointer.
        let r = unsafe { libc::wait(&mut status) };
        if r < 0 {
            break;
        }
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            shared.abort.store(1, Ordering::SeqCst);
            wake(&shared.turn);
        }
    }
    let done = shared.turn.load(Ordering::SeqCst) as usize;
    let matched = shared.matched.load(Ordering::SeqCst);
    let mismatched = shared.mismatched.load(Ordering::SeqCst);
    let skipped = shared.skipped.load(Ordering::SeqCst);
    let first_mismatches = (0..(mismatched as usize).min(MAX_MISMATCHES))
        .filter_map(|i| {
            let k = shared.mis_op[i].load(Ordering::SeqCst) as usize;
            let got = shared.mis_got[i].load(Ordering::SeqCst) as i64;
            k.checked_sub(1)
                .filter(|k| *k < script.ops.len())
                .map(|k| (k, got))
        })
        .collect();
    Ok(Outcome {
        done,
        total: script.ops.len(),
        matched,
        mismatched,
        skipped,
        first_mismatches,
    })
}

fn wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid aligned u32 in shared memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0usize,
            0usize,
            0usize,
        );
    }
}

fn cstr(p: &[u8]) -> CString {
    // Paths with a NUL byte cannot reach the kernel: cut at the NUL (the
    // capture's kernel saw the same).
    let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
    CString::new(&p[..end]).unwrap_or_default()
}

impl Run<'_> {
    /// Runs the ops of capture process `pid` from its `from`-th op on,
    /// then exits.
    fn process(&self, pid: u32, from: usize) -> ! {
        let mut fds: HashMap<i32, i32> = HashMap::new();
        let mut request = 0u64;
        self.process_from(pid, from, &mut fds, &mut request)
    }

    fn process_from(
        &self,
        pid: u32,
        from: usize,
        fds: &mut HashMap<i32, i32>,
        request: &mut u64,
    ) -> ! {
        let ops = self.by_pid.get(&pid).map(Vec::as_slice).unwrap_or(&[]);
        let mut k = from;
        while k < ops.len() {
            let idx = ops[k];
            k += 1;
            let op = &self.script.ops[idx];
            self.wait_turn(idx as u32);
            self.sleep_until(op.t_us);
            match op.call {
                Call::Exit => {
                    self.next(idx);
                    // SAFETY: ends this process.
                    unsafe { libc::_exit(0) };
                }
                Call::RequestStart | Call::RequestEnd => {
                    if op.call == Call::RequestStart {
                        *request += 1;
                    }
                    self.mark(op, *request);
                }
                Call::Fork => {
                    let Some(Arg::Pid(child)) = op.args.first() else {
                        unreachable!("parse_script checks the signature")
                    };
                    // SAFETY: one thread; the child goes on with the
                    // child process's ops (it inherits the fd table and
                    // the fd map).
                    let r = unsafe { libc::fork() };
                    if r == 0 {
                        // The parent moves the turn on after the fork.
                        let mut req = 0;
                        self.process_from(*child, 0, fds, &mut req);
                    }
                    let got = if r < 0 { -errno() } else { r as i64 };
                    self.tally(idx, op, got);
                }
                // Setup: not a call of the capture, so not counted as
                // one; a cwd the replay cannot enter is a mismatch.
                Call::Cwd => match self.perform(op, fds) {
                    Some(got) if got < 0 => self.record_mismatch(idx, got),
                    _ => {}
                },
                _ => match self.perform(op, fds) {
                    Some(got) => self.tally(idx, op, got),
                    None => {
                        self.shared.skipped.fetch_add(1, Ordering::SeqCst);
                        self.record_mismatch(idx, FD_NOT_OPEN);
                    }
                },
            }
            self.next(idx);
        }
        // SAFETY: ends this process.
        unsafe { libc::_exit(0) }
    }

    fn next(&self, idx: usize) {
        self.shared.turn.store(idx as u32 + 1, Ordering::SeqCst);
        wake(&self.shared.turn);
    }

    fn wait_turn(&self, idx: u32) {
        loop {
            let cur = self.shared.turn.load(Ordering::SeqCst);
            if cur == idx {
                return;
            }
            if self.shared.abort.load(Ordering::SeqCst) != 0 {
                // SAFETY: ends this process.
                unsafe { libc::_exit(3) };
            }
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 200_000_000,
            };
            // SAFETY: FUTEX_WAIT on a valid aligned u32; returns at once
            // when the word is no longer `cur`.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.shared.turn.as_ptr(),
                    libc::FUTEX_WAIT,
                    cur,
                    &ts as *const libc::timespec,
                    0usize,
                    0usize,
                );
            }
        }
    }

    fn sleep_until(&self, t_us: u64) {
        if self.speed <= 0.0 || t_us == 0 {
            return;
        }
        let ns = (t_us as f64 * 1000.0 / self.speed).min(1e15) as i64;
        let total = self.start.tv_nsec + ns % 1_000_000_000;
        let ts = libc::timespec {
            tv_sec: self.start.tv_sec + ns / 1_000_000_000 + total / 1_000_000_000,
            tv_nsec: total % 1_000_000_000,
        };
        // SAFETY: a valid timespec; absolute monotonic sleep.
        while unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        } == libc::EINTR
        {}
    }

    fn tally(&self, idx: usize, op: &Op, got: i64) {
        if result_matches(op.call, &op.expect, got) {
            self.shared.matched.fetch_add(1, Ordering::SeqCst);
        } else {
            self.record_mismatch(idx, got);
        }
    }

    fn record_mismatch(&self, idx: usize, got: i64) {
        let n = self.shared.mismatched.fetch_add(1, Ordering::SeqCst) as usize;
        if n < MAX_MISMATCHES {
            self.shared.mis_op[n].store(idx as u64 + 1, Ordering::SeqCst);
            self.shared.mis_got[n].store(got as u64, Ordering::SeqCst);
        }
    }

    /// Appends a marker and the NFS sections of mountstats to the window.
    fn mark(&self, op: &Op, request: u64) {
        let Some(fd) = self.window else { return };
        let stats = std::fs::read_to_string("/proc/self/mountstats").unwrap_or_default();
        let text = format!(
            "@ {} {} {} {}\n{}",
            op.call.name(),
            op.pid,
            request,
            op.line,
            nfs_sections(&stats)
        );
        let b = text.as_bytes();
        let mut off = 0;
        while off < b.len() {
            // SAFETY: writes from a live buffer to an fd this process owns.
            let r = unsafe { libc::write(fd, b[off..].as_ptr().cast(), b.len() - off) };
            if r <= 0 {
                break;
            }
            off += r as usize;
        }
    }

    /// Performs a syscall op: its result (`>= 0`, or `-errno`), or `None`
    /// when it names an fd the replay has not open.
    fn perform(&self, op: &Op, fds: &mut HashMap<i32, i32>) -> Option<i64> {
        let a = &op.args;
        let path = |i: usize| match a.get(i) {
            Some(Arg::Path(p)) => cstr(p),
            _ => CString::default(),
        };
        let int = |i: usize| match a.get(i) {
            Some(Arg::At(v) | Arg::Mode(v) | Arg::Open(v)) => *v as i64,
            Some(Arg::Count(n)) => *n as i64,
            _ => 0,
        };
        let fd_of = |i: usize| -> Option<i64> {
            match a.get(i) {
                Some(Arg::Dir(None)) => Some(libc::AT_FDCWD as i64),
                Some(Arg::Dir(Some(f)) | Arg::Fd(f)) => fds.get(f).map(|&m| m as i64),
                _ => None,
            }
        };
        let mut stat_buf = [0u8; 256];
        let sb = stat_buf.as_mut_ptr() as i64;
        // The syscalls are made by number (`syscall(2)`), not through the
        // libc wrappers, so the kernel sees the capture's calls: glibc's
        // stat() is newfstatat, its open() is openat.
        let sys = |n: libc::c_long, args: [i64; 5]| -> i64 {
            // SAFETY: every pointer argument below points into a live
            // buffer or C string of this frame, of the size given.
            let r = unsafe { libc::syscall(n, args[0], args[1], args[2], args[3], args[4]) };
            if r < 0 {
                -errno()
            } else {
                r as i64
            }
        };
        let r = match op.call {
            Call::Cwd => {
                let p = path(0);
                sys(libc::SYS_chdir, [p.as_ptr() as i64, 0, 0, 0, 0])
            }
            Call::Stat | Call::Lstat => {
                let p = path(0);
                let n = if op.call == Call::Stat {
                    libc::SYS_stat
                } else {
                    libc::SYS_lstat
                };
                sys(n, [p.as_ptr() as i64, sb, 0, 0, 0])
            }
            Call::Fstat => sys(libc::SYS_fstat, [fd_of(0)?, sb, 0, 0, 0]),
            Call::Newfstatat => {
                let p = path(1);
                sys(
                    libc::SYS_newfstatat,
                    [fd_of(0)?, p.as_ptr() as i64, sb, int(2), 0],
                )
            }
            Call::Statx => {
                let p = path(1);
                sys(
                    libc::SYS_statx,
                    [
                        fd_of(0)?,
                        p.as_ptr() as i64,
                        int(2),
                        libc::STATX_BASIC_STATS as i64,
                        sb,
                    ],
                )
            }
            Call::Access => {
                let p = path(0);
                sys(libc::SYS_access, [p.as_ptr() as i64, int(1), 0, 0, 0])
            }
            Call::Faccessat => {
                let p = path(1);
                sys(
                    libc::SYS_faccessat,
                    [fd_of(0)?, p.as_ptr() as i64, int(2), 0, 0],
                )
            }
            Call::Faccessat2 => {
                let p = path(1);
                sys(
                    libc::SYS_faccessat2,
                    [fd_of(0)?, p.as_ptr() as i64, int(2), int(3), 0],
                )
            }
            Call::Open | Call::Openat => {
                let r = if op.call == Call::Open {
                    let p = path(0);
                    sys(libc::SYS_open, [p.as_ptr() as i64, int(1), 0o666, 0, 0])
                } else {
                    let p = path(1);
                    sys(
                        libc::SYS_openat,
                        [fd_of(0)?, p.as_ptr() as i64, int(2), 0o666, 0],
                    )
                };
                if let (true, Expect::Ok(cap)) = (r >= 0, &op.expect) {
                    if let Some(old) = fds.insert(*cap as i32, r as i32) {
                        // The capture reused an fd the replay still holds
                        // (a close left out): the old one is dropped.
                        // SAFETY: closes an fd this process opened.
                        unsafe { libc::close(old) };
                    }
                }
                r
            }
            Call::Close => {
                let Some(Arg::Fd(cap)) = a.first() else {
                    return None;
                };
                let mine = fds.remove(cap)?;
                sys(libc::SYS_close, [mine as i64, 0, 0, 0, 0])
            }
            Call::Read | Call::Write => {
                let fd = fd_of(0)?;
                let mut buf = vec![0u8; int(1) as usize];
                let n = if op.call == Call::Read {
                    libc::SYS_read
                } else {
                    libc::SYS_write
                };
                sys(n, [fd, buf.as_mut_ptr() as i64, buf.len() as i64, 0, 0])
            }
            Call::Getdents64 => {
                let fd = fd_of(0)?;
                let mut buf = vec![0u8; GETDENTS_BUF];
                sys(
                    libc::SYS_getdents64,
                    [fd, buf.as_mut_ptr() as i64, buf.len() as i64, 0, 0],
                )
            }
            Call::Readlink => {
                let p = path(0);
                let mut buf = vec![0u8; 4096];
                sys(
                    libc::SYS_readlink,
                    [p.as_ptr() as i64, buf.as_mut_ptr() as i64, 4096, 0, 0],
                )
            }
            Call::Readlinkat => {
                let p = path(1);
                let mut buf = vec![0u8; 4096];
                sys(
                    libc::SYS_readlinkat,
                    [
                        fd_of(0)?,
                        p.as_ptr() as i64,
                        buf.as_mut_ptr() as i64,
                        4096,
                        0,
                    ],
                )
            }
            Call::Chdir => {
                let p = path(0);
                sys(libc::SYS_chdir, [p.as_ptr() as i64, 0, 0, 0, 0])
            }
            Call::Fchdir => sys(libc::SYS_fchdir, [fd_of(0)?, 0, 0, 0, 0]),
            Call::Mkdir => {
                let p = path(0);
                sys(libc::SYS_mkdir, [p.as_ptr() as i64, 0o777, 0, 0, 0])
            }
            Call::Mkdirat => {
                let p = path(1);
                sys(
                    libc::SYS_mkdirat,
                    [fd_of(0)?, p.as_ptr() as i64, 0o777, 0, 0],
                )
            }
            Call::Rmdir | Call::Unlink => {
                let p = path(0);
                let n = if op.call == Call::Rmdir {
                    libc::SYS_rmdir
                } else {
                    libc::SYS_unlink
                };
                sys(n, [p.as_ptr() as i64, 0, 0, 0, 0])
            }
            Call::Unlinkat => {
                let p = path(1);
                sys(
                    libc::SYS_unlinkat,
                    [fd_of(0)?, p.as_ptr() as i64, int(2), 0, 0],
                )
            }
            Call::Rename => {
                let (p, q) = (path(0), path(1));
                sys(
                    libc::SYS_rename,
                    [p.as_ptr() as i64, q.as_ptr() as i64, 0, 0, 0],
                )
            }
            Call::Renameat => {
                let (p, q) = (path(1), path(3));
                sys(
                    libc::SYS_renameat,
                    [
                        fd_of(0)?,
                        p.as_ptr() as i64,
                        fd_of(2)?,
                        q.as_ptr() as i64,
                        0,
                    ],
                )
            }
            Call::Fork | Call::Exit | Call::RequestStart | Call::RequestEnd => 0,
        };
        Some(r)
    }
}

fn errno() -> i64 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_two_threads_is_refused_before_anything_forks() {
        let (hold, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv().ok());
        let script =
            crate::replay::parse_script("statstorm-replay 1\n").expect("an empty script parses");
        let dir = tempfile::tempdir().unwrap();
        let window = dir.path().join("window");
        match perform(&script, Some(&window), 0.0) {
            Err(PerformError::Threads(n)) => assert!(n >= 2, "{n} threads"),
            other => panic!("not refused: {other:?}"),
        }
        assert!(!window.exists(), "the window file was made");
        drop(hold);
        other.join().unwrap();
    }
}
