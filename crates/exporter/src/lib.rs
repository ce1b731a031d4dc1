//! `statstorm exporter`: the storm as Prometheus metrics, all day.
//!
//! [`Metrics`] folds the windows of a counts-mode recording
//! (`statstorm_record::counts::Window`: calls counted in the kernel per
//! process x syscall x result x path, drained per window, and the
//! per-request histograms) into counters whose label sets are bounded
//! whatever the number of distinct paths or processes: no pid label, and
//! a directory label for the first `max_dirs` directories seen, the rest
//! under `(other)`. [`Metrics::render`] writes them, with the NFS client's
//! RPC counts of `/proc/self/mountstats` and the exporter's own figures,
//! in the Prometheus text format ([`text`]). The HTTP side is the
//! binary's (`statstorm exporter`); docs/exporter.md says what each metric
//! means and which finding of `diagnose` it goes with.

pub mod text;

use statstorm_nfs::mountstats::MountStats;
use statstorm_record::counts::{RequestHistograms, Window, REQ_BUCKETS, REQ_CLASSES};
use statstorm_record::event::Syscall;
use std::collections::{BTreeMap, HashMap};
use text::{Exposition, Kind};

/// The `dir` label of calls without a path (fstat, read, close...) ...
pub const DIR_NONE: &str = "(none)";
/// ... and of directories beyond the cap.
pub const DIR_OTHER: &str = "(other)";
/// The default cap on distinct `dir` label values.
pub const DEFAULT_MAX_DIRS: usize = 100;

const NONE: u32 = u32::MAX;
const OTHER: u32 = u32::MAX - 1;

/// The exporter's own figures at a scrape.
#[derive(Clone, Debug, Default)]
pub struct SelfStats {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
}

impl SelfStats {
    /// This process's CPU time (getrusage) and resident set
    /// (/proc/self/statm).
    pub fn now() -> SelfStats {
        // SAFETY: getrusage fills the struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        let resident = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0);
        SelfStats {
            cpu_seconds: secs(ru.ru_utime) + secs(ru.ru_stime),
            resident_bytes: resident * page,
        }
    }
}

/// The counters folded from the windows so far.
#[derive(Clone, Debug)]
pub struct Metrics {
    max_dirs: usize,
    /// Each directory given a label, and its index in `dir_labels`.
    dirs: HashMap<Vec<u8>, u32>,
    dir_labels: Vec<String>,
    /// (syscall, result, dir index) -> calls. `result`: `ok`, the errno's
    /// name, or `unknown` (counted while the kernel's map was full).
    calls: BTreeMap<(&'static str, String, u32), u64>,
    seconds: BTreeMap<&'static str, f64>,
    lstat_calls: u64,
    php_stats: u64,
    requests: RequestHistograms,
    windows: u64,
    map_full: u64,
    lost: u64,
}

/// The directory part of a path: `/a/b` of `/a/b/c`, `/` of `/a`, `.` of
/// a name without `/`.
fn dir_of(p: &[u8]) -> &[u8] {
    match p.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &p[..i],
        None => b".",
    }
}

fn is_stat(s: Syscall) -> bool {
    matches!(
        s,
        Syscall::Stat | Syscall::Lstat | Syscall::Newfstatat | Syscall::Statx
    )
}

impl Metrics {
    pub fn new(max_dirs: usize) -> Self {
        Metrics {
            max_dirs,
            dirs: HashMap::new(),
            dir_labels: Vec::new(),
            calls: BTreeMap::new(),
            seconds: BTreeMap::new(),
            lstat_calls: 0,
            php_stats: 0,
            requests: RequestHistograms::default(),
            windows: 0,
            map_full: 0,
            lost: 0,
        }
    }

    /// The label index of `dir`: its own while fewer than `max_dirs` have
    /// one (a label once given is kept: counters never move between
    /// series), `OTHER` after.
    fn dir_index(&mut self, dir: &[u8]) -> u32 {
        if let Some(&i) = self.dirs.get(dir) {
            return i;
        }
        if self.dir_labels.len() >= self.max_dirs {
            return OTHER;
        }
        let i = self.dir_labels.len() as u32;
        self.dir_labels
            .push(String::from_utf8_lossy(dir).into_owned());
        self.dirs.insert(dir.to_vec(), i);
        i
    }

    /// Adds a window's counts.
    pub fn fold(&mut self, w: &Window) {
        self.windows += 1;
        self.lost = w.lost_calls;
        self.requests = w.requests.clone();
        for r in &w.rows {
            let name = r.syscall.name();
            let result = match r.errno {
                Some(0) => "ok".to_string(),
                Some(e) => statstorm_record::text::errno_name(e),
                None => "unknown".to_string(),
            };
            if r.pid.is_none() {
                self.map_full += r.calls;
            }
            let dir = match &r.path {
                Some(p) => self.dir_index(dir_of(p)),
                None => NONE,
            };
            *self.calls.entry((name, result, dir)).or_insert(0) += r.calls;
            *self.seconds.entry(name).or_insert(0.0) += r.dur_ns as f64 / 1e9;
            if r.syscall == Syscall::Lstat || r.nofollow {
                self.lstat_calls += r.calls;
            }
            if is_stat(r.syscall)
                && !r.nofollow
                && r.errno == Some(0)
                && r.path.as_deref().is_some_and(|p| p.ends_with(b".php"))
            {
                self.php_stats += r.calls;
            }
        }
    }

    /// Distinct `dir` label values given so far (at most `max_dirs`).
    pub fn dir_labels(&self) -> usize {
        self.dir_labels.len()
    }

    /// The metrics in the Prometheus text format. `nfs`: the NFS client's
    /// counts (`/proc/self/mountstats`), if read.
    pub fn render(&self, nfs: Option<&MountStats>, own: &SelfStats) -> String {
        let mut e = Exposition::default();
        e.family(
            "statstorm_syscalls_total",
            Kind::Counter,
            "File syscalls of the followed processes, by syscall, result (ok, the errno, or unknown while the kernel's map was full) and directory of the path (the first max_dirs directories seen; the rest (other); (none) for calls without a path).",
        );
        for ((name, result, dir), n) in &self.calls {
            let dir = match *dir {
                NONE => DIR_NONE,
                OTHER => DIR_OTHER,
                i => &self.dir_labels[i as usize],
            };
            e.sample(
                "statstorm_syscalls_total",
                &[("syscall", name), ("result", result), ("dir", dir)],
                *n as f64,
            );
        }
        e.family(
            "statstorm_syscall_seconds_total",
            Kind::Counter,
            "Time the followed processes spent in those syscalls, entry to exit.",
        );
        for (name, s) in &self.seconds {
            e.sample("statstorm_syscall_seconds_total", &[("syscall", name)], *s);
        }
        e.family(
            "statstorm_realpath_lstat_calls_total",
            Kind::Counter,
            "lstat-like calls (lstat, newfstatat or statx with AT_SYMLINK_NOFOLLOW): the steps of PHP's realpath walks when its realpath cache misses.",
        );
        e.sample(
            "statstorm_realpath_lstat_calls_total",
            &[],
            self.lstat_calls as f64,
        );
        e.family(
            "statstorm_php_file_stats_total",
            Kind::Counter,
            "Successful stat calls on .php files: OPcache's timestamp validations and include lookups; revalidation bursts show in its rate.",
        );
        e.sample("statstorm_php_file_stats_total", &[], self.php_stats as f64);
        e.family(
            "statstorm_request_calls",
            Kind::Histogram,
            "Calls per request (from an accept's return to the worker's next accept) of each class: stat (stat, lstat, newfstatat, statx), open (open, openat, openat2), access (access, faccessat, faccessat2).",
        );
        for (c, class) in REQ_CLASSES.iter().enumerate() {
            let buckets: Vec<(f64, u64)> = (0..REQ_BUCKETS)
                .map(|b| {
                    (
                        RequestHistograms::upper_bound(b).map_or(f64::INFINITY, |u| u as f64),
                        self.requests.buckets[c][b],
                    )
                })
                .collect();
            e.histogram(
                "statstorm_request_calls",
                &[("class", class)],
                &buckets,
                self.requests.sums[c] as f64,
            );
        }
        if let Some(ms) = nfs {
            nfs_families(&mut e, ms);
        }
        e.family(
            "statstorm_exporter_windows_total",
            Kind::Counter,
            "Windows of counts drained from the kernel.",
        );
        e.sample("statstorm_exporter_windows_total", &[], self.windows as f64);
        e.family(
            "statstorm_exporter_lost_calls_total",
            Kind::Counter,
            "Calls the recording could not count (their in-flight slot was taken by another thread).",
        );
        e.sample("statstorm_exporter_lost_calls_total", &[], self.lost as f64);
        e.family(
            "statstorm_exporter_map_full_calls_total",
            Kind::Counter,
            "Calls counted without path or result because the kernel's map of keys was full (in statstorm_syscalls_total with result unknown).",
        );
        e.sample(
            "statstorm_exporter_map_full_calls_total",
            &[],
            self.map_full as f64,
        );
        e.family(
            "statstorm_exporter_dir_labels",
            Kind::Gauge,
            "Distinct dir label values given, and their cap (max).",
        );
        e.sample(
            "statstorm_exporter_dir_labels",
            &[("of", "given")],
            self.dir_labels.len() as f64,
        );
        e.sample(
            "statstorm_exporter_dir_labels",
            &[("of", "max")],
            self.max_dirs as f64,
        );
        e.family(
            "process_cpu_seconds_total",
            Kind::Counter,
            "CPU time of the exporter process (user and system).",
        );
        e.sample("process_cpu_seconds_total", &[], own.cpu_seconds);
        e.family(
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory of the exporter process.",
        );
        e.sample(
            "process_resident_memory_bytes",
            &[],
            own.resident_bytes as f64,
        );
        e.finish()
    }
}

/// The NFS client's per-operation counts of every NFS mount.
fn nfs_families(e: &mut Exposition, ms: &MountStats) {
    type Get = fn(&statstorm_nfs::mountstats::OpStats) -> f64;
    let families: [(&str, &str, Get); 6] = [
        (
            "statstorm_nfs_rpc_total",
            "RPCs the NFS client sent, by mount and operation (/proc/self/mountstats).",
            |o| o.ops as f64,
        ),
        (
            "statstorm_nfs_rpc_retransmissions_total",
            "RPC transmissions beyond the first (the server or the network too slow).",
            |o| o.transmissions.saturating_sub(o.ops) as f64,
        ),
        (
            "statstorm_nfs_rpc_timeouts_total",
            "RPCs that timed out.",
            |o| o.timeouts as f64,
        ),
        (
            "statstorm_nfs_rpc_queue_seconds_total",
            "Time RPCs waited in the client before transmission (RPC slots, the transport).",
            |o| o.queue_ms as f64 / 1000.0,
        ),
        (
            "statstorm_nfs_rpc_rtt_seconds_total",
            "Time from transmission to reply (network and server).",
            |o| o.rtt_ms as f64 / 1000.0,
        ),
        (
            "statstorm_nfs_rpc_execute_seconds_total",
            "Time from queueing to completion.",
            |o| o.execute_ms as f64 / 1000.0,
        ),
    ];
    for (name, help, get) in families {
        e.family(name, Kind::Counter, help);
        for m in ms.mounts.iter().filter(|m| m.fstype.starts_with("nfs")) {
            for (op, s) in &m.ops {
                e.sample(name, &[("mountpoint", &m.mountpoint), ("op", op)], get(s));
            }
        }
    }
    transport_families(e, ms);
}

/// Each NFS mount's RPC transports (`xprt:` lines; several with
/// `nconnect`), labelled by mount and position: the sums the kernel adds
/// at each send (net/sunrpc/xprt.c `xprt_request_transmit`), so that
/// `rate(backlog) / rate(sends)` is the mean number of RPCs waiting for a
/// slot when one was sent.
fn transport_families(e: &mut Exposition, ms: &MountStats) {
    type Get = fn(&statstorm_nfs::mountstats::Transport) -> Option<f64>;
    let families: [(&str, Kind, &str, Get); 4] = [
        (
            "statstorm_nfs_xprt_sends_total",
            Kind::Counter,
            "RPC transmissions on each transport of an NFS mount (/proc/self/mountstats xprt).",
            |t| Some(t.sends as f64),
        ),
        (
            "statstorm_nfs_xprt_in_flight_total",
            Kind::Counter,
            "Sum over transmissions of the RPCs then on the wire (divide by the sends for the mean).",
            |t| Some(t.req_u as f64),
        ),
        (
            "statstorm_nfs_xprt_backlog_total",
            Kind::Counter,
            "Sum over transmissions of the RPCs then waiting for a slot (divide by the sends for the mean).",
            |t| Some(t.bklog_u as f64),
        ),
        (
            "statstorm_nfs_xprt_max_slots",
            Kind::Gauge,
            "The most slots in use at once since the transport was made.",
            |t| t.max_slots.map(|n| n as f64),
        ),
    ];
    let nfs: Vec<_> = ms
        .mounts
        .iter()
        .filter(|m| m.fstype.starts_with("nfs") && !m.transports.is_empty())
        .collect();
    if nfs.is_empty() {
        return;
    }
    for (name, kind, help, get) in families {
        e.family(name, kind, help);
        for m in &nfs {
            for (i, t) in m.transports.iter().enumerate() {
                if let Some(v) = get(t) {
                    let i = i.to_string();
                    e.sample(
                        name,
                        &[
                            ("mountpoint", &m.mountpoint),
                            ("transport", &i),
                            ("proto", &t.proto),
                        ],
                        v,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use statstorm_record::counts::Row;

    fn row(
        pid: Option<u32>,
        s: Syscall,
        errno: Option<i32>,
        path: Option<&str>,
        calls: u64,
    ) -> Row {
        Row {
            pid,
            syscall: s,
            errno,
            path: path.map(|p| p.as_bytes().to_vec()),
            cut: false,
            nofollow: false,
            calls,
            dur_ns: calls * 1000,
        }
    }

    fn window(rows: Vec<Row>) -> Window {
        Window {
            start_ns: 0,
            end_ns: 1,
            rows,
            requests: RequestHistograms::default(),
            lost_calls: 0,
        }
    }

    #[test]
    fn dirs_beyond_the_cap_go_to_other_and_labels_are_kept() {
        let mut m = Metrics::new(2);
        m.fold(&window(vec![
            row(Some(1), Syscall::Newfstatat, Some(0), Some("/a/x.php"), 3),
            row(Some(1), Syscall::Newfstatat, Some(2), Some("/b/y"), 1),
            row(Some(2), Syscall::Newfstatat, Some(0), Some("/c/z"), 5),
            row(Some(2), Syscall::Fstat, Some(0), None, 7),
            row(None, Syscall::Newfstatat, None, None, 4),
            Row {
                nofollow: true,
                ..row(Some(1), Syscall::Newfstatat, Some(0), Some("/a"), 2)
            },
        ]));
        let mut w = window(vec![row(
            Some(3),
            Syscall::Openat,
            Some(0),
            Some("/c/z"),
            1,
        )]);
        w.lost_calls = 5;
        m.fold(&w);
        assert_eq!(m.dir_labels(), 2);
        let t = m.render(None, &SelfStats::default());
        for line in [
            "statstorm_syscalls_total{syscall=\"newfstatat\",result=\"ok\",dir=\"/a\"} 3",
            "statstorm_syscalls_total{syscall=\"newfstatat\",result=\"ENOENT\",dir=\"/b\"} 1",
            // /c/z's 5 and /a's lstat (directory /): a third and fourth
            // directory, beyond the cap of 2
            "statstorm_syscalls_total{syscall=\"newfstatat\",result=\"ok\",dir=\"(other)\"} 7",
            "statstorm_syscalls_total{syscall=\"fstat\",result=\"ok\",dir=\"(none)\"} 7",
            "statstorm_syscalls_total{syscall=\"newfstatat\",result=\"unknown\",dir=\"(none)\"} 4",
            "statstorm_syscalls_total{syscall=\"openat\",result=\"ok\",dir=\"(other)\"} 1",
            "statstorm_realpath_lstat_calls_total 2",
            "statstorm_php_file_stats_total 3",
            "statstorm_exporter_map_full_calls_total 4",
            "statstorm_exporter_lost_calls_total 5",
            "statstorm_exporter_windows_total 2",
            "statstorm_syscall_seconds_total{syscall=\"newfstatat\"} 0.000015",
        ] {
            assert!(t.lines().any(|l| l == line), "{line} missing from\n{t}");
        }
    }
}
