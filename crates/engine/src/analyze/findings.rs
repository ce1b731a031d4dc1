//! Findings: short statements about what the storm is, each computed from
//! the profile's own counts (no guess without the numbers that back it).

use super::Profile;
use serde::Serialize;

/// One statement, with the figures behind it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Finding {
    /// Stable identifier (`realpath_walks`, `repeats`, `enoent`, ...).
    pub id: &'static str,
    pub text: String,
}

/// Share above which a cause is reported.
pub const NOTABLE_SHARE: f64 = 0.25;

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

pub fn findings(p: &Profile) -> Vec<Finding> {
    let mut out = Vec::new();
    let t = &p.totals;
    let md = t.metadata_calls as f64;
    if t.events == 0 {
        if p.input.summary_rows > 0 {
            out.push(Finding {
                id: "summary_only",
                text: "the input is an strace -c summary table: totals only, no paths, requests or timing per call; record with strace -f -ttt -T -y for the full analysis".into(),
            });
        }
        if md == 0.0 {
            return out;
        }
    }
    if md == 0.0 && t.events > 0 {
        out.push(Finding {
            id: "no_metadata",
            text: "no metadata syscalls (stat/lstat/access/open/readlink families) in this trace"
                .into(),
        });
        return out;
    }
    // The dominant metadata syscall.
    if let Some((name, row)) = t
        .by_syscall
        .iter()
        .filter(|(_, r)| r.metadata)
        .max_by_key(|(_, r)| r.calls)
    {
        out.push(Finding {
            id: "top_syscall",
            text: format!(
                "{} is the most frequent metadata syscall: {} of {} metadata calls ({})",
                name,
                row.calls,
                t.metadata_calls,
                pct(row.calls as f64 / md)
            ),
        });
    }
    if t.walk_lstats as f64 / md >= NOTABLE_SHARE {
        let rp = &p.realpath;
        let avg = t.walk_lstats as f64 / t.realpath_walks.max(1) as f64;
        // Which failure of the realpath cache the walks show.
        // With a working cache a file is walked at most once per process
        // (R54): any real share of re-walks means it keeps nothing.
        let why = if rp.rewalks * 10 >= rp.walks {
            format!(
                "{} of them resolve a file already resolved in the same request, so the realpath cache keeps nothing: open_basedir is set (it disables the cache, R58) or realpath_cache_size is 0 or too small (R54)",
                rp.rewalks
            )
        } else if p.requests.len() >= 3 && rp.requests_with_walks * 2 >= p.requests.len() as u64 {
            format!(
                "{} of {} requests walk again: cache entries expire between requests (realpath_cache_ttl, R54) or workers are recycled (pm.max_requests) and start cold",
                rp.requests_with_walks,
                p.requests.len()
            )
        } else {
            "each file is resolved about once: a cold realpath cache (the first request of a process), not a cache failure".to_string()
        };
        out.push(Finding {
            id: "realpath_walks",
            text: format!(
                "{} of metadata calls are realpath walks ({} walks of {} files, {:.1} lstat per walk on successive prefixes of one path, R53); {}",
                pct(t.walk_lstats as f64 / md),
                t.realpath_walks,
                rp.files,
                avg,
                why
            ),
        });
    }
    let stats: u64 = t
        .by_syscall
        .iter()
        .filter(|(n, _)| statstorm_trace::Kind::from_name(n.as_bytes()).is_stat_family())
        .map(|(_, r)| r.calls)
        .sum();
    if stats > 0 && t.repeats as f64 / stats as f64 >= NOTABLE_SHARE {
        out.push(Finding {
            id: "repeats",
            text: format!(
                "{} of stat-family calls ({} of {}) repeat a path already stat'ed in the same request",
                pct(t.repeats as f64 / stats as f64),
                t.repeats,
                stats
            ),
        });
    }
    if t.enoent as f64 / md >= NOTABLE_SHARE {
        let top_dir = p
            .dirs
            .iter()
            .max_by_key(|d| d.enoent)
            .map(|d| format!("; most in {} ({})", d.dir, d.enoent))
            .unwrap_or_default();
        out.push(Finding {
            id: "enoent",
            text: format!(
                "{} of metadata calls fail with ENOENT ({}): probes for missing files (include_path search R50, file_exists loops){}",
                pct(t.enoent as f64 / md),
                t.enoent,
                top_dir
            ),
        });
    }
    if let Some(period) = p.timeseries.burst_period_s {
        out.push(Finding {
            id: "periodic_bursts",
            text: format!(
                "{} bursts of metadata calls, one every ~{:.0} s (median {:.0}/s, peaks up to {}/s): a periodic revalidation such as opcache.revalidate_freq or attribute-cache expiry",
                p.bursts.len(),
                period,
                p.timeseries.median_per_s,
                p.timeseries.max_per_s
            ),
        });
    }
    let over = |x: Option<f64>| x.is_some_and(|v| v > 1.0);
    if over(t.metadata_share_of_requests) || over(t.metadata_share_of_wall) {
        // One process's calls cannot overlap: more call time than elapsed
        // time means the timestamps or durations were not recorded together.
        out.push(Finding {
            id: "inconsistent_times",
            text: format!(
                "call durations add up to more than the elapsed time ({} us of metadata calls in {} us of traced wall time): the timestamps and -T durations of this trace do not agree, so time shares are not reported",
                t.metadata_time_us.unwrap_or(0),
                t.traced_wall_us.unwrap_or(0)
            ),
        });
    } else if let (Some(share), Some(w)) = (t.metadata_share_of_requests, t.request_wall_us) {
        let inside: u64 = p.requests.iter().filter_map(|r| r.metadata_time_us).sum();
        out.push(Finding {
            id: "time_share",
            text: format!(
                "metadata syscalls took {} of the time inside requests ({} us of {} us in {} requests)",
                pct(share),
                inside,
                w,
                p.requests.len()
            ),
        });
    } else if let Some(share) = t.metadata_share_of_wall {
        out.push(Finding {
            id: "time_share",
            text: format!(
                "metadata syscalls took {} of the traced wall time ({} us of {} us)",
                pct(share),
                t.metadata_time_us.unwrap_or(0),
                t.traced_wall_us.unwrap_or(0)
            ),
        });
    } else if !p.has_durations && t.events > 0 {
        out.push(Finding {
            id: "no_durations",
            text: "no durations in this trace: record with strace -f -ttt -T -y to see time spent"
                .into(),
        });
    }
    out
}
