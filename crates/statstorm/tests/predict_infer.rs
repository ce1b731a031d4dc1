//! Inference that is honest: what a capture cannot show is not inferred.
//! A capture made under open_basedir shows no realpath cache hit whatever
//! realpath_cache_size is (R58: open_basedir disables the cache), so the
//! size stays PHP's default, assumed; removing open_basedir then predicts
//! the same site's capture without it. Each pair below was recorded by
//! scripts/php-harness on the same application: `-obd` under open_basedir,
//! `-nooc` without it (OPcache off in both), `-rcs16k` with a 16K realpath
//! cache. No setting is stated by hand.

mod common;

use serde_json::Value;
use std::path::PathBuf;

const CHECKED: [&str; 4] = ["newfstatat", "openat", "access", "readlink"];

/// `name` in tests/fixtures/php, or `php-vt0/NAME` in tests/fixtures/php-vt0.
fn fixture(name: &str) -> String {
    let (sub, name) = name.split_once('/').unwrap_or(("php", name));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(sub);
    for ext in ["strace.gz", "strace.zst"] {
        let p = dir.join(format!("{name}.{ext}"));
        if p.exists() {
            return p.display().to_string();
        }
    }
    panic!("fixture {name} missing in {}", dir.display());
}

fn predict(args: &[&str]) -> Value {
    common::json("predict", args)
}

/// Per request and checked syscall, the predicted `after` of `from` under
/// `change` is within max(5%, 2) of what `real` recorded.
fn predicts(from: &str, change: &[&str], real: &str) {
    let mut args = vec![fixture(from)];
    args.extend(change.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = predict(&args);
    let r = predict(&[&fixture(real)]);
    let (pq, rq) = (
        p["requests"].as_array().unwrap(),
        r["requests"].as_array().unwrap(),
    );
    assert_eq!(pq.len(), rq.len(), "{from} vs {real}: request counts");
    let mut misses = Vec::new();
    for (i, (a, b)) in pq.iter().zip(rq).enumerate() {
        for k in CHECKED {
            let x = a["after"]["by_syscall"][k].as_u64().unwrap_or(0);
            let y = b["recorded"]["by_syscall"][k].as_u64().unwrap_or(0);
            if x.abs_diff(y) > ((y as f64 * 0.05).floor() as u64).max(2) {
                misses.push(format!("request {i} {k}: predicted {x}, real {y}"));
            }
        }
    }
    assert!(
        misses.is_empty(),
        "{from} {change:?} vs {real}:\n{}",
        misses.join("\n")
    );
}

#[test]
fn removing_open_basedir_predicts_the_capture_without_it() {
    for app in [
        "fpm-tree",
        "fpm-filecheck",
        "fpm-mediawiki",
        "fpm-wordpress",
        "cli-tree",
        "cli-filecheck",
    ] {
        predicts(
            &format!("{app}-obd"),
            &["--php", "open_basedir="],
            &format!("{app}-nooc"),
        );
    }
}

#[test]
fn realpath_cache_size_16k_to_default_predicts_the_capture_with_it() {
    for app in ["fpm-mediawiki", "fpm-wordpress"] {
        predicts(
            &format!("{app}-rcs16k"),
            &["--php", "realpath_cache_size=4096K"],
            &format!("{app}-nooc"),
        );
    }
}

#[test]
fn a_setting_the_capture_cannot_show_is_listed_as_assumed() {
    let p = predict(&[&fixture("fpm-tree-obd")]);
    let prov = &p["recorded"]["provenance"];
    assert_eq!(prov["open_basedir"]["from"], "inferred", "{prov}");
    assert_eq!(prov["realpath_cache_size"]["from"], "default", "{prov}");
    assert_eq!(p["recorded"]["settings"]["realpath_cache_size"], "4194304");
}

/// A capture made with OPcache on that shows no validation where PHP's
/// default window (revalidate_freq=2) would have made them: the window is
/// inferred as the least that fits (or validate_timestamps=0, which gives
/// the same "before"), so the modelled "before" matches what was recorded
/// and predict does not warn. Before, the default was assumed and the
/// "before" of the later requests revalidated every script (fpm-tree-vt0
/// request 5: 39 newfstatat modelled, 0 recorded).
#[test]
fn a_window_without_validations_is_inferred_from_the_capture() {
    for name in [
        "fpm-tree-vt0",
        "fpm-tree-rf60",
        "fpm-override-fo-vt0",
        "fpm-mediawiki-rf60",
        "fpm-wordpress-rf60",
        "php-vt0/fpm-mediawiki-vt0",
        "php-vt0/fpm-wordpress-vt0",
    ] {
        let p = predict(&[&fixture(name)]);
        let rf: u64 = p["recorded"]["settings"]["opcache.revalidate_freq"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rf > 2, "{name}: revalidate_freq {rf}");
        assert_eq!(
            p["recorded"]["provenance"]["opcache.revalidate_freq"]["from"], "inferred",
            "{name}"
        );
        assert_eq!(
            p["before_check"]["requests_beyond"], 0,
            "{name}: {}",
            p["before_check"]
        );
    }
}

/// A capture made under validate_timestamps=0 toward OPcache off, nothing
/// stated: every request within max(5%, 2) of the same application's
/// capture without OPcache, recorded in the same harness run
/// (tests/fixtures/php-vt0). Before, MediaWiki's warm requests were
/// predicted at 167 newfstatat where PHP made 1,249.
#[test]
fn opcache_off_from_a_capture_under_validate_timestamps_0() {
    for app in ["fpm-mediawiki", "fpm-wordpress"] {
        predicts(
            &format!("php-vt0/{app}-vt0"),
            &["--php", "opcache.enable=0"],
            &format!("php-vt0/{app}-nooc"),
        );
    }
}

/// opcache.revalidate_path=1 shows as cached scripts opened again without
/// being read, the same script more than once (R62): inferred from the two
/// tree captures made with it, and from no capture made without it (a
/// script loaded from OPcache's file cache is opened so once, by the
/// first worker that uses it under another name: fpm-wordpress-fc).
#[test]
fn revalidate_path_is_inferred_only_where_it_was_set() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/php");
    let manifest = std::fs::read_to_string(dir.join("manifest.jsonl")).unwrap();
    let mut inferred = Vec::new();
    for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
        let m: Value = serde_json::from_str(line).unwrap();
        let name = m["name"].as_str().unwrap();
        let set = m["config"]["opcache.revalidate_path"] == "1";
        let p = predict(&[&fixture(name)]);
        let got = p["recorded"]["settings"]["opcache.revalidate_path"] == "1";
        if got {
            inferred.push(name.to_string());
            assert!(
                set,
                "{name}: revalidate_path=1 inferred, recorded without it"
            );
            assert_eq!(
                p["recorded"]["provenance"]["opcache.revalidate_path"]["from"], "inferred",
                "{name}"
            );
            assert_eq!(p["before_check"]["requests_beyond"], 0, "{name}");
        }
    }
    assert_eq!(inferred, ["fpm-tree-rpath1", "fpm-tree-rpath1-vp"]);
}
