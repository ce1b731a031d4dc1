//! The profile: what `analyze` found, as typed values with their JSON
//! schema ([`SCHEMA`](super::SCHEMA)). Renderers put it into words.

use super::findings::{self, Finding};
use serde::Serialize;
use statstorm_php::request::{RequestKind, RequestMode};
use statstorm_trace::Kind;
use std::collections::BTreeMap;

/// What the reader knows about the inputs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InputInfo {
    pub files: Vec<FileInfo>,
    pub lines: u64,
    pub events: u64,
    pub skipped: Skipped,
    /// Summary-table rows (`strace -c`) folded into the totals.
    pub summary_rows: u64,
}

impl InputInfo {
    /// Adds the reader's counts of the input `name`.
    pub fn add_file(&mut self, name: &str, st: &statstorm_trace::InputStats) {
        self.lines += st.lines;
        self.events += st.events;
        self.skipped.total += st.skipped;
        for (r, n) in &st.skipped_by_reason {
            *self
                .skipped
                .by_reason
                .entry(r.as_str().to_string())
                .or_insert(0) += n;
        }
        for &(line, r) in st
            .first_skips
            .iter()
            .take(statstorm_trace::parse::FIRST_SKIPS)
        {
            self.skipped.first.push(SkipAt {
                file: name.to_string(),
                line,
                reason: r.as_str().to_string(),
            });
        }
        self.files.push(FileInfo {
            name: name.to_string(),
            bytes: st.bytes,
            lines: st.lines,
            events: st.events,
            skipped: st.skipped,
            format: serde_json::to_value(st.detected).unwrap_or(serde_json::Value::Null),
            error: st.error.clone(),
            time_backwards: st.time_backwards,
            lost_calls: st.lost_calls,
        });
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct FileInfo {
    pub name: String,
    pub bytes: u64,
    pub lines: u64,
    pub events: u64,
    pub skipped: u64,
    /// Format detected: pid style, timestamps, durations, fd paths.
    pub format: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Lines whose time is earlier than the line before's (absent when 0).
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub time_backwards: u64,
    /// Calls a `statstorm record` capture says it lost (absent when 0).
    #[serde(skip_serializing_if = "crate::is_zero")]
    pub lost_calls: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Skipped {
    pub total: u64,
    pub by_reason: BTreeMap<String, u64>,
    /// The first skipped lines of each file.
    pub first: Vec<SkipAt>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SkipAt {
    pub file: String,
    pub line: u64,
    pub reason: String,
}

/// A row of `totals.by_syscall` (also accepts `strace -c` rows).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SyscallTotals {
    pub calls: u64,
    pub errors: u64,
    pub errors_by_errno: BTreeMap<String, u64>,
    /// Sum of `-T` durations; `null` without durations.
    pub time_us: Option<u64>,
    pub mean_us: Option<f64>,
    pub metadata: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Totals {
    pub events: u64,
    pub metadata_calls: u64,
    pub errors: u64,
    pub enoent: u64,
    pub distinct_paths: u64,
    pub distinct_dirs: u64,
    pub realpath_walks: u64,
    pub walk_lstats: u64,
    pub repeats: u64,
    /// Sum of all `-T` durations.
    pub syscall_time_us: Option<u64>,
    pub metadata_time_us: Option<u64>,
    /// Sum over processes of (last event end - first event start).
    pub traced_wall_us: Option<u64>,
    /// `metadata_time_us / traced_wall_us`.
    pub metadata_share_of_wall: Option<f64>,
    /// Sum of request durations (`end_us - start_us`); `null` for a
    /// whole-trace split.
    pub request_wall_us: Option<u64>,
    /// Metadata time inside requests / `request_wall_us`: the share that
    /// matters for php-fpm, whose workers idle in `accept` between requests.
    pub metadata_share_of_requests: Option<f64>,
    pub by_syscall: BTreeMap<String, SyscallTotals>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathRow {
    pub path: String,
    pub calls: u64,
    pub errors: u64,
    pub enoent: u64,
    pub by_syscall: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DirRow {
    pub dir: String,
    pub calls: u64,
    pub enoent: u64,
    pub distinct_paths: u64,
    pub by_syscall: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    /// The command name (`strace -Y`), the last one the pid had; `null`
    /// without `-Y`.
    pub comm: Option<String>,
    pub events: u64,
    pub metadata_calls: u64,
    pub errors: u64,
    pub time_us: Option<u64>,
    pub metadata_time_us: Option<u64>,
    pub first_us: Option<i64>,
    pub last_us: Option<i64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RequestRow {
    pub index: usize,
    pub pid: u32,
    pub kind: RequestKind,
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    pub events: u64,
    pub metadata_calls: u64,
    pub enoent: u64,
    /// Calls per syscall (equal maps shared: requests repeat their counts).
    pub by_syscall: std::sync::Arc<BTreeMap<String, u64>>,
    pub realpath_walks: u64,
    pub walk_lstats: u64,
    pub repeats: u64,
    pub metadata_time_us: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RequestsInfo {
    pub mode: RequestMode,
    pub note: String,
    pub count: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct WalkFile {
    pub path: String,
    pub walks: u64,
    pub lstats: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Realpath {
    pub walks: u64,
    pub lstats: u64,
    /// Distinct files resolved by walks.
    pub files: u64,
    /// Walks of a file already walked earlier in the same request (by the
    /// same process): the realpath cache kept nothing (R54, R58).
    pub rewalks: u64,
    /// Requests with at least one walk.
    pub requests_with_walks: u64,
    pub deepest_first: u64,
    pub shallowest_first: u64,
    /// Top resolved files by walks.
    pub by_file: Vec<WalkFile>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Burst {
    pub start_s: i64,
    pub end_s: i64,
    pub metadata_calls: u64,
    pub peak_per_s: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TimeSeries {
    /// First second (trace clock, whole seconds).
    pub start_s: Option<i64>,
    /// Metadata calls in each second from `start_s` on.
    pub metadata_per_s: Vec<u64>,
    pub median_per_s: f64,
    pub max_per_s: u64,
    /// Median spacing of burst starts, when there are at least 3 bursts.
    pub burst_period_s: Option<f64>,
}

/// A counts capture (`statstorm record --counts`): calls counted per
/// window and per process x syscall x result x path. Counts keep no call
/// order, so what needs it is not observable (`unobservable`: their
/// figures in the profile are 0 because they could not be seen, not
/// because they did not happen); the time series has the windows'
/// resolution (each window's calls spread evenly over its seconds).
#[derive(Clone, Debug, Serialize)]
pub struct CountsInfo {
    pub count_lines: u64,
    pub windows: u64,
    pub mean_window_s: Option<f64>,
    /// Calls counted without process, path or result (the recording's
    /// map of keys was full): in the totals by syscall only.
    pub map_full_calls: u64,
    /// `accept` calls that returned a connection (php-fpm takes one per
    /// request) ...
    pub accepts: u64,
    /// ... and the metadata calls per accept: a request's mean when every
    /// process counted is a worker.
    pub metadata_per_accept: Option<f64>,
    pub unobservable: Vec<&'static str>,
}

/// Everything `analyze` computes; rendered as text, Markdown or JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    pub schema: &'static str,
    pub input: InputInfo,
    pub has_timestamps: bool,
    pub has_durations: bool,
    pub totals: Totals,
    pub paths: Vec<PathRow>,
    pub dirs: Vec<DirRow>,
    pub processes: Vec<ProcessRow>,
    pub request_split: RequestsInfo,
    /// Every request, by start (read back as listed: [`super::Rows`]).
    pub requests: super::Rows,
    /// The requests as a whole, and those with the most metadata calls
    /// (not part of the JSON).
    #[serde(skip)]
    pub requests_summary: super::RequestsSummary,
    /// Keeping the requests failed (their temporary file): `requests`
    /// lacks some (reported as an input error by `read::Reading::finish`).
    #[serde(skip)]
    pub requests_error: Option<std::sync::Arc<std::io::Error>>,
    pub realpath: Realpath,
    pub timeseries: TimeSeries,
    pub bursts: Vec<Burst>,
    /// Present when the input was a counts capture (`record --counts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<CountsInfo>,
    /// Typed findings; the JSON exporter (`statstorm_render`) writes them
    /// with their sentence, so the profile's own serialization leaves them
    /// out.
    #[serde(skip)]
    pub findings: Vec<Finding>,
}

/// Folds `strace -c` summary rows into the totals. When the input also has
/// call lines (`strace -C`), those already counted every call and the table
/// is only reported (`input.summary_rows`), never added twice.
pub fn fold_summary(p: &mut Profile, s: &statstorm_trace::Summary) {
    if p.totals.events > 0 {
        return;
    }
    let mut time: Option<u64> = None;
    for r in &s.rows {
        let metadata = Kind::from_name(r.name.as_bytes()).is_metadata();
        let t = p.totals.by_syscall.entry(r.name.clone()).or_default();
        // (counts saturate: a table's rows may sum past 2^64)
        t.calls = t.calls.saturating_add(r.calls);
        t.errors = t.errors.saturating_add(r.errors);
        t.metadata = metadata;
        p.totals.errors = p.totals.errors.saturating_add(r.errors);
        if metadata {
            p.totals.metadata_calls = p.totals.metadata_calls.saturating_add(r.calls);
        }
        // A table without times (`strace -c -U name,calls`) gives counts only.
        let Some(secs) = r.seconds else {
            continue;
        };
        let us = (secs * 1e6).round() as u64;
        t.time_us = Some(t.time_us.unwrap_or(0).saturating_add(us));
        t.mean_us = (t.calls > 0).then(|| t.time_us.unwrap_or(0) as f64 / t.calls as f64);
        time = Some(time.unwrap_or(0).saturating_add(us));
        if metadata {
            p.totals.metadata_time_us =
                Some(p.totals.metadata_time_us.unwrap_or(0).saturating_add(us));
        }
    }
    if let Some(time) = time {
        p.totals.syscall_time_us = Some(p.totals.syscall_time_us.unwrap_or(0).saturating_add(time));
        p.has_durations = true;
    }
    p.findings = findings::findings(p);
}
