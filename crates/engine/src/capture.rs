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
//! end, so a capture of a million small requests holds that spill's
//! bound, not every request.

use crate::sorted::{Keyed, SortedSpill};
use crate::spill::{Chunk, Spill};
use serde::{Deserialize, Serialize};
use statstorm_php::lift::{CallSource, CallsSummary, FactsBuilder, TraceFacts};
use statstorm_php::request::RequestInfo;
use statstorm_php::request::{Requests, Splitter};
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

/// Whose calls a batch written out holds: a request given out (its place
/// among those given out), a process's calls outside the requests given
/// out (its slot: a php-cli request's, or background activity's, decided
/// at the end), or a unit still taking calls (its id; its owner is known
/// once it closes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owner {
    Request(u32),
    Rest(u32),
    Unit(u32),
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
    /// Its place among the requests given out (then those made at the
    /// end), as its calls are labelled ([`Owner::Request`]).
    k: u32,
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
    /// Per request of the split (same order), where its calls are: its
    /// chunks in the spill are `chunks[at[i]..at[i + 1]]`.
    chunks: Vec<Chunk>,
    at: Vec<usize>,
    /// Per request, its calls held in memory (a capture never written
    /// out); empty when every call is in the spill.
    open: Vec<Vec<(u64, Op)>>,
    /// Per request, its calls per syscall.
    counts: Vec<Tally>,
    /// Per request, the time its calls spent in the kernel.
    fs: Vec<FsTime>,
    /// Per request, the start of its earliest call.
    first_us: Vec<Option<i64>>,
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

impl Recorded {
    /// [`Fold`] over the events of a trace read whole.
    pub fn of(trace: &Trace) -> io::Result<(Requests, Recorded, TraceFacts)> {
        let mut f = Fold::new();
        for e in &trace.events {
            f.push(e, &trace.strings);
        }
        f.finish()
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.at.len().saturating_sub(1)
    }

    /// True without requests.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Per request, its recorded calls per syscall
    /// (`statstorm_php::count_by_syscall` of [`Recorded::calls`]).
    pub fn counts(&self) -> &[Tally] {
        &self.counts
    }

    /// Per request, the time its recorded calls spent in the kernel.
    pub fn fs_times(&self) -> &[FsTime] {
        &self.fs
    }

    /// Per request, the start of its earliest recorded call (`None`: no
    /// call).
    pub fn first_calls(&self) -> &[Option<i64>] {
        &self.first_us
    }

    /// Bytes written to the temporary file (0: all held in memory).
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, Spill::bytes)
    }

    /// Request `i`'s calls, in time order; calls that started in the same
    /// microsecond in the capture's order.
    pub fn calls(&self, i: usize) -> io::Result<Vec<Op>> {
        let cs = self
            .at
            .get(i..i + 2)
            .and_then(|w| self.chunks.get(w[0]..w[1]))
            .unwrap_or(&[]);
        let held = self.open.get(i).map_or(&[][..], Vec::as_slice);
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
                if let Ok(mut slot) = self.error.lock() {
                    slot.get_or_insert(e);
                }
                std::borrow::Cow::Owned(Vec::new())
            }
        }
    }
    fn summary(&self) -> Option<CallsSummary> {
        Some(self.summary.clone())
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
    /// place among those given out.
    given_held: Vec<(u32, Vec<(u64, Op)>)>,
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

/// The spill and where each owner's chunks lie in it, in the order
/// written.
type Written = (Spill, Vec<(Owner, Chunk)>);

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
                let mut placed = Vec::new();
                for batch in rx {
                    for (u, calls) in batch {
                        placed.push((u, spill.put(&calls)?));
                    }
                }
                Ok((spill, placed))
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
                let k = self.given.len() as u32;
                self.give(k, info, &cur);
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

    /// Holds request `k`, its calls those of `acc`.
    fn give(&mut self, k: u32, info: RequestInfo, acc: &Acc) {
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
            k,
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
    pub fn finish(mut self) -> io::Result<(Requests, Recorded, TraceFacts)> {
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
        let (spill, placed) = match self.writer.take() {
            Some(w) => {
                let (spill, placed) = w.finish()?;
                (Some(spill), placed)
            }
            None => (None, Vec::new()),
        };
        // the requests given out and those made of processes' other units
        // (php-cli process trees, the whole trace), in time order
        let n_given = self.given.len();
        let mut joined_of_slot: statstorm_trace::event::FastMap<u32, u32> = Default::default();
        for (j, (info, slots)) in plan.joined.into_iter().enumerate() {
            let mut acc = Acc::default();
            for &si in &slots {
                joined_of_slot.insert(si as u32, j as u32);
                if let Some(sc) = self.slots.get(si) {
                    acc.add(&sc.rest);
                }
            }
            self.give((n_given + j) as u32, info, &acc);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let given = std::mem::take(&mut self.given).finish();
        let n = given.len();
        // each request's place in time order, and its figures in it
        let mut pos = vec![0u32; n];
        let mut counts: Vec<Tally> = Vec::with_capacity(n);
        let mut fs = Vec::with_capacity(n);
        let mut first_us: Vec<Option<i64>> = Vec::with_capacity(n);
        let mut requests = Vec::with_capacity(n);
        for (p, g) in given.iter().enumerate() {
            let g = g?;
            if let Some(x) = pos.get_mut(g.k as usize) {
                *x = p as u32;
            }
            counts.push(
                self.tally_list
                    .get(g.counts as usize)
                    .cloned()
                    .unwrap_or_default(),
            );
            fs.push(g.fs);
            first_us.push(g.first_us);
            requests.push(statstorm_php::request::Request {
                pid: g.pid,
                start_us: g.start_us,
                end_us: g.end_us,
                events: Vec::new(),
                kind: g.kind,
                settings: g.settings,
            });
        }
        drop(given);
        let unit_owner = std::mem::take(&mut self.unit_owner);
        let owner_of = |o: Owner| match o {
            Owner::Unit(u) => unit_owner.get(&u).copied(),
            o => Some(o),
        };
        // the request an owner's calls are (None: background activity)
        let request_of = |o: Owner| -> Option<u32> {
            match owner_of(o)? {
                Owner::Request(k) => pos.get(k as usize).copied(),
                Owner::Rest(s) => joined_of_slot
                    .get(&s)
                    .and_then(|&j| pos.get(n_given + j as usize).copied()),
                Owner::Unit(_) => None,
            }
        };
        // each request's chunks, in the order written: counted, then
        // placed (no list of chunks per owner)
        let mut at = vec![0usize; n + 1];
        for &(o, _) in &placed {
            if let Some(r) = request_of(o) {
                at[r as usize + 1] += 1;
            }
        }
        for r in 0..n {
            at[r + 1] += at[r];
        }
        let mut chunks = vec![Chunk::default(); at[n]];
        let mut next = at.clone();
        let mut outside: statstorm_trace::event::FastMap<u32, Vec<Chunk>> = Default::default();
        for (o, c) in placed {
            match request_of(o) {
                Some(r) => {
                    chunks[next[r as usize]] = c;
                    next[r as usize] += 1;
                }
                None => {
                    if let Some(Owner::Rest(s)) = owner_of(o) {
                        outside.entry(s).or_default().push(c);
                    }
                }
            }
        }
        drop(next);
        // the calls still held: the requests' (no spill) and the
        // processes' outside them
        let mut open: Vec<Vec<(u64, Op)>> = Vec::new();
        for (k, h) in std::mem::take(&mut self.given_held) {
            if let Some(&p) = pos.get(k as usize) {
                open.resize_with(n, Vec::new);
                open[p as usize] = h;
            }
        }
        for (si, sc) in self.slots.iter_mut().enumerate() {
            if sc.rest.held.is_empty() {
                continue;
            }
            if let Some(&j) = joined_of_slot.get(&(si as u32)) {
                if let Some(&p) = pos.get(n_given + j as usize) {
                    open.resize_with(n, Vec::new);
                    open[p as usize].append(&mut sc.rest.held);
                }
            }
        }
        drop(pos);
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
        let split = Requests {
            mode: plan.mode,
            requests,
            note: plan.note,
        };
        let facts = self.facts.finish(&split);
        let rec = Recorded {
            spill,
            chunks,
            at,
            open,
            counts,
            fs,
            first_us,
            background: bg,
            error: std::sync::Mutex::new(None),
            timeline: self.timeline,
            summary,
        };
        Ok((split, rec, facts))
    }
}
