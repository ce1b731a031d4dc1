//! Findings: what the storm is, each computed from the profile's own counts
//! (no guess without the numbers that back it). A finding is a typed value
//! — its kind, a severity, and the figures that back it — and
//! `statstorm-render` puts it into words.

use super::Profile;
use serde::Serialize;

/// How much a finding matters to someone chasing a storm.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Context: what the trace is, what dominates.
    Info,
    /// A cause of metadata calls worth acting on.
    Warning,
    /// The trace itself cannot be trusted for part of the analysis.
    Problem,
}

/// One finding. In JSON: `{"id", "severity", "evidence": {...}}` (and
/// the renderer's `text`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    #[serde(flatten)]
    pub kind: Kind,
}

impl Finding {
    /// The kind's stable identifier (`realpath_walks`, `repeats`, ...).
    pub fn id(&self) -> &'static str {
        self.kind.id()
    }
}

/// What the realpath walks show of the realpath cache.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum WalkCause {
    /// Files resolved again in the same request: the cache keeps nothing
    /// (open_basedir, R58; realpath_cache_size 0 or too small, R54).
    KeepsNothing { rewalks: u64 },
    /// Most requests walk again: entries expire between requests
    /// (realpath_cache_ttl, R54) or workers are recycled.
    ExpiresBetweenRequests {
        requests_with_walks: u64,
        requests: u64,
    },
    /// Each file resolved about once: a cold cache, not a failure.
    Cold,
}

/// Whose time the metadata calls' share is of.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TimeScope {
    /// The time inside requests.
    Requests,
    /// The whole traced wall time.
    Wall,
}

/// The kinds of finding, each with its evidence.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "id", content = "evidence", rename_all = "snake_case")]
pub enum Kind {
    /// The input is an `strace -c` table: totals only.
    SummaryOnly,
    /// No metadata syscall in the trace.
    NoMetadata,
    /// The most frequent metadata syscall.
    TopSyscall {
        syscall: String,
        calls: u64,
        metadata_calls: u64,
    },
    /// Realpath walks (lstat of successive prefixes of one path, R53).
    RealpathWalks {
        walk_lstats: u64,
        metadata_calls: u64,
        walks: u64,
        files: u64,
        #[serde(flatten)]
        cause: WalkCause,
    },
    /// stat-family calls repeating a path already stat'ed in the request.
    Repeats { repeats: u64, stat_calls: u64 },
    /// Metadata calls failing with ENOENT: probes for missing files.
    Enoent {
        enoent: u64,
        metadata_calls: u64,
        /// The directory with the most, and its count.
        #[serde(skip_serializing_if = "Option::is_none")]
        top_dir: Option<(String, u64)>,
    },
    /// Bursts of metadata calls at a period (revalidation, cache expiry).
    PeriodicBursts {
        bursts: u64,
        period_s: f64,
        median_per_s: f64,
        max_per_s: u64,
    },
    /// More call time than elapsed time: timestamps and `-T` disagree.
    InconsistentTimes {
        metadata_time_us: u64,
        traced_wall_us: u64,
    },
    /// The share of time spent in metadata calls.
    TimeShare {
        of: TimeScope,
        share: f64,
        metadata_time_us: u64,
        total_us: u64,
        /// Requests the share is over (`of: requests`).
        #[serde(skip_serializing_if = "Option::is_none")]
        requests: Option<u64>,
    },
    /// No `-T` durations: no time figures.
    NoDurations,
}

impl Kind {
    /// The stable identifier (as serialized).
    pub fn id(&self) -> &'static str {
        match self {
            Kind::SummaryOnly => "summary_only",
            Kind::NoMetadata => "no_metadata",
            Kind::TopSyscall { .. } => "top_syscall",
            Kind::RealpathWalks { .. } => "realpath_walks",
            Kind::Repeats { .. } => "repeats",
            Kind::Enoent { .. } => "enoent",
            Kind::PeriodicBursts { .. } => "periodic_bursts",
            Kind::InconsistentTimes { .. } => "inconsistent_times",
            Kind::TimeShare { .. } => "time_share",
            Kind::NoDurations => "no_durations",
        }
    }

    /// The kind's severity: causes of calls are warnings, a trace whose
    /// times disagree a problem, the rest context.
    fn severity(&self) -> Severity {
        match self {
            Kind::RealpathWalks {
                cause: WalkCause::Cold,
                ..
            } => Severity::Info,
            Kind::RealpathWalks { .. }
            | Kind::Repeats { .. }
            | Kind::Enoent { .. }
            | Kind::PeriodicBursts { .. } => Severity::Warning,
            Kind::InconsistentTimes { .. } => Severity::Problem,
            Kind::SummaryOnly
            | Kind::NoMetadata
            | Kind::TopSyscall { .. }
            | Kind::TimeShare { .. }
            | Kind::NoDurations => Severity::Info,
        }
    }
}

impl From<Kind> for Finding {
    fn from(kind: Kind) -> Self {
        Finding {
            severity: kind.severity(),
            kind,
        }
    }
}

/// Share above which a cause is reported.
pub const NOTABLE_SHARE: f64 = 0.25;

pub fn findings(p: &Profile) -> Vec<Finding> {
    let mut out: Vec<Kind> = Vec::new();
    let t = &p.totals;
    let md = t.metadata_calls as f64;
    if t.events == 0 {
        if p.input.summary_rows > 0 {
            out.push(Kind::SummaryOnly);
        }
        if md == 0.0 {
            return out.into_iter().map(Finding::from).collect();
        }
    }
    if md == 0.0 && t.events > 0 {
        return vec![Kind::NoMetadata.into()];
    }
    // The dominant metadata syscall.
    if let Some((name, row)) = t
        .by_syscall
        .iter()
        .filter(|(_, r)| r.metadata)
        .max_by_key(|(_, r)| r.calls)
    {
        out.push(Kind::TopSyscall {
            syscall: name.to_string(),
            calls: row.calls,
            metadata_calls: t.metadata_calls,
        });
    }
    if t.walk_lstats as f64 / md >= NOTABLE_SHARE {
        let rp = &p.realpath;
        // Which failure of the realpath cache the walks show.
        // With a working cache a file is walked at most once per process
        // (R54): any real share of re-walks means it keeps nothing.
        let cause = if rp.rewalks * 10 >= rp.walks {
            WalkCause::KeepsNothing {
                rewalks: rp.rewalks,
            }
        } else if p.requests.len() >= 3 && rp.requests_with_walks * 2 >= p.requests.len() as u64 {
            WalkCause::ExpiresBetweenRequests {
                requests_with_walks: rp.requests_with_walks,
                requests: p.requests.len() as u64,
            }
        } else {
            WalkCause::Cold
        };
        out.push(Kind::RealpathWalks {
            walk_lstats: t.walk_lstats,
            metadata_calls: t.metadata_calls,
            walks: t.realpath_walks,
            files: rp.files,
            cause,
        });
    }
    let stats: u64 = t
        .by_syscall
        .iter()
        .filter(|(n, _)| statstorm_trace::Kind::from_name(n.as_bytes()).is_stat_family())
        .map(|(_, r)| r.calls)
        .sum();
    if stats > 0 && t.repeats as f64 / stats as f64 >= NOTABLE_SHARE {
        out.push(Kind::Repeats {
            repeats: t.repeats,
            stat_calls: stats,
        });
    }
    if t.enoent as f64 / md >= NOTABLE_SHARE {
        out.push(Kind::Enoent {
            enoent: t.enoent,
            metadata_calls: t.metadata_calls,
            top_dir: p
                .dirs
                .iter()
                .max_by_key(|d| d.enoent)
                .map(|d| (d.dir.clone(), d.enoent)),
        });
    }
    if let Some(period) = p.timeseries.burst_period_s {
        out.push(Kind::PeriodicBursts {
            bursts: p.bursts.len() as u64,
            period_s: period,
            median_per_s: p.timeseries.median_per_s,
            max_per_s: p.timeseries.max_per_s,
        });
    }
    let over = |x: Option<f64>| x.is_some_and(|v| v > 1.0);
    if over(t.metadata_share_of_requests) || over(t.metadata_share_of_wall) {
        // One process's calls cannot overlap: more call time than elapsed
        // time means the timestamps or durations were not recorded together.
        out.push(Kind::InconsistentTimes {
            metadata_time_us: t.metadata_time_us.unwrap_or(0),
            traced_wall_us: t.traced_wall_us.unwrap_or(0),
        });
    } else if let (Some(share), Some(w)) = (t.metadata_share_of_requests, t.request_wall_us) {
        let inside = p.requests_summary.metadata_time_us;
        out.push(Kind::TimeShare {
            of: TimeScope::Requests,
            share,
            metadata_time_us: inside,
            total_us: w,
            requests: Some(p.requests.len() as u64),
        });
    } else if let Some(share) = t.metadata_share_of_wall {
        out.push(Kind::TimeShare {
            of: TimeScope::Wall,
            share,
            metadata_time_us: t.metadata_time_us.unwrap_or(0),
            total_us: t.traced_wall_us.unwrap_or(0),
            requests: None,
        });
    } else if !p.has_durations && t.events > 0 {
        out.push(Kind::NoDurations);
    }
    out.into_iter().map(Finding::from).collect()
}
