//! Shared helpers for the capture tests: the manifest written by
//! `scripts/php-harness` and the real per-request counts.

#![allow(dead_code)]

pub mod harness;

use statstorm_php::lower::{count_by_syscall, CHECKED};
use statstorm_php::request::split_requests;
use statstorm_php::PhpConfig;
use statstorm_trace::op::Op;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub struct Capture {
    pub name: String,
    pub sapi: String,
    pub workload: String,
    pub config: PhpConfig,
    pub settings: Vec<(String, String)>,
    pub path: PathBuf,
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/php")
}

/// The committed captures (tests/fixtures/php).
pub fn captures() -> Vec<Capture> {
    captures_in(&fixtures())
}

/// The capture named `name` in `caps`; panics naming it and the harness
/// that makes it when the manifest lacks it.
pub fn capture<'a>(caps: &'a [Capture], name: &str) -> &'a Capture {
    caps.iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("capture {name} is not in the manifest (scripts/php-harness)"))
}

/// The captures listed in `dir/manifest.jsonl` (written by
/// `scripts/php-harness --out dir`).
pub fn captures_in(dir: &std::path::Path) -> Vec<Capture> {
    let text = std::fs::read_to_string(dir.join("manifest.jsonl")).unwrap_or_else(|e| {
        panic!(
            "{}/manifest.jsonl: {e} (run scripts/php-harness)",
            dir.display()
        )
    });
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let m: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("manifest.jsonl:{}: {e}", n + 1));
        let name = m["name"].as_str().unwrap().to_string();
        let mut config = PhpConfig::default();
        let mut settings = Vec::new();
        for (k, v) in m["config"].as_object().unwrap() {
            let v = v.as_str().unwrap();
            config
                .set(k, v, "manifest")
                .unwrap()
                .unwrap_or_else(|| panic!("{name}: setting {k} unknown to PhpConfig"));
            settings.push((k.clone(), v.to_string()));
        }
        let gz = dir.join(format!("{name}.strace.gz"));
        let path = if gz.exists() {
            gz
        } else {
            dir.join(format!("{name}.strace.zst"))
        };
        assert!(
            path.exists(),
            "{name}: no {name}.strace.gz or .zst in {}",
            dir.display()
        );
        out.push(Capture {
            path,
            sapi: m["sapi"].as_str().unwrap().to_string(),
            workload: m["workload"].as_str().unwrap().to_string(),
            name,
            config,
            settings,
        });
    }
    assert!(!out.is_empty(), "no captures in the manifest");
    out
}

pub type Counts = BTreeMap<String, u64>;

/// Requests of a capture: the real counts and calls, and the workload.
pub struct Loaded {
    pub real: Vec<Counts>,
    /// Each request's file calls as recorded.
    pub real_ops: Vec<Vec<Op>>,
    pub workload: statstorm_php::Workload,
}

pub fn load(c: &Capture) -> Loaded {
    let trace = statstorm_trace::read_path(&c.path).unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let reqs = split_requests(&trace.events, &trace.strings);
    let real_ops = statstorm_php::lift::request_ops(&trace, &reqs);
    let real = real_ops
        .iter()
        .map(|o| checked(&count_by_syscall(o)))
        .collect();
    let workload = statstorm_php::lift(&trace, &reqs);
    Loaded {
        real,
        real_ops,
        workload,
    }
}

/// MediaWiki's SQLite databases (its object cache, its job queue): whether
/// a request checks the job queue, and whether SQLite maps its WAL index
/// again, follow the application's state, not PHP's settings (in the
/// captures: the job-queue check's `access`, SQLite's root-first walk of
/// the directory, its opens and stats come and go between requests of
/// otherwise equal runs).
const MEDIAWIKI_DATA: &str = "/var/lib/mediawiki/data";

/// A call on MediaWiki's SQLite files or SQLite's walk to them.
fn is_app_db_call(o: &Op) -> bool {
    o.path
        .strip_prefix(MEDIAWIKI_DATA)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        || (o.path.len() > 1
            && MEDIAWIKI_DATA
                .strip_prefix(o.path.as_ref())
                .is_some_and(|rest| rest.starts_with('/')))
}

/// The reason a MediaWiki request beyond `tol` is not a model error: the
/// prediction and the real request differ in the calls on MediaWiki's
/// SQLite files, and without those calls on both sides they are within
/// `tol` (the check that keeps this from excusing anything else). `None`
/// for other workloads or when the rest is beyond `tol` too.
pub fn app_db_excuse(workload: &str, pred: &[Op], real: &[Op], tol: f64) -> Option<String> {
    if workload != "mediawiki" {
        return None;
    }
    let without = |ops: &[Op]| -> (u64, u64) {
        let (db, rest): (Vec<Op>, Vec<Op>) = ops.iter().cloned().partition(is_app_db_call);
        (sum(&checked(&count_by_syscall(&rest))), db.len() as u64)
    };
    let ((p, pdb), (r, rdb)) = (without(pred), without(real));
    let err = rel_err(p, r);
    (pdb != rdb && err <= tol).then(|| {
        format!(
            "MediaWiki's SQLite files (job queue, object cache) were used differently ({pdb} calls predicted from the source, {rdb} real: application state, not PHP settings); without them {:.1}%",
            err * 100.0
        )
    })
}

pub fn checked(m: &statstorm_trace::Tally) -> Counts {
    CHECKED.iter().map(|k| (k.to_string(), m.of(k))).collect()
}

pub fn fmt(c: &Counts) -> String {
    CHECKED
        .iter()
        .map(|k| format!("{}={}", &k[..4], c.get(*k).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Per-request tolerance of the round trip for WordPress and MediaWiki, as
/// a share of the checked calls (the synthetic workloads must be exact).
pub const ROUND_TRIP_APP_TOLERANCE: f64 = 0.01;
/// Per-request tolerance of cross-config predictions: 2% for the synthetic
/// workloads, 5% for WordPress and MediaWiki.
pub const CROSS_TOLERANCE: f64 = 0.02;
pub const CROSS_APP_TOLERANCE: f64 = 0.05;

/// The per-request tolerance of a cross-config prediction for a workload.
pub fn cross_tolerance(workload: &str) -> f64 {
    if is_app(workload) {
        CROSS_APP_TOLERANCE
    } else {
        CROSS_TOLERANCE
    }
}

pub fn is_app(workload: &str) -> bool {
    matches!(workload, "wordpress" | "mediawiki")
}

pub fn sum(c: &Counts) -> u64 {
    CHECKED
        .iter()
        .map(|k| c.get(*k).copied().unwrap_or(0))
        .sum()
}

/// The outcome of the round trip over a set of captures.
pub struct RoundTrip {
    pub requests: usize,
    /// Application requests that differ within the tolerance.
    pub differences: Vec<String>,
    /// Requests that differ beyond it (any difference for the synthetic
    /// workloads).
    pub failures: Vec<String>,
}

/// Lowers each capture's lifted workload under the settings it was
/// recorded with and compares every request with the recorded counts.
pub fn round_trip(caps: &[Capture], loaded: &[Loaded]) -> RoundTrip {
    let mut out = RoundTrip {
        requests: 0,
        differences: Vec::new(),
        failures: Vec::new(),
    };
    for (c, l) in caps.iter().zip(loaded) {
        let lowered = statstorm_php::lower(&l.workload, &c.config);
        assert_eq!(lowered.len(), l.real.len(), "{}: request count", c.name);
        for (i, (ops, real)) in lowered.iter().zip(&l.real).enumerate() {
            out.requests += 1;
            let pred = checked(&count_by_syscall(ops));
            if &pred == real {
                continue;
            }
            let diff: u64 = pred
                .iter()
                .map(|(k, v)| v.abs_diff(real.get(k).copied().unwrap_or(0)))
                .sum();
            let share = diff as f64 / sum(real).max(1) as f64;
            let line = format!(
                "{} request {i} (pid {}): real [{}] model [{}] ({:.2}%)",
                c.name,
                l.workload.requests[i].pid,
                fmt(real),
                fmt(&pred),
                share * 100.0
            );
            if is_app(&c.workload) && share <= ROUND_TRIP_APP_TOLERANCE {
                out.differences.push(line);
            } else {
                out.failures.push(line);
            }
        }
    }
    out
}

/// The outcome of the cross-config predictions over a set of captures.
pub struct Cross {
    /// One line per ordered pair: predicted and real totals, worst request.
    pub rows: Vec<String>,
    /// Requests of asserted pairs beyond the tolerance.
    pub failures: Vec<String>,
    pub pairs: usize,
    /// Pairs from complete sources, not listed as known gaps.
    pub asserted: usize,
    /// The asserted pairs (source, target).
    pub asserted_pairs: Vec<(String, String)>,
}

/// Puts `w`'s requests on `target`'s request times and workers, so that
/// only the settings differ. The times the scripts' mtimes were seen move
/// with the requests, and so do mtimes set during the run (the fresh
/// captures: a script touched just before each run's first request), in
/// whole seconds as PHP compares them (R65). Such an mtime says only that
/// the touch fell in that second; it is placed at the latest time it
/// allows before the source's first request, moved by the same time as
/// the requests, and cut to the second again (rounding the difference of
/// the start times instead, or keeping the seconds' difference, put a
/// second's error on some pairs of the fresh captures, whose requests
/// straddle R65's window: fpm-fresh-obd -> rf0 request 4, fpm-fresh-rf0-fup0
/// -> rf0 request 3). A date set by the harness (the change captures)
/// stays.
pub fn retime(w: &mut statstorm_php::Workload, target: &statstorm_php::Workload) {
    if let (Some(a), Some(b)) = (w.requests.first(), target.requests.first()) {
        let shift = b.start_us - a.start_us;
        let run_s = a.start_us.div_euclid(1_000_000) - 60;
        for obs in w.mtimes.values_mut() {
            for (t, m) in obs.iter_mut() {
                *t += shift;
                if *m >= run_s {
                    let touch = a.start_us.min((*m + 1) * 1_000_000 - 1);
                    *m = (touch + shift).div_euclid(1_000_000);
                }
            }
        }
    }
    for (rx, ry) in w.requests.iter_mut().zip(&target.requests) {
        rx.pid = ry.pid;
        rx.start_us = ry.start_us;
        rx.end_us = ry.end_us;
        rx.request_time_us = ry.request_time_us;
    }
    // what OPcache's file cache (R67) held when the target ran: state on
    // disk, not a setting (cli-*-fco-cold ran with it empty; a source that
    // did not use it says nothing of it)
    if target.file_cache.is_some() {
        w.file_cache = target.file_cache.clone();
    }
}

/// From the capture under config X, predicts the capture under config Y
/// (same workload and SAPI) at Y's request times and workers (X's
/// requests re-timed onto Y's, so that only the settings differ) and
/// compares per request with the real capture under Y. Pairs whose source
/// is complete (`evidence.complete`) are asserted, every request but those
/// in `known_gaps` (source, target, request index, reason), which are
/// printed.
pub fn cross(
    caps: &[Capture],
    loaded: &[Loaded],
    known_gaps: &[(&str, &str, usize, &str)],
) -> Cross {
    let mut out = Cross {
        rows: Vec::new(),
        failures: Vec::new(),
        pairs: 0,
        asserted: 0,
        asserted_pairs: Vec::new(),
    };
    for (xi, x) in caps.iter().enumerate() {
        for (yi, y) in caps.iter().enumerate() {
            if xi == yi || x.sapi != y.sapi || x.workload != y.workload {
                continue;
            }
            let (lx, ly) = (&loaded[xi], &loaded[yi]);
            assert_eq!(
                lx.workload.requests.len(),
                ly.workload.requests.len(),
                "{} and {} differ in request count",
                x.name,
                y.name
            );
            out.pairs += 1;
            let mut w = lx.workload.clone();
            retime(&mut w, &ly.workload);
            let pred = statstorm_php::lower(&w, &y.config);
            let tol = cross_tolerance(&x.workload);
            let asserted = lx.workload.evidence.complete;
            let mut excused = Vec::new();
            let mut worst = 0.0f64;
            let (mut sp, mut sr) = (0u64, 0u64);
            for (i, (ops, real)) in pred.iter().zip(&ly.real).enumerate() {
                let p = checked(&count_by_syscall(ops));
                let (tp, tr) = (sum(&p), sum(real));
                sp += tp;
                sr += tr;
                let err = rel_err(tp, tr);
                let known = known_gaps
                    .iter()
                    .find(|(a, b, n, _)| *a == x.name && *b == y.name && *n == i);
                if let Some((_, _, _, why)) = known {
                    excused.push(format!(
                        "request {i} {:.1}% not asserted: {why}",
                        err * 100.0
                    ));
                    continue;
                }
                if err > tol {
                    if let Some(why) = app_db_excuse(&x.workload, ops, &ly.real_ops[i], tol) {
                        excused.push(format!("request {i} {:.1}%: {why}", err * 100.0));
                        continue;
                    }
                }
                worst = worst.max(err);
                if err > tol && asserted {
                    out.failures.push(format!(
                        "{} -> {} request {i}: predicted [{}] real [{}]",
                        x.name,
                        y.name,
                        fmt(&p),
                        fmt(real)
                    ));
                }
            }
            if asserted {
                out.asserted += 1;
                out.asserted_pairs.push((x.name.clone(), y.name.clone()));
            }
            out.rows.push(format!(
                "{:<24} -> {:<24} predicted {:>6} real {:>6} worst request {:>5.1}%{}",
                x.name,
                y.name,
                sp,
                sr,
                worst * 100.0,
                if !asserted {
                    "  (source incomplete: not asserted)".to_string()
                } else if excused.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", excused.join("; "))
                }
            ));
        }
    }
    out
}

/// Prints the cross table and its summary.
pub fn print_cross(c: &Cross) {
    println!("checked calls (newfstatat+openat+access+readlink), summed over requests:");
    for r in &c.rows {
        println!("{r}");
    }
    println!(
        "{} pairs, {} from complete sources (asserted), {} request mismatches beyond {}% ({}% for applications) among them",
        c.pairs,
        c.asserted,
        c.failures.len(),
        CROSS_TOLERANCE * 100.0,
        CROSS_APP_TOLERANCE * 100.0
    );
    for f in &c.failures {
        println!("{f}");
    }
}

/// Relative error of a predicted count against the real one (1.0 when the
/// real count is 0 and the prediction is not).
pub fn rel_err(pred: u64, real: u64) -> f64 {
    match (pred, real) {
        (0, 0) => 0.0,
        (_, 0) => 1.0,
        _ => (pred as f64 - real as f64).abs() / real as f64,
    }
}

/// Runs the harness for `only` (each name one capture) into a temporary
/// directory and loads the fresh captures, checking that each of them is
/// there and, when `requests` is given, holds that many requests. The run
/// is returned to keep its directory (and pool) alive.
pub fn live_captures(
    only: &[&str],
    apps: bool,
    limit: std::time::Duration,
    requests: Option<usize>,
) -> (harness::LiveRun, Vec<Capture>, Vec<Loaded>) {
    let run = harness::run_harness(only, apps, limit);
    let caps = captures_in(&run.out);
    let names: Vec<&str> = caps.iter().map(|c| c.name.as_str()).collect();
    let mut want = only.to_vec();
    want.sort();
    assert_eq!(names, want, "captures in {}", run.out.display());
    let loaded: Vec<Loaded> = caps.iter().map(load).collect();
    if let Some(n) = requests {
        for (c, l) in caps.iter().zip(&loaded) {
            assert_eq!(
                l.real.len(),
                n,
                "{}: {n} requests sent, {} found in the capture",
                c.name,
                l.real.len()
            );
        }
    }
    (run, caps, loaded)
}

/// The round trip of `caps`, printed (with the application requests that
/// differ within tolerance) and asserted free of mismatches.
pub fn assert_round_trip(caps: &[Capture], loaded: &[Loaded]) -> RoundTrip {
    let r = round_trip(caps, loaded);
    println!(
        "round trip: {} requests checked, {} application requests differ within {}%:",
        r.requests,
        r.differences.len(),
        ROUND_TRIP_APP_TOLERANCE * 100.0
    );
    for d in &r.differences {
        println!("  {d}");
    }
    assert!(
        r.failures.is_empty(),
        "round trip: {} mismatches:\n{}",
        r.failures.len(),
        r.failures.join("\n")
    );
    r
}

/// Prints the cross table and asserts that no asserted request is beyond
/// tolerance.
pub fn assert_cross(c: &Cross) {
    print_cross(c);
    assert!(
        c.failures.is_empty(),
        "{} requests beyond tolerance (table above)",
        c.failures.len()
    );
}
