//! Templates: requests of one script whose work caches hid run the
//! operations of a fuller request of the same script.

use super::*;
use std::borrow::Cow;

fn is_subsequence<T: PartialEq>(small: &[T], big: &[T]) -> bool {
    let mut it = big.iter();
    small.iter().all(|s| it.any(|b| b == s))
}

/// Caches hide work: an OPcache hit or a warm realpath cache shows no
/// syscall. For requests of the same entry script, the request with the
/// most PHP operations is the template; a request whose visible
/// operations are a subsequence of the template's (scripts matched by
/// path whether compiled or revalidated) is taken to have run the
/// template, keeping its own unmodelled (raw) calls and its own writes
/// ([`own_op`]).
pub(super) fn apply_templates(reqs: &mut [WorkRequest]) {
    let scripts: Vec<String> = {
        let mut s: Vec<String> = reqs.iter().filter_map(|r| r.script.clone()).collect();
        s.sort();
        s.dedup();
        s
    };
    let only = if scripts.len() == 1 {
        Some(scripts[0].clone())
    } else {
        None
    };
    let mut templates: HashMap<String, usize> = HashMap::new();
    let modelled = |r: &WorkRequest| r.ops.iter().filter(|o| !own_op(o)).count();
    for (i, r) in reqs.iter().enumerate() {
        let Some(s) = r.script.clone().or_else(|| only.clone()) else {
            continue;
        };
        let better = match templates.get(&s) {
            Some(&j) => modelled(r) > modelled(&reqs[j]),
            None => true,
        };
        if better {
            templates.insert(s, i);
        }
    }
    let snapshot: Vec<WorkRequest> = reqs.to_vec();
    for (i, r) in reqs.iter_mut().enumerate() {
        let Some(s) = r.script.clone().or_else(|| only.clone()) else {
            continue;
        };
        let t = templates[&s];
        // a connection that ran no PHP at all (no filesystem call) is not
        // a request of the script
        if t == i || r.ops.is_empty() {
            continue;
        }
        take_template(r, &snapshot[t], s);
    }
}

/// Replaces the modelled operations of `r` with those of `tpl` when the
/// modelled operation keys of `r` are a subsequence of the template's
/// (the request ran the template, caches hid the rest); `r` keeps its own
/// unmodelled calls and writes ([`own_op`]). Returns whether it did.
fn take_template(r: &mut WorkRequest, tpl: &WorkRequest, s: String) -> bool {
    take_template_by(
        r,
        tpl,
        s,
        |o| {
            let (k, v) = o.kind.key();
            vec![(k, Cow::Borrowed(v))]
        },
        &own_op,
    )
}

/// [`take_template`] with the keys of each operation given by `keyf` and
/// the operations the request keeps given by `own`.
pub(super) fn take_template_by<F>(
    r: &mut WorkRequest,
    tpl: &WorkRequest,
    s: String,
    keyf: F,
    own: &dyn Fn(&PhpOp) -> bool,
) -> bool
where
    F: for<'a> Fn(&'a PhpOp) -> Vec<(&'static str, Cow<'a, str>)>,
{
    let m: Vec<(&str, Cow<str>)> = r.ops.iter().filter(|o| !own(o)).flat_map(&keyf).collect();
    let base: Vec<&PhpOp> = tpl.ops.iter().filter(|o| !own(o)).collect();
    // the template's keys, each with the index of its operation in `base`
    let flat: Vec<((&str, Cow<str>), usize)> = base
        .iter()
        .enumerate()
        .flat_map(|(i, o)| keyf(o).into_iter().map(move |k| (k, i)))
        .collect();
    let t2: Vec<(&str, Cow<str>)> = flat.iter().map(|(k, _)| k.clone()).collect();
    if !(m.len() <= t2.len() && is_subsequence(&m, &t2)) {
        return false;
    }
    // each own write goes right after the template operation
    // matched to the request's last modelled operation before it
    let mut after: Vec<Vec<PhpOp>> = vec![Vec::new(); base.len() + 1];
    // the request's own operation each template operation was matched to
    let mut mine: Vec<Option<&PhpOp>> = vec![None; base.len()];
    let mut k = 0; // template operations matched so far
    let mut j = 0; // template keys looked at so far
    for o in &r.ops {
        if own(o) && !matches!(o.kind, PhpOpKind::Raw { .. }) {
            after[k].push(o.clone());
        } else if !own(o) {
            for key in keyf(o) {
                while j < flat.len() && flat[j].0 != key {
                    j += 1;
                }
                if j < flat.len() {
                    k = flat[j].1 + 1;
                    mine[flat[j].1] = Some(o);
                    j += 1;
                } else {
                    k = base.len();
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
