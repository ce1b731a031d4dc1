//! The profile's requests: one record per request, made as its worker
//! moves on (or, for php-cli processes and the whole trace, at the end),
//! held in a [`SortedSpill`] and listed by start ([`Rows`]). A capture of a
//! million requests holds the spill's bound in memory, not a million rows;
//! the JSON exporter streams them, the text report reads
//! [`RequestsSummary`], made in one pass at the end.

use super::profile::RequestRow;
use crate::sorted::{Keyed, Sorted, SortedSpill};
use serde::{Deserialize, Serialize};
use statstorm_php::request::RequestKind;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

/// One request as held: [`RequestRow`] with its calls per syscall as the
/// id of a list of counts (`Tallies`) and without its index (its place in
/// the order).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct RowRec {
    pub pid: u32,
    pub kind: RequestKind,
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    pub events: u64,
    pub first_event: u64,
    pub metadata: u64,
    pub enoent: u64,
    pub names: u32,
    pub walks: u64,
    pub walk_lstats: u64,
    pub repeats: u64,
    pub metadata_time_us: u64,
}

impl Keyed for RowRec {
    type Key = (i64, u64);
    /// `RequestInfo::order`: start, then first event.
    fn key(&self) -> (i64, u64) {
        (self.start_us.unwrap_or(i64::MIN), self.first_event)
    }
}

/// The requests being made ([`Rows`] once finished).
pub(super) type RowSpill = SortedSpill<RowRec>;

/// The requests in time order (start, then first event), each read back
/// when listed.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    recs: Sorted<RowRec>,
    /// Calls per syscall of each list id the rows hold, each map once.
    by_list: Arc<HashMap<u32, Arc<BTreeMap<String, u64>>>>,
    durations: bool,
}

impl Rows {
    pub(super) fn new(
        recs: Sorted<RowRec>,
        by_list: HashMap<u32, Arc<BTreeMap<String, u64>>>,
        durations: bool,
    ) -> Rows {
        Rows {
            recs,
            by_list: Arc::new(by_list),
            durations,
        }
    }

    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    /// The rows in order; a read of the temporary file that fails ends
    /// the listing with its error.
    pub fn iter(&self) -> impl Iterator<Item = io::Result<RequestRow>> + '_ {
        self.recs
            .iter()
            .enumerate()
            .map(move |(index, r)| Ok(self.row(index, r?)))
    }

    fn row(&self, index: usize, r: RowRec) -> RequestRow {
        RequestRow {
            index,
            pid: r.pid,
            kind: r.kind,
            start_us: r.start_us,
            end_us: r.end_us,
            events: r.events,
            metadata_calls: r.metadata,
            enoent: r.enoent,
            by_syscall: self
                .by_list
                .get(&r.names)
                .map_or_else(Arc::default, Arc::clone),
            realpath_walks: r.walks,
            walk_lstats: r.walk_lstats,
            repeats: r.repeats,
            metadata_time_us: self.durations.then_some(r.metadata_time_us),
        }
    }

    /// Sorted runs written to the temporary file (0: every row held).
    pub fn spilled_runs(&self) -> usize {
        self.recs.runs()
    }

    /// Every row, in memory.
    pub fn to_vec(&self) -> io::Result<Vec<RequestRow>> {
        self.iter().collect()
    }
}

impl Serialize for Rows {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::sorted::serialize_listed(s, self.len(), self.iter())
    }
}

/// What the reports say of the requests as a whole, made in one pass over
/// [`Rows`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct RequestsSummary {
    pub metadata_calls: u64,
    pub max_metadata_calls: u64,
    pub realpath_walks: u64,
    pub repeats: u64,
    /// Requests with a realpath walk.
    pub with_walks: u64,
    /// Their metadata calls' time (0 without durations) ...
    pub metadata_time_us: u64,
    /// ... and their time from start to end (of those with both).
    pub wall_us: u64,
    /// The requests with the most metadata calls (ties: the earlier),
    /// most first, at most the profile's `top`.
    pub top: Vec<RequestRow>,
}

impl RequestsSummary {
    pub(super) fn of(rows: &Rows, top: usize) -> io::Result<RequestsSummary> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut s = RequestsSummary::default();
        // the `top` best so far, the worst on top: (metadata, earlier)
        let mut best: BinaryHeap<Reverse<(u64, Reverse<usize>)>> = BinaryHeap::new();
        let mut kept: HashMap<usize, RowRec> = HashMap::new();
        for (index, r) in rows.recs.iter().enumerate() {
            let r = r?;
            s.metadata_calls += r.metadata;
            s.max_metadata_calls = s.max_metadata_calls.max(r.metadata);
            s.realpath_walks += r.walks;
            s.repeats += r.repeats;
            s.with_walks += u64::from(r.walks > 0);
            if rows.durations {
                s.metadata_time_us += r.metadata_time_us;
            }
            if let (Some(a), Some(b)) = (r.start_us, r.end_us) {
                s.wall_us += (b - a).max(0) as u64;
            }
            if top == 0 {
                continue;
            }
            let k = (r.metadata, Reverse(index));
            if best.len() < top {
                best.push(Reverse(k));
                kept.insert(index, r);
            } else if best.peek().is_some_and(|w| k > w.0) {
                if let Some(Reverse((_, Reverse(out)))) = best.pop() {
                    kept.remove(&out);
                }
                best.push(Reverse(k));
                kept.insert(index, r);
            }
        }
        let mut top_rows: Vec<RequestRow> = kept.into_iter().map(|(i, r)| rows.row(i, r)).collect();
        top_rows.sort_by(|a, b| {
            b.metadata_calls
                .cmp(&a.metadata_calls)
                .then(a.index.cmp(&b.index))
        });
        s.top = top_rows;
        Ok(s)
    }
}
