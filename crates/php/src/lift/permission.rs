//! OPcache's permission check (`opcache.validate_permission`, R68): with
//! the setting on, every use of a script OPcache already holds starts with
//! an `access(path, R_OK)` (ZendAccelerator.c persistent_compile_file,
//! `check_persistent_script_access`), before the validation `stat` when
//! one is due. Measured in php-fpm (fpm-tree-vp, fpm-filecheck-vp): the
//! entry script and every include, require, repeated plain include and
//! first *_once of a cached script is checked; a compile is not.
//!
//! Those checks make visible the uses of cached scripts that show no call
//! without the setting: each becomes a [`PhpOpKind::CachedUse`], lowered
//! under any settings like a validation that was not due.

use super::*;

/// Turns the permission checks of `reqs` into the script uses they show,
/// when the capture shows the setting on; returns how many checks there
/// were (0: the setting is off, or nothing was cached).
///
/// The setting shows when a request's first operation on a script is an
/// `access(R_OK)` of a script some request compiled as its entry script
/// (php-fpm): an application does not test whether its running entry
/// script is readable, while with the setting on every request that finds
/// the entry script cached starts with that check; or (php-cli, whose
/// entry script is not checked) when two checks of a script the request
/// compiled earlier come back to back, as a plain include in a loop makes
/// them. Then every successful
/// `access(R_OK)` of a script compiled in the capture is the check: right
/// before the script's validation (or its compile again, R64 step 3) the
/// check is dropped, the validation standing for the use; otherwise it
/// becomes a [`PhpOpKind::CachedUse`]. An application's own
/// `is_readable()` of a cached script looks the same and is read as a use
/// too (no capture has both).
pub(super) fn permission_checks(reqs: &mut [WorkRequest]) -> usize {
    let mut compiled: HashSet<String> = HashSet::new();
    let mut mains: HashSet<String> = HashSet::new();
    for o in reqs.iter().flat_map(|r| &r.ops) {
        if let PhpOpKind::Compile { path, via, .. } = &o.kind {
            compiled.insert(path.to_string());
            if *via == Via::Main {
                mains.insert(path.to_string());
            }
        }
    }
    let is_check = |o: &PhpOp| -> Option<String> {
        match &o.kind {
            PhpOpKind::Access {
                path,
                mode,
                missing: false,
            } if *mode & Flags::R_OK != 0 && compiled.contains(path.as_ref()) => {
                Some(path.to_string())
            }
            _ => None,
        }
    };
    // php-fpm: a request that starts with the check of an entry script
    let entry_checked = reqs.iter().any(|r| {
        let first = r.ops.iter().find(|o| match &o.kind {
            PhpOpKind::Compile { path, .. } | PhpOpKind::Revalidate { path, .. } => is_script(path),
            PhpOpKind::Access { path, .. } => is_script(path),
            _ => false,
        });
        first
            .and_then(&is_check)
            .is_some_and(|p| mains.contains(&p))
    });
    // php-cli opens its entry script itself (no check): there the setting
    // shows as a plain include repeated in a loop, checks of one script
    // the request compiled before, back to back (cli-tree-ocvp)
    let repeats_checked = reqs.iter().any(|r| {
        let mut done: HashSet<&str> = HashSet::new();
        r.ops.iter().enumerate().any(|(i, o)| {
            if let PhpOpKind::Compile { path, .. } = &o.kind {
                done.insert(path);
            }
            let next = r.ops.get(i + 1);
            match (is_check(o), next.and_then(is_check)) {
                (Some(a), Some(b)) => a == b && done.contains(a.as_str()),
                _ => false,
            }
        })
    });
    let shows = entry_checked || repeats_checked;
    if !shows {
        return 0;
    }
    let mut checks = 0;
    for r in reqs.iter_mut() {
        let mut out: Vec<PhpOp> = Vec::with_capacity(r.ops.len());
        for i in 0..r.ops.len() {
            let o = &r.ops[i];
            let Some(path) = is_check(o) else {
                out.push(o.clone());
                continue;
            };
            checks += 1;
            // the validation may come after the resolution of the name
            // (include_path candidates, a walk: R64 resolves a plain
            // include's name first) and unmodelled calls (getcwd)
            let next = r.ops[i + 1..].iter().find(|n| {
                !matches!(
                    n.kind,
                    PhpOpKind::Probe { .. } | PhpOpKind::Resolve { .. } | PhpOpKind::Raw { .. }
                )
            });
            let validated = matches!(
                next.map(|n| &n.kind),
                Some(PhpOpKind::Revalidate { path: q, .. } | PhpOpKind::Compile { path: q, .. }) if **q == *path
            );
            if !validated {
                out.push(PhpOp {
                    t_off_us: o.t_off_us,
                    stat_us: None,
                    kind: PhpOpKind::CachedUse {
                        path: path.as_str().into(),
                    },
                });
            }
        }
        r.ops = out;
        if r.script.is_none() {
            r.script = script_of(&r.ops);
        }
    }
    checks
}
