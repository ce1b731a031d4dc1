//! The capture folded as it is read (`capture::Fold`, what predict does)
//! gives what the whole-trace functions give: the same requests, each
//! with the same calls (written out to the spill and read back, or held),
//! the same activity outside requests, the same counts and lift facts;
//! and one file read as a stream (`trace::ordered`) gives its events in
//! the order of the whole read.

use statstorm_engine::capture::{Fold, HELD};
use statstorm_php::lift::{request_ops, TraceFacts};
use statstorm_php::request::{split_requests, RequestList};
use statstorm_trace::op::{Normalizer, Op};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    v
}

/// Every event not in a request, normalized, grouped by process.
fn background(trace: &statstorm_trace::Trace) -> BTreeMap<u32, Vec<Op>> {
    let split = split_requests(&trace.events, &trace.strings);
    let mut inside = vec![false; trace.events.len()];
    for r in &split.requests {
        for &e in &r.events {
            inside[e as usize] = true;
        }
    }
    let mut norm = Normalizer::new();
    let mut out: BTreeMap<u32, Vec<Op>> = BTreeMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        if let Some(op) = norm.push(e, &trace.strings) {
            if !inside[i] {
                out.entry(op.pid).or_default().push(op);
            }
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|o| o.t_us);
    }
    out
}

fn check(name: &str, paths: &[PathBuf]) {
    let trace = statstorm_trace::read_paths(paths).unwrap_or_else(|e| panic!("{name}: {e}"));
    let split = split_requests(&trace.events, &trace.strings);
    let calls = request_ops(&trace, &split);
    let facts = TraceFacts::of(&trace, &split);
    let bg = background(&trace);
    // calls and requests written out at once, a few at a time, or held
    for (limit, reqs) in [(0, 1), (7, 3), (HELD, 1 << 16)] {
        let mut f = Fold::with_bounds(limit, reqs);
        for e in &trace.events {
            f.push(e, &trace.strings);
        }
        let (s, rec, fx) = f.finish().unwrap();
        assert_eq!(s.mode, split.mode, "{name}");
        assert_eq!(s.note, split.note, "{name}");
        assert_eq!(rec.len(), split.requests.len(), "{name}");
        for (i, b) in split.requests.iter().enumerate() {
            let a = RequestList::request(&rec, i);
            assert_eq!(
                (a.pid, a.start_us, a.end_us, a.kind, &a.settings),
                (b.pid, b.start_us, b.end_us, b.kind, &b.settings),
                "{name}"
            );
        }
        assert_eq!(fx.mtimes, facts.mtimes, "{name}");
        assert_eq!(fx.lock_us, facts.lock_us, "{name}");
        for (i, c) in calls.iter().enumerate() {
            let back = rec.calls(i).unwrap();
            assert!(back == *c, "{name}: request {i} (limit {limit})");
            assert_eq!(
                rec.count(i).unwrap(),
                statstorm_php::count_by_syscall(c),
                "{name}"
            );
        }
        let got: BTreeMap<u32, Vec<Op>> = rec
            .background
            .iter()
            .map(|b| (b.pid, b.ops.clone()))
            .collect();
        assert!(got == bg, "{name}: background (limit {limit})");
        // what the lift would learn by reading every request once more
        let summary = statstorm_php::lift::CallSource::summary(&rec).unwrap();
        let mut lat = statstorm_php::workload::Latencies::default();
        calls.iter().flatten().for_each(|o| lat.push(o));
        assert_eq!(summary.latencies.medians(), lat.medians(), "{name}");
        let bins = calls
            .iter()
            .flatten()
            .any(|o| statstorm_php::file_cache::parse_bin(&o.path).is_some());
        assert!(summary.file_cache_calls || !bins, "{name}: a .bin unseen");
        if limit == 0 && !calls.iter().all(Vec::is_empty) {
            assert!(rec.spilled_bytes() > 0, "{name}: nothing written out");
        }
    }
    // one file: the stream gives the whole read's order
    if let [one] = paths {
        let mut evs = Vec::new();
        let o = statstorm_trace::ordered::for_each_event(
            std::slice::from_ref(one),
            &Default::default(),
            &mut |e, _| evs.push(e.clone()),
        )
        .unwrap();
        assert_eq!(o.late, 0, "{name}");
        assert!(evs == trace.events, "{name}: the stream's order");
    }
}

#[test]
fn the_fold_gives_what_the_whole_trace_gives() {
    let r = root();
    let mut n = 0;
    for dir in [
        "tests/fixtures/php",
        "tests/fixtures/strace",
        "tests/fixtures/httpd",
    ] {
        for ext in [".strace.gz", ".strace.zst", ".strace"] {
            for p in files(&r.join(dir), ext) {
                check(&p.display().to_string(), &[p]);
                n += 1;
            }
        }
    }
    assert!(n > 100, "{n} fixtures");
    // a lab block: every strace of it in one trace (php-fpm and php-cli)
    let lab = r.join("../shared/fixtures/nfs-lab/strace/3/defaults");
    check("lab 3/defaults", &files(&lab, ".gz"));
}
