//! What the requests say about the settings they ran under
//! ([`Evidence`]), folded one request at a time ([`EvidenceSeen::see`]):
//! counts and sets bounded by the capture's distinct scripts, and for
//! PHP's request times the php-fpm requests whose place in that order is
//! not settled yet (those in flight: [`GapSeen`]).

use super::facts::{AppStatsSeen, FreshSeen, RecompilesSeen};
use super::*;
use statstorm_trace::op::Name;

/// PHP's opcache.revalidate_freq when not set, seconds.
const DEFAULT_REVALIDATE_FREQ_S: i64 = 2;

/// Validations of one script: (start, end of its stat), µs. Requests come
/// in start order and no operation comes before its request's start, so
/// the validations before the current request's start are final: their
/// gaps are taken and only the last of them is kept
/// ([`Validations::settle`]).
#[derive(Default)]
struct Validations {
    times: Vec<(i64, i64)>,
    /// The smallest gap among the settled validations.
    gap: Option<i64>,
}

impl Validations {
    /// Smallest gap between validations, whole seconds; not one begun
    /// while the other's stat ran (two workers finding the same expired
    /// stamp at once, R64's race).
    fn gaps(times: &[(i64, i64)]) -> Option<i64> {
        times
            .windows(2)
            .filter(|w| w[1].0 >= w[0].1)
            .map(|w| (w[1].0 / 1_000_000) - (w[0].0 / 1_000_000))
            .min()
    }

    /// Takes the gaps of the validations begun before `floor` (no later
    /// one can come between them) and keeps the last of them.
    fn settle(&mut self, floor: i64) {
        self.times.sort();
        let settled = self.times.partition_point(|t| t.0 < floor);
        if settled < 2 {
            return;
        }
        self.gap = self
            .gap
            .into_iter()
            .chain(Self::gaps(&self.times[..settled]))
            .min();
        self.times.drain(..settled - 1);
    }

    fn min_gap(mut self) -> Option<i64> {
        self.times.sort();
        self.gap.into_iter().chain(Self::gaps(&self.times)).min()
    }
}

/// Past this many validations held, the settled ones are folded away.
const SETTLE_AT: usize = 1 << 20;

/// One php-fpm request, for the longest time without a validation of
/// the entry script ([`GapSeen`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Timed {
    request_time_us: i64,
    index: usize,
    compiles: bool,
    /// Compiled the entry script.
    compiled_entry: bool,
    /// Validated the entry script.
    validated_entry: bool,
    empty: bool,
}

/// The pool's first compiled script: the first compile of the php-fpm
/// request that is first by PHP's request time (then index) among those
/// that compiled something; requests seen in any order.
#[derive(Default)]
pub(super) struct EntrySeen {
    best: Option<((i64, usize), Name)>,
}

impl EntrySeen {
    pub(super) fn see(&mut self, i: usize, r: &WorkRequest) {
        if r.cli {
            return;
        }
        let Some(p) = r.ops.iter().find_map(|o| match &o.kind {
            PhpOpKind::Compile { path, .. } => Some(path),
            _ => None,
        }) else {
            return;
        };
        let key = (r.request_time_us, i);
        if self.best.as_ref().is_none_or(|(k, _)| key < *k) {
            self.best = Some((key, p.clone()));
        }
    }

    pub(super) fn finish(self) -> Option<Name> {
        self.best.map(|(_, p)| p)
    }
}

/// [`Evidence`] folded request by request; requests in start order
/// (start, then index).
pub(super) struct EvidenceSeen<'m> {
    /// The pool's first compiled script: the first php-fpm request's (by
    /// PHP's request time) first compile ([`EvidenceSeen::entry_of`]).
    entry: Option<Name>,
    app: AppStatsSeen,
    includes: bool,
    compiled: HashSet<Name>,
    compiles_total: u32,
    repeated_chain_in_request: u32,
    reval_times: HashMap<Name, Validations>,
    held: usize,
    gap: GapSeen,
    fresh: FreshSeen<'m>,
    recompiles: RecompilesSeen,
    requests: usize,
    all_cli: bool,
    any_cli: bool,
    cli_opcache: usize,
    unread: HashMap<Name, u32>,
    once_unnamed: bool,
    /// Requests whose command line states settings (`-d`) are not read.
    stated_apart: bool,
}

impl<'m> EvidenceSeen<'m> {
    /// `entry`: [`EvidenceSeen::entry_of`] over the same requests.
    pub(super) fn new(entry: Option<Name>, mtimes: &'m BTreeMap<String, Vec<(i64, i64)>>) -> Self {
        EvidenceSeen {
            entry,
            app: AppStatsSeen::default(),
            includes: false,
            compiled: HashSet::default(),
            compiles_total: 0,
            repeated_chain_in_request: 0,
            reval_times: HashMap::default(),
            held: 0,
            gap: GapSeen::default(),
            fresh: FreshSeen::new(mtimes),
            recompiles: RecompilesSeen::default(),
            requests: 0,
            all_cli: true,
            any_cli: false,
            cli_opcache: 0,
            unread: HashMap::default(),
            once_unnamed: false,
            stated_apart: false,
        }
    }

    /// With `apart` (some request states no settings of its own), the
    /// php-cli processes whose command line states settings (`-d`) are
    /// left out: what they show is theirs, not the capture's php.ini.
    pub(super) fn stated_apart(mut self, apart: bool) -> Self {
        self.stated_apart = apart;
        self
    }

    /// The pool's first compiled script over requests given as (index,
    /// request) in any order ([`EntrySeen`]).
    pub(super) fn entry_of<'a>(
        reqs: impl Iterator<Item = (usize, &'a WorkRequest)>,
    ) -> Option<Name> {
        let mut e = EntrySeen::default();
        for (i, r) in reqs {
            e.see(i, r);
        }
        e.finish()
    }

    /// Folds request `i`.
    pub(super) fn see(&mut self, i: usize, r: &WorkRequest) {
        if self.stated_apart && r.settings.is_some() {
            return;
        }
        self.requests += 1;
        self.all_cli &= r.cli;
        self.any_cli |= r.cli;
        self.app.see(r.ops.iter());
        self.fresh.see(r);
        self.recompiles.see(i, r);
        let (mut compiles, mut compiled_entry, mut validated_entry) = (false, false, false);
        let is_entry = |p: &Name| self.entry.as_ref().is_some_and(|e| e == p);
        for o in &r.ops {
            self.includes |= !matches!(&o.kind, PhpOpKind::Compile { via: Via::Main, .. })
                && matches!(
                    &o.kind,
                    PhpOpKind::Compile { .. }
                        | PhpOpKind::Revalidate { .. }
                        | PhpOpKind::OnceRepeat { .. }
                );
            match &o.kind {
                PhpOpKind::Compile {
                    path,
                    resolves,
                    reads,
                    via,
                    resolve_as,
                    ..
                } => {
                    self.compiled.insert(path.clone());
                    self.compiles_total += 1;
                    if *resolves > 1 {
                        self.repeated_chain_in_request += 1;
                    }
                    self.once_unnamed |= *via == Via::Once && resolve_as.is_none();
                    compiles = true;
                    compiled_entry |= is_entry(path);
                    // A cached script opened without being read (open,
                    // fstat, close) is OPcache resolving an include's name
                    // by the script's real path (R62)
                    if *reads == 0 && !r.cli {
                        *self.unread.entry(path.clone()).or_default() += 1;
                    }
                }
                PhpOpKind::Revalidate { path, .. } => {
                    let t = r.start_us + o.t_off_us;
                    self.reval_times
                        .entry(path.clone())
                        .or_default()
                        .times
                        .push((t, t + o.stat_us.unwrap_or(0) as i64));
                    self.held += 1;
                    validated_entry |= is_entry(path);
                }
                // a repeated *_once of an absolute path walks again only
                // without realpath cache hits
                PhpOpKind::OnceRepeat { probes, .. } if probes.is_empty() => {
                    self.repeated_chain_in_request += 1
                }
                _ => {}
            }
        }
        if r.cli
            && r.ops
                .iter()
                .any(|o| matches!(o.kind, PhpOpKind::OpcacheStartup { .. }))
        {
            self.cli_opcache += 1;
        }
        self.gap.settle(r.start_us);
        if !r.cli {
            self.gap.push(Timed {
                request_time_us: r.request_time_us,
                index: i,
                compiles,
                compiled_entry,
                validated_entry,
                empty: r.ops.is_empty(),
            });
        }
        if self.held > SETTLE_AT {
            self.held = 0;
            for v in self.reval_times.values_mut() {
                v.settle(r.start_us);
                self.held += v.times.len();
            }
        }
    }

    /// The evidence, with what the lift saw of open_basedir's walks
    /// (`basedirs`) and of walks that stopped at a cached directory
    /// (`short_walks`).
    pub(super) fn finish(self, basedirs: &BTreeMap<String, u32>, short_walks: u32) -> Evidence {
        let mut ev = Evidence::default();
        let app_stats = self.app.finish();
        let compiles_total = self.compiles_total;
        let repeated_chain_in_request = self.repeated_chain_in_request;
        let entry_app_stat = self
            .entry
            .as_ref()
            .is_some_and(|e| app_stats.contains(e.as_ref()));
        let unvalidated_s = self.gap.finish(entry_app_stat);
        let fresh = self.fresh.finish();
        let rc = self.recompiles.finish(&fresh);
        ev.scripts_recompiled = rc.opcache_off();
        let recompiled = if rc.opcache_off() { rc.again } else { 0 };
        if rc.again > 0 && !rc.opcache_off() {
            ev.opcache_hash_full = true;
            ev.notes.push(format!(
                "{} scripts were compiled in several requests while {} others were compiled once and only validated after: OPcache on, its hash table full (opcache.max_accelerated_files too small for the application; the table holds the next prime above the setting)",
                rc.again, rc.once
            ));
        }
        if !fresh.is_empty() {
            let mut f: Vec<&String> = fresh.iter().collect();
            f.sort();
            ev.notes.push(format!(
                "{} scripts were compiled within {FRESH_S} s of their last change ({}): compiling them again may be OPcache's file_update_protection (R65), not OPcache off",
                f.len(),
                f.iter().take(3).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        if compiles_total > 0 {
            if recompiled > 0 && self.all_cli {
                // php-cli: OPcache needs opcache.enable and opcache.enable_cli
                // (ZendAccelerator.c accel_startup); off for the CLI is most
                // often enable_cli's default (0), and inferring it rather than
                // enable=0 keeps `--php opcache.enable_cli=1` meaningful
                ev.notes.push(format!(
                    "{recompiled} scripts were opened and compiled more than once: OPcache off for the CLI (opcache.enable_cli=0, PHP's default; or opcache.enable=0)"
                ));
                ev.inferred.push(("opcache.enable_cli".into(), "0".into()));
            } else if recompiled > 0 {
                ev.notes.push(format!(
                    "{recompiled} scripts were opened and compiled more than once: OPcache off (or not caching)"
                ));
                ev.inferred.push(("opcache.enable".into(), "0".into()));
            } else {
                ev.notes.push(format!(
                    "{} scripts were compiled once each and never again: OPcache on (or each request ran in a fresh process)",
                    self.compiled.len()
                ));
            }
        }
        // OPcache's lock file in a php-cli process: OPcache on for the CLI
        let cli_opcache = self.cli_opcache;
        if cli_opcache > 0 {
            ev.notes.push(format!(
                "{cli_opcache} php-cli processes created OPcache's lock file ({OPCACHE_LOCK_PREFIX}XXXXXX): OPcache on for the CLI (opcache.enable=1, opcache.enable_cli=1)"
            ));
            ev.inferred.push(("opcache.enable".into(), "1".into()));
            ev.inferred.push(("opcache.enable_cli".into(), "1".into()));
        } else if self.any_cli && compiles_total > 0 {
            ev.notes.push(
                "no php-cli process created OPcache's lock file: OPcache off for the CLI (opcache.enable_cli=0, PHP's default, or opcache.enable=0)".into(),
            );
        }
        // validations of the application's own stats left out (as
        // script_facts reclassifies them)
        let mut min_gap: Option<i64> = None;
        let mut validated = 0usize;
        for (p, t) in self.reval_times {
            if app_stats.contains(p.as_ref()) {
                continue;
            }
            validated += 1;
            min_gap = min_gap.into_iter().chain(t.min_gap()).min();
        }
        if validated > 0 && recompiled > 0 {
            // with OPcache off nothing validates timestamps: these are the
            // application's own stat functions on scripts (as script_facts
            // reclassifies them), not evidence of OPcache on
            ev.notes.push(format!(
                "{} scripts were stat()ed without being opened while scripts were compiled again: the application's own stat functions (OPcache is off)",
                validated
            ));
        } else if validated > 0 {
            ev.notes.push(format!(
                "{} cached scripts were stat()ed without being opened: OPcache timestamp validation (validate_timestamps=1)",
                validated
            ));
            ev.inferred.push(("opcache.enable".into(), "1".into()));
            ev.inferred
                .push(("opcache.validate_timestamps".into(), "1".into()));
            // smallest gap between validations of one script, whole seconds;
            // not one begun while the other's stat ran (two workers finding
            // the same expired stamp at once, R64's race)
            if let Some(g) = min_gap {
                ev.notes.push(format!(
                    "the same script was validated again after {g} s at the least: revalidate_freq <= {g}"
                ));
                // the window itself is found by trial lowerings
                // (infer::infer_revalidate_freq)
                ev.revalidated_after_s = Some(g);
            }
            if let Some(l) = unvalidated_s.filter(|&l| l > DEFAULT_REVALIDATE_FREQ_S) {
                ev.notes.push(format!(
                    "a request did not validate the entry script {l} s after its last validation: revalidate_freq >= {l}"
                ));
                ev.inferred
                    .push(("opcache.revalidate_freq".into(), l.to_string()));
            }
        } else if compiles_total > 0 && recompiled == 0 && self.requests > 1 {
            match unvalidated_s.filter(|&l| l > DEFAULT_REVALIDATE_FREQ_S) {
                // PHP's default window would have validated: either no
                // validation at all or a longer window. The smallest window
                // that fits is taken; both give the same "before"
                Some(l) => {
                    ev.notes.push(format!(
                        "no script was validated, although a request ran {l} s after the entry script's compile: validate_timestamps=0 or revalidate_freq >= {l} (taken: revalidate_freq={l}; state opcache.validate_timestamps=0 if that is the setting)"
                    ));
                    ev.inferred
                        .push(("opcache.revalidate_freq".into(), l.to_string()));
                }
                None => ev.notes.push(
                    "no script was validated: validate_timestamps=0, or every request fell inside the revalidate_freq window"
                        .into(),
                ),
            }
        }
        // A cached script opened without being read (open, fstat, close) is
        // OPcache resolving an include's name by the script's real path
        // (R62). A script loaded from the file cache is keyed by its real path
        // only, so its first use under another name does that once in the
        // pool, and the name becomes a key; the same script opened so again
        // means every include resolves that way: opcache.revalidate_path=1
        // (measured: fpm-tree-rpath1, t/d1/d2/d3/d4/m0.php three times in one
        // request).
        let again = self.unread.values().filter(|&&n| n >= 2).count();
        if again > 0 && recompiled == 0 {
            ev.notes.push(format!(
                "{again} cached scripts were opened again without being read, more than once each: OPcache resolves every include by the script's real path (opcache.revalidate_path=1, R62)"
            ));
            ev.inferred
                .push(("opcache.revalidate_path".into(), "1".into()));
        }
        if repeated_chain_in_request > 0 && short_walks > 0 {
            ev.realpath_partial = true;
            ev.notes.push(format!(
                "{repeated_chain_in_request} resolutions repeated a full lstat walk of a path already resolved in the request, while {short_walks} walks stopped at a cached directory: the realpath cache is on but does not keep every path (realpath_cache_size too small for the application, R54)"
            ));
        } else if repeated_chain_in_request > 0 {
            ev.realpath_no_hits = true;
            ev.notes.push(format!(
                "{repeated_chain_in_request} resolutions repeated a full lstat walk of a path already resolved in the request: no realpath cache hits (realpath_cache_size=0 or open_basedir)"
            ));
        }
        // a canonical name resolved twice: the second walk of the same key
        // shows only without realpath cache (`a//b.php` shows two walks
        // anyway: two keys)
        let cache_off = short_walks == 0 && self.once_unnamed;
        // with OPcache off (scripts compiled again) script stats cannot be
        // validations: the application's own
        ev.complete = !self.includes || (cache_off && recompiled > 0);
        if !ev.complete {
            ev.notes.push(format!(
                "{HIDDEN_NOTE} (include vs include_once, repeated include_once): predictions toward realpath_cache_size=0 or open_basedir undercount; record with both caches off for full information"
            ));
        }
        if let Some((dir, n)) = basedirs.iter().max_by_key(|(_, n)| **n) {
            ev.notes.push(if dir == "/" {
                format!(
                    "{n} checks walked the checked file and its real path with no basedir walk after them, and a missing path's check tried readlink: open_basedir=/"
                )
            } else {
                format!(
                    "{n} checks walked the directory {dir} right before the checked file: open_basedir={dir}"
                )
            });
            // open_basedir alone explains the walks that repeat (R58: it
            // disables the realpath cache): the cache's size is not shown, and
            // stays PHP's default, assumed, not inferred as 0
            // (which would keep every walk once open_basedir is removed)
            ev.inferred.push(("open_basedir".into(), dir.clone()));
        } else if cache_off {
            ev.notes.push(
                "include_once walked its own name twice: no realpath cache (realpath_cache_size=0)"
                    .into(),
            );
            ev.inferred.push(("realpath_cache_size".into(), "0".into()));
        }
        ev
    }
}

/// The longest time, in whole seconds of PHP's request time, between a
/// request that validated (or compiled) the entry script and a later
/// non-empty request that did not, once some request compiled: folded
/// over the php-fpm requests in order of request time (then index).
/// Requests are seen in start order and a request's time is never before
/// its start (its first call, or its start), so a request whose time is
/// before the current start has its place settled: it is folded then and
/// let go (the requests in flight are held, not every request). Whether
/// the entry script is also one the application stats (its validations
/// then count only as compiles) is known at the end: both answers are
/// folded.
#[derive(Default)]
struct GapSeen {
    pending: std::collections::BinaryHeap<std::cmp::Reverse<Timed>>,
    /// Folds without and with the entry script among the application's
    /// stats.
    folds: [GapFold; 2],
}

#[derive(Clone, Copy, Default)]
struct GapFold {
    started: bool,
    last: Option<i64>,
    gap: Option<i64>,
}

impl GapFold {
    fn see(&mut self, r: &Timed, entry_app_stat: bool) {
        let sec = r.request_time_us.div_euclid(1_000_000);
        self.started |= r.compiles;
        if !self.started {
            return;
        }
        let validated = r.compiled_entry || (r.validated_entry && !entry_app_stat);
        if validated {
            self.last = Some(sec);
        } else if let (Some(l), false) = (self.last, r.empty) {
            self.gap = self.gap.max(Some(sec - l));
        }
    }
}

impl GapSeen {
    fn push(&mut self, t: Timed) {
        self.pending.push(std::cmp::Reverse(t));
    }

    /// Folds the requests whose time is before `start_us` (the start of
    /// the request seen next: none to come can be before them).
    fn settle(&mut self, start_us: i64) {
        while let Some(std::cmp::Reverse(t)) = self.pending.peek() {
            if t.request_time_us >= start_us {
                break;
            }
            let t = *t;
            self.pending.pop();
            self.fold(&t);
        }
    }

    fn fold(&mut self, t: &Timed) {
        self.folds[0].see(t, false);
        self.folds[1].see(t, true);
    }

    fn finish(mut self, entry_app_stat: bool) -> Option<i64> {
        while let Some(std::cmp::Reverse(t)) = self.pending.pop() {
            self.fold(&t);
        }
        self.folds[usize::from(entry_app_stat)].gap
    }
}

/// [`EvidenceSeen`] over `reqs`.
pub(super) fn evidence(
    reqs: &[WorkRequest],
    basedirs: &BTreeMap<String, u32>,
    short_walks: u32,
    mtimes: &BTreeMap<String, Vec<(i64, i64)>>,
) -> Evidence {
    let mut seen = EvidenceSeen::new(EvidenceSeen::entry_of(reqs.iter().enumerate()), mtimes)
        .stated_apart(reqs.iter().any(|r| r.settings.is_none()));
    let mut order: Vec<usize> = (0..reqs.len()).collect();
    order.sort_by_key(|&i| (reqs[i].start_us, i));
    for i in order {
        seen.see(i, &reqs[i]);
    }
    seen.finish(basedirs, short_walks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_validations_keeps_the_smallest_gap() {
        // validations of one script from requests in start order, each
        // request's a few seconds after its start, overlapping the next
        // requests'; settled after every request and kept whole, the
        // smallest gap is the same
        let mut x: u64 = 7;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for _ in 0..50 {
            let mut settled = Validations::default();
            let mut whole = Vec::new();
            let mut start = 0i64;
            for _ in 0..200 {
                start += next(3_000_000) as i64;
                for _ in 0..next(4) {
                    let t = start + next(5_000_000) as i64;
                    let v = (t, t + next(100_000) as i64);
                    settled.times.push(v);
                    whole.push(v);
                }
                settled.settle(start);
                assert!(settled.times.len() <= whole.len());
            }
            whole.sort();
            assert_eq!(settled.min_gap(), Validations::gaps(&whole));
        }
    }
}
