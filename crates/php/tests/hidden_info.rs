//! What a capture made with a cache on cannot show, proved with real PHP.
//!
//! For each case below, two PHP programs A and B that differ only in
//! operations a warm cache serves without a syscall are run with Debian's
//! php-cli 8.2 under strace (the flags of `scripts/php-harness`: `strace -f
//! -ttt -T -y -s 32 -qq -e trace=!...`, `php -n -d zend_extension=opcache.so
//! -d ...`), in one lab directory: the entry script `www/entry.php` is
//! written for A, captured, overwritten with B, captured again. Both entry
//! scripts are padded with a comment to the same size, so that the `read`
//! of the entry script returns the same byte count; the included file
//! `www/lib/f.php` and every other path are the same in both runs.
//!
//! | case | A | B | source config | target configs |
//! |------|---|---|---------------|----------------|
//! | a | `include_once F` x3 | `include_once F` x1 | realpath cache on, OPcache off | `realpath_cache_size=0`; `open_basedir` |
//! | b | `include F` x3 | `include F` x1 | OPcache on (`opcache.enable_cli=1`, `validate_timestamps=1`, `revalidate_freq=60`), realpath cache on | OPcache off |
//! | c | `include F` x1 | `include_once F` x1 | realpath cache on, OPcache off | `realpath_cache_size=0`; `open_basedir` |
//!
//! The test checks, per case:
//! 1. under the source config, the file syscalls statstorm sees are the
//!    same for A and B: the sequence of (syscall name, paths, result) of
//!    the stat family, open, access, readlink, `read` and `close` calls,
//!    parsed with `statstorm_trace`, from the open of the entry script to
//!    the end of the process. What comes before that open is PHP's process
//!    startup (the dynamic loader, locale, the scan of
//!    `/usr/share/zoneinfo`, the OPcache extension), which does not depend
//!    on the script; it is left out of the syscall comparison. The lifted
//!    workloads (`statstorm_php::lift`, which keeps that startup as
//!    recorded operations) are equal too once times, durations and pids
//!    are zeroed. Times, pids and the random name of OPcache's lock file
//!    (`/tmp/.ZendSem.XXXXXX`, closed at the end of the process) differ
//!    between any two runs of one program and are left out of both
//!    comparisons;
//! 2. under each target config, the real captures of A and B differ: the
//!    per-syscall counts of the same window are printed and must not be
//!    equal;
//! 3. each program's output shows that its hidden operations ran (F counts
//!    its own executions; `include_once` returns `true` on a repeat).
//!
//! Conclusion: the source capture of A is the source capture of B, so any
//! function of the source trace (statstorm's prediction or any other)
//! gives one answer for both, while the real captures under the target
//! config differ; at most one of A and B can be predicted exactly, and the
//! cross-config acceptance pair from such a source cannot be met from the
//! trace alone. The test prints, beside the real counts, the model's single
//! prediction from the (shared) source workload.
//!
//! Run: `cargo test -p statstorm-php --release --test hidden_info -- --nocapture`.
//! Needs `php` (php-cli 8.2 with php8.2-opcache) and `strace`; fails
//! loudly when either is missing.

mod common;

use statstorm_php::lower::{count_by_syscall, CHECKED};
use statstorm_php::request::split_requests;
use statstorm_php::workload::{PhpOpKind, Workload};
use statstorm_php::{predict_workload, PhpConfig};
use statstorm_trace::{Event, Interner, Kind, Ret, Trace};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// The syscalls left out of the trace, as in `scripts/php-harness`.
const STRACE_FILTER: &str =
    "trace=!mprotect,brk,rt_sigaction,rt_sigprocmask,futex,madvise,getpid,rseq,set_robust_list";

/// Size every entry script is padded to (bytes).
const ENTRY_SIZE: usize = 1024;

/// One file syscall as statstorm sees it: name, the paths it names (path,
/// second path, the file behind its fd, the file its returned fd names)
/// and its result.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Call {
    name: String,
    paths: Vec<String>,
    result: String,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}({}) = {}",
            self.name,
            self.paths.join(", "),
            self.result
        )
    }
}

/// The syscalls the comparison covers: the stat family, access, open,
/// readlink, read and close.
fn is_file_call(k: Kind) -> bool {
    k.is_stat_family()
        || k.is_access()
        || k.is_open()
        || k.is_readlink()
        || matches!(k, Kind::Read | Kind::Close)
}

fn call_of(e: &Event, s: &Interner) -> Call {
    let paths = [e.path, e.path2, e.fd_path, e.ret_path]
        .iter()
        .map(|p| {
            let mut p = p.map(|p| s.str(p).into_owned()).unwrap_or_default();
            unrandom(&mut p);
            p
        })
        .collect();
    let result = match e.ret {
        Ret::Ok(n) => n.to_string(),
        Ret::Err(errno) => s.str(errno.0).into_owned(),
        Ret::Unknown => "?".to_string(),
    };
    Call {
        name: s.str(e.name).into_owned(),
        paths,
        result,
    }
}

/// The lab: `www/entry.php` (rewritten per program), `www/lib/f.php`.
struct Lab {
    dir: tempfile::TempDir,
    opcache_so: String,
}

/// A time well in the past for every lab script, so that
/// `opcache.file_update_protection` (2 s, R65) never keeps a script out of
/// OPcache, and so that both programs see the same mtimes.
fn old_mtime() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000)
}

fn write_old(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.set_modified(old_mtime())
        .unwrap_or_else(|e| panic!("{}: set mtime: {e}", path.display()));
}

impl Lab {
    fn new() -> Lab {
        common::harness::require("php");
        common::harness::require("strace");
        let out = Command::new("php")
            .args(["-n", "-r", "echo ini_get('extension_dir');"])
            .output()
            .expect("run php -n -r");
        assert!(out.status.success(), "php -n -r failed: {out:?}");
        let opcache_so = format!("{}/opcache.so", String::from_utf8_lossy(&out.stdout));
        assert!(
            Path::new(&opcache_so).is_file(),
            "{opcache_so} is missing: the test needs php8.2-opcache"
        );
        let dir = tempfile::Builder::new()
            .prefix("statstorm-hidden.")
            .tempdir()
            .expect("temporary directory");
        std::fs::create_dir_all(dir.path().join("www/lib")).expect("lab directories");
        // F counts its own executions: the output shows how many times the
        // include really ran.
        write_old(
            &dir.path().join("www/lib/f.php"),
            "<?php\n$GLOBALS['runs'] = ($GLOBALS['runs'] ?? 0) + 1;\nreturn 7;\n",
        );
        Lab { dir, opcache_so }
    }

    fn root(&self) -> PathBuf {
        // the canonical path, so that PHP's resolutions walk the names the
        // test compares (TMPDIR may be a symlink)
        std::fs::canonicalize(self.dir.path()).expect("canonical lab path")
    }

    fn f_path(&self) -> String {
        self.root().join("www/lib/f.php").display().to_string()
    }

    /// Writes the entry script: `body` (statements), then code printing F's
    /// run count, padded with a comment to [`ENTRY_SIZE`] bytes.
    fn write_entry(&self, body: &str) {
        let mut src = format!(
            "<?php\n$r = [];\n{body}\necho str_pad(($GLOBALS['runs'] ?? 0) . ' ' . json_encode($r), 32), \"\\n\";\n"
        );
        let pad = ENTRY_SIZE
            .checked_sub(src.len() + "/**/\n".len())
            .expect("entry script longer than ENTRY_SIZE");
        src.push_str(&format!("/*{}*/\n", "x".repeat(pad)));
        assert_eq!(src.len(), ENTRY_SIZE);
        write_old(&self.root().join("www/entry.php"), &src);
    }

    /// Runs the current entry script under strace with `settings` (`-d`
    /// flags after the OPcache extension); returns the trace and what the
    /// program printed.
    fn capture(&self, label: &str, settings: &[(String, String)]) -> (Trace, String) {
        let root = self.root();
        let out_path = root.join("stdout.txt");
        let trace_path = root.join(format!("{label}.strace"));
        let stdout = std::fs::File::create(&out_path).expect("stdout file");
        let mut cmd = Command::new("strace");
        cmd.args([
            "-f",
            "-ttt",
            "-T",
            "-y",
            "-s",
            "32",
            "-qq",
            "-e",
            STRACE_FILTER,
        ])
        .arg("-o")
        .arg(&trace_path)
        .args(["php", "-n", "-d"])
        .arg(format!("zend_extension={}", self.opcache_so));
        for (k, v) in settings {
            cmd.arg("-d").arg(format!("{k}={v}"));
        }
        let st = cmd
            .arg("entry.php")
            .current_dir(root.join("www"))
            .stdin(Stdio::null())
            .stdout(stdout)
            .status()
            .expect("start strace");
        let printed = std::fs::read_to_string(&out_path).unwrap_or_default();
        assert!(
            st.success(),
            "{label}: strace php exited with {st}: {printed}"
        );
        let trace = statstorm_trace::read_path(&trace_path)
            .unwrap_or_else(|e| panic!("{}: {e}", trace_path.display()));
        assert!(
            trace.skipped() == 0 && !trace.not_strace(),
            "{label}: {} lines of {} not parsed",
            trace.skipped(),
            trace_path.display()
        );
        (trace, printed.trim().to_string())
    }
}

/// The file calls from the open of the entry script on.
fn file_calls(label: &str, trace: &Trace, entry: &str) -> Vec<Call> {
    let s = &trace.strings;
    let first = trace
        .events
        .iter()
        .position(|e| {
            e.kind.is_open()
                && matches!(e.ret, Ret::Ok(_))
                && e.ret_path.is_some_and(|p| s.str(p) == entry)
        })
        .unwrap_or_else(|| panic!("{label}: no open of {entry} in the trace"));
    trace.events[first..]
        .iter()
        .filter(|e| is_file_call(e.kind))
        .map(|e| call_of(e, s))
        .collect()
}

fn counts(calls: &[Call]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for c in calls {
        *m.entry(c.name.clone()).or_default() += 1;
    }
    m
}

fn fmt_counts(m: &BTreeMap<String, usize>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn lifted(trace: &Trace) -> Workload {
    let reqs = split_requests(&trace.events, &trace.strings);
    statstorm_php::lift(trace, &reqs)
}

/// OPcache's lock file at startup: `mkstemp` of `<lockfile_path>/.ZendSem.XXXXXX`
/// (php-src ext/opcache/zend_shared_alloc.c `zend_shared_alloc_create_lock`),
/// a random name in every run.
const ZEND_SEM: &str = "/.ZendSem.";

/// Replaces the random part of OPcache's lock file name ([`ZEND_SEM`]),
/// which the process closes after the entry script's open.
fn unrandom(p: &mut String) {
    if let Some(i) = p.find(ZEND_SEM) {
        p.replace_range(i + ZEND_SEM.len().., "XXXXXX");
    }
}

/// The workload with what differs between any two runs of one program
/// zeroed: times, durations (also the calls' latencies and OPcache's
/// lock time), pids, and the random suffix of OPcache's lock file
/// ([`ZEND_SEM`]).
fn timeless(w: &Workload) -> Workload {
    let mut w = w.clone();
    w.latency_us.clear();
    w.lock_us = 0;
    for r in &mut w.requests {
        r.pid = 0;
        r.start_us = 0;
        r.end_us = 0;
        r.request_time_us = 0;
        for op in &mut r.ops {
            op.t_off_us = 0;
            op.stat_us = None;
            if let PhpOpKind::Raw { op } | PhpOpKind::Write { op } = &mut op.kind {
                op.t_us = 0;
                op.dur_us = None;
                op.pid = 0;
                let mut p = op.path.to_string();
                unrandom(&mut p);
                op.path = p.into();
                if let Some(p2) = op.path2.as_mut() {
                    let mut p = p2.to_string();
                    unrandom(&mut p);
                    *p2 = p.into();
                }
            }
        }
    }
    w
}

/// Checked calls (newfstatat, openat, access, readlink) of the whole
/// process: the model's prediction from `w` (recorded under `from`) under
/// `to`, and the real counts of `trace`.
fn whole_checked(w: &Workload, from: &PhpConfig, to: &PhpConfig) -> u64 {
    predict_workload(w, from, to)
        .iter()
        .map(|r| {
            let m = count_by_syscall(&r.after);
            CHECKED.iter().map(|k| m.of(k)).sum::<u64>()
        })
        .sum()
}

fn real_checked(trace: &Trace) -> u64 {
    let reqs = split_requests(&trace.events, &trace.strings);
    statstorm_php::lift::request_ops(trace, &reqs)
        .iter()
        .map(|ops| {
            let m = count_by_syscall(ops);
            CHECKED.iter().map(|k| m.of(k)).sum::<u64>()
        })
        .sum()
}

fn config(settings: &[(String, String)]) -> PhpConfig {
    let mut c = PhpConfig::default();
    for (k, v) in settings {
        c.set(k, v, "test")
            .unwrap_or_else(|e| panic!("{k}={v}: {e}"))
            .unwrap_or_else(|| panic!("{k} unknown to PhpConfig"));
    }
    c
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

struct Case {
    name: &'static str,
    /// Entry script statements of A and B (`{F}` stands for F's path).
    a: &'static str,
    b: &'static str,
    /// Expected output of A and B: F's run count and the include results.
    a_out: &'static str,
    b_out: &'static str,
    source: Vec<(String, String)>,
    targets: Vec<(&'static str, Vec<(String, String)>)>,
}

const OPCACHE_OFF: (&str, &str) = ("opcache.enable_cli", "0");

fn cases(lab_root: &str) -> Vec<Case> {
    let opcache_on = [
        ("opcache.enable_cli", "1"),
        ("opcache.validate_timestamps", "1"),
        ("opcache.revalidate_freq", "60"),
    ];
    vec![
        Case {
            name: "a: include_once F x3 vs x1",
            a: "$r[] = include_once '{F}';\n$r[] = include_once '{F}';\n$r[] = include_once '{F}';",
            b: "$r[] = include_once '{F}';",
            a_out: "1 [7,true,true]",
            b_out: "1 [7]",
            source: kv(&[OPCACHE_OFF]),
            targets: vec![
                (
                    "realpath_cache_size=0",
                    kv(&[OPCACHE_OFF, ("realpath_cache_size", "0")]),
                ),
                (
                    "open_basedir",
                    kv(&[OPCACHE_OFF, ("open_basedir", lab_root)]),
                ),
            ],
        },
        Case {
            name: "b: include F x3 vs x1, OPcache on",
            a: "$r[] = include '{F}';\n$r[] = include '{F}';\n$r[] = include '{F}';",
            b: "$r[] = include '{F}';",
            a_out: "3 [7,7,7]",
            b_out: "1 [7]",
            source: kv(&opcache_on),
            targets: vec![("OPcache off", kv(&[OPCACHE_OFF]))],
        },
        Case {
            name: "c: include F vs include_once F",
            a: "$r[] = include '{F}';",
            b: "$r[] = include_once '{F}';",
            a_out: "1 [7]",
            b_out: "1 [7]",
            source: kv(&[OPCACHE_OFF]),
            targets: vec![
                (
                    "realpath_cache_size=0",
                    kv(&[OPCACHE_OFF, ("realpath_cache_size", "0")]),
                ),
                (
                    "open_basedir",
                    kv(&[OPCACHE_OFF, ("open_basedir", lab_root)]),
                ),
            ],
        },
    ]
}

/// Captures A then B under `settings`: (trace, calls from the entry open).
fn capture_pair(
    lab: &Lab,
    case: &Case,
    tag: &str,
    settings: &[(String, String)],
) -> [(Trace, Vec<Call>); 2] {
    let entry = lab.root().join("www/entry.php").display().to_string();
    let f = lab.f_path();
    let mut out = Vec::new();
    for (prog, body, expect) in [("A", case.a, case.a_out), ("B", case.b, case.b_out)] {
        lab.write_entry(&body.replace("{F}", &f));
        let label = format!("{}-{tag}-{prog}", &case.name[..1]);
        let (trace, printed) = lab.capture(&label, settings);
        assert_eq!(
            printed, expect,
            "{label}: the program's output (F's run count, include results)"
        );
        let calls = file_calls(&label, &trace, &entry);
        out.push((trace, calls));
    }
    let b = out.pop().unwrap();
    let a = out.pop().unwrap();
    [a, b]
}

#[test]
fn cached_captures_hide_operations_that_change_other_configs() {
    let lab = Lab::new();
    let root = lab.root().display().to_string();
    println!(
        "lab {root}; file calls (stat family, open, access, readlink, read, close) from the open of www/entry.php on"
    );
    let mut distinguishable_sources = Vec::new();
    let mut indistinguishable_targets = Vec::new();
    for case in cases(&root) {
        println!("\n== {}", case.name);
        let [(ta, ca), (tb, cb)] = capture_pair(&lab, &case, "source", &case.source);
        let src = fmt_settings(&case.source);
        println!(
            "source [{src}]: A {} | B {}",
            fmt_counts(&counts(&ca)),
            fmt_counts(&counts(&cb))
        );
        let same_calls = ca == cb;
        if !same_calls {
            let i = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
            println!(
                "  source traces DIFFER at call {i}: A {} | B {}",
                ca.get(i).map_or("(end)".to_string(), |c| c.to_string()),
                cb.get(i).map_or("(end)".to_string(), |c| c.to_string())
            );
        }
        let (wa, wb) = (lifted(&ta), lifted(&tb));
        let same_workload = timeless(&wa) == timeless(&wb);
        println!(
            "  same file calls: {same_calls} ({} calls); same lifted workload: {same_workload} ({} ops)",
            ca.len(),
            wa.requests.iter().map(|r| r.ops.len()).sum::<usize>()
        );
        if !same_workload {
            print_first_difference(&timeless(&wa), &timeless(&wb));
        }
        if !(same_calls && same_workload) {
            distinguishable_sources.push(case.name);
        }
        let from = config(&case.source);
        for (tname, settings) in &case.targets {
            let [(ra, rca), (rb, rcb)] = capture_pair(&lab, &case, "target", settings);
            let (na, nb) = (counts(&rca), counts(&rcb));
            let to = config(settings);
            println!(
                "target {tname} [{}]: real A {} | real B {}",
                fmt_settings(settings),
                fmt_counts(&na),
                fmt_counts(&nb)
            );
            let (real_a, real_b) = (real_checked(&ra), real_checked(&rb));
            let (model_a, model_b) = (
                whole_checked(&wa, &from, &to),
                whole_checked(&wb, &from, &to),
            );
            println!(
                "  whole process, newfstatat+openat+access+readlink: real A {real_a}, real B {real_b}; model from the source capture: {model_a} (from A's), {model_b} (from B's)"
            );
            // one source, one prediction: it misses A or B (or both)
            if same_workload {
                assert_eq!(
                    model_a, model_b,
                    "{} -> {tname}: equal workloads lowered to different counts",
                    case.name
                );
            }
            assert!(
                real_a != real_b,
                "{} -> {tname}: A and B made as many checked calls",
                case.name
            );
            if na == nb {
                indistinguishable_targets.push(format!("{} -> {tname}", case.name));
            }
        }
    }
    if distinguishable_sources.is_empty() && indistinguishable_targets.is_empty() {
        println!(
        "\nConclusion: in every case the source capture of A is that of B, while the real captures under the target differ; no function of the source trace predicts both A and B under the target, so those cross-config pairs cannot be met from the trace alone."
        );
    }
    assert!(
        distinguishable_sources.is_empty(),
        "source captures of A and B differ (the hidden operations left a trace): {distinguishable_sources:?}"
    );
    assert!(
        indistinguishable_targets.is_empty(),
        "A and B made the same calls under the target config: {indistinguishable_targets:?}"
    );
}

fn fmt_settings(s: &[(String, String)]) -> String {
    s.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints the first operation where two (timeless) workloads differ.
fn print_first_difference(a: &Workload, b: &Workload) {
    for (i, (ra, rb)) in a.requests.iter().zip(&b.requests).enumerate() {
        if let Some(j) =
            (0..ra.ops.len().max(rb.ops.len())).find(|&j| ra.ops.get(j) != rb.ops.get(j))
        {
            println!(
                "  lifted workloads DIFFER in request {i}, op {j}: A {:?} | B {:?}",
                ra.ops.get(j).map(|o| &o.kind),
                rb.ops.get(j).map(|o| &o.kind)
            );
            return;
        }
    }
    if a.requests.len() != b.requests.len() {
        println!(
            "  lifted workloads DIFFER in request count: A {} | B {}",
            a.requests.len(),
            b.requests.len()
        );
    } else {
        println!(
            "  lifted workloads DIFFER outside the operations (evidence {:?} | {:?})",
            a.evidence, b.evidence
        );
    }
}
