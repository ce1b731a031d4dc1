//! The report's requests: one record per request, written in the report's
//! order (start, then index) as the report is built and read back when
//! listed ([`Rows`]). Past [`SortedSpill::HELD`] records they wait in a
//! temporary file (`crate::sorted`), so a capture of a million requests
//! holds that bound, not a million rows; the JSON exporter streams them.
//! A record names its calls and RPCs per syscall by the id of a distinct
//! tally (requests repeat their counts: each list once), and its script by
//! the id of a distinct name.

use super::{RequestOut, Side};
use crate::sorted::{Keyed, Sorted, SortedSpill};
use serde::{Deserialize, Serialize};
use statstorm_trace::op::Name;
use statstorm_trace::Tally;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;

/// One request as held: [`RequestOut`] with its lists as ids.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RowRec {
    /// Its place in the report's order.
    at: u64,
    pid: u32,
    start_us: i64,
    end_us: i64,
    /// 0: no script; else the script's id + 1.
    script: u32,
    from_template: bool,
    from_reference: bool,
    /// Calls per syscall: before, after, recorded (tally ids).
    calls: [u32; 3],
    /// RPCs per op, the same sides (0: none; else the tally's id + 1).
    rpc: [u32; 3],
    /// Simulated TTFB, before and after, ms.
    latency_ms: [Option<f64>; 2],
}

impl Keyed for RowRec {
    type Key = u64;
    fn key(&self) -> u64 {
        self.at
    }
}

/// One request's figures, as [`RowsMaker::push`] takes them.
pub(super) struct Row<'a> {
    pub pid: u32,
    pub start_us: i64,
    pub end_us: i64,
    pub script: Option<&'a str>,
    pub from_template: bool,
    pub from_reference: bool,
    /// Before, after, recorded.
    pub calls: [&'a Tally; 3],
    pub rpc: [Option<&'a Tally>; 3],
    pub latency_ms: [Option<f64>; 2],
}

/// The rows being written ([`Rows`] once finished).
pub(super) struct RowsMaker {
    recs: SortedSpill<RowRec>,
    tally_ids: HashMap<Tally, u32>,
    tallies: Vec<Tally>,
    script_ids: HashMap<Name, u32>,
    scripts: Vec<Name>,
}

impl RowsMaker {
    pub fn new() -> Self {
        Self::holding(SortedSpill::<RowRec>::HELD)
    }

    /// Rows that hold at most `cap` records in memory.
    fn holding(cap: usize) -> Self {
        RowsMaker {
            recs: SortedSpill::with_cap(cap),
            tally_ids: HashMap::new(),
            tallies: Vec::new(),
            script_ids: HashMap::new(),
            scripts: Vec::new(),
        }
    }

    fn tally_id(&mut self, t: &Tally) -> u32 {
        if let Some(&id) = self.tally_ids.get(t) {
            return id;
        }
        let id = self.tallies.len() as u32;
        self.tallies.push(t.clone());
        self.tally_ids.insert(t.clone(), id);
        id
    }

    fn script_id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.script_ids.get(s) {
            return id;
        }
        let id = self.scripts.len() as u32;
        let n: Name = s.into();
        self.scripts.push(n.clone());
        self.script_ids.insert(n, id);
        id
    }

    /// The next request in the report's order.
    pub fn push(&mut self, r: Row<'_>) -> io::Result<()> {
        let at = self.recs.len() as u64;
        let calls = r.calls.map(|t| self.tally_id(t));
        let rpc = r.rpc.map(|t| t.map_or(0, |t| self.tally_id(t) + 1));
        let script = r.script.map_or(0, |s| self.script_id(s) + 1);
        self.recs.push(RowRec {
            at,
            pid: r.pid,
            start_us: r.start_us,
            end_us: r.end_us,
            script,
            from_template: r.from_template,
            from_reference: r.from_reference,
            calls,
            rpc,
            latency_ms: r.latency_ms,
        })
    }

    pub fn finish(self) -> Rows {
        Rows {
            recs: self.recs.finish(),
            tallies: Arc::new(self.tallies),
            scripts: Arc::new(self.scripts),
        }
    }
}

/// The report's requests in its order, each read back when listed.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    recs: Sorted<RowRec>,
    tallies: Arc<Vec<Tally>>,
    scripts: Arc<Vec<Name>>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// The rows in order; a read of the temporary file that fails ends
    /// the listing with its error.
    pub fn iter(&self) -> impl Iterator<Item = io::Result<RequestOut>> + '_ {
        self.recs.iter().map(move |r| Ok(self.row(r?)))
    }

    /// Every row, in memory.
    pub fn to_vec(&self) -> io::Result<Vec<RequestOut>> {
        self.iter().collect()
    }

    /// Sorted runs written to the temporary file (0: every row held).
    pub fn spilled_runs(&self) -> usize {
        self.recs.runs()
    }

    fn tally(&self, id: u32) -> Tally {
        self.tallies.get(id as usize).cloned().unwrap_or_default()
    }

    fn side(&self, r: &RowRec, k: usize) -> Side {
        Side {
            by_syscall: self.tally(r.calls[k]),
            rpc: r.rpc[k].checked_sub(1).map(|id| self.tally(id)),
            latency_ms: r.latency_ms.get(k).copied().flatten(),
        }
    }

    fn row(&self, r: RowRec) -> RequestOut {
        RequestOut {
            pid: r.pid,
            start: super::secs(r.start_us),
            end: super::secs(r.end_us),
            script: r
                .script
                .checked_sub(1)
                .and_then(|id| self.scripts.get(id as usize).cloned()),
            from_template: r.from_template,
            from_reference: r.from_reference,
            before: self.side(&r, 0),
            after: self.side(&r, 1),
            recorded: self.side(&r, 2),
        }
    }
}

impl Serialize for Rows {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::sorted::serialize_listed(s, self.len(), self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[(&'static str, u64)]) -> Tally {
        v.iter().copied().collect()
    }

    #[test]
    fn rows_written_out_come_back_in_order_with_their_lists() {
        let a = t(&[("newfstatat", 3)]);
        let b = t(&[("newfstatat", 3), ("openat", 1)]);
        let rpc = t(&[("GETATTR", 2)]);
        let mut m = RowsMaker::holding(3);
        for i in 0..10u32 {
            let (x, y) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            m.push(Row {
                pid: 100 + i,
                start_us: 1_000_000 * i64::from(i),
                end_us: 1_000_000 * i64::from(i) + 500,
                script: (i % 3 == 0).then_some("/srv/www/index.php"),
                from_template: i == 4,
                from_reference: i == 5,
                calls: [x, y, x],
                rpc: [Some(&rpc), None, (i == 7).then_some(&rpc)],
                latency_ms: [Some(f64::from(i)), None],
            })
            .unwrap();
        }
        let rows = m.finish();
        assert_eq!(rows.len(), 10);
        assert!(rows.spilled_runs() >= 3, "{}", rows.spilled_runs());
        // two distinct call lists and one RPC list, each held once
        assert_eq!(rows.tallies.len(), 3);
        let got = rows.to_vec().unwrap();
        for (i, r) in got.iter().enumerate() {
            let i32 = i as u32;
            assert_eq!(r.pid, 100 + i32);
            assert_eq!(r.start, i as f64);
            assert_eq!(r.script.is_some(), i % 3 == 0);
            assert_eq!(r.from_template, i == 4);
            assert_eq!(r.from_reference, i == 5);
            let (x, y) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            assert_eq!(&r.before.by_syscall, x);
            assert_eq!(&r.after.by_syscall, y);
            assert_eq!(&r.recorded.by_syscall, x);
            assert_eq!(r.before.rpc.as_ref(), Some(&rpc));
            assert_eq!(r.after.rpc, None);
            assert_eq!(r.recorded.rpc.is_some(), i == 7);
            assert_eq!(r.before.latency_ms, Some(i as f64));
            assert_eq!(r.after.latency_ms, None);
            assert_eq!(r.recorded.latency_ms, None);
        }
        // read twice, the same
        assert_eq!(
            serde_json::to_string(&rows).unwrap(),
            serde_json::to_string(&got).unwrap()
        );
    }
}
