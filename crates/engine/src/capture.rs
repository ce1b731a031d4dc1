//! What a capture recorded, as the NFS client model and the checks of a
//! prediction need it: every request's own filesystem calls as the trace
//! shows them, and the activity outside PHP requests (a pool's master and
//! worker startup, other programs on the same mount: a deploy script, a
//! shell writing into the tree), which shares the client's caches with the
//! requests and so must reach the NFS model in time order too.

use statstorm_php::lift::{FactsBuilder, TraceFacts};
use statstorm_php::request::{Requests, Splitter};
use statstorm_trace::op::{Normalizer, Op};
use statstorm_trace::{Event, Interner, Trace};
use std::collections::BTreeMap;

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

/// The capture's calls, split as the requests were.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// Per request of the split (same order), its calls in time order.
    pub requests: Vec<Vec<Op>>,
    /// Per process with calls outside requests, by pid.
    pub background: Vec<Background>,
}

impl Recorded {
    /// Normalizes every event of `trace` once (fds followed per process)
    /// and hands each call to its request, or to its process's background
    /// activity: [`Fold`] over the trace's events.
    pub fn of(trace: &Trace) -> (Requests, Recorded, TraceFacts) {
        let mut f = Fold::new();
        for e in &trace.events {
            f.push(e, &trace.strings);
        }
        f.finish()
    }
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
    /// Per split unit, its calls with their event's position in the
    /// trace.
    units: Vec<Vec<(u64, Op)>>,
    seen: u64,
}

impl Default for Fold {
    fn default() -> Self {
        Self::new()
    }
}

impl Fold {
    pub fn new() -> Fold {
        Fold {
            split: Splitter::new(),
            norm: Normalizer::new(),
            facts: FactsBuilder::default(),
            units: Vec::new(),
            seen: 0,
        }
    }

    /// Folds the next event.
    pub fn push(&mut self, e: &Event, strings: &Interner) {
        let unit = self.split.push(e, strings).0 as usize;
        self.facts.push(e, strings);
        if let Some(op) = self.norm.push(e, strings) {
            if unit >= self.units.len() {
                self.units.resize_with(unit + 1, Vec::new);
            }
            self.units[unit].push((self.seen, op));
        }
        self.seen += 1;
    }

    /// The requests, their calls and the activity outside them, and the
    /// lift's facts.
    pub fn finish(self) -> (Requests, Recorded, TraceFacts) {
        let plan = self.split.finish();
        let split = Requests::of_plan(&plan);
        let facts = self.facts.finish(&split);
        let mut requests: Vec<Vec<(u64, Op)>> = vec![Vec::new(); split.requests.len()];
        let mut background: BTreeMap<u32, Vec<(u64, Op)>> = BTreeMap::new();
        for (u, calls) in self.units.into_iter().enumerate() {
            if calls.is_empty() {
                continue;
            }
            let to = match plan.unit_request.get(u).copied().flatten() {
                Some(r) => &mut requests[r as usize],
                None => background.entry(calls[0].1.pid).or_default(),
            };
            if to.is_empty() {
                *to = calls;
            } else {
                to.extend(calls);
            }
        }
        // in time order; calls that started in the same microsecond in
        // the trace's order
        let ordered = |mut v: Vec<(u64, Op)>| -> Vec<Op> {
            v.sort_by_key(|(i, o)| (o.t_us, *i));
            v.into_iter().map(|(_, o)| o).collect()
        };
        let requests = requests.into_iter().map(ordered).collect();
        let background = background
            .into_iter()
            .map(|(pid, v)| {
                let ops = ordered(v);
                Background {
                    pid,
                    start_us: ops.first().map_or(0, |o| o.t_us),
                    end_us: ops
                        .last()
                        .map_or(0, |o| o.t_us + o.dur_us.unwrap_or(0) as i64),
                    ops,
                }
            })
            .collect();
        (
            split,
            Recorded {
                requests,
                background,
            },
            facts,
        )
    }
}
