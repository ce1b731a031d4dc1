//! What a capture recorded, as the NFS client model and the checks of a
//! prediction need it: every request's own filesystem calls as the trace
//! shows them, and the activity outside PHP requests (a pool's master and
//! worker startup, other programs on the same mount: a deploy script, a
//! shell writing into the tree), which shares the client's caches with the
//! requests and so must reach the NFS model in time order too.

use statstorm_php::request::Requests;
use statstorm_trace::op::{Normalizer, Op};
use statstorm_trace::Trace;
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
    /// Normalizes every event once (fds followed per process) and hands
    /// each call to its request, or to its process's background activity.
    /// The requests' calls are those of `statstorm_php::lift::request_ops`
    /// (the split puts each event in one request at most), so the lift
    /// takes them from here (`statstorm_php::lift_from`).
    pub fn of(trace: &Trace, split: &Requests) -> Recorded {
        let mut owner: Vec<u32> = vec![u32::MAX; trace.events.len()];
        for (r, q) in split.requests.iter().enumerate() {
            for &e in &q.events {
                if let Some(o) = owner.get_mut(e as usize) {
                    *o = r as u32;
                }
            }
        }
        let mut requests: Vec<Vec<Op>> = vec![Vec::new(); split.requests.len()];
        let mut background: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
        let mut norm = Normalizer::new();
        for (i, ev) in trace.events.iter().enumerate() {
            let Some(op) = norm.push(ev, &trace.strings) else {
                continue;
            };
            match owner[i] {
                u32::MAX => background.entry(op.pid).or_default().push(op),
                r => requests[r as usize].push(op),
            }
        }
        for v in &mut requests {
            v.sort_by_key(|o| o.t_us);
            v.shrink_to_fit();
        }
        let background = background
            .into_iter()
            .map(|(pid, mut ops)| {
                ops.sort_by_key(|o| o.t_us);
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
        Recorded {
            requests,
            background,
        }
    }
}
