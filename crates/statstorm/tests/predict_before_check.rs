//! The modelled "before" against what the capture recorded: with the
//! settings a capture was really recorded under stated, no committed
//! capture warns; with a wrong one stated, predict shows both counts and
//! warns, naming the settings to check.

mod common;

use common::fixtures;
use serde_json::Value;
use std::path::Path;

fn predict(trace: &Path, args: &[String], format: &str) -> String {
    let mut all = vec![trace.display().to_string()];
    all.extend(args.iter().cloned());
    all.extend(["--format".to_string(), format.to_string()]);
    common::run("predict", &all)
}

/// Every capture of the harness (tests/fixtures/php and php-vt0) with the
/// settings of its manifest line stated.
#[test]
fn no_committed_capture_warns_under_the_settings_it_was_recorded_with() {
    let mut warned = Vec::new();
    let mut n = 0;
    for sub in ["php", "php-vt0"] {
        let dir = fixtures(sub);
        let manifest = std::fs::read_to_string(dir.join("manifest.jsonl")).unwrap();
        for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
            let m: Value = serde_json::from_str(line).unwrap();
            let name = m["name"].as_str().unwrap();
            let Some(trace) = ["strace.gz", "strace.zst"]
                .iter()
                .map(|e| dir.join(format!("{name}.{e}")))
                .find(|p| p.exists())
            else {
                panic!("{sub}/{name}: in the manifest, not on disk");
            };
            let mut args = Vec::new();
            for (k, v) in m["config"].as_object().unwrap() {
                args.push("--from-php".to_string());
                args.push(format!("{k}={}", v.as_str().unwrap()));
            }
            let p: Value = serde_json::from_str(&predict(&trace, &args, "json")).unwrap();
            n += 1;
            if p["before_check"]["requests_beyond"] != 0 {
                warned.push(format!("{sub}/{name}: {}", p["before_check"]));
            }
        }
    }
    assert!(n >= 100, "only {n} captures");
    assert!(
        warned.is_empty(),
        "{} warn:\n{}",
        warned.len(),
        warned.join("\n")
    );
}

/// A capture made with OPcache on, stated as recorded with OPcache off:
/// the modelled "before" recompiles every script, the recorded calls do
/// not, and the report says so (both counts, the settings to check).
#[test]
fn a_wrong_stated_setting_shows_the_gap_and_warns() {
    let trace = fixtures("php").join("fpm-tree-rf2.strace.gz");
    let wrong = ["--from-php".to_string(), "opcache.enable=0".to_string()];
    let p: Value = serde_json::from_str(&predict(&trace, &wrong, "json")).unwrap();
    let c = &p["before_check"];
    assert!(c["requests_beyond"].as_u64().unwrap() > 0, "{c}");
    let g = &c["gaps"][0];
    assert!(
        g["modelled"].as_u64().unwrap() > g["recorded"].as_u64().unwrap(),
        "{g}"
    );
    assert!(
        c["suspects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "opcache.enable"),
        "{c}"
    );
    let text = predict(&trace, &wrong, "text");
    let line = text
        .lines()
        .find(|l| l.starts_with("warning: the modelled \"before\""))
        .expect("a warning line");
    assert!(
        line.contains("modelled") && line.contains("recorded") && line.contains("opcache.enable"),
        "{line}"
    );
}
