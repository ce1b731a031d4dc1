//! `statstorm predict --reference`: a capture made with a cache on,
//! completed from a short capture of the same application made with both
//! caches off, predicts a cache-off config as the real capture under it
//! shows (tests/fixtures/php, made by scripts/php-harness).

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/php")
        .join(format!("{name}.strace.gz"))
}

fn path(name: &str) -> String {
    fixture(name).to_str().unwrap().to_string()
}

/// The real per-request counts of a capture, computed with the library.
fn real_counts(name: &str) -> Vec<statstorm_trace::Tally> {
    let t = statstorm_trace::read_path(&fixture(name)).unwrap();
    let r = statstorm_php::request::split_requests(&t.events, &t.strings);
    statstorm_php::lift::request_ops(&t, &r)
        .iter()
        .map(|o| statstorm_php::count_by_syscall(o))
        .collect()
}

fn predict(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("statstorm")
        .unwrap()
        .arg("predict")
        .args(args)
        .output()
        .unwrap()
}

const CHECKED: [&str; 4] = ["newfstatat", "openat", "access", "readlink"];

#[test]
fn nooc_completed_from_obd_predicts_rp0() {
    let out = predict(&[
        &path("fpm-tree-nooc"),
        "--reference",
        &path("fpm-tree-obd"),
        "--php",
        "realpath_cache_size=0",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "predict failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["schema"], "statstorm.predict/1");
    let r = &v["reference"];
    assert_eq!(r["files"][0], path("fpm-tree-obd"));
    assert_eq!(r["requests"], 8);
    assert_eq!(r["complete"], true);
    assert_eq!(r["complete_from"], "inferred");
    assert_eq!(r["capture_complete"], false);
    assert_eq!(r["completed_requests"], 8);
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("8 of 8 requests completed from the reference capture")),
        "{notes:?}"
    );
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("lower bound") && !n.contains("not a lower bound")),
        "every request was completed: no lower-bound note expected: {notes:?}"
    );
    let real = real_counts("fpm-tree-rp0");
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), real.len());
    for (i, (q, real)) in reqs.iter().zip(&real).enumerate() {
        assert_eq!(q["from_reference"], true, "request {i}");
        let pred: u64 = CHECKED
            .iter()
            .map(|k| q["after"]["by_syscall"][k].as_u64().unwrap_or(0))
            .sum();
        let want: u64 = CHECKED.iter().map(|k| real.of(k)).sum();
        let err = (pred as f64 - want as f64).abs() / want as f64;
        println!(
            "request {i}: predicted {pred} real {want} ({:.2}%)",
            err * 100.0
        );
        assert!(
            err <= 0.02,
            "request {i}: predicted {pred} checked calls, real fpm-tree-rp0 {want}"
        );
    }
}

#[test]
fn without_reference_the_same_prediction_undercounts() {
    // the point of the reference: from the OPcache-off capture alone the
    // realpath_cache_size=0 prediction misses what the realpath cache hid
    let v: Value = serde_json::from_slice(
        &predict(&[
            &path("fpm-tree-nooc"),
            "--php",
            "realpath_cache_size=0",
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert!(v.get("reference").is_none());
    let pred: u64 = CHECKED
        .iter()
        .map(|k| v["totals"]["after"]["by_syscall"][k].as_u64().unwrap_or(0))
        .sum();
    let real: u64 = real_counts("fpm-tree-rp0")
        .iter()
        .flat_map(|m| CHECKED.iter().map(|k| m.of(k)))
        .sum();
    assert!(
        (pred as f64) < 0.98 * real as f64,
        "predicted {pred} real {real}"
    );
}

#[test]
fn incomplete_reference_is_refused() {
    let out = predict(&[
        &path("fpm-tree-nooc"),
        "--reference",
        &path("fpm-tree-rf2"),
        "--php",
        "realpath_cache_size=0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fpm-tree-rf2.strace.gz") && err.contains("not complete"),
        "{err}"
    );
}

#[test]
fn settings_given_for_the_reference_must_turn_both_caches_off_and_fit_the_trace() {
    // stated with the realpath cache on: caches hid includes
    let out = predict(&[
        &path("fpm-tree-nooc"),
        "--reference",
        &path("fpm-tree-ttl1"),
        "--reference-php",
        "opcache.enable=0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the realpath cache"), "{err}");
    // stated with both caches off, but the trace shows OPcache validations
    let out = predict(&[
        &path("fpm-tree-nooc"),
        "--reference",
        &path("fpm-tree-rf2"),
        "--reference-php",
        "opcache.enable=0",
        "--reference-php",
        "realpath_cache_size=0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("OPcache timestamp validations"), "{err}");
}

#[test]
fn a_complete_capture_does_not_use_the_reference() {
    let json = |args: &[&str]| -> Value {
        let out = predict(args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let rp0 = path("fpm-tree-rp0");
    let with = json(&[
        &rp0,
        "--reference",
        &path("fpm-tree-obd"),
        "--php",
        "opcache.enable=1",
        "--format",
        "json",
    ]);
    let without = json(&[&rp0, "--php", "opcache.enable=1", "--format", "json"]);
    assert_eq!(with["reference"]["capture_complete"], true);
    assert_eq!(with["reference"]["completed_requests"], 0);
    assert_eq!(with["requests"], without["requests"]);
    assert!(with["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("was not needed and not used")));
}
