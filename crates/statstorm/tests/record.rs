//! `statstorm record` against strace on the same PHP work (issue 26): a
//! real php-fpm pool serving the lab's include-tree and file-check
//! requests, recorded by both at once; a php-cli file-check loop, run
//! once under each. Per request, the counts by syscall and the lab paths
//! touched are equal. Also: an interrupted recording is a valid capture
//! and leaves no BPF program attached; without the privilege, exit 2.
//!
//! Needs root (CAP_BPF, CAP_PERFMON), php, php-fpm8.2, cgi-fcgi, strace
//! and bpftool (scripts/install-deps): a missing one fails the test.

mod common;
mod live;

use live::{fcgi, lab, need, need_root, wait_for, Reap};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// One recording at a time (the kernel's program list is checked).
static SERIAL: Mutex<()> = Mutex::new(());

const BIN: &str = env!("CARGO_BIN_EXE_statstorm");

/// The syscalls the recorder follows, as analyze names them.
const FOLLOWED: &[&str] = &[
    "read",
    "write",
    "open",
    "close",
    "stat",
    "fstat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "dup",
    "dup2",
    "dup3",
    "accept",
    "accept4",
    "clone",
    "clone3",
    "fork",
    "vfork",
    "execve",
    "getdents64",
    "getcwd",
    "chdir",
    "fchdir",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "unlink",
    "unlinkat",
    "readlink",
    "readlinkat",
    "openat",
    "openat2",
];

fn analyze(capture: &Path) -> Value {
    common::json("analyze", &[capture.to_str().unwrap(), "--top", "100000"])
}

/// Per request (in start order): its followed syscalls' counts.
fn request_counts(a: &Value) -> Vec<BTreeMap<String, u64>> {
    a["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["by_syscall"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| FOLLOWED.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                .collect()
        })
        .collect()
}

/// Calls per path under `under`.
fn paths_under(a: &Value, under: &Path) -> BTreeMap<String, u64> {
    let under = under.to_str().unwrap();
    a["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["path"].as_str().unwrap().starts_with(under))
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_string(),
                p["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn kill(child: &Child, sig: &str) {
    Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
}

/// The recorder's programs the kernel holds (bpftool prog show).
fn recorder_programs() -> Vec<String> {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .unwrap();
    assert!(out.status.success(), "bpftool prog show failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("ssrec_"))
        .map(str::to_string)
        .collect()
}

/// The kernel frees a detached program after an RCU grace period (or a
/// workqueue's turn): gone within seconds, or the test fails.
fn no_program_left() {
    wait_for("the recorder's programs to be freed", || {
        recorder_programs().is_empty()
    });
}

/// `statstorm record ARGS` in the background, its capture at `out` and
/// its stderr beside it (a file: a recorded command inherits it), returned
/// once its programs are attached.
fn start_record(out: &Path, args: &[&str]) -> Child {
    // (tests run one at a time: an earlier recording's programs may still
    // be on their way out)
    no_program_left();
    let err = std::fs::File::create(out.with_extension("err")).unwrap();
    let child = Command::new(BIN)
        .arg("record")
        .arg("-o")
        .arg(out)
        .args(args)
        .stderr(err)
        .spawn()
        .unwrap();
    wait_for("the recorder's programs", || recorder_programs().len() >= 4);
    child
}

/// Ends the recording with SIGINT; its stderr.
fn stop_record(mut child: Child, out: &Path) -> String {
    kill(&child, "-INT");
    let st = child.wait().unwrap();
    let err = std::fs::read_to_string(out.with_extension("err")).unwrap();
    assert!(st.success(), "record failed: {err}");
    err
}

#[test]
fn a_php_fpm_pool_recorded_with_strace_at_once_gives_the_same_requests() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    for t in ["php-fpm8.2", "cgi-fcgi", "strace", "bpftool"] {
        need(t);
    }
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(dir.path());
    let port = 9581u16;
    let strace_log = dir.path().join("s.txt");
    // OPcache off: every request opens its scripts
    let pool = live::Pool::start(dir.path(), &lab, port, Some(&strace_log));
    let master = pool.master.clone();
    let cap = dir.path().join("cap.txt");
    let rec = start_record(&cap, &["--pid", &master]);
    let _reap_rec = Reap(vec![rec.id().to_string()]);
    let www = lab.join("www");
    for _ in 0..3 {
        fcgi(port, &www.join("tree.php"), &lab);
        fcgi(port, &www.join("filecheck.php"), &lab);
    }
    let err = stop_record(rec, &cap);
    // the pool ends, then strace with it
    pool.stop();
    assert!(err.contains("stopped: interrupted"), "{err}");
    assert!(!err.contains("record: lost"), "{err}");

    let a_rec = analyze(&cap);
    let a_st = analyze(&strace_log);
    // the recording began after the workers started: the requests alone
    let rec_reqs = request_counts(&a_rec);
    let st_reqs = request_counts(&a_st);
    assert_eq!(rec_reqs.len(), 6, "{}", a_rec["request_split"]);
    assert_eq!(st_reqs.len(), 6, "{}", a_st["request_split"]);
    for (i, (r, s)) in rec_reqs.iter().zip(&st_reqs).enumerate() {
        // the FastCGI exchange: strace sees poll/recvfrom/... the
        // recorder does not follow; the file calls must agree
        let r: BTreeMap<_, _> = r.iter().filter(|(k, _)| *k != "write").collect();
        let s: BTreeMap<_, _> = s.iter().filter(|(k, _)| *k != "write").collect();
        assert_eq!(r, s, "request {i}: record {r:?}, strace {s:?}");
    }
    for k in ["kind", "pid"] {
        let kr: Vec<&Value> = a_rec["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r[k])
            .collect();
        let ks: Vec<&Value> = a_st["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r[k])
            .collect();
        assert_eq!(kr, ks, "{k}");
    }
    let pr = paths_under(&a_rec, &lab);
    assert!(pr.len() > 40, "{} lab paths", pr.len());
    assert_eq!(pr, paths_under(&a_st, &lab));
    no_program_left();
}

/// `php -n SCRIPT` under `strace -f -ttt -T -y -o LOG`.
fn strace_php(php: &str, script: &Path, log: &Path) {
    let st = Command::new("strace")
        .args(["-f", "-ttt", "-T", "-y", "-o"])
        .arg(log)
        .args([php, "-n"])
        .arg(script)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_php_cli_file_check_loop_recorded_matches_strace() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    need("strace");
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(dir.path());
    let script = lab.join("www/filecheck.php");
    let php = "/usr/bin/php8.2";
    let cap = dir.path().join("cap.txt");
    let out = Command::new(BIN)
        .arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--", php, "-n"])
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("stopped: command exited"), "{err}");
    let strace_log = dir.path().join("s.txt");
    strace_php(php, &script, &strace_log);
    let a_rec = analyze(&cap);
    let a_st = analyze(&strace_log);
    let r = request_counts(&a_rec);
    let s = request_counts(&a_st);
    assert_eq!(r.len(), 1);
    // write: the script's output, to a pipe here and to /dev/null there
    let strip = |m: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        m.iter()
            .filter(|(k, _)| *k != "write")
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert_eq!(strip(&r[0]), strip(&s[0]));
    assert!(r[0]["newfstatat"] > 30, "{:?}", r[0]);
    let pr = paths_under(&a_rec, &lab);
    assert!(pr.len() > 10, "{pr:?}");
    assert_eq!(pr, paths_under(&a_st, &lab));
    // the recorder's own durations are the calls' (no ptrace stop inside)
    assert_eq!(a_rec["has_durations"], true);
}

#[test]
fn an_interrupted_recording_is_a_valid_capture_and_detaches() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    need("bpftool");
    let dir = tempfile::tempdir().unwrap();
    // a shell that stats a file in a loop until it is stopped
    let cap = dir.path().join("cap.txt");
    let busy = dir.path().join("busy");
    std::fs::write(&busy, "x").unwrap();
    let rec = start_record(
        &cap,
        &[
            "--duration",
            "60s",
            "--",
            "sh",
            "-c",
            &format!("while :; do test -e {}; done", busy.display()),
        ],
    );
    let _reap = Reap(vec![rec.id().to_string()]);
    std::thread::sleep(Duration::from_millis(500));
    let err = stop_record(rec, &cap);
    // the command runs on, unrecorded: ended here
    Command::new("pkill")
        .args(["-f", &format!("test -e {}", busy.display())])
        .status()
        .unwrap();
    assert!(err.contains("stopped: interrupted"), "{err}");
    no_program_left();
    let text = std::fs::read_to_string(&cap).unwrap();
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("# statstorm record: "),
        "{text}"
    );
    let a = analyze(&cap);
    assert_eq!(a["input"]["skipped"]["total"], 0, "{}", a["input"]);
    assert!(
        a["totals"]["metadata_calls"].as_u64().unwrap() > 10,
        "{}",
        a["totals"]
    );
}

#[test]
fn without_the_privilege_record_exits_2_naming_the_capability() {
    need_root();
    need("setpriv");
    // the binary where an unprivileged user may run it
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("statstorm");
    std::fs::copy(BIN, &bin).unwrap();
    let mut perm = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(dir.path(), perm).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&bin)
        .args(["record", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("CAP_BPF") && err.contains("CAP_PERFMON"),
        "{err}"
    );
}

#[test]
fn analyze_warns_of_a_capture_that_lost_calls() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("cap.txt");
    std::fs::write(
        &cap,
        "# statstorm record 0.1.0: strace -f -ttt -T -y compatible lines (docs/record.md)\n\
         7 1795759391.545962 access(\"/srv/a.php\", F_OK) = 0 <0.000003>\n\
         # statstorm record: 1 calls in 0.1 s, stopped: interrupted\n\
         # statstorm record: lost 40 calls (ring buffer full: 40, too many calls in flight: 0, undecodable: 0)\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["analyze", "--format", "json"])
        .arg(&cap)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the recording lost 40 calls"), "{err}");
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["input"]["files"][0]["lost_calls"], 40);
    assert_eq!(a["input"]["skipped"]["total"], 0);
    // predict and diagnose say so too
    for cmd in ["predict", "diagnose"] {
        let out = Command::new(BIN)
            .args([cmd, "--format", "json"])
            .arg(&cap)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("the recording lost 40 calls"),
            "{cmd}: {text}"
        );
    }
}

#[test]
fn diagnose_live_records_then_diagnoses() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    let dir = tempfile::tempdir().unwrap();
    // a php-cli process of a name of its own (comm: the link's name)
    let php = dir.path().join("phplivetest");
    std::os::unix::fs::symlink("/usr/bin/php8.2", &php).unwrap();
    let script = dir.path().join("loop.php");
    std::fs::write(
        &script,
        "<?php $t = microtime(true) + 4; while (microtime(true) < $t) { clearstatcache(); file_exists(__DIR__ . '/missing.txt'); is_file(__FILE__); usleep(100); }\n",
    )
    .unwrap();
    let mut loop_ = Command::new(&php).arg("-n").arg(&script).spawn().unwrap();
    let _reap = Reap(vec![loop_.id().to_string()]);
    let out = Command::new(BIN)
        .args([
            "diagnose",
            "--live",
            "--live-comm",
            "phplivetest",
            "--live-duration",
            "2s",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    loop_.wait().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("stopped: duration reached"), "{err}");
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix("diagnose: the capture is kept in "))
        .unwrap_or_else(|| panic!("{err}"));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["schema"], "statstorm.diagnose/1");
    // the capture diagnosed is the one kept, and it holds the loop's calls
    let a = analyze(Path::new(kept));
    assert!(
        a["totals"]["metadata_calls"].as_u64().unwrap() > 100,
        "{}",
        a["totals"]
    );
    let missing = dir.path().join("missing.txt");
    assert!(
        a["paths"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["path"] == missing.to_str().unwrap()),
        "no call on {}",
        missing.display()
    );
    std::fs::remove_file(kept).unwrap();
}

/// Calls per followed syscall over the whole input (`write`, the script's
/// output to a pipe or to /dev/null, left out).
fn totals(a: &Value) -> BTreeMap<String, u64> {
    a["totals"]["by_syscall"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| FOLLOWED.contains(&k.as_str()) && *k != "write")
        .map(|(k, v)| (k.clone(), v["calls"].as_u64().unwrap()))
        .collect()
}

#[test]
fn a_counts_recording_counts_what_strace_sees_and_analyze_reads_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    need("strace");
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(dir.path());
    let script = lab.join("www/filecheck.php");
    let php = "/usr/bin/php8.2";
    let strace_log = dir.path().join("s.txt");
    strace_php(php, &script, &strace_log);
    let a_st = analyze(&strace_log);
    // every key kept, then a map of 8 keys: the calls beyond are counted
    // per syscall alone, the totals stay whole
    for (keys, full) in [("65536", false), ("8", true)] {
        let cap = dir.path().join(format!("counts-{keys}.txt"));
        no_program_left();
        let out = Command::new(BIN)
            .arg("record")
            .arg("-o")
            .arg(&cap)
            .args([
                "--counts",
                "--window",
                "200ms",
                "--max-keys",
                keys,
                "--",
                php,
                "-n",
            ])
            .arg(&script)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let text = std::fs::read_to_string(&cap).unwrap();
        assert!(text.starts_with("# statstorm record counts 1"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("@ ")), "{text}");
        assert_eq!(text.lines().any(|l| l.starts_with("= ? ")), full, "{text}");
        assert_eq!(err.contains("found the counts map full"), full, "{err}");
        let a = analyze(&cap);
        assert_eq!(a["input"]["skipped"]["total"], 0, "{a}");
        assert!(a["requests"].as_array().unwrap().is_empty());
        let c = &a["counts"];
        assert!(c["windows"].as_u64().unwrap() >= 1, "{c}");
        assert_eq!(
            c["unobservable"],
            serde_json::json!(["requests", "realpath_walks", "repeats"])
        );
        assert_eq!(c["map_full_calls"].as_u64().unwrap() > 0, full, "{c}");
        let t = totals(&a);
        assert!(t["newfstatat"] > 30, "{t:?}");
        assert_eq!(t, totals(&a_st));
        if !full {
            let pr = paths_under(&a, &lab);
            assert!(pr.len() > 10, "{pr:?}");
            assert_eq!(pr, paths_under(&a_st, &lab));
        }
        // predict needs calls, and says so
        let p = Command::new(BIN)
            .arg("predict")
            .arg(&cap)
            .args(["--php", "realpath_cache_size=0"])
            .output()
            .unwrap();
        let perr = String::from_utf8_lossy(&p.stderr);
        assert_eq!(p.status.code(), Some(2), "{perr}");
        assert!(perr.contains("a counts capture"), "{perr}");
    }
}

#[test]
fn the_cpu_cap_pauses_the_writer_and_the_capture_says_what_it_lost() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("loop.php");
    std::fs::write(
        &script,
        "<?php for ($i = 0; $i < 300000; $i++) { clearstatcache(); stat(__FILE__); }\n",
    )
    .unwrap();
    let cap = dir.path().join("cap.txt");
    no_program_left();
    let out = Command::new(BIN)
        .arg("record")
        .arg("-o")
        .arg(&cap)
        .args([
            "--max-cpu",
            "2",
            "--ring-mib",
            "1",
            "--",
            "/usr/bin/php8.2",
            "-n",
        ])
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("to keep to its CPU cap"), "{err}");
    assert!(err.contains("a higher --max-cpu"), "{err}");
    // what was kept is a valid capture that says it is incomplete
    let a = analyze(&cap);
    let lost = a["input"]["files"][0]["lost_calls"].as_u64().unwrap();
    let kept = a["totals"]["by_syscall"]["newfstatat"]["calls"]
        .as_u64()
        .unwrap();
    assert!(lost > 0, "{a}");
    assert!(kept + lost >= 300000, "kept {kept}, lost {lost}");
    assert_eq!(a["input"]["skipped"]["total"], 0, "{a}");
    // out of range
    let out = Command::new(BIN)
        .args(["record", "--max-cpu", "150", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 100% of one CPU, not 150%"));
}
