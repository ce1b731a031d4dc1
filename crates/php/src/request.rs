//! Request splitting: which events of a trace belong to which PHP request.
//!
//! Rules (one place; checked against real php-fpm 8.2 and php-cli 8.2 under
//! `strace -f -ttt -T -y`, see `scripts/gen-fixtures`):
//!
//! - **php-fpm worker.** A worker blocks in `accept(listen_fd, ...)` and the
//!   call returns the connection fd (`= 4<socket:[20845]>`) when a request
//!   arrives (php-src `sapi/fpm/fpm/fpm_main.c` `main` loop ->
//!   `fcgi_accept_request` in `main/fastcgi.c`). The next syscalls are
//!   `poll` on that fd and `read(4, "\1\1\0\1\0\10\0\0", 8) = 8`, the 8-byte
//!   FastCGI header of `FCGI_BEGIN_REQUEST` (`fcgi_read_request`). A request
//!   therefore begins at an `accept`/`accept4` that returns an fd; when the
//!   accept is not in the trace (`-e trace=` subset, or attached mid-call) it
//!   begins at the first `read`/`recvfrom` returning 8 bytes on an fd that is
//!   not a file, not stdio and not created in the process by `open`,
//!   `socket`, `dup`, ... (the header read). Strace's merged `accept` event
//!   is timed at the start of the (idle) wait, so the request's `start_us` is
//!   the accept's return time (`ts + dur` with `-T`). A request ends at the
//!   worker's next `accept` (an accept that returns no fd, e.g. interrupted
//!   at shutdown with `= ? ERESTARTSYS`, starts no request), at its next
//!   header read, or at the worker's last event. The
//!   events a worker makes before its first request (startup) belong to no
//!   request, nor do the master's.
//! - **An HTTP server running PHP in its processes** (Apache httpd's
//!   prefork children with mod_php). A child accepts with
//!   `accept4(listen_fd, ..., SOCK_CLOEXEC)` (APR), where PHP's FastCGI
//!   SAPIs call `accept`; one request per accepted connection, kind
//!   [`RequestKind::HttpdAccept`], split as a php-fpm worker's otherwise
//!   (measured: `apache2 -X` with libphp8.2, tests/fixtures/httpd).
//! - **php-cli.** One process is one request: a pid together with the
//!   children it creates (`clone`, `clone3`, `fork`, `vfork` returning the
//!   child's pid), except children that `execve` something else: such a
//!   child starts a process of its own, which is a request only if it runs
//!   PHP: by the exec'd binary's name when the event carries it, else by
//!   the PHP paths (`*.php`, `php.ini`, `/etc/php/`) its process touches.
//! - **Both.** A trace of a pool holding php-cli processes too (a machine
//!   with cron jobs, a lab's series of runs): a process tree holding an fpm
//!   worker is split by the php-fpm rule (its other events, the master's
//!   and the workers' startup, belong to no request), every other tree
//!   that runs PHP by the php-cli rule (a tree whose exec strace does not
//!   show must have touched PHP paths), and what is left (other programs)
//!   belongs to no request: [`RequestMode::Mixed`].
//! - **Neither.** Without FastCGI boundaries and without sign of PHP (an
//!   `execve` of a `php*` binary, a `*.php` path or a `php.ini`), the whole
//!   trace is one request, and [`Requests::note`] says so.
//!
//! [`Splitter`] is the streaming form (a per-pid state machine fed event by
//! event, memory bounded by pids and requests); [`split_requests`] is the
//! batch form built on it.

use serde::Serialize;
use statstorm_trace::event::{Event, FastHash, Flags, Interner, Kind, PathId, Ret};
use std::collections::{HashMap, HashSet};

/// How the trace was split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestMode {
    /// php-fpm workers: one request per FastCGI connection.
    Fpm,
    /// php-cli: one request per PHP process.
    Cli,
    /// Neither recognised: the whole trace is one request.
    Whole,
    /// php-fpm workers and php-cli processes in one trace (a pool and its
    /// cron jobs): each kind split by its own rule.
    Mixed,
}

/// php-cli requests made, and process trees left out (running another
/// program).
struct CliCount {
    requests: usize,
    non_php: usize,
}

/// `Mode` is the short name used in docs.
pub type Mode = RequestMode;

/// What marked the start of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// `accept` returned the connection fd (PHP's FastCGI SAPIs, php-fpm
    /// among them, call `accept`: main/fastcgi.c `fcgi_accept_request`).
    FpmAccept,
    /// `accept4` returned the connection fd: a server that runs PHP in its
    /// own processes, one request per connection (Apache httpd's prefork
    /// children with mod_php: APR accepts with `accept4(..., SOCK_CLOEXEC)`;
    /// measured, `apache2 -X` with libphp8.2).
    HttpdAccept,
    /// No accept visible: the first 8-byte read of the FastCGI header.
    FpmHeaderRead,
    /// A php-cli process (with its non-exec'ing children).
    CliProcess,
    /// The whole trace (fallback).
    WholeTrace,
}

impl RequestKind {
    /// Every kind (a kind's place in it is its number when stored).
    pub const ALL: [RequestKind; 5] = [
        RequestKind::FpmAccept,
        RequestKind::HttpdAccept,
        RequestKind::FpmHeaderRead,
        RequestKind::CliProcess,
        RequestKind::WholeTrace,
    ];
}

/// One request of a batch split.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request {
    /// The worker's pid (fpm), the process's pid (cli), the first event's
    /// pid (whole trace).
    pub pid: u32,
    /// Start, microseconds on the trace's clock (`None` without timestamps).
    pub start_us: Option<i64>,
    /// End: the latest `ts + dur` of the request's events.
    pub end_us: Option<i64>,
    /// Indices into the event slice, in input order.
    pub events: Vec<u32>,
    pub kind: RequestKind,
    /// A php-cli process's settings stated on its command line (`-d`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<CliSettings>,
}

/// Settings a php-cli process's command line states (`php -d KEY=VALUE`),
/// in order: they win over any php.ini for that process.
pub type CliSettings = Box<[(String, String)]>;

/// The settings a PHP CLI command line states with `-d` (`php -d
/// realpath_cache_size=0 -dopen_basedir=/srv x.php`; `-d key` alone is
/// `key=1`, as PHP's CLI reads it), from an exec's program and arguments
/// as the trace parser keeps them (`Event::path2`: NUL-terminated
/// strings, the path first): those the PHP model uses, with a value it
/// reads (`date.timezone`, `memory_limit` change no file system call).
/// None for a program that is not PHP's CLI (`php`, `php8.2`,
/// `php-cgi`; not php-fpm) or a command line that states none. PHP's own options end at the script
/// (the first argument that is not an option), at `--` and after `-f` or
/// `-r` with their value; `-c` and the other options that take a value
/// have it skipped (`sapi/cli/php_cli.c` `OPTIONS`).
pub fn cli_settings(exec: &[u8]) -> Option<CliSettings> {
    let mut parts = exec.split(|&b| b == 0);
    if !is_php_binary(parts.next()?) {
        return None;
    }
    let mut args = parts.skip(1); // argv[0]
    let mut probe = crate::config::PhpConfig::default();
    let mut set: Vec<(String, String)> = Vec::new();
    while let Some(a) = args.next() {
        let setting: Option<&[u8]> = match a {
            b"-d" => args.next(),
            [b'-', b'd', rest @ ..] => Some(rest),
            b"--" | b"-f" | b"-r" => break,
            b"-c" | b"-z" | b"-B" | b"-R" | b"-F" | b"-E" | b"-t" | b"-S" => {
                args.next();
                None
            }
            [b'-', ..] => None,
            _ => break,
        };
        let Some(kv) = setting.map(String::from_utf8_lossy) else {
            continue;
        };
        let (k, v) = kv.split_once('=').unwrap_or((&kv, "1"));
        let (k, v) = (k.trim().to_string(), v.to_string());
        if matches!(probe.set(&k, &v, "the command line"), Ok(Some(()))) {
            set.push((k, v));
        }
    }
    (!set.is_empty()).then(|| set.into_boxed_slice())
}

/// Result of [`split_requests`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Requests {
    pub mode: RequestMode,
    /// Requests in time order (start, then first event).
    pub requests: Vec<Request>,
    /// One sentence saying how the split was made and what was left out.
    pub note: String,
}

impl Requests {
    /// The requests of a streaming split's plan, without their event
    /// lists (`Request::events` empty): for a caller that tagged each
    /// event with its unit as it went ([`Splitter::push`]).
    pub fn of_plan(plan: &Plan) -> Requests {
        Requests {
            mode: plan.mode,
            requests: plan
                .requests
                .iter()
                .map(|r| Request {
                    pid: r.pid,
                    start_us: r.start_us,
                    end_us: r.end_us,
                    events: Vec::new(),
                    kind: r.kind,
                    settings: r.settings.clone(),
                })
                .collect(),
            note: plan.note.clone(),
        }
    }
}

/// The requests of a split, one at a time by index: a split held in
/// memory ([`Requests`]), or one its caller keeps elsewhere (on disk, so
/// that a capture of millions of requests does not hold them all; such a
/// request comes without its event list).
pub trait RequestList: Sync {
    /// Number of requests.
    fn len(&self) -> usize;
    /// Request `i` (`i < len()`).
    fn request(&self, i: usize) -> std::borrow::Cow<'_, Request>;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RequestList for Requests {
    fn len(&self) -> usize {
        self.requests.len()
    }
    fn request(&self, i: usize) -> std::borrow::Cow<'_, Request> {
        std::borrow::Cow::Borrowed(&self.requests[i])
    }
}

/// Splits `events` (in input order) into requests. See the module docs.
pub fn split_requests(events: &[Event], strings: &Interner) -> Requests {
    let mut sp = Splitter::new();
    let units: Vec<UnitId> = events.iter().map(|e| sp.push(e, strings)).collect();
    let plan = sp.finish();
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); plan.requests.len()];
    for (i, u) in units.iter().enumerate() {
        if let Some(r) = plan.unit_request[u.0 as usize] {
            buckets[r as usize].push(i as u32);
        }
    }
    let requests = plan
        .requests
        .iter()
        .zip(buckets)
        .map(|(r, ev)| Request {
            pid: r.pid,
            start_us: r.start_us,
            end_us: r.end_us,
            events: ev,
            kind: r.kind,
            settings: r.settings.clone(),
        })
        .collect();
    Requests {
        mode: plan.mode,
        requests,
        note: plan.note,
    }
}

/// A stretch of one pid's events between two request boundaries. The
/// streaming [`Splitter`] tags every event with its unit; [`Plan`] maps
/// units to requests once the whole trace is seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct UnitId(pub u32);

/// A request of the streaming split: the same as [`Request`] without the
/// event list.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestInfo {
    pub pid: u32,
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    pub kind: RequestKind,
    /// Number of events in the request.
    pub events: u64,
    /// Ordinal (0-based, input order) of the request's first event.
    pub first_event: u64,
    /// A php-cli process's settings stated on its command line (`-d`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<CliSettings>,
}

impl RequestInfo {
    /// The requests' time order: start (requests without timestamps keep
    /// input order), then first event; no two requests share it.
    pub fn order(&self) -> (i64, u64) {
        (self.start_us.unwrap_or(i64::MIN), self.first_event)
    }
}

/// The outcome of a streaming split.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub mode: RequestMode,
    pub note: String,
    /// In time order.
    pub requests: Vec<RequestInfo>,
    /// For each unit, the index of its request in `requests` (`None`: the
    /// unit belongs to no request, e.g. a worker's startup or the master).
    pub unit_request: Vec<Option<u32>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Start {
    /// Events of a pid before its first boundary.
    #[default]
    Head,
    /// From an `accept` that returned no connection (interrupted at
    /// shutdown, `= ? ERESTARTSYS`): the worker is idle, in no request.
    Idle,
    Accept,
    /// `accept4`: an HTTP server running PHP (see [`RequestKind::HttpdAccept`]).
    Accept4,
    HeaderRead,
}

#[derive(Clone, Debug, Default)]
struct Unit {
    pid: u32,
    start: Start,
    start_us: Option<i64>,
    end_us: Option<i64>,
    events: u64,
    first_event: u64,
}

impl Unit {
    /// A unit that is a request by itself: a connection served (only
    /// php-fpm's and an HTTP server's units start so, and one is proof of
    /// a pool).
    fn serves(&self) -> bool {
        matches!(
            self.start,
            Start::Accept | Start::Accept4 | Start::HeaderRead
        ) && self.events > 0
    }

    /// The request of a unit that [`Unit::serves`].
    fn served(&self) -> RequestInfo {
        RequestInfo {
            pid: self.pid,
            start_us: self.start_us,
            end_us: self.end_us,
            kind: match self.start {
                Start::Accept => RequestKind::FpmAccept,
                Start::Accept4 => RequestKind::HttpdAccept,
                _ => RequestKind::FpmHeaderRead,
            },
            events: self.events,
            first_event: self.first_event,
            settings: None,
        }
    }
}

/// A streaming split's units of one pid that are no request by
/// themselves (startup, idle, a php-cli process's pieces), folded as they
/// close: what the end of the trace makes of them (a php-cli request with
/// the other pids of its process tree, a pool's events outside requests,
/// or part of the whole trace) needs only their sums.
#[derive(Clone, Debug, Default)]
struct Rest {
    /// Over the units with events (a php-cli request's part).
    with_events: Option<Unit>,
    /// The span over every unit, events or not (the whole-trace request's).
    start_us: Option<i64>,
    end_us: Option<i64>,
}

impl Rest {
    fn add(&mut self, u: &Unit) {
        self.start_us = min_opt(self.start_us, u.start_us);
        self.end_us = max_opt(self.end_us, u.end_us);
        if u.events == 0 {
            return;
        }
        match &mut self.with_events {
            None => self.with_events = Some(u.clone()),
            Some(r) => {
                r.events += u.events;
                r.first_event = r.first_event.min(u.first_event);
                r.start_us = min_opt(r.start_us, u.start_us);
                r.end_us = max_opt(r.end_us, u.end_us);
            }
        }
    }
}

/// A unit a streaming split ([`Splitter::streaming`]) let go: its pid
/// moved on to another unit, or the trace ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Closed {
    pub unit: UnitId,
    /// The pid's slot ([`Splitter::push_slot`]).
    pub slot: usize,
    /// The request the unit is by itself (a connection a pool's worker
    /// served); `None`: the unit is folded into its pid's other such units,
    /// which [`StreamPlan::joined`] makes requests of at the end.
    pub request: Option<RequestInfo>,
}

/// The end of a streaming split: the mode and the requests not given out
/// as units closed ([`Closed::request`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamPlan {
    pub mode: RequestMode,
    pub note: String,
    /// Requests in all: the units given out as requests and `joined`.
    pub requests: usize,
    /// The requests made of pids' other units (php-cli processes, the
    /// whole trace), each with the slots of its pids.
    pub joined: Vec<(RequestInfo, Vec<usize>)>,
}

/// What the process did with an fd, as far as the splitter cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FdUse {
    /// Opened by path or created by socket/dup/...: never a FastCGI
    /// connection found by the header-read rule.
    Local,
    /// Returned by accept, or its header already read: the connection of
    /// the current request.
    Conn,
}

/// The fds of one pid the splitter tracks: small fds (all a PHP worker
/// normally has) in a vector indexed by the fd, any other in a map. Every
/// open, close and socket call updates this table; as a hash map alone it
/// was ~4% of the merging thread's time on the bench log.
#[derive(Clone, Debug, Default)]
struct FdTable {
    /// `FD_*` of fds `0..small.len()`.
    small: Vec<u8>,
    /// Fds from `FdTable::SMALL` up, and negative ones.
    large: HashMap<i32, FdUse, FastHash>,
}

const FD_NONE: u8 = 0;
const FD_LOCAL: u8 = 1;
const FD_CONN: u8 = 2;

impl FdTable {
    /// Fds below this live in `small` (at most this many bytes per pid).
    const SMALL: i32 = 4096;

    fn small_index(fd: i32) -> Option<usize> {
        (0..Self::SMALL).contains(&fd).then_some(fd as usize)
    }

    fn insert(&mut self, fd: i32, u: FdUse) {
        let code = match u {
            FdUse::Local => FD_LOCAL,
            FdUse::Conn => FD_CONN,
        };
        match Self::small_index(fd) {
            Some(i) => {
                if i >= self.small.len() {
                    self.small.resize(i + 1, FD_NONE);
                }
                self.small[i] = code;
            }
            None => {
                self.large.insert(fd, u);
            }
        }
    }

    fn contains(&self, fd: i32) -> bool {
        match Self::small_index(fd) {
            Some(i) => self.small.get(i).is_some_and(|&c| c != FD_NONE),
            None => self.large.contains_key(&fd),
        }
    }

    fn remove(&mut self, fd: i32) {
        match Self::small_index(fd) {
            Some(i) => {
                if let Some(c) = self.small.get_mut(i) {
                    *c = FD_NONE;
                }
            }
            None => {
                self.large.remove(&fd);
            }
        }
    }

    /// Forgets every fd but the connections.
    fn keep_conns(&mut self) {
        for c in &mut self.small {
            if *c != FD_CONN {
                *c = FD_NONE;
            }
        }
        self.large.retain(|_, u| *u == FdUse::Conn);
    }
}

#[derive(Clone, Debug, Default)]
struct PidState {
    unit: u32,
    /// The current unit.
    cur: Unit,
    /// A streaming split's units of this pid that were no request.
    rest: Rest,
    fds: FdTable,
    /// Process (thread group) this pid belongs to for the cli rule: the pid
    /// that created it, unless it exec'd.
    parent: Option<u32>,
    /// Successful execve seen in this pid (`Some(is_php)`, `None` in the
    /// tuple when the path is unknown).
    exec: Option<Option<bool>>,
    boundaries: u32,
    /// This pid touched a PHP-only path (script, php.ini).
    php: bool,
    /// The settings its last exec's command line stated (`-d`).
    settings: Option<CliSettings>,
}

/// Syscall classes the splitter needs beyond [`Kind`], by name id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameClass {
    Unknown,
    Plain,
    /// clone, clone3, fork, vfork: returns the child's pid.
    Fork,
    /// execve, execveat.
    Exec,
    /// socket, dup, dup2, dup3, epoll_create*, eventfd*, ...: returns an fd
    /// that is not a FastCGI connection.
    NewFd,
}

const FORK_NAMES: &[&str] = &["clone", "clone3", "fork", "vfork"];
const EXEC_NAMES: &[&str] = &["execve", "execveat"];
const NEWFD_NAMES: &[&str] = &[
    "socket",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "eventfd",
    "eventfd2",
    "timerfd_create",
    "signalfd",
    "signalfd4",
    "memfd_create",
    "inotify_init",
    "inotify_init1",
    "pidfd_open",
];

/// Streaming request splitter: feed every event in input order with
/// [`Splitter::push`], then call [`Splitter::finish`].
///
/// ```
/// use statstorm_php::request::{RequestMode, Splitter};
/// let sp = Splitter::new();
/// let plan = sp.finish();
/// assert_eq!(plan.mode, RequestMode::Whole);
/// ```
#[derive(Debug)]
pub struct Splitter {
    /// Per-pid state, in order of first appearance; `pid_index` maps a pid
    /// to its slot.
    pids: Vec<PidState>,
    pid_index: HashMap<u32, usize, FastHash>,
    /// Direct-mapped cache in front of `pid_index` (entry `pid % PID_CACHE`
    /// holds `(pid, slot)`): the pids of a trace's live processes
    /// interleave line by line, and this answers most lookups from one
    /// cache line or two. Entry `i` starts as `(i + 1, 0)`, a pid that
    /// never maps to entry `i`, so an empty entry never matches and needs
    /// no flag. Entries never go stale: a pid keeps its slot for the whole
    /// trace. (A previous-pid cache in front of it hit 6% of the events on
    /// a 200k-event fpm trace and cost more than it saved.)
    pid_cache: Box<[(u32, u32); PID_CACHE]>,
    /// Every unit by id, each written when it closes (a pid's current unit
    /// is in its state): kept for [`Splitter::finish`]'s plan. A streaming
    /// split keeps none ([`Splitter::streaming`]).
    units: Vec<Unit>,
    keep: bool,
    /// Units made so far (the next one's id).
    made: u32,
    /// Units let go and not taken yet (streaming).
    closed: Vec<Closed>,
    /// Units that were requests by themselves, let go (streaming): in all,
    /// and those of an HTTP server (accept4).
    served: usize,
    served_httpd: usize,
    names: Vec<NameClass>,
    /// Per path id: 0 not checked, 1 not a PHP path, 2 a PHP path.
    php_class: Vec<u8>,
    php_evidence: bool,
    events: u64,
    first_pid: Option<u32>,
}

/// Entries of `Splitter::pid_cache`.
const PID_CACHE: usize = 64;

impl Default for Splitter {
    fn default() -> Self {
        Self::new()
    }
}

fn returned_fd(ev: &Event) -> Option<i32> {
    match ev.ret {
        Ret::Ok(n) if (0..=i32::MAX as i64).contains(&n) => Some(n as i32),
        _ => None,
    }
}

fn end_of(ev: &Event) -> Option<i64> {
    ev.ts_us.map(|t| t + ev.dur_us.unwrap_or(0) as i64)
}

fn basename(p: &[u8]) -> &[u8] {
    match p.iter().rposition(|&b| b == b'/') {
        Some(i) => &p[i + 1..],
        None => p,
    }
}

/// An exec'd binary runs PHP outside FPM: `php`, `php8.2`, `php-cgi`.
fn is_php_binary(p: &[u8]) -> bool {
    let b = basename(p);
    b.starts_with(b"php") && !b.windows(3).any(|w| w == b"fpm")
}

/// A path that only PHP touches: a script or a php.ini.
fn is_php_path(p: &[u8]) -> bool {
    p.ends_with(b".php") || (basename(p) == b"php.ini" || p.starts_with(b"/etc/php/"))
}

impl Splitter {
    pub fn new() -> Self {
        Splitter {
            pids: Vec::new(),
            pid_index: HashMap::default(),
            pid_cache: Box::new(std::array::from_fn(|i| (i as u32 + 1, 0))),
            units: Vec::new(),
            keep: true,
            made: 0,
            closed: Vec::new(),
            served: 0,
            served_httpd: 0,
            names: Vec::new(),
            php_class: Vec::new(),
            php_evidence: false,
            events: 0,
            first_pid: None,
        }
    }

    fn class(&mut self, name: PathId, strings: &Interner) -> NameClass {
        let i = name.0 as usize;
        if i >= self.names.len() {
            self.names.resize(i + 1, NameClass::Unknown);
        }
        if self.names[i] == NameClass::Unknown {
            let b = strings.bytes(name);
            let is = |set: &[&str]| set.iter().any(|n| n.as_bytes() == b);
            self.names[i] = if is(FORK_NAMES) {
                NameClass::Fork
            } else if is(EXEC_NAMES) {
                NameClass::Exec
            } else if is(NEWFD_NAMES) {
                NameClass::NewFd
            } else {
                NameClass::Plain
            };
        }
        self.names[i]
    }

    /// Whether `p` is a path only PHP touches (cached per path id).
    fn is_php(&mut self, p: PathId, strings: &Interner) -> bool {
        let i = p.0 as usize;
        if i >= self.php_class.len() {
            self.php_class.resize(i + 1, 0);
        }
        if self.php_class[i] == 0 {
            self.php_class[i] = if is_php_path(strings.bytes(p)) { 2 } else { 1 };
        }
        self.php_class[i] == 2
    }

    /// A new unit of `pid`: its id and its record (the pid's current unit
    /// from now on).
    fn new_unit(&mut self, pid: u32, start: Start, start_us: Option<i64>) -> (u32, Unit) {
        let id = self.made;
        self.made += 1;
        let u = Unit {
            pid,
            start,
            start_us,
            end_us: None,
            events: 0,
            first_event: self.events,
        };
        if self.keep {
            self.units.push(u.clone());
        }
        (id, u)
    }

    /// The current unit of slot `si` ends: kept by id, or (streaming)
    /// given out when a request and otherwise folded into its pid's rest.
    fn close(&mut self, si: usize) {
        let st = &mut self.pids[si];
        if self.keep {
            self.units[st.unit as usize] = st.cur.clone();
            return;
        }
        let request = if st.cur.serves() {
            self.served += 1;
            if st.cur.start == Start::Accept4 {
                self.served_httpd += 1;
            }
            Some(st.cur.served())
        } else {
            st.rest.add(&st.cur);
            None
        };
        self.closed.push(Closed {
            unit: UnitId(st.unit),
            slot: si,
            request,
        });
    }

    /// A split that keeps no unit once it closes: each is given out
    /// ([`Splitter::take_closed`]) as its pid moves on, a request by
    /// itself or folded into the pid's other units, and the end of the
    /// trace ([`Splitter::finish_streaming`]) makes requests of those.
    /// Memory follows the pids, not the requests.
    pub fn streaming() -> Self {
        Splitter {
            keep: false,
            ..Splitter::new()
        }
    }

    /// The units let go since the last call (streaming; in the order they
    /// closed: at most one per event pushed).
    pub fn take_closed(&mut self) -> std::vec::Drain<'_, Closed> {
        self.closed.drain(..)
    }

    /// One unit let go and not taken yet ([`Splitter::take_closed`]
    /// without the borrow: one closes per event at most).
    pub fn pop_closed(&mut self) -> Option<Closed> {
        self.closed.pop()
    }

    /// Slot of `pid`, created (with a head unit) on first sight. The cache
    /// hit is inlined into the caller; the rest is out of line, so the hit
    /// saves a call and its register saves (~20 instructions per event,
    /// most events hit).
    #[inline]
    fn slot(&mut self, pid: u32, ts_us: Option<i64>) -> usize {
        let c = self.pid_cache[pid as usize % PID_CACHE];
        if c.0 == pid {
            return c.1 as usize;
        }
        self.slot_miss(pid, ts_us)
    }

    #[inline(never)]
    fn slot_miss(&mut self, pid: u32, ts_us: Option<i64>) -> usize {
        let i = match self.pid_index.get(&pid) {
            Some(&i) => i,
            None => {
                let (unit, cur) = self.new_unit(pid, Start::Head, ts_us);
                let i = self.pids.len();
                self.pids.push(PidState {
                    unit,
                    cur,
                    ..PidState::default()
                });
                self.pid_index.insert(pid, i);
                i
            }
        };
        if i <= u32::MAX as usize {
            self.pid_cache[pid as usize % PID_CACHE] = (pid, i as u32);
        }
        i
    }

    /// Feeds one event (input order) and returns the unit it belongs to.
    /// Per event: at most one hash lookup by pid (none when the pid is in
    /// the pid cache) plus, for fd-creating and read calls, one by fd.
    pub fn push(&mut self, ev: &Event, strings: &Interner) -> UnitId {
        self.push_slot(ev, strings).0
    }

    /// [`Splitter::push`], also giving the pid's slot: dense indices
    /// (0, 1, ...) in the order pids were first seen (in an event or as a
    /// forked child), one per pid for the whole trace, so a caller can keep
    /// its own per-pid state in a vector indexed by it.
    ///
    /// `#[inline]` so that it can be inlined across the crate boundary
    /// into the analyzer's per-event `push`, its one hot caller: that drops
    /// the call and its register saves and restores (~30 instructions per
    /// event, 201k events: 87.5 M -> 80.8 M instructions in `push`).
    #[inline]
    pub fn push_slot(&mut self, ev: &Event, strings: &Interner) -> (UnitId, usize) {
        let pid = ev.pid;
        if self.first_pid.is_none() {
            self.first_pid = Some(pid);
        }
        let si = self.slot(pid, ev.ts_us);
        // dup/dup2/dup3 are decoded kinds but keep their class (NEWFD_NAMES).
        let class = if ev.kind == Kind::Other || ev.kind.is_dup() {
            self.class(ev.name, strings)
        } else {
            NameClass::Plain
        };
        if !self.pids[si].php {
            if let Some(p) = ev.path {
                if (ev.kind.is_metadata() || class == NameClass::Exec) && self.is_php(p, strings) {
                    self.php_evidence = true;
                    self.pids[si].php = true;
                }
            }
        }
        // Boundary detection (may open a new unit for this very event).
        let mut boundary: Option<(Start, Option<i64>)> = None;
        match ev.kind {
            Kind::Accept | Kind::Accept4 => {
                // Any accept ends the current request: the worker is back
                // in its accept loop.
                if let Some(fd) = returned_fd(ev) {
                    let st = &mut self.pids[si];
                    st.fds.insert(fd, FdUse::Conn);
                    let start = if ev.kind == Kind::Accept4 {
                        Start::Accept4
                    } else {
                        Start::Accept
                    };
                    boundary = Some((start, end_of(ev)));
                } else {
                    boundary = Some((Start::Idle, ev.ts_us));
                }
            }
            Kind::Read | Kind::Recvfrom => {
                if let (Some(fd), Ret::Ok(8)) = (ev.fd, ev.ret) {
                    // The decoration's text, or without it (parsed with
                    // `Options::fd_paths` off) its flag.
                    let not_file = match ev.fd_path {
                        Some(p) => !strings.bytes(p).starts_with(b"/"),
                        None => !ev.flags.has(Flags::FD_FILE),
                    };
                    let st = &mut self.pids[si];
                    if fd > 2 && not_file && !st.fds.contains(fd) {
                        st.fds.insert(fd, FdUse::Conn);
                        boundary = Some((Start::HeaderRead, ev.ts_us));
                    }
                }
            }
            Kind::Close => {
                if let Some(fd) = ev.fd {
                    self.pids[si].fds.remove(fd);
                }
            }
            k if k.is_open() => {
                if let Some(fd) = returned_fd(ev) {
                    self.pids[si].fds.insert(fd, FdUse::Local);
                }
            }
            _ => {}
        }
        match class {
            NameClass::NewFd => {
                if let Some(fd) = returned_fd(ev) {
                    self.pids[si].fds.insert(fd, FdUse::Local);
                }
            }
            NameClass::Fork => {
                if let Ret::Ok(child) = ev.ret {
                    if child > 0 && child <= u32::MAX as i64 {
                        let child = child as u32;
                        // The child may already have events (strace can
                        // print them before the parent's clone returns).
                        let ci = self.slot(child, ev.ts_us);
                        let st = &mut self.pids[ci];
                        if st.exec.is_none() && child != pid {
                            st.parent = Some(pid);
                        }
                    }
                }
            }
            NameClass::Exec => {
                if matches!(ev.ret, Ret::Ok(0)) {
                    let php = ev.path.map(|p| is_php_binary(strings.bytes(p)));
                    if php == Some(true) {
                        self.php_evidence = true;
                        self.pids[si].php = true;
                    }
                    let settings = ev.path2.and_then(|p| cli_settings(strings.bytes(p)));
                    let st = &mut self.pids[si];
                    st.exec = Some(php);
                    st.settings = settings;
                    st.parent = None;
                    // exec closes nothing we track reliably; forget fds.
                    st.fds.keep_conns();
                }
            }
            _ => {}
        }
        if let Some((start, start_us)) = boundary {
            self.close(si);
            let (id, cur) = self.new_unit(pid, start, start_us);
            let st = &mut self.pids[si];
            if start != Start::Idle {
                st.boundaries += 1;
            }
            st.unit = id;
            st.cur = cur;
        }
        let st = &mut self.pids[si];
        let unit_id = st.unit;
        let u = &mut st.cur;
        if u.events == 0 {
            u.first_event = self.events;
            if u.start_us.is_none() {
                u.start_us = ev.ts_us;
            }
        }
        u.events += 1;
        if let Some(e) = end_of(ev) {
            u.end_us = Some(u.end_us.map_or(e, |x| x.max(e)));
        }
        self.events += 1;
        (UnitId(unit_id), si)
    }

    /// Number of events fed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// php-cli requests: one per process tree whose root passes `take`
    /// and that runs PHP (by the exec'd binary when strace shows it, else
    /// by the PHP paths the tree touched; a tree with no exec seen counts
    /// as PHP in a php-cli trace, and only with PHP paths when
    /// `need_php_paths`, as beside a pool), made of the units `cands`
    /// (unit index and record, events in each): each taken unit's request
    /// is given to `assign`. Returns the counts and the events of trees
    /// left out.
    fn cli_requests(
        &self,
        root_of: &dyn Fn(u32) -> u32,
        take: impl Fn(u32) -> bool,
        need_php_paths: bool,
        mut cands: Vec<(usize, &Unit)>,
        assign: &mut dyn FnMut(usize, u32),
        reqs: &mut Vec<RequestInfo>,
    ) -> (CliCount, u64) {
        let mut root_req: HashMap<u32, u32> = HashMap::new();
        // Process groups that touched PHP paths.
        let mut php_roots: HashSet<u32> = HashSet::new();
        for (&pid, &i) in &self.pid_index {
            if self.pids[i].php {
                php_roots.insert(root_of(pid));
            }
        }
        let mut non_php: HashSet<u32> = HashSet::new();
        let mut other_events = 0u64;
        let first = reqs.len();
        // Units in first-event order so requests come out stable.
        cands.sort_by_key(|&(_, u)| u.first_event);
        for (i, u) in cands {
            let root = root_of(u.pid);
            if !take(root) {
                continue;
            }
            let root_state = self.pid_index.get(&root).map(|&i| &self.pids[i]);
            let exec = root_state.and_then(|st| st.exec);
            let runs_php = match exec {
                Some(Some(php)) => php,
                Some(None) => php_roots.contains(&root),
                None => !need_php_paths || php_roots.contains(&root),
            };
            if !runs_php {
                non_php.insert(root);
                other_events += u.events;
                continue;
            }
            let r = *root_req.entry(root).or_insert_with(|| {
                reqs.push(RequestInfo {
                    pid: root,
                    start_us: None,
                    end_us: None,
                    kind: RequestKind::CliProcess,
                    events: 0,
                    first_event: u.first_event,
                    settings: root_state.and_then(|st| st.settings.clone()),
                });
                reqs.len() as u32 - 1
            });
            let ri = &mut reqs[r as usize];
            ri.events += u.events;
            ri.first_event = ri.first_event.min(u.first_event);
            ri.start_us = min_opt(ri.start_us, u.start_us);
            ri.end_us = max_opt(ri.end_us, u.end_us);
            assign(i, r);
        }
        (
            CliCount {
                requests: reqs.len() - first,
                non_php: non_php.len(),
            },
            other_events,
        )
    }

    /// The root of each pid's process tree (creation order guarantees no
    /// cycle except through bad input, so the walk is bounded).
    fn root_of(&self, mut p: u32) -> u32 {
        for _ in 0..64 {
            match self.pid_index.get(&p).and_then(|&i| self.pids[i].parent) {
                Some(q) if q != p => p = q,
                _ => break,
            }
        }
        p
    }

    /// A tree holding a worker (a pid with a request boundary) is a pool:
    /// its roots.
    fn pools(&self) -> HashSet<u32> {
        let mut pools: HashSet<u32> = HashSet::new();
        for (&pid, &i) in &self.pid_index {
            if self.pids[i].boundaries > 0 {
                pools.insert(self.root_of(pid));
            }
        }
        pools
    }

    fn workers(&self) -> usize {
        self.pids.iter().filter(|st| st.boundaries > 0).count()
    }

    /// Decides the mode and maps units to requests.
    pub fn finish(mut self) -> Plan {
        for si in 0..self.pids.len() {
            self.close(si);
        }
        let mut unit_request: Vec<Option<u32>> = vec![None; self.units.len()];
        let mut reqs: Vec<RequestInfo> = Vec::new();
        let fpm = self.units.iter().any(Unit::serves);
        let root_of = |p: u32| self.root_of(p);
        let mode;
        let note;
        if fpm {
            // A tree holding a worker is a pool: its other events (master,
            // startup, idle) belong to no request. Every other tree that
            // runs PHP is a php-cli run on the same machine (a cron job, a
            // deploy script, a lab block's cli runs): one request each, as
            // in a php-cli trace.
            let pools = self.pools();
            let mut head_events = 0u64;
            for (i, u) in self.units.iter().enumerate() {
                if !u.serves() {
                    if pools.contains(&root_of(u.pid)) {
                        head_events += u.events;
                    }
                    continue;
                }
                unit_request[i] = Some(reqs.len() as u32);
                reqs.push(u.served());
            }
            let served = reqs.len();
            let httpd = reqs
                .iter()
                .filter(|r| r.kind == RequestKind::HttpdAccept)
                .count();
            let cands = self
                .units
                .iter()
                .enumerate()
                .filter(|&(i, u)| u.events > 0 && unit_request[i].is_none())
                .collect();
            let (cli, other) = self.cli_requests(
                &root_of,
                |root| !pools.contains(&root),
                true,
                cands,
                &mut |i, r| unit_request[i] = Some(r),
                &mut reqs,
            );
            (mode, note) = fpm_note(served, httpd, self.workers(), &cli, head_events + other);
        } else if self.php_evidence {
            let cands = self
                .units
                .iter()
                .enumerate()
                .filter(|(_, u)| u.events > 0)
                .collect();
            let (cli, _) = self.cli_requests(
                &root_of,
                |_| true,
                false,
                cands,
                &mut |i, r| unit_request[i] = Some(r),
                &mut reqs,
            );
            (mode, note) = cli_note(&cli);
        } else {
            mode = RequestMode::Whole;
            if self.events > 0 {
                let mut ri = self.whole();
                for (i, u) in self.units.iter().enumerate() {
                    ri.events += u.events;
                    ri.start_us = min_opt(ri.start_us, u.start_us);
                    ri.end_us = max_opt(ri.end_us, u.end_us);
                    unit_request[i] = Some(0);
                }
                reqs.push(ri);
            }
            note = WHOLE_NOTE.to_string();
        }
        // Time order: start (requests without timestamps keep input order).
        // The key is unique (no two requests share their first event), so
        // the requests are sorted in place, not copied in the new order.
        let mut idx: Vec<u32> = (0..reqs.len() as u32).collect();
        idx.sort_unstable_by_key(|&i| reqs[i as usize].order());
        let mut new_pos = vec![0u32; reqs.len()];
        for (pos, &i) in idx.iter().enumerate() {
            new_pos[i as usize] = pos as u32;
        }
        drop(idx);
        for r in unit_request.iter_mut().flatten() {
            *r = new_pos[*r as usize];
        }
        reqs.sort_unstable_by_key(RequestInfo::order);
        reqs.shrink_to_fit();
        Plan {
            mode,
            note,
            requests: reqs,
            unit_request,
        }
    }

    /// The whole trace as one request, its counts not added yet.
    fn whole(&self) -> RequestInfo {
        RequestInfo {
            pid: self.first_pid.unwrap_or(0),
            start_us: None,
            end_us: None,
            kind: RequestKind::WholeTrace,
            events: 0,
            first_event: 0,
            settings: None,
        }
    }

    /// Ends a streaming split ([`Splitter::streaming`]): lets go every
    /// pid's current unit (given with the plan, in slot order) and decides
    /// as [`Splitter::finish`] does, of the units given out as requests
    /// and of each pid's other units folded. The plan's requests of those
    /// (`joined`) are in no particular order: [`RequestInfo::order`] sorts
    /// them with the others.
    pub fn finish_streaming(mut self) -> (StreamPlan, Vec<Closed>) {
        for si in 0..self.pids.len() {
            self.close(si);
        }
        let closed = std::mem::take(&mut self.closed);
        let root_of = |p: u32| self.root_of(p);
        // each pid's units with events, folded: the candidates of php-cli
        // requests (index: the pid's slot)
        let folded: Vec<(usize, &Unit)> = self
            .pids
            .iter()
            .enumerate()
            .filter_map(|(si, st)| st.rest.with_events.as_ref().map(|u| (si, u)))
            .collect();
        let mut slots_of: Vec<Vec<usize>> = Vec::new();
        let mut reqs: Vec<RequestInfo> = Vec::new();
        let mut assign = |si: usize, r: u32| {
            let r = r as usize;
            if slots_of.len() <= r {
                slots_of.resize_with(r + 1, Vec::new);
            }
            slots_of[r].push(si);
        };
        let (mode, note);
        if self.served > 0 {
            let pools = self.pools();
            let head_events: u64 = folded
                .iter()
                .filter(|(_, u)| pools.contains(&root_of(u.pid)))
                .map(|(_, u)| u.events)
                .sum();
            let (cli, other) = self.cli_requests(
                &root_of,
                |root| !pools.contains(&root),
                true,
                folded,
                &mut assign,
                &mut reqs,
            );
            (mode, note) = fpm_note(
                self.served,
                self.served_httpd,
                self.workers(),
                &cli,
                head_events + other,
            );
        } else if self.php_evidence {
            let (cli, _) =
                self.cli_requests(&root_of, |_| true, false, folded, &mut assign, &mut reqs);
            (mode, note) = cli_note(&cli);
        } else {
            mode = RequestMode::Whole;
            if self.events > 0 {
                let mut ri = self.whole();
                for (si, st) in self.pids.iter().enumerate() {
                    ri.events += st.rest.with_events.as_ref().map_or(0, |u| u.events);
                    ri.start_us = min_opt(ri.start_us, st.rest.start_us);
                    ri.end_us = max_opt(ri.end_us, st.rest.end_us);
                    assign(si, 0);
                }
                reqs.push(ri);
            }
            note = WHOLE_NOTE.to_string();
        }
        slots_of.resize_with(reqs.len(), Vec::new);
        let plan = StreamPlan {
            mode,
            note,
            requests: self.served + reqs.len(),
            joined: reqs.into_iter().zip(slots_of).collect(),
        };
        (plan, closed)
    }
}

const WHOLE_NOTE: &str = "neither php-fpm requests (no accept or FastCGI header read) nor php-cli processes (no php binary, script or php.ini seen): the whole trace is treated as one request";

/// The mode and note of a split with a pool: `served` requests (`httpd`
/// of them by an HTTP server) in `workers`, the php-cli requests `cli`,
/// and `outside` events in no request.
fn fpm_note(
    served: usize,
    httpd: usize,
    workers: usize,
    cli: &CliCount,
    outside: u64,
) -> (RequestMode, String) {
    // who served the connections: php-fpm (FastCGI), an HTTP server
    // running PHP in its processes, or both
    let who = match httpd {
        0 => format!(
            "php-fpm: {} in {}, one per FastCGI connection (accept or FastCGI header read)",
            plural(served as u64, "request"),
            plural(workers as u64, "worker")
        ),
        n if n == served => format!(
            "an HTTP server running PHP in its processes (Apache httpd with mod_php: accept4, where PHP's FastCGI calls accept): {} in {}, one per accepted connection",
            plural(served as u64, "request"),
            plural(workers as u64, "process")
        ),
        n => format!(
            "php-fpm and an HTTP server running PHP (accept4: Apache httpd with mod_php): {} in {}, {} of them one per FastCGI connection, {n} one per accepted HTTP connection",
            plural(served as u64, "request"),
            plural(workers as u64, "worker"),
            served - n
        ),
    };
    if cli.requests == 0 {
        (
            RequestMode::Fpm,
            format!(
                "{who}; {} outside requests (master, worker startup, idle at exit)",
                plural(outside, "event")
            ),
        )
    } else {
        (
            RequestMode::Mixed,
            format!(
                "php-fpm and php-cli: {} in {}, one per FastCGI connection, and {}, one per PHP process; {} outside requests (master, worker startup, idle at exit, {} running another program)",
                plural(served as u64, "request"),
                plural(workers as u64, "worker"),
                plural(cli.requests as u64, "php-cli request"),
                plural(outside, "event"),
                plural(cli.non_php as u64, "process"),
            ),
        )
    }
}

fn cli_note(cli: &CliCount) -> (RequestMode, String) {
    (
        RequestMode::Cli,
        format!(
            "php-cli: {}, one per PHP process (with its children that do not exec); {} running another program left out",
            plural(cli.requests as u64, "request"),
            plural(cli.non_php as u64, "process")
        ),
    )
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else if what.ends_with('s') {
        format!("{n} {what}es")
    } else {
        format!("{n} {what}s")
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use statstorm_trace::event::{Flags, Kind};

    /// The fd table answers as a plain map of fd to use would, for small,
    /// large and negative fds, across inserts, removes and exec's
    /// forgetting.
    #[test]
    fn fd_table_equals_a_map() {
        // xorshift64: a fixed pseudo-random sequence
        let mut x: u64 = 99;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut t = FdTable::default();
        let mut m: HashMap<i32, FdUse> = HashMap::new();
        for _ in 0..200_000 {
            let r = next();
            let fd = match r % 4 {
                0 => (r >> 8) as i32 % 16,
                1 => FdTable::SMALL - 8 + (r >> 8) as i32 % 16,
                2 => -((r >> 8) as i32 % 200),
                _ => (r >> 8) as i32 % 300,
            };
            match (r >> 40) % 16 {
                0..=5 => {
                    let u = if (r >> 50) % 2 == 0 {
                        FdUse::Local
                    } else {
                        FdUse::Conn
                    };
                    t.insert(fd, u);
                    m.insert(fd, u);
                }
                6..=10 => {
                    t.remove(fd);
                    m.remove(&fd);
                }
                11 => {
                    t.keep_conns();
                    m.retain(|_, u| *u == FdUse::Conn);
                }
                _ => {}
            }
            assert_eq!(t.contains(fd), m.contains_key(&fd), "fd {fd}");
        }
        for fd in -300..FdTable::SMALL + 300 {
            assert_eq!(t.contains(fd), m.contains_key(&fd), "fd {fd}");
        }
    }

    struct B {
        s: Interner,
        ev: Vec<Event>,
        t: i64,
    }

    impl B {
        fn new() -> Self {
            B {
                s: Interner::new(),
                ev: Vec::new(),
                t: 1_000_000,
            }
        }
        fn push(
            &mut self,
            pid: u32,
            name: &str,
            path: Option<&str>,
            fd: Option<i32>,
            fd_path: Option<&str>,
            ret: i64,
        ) {
            let kind = Kind::from_name(name.as_bytes());
            let name = self.s.intern(name.as_bytes());
            let path = path.map(|p| self.s.intern(p.as_bytes()));
            let fd_path = fd_path.map(|p| self.s.intern(p.as_bytes()));
            self.t += 10;
            let line = self.ev.len() as u64 + 1;
            self.ev.push(Event {
                pid,
                ts_us: Some(self.t),
                dur_us: Some(5),
                kind,
                name,
                path,
                path2: None,
                fd,
                fd_path,
                flags: Flags::default(),
                ret: Ret::Ok(ret),
                ret_path: None,
                mtime: None,
                ctime_us: None,
                input: 0,
                line,
            });
        }
    }

    /// The shape real php-fpm 8.2 shows under `strace -f -ttt -T -y`: master
    /// forks two workers, each accepts and reads the FastCGI header.
    fn fpm_trace(with_accept: bool) -> B {
        let mut b = B::new();
        b.push(10, "execve", Some("/usr/sbin/php-fpm8.2"), None, None, 0);
        b.push(10, "clone", None, None, None, 11);
        b.push(10, "clone", None, None, None, 12);
        b.push(11, "close", None, Some(8), None, 0);
        for (pid, n) in [(11u32, 2), (12, 1)] {
            for _ in 0..n {
                if with_accept {
                    b.push(pid, "accept", None, Some(9), Some("socket:[1]"), 4);
                }
                b.push(pid, "poll", None, None, None, 1);
                b.push(pid, "read", None, Some(4), Some("socket:[2]"), 8);
                b.push(pid, "read", None, Some(4), Some("socket:[2]"), 8);
                b.push(pid, "openat", Some("/srv/index.php"), None, None, 5);
                b.push(pid, "read", None, Some(5), Some("/srv/index.php"), 8);
                b.push(pid, "close", None, Some(5), None, 0);
                b.push(pid, "recvfrom", None, Some(4), None, 0);
                b.push(pid, "close", None, Some(4), None, 0);
            }
        }
        b
    }

    #[test]
    fn fpm_with_accept() {
        let mut b = fpm_trace(true);
        // Shutdown: the worker's next accept is interrupted (`= -1`).
        b.push(11, "accept", None, Some(9), Some("socket:[1]"), -1);
        b.push(11, "exit_group", None, None, None, 0);
        let r = split_requests(&b.ev, &b.s);
        assert_eq!(r.mode, RequestMode::Fpm);
        assert_eq!(r.requests.len(), 3);
        assert!(r.requests.iter().all(|q| q.kind == RequestKind::FpmAccept));
        let pids: Vec<u32> = r.requests.iter().map(|q| q.pid).collect();
        assert_eq!(pids, vec![11, 11, 12]);
        // 9 events each; the worker-11 `close(8)` before its first accept
        // and the master's events are outside.
        for q in &r.requests {
            assert_eq!(q.events.len(), 9);
            assert_eq!(b.ev[q.events[0] as usize].kind, Kind::Accept);
            // start = accept return time (ts + dur).
            let a = &b.ev[q.events[0] as usize];
            assert_eq!(q.start_us, Some(a.ts_us.unwrap() + 5));
        }
        assert!(r
            .requests
            .windows(2)
            .all(|w| w[0].start_us <= w[1].start_us));
    }

    #[test]
    fn fpm_without_accept_uses_header_read() {
        let b = fpm_trace(false);
        let r = split_requests(&b.ev, &b.s);
        assert_eq!(r.mode, RequestMode::Fpm);
        assert_eq!(r.requests.len(), 3);
        assert!(r
            .requests
            .iter()
            .all(|q| q.kind == RequestKind::FpmHeaderRead
                && b.ev[q.events[0] as usize].kind == Kind::Read));
        // The `poll` before a header read still belongs to the previous
        // request of the worker.
        let lens: Vec<usize> = r.requests.iter().map(|q| q.events.len()).collect();
        assert_eq!(lens, vec![8, 7, 7]);
    }

    #[test]
    fn cli_process_with_children() {
        let mut b = B::new();
        b.push(1, "execve", Some("/usr/bin/php"), None, None, 0);
        b.push(1, "openat", Some("/etc/php/8.2/cli/php.ini"), None, None, 3);
        b.push(1, "clone", None, None, None, 2); // a thread/child that stays PHP
        b.push(2, "newfstatat", Some("/a"), None, None, 0);
        b.push(1, "clone", None, None, None, 3); // shell_exec child
        b.push(3, "execve", Some("/bin/sh"), None, None, 0);
        b.push(3, "newfstatat", Some("/b"), None, None, 0);
        b.push(1, "newfstatat", Some("/c"), None, None, 0);
        b.push(5, "execve", Some("/usr/bin/php8.2"), None, None, 0);
        b.push(5, "newfstatat", Some("/d"), None, None, 0);
        let r = split_requests(&b.ev, &b.s);
        assert_eq!(r.mode, RequestMode::Cli);
        assert_eq!(r.requests.len(), 2, "{r:?}");
        assert_eq!(r.requests[0].pid, 1);
        assert_eq!(r.requests[0].events, vec![0, 1, 2, 3, 4, 7]);
        assert_eq!(r.requests[1].pid, 5);
        assert_eq!(r.requests[1].events, vec![8, 9]);
        // As the parser gives it: execve without its path. A child that
        // execs and touches no PHP path is left out; one that opens a
        // script is a request of its own.
        b.push(1, "clone", None, None, None, 6);
        b.push(6, "execve", None, None, None, 0);
        b.push(6, "openat", Some("/usr/lib/x.so"), None, None, 3);
        b.push(1, "clone", None, None, None, 7);
        b.push(7, "execve", None, None, None, 0);
        b.push(7, "openat", Some("/srv/worker.php"), None, None, 3);
        let r = split_requests(&b.ev, &b.s);
        let pids: Vec<u32> = r.requests.iter().map(|q| q.pid).collect();
        assert_eq!(pids, vec![1, 5, 7], "{r:?}");
        assert_eq!(r.requests[0].events, vec![0, 1, 2, 3, 4, 7, 10, 13]);
    }

    #[test]
    fn reads_of_files_and_local_sockets_are_not_boundaries() {
        let mut b = B::new();
        b.push(1, "openat", Some("/srv/x.txt"), None, None, 3);
        b.push(1, "read", None, Some(3), None, 8);
        b.push(1, "socket", None, None, None, 4);
        b.push(1, "read", None, Some(4), None, 8);
        b.push(1, "read", None, Some(0), None, 8);
        b.push(1, "read", None, Some(7), Some("/srv/y"), 8);
        let r = split_requests(&b.ev, &b.s);
        assert_eq!(r.mode, RequestMode::Whole);
        assert_eq!(r.requests.len(), 1);
        assert_eq!(r.requests[0].events.len(), 6);
        assert!(r.note.contains("whole trace"));
    }

    /// Parsed with `Options::fd_paths` off, events carry the flags of their
    /// decorations instead of the texts: the split is the same (a file read
    /// of 8 bytes is no FastCGI header either way).
    #[test]
    fn decoration_flags_split_as_decoration_texts() {
        let mut b = fpm_trace(false);
        b.push(11, "openat", Some("/srv/x.php"), None, None, 7);
        b.push(11, "read", None, Some(7), Some("/srv/x.php"), 8);
        b.push(12, "read", None, Some(7), Some("/srv/x.php"), 8);
        let with_texts = split_requests(&b.ev, &b.s);
        let mut flagged = b.ev.clone();
        for e in &mut flagged {
            if let Some(p) = e.fd_path.take() {
                e.flags.set(Flags::DECORATED);
                if b.s.bytes(p).starts_with(b"/") {
                    e.flags.set(Flags::FD_FILE);
                }
            }
        }
        let with_flags = split_requests(&flagged, &b.s);
        assert_eq!(with_flags.mode, with_texts.mode);
        let events = |r: &Requests| {
            r.requests
                .iter()
                .map(|q| q.events.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(events(&with_flags), events(&with_texts));
        // Without the flag, the same file reads would open requests.
        for e in &mut flagged {
            e.flags = Flags::default();
        }
        assert_ne!(events(&split_requests(&flagged, &b.s)), events(&with_texts));
    }

    #[test]
    fn pid_slots_are_dense_and_stable_past_the_pid_cache() {
        // Pids that share a cache entry (equal modulo PID_CACHE), more
        // pids than the cache holds, and a forked child that gets its slot
        // at the fork, before its first event.
        let mut b = B::new();
        let pids: Vec<u32> = (0..3 * PID_CACHE as u32)
            .map(|k| 1000 + (k % 3) * PID_CACHE as u32 + k / 3)
            .collect();
        for &p in &pids {
            b.push(p, "getpid", None, None, None, p as i64);
        }
        b.push(pids[0], "clone", None, None, None, 99_999);
        b.push(99_999, "getpid", None, None, None, 99_999);
        for &p in pids.iter().rev() {
            b.push(p, "getpid", None, None, None, p as i64);
        }
        let mut sp = Splitter::new();
        let mut slot_of: HashMap<u32, usize> = HashMap::new();
        for ev in &b.ev {
            let (_, si) = sp.push_slot(ev, &b.s);
            let next = slot_of.len();
            assert_eq!(*slot_of.entry(ev.pid).or_insert(next), si, "pid {}", ev.pid);
        }
        // First-seen order: the pids in their order, then the child.
        for (k, &p) in pids.iter().enumerate() {
            assert_eq!(slot_of[&p], k);
        }
        assert_eq!(slot_of[&99_999], pids.len());
    }

    #[test]
    fn pid_cache_empty_entries_match_no_pid() {
        // Pids equal to the initial contents of cache entries (entry `i`
        // starts as pid `i + 1`, slot 0) and pid 0: each must get its own
        // slot, never slot 0 from an untouched entry.
        let mut b = B::new();
        let pids = [500u32, 0, 1, 2, 63, 64, 65, 127, 128, u32::MAX];
        for _ in 0..2 {
            for &p in &pids {
                b.push(p, "getpid", None, None, None, 0);
            }
        }
        let mut sp = Splitter::new();
        for (k, ev) in b.ev.iter().enumerate() {
            let (_, si) = sp.push_slot(ev, &b.s);
            assert_eq!(si, k % pids.len(), "pid {}", ev.pid);
        }
    }

    #[test]
    fn cli_settings_of_a_command_line() {
        let f = |args: &[&str]| {
            let mut b = Vec::new();
            for a in args {
                b.extend_from_slice(a.as_bytes());
                b.push(0);
            }
            cli_settings(&b).map(|s| s.to_vec())
        };
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            f(&[
                "/bin/php",
                "php",
                "-d",
                "open_basedir=/srv:/tmp",
                "-d",
                "realpath_cache_size=0",
                "/srv/x.php"
            ]),
            Some(vec![
                kv("open_basedir", "/srv:/tmp"),
                kv("realpath_cache_size", "0")
            ])
        );
        // -dKEY, KEY alone, options with a value, the end of PHP's options,
        // keys the model does not use
        assert_eq!(
            f(&[
                "/usr/bin/php8.2",
                "php8.2",
                "-n",
                "-dopcache.enable_cli",
                "-c",
                "/etc/x.ini",
                "-d",
                "date.timezone=UTC",
                "-f",
                "x.php",
                "-d",
                "realpath_cache_size=0"
            ]),
            Some(vec![kv("opcache.enable_cli", "1")])
        );
        assert_eq!(
            f(&["/bin/php", "php", "x.php", "-d", "realpath_cache_size=0"]),
            None
        );
        assert_eq!(
            f(&[
                "/usr/sbin/php-fpm8.2",
                "php-fpm",
                "-d",
                "realpath_cache_size=0"
            ]),
            None
        );
        assert_eq!(f(&["/usr/bin/date", "date", "-d", "yesterday"]), None);
        assert_eq!(f(&["/bin/php", "php", "-d"]), None);
        assert_eq!(
            f(&["/bin/php", "php", "-d", "realpath_cache_size=lots"]),
            None
        );
        assert_eq!(cli_settings(b""), None);
    }

    #[test]
    fn empty_trace() {
        let r = split_requests(&[], &Interner::new());
        assert_eq!(r.mode, RequestMode::Whole);
        assert!(r.requests.is_empty());
    }

    #[test]
    fn streaming_matches_batch_units() {
        let b = fpm_trace(true);
        let mut sp = Splitter::new();
        let units: Vec<UnitId> = b.ev.iter().map(|e| sp.push(e, &b.s)).collect();
        assert_eq!(sp.events(), b.ev.len() as u64);
        let plan = sp.finish();
        let r = split_requests(&b.ev, &b.s);
        for (ri, q) in r.requests.iter().enumerate() {
            for &i in &q.events {
                assert_eq!(
                    plan.unit_request[units[i as usize].0 as usize],
                    Some(ri as u32)
                );
            }
            assert_eq!(plan.requests[ri].events, q.events.len() as u64);
        }
    }
}
