//! `statstorm simulate` on the shipped scenarios (run in release:
//! `cargo test --workspace --release`; seed 001 simulates ~576 million
//! events).

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn run(args: &[&str]) -> (String, String, i32) {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .arg("simulate")
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

fn json(name: &str) -> Value {
    let p = scenario(name);
    let (out, err, code) = run(&[p.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "statstorm.simulate/1");
    let rq = &v["requests"];
    assert_eq!(
        rq["arrived"].as_u64().unwrap(),
        rq["served"].as_u64().unwrap() + rq["dropped"].as_u64().unwrap(),
        "conservation"
    );
    for k in ["p50", "p90", "p99", "max"] {
        assert!(v["ttfb_ms"][k].is_number(), "ttfb_ms.{k}");
    }
    for k in ["max_wait_ms", "mean_wait_ms"] {
        assert!(v["slots"][k].is_number(), "slots.{k}");
    }
    assert!(v["server"]["utilisation"].is_number());
    assert!(v["server"]["ops"].is_object());
    assert!(v["engine"]["events"].as_u64().unwrap() > 0);
    assert!(v["engine"]["wall_ms"].is_number());
    for l in v["littles_law"].as_array().unwrap() {
        assert!(l["rel_err"].as_f64().unwrap() < 1e-9, "{l}");
    }
    v
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn simulate_seed_000_stall_of_about_3_s_every_minute() {
    let v = json("seed-000.toml");
    let stalls = v["stalls"].as_array().unwrap();
    assert!(
        stalls.len() >= 30,
        "one revalidation wave per minute: {}",
        stalls.len()
    );
    // Waves recur every revalidate_freq + 1 s (R64): median gap 55-70 s.
    let starts: Vec<f64> = stalls.iter().map(|s| f(&s["start_s"])).collect();
    let mut gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let gap = gaps[gaps.len() / 2];
    assert!((55.0..=70.0).contains(&gap), "median gap {gap} s");
    // The first waves last about 180 x 20 ms: of the order of 3 s.
    let mut first: Vec<f64> = stalls[..10].iter().map(|s| f(&s["duration_ms"])).collect();
    first.sort_by(f64::total_cmp);
    assert!(
        (2000.0..=4000.0).contains(&first[5]),
        "median of the first 10: {first:?}"
    );
    let longest = stalls
        .iter()
        .map(|s| f(&s["duration_ms"]))
        .fold(0.0, f64::max);
    assert!((2500.0..=4000.0).contains(&longest), "longest {longest}");
    for s in stalls {
        assert_eq!(s["cause"], "iops_throttle", "{s}");
        // Sequential stat(): never more RPCs in flight than workers checking.
        assert!(
            s["max_rpcs_in_flight"].as_u64().unwrap()
                <= s["max_workers_validating"].as_u64().unwrap()
        );
    }
    // Fewer than 16 RPCs in flight: no slot wait at all.
    assert!(v["slots"]["max_rpcs_in_flight"].as_u64().unwrap() < 16);
    assert_eq!(f(&v["slots"]["max_wait_ms"]), 0.0);
    assert_eq!(v["requests"]["dropped"], 0);
}

#[test]
fn simulate_seed_000_text_explains_the_stall() {
    let p = scenario("seed-000.toml");
    let (out, err, code) = run(&[p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "one worker never has more than 1 RPC in flight",
        "workers were checking at once",
        "slot waits are nil",
        "(1980/16) x 20 ms = 2.48 s",
        "180 x 20 ms = 3.60 s",
        "180 x 2 ms = 360.0 ms",
        "Episode length drifts",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
}

#[test]
fn simulate_seed_000_fixed_has_no_stall() {
    let v = json("seed-000-fixed.toml");
    assert_eq!(v["stalls"].as_array().unwrap().len(), 0);
    assert_eq!(f(&v["ttfb_ms"]["max"]), 45.0);
    assert_eq!(v["slots"]["rpcs"], 0);
}

#[test]
fn simulate_seed_001_drops_and_its_fix_does_not() {
    let v = json("seed-001.toml");
    let dropped = v["requests"]["dropped"].as_u64().unwrap();
    assert!(dropped > 0);
    let rate = f(&v["requests"]["drop_rate_pct"]);
    assert!(rate > 0.0 && rate < 1.0, "{rate}");
    assert_eq!(v["pool"]["max_backlog"], 128);
    assert!(v["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["cause"] == "local_lock"));
    let fixed = json("seed-001-fixed.toml");
    assert_eq!(fixed["requests"]["dropped"], 0);
    assert_eq!(f(&fixed["requests"]["drop_rate_pct"]), 0.0);
}

#[test]
fn simulate_seed_001_text_prints_the_rate() {
    let p = scenario("seed-001.toml");
    let (out, err, code) = run(&[p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("refused (502)"), "{out}");
    assert!(out.contains("requests were refused (502)"), "{out}");
    assert!(out.contains("40,000 concurrent calls"), "{out}");
}

#[test]
fn simulate_same_seed_same_bytes() {
    let p = scenario("seed-000.toml");
    let a = run(&[
        p.to_str().unwrap(),
        "--format",
        "json",
        "--reproducible",
        "--seed",
        "7",
    ]);
    let b = run(&[
        p.to_str().unwrap(),
        "--format",
        "json",
        "--reproducible",
        "--seed",
        "7",
    ]);
    let c = run(&[
        p.to_str().unwrap(),
        "--format",
        "json",
        "--reproducible",
        "--seed",
        "8",
    ]);
    assert_eq!(a.2, 0);
    assert_eq!(a.0, b.0);
    assert_ne!(a.0, c.0);
    let v: Value = serde_json::from_str(&a.0).unwrap();
    assert!(v["engine"]["wall_ms"].is_null());
}

#[test]
fn simulate_stall_ms_flag_changes_the_threshold() {
    let p = scenario("seed-000.toml");
    let (out, _, _) = run(&[p.to_str().unwrap(), "--format", "json", "--stall-ms", "100"]);
    let (out2, _, _) = run(&[
        p.to_str().unwrap(),
        "--format",
        "json",
        "--stall-ms",
        "3000",
    ]);
    let n = |s: &str| {
        serde_json::from_str::<Value>(s).unwrap()["stalls"]
            .as_array()
            .unwrap()
            .len()
    };
    assert!(n(&out) > n(&out2));
}

#[test]
fn simulate_bad_scenario_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        "name = \"x\"\nduration_s = 10\n[arrivals]\nkind = \"sometimes\"\n",
    )
    .unwrap();
    let (_, err, code) = run(&[p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("line 4"), "{err}");
    let (_, err, code) = run(&[dir.path().join("missing.toml").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.toml"), "{err}");
}

#[test]
fn simulate_requests_file_replayed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("reqs.json"),
        r#"{"schema": "statstorm.requests/1", "requests": [
            {"start_s": 0.0, "steps": [{"cpu_ms": 5}, {"rpcs": ["LOOKUP", "GETATTR"]}, {"rpcs": []}]},
            {"start_s": 0.001, "steps": [{"rpcs": ["GETATTR"]}, {"cpu_ms": 1}]}
        ]}"#,
    )
    .unwrap();
    let sc = dir.path().join("s.toml");
    std::fs::write(
        &sc,
        "name = \"replay\"\nduration_s = 1\n[arrivals]\nkind = \"replay\"\n[workload]\nkind = \"file\"\n\
         file = \"reqs.json\"\n[pool]\nmax_children = 1\nlisten_backlog = 1\n[transport]\nsession_slots = 1\n\
         [server]\nrtt_ms = 1.0\nservice = { kind = \"fixed\", ms = 1.0 }\n",
    )
    .unwrap();
    let (out, err, code) = run(&[sc.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    // One worker: the second request waits in the backlog for the first
    // (5 ms CPU + 2 RPCs x 2 ms = 9 ms), then runs 2 + 1 ms.
    assert_eq!(v["requests"]["served"], 2);
    assert_eq!(f(&v["ttfb_ms"]["max"]), 11.0);
    assert_eq!(v["server"]["ops"]["GETATTR"], 2);
    assert_eq!(v["server"]["ops"]["LOOKUP"], 1);
    // A bad requests file is named with its line.
    std::fs::write(
        dir.path().join("reqs.json"),
        "{\"schema\": \"statstorm.requests/1\",\n \"requests\": [}",
    )
    .unwrap();
    let (_, err, code) = run(&[sc.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("reqs.json") && err.contains("line 2"), "{err}");
}

/// A workload file (predict --workload-out) given as a requests file is
/// named as such, not only as a field the parser did not expect.
#[test]
fn a_workload_file_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    let trace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/php/fpm-tree-rf0.strace.gz");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_statstorm"))
        .arg("predict")
        .arg(&trace)
        .arg("--workload-out")
        .arg(&w)
        .output()
        .unwrap();
    assert!(out.status.success());
    let sc = dir.path().join("s.toml");
    std::fs::write(
        &sc,
        "name = \"w\"\nduration_s = 1\n[arrivals]\nkind = \"replay\"\n[workload]\nkind = \"file\"\n\
         file = \"w.json\"\n[pool]\nmax_children = 1\nlisten_backlog = 1\n[transport]\nsession_slots = 1\n\
         [server]\nrtt_ms = 1.0\nservice = { kind = \"fixed\", ms = 1.0 }\n",
    )
    .unwrap();
    let (_, err, code) = run(&[sc.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("a statstorm.workload/1 file, not statstorm.requests/1"),
        "{err}"
    );
}
