//! What every request of a capture says about each script, folded one
//! request at a time ([`FactsSeen::see`]) and then applied to each request
//! on its own ([`ScriptFacts::apply`]): include or include_once, entry
//! script or include, plain-wrapper opens, file functions on scripts,
//! OPcache off.
//!
//! Split so because the facts look across the whole capture while the
//! change they make is local to a request: the fold holds sets bounded by
//! the capture's distinct paths (and, for the validations of a worker,
//! its distinct paths per process), never the requests themselves, so the
//! requests can come from anywhere (a slice, a file) and go on once seen.

use super::*;
use statstorm_trace::op::Name;

/// Scripts compiled in more than one request, and scripts compiled in
/// one request and only validated or stat()ed in others, folded request
/// by request: per script its compiles and whether a second request used
/// it (the first user's index and "another one too").
#[derive(Default)]
pub(super) struct RecompilesSeen {
    compiled: HashMap<Name, usize>,
    used: HashMap<Name, (usize, bool)>,
}

impl RecompilesSeen {
    /// Folds request `i` (any order; each request once).
    pub(super) fn see(&mut self, i: usize, r: &WorkRequest) {
        for o in &r.ops {
            let path = match &o.kind {
                // an open with no read compiles nothing: OPcache opening a
                // cached script to learn its real path (revalidate_path=1,
                // or a name that is not yet a key of a script loaded from
                // the file cache, R67)
                PhpOpKind::Compile { path, reads: 0, .. } => path,
                PhpOpKind::Compile { path, .. } => {
                    *self.compiled.entry(path.clone()).or_default() += 1;
                    path
                }
                PhpOpKind::Revalidate { path, .. } | PhpOpKind::Stat { path, .. } => path,
                _ => continue,
            };
            match self.used.get_mut(path) {
                Some(u) => u.1 |= u.0 != i,
                None => {
                    self.used.insert(path.clone(), (i, false));
                }
            }
        }
    }

    /// The counts, mtime-explained recompiles (`fresh`) left out.
    pub(super) fn finish(&self, fresh: &HashSet<String>) -> Recompiles {
        let mut out = Recompiles { again: 0, once: 0 };
        for (p, n) in &self.compiled {
            if fresh.contains(p.as_ref()) {
                continue;
            }
            if *n > 1 {
                out.again += 1;
            } else if self.used.get(p).is_some_and(|u| u.1) {
                out.once += 1;
            }
        }
        out
    }
}

/// Scripts whose compiling again the trace explains without OPcache being
/// off (mtimes from `strace -v`): compiled less than [`FRESH_S`] seconds
/// after their last change (R65, file_update_protection), or changed
/// during the capture (R64: a validation that finds a new mtime
/// recompiles); folded request by request.
pub(super) struct FreshSeen<'m> {
    mtimes: &'m BTreeMap<String, Vec<(i64, i64)>>,
    out: HashSet<String>,
}

impl<'m> FreshSeen<'m> {
    pub(super) fn new(mtimes: &'m BTreeMap<String, Vec<(i64, i64)>>) -> Self {
        FreshSeen {
            mtimes,
            out: mtimes
                .iter()
                .filter(|(_, obs)| obs.len() > 1)
                .map(|(p, _)| p.clone())
                .collect(),
        }
    }

    pub(super) fn see(&mut self, r: &WorkRequest) {
        for o in &r.ops {
            if let PhpOpKind::Compile { path, .. } = &o.kind {
                let t = r.start_us + o.t_off_us;
                if !self.out.contains(path.as_ref())
                    && mtime_at(self.mtimes, path, t)
                        .is_some_and(|m| t.div_euclid(1_000_000) - m < FRESH_S)
                {
                    self.out.insert(path.to_string());
                }
            }
        }
    }

    pub(super) fn finish(self) -> HashSet<String> {
        self.out
    }
}

/// [`Workload::mtime_at`] over the capture's mtimes.
pub(super) fn mtime_at(
    mtimes: &BTreeMap<String, Vec<(i64, i64)>>,
    script: &str,
    t_us: i64,
) -> Option<i64> {
    let obs = mtimes.get(script)?;
    obs.iter()
        .take_while(|(t, _)| *t <= t_us)
        .last()
        .or(obs.first())
        .map(|&(_, m)| m)
}

/// Scripts "validated" in nearly every request while most cached scripts
/// are validated in few (revalidate_freq > 0 windows, R64): stat()ed by
/// the application itself (filemtime of a config file), not by OPcache;
/// folded request by request.
#[derive(Default)]
pub(super) struct AppStatsSeen {
    compiled: HashSet<Name>,
    active: usize,
    reval_reqs: HashMap<Name, usize>,
}

impl AppStatsSeen {
    pub(super) fn see<'a>(&mut self, ops: impl Iterator<Item = &'a PhpOp> + Clone) {
        let mut any = false;
        let mut here: HashSet<&Name> = HashSet::default();
        for o in ops {
            any = true;
            match &o.kind {
                PhpOpKind::Compile { path, .. } => {
                    self.compiled.insert(path.clone());
                }
                PhpOpKind::Revalidate { path, .. } => {
                    here.insert(path);
                }
                _ => {}
            }
        }
        self.active += usize::from(any);
        for p in here {
            match self.reval_reqs.get_mut(p) {
                Some(n) => *n += 1,
                None => {
                    self.reval_reqs.insert(p.clone(), 1);
                }
            }
        }
    }

    pub(super) fn finish(self) -> HashSet<String> {
        let active = self.active;
        // over every cached script, validated or not
        let mut counts: Vec<usize> = self
            .compiled
            .iter()
            .map(|p| self.reval_reqs.get(p).copied().unwrap_or(0))
            .collect();
        counts.sort_unstable();
        let median = counts.get(counts.len() / 2).copied().unwrap_or(0);
        if active >= 4 && median * 2 <= active {
            self.reval_reqs
                .into_iter()
                .filter(|(_, n)| n * 5 >= active * 4)
                .map(|(p, _)| p.to_string())
                .collect()
        } else {
            HashSet::default()
        }
    }
}

/// Which operations of `ops` R64 step 3 drops (measured: fpm-change-rf0):
/// OPcache's validation that finds another mtime is a `stat`, then a
/// second `stat`, then the compile; the two stats belong to the compile
/// (the lower's validation makes them), not to file functions. `changed`:
/// the scripts whose mtime changed during the capture.
fn changed_stats(ops: &[PhpOp], changed: &HashSet<String>) -> Option<Vec<bool>> {
    if changed.is_empty() {
        return None;
    }
    let mut drop = vec![false; ops.len()];
    let mut any = false;
    for i in 2..ops.len() {
        let PhpOpKind::Compile { path, .. } = &ops[i].kind else {
            continue;
        };
        if !changed.contains(path.as_ref()) {
            continue;
        }
        let stat_of = |o: &PhpOp| {
            matches!(&o.kind, PhpOpKind::Stat { path: p, missing: false }
                | PhpOpKind::Revalidate { path: p, .. } if p == path)
        };
        if stat_of(&ops[i - 1]) && stat_of(&ops[i - 2]) {
            drop[i - 1] = true;
            drop[i - 2] = true;
            any = true;
        }
    }
    any.then_some(drop)
}

/// The facts of [`ScriptFacts`], folded request by request.
///
/// Requests go to [`FactsSeen::see`] in start order (start, then index):
/// a worker's validations are read against what the worker resolved in
/// its earlier requests.
pub(super) struct FactsSeen {
    changed: HashSet<String>,
    /// Entry scripts: what php-fpm resolved first (SCRIPT_FILENAME).
    mains: HashSet<Name>,
    /// The name a script is resolved under (`./rel/x.php`), seen on a
    /// realpath cache miss: the last one in index order.
    names: HashMap<Name, (usize, Name)>,
    /// Scripts compiled by `*_once` with no name of their own: with no
    /// name seen for them anywhere, the realpath cache was off.
    once_unnamed: HashSet<Name>,
    /// Scripts included by `*_once` somewhere.
    once: HashSet<Name>,
    /// Validations that resolved (an include's).
    resolving: HashSet<Name>,
    /// Validations with no resolution in a worker that never resolved the
    /// script before.
    unresolved: HashSet<Name>,
    resolved_by_pid: HashMap<u32, HashSet<Name>>,
    fopened: HashSet<Name>,
    app: AppStatsSeen,
    file_stats: HashSet<String>,
}

impl FactsSeen {
    pub(super) fn new(mtimes: &BTreeMap<String, Vec<(i64, i64)>>) -> Self {
        FactsSeen {
            changed: mtimes
                .iter()
                .filter(|(_, obs)| obs.len() > 1)
                .map(|(p, _)| p.clone())
                .collect(),
            mains: HashSet::default(),
            names: HashMap::default(),
            once_unnamed: HashSet::default(),
            once: HashSet::default(),
            resolving: HashSet::default(),
            unresolved: HashSet::default(),
            resolved_by_pid: HashMap::default(),
            fopened: HashSet::default(),
            app: AppStatsSeen::default(),
            file_stats: HashSet::default(),
        }
    }

    /// Folds request `i`, as lifted.
    pub(super) fn see(&mut self, i: usize, r: &WorkRequest) {
        let mut seen = (!r.cli).then(|| self.resolved_by_pid.entry(r.pid).or_default());
        for o in &r.ops {
            match &o.kind {
                PhpOpKind::PrimaryResolve { path } => {
                    self.mains.insert(path.clone());
                }
                PhpOpKind::Compile {
                    path,
                    resolve_as,
                    via,
                    ..
                } => {
                    if let Some(n) = resolve_as {
                        match self.names.get_mut(path) {
                            Some(e) if e.0 > i => {}
                            Some(e) => *e = (i, n.clone()),
                            None => {
                                self.names.insert(path.clone(), (i, n.clone()));
                            }
                        }
                    }
                    if *via == Via::Once {
                        self.once.insert(path.clone());
                        if resolve_as.is_none() {
                            self.once_unnamed.insert(path.clone());
                        }
                    }
                }
                PhpOpKind::OnceRepeat { path, .. } => {
                    self.once.insert(path.clone());
                }
                PhpOpKind::Revalidate { path, resolves } if *resolves > 0 => {
                    self.resolving.insert(path.clone());
                }
                PhpOpKind::Open {
                    path,
                    resolves: 1..,
                    ..
                } => {
                    self.fopened.insert(path.clone());
                }
                _ => {}
            }
            // a validation with no resolution in a worker that never
            // resolved the script (no compile, walk or resolution of it
            // in an earlier request or earlier in this one)
            if let Some(seen) = seen.as_mut() {
                match &o.kind {
                    PhpOpKind::Compile { path, .. }
                    | PhpOpKind::Resolve { path, .. }
                    | PhpOpKind::PrimaryResolve { path }
                    | PhpOpKind::OnceRepeat { path, .. } => {
                        seen.insert(path.clone());
                    }
                    PhpOpKind::Revalidate { path, resolves } if !seen.contains(path) => {
                        if *resolves == 0 {
                            self.unresolved.insert(path.clone());
                        }
                        seen.insert(path.clone());
                    }
                    _ => {}
                }
            }
        }
        // the rest as R64 step 3 leaves the request
        let drop = changed_stats(&r.ops, &self.changed);
        let kept: Vec<&PhpOp> = match &drop {
            None => r.ops.iter().collect(),
            Some(d) => r
                .ops
                .iter()
                .zip(d)
                .filter(|(_, d)| !**d)
                .map(|(o, _)| o)
                .collect(),
        };
        self.app.see(kept.iter().copied());
        for (k, o) in kept.iter().enumerate() {
            match &o.kind {
                PhpOpKind::Stat { path, .. } if is_script(path) => {
                    self.file_stats.insert(path.to_string());
                }
                PhpOpKind::Revalidate { path, .. } => {
                    // a script stat()ed right before an access() of the
                    // same path: file functions (file_exists(), is_file(),
                    // is_readable() in a row), not OPcache validations,
                    // which never call access() (R64/R71; measured:
                    // fpm-override-rf2, each request's three checks of each
                    // included script are access, stat, access). A stat
                    // only after an access is the include's validation after
                    // a file_exists() check (measured: WordPress's
                    // file_exists(ABSPATH . 'wp-config.php') then its
                    // require_once, fpm-wordpress-rf2: the stat comes once
                    // per revalidate_freq window). With
                    // opcache.enable_file_override (R66) the checks of
                    // cached scripts make no access(), and their validation
                    // stats stay validations.
                    let beside_access = matches!(kept.get(k + 1), Some(PhpOp { kind: PhpOpKind::Access { path: a, .. }, .. }) if a == path);
                    if beside_access || normalize(path) != **path {
                        self.file_stats.insert(path.to_string());
                    }
                }
                _ => {}
            }
        }
    }

    /// The facts, once every request is seen; `recompiled`: the
    /// evidence's verdict that scripts were compiled again
    /// ([`Evidence::scripts_recompiled`]: the same requests, folded once).
    pub(super) fn finish(self, recompiled: bool) -> ScriptFacts {
        let names: HashMap<Name, Name> = self.names.into_iter().map(|(p, (_, n))| (p, n)).collect();
        // a canonical name resolved twice: the second walk of the same
        // key shows only without realpath cache (`a//b.php` shows two
        // walks anyway: two keys)
        let cache_off = self.once_unnamed.iter().any(|p| !names.contains_key(p));
        let mut facts: HashMap<Name, Via> = HashMap::default();
        for p in self.resolving {
            facts.insert(p, Via::Include);
        }
        for p in self.once {
            facts.insert(p, Via::Once);
        }
        // a validation with no resolution in a worker that never resolved
        // the script: its realpath cache cannot hold the name, and an
        // include's validation resolves it (ZendAccelerator.c
        // do_validate_timestamps: no opened_path), so it was a *_once
        // whose name OPcache found as a key (persistent_zend_resolve_path;
        // measured: fpm-override-fo, the include_once'd scripts validated
        // by the worker that found them cached)
        for p in self.unresolved {
            if !self.mains.contains(&p) {
                facts.insert(p, Via::Once);
            }
        }
        let mut file_stats = self.file_stats;
        file_stats.extend(self.app.finish());
        ScriptFacts {
            changed: self.changed,
            mains: self.mains,
            names,
            cache_off,
            facts,
            fopened: self.fopened,
            recompiled,
            file_stats,
        }
    }
}

/// What the capture's requests say about its scripts, to apply to each
/// request ([`ScriptFacts::apply`]).
pub(super) struct ScriptFacts {
    changed: HashSet<String>,
    mains: HashSet<Name>,
    names: HashMap<Name, Name>,
    /// No realpath cache: every compile showed its own resolutions.
    cache_off: bool,
    facts: HashMap<Name, Via>,
    fopened: HashSet<Name>,
    /// Scripts compiled again: OPcache off.
    recompiled: bool,
    /// Scripts stat()ed by file functions, not OPcache validations.
    file_stats: HashSet<String>,
}

impl ScriptFacts {
    /// Applies the facts to one request.
    pub(super) fn apply(&self, r: &mut WorkRequest) {
        for o in r.ops.iter_mut() {
            match &mut o.kind {
                PhpOpKind::Compile {
                    path,
                    resolve_as,
                    via,
                    ..
                } => {
                    // the name a script is resolved under, seen on a
                    // realpath cache miss, holds for its hits too
                    if resolve_as.is_none() {
                        *resolve_as = self.names.get(path).cloned();
                    }
                    // a first compile of another script than the entry
                    // scripts is an include whose entry script was an
                    // OPcache hit (no open)
                    if !self.mains.is_empty() && *via == Via::Main && !self.mains.contains(path) {
                        *via = Via::Include;
                    }
                }
                // an open whose path was never seen resolved in any
                // request is not a plain-wrapper fopen (glibc locale
                // files, /dev/urandom, ...): no resolution; one seen
                // resolved somewhere resolves every time (R74)
                PhpOpKind::Open {
                    path,
                    resolves,
                    flags,
                    ..
                } => {
                    *resolves =
                        (self.fopened.contains(path) && *flags & Flags::O_DIRECTORY == 0) as u32;
                }
                _ => {}
            }
        }
        if let Some(drop) = changed_stats(&r.ops, &self.changed) {
            let mut k = 0;
            r.ops.retain(|_| {
                k += 1;
                !drop[k - 1]
            });
        }
        // a script some request stat()ed as a file function (before its
        // compile, or under a name that is not canonical) is stat()ed the
        // same way in the others: not an OPcache validation; with OPcache
        // off (scripts compiled again) nothing validates timestamps
        for o in r.ops.iter_mut() {
            if let PhpOpKind::Revalidate { path, .. } = &o.kind {
                if self.recompiled || self.file_stats.contains(path.as_ref()) {
                    o.kind = PhpOpKind::Stat {
                        path: path.clone(),
                        missing: false,
                    };
                }
            }
        }
        if self.cache_off {
            // without realpath cache every resolution walks up to the
            // root: a lone lstat is PHP's lstat() (R72), not a resolution
            for o in r.ops.iter_mut() {
                if let PhpOpKind::Resolve { path, lone: true } = &o.kind {
                    if parent(path).is_some() {
                        o.kind = PhpOpKind::Lstat { path: path.clone() };
                    }
                }
            }
            // every compile showed its own resolutions: nothing to guess
            return;
        }
        for o in r.ops.iter_mut() {
            if let PhpOpKind::Compile { path, via, .. } = &mut o.kind {
                if *via != Via::Main {
                    if let Some(f) = self.facts.get(path) {
                        *via = *f;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(path: &str, resolve_as: Option<&str>) -> PhpOp {
        PhpOp {
            t_off_us: 0,
            stat_us: None,
            kind: PhpOpKind::Compile {
                path: path.into(),
                resolve_as: resolve_as.map(Into::into),
                probes: Box::new([]),
                via: Via::Include,
                resolves: 1,
                fstats: 1,
                reads: 1,
                keep_open: false,
            },
        }
    }

    fn request(pid: u32, start_us: i64, ops: Vec<PhpOp>) -> WorkRequest {
        WorkRequest {
            pid,
            start_us,
            end_us: start_us,
            request_time_us: start_us,
            cli: false,
            script: None,
            from_template: false,
            settings: None,
            ops,
        }
    }

    fn name_given(r: &WorkRequest) -> Option<String> {
        r.ops.iter().find_map(|o| match &o.kind {
            PhpOpKind::Compile { resolve_as, .. } => resolve_as.as_deref().map(str::to_string),
            _ => None,
        })
    }

    #[test]
    fn the_name_of_the_last_request_by_index_holds_whatever_the_order_seen() {
        // request 1 started first (seen first), request 0 later: the name
        // of request 1, the later one by index, is the one kept
        let reqs = [
            request(7, 200, vec![compile("/w/a.php", Some("/w/./a.php"))]),
            request(8, 100, vec![compile("/w/a.php", Some("/w/x/../a.php"))]),
            request(9, 300, vec![compile("/w/a.php", None)]),
        ];
        let mtimes = BTreeMap::new();
        for order in [[1, 0, 2], [0, 1, 2], [2, 1, 0]] {
            let mut seen = FactsSeen::new(&mtimes);
            for i in order {
                seen.see(i, &reqs[i]);
            }
            let f = seen.finish(false);
            let mut r = reqs[2].clone();
            f.apply(&mut r);
            assert_eq!(
                name_given(&r).as_deref(),
                Some("/w/x/../a.php"),
                "{order:?}"
            );
        }
    }

    #[test]
    fn a_script_used_by_two_requests_and_compiled_once_counts_once() {
        let mut stat = compile("/w/b.php", None);
        stat.kind = PhpOpKind::Stat {
            path: "/w/b.php".into(),
            missing: false,
        };
        let reqs = [
            request(
                1,
                0,
                vec![compile("/w/b.php", None), compile("/w/c.php", None)],
            ),
            request(1, 10, vec![stat.clone()]),
            request(2, 20, vec![compile("/w/c.php", None)]),
        ];
        let mut seen = RecompilesSeen::default();
        for (i, r) in reqs.iter().enumerate() {
            seen.see(i, r);
        }
        let rc = seen.finish(&HashSet::default());
        assert_eq!((rc.again, rc.once), (1, 1));
        // c.php's recompile explained by a change: left out
        let rc = seen.finish(&["/w/c.php".to_string()].into_iter().collect());
        assert_eq!((rc.again, rc.once), (0, 1));
    }
}
