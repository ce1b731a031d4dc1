//! The discrete-event engine. Time is an integer count of nanoseconds; the
//! event queue is a binary heap keyed by (time, sequence number), so events
//! at the same time run in the order they were scheduled and a run is fully
//! determined by its inputs and seed.

use crate::dist::CDist;
use crate::hist::Hist;
use crate::params::{Arrivals, Params, Recurrence, Scope, WhenEmpty};
use crate::report::*;
use crate::request::{RequestSpec, Step};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// Most workers a pool may have. An event's id is a worker number (or 0)
/// and takes the low 20 bits of the event key (see `Engine::schedule`).
pub const MAX_WORKERS: u32 = (1 << 20) - 1;

const EV_ARRIVAL: u8 = 0;
const EV_STEP_DONE: u8 = 1;
const EV_RESUME: u8 = 2;
const EV_REPLY: u8 = 4;
const EV_EVICT_START: u8 = 6;

const K_CPU: u8 = 0;
const K_RPC: u8 = 1;
const K_LOCAL: u8 = 2;
const NO_KEY: u32 = u32::MAX;

// Indices of the per-request time breakdown.
const C_CPU: usize = 0;
const C_BACKLOG: usize = 1;
const C_SLOT: usize = 2;
const C_SRVQ: usize = 3;
const C_IOPS: usize = 4;
const C_RPC: usize = 5;
const C_LOCAL: usize = 6;
const C_LOCK: usize = 7;

/// One IOPS token in bucket units (fine enough for rates with 3 decimals).
const TOKEN: u128 = 1_000_000_000_000;

#[derive(Clone, Copy)]
struct CStep {
    kind: u8,
    key: u32,
    val: u64,
    lo: u32,
    hi: u32,
}

#[derive(Clone, Default)]
struct Worker {
    spec: u32,
    step: u32,
    rpc: u32,
    conn: u32,
    validating: bool,
    arrival: u64,
    req_time_s: i64,
    /// When the current RPC was issued, or the current lock wait began.
    t_mark: u64,
    keyed_ops: u32,
    rpcs: u32,
    comp: [u64; 8],
}

struct SlowReq {
    arrival: u64,
    end: u64,
    rpcs: u64,
    rpc_ns: u64,
    comp: [u64; 8],
}

#[derive(Clone, Default)]
struct Bucket {
    served: u64,
    dropped: u64,
    ttfb_sum: u64,
    ttfb_max: u64,
    in_system: u64,
    tokens: f64,
    rpcs_in_flight_max: u64,
    slot_queue_max: u64,
    validating_max: u64,
}

struct Engine<'a> {
    p: &'a Params,
    // compiled workload: per request shape, its steps and their RPCs
    // (a step's `lo..hi` index its shape's RPCs); a shape made on demand
    // is compiled when it arrives and emptied once done
    spec_steps: Vec<Box<[CStep]>>,
    spec_rpcs: Vec<Box<[u16]>>,
    op_names: Vec<String>,
    op_ids: BTreeMap<String, u16>,
    op_service: Vec<CDist>,
    /// Makes request shape `i` when it arrives ([`simulate_replay_each`]).
    /// Its shape then takes a free slot of the tables above (`slot_req`
    /// names the request in each), given back once the request is done,
    /// whose mean TTFB goes to `done`: the tables hold the requests in
    /// flight.
    make: Option<Box<dyn FnMut(usize) -> RequestSpec + 'a>>,
    slot_free: Vec<u32>,
    slot_req: Vec<u32>,
    /// Takes a request made on demand and its TTFB, ms, once it is done.
    done: Option<Box<Done<'a>>>,
    /// Why a shape made on demand could not be compiled (the run stops).
    error: Option<String>,
    /// Validation stamps per key (1 with the pool's scope, else the
    /// workers), and a new key's first stamp.
    workers_for_stamps: usize,
    init_stamp: i64,
    /// The replayed arrivals not yet scheduled (start, request), in order.
    /// Replayed arrivals are chained (each schedules the next), so one is
    /// pending at a time (`replay_next`), read from here as it is due, not
    /// named in the event key: any number of requests.
    replay: Box<dyn Iterator<Item = (u64, u32)> + 'a>,
    replay_next: Option<(u64, u32)>,
    // time and queue
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<u128>>,
    horizon: u64,
    rng_arr: ChaCha8Rng,
    rng_srv: ChaCha8Rng,
    rng_loc: ChaCha8Rng,
    // pool
    workers: Vec<Worker>,
    idle: VecDeque<u32>,
    backlog: VecDeque<(u64, u32)>,
    next_spec: u64,
    // validation stamps
    nkeys: usize,
    stamps: Vec<i64>,
    validating_now: u64,
    // transport
    session: bool,
    session_free: u32,
    session_wait: VecDeque<u32>,
    conn_free: Vec<u32>,
    conn_wait: Vec<VecDeque<u32>>,
    rr: u32,
    rpcs_in_flight: u64,
    slot_queue: u64,
    // server
    rtt_out: u64,
    rtt_back: u64,
    /// Times at which each nfsd thread becomes free (empty: unlimited).
    thread_free: BinaryHeap<Reverse<u64>>,
    bucket: Option<(u128, u128, u128)>, // (tokens, burst, rate per ns) in bucket units
    bucket_t: u64,
    when_empty: WhenEmpty,
    throttled: Option<CDist>,
    token_min: u128,
    // local fs
    local_op: u64,
    cycle_len: CDist,
    block_p: f64,
    block: CDist,
    cycle_end: u64,
    next_evict: u64,
    // statistics
    events: u64,
    arrived: u64,
    served: u64,
    dropped: u64,
    ttfb: Hist,
    n_sys: u64,
    area_sys: u128,
    sojourn_sum: u128,
    area_rpc: u128,
    rpc_time_sum: u128,
    rpcs_done: u64,
    slot_wait_sum: u128,
    slot_wait_max: u64,
    slot_waited: u64,
    rpcs: u64,
    max_rpcs_in_flight: u64,
    srvq_sum: u128,
    srvq_max: u64,
    srvq_n: u64,
    busy_ns: u128,
    ops: Vec<u64>,
    throttled_ops: u64,
    backlog_wait_sum: u128,
    backlog_max: u64,
    busy_workers: u64,
    max_busy: u64,
    local_ops: u64,
    evictions: u64,
    blocked_ops: u64,
    lock_wait_max: u64,
    performed: u64,
    skipped: u64,
    max_validating: u64,
    slow: Vec<SlowReq>,
    /// Per request shape (per slot, made on demand): (served, dropped,
    /// TTFB sum ns, TTFB max ns).
    per_spec: Vec<(u64, u64, u128, u64)>,
    stall_ns: u64,
    step_ns: u64,
    series: Vec<Bucket>,
}

/// Runs one simulation. `reqs` are the request shapes: with Poisson or
/// periodic arrivals they are used in turn; with [`Arrivals::Replay`] each is
/// played once at its `start_ns`. The result depends only on the inputs.
pub fn simulate_requests(
    reqs: &[RequestSpec],
    params: &Params,
    seed: u64,
) -> Result<Report, String> {
    params.validate()?;
    if reqs.is_empty() {
        return Err("no requests to simulate".into());
    }
    let mut e = Engine::new(reqs, params, seed)?;
    e.run();
    Ok(e.report(seed))
}

/// What happened to the requests of one shape (`reqs[i]`) in a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestOutcome {
    /// Times the shape ran to the end (1 or 0 with [`Arrivals::Replay`]).
    pub served: u64,
    /// Times it was refused (502).
    pub dropped: u64,
    /// Mean and largest TTFB of the served runs (None: never served).
    pub mean_ttfb_ms: Option<f64>,
    pub max_ttfb_ms: Option<f64>,
}

/// [`simulate_requests`], plus the outcome of each request shape, in the
/// order of `reqs` (with [`Arrivals::Replay`]: of each request).
///
/// Takes the shapes as they come: borrowed, or made one at a time by the
/// iterator and freed once compiled into the simulator's own form, so a
/// capture's requests (millions of steps) are never held whole twice.
pub fn simulate_requests_each<R: Borrow<RequestSpec>>(
    reqs: impl IntoIterator<Item = R, IntoIter: ExactSizeIterator>,
    params: &Params,
    seed: u64,
) -> Result<(Report, Vec<RequestOutcome>), String> {
    params.validate()?;
    let reqs = reqs.into_iter();
    if reqs.len() == 0 {
        return Err("no requests to simulate".into());
    }
    let mut e = Engine::new(reqs, params, seed)?;
    e.run();
    let each = outcomes(&e.per_spec);
    Ok((e.report(seed), each))
}

/// [`simulate_requests_each`] of a replay whose request `i` starts at
/// `starts[i]` (ns) and is made by `make(i)` only when it arrives: each
/// request's steps are compiled then and dropped once it is served or
/// refused, so memory holds the requests in flight, not every request
/// (a capture's millions of calls). `params.arrivals` must be
/// [`Arrivals::Replay`]; each request is made exactly once. Gives each
/// request's TTFB, ms (`None`: refused or not served by the end; the
/// `mean_ttfb_ms` of [`simulate_requests_each`]'s outcomes).
pub fn simulate_replay_each(
    starts: &[u64],
    make: impl FnMut(usize) -> RequestSpec,
    params: &Params,
    seed: u64,
) -> Result<(Report, Vec<Option<f64>>), String> {
    let mut order: Vec<(u64, u32)> = Vec::with_capacity(starts.len());
    for (i, &t) in starts.iter().enumerate() {
        let i = u32::try_from(i).map_err(|_| "more than 2^32 requests".to_string())?;
        order.push((t, i));
    }
    order.sort_unstable();
    let last = order.last().map_or(0, |r| r.0);
    let mut each = vec![None; starts.len()];
    let r = simulate_replay_stream(
        order.into_iter(),
        last,
        make,
        |i, ttfb| {
            if let Some(o) = each.get_mut(i) {
                *o = ttfb;
            }
        },
        params,
        seed,
    )?;
    Ok((r, each))
}

/// [`simulate_replay_each`] with the arrivals read as they are due from
/// `arrivals` ((start ns, request), sorted by start then request; `last`
/// the latest start) and each request's TTFB given to `done` as the request
/// is served or refused (`None`: refused; a request not done by the end is
/// never given): memory holds the requests in flight, not a list of
/// arrivals or of TTFBs.
pub fn simulate_replay_stream(
    arrivals: impl Iterator<Item = (u64, u32)>,
    last: u64,
    make: impl FnMut(usize) -> RequestSpec,
    done: impl FnMut(usize, Option<f64>),
    params: &Params,
    seed: u64,
) -> Result<Report, String> {
    params.validate()?;
    let mut arrivals = arrivals.peekable();
    if arrivals.peek().is_none() {
        return Err("no requests to simulate".into());
    }
    if params.arrivals != Arrivals::Replay {
        return Err("requests made on demand need arrivals = replay".into());
    }
    let mut e = Engine::empty(0, params, seed)?;
    e.make = Some(Box::new(make));
    e.done = Some(Box::new(done));
    e.replay_from(Box::new(arrivals), last)?;
    e.run();
    if let Some(err) = e.error.take() {
        return Err(err);
    }
    Ok(e.report(seed))
}

/// Each shape's outcome from its (served, dropped, TTFB sum, max).
fn outcomes(per_spec: &[(u64, u64, u128, u64)]) -> Vec<RequestOutcome> {
    per_spec
        .iter()
        .map(|&(served, dropped, sum, max)| RequestOutcome {
            served,
            dropped,
            mean_ttfb_ms: (served > 0).then(|| round3(sum as f64 / served as f64 / 1e6)),
            max_ttfb_ms: (served > 0).then(|| round3(max as f64 / 1e6)),
        })
        .collect()
}

/// Takes a request made on demand and its TTFB, ms
/// ([`simulate_replay_stream`]).
type Done<'a> = dyn FnMut(usize, Option<f64>) + 'a;

fn stream(seed: u64, n: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(n);
    r
}

impl<'a> Engine<'a> {
    /// Compiles `reqs` (borrowed, or owned and dropped one by one as
    /// compiled) and sets the run up.
    fn new<R: Borrow<RequestSpec>>(
        reqs: impl IntoIterator<Item = R, IntoIter: ExactSizeIterator>,
        p: &'a Params,
        seed: u64,
    ) -> Result<Engine<'a>, String> {
        let reqs = reqs.into_iter();
        let mut e = Engine::empty(reqs.len(), p, seed)?;
        let mut starts: Vec<Option<u64>> = Vec::with_capacity(e.spec_steps.len());
        for (i, r) in reqs.enumerate() {
            let r = r.borrow();
            starts.push(r.start_ns);
            e.compile(i, r)?;
        }
        e.arrivals(&starts)?;
        Ok(e)
    }

    /// The engine for `n_reqs` request shapes, none compiled yet.
    fn empty(n_reqs: usize, p: &'a Params, seed: u64) -> Result<Engine<'a>, String> {
        let n = p.pool.max_children;
        let workers_for_stamps = match p.validation.scope {
            Scope::Pool => 1,
            Scope::Worker => n as usize,
        };
        let init = p
            .validation
            .initial_stamp_s
            .unwrap_or(p.validation.freq_s as i64);
        let nconn = p.transport.nconnect as usize;
        let rtt = crate::dist::ms_to_ns(p.server.rtt_ms);
        let bucket = p.server.iops.as_ref().map(|i| {
            let burst = (i.burst * TOKEN as f64).round() as u128;
            let rate = ((i.rate_per_s * 1000.0).round() as u128).max(1); // units per ns
            (burst, burst, rate)
        });
        Ok(Engine {
            p,
            spec_steps: vec![Box::default(); n_reqs],
            spec_rpcs: vec![Box::default(); n_reqs],
            ops: Vec::new(),
            op_names: Vec::new(),
            op_ids: BTreeMap::new(),
            op_service: Vec::new(),
            make: None,
            slot_free: Vec::new(),
            slot_req: Vec::new(),
            done: None,
            error: None,
            workers_for_stamps,
            init_stamp: init,
            replay: Box::new(std::iter::empty()),
            replay_next: None,
            now: 0,
            seq: 0,
            heap: BinaryHeap::with_capacity(1024),
            horizon: (p.duration_s * 1e9).round() as u64,
            rng_arr: stream(seed, 1),
            rng_srv: stream(seed, 2),
            rng_loc: stream(seed, 3),
            workers: vec![Worker::default(); n as usize],
            idle: (0..n).collect(),
            backlog: VecDeque::new(),
            next_spec: 0,
            nkeys: 0,
            stamps: Vec::new(),
            validating_now: 0,
            session: p.transport.session_slots > 0,
            session_free: p.transport.session_slots,
            session_wait: VecDeque::new(),
            conn_free: vec![p.transport.xprt_slots; nconn],
            conn_wait: vec![VecDeque::new(); nconn],
            rr: 0,
            rpcs_in_flight: 0,
            slot_queue: 0,
            rtt_out: rtt / 2,
            rtt_back: rtt - rtt / 2,
            thread_free: (0..p.server.threads).map(|_| Reverse(0)).collect(),
            token_min: bucket.map(|b| b.0).unwrap_or(0),
            bucket,
            bucket_t: 0,
            when_empty: p
                .server
                .iops
                .as_ref()
                .map(|i| i.when_empty)
                .unwrap_or(WhenEmpty::Queue),
            throttled: p
                .server
                .iops
                .as_ref()
                .and_then(|i| i.throttled_service.as_ref())
                .map(|d| d.compile()),
            local_op: (p.local_fs.op_us * 1e3).round() as u64,
            cycle_len: p.local_fs.eviction_length.compile(),
            block_p: p.local_fs.block_probability,
            block: p.local_fs.block.compile(),
            cycle_end: 0,
            next_evict: u64::MAX,
            events: 0,
            arrived: 0,
            served: 0,
            dropped: 0,
            ttfb: Hist::new(),
            n_sys: 0,
            area_sys: 0,
            sojourn_sum: 0,
            area_rpc: 0,
            rpc_time_sum: 0,
            rpcs_done: 0,
            slot_wait_sum: 0,
            slot_wait_max: 0,
            slot_waited: 0,
            rpcs: 0,
            max_rpcs_in_flight: 0,
            srvq_sum: 0,
            srvq_max: 0,
            srvq_n: 0,
            busy_ns: 0,
            throttled_ops: 0,
            backlog_wait_sum: 0,
            backlog_max: 0,
            busy_workers: 0,
            max_busy: 0,
            local_ops: 0,
            evictions: 0,
            blocked_ops: 0,
            lock_wait_max: 0,
            performed: 0,
            skipped: 0,
            max_validating: 0,
            slow: Vec::new(),
            per_spec: vec![(0, 0, 0, 0); n_reqs],
            stall_ns: crate::dist::ms_to_ns(p.stall_ms),
            step_ns: ((p.series_step_s * 1e9).round() as u64).max(1),
            series: Vec::new(),
        })
    }

    /// The number of RPC name `o`, given on its first use (with its
    /// service time and its count).
    fn op_id(&mut self, o: &str) -> Result<u16, String> {
        if let Some(&id) = self.op_ids.get(o) {
            return Ok(id);
        }
        if self.op_names.len() >= u16::MAX as usize {
            return Err("too many distinct RPC names".into());
        }
        let id = self.op_names.len() as u16;
        self.op_ids.insert(o.to_string(), id);
        self.op_names.push(o.to_string());
        self.op_service.push(
            self.p
                .server
                .op_service
                .iter()
                .find(|s| s.op == o)
                .map(|s| s.service.compile())
                .unwrap_or_else(|| self.p.server.service.compile()),
        );
        self.ops.push(0);
        Ok(id)
    }

    /// Compiles request shape `i` into the simulator's own steps.
    fn compile(&mut self, i: usize, r: &RequestSpec) -> Result<(), String> {
        self.compile_as(i, i, r)
    }

    /// Compiles request `name`'s shape `r` as shape `i`.
    fn compile_as(&mut self, i: usize, name: usize, r: &RequestSpec) -> Result<(), String> {
        if r.cpu_ns() > 1_000_000_000_000_000_000 {
            return Err(format!("request {name} has more than 1e9 s of CPU time"));
        }
        let mut steps = Vec::with_capacity(r.steps.len());
        let mut rpc_ops: Vec<u16> = Vec::new();
        for s in &r.steps {
            let c = match s {
                Step::Cpu { ns } => CStep {
                    kind: K_CPU,
                    key: NO_KEY,
                    val: *ns,
                    lo: 0,
                    hi: 0,
                },
                Step::Rpcs { ops, key } => {
                    let lo = rpc_ops.len() as u32;
                    for o in ops {
                        rpc_ops.push(self.op_id(o)?);
                    }
                    CStep {
                        kind: K_RPC,
                        key: key.unwrap_or(NO_KEY),
                        val: 0,
                        lo,
                        hi: rpc_ops.len() as u32,
                    }
                }
                Step::Local { key } => CStep {
                    kind: K_LOCAL,
                    key: key.unwrap_or(NO_KEY),
                    val: 0,
                    lo: 0,
                    hi: 0,
                },
            };
            if c.key != NO_KEY {
                if c.key >= 10_000_000 {
                    return Err(format!(
                        "validation key {} is too large (max 9999999)",
                        c.key
                    ));
                }
                self.grow_keys(c.key as usize + 1)?;
            }
            steps.push(c);
        }
        self.spec_steps[i] = steps.into_boxed_slice();
        self.spec_rpcs[i] = rpc_ops.into_boxed_slice();
        Ok(())
    }

    /// Room for validation keys `0..n` (each new key's stamps at the
    /// initial stamp).
    fn grow_keys(&mut self, n: usize) -> Result<(), String> {
        if n <= self.nkeys {
            return Ok(());
        }
        if n * self.workers_for_stamps > 200_000_000 {
            return Err("too many validation keys x workers".into());
        }
        self.nkeys = n;
        self.stamps
            .resize(n * self.workers_for_stamps, self.init_stamp);
        Ok(())
    }

    /// The arrivals (`starts`: each request's, for a replay) and the
    /// first events.
    fn arrivals(&mut self, starts: &[Option<u64>]) -> Result<(), String> {
        if self.p.arrivals != Arrivals::Replay {
            return self.replay_from(Box::new(std::iter::empty()), 0);
        }
        let mut replay = Vec::with_capacity(starts.len());
        for (i, start) in starts.iter().enumerate() {
            match *start {
                Some(t) => replay.push((t, i as u32)),
                None => {
                    return Err(format!(
                        "arrivals = replay but request {i} has no start time"
                    ))
                }
            }
        }
        replay.sort();
        let last = replay.last().map_or(0, |r| r.0);
        self.replay_from(Box::new(replay.into_iter()), last)
    }

    /// The replayed arrivals read from `replay` ((start, request) in that
    /// order, the last start `last`; nothing with other arrivals), and the
    /// first events.
    fn replay_from(
        &mut self,
        replay: Box<dyn Iterator<Item = (u64, u32)> + 'a>,
        last: u64,
    ) -> Result<(), String> {
        let p = self.p;
        if p.arrivals == Arrivals::Replay {
            if last > 10_000_000_000_000_000 {
                return Err(format!("a request starts after 1e7 s: {last}"));
            }
            let last_s = last as f64 / 1e9;
            if last_s / p.series_step_s > 1e7 {
                return Err(format!(
                    "series_step_s = {} gives more than 10 million rows up to the last start ({last_s} s)",
                    p.series_step_s
                ));
            }
            self.replay = replay;
        }
        // First arrival and first eviction.
        match p.arrivals {
            Arrivals::Replay => {
                self.replay_next = self.replay.next();
                if let Some((t, _)) = self.replay_next {
                    self.schedule(t, EV_ARRIVAL, 0);
                }
            }
            _ => {
                let t = self.gap();
                if t < self.horizon {
                    self.schedule(t, EV_ARRIVAL, 0);
                }
            }
        }
        if p.local_fs.eviction_every_s > 0.0 {
            let t = self.evict_gap();
            if t < self.horizon {
                self.schedule(t, EV_EVICT_START, 0);
                self.next_evict = t;
            }
        }
        Ok(())
    }

    /// Queues event `kind` for `id` at `t`. The key is time (64 bits), then
    /// sequence number (40 bits, so events at one time pop in scheduling
    /// order), kind (4 bits) and id (20 bits): ids are worker numbers,
    /// at most [`MAX_WORKERS`] (checked by `Params::validate`), or 0.
    #[inline]
    fn schedule(&mut self, t: u64, kind: u8, id: u32) {
        debug_assert!(id <= MAX_WORKERS, "event id {id} does not fit 20 bits");
        let k = (t as u128) << 64
            | ((self.seq as u128) & 0xFF_FFFF_FFFF) << 24
            | (kind as u128) << 20
            | id as u128;
        self.seq += 1;
        self.heap.push(Reverse(k));
    }

    fn gap(&mut self) -> u64 {
        match self.p.arrivals {
            Arrivals::Poisson { rate_per_s } => {
                // At least 1 ns, as in the periodic case: a gap that rounds
                // to 0 would let arrivals pile up at one instant forever.
                // `Params::validate` keeps the mean gap >= 1 ns.
                let u: f64 = self.rng_arr.gen();
                (-(1.0 - u).ln() / rate_per_s * 1e9).round().max(1.0) as u64
            }
            Arrivals::Periodic { rate_per_s } => (1e9 / rate_per_s).round().max(1.0) as u64,
            Arrivals::Replay => 0,
        }
    }

    fn evict_gap(&mut self) -> u64 {
        let every = self.p.local_fs.eviction_every_s * 1e9;
        match self.p.local_fs.eviction_recurrence {
            Recurrence::Periodic => every.round().max(1.0) as u64,
            Recurrence::Poisson => {
                let u: f64 = self.rng_loc.gen();
                (-(1.0 - u).ln() * every).round().max(1.0) as u64
            }
        }
    }

    fn run(&mut self) {
        let mut next_row = 0u64;
        while let Some(Reverse(k)) = self.heap.pop() {
            let t = (k >> 64) as u64;
            let kind = ((k >> 20) & 0xF) as u8;
            let id = (k & 0xF_FFFF) as u32;
            self.events += 1;
            let dt = (t - self.now) as u128;
            self.area_sys += self.n_sys as u128 * dt;
            self.area_rpc += self.rpcs_in_flight as u128 * dt;
            self.now = t;
            while t >= next_row {
                self.open_row(next_row);
                next_row += self.step_ns;
            }
            match kind {
                EV_ARRIVAL => self.on_arrival(t),
                EV_STEP_DONE => self.step_done(id, t),
                EV_RESUME => self.advance(id, t),
                EV_REPLY => self.reply(id, t),
                EV_EVICT_START => self.evict_start(t),
                _ => unreachable!("unknown event kind {kind}"),
            }
        }
    }

    /// Starts a series row at time `t0`, recording the state there.
    fn open_row(&mut self, t0: u64) {
        let tokens = match self.bucket {
            Some((tok, burst, rate)) => {
                let dt = t0.saturating_sub(self.bucket_t) as u128;
                (tok + dt * rate).min(burst) as f64 / TOKEN as f64
            }
            None => 0.0,
        };
        self.series.push(Bucket {
            in_system: self.n_sys,
            tokens,
            rpcs_in_flight_max: self.rpcs_in_flight,
            slot_queue_max: self.slot_queue,
            validating_max: self.validating_now,
            ..Bucket::default()
        });
    }

    #[inline]
    fn row(&mut self) -> &mut Bucket {
        let i = self.series.len() - 1;
        &mut self.series[i]
    }

    fn on_arrival(&mut self, t: u64) {
        self.arrived += 1;
        let spec = if self.p.arrivals == Arrivals::Replay {
            let (_, spec) = self.replay_next.take().unwrap_or((t, 0));
            self.replay_next = self.replay.next();
            if let Some((tn, _)) = self.replay_next {
                self.schedule(tn.max(t), EV_ARRIVAL, 0);
            }
            spec
        } else {
            let spec = (self.next_spec % self.spec_steps.len() as u64) as u32;
            self.next_spec += 1;
            let tn = t + self.gap();
            if tn < self.horizon {
                self.schedule(tn, EV_ARRIVAL, 0);
            }
            spec
        };
        let spec = match self.make.as_mut() {
            Some(make) => {
                // a replayed request made as it arrives (each arrives
                // once), its shape in a free slot
                let r = make(spec as usize);
                let slot = match self.slot_free.pop() {
                    Some(s) => s,
                    None => {
                        self.spec_steps.push(Box::default());
                        self.spec_rpcs.push(Box::default());
                        self.per_spec.push((0, 0, 0, 0));
                        self.slot_req.push(0);
                        (self.spec_steps.len() - 1) as u32
                    }
                };
                self.slot_req[slot as usize] = spec;
                if let Err(e) = self.compile_as(slot as usize, spec as usize, &r) {
                    self.error = Some(e);
                    self.heap.clear();
                    return;
                }
                slot
            }
            None => spec,
        };
        if let Some(w) = self.idle.pop_front() {
            self.n_sys += 1;
            self.start(w, t, t, spec);
        } else if (self.backlog.len() as u64) < self.p.pool.listen_backlog as u64 {
            self.n_sys += 1;
            self.backlog.push_back((t, spec));
            self.backlog_max = self.backlog_max.max(self.backlog.len() as u64);
        } else {
            self.dropped += 1;
            self.row().dropped += 1;
            self.per_spec[spec as usize].1 += 1;
            self.let_go(spec);
        }
    }

    /// A shape made on demand is done: its outcome kept, its steps
    /// dropped and its slot given back.
    fn let_go(&mut self, spec: u32) {
        if self.make.is_some() {
            let s = spec as usize;
            let (served, _, sum, _) = std::mem::take(&mut self.per_spec[s]);
            if let Some(done) = self.done.as_mut() {
                done(
                    self.slot_req[s] as usize,
                    (served > 0).then(|| round3(sum as f64 / served as f64 / 1e6)),
                );
            }
            self.spec_steps[s] = Box::default();
            self.spec_rpcs[s] = Box::default();
            self.slot_free.push(spec);
        }
    }

    fn start(&mut self, w: u32, t: u64, arrival: u64, spec: u32) {
        self.busy_workers += 1;
        self.max_busy = self.max_busy.max(self.busy_workers);
        self.backlog_wait_sum += (t - arrival) as u128;
        let wk = &mut self.workers[w as usize];
        *wk = Worker {
            spec,
            step: 0,
            arrival,
            req_time_s: (t / 1_000_000_000) as i64,
            ..Worker::default()
        };
        wk.comp[C_BACKLOG] = t - arrival;
        self.advance(w, t);
    }

    /// Runs worker `w` from its current step until it must wait.
    ///
    /// Steps that touch nothing shared run ahead of the clock without an
    /// event: CPU time, and local calls while no eviction cycle can start
    /// before them (`next_evict`). A step that needs the shared state as of
    /// its own time (an RPC, the end of the request, a stale validation stamp,
    /// a local call at or past the next eviction) is resumed by an event at
    /// that time. A fresh stamp may be read ahead: stamps only move forward
    /// while no request runs longer than `revalidate_freq`.
    fn advance(&mut self, w: u32, t0: u64) {
        let now = self.now;
        let mut t = t0;
        let freq = self.p.validation.freq_s;
        loop {
            let wk = &self.workers[w as usize];
            if wk.step as usize == self.spec_steps[wk.spec as usize].len() {
                if t > now {
                    self.schedule(t, EV_RESUME, w);
                } else {
                    self.finish(w, t);
                }
                return;
            }
            let s = self.spec_steps[wk.spec as usize][wk.step as usize];
            if s.kind == K_CPU {
                let wk = &mut self.workers[w as usize];
                wk.comp[C_CPU] += s.val;
                wk.step += 1;
                t += s.val;
                continue;
            }
            let mut check = false;
            if s.key != NO_KEY && freq > 0 {
                // R64: skipped while revalidate_freq > 0 and stamp >= request_time.
                let idx = self.stamp_index(w, s.key);
                if wk.req_time_s <= self.stamps[idx] {
                    self.skipped += 1;
                    self.workers[w as usize].step += 1;
                    continue;
                }
                check = true;
            }
            let real_time = s.kind == K_RPC || check || t >= self.next_evict;
            if real_time && t > now {
                self.schedule(t, EV_RESUME, w);
                return;
            }
            if s.key != NO_KEY {
                self.performed += 1;
                let wk = &mut self.workers[w as usize];
                wk.validating = check;
                wk.keyed_ops += 1;
                if wk.keyed_ops == 1 {
                    self.validating_now += 1;
                    self.max_validating = self.max_validating.max(self.validating_now);
                    let v = self.validating_now;
                    let r = self.row();
                    r.validating_max = r.validating_max.max(v);
                }
            }
            if s.kind == K_RPC {
                if s.lo == s.hi {
                    self.finish_step(w);
                    continue;
                }
                self.workers[w as usize].rpc = s.lo;
                self.submit(w, t);
                return;
            }
            // K_LOCAL
            let cost = self.local(w, t);
            if check {
                // The stamp is written when the call completes, at that time.
                self.schedule(t + cost, EV_STEP_DONE, w);
                return;
            }
            self.finish_step(w);
            t += cost;
        }
    }

    #[inline]
    fn stamp_index(&self, w: u32, key: u32) -> usize {
        match self.p.validation.scope {
            Scope::Pool => key as usize,
            // key-major: a key first used late (a shape compiled on
            // demand) adds its workers' stamps at the end
            Scope::Worker => key as usize * self.workers_for_stamps + w as usize,
        }
    }

    /// Marks the current step done (sets the validation stamp if keyed).
    fn finish_step(&mut self, w: u32) {
        let wk = &self.workers[w as usize];
        if wk.validating {
            let key = self.spec_steps[wk.spec as usize][wk.step as usize].key;
            let idx = self.stamp_index(w, key);
            // R64: revalidate = request_time + revalidate_freq.
            self.stamps[idx] = wk.req_time_s + self.p.validation.freq_s as i64;
        }
        let wk = &mut self.workers[w as usize];
        wk.validating = false;
        wk.step += 1;
    }

    fn step_done(&mut self, w: u32, t: u64) {
        self.finish_step(w);
        self.advance(w, t);
    }

    fn finish(&mut self, w: u32, t: u64) {
        let wk = &self.workers[w as usize];
        let ttfb = t - wk.arrival;
        self.ttfb.add(ttfb);
        self.served += 1;
        self.sojourn_sum += ttfb as u128;
        self.n_sys -= 1;
        self.busy_workers -= 1;
        if wk.keyed_ops > 0 {
            self.validating_now -= 1;
        }
        if ttfb > self.stall_ns {
            let rpc_ns = wk.comp[C_SLOT] + wk.comp[C_SRVQ] + wk.comp[C_IOPS] + wk.comp[C_RPC];
            self.slow.push(SlowReq {
                arrival: wk.arrival,
                end: t,
                rpcs: wk.rpcs as u64,
                rpc_ns,
                comp: wk.comp,
            });
        }
        let spec = self.workers[w as usize].spec;
        let ps = &mut self.per_spec[spec as usize];
        ps.0 += 1;
        ps.2 += ttfb as u128;
        ps.3 = ps.3.max(ttfb);
        self.let_go(spec);
        let r = self.row();
        r.served += 1;
        r.ttfb_sum += ttfb;
        r.ttfb_max = r.ttfb_max.max(ttfb);
        if let Some((arrival, spec)) = self.backlog.pop_front() {
            self.start(w, t, arrival, spec);
        } else {
            self.idle.push_back(w);
        }
    }

    // ---- transport: R44 session slot first (rpc_call_prepare), then the
    // connection's SunRPC slot (call_reserve, R43), round robin over nconnect
    // connections (R45).

    fn submit(&mut self, w: u32, t: u64) {
        self.rpcs += 1;
        self.rpcs_in_flight += 1;
        self.max_rpcs_in_flight = self.max_rpcs_in_flight.max(self.rpcs_in_flight);
        let f = self.rpcs_in_flight;
        let r = self.row();
        r.rpcs_in_flight_max = r.rpcs_in_flight_max.max(f);
        let wk = &mut self.workers[w as usize];
        wk.t_mark = t;
        wk.rpcs += 1;
        if self.session {
            if self.session_free > 0 {
                self.session_free -= 1;
            } else {
                self.session_wait.push_back(w);
                self.queued_slot(1);
                return;
            }
        }
        self.take_conn(w, t, false);
    }

    fn queued_slot(&mut self, d: i64) {
        self.slot_queue = (self.slot_queue as i64 + d) as u64;
        let q = self.slot_queue;
        let r = self.row();
        r.slot_queue_max = r.slot_queue_max.max(q);
    }

    fn take_conn(&mut self, w: u32, t: u64, _from_queue: bool) {
        let c = self.rr;
        self.rr = (self.rr + 1) % self.conn_free.len() as u32;
        self.workers[w as usize].conn = c;
        if self.conn_free[c as usize] > 0 {
            self.conn_free[c as usize] -= 1;
            self.send(w, t);
        } else {
            self.conn_wait[c as usize].push_back(w);
            self.queued_slot(1);
        }
    }

    /// The RPC holds its slots and goes out. Every RPC reaches the server
    /// `rtt/2` after it is sent, so RPCs reach the server in the order they
    /// are sent; the server is FIFO, so each RPC's start of service is known
    /// now: the later of its arrival, the first free thread and (queue mode)
    /// the next token. Only the reply is an event.
    fn send(&mut self, w: u32, t: u64) {
        let wk = &mut self.workers[w as usize];
        let wait = t - wk.t_mark;
        wk.comp[C_SLOT] += wait;
        if wait > 0 {
            self.slot_waited += 1;
            self.slot_wait_sum += wait as u128;
            self.slot_wait_max = self.slot_wait_max.max(wait);
        }
        let arrive = t + self.rtt_out;
        // R46: the first of `threads` nfsd threads to become free.
        let thread_at = match self.thread_free.pop() {
            Some(Reverse(free)) => arrive.max(free),
            None => arrive,
        };
        let mut start = thread_at;
        let mut throttled = false;
        if let Some((tok, burst, rate)) = self.bucket {
            let base = thread_at.max(self.bucket_t);
            let mut tok = (tok + (base - self.bucket_t) as u128 * rate).min(burst);
            let mut at = base;
            if tok >= TOKEN {
                tok -= TOKEN;
                start = thread_at;
            } else if self.when_empty == WhenEmpty::Queue {
                let wait = (TOKEN - tok).div_ceil(rate) as u64;
                at = base + wait;
                tok = tok + wait as u128 * rate - TOKEN;
                start = at;
            } else {
                throttled = true;
                at = self.bucket_t.max(thread_at);
            }
            self.bucket = Some((tok, burst, rate));
            self.bucket_t = at;
            self.token_min = self.token_min.min(tok);
        }
        let wk = &self.workers[w as usize];
        let op = self.spec_rpcs[wk.spec as usize][wk.rpc as usize] as usize;
        let service = if throttled {
            self.throttled_ops += 1;
            self.throttled
                .expect("validated: slow mode has a throttled service")
                .sample(&mut self.rng_srv)
        } else {
            self.op_service[op].sample(&mut self.rng_srv)
        };
        if self.p.server.threads > 0 {
            self.thread_free.push(Reverse(start + service));
        }
        let wk = &mut self.workers[w as usize];
        wk.comp[C_SRVQ] += thread_at - arrive;
        wk.comp[C_IOPS] += start - thread_at;
        if throttled {
            wk.comp[C_IOPS] += service;
        } else {
            wk.comp[C_RPC] += service;
        }
        wk.comp[C_RPC] += self.rtt_out + self.rtt_back;
        let qwait = start - arrive;
        self.srvq_sum += qwait as u128;
        self.srvq_max = self.srvq_max.max(qwait);
        self.srvq_n += 1;
        self.busy_ns += service as u128;
        self.ops[op] += 1;
        self.schedule(start + service + self.rtt_back, EV_REPLY, w);
    }

    fn reply(&mut self, w: u32, t: u64) {
        self.rpcs_in_flight -= 1;
        self.rpcs_done += 1;
        self.rpc_time_sum += (t - self.workers[w as usize].t_mark) as u128;
        let c = self.workers[w as usize].conn as usize;
        if let Some(w2) = self.conn_wait[c].pop_front() {
            self.queued_slot(-1);
            self.send(w2, t);
        } else {
            self.conn_free[c] += 1;
        }
        if self.session {
            if let Some(w2) = self.session_wait.pop_front() {
                self.queued_slot(-1);
                self.take_conn(w2, t, true);
            } else {
                self.session_free += 1;
            }
        }
        let wk = &mut self.workers[w as usize];
        wk.rpc += 1;
        let hi = self.spec_steps[wk.spec as usize][wk.step as usize].hi;
        if wk.rpc < hi {
            self.submit(w, t);
        } else {
            self.step_done(w, t);
        }
    }

    // ---- local filesystem with eviction cycles.

    /// A local call issued at `t`; returns its duration.
    fn local(&mut self, w: u32, t: u64) -> u64 {
        self.local_ops += 1;
        let mut cost = self.local_op;
        if t < self.cycle_end && self.rng_loc.gen::<f64>() < self.block_p {
            let sleep = self.block.sample(&mut self.rng_loc);
            self.blocked_ops += 1;
            self.lock_wait_max = self.lock_wait_max.max(sleep);
            self.workers[w as usize].comp[C_LOCK] += sleep;
            cost += sleep;
        }
        self.workers[w as usize].comp[C_LOCAL] += self.local_op;
        cost
    }

    fn evict_start(&mut self, t: u64) {
        self.evictions += 1;
        let len = self.cycle_len.sample(&mut self.rng_loc);
        self.cycle_end = self.cycle_end.max(t + len);
        let next = t + self.evict_gap();
        if next < self.horizon {
            self.schedule(next, EV_EVICT_START, 0);
            self.next_evict = next;
        } else {
            self.next_evict = u64::MAX;
        }
    }

    // ---- results

    fn report(&self, seed: u64) -> Report {
        let ms = |ns: f64| round3(ns / 1e6);
        let end = self.now;
        let end_s = end as f64 / 1e9;
        let little = |name, area: u128, n: u64, sum: u128| {
            let l = if end > 0 {
                area as f64 / end as f64
            } else {
                0.0
            };
            let x = if end > 0 { n as f64 / end_s } else { 0.0 };
            let w = if n > 0 {
                sum as f64 / n as f64 / 1e9
            } else {
                0.0
            };
            let xw = x * w;
            let err = if l > 0.0 {
                (l - xw).abs() / l
            } else {
                xw.abs()
            };
            LittleCheck {
                name,
                in_flight_mean: round6(l),
                throughput_per_s: round6(x),
                latency_mean_ms: round6(w * 1e3),
                throughput_x_latency: round6(xw),
                rel_err: err,
            }
        };
        let threads = self.p.server.threads;
        let utilisation = if end == 0 {
            0.0
        } else if threads == 0 {
            self.busy_ns as f64 / end as f64
        } else {
            self.busy_ns as f64 / (end as f64 * threads as f64)
        };
        let series = self.series_out();
        Report {
            schema: SCHEMA,
            scenario: None,
            seed,
            duration_s: self.p.duration_s,
            end_s: round6(end_s),
            requests: Requests {
                arrived: self.arrived,
                served: self.served,
                dropped: self.dropped,
                drop_rate_pct: if self.arrived > 0 {
                    round6(100.0 * self.dropped as f64 / self.arrived as f64)
                } else {
                    0.0
                },
            },
            ttfb_ms: Ttfb {
                p50: ms(self.ttfb.quantile(0.5) as f64),
                p90: ms(self.ttfb.quantile(0.9) as f64),
                p99: ms(self.ttfb.quantile(0.99) as f64),
                max: ms(self.ttfb.max() as f64),
                mean: ms(self.ttfb.mean()),
            },
            stalls: self.stalls(),
            slots: Slots {
                session_slots: self.p.transport.session_slots,
                nconnect: self.p.transport.nconnect,
                xprt_slots: self.p.transport.xprt_slots,
                rpcs: self.rpcs,
                waited: self.slot_waited,
                max_wait_ms: ms(self.slot_wait_max as f64),
                mean_wait_ms: if self.rpcs > 0 {
                    round6(self.slot_wait_sum as f64 / self.rpcs as f64 / 1e6)
                } else {
                    0.0
                },
                max_rpcs_in_flight: self.max_rpcs_in_flight,
            },
            server: ServerOut {
                utilisation: round6(utilisation),
                ops: self
                    .op_names
                    .iter()
                    .cloned()
                    .zip(self.ops.iter().copied())
                    .collect(),
                mean_queue_wait_ms: if self.srvq_n > 0 {
                    round6(self.srvq_sum as f64 / self.srvq_n as f64 / 1e6)
                } else {
                    0.0
                },
                max_queue_wait_ms: ms(self.srvq_max as f64),
                throttled_ops: self.throttled_ops,
                token_min: self
                    .bucket
                    .map(|_| round3(self.token_min as f64 / TOKEN as f64)),
            },
            pool: PoolOut {
                max_children: self.p.pool.max_children,
                listen_backlog: self.p.pool.listen_backlog,
                mean_backlog_wait_ms: if self.served > 0 {
                    round6(self.backlog_wait_sum as f64 / self.served as f64 / 1e6)
                } else {
                    0.0
                },
                max_backlog: self.backlog_max,
                max_busy_workers: self.max_busy,
            },
            local_fs: LocalOut {
                ops: self.local_ops,
                evictions: self.evictions,
                blocked_ops: self.blocked_ops,
                max_lock_wait_ms: ms(self.lock_wait_max as f64),
            },
            validation: ValidationOut {
                performed: self.performed,
                skipped: self.skipped,
                max_workers_at_once: self.max_validating,
            },
            littles_law: vec![
                little("pool", self.area_sys, self.served, self.sojourn_sum),
                little("rpcs", self.area_rpc, self.rpcs_done, self.rpc_time_sum),
            ],
            series,
            engine: EngineOut {
                events: self.events,
                wall_ms: None,
            },
        }
    }

    fn series_out(&self) -> Series {
        let mut s = Series {
            step_s: self.p.series_step_s,
            ..Series::default()
        };
        for b in &self.series {
            s.served.push(b.served);
            s.dropped.push(b.dropped);
            s.ttfb_mean_ms.push(if b.served > 0 {
                round3(b.ttfb_sum as f64 / b.served as f64 / 1e6)
            } else {
                0.0
            });
            s.ttfb_max_ms.push(round3(b.ttfb_max as f64 / 1e6));
            s.in_system.push(b.in_system);
            if self.bucket.is_some() {
                s.tokens.push(round3(b.tokens));
            }
            s.rpcs_in_flight_max.push(b.rpcs_in_flight_max);
            s.slot_queue_max.push(b.slot_queue_max);
            s.workers_validating_max.push(b.validating_max);
        }
        s
    }

    fn stalls(&self) -> Vec<Stall> {
        let mut slow: Vec<&SlowReq> = self.slow.iter().collect();
        slow.sort_by_key(|r| (r.arrival, r.end));
        let mut out = Vec::new();
        let mut i = 0;
        while i < slow.len() {
            let start = slow[i].arrival;
            let mut end = slow[i].end;
            let mut j = i;
            let mut comp = [0u64; 8];
            let (mut rpcs, mut rpc_ns, mut max_ttfb) = (0u64, 0u64, 0u64);
            while j < slow.len() && slow[j].arrival <= end {
                end = end.max(slow[j].end);
                for (c, v) in comp.iter_mut().zip(slow[j].comp.iter()) {
                    *c += v;
                }
                rpcs += slow[j].rpcs;
                rpc_ns += slow[j].rpc_ns;
                max_ttfb = max_ttfb.max(slow[j].end - slow[j].arrival);
                j += 1;
            }
            let (r0, r1) = (
                (start / self.step_ns) as usize,
                (end / self.step_ns) as usize,
            );
            let rows = &self.series[r0.min(self.series.len())..(r1 + 1).min(self.series.len())];
            let breakdown = Breakdown::from_ns(&comp);
            out.push(Stall {
                start_s: round3(start as f64 / 1e9),
                duration_ms: round3((end - start) as f64 / 1e6),
                cause: breakdown.dominant(),
                requests: (j - i) as u64,
                max_ttfb_ms: round3(max_ttfb as f64 / 1e6),
                rpcs,
                mean_rpc_ms: if rpcs > 0 {
                    round3(rpc_ns as f64 / rpcs as f64 / 1e6)
                } else {
                    0.0
                },
                max_workers_validating: rows.iter().map(|b| b.validating_max).max().unwrap_or(0),
                max_rpcs_in_flight: rows.iter().map(|b| b.rpcs_in_flight_max).max().unwrap_or(0),
                max_slot_queue: rows.iter().map(|b| b.slot_queue_max).max().unwrap_or(0),
                dropped: rows.iter().map(|b| b.dropped).sum(),
                breakdown,
            });
            i = j;
        }
        out
    }
}
