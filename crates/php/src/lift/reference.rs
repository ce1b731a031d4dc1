//! Completing a capture made with caches on from a complete reference
//! capture of the same application (`statstorm predict --reference`).

use super::*;
use crate::request::RequestMode;
use std::borrow::Cow;

/// Why a reference capture cannot complete a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferenceError {
    /// Caches hid part of the reference's own includes.
    Incomplete,
    /// The reference has no request that ran PHP.
    Empty,
    /// One capture is php-cli, the other php-fpm.
    Sapi { capture_cli: bool },
}

impl std::fmt::Display for ReferenceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReferenceError::Incomplete => write!(
                f,
                "the reference capture is not complete: caches hid part of its includes (it must be recorded with opcache.enable=0 and realpath_cache_size=0, or open_basedir set; if it was, state its settings)"
            ),
            ReferenceError::Empty => write!(f, "the reference capture has no request that ran PHP"),
            ReferenceError::Sapi { capture_cli } => {
                let (a, b) = if *capture_cli {
                    ("php-cli", "php-fpm")
                } else {
                    ("php-fpm", "php-cli")
                };
                write!(
                    f,
                    "the capture is {a} but the reference capture is {b}: record the reference with the same SAPI"
                )
            }
        }
    }
}

impl std::error::Error for ReferenceError {}

/// Lifts a capture made with caches on (production: real traffic, timing,
/// workers) and completes it from `reference`, a short complete capture of
/// the same application (OPcache and the realpath cache off, or
/// open_basedir on: every include, its kind and every `*_once` repeat shows,
/// R52-R54, R62-R63).
///
/// - A request of the capture whose modelled operations are a subsequence
///   of those of a reference request of the same entry script is taken to
///   have run that request's PHP operations (the fullest reference request
///   first, then the others by size); it keeps its own time, worker,
///   unmodelled calls and writes, as with the capture's own templates.
/// - The script facts of the reference (include vs include_once, the names
///   scripts are resolved under: R52/R54) hold for the other requests too;
///   those are then templated among themselves as [`lift`] does.
/// - Reference requests themselves are not part of the result.
///
/// The evidence about the recorded settings is the capture's own; it is
/// marked complete when every request that ran PHP was completed. A capture
/// complete by itself is lifted as [`lift`] does and the reference is not
/// used (`capture_complete`).
/// Each request's recorded calls, in the order of the split.
pub type RecordedCalls = Vec<Vec<Op>>;

/// Returns the workload, how the reference was used, and the requests'
/// recorded calls for the settings inference of [`crate::infer`] (`None`
/// for a capture complete by itself, which it does not need);
/// [`crate::lift_with_reference`] runs both.
pub fn lift_with_reference_parts(
    trace: &Trace,
    requests: &Requests,
    reference: &Workload,
) -> Result<(Workload, ReferenceUse, Option<RecordedCalls>), ReferenceError> {
    let real = request_ops(trace, requests);
    let (w, used, _) =
        lift_with_reference_from(&TraceFacts::of(trace, requests), requests, reference, &real)?;
    let real = (!used.capture_complete).then_some(real);
    Ok((w, used, real))
}

/// [`lift_with_reference_parts`] of the requests' calls `real` as
/// [`request_ops`] gives them (held wherever the caller keeps them); with
/// the first `infer::SEARCH_REQUESTS` (16) requests' calls.
pub fn lift_with_reference_from(
    facts: &TraceFacts,
    requests: &Requests,
    reference: &Workload,
    real: &dyn CallSource,
) -> Result<(Workload, ReferenceUse, RecordedCalls), ReferenceError> {
    if !reference.evidence.complete {
        return Err(ReferenceError::Incomplete);
    }
    let refs: Vec<&WorkRequest> = reference
        .requests
        .iter()
        .filter(|r| r.ops.iter().any(|o| !own_op(o)))
        .collect();
    if refs.is_empty() {
        return Err(ReferenceError::Empty);
    }
    let capture_cli = requests.mode == RequestMode::Cli;
    if refs.iter().any(|r| r.cli != capture_cli) {
        return Err(ReferenceError::Sapi { capture_cli });
    }
    let Lifted {
        mut reqs,
        mut evidence,
        mut links,
        file_cache,
        real,
        latency_us,
    } = lift_requests(requests, real, &facts.mtimes);
    if evidence.complete {
        // the capture showed everything itself: the reference has nothing
        // to add, and its requests must not stand in for the capture's
        script_facts(&mut reqs, &facts.mtimes, evidence.scripts_recompiled);
        apply_templates(&mut reqs);
        return Ok((
            Workload {
                schema: WORKLOAD_SCHEMA.to_string(),
                requests: reqs,
                evidence,
                links,
                mtimes: facts.mtimes.clone(),
                file_cache: file_cache.clone(),
                latency_us: latency_us.clone(),
                lock_us: facts.lock_us,
                stored: Default::default(),
            },
            ReferenceUse {
                requests: reference.requests.len(),
                complete: true,
                capture_complete: true,
                ..Default::default()
            },
            real,
        ));
    }
    script_facts(&mut reqs, &facts.mtimes, evidence.scripts_recompiled);
    reference_facts(&mut reqs, reference);
    // opens the reference never resolved: not plain-wrapper fopens
    let resolved: HashSet<&str> = resolved_opens(&reference.requests);
    let own = |o: &PhpOp| reference_own_op(o, &resolved);
    let modelled = |r: &WorkRequest| r.ops.iter().filter(|o| !own(o)).count();
    // reference requests by entry script, fullest first (equal sizes in
    // capture order: stable sort)
    let mut all: Vec<&WorkRequest> = refs
        .iter()
        .copied()
        .filter(|r| r.script.is_some())
        .collect();
    all.sort_by_key(|r| std::cmp::Reverse(modelled(r)));
    let mut used = ReferenceUse {
        requests: reference.requests.len(),
        complete: true,
        ..Default::default()
    };
    let mut rest: Vec<usize> = Vec::new();
    // symlinks seen in either capture: a script's name through one keys
    // as its real path
    let mut all_links = reference.links.clone();
    all_links.extend(links.iter().map(|(a, b)| (a.clone(), b.clone())));
    for (i, r) in reqs.iter_mut().enumerate() {
        // a connection that ran no PHP at all is not a request of a script
        if r.ops.is_empty() {
            continue;
        }
        // the entry script when the request shows it (php-fpm's resolution
        // of SCRIPT_FILENAME on a realpath cache miss, or its compile on an
        // OPcache miss); when caches hid it, every reference request is a
        // candidate (the operations must still match)
        let first = r.ops.iter().find(|o| !own_op(o)).map(|o| &o.kind);
        let entry = r.ops.iter().find_map(|o| match &o.kind {
            PhpOpKind::Compile {
                path,
                via: Via::Main,
                ..
            } => Some(path.clone()),
            _ => None,
        });
        // php-fpm resolves SCRIPT_FILENAME before anything else (cgi_main);
        // later resolutions of scripts before any compile are not it
        let entry = entry.or_else(|| match first {
            Some(PhpOpKind::PrimaryResolve { path }) => Some(path.clone()),
            _ => None,
        });
        let cands: Vec<&WorkRequest> = all
            .iter()
            .copied()
            .filter(|t| entry.is_none() || t.script.as_deref() == entry.as_deref())
            .collect();
        if cands.is_empty() {
            used.no_reference.push(i);
            rest.push(i);
            continue;
        }
        let done = cands.iter().any(|t| {
            let s = t.script.clone().unwrap_or_default();
            take_template_by(
                r,
                &t.ops,
                s,
                Fit::Exact,
                |o| reference_keys(o, &all_links),
                &own,
            )
        });
        if done {
            used.completed.push(i);
        } else {
            used.unmatched.push(i);
            rest.push(i);
        }
    }
    // the others: templated among themselves, as without a reference
    let mut others: Vec<WorkRequest> = rest.iter().map(|&i| reqs[i].clone()).collect();
    apply_templates(&mut others);
    for (&i, r) in rest.iter().zip(others) {
        reqs[i] = r;
    }
    for (k, v) in &reference.links {
        links.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let active = reqs.iter().filter(|r| !r.ops.is_empty()).count();
    evidence.notes.push(format!(
        "{} of {active} requests took their PHP operations from the reference capture ({} reference requests); {} ran a script the reference did not, {} made operations no reference request of their script showed",
        used.completed.len(),
        used.requests,
        used.no_reference.len(),
        used.unmatched.len()
    ));
    if used.completed.len() == active && !evidence.complete {
        // what caches hid in the capture, the reference showed
        evidence.notes.retain(|n| !n.starts_with(HIDDEN_NOTE));
        evidence.complete = true;
    }
    let w = Workload {
        schema: WORKLOAD_SCHEMA.to_string(),
        requests: reqs,
        evidence,
        links,
        mtimes: facts.mtimes.clone(),
        file_cache,
        latency_us,
        lock_us: facts.lock_us,
        stored: Default::default(),
    };
    Ok((w, used, real))
}

/// What a complete reference says about each script (R52: include_once
/// resolves twice and repeats, include once; R54: the name resolved),
/// applied to the compiles of `reqs` (entry scripts excepted).
fn reference_facts(reqs: &mut [WorkRequest], reference: &Workload) {
    let mut via: HashMap<&str, Via> = HashMap::default();
    let mut names: HashMap<&str, &str> = HashMap::default();
    for o in reference.requests.iter().flat_map(|r| &r.ops) {
        match &o.kind {
            PhpOpKind::Compile {
                path,
                via: v,
                resolve_as,
                ..
            } => {
                if let Some(n) = resolve_as {
                    names.insert(path, n);
                }
                match v {
                    Via::Once => {
                        via.insert(path, Via::Once);
                    }
                    Via::Include => {
                        via.entry(path).or_insert(Via::Include);
                    }
                    Via::Main => {}
                }
            }
            PhpOpKind::OnceRepeat { path, .. } => {
                via.insert(path, Via::Once);
            }
            _ => {}
        }
    }
    for o in reqs.iter_mut().flat_map(|r| r.ops.iter_mut()) {
        if let PhpOpKind::Compile {
            path,
            via: v,
            resolve_as,
            ..
        } = &mut o.kind
        {
            if *v != Via::Main {
                if let Some(f) = via.get(path.as_ref()) {
                    *v = *f;
                }
            }
            if resolve_as.is_none() {
                *resolve_as = (names.get(path.as_ref()).map(|n| n.to_string())).map(Into::into);
            }
        }
    }
}

/// The keys of an operation when a request made with caches on is matched
/// against a request of a complete capture.
///
/// - A compile's or an `*_once` repeat's failed include_path candidates
///   show on their own when OPcache serves the script (its validation
///   `stat` comes after them, R64) or the realpath cache serves the
///   resolution: failures are never cached (R50, R54).
/// - A script's include, `*_once` repeat, validation and `stat` are one
///   key: which of them shows depends on OPcache (R62-R64). The lift can
///   take a validation for a file function's `stat` (validations in
///   nearly every request: request times straddling revalidate_freq
///   windows); a file function's `stat` of a script shows in the reference
///   as well (PHP's stat cache lives for one request whatever the
///   settings, R72).
/// - Resolutions have no key: which of them show, under which name (a
///   symlinked directory is walked under the name the cache missed), and
///   whether a lone `lstat` is a resolution or PHP's `lstat()`, depends on
///   the realpath cache (R53-R56); the reference shows them all.
fn reference_keys<'a>(
    o: &'a PhpOp,
    links: &BTreeMap<String, String>,
) -> Vec<(&'static str, Cow<'a, str>)> {
    fn b(p: &str) -> Cow<'_, str> {
        Cow::Borrowed(p)
    }
    match &o.kind {
        PhpOpKind::Compile { path, probes, .. } | PhpOpKind::OnceRepeat { path, probes, .. } => {
            probes
                .iter()
                .map(|p| ("probe", b(p)))
                .chain(std::iter::once(("script", b(path))))
                .collect()
        }
        PhpOpKind::Stat {
            path,
            missing: false,
        } if is_script(path) => vec![("script", b(path))],
        // file_exists()/is_readable() of a script: with
        // opcache.enable_file_override OPcache answers them for a cached
        // script with its validation instead (R66: accel_file_exists,
        // accel_is_readable; measured: fpm-override-fo-rf0), a `stat` of
        // the script's real path when the name is not it (MediaWiki's
        // `includes/../vendor/autoload.php` and its `LocalSettings.php`
        // symlink: fpm-mediawiki-fo)
        PhpOpKind::Access {
            path,
            mode,
            missing: false,
        } if is_script(path) && (*mode == 0 || *mode == Flags::R_OK) => {
            let real = crate::realpath::resolved(links, path);
            vec![(
                "script",
                if *real == **path {
                    b(path)
                } else {
                    Cow::Owned(real)
                },
            )]
        }
        PhpOpKind::Resolve { .. }
        | PhpOpKind::Lstat { .. }
        | PhpOpKind::PrimaryResolve { .. }
        | PhpOpKind::BasedirCheck { .. } => Vec::new(),
        k => {
            let (k, v) = k.key();
            vec![(k, b(v))]
        }
    }
}

/// Operations a request keeps as its own when it takes a reference
/// request's operations: those of [`own_op`], and opens of paths the
/// complete reference never resolved (`resolved`), which PHP does not
/// resolve (glibc's locale files, `/dev/urandom`, opendir: R74).
/// No PHP cache hides them, so the request shows exactly the ones it made,
/// and some are made once per process (glibc loads a locale on a process's
/// first `setlocale`, measured on MediaWiki: 13 opens of
/// `/usr/lib/locale/C.utf8/*` in a worker's first request only), which a
/// reference request run as some worker's first would carry into every
/// request.
fn reference_own_op(o: &PhpOp, resolved: &HashSet<&str>) -> bool {
    own_op(o)
        || matches!(&o.kind, PhpOpKind::Open { path, .. } if !resolved.contains(path.as_ref()))
}
