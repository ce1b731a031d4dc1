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

/// At least 100 captures predicted, and none of them warned.
fn none_warn(warned: &[String], n: usize) {
    assert!(n >= 100, "only {n} captures");
    assert!(
        warned.is_empty(),
        "{} of {n} warn:\n{}",
        warned.len(),
        warned.join("\n")
    );
}

/// Every capture of the harness (tests/fixtures/php and php-vt0): its
/// name (`php/NAME`), manifest line and trace.
fn harness() -> Vec<(String, Value, std::path::PathBuf)> {
    let mut out = Vec::new();
    for sub in ["php", "php-vt0"] {
        let dir = fixtures(sub);
        let manifest = std::fs::read_to_string(dir.join("manifest.jsonl")).unwrap();
        for line in manifest.lines().filter(|l| !l.trim().is_empty()) {
            let m: Value = serde_json::from_str(line).unwrap();
            let name = m["name"].as_str().unwrap().to_string();
            let trace = ["strace.gz", "strace.zst"]
                .iter()
                .map(|e| dir.join(format!("{name}.{e}")))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{sub}/{name}: in the manifest, not on disk"));
            out.push((format!("{sub}/{name}"), m, trace));
        }
    }
    out
}

/// Every capture of the harness (tests/fixtures/php and php-vt0) with the
/// settings of its manifest line stated.
#[test]
fn no_committed_capture_warns_under_the_settings_it_was_recorded_with() {
    let mut warned = Vec::new();
    let captures = harness();
    for (name, m, trace) in &captures {
        let mut args = Vec::new();
        for (k, v) in m["config"].as_object().unwrap() {
            args.push("--from-php".to_string());
            args.push(format!("{k}={}", v.as_str().unwrap()));
        }
        let p: Value = serde_json::from_str(&predict(trace, &args, "json")).unwrap();
        if p["before_check"]["requests_beyond"] != 0 {
            warned.push(format!("{name}: {}", p["before_check"]));
        }
    }
    none_warn(&warned, captures.len());
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
    // the one change that gives the capture back: OPcache on
    let e = &c["explained"][0];
    assert_eq!(e["setting"], "opcache.enable", "{c}");
    assert_eq!(e["value"], "1", "{c}");
    assert_eq!(e["fixed"], e["missed"], "{c}");
    assert_eq!(e["broken"], 0, "{c}");
    assert!(
        text.contains("opcache.enable=1 gives back")
            && text.contains("the recorded opcache.enable is likely wrong"),
        "{text}"
    );
}

/// A capture of processes under different settings, nothing stated: one
/// lab block's traces in one predict (php-fpm pools without and with
/// open_basedir, without the realpath cache, OPcache on and off, php-cli
/// runs). The settings inferred for all (open_basedir from the pools that
/// had it) miss most requests; the warning's trials name what the others
/// ran without (open_basedir unset gives back most of those that missed
/// among the first requests, none that matched breaks) and say the
/// requests may have run under different settings.
#[test]
fn mixed_settings_name_the_change_that_gives_requests_back() {
    let block = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/nfs-lab/strace/3/defaults");
    let mut traces: Vec<String> = std::fs::read_dir(&block)
        .unwrap_or_else(|e| panic!("lab fixtures missing at {}: {e}", block.display()))
        .map(|f| f.unwrap().path().display().to_string())
        .collect();
    traces.sort();
    let mut args = traces.clone();
    args.extend(["--format".to_string(), "json".to_string()]);
    let p: Value = serde_json::from_str(&common::run("predict", &args)).unwrap();
    let c = &p["before_check"];
    assert!(c["requests_beyond"].as_u64().unwrap() > 30, "{c}");
    let e = &c["explained"][0];
    assert_eq!(e["setting"], "open_basedir", "{c}");
    assert_eq!(e["value"], "", "{c}");
    let (fixed, missed) = (e["fixed"].as_u64().unwrap(), e["missed"].as_u64().unwrap());
    assert!(fixed * 3 >= missed * 2 && fixed < missed, "{c}");
    assert_eq!(e["broken"], 0, "{c}");
    let text = common::run("predict", &traces);
    assert!(
        text.contains("open_basedir=(unset) gives back")
            && text.contains("the requests may have run under different settings"),
        "{text}"
    );
}

/// Every capture of the harness with nothing stated: the settings the
/// trace shows are inferred and none warns. Where the window 0 or no
/// realpath cache is inferred, the capture was recorded with it. Before,
/// fpm-override-rf2 took a script validated again within one second (a
/// changed script) for `opcache.revalidate_freq=0`, and fpm-filecheck-rp0's
/// repeated walks were left unexplained (the budget search never tried
/// no cache): both warned.
#[test]
fn no_committed_capture_warns_with_nothing_stated() {
    let mut warned = Vec::new();
    let captures = harness();
    for (name, m, trace) in &captures {
        let p: Value = serde_json::from_str(&predict(trace, &[], "json")).unwrap();
        if p["before_check"]["requests_beyond"] != 0 {
            warned.push(format!("{name}: {}", p["before_check"]));
        }
        for key in ["opcache.revalidate_freq", "realpath_cache_size"] {
            if p["recorded"]["provenance"][key]["from"] == "inferred"
                && p["recorded"]["settings"][key] == "0"
            {
                assert_eq!(m["config"][key], "0", "{name}: {key}=0 inferred");
            }
        }
    }
    none_warn(&warned, captures.len());
}

/// Every capture of the NFS lab (`../shared/fixtures/nfs-lab/strace`: one
/// scenario each, php-fpm pools and php-cli runs under OPcache and realpath
/// settings of their own) predicted alone with nothing stated: the
/// settings the trace shows are inferred, so none warns. The pools run
/// with `opcache.revalidate_freq=0` validated again 1 or 2 s apart, where
/// PHP's default window (2 s) skips a validation the capture made.
#[test]
fn no_lab_capture_warns_with_the_settings_inferred() {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/nfs-lab/strace");
    let mut traces: Vec<std::path::PathBuf> = Vec::new();
    for vers in std::fs::read_dir(&lab)
        .unwrap_or_else(|e| panic!("lab fixtures missing at {}: {e}", lab.display()))
    {
        for set in std::fs::read_dir(vers.unwrap().path()).unwrap() {
            for f in std::fs::read_dir(set.unwrap().path()).unwrap() {
                traces.push(f.unwrap().path());
            }
        }
    }
    traces.sort();
    let mut warned = Vec::new();
    let mut revalidate = 0;
    for t in &traces {
        let p: Value = serde_json::from_str(&predict(t, &[], "json")).unwrap();
        if p["before_check"]["requests_beyond"] != 0 {
            warned.push(format!("{}: {}", t.display(), p["before_check"]));
        }
        if t.to_string_lossy().contains("fpm_oc_rf0-series") {
            assert!(
                p.to_string().contains("opcache.revalidate_freq=0"),
                "{}: revalidate_freq=0 not inferred",
                t.display()
            );
            revalidate += 1;
        }
    }
    assert!(traces.len() >= 50, "only {} lab captures", traces.len());
    assert!(revalidate >= 2, "fpm_oc_rf0 captures: {revalidate}");
    assert!(
        warned.is_empty(),
        "{} of {} warn:\n{}",
        warned.len(),
        traces.len(),
        warned.join("\n")
    );
}

/// php-cli runs under settings of their own (`php -d KEY=VALUE`, as the
/// NFS lab runs them: open_basedir, realpath_cache_size=0, OPcache's file
/// cache) beside runs under the php.ini alone, in one capture, nothing
/// stated: each process is lowered under its command line's settings, the
/// capture's settings are read from the others, and none warns. Before,
/// one set was inferred for all (open_basedir from the obd runs: 5,835
/// newfstatat modelled for runs that made 1,313). A php.ini change does
/// not reach a setting a command line states: removing open_basedir leaves
/// the obd runs as they were.
#[test]
fn cli_runs_keep_the_settings_of_their_command_line() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/nfs-lab/strace/3/defaults");
    let names = [
        "cli_inc-warm1",
        "cli_inc_rp0-warm",
        "cli_inc_obd-warm",
        "cli_inc_obd_rp0-warm",
        "cli_inc-warm2",
        "cli_inc_opc_filecache-fill",
        "cli_inc_opc_filecache-hit",
    ];
    let mut args: Vec<String> = names
        .iter()
        .map(|n| dir.join(format!("{n}.strace.gz")).display().to_string())
        .collect();
    let (first, rest) = args.split_first().unwrap();
    let p: Value = serde_json::from_str(&predict(Path::new(first), rest, "json")).unwrap();
    assert_eq!(p["requests"].as_array().unwrap().len(), names.len());
    assert_eq!(
        p["before_check"]["requests_beyond"], 0,
        "{}",
        p["before_check"]
    );
    let settings = &p["recorded"]["settings"];
    assert_eq!(settings["open_basedir"], "", "{settings}");
    assert_eq!(settings["opcache.file_cache"], "", "{settings}");
    let text = p.to_string();
    assert!(text.contains("php-cli command lines state"), "no note");
    args.extend(["--php".to_string(), "open_basedir=".to_string()]);
    let (first, rest) = args.split_first().unwrap();
    let p: Value = serde_json::from_str(&predict(Path::new(first), rest, "json")).unwrap();
    // the two obd runs (7,225 newfstatat under open_basedir) as they were
    let obd: Vec<&Value> = p["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["before"]["by_syscall"]["newfstatat"].as_u64().unwrap() > 7000)
        .collect();
    assert_eq!(obd.len(), 2, "{}", p["requests"]);
    for r in obd {
        assert_eq!(r["before"], r["after"], "{r}");
    }
}
