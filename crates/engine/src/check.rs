//! The modelled "before" checked against what was recorded: lowering the
//! lifted requests under the recorded settings must give back the
//! capture's own calls. A gap means a recorded setting is wrong (stated
//! wrongly, or inferred from too little), and every prediction built on it
//! is off by as much.

use serde::Serialize;
use statstorm_trace::Tally;

/// Per syscall: |modelled - recorded| <= max(`TOL_PCT` % of recorded,
/// `TOL_ABS`) is a match.
pub const TOL_PCT: f64 = 5.0;
/// See [`TOL_PCT`].
pub const TOL_ABS: u64 = 2;

/// One request's syscall count that missed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gap {
    /// Index of the request in the report's order.
    pub request: usize,
    pub syscall: String,
    pub modelled: u64,
    pub recorded: u64,
}

/// The outcome of the check over all requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BeforeCheck {
    pub requests: usize,
    /// Requests with at least one syscall beyond the tolerance.
    pub requests_beyond: usize,
    /// The largest gap of each request beyond the tolerance, largest first
    /// (at most [`MAX_GAPS`]).
    pub gaps: Vec<Gap>,
    /// Settings that change the calls that missed, most likely first.
    pub suspects: Vec<&'static str>,
    /// Single changes of the suspects that give back the recorded calls
    /// of requests that missed, tried on the capture's first requests
    /// (`predict::gap_trials`), the most given back first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explained: Vec<Explained>,
}

/// One suspect changed: `setting=value` over the recorded settings, on the
/// capture's first `requests` requests, of which `missed` missed their
/// recorded calls: `fixed` of those then match, and `broken` requests that
/// matched no longer do.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explained {
    pub setting: String,
    pub value: String,
    pub requests: usize,
    pub missed: usize,
    pub fixed: usize,
    pub broken: usize,
}

/// Gaps listed in [`BeforeCheck::gaps`].
pub const MAX_GAPS: usize = 5;

/// Settings of the PHP model that change each syscall's count (the rules
/// of docs/php-model.md: the realpath cache and open_basedir change the
/// lstat walks, OPcache's validation the stats of scripts, OPcache itself
/// the opens and reads of compiles).
fn suspects_of(syscall: &str) -> &'static [&'static str] {
    match syscall {
        "newfstatat" | "lstat" | "stat" | "fstat" | "statx" => &[
            "realpath_cache_size",
            "realpath_cache_ttl",
            "open_basedir",
            "opcache.validate_timestamps",
            "opcache.revalidate_freq",
        ],
        "openat" | "read" => &["opcache.enable", "opcache.enable_cli", "opcache.file_cache"],
        "readlink" => &["realpath_cache_size", "open_basedir"],
        "access" => &["opcache.enable", "open_basedir"],
        _ => &[],
    }
}

/// Whether `modelled` is within the tolerance of `recorded`.
pub(crate) fn within(modelled: u64, recorded: u64) -> bool {
    let tol = ((recorded as f64 * TOL_PCT / 100.0).floor() as u64).max(TOL_ABS);
    modelled.abs_diff(recorded) <= tol
}

/// Checks each request's modelled counts against its recorded ones, for
/// the syscalls in `syscalls`.
pub fn before_vs_recorded(
    modelled: &[&Tally],
    recorded: &[&Tally],
    syscalls: &[&str],
) -> BeforeCheck {
    let mut f = CheckFold::new(syscalls);
    for (m, r) in modelled.iter().zip(recorded) {
        f.push(m, r);
    }
    f.finish()
}

/// [`before_vs_recorded`] request by request (in the report's order):
/// what it holds is bounded by the syscalls checked and [`MAX_GAPS`], not
/// by the requests.
pub struct CheckFold<'a> {
    syscalls: &'a [&'a str],
    requests: usize,
    beyond: usize,
    /// Per suspect, the calls it may explain, in the order first named
    /// (the tables list the likeliest first).
    weight: Vec<(&'static str, u64)>,
    /// The largest gaps so far, in the order listed, at most
    /// [`MAX_GAPS`].
    gaps: Vec<Gap>,
}

impl<'a> CheckFold<'a> {
    pub fn new(syscalls: &'a [&'a str]) -> Self {
        CheckFold {
            syscalls,
            requests: 0,
            beyond: 0,
            weight: Vec::new(),
            gaps: Vec::new(),
        }
    }

    /// The next request's modelled and recorded counts.
    pub fn push(&mut self, m: &Tally, r: &Tally) {
        let i = self.requests;
        self.requests += 1;
        let mut worst: Option<Gap> = None;
        for &k in self.syscalls {
            let (mv, rv) = (m.of(k), r.of(k));
            if within(mv, rv) {
                continue;
            }
            for &s in suspects_of(k) {
                match self.weight.iter_mut().find(|(n, _)| *n == s) {
                    Some((_, w)) => *w += mv.abs_diff(rv),
                    None => self.weight.push((s, mv.abs_diff(rv))),
                }
            }
            if worst
                .as_ref()
                .is_none_or(|g| g.modelled.abs_diff(g.recorded) < mv.abs_diff(rv))
            {
                worst = Some(Gap {
                    request: i,
                    syscall: k.to_string(),
                    modelled: mv,
                    recorded: rv,
                });
            }
        }
        if let Some(g) = worst {
            self.beyond += 1;
            // largest first, then earliest: a later gap goes after equals
            let key = |g: &Gap| {
                (
                    std::cmp::Reverse(g.modelled.abs_diff(g.recorded)),
                    g.request,
                )
            };
            let at = self.gaps.partition_point(|h| key(h) <= key(&g));
            if at < MAX_GAPS {
                self.gaps.insert(at, g);
                self.gaps.truncate(MAX_GAPS);
            }
        }
    }

    pub fn finish(mut self) -> BeforeCheck {
        self.weight.sort_by_key(|&(_, w)| std::cmp::Reverse(w));
        BeforeCheck {
            requests: self.requests,
            requests_beyond: self.beyond,
            gaps: self.gaps,
            suspects: self.weight.into_iter().map(|(k, _)| k).collect(),
            explained: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: &[(&'static str, u64)]) -> Tally {
        v.iter().copied().collect()
    }

    #[test]
    fn gaps_beyond_the_tolerance_are_reported_with_suspects() {
        let before = [m(&[("newfstatat", 25_002)]), m(&[("newfstatat", 101)])];
        let rec = [m(&[("newfstatat", 16_689)]), m(&[("newfstatat", 100)])];
        let c = before_vs_recorded(
            &before.iter().collect::<Vec<_>>(),
            &rec.iter().collect::<Vec<_>>(),
            &["newfstatat", "openat"],
        );
        assert_eq!(c.requests, 2);
        assert_eq!(c.requests_beyond, 1);
        assert_eq!(
            c.gaps,
            vec![Gap {
                request: 0,
                syscall: "newfstatat".into(),
                modelled: 25_002,
                recorded: 16_689
            }]
        );
        assert_eq!(c.suspects[0], "realpath_cache_size");
        assert!(c.suspects.contains(&"open_basedir"));
    }

    #[test]
    fn the_fold_keeps_the_largest_gaps_of_many_requests() {
        // gaps of every size, some equal: the fold keeps what sorting
        // every gap and keeping the first MAX_GAPS gives
        let n = 200u64;
        let rec: Vec<Tally> = (0..n).map(|_| m(&[("newfstatat", 1000)])).collect();
        let before: Vec<Tally> = (0..n)
            .map(|i| m(&[("newfstatat", 1000 + (i * 37) % 101)]))
            .collect();
        let c = before_vs_recorded(
            &before.iter().collect::<Vec<_>>(),
            &rec.iter().collect::<Vec<_>>(),
            &["newfstatat"],
        );
        let mut all: Vec<(u64, usize)> = before
            .iter()
            .enumerate()
            .map(|(i, b)| (b.of("newfstatat") - 1000, i))
            .filter(|&(d, _)| d > 50)
            .collect();
        assert_eq!(c.requests_beyond, all.len());
        all.sort_by_key(|&(d, i)| (std::cmp::Reverse(d), i));
        let want: Vec<usize> = all.iter().take(MAX_GAPS).map(|&(_, i)| i).collect();
        let got: Vec<usize> = c.gaps.iter().map(|g| g.request).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_tolerance_is_five_percent_or_two() {
        assert!(within(105, 100) && !within(106, 100));
        assert!(within(1050, 1000) && !within(1051, 1000));
        assert!(within(0, 2) && !within(3, 0));
    }
}
