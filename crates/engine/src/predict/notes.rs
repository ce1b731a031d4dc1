//! The notes of a prediction about what the capture cannot show and what a
//! change means for it (hidden includes and walks, OPcache's file cache,
//! OPcache turned off, the reference capture's use).

use statstorm_php::{PhpConfig, ReferenceUse, Workload};

/// What a capture made with caches on cannot show, and what that means for
/// the prediction: one sentence per point, for the report's notes. Empty
/// when the lift saw every include and resolution
/// (`evidence.complete`).
///
/// A cached include (OPcache, R61-R63) and a resolution from a warm
/// realpath cache (R53-R54) make no syscall, so the trace shows neither
/// whether such an include was `include` or `include_once`, nor how many
/// `*_once` repeats there were, nor the walks and include_path candidates
/// a cold cache would make. The model replays what it saw (and, through
/// templates, what other requests showed): work no request showed is
/// missing from both columns, and a proposed setting that turns a cache
/// off would make it visible. Measured (docs/php-model.md): from the tree
/// capture with OPcache off, realpath_cache_size=0 is predicted at 1594
/// checked calls against 3370 real.
pub fn hidden_work_notes(w: &Workload, recorded: &PhpConfig, proposed: &PhpConfig) -> Vec<String> {
    if w.evidence.complete {
        return Vec::new();
    }
    let cli = w.has_cli();
    let realpath_on = |c: &PhpConfig| c.realpath_cache_size > 0 && c.open_basedir.is_empty();
    let mut hiding = Vec::new();
    if recorded.opcache_on(cli) {
        hiding.push("OPcache on (a cached script's include makes no syscall)");
    }
    if realpath_on(recorded) {
        hiding.push("the realpath cache on (a warm resolution makes no lstat)");
    }
    let why = if hiding.is_empty() {
        "the trace shows fewer includes and resolutions than the requests made".to_string()
    } else {
        format!("it was made with {}", hiding.join(" and "))
    };
    let mut notes = vec![format!(
        "the capture hides operations: {why}, so it cannot show whether a cached include was include or include_once, how many include_once/require_once repeats there were, nor the lstat walks and include_path candidates of resolutions served from the cache; the predicted counts are a lower bound (record with opcache.enable=0 realpath_cache_size=0 for full information)"
    )];
    let mut turned_off = Vec::new();
    if recorded.opcache_on(cli) && !proposed.opcache_on(cli) {
        turned_off.push("OPcache off");
    }
    if realpath_on(recorded) && !realpath_on(proposed) {
        turned_off.push(if proposed.open_basedir.is_empty() {
            "the realpath cache off (realpath_cache_size=0)"
        } else {
            "the realpath cache off (open_basedir)"
        });
    }
    if !turned_off.is_empty() {
        notes.push(format!(
            "the proposed settings turn {}: the hidden work becomes syscalls the capture never showed, so the \"after\" counts are a lower bound and may be far below the real ones",
            turned_off.join(" and ")
        ));
    }
    notes
}

/// What a prediction assumes of OPcache's file cache (R67) when the
/// proposed settings use it and the capture did not show it: every
/// script's `.bin` already there (filled long before, so a php-fpm pool
/// validates each loaded script at its next use), as in a steady state;
/// right after a deploy or a cache wipe each script is read and stored
/// instead (measured: cli-tree-fco-cold, fpm-tree-fc-cold). Both SAPIs,
/// with the cache alone or beside shared memory, are modelled.
pub fn file_cache_note(w: &Workload, proposed: &PhpConfig) -> Option<String> {
    let cli = w.has_cli();
    if proposed.file_cache.is_empty() || !proposed.opcache_on(cli) {
        return None;
    }
    if w.file_cache.is_some() {
        return None;
    }
    Some(format!(
        "the capture did not use OPcache's file cache: the prediction takes it as filled long before (every script's .bin in {}, with an old revalidation stamp); right after a deploy or a wipe of the cache each script is read and stored instead",
        proposed.file_cache
    ))
}

/// A note when the proposed settings change OPcache settings while OPcache
/// stays off for the trace's SAPI: php-cli needs both `opcache.enable` and
/// `opcache.enable_cli` (ZendAccelerator.c `accel_startup`), php-fpm
/// `opcache.enable`; without them the other opcache.* settings change
/// nothing, which a user proposing one of them should hear. A proposal
/// that turns a recorded OPcache off gets no note: it does not stay off.
pub fn opcache_off_note(
    w: &Workload,
    recorded: &PhpConfig,
    proposed: &PhpConfig,
) -> Option<String> {
    let cli = w.has_cli();
    if proposed.opcache_on(cli) || recorded.opcache_on(cli) {
        return None;
    }
    let changed: Vec<String> = recorded
        .diff(proposed)
        .into_iter()
        .map(|(k, _, _)| k)
        .filter(|k| k.starts_with("opcache."))
        .collect();
    if changed.is_empty() {
        return None;
    }
    let need = if cli {
        "opcache.enable=1 and opcache.enable_cli=1"
    } else {
        "opcache.enable=1"
    };
    Some(format!(
        "OPcache stays off for {} under the proposed settings (opcache.enable={}, opcache.enable_cli={}): {} {} nothing; it needs {need}",
        if cli { "php-cli" } else { "php-fpm" },
        u8::from(proposed.opcache_enable),
        u8::from(proposed.opcache_enable_cli),
        changed.join(", "),
        if changed.len() == 1 { "changes" } else { "change" }
    ))
}

/// The note for a prediction completed from a reference capture
/// ([`statstorm_php::lift_with_reference`]): which requests took their PHP
/// operations from it and which were left as lifted (those still undercount
/// what caches hid). Request numbers are those of the report (requests in
/// time order).
pub fn reference_note(w: &Workload, reference: &Workload, used: &ReferenceUse) -> String {
    if used.capture_complete {
        return format!(
            "the capture shows every include and resolution itself (no cache hid any): the reference capture ({} requests) was not needed and not used",
            reference.requests.len()
        );
    }
    let mut order: Vec<usize> = (0..w.requests.len()).collect();
    order.sort_by_key(|&i| (w.requests[i].start_us, i));
    let mut rank = vec![0usize; order.len()];
    for (n, &i) in order.iter().enumerate() {
        rank[i] = n;
    }
    let list = |v: &[usize]| -> String {
        let mut r: Vec<usize> = v.iter().map(|&i| rank[i]).collect();
        r.sort_unstable();
        r.iter()
            .map(|n| format!("#{n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let active = w.requests.iter().filter(|r| !r.ops.is_empty()).count();
    let head = format!(
        "{} of {active} requests completed from the reference capture ({} requests recorded with both caches off, not predicted themselves): their includes, include vs include_once and *_once repeats come from it; their times, workers and writes are the capture's own",
        used.completed.len(),
        reference.requests.len()
    );
    if used.completed.len() == active {
        return format!("{head}; the counts are not a lower bound");
    }
    let mut rest = Vec::new();
    if !used.unmatched.is_empty() {
        rest.push(format!(
            "{} made operations no reference request of their script showed ({})",
            used.unmatched.len(),
            list(&used.unmatched)
        ));
    }
    if !used.no_reference.is_empty() {
        rest.push(format!(
            "{} ran a script the reference did not ({})",
            used.no_reference.len(),
            list(&used.no_reference)
        ));
    }
    format!(
        "{head} ({}); left as lifted, with their counts a lower bound: {}",
        list(&used.completed),
        rest.join("; ")
    )
}
