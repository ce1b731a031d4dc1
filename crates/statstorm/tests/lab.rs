//! `statstorm lab` end to end: the PHP harness's include-tree captures
//! (tests/fixtures/php, scripts/php-harness: php-cli, and a php-fpm pool
//! serving the tree and the file-check loop) replayed through the real
//! Linux NFS client in the qemu guest under v3 defaults, v4.1 defaults,
//! `actimeo=3600,nocto` and `lookupcache=none`: the kernel's and the
//! model's counts agree within max(5%, 2) per procedure and request. Needs
//! qemu and the guest's packages (scripts/install-deps); fails when one is
//! missing.

mod live;

use assert_cmd::Command;
use live::need;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The root the harness's captures were made in (scripts/php-harness).
const HARNESS_ROOT: &str = "/tmp/statstorm-lab";

const SETS: [&str; 4] = [
    "vers=3",
    "vers=4.1",
    "vers=3,actimeo=3600,nocto",
    "vers=3,lookupcache=none",
];

/// `statstorm lab`, with the replayer this build made.
fn statstorm_lab() -> Command {
    let mut c = Command::cargo_bin("statstorm").unwrap();
    c.arg("lab")
        .env("STATSTORM_REPLAY", env!("CARGO_BIN_EXE_statstorm-replay"));
    c
}

/// Runs `statstorm lab` on `capture` under [`SETS`], returns its JSON.
fn lab_json(capture: &Path, root: &Path) -> Value {
    let mut cmd = statstorm_lab();
    cmd.arg(capture)
        .arg("--nfs-root")
        .arg(root)
        .args(["--format", "json"]);
    for s in SETS {
        cmd.args(["--mount", s]);
    }
    let out = cmd.timeout(Duration::from_secs(1200)).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): status {:?}\nstderr: {}\nstdout: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["schema"], "statstorm.lab/1");
    v
}

/// Every request of every run agrees; returns the requests per run and
/// the total kernel RPCs (so a replay that sent nothing cannot pass).
fn assert_agrees(v: &Value, what: &str) -> (Vec<usize>, u64) {
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), SETS.len(), "{what}");
    let mut per_run = Vec::new();
    let mut total = 0;
    let mut bad = Vec::new();
    for r in runs {
        let report = r["replay"]["report"].as_str().unwrap();
        assert!(
            report.contains(" 0 not "),
            "{what} {}: the replay's results differ from the capture's: {report}",
            r["options"]
        );
        let reqs = r["requests"].as_array().unwrap();
        per_run.push(reqs.len());
        for q in reqs {
            total += q["kernel"]["rpc"]
                .as_object()
                .unwrap()
                .values()
                .map(|n| n.as_u64().unwrap())
                .sum::<u64>();
            if q["agrees"] != true {
                bad.push(format!(
                    "vers={} {} pid {} request {}: misses {} kernel {} model {}",
                    r["vers"],
                    r["options"],
                    q["pid"],
                    q["request"],
                    q["misses"],
                    q["kernel"]["rpc"],
                    q["model"]["rpc"]
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{what}: kernel and model disagree:\n{}",
        bad.join("\n")
    );
    assert_eq!(v["agrees"], true);
    (per_run, total)
}

fn need_lab() {
    for t in ["qemu-system-x86_64", "mkfs.ext4", "rpc.nfsd", "mount.nfs"] {
        need(t);
    }
}

/// One guest at a time (the lab's TCG guests each want a core).
static SERIAL: Mutex<()> = Mutex::new(());

fn harness_capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/php")
        .join(format!("{name}.strace.gz"))
}

#[test]
fn php_cli_include_tree_kernel_and_model_agree() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_lab();
    let v = lab_json(&harness_capture("cli-tree-nooc"), Path::new(HARNESS_ROOT));
    let (per_run, total) = assert_agrees(&v, "cli-tree-nooc");
    assert!(per_run.iter().all(|&n| n == 1), "{per_run:?}");
    assert!(total > 50, "{total} kernel RPCs in all");
}

#[test]
fn php_fpm_include_tree_kernel_and_model_agree() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_lab();
    for name in ["fpm-tree-nooc", "fpm-filecheck-nooc"] {
        let v = lab_json(&harness_capture(name), Path::new(HARNESS_ROOT));
        let (per_run, total) = assert_agrees(&v, name);
        // the requests of the pool's two workers (the master serves none)
        assert!(per_run.iter().all(|&n| n >= 6), "{name}: {per_run:?}");
        assert!(total > 100, "{name}: {total} kernel RPCs in all");
    }
}

#[test]
fn the_self_test_passes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_lab();
    let out = statstorm_lab()
        .arg("--self-test")
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{text}");
    assert!(
        text.contains("kernel and model agree on every request"),
        "{text}"
    );
    assert_eq!(text.matches("2 of 2 requests agree").count(), 3, "{text}");
}

#[test]
fn a_root_with_no_call_under_it_is_refused_before_any_boot_naming_where_the_calls_are() {
    need_lab();
    let out = statstorm_lab()
        .arg(harness_capture("cli-tree-nooc"))
        .args(["--nfs-root", "/nowhere"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no file call of the capture is under /nowhere"),
        "{err}"
    );
    assert!(err.contains("/tmp/statstorm-lab ("), "{err}");
    assert!(out.stdout.is_empty());
}
