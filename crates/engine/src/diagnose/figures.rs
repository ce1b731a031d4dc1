//! A prediction's figures as a plan states them: metadata calls, RPCs by
//! op and simulated latency, before and after, and the effect of the
//! change between them.

use crate::predict::{latency::LatencySide, Report, Side};
use crate::sorted::{Keyed, SortedSpill};
use serde::Serialize;
use statstorm_php::lower::CHECKED;
use statstorm_trace::Tally;
use std::collections::BTreeMap;

/// One side of a prediction (the capture's requests under one set of
/// settings), totals over its requests.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Figures {
    /// The metadata calls statstorm models (`newfstatat`, `openat`,
    /// `access`, `readlink`), by syscall.
    pub syscalls: BTreeMap<String, u64>,
    /// Their sum.
    pub metadata_calls: u64,
    /// NFS RPCs by op as mountstats names them (with an NFS mount).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpcs: Option<BTreeMap<String, u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc_total: Option<u64>,
    /// The simulated TTFB (with one NFS mount).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

/// Simulated TTFB of one side (estimates of the simulator).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Requests refused (502): every worker busy, the backlog full.
    pub dropped: u64,
    pub served: u64,
    pub max_slot_wait_ms: f64,
    /// The longest wait at the server (its threads and IOPS budget).
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub max_server_wait_ms: f64,
    /// Of the simulator's stalled requests' time, the share waiting for
    /// the server's IOPS budget.
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub stall_iops_share: f64,
    /// Stalls: requests whose TTFB is past [`stall_above`] the median TTFB
    /// before (under the recorded settings: one yardstick for every
    /// prediction of a capture).
    pub stalls: u64,
}

/// A request slower than this many times the median TTFB under the
/// recorded settings, and by at least [`STALL_EXTRA_MS`], is a stall
/// ([`stall_above`]).
pub const STALL_FACTOR: f64 = 3.0;

/// How much slower than the median a stall is at the least, ms: with a
/// median of a few milliseconds, 3x alone counted requests of 20 ms (a
/// CPU gap of the capture's) among seed 000's 500 ms revalidation storms.
pub const STALL_EXTRA_MS: f64 = 100.0;

/// The TTFB past which a request is a stall, for a median TTFB (before)
/// of `median_ms`.
pub fn stall_above(median_ms: f64) -> f64 {
    (median_ms * STALL_FACTOR).max(median_ms + STALL_EXTRA_MS)
}

impl Latency {
    fn of(s: &LatencySide, stalls: u64) -> Latency {
        Latency {
            p50_ms: s.p50_ms,
            p99_ms: s.p99_ms,
            max_ms: s.max_ms,
            dropped: s.dropped,
            served: s.served,
            max_slot_wait_ms: s.max_slot_wait_ms,
            max_server_wait_ms: s.max_server_wait_ms,
            stall_iops_share: s.stall_iops_share,
            stalls,
        }
    }

    /// Share of the requests refused.
    pub fn drop_rate(&self) -> f64 {
        let all = self.dropped + self.served;
        if all == 0 {
            0.0
        } else {
            self.dropped as f64 / all as f64
        }
    }
}

impl Figures {
    fn of(side: &Side, latency: Option<&LatencySide>, stalls: u64) -> Figures {
        let syscalls: BTreeMap<String, u64> = CHECKED
            .iter()
            .map(|k| (k.to_string(), side.get(k)))
            .collect();
        let metadata_calls = syscalls.values().sum();
        Figures {
            syscalls,
            metadata_calls,
            rpc_total: side.rpc.as_ref().map(Tally::total),
            rpcs: side
                .rpc
                .as_ref()
                .map(|r| r.iter().map(|(k, n)| (k.to_string(), n)).collect()),
            latency: latency.map(|l| Latency::of(l, stalls)),
        }
    }

    /// RPCs of `op` (0 without NFS).
    pub fn rpc(&self, op: &str) -> u64 {
        self.rpcs
            .as_ref()
            .and_then(|r| r.get(op))
            .copied()
            .unwrap_or(0)
    }

    /// Calls of `syscall`.
    pub fn calls(&self, syscall: &str) -> u64 {
        self.syscalls.get(syscall).copied().unwrap_or(0)
    }
}

/// The modelled figures of a report: before (the recorded settings) and
/// after (the proposed ones).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Predicted {
    pub before: Figures,
    pub after: Figures,
    /// The simulated TTFB's distribution, before and after (with latency).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Distribution>,
    /// Requests in start order, at most [`MAX_POINTS`] evenly picked
    /// (what a report plots; not in the JSON of every plan).
    #[serde(skip)]
    pub points: Vec<RequestPoint>,
}

/// Requests kept for plots.
pub const MAX_POINTS: usize = 2000;

/// Quantiles 1%, 2%, ..., 100% (nearest rank) of the simulated TTFB, ms.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Distribution {
    pub before_ms: Vec<f64>,
    pub after_ms: Vec<f64>,
}

/// One request's figures before and after.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequestPoint {
    /// Trace clock, seconds.
    pub start_s: f64,
    pub calls_before: u64,
    pub calls_after: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpcs_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpcs_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_before_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_after_ms: Option<f64>,
}

/// A simulated TTFB, ms, on its way to sorted order ([`SortedSpill`]: a
/// capture's millions of requests are not listed to take quantiles).
#[derive(Clone, Serialize, serde::Deserialize)]
struct Ms(f64);

impl Keyed for Ms {
    type Key = i64;
    /// [`f64::total_cmp`]'s order.
    fn key(&self) -> i64 {
        let b = self.0.to_bits() as i64;
        b ^ ((((b >> 63) as u64) >> 1) as i64)
    }
}

/// Quantiles 1..=100 % (nearest rank) of the values of `v`; empty for no
/// value.
fn percentiles(v: SortedSpill<Ms>) -> std::io::Result<Vec<f64>> {
    let n = v.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let rank = |p: usize| ((p as f64 / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1;
    let mut out = Vec::with_capacity(100);
    let mut p = 1;
    for (k, x) in v.finish().iter().enumerate() {
        let x = x?.0;
        while p <= 100 && rank(p) == k {
            out.push(x);
            p += 1;
        }
    }
    Ok(out)
}

impl Predicted {
    /// The report's totals, latency and plotted requests (its rows read
    /// once; an error reading them back).
    pub fn of(r: &Report) -> std::io::Result<Predicted> {
        let lat = r.latency.as_ref();
        let calls = |s: &Side| CHECKED.iter().map(|k| s.get(k)).sum::<u64>();
        let rpcs = |s: &Side| s.rpc.as_ref().map(Tally::total);
        let step = r.requests.len().div_ceil(MAX_POINTS).max(1);
        let mut points = Vec::new();
        let mut before = SortedSpill::<Ms>::new();
        let mut after = SortedSpill::<Ms>::new();
        // the stall yardstick: the median before, the simulator's
        let stall_above = lat
            .and_then(|l| l.before.as_ref())
            .map(|b| stall_above(b.p50_ms));
        let mut stalls = [0u64; 2];
        for (k, q) in r.requests.iter().enumerate() {
            let q = q?;
            for (i, (to, v)) in [
                (&mut before, q.before.latency_ms),
                (&mut after, q.after.latency_ms),
            ]
            .into_iter()
            .enumerate()
            {
                if let Some(v) = v {
                    to.push(Ms(v))?;
                    stalls[i] += u64::from(stall_above.is_some_and(|s| v > s));
                }
            }
            if k % step == 0 {
                points.push(RequestPoint {
                    start_s: q.start,
                    calls_before: calls(&q.before),
                    calls_after: calls(&q.after),
                    rpcs_before: rpcs(&q.before),
                    rpcs_after: rpcs(&q.after),
                    ttfb_before_ms: q.before.latency_ms,
                    ttfb_after_ms: q.after.latency_ms,
                });
            }
        }
        let ttfb = if before.is_empty() && after.is_empty() {
            None
        } else {
            Some(Distribution {
                before_ms: percentiles(before)?,
                after_ms: percentiles(after)?,
            })
        };
        Ok(Predicted {
            before: Figures::of(
                &r.totals.before,
                lat.and_then(|l| l.before.as_ref()),
                stalls[0],
            ),
            after: Figures::of(
                &r.totals.after,
                lat.and_then(|l| l.after.as_ref()),
                stalls[1],
            ),
            ttfb,
            points,
        })
    }

    /// The figures of the calls the capture recorded (the NFS model's
    /// RPCs for them, with NFS; latency: not simulated for them).
    pub fn recorded_of(r: &Report) -> Figures {
        Figures::of(&r.totals.recorded, None, 0)
    }

    /// What the change does, per figure.
    pub fn effect(&self, requests: usize) -> Effect {
        let (b, a) = (&self.before, &self.after);
        let p99 = match (&b.latency, &a.latency) {
            (Some(x), Some(y)) => Some(Change::of(x.p99_ms, y.p99_ms, 0.05, 1.0)),
            _ => None,
        };
        let n = requests.max(1) as f64;
        Effect {
            metadata_calls: Change::of(b.metadata_calls as f64, a.metadata_calls as f64, 0.01, n),
            rpcs: match (b.rpc_total, a.rpc_total) {
                (Some(x), Some(y)) => Some(Change::of(x as f64, y as f64, 0.01, n)),
                _ => None,
            },
            p99_ms: p99,
            dropped: match (&b.latency, &a.latency) {
                (Some(x), Some(y)) => {
                    Some(Change::of(x.dropped as f64, y.dropped as f64, 0.0, 1.0))
                }
                _ => None,
            },
            stalls: match (&b.latency, &a.latency) {
                (Some(x), Some(y)) => Some(Change::of(x.stalls as f64, y.stalls as f64, 0.0, 1.0)),
                _ => None,
            },
        }
    }
}

/// Which way a figure moved, beyond the noise a model's figure has.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Down,
    Same,
    Up,
}

/// A figure before and after.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Change {
    pub before: f64,
    pub after: f64,
    pub direction: Direction,
}

impl Change {
    /// `before` -> `after`; a move smaller than `rel` of `before` or
    /// smaller than `abs` is no move.
    fn of(before: f64, after: f64, rel: f64, abs: f64) -> Change {
        let d = after - before;
        let direction = if d.abs() < abs || d.abs() < rel * before.abs() || d == 0.0 {
            Direction::Same
        } else if d < 0.0 {
            Direction::Down
        } else {
            Direction::Up
        };
        Change {
            before,
            after,
            direction,
        }
    }

    /// `after / before` (1 when both are 0).
    pub fn ratio(&self) -> f64 {
        if self.before == 0.0 {
            if self.after == 0.0 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            self.after / self.before
        }
    }
}

/// A change's predicted effect on each figure.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Effect {
    pub metadata_calls: Change,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpcs: Option<Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<Change>,
    /// Requests past [`stall_above`] the median TTFB before: shown,
    /// not ranked on (the p99 and the RPCs rank; a stall removed shows in
    /// them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalls: Option<Change>,
}

impl Effect {
    fn changes(&self) -> impl Iterator<Item = &Change> {
        std::iter::once(&self.metadata_calls)
            .chain(self.rpcs.iter())
            .chain(self.p99_ms.iter())
            .chain(self.dropped.iter())
    }

    /// Some figure goes down and none goes up.
    pub fn helps(&self) -> bool {
        self.changes().any(|c| c.direction == Direction::Down)
            && !self.changes().any(|c| c.direction == Direction::Up)
    }

    /// Some figure goes up.
    pub fn hurts(&self) -> bool {
        self.changes().any(|c| c.direction == Direction::Up)
    }
}

#[cfg(test)]
mod percentile_tests {
    use super::*;

    /// The quantiles of a sorted spill are the nearest ranks of the
    /// values sorted in memory, negative and equal values included.
    #[test]
    fn percentiles_match_the_sorted_values() {
        for n in [1usize, 2, 99, 100, 101, 1000] {
            let vals: Vec<f64> = (0..n)
                .map(|i| ((i * 7919) % 1009) as f64 / 3.0 - 50.0)
                .collect();
            let mut spill = SortedSpill::with_cap(64);
            for &v in &vals {
                spill.push(Ms(v)).unwrap();
            }
            let mut sorted = vals.clone();
            sorted.sort_by(f64::total_cmp);
            let want: Vec<f64> = (1..=100)
                .map(|p| {
                    let rank = ((p as f64 / 100.0) * n as f64).ceil() as usize;
                    sorted[rank.clamp(1, n) - 1]
                })
                .collect();
            assert_eq!(percentiles(spill).unwrap(), want, "n = {n}");
        }
        assert!(percentiles(SortedSpill::new()).unwrap().is_empty());
    }
}
