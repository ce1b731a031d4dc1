//! The PHP-level operations of a trace (`statstorm.workload/1`).

use serde::{Deserialize, Serialize};
use statstorm_trace::op::{Name, Op};

pub const WORKLOAD_SCHEMA: &str = "statstorm.workload/1";

/// How a script was compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The entry script (php-fpm SCRIPT_FILENAME, php-cli argument).
    Main,
    /// include/require.
    Include,
    /// include_once/require_once.
    Once,
}

/// One PHP-level operation. Paths are absolute as PHP passed them, shared
/// with the calls they were lifted from ([`Name`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PhpOpKind {
    /// A script compiled by include/require (or the entry script): its
    /// resolution (`resolves` calls of `tsrm_realpath`, R49/R52/R53), the
    /// failed include_path candidates before it (`probes`, R50), then
    /// `open`, `fstat` x`fstats`, `read` x`reads`, `close` (R51).
    Compile {
        path: Name,
        /// The name resolved when it differs from the opened path
        /// (`/w/./rel/x.php` for `include './rel/x.php'`): the realpath
        /// cache key (R54).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolve_as: Option<Name>,
        /// (A boxed slice, not a `Vec`: 8 bytes less in every operation,
        /// this being the largest kind.)
        #[serde(default, skip_serializing_if = "<[Name]>::is_empty")]
        probes: Box<[Name]>,
        /// How the script was reached (changes the OPcache-on and
        /// realpath-cache-off costs).
        via: Via,
        /// Resolutions seen before the open (the entry script's count is
        /// used as is; includes use 1, *_once 2: R52, measured).
        resolves: u32,
        fstats: u32,
        reads: u32,
        /// The open of the entry script stays open until the request ends.
        #[serde(default)]
        keep_open: bool,
    },
    /// OPcache timestamp validation of a cached script (R64): resolution
    /// then `stat`.
    Revalidate { path: Name, resolves: u32 },
    /// A use of a script OPcache already held, seen only through its
    /// permission check (`opcache.validate_permission`, R68: `access(R_OK)`)
    /// with no validation `stat` due: lowered like [`PhpOpKind::Revalidate`]
    /// without a resolution (the check, then a validation when due).
    CachedUse { path: Name },
    /// include_once/require_once of a script already included in the
    /// request (R52): resolution only (+ failed include_path candidates).
    OnceRepeat {
        path: Name,
        #[serde(default, skip_serializing_if = "<[Name]>::is_empty")]
        probes: Box<[Name]>,
        resolves: u32,
    },
    /// php-fpm resolving SCRIPT_FILENAME before anything else (cgi_main).
    PrimaryResolve { path: Name },
    /// A realpath resolution not tied to an include (realpath(), fopen's
    /// expand_filepath, ...).
    Resolve {
        path: Name,
        /// A single lstat whose parent this worker never walked (a
        /// resolution only if the parent was cached under another name).
        #[serde(default)]
        lone: bool,
    },
    /// An open_basedir check with no call of its own after it: glob()
    /// checks each match (ext/standard/dir.c, `php_check_open_basedir_ex`
    /// per result; R59). Costs nothing without open_basedir.
    BasedirCheck { path: Name },
    /// A failed resolution (lstat ENOENT, nothing cached: R50/R54).
    Probe { path: Name },
    /// lstat()/is_link()/filetype() and directory iterators (R72): `lstat`.
    Lstat { path: Name },
    /// php-fpm's per-directory user ini lookup (`.user.ini`), cached per
    /// worker for `user_ini.cache_ttl` (sapi/fpm `php_cgi_ini_activate_user_config`).
    UserIni { path: Name },
    /// file_exists/is_readable/is_writable... (R71): `access()`.
    Access {
        path: Name,
        mode: u32,
        /// The file did not exist (ENOENT).
        #[serde(default)]
        missing: bool,
    },
    /// is_file/filesize/filemtime... (R72) after a stat-cache miss: `stat()`.
    Stat {
        path: Name,
        #[serde(default)]
        missing: bool,
    },
    /// fopen/file_get_contents of a data file (R74): open_basedir check,
    /// one resolution of the path, the `open`.
    Open {
        path: Name,
        /// The name resolved when it differs from the opened path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolve_as: Option<Name>,
        /// 1: resolved through the realpath cache first (plain-wrapper
        /// fopen); 0: an open PHP does not resolve (opendir, libraries).
        #[serde(default)]
        resolves: u32,
        flags: u32,
    },
    /// unlink/rename/rmdir: clear the worker's realpath cache (R57).
    Write { op: Box<Op> },
    /// OPcache starting in a php-cli process (measured; not in
    /// SEMANTICS.md: docs/php-model.md "CLI OPcache startup"): its lock file, created
    /// with a random name in `lock_dir` (`opcache.lockfile_path`), made
    /// close-on-exec and unlinked at once (`openat(O_RDWR|O_CREAT|O_EXCL)`,
    /// `unlink`; php-src ext/opcache/zend_shared_alloc.c
    /// `zend_shared_alloc_create_lock`, called from `accel_startup`); its
    /// fd stays open for the `fcntl` locks around cache updates and is
    /// closed at shutdown (`zend_shared_alloc_shutdown`; the lower emits
    /// that `close` after the request's last call). php-fpm does this once
    /// in the master, outside any request.
    OpcacheStartup { lock_dir: String },
    /// A filesystem call the model does not derive from PHP settings; it
    /// is replayed as recorded.
    Raw { op: Box<Op> },
}

impl PhpOpKind {
    /// (tag, path) used to match a request's operations against another's.
    pub fn key(&self) -> (&'static str, &str) {
        match self {
            PhpOpKind::Compile { path, .. } => ("script", path),
            PhpOpKind::Revalidate { path, .. } => ("script", path),
            PhpOpKind::CachedUse { path } => ("script", path),
            PhpOpKind::OnceRepeat { probes, .. } if !probes.is_empty() => ("probe", &probes[0]),
            PhpOpKind::OnceRepeat { path, .. } => ("once", path),
            PhpOpKind::PrimaryResolve { path } => ("primary", path),
            PhpOpKind::Resolve { path, .. } => ("resolve", path),
            PhpOpKind::BasedirCheck { path } => ("basedir_check", path),
            PhpOpKind::Probe { path } => ("probe", path),
            PhpOpKind::UserIni { path } => ("user_ini", path),
            PhpOpKind::Access { path, .. } => ("access", path),
            PhpOpKind::Stat { path, .. } => ("stat", path),
            PhpOpKind::Lstat { path } => ("lstat", path),
            PhpOpKind::Open { path, .. } => ("open", path),
            PhpOpKind::Write { op } => ("write", &op.path),
            PhpOpKind::OpcacheStartup { lock_dir } => ("opcache_startup", lock_dir),
            PhpOpKind::Raw { op } => ("raw", &op.path),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhpOp {
    /// Offset from the request start, microseconds.
    pub t_off_us: i64,
    /// A validation's stat as the capture timed it (`-T`, µs): its
    /// OPcache stamp is renewed when the call returns, and another worker
    /// that looks before then validates the script too (R64's race). Under
    /// strace two workers validating the same script 20-70 µs apart both
    /// stat it while the first one's call takes 25-80 µs, longer than the
    /// capture's median for the kind (measured, fpm-racefast-rf2). 32
    /// bits hold 71 minutes; a longer call is kept as that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat_us: Option<u32>,
    #[serde(flatten)]
    pub kind: PhpOpKind,
}

/// The PHP operations of one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkRequest {
    /// The worker (php-fpm) or process (php-cli) that ran it.
    pub pid: u32,
    /// Start, microseconds since the epoch (the trace's clock).
    pub start_us: i64,
    pub end_us: i64,
    /// PHP's request_time (R64), microseconds: the first filesystem call
    /// of the request (the FastCGI params are read between the accept and
    /// php_request_startup, measured up to ~20 ms under load).
    #[serde(default)]
    pub request_time_us: i64,
    /// A php-cli process: its own OPcache and realpath cache.
    pub cli: bool,
    /// The entry script, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// True when the operations come from a richer request of the same
    /// script because caches hid them in this one (see `lift`).
    #[serde(default)]
    pub from_template: bool,
    /// A php-cli process's settings stated on its command line (`php -d
    /// KEY=VALUE`): the lowering applies them over the side's settings,
    /// which a php.ini change does not reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<crate::request::CliSettings>,
    pub ops: Vec<PhpOp>,
}

impl WorkRequest {
    /// The paths of the scripts this request compiles, in order.
    pub fn compiled(&self) -> impl Iterator<Item = &str> {
        self.ops.iter().filter_map(|o| match &o.kind {
            PhpOpKind::Compile { path, .. } => Some(path.as_ref()),
            _ => None,
        })
    }
}

/// What the trace says about the settings it was recorded under.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// One sentence per finding.
    pub notes: Vec<String>,
    /// Settings inferred (key, value), usable as `--from-php` flags.
    pub inferred: Vec<(String, String)>,
    /// Every include and resolution of the requests was visible (OPcache
    /// and the realpath cache both off, or no include besides the entry
    /// script): predictions under any settings start from full
    /// information. Otherwise caches hid some include_once repeats and the
    /// include vs include_once distinction (see docs/php-model.md).
    #[serde(default)]
    pub complete: bool,
    /// Walks repeated while others stopped at a cached directory: the
    /// realpath cache was on but too small to keep every path (the lift
    /// then infers its size; not part of the JSON).
    #[serde(skip)]
    pub realpath_partial: bool,
    /// Walks repeated and none stopped at a cached directory: no realpath
    /// cache hits at all (the lift then tries `realpath_cache_size=0`
    /// among its candidates unless open_basedir explains it; not part of
    /// the JSON).
    #[serde(skip)]
    pub realpath_no_hits: bool,
    /// Some scripts compiled in every request while the others were
    /// cached: OPcache's hash table was full (the lift then infers
    /// `opcache.max_accelerated_files`; not part of the JSON).
    #[serde(skip)]
    pub opcache_hash_full: bool,
    /// Nearly every script used by several requests was compiled again:
    /// OPcache off (what the script facts read the validations by; not
    /// part of the JSON).
    #[serde(skip)]
    pub scripts_recompiled: bool,
    /// OPcache validated timestamps and one script was validated again
    /// after this many whole seconds at the least (the lift then checks
    /// `opcache.revalidate_freq` by trial lowerings; not part of the JSON).
    #[serde(skip)]
    pub revalidated_after_s: Option<i64>,
    /// Keys every request's command line states alike (`php -d`): the
    /// capture's, which no trial search replaces (not part of the JSON).
    #[serde(skip)]
    pub stated: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub schema: String,
    /// The requests, in the split's time order; empty when they are
    /// stored ([`Stored`]: [`Workload::len`], [`Workload::meta`] and
    /// [`Workload::request`] read both kinds).
    pub requests: Vec<WorkRequest>,
    pub evidence: Evidence,
    /// Symlinks seen in realpath walks: link -> the path its walk went on
    /// with (R53).
    #[serde(default)]
    pub links: std::collections::BTreeMap<String, String>,
    /// Scripts' modification times seen in the trace (only with `strace
    /// -v`): script -> (time of the stat, µs, or for a changed mtime the
    /// time of the change when the stat's ctime gave it; mtime, epoch
    /// seconds), in time order. OPcache does not cache a script modified less than
    /// `file_update_protection` seconds before the request (R65).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mtimes: std::collections::BTreeMap<String, Vec<(i64, i64)>>,
    /// OPcache's file cache as the trace showed it (R67; its calls are not
    /// in `requests`: the lower derives them from the settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_cache: Option<FileCacheSeen>,
    /// How long each kind of call took in the requests (the median of
    /// its `-T` durations, µs; empty without `-T`). The lower ends each
    /// OPcache store (a compile, a validation's new stamp) after its
    /// operation's calls, so a slow `stat` lets other workers find the
    /// same script uncached or expired meanwhile (R64's race).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub latency_us: std::collections::BTreeMap<statstorm_trace::op::OpKind, u64>,
    /// How long OPcache's shared-memory lock takes to take and release
    /// (µs; 0 without `-T`): [`lock_latency`]. A `*_once` name's key is
    /// added under it after the name's resolution (R63 in a race).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lock_us: u64,
    /// Where the requests' operations are when not in `requests` (a
    /// capture larger than memory: [`Workload::request`]).
    #[serde(skip)]
    pub stored: Stored,
}

/// Lifted requests kept outside memory (in a temporary file, by the
/// caller of the lift), written once and read back one at a time.
pub trait RequestStore: Send + Sync {
    /// Appends a request; its index is the number pushed before it.
    fn push(&mut self, r: &WorkRequest) -> std::io::Result<()>;
    /// Request `i` as pushed.
    fn get(&self, i: usize) -> std::io::Result<WorkRequest>;
    /// Request `i` as pushed, without its operations (what a pass over
    /// the requests' times and scripts reads).
    fn meta(&self, i: usize) -> std::io::Result<WorkRequest> {
        let mut r = self.get(i)?;
        r.ops = Vec::new();
        Ok(r)
    }
    /// Request `i`'s start and end, µs (what the latency simulation reads
    /// of every request).
    fn times(&self, i: usize) -> std::io::Result<(i64, i64)> {
        self.meta(i).map(|r| (r.start_us, r.end_us))
    }
    /// Requests pushed.
    fn len(&self) -> usize;
    /// No request pushed.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A [`RequestStore`] in memory (what tests compare a store with).
#[derive(Default)]
pub struct MemoryStore(pub Vec<WorkRequest>);

impl RequestStore for MemoryStore {
    fn push(&mut self, r: &WorkRequest) -> std::io::Result<()> {
        self.0.push(r.clone());
        Ok(())
    }
    fn get(&self, i: usize) -> std::io::Result<WorkRequest> {
        self.0
            .get(i)
            .cloned()
            .ok_or_else(|| std::io::Error::other(format!("no request {i} stored")))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A workload's requests in a [`RequestStore`]: the workload's
/// `requests` are then empty (a capture of millions of requests holds
/// none of them in memory); [`Workload::len`] counts them,
/// [`Workload::meta`] reads one back without its operations and
/// [`Workload::request`] with them. With what was folded as the store
/// was written: every script compiled (as [`Workload::compiled_scripts`]
/// gives them) and which kinds of process ran requests.
#[derive(Clone, Default)]
pub struct Stored(pub Option<StoredParts>);

/// See [`Stored`].
#[derive(Clone)]
pub struct StoredParts {
    pub store: std::sync::Arc<dyn RequestStore>,
    pub compiled: std::collections::BTreeSet<String>,
    /// Some request is a php-cli process's.
    pub cli: bool,
    /// Some request is not (a pool's worker's).
    pub fpm: bool,
    /// Per php-fpm worker (pid), its last request by start (then index).
    pub last_of_worker: std::collections::HashMap<u32, usize>,
    /// The requests' starts never go back in index order
    /// ([`Workload::start_order`] is then the index order).
    pub in_order: bool,
    /// Requests modelled with a template's operations.
    pub templated: usize,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => write!(f, "in memory"),
            Some(p) => write!(f, "stored ({} requests)", p.store.len()),
        }
    }
}

/// Where the operations are does not make two workloads differ.
impl PartialEq for Stored {
    fn eq(&self, _: &Stored) -> bool {
        true
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// OPcache's lock around a change of its hash table is two `fcntl` calls
/// on its semaphore file (ZendAccelerator.c persistent_zend_resolve_path:
/// `zend_shared_alloc_lock()`, `zend_accel_add_key`,
/// `zend_shared_alloc_unlock()`; zend_shared_alloc.c: `F_SETLKW`, then
/// `F_SETLK` with `F_UNLCK`, seen in every capture). Each costs its
/// median `-T` plus what separates a call's end from the worker's next
/// call (under strace, its stops: the median over the requests' workers).
pub fn lock_latency(trace: &statstorm_trace::Trace, requests: &crate::request::Requests) -> u64 {
    let mut l = LockTimes::default();
    for e in &trace.events {
        l.push(e);
    }
    l.latency(&requests.requests.iter().map(|r| r.pid).collect())
}

/// What [`lock_latency`] reads of the events, folded one by one (in the
/// trace's order) per process: the gaps between a call's end and the
/// process's next call, and the `fcntl` durations, each as counts per
/// value (bounded by the distinct values, not by the events).
#[derive(Clone, Debug, Default)]
pub struct LockTimes {
    // folded per event: the trace crate's fast hash (the values are
    // summed into sorted maps, so no order depends on it)
    per_pid: statstorm_trace::event::FastMap<u32, PidTimes>,
}

#[derive(Clone, Debug, Default)]
struct PidTimes {
    prev_end: Option<i64>,
    gaps: statstorm_trace::event::FastMap<u64, u64>,
    locks: statstorm_trace::event::FastMap<u64, u64>,
}

impl LockTimes {
    /// Folds one event.
    pub fn push(&mut self, e: &statstorm_trace::Event) {
        let (Some(ts), Some(d)) = (e.ts_us, e.dur_us) else {
            return;
        };
        let p = self.per_pid.entry(e.pid).or_default();
        if let Some(end) = p.prev_end.replace(ts + d as i64) {
            if ts >= end {
                *p.gaps.entry((ts - end) as u64).or_default() += 1;
            }
        }
        if e.kind == statstorm_trace::Kind::Fcntl {
            *p.locks.entry(d).or_default() += 1;
        }
    }

    /// [`lock_latency`] over the processes `pids` (the requests' workers).
    pub fn latency(&self, pids: &std::collections::HashSet<u32>) -> u64 {
        let mut gaps: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        let mut locks: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        for (pid, t) in &self.per_pid {
            if !pids.contains(pid) {
                continue;
            }
            for (&v, &n) in &t.gaps {
                *gaps.entry(v).or_default() += n;
            }
            for (&v, &n) in &t.locks {
                *locks.entry(v).or_default() += n;
            }
        }
        // the value at index len/2 of the sorted values
        let median = |m: &std::collections::BTreeMap<u64, u64>| {
            let mid = m.values().sum::<u64>() / 2;
            let mut seen = 0;
            m.iter().find_map(|(&v, &n)| {
                seen += n;
                (seen > mid).then_some(v)
            })
        };
        match (median(&locks), median(&gaps)) {
            (Some(l), Some(g)) => 2 * (l + g),
            _ => 0,
        }
    }
}

/// OPcache's file cache seen in a trace (R67): its directory, the system
/// id in its paths, and the scripts whose `.bin` was there at their first
/// use (the others were stored during the trace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileCacheSeen {
    pub dir: String,
    pub system_id: String,
    pub present: std::collections::BTreeSet<String>,
}

/// The median `-T` duration of each kind of call in `ops` (kinds without
/// a duration left out): [`Workload::latency_us`].
pub fn call_latencies<'a>(
    ops: impl IntoIterator<Item = &'a Op>,
) -> std::collections::BTreeMap<statstorm_trace::op::OpKind, u64> {
    let mut l = Latencies::default();
    for o in ops {
        l.push(o);
    }
    l.medians()
}

/// [`call_latencies`] folded call by call: per kind, how many calls took
/// each duration (bounded by the distinct durations, not by the calls).
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    by: std::collections::BTreeMap<
        statstorm_trace::op::OpKind,
        statstorm_trace::event::FastMap<u64, u64>,
    >,
}

impl Latencies {
    pub fn push(&mut self, o: &Op) {
        if let Some(d) = o.dur_us {
            *self.by.entry(o.kind).or_default().entry(d).or_default() += 1;
        }
    }

    /// Takes back a call [`Latencies::push`] counted (what is left is
    /// what the other calls pushed alone give).
    pub fn remove(&mut self, o: &Op) {
        let Some(d) = o.dur_us else {
            return;
        };
        let Some(by_d) = self.by.get_mut(&o.kind) else {
            return;
        };
        if let Some(n) = by_d.get_mut(&d) {
            *n -= 1;
            if *n == 0 {
                by_d.remove(&d);
            }
        }
        if by_d.is_empty() {
            self.by.remove(&o.kind);
        }
    }

    /// Per kind, the duration at index len/2 of the sorted durations.
    pub fn medians(&self) -> std::collections::BTreeMap<statstorm_trace::op::OpKind, u64> {
        self.by
            .iter()
            .filter_map(|(&k, counts)| {
                let mut v: Vec<(u64, u64)> = counts.iter().map(|(&d, &n)| (d, n)).collect();
                v.sort_unstable();
                let mid = v.iter().map(|&(_, n)| n).sum::<u64>() / 2;
                let mut seen = 0;
                v.into_iter().find_map(|(d, n)| {
                    seen += n;
                    (seen > mid).then_some((k, d))
                })
            })
            .collect()
    }
}

impl Workload {
    /// A workload of `requests` in memory and nothing else known (no
    /// evidence, links, times of calls): hand-made workloads and tests.
    pub fn of_requests(requests: Vec<WorkRequest>) -> Workload {
        Workload {
            schema: WORKLOAD_SCHEMA.into(),
            requests,
            evidence: Default::default(),
            links: Default::default(),
            mtimes: Default::default(),
            file_cache: None,
            latency_us: Default::default(),
            lock_us: 0,
            stored: Default::default(),
        }
    }

    /// Number of requests (in `requests`, or in the store: [`Stored`]).
    pub fn len(&self) -> usize {
        match &self.stored.0 {
            None => self.requests.len(),
            Some(p) => p.store.len(),
        }
    }

    /// Some request is a php-cli process's.
    pub fn has_cli(&self) -> bool {
        match &self.stored.0 {
            None => self.requests.iter().any(|r| r.cli),
            Some(p) => p.cli,
        }
    }

    /// Some request is not a php-cli process's (a pool's worker's).
    pub fn has_fpm(&self) -> bool {
        match &self.stored.0 {
            None => self.requests.iter().any(|r| !r.cli),
            Some(p) => p.fpm,
        }
    }

    /// No request.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Request `i`, its operations left out when it is stored: borrowed
    /// from `requests`, or read back from the store ([`Stored`]).
    pub fn meta(&self, i: usize) -> std::io::Result<std::borrow::Cow<'_, WorkRequest>> {
        match &self.stored.0 {
            None => self.request(i),
            Some(p) => p.store.meta(i).map(std::borrow::Cow::Owned),
        }
    }

    /// Request `i`'s start and end, µs.
    pub fn times(&self, i: usize) -> std::io::Result<(i64, i64)> {
        match &self.stored.0 {
            None => self
                .requests
                .get(i)
                .map(|r| (r.start_us, r.end_us))
                .ok_or_else(|| std::io::Error::other(format!("no request {i} in the workload"))),
            Some(p) => p.store.times(i),
        }
    }

    /// Calls `f` with each request's start and end (µs), in index order.
    pub fn each_time(&self, f: &mut dyn FnMut(usize, i64, i64)) -> std::io::Result<()> {
        match &self.stored.0 {
            None => {
                for (i, r) in self.requests.iter().enumerate() {
                    f(i, r.start_us, r.end_us);
                }
            }
            Some(p) => {
                for i in 0..p.store.len() {
                    let (s, e) = p.store.times(i)?;
                    f(i, s, e);
                }
            }
        }
        Ok(())
    }

    /// Requests modelled with a template's operations (`from_template`).
    pub fn templated(&self) -> usize {
        match &self.stored.0 {
            None => self.requests.iter().filter(|r| r.from_template).count(),
            Some(p) => p.templated,
        }
    }

    /// Calls `f` with each request as [`Workload::meta`] gives it, in
    /// index order.
    pub fn each_meta(&self, f: &mut dyn FnMut(usize, &WorkRequest)) -> std::io::Result<()> {
        for i in 0..self.len() {
            f(i, &*self.meta(i)?);
        }
        Ok(())
    }

    /// Whether the requests' index order is their order of start (the
    /// lift takes the requests in the split's time order, so it nearly
    /// always is; not when the lift moved a start).
    pub fn in_start_order(&self) -> std::io::Result<bool> {
        if self.stored.0.as_ref().is_some_and(|p| p.in_order) {
            return Ok(true);
        }
        let mut sorted = true;
        let mut last = i64::MIN;
        self.each_time(&mut |_, s, _| {
            sorted &= s >= last;
            last = s;
        })?;
        Ok(sorted)
    }

    /// The requests' indices in order of start, then index: `None` when
    /// that is their index order ([`Workload::in_start_order`]), else the
    /// order, listed (a caller that must not hold a list per request
    /// sorts them on disk).
    pub fn start_order(&self) -> std::io::Result<Option<Vec<usize>>> {
        if self.in_start_order()? {
            return Ok(None);
        }
        let mut starts = Vec::with_capacity(self.len());
        self.each_time(&mut |i, s, _| starts.push((s, i)))?;
        starts.sort_unstable();
        Ok(Some(starts.into_iter().map(|(_, i)| i).collect()))
    }

    /// Request `i` with its operations: borrowed from `requests`, or read
    /// back from the store ([`Stored`]).
    pub fn request(&self, i: usize) -> std::io::Result<std::borrow::Cow<'_, WorkRequest>> {
        match &self.stored.0 {
            None => self
                .requests
                .get(i)
                .map(std::borrow::Cow::Borrowed)
                .ok_or_else(|| std::io::Error::other(format!("no request {i} in the workload"))),
            Some(p) => p.store.get(i).map(std::borrow::Cow::Owned),
        }
    }

    /// Calls `f` with each request and its operations, in index order
    /// (read back one at a time when stored).
    pub fn each_request(&self, f: &mut dyn FnMut(usize, &WorkRequest)) -> std::io::Result<()> {
        for i in 0..self.len() {
            f(i, &*self.request(i)?);
        }
        Ok(())
    }

    /// The same workload with every request's operations in memory.
    pub fn loaded(&self) -> std::io::Result<Workload> {
        let mut w = self.first(self.len())?;
        w.stored = Stored::default();
        Ok(w)
    }

    /// Every script some request compiles (what OPcache's file cache may
    /// hold, [`crate::lower::file_cache_of`]).
    pub fn compiled_scripts(&self) -> std::collections::BTreeSet<String> {
        if let Some(p) = &self.stored.0 {
            return p.compiled.clone();
        }
        self.requests
            .iter()
            .flat_map(|r| r.compiled())
            .map(str::to_string)
            .collect()
    }

    /// A copy holding only the first `n` requests (everything else
    /// whole), without copying the others; in memory.
    pub fn first(&self, n: usize) -> std::io::Result<Workload> {
        let requests = (0..n.min(self.len()))
            .map(|i| self.request(i).map(std::borrow::Cow::into_owned))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Workload {
            schema: self.schema.clone(),
            requests,
            evidence: self.evidence.clone(),
            links: self.links.clone(),
            mtimes: self.mtimes.clone(),
            file_cache: self.file_cache.clone(),
            latency_us: self.latency_us.clone(),
            lock_us: self.lock_us,
            stored: Stored::default(),
        })
    }

    /// The mtime of `script` as of time `t_us`: the last one seen at or
    /// before it, else the first one seen (the file as it was before the
    /// capture showed it).
    pub fn mtime_at(&self, script: &str, t_us: i64) -> Option<i64> {
        let obs = self.mtimes.get(script)?;
        obs.iter()
            .take_while(|(t, _)| *t <= t_us)
            .last()
            .or(obs.first())
            .map(|&(_, m)| m)
    }
}

/// How a capture was completed from a reference capture
/// ([`crate::lift_with_reference`]): a short capture of the same
/// application with OPcache and the realpath cache off, whose requests show
/// every include, its kind and every `*_once` repeat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceUse {
    /// Requests in the reference capture (none of them is lowered: they
    /// are not part of the predicted load).
    pub requests: usize,
    /// The reference showed every include and resolution
    /// (`evidence.complete`, or stated settings with both caches off).
    pub complete: bool,
    /// Indices of the capture's requests that took their PHP operations
    /// from a reference request of the same script.
    pub completed: Vec<usize>,
    /// Indices of requests whose script has reference requests, but which
    /// made operations none of them showed: left as lifted.
    pub unmatched: Vec<usize>,
    /// Indices of requests whose script no reference request ran: left as
    /// lifted.
    pub no_reference: Vec<usize>,
    /// The capture showed every include and resolution itself: lifted
    /// without the reference.
    #[serde(default)]
    pub capture_complete: bool,
}
