//! What a capture recorded, as the NFS client model and the checks of a
//! prediction need it: every request's own filesystem calls as the trace
//! shows them, and the activity outside PHP requests (a pool's master and
//! worker startup, other programs on the same mount: a deploy script, a
//! shell writing into the tree), which shares the client's caches with the
//! requests and so must reach the NFS model in time order too.
//!
//! The capture is folded event by event as it is read ([`Fold`]): the
//! request split, each event normalized once into a call, the lift's
//! facts. The requests' calls go to a temporary file ([`crate::spill`])
//! once more than [`HELD`] of them wait in memory, and are read back one
//! request at a time ([`Recorded::calls`]), so a capture larger than
//! memory can be read. The spill is written on a thread of its own
//! (`Writer`): the reading goes on while a batch is encoded and written
//! (the fold is the reading's critical path; its parse workers wait on
//! it). The requests themselves (their times, counts and kernel time)
//! wait in a sorted spill by time order ([`crate::sorted`]) until the
//! end, and then stay on disk as one fixed-size record each
//! ([`crate::column`]), so a capture of a million small requests holds
//! those files' bounds, not every request.

use crate::column::{put_opt_i64, Bytes, Column, Fixed};
use crate::sorted::{Keyed, SortedSpill};
use crate::spill::{Chunk, Spill};
use serde::{Deserialize, Serialize};
use statstorm_php::lift::{CallSource, CallsSummary, FactsBuilder, TraceFacts};
use statstorm_php::request::{
    CliSettings, Request, RequestInfo, RequestKind, RequestList, RequestMode, Requests, Splitter,
};
use statstorm_trace::op::{Normalizer, Op, OpKind};
use statstorm_trace::{Event, Interner, Tally, Trace};
use std::collections::BTreeMap;
use std::io;

/// Calls held in memory before they are written to the spill (an `Op` is
/// 96 bytes: about 25 MB).
pub const HELD: usize = 1 << 18;

/// A process's calls outside any request.
#[derive(Clone, Debug)]
pub struct Background {
    pub pid: u32,
    /// First and last call, microseconds on the trace's clock.
    pub start_us: i64,
    pub end_us: i64,
    /// Its calls in time order.
    pub ops: Vec<Op>,
}

/// The time a request's calls spent in the kernel (`-T`): the sum of the
/// durations shown, and how many calls had one and how many did not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsTime {
    pub us: u64,
    pub timed: u64,
    pub untimed: u64,
}

impl FsTime {
    fn add(&mut self, o: &FsTime) {
        self.us += o.us;
        self.timed += o.timed;
        self.untimed += o.untimed;
    }
}

/// Calls folded into one owner (a unit taking calls, a request given
/// out, a process's calls outside its requests): their count by kind,
/// their kernel time, the earliest start, and those still in memory
/// (those written out are placed by the spill's writer), each with its
/// event's position in the capture.
#[derive(Default)]
struct Acc {
    fs: FsTime,
    first_us: Option<i64>,
    /// Calls by kind (`OpKind as usize`).
    by_kind: [u64; OpKind::ALL.len()],
    held: Vec<(u64, Op)>,
    /// Some of its calls were written out under its unit's label
    /// ([`Owner::Unit`]).
    written: bool,
}

impl Acc {
    fn calls(&self) -> u64 {
        self.fs.timed + self.fs.untimed
    }

    fn add(&mut self, o: &Acc) {
        self.fs.add(&o.fs);
        self.first_us = match (self.first_us, o.first_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (x, y) in self.by_kind.iter_mut().zip(&o.by_kind) {
            *x += y;
        }
    }

    /// Its calls per syscall name.
    fn tally(&self) -> Tally {
        let mut t = Tally::new();
        for (k, &n) in OpKind::ALL.iter().zip(&self.by_kind) {
            if n > 0 {
                t.add(k.syscall_name(statstorm_trace::Flags::default()), n);
            }
        }
        t.shrunk()
    }
}

/// A request's place in time order ([`RequestInfo::order`]: its start,
/// then its first event's position), which no other request shares.
type Key = (i64, u64);

fn key_of(info: &RequestInfo) -> Key {
    (info.start_us.unwrap_or(i64::MIN), info.first_event)
}

/// Whose calls a batch written out holds: a request given out (by its
/// place in time order), a process's calls outside the requests given
/// out (its slot: a php-cli request's, or background activity's, decided
/// at the end), or a unit still taking calls (its id; its owner is known
/// once it closes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owner {
    Request(Key),
    Rest(u32),
    Unit(u32),
}

/// A chunk of a request's calls, as the spill's writer placed it: sorted
/// by the request's place in time order, so that the end reads them in
/// the order it reads the requests (no list of chunks per request held).
#[derive(Clone, Serialize, Deserialize)]
struct Placed {
    start: i64,
    first_event: u64,
    /// The order it was written in.
    seq: u64,
    chunk: Chunk,
}

impl Keyed for Placed {
    type Key = (i64, u64, u64);
    fn key(&self) -> (i64, u64, u64) {
        (self.start, self.first_event, self.seq)
    }
}

/// A process of the split (by its slot): the unit taking its calls and
/// what it folded of its other units.
struct SlotCalls {
    pid: u32,
    /// The current unit's id (`u32::MAX`: none yet).
    unit: u32,
    cur: Acc,
    rest: Acc,
}

/// A request the split gave out as its unit closed (or, at the end, made
/// of processes' other units), held in the order of time
/// ([`RequestInfo::order`]).
#[derive(Clone, Serialize, Deserialize)]
struct Given {
    pid: u32,
    kind: statstorm_php::request::RequestKind,
    start_us: Option<i64>,
    end_us: Option<i64>,
    first_event: u64,
    settings: Option<statstorm_php::request::CliSettings>,
    fs: FsTime,
    first_us: Option<i64>,
    /// Its calls per syscall (an id in [`Fold`]'s `tally_list`).
    counts: u32,
}

impl Keyed for Given {
    type Key = (i64, u64);
    /// [`RequestInfo::order`].
    fn key(&self) -> (i64, u64) {
        (self.start_us.unwrap_or(i64::MIN), self.first_event)
    }
}

/// The capture's calls, split as the requests were.
pub struct Recorded {
    spill: Option<Spill>,
    /// Per request of the split, in time order: the request and its
    /// figures, and where its calls are (on disk past a megabyte: a
    /// capture of millions of requests holds none of them in memory).
    figs: Column<Fig>,
    /// The requests' chunks in the spill, request after request
    /// (`Fig::chunks`).
    chunks: Column<Chunk>,
    /// The distinct calls-per-syscall lists and command-line settings the
    /// requests have (`Fig::counts`, `Fig::settings`).
    tallies: Vec<Tally>,
    settings: Vec<CliSettings>,
    /// By request, its calls held in memory (a capture never written
    /// out: at most [`HELD`] calls).
    open: statstorm_trace::event::FastMap<u32, Vec<(u64, Op)>>,
    /// Per process with calls outside requests, by pid (in memory).
    pub background: Vec<Background>,
    /// The first error reading the spill back through [`CallSource`].
    error: std::sync::Mutex<Option<io::Error>>,
    /// Metadata calls over time and by directory.
    pub timeline: Timeline,
    /// The requests' calls' durations, and whether some call may be an
    /// OPcache file cache's.
    summary: CallsSummary,
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("requests", &self.len())
            .field(
                "spilled_bytes",
                &self.spill.as_ref().map_or(0, Spill::bytes),
            )
            .field("background", &self.background.len())
            .finish()
    }
}

/// A request of the split and its recorded figures, as [`Recorded`]
/// keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fig {
    pid: u32,
    kind: u8,
    start_us: Option<i64>,
    end_us: Option<i64>,
    /// An index into `Recorded::settings` (`u32::MAX`: none).
    settings: u32,
    fs: FsTime,
    first_us: Option<i64>,
    /// An index into `Recorded::tallies`.
    counts: u32,
    /// Its chunks: `Recorded::chunks[from..to]`.
    chunks: (u64, u64),
}

impl Fixed for Fig {
    const SIZE: usize = 4 + 1 + 9 + 9 + 4 + 24 + 9 + 4 + 16;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.push(self.kind);
        put_opt_i64(out, self.start_us);
        put_opt_i64(out, self.end_us);
        out.extend_from_slice(&self.settings.to_le_bytes());
        for v in [self.fs.us, self.fs.timed, self.fs.untimed] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        put_opt_i64(out, self.first_us);
        out.extend_from_slice(&self.counts.to_le_bytes());
        out.extend_from_slice(&self.chunks.0.to_le_bytes());
        out.extend_from_slice(&self.chunks.1.to_le_bytes());
    }
    fn take(b: &mut Bytes<'_>) -> Fig {
        Fig {
            pid: b.u32(),
            kind: b.u8(),
            start_us: b.opt_i64(),
            end_us: b.opt_i64(),
            settings: b.u32(),
            fs: FsTime {
                us: b.u64(),
                timed: b.u64(),
                untimed: b.u64(),
            },
            first_us: b.opt_i64(),
            counts: b.u32(),
            chunks: (b.u64(), b.u64()),
        }
    }
}

/// How the capture was split into requests.
#[derive(Clone, Debug)]
pub struct Split {
    pub mode: RequestMode,
    /// One sentence saying how the split was made and what was left out.
    pub note: String,
}

impl Recorded {
    /// [`Fold`] over the events of a trace read whole.
    pub fn of(trace: &Trace) -> io::Result<(Split, Recorded, TraceFacts)> {
        let mut f = Fold::new();
        for e in &trace.events {
            f.push(e, &trace.strings);
        }
        f.finish()
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.figs.len()
    }

    fn fig(&self, i: usize) -> io::Result<Fig> {
        self.figs.get(i)
    }

    /// True without requests.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Request `i`'s recorded calls per syscall
    /// (`statstorm_php::count_by_syscall` of [`Recorded::calls`]).
    pub fn count(&self, i: usize) -> io::Result<Tally> {
        let f = self.fig(i)?;
        self.tallies
            .get(f.counts as usize)
            .cloned()
            .ok_or_else(|| io::Error::other("a request's counts were never stored"))
    }

    /// The recorded calls per syscall of the first `n` requests (fewer
    /// when there are fewer).
    pub fn first_counts(&self, n: usize) -> io::Result<Vec<Tally>> {
        (0..n.min(self.len())).map(|i| self.count(i)).collect()
    }

    /// The time request `i`'s recorded calls spent in the kernel.
    pub fn fs_time(&self, i: usize) -> io::Result<FsTime> {
        Ok(self.fig(i)?.fs)
    }

    /// The start of request `i`'s earliest recorded call (`None`: no
    /// call).
    pub fn first_call(&self, i: usize) -> io::Result<Option<i64>> {
        Ok(self.fig(i)?.first_us)
    }

    /// The split's requests held in memory (each without its event
    /// list): for the passes that take a split whole (a reference
    /// capture's).
    pub fn requests(&self, split: &Split) -> io::Result<Requests> {
        Ok(Requests {
            mode: split.mode,
            requests: (0..self.len())
                .map(|i| self.fig(i).map(|f| self.request_of(&f)))
                .collect::<io::Result<_>>()?,
            note: split.note.clone(),
        })
    }

    fn request_of(&self, f: &Fig) -> Request {
        Request {
            pid: f.pid,
            start_us: f.start_us,
            end_us: f.end_us,
            events: Vec::new(),
            kind: RequestKind::ALL
                .get(f.kind as usize)
                .copied()
                .unwrap_or(RequestKind::WholeTrace),
            settings: self.settings.get(f.settings as usize).cloned(),
        }
    }

    fn keep_error(&self, e: io::Error) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
    }

    /// Bytes written to the temporary file (0: all held in memory).
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, Spill::bytes)
    }

    /// Request `i`'s calls, in time order; calls that started in the same
    /// microsecond in the capture's order.
    pub fn calls(&self, i: usize) -> io::Result<Vec<Op>> {
        let (from, to) = self.fig(i)?.chunks;
        let cs = (from..to)
            .map(|c| self.chunks.get(c as usize))
            .collect::<io::Result<Vec<Chunk>>>()?;
        let held = self.open.get(&(i as u32)).map_or(&[][..], Vec::as_slice);
        gather(self.spill.as_ref(), cs.iter(), held.iter())
    }

    /// Every request's calls, in memory at once.
    pub fn all(&self) -> io::Result<Vec<Vec<Op>>> {
        (0..self.len()).map(|i| self.calls(i)).collect()
    }

    /// The first error met reading calls back through [`CallSource`]
    /// (which gives a request whose calls could not be read as empty).
    pub fn take_error(&self) -> Option<io::Error> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }
}

impl CallSource for Recorded {
    fn requests(&self) -> usize {
        self.len()
    }
    fn calls(&self, i: usize) -> std::borrow::Cow<'_, [Op]> {
        match Recorded::calls(self, i) {
            Ok(v) => std::borrow::Cow::Owned(v),
            Err(e) => {
                self.keep_error(e);
                std::borrow::Cow::Owned(Vec::new())
            }
        }
    }
    fn summary(&self) -> Option<CallsSummary> {
        Some(self.summary.clone())
    }
}

/// The split's requests read back one at a time (a request that could
/// not be read back comes as an empty one of the whole trace, and the
/// error is kept for [`Recorded::take_error`]).
impl RequestList for Recorded {
    fn len(&self) -> usize {
        Recorded::len(self)
    }
    fn request(&self, i: usize) -> std::borrow::Cow<'_, Request> {
        let f = self.fig(i).unwrap_or_else(|e| {
            self.keep_error(e);
            Fig {
                kind: (RequestKind::ALL.len() - 1) as u8,
                ..Fig::default()
            }
        });
        std::borrow::Cow::Owned(self.request_of(&f))
    }
}

/// The calls of some chunks of the spill and some calls held, in time
/// order; calls that started in the same microsecond in the capture's
/// order.
fn gather<'a>(
    spill: Option<&Spill>,
    chunks: impl Iterator<Item = &'a Chunk>,
    held: impl Iterator<Item = &'a (u64, Op)>,
) -> io::Result<Vec<Op>> {
    let mut v: Vec<(u64, Op)> = Vec::new();
    if let Some(s) = spill {
        for &c in chunks {
            s.get(c, &mut v)?;
        }
    }
    v.extend(held.cloned());
    v.sort_by_key(|(i, o)| (o.t_us, *i));
    Ok(v.into_iter().map(|(_, o)| o).collect())
}

/// The capture folded event by event, in the trace's order (streamed,
/// never held whole): the request split (`Splitter::streaming`), each
/// event normalized once into a call (fds followed per process) kept with
/// its process's current unit, and the lift's facts. A unit the split
/// gives out as a request (a connection a worker served) is held as a
/// request at once; one it folds joins its process's other calls, which
/// [`Fold::finish`] gives to a php-cli request, or to the process's
/// background activity, once the split is decided. The requests' calls
/// are those of `statstorm_php::lift::request_ops`, so the lift takes
/// them from here (`statstorm_php::lift_from`).
pub struct Fold {
    split: Splitter,
    norm: Normalizer,
    facts: FactsBuilder,
    /// Per slot of the split (a process), its calls.
    slots: Vec<SlotCalls>,
    /// The requests given out so far (in a sorted spill: a capture of
    /// many requests holds its bound, not every request).
    given: SortedSpill<Given>,
    /// The distinct lists of calls per syscall of the requests.
    tally_ids: statstorm_trace::event::FastMap<Tally, u32>,
    tally_list: Vec<Tally>,
    /// The calls of requests given out still in memory, with their
    /// place in time order.
    given_held: Vec<(Key, Vec<(u64, Op)>)>,
    /// Units that closed after some of their calls were written out under
    /// their id: whose the calls became.
    unit_owner: statstorm_trace::event::FastMap<u32, Owner>,
    /// Units and processes with calls in memory (a unit's entry goes
    /// stale once the unit closes: its calls move to their owner; the
    /// requests' are `given_held`), and how many calls are held.
    open: Vec<(Owner, u32)>,
    held: usize,
    /// Calls held before they are written out ([`HELD`]).
    limit: usize,
    writer: Option<Writer>,
    error: Option<io::Error>,
    seen: u64,
    timeline: Timeline,
    /// Every call's duration (those outside requests taken back at the
    /// end), and whether a path looked like a file cache's.
    summary: CallsSummary,
}

/// A batch of held calls: each owner's, in the order they were held.
type Batch = Vec<(Owner, Vec<(u64, Op)>)>;

/// The spill and where each owner's chunks lie in it: the requests' by
/// their place in time order, the others' (processes' calls outside the
/// requests given out, units still open when written) in the order
/// written.
type Written = (Spill, SortedSpill<Placed>, Vec<(Owner, Chunk)>);

/// The spill written on a thread of its own: [`Fold::write_out`] hands it
/// a batch and reads on. At most two batches are held (one being written,
/// one filling): the channel has no room, so a hand-off waits for the
/// writer to finish the batch before.
struct Writer {
    tx: std::sync::mpsc::SyncSender<Batch>,
    done: std::thread::JoinHandle<io::Result<Written>>,
}

impl Writer {
    fn start() -> io::Result<Writer> {
        let mut spill = Spill::new()?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(0);
        let done = std::thread::Builder::new().name("spill".into()).spawn(
            move || -> io::Result<Written> {
                let mut placed = SortedSpill::new();
                let mut others = Vec::new();
                let mut seq = 0;
                for batch in rx {
                    for (u, calls) in batch {
                        let chunk = spill.put(&calls)?;
                        match u {
                            Owner::Request((start, first_event)) => placed.push(Placed {
                                start,
                                first_event,
                                seq,
                                chunk,
                            })?,
                            o => others.push((o, chunk)),
                        }
                        seq += 1;
                    }
                }
                Ok((spill, placed, others))
            },
        )?;
        Ok(Writer { tx, done })
    }

    /// The spill once every batch is written; the first error writing it.
    fn finish(self) -> io::Result<Written> {
        drop(self.tx);
        self.done
            .join()
            .map_err(|_| io::Error::other("the spill's writer panicked"))?
    }
}

/// The capture's metadata calls (the syscalls the models count:
/// `statstorm_php::lower::CHECKED`) over time and by directory, every
/// process included: what a report plots. Bounded by the trace's length
/// in seconds and its distinct directories.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Calls per second of the trace's clock.
    pub per_second: BTreeMap<i64, u64>,
    /// Calls per directory (the parent of the call's path).
    pub dirs: std::collections::HashMap<Box<str>, u64>,
}

impl Timeline {
    fn push(&mut self, op: &statstorm_trace::op::Op) {
        let name = op.kind.syscall_name(op.flags());
        if !statstorm_php::lower::CHECKED.contains(&name) || op.kind == OpKind::Fstat {
            return;
        }
        *self
            .per_second
            .entry(op.t_us.div_euclid(1_000_000))
            .or_default() += 1;
        let dir = match op.path.rsplit_once('/') {
            Some(("", _)) => "/",
            Some((d, _)) => d,
            None => return,
        };
        match self.dirs.get_mut(dir) {
            Some(n) => *n += 1,
            None => {
                self.dirs.insert(dir.into(), 1);
            }
        }
    }
}

impl Default for Fold {
    fn default() -> Self {
        Self::new()
    }
}

impl Fold {
    pub fn new() -> Fold {
        Fold::holding(HELD)
    }

    /// A fold that writes the calls out once more than `limit` wait in
    /// memory (0: every call is written out).
    pub fn holding(limit: usize) -> Fold {
        Fold::with_bounds(limit, SortedSpill::<Given>::HELD)
    }

    /// [`Fold::holding`] `limit` calls, and at most `requests` requests
    /// held in memory before they wait in a temporary file.
    pub fn with_bounds(limit: usize, requests: usize) -> Fold {
        Fold {
            split: Splitter::streaming(),
            norm: Normalizer::new(),
            facts: FactsBuilder::default(),
            slots: Vec::new(),
            given: SortedSpill::with_cap(requests),
            tally_ids: Default::default(),
            tally_list: Vec::new(),
            given_held: Vec::new(),
            unit_owner: Default::default(),
            open: Vec::new(),
            held: 0,
            limit,
            writer: None,
            error: None,
            seen: 0,
            timeline: Timeline::default(),
            summary: CallsSummary::default(),
        }
    }

    /// Folds the next event.
    pub fn push(&mut self, e: &Event, strings: &Interner) {
        let (unit, slot) = self.split.push_slot(e, strings);
        // the unit the split let go as this event began another
        while let Some(c) = self.split.pop_closed() {
            self.close(c);
        }
        self.facts.push(e, strings);
        if let Some(op) = self.norm.push(e, strings) {
            self.timeline.push(&op);
            self.summary.latencies.push(&op);
            if !self.summary.file_cache_calls
                && op.path.ends_with(".bin")
                && statstorm_php::file_cache::parse_bin(&op.path).is_some()
            {
                self.summary.file_cache_calls = true;
            }
            if slot >= self.slots.len() {
                self.slots.resize_with(slot + 1, || SlotCalls {
                    pid: 0,
                    unit: u32::MAX,
                    cur: Acc::default(),
                    rest: Acc::default(),
                });
            }
            let sc = &mut self.slots[slot];
            sc.pid = op.pid;
            if sc.unit != unit.0 {
                // a unit's first call (the unit before, if any, closed:
                // a process has one unit at a time)
                debug_assert!(
                    sc.unit == u32::MAX,
                    "unit {} of slot {slot} not closed",
                    sc.unit
                );
                sc.unit = unit.0;
            }
            let a = &mut sc.cur;
            a.by_kind[op.kind as usize] += 1;
            match op.dur_us {
                Some(d) => {
                    a.fs.us += d;
                    a.fs.timed += 1;
                }
                None => a.fs.untimed += 1,
            }
            a.first_us = Some(a.first_us.map_or(op.t_us, |f| f.min(op.t_us)));
            if a.held.is_empty() {
                self.open.push((Owner::Unit(unit.0), slot as u32));
                // room for one: a Vec's first push makes room for four,
                // and units of one call (a small request) held by the
                // hundred thousand made three quarters of the reading's
                // peak heap empty room
                a.held.reserve_exact(1);
            }
            a.held.push((self.seen, op));
            self.held += 1;
            if self.held > self.limit {
                self.write_out();
            }
        }
        self.seen += 1;
    }

    /// A unit the split let go: a request given out, or its calls folded
    /// into its process's other units.
    fn close(&mut self, c: statstorm_php::request::Closed) {
        let cur = match self.slots.get_mut(c.slot) {
            // the unit had calls: they are the process's current ones
            Some(sc) if sc.unit == c.unit.0 => {
                sc.unit = u32::MAX;
                std::mem::take(&mut sc.cur)
            }
            // no call (or no call at all from this process)
            _ => Acc::default(),
        };
        let owner = match c.request {
            Some(info) => {
                let k = key_of(&info);
                self.give(info, &cur);
                if !cur.held.is_empty() {
                    self.given_held.push((k, cur.held));
                }
                Owner::Request(k)
            }
            None => {
                let Some(sc) = self.slots.get_mut(c.slot) else {
                    return;
                };
                sc.rest.add(&cur);
                if !cur.held.is_empty() {
                    if sc.rest.held.is_empty() {
                        self.open.push((Owner::Rest(c.slot as u32), 0));
                    }
                    let mut h = cur.held;
                    sc.rest.held.append(&mut h);
                }
                Owner::Rest(c.slot as u32)
            }
        };
        if cur.written {
            self.unit_owner.insert(c.unit.0, owner);
        }
    }

    /// Holds request `info`, its calls those of `acc`.
    fn give(&mut self, info: RequestInfo, acc: &Acc) {
        let t = acc.tally();
        let counts = match self.tally_ids.get(&t) {
            Some(&id) => id,
            None => {
                let id = self.tally_list.len() as u32;
                self.tally_list.push(t.clone());
                self.tally_ids.insert(t, id);
                id
            }
        };
        let g = Given {
            pid: info.pid,
            kind: info.kind,
            start_us: info.start_us,
            end_us: info.end_us,
            first_event: info.first_event,
            settings: info.settings,
            fs: acc.fs,
            first_us: acc.first_us,
            counts,
        };
        if let Err(e) = self.given.push(g) {
            self.error.get_or_insert(e);
        }
    }

    /// Hands every owner's calls held in memory to the spill's writer.
    fn write_out(&mut self) {
        if self.error.is_some() {
            return;
        }
        if self.writer.is_none() {
            match Writer::start() {
                Ok(w) => self.writer = Some(w),
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
        let Some(writer) = self.writer.as_ref() else {
            return;
        };
        let mut batch: Batch = self
            .given_held
            .drain(..)
            .map(|(k, h)| (Owner::Request(k), h))
            .collect();
        for (o, slot) in std::mem::take(&mut self.open) {
            let calls = match o {
                Owner::Unit(u) => match self.slots.get_mut(slot as usize) {
                    // stale once the unit closed (its calls moved on)
                    Some(sc) if sc.unit == u && !sc.cur.held.is_empty() => {
                        sc.cur.written = true;
                        std::mem::take(&mut sc.cur.held)
                    }
                    _ => continue,
                },
                // (taken above: `given_held`)
                Owner::Request(_) => continue,
                Owner::Rest(s) => match self.slots.get_mut(s as usize) {
                    Some(sc) if !sc.rest.held.is_empty() => std::mem::take(&mut sc.rest.held),
                    _ => continue,
                },
            };
            batch.push((o, calls));
        }
        self.held = 0;
        if writer.tx.send(batch).is_err() {
            // the writer stopped at an error: its error is the fold's
            if let Some(w) = self.writer.take() {
                self.error = Some(match w.finish() {
                    Err(e) => e,
                    Ok(_) => io::Error::other("the spill's writer stopped"),
                });
            }
        }
    }

    /// The requests, their calls and the activity outside them, and the
    /// lift's facts; an error when the spill could not be written.
    pub fn finish(mut self) -> io::Result<(Split, Recorded, TraceFacts)> {
        // every process's current unit let go, and the plan of the rest
        let (plan, closed) = std::mem::take(&mut self.split).finish_streaming();
        for c in closed {
            self.close(c);
        }
        // a capture already written out writes out the rest: the calls
        // held (up to HELD, in vectors sized by doubling) would stay in
        // memory through the whole prediction
        if self.writer.is_some() && self.held > 0 {
            self.write_out();
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        let (spill, mut placed, others) = match self.writer.take() {
            Some(w) => {
                let (spill, placed, others) = w.finish()?;
                (Some(spill), placed, others)
            }
            None => (None, SortedSpill::new(), Vec::new()),
        };
        // the requests made of processes' other units (php-cli process
        // trees, the whole trace), held with those given out
        let mut joined_of_slot: statstorm_trace::event::FastMap<u32, Key> = Default::default();
        for (info, slots) in plan.joined {
            let k = key_of(&info);
            let mut acc = Acc::default();
            for &si in &slots {
                joined_of_slot.insert(si as u32, k);
                if let Some(sc) = self.slots.get(si) {
                    acc.add(&sc.rest);
                }
            }
            self.give(info, &acc);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        // the chunks not written under a request's label: a unit's (its
        // owner known now) and the processes' other calls (a php-cli
        // request's, or background activity's)
        let unit_owner = std::mem::take(&mut self.unit_owner);
        let mut outside: statstorm_trace::event::FastMap<u32, Vec<Chunk>> = Default::default();
        for (seq, (o, chunk)) in others.into_iter().enumerate() {
            let o = match o {
                Owner::Unit(u) => match unit_owner.get(&u) {
                    Some(&o) => o,
                    None => continue,
                },
                o => o,
            };
            let of_request = match o {
                Owner::Request(k) => Some(k),
                Owner::Rest(s) => joined_of_slot.get(&s).copied(),
                Owner::Unit(_) => None,
            };
            match (of_request, o) {
                (Some((start, first_event)), _) => placed.push(Placed {
                    start,
                    first_event,
                    // (a request's calls are put in time order as they are
                    // read back: the order of its chunks does not matter)
                    seq: seq as u64,
                    chunk,
                })?,
                (None, Owner::Rest(s)) => outside.entry(s).or_default().push(chunk),
                _ => {}
            }
        }
        // the calls still held: the requests' (no spill) and the
        // processes' outside them
        let mut held: statstorm_trace::event::FastMap<Key, Vec<(u64, Op)>> = Default::default();
        for (k, h) in std::mem::take(&mut self.given_held) {
            held.entry(k).or_default().extend(h);
        }
        for (si, sc) in self.slots.iter_mut().enumerate() {
            if sc.rest.held.is_empty() {
                continue;
            }
            if let Some(&k) = joined_of_slot.get(&(si as u32)) {
                held.entry(k).or_default().append(&mut sc.rest.held);
            }
        }
        // the requests in time order, each with its chunks (both read in
        // that order)
        let given = std::mem::take(&mut self.given).finish();
        let placed = placed.finish();
        let mut chunks_of = placed.iter();
        let mut next_chunk = chunks_of.next().transpose()?;
        let mut figs = Column::new();
        let mut chunks = Column::new();
        let mut settings: Vec<CliSettings> = Vec::new();
        let mut settings_ids: std::collections::HashMap<CliSettings, u32> = Default::default();
        let mut open: statstorm_trace::event::FastMap<u32, Vec<(u64, Op)>> = Default::default();
        for (p, g) in given.iter().enumerate() {
            let g = g?;
            let k = g.key();
            let from = chunks.len() as u64;
            while let Some(c) = next_chunk.take() {
                if (c.start, c.first_event) > k {
                    next_chunk = Some(c);
                    break;
                }
                // (a chunk of no request given out: none is written so)
                if (c.start, c.first_event) == k {
                    chunks.push(&c.chunk)?;
                }
                next_chunk = chunks_of.next().transpose()?;
            }
            if let Some(h) = held.remove(&k) {
                open.insert(p as u32, h);
            }
            let settings = match g.settings {
                None => u32::MAX,
                Some(s) => match settings_ids.get(&s) {
                    Some(&id) => id,
                    None => {
                        let id = settings.len() as u32;
                        settings.push(s.clone());
                        settings_ids.insert(s, id);
                        id
                    }
                },
            };
            figs.push(&Fig {
                pid: g.pid,
                kind: RequestKind::ALL
                    .iter()
                    .position(|&x| x == g.kind)
                    .unwrap_or(RequestKind::ALL.len() - 1) as u8,
                start_us: g.start_us,
                end_us: g.end_us,
                settings,
                fs: g.fs,
                first_us: g.first_us,
                counts: g.counts,
                chunks: (from, chunks.len() as u64),
            })?;
        }
        drop(chunks_of);
        drop(given);
        // each process's calls outside the requests, by pid
        let mut summary = self.summary;
        let mut background: BTreeMap<u32, usize> = BTreeMap::new();
        for (si, sc) in self.slots.iter().enumerate() {
            if sc.rest.calls() > 0 && !joined_of_slot.contains_key(&(si as u32)) {
                background.insert(sc.pid, si);
            }
        }
        let mut bg = Vec::new();
        for (pid, si) in background {
            let ops = gather(
                spill.as_ref(),
                outside.get(&(si as u32)).into_iter().flatten(),
                self.slots[si].rest.held.iter(),
            )?;
            for o in &ops {
                summary.latencies.remove(o);
            }
            bg.push(Background {
                pid,
                start_us: ops.first().map_or(0, |o| o.t_us),
                end_us: ops
                    .last()
                    .map_or(0, |o| o.t_us + o.dur_us.unwrap_or(0) as i64),
                ops,
            });
        }
        drop(std::mem::take(&mut self.slots));
        let rec = Recorded {
            spill,
            figs,
            chunks,
            tallies: std::mem::take(&mut self.tally_list),
            settings,
            open,
            background: bg,
            error: std::sync::Mutex::new(None),
            timeline: self.timeline,
            summary,
        };
        let facts = self.facts.finish(&rec);
        let split = Split {
            mode: plan.mode,
            note: plan.note,
        };
        Ok((split, rec, facts))
    }
}
