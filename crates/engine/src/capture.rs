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
//! it).

use crate::spill::{Chunk, Spill};
use statstorm_php::lift::{CallSource, CallsSummary, FactsBuilder, TraceFacts};
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// One split unit's calls still in memory (those written out are placed
/// by the spill's writer),
/// each with its event's position in the capture.
#[derive(Default)]
struct UnitCalls {
    /// The process of the unit (set with its first call).
    pid: u32,
    /// The time its calls spent in the kernel, as `-T` showed it.
    fs: FsTime,
    /// The start of its earliest call.
    first_us: Option<i64>,
    open: Vec<(u64, Op)>,
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
/// never held whole): the request split, each event normalized once into
/// a call (fds followed per process) kept with its split unit, and the
/// lift's facts. [`Fold::finish`] hands each unit's calls to its request,
/// or to its process's background activity, once the split is decided.
/// The requests' calls are those of `statstorm_php::lift::request_ops`,
/// so the lift takes them from here (`statstorm_php::lift_from`).
pub struct Fold {
    split: Splitter,
    norm: Normalizer,
    facts: FactsBuilder,
    units: Vec<UnitCalls>,
    /// Per unit, its calls per syscall name: a unit's own while it takes
    /// calls, the pool's copy of an equal tally once its process moved on
    /// to another unit (units repeat their counts: a pointer each).
    counts: Vec<Tally>,
    tallies: statstorm_trace::TallyPool,
    /// Per process, the unit of its last call and that unit's calls by
    /// kind so far (an array bump per call; the unit's tally is made
    /// when its process moves on, or at the end).
    current: statstorm_trace::event::FastMap<u32, Active>,
    /// Units with calls in memory, and how many calls that is.
    open: Vec<u32>,
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

/// A batch of held calls: each unit's, in the order they were held.
type Batch = Vec<(u32, Vec<(u64, Op)>)>;

/// The spill and where each unit's chunks lie in it, in the order written.
type Written = (Spill, Vec<(u32, Chunk)>);

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

/// A process's unit taking calls ([`Fold`]'s `current`).
struct Active {
    unit: u32,
    /// Calls by kind (`OpKind as usize`) since the unit's tally was last
    /// settled.
    by_kind: [u64; OpKind::ALL.len()],
}

impl Active {
    /// Adds the calls counted by kind to `t` (by syscall name) and starts
    /// the count again.
    fn settle(&mut self, t: &mut Tally) {
        for (k, n) in OpKind::ALL.iter().zip(&mut self.by_kind) {
            if *n > 0 {
                t.add(k.syscall_name(statstorm_trace::Flags::default()), *n);
                *n = 0;
            }
        }
    }
}

impl Fold {
    pub fn new() -> Fold {
        Fold::holding(HELD)
    }

    /// A fold that writes the calls out once more than `limit` wait in
    /// memory (0: every call is written out).
    pub fn holding(limit: usize) -> Fold {
        Fold {
            split: Splitter::new(),
            norm: Normalizer::new(),
            facts: FactsBuilder::default(),
            units: Vec::new(),
            counts: Vec::new(),
            tallies: statstorm_trace::TallyPool::new(),
            current: Default::default(),
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
        let unit = self.split.push(e, strings).0 as usize;
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
            if unit >= self.units.len() {
                self.units.resize_with(unit + 1, UnitCalls::default);
                self.counts.resize_with(unit + 1, Tally::new);
            }
            let a = self.current.entry(op.pid).or_insert_with(|| Active {
                unit: unit as u32,
                by_kind: [0; OpKind::ALL.len()],
            });
            if a.unit as usize != unit {
                // the process's unit before is done
                let prev = a.unit as usize;
                let mut c = std::mem::take(&mut self.counts[prev]);
                a.settle(&mut c);
                self.counts[prev] = self.tallies.share(c.shrunk());
                a.unit = unit as u32;
            }
            a.by_kind[op.kind as usize] += 1;
            let uc = &mut self.units[unit];
            uc.pid = op.pid;
            match op.dur_us {
                Some(d) => {
                    uc.fs.us += d;
                    uc.fs.timed += 1;
                }
                None => uc.fs.untimed += 1,
            }
            uc.first_us = Some(uc.first_us.map_or(op.t_us, |f| f.min(op.t_us)));
            if uc.open.is_empty() {
                self.open.push(unit as u32);
            }
            uc.open.push((self.seen, op));
            self.held += 1;
            if self.held > self.limit {
                self.write_out();
            }
        }
        self.seen += 1;
    }

    /// Hands every unit's calls held in memory to the spill's writer.
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
        let batch: Batch = std::mem::take(&mut self.open)
            .into_iter()
            .map(|u| (u, std::mem::take(&mut self.units[u as usize].open)))
            .collect();
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
        // the units still taking calls: their tallies
        for (_, mut a) in std::mem::take(&mut self.current) {
            if let Some(c) = self.counts.get_mut(a.unit as usize) {
                a.settle(c);
            }
        }
        let plan = self.split.finish();
        let n = plan.requests.len();
        let request_of = |u: usize| plan.unit_request.get(u).copied().flatten();
        // each request's chunks, in the order written: counted, then
        // placed (no list of chunks per unit)
        let mut at = vec![0usize; n + 1];
        for &(u, _) in &placed {
            if let Some(r) = request_of(u as usize) {
                at[r as usize + 1] += 1;
            }
        }
        for r in 0..n {
            at[r + 1] += at[r];
        }
        let mut chunks = vec![Chunk::default(); at[n]];
        let mut next = at.clone();
        let mut outside: statstorm_trace::event::FastMap<u32, Vec<Chunk>> = Default::default();
        for (u, c) in placed {
            match request_of(u as usize) {
                Some(r) => {
                    chunks[next[r as usize]] = c;
                    next[r as usize] += 1;
                }
                None => outside.entry(u).or_default().push(c),
            }
        }
        drop(next);
        let mut counts: Vec<Tally> = vec![Tally::new(); n];
        let mut fs = vec![FsTime::default(); n];
        let mut first_us: Vec<Option<i64>> = vec![None; n];
        let mut background: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let mut open: Vec<Vec<(u64, Op)>> = Vec::new();
        for (u, uc) in self.units.iter_mut().enumerate() {
            if uc.fs.timed + uc.fs.untimed == 0 {
                // no call
                continue;
            }
            let pid = uc.pid;
            match request_of(u) {
                Some(r) => {
                    let r = r as usize;
                    if !uc.open.is_empty() {
                        open.resize_with(n, Vec::new);
                        open[r].append(&mut uc.open);
                    }
                    let c = &mut counts[r];
                    if c.is_empty() {
                        c.clone_from(&self.counts[u]);
                    } else {
                        c.merge(&self.counts[u]);
                    }
                    fs[r].add(&uc.fs);
                    let f = &mut first_us[r];
                    *f = match (*f, uc.first_us) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => background.entry(pid).or_default().push(u as u32),
            }
        }
        let mut summary = self.summary;
        let mut bg = Vec::new();
        for (pid, units) in background {
            let ops = gather(
                spill.as_ref(),
                units.iter().flat_map(|u| outside.get(u)).flatten(),
                units.iter().flat_map(|&u| &self.units[u as usize].open),
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
        // the units let go before the requests are made from the plan
        // (the peak of a capture of many small requests)
        drop(std::mem::take(&mut self.units));
        drop(std::mem::take(&mut self.counts));
        let split = Requests::of_plan(&plan);
        drop(plan);
        let facts = self.facts.finish(&split);
        // requests repeat their counts: one copy of each
        let mut pool = statstorm_trace::TallyPool::new();
        let counts = counts.into_iter().map(|c| pool.share(c.shrunk())).collect();
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
