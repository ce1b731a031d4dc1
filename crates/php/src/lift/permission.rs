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
use statstorm_trace::op::Name;

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
    let mut seen = ChecksSeen::default();
    for r in reqs.iter() {
        seen.see(r);
    }
    let Some(f) = seen.finish() else {
        return 0;
    };
    reqs.iter_mut().map(|r| f.apply(r)).sum()
}

/// Whether the capture shows the setting on ([`permission_checks`]),
/// folded request by request (any order): the scripts compiled, the entry
/// scripts, and the checks that would show it once those are known.
#[derive(Default)]
pub(super) struct ChecksSeen {
    compiled: HashSet<Name>,
    mains: HashSet<Name>,
    /// Scripts checked by a request's first operation on a script.
    first_checked: HashSet<Name>,
    /// Scripts checked twice back to back after the request compiled them.
    repeat_checked: HashSet<Name>,
}

/// A successful `access(R_OK)` of `path` (a check if `path` is compiled
/// somewhere).
fn access_r_ok(o: &PhpOp) -> Option<&Name> {
    match &o.kind {
        PhpOpKind::Access {
            path,
            mode,
            missing: false,
        } if *mode & Flags::R_OK != 0 => Some(path),
        _ => None,
    }
}

impl ChecksSeen {
    pub(super) fn see(&mut self, r: &WorkRequest) {
        for o in &r.ops {
            if let PhpOpKind::Compile { path, via, .. } = &o.kind {
                self.compiled.insert(path.clone());
                if *via == Via::Main {
                    self.mains.insert(path.clone());
                }
            }
        }
        // php-fpm: a request that starts with the check of an entry script
        let first = r.ops.iter().find(|o| match &o.kind {
            PhpOpKind::Compile { path, .. } | PhpOpKind::Revalidate { path, .. } => is_script(path),
            PhpOpKind::Access { path, .. } => is_script(path),
            _ => false,
        });
        if let Some(p) = first.and_then(access_r_ok) {
            self.first_checked.insert(p.clone());
        }
        // php-cli opens its entry script itself (no check): there the
        // setting shows as a plain include repeated in a loop, checks of
        // one script the request compiled before, back to back
        // (cli-tree-ocvp)
        let mut done: HashSet<&str> = HashSet::default();
        for (i, o) in r.ops.iter().enumerate() {
            if let PhpOpKind::Compile { path, .. } = &o.kind {
                done.insert(path);
            }
            if let (Some(a), Some(b)) = (access_r_ok(o), r.ops.get(i + 1).and_then(access_r_ok)) {
                if a == b && done.contains(a.as_ref()) {
                    self.repeat_checked.insert(a.clone());
                }
            }
        }
    }

    /// The checks to apply, or `None` when the capture does not show the
    /// setting.
    pub(super) fn finish(self) -> Option<Checks> {
        let entry_checked = self
            .first_checked
            .iter()
            .any(|p| self.compiled.contains(p) && self.mains.contains(p));
        let repeats_checked = self
            .repeat_checked
            .iter()
            .any(|p| self.compiled.contains(p));
        (entry_checked || repeats_checked).then_some(Checks {
            compiled: self.compiled,
        })
    }
}

/// The permission checks of a capture that shows the setting on.
pub(super) struct Checks {
    compiled: HashSet<Name>,
}

impl Checks {
    /// Turns the checks of `r` into the uses they show; returns how many
    /// checks there were.
    pub(super) fn apply(&self, r: &mut WorkRequest) -> usize {
        let is_check = |o: &PhpOp| {
            access_r_ok(o)
                .filter(|p| self.compiled.contains(*p))
                .cloned()
        };
        let mut checks = 0;
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
                Some(PhpOpKind::Revalidate { path: q, .. } | PhpOpKind::Compile { path: q, .. }) if *q == path
            );
            if !validated {
                out.push(PhpOp {
                    t_off_us: o.t_off_us,
                    stat_us: None,
                    kind: PhpOpKind::CachedUse { path },
                });
            }
        }
        r.ops = out;
        if r.script.is_none() {
            r.script = script_of(&r.ops);
        }
        checks
    }
}
