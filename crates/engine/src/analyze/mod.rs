//! `analyze`: events in, a [`Profile`] out (counts, times, paths, requests,
//! realpath walks, repeats, bursts) plus [`Finding`]s. Rendering lives in
//! `render`; this module never prints.
//!
//! [`Analyzer`] is a streaming sink: each event costs a few array and hash
//! operations on interned ids, and memory is bounded by the number of
//! distinct paths, names and pids, never by the number of lines or of
//! requests: the split lets each request piece go as its process moves on
//! (`Splitter::streaming`), and the requests' rows wait in a sorted spill
//! (`crate::sorted`) until the report lists them.

mod build;
pub mod findings;
pub mod pids;
mod profile;
pub mod read;
mod rows;

pub use build::find_bursts;
pub use findings::Finding;
pub use profile::*;
pub use rows::{RequestsSummary, Rows};

use rayon::prelude::*;
use statstorm_php::request::{Closed, Splitter, StreamPlan, UnitId};
use statstorm_trace::event::FastHash;
use statstorm_trace::{Event, Flags, Interner, Kind, PathId};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};

/// JSON schema name of [`Profile`].
pub const SCHEMA: &str = "statstorm.analyze/1";

/// A burst second has at least `BURST_FACTOR` times the median metadata
/// calls per second of the traced span ...
pub const BURST_FACTOR: f64 = 5.0;
/// ... and at least this many calls.
pub const BURST_MIN_CALLS: u64 = 20;
/// Burst seconds closer than this merge into one burst.
pub const BURST_GAP_S: i64 = 2;

/// `PathHot::kind` of an id not seen as a path yet ...
const KIND_UNSEEN: u8 = 0;
/// ... of a path ...
const KIND_PATH: u8 = 1;
/// ... and of the empty string (`AT_EMPTY_PATH`: no path).
const KIND_EMPTY: u8 = 2;

/// Per-syscall-name totals.
#[derive(Default, Clone, Debug)]
struct NameAgg {
    calls: u64,
    errors: u64,
    time_us: u64,
    timed: u64,
    /// (errno id, count), few entries.
    errnos: Vec<(u32, u64)>,
    /// The name as printed (set on its first call).
    name: Option<PathId>,
}

/// Entries of `Analyzer::kinds`: one per decoded kind (`Kind::Other`'s
/// slot unused). A fixed-size array indexed by the kind's discriminant
/// needs no bounds check per event, and the name sits in the same record
/// (was a second `Vec` with its own check).
const N_KINDS: usize = Kind::ALL.len() + 1;

/// The per-event counters of one path, one cache line per path, indexed by
/// the path's id: every event with a path touches exactly this record, and
/// nothing else of the path (its walk counts, rarely touched, are in
/// `Analyzer::walks`).
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct PathHot {
    calls: u64,
    enoent: u64,
    errors: u64,
    /// Calls per name id: up to three inline, the rest in
    /// `Analyzer::path_more[more]` (`NO_MORE`: none). An inline counter
    /// that reaches `u32::MAX` continues there under the same key.
    names: [(u32, u32); 3],
    n: u8,
    /// `KIND_*`: whether this id is a path (decided on first sight).
    kind: u8,
    more: u32,
    /// The last `ProcAgg::seen_gen` that stat'ed this path: equal to the
    /// current generation of a process means its request piece stat'ed
    /// the path already (a repeat, no set lookup needed). When another
    /// generation takes the path over while this one is still current,
    /// the path goes into the process's `ProcAgg::seen` set.
    seen_gen: u64,
}

const NO_MORE: u32 = u32::MAX;

/// `Analyzer::name_ix` of a name id not seen yet.
const NO_NAME: u32 = u32::MAX;

impl PathHot {
    fn new() -> Self {
        PathHot {
            calls: 0,
            enoent: 0,
            errors: 0,
            names: [(0, 0); 3],
            n: 0,
            kind: KIND_UNSEEN,
            more: NO_MORE,
            seen_gen: 0,
        }
    }

    #[inline]
    fn bump(&mut self, key: u32, more: &mut Vec<Vec<(u32, u64)>>) {
        let mut full = false;
        for e in &mut self.names[..self.n as usize] {
            if e.0 == key {
                if e.1 < u32::MAX {
                    e.1 += 1;
                    return;
                }
                full = true;
                break;
            }
        }
        if !full && (self.n as usize) < self.names.len() {
            self.names[self.n as usize] = (key, 1);
            self.n += 1;
            return;
        }
        if self.more == NO_MORE {
            self.more = more.len() as u32;
            more.push(Vec::new());
        }
        bump(&mut more[self.more as usize], key);
    }

    /// [`PathHot::bump`] by `n` (a count of a counts capture). A sum that
    /// would not fit an inline counter goes to `more` under the same key.
    fn bump_by(&mut self, key: u32, n: u64, more: &mut Vec<Vec<(u32, u64)>>) {
        let inline = self.names[..self.n as usize]
            .iter()
            .position(|e| e.0 == key);
        match inline {
            Some(i) => {
                let sum = self.names[i].1 as u64 + n;
                if sum <= u32::MAX as u64 {
                    self.names[i].1 = sum as u32;
                    return;
                }
            }
            None if (self.n as usize) < self.names.len() && n <= u32::MAX as u64 => {
                self.names[self.n as usize] = (key, n as u32);
                self.n += 1;
                return;
            }
            None => {}
        }
        if self.more == NO_MORE {
            self.more = more.len() as u32;
            more.push(Vec::new());
        }
        bump_by(&mut more[self.more as usize], key, n);
    }

    fn iter<'a>(&'a self, more: &'a [Vec<(u32, u64)>]) -> impl Iterator<Item = (u32, u64)> + 'a {
        let extra: &[(u32, u64)] = match self.more {
            NO_MORE => &[],
            m => &more[m as usize],
        };
        self.names[..self.n as usize]
            .iter()
            .map(|&(k, c)| (k, c as u64))
            .chain(extra.iter().copied())
    }
}

#[derive(Clone, Debug)]
struct ProcAgg {
    pid: u32,
    events: u64,
    metadata: u64,
    errors: u64,
    time_us: u64,
    metadata_time_us: u64,
    /// Earliest timestamp and latest end (`ts + dur`) of the pid's events,
    /// meaningful when `timed` (an event with a timestamp was seen): from
    /// `i64::MAX` / `i64::MIN`, so each event is a plain min and max, not
    /// two `Option` matches.
    first_us: i64,
    last_us: i64,
    timed: bool,
    /// Current realpath-walk run of this pid.
    run: Run,
    unit: u32,
    /// Changes whenever the pid's `seen` set starts empty (new request
    /// piece, exit): see `PathHot::seen_gen`. Never 0 once the process
    /// has an event.
    seen_gen: u64,
    /// What the process's current unit (request piece) needs while it
    /// runs, kept here rather than per unit (a unit's events all come
    /// from its process, `Splitter::push_slot`): its calls per name
    /// until the unit is settled ...
    names: NameCounts,
    /// ... the paths stat'ed in it whose `PathHot::seen_gen` another
    /// generation has since taken over (emptied when the unit ends): with
    /// the paths whose `seen_gen` is still the process's generation,
    /// these are the paths stat'ed in the unit. Only paths taken over go
    /// in, not every path stat'ed: most never are, and inserting each
    /// into a set of its own piece was 5% of the merging thread's time on
    /// the bench log ...
    seen: HashSet<PathId, FastHash>,
    /// ... and the files resolved by a walk in it.
    walked: HashSet<PathId, FastHash>,
    /// The current unit's counts ...
    cur: UnitAgg,
    /// ... and those of the process's units that were no request by
    /// themselves (startup, idle, a php-cli process), folded as they
    /// closed (`names` unused: their calls per name index are in
    /// `rest_names`): what the end of the trace makes a request of.
    rest: UnitAgg,
    rest_names: Vec<u64>,
}

#[derive(Clone, Debug, Default)]
struct Run {
    len: u32,
    first: Option<PathId>,
    prev: Option<PathId>,
    /// -1: each path is the parent of the previous (deepest first, R53);
    /// +1: each is a child of the previous (shallowest first); 0: unknown.
    dir: i8,
}

#[derive(Default, Clone, Debug)]
struct UnitAgg {
    /// The unit's calls per syscall name: an id into
    /// `Analyzer::tallies` (0: none yet), settled when its process moves
    /// on (`Analyzer::settle_names`); until then they count in the
    /// process's `ProcAgg::names`. A unit kept per request piece for the
    /// whole run is 64 bytes, not a vector of counts each.
    names: u32,
    metadata: u64,
    enoent: u64,
    walks: u64,
    walk_lstats: u64,
    repeats: u64,
    metadata_time_us: u64,
    /// Walks of a file already walked in this unit.
    rewalks: u64,
}

/// The row of request `r` whose units' counts are `u`, its calls per name
/// the list `names` (`Tallies`).
fn row_of(r: &statstorm_php::request::RequestInfo, u: &UnitAgg, names: u32) -> rows::RowRec {
    rows::RowRec {
        pid: r.pid,
        kind: r.kind,
        start_us: r.start_us,
        end_us: r.end_us,
        events: r.events,
        first_event: r.first_event,
        metadata: u.metadata,
        enoent: u.enoent,
        names,
        walks: u.walks,
        walk_lstats: u.walk_lstats,
        repeats: u.repeats,
        metadata_time_us: u.metadata_time_us,
    }
}

impl UnitAgg {
    /// Adds `o`'s counts (not its calls per name).
    fn add(&mut self, o: &UnitAgg) {
        self.metadata += o.metadata;
        self.enoent += o.enoent;
        self.walks += o.walks;
        self.walk_lstats += o.walk_lstats;
        self.repeats += o.repeats;
        self.metadata_time_us += o.metadata_time_us;
        self.rewalks += o.rewalks;
    }
}

/// Metadata calls counted in the current second `s` of the time series
/// (`n` calls, none yet when 0), and the timestamps of that second,
/// `lo..=hi`: a call inside is two compares instead of a division by 10^6
/// per metadata call. A second whose start does not fit an i64 (the first
/// of the range) gets the empty range and goes the slow way every time.
#[derive(Clone, Copy, Debug)]
struct CurSec {
    s: i64,
    n: u64,
    lo: i64,
    hi: i64,
}

impl CurSec {
    const EMPTY: CurSec = CurSec {
        s: 0,
        n: 0,
        lo: i64::MAX,
        hi: i64::MIN,
    };
}

/// Streaming aggregation of a trace.
pub struct Analyzer {
    splitter: Splitter,
    kinds: Box<[NameAgg; N_KINDS]>,
    /// Totals of the names of `Kind::Other` calls, by dense name index
    /// (`name_ix`): a vector, not a map by name id, so the event's index,
    /// needed anyway, finds its entry (a hash lookup per call before).
    other: Vec<NameAgg>,
    /// Dense index of each syscall name id, in order of first sight
    /// (`NO_NAME`: not seen), grown on demand; `ix_name` maps back.
    name_ix: Vec<u32>,
    ix_name: Vec<u32>,
    /// Per string id (grown on demand): the per-event counters, and whether
    /// the id is a path (the interner is read once per distinct id). Indexed
    /// by id rather than through a table of slots: one cache miss per event
    /// instead of two dependent ones.
    /// Per slot: the per-event counters ...
    path_hot: Vec<PathHot>,
    /// The directory of each path (`dir_of`), interned when the path is
    /// first seen (its bytes are in cache then), and each path's index in
    /// it (`path_dir[path id]`, valid for `KIND_PATH`): the end of the run
    /// adds up directories by index instead of hashing each path's
    /// directory, which took 120 of 196 ms on a trace of 150,000
    /// directories.
    dirs: Interner,
    path_dir: Vec<u32>,
    /// Per string id, realpath walks that resolved it and their lstat
    /// calls (grown on demand, only to the ids walks resolve) ...
    walks: Vec<(u64, u64)>,
    /// ... and name counts beyond the three inline ones.
    path_more: Vec<Vec<(u32, u64)>>,
    /// Per pid slot of the splitter (`Splitter::push_slot`), grown on
    /// demand; a record with no events is no process yet (a slot of a
    /// forked child not seen in an event, or beyond). Indexed by the slot
    /// itself, not through a slot-to-process table: one array lookup per
    /// event instead of two (push 79.0 M -> 77.2 M instructions on a
    /// 201k-event fpm trace).
    procs: Vec<ProcAgg>,
    /// The slots of `procs` in order of their first event (the order of
    /// the processes in the profile) ...
    proc_order: Vec<u32>,
    /// ... and the slot of each pid, for `exit`.
    proc_index: HashMap<u32, usize, FastHash>,
    /// Generations handed out (`ProcAgg::seen_gen`: this count in the
    /// high 32 bits, the process's slot in the low ones, so a generation
    /// names its process without a table per generation).
    next_gen: u64,
    /// The requests made so far, each as its unit closed
    /// (`Splitter::streaming`): at most the spill's bound in memory.
    rows: rows::RowSpill,
    /// The list ids (`tallies`) the requests hold.
    row_lists: HashSet<u32, FastHash>,
    /// Writing the requests out failed: the first error (reported by
    /// `read::Reading::finish`).
    rows_error: Option<std::io::Error>,
    /// Over every unit closed: repeats and walks of a file walked before.
    total_repeats: u64,
    rewalks: u64,
    /// The settled units' calls per name, each distinct list once
    /// (requests repeat their counts).
    tallies: Tallies,
    per_sec: HashMap<i64, u64, FastHash>,
    cur_sec: CurSec,
    walks_deepest_first: u64,
    walks_shallowest_first: u64,
    events: u64,
    metadata: u64,
    durations: bool,
    timestamps: bool,
    enoent_id: Option<PathId>,
    /// `strace -Y`: each pid's last command name.
    comms: HashMap<u32, String, FastHash>,
    /// Counts captures read ([`Analyzer::push_counted`]).
    counted: CountedAgg,
}

/// What the counts of counts captures added up to, beyond the totals.
#[derive(Clone, Debug, Default)]
struct CountedAgg {
    /// Count lines pushed.
    lines: u64,
    /// Distinct windows (a new window start from the last one seen) and
    /// their summed length.
    windows: u64,
    window_us: u64,
    last_window: Option<(i64, i64)>,
    /// Calls counted without process, path or result (the kernel's map
    /// was full).
    map_full: u64,
    /// `accept`/`accept4` calls that returned a connection.
    accepts: u64,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::new()
    }
}

fn kind_index(k: Kind) -> usize {
    k as usize
}

fn bump_by(v: &mut Vec<(u32, u64)>, key: u32, n: u64) {
    match v.iter_mut().find(|e| e.0 == key) {
        Some(e) => e.1 += n,
        None => v.push((key, n)),
    }
}

fn bump(v: &mut Vec<(u32, u64)>, key: u32) {
    for e in v.iter_mut() {
        if e.0 == key {
            e.1 += 1;
            return;
        }
    }
    v.push((key, 1));
}

/// Calls per syscall name of a process's current request piece, indexed by the name's
/// dense index (`Analyzer::name_ix`), grown on demand. Replaces a list of
/// (name id, count) searched linearly per event: a request piece sees tens
/// of names, so most events scanned past the three inline entries into the
/// rest (~30 instructions per event on a 200k-event fpm trace).
#[derive(Clone, Debug, Default)]
struct NameCounts(Vec<u64>);

impl NameCounts {
    #[inline]
    fn bump(&mut self, ix: usize) {
        match self.0.get_mut(ix) {
            Some(c) => *c += 1,
            None => self.grow_bump(ix),
        }
    }

    #[inline(never)]
    fn grow_bump(&mut self, ix: usize) {
        self.0.resize(ix + 1, 0);
        self.0[ix] += 1;
    }
}

/// Settled calls per name (`UnitAgg::names`): each distinct list once, as
/// (dense name index, calls) pairs in postcard's varints, found by its bytes.
/// Id 0 is the empty list.
#[derive(Debug)]
struct Tallies {
    lists: Vec<std::sync::Arc<[u8]>>,
    ids: HashMap<std::sync::Arc<[u8]>, u32, FastHash>,
    buf: Vec<u8>,
}

impl Default for Tallies {
    fn default() -> Self {
        Tallies {
            lists: vec![std::sync::Arc::from(&[][..])],
            ids: HashMap::default(),
            buf: Vec::new(),
        }
    }
}

impl Tallies {
    /// The id of the list of `counts` (by dense index; zeros left out).
    fn add(&mut self, counts: &[u64]) -> u32 {
        let pairs: Vec<(u32, u64)> = counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(ix, &c)| (ix as u32, c))
            .collect();
        if pairs.is_empty() {
            return 0;
        }
        self.buf.clear();
        self.buf = match postcard::to_extend(&pairs, std::mem::take(&mut self.buf)) {
            Ok(b) => b,
            // (writing to a vector does not fail)
            Err(_) => return 0,
        };
        if let Some(&id) = self.ids.get(&self.buf[..]) {
            return id;
        }
        let list: std::sync::Arc<[u8]> = std::sync::Arc::from(&self.buf[..]);
        let id = self.lists.len() as u32;
        self.lists.push(list.clone());
        self.ids.insert(list, id);
        id
    }

    /// (dense name index, calls) of list `id`.
    fn get(&self, id: u32) -> impl Iterator<Item = (u32, u64)> + '_ {
        let b: &[u8] = self.lists.get(id as usize).map_or(&[], |l| l);
        let pairs: Vec<(u32, u64)> = if b.is_empty() {
            Vec::new()
        } else {
            postcard::from_bytes(b).unwrap_or_default()
        };
        pairs.into_iter()
    }

    /// (name id, calls) of list `id`, given the dense index's name ids.
    fn names<'a>(&'a self, id: u32, ix_name: &'a [u32]) -> impl Iterator<Item = (u32, u64)> + 'a {
        self.get(id)
            .filter_map(move |(ix, c)| ix_name.get(ix as usize).map(|&n| (n, c)))
    }
}

/// The lstat-like calls that make up a realpath walk (R53: `tsrm_realpath_r`
/// lstat()s; glibc 2.36 issues lstat as `newfstatat(..., AT_SYMLINK_NOFOLLOW)`).
fn is_lstat_like(ev: &Event) -> bool {
    match ev.kind {
        Kind::Lstat => true,
        Kind::Newfstatat | Kind::Fstatat64 | Kind::Statx => {
            ev.flags.has(Flags::AT_SYMLINK_NOFOLLOW) && !ev.flags.has(Flags::AT_EMPTY_PATH)
        }
        _ => false,
    }
}

/// `parent` is `child` with its last component removed (`/a/b` of `/a/b/c`;
/// `/a` of `/a/b/`).
pub fn is_parent(parent: &[u8], child: &[u8]) -> bool {
    let child = match child {
        [rest @ .., b'/'] if !rest.is_empty() => rest,
        c => c,
    };
    if parent.is_empty() || parent.len() >= child.len() || !child.starts_with(parent) {
        return false;
    }
    let rest = &child[parent.len()..];
    // parent "/" is never walked (R53), but a relative walk may end at "a".
    if parent == b"/" {
        return false;
    }
    rest.len() > 1 && rest[0] == b'/' && !rest[1..].contains(&b'/')
}

/// Directory part of a path as printed: `/a/b` for `/a/b/c`, `/` for `/c`,
/// `.` for a bare name.
pub fn dir_of(p: &[u8]) -> &[u8] {
    let p = match p {
        [rest @ .., b'/'] if !rest.is_empty() => rest,
        c => c,
    };
    match memchr::memrchr(b'/', p) {
        Some(0) => b"/",
        Some(i) => &p[..i],
        None => b".",
    }
}

impl Analyzer {
    pub fn new() -> Self {
        Analyzer {
            splitter: Splitter::streaming(),
            kinds: Box::new(std::array::from_fn(|_| NameAgg::default())),
            other: Vec::new(),
            name_ix: Vec::new(),
            ix_name: Vec::new(),
            path_hot: Vec::new(),
            dirs: Interner::new(),
            path_dir: Vec::new(),
            walks: Vec::new(),
            path_more: Vec::new(),
            procs: Vec::new(),
            proc_order: Vec::new(),
            proc_index: HashMap::default(),
            next_gen: 0,
            rows: rows::RowSpill::new(),
            row_lists: HashSet::default(),
            rows_error: None,
            total_repeats: 0,
            rewalks: 0,
            tallies: Tallies::default(),
            per_sec: HashMap::default(),
            cur_sec: CurSec::EMPTY,
            walks_deepest_first: 0,
            walks_shallowest_first: 0,
            events: 0,
            metadata: 0,
            durations: false,
            timestamps: false,
            enoent_id: None,
            comms: HashMap::default(),
            counted: CountedAgg::default(),
        }
    }

    /// Whether id `p` is a path (not the empty string), decided on first
    /// sight; its counters exist afterwards.
    #[inline]
    fn is_path(&mut self, p: PathId, strings: &Interner) -> bool {
        let i = p.0 as usize;
        if i >= self.path_hot.len() {
            self.path_hot.resize(i + 1, PathHot::new());
        }
        let kind = self.path_hot[i].kind;
        if kind == KIND_UNSEEN {
            return self.first_sight(p, strings);
        }
        kind == KIND_PATH
    }

    /// [`Analyzer::is_path`] for an id not seen before: its kind, and for a
    /// path its directory's index.
    #[inline(never)]
    fn first_sight(&mut self, p: PathId, strings: &Interner) -> bool {
        let i = p.0 as usize;
        let bytes = strings.bytes(p);
        if bytes.is_empty() {
            self.path_hot[i].kind = KIND_EMPTY;
            return false;
        }
        self.path_hot[i].kind = KIND_PATH;
        let d = self.dirs.intern(dir_of(bytes)).0;
        if i >= self.path_dir.len() {
            self.path_dir.resize(i + 1, u32::MAX);
        }
        self.path_dir[i] = d;
        true
    }

    /// Fetches the per-path records of string ids `ids` into the cache.
    pub fn prefetch(&self, ids: &[u32]) {
        for &i in ids {
            if let Some(h) = self.path_hot.get(i as usize) {
                statstorm_trace::event::prefetch(h);
            }
        }
    }

    /// Dense index of syscall name id `id`, assigned on first sight.
    #[inline]
    fn name_index(&mut self, id: u32) -> usize {
        match self.name_ix.get(id as usize) {
            Some(&ix) if ix != NO_NAME => ix as usize,
            _ => self.new_name_index(id),
        }
    }

    #[inline(never)]
    fn new_name_index(&mut self, id: u32) -> usize {
        let i = id as usize;
        if i >= self.name_ix.len() {
            self.name_ix.resize(i + 1, NO_NAME);
        }
        let ix = self.ix_name.len();
        self.name_ix[i] = ix as u32;
        self.ix_name.push(id);
        ix
    }

    /// Index in `procs` of the pid in the splitter's slot `si` (`si`
    /// itself), created on first sight.
    #[inline]
    fn proc_slot(&mut self, pid: u32, si: usize) -> usize {
        match self.procs.get(si) {
            Some(p) if p.events > 0 => si,
            _ => self.new_proc(pid, si),
        }
    }

    #[inline(never)]
    fn new_proc(&mut self, pid: u32, si: usize) -> usize {
        if si >= self.procs.len() {
            self.procs.resize_with(si + 1, || ProcAgg::new(0));
        }
        self.procs[si].pid = pid;
        self.proc_order.push(si as u32);
        self.proc_index.insert(pid, si);
        si
    }
}

impl ProcAgg {
    fn new(pid: u32) -> Self {
        ProcAgg {
            pid,
            events: 0,
            metadata: 0,
            errors: 0,
            time_us: 0,
            metadata_time_us: 0,
            first_us: i64::MAX,
            last_us: i64::MIN,
            timed: false,
            run: Run::default(),
            unit: u32::MAX,
            seen_gen: 0,
            names: NameCounts::default(),
            seen: HashSet::default(),
            walked: HashSet::default(),
            cur: UnitAgg::default(),
            rest: UnitAgg::default(),
            rest_names: Vec::new(),
        }
    }
}

impl Analyzer {
    fn close_run(&mut self, pi: usize) {
        let run = std::mem::take(&mut self.procs[pi].run);
        let unit = self.procs[pi].unit;
        if run.len < 2 {
            return;
        }
        let (Some(first), Some(last)) = (run.first, run.prev) else {
            return;
        };
        let resolved = if run.dir < 0 {
            self.walks_deepest_first += 1;
            first
        } else {
            self.walks_shallowest_first += 1;
            last
        };
        let i = resolved.0 as usize;
        if i >= self.walks.len() {
            self.walks.resize(i + 1, (0, 0));
        }
        self.walks[i].0 += 1;
        self.walks[i].1 += run.len as u64;
        let pr = &mut self.procs[pi];
        let again = !pr.walked.insert(resolved);
        if unit != u32::MAX {
            let u = &mut pr.cur;
            u.walks += 1;
            u.walk_lstats += run.len as u64;
            if again {
                u.rewalks += 1;
            }
        }
    }

    /// The process `pi` moved to `unit`: its walk ends, and the old
    /// unit's path sets are no longer needed. Out of line: once per
    /// request piece, not per event.
    #[inline(never)]
    fn enter_unit(&mut self, pi: usize, unit: u32) {
        self.close_run(pi);
        self.settle_names(pi);
        // the unit the splitter let go as this event began another
        while let Some(c) = self.splitter.pop_closed() {
            self.close_unit(c);
        }
        let pr = &mut self.procs[pi];
        pr.seen = HashSet::default();
        pr.walked = HashSet::default();
        pr.unit = unit;
        self.new_gen(pi);
    }

    /// The calls per name of process `pi`'s current unit go into the
    /// unit's record (added to what it had, if anything).
    fn settle_names(&mut self, pi: usize) {
        let pr = &mut self.procs[pi];
        if pr.unit == u32::MAX {
            return;
        }
        let u = &mut pr.cur;
        if pr.names.0.iter().all(|&c| c == 0) {
            return;
        }
        if u.names != 0 {
            for (ix, c) in self.tallies.get(u.names) {
                if let Some(x) = pr.names.0.get_mut(ix as usize) {
                    *x += c;
                } else {
                    pr.names.0.resize(ix as usize + 1, 0);
                    pr.names.0[ix as usize] = c;
                }
            }
        }
        u.names = self.tallies.add(&pr.names.0);
        pr.names.0.clear();
    }

    /// Process slot `pi` starts a new generation (its `seen` set was just
    /// emptied).
    fn new_gen(&mut self, pi: usize) {
        self.next_gen += 1;
        self.procs[pi].seen_gen = self.next_gen << 32 | pi as u64;
    }

    /// A path stat'ed under generation `old` is now stat'ed under another:
    /// if `old` is still its process's current generation, the path goes
    /// into that process's request piece's `seen` set, which then stands
    /// for `PathHot::seen_gen` (see `ProcAgg::seen`). A generation no
    /// longer current had its set emptied; nothing is kept for it.
    #[inline(never)]
    fn take_over(&mut self, old: u64, p: PathId) {
        let owner = (old & u64::from(u32::MAX)) as usize;
        let Some(pr) = self.procs.get_mut(owner) else {
            return;
        };
        if pr.seen_gen == old && pr.unit != u32::MAX {
            pr.seen.insert(p);
        }
    }

    /// Adds the current second's count to `per_sec`.
    fn flush_sec(&mut self) {
        let c = std::mem::replace(&mut self.cur_sec, CurSec::EMPTY);
        if c.n > 0 {
            *self.per_sec.entry(c.s).or_insert(0) += c.n;
        }
    }

    /// A metadata call at `ts` outside the current second's range.
    #[inline(never)]
    fn sec_miss(&mut self, ts: i64) {
        let s = ts.div_euclid(1_000_000);
        let c = &mut self.cur_sec;
        if c.n > 0 && c.s == s {
            // Only when the range could not be represented (see CurSec).
            c.n += 1;
            return;
        }
        if c.n > 0 {
            *self.per_sec.entry(c.s).or_insert(0) += c.n;
        }
        let (lo, hi) = match s.checked_mul(1_000_000) {
            Some(lo) => (lo, lo.saturating_add(999_999)),
            None => (i64::MAX, i64::MIN),
        };
        self.cur_sec = CurSec { s, n: 1, lo, hi };
    }

    /// The event's errno id, and whether it is ENOENT (whose id is
    /// learned on first sight).
    #[inline(always)]
    fn errno_of(&mut self, ev: &Event, strings: &Interner) -> (Option<PathId>, bool) {
        let errno = ev.errno().map(|e| e.0);
        if self.enoent_id.is_none() {
            if let Some(e) = errno {
                if strings.bytes(e) == b"ENOENT" {
                    self.enoent_id = Some(e);
                }
            }
        }
        (errno, errno.is_some() && errno == self.enoent_id)
    }

    /// The totals of the event's syscall name (dense index `nix`), its
    /// name set on first sight.
    #[inline(always)]
    fn name_agg(&mut self, ev: &Event, nix: usize) -> &mut NameAgg {
        let na = if ev.kind == Kind::Other {
            if nix >= self.other.len() {
                self.other.resize_with(nix + 1, NameAgg::default);
            }
            &mut self.other[nix]
        } else {
            &mut self.kinds[kind_index(ev.kind)]
        };
        if na.name.is_none() {
            na.name = Some(ev.name);
        }
        na
    }

    /// Adds one event (input order).
    pub fn push(&mut self, ev: &Event, strings: &Interner) {
        let (UnitId(unit), si) = self.splitter.push_slot(ev, strings);
        self.events += 1;
        let metadata = ev.kind.is_metadata();
        let (errno, enoent) = self.errno_of(ev, strings);
        // `newfstatat(fd, "", ..., AT_EMPTY_PATH)` is an fstat: no path.
        let path = ev.path.filter(|&p| self.is_path(p, strings));

        // Totals by name.
        let nix = self.name_index(ev.name.0);
        let na = self.name_agg(ev, nix);
        na.calls += 1;
        if let Some(e) = errno {
            na.errors += 1;
            bump(&mut na.errnos, e.0);
        }
        if let Some(d) = ev.dur_us {
            na.time_us += d;
            na.timed += 1;
            self.durations = true;
        }

        // Time series.
        if let Some(ts) = ev.ts_us {
            self.timestamps = true;
            if metadata {
                let c = &mut self.cur_sec;
                if c.lo <= ts && ts <= c.hi {
                    c.n += 1;
                } else {
                    self.sec_miss(ts);
                }
            }
        }
        if metadata {
            self.metadata += 1;
        }

        // Process.
        let pi = self.proc_slot(ev.pid, si);
        if self.procs[pi].unit != unit {
            self.enter_unit(pi, unit);
        }
        // One borrow of the process record for the rest of the event (its
        // counters, generation and walk run), instead of re-indexing
        // `procs[pi]` with a bounds check for each use.
        let pr = &mut self.procs[pi];
        {
            pr.events += 1;
            if metadata {
                pr.metadata += 1;
            }
            if errno.is_some() {
                pr.errors += 1;
            }
            if let Some(d) = ev.dur_us {
                pr.time_us += d;
                if metadata {
                    pr.metadata_time_us += d;
                }
            }
            if let Some(ts) = ev.ts_us {
                pr.first_us = pr.first_us.min(ts);
                let end = ts + ev.dur_us.unwrap_or(0) as i64;
                pr.last_us = pr.last_us.max(end);
                pr.timed = true;
            }
        }
        let gen = pr.seen_gen;

        // Unit (request piece) and path: the path's record is fetched once
        // for its counters and its repeat check. `taken`: the generation a
        // stat'ed path was taken from, when it was not this one.
        let mut taken = None;
        {
            pr.names.bump(nix);
            let u = &mut pr.cur;
            if metadata {
                u.metadata += 1;
                u.metadata_time_us += ev.dur_us.unwrap_or(0);
            }
            if enoent {
                u.enoent += 1;
            }
            if let Some(p) = path {
                let pa = &mut self.path_hot[p.0 as usize];
                pa.calls += 1;
                if errno.is_some() {
                    pa.errors += 1;
                }
                if enoent {
                    pa.enoent += 1;
                }
                pa.bump(ev.name.0, &mut self.path_more);
                if ev.kind.is_stat_family() {
                    if pa.seen_gen == gen {
                        u.repeats += 1;
                    } else {
                        taken = Some((pa.seen_gen, p));
                        pa.seen_gen = gen;
                    }
                }
            }
        }
        // Realpath walks (R53): successive prefixes of one path, lstat-like.
        if is_lstat_like(ev) {
            if let Some(p) = path {
                let run = &pr.run;
                let extend = match run.prev {
                    Some(prev) if run.len > 0 => {
                        let (pb, cb) = (strings.bytes(prev), strings.bytes(p));
                        // is_parent(x, y) needs x shorter than y, so the
                        // lengths pick the one direction that can hold:
                        // one is_parent call per lstat instead of two when
                        // the first fails.
                        if cb.len() < pb.len() {
                            (run.dir <= 0 && is_parent(cb, pb)).then_some(-1)
                        } else {
                            (run.dir >= 0 && is_parent(pb, cb)).then_some(1)
                        }
                    }
                    _ => None,
                };
                match extend {
                    Some(d) => {
                        let run = &mut pr.run;
                        run.len += 1;
                        run.dir = d;
                        run.prev = Some(p);
                    }
                    None => {
                        self.close_run(pi);
                        self.procs[pi].run = Run {
                            len: 1,
                            first: Some(p),
                            prev: Some(p),
                            dir: 0,
                        };
                    }
                }
            } else {
                self.close_run(pi);
            }
        } else if !ev.kind.is_readlink() {
            // A symlink component is readlink()ed inside the walk (R53).
            if pr.run.len > 0 {
                self.close_run(pi);
            }
        }

        // The repeat check of a stat'ed path this generation had not
        // stat'ed last (after the walk, which holds the process record).
        if let Some((old, p)) = taken {
            if old != 0 {
                self.take_over(old, p);
            }
            let seen = &self.procs[pi].seen;
            if !seen.is_empty() && seen.contains(&p) {
                self.procs[pi].cur.repeats += 1;
            }
        }
    }

    /// Adds `calls` calls like `ev`: a count of a counts capture
    /// (`statstorm_trace::counts`), whose duration is the calls' summed
    /// time, in the window `window_us`. Counts keep no order: they add to
    /// the totals, paths, directories, processes and the time series
    /// (spread evenly over the window's seconds), never to requests,
    /// realpath walks or repeats, which the profile then says cannot be
    /// seen ([`Profile::counts`]). A pid of 0 is a count without process,
    /// path or result (the recording's map was full).
    pub fn push_counted(
        &mut self,
        ev: &Event,
        calls: u64,
        window_us: Option<(i64, i64)>,
        strings: &Interner,
    ) {
        let c = &mut self.counted;
        c.lines += 1;
        if let Some(w) = window_us {
            if c.last_window != Some(w) {
                c.windows += 1;
                c.window_us += (w.1 - w.0).max(0) as u64;
                c.last_window = Some(w);
            }
        }
        if calls == 0 {
            return;
        }
        if ev.pid == 0 {
            c.map_full += calls;
        }
        if matches!(ev.kind, Kind::Accept | Kind::Accept4) && !ev.is_error() {
            c.accepts += calls;
        }
        self.events += calls;
        let metadata = ev.kind.is_metadata();
        let (errno, enoent) = self.errno_of(ev, strings);
        let path = ev.path.filter(|&p| self.is_path(p, strings));
        let nix = self.name_index(ev.name.0);
        let na = self.name_agg(ev, nix);
        na.calls += calls;
        if let Some(e) = errno {
            na.errors += calls;
            bump_by(&mut na.errnos, e.0, calls);
        }
        if let Some(d) = ev.dur_us {
            na.time_us += d;
            na.timed += calls;
            self.durations = true;
        }
        if metadata {
            self.metadata += calls;
            if let Some((start, end)) = window_us {
                self.timestamps = true;
                // the window's seconds, each given an equal share
                let (s0, s1) = (
                    start.div_euclid(1_000_000),
                    (end - 1).max(start).div_euclid(1_000_000),
                );
                let n = (s1 - s0 + 1).max(1) as u64;
                let (each, rest) = (calls / n, calls % n);
                for (i, s) in (s0..=s1).enumerate() {
                    let k = each + u64::from((i as u64) < rest);
                    if k > 0 {
                        *self.per_sec.entry(s).or_insert(0) += k;
                    }
                }
            }
        }
        if ev.pid != 0 {
            let pi = match self.proc_index.get(&ev.pid) {
                Some(&pi) => pi,
                None => {
                    let si = self.procs.len();
                    self.new_proc(ev.pid, si)
                }
            };
            let pr = &mut self.procs[pi];
            pr.events += calls;
            if metadata {
                pr.metadata += calls;
            }
            if errno.is_some() {
                pr.errors += calls;
            }
            if let Some(d) = ev.dur_us {
                pr.time_us += d;
                if metadata {
                    pr.metadata_time_us += d;
                }
            }
            if let Some((start, end)) = window_us {
                pr.first_us = pr.first_us.min(start);
                pr.last_us = pr.last_us.max(end);
                pr.timed = true;
            }
        }
        if let Some(p) = path {
            let pa = &mut self.path_hot[p.0 as usize];
            pa.calls += calls;
            if errno.is_some() {
                pa.errors += calls;
            }
            if enoent {
                pa.enoent += calls;
            }
            pa.bump_by(ev.name.0, calls, &mut self.path_more);
        }
    }

    /// The pids of the events pushed so far.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.proc_index.keys().copied()
    }

    /// The command name of `pid` (`strace -Y`), from then on.
    pub fn comm(&mut self, pid: u32, comm: &[u8]) {
        self.comms
            .insert(pid, String::from_utf8_lossy(comm).into_owned());
    }

    /// A process ended (`+++ exited ...+++` / `+++ killed ...+++`): its
    /// walk ends and its request piece's path set is dropped, so memory
    /// follows the live processes, not all processes ever seen.
    pub fn exit(&mut self, pid: u32) {
        if let Some(&pi) = self.proc_index.get(&pid) {
            self.close_run(pi);
            let pr = &mut self.procs[pi];
            pr.seen = HashSet::default();
            pr.walked = HashSet::default();
            self.new_gen(pi);
        }
    }

    /// Ends the stream and builds the profile.
    pub fn finish(mut self, strings: &Interner, input: InputInfo, top: usize) -> Profile {
        for pi in 0..self.procs.len() {
            self.close_run(pi);
            self.settle_names(pi);
        }
        self.flush_sec();
        let (plan, closed) = std::mem::take(&mut self.splitter).finish_streaming();
        for c in closed {
            self.close_unit(c);
        }
        self.join_requests(&plan);
        build::build_profile(self, plan, strings, input, top)
    }

    /// A unit the splitter let go: a request's row, or its counts folded
    /// into its process's other units.
    fn close_unit(&mut self, c: Closed) {
        let Some(pr) = self.procs.get_mut(c.slot) else {
            // a pid with no event (a forked child never seen): nothing
            return;
        };
        // the process's counts are those of the unit the split let go
        debug_assert!(pr.unit == c.unit.0 || pr.unit == u32::MAX);
        let u = std::mem::take(&mut pr.cur);
        self.total_repeats += u.repeats;
        self.rewalks += u.rewalks;
        match c.request {
            Some(r) => {
                let rec = row_of(&r, &u, u.names);
                self.push_row(rec);
            }
            None => {
                pr.rest.add(&u);
                for (ix, n) in self.tallies.get(u.names) {
                    let ix = ix as usize;
                    if pr.rest_names.len() <= ix {
                        pr.rest_names.resize(ix + 1, 0);
                    }
                    pr.rest_names[ix] += n;
                }
            }
        }
    }

    fn push_row(&mut self, rec: rows::RowRec) {
        self.row_lists.insert(rec.names);
        if let Err(e) = self.rows.push(rec) {
            self.rows_error.get_or_insert(e);
        }
    }

    /// The requests made of several processes' units (php-cli process
    /// trees, the whole trace): their rows.
    fn join_requests(&mut self, plan: &StreamPlan) {
        for (r, slots) in &plan.joined {
            let mut u = UnitAgg::default();
            let mut names: Vec<u64> = Vec::new();
            for &si in slots {
                let Some(pr) = self.procs.get(si) else {
                    continue;
                };
                u.add(&pr.rest);
                if names.len() < pr.rest_names.len() {
                    names.resize(pr.rest_names.len(), 0);
                }
                for (x, &n) in names.iter_mut().zip(&pr.rest_names) {
                    *x += n;
                }
            }
            let list = self.tallies.add(&names);
            let rec = row_of(r, &u, list);
            self.push_row(rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::top_sorted;
    use super::*;

    #[test]
    fn tallies_keep_each_list_once_and_give_it_back() {
        let mut t = Tallies::default();
        assert_eq!(t.add(&[0, 0]), 0);
        let big = u64::MAX - 1;
        let a = t.add(&[3, 0, big, 1 << 35]);
        assert_ne!(a, 0);
        assert_eq!(t.add(&[3, 0, big, 1 << 35, 0]), a);
        let b = t.add(&[3]);
        assert_ne!(b, a);
        let got: Vec<(u32, u64)> = t.get(a).collect();
        assert_eq!(got, vec![(0, 3), (2, big), (3, 1 << 35)]);
        let names: Vec<(u32, u64)> = t.names(a, &[10, 11, 12]).collect();
        assert_eq!(names, vec![(10, 3), (12, big)]);
        assert_eq!(t.get(0).count(), 0);
    }
    use statstorm_php::request::RequestMode;
    use statstorm_trace::{Errno, Ret};

    pub(crate) struct B {
        pub s: Interner,
        pub ev: Vec<Event>,
        pub t: i64,
    }

    /// One step of the tests' linear congruential generator (Knuth's
    /// MMIX constants); the state is the value.
    fn lcg(x: &mut u64) {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }

    impl B {
        pub fn new() -> Self {
            B {
                s: Interner::new(),
                ev: Vec::new(),
                t: 1_700_000_000_000_000,
            }
        }
        pub fn push(
            &mut self,
            pid: u32,
            name: &str,
            path: Option<&str>,
            flags: u32,
            err: Option<&str>,
        ) {
            let kind = Kind::from_name(name.as_bytes());
            let n = self.s.intern(name.as_bytes());
            let path = path.map(|p| self.s.intern(p.as_bytes()));
            let ret = match err {
                Some(e) => Ret::Err(Errno(self.s.intern(e.as_bytes()))),
                None => Ret::Ok(0),
            };
            self.t += 100;
            let line = self.ev.len() as u64 + 1;
            self.ev.push(Event {
                pid,
                ts_us: Some(self.t),
                dur_us: Some(10),
                kind,
                name: n,
                path,
                path2: None,
                fd: None,
                fd_path: None,
                flags: Flags(flags),
                ret,
                ret_path: None,
                mtime: None,
                ctime_us: None,
                input: 0,
                line,
            });
        }
        pub fn profile(&self) -> Profile {
            self.profile_top(1000)
        }
        /// The profile when process `pid` exits just before event `i`,
        /// for each `(i, pid)` of `exits` (in event order).
        pub fn profile_with_exits(&self, exits: &[(usize, u32)]) -> Profile {
            let mut a = Analyzer::new();
            let mut x = 0;
            for (i, e) in self.ev.iter().enumerate() {
                while x < exits.len() && exits[x].0 == i {
                    a.exit(exits[x].1);
                    x += 1;
                }
                a.push(e, &self.s);
            }
            a.finish(&self.s, InputInfo::default(), 1000)
        }
        pub fn profile_top(&self, top: usize) -> Profile {
            self.profile_rows_held(top, rows::RowSpill::HELD)
        }
        /// The profile when at most `held` requests stay in memory (the
        /// others in sorted runs in a temporary file).
        pub fn profile_rows_held(&self, top: usize, held: usize) -> Profile {
            let mut a = Analyzer::new();
            a.rows = rows::RowSpill::with_cap(held);
            for e in &self.ev {
                a.push(e, &self.s);
            }
            a.finish(&self.s, InputInfo::default(), top)
        }
    }

    /// Requests written out in sorted runs and merged give the profile
    /// that holds them all: the same JSON and the same text, on pool
    /// workers beside php-cli processes (rows made as units close, and
    /// at the end), with few requests held and with many.
    #[test]
    fn requests_in_runs_give_the_same_profile() {
        let mut b = B::new();
        let mut rng = 7u64;
        for i in 0..4000u32 {
            lcg(&mut rng);
            let pid = 200 + (rng >> 60) as u32 % 6;
            if (rng >> 20) % 9 == 0 {
                b.push(pid, "accept", None, 0, None);
                continue;
            }
            // a php-cli process now and then, with a child
            if i % 500 == 0 {
                b.push(900 + i, "execve", Some("/usr/bin/php8.2"), 0, None);
                b.push(900 + i, "newfstatat", Some("/srv/cron.php"), 0, None);
            }
            let path = format!("/srv/{}.php", (rng >> 40) % 30);
            let err = ((rng >> 45) % 5 == 0).then_some("ENOENT");
            b.push(
                pid,
                ["newfstatat", "lstat", "openat", "access"][(rng >> 50) as usize % 4],
                Some(&path),
                0,
                err,
            );
        }
        let whole = b.profile_top(5);
        assert!(whole.requests.len() > 300, "{}", whole.requests.len());
        assert_eq!(whole.requests.spilled_runs(), 0);
        let json = |p: &Profile| serde_json::to_string(p).unwrap();
        for held in [1, 2, 5, 64] {
            let p = b.profile_rows_held(5, held);
            assert!(p.requests.spilled_runs() > 0);
            assert_eq!(json(&p), json(&whole), "held {held}");
            let top = |p: &Profile| {
                p.requests_summary
                    .top
                    .iter()
                    .map(|r| (r.index, r.metadata_calls))
                    .collect::<Vec<_>>()
            };
            assert_eq!(top(&p), top(&whole), "held {held}");
            assert_eq!(p.requests_summary.top.len(), 5);
        }
    }

    /// The top paths and directories are those of a plain sort of all
    /// (calls descending, then the name) whatever the top size, also when
    /// the cut falls inside a run of equal counts (the rows below the top
    /// count are left out before sorting), with the path records taken in
    /// parts on several threads and directories added up by the index
    /// each path got when first seen.
    #[test]
    fn top_paths_and_dirs_equal_a_plain_sort() {
        let mut b = B::new();
        let mut rng = 7u64;
        let mut calls: HashMap<String, u64> = HashMap::new();
        let mut enoent: HashMap<String, u64> = HashMap::new();
        for _ in 0..3000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // 40 directories, 200 files: many paths share a count.
            let path = format!("/d{}/f{}.php", rng % 40, (rng >> 8) % 200);
            let missing = (rng >> 20) % 3 == 0;
            b.push(1, "newfstatat", Some(&path), 0, missing.then_some("ENOENT"));
            let d = path[..path.rfind('/').unwrap()].to_string();
            *enoent.entry(d).or_default() += missing as u64;
            *calls.entry(path).or_default() += 1;
        }
        let mut want: Vec<(u64, String)> = calls.iter().map(|(p, &c)| (c, p.clone())).collect();
        want.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        let mut dirs: HashMap<String, (u64, u64)> = HashMap::new();
        for (p, c) in &calls {
            let e = dirs
                .entry(p[..p.rfind('/').unwrap()].to_string())
                .or_default();
            e.0 += c;
            e.1 += 1;
        }
        let mut want_dirs: Vec<(u64, String, u64, u64)> = dirs
            .into_iter()
            .map(|(d, c)| (c.0, d.clone(), c.1, enoent[&d]))
            .collect();
        want_dirs.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        // Four threads: the directories are added up in four parts.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        for top in [1, 2, 5, 17, 50, 1000, 10_000] {
            let p = pool.install(|| b.profile_top(top));
            let got: Vec<(u64, String)> =
                p.paths.iter().map(|r| (r.calls, r.path.clone())).collect();
            assert_eq!(got, want[..top.min(want.len())], "top {top}");
            let got: Vec<(u64, String, u64, u64)> = p
                .dirs
                .iter()
                .map(|r| (r.calls, r.dir.clone(), r.distinct_paths, r.enoent))
                .collect();
            assert_eq!(got, want_dirs[..top.min(want_dirs.len())], "top {top}");
            for r in &p.dirs {
                assert_eq!(r.by_syscall.values().sum::<u64>(), r.calls, "{}", r.dir);
            }
            assert_eq!(p.totals.distinct_paths, want.len() as u64);
            assert_eq!(p.totals.distinct_dirs, want_dirs.len() as u64);
        }
    }

    const NF: u32 = Flags::AT_SYMLINK_NOFOLLOW;

    /// Process records indexed by the splitter's pid slot (listed in order
    /// of first event), the path record fetched once for its counters and
    /// the repeat check, and kind names kept in the kind's record: the
    /// profile equals plain computations on generated fpm-like events
    /// where forks hand out slots before the child's first event and
    /// processes exit (their path sets dropped) mid-trace.
    #[test]
    fn slot_processes_and_path_repeats_match_plain() {
        let names = [
            "accept",
            "newfstatat",
            "lstat",
            "stat",
            "openat",
            "clone",
            "read",
        ];
        let mut b = B::new();
        let mut exits: Vec<(usize, u32)> = Vec::new();
        let mut rng = 12345u64;
        let mut next_child = 300u32;
        for _ in 0..4000 {
            lcg(&mut rng);
            let pid = if (rng >> 58) % 4 == 0 && next_child > 300 {
                300 + (rng >> 40) as u32 % (next_child - 300)
            } else {
                100 + (rng >> 61) as u32
            };
            let k = ((rng >> 33) % names.len() as u64) as usize;
            let path = format!("/srv/{}.php", (rng >> 40) % 12);
            let err = ((rng >> 45) % 9 == 0).then_some("ENOENT");
            let path = (names[k] != "clone" && names[k] != "accept").then_some(path.as_str());
            b.push(pid, names[k], path, if k == 1 { NF } else { 0 }, err);
            if names[k] == "clone" {
                b.ev.last_mut().unwrap().ret = Ret::Ok(next_child as i64);
                next_child += 1;
            }
            if (rng >> 20) % 97 == 0 {
                exits.push((b.ev.len(), pid));
            }
        }
        let p = b.profile_with_exits(&exits);

        // Processes in order of first event, with their counters.
        let mut procs: Vec<(u32, u64, u64, u64)> = Vec::new();
        for e in &b.ev {
            let i = match procs.iter().position(|w| w.0 == e.pid) {
                Some(i) => i,
                None => {
                    procs.push((e.pid, 0, 0, 0));
                    procs.len() - 1
                }
            };
            procs[i].1 += 1;
            procs[i].2 += e.kind.is_metadata() as u64;
            procs[i].3 += e.errno().is_some() as u64;
        }
        let got: Vec<(u32, u64, u64, u64)> = p
            .processes
            .iter()
            .map(|r| (r.pid, r.events, r.metadata_calls, r.errors))
            .collect();
        assert_eq!(got, procs);

        // Repeats: a stat of a path already stat'ed by the same pid in the
        // same request piece since its last exit.
        let mut sp = Splitter::new();
        let mut state: HashMap<u32, (u32, HashSet<u32>)> = HashMap::new();
        let mut unit_repeats: Vec<u64> = Vec::new();
        let mut x = 0;
        for (i, e) in b.ev.iter().enumerate() {
            while x < exits.len() && exits[x].0 == i {
                if let Some(st) = state.get_mut(&exits[x].1) {
                    st.1.clear();
                }
                x += 1;
            }
            let UnitId(u) = sp.push(e, &b.s);
            if unit_repeats.len() <= u as usize {
                unit_repeats.resize(u as usize + 1, 0);
            }
            let st = state.entry(e.pid).or_insert((u, HashSet::new()));
            if st.0 != u {
                *st = (u, HashSet::new());
            }
            if let (true, Some(path)) = (e.kind.is_stat_family(), e.path) {
                if !st.1.insert(path.0) {
                    unit_repeats[u as usize] += 1;
                }
            }
        }
        let plan = sp.finish();
        let mut want = vec![0u64; plan.requests.len()];
        for (u, r) in plan.unit_request.iter().enumerate() {
            if let Some(r) = r {
                want[*r as usize] += unit_repeats[u];
            }
        }
        let total: u64 = unit_repeats.iter().sum();
        assert!(total > 100 && want.len() > 50, "{total} {}", want.len());
        assert_eq!(p.totals.repeats, total);
        let got: Vec<u64> = p.requests.iter().map(|r| r.unwrap().repeats).collect();
        assert_eq!(got, want);

        // Path counters and totals by decoded kind.
        let mut paths: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut calls: BTreeMap<String, u64> = BTreeMap::new();
        for e in &b.ev {
            *calls.entry(b.s.str(e.name).into_owned()).or_default() += 1;
            if let Some(path) = e.path {
                let w = paths.entry(b.s.str(path).into_owned()).or_default();
                w.0 += 1;
                w.1 += e.errno().is_some() as u64;
                w.2 += e.errno().is_some() as u64;
            }
        }
        let got: BTreeMap<String, (u64, u64, u64)> = p
            .paths
            .iter()
            .map(|r| (r.path.clone(), (r.calls, r.errors, r.enoent)))
            .collect();
        assert_eq!(got, paths);
        let got: BTreeMap<String, u64> = p
            .totals
            .by_syscall
            .iter()
            .map(|(k, v)| (k.clone(), v.calls))
            .collect();
        assert_eq!(got, calls);
    }

    /// Per-request calls by name (the dense-index `NameCounts` of each
    /// request piece) and totals by name equal plain counts over the
    /// requests of the batch split, on generated fpm-like events: several
    /// workers, accepts starting pieces, more names than any inline list.
    #[test]
    fn request_names_match_plain_counts() {
        let names = [
            "accept",
            "newfstatat",
            "lstat",
            "openat",
            "read",
            "close",
            "getpid",
            "mmap",
            "brk",
            "futex",
            "poll",
            "access",
            "write",
            "getcwd",
            "fcntl",
            "stat",
        ];
        let mut b = B::new();
        let mut rng = 99u64;
        for _ in 0..3000 {
            lcg(&mut rng);
            let pid = 100 + (rng >> 60) as u32 % 5;
            // Skewed: low name indices most often, every name sometimes.
            let k = ((rng >> 33) % names.len() as u64) as usize;
            let k = if (rng >> 20) & 1 == 0 { k % 4 } else { k };
            let path = format!("/srv/{}.php", (rng >> 40) % 50);
            let err = ((rng >> 45) % 7 == 0).then_some("ENOENT");
            b.push(pid, names[k], Some(&path), 0, err);
        }
        let p = b.profile();
        let r = statstorm_php::request::split_requests(&b.ev, &b.s);
        assert_eq!(p.request_split.mode, RequestMode::Fpm);
        assert!(r.requests.len() > 100, "{}", r.requests.len());
        assert_eq!(p.requests.len(), r.requests.len());
        let mut total: BTreeMap<String, u64> = BTreeMap::new();
        for ev in &b.ev {
            *total.entry(b.s.str(ev.name).into_owned()).or_default() += 1;
        }
        for (row, q) in p.requests.to_vec().unwrap().iter().zip(&r.requests) {
            let mut want: BTreeMap<String, u64> = BTreeMap::new();
            for &i in &q.events {
                *want
                    .entry(b.s.str(b.ev[i as usize].name).into_owned())
                    .or_default() += 1;
            }
            assert_eq!(*row.by_syscall, want, "request {}", row.index);
        }
        let got: BTreeMap<String, u64> = p
            .totals
            .by_syscall
            .iter()
            .map(|(k, v)| (k.clone(), v.calls))
            .collect();
        assert_eq!(got, total);
    }

    /// Metadata calls per second (range check on the current second, the
    /// division only on a change) equal plain `div_euclid` counts, with
    /// times going back and forth, negative times, and the first and last
    /// seconds of the i64 range (whose bounds do not fit).
    #[test]
    fn per_second_counts_match_div_euclid() {
        let mut b = B::new();
        let mut rng = 3u64;
        let mut ts_list: Vec<i64> = vec![
            i64::MIN,
            i64::MIN + 5,
            i64::MIN + 1_000_000,
            i64::MIN,
            i64::MAX,
            i64::MAX - 1,
            i64::MAX - 999_999,
            i64::MAX - 1_000_000,
            i64::MAX,
            -1,
            0,
            -1_000_000,
            -999_999,
            999_999,
            1_000_000,
        ];
        for _ in 0..3000 {
            lcg(&mut rng);
            ts_list.push(((rng >> 30) % 8_000_000) as i64 - 4_000_000);
        }
        for (i, &ts) in ts_list.iter().enumerate() {
            // Some calls are not metadata and must not count.
            let name = if i % 7 == 3 { "read" } else { "stat" };
            b.push(1, name, Some("/a"), 0, None);
            let e = b.ev.last_mut().unwrap();
            e.ts_us = Some(ts);
            e.dur_us = None;
        }
        let mut a = Analyzer::new();
        for e in &b.ev {
            a.push(e, &b.s);
        }
        a.flush_sec();
        let mut want: HashMap<i64, u64> = HashMap::new();
        for e in b.ev.iter().filter(|e| e.kind.is_metadata()) {
            *want
                .entry(e.ts_us.unwrap().div_euclid(1_000_000))
                .or_default() += 1;
        }
        let got: HashMap<i64, u64> = a.per_sec.iter().map(|(&k, &v)| (k, v)).collect();
        assert_eq!(got, want);
    }

    /// Per-process first/last times (plain min/max with a `timed` flag)
    /// equal `Option` min/max over the process's events, with events out
    /// of time order, without durations, and processes without any
    /// timestamp.
    #[test]
    fn process_spans_match_option_min_max() {
        let mut b = B::new();
        let mut rng = 7u64;
        for _ in 0..2000 {
            lcg(&mut rng);
            let pid = 1 + (rng >> 61) as u32;
            b.push(pid, "stat", Some("/a"), 0, None);
            let e = b.ev.last_mut().unwrap();
            // pid 8 never has timestamps; others sometimes lack them.
            e.ts_us = (pid != 8 && (rng >> 20) % 5 != 0)
                .then_some(1_000_000 + ((rng >> 24) % 100_000) as i64 - 50_000);
            e.dur_us = ((rng >> 50) % 3 != 0).then_some((rng >> 40) % 1000);
        }
        let p = b.profile();
        let mut want: Vec<(u32, Option<i64>, Option<i64>)> = Vec::new();
        for e in &b.ev {
            let i = match want.iter().position(|w| w.0 == e.pid) {
                Some(i) => i,
                None => {
                    want.push((e.pid, None, None));
                    want.len() - 1
                }
            };
            if let Some(ts) = e.ts_us {
                let end = ts + e.dur_us.unwrap_or(0) as i64;
                want[i].1 = Some(want[i].1.map_or(ts, |m: i64| m.min(ts)));
                want[i].2 = Some(want[i].2.map_or(end, |m: i64| m.max(end)));
            }
        }
        assert!(want.iter().any(|w| w.1.is_none()) && want.len() == 8);
        let got: Vec<(u32, Option<i64>, Option<i64>)> = p
            .processes
            .iter()
            .map(|r| (r.pid, r.first_us, r.last_us))
            .collect();
        assert_eq!(got, want);
        let wall: u64 = want
            .iter()
            .filter_map(|w| Some((w.2? - w.1?).max(0) as u64))
            .sum();
        assert_eq!(p.totals.traced_wall_us, Some(wall));
    }

    #[test]
    fn path_counts_inline_and_overflow() {
        let mut more = Vec::new();
        let mut c = PathHot::new();
        assert_eq!(std::mem::size_of::<PathHot>(), 64);
        for k in [1, 2, 1, 3, 4, 4, 1, 5] {
            c.bump(k, &mut more);
        }
        let mut v: Vec<(u32, u64)> = c.iter(&more).collect();
        v.sort();
        assert_eq!(v, vec![(1, 3), (2, 1), (3, 1), (4, 2), (5, 1)]);
        c.names[0].1 = u32::MAX;
        c.bump(1, &mut more);
        let total: u64 = c.iter(&more).filter(|e| e.0 == 1).map(|e| e.1).sum();
        assert_eq!(total, u32::MAX as u64 + 1);
    }

    #[test]
    fn top_sorted_equals_full_sort() {
        let mut rng = 12345u64;
        for len in [0usize, 1, 2, 5, 50, 300] {
            let v: Vec<(u64, u32)> = (0..len as u32)
                .map(|i| {
                    lcg(&mut rng);
                    (rng >> 60, i)
                })
                .collect();
            let cmp = |x: &(u64, u32), y: &(u64, u32)| y.0.cmp(&x.0).then(x.1.cmp(&y.1));
            let mut all = v.clone();
            all.sort_by(cmp);
            for top in [0usize, 1, 3, 20, 1000] {
                let mut w = v.clone();
                let head = top_sorted(&mut w, top, cmp);
                assert_eq!(head, &all[..top.min(len)], "len {len} top {top}");
            }
        }
    }

    #[test]
    fn parent_and_dir() {
        assert!(is_parent(b"/a/b", b"/a/b/c"));
        assert!(is_parent(b"/a", b"/a/b/"));
        assert!(!is_parent(b"/a/b", b"/a/bc"));
        assert!(!is_parent(b"/a", b"/a/b/c"));
        assert!(!is_parent(b"/", b"/a"));
        assert_eq!(dir_of(b"/a/b/c"), b"/a/b");
        assert_eq!(dir_of(b"/c"), b"/");
        assert_eq!(dir_of(b"c"), b".");
    }

    /// Rewalks (a file walked again by the same process in the same
    /// request piece) equal a plain count when processes walk the same
    /// files interleaved, so that files are taken over from generations
    /// that are still current, and request pieces end (accept) and
    /// processes exit in between.
    #[test]
    fn rewalks_match_plain_with_interleaved_processes() {
        let files: Vec<(String, String, String)> = (0..6)
            .map(|i| {
                let d = format!("/srv/s{}", i % 2);
                let l = format!("{d}/lib{}", i % 3);
                let f = format!("{l}/f{i}.php");
                (d, l, f)
            })
            .collect();
        let mut b = B::new();
        let mut exits: Vec<(usize, u32)> = Vec::new();
        // Per pid: the events of its current walk still to come.
        let mut queue: HashMap<u32, Vec<(&str, String)>> = HashMap::new();
        // (index of the open that ends the walk, pid, file) of each walk.
        let mut walks: Vec<(usize, u32, String)> = Vec::new();
        let mut rng = 4242u64;
        for _ in 0..6000 {
            lcg(&mut rng);
            let pid = 100 + (rng >> 61) as u32;
            let q = queue.entry(pid).or_default();
            if q.is_empty() {
                match (rng >> 40) % 40 {
                    0 => {
                        b.push(pid, "accept", None, 0, None);
                        b.ev.last_mut().unwrap().ret = Ret::Ok(7);
                    }
                    1 => exits.push((b.ev.len(), pid)),
                    _ => {
                        let (d, l, f) = &files[((rng >> 20) % files.len() as u64) as usize];
                        walks.push((usize::MAX, pid, f.clone()));
                        // Popped from the end: lstat d, lstat l, lstat f,
                        // then the open that ends the walk.
                        q.extend([
                            ("openat", f.clone()),
                            ("lstat", f.clone()),
                            ("lstat", l.clone()),
                            ("lstat", d.clone()),
                        ]);
                    }
                }
                continue;
            }
            let (name, path) = q.pop().unwrap();
            if name == "openat" {
                let w = walks.iter_mut().rev().find(|w| w.1 == pid).unwrap();
                w.0 = b.ev.len();
            }
            b.push(pid, name, Some(&path), 0, None);
        }
        // Every walk complete.
        for (&pid, q) in queue.iter_mut() {
            while let Some((name, path)) = q.pop() {
                if name == "openat" {
                    let w = walks.iter_mut().rev().find(|w| w.1 == pid).unwrap();
                    w.0 = b.ev.len();
                }
                b.push(pid, name, Some(&path), 0, None);
            }
        }
        let p = b.profile_with_exits(&exits);

        // Plain: per pid, the files walked since its request piece began
        // (or since it exited).
        let mut sp = Splitter::new();
        let mut unit_of: Vec<u32> = Vec::new();
        for e in &b.ev {
            unit_of.push(sp.push(e, &b.s).0);
        }
        let mut state: HashMap<u32, (u32, HashSet<String>)> = HashMap::new();
        let mut events: Vec<(usize, u8, u32, String)> =
            walks.iter().map(|w| (w.0, 1, w.1, w.2.clone())).collect();
        events.extend(exits.iter().map(|&(i, pid)| (i, 0, pid, String::new())));
        events.sort();
        let (mut want, mut n) = (0u64, 0u64);
        for (i, what, pid, file) in events {
            if what == 0 {
                if let Some(st) = state.get_mut(&pid) {
                    st.1.clear();
                }
                continue;
            }
            n += 1;
            let u = unit_of[i];
            let st = state.entry(pid).or_insert((u, HashSet::new()));
            if st.0 != u {
                *st = (u, HashSet::new());
            }
            if !st.1.insert(file) {
                want += 1;
            }
        }
        assert!(want > 100, "{want} rewalks generated");
        assert_eq!(p.realpath.walks, n);
        assert_eq!(p.realpath.rewalks, want);
    }

    /// A cold realpath walk of `/m/a/b/f.php` as PHP 8.2 does it (R53:
    /// deepest first, `/` never lstat'ed), then open + fstat of the file,
    /// then a second resolution of the same file that hits the cache.
    #[test]
    fn walks_repeats_and_totals() {
        let mut b = B::new();
        b.push(
            1,
            "newfstatat",
            Some("/etc/php/8.2/cli/php.ini"),
            0,
            Some("ENOENT"),
        );
        for p in ["/m/a/b/f.php", "/m/a/b", "/m/a", "/m"] {
            b.push(1, "newfstatat", Some(p), NF, None);
        }
        b.push(1, "openat", Some("/m/a/b/f.php"), 0, None);
        b.push(1, "newfstatat", Some("/m/a/b/g.php"), NF, None);
        b.push(1, "newfstatat", Some("/m/a/b/f.php"), 0, None);
        // Shallowest-first walk (seed 003's order).
        for p in ["/x", "/x/y", "/x/y/z.php"] {
            b.push(1, "lstat", Some(p), 0, None);
        }
        b.push(1, "access", Some("/missing"), 0, Some("ENOENT"));
        let p = b.profile();
        assert_eq!(p.request_split.mode, RequestMode::Cli);
        assert_eq!(p.requests.len(), 1);
        let r = &p.requests.to_vec().unwrap()[0];
        assert_eq!(r.realpath_walks, 2);
        assert_eq!(r.walk_lstats, 7);
        assert_eq!(r.repeats, 1);
        assert_eq!(r.by_syscall["newfstatat"], 7);
        assert_eq!(r.by_syscall["lstat"], 3);
        assert_eq!(r.enoent, 2);
        assert_eq!(p.realpath.deepest_first, 1);
        assert_eq!(p.realpath.shallowest_first, 1);
        let files: Vec<&str> = p.realpath.by_file.iter().map(|w| w.path.as_str()).collect();
        assert!(files.contains(&"/m/a/b/f.php") && files.contains(&"/x/y/z.php"));
        let t = &p.totals.by_syscall["newfstatat"];
        assert_eq!((t.calls, t.errors, t.time_us), (7, 1, Some(70)));
        assert_eq!(t.errors_by_errno["ENOENT"], 1);
        assert_eq!(p.totals.metadata_calls, 12);
        assert_eq!(p.totals.enoent, 2);
        let f = p.paths.iter().find(|r| r.path == "/m/a/b/f.php").unwrap();
        assert_eq!(f.calls, 3);
        let d = p.dirs.iter().find(|r| r.dir == "/m/a/b").unwrap();
        assert_eq!((d.calls, d.distinct_paths), (4, 2));
        // Two walks of two files: a cold cache, not a failing one.
        assert_eq!((p.realpath.files, p.realpath.rewalks), (2, 0));
        let f = p
            .findings
            .iter()
            .find(|f| f.id() == "realpath_walks")
            .unwrap();
        assert!(
            matches!(
                f.kind,
                findings::Kind::RealpathWalks {
                    cause: findings::WalkCause::Cold,
                    ..
                }
            ),
            "{f:?}"
        );
        assert_eq!(f.severity, findings::Severity::Info);
        // The same walk again in the same request: the cache kept nothing.
        for q in ["/m/a/b/f.php", "/m/a/b", "/m/a", "/m"] {
            b.push(1, "newfstatat", Some(q), NF, None);
        }
        b.push(1, "openat", Some("/m/a/b/f.php"), 0, None);
        let p = b.profile();
        assert_eq!(p.realpath.rewalks, 1);
        let f = p
            .findings
            .iter()
            .find(|f| f.id() == "realpath_walks")
            .unwrap();
        assert!(
            matches!(
                f.kind,
                findings::Kind::RealpathWalks {
                    cause: findings::WalkCause::KeepsNothing { rewalks: 1 },
                    ..
                }
            ),
            "{f:?}"
        );
        assert_eq!(f.severity, findings::Severity::Warning);
    }

    #[test]
    fn bursts_and_period() {
        // 600 s, 2 calls/s background, 200-call bursts every 60 s.
        let mut v = vec![2u64; 600];
        for i in (30..600).step_by(60) {
            v[i] = 200;
        }
        let (med, bursts, period) = find_bursts(1000, &v);
        assert_eq!(med, 2.0);
        assert_eq!(bursts.len(), 10);
        assert_eq!(bursts[0].start_s, 1030);
        assert_eq!(period, Some(60.0));
        // Flat series: no bursts.
        let (_, b2, p2) = find_bursts(0, &[50; 100]);
        assert!(b2.is_empty() && p2.is_none());
    }

    #[test]
    fn time_share_and_inconsistent_times() {
        let mut b = B::new();
        for _ in 0..10 {
            b.push(3, "stat", Some("/srv/x.php"), 0, None);
        }
        // 10 calls of 10 us, 100 us apart: 100 us of 910 us.
        let p = b.profile();
        assert_eq!(p.totals.metadata_time_us, Some(100));
        assert_eq!(p.totals.traced_wall_us, Some(910));
        assert!(p.findings.iter().any(|f| f.id() == "time_share"));
        // Durations longer than the spacing cannot come from one process.
        for e in &mut b.ev {
            e.dur_us = Some(1000);
        }
        let p = b.profile();
        assert!(p.findings.iter().any(|f| f.id() == "inconsistent_times"));
        assert!(!p.findings.iter().any(|f| f.id() == "time_share"));
    }

    #[test]
    fn whole_trace_fallback_and_empty() {
        let mut b = B::new();
        b.push(7, "stat", Some("/data/x"), 0, None);
        b.push(7, "stat", Some("/data/x"), 0, None);
        let p = b.profile();
        assert_eq!(p.request_split.mode, RequestMode::Whole);
        assert_eq!(p.requests.to_vec().unwrap()[0].repeats, 1);
        // Another process stat'ing the same path in between neither is a
        // repeat itself nor hides the first process's repeat.
        b.push(8, "stat", Some("/data/x"), 0, None);
        b.push(7, "stat", Some("/data/x"), 0, None);
        b.push(8, "stat", Some("/data/y"), 0, None);
        let p = b.profile();
        assert_eq!(p.requests.to_vec().unwrap()[0].repeats, 2);
        let e = B::new().profile();
        assert_eq!(e.totals.events, 0);
        assert!(e.requests.is_empty());
    }
}
