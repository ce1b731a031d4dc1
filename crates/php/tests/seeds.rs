//! The seeds' patterns, from the model and from real PHP captures.
//! - seed 003: one lstat per path component on a cold realpath cache, none
//!   when warm, all again (and more) with open_basedir;
//! - seed 000: one stat per cached script per revalidate_freq window across
//!   the whole FPM pool.
//!
//! Captures: tests/fixtures/php (regenerate: scripts/php-harness).

mod common;
use common::*;
use statstorm_php::workload::{PhpOp, PhpOpKind, Via, WorkRequest, Workload};
use statstorm_php::{lower, PhpConfig};
use statstorm_trace::op::{Op, OpKind};
use std::collections::{BTreeMap, BTreeSet};

fn include(path: &str) -> PhpOp {
    PhpOp {
        t_off_us: 100,
        stat_us: None,
        kind: PhpOpKind::Compile {
            path: path.into(),
            resolve_as: None,
            probes: Box::default(),
            via: Via::Include,
            resolves: 1,
            fstats: 1,
            reads: 1,
            keep_open: false,
        },
    }
}

fn request(pid: u32, t_us: i64, ops: Vec<PhpOp>) -> WorkRequest {
    WorkRequest {
        pid,
        start_us: t_us,
        end_us: t_us + 1000,
        request_time_us: t_us,
        cli: false,
        script: None,
        from_template: false,
        settings: None,
        ops,
    }
}

fn workload(requests: Vec<WorkRequest>) -> Workload {
    Workload::of_requests(requests)
}

fn lstats(ops: &[Op]) -> Vec<&str> {
    ops.iter()
        .filter(|o| o.kind == OpKind::Lstat && o.ok())
        .map(|o| o.path.as_ref())
        .collect()
}

fn cfg(flags: &[&str]) -> PhpConfig {
    let mut c = PhpConfig::default();
    c.apply_flags(flags).unwrap();
    c
}

/// Seed 003 from the model: D(i) of SEMANTICS.md.
#[test]
fn seed003_model_one_lstat_per_component_cold_none_warm_all_with_basedir() {
    let f = "/mnt/var/www/html/drupal/sites/all/modules/date/date.module";
    let components = 10; // /mnt .. date.module, "/" never lstat'ed (R53)
                         // two requests of one worker, 1 s apart (inside realpath_cache_ttl)
    let w = workload(vec![
        request(7, 1_000_000_000, vec![include(f)]),
        request(7, 1_001_000_000, vec![include(f)]),
    ]);
    let off = cfg(&["opcache.enable=0"]);
    let out = lower(&w, &off);
    let cold = lstats(&out[0]);
    assert_eq!(cold.len(), components, "{cold:?}");
    assert_eq!(
        cold.iter().collect::<BTreeSet<_>>().len(),
        components,
        "each component once"
    );
    assert_eq!(cold[0], f, "deepest first (R53)");
    assert!(lstats(&out[1]).is_empty(), "warm: no lstat");
    // open_basedir=/mnt: every request walks again: resolution + the two
    // walks of the check + the basedir itself (R58/R59, measured)
    let obd = lower(&w, &cfg(&["opcache.enable=0", "open_basedir=/mnt"]));
    for r in &obd {
        let l = lstats(r);
        assert_eq!(l.len(), 3 * components + 1, "{l:?}");
        let set: BTreeSet<&str> = l.iter().copied().collect();
        assert_eq!(set.len(), components);
    }
}

/// Seed 003 on real PHP: the same pattern in the php-fpm captures, and the
/// model's counts for them.
#[test]
fn seed003_real_php() {
    let caps = captures();
    let get = |n: &str| capture(&caps, n);
    for (name, basedir) in [("fpm-tree-nooc", false), ("fpm-tree-obd", true)] {
        let c = get(name);
        let trace = statstorm_trace::read_path(&c.path).unwrap();
        let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
        let real = statstorm_php::lift::request_ops(&trace, &reqs);
        let w = statstorm_php::lift(&trace, &reqs);
        let model = lower(&w, &c.config);
        let mut seen_worker: BTreeSet<u32> = BTreeSet::new();
        let mut cold_set: Option<BTreeSet<String>> = None;
        for (i, (r, m)) in real.iter().zip(&model).enumerate() {
            if r.is_empty() {
                continue; // a connection without a request
            }
            let pid = w.requests[i].pid;
            let first = seen_worker.insert(pid);
            for ops in [r, m] {
                let l = lstats(ops);
                let set: BTreeSet<String> = l.iter().map(|s| s.to_string()).collect();
                if !basedir {
                    if first {
                        assert_eq!(
                            l.len(),
                            set.len(),
                            "{name} request {i}: cold, each component once"
                        );
                        cold_set.get_or_insert(set.clone());
                    } else {
                        assert!(l.is_empty(), "{name} request {i}: warm, got {l:?}");
                    }
                } else {
                    assert!(
                        l.len() > 2 * set.len(),
                        "{name} request {i}: every component walked again"
                    );
                }
            }
        }
        if !basedir {
            assert!(cold_set.unwrap().len() > 10);
        }
    }
}

/// Seed 000 from the model: a pool of 10 workers, a request every 100 ms
/// for 180 s, revalidate_freq=60: each script is stat()ed once per window
/// for the whole pool (R64/R69), not once per worker.
#[test]
fn seed000_model_one_stat_per_script_per_window_across_the_pool() {
    let scripts = ["/w/index.php", "/w/wp-load.php", "/w/wp-config.php"];
    let t0 = 1_700_000_000_000_000i64; // a whole second
    let reqs: Vec<WorkRequest> = (0..1800)
        .map(|i| {
            request(
                100 + (i % 10) as u32,
                t0 + i as i64 * 100_000,
                scripts.iter().map(|s| include(s)).collect(),
            )
        })
        .collect();
    let w = workload(reqs);
    let out = lower(&w, &cfg(&["opcache.revalidate_freq=60"]));
    let mut stats: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut opens = 0;
    for r in &out {
        for o in r {
            match o.kind {
                OpKind::Stat => stats
                    .entry(scripts.iter().find(|s| **s == &*o.path).unwrap())
                    .or_default()
                    .push(o.t_us),
                OpKind::Open => opens += 1,
                _ => {}
            }
        }
    }
    assert_eq!(opens, 3, "each script compiled once for the pool");
    for (s, t) in &stats {
        // compiled at t0 (stamp t0+60 s); validated when request_time
        // passes the stamp: at 61 s and 122 s -> twice in 180 s
        assert_eq!(t.len(), 2, "{s}: {t:?}");
        assert!(
            t.windows(2).all(|w| w[1] - w[0] >= 60_000_000),
            "{s}: {t:?}"
        );
    }
    // with revalidate_freq=2: once per 3 s window (stamp = time + 2,
    // checked with 1 s request_time resolution)
    let out = lower(&w, &cfg(&["opcache.revalidate_freq=2"]));
    let n: usize = out
        .iter()
        .flatten()
        .filter(|o| o.kind == OpKind::Stat)
        .count();
    assert_eq!(
        n,
        3 * 59,
        "180 s / 3 s windows, minus the compile window, x 3 scripts"
    );
}

/// Seed 000 on real PHP: in the revalidate_freq=2 capture each script is
/// validated at most once per window across both workers, and the model
/// puts the validations in the same requests.
#[test]
fn seed000_real_php() {
    seed000_real("fpm-tree-rf2");
}

/// The same on WordPress (the seed's application), revalidate_freq=2.
#[test]
fn seed000_real_wordpress() {
    seed000_real("fpm-wordpress-rf2");
}

fn seed000_real(name: &str) {
    let caps = captures();
    let c = caps
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("capture {name}"));
    let trace = statstorm_trace::read_path(&c.path).unwrap();
    let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
    let real = statstorm_php::lift::request_ops(&trace, &reqs);
    let w = statstorm_php::lift(&trace, &reqs);
    let model = lower(&w, &c.config);
    let workers: BTreeSet<u32> = w
        .requests
        .iter()
        .filter(|r| !r.ops.is_empty())
        .map(|r| r.pid)
        .collect();
    assert!(workers.len() >= 2, "the pool has two workers");
    for ops in [&real, &model] {
        let mut per_script: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for r in ops.iter() {
            for o in r {
                if o.kind == OpKind::Stat && o.path.ends_with(".php") {
                    per_script
                        .entry(o.path.to_string())
                        .or_default()
                        .push(o.t_us / 1_000_000);
                }
            }
        }
        assert!(!per_script.is_empty(), "some script was validated");
        for (s, t) in &per_script {
            // stamp = request_time + 2: the next validation comes 3 s later
            assert!(t.windows(2).all(|w| w[1] - w[0] >= 3), "{s}: {t:?}");
        }
    }
    for (i, (r, m)) in real.iter().zip(&model).enumerate() {
        let n = |ops: &[Op]| {
            ops.iter()
                .filter(|o| o.kind == OpKind::Stat && o.path.ends_with(".php"))
                .count()
        };
        assert_eq!(n(r), n(m), "request {i}: validations");
    }
}

/// Overlapping requests on two workers share the pool's stamps in time
/// order: the worker whose include comes first validates, the other finds
/// the renewed stamp (R64, R69), whatever order the requests started in.
#[test]
fn overlapping_requests_share_stamps_in_time_order() {
    let x = "/w/x.php";
    let t0 = 1_700_000_000_000_000i64;
    let mut a = request(1, t0 + 10_000_000, vec![include(x)]);
    a.ops[0].t_off_us = 1_000; // includes x at +10.001 s
    let mut b = request(2, t0 + 10_000_500, vec![include(x)]);
    b.ops[0].t_off_us = 200; // includes x at +10.0007 s, before a does
    let warm = request(1, t0, vec![include(x)]);
    let w = workload(vec![warm, a, b]);
    let out = lower(&w, &cfg(&["opcache.revalidate_freq=2"]));
    let stats = |ops: &[Op]| ops.iter().filter(|o| o.kind == OpKind::Stat).count();
    assert_eq!(stats(&out[1]), 0, "a finds the stamp b renewed");
    assert_eq!(stats(&out[2]), 1, "b validates first");
}
