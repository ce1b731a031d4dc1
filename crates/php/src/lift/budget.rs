//! The realpath cache budget a capture was recorded under, when its walks
//! show a cache that was on but full (`Evidence::realpath_partial`).
//!
//! The lower replays PHP's cache entry for entry (crate::realpath), so the
//! number of `lstat`s it makes for the lifted workload falls as the budget
//! grows (not strictly: see below). The region where it reaches the
//! recorded number is found by bisection, and round budgets are tried: powers of two of KiB, then whole KiB around
//! the region; the first that reproduces the recorded count exactly is
//! inferred. No inference when none does (e.g. a short TTL the capture
//! does not show).

use super::*;
use crate::config::PhpConfig;

/// Budgets searched: up to 1 GiB.
const MAX_BUDGET: u64 = 1 << 30;
/// Requests the search lowers.
const SEARCH_REQUESTS: usize = 16;

fn lstats(ops: &[Vec<Op>]) -> u64 {
    ops.iter()
        .flatten()
        .filter(|o| o.kind == OpKind::Lstat)
        .count() as u64
}

/// The smallest budget in `lo..=hi` whose lstat count is at most `n`
/// (counts fall as the budget grows), or None.
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

/// Infers `realpath_cache_size` for `w` from the recorded requests `real`
/// (the trace's calls per request, as `request_ops` gives them) and adds
/// it to the evidence.
pub(super) fn infer_realpath_budget(w: &mut Workload, real: &[Vec<Op>]) {
    if !w.evidence.realpath_partial {
        return;
    }
    let mut base = PhpConfig::default();
    let flags: Vec<String> = w
        .evidence
        .inferred
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if base.apply_flags(&flags).is_err() {
        return;
    }
    // the first requests are enough (each worker's cache fills in its
    // first ones) and keep the search short on long captures
    let sub = Workload {
        requests: w.requests.iter().take(SEARCH_REQUESTS).cloned().collect(),
        ..w.clone()
    };
    let n = lstats(&real[..real.len().min(SEARCH_REQUESTS)]);
    let count = |b: u64| {
        let mut c = base.clone();
        c.realpath_cache_size = b;
        lstats(&crate::lower::lower(&sub, &c))
    };
    // the count falls as the budget grows, but not strictly everywhere:
    // a larger budget may let in an entry that a smaller one skipped and
    // then have no room for a later one. So a bisection over whole KiB
    // finds the region, and round budgets are tried one by one: the powers
    // of two of KiB near it, and whole KiB around it; the closest to the
    // recorded count wins (ties: a power of two, then the smaller).
    let kib = |k: u64| count(k * 1024);
    // a budget is only visible when it ran out: unless the recorded
    // count is well above what the configured (or default) budget gives,
    // nothing is claimed (the model's own misses on the applications are
    // within 1%; a budget that ran out adds a walk for every path it could
    // not keep: 4.7x the default's lstats on the tree's 1K capture, 6.3x on
    // WordPress's 16K one, 3.2x on MediaWiki's)
    let full = count(base.realpath_cache_size);
    if full * 100 >= n * 95 {
        return;
    }
    let edge_k = smallest_with_at_most(&kib, n, 1, MAX_BUDGET / 1024).unwrap_or(MAX_BUDGET / 1024);
    let mut cands: Vec<u64> = (0..=20)
        .map(|i| 1u64 << i)
        .filter(|&k| k * 4 >= edge_k && k <= edge_k * 4)
        .collect();
    cands.extend(edge_k.saturating_sub(8).max(1)..=edge_k + 8);
    cands.sort_unstable();
    cands.dedup();
    let best = cands
        .iter()
        .map(|&k| (kib(k).abs_diff(n), !k.is_power_of_two(), k))
        .min();
    let Some((diff, _, k)) = best.filter(|&(d, _, _)| d * 200 <= n) else {
        w.evidence.notes.push(format!(
            "no realpath_cache_size near {edge_k}K reproduces the recorded {n} lstat calls of the first {} requests within 0.5% with the other settings as inferred: realpath_cache_size not inferred (a short realpath_cache_ttl?)",
            sub.requests.len()
        ));
        return;
    };
    let value = format!("{k}K");
    w.evidence.notes.push(format!(
        "the lower reproduces the recorded {n} lstat calls of the first {} requests with realpath_cache_size={value} ({diff} apart; {full} with {} bytes): inferred (R54)",
        sub.requests.len(),
        base.realpath_cache_size
    ));
    w.evidence
        .inferred
        .retain(|(k, _)| k != "realpath_cache_size");
    w.evidence
        .inferred
        .push(("realpath_cache_size".into(), value));
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
}
