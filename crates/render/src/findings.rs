//! The findings of `analyze` in words: one sentence each, the figures of
//! its evidence inside.

use statstorm_engine::analyze::findings::{Finding, Kind, TimeScope, WalkCause};

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn share(n: u64, of: u64) -> f64 {
    n as f64 / of.max(1) as f64
}

/// One finding as a sentence.
pub fn text(f: &Finding) -> String {
    match &f.kind {
        Kind::SummaryOnly => "the input is an strace -c summary table: totals only, no paths, requests or timing per call; record with strace -f -ttt -T -y for the full analysis".into(),
        Kind::NoMetadata => {
            "no metadata syscalls (stat/lstat/access/open/readlink families) in this trace".into()
        }
        Kind::TopSyscall {
            syscall,
            calls,
            metadata_calls,
        } => format!(
            "{syscall} is the most frequent metadata syscall: {calls} of {metadata_calls} metadata calls ({})",
            pct(share(*calls, *metadata_calls))
        ),
        Kind::RealpathWalks {
            walk_lstats,
            metadata_calls,
            walks,
            files,
            cause,
        } => {
            let why = match cause {
                WalkCause::KeepsNothing { rewalks } => format!(
                    "{rewalks} of them resolve a file already resolved in the same request, so the realpath cache keeps nothing: open_basedir is set (it disables the cache, R58) or realpath_cache_size is 0 or too small (R54)"
                ),
                WalkCause::ExpiresBetweenRequests {
                    requests_with_walks,
                    requests,
                } => format!(
                    "{requests_with_walks} of {requests} requests walk again: cache entries expire between requests (realpath_cache_ttl, R54) or workers are recycled (pm.max_requests) and start cold"
                ),
                WalkCause::Cold => "each file is resolved about once: a cold realpath cache (the first request of a process), not a cache failure".to_string(),
            };
            format!(
                "{} of metadata calls are realpath walks ({walks} walks of {files} files, {:.1} lstat per walk on successive prefixes of one path, R53); {why}",
                pct(share(*walk_lstats, *metadata_calls)),
                *walk_lstats as f64 / (*walks).max(1) as f64,
            )
        }
        Kind::Repeats {
            repeats,
            stat_calls,
        } => format!(
            "{} of stat-family calls ({repeats} of {stat_calls}) repeat a path already stat'ed in the same request",
            pct(share(*repeats, *stat_calls))
        ),
        Kind::Enoent {
            enoent,
            metadata_calls,
            top_dir,
        } => format!(
            "{} of metadata calls fail with ENOENT ({enoent}): probes for missing files (include_path search R50, file_exists loops){}",
            pct(share(*enoent, *metadata_calls)),
            top_dir
                .as_ref()
                .map(|(d, n)| format!("; most in {d} ({n})"))
                .unwrap_or_default()
        ),
        Kind::PeriodicBursts {
            bursts,
            period_s,
            median_per_s,
            max_per_s,
        } => format!(
            "{bursts} bursts of metadata calls, one every ~{period_s:.0} s (median {median_per_s:.0}/s, peaks up to {max_per_s}/s): a periodic revalidation such as opcache.revalidate_freq or attribute-cache expiry"
        ),
        Kind::InconsistentTimes {
            metadata_time_us,
            traced_wall_us,
        } => format!(
            "call durations add up to more than the elapsed time ({metadata_time_us} us of metadata calls in {traced_wall_us} us of traced wall time): the timestamps and -T durations of this trace do not agree, so time shares are not reported"
        ),
        Kind::TimeShare {
            of: TimeScope::Requests,
            share,
            metadata_time_us,
            total_us,
            requests,
        } => format!(
            "metadata syscalls took {} of the time inside requests ({metadata_time_us} us of {total_us} us in {} requests)",
            pct(*share),
            requests.unwrap_or(0)
        ),
        Kind::TimeShare {
            of: TimeScope::Wall,
            share,
            metadata_time_us,
            total_us,
            ..
        } => format!(
            "metadata syscalls took {} of the traced wall time ({metadata_time_us} us of {total_us} us)",
            pct(*share)
        ),
        Kind::NoDurations => {
            "no durations in this trace: record with strace -f -ttt -T -y to see time spent".into()
        }
    }
}
