//! `statstorm predict` says when the capture hides operations (caches on
//! while it was recorded) and that the prediction is then a lower bound:
//! the notes of the JSON and text reports, on the committed PHP captures
//! of tests/fixtures/php (made by scripts/php-harness).

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/php")
        .join(format!("{name}.strace.gz"))
        .to_str()
        .unwrap()
        .to_string()
}

const INC: &str = "include_path=.:/tmp/statstorm-lab/www/inc";

fn predict(args: &[&str], format: &str) -> Vec<u8> {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .arg("predict")
        .args(args)
        .args(["--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "statstorm predict {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn notes(v: &Value) -> Vec<String> {
    v["notes"]
        .as_array()
        .expect("notes[]")
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

fn checked_total(v: &Value, side: &str) -> u64 {
    ["newfstatat", "openat", "access", "readlink"]
        .iter()
        .map(|k| v["totals"][side]["by_syscall"][k].as_u64().unwrap_or(0))
        .sum()
}

fn hides(n: &[String]) -> Option<&String> {
    n.iter()
        .find(|s| s.starts_with("the capture hides operations"))
}

#[test]
fn cached_capture_says_what_it_hides_and_that_after_is_a_lower_bound() {
    // OPcache off, realpath cache on (the default) -> realpath_cache_size=0
    let nooc = fixture("fpm-tree-nooc");
    let args = [
        nooc.as_str(),
        "--from-php",
        "opcache.enable=0",
        "--from-php",
        INC,
        "--php",
        "realpath_cache_size=0",
    ];
    let v: Value = serde_json::from_slice(&predict(&args, "json")).unwrap();
    let n = notes(&v);
    let h = hides(&n).unwrap_or_else(|| panic!("no hidden-operations note in {n:#?}"));
    assert!(h.contains("the realpath cache on"), "{h}");
    assert!(!h.contains("OPcache on"), "OPcache was off: {h}");
    assert!(h.contains("include or include_once"), "{h}");
    assert!(h.contains("include_once/require_once repeats"), "{h}");
    assert!(h.contains("lower bound"), "{h}");
    let off = n
        .iter()
        .find(|s| s.starts_with("the proposed settings turn"))
        .unwrap_or_else(|| panic!("no lower-bound note for the proposed settings in {n:#?}"));
    assert!(off.contains("realpath_cache_size=0"), "{off}");
    assert!(off.contains("lower bound"), "{off}");
    // and it is one: the real capture under realpath_cache_size=0 makes
    // more calls than predicted from the cached one
    let rp0 = fixture("fpm-tree-rp0");
    let real: Value = serde_json::from_slice(&predict(
        &[
            rp0.as_str(),
            "--from-php",
            "opcache.enable=0",
            "--from-php",
            "realpath_cache_size=0",
            "--from-php",
            INC,
        ],
        "json",
    ))
    .unwrap();
    let (after, real_total) = (checked_total(&v, "after"), checked_total(&real, "before"));
    println!("fpm-tree-nooc -> realpath_cache_size=0: predicted {after}, real {real_total}");
    assert!(after < real_total, "{after} >= {real_total}");

    // the text report carries the same notes
    let text = String::from_utf8(predict(&args, "text")).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("note: the capture hides operations")
                && l.contains("lower bound")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("note: the proposed settings turn")),
        "{text}"
    );
}

#[test]
fn opcache_capture_names_opcache_and_turning_it_off() {
    let rf2 = fixture("fpm-tree-rf2");
    let v: Value = serde_json::from_slice(&predict(
        &[
            rf2.as_str(),
            "--from-php",
            "opcache.revalidate_freq=2",
            "--from-php",
            INC,
            "--php",
            "opcache.enable=0",
        ],
        "json",
    ))
    .unwrap();
    let n = notes(&v);
    let h = hides(&n).unwrap_or_else(|| panic!("no hidden-operations note in {n:#?}"));
    assert!(h.contains("OPcache on"), "{h}");
    assert!(h.contains("the realpath cache on"), "{h}");
    let off = n
        .iter()
        .find(|s| s.starts_with("the proposed settings turn"))
        .unwrap_or_else(|| panic!("no lower-bound note in {n:#?}"));
    assert!(off.contains("OPcache off"), "{off}");
    assert!(
        !off.contains("realpath"),
        "the realpath cache stays on: {off}"
    );
}

#[test]
fn complete_capture_has_no_such_note() {
    // OPcache and the realpath cache off: every include and walk visible
    let rp0 = fixture("fpm-tree-rp0");
    let v: Value = serde_json::from_slice(&predict(
        &[
            rp0.as_str(),
            "--from-php",
            "opcache.enable=0",
            "--from-php",
            "realpath_cache_size=0",
            "--from-php",
            INC,
            "--php",
            "realpath_cache_size=4096K",
        ],
        "json",
    ))
    .unwrap();
    let n = notes(&v);
    assert!(hides(&n).is_none(), "{n:#?}");
    assert!(
        !n.iter().any(|s| s.contains("lower bound")),
        "complete capture: {n:#?}"
    );
}
