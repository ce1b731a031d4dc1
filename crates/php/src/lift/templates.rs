//! Templates: requests of one script whose work caches hid run the
//! operations of a fuller request of the same script.

use super::*;
use std::borrow::Cow;

/// How closely a request's visible operations must follow its template.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Fit {
    /// Every visible operation, in order (a subsequence of the template).
    Exact,
    /// At least [`MIN_SHARE`] of them in order (the longest common
    /// subsequence); the others stay the request's own operations.
    Tolerant,
}

/// The least share of a warm request's visible operations found in order
/// in its template for [`Fit::Tolerant`]. Measured on WordPress under
/// OPcache (fpm-wordpress-rf2): the warm requests follow the compiling one
/// for 491 of their 504 visible operations (97.4%); the rest are calls the
/// compiling request did not make (a theme part's lstat once its realpath
/// cache entry expired), which the strict subsequence rejected, so those
/// requests were predicted with none of their hidden includes.
const MIN_SHARE: f64 = 0.9;

/// The most cells (visible keys x template keys) an alignment may cost;
/// a larger pair falls back to [`Fit::Exact`].
const MAX_CELLS: usize = 64 << 20;

/// For each element of `small`, the index of the element of `big` it is
/// matched to (in order), or `None`: the greedy subsequence when every
/// element matches (as [`Fit::Exact`] requires), else, for
/// [`Fit::Tolerant`], a longest common subsequence when it covers at least
/// [`MIN_SHARE`] of `small`. `None` when no alignment fits.
fn align<T: PartialEq>(small: &[T], big: &[T], fit: Fit) -> Option<Vec<Option<usize>>> {
    let mut pos = Vec::with_capacity(small.len());
    let mut j = 0;
    for s in small {
        while j < big.len() && big[j] != *s {
            j += 1;
        }
        if j == big.len() {
            break;
        }
        pos.push(Some(j));
        j += 1;
    }
    if pos.len() == small.len() {
        return Some(pos);
    }
    let (n, m) = (small.len(), big.len());
    if fit == Fit::Exact || n.saturating_mul(m) > MAX_CELLS || m >= u16::MAX as usize {
        return None;
    }
    // lengths of the longest common subsequences of the suffixes:
    // l[i][j] = LCS(small[i..], big[j..]), row-major with m + 1 columns
    let w = m + 1;
    let mut l = vec![0u16; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            l[i * w + j] = if small[i] == big[j] {
                l[(i + 1) * w + j + 1] + 1
            } else {
                l[(i + 1) * w + j].max(l[i * w + j + 1])
            };
        }
    }
    if (l[0] as f64) < MIN_SHARE * n as f64 {
        return None;
    }
    let (mut i, mut j) = (0, 0);
    let mut pos = vec![None; n];
    while i < n && j < m {
        if small[i] == big[j] && l[i * w + j] == l[(i + 1) * w + j + 1] + 1 {
            pos[i] = Some(j);
            i += 1;
            j += 1;
        } else if l[(i + 1) * w + j] >= l[i * w + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    Some(pos)
}

/// Caches hide work: an OPcache hit or a warm realpath cache shows no
/// syscall. For requests of the same entry script, the request with the
/// most PHP operations is the template; a request whose visible
/// operations are a subsequence of the template's (scripts matched by
/// path whether compiled or revalidated) is taken to have run the
/// template, keeping its own unmodelled (raw) calls and its own writes
/// ([`own_op`]).
pub(super) fn apply_templates(reqs: &mut [WorkRequest]) {
    let mut seen = TemplatesSeen::default();
    for (i, r) in reqs.iter().enumerate() {
        seen.see(i, r);
    }
    let mut t = seen.finish();
    // the templates' operations as they are, one per script: moved out
    // for the loop and put back after it (a template is never changed:
    // its own turn is skipped). Not copied: on the bench log of
    // scripts/bench-predict a copy of every template was a fifth of
    // predict's peak.
    let wanted: Vec<usize> = t.wanted().collect();
    for i in wanted {
        let ops = std::mem::take(&mut reqs[i].ops);
        t.hold(i, ops);
    }
    for (i, r) in reqs.iter_mut().enumerate() {
        t.apply(i, r);
    }
    for (i, ops) in t.release() {
        reqs[i].ops = ops;
    }
}

/// A request named after its first resolution or compile ([`script_of`]),
/// not after a validation.
fn sure(r: &WorkRequest) -> bool {
    r.ops.iter().find_map(|o| match &o.kind {
        PhpOpKind::PrimaryResolve { .. } | PhpOpKind::Compile { .. } => Some(true),
        PhpOpKind::Revalidate { .. } | PhpOpKind::CachedUse { .. } => Some(false),
        _ => None,
    }) == Some(true)
}

/// The operations a template is chosen by: all but the request's own.
fn modelled(r: &WorkRequest) -> usize {
    r.ops.iter().filter(|o| !own_op(o)).count()
}

/// The templates of a capture ([`apply_templates`]), folded request by
/// request (any order): the names that count, and per name the fullest
/// request (index only: the caller gives the templates' operations).
#[derive(Default)]
pub(super) struct TemplatesSeen {
    known: HashSet<String>,
    scripts: HashSet<String>,
    /// Per request name (or none): the fullest request, (modelled
    /// operations, index), the first by index among equals.
    best: HashMap<Option<String>, (usize, usize)>,
}

impl TemplatesSeen {
    pub(super) fn see(&mut self, i: usize, r: &WorkRequest) {
        // a php-cli process under settings of its own (`-d`) is modelled
        // as lifted: another request's operations ran under other
        // settings (what one hides, the other shows: a template from a
        // run under open_basedir gave a run under realpath_cache_size=0
        // the basedir walks)
        if r.settings.is_some() {
            return;
        }
        // A request is named after the first script it resolves, compiles
        // or validates (`script_of`). A name from a validation may be the
        // application's own stat of a file under another name: with
        // validate_timestamps=0 MediaWiki's warm requests show only its
        // file_exists() of /usr/share/mediawiki/LocalSettings.php, a link
        // to the /etc/mediawiki/LocalSettings.php it compiles
        // (fpm-mediawiki-vt0). Such a name counts only when some request
        // compiles a script under it or is surely named so (by a
        // resolution or a compile).
        if let Some(s) = &r.script {
            if sure(r) {
                self.known.insert(s.clone());
            }
            self.scripts.insert(s.clone());
        }
        for c in r.compiled() {
            if !self.known.contains(c) {
                self.known.insert(c.to_string());
            }
        }
        let m = modelled(r);
        let b = self.best.entry(r.script.clone()).or_insert((m, i));
        if m > b.0 || (m == b.0 && i < b.1) {
            *b = (m, i);
        }
    }

    /// Which request is each name's template.
    pub(super) fn finish(self) -> Templates {
        let mut scripts: Vec<&String> = self
            .scripts
            .iter()
            .filter(|s| self.known.contains(*s))
            .collect();
        scripts.sort();
        let only = (scripts.len() == 1).then(|| scripts[0].clone());
        // each name's fullest request, among the requests that go by it
        // (a name that does not count goes by the only name, if any)
        let mut chosen: HashMap<String, (usize, usize)> = HashMap::default();
        for (k, &(m, i)) in &self.best {
            let named = k.clone().filter(|s| self.known.contains(s));
            let Some(s) = named.or_else(|| only.clone()) else {
                continue;
            };
            let b = chosen.entry(s).or_insert((m, i));
            if m > b.0 || (m == b.0 && i < b.1) {
                *b = (m, i);
            }
        }
        Templates {
            known: self.known,
            only,
            by_name: chosen.into_iter().map(|(s, (_, i))| (s, i)).collect(),
            held: HashMap::default(),
        }
    }
}

/// The templates of a capture, to apply to each request
/// ([`Templates::apply`]) once their operations are held
/// ([`Templates::hold`]).
pub(super) struct Templates {
    known: HashSet<String>,
    only: Option<String>,
    by_name: HashMap<String, usize>,
    held: HashMap<usize, Vec<PhpOp>>,
}

impl Templates {
    /// The requests whose operations the templates need, each once.
    pub(super) fn wanted(&self) -> impl Iterator<Item = usize> + '_ {
        let mut v: Vec<usize> = self.by_name.values().copied().collect();
        v.sort_unstable();
        v.dedup();
        v.into_iter()
    }

    /// Holds request `i`'s operations (as [`Templates::apply`] leaves a
    /// template: unchanged).
    pub(super) fn hold(&mut self, i: usize, ops: Vec<PhpOp>) {
        self.held.insert(i, ops);
    }

    /// The held operations, back.
    pub(super) fn release(self) -> impl Iterator<Item = (usize, Vec<PhpOp>)> {
        self.held.into_iter()
    }

    /// Request `i` (`r`) as its template makes it: its name dropped if it
    /// does not count; if it ran its name's template, the template's
    /// operations with its own calls and writes.
    pub(super) fn apply(&self, i: usize, r: &mut WorkRequest) {
        if r.settings.is_some() {
            return;
        }
        if !sure(r) && r.script.as_ref().is_some_and(|s| !self.known.contains(s)) {
            r.script = None;
        }
        let Some(s) = r.script.clone().or_else(|| self.only.clone()) else {
            return;
        };
        let Some(&t) = self.by_name.get(&s) else {
            return;
        };
        // a connection that ran no PHP at all (no filesystem call) is not
        // a request of the script
        if t == i || r.ops.is_empty() {
            return;
        }
        let Some(tpl) = self.held.get(&t) else {
            return;
        };
        // a request that compiled nothing (or few scripts) and shows no use of most
        // scripts its template compiled ran them on a warm OPcache inside
        // their revalidate_freq window: caches hid its includes for sure.
        // One that validated most of them keeps the exact fit: its own
        // validations time the pool's stamps (measured: aligning
        // fpm-mediawiki-fo request 7, 1090 of 1093 scripts validated, to
        // its template moved 7 of its validations out of the window)
        let compiles = |r: &WorkRequest| {
            r.ops
                .iter()
                .filter(|o| matches!(o.kind, PhpOpKind::Compile { .. }))
                .count()
        };
        let shown: HashSet<&str> = r
            .ops
            .iter()
            .filter_map(|o| match &o.kind {
                PhpOpKind::Revalidate { path, .. }
                | PhpOpKind::CachedUse { path }
                | PhpOpKind::Stat { path, .. } => Some(path.as_ref()),
                _ => None,
            })
            .collect();
        let (mut compiled, mut unseen) = (0usize, 0usize);
        for o in tpl {
            if let PhpOpKind::Compile { path, .. } = &o.kind {
                compiled += 1;
                unseen += usize::from(!shown.contains(path.as_ref()));
            }
        }
        let hidden = unseen * 2 > compiled;
        // (a request that compiles a few scripts its template did not
        // need, its includes otherwise hidden, still ran the template:
        // fpm-mediawiki-vt0's second worker, 2 compiles of 1,100 scripts)
        let few_compiles = compiles(r) * 10 <= compiled;
        let fit = if few_compiles && hidden {
            Fit::Tolerant
        } else {
            Fit::Exact
        };
        take_template(r, tpl, s, fit);
    }
}

/// Replaces the modelled operations of `r` with those of `tpl` when the
/// modelled operation keys of `r` follow the template's as `fit` asks
/// (the request ran the template, caches hid the rest); `r` keeps its own
/// unmodelled calls and writes ([`own_op`]), and under [`Fit::Tolerant`]
/// the operations the template does not have. Returns whether it did.
///
/// Under [`Fit::Tolerant`] a resolution that compiled nothing is the
/// request's own too, not matched: a worker whose OPcache is warm but
/// whose realpath cache is cold (another worker compiled the scripts)
/// walks the names of its includes, which its template, compiled with the
/// walk folded into each compile, shows under the resolved names
/// (measured: fpm-mediawiki-vt0, the second worker's first request: 19
/// resolutions, 17 of them of names its template compiled).
fn take_template(r: &mut WorkRequest, tpl: &[PhpOp], s: String, fit: Fit) -> bool {
    let own = |o: &PhpOp| {
        own_op(o) || (fit == Fit::Tolerant && matches!(o.kind, PhpOpKind::Resolve { .. }))
    };
    take_template_by(
        r,
        tpl,
        s,
        fit,
        |o| {
            let (k, v) = o.kind.key();
            vec![(k, Cow::Borrowed(v))]
        },
        &own,
    )
}

/// [`take_template`] with the keys of each operation given by `keyf` and
/// the operations the request keeps given by `own`.
pub(super) fn take_template_by<F>(
    r: &mut WorkRequest,
    tpl: &[PhpOp],
    s: String,
    fit: Fit,
    keyf: F,
    own: &dyn Fn(&PhpOp) -> bool,
) -> bool
where
    F: for<'a> Fn(&'a PhpOp) -> Vec<(&'static str, Cow<'a, str>)>,
{
    let m: Vec<(&str, Cow<str>)> = r.ops.iter().filter(|o| !own(o)).flat_map(&keyf).collect();
    let base: Vec<&PhpOp> = tpl.iter().filter(|o| !own(o)).collect();
    // the template's keys, each with the index of its operation in `base`
    let flat: Vec<((&str, Cow<str>), usize)> = base
        .iter()
        .enumerate()
        .flat_map(|(i, o)| keyf(o).into_iter().map(move |k| (k, i)))
        .collect();
    let t2: Vec<(&str, Cow<str>)> = flat.iter().map(|(k, _)| k.clone()).collect();
    let Some(pos) = align(&m, &t2, fit) else {
        return false;
    };
    let mut pos = pos.into_iter();
    // each own write goes right after the template operation
    // matched to the request's last modelled operation before it
    let mut after: Vec<Vec<PhpOp>> = vec![Vec::new(); base.len() + 1];
    // the request's own operation each template operation was matched to
    let mut mine: Vec<Option<&PhpOp>> = vec![None; base.len()];
    let mut k = 0; // template operations matched so far
    for o in &r.ops {
        if own(o) && !matches!(o.kind, PhpOpKind::Raw { .. }) {
            after[k].push(o.clone());
        } else if !own(o) {
            let mut kept = false;
            for _ in keyf(o) {
                match pos.next().flatten() {
                    Some(j) => {
                        k = flat[j].1 + 1;
                        mine[flat[j].1] = Some(o);
                    }
                    // not in the template (Fit::Tolerant): the request's own
                    None if !kept => {
                        after[k].push(o.clone());
                        kept = true;
                    }
                    None => {}
                }
            }
        }
    }
    // The template's offsets, but for a repeated `*_once` of a relative
    // name: OPcache looks its key up right after the `getcwd` the key
    // needs (ZendAccelerator.c persistent_zend_resolve_path ->
    // accel_make_persistent_key, R61), and when it did decides whether
    // the key another worker adds meanwhile is there yet (R63 in a race:
    // measured, a worker whose lookup came 120 µs before the other's add
    // resolved again, fpm-racefast-rf2; one 50 µs after it did not,
    // fpm-race-rf2). The request's own `getcwd` there (after its previous
    // operation, before its own resolution if it shows one) times it. The
    // other operations keep the template's offsets: each operation's own
    // time would replay the capture faithfully, but from a slow source
    // (the open_basedir captures, 0.1-0.5 s per request) a later request
    // then overtakes an earlier one, and predictions for faster targets
    // get worse (docs/php-model.md "Not done": timing across
    // configurations).
    let cwd: Vec<i64> = r
        .ops
        .iter()
        .filter(|o| matches!(&o.kind, PhpOpKind::Raw { op } if op.kind == OpKind::Getcwd))
        .map(|o| o.t_off_us)
        .collect();
    let mut times: Vec<i64> = Vec::with_capacity(base.len());
    let mut prev_own = i64::MIN;
    for (i, (b, m)) in base.iter().zip(&mine).enumerate() {
        let until = match m {
            Some(o) => o.t_off_us,
            None => mine[i..]
                .iter()
                .flatten()
                .next()
                .map_or(i64::MAX, |o| o.t_off_us),
        };
        let key_lookup = cwd.iter().rev().find(|&&t| t > prev_own && t <= until);
        let floor = times.last().copied().unwrap_or(i64::MIN);
        times.push(match key_lookup {
            Some(&t) if matches!(b.kind, PhpOpKind::OnceRepeat { .. }) => t.max(floor),
            _ => b.t_off_us,
        });
        if let Some(o) = m {
            prev_own = o.t_off_us;
        }
    }
    for (i, ws) in after.iter_mut().enumerate().skip(1) {
        for w in ws {
            w.t_off_us = times[i - 1];
        }
    }
    let mut ops: Vec<PhpOp> = after[0].drain(..).collect();
    for (i, b) in base.iter().enumerate() {
        // a file function's call no cache hides: the request showed it
        // if it made it (a Fit::Exact request shows every one anyway)
        let shown = matches!(
            b.kind,
            PhpOpKind::Access { .. }
                | PhpOpKind::Stat { .. }
                | PhpOpKind::Lstat { .. }
                | PhpOpKind::Open { .. }
        );
        if fit == Fit::Tolerant && shown && mine[i].is_none() {
            ops.append(&mut after[i + 1]);
            continue;
        }
        let mut b = (*b).clone();
        b.t_off_us = times[i];
        ops.push(b);
        ops.append(&mut after[i + 1]);
    }
    ops.extend(
        r.ops
            .iter()
            .filter(|o| matches!(o.kind, PhpOpKind::Raw { .. }))
            .cloned(),
    );
    ops.sort_by_key(|o| o.t_off_us);
    r.ops = ops;
    r.script = Some(s);
    r.from_template = true;
    true
}

#[cfg(test)]
mod tests {
    use super::{align, Fit};

    #[test]
    fn exact_fit_is_the_greedy_subsequence() {
        let t = [1, 2, 3, 2, 4];
        assert_eq!(
            align(&[2, 2, 4], &t, Fit::Exact),
            Some(vec![Some(1), Some(3), Some(4)])
        );
        assert_eq!(align(&[4, 2], &t, Fit::Exact), None);
        assert_eq!(align::<u8>(&[], &[], Fit::Exact), Some(vec![]));
    }

    #[test]
    fn tolerant_fit_keeps_the_longest_common_subsequence() {
        // 19 of 20 in order (95%): the stray 99 is the request's own
        let t: Vec<u32> = (0..40).collect();
        let mut m: Vec<u32> = (0..38).step_by(2).collect();
        m.insert(5, 99);
        let pos = align(&m, &t, Fit::Tolerant).expect("95% fits");
        assert_eq!(pos[5], None);
        assert_eq!(pos.iter().flatten().count(), 19);
        assert!(pos
            .iter()
            .flatten()
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[0] < w[1]));
        assert_eq!(align(&m, &t, Fit::Exact), None);
        // 7 of 10 in order (70%): below MIN_SHARE
        let m = [1, 2, 3, 90, 91, 92, 4, 5, 6, 7];
        assert_eq!(align(&m, &t, Fit::Tolerant), None);
    }
}
