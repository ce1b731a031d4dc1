//! The realpath cache settings a capture was recorded under, when its
//! walks are more than the inferred settings give: a budget that ran out
//! (`realpath_cache_size`, walks that repeat while others stop at a cached
//! directory) or a short TTL (`realpath_cache_ttl`, a worker walking again
//! what it resolved a few seconds before).
//!
//! The lower replays PHP's cache entry for entry (crate::realpath) and is
//! exact on such captures, so the settings are found by lowering the
//! lifted workload (its first requests) under candidates and comparing the
//! `lstat` count with the recorded one:
//! - budgets: the count falls as the budget grows, but not strictly
//!   everywhere (a larger budget may let in an entry a smaller one skipped
//!   and then lack room for a later one), so a bisection over whole KiB
//!   finds the region, then round budgets are tried: powers of two of KiB
//!   near it and whole KiB around it;
//! - TTLs: 1 to 10 s and a few rounder values up to the default;
//! - both: budgets for TTLs of 1 to 5 s, when neither alone fits.
//!
//! The candidate closest to the recorded count wins if it is within 0.5%
//! (ties: the default TTL, a power of two, then the smaller). Nothing is
//! claimed unless the recorded count is more than 5% above what the
//! inferred settings give (the model's own misses on the applications are
//! within 1%).

use crate::config::PhpConfig;
use crate::paths::is_script;
use crate::workload::Workload;
use rayon::prelude::*;
use statstorm_trace::op::{Op, OpKind};
use std::collections::HashMap;
use std::sync::Mutex;

/// Budgets searched: up to 1 GiB.
const MAX_BUDGET_KIB: u64 = 1 << 20;
/// Requests the search lowers.
pub(crate) const SEARCH_REQUESTS: usize = 16;
/// TTLs tried alone (seconds).
const TTLS: &[u64] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 30, 60, 90];
/// TTLs tried together with a budget search.
const TTLS_WITH_BUDGET: &[u64] = &[1, 2, 3, 4, 5];

fn lstats(ops: &[Vec<Op>]) -> u64 {
    ops.iter()
        .flatten()
        .filter(|o| o.kind == OpKind::Lstat)
        .count() as u64
}

/// What every trial of a search lowering `sub` under settings near `base`
/// shares: the calls' latencies, and OPcache's file cache as it starts
/// (the trials change no setting of it).
fn trial_inputs(
    sub: &Workload,
    base: &PhpConfig,
) -> (
    std::collections::BTreeMap<OpKind, u64>,
    Option<crate::file_cache::Disk>,
) {
    (
        crate::lower::targets(sub, &Default::default()),
        crate::lower::file_cache_of(sub, base, &sub.compiled_scripts()),
    )
}

/// The smallest `x` in `lo..=hi` with `f(x) <= n` (f falling), or None.
fn smallest_with_at_most(f: &dyn Fn(u64) -> u64, n: u64, mut lo: u64, mut hi: u64) -> Option<u64> {
    if f(hi) > n {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if f(mid) <= n {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// Round budgets (KiB) to try near where `f` (count by budget in KiB)
/// reaches `n`.
fn budget_candidates(f: &dyn Fn(u64) -> u64, n: u64, hi: u64) -> Vec<u64> {
    let edge = smallest_with_at_most(f, n, 1, hi).unwrap_or(MAX_BUDGET_KIB);
    let mut c: Vec<u64> = (0..=20)
        .map(|i| 1u64 << i)
        .filter(|&k| k * 4 >= edge && k <= edge * 4)
        .collect();
    c.extend(edge.saturating_sub(8).max(1)..=edge + 8);
    c.sort_unstable();
    c.dedup();
    c
}

/// A setting tried: realpath_cache_size in KiB and realpath_cache_ttl,
/// each None for the inferred one.
type Trial = (Option<u64>, Option<u64>);

/// What a trial gave: the lstat count, and what the realpath caches showed
/// (`RealpathUse`: the peak bytes, whether an entry was refused, the
/// longest an entry can have lived when looked at).
type Outcome = (u64, crate::lower::RealpathUse);

/// One candidate: (distance to the recorded count, not the default TTL,
/// budget not a power of two, budget KiB or None for the inferred one,
/// TTL or None for the inferred one). Ordered for `min`.
type Cand = (u64, bool, bool, Option<u64>, Option<u64>);

/// The first [`SEARCH_REQUESTS`] requests of `w` with their operations
/// (read back when stored); a read that fails is said in the evidence.
fn first_requests(w: &mut Workload) -> Option<Workload> {
    match w.first(SEARCH_REQUESTS) {
        Ok(sub) => Some(sub),
        Err(e) => {
            w.evidence.notes.push(format!(
                "the first requests could not be read back ({e}): settings shown only by trial lowerings not inferred"
            ));
            None
        }
    }
}

/// Infers `realpath_cache_size` and/or `realpath_cache_ttl` for `w` from
/// the recorded requests `real` (the trace's calls per request, as
/// `request_ops` gives them) and adds them to the evidence.
pub(super) fn infer_realpath_settings(w: &mut Workload, real: &[Vec<Op>]) {
    if stated(w, &["realpath_cache_size", "realpath_cache_ttl"]) {
        return;
    }
    let Ok((base, _)) = inferred_config(w) else {
        return;
    };
    if !base.realpath_cache_enabled() {
        return;
    }
    // the first requests are enough (each worker's cache fills in its
    // first ones) and keep the search short on long captures
    let Some(sub) = first_requests(w) else {
        return;
    };
    if sub.requests.is_empty() {
        return;
    }
    let n = lstats(&real[..real.len().min(SEARCH_REQUESTS)]);
    // the bisection and the candidates near its edge try the same
    // settings again: each is lowered once; lists of trials are lowered
    // in parallel, all with one file cache as it starts
    let tried: Mutex<HashMap<Trial, Outcome>> = Default::default();
    let (target, disk) = trial_inputs(&sub, &base);
    // A TTL that let every entry of a trial live (none, or at least the
    // trial's span: RealpathCache::span) changed nothing in it: two TTLs
    // that both do give the same outcome under one budget (the caches see
    // the same calls at the same times, and no entry expires under
    // either). Requests that fit in a few seconds make every TTL tried
    // the same as the inferred one: the TTL searches are then read from
    // the budget search instead of lowered again.
    let ttl_of = |t: Option<u64>| t.unwrap_or(base.realpath_cache_ttl);
    let lives = |t: u64, span: u64| t == 0 || t >= span;
    let run = |kib: Option<u64>, ttl: Option<u64>| {
        {
            let mut tried = tried.lock().expect("trials");
            if let Some(&r) = tried.get(&(kib, ttl)) {
                return r;
            }
            let same = std::iter::once(None)
                .chain(TTLS.iter().map(|&t| Some(t)))
                .filter(|&other| other != ttl)
                .find_map(|other| {
                    tried.get(&(kib, other)).copied().filter(|r| {
                        lives(ttl_of(ttl), r.1.span_s) && lives(ttl_of(other), r.1.span_s)
                    })
                });
            if let Some(r) = same {
                tried.insert((kib, ttl), r);
                return r;
            }
        }
        let mut c = base.clone();
        if let Some(k) = kib {
            c.realpath_cache_size = k * 1024;
        }
        if let Some(t) = ttl {
            c.realpath_cache_ttl = t;
        }
        let (ops, peak) = crate::lower::lower_from_peak(&sub, &c, &target, disk.clone());
        let r = (lstats(&ops), peak);
        tried.lock().expect("trials").insert((kib, ttl), r);
        r
    };
    let count = |kib: Option<u64>, ttl: Option<u64>| run(kib, ttl).0;
    // The bisection's top for a TTL: the largest budget runs first; if no
    // cache refused an entry there, every budget at or above its peak
    // behaves the same (RealpathCache::peak), so the search stops there
    // (the trial recorded under that budget too): about 11 halvings for
    // an application's few MB instead of 20.
    let top = |ttl: Option<u64>| -> u64 {
        let (n, at_max) = run(Some(MAX_BUDGET_KIB), ttl);
        if at_max.refused {
            return MAX_BUDGET_KIB;
        }
        let hi = at_max.peak.div_ceil(1024).clamp(1, MAX_BUDGET_KIB);
        tried
            .lock()
            .expect("trials")
            .entry((Some(hi), ttl))
            .or_insert((n, at_max));
        hi
    };
    let count_all = |trials: &[Trial]| {
        trials.par_iter().for_each(|&(k, t)| {
            count(k, t);
        })
    };
    let full = count(None, None);
    if full * 100 >= n * 95 {
        return;
    }
    let cand = |kib: Option<u64>, ttl: Option<u64>| -> Cand {
        (
            count(kib, ttl).abs_diff(n),
            ttl.is_some(),
            kib.is_some_and(|k| !k.is_power_of_two()),
            kib,
            ttl,
        )
    };
    let mut cands: Vec<Cand> = Vec::new();
    // walks that repeat while others stop at a cached directory: a budget
    if w.evidence.realpath_partial {
        let by_kib = |k: u64| count(Some(k), None);
        let ks = budget_candidates(&by_kib, n, top(None));
        count_all(&ks.iter().map(|&k| (Some(k), None)).collect::<Vec<_>>());
        for k in ks {
            cands.push(cand(Some(k), None));
        }
    }
    count_all(&TTLS.iter().map(|&t| (None, Some(t))).collect::<Vec<_>>());
    for &t in TTLS {
        cands.push(cand(None, Some(t)));
    }
    // no walk ever stopped at a cached directory and no open_basedir seen
    // (which disables the cache too, R58, and is inferred first): no
    // cache at all is a candidate (the trace cannot tell a cache of 0 from
    // one too small for a single entry, and takes 0)
    if w.evidence.realpath_no_hits {
        cands.push(cand(Some(0), None));
    }
    let fits = |c: &Cand| c.0 * 200 <= n;
    if w.evidence.realpath_partial && !cands.iter().any(fits) {
        // each TTL's bisection on its own thread
        let per_ttl: Vec<(u64, Vec<u64>)> = TTLS_WITH_BUDGET
            .par_iter()
            .map(|&t| {
                let by_kib = |k: u64| count(Some(k), Some(t));
                let ks = budget_candidates(&by_kib, n, top(Some(t)));
                count_all(&ks.iter().map(|&k| (Some(k), Some(t))).collect::<Vec<_>>());
                (t, ks)
            })
            .collect();
        for (t, ks) in per_ttl {
            for k in ks {
                cands.push(cand(Some(k), Some(t)));
            }
        }
    }
    let best = cands.iter().copied().filter(fits).min();
    // TTLs that fit as well as the best (requests spaced wider than
    // several of them cannot tell them apart)
    let same_ttls: Vec<u64> = best
        .map(|b| {
            cands
                .iter()
                .filter(|c| c.0 == b.0 && c.3 == b.3 && c.4.is_some())
                .filter_map(|c| c.4)
                .collect()
        })
        .unwrap_or_default();
    let Some((diff, _, _, kib, ttl)) = best else {
        w.evidence.notes.push(format!(
            "the recorded {n} lstat calls of the first {} requests are more than the inferred settings give ({full}), and no realpath_cache_size or realpath_cache_ttl tried reproduces them within 0.5%: not inferred",
            sub.requests.len()
        ));
        return;
    };
    let mut set = Vec::new();
    if let Some(k) = kib {
        set.push((
            "realpath_cache_size",
            if k == 0 { "0".into() } else { format!("{k}K") },
        ));
    }
    if let Some(t) = ttl {
        set.push(("realpath_cache_ttl", t.to_string()));
    }
    let mut what: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if same_ttls.len() > 1 {
        what.push(format!(
            "(TTLs {} fit as well: the smallest is taken)",
            same_ttls
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    w.evidence.notes.push(format!(
        "the lower reproduces the recorded {n} lstat calls of the first {} requests with {} ({diff} apart; {full} with the settings inferred before): inferred (R54)",
        sub.requests.len(),
        what.join(" ")
    ));
    for (k, v) in set {
        w.evidence.inferred.retain(|(key, _)| key != k);
        w.evidence.inferred.push((k.to_string(), v));
    }
}

/// Whether the capture's command lines state one of `keys`
/// (`Evidence::stated`): a trial search does not replace it.
fn stated(w: &Workload, keys: &[&str]) -> bool {
    w.evidence.stated.iter().any(|k| keys.contains(&k.as_str()))
}

/// Longest `opcache.revalidate_freq` tried, seconds (with the round
/// values of [`REVALIDATE_ROUND`] up to the smallest gap seen).
const REVALIDATE_MAX_STEP: i64 = 10;
const REVALIDATE_ROUND: &[i64] = &[15, 20, 30, 60, 120, 300, 600, 3600];

/// Stats of scripts (OPcache's timestamp validations, and any stat the
/// application makes of a script, the same under every window).
fn script_stats(ops: &[Vec<Op>]) -> u64 {
    ops.iter()
        .flatten()
        .filter(|o| o.kind == OpKind::Stat && is_script(&o.path))
        .count() as u64
}

/// Infers `opcache.revalidate_freq` when OPcache validated timestamps
/// (`Evidence::revalidated_after_s`: a script validated again after `g`
/// whole seconds) and the window the settings give (PHP's default, 2 s,
/// unless the evidence set one) does not reproduce the recorded stats of
/// scripts in the first requests (by more than max(5%, 2)).
///
/// The gap alone does not fix the window: PHP compares whole seconds of
/// the request's start (`ZendAccelerator.c`
/// `validate_timestamp_and_record`: skipped while `revalidate >=
/// request_time`, then `revalidate = request_time + revalidate_freq`),
/// the gap is taken between the stats, and a worker validates only the
/// scripts its request includes; so windows `0..=g` are lowered (at most
/// 10 s one by one, then round values), and the one closest to the
/// recorded count wins if it fits (ties: the smallest window).
pub(super) fn infer_revalidate_freq(w: &mut Workload, real: &[Vec<Op>]) {
    let Some(g) = w.evidence.revalidated_after_s else {
        return;
    };
    if w.evidence
        .inferred
        .iter()
        .any(|(k, _)| k == "opcache.revalidate_freq")
    {
        return;
    }
    let Ok((base, _)) = inferred_config(w) else {
        return;
    };
    if !base.opcache_enable || !base.validate_timestamps || base.revalidate_freq == 0 {
        return;
    }
    let Some(sub) = first_requests(w) else {
        return;
    };
    if sub.requests.is_empty() {
        return;
    }
    let n = script_stats(&real[..real.len().min(SEARCH_REQUESTS)]);
    let tolerance = (n / 20).max(2);
    let (target, disk) = trial_inputs(&sub, &base);
    let stats = |f: u64| {
        let mut c = base.clone();
        c.revalidate_freq = f;
        script_stats(&crate::lower::lower_from(&sub, &c, &target, disk.clone()))
    };
    let now = stats(base.revalidate_freq);
    // a gap of 0 s (validated again within the same second) is what the
    // window 0 gives: tried against the settings' window even when that
    // one fits (it can, when few scripts were validated), and taken unless
    // it fits worse (a changed script validated again at once)
    if now.abs_diff(n) <= tolerance && g > 0 {
        return;
    }
    let windows: Vec<u64> = (0..=g.min(REVALIDATE_MAX_STEP))
        .chain(REVALIDATE_ROUND.iter().copied().filter(|&r| r <= g))
        .map(|f| f as u64)
        .filter(|&f| f != base.revalidate_freq)
        .collect();
    let tried: Vec<(u64, u64)> = windows
        .into_par_iter()
        .map(|f| (stats(f).abs_diff(n), f))
        .collect();
    let Some(&(d, f)) = tried.iter().min() else {
        return;
    };
    let requests = sub.requests.len();
    let old = base.revalidate_freq;
    if g == 0 && d > now.abs_diff(n) {
        w.evidence.notes.push(format!(
            "a script validated again within one second, but the first {requests} requests' {n} recorded stats of scripts are closer to what opcache.revalidate_freq={old} gives ({now}) than 0 ({}): the window is not inferred (a changed script, or two workers validating at once)",
            stats(0)
        ));
        return;
    }
    if d > tolerance {
        w.evidence.notes.push(format!(
            "the recorded {n} stats of scripts in the first {requests} requests are not what opcache.revalidate_freq={old} gives ({now}), and no window up to {g} s reproduces them within max(5%, 2): not inferred"
        ));
        return;
    }
    let same: Vec<String> = tried
        .iter()
        .filter(|t| t.0 == d && t.1 != f)
        .map(|t| t.1.to_string())
        .collect();
    let also = if same.is_empty() {
        String::new()
    } else {
        format!(" (also {}: the smallest is taken)", same.join(", "))
    };
    w.evidence.notes.push(format!(
        "the lower reproduces the recorded {n} stats of scripts in the first {requests} requests with opcache.revalidate_freq={f}{also} ({d} apart; {now} with {old}): inferred"
    ));
    w.evidence
        .inferred
        .push(("opcache.revalidate_freq".into(), f.to_string()));
}

/// Infers `opcache.max_accelerated_files` for a capture whose OPcache
/// hash table was full (`Evidence::opcache_hash_full`: some scripts
/// compiled in every request, the others cached): the table sizes PHP can
/// have (the primes of `zend_accel_hash_init`, from 223: the setting's
/// minimum is 200) are tried, and the one whose lowering opens as many
/// scripts as recorded (within 1%) is inferred.
pub(super) fn infer_accel_hash(w: &mut Workload, real: &[Vec<Op>]) {
    if !w.evidence.opcache_hash_full || stated(w, &["opcache.max_accelerated_files"]) {
        return;
    }
    let Ok((base, _)) = inferred_config(w) else {
        return;
    };
    let Some(sub) = first_requests(w) else {
        return;
    };
    let opens = |ops: &[Vec<Op>]| {
        ops.iter()
            .flatten()
            .filter(|o| o.kind == OpKind::Open && is_script(&o.path))
            .count() as u64
    };
    let n = opens(&real[..real.len().min(SEARCH_REQUESTS)]);
    let (target, disk) = trial_inputs(&sub, &base);
    let opened = |t: u64| {
        let mut c = base.clone();
        c.max_accelerated_files = t;
        opens(&crate::lower::lower_from(&sub, &c, &target, disk.clone()))
    };
    const SIZES: [u64; 9] = [223, 463, 983, 1979, 3907, 7963, 16229, 32531, 65407];
    let tried: Vec<(u64, u64)> = SIZES
        .into_par_iter()
        .map(|t| (opened(t).abs_diff(n), t))
        .collect();
    let best = tried.iter().copied().min();
    // a table that size cannot fill explains the scripts compiled again as
    // well: two workers compiling the same scripts at once (R64's race,
    // measured: fpm-race-rf2), not a full table
    let unbounded = tried[SIZES.len() - 1].0;
    if best.is_some_and(|(d, _)| d == unbounded) {
        w.evidence.notes.push(format!(
            "the lower opens the recorded {n} scripts of the first {} requests ({unbounded} apart) with an OPcache hash table of any size: opcache.max_accelerated_files not inferred",
            sub.requests.len()
        ));
        return;
    }
    match best {
        Some((d, t)) if d * 100 <= n => {
            w.evidence.notes.push(format!(
                "the lower opens the recorded {n} scripts of the first {} requests ({d} apart) with an OPcache hash table of {t} keys: opcache.max_accelerated_files={t} inferred (any setting above the next smaller table size gives the same)",
                sub.requests.len()
            ));
            w.evidence
                .inferred
                .retain(|(k, _)| k != "opcache.max_accelerated_files");
            w.evidence
                .inferred
                .push(("opcache.max_accelerated_files".into(), t.to_string()));
        }
        _ => w.evidence.notes.push(format!(
            "no OPcache hash table size reproduces the {n} scripts opened in the first {} requests within 1%: opcache.max_accelerated_files not inferred",
            sub.requests.len()
        )),
    }
}

/// The recorded settings: PHP's defaults with what the trace says on top.
pub fn inferred_config(w: &Workload) -> Result<(PhpConfig, Vec<String>), crate::ConfigError> {
    let mut c = PhpConfig::default();
    let flags: Vec<String> = w
        .evidence
        .inferred
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    c.apply_flags(&flags)?;
    Ok((c, flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bisection_finds_the_edge() {
        let f = |b: u64| {
            if b < 1000 {
                10
            } else if b < 5000 {
                7
            } else {
                3
            }
        };
        assert_eq!(smallest_with_at_most(&f, 7, 1, 1 << 20), Some(1000));
        assert_eq!(smallest_with_at_most(&f, 6, 1, 1 << 20), Some(5000));
        assert_eq!(smallest_with_at_most(&f, 2, 1, 1 << 20), None);
    }

    /// A key every command line of the capture states (`php -d`) is the
    /// capture's: the hash table's search does not run for it (it would
    /// lower the first requests and replace the stated value).
    #[test]
    fn a_stated_key_is_not_searched() {
        let mut w = Workload {
            schema: String::new(),
            requests: Vec::new(),
            evidence: Default::default(),
            links: Default::default(),
            mtimes: Default::default(),
            latency_us: Default::default(),
            file_cache: None,
            lock_us: 0,
            stored: Default::default(),
        };
        w.evidence.opcache_hash_full = true;
        w.evidence
            .inferred
            .push(("opcache.max_accelerated_files".into(), "500".into()));
        let searched = |w: &mut Workload| {
            let notes = w.evidence.notes.len();
            infer_accel_hash(w, &[]);
            w.evidence.notes.len() > notes
        };
        assert!(searched(&mut w.clone()), "the search runs when not stated");
        w.evidence
            .stated
            .push("opcache.max_accelerated_files".into());
        assert!(!searched(&mut w));
        assert_eq!(
            w.evidence.inferred,
            [(
                "opcache.max_accelerated_files".to_string(),
                "500".to_string()
            )]
        );
    }

    #[test]
    fn budget_candidates_are_round_and_near() {
        let f = |k: u64| if k < 16 { 100 } else { 50 };
        let c = budget_candidates(&f, 50, MAX_BUDGET_KIB);
        assert!(c.contains(&16) && c.contains(&8) && c.contains(&64) && c.contains(&24));
        assert!(!c.contains(&128));
    }
}
