//! Which one setting would give back the recorded calls, when the
//! modelled "before" does not (`check::BeforeCheck::explained`): the
//! capture's first requests lowered again under the recorded settings with
//! one suspect changed at a time. A capture whose processes ran under
//! different settings (several pools, a php-cli run beside a pool, a
//! `.user.ini`) shows as a change that brings back some requests and
//! breaks others; a wrongly stated setting, as one that brings back most
//! and breaks none.

use crate::check::{within, Explained};
use rayon::prelude::*;
use statstorm_php::lower::{count_by_syscall, lower, CHECKED};
use statstorm_php::{PhpConfig, Workload};
use statstorm_trace::op::Op;
use statstorm_trace::Tally;

/// Requests lowered (from the capture's start: each carries the state the
/// requests before it left).
pub const TRIAL_REQUESTS: usize = 32;

/// Alternatives listed at most.
const LISTED: usize = 3;

/// One other value for each setting the check suspects, as far as the
/// recorded one tells which: off for what is on, on (PHP's default) for
/// what is off; `None` when no other value follows from it (an
/// open_basedir the capture did not show cannot be guessed).
fn alternative(key: &str, now: &str) -> Option<&'static str> {
    let flip = |on: &'static str, off: &'static str| if now == off { on } else { off };
    match key {
        "open_basedir" | "opcache.file_cache" => (!now.is_empty()).then_some(""),
        "realpath_cache_size" => Some(flip("4096K", "0")),
        "realpath_cache_ttl" => (now != "120").then_some("120"),
        "opcache.enable" | "opcache.enable_cli" | "opcache.validate_timestamps" => {
            Some(flip("1", "0"))
        }
        "opcache.revalidate_freq" => Some(flip("2", "0")),
        _ => None,
    }
}

/// Whether each lowered request gives back its recorded calls.
fn matches(lowered: &[Vec<Op>], recorded: &[Tally]) -> Vec<bool> {
    lowered
        .iter()
        .zip(recorded)
        .map(|(ops, rec)| {
            let m = count_by_syscall(ops);
            CHECKED.iter().all(|k| within(m.of(k), rec.of(k)))
        })
        .collect()
}

/// The single changes of the `suspects` that bring back at least half of
/// the requests that missed among the first [`TRIAL_REQUESTS`] of `w`
/// (recorded calls per request: `recorded`, in `w`'s order) and break at
/// most a quarter as many, the most brought back first. Empty when no
/// request missed there, or the requests could not be read back.
pub fn explain(
    w: &Workload,
    recorded: &[Tally],
    cfg: &PhpConfig,
    suspects: &[&'static str],
) -> Vec<Explained> {
    let n = w.len().min(TRIAL_REQUESTS).min(recorded.len());
    let Ok(sub) = w.first(n) else {
        return Vec::new();
    };
    let recorded = &recorded[..n];
    // the baseline lowered as the trials are (the first requests alone),
    // not read from the whole capture's lowering: a request's state from
    // requests that overlap it after the prefix would differ
    let base = matches(&lower(&sub, cfg), recorded);
    let missed = base.iter().filter(|m| !**m).count();
    if missed == 0 {
        return Vec::new();
    }
    let now: std::collections::BTreeMap<String, String> = cfg.to_pairs().into_iter().collect();
    let trials: Vec<(&'static str, &'static str, PhpConfig)> = suspects
        .iter()
        .filter_map(|&k| {
            let alt = alternative(k, now.get(k)?)?;
            let mut c = cfg.clone();
            c.set(k, alt, "a trial").ok()??;
            Some((k, alt, c))
        })
        .collect();
    let mut out: Vec<Explained> = trials
        .par_iter()
        .map(|(key, value, c)| {
            let got = matches(&lower(&sub, c), recorded);
            let fixed = (0..n).filter(|&i| !base[i] && got[i]).count();
            let broken = (0..n).filter(|&i| base[i] && !got[i]).count();
            Explained {
                setting: key.to_string(),
                value: value.to_string(),
                requests: n,
                missed,
                fixed,
                broken,
            }
        })
        .filter(|e| e.fixed * 2 >= e.missed && e.fixed > 0 && e.broken * 4 <= e.fixed)
        .collect();
    out.sort_by(|a, b| b.fixed.cmp(&a.fixed).then(a.broken.cmp(&b.broken)));
    out.truncate(LISTED);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternatives_follow_the_recorded_value() {
        assert_eq!(alternative("open_basedir", "/srv:/tmp"), Some(""));
        assert_eq!(alternative("open_basedir", ""), None);
        assert_eq!(alternative("realpath_cache_size", "0"), Some("4096K"));
        assert_eq!(alternative("realpath_cache_size", "16384"), Some("0"));
        assert_eq!(alternative("opcache.enable", "0"), Some("1"));
        assert_eq!(alternative("opcache.enable", "1"), Some("0"));
        assert_eq!(alternative("opcache.revalidate_freq", "0"), Some("2"));
        assert_eq!(alternative("opcache.revalidate_freq", "60"), Some("0"));
        assert_eq!(alternative("realpath_cache_ttl", "120"), None);
        assert_eq!(alternative("include_path", ".:/usr/share/php"), None);
    }
}
