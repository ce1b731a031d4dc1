//! The latency columns of `statstorm predict` on the NFS lab's php-fpm
//! traces (../shared/fixtures/nfs-lab, NFSv3, default options).

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

fn lab() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/nfs-lab")
}

/// The lab trace `strace/3/defaults/<name>.strace.gz` and the mount
/// options it ran under (from runs.jsonl).
fn lab_run(name: &str) -> (String, String) {
    lab_run_vers("3", name)
}

fn lab_run_vers(vers: &str, name: &str) -> (String, String) {
    let rel = format!("strace/{vers}/defaults/{name}.strace.gz");
    let runs = std::fs::read_to_string(lab().join("runs.jsonl"))
        .expect("../shared/fixtures/nfs-lab/runs.jsonl (the NFS lab fixtures) must exist");
    let opts = runs
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("runs.jsonl line"))
        .find(|v| v["strace"] == rel.as_str())
        .unwrap_or_else(|| panic!("no run of {rel} in runs.jsonl"))["mount_options"]
        .as_str()
        .unwrap()
        .to_string();
    let p = lab().join(&rel);
    assert!(p.exists(), "lab trace {} missing", p.display());
    (p.to_str().unwrap().to_string(), opts)
}

fn predict(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("statstorm")
        .unwrap()
        .arg("predict")
        .args(args)
        .output()
        .unwrap()
}

fn predict_json(name: &str, extra: &[&str]) -> Value {
    predict_json_vers("3", name, extra)
}

fn predict_json_vers(vers: &str, name: &str, extra: &[&str]) -> Value {
    let (trace, opts) = lab_run_vers(vers, name);
    let mut args = vec![
        trace.as_str(),
        "--from-mount",
        opts.as_str(),
        "--nfs-root",
        "/mnt/nfs",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = predict(&args);
    assert!(
        out.status.success(),
        "statstorm predict {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn f(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

/// Per-request (before, after) simulated TTFB.
fn per_request(v: &Value) -> Vec<(f64, f64)> {
    v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| (f(&q["before"]["latency_ms"]), f(&q["after"]["latency_ms"])))
        .collect()
}

fn rpc_sum(v: &Value) -> u64 {
    v.as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum()
}

#[test]
fn json_latency_fields_present_and_typed() {
    let v = predict_json("fpm_nooc-series", &["--mount", "nocto"]);
    assert_eq!(v["schema"], "statstorm.predict/1");
    let l = &v["latency"];
    assert_eq!(l["simulated"], true);
    for side in ["before", "after"] {
        let s = &l[side];
        for k in ["p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"] {
            assert!(f(&s[k]) > 0.0, "latency.{side}.{k} = {}", s[k]);
        }
        assert!(f(&s["p50_ms"]) <= f(&s["p90_ms"]));
        assert!(f(&s["p90_ms"]) <= f(&s["p99_ms"]));
        assert!(f(&s["p99_ms"]) <= f(&s["max_ms"]) + 0.01);
        assert_eq!(s["dropped"].as_u64(), Some(0), "latency.{side}.dropped");
        assert_eq!(s["served"].as_u64(), Some(4));
        // The simulated requests carry exactly the RPCs of the NFS columns.
        assert_eq!(
            s["rpcs"].as_u64().unwrap(),
            rpc_sum(&v["totals"][side]["rpc"]),
            "latency.{side}.rpcs vs totals.{side}.rpc"
        );
    }
    let a = l["assumptions"].as_array().unwrap();
    assert!(a.len() >= 5 && a.iter().all(|s| s.is_string()));
    assert!(a[0].as_str().unwrap().contains("estimate"));
    let p = &l["params"];
    assert_eq!(p["arrivals"], "replay");
    assert_eq!(p["workers"].as_u64(), Some(50));
    assert_eq!(p["slots_before"]["vers"], "3");
    assert_eq!(p["slots_before"]["session_slots"].as_u64(), Some(0));
    assert!(f(&l["recorded"]["max_ms"]) > 0.0);
    for q in v["requests"].as_array().unwrap() {
        for side in ["before", "after"] {
            assert!(f(&q[side]["latency_ms"]) > 0.0);
        }
    }
    // totals carry counts, not latencies
    assert!(v["totals"]["before"].get("latency_ms").is_none());
}

/// `nocto` and `actimeo=3600,nocto` remove GETATTRs (lab: 724 -> 181 and
/// -> 0 over the 4 requests, docs/nfs-model.md); no request gets slower and
/// the requests that lose RPCs get faster by about their RPC time.
#[test]
fn proposed_mount_that_removes_rpcs_is_not_slower() {
    for mount in ["nocto", "actimeo=3600,nocto"] {
        let v = predict_json("fpm_nooc-series", &["--mount", mount]);
        let (b, a) = (&v["latency"]["before"], &v["latency"]["after"]);
        assert!(a["rpcs"].as_u64() < b["rpcs"].as_u64(), "{mount}");
        for k in ["p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"] {
            assert!(f(&a[k]) <= f(&b[k]), "{mount}: after {k} > before");
        }
        assert!(f(&a["mean_ms"]) < f(&b["mean_ms"]), "{mount}");
        let reqs = v["requests"].as_array().unwrap();
        for ((lb, la), q) in per_request(&v).into_iter().zip(reqs) {
            assert!(la <= lb, "{mount}: request {q}");
            // Nothing is shared at this load: the saving is the removed
            // RPCs (0.5 ms round trip + 0.5 ms service each), less the
            // local cost (1.6 us) of a call left without any RPC.
            let removed = rpc_sum(&q["before"]["rpc"]) - rpc_sum(&q["after"]["rpc"]);
            let most = removed as f64;
            let least = most * (1.0 - 0.0016);
            assert!(
                lb - la > least - 0.01 && lb - la < most + 0.01,
                "{mount}: saved {} ms, {removed} RPCs removed",
                lb - la
            );
        }
    }
}

/// OPcache without timestamp validation drops the revalidation stats
/// (GETATTRs once the attribute cache has expired).
#[test]
fn validate_timestamps_off_is_not_slower() {
    let v = predict_json(
        "fpm_oc_rf2-series",
        &["--php", "opcache.validate_timestamps=0"],
    );
    let (b, a) = (&v["latency"]["before"], &v["latency"]["after"]);
    assert!(a["rpcs"].as_u64() < b["rpcs"].as_u64());
    assert!(f(&a["mean_ms"]) < f(&b["mean_ms"]));
    for (lb, la) in per_request(&v) {
        assert!(la <= lb, "after {la} > before {lb}");
    }
}

/// Raising the round trip adds exactly (new - old) ms per RPC to a request
/// whose RPCs meet no queue.
#[test]
fn higher_rtt_raises_latency_by_the_rpc_count() {
    let lo = predict_json("fpm_nooc-series", &["--mount", "nocto", "--rtt", "0.5"]);
    let hi = predict_json("fpm_nooc-series", &["--mount", "nocto", "--rtt", "5"]);
    for side in ["before", "after"] {
        assert!(
            f(&hi["latency"][side]["p50_ms"]) > f(&lo["latency"][side]["p50_ms"]),
            "{side}"
        );
        assert!(f(&hi["latency"][side]["max_ms"]) > f(&lo["latency"][side]["max_ms"]));
    }
    let reqs = lo["requests"].as_array().unwrap();
    for (i, ((bl, al), (bh, ah))) in per_request(&lo)
        .into_iter()
        .zip(per_request(&hi))
        .enumerate()
    {
        for (side, l, h) in [("before", bl, bh), ("after", al, ah)] {
            let n = rpc_sum(&reqs[i][side]["rpc"]) as f64;
            assert!(
                ((h - l) - n * 4.5).abs() < 0.05,
                "request {i} {side}: {l} -> {h} ms with {n} RPCs"
            );
        }
    }
}

#[test]
fn same_input_same_json() {
    let (trace, opts) = lab_run("fpm_nooc-series");
    for extra in [&[][..], &["--rate", "20", "--workers", "4"][..]] {
        let mut args = vec![
            trace.as_str(),
            "--from-mount",
            opts.as_str(),
            "--nfs-root",
            "/mnt/nfs",
            "--mount",
            "nocto",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let a = predict(&args);
        let b = predict(&args);
        assert!(a.status.success());
        assert_eq!(a.stdout, b.stdout, "{extra:?}");
    }
}

/// A synthetic rate past the pool's capacity queues requests in the
/// backlog: latency far above the replayed one, every request still ends.
#[test]
fn synthetic_rate_and_small_pool_queue() {
    let replay = predict_json("fpm_nooc-series", &[]);
    let v = predict_json("fpm_nooc-series", &["--rate", "5", "--workers", "2"]);
    let l = &v["latency"];
    assert_eq!(l["params"]["arrivals"], "poisson");
    assert_eq!(f(&l["params"]["rate_per_s"]), 5.0);
    // ~1.9 s per request on 2 workers serves ~1 request/s: overloaded.
    assert!(f(&l["before"]["p50_ms"]) > 10.0 * f(&replay["latency"]["before"]["max_ms"]));
    let s = &l["before"];
    assert!(s["served"].as_u64().unwrap() + s["dropped"].as_u64().unwrap() > 4);
}

/// Without NFS options the calls take the capture's own times (`-T`):
/// the pool is simulated all the same (issue 25 point 5); the NFS-only
/// flags are said to be ignored.
#[test]
fn without_nfs_options_calls_take_the_captures_times() {
    let (trace, _) = lab_run("fpm_nooc-series");
    let out = predict(&[
        &trace,
        "--rtt",
        "3",
        "--php",
        "opcache.enable=1",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let l = &v["latency"];
    assert_eq!(l["simulated"], true);
    let said = |s: &str| {
        l["assumptions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap().contains(s))
    };
    assert!(said("storage not NFS: a call takes its kind's time"));
    assert!(said("--rtt ignored"));
    assert_eq!(l["before"]["rpcs"], 0);
    // OPcache on: fewer calls, each at the capture's time, and the
    // simulated before follows the recorded wall times
    assert!(f(&l["after"]["mean_ms"]) < f(&l["before"]["mean_ms"]));
    let rec = f(&l["recorded"]["max_ms"]);
    let before = f(&l["before"]["max_ms"]);
    assert!((before - rec).abs() < 0.05 * rec, "{before} against {rec}");
    for q in v["requests"].as_array().unwrap() {
        assert!(q["before"]["latency_ms"].is_number());
    }
}

/// No NFS options and no `-T`: nothing to time.
#[test]
fn without_nfs_options_nor_durations_latency_is_not_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("cli.strace");
    std::fs::write(
        &t,
        "100 1700000000.000100 execve(\"/usr/bin/php\", [\"php\", \"/srv/a.php\"], 0x7ffd0 /* 1 var */) = 0\n\
         100 1700000000.000200 newfstatat(AT_FDCWD, \"/srv/a.php\", {st_mode=S_IFREG|0644, st_size=10, ...}, 0) = 0\n\
         100 1700000000.000300 openat(AT_FDCWD, \"/srv/a.php\", O_RDONLY) = 3\n\
         100 1700000000.000400 close(3) = 0\n",
    )
    .unwrap();
    let t = t.to_str().unwrap();
    let out = predict(&[t, "--rtt", "3", "--format", "json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["latency"]["simulated"], false);
    let reason = v["latency"]["reason"].as_str().unwrap();
    assert!(reason.contains("not simulated") && reason.contains("-T") && reason.contains("--rtt"));
    assert!(v["latency"].get("before").is_none());
    let text = predict(&[t]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("latency is not simulated"));
}

#[test]
fn text_shows_latency_beside_rpcs_and_the_assumptions() {
    let (trace, opts) = lab_run("fpm_nooc-series");
    let out = predict(&[
        &trace,
        "--from-mount",
        &opts,
        "--nfs-root",
        "/mnt/nfs",
        "--mount",
        "nocto",
    ]);
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    let header = t
        .lines()
        .find(|l| l.contains("GETATTR") || (l.contains(" G ") && l.contains("ttfb_ms")))
        .unwrap_or_else(|| panic!("no RPC header with ttfb_ms:\n{t}"));
    assert_eq!(header.matches("ttfb_ms").count(), 2, "{header}");
    assert!(t.contains("latency (simulated estimate, TTFB ms)"));
    assert!(t.contains("assumed:") && t.contains("(--rtt, default)"));
}

#[test]
fn bad_simulator_flags_name_the_flag() {
    let (trace, opts) = lab_run("fpm_nooc-series");
    for (flag, val) in [
        ("--workers", "0"),
        ("--rate", "0"),
        ("--burst", "10"),
        ("--rtt", "nan"),
        ("--slots", "0"),
    ] {
        let out = predict(&[
            &trace,
            "--from-mount",
            &opts,
            "--nfs-root",
            "/mnt/nfs",
            flag,
            val,
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag} {val}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag}: {err}");
    }
}

/// On NFSv4.1 `--slots` is the session slot table (R44): 40 workers near
/// saturation with one slot wait for it, with 64 they do not.
#[test]
fn slots_are_session_slots_on_v41() {
    let run = |slots: &str| {
        predict_json_vers(
            "4.1",
            "fpm_nooc-series",
            &["--rate", "20", "--workers", "40", "--slots", slots],
        )["latency"]
            .take()
    };
    let (one, many) = (run("1"), run("64"));
    assert_eq!(one["params"]["slots_before"]["vers"], "4.1");
    assert_eq!(
        one["params"]["slots_before"]["session_slots"].as_u64(),
        Some(1)
    );
    assert_eq!(
        many["params"]["slots_after"]["session_slots"].as_u64(),
        Some(64)
    );
    assert!(f(&one["before"]["max_slot_wait_ms"]) > 0.0);
    assert_eq!(f(&many["before"]["max_slot_wait_ms"]), 0.0);
    assert!(f(&one["before"]["mean_ms"]) > f(&many["before"]["mean_ms"]));
}

/// With an IOPS budget the server queues RPCs; a pool held up by them
/// refuses requests (502) once its listen queue (php-fpm's 511 before
/// PHP 8.2) is full. The proposed mount, with fewer RPCs, refuses fewer.
#[test]
fn iops_budget_drops_fewer_requests_after() {
    let v = predict_json(
        "fpm_nooc-series",
        &[
            "--mount",
            "actimeo=3600,nocto",
            "--rate",
            "2",
            "--workers",
            "4",
            "--iops",
            "200",
            "--listen-backlog",
            "511",
        ],
    );
    let l = &v["latency"];
    assert_eq!(l["params"]["listen_backlog"], 511);
    assert_eq!(f(&l["params"]["iops"]), 200.0);
    assert_eq!(f(&l["params"]["burst"]), 200.0);
    let (b, a) = (&l["before"], &l["after"]);
    assert!(b["dropped"].as_u64().unwrap() > a["dropped"].as_u64().unwrap());
    assert!(f(&b["p50_ms"]) > f(&a["p50_ms"]));
}

/// With free RPCs (`--rtt 0 --server-latency 0`) a request's simulated
/// TTFB is its CPU time, recorded wall time minus the recorded durations
/// of its filesystem calls, plus 1.6 us per call that sends no RPC.
#[test]
fn free_rpcs_leave_the_recorded_cpu_time() {
    let (trace, _) = lab_run("fpm_nooc-series");
    let v = predict_json("fpm_nooc-series", &["--rtt", "0", "--server-latency", "0"]);
    let t = statstorm_trace::read_path(std::path::Path::new(&trace)).unwrap();
    let split = statstorm_php::request::split_requests(&t.events, &t.strings);
    let fs_ms: Vec<f64> = statstorm_php::lift::request_ops(&t, &split)
        .iter()
        .map(|ops| ops.iter().filter_map(|o| o.dur_us).sum::<u64>() as f64 / 1e3)
        .collect();
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), fs_ms.len());
    for (i, (q, fs)) in reqs.iter().zip(&fs_ms).enumerate() {
        assert!(*fs > 0.0, "request {i}: the lab traces carry -T durations");
        let wall_ms = (f(&q["end"]) - f(&q["start"])) * 1e3;
        let cpu = wall_ms - fs;
        let calls: u64 = q["before"]["by_syscall"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        let got = f(&q["before"]["latency_ms"]);
        // epoch seconds as f64 lose ~0.2 us; the engine rounds to 1 us
        assert!(
            got > cpu - 0.01 && got < cpu + calls as f64 * 0.0016 + 0.01,
            "request {i}: {got} ms, CPU {cpu} ms, {calls} calls"
        );
    }
}

/// `--nfs-cache warm`: the lab's php-cli file_exists loop run right after
/// the same run (cli_fe warm: 2001 GETATTR measured, nothing else) is
/// predicted from its own trace on a client warmed by it; the default cold
/// client pays the first run's LOOKUPs and ACCESSes instead.
#[test]
fn warm_nfs_cache_predicts_a_run_that_followed_the_same_work() {
    for vers in ["3", "4.1"] {
        let warm = predict_json_vers(vers, "cli_fe-warm", &["--nfs-cache", "warm"]);
        let cold = predict_json_vers(vers, "cli_fe-warm", &[]);
        let rpc = |v: &Value, op: &str| v["totals"]["before"]["rpc"][op].as_u64().unwrap_or(0);
        let getattr = rpc(&warm, "GETATTR");
        assert!(
            getattr.abs_diff(2001) <= 100,
            "v{vers} warm: GETATTR {getattr}, lab 2001"
        );
        assert_eq!(rpc(&warm, "LOOKUP"), 0, "v{vers} warm: {}", warm["totals"]);
        assert_eq!(rpc(&warm, "ACCESS"), 0, "v{vers} warm: {}", warm["totals"]);
        assert!(
            rpc(&cold, "LOOKUP") > 2000,
            "v{vers} cold: {}",
            cold["totals"]
        );
        let note = |v: &Value| {
            v["notes"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|n| n.as_str())
                .any(|n| n.starts_with("NFS client caches warm"))
        };
        assert!(note(&warm) && !note(&cold));
    }
}

/// php-fpm 8.2 listens with -1 when its pool states no listen.backlog:
/// Linux gives it net.core.somaxconn (4096 since 5.4), not 511.
#[test]
fn listen_backlog_defaults_to_php_fpm_8_2s() {
    let v = predict_json("fpm_nooc-series", &[]);
    let l = &v["latency"];
    assert_eq!(l["params"]["listen_backlog"], 4096);
    assert!(l["assumptions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a.as_str().unwrap().contains("listen.backlog 4096")));
}
