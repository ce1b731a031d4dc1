//! A lift that drops each request's calls once it is lifted
//! (`lift::Calls::Drop`, what predict does when nothing replays them)
//! lifts exactly what a lift that gives them back lifts: no step after a
//! request's own lift reads its calls, but the first requests' (the
//! settings search) and the calls' durations (taken first).

mod common;

use statstorm_php::lift::{request_ops, Calls, TraceFacts};
use statstorm_php::request::split_requests;

#[test]
fn dropping_the_calls_lifts_the_same_workload() {
    let caps = common::captures();
    assert!(caps.len() > 90, "{} captures", caps.len());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // the harness captures, a strace fixture of 254 requests, and a lab
    // block (every strace of it in one trace: php-fpm and php-cli)
    let mut inputs: Vec<(String, Vec<std::path::PathBuf>)> =
        caps.into_iter().map(|c| (c.name, vec![c.path])).collect();
    inputs.push((
        "fpm-opcache-bursts".into(),
        vec![root.join("tests/fixtures/strace/fpm-opcache-bursts.strace.gz")],
    ));
    let lab = root.join("../shared/fixtures/nfs-lab/strace/3/defaults");
    let mut block: Vec<std::path::PathBuf> = std::fs::read_dir(&lab)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the shared fixtures beside the repo)",
                lab.display()
            )
        })
        .map(|e| e.unwrap().path())
        .collect();
    block.sort();
    inputs.push(("lab 3/defaults".into(), block));
    let mut longer = 0;
    for (name, paths) in inputs {
        let trace = statstorm_trace::read_paths(&paths).unwrap_or_else(|e| panic!("{name}: {e}"));
        let split = split_requests(&trace.events, &trace.strings);
        let facts = TraceFacts::of(&trace, &split);
        let real = request_ops(&trace, &split);
        longer += usize::from(real.len() > 16);
        let (kept, back) = statstorm_php::lift_from(&facts, &split, real.clone(), Calls::GiveBack);
        assert!(back == real, "{name}: the calls do not come back whole");
        let (dropped, left) = statstorm_php::lift_from(&facts, &split, real, Calls::Drop);
        if dropped != kept {
            let at =
                (0..kept.requests.len()).find(|&i| dropped.requests.get(i) != kept.requests.get(i));
            panic!("{name}: the workloads differ (first at request {at:?}, else in the facts)");
        }
        assert!(
            left.iter().skip(16).all(Vec::is_empty),
            "{name}: calls past the first 16 requests were kept"
        );
    }
    // (the captures with more than 16 requests are where calls are dropped)
    assert_eq!(longer, 2, "captures with more than 16 requests");
}
