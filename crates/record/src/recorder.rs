//! Loading the BPF program, following the processes asked for, and writing
//! each call the ring buffer brings as a line of the capture.
//!
//! The programs are attached through BPF links owned by this process: when
//! the recording ends (its time is up, the command exited, a signal set the
//! stop flag, an error) the links are dropped and the kernel detaches the
//! programs; if this process dies first, its fds close and the kernel does
//! the same. No program outlives the recording.

use crate::cpu::CpuCap;
use crate::drain::{realtime_ns, Windows};
use crate::event::Call;
use crate::skel::{OpenRecordSkel, RecordSkel, RecordSkelBuilder};
use crate::text::Text;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};
use std::cell::RefCell;
use std::ffi::OsString;
use std::io::Write;
use std::mem::MaybeUninit;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to record.
#[derive(Clone, Debug)]
pub struct Config {
    /// Processes to follow, with their descendants (those alive now and
    /// those they create).
    pub pids: Vec<u32>,
    /// Processes whose name (`comm`, at most 15 bytes) starts with this.
    pub comm: Option<String>,
    /// A command to run and record (with its children) until it exits.
    pub command: Option<Vec<OsString>>,
    /// The hard limit: the recording stops after this long whatever else.
    pub duration: Duration,
    /// The ring buffer's size in bytes (a power of two, at least 4096).
    pub ring_bytes: u32,
    /// Counts mode: calls counted in the kernel and written per window
    /// ([`crate::counts`]) instead of one line per call.
    pub counts: Option<CountsConfig>,
    /// The most CPU the recorder itself may use, as a share of one CPU
    /// (0.5: half a CPU). Above it the writer pauses; the ring buffer
    /// then fills and the calls it cannot hold are lost, counted and
    /// reported. `None`: no cap.
    pub max_cpu: Option<f64>,
}

/// The default cap on the recorder's own CPU: half a CPU (the writer
/// used about 0.36 CPU keeping up with 420k calls a second of a PHP stat
/// loop, docs/record.md).
pub const DEFAULT_MAX_CPU: f64 = 0.5;

/// Counts mode's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountsConfig {
    /// How often the counts are drained and written.
    pub window: Duration,
    /// The most keys (process x syscall x result x path) the kernel keeps
    /// in a window; calls beyond are counted per syscall alone.
    pub max_keys: u32,
}

/// The default counts window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
/// The default bound on a window's keys: at most about 2 x 65536 x 350
/// bytes of kernel memory (two maps, key, value and the map's own
/// overhead per entry).
pub const DEFAULT_MAX_KEYS: u32 = 65536;

impl Config {
    /// What is followed, in words (the capture's header).
    pub fn describe(&self) -> String {
        let mut w: Vec<String> = self
            .pids
            .iter()
            .map(|p| format!("pid {p} and its descendants"))
            .collect();
        if let Some(c) = &self.comm {
            w.push(format!("processes named {c}*"));
        }
        if let Some(cmd) = &self.command {
            let c: Vec<String> = cmd
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            w.push(format!("the command `{}` and its children", c.join(" ")));
        }
        w.join(", ")
    }
}

/// The default ring buffer: 64 MiB, about 600k calls of PHP-sized paths
/// queued while the writer catches up.
pub const DEFAULT_RING_BYTES: u32 = 64 << 20;

/// How the recording ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Its duration was up.
    Duration,
    /// The stop flag was set (SIGINT, SIGTERM).
    Signal,
    /// The recorded command exited.
    CommandExited,
    /// Every followed process exited.
    TargetsGone,
}

/// What the recording did, and what it could not keep.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Calls written to the capture.
    pub calls: u64,
    /// Calls lost because the ring buffer was full (the writer fell
    /// behind).
    pub lost_ring: u64,
    /// Calls lost because another thread took their in-flight slot (thread
    /// ids equal in their low 16 bits, both in a call).
    pub lost_inflight: u64,
    /// Paths cut at 511 bytes.
    pub cut_paths: u64,
    /// Records the user side could not decode (none expected: a record
    /// layout mismatch).
    pub undecodable: u64,
    /// Counts mode: windows written, and calls that found the kernel's map
    /// full (counted per syscall alone, not lost).
    pub windows: u64,
    pub counts_full: u64,
    /// How long the writer paused to keep to the CPU cap.
    pub throttled: Duration,
    pub elapsed: Duration,
    pub stop: Stop,
    /// The recorded command's exit status.
    pub command_status: Option<ExitStatus>,
}

impl Summary {
    /// Calls lost, whatever the cause.
    pub fn lost(&self) -> u64 {
        self.lost_ring + self.lost_inflight + self.undecodable
    }
}

/// Counters while recording, for a progress line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub elapsed: Duration,
    pub calls: u64,
    pub lost: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("recording needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN; run as root): this process lacks {0}")]
    Privilege(String),
    #[error("this kernel lacks {0}, which recording needs")]
    Kernel(String),
    #[error("no process {0}")]
    NoProcess(u32),
    #[error("nothing to record: give --pid, --comm or a command")]
    NoTarget,
    #[error("--comm {0:?}: a process name has at most 15 bytes")]
    Comm(String),
    #[error("the ring buffer size must be a power of two of at least 4096 bytes, not {0}")]
    Ring(u32),
    #[error("counts: the window must be at least 100 ms and the keys between 1 and 16777216")]
    Counts,
    #[error("the CPU cap must be above 0% and at most 100% of one CPU, not {}%", .0 * 100.0)]
    MaxCpu(f64),
    #[error("loading the BPF program failed: {0}")]
    Load(String),
    #[error("running {cmd}: {err}")]
    Spawn { cmd: String, err: std::io::Error },
    #[error("writing the capture: {0}")]
    Write(#[from] std::io::Error),
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The effective capabilities of this process (/proc/self/status CapEff).
fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Refuses clearly without the privilege or kernel features recording
/// needs: CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); kernel BTF (the
/// programs are BTF tracepoints, CO-RE); ring buffers (Linux 5.8).
pub fn check() -> Result<(), Error> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1 << c) != 0;
    if !(has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))) {
        let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
            .iter()
            .filter(|(c, _)| !has(*c))
            .map(|&(_, n)| n)
            .collect();
        return Err(Error::Privilege(missing.join(" and ")));
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(Error::Kernel(
            "BTF type information (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF=y)".into(),
        ));
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse::<u32>().ok());
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    if (major, minor) < (5, 8) {
        return Err(Error::Kernel(format!(
            "BPF ring buffers (Linux 5.8; this is {})",
            release.trim()
        )));
    }
    Ok(())
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC, nanoseconds.
fn clock_offset_ns() -> i128 {
    let now = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
    };
    let m0 = now(libc::CLOCK_MONOTONIC);
    let r = now(libc::CLOCK_REALTIME);
    let m1 = now(libc::CLOCK_MONOTONIC);
    r - (m0 + m1) / 2
}

fn alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The descendants of `roots` alive now (from /proc/*/stat's ppid).
fn descendants(roots: &[u32]) -> Vec<u32> {
    let mut parent: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and ')'
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parent.push((pid, ppid));
            }
        }
    }
    let mut out: Vec<u32> = roots.to_vec();
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        for &(c, pp) in &parent {
            if pp == p && !out.contains(&c) {
                out.push(c);
            }
        }
        i += 1;
    }
    out
}

fn cwd_of(pid: u32) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    std::fs::read_link(format!("/proc/{pid}/cwd"))
        .ok()
        .map(|p| p.into_os_string().into_vec())
}

/// A child started stopped at a gate: it execs the command only once its
/// pid is followed, so its first call is recorded. (fork and exec by hand:
/// `std::process::Command::spawn` returns only after the exec.)
struct Gated {
    pid: libc::pid_t,
    gate: Option<std::fs::File>,
}

impl Gated {
    /// The exit status once the child has exited.
    fn try_wait(&mut self) -> Option<ExitStatus> {
        let mut st = 0;
        // SAFETY: waitpid on our own child, without blocking.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        (r == self.pid).then(|| ExitStatus::from_raw(st))
    }
}

/// `name` as execvp(3) finds it: itself when it holds a `/`, else the
/// first executable file of that name in PATH.
fn which(name: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if name.as_bytes().contains(&b'/') {
        return Some(name.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn spawn_gated(cmd: &[OsString]) -> Result<Gated, Error> {
    use std::os::unix::ffi::OsStrExt;
    let name = cmd
        .first()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    let spawn_err = |err: std::io::Error| Error::Spawn {
        cmd: name.clone(),
        err,
    };
    // the program found on PATH here, so that the child makes one execve
    let program = which(&cmd[0]).ok_or_else(|| {
        spawn_err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not found (nor on PATH)",
        ))
    })?;
    let argv: Vec<std::ffi::CString> = std::iter::once(program.as_os_str())
        .chain(cmd[1..].iter().map(|a| a.as_os_str()))
        .map(|a| std::ffi::CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| spawn_err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two fds.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(spawn_err(std::io::Error::last_os_error()));
    }
    let (rfd, wfd) = (fds[0], fds[1]);
    // SAFETY: the child only calls async-signal-safe functions (close,
    // read, execvp, _exit) before it execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(spawn_err(std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe {
            libc::close(wfd);
            let mut b = [0u8; 1];
            libc::read(rfd, b.as_mut_ptr().cast(), 1);
            libc::execv(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    // SAFETY: rfd is ours and no longer needed here; wfd is an open pipe
    // end owned from here on by the File.
    unsafe { libc::close(rfd) };
    let gate = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(wfd) };
    Ok(Gated {
        pid,
        gate: Some(gate),
    })
}

fn load<'o>(
    cfg: &Config,
    obj: &'o mut MaybeUninit<libbpf_rs::OpenObject>,
) -> Result<RecordSkel<'o>, Error> {
    let err = |e: libbpf_rs::Error| Error::Load(e.to_string());
    let mut open: OpenRecordSkel = RecordSkelBuilder::default().open(obj).map_err(err)?;
    // counts mode sends nothing through the ring buffer: the smallest one
    let ring = if cfg.counts.is_some() {
        4096
    } else {
        cfg.ring_bytes
    };
    open.maps.events.set_max_entries(ring).map_err(err)?;
    if let Some(c) = &cfg.counts {
        open.maps.counts0.set_max_entries(c.max_keys).map_err(err)?;
        open.maps.counts1.set_max_entries(c.max_keys).map_err(err)?;
    }
    // a slot per thread id below pid_max, at most 2^16 (record.bpf.c)
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 22);
    let slots = pid_max.clamp(2, 1 << 16).next_power_of_two();
    open.maps.inflight.set_max_entries(slots).map_err(err)?;
    let ro = open
        .maps
        .rodata_data
        .as_deref_mut()
        .ok_or_else(|| Error::Load("no read-only data section".into()))?;
    ro.counts_mode = cfg.counts.is_some() as u32;
    ro.slot_mask = slots - 1;
    if let Some(c) = &cfg.comm {
        ro.comm_len = c.len() as u32;
        for (d, s) in ro.comm.iter_mut().zip(c.bytes()) {
            *d = s as i8;
        }
    }
    open.load().map_err(err)
}

/// Follows `pid`: sets its bit in the kernel's `followed_pids` (64 pids
/// a word). The word is read, changed and written back: a bit the kernel
/// set in the same word meanwhile (a followed process forking) would be
/// lost, so this is done before the programs are attached, and after only
/// for the few processes created in between.
fn follow(skel: &RecordSkel, pid: u32) -> Result<(), Error> {
    let err = |e: libbpf_rs::Error| Error::Load(format!("following pid {pid}: {e}"));
    let key = ((pid >> 6) & 0xffff).to_ne_bytes();
    let map = &skel.maps.followed_pids;
    let word = map
        .lookup(&key, MapFlags::ANY)
        .map_err(err)?
        .and_then(|v| {
            v.get(..8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
        })
        .unwrap_or(0);
    let word = word | 1 << (pid & 63);
    map.update(&key, &word.to_ne_bytes(), MapFlags::ANY)
        .map_err(err)
}

/// Follows the recorded command's child from its execve on.
fn follow_from_exec(skel: &RecordSkel, pid: u32) -> Result<(), Error> {
    skel.maps
        .before_exec
        .update(&pid.to_ne_bytes(), &[1], MapFlags::ANY)
        .map_err(|e| Error::Load(format!("following pid {pid}: {e}")))
}

/// The counters summed over CPUs: (unused), lost (ring full), lost
/// (in-flight slot taken), cut paths, counts map full.
pub(crate) fn counters(skel: &RecordSkel) -> [u64; 5] {
    let mut out = [0u64; 5];
    for (i, o) in out.iter_mut().enumerate() {
        let key = (i as u32).to_ne_bytes();
        if let Ok(Some(per_cpu)) = skel.maps.counters.lookup_percpu(&key, MapFlags::ANY) {
            for v in per_cpu {
                if v.len() >= 8 {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&v[..8]);
                    *o += u64::from_ne_bytes(a);
                }
            }
        }
    }
    out
}

/// Records what `cfg` asks for into `out` (strace-compatible text,
/// [`crate::text`]), until its duration is up, its command exits, every
/// followed process is gone, or `stop` is set. `progress` is called once
/// the programs are attached (every call from then on is seen; elapsed
/// zero), then about once a second.
pub fn record(
    cfg: &Config,
    out: &mut dyn Write,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Summary, Error> {
    record_with(cfg, out, &mut |_| {}, stop, progress)
}

/// [`record`], giving each counts window to `on_window` too (after its
/// lines went to `out`): a consumer of counts that writes no capture (the
/// metrics exporter) passes `std::io::sink()` as `out`.
pub fn record_with(
    cfg: &Config,
    out: &mut dyn Write,
    on_window: &mut dyn FnMut(&crate::counts::Window),
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Summary, Error> {
    if cfg.pids.is_empty() && cfg.comm.is_none() && cfg.command.is_none() {
        return Err(Error::NoTarget);
    }
    if let Some(c) = &cfg.comm {
        if c.is_empty() || c.len() > 15 {
            return Err(Error::Comm(c.clone()));
        }
    }
    if !cfg.ring_bytes.is_power_of_two() || cfg.ring_bytes < 4096 {
        return Err(Error::Ring(cfg.ring_bytes));
    }
    if let Some(c) = cfg.max_cpu {
        if !(c > 0.0 && c <= 1.0) {
            return Err(Error::MaxCpu(c));
        }
    }
    if let Some(c) = &cfg.counts {
        if c.window < Duration::from_millis(100) || c.max_keys == 0 || c.max_keys > 1 << 24 {
            return Err(Error::Counts);
        }
    }
    for &p in &cfg.pids {
        if !alive(p) {
            return Err(Error::NoProcess(p));
        }
    }
    check()?;
    let mut obj = MaybeUninit::uninit();
    let skel = load(cfg, &mut obj)?;
    let mut skel = skel;
    let before = descendants(&cfg.pids);
    for &p in &before {
        follow(&skel, p)?;
    }
    skel.attach().map_err(|e| Error::Load(e.to_string()))?;
    // processes created between the scan and the attach (later ones the
    // fork program follows)
    for p in descendants(&cfg.pids) {
        if !before.contains(&p) {
            follow(&skel, p)?;
        }
    }
    let started = Instant::now();
    progress(&Progress::default());
    let mut gated = match &cfg.command {
        Some(cmd) => {
            let mut g = spawn_gated(cmd)?;
            follow_from_exec(&skel, g.pid as u32)?;
            // the child may exec now
            if let Some(mut gate) = g.gate.take() {
                let _ = gate.write_all(b"g");
            }
            Some(g)
        }
        None => None,
    };

    // counts mode: the kernel's `counts_cur` (mapped memory), flipped at
    // the end of each window
    let flip: Option<*mut u32> = skel
        .maps
        .bss_data
        .as_deref_mut()
        .map(|b| &mut b.counts_cur as *mut u32);
    let text = Rc::new(RefCell::new(Text::new(clock_offset_ns(), Box::new(cwd_of))));
    let buf = Rc::new(RefCell::new(String::with_capacity(1 << 20)));
    let undecodable = Rc::new(RefCell::new(0u64));
    let calls = Rc::new(RefCell::new(0u64));
    let rb = match cfg.counts {
        Some(_) => None,
        None => {
            let mut rb = RingBufferBuilder::new();
            let (text, buf, undecodable, calls) = (
                text.clone(),
                buf.clone(),
                undecodable.clone(),
                calls.clone(),
            );
            rb.add(&skel.maps.events, move |data: &[u8]| {
                match Call::decode(data) {
                    Ok(c) => {
                        *calls.borrow_mut() += 1;
                        text.borrow_mut().line(&c, &mut buf.borrow_mut())
                    }
                    Err(_) => *undecodable.borrow_mut() += 1,
                }
                0
            })
            .map_err(|e| Error::Load(e.to_string()))?;
            Some(rb.build().map_err(|e| Error::Load(e.to_string()))?)
        }
    };
    let mut windows = Windows {
        cur: 0,
        start_ns: realtime_ns(),
        started: Instant::now(),
        written: 0,
    };

    let mut last_progress = Instant::now();
    let mut command_status = None;
    let mut cap = cfg.max_cpu.map(CpuCap::new);
    let reason = loop {
        if let Some(c) = &mut cap {
            c.check();
        }
        match (&rb, &cfg.counts) {
            (Some(rb), _) => {
                let _ = rb.poll(Duration::from_millis(100));
            }
            (None, Some(c)) => {
                std::thread::sleep(Duration::from_millis(100));
                if windows.started.elapsed() >= c.window {
                    let w = windows.next(&skel, flip, &mut undecodable.borrow_mut())?;
                    *calls.borrow_mut() += w.calls();
                    w.write(&mut buf.borrow_mut());
                    on_window(&w);
                }
            }
            (None, None) => unreachable!("calls mode has a ring buffer"),
        }
        {
            let mut b = buf.borrow_mut();
            if !b.is_empty() {
                out.write_all(b.as_bytes())?;
                b.clear();
            }
        }
        if stop.load(Ordering::Relaxed) {
            break Stop::Signal;
        }
        if started.elapsed() >= cfg.duration {
            break Stop::Duration;
        }
        if let Some(g) = &mut gated {
            if let Some(st) = g.try_wait() {
                command_status = Some(st);
                break Stop::CommandExited;
            }
        } else if cfg.comm.is_none() && !cfg.pids.is_empty() && !cfg.pids.iter().any(|&p| alive(p))
        {
            break Stop::TargetsGone;
        }
        if last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            let c = counters(&skel);
            progress(&Progress {
                elapsed: started.elapsed(),
                calls: *calls.borrow(),
                lost: c[1] + c[2],
            });
        }
    };
    match &rb {
        // what is already in the ring buffer still goes to the capture
        Some(rb) => {
            let _ = rb.consume();
        }
        // the last window, and what a program still running at the
        // previous flip added to the other map
        None => {
            let w = windows.last(&skel, flip, &mut undecodable.borrow_mut())?;
            *calls.borrow_mut() += w.calls();
            if !w.rows.is_empty() {
                w.write(&mut buf.borrow_mut());
                on_window(&w);
            }
        }
    }
    {
        let mut b = buf.borrow_mut();
        out.write_all(b.as_bytes())?;
        b.clear();
    }
    let c = counters(&skel);
    drop(rb);
    drop(skel); // detaches every program
    let undecodable = *undecodable.borrow();
    let calls = *calls.borrow();
    Ok(Summary {
        calls,
        lost_ring: c[1],
        lost_inflight: c[2],
        cut_paths: c[3],
        undecodable,
        windows: windows.written,
        counts_full: c[4],
        throttled: cap.map_or(Duration::ZERO, |c| c.paused),
        elapsed: started.elapsed(),
        stop: reason,
        command_status,
    })
}
