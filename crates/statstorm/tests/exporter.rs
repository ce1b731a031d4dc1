//! `statstorm exporter` on a real php-fpm pool (issue 28): its counters
//! against strace's counts of the same load, its per-request histograms
//! against strace's requests, `promtool check metrics` on a scrape, a
//! restart of the pool under it, and its memory with a million distinct
//! paths.
//!
//! Needs root (CAP_BPF, CAP_PERFMON), php, php-fpm8.2, cgi-fcgi, strace,
//! promtool and bpftool (scripts/install-deps): a missing one fails the
//! test.

mod common;
mod live;

use live::{fcgi, lab, need, need_root, wait_for, Reap};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// One exporter at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const BIN: &str = env!("CARGO_BIN_EXE_statstorm");

/// `GET PATH` on 127.0.0.1:`port`: (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let status = r.split_whitespace().nth(1)?.parse().ok()?;
    let body = r.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

fn start_exporter(port: u16, args: &[&str], err: &std::path::Path) -> Child {
    let child = Command::new(BIN)
        .args([
            "exporter",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--interval",
            "1s",
        ])
        .args(args)
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap();
    wait_for("the exporter's endpoint", || {
        get(port, "/metrics").is_some()
    });
    child
}

/// The samples of a scrape: (name with labels, value).
fn samples(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// statstorm_syscalls_total summed over result and dir, by syscall.
fn by_syscall(s: &BTreeMap<String, f64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, v) in s {
        if let Some(rest) = k.strip_prefix("statstorm_syscalls_total{syscall=\"") {
            let name = rest.split('"').next().unwrap().to_string();
            *out.entry(name).or_insert(0) += *v as u64;
        }
    }
    out
}

/// The bucket (statstorm_request_calls) of a request making `n` calls of
/// a class: its upper bound as printed.
fn bucket(n: u64) -> String {
    if n == 0 {
        return "0".into();
    }
    let b = 64 - n.leading_zeros();
    ((1u64 << b) - 1).to_string()
}

fn promtool(body: &str) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stop(mut child: Child, err: &std::path::Path) -> String {
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let st = child.wait().unwrap();
    let err = std::fs::read_to_string(err).unwrap();
    assert!(st.success(), "exporter failed: {err}");
    err
}

#[test]
fn the_exporter_counts_a_pool_as_strace_does_and_survives_its_restart() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    for t in ["php-fpm8.2", "cgi-fcgi", "strace", "promtool", "bpftool"] {
        need(t);
    }
    let dir = tempfile::tempdir().unwrap();
    let lab = lab(dir.path());
    let www = lab.join("www");
    let port = 9877 + 20;
    let err = dir.path().join("exporter.err");
    let exp = start_exporter(port, &["--comm", "php-fpm"], &err);
    let _reap = Reap(vec![exp.id().to_string()]);

    // a pool under strace: 6 requests, then it ends
    let strace_log = dir.path().join("s.txt");
    let pool = live::Pool::start(dir.path(), &lab, 9591, Some(&strace_log));
    for _ in 0..3 {
        fcgi(9591, &www.join("tree.php"), &lab);
        fcgi(9591, &www.join("filecheck.php"), &lab);
    }
    pool.stop();
    std::thread::sleep(Duration::from_millis(2500));
    let (status, body) = get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    promtool(&body);
    let m = samples(&body);

    let a: Value = common::json(
        "analyze",
        &[strace_log.to_str().unwrap(), "--top", "100000"],
    );
    let st = &a["totals"]["by_syscall"];
    let counted = by_syscall(&m);
    // the file calls of the pool's whole life (the fd calls of its
    // startup and its end race the signal that ends it)
    for name in [
        "newfstatat",
        "openat",
        "access",
        "readlink",
        "getcwd",
        "chdir",
    ] {
        let s = st[name]["calls"].as_u64().unwrap_or(0);
        assert_eq!(
            counted.get(name).copied().unwrap_or(0),
            s,
            "{name}: {counted:?}"
        );
    }
    assert!(counted["newfstatat"] > 100, "{counted:?}");
    // the per-request histograms: strace's six requests, bucket by bucket
    let reqs = a["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 6, "{}", a["request_split"]);
    let classes: [(&str, &[&str]); 3] = [
        ("stat", &["stat", "lstat", "newfstatat", "statx"]),
        ("open", &["open", "openat", "openat2"]),
        ("access", &["access", "faccessat", "faccessat2"]),
    ];
    for (class, names) in classes {
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        let mut sum = 0;
        for r in reqs {
            let n: u64 = names
                .iter()
                .map(|k| r["by_syscall"][k].as_u64().unwrap_or(0))
                .sum();
            sum += n;
            *want.entry(bucket(n)).or_insert(0) += 1;
        }
        assert_eq!(
            m[&format!("statstorm_request_calls_count{{class=\"{class}\"}}")],
            6.0
        );
        assert_eq!(
            m[&format!("statstorm_request_calls_sum{{class=\"{class}\"}}")],
            sum as f64,
            "{class}"
        );
        // per bucket: the cumulative count at its bound minus the one below
        let mut below = 0.0;
        let mut got: BTreeMap<String, u64> = BTreeMap::new();
        let mut bounds: Vec<(f64, String, f64)> = m
            .iter()
            .filter_map(|(k, v)| {
                let le = k
                    .strip_prefix(&format!(
                        "statstorm_request_calls_bucket{{class=\"{class}\",le=\""
                    ))?
                    .strip_suffix("\"}")?;
                let x = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((x, le.to_string(), *v))
            })
            .collect();
        bounds.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        for (_, le, cum) in bounds {
            if cum > below {
                got.insert(le, (cum - below) as u64);
            }
            below = cum;
        }
        assert_eq!(got, want, "{class}");
    }

    // the pool restarted (new pids): counting goes on
    let pool = live::Pool::start(dir.path(), &lab, 9592, None);
    for _ in 0..4 {
        fcgi(9592, &www.join("tree.php"), &lab);
    }
    std::thread::sleep(Duration::from_millis(2500));
    let m2 = samples(&get(port, "/metrics").unwrap().1);
    pool.stop();
    assert_eq!(m2["statstorm_request_calls_count{class=\"stat\"}"], 10.0);
    assert!(by_syscall(&m2)["openat"] > counted["openat"]);
    assert_eq!(m2["statstorm_exporter_lost_calls_total"], 0.0);
    // read-only, and only /metrics
    assert_eq!(get(port, "/other").unwrap().0, 404);
    let err = stop(exp, &err);
    assert!(err.contains("stopped after"), "{err}");
}

#[test]
fn the_exporters_memory_is_bounded_with_a_million_distinct_paths() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    need_root();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("paths.php");
    std::fs::write(
        &script,
        "<?php for ($i = 0; $i < 1000000; $i++) { @stat(\"/nonexistent/$i/f.php\"); }\n",
    )
    .unwrap();
    let port = 9877 + 21;
    let err = dir.path().join("exporter.err");
    let exp = start_exporter(port, &["--comm", "php"], &err);
    let _reap = Reap(vec![exp.id().to_string()]);
    let st = Command::new("php").arg("-n").arg(&script).status().unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(2500));
    let m = samples(&get(port, "/metrics").unwrap().1);
    let status = std::fs::read_to_string(format!("/proc/{}/status", exp.id())).unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    stop(exp, &err);
    // every call counted, in at most max_dirs + 2 directory labels
    let stats: f64 = m
        .iter()
        .filter(|(k, _)| {
            k.starts_with("statstorm_syscalls_total{syscall=\"newfstatat\",result=\"ENOENT\"")
        })
        .map(|(_, v)| v)
        .sum::<f64>()
        + m.iter()
            .filter(|(k, _)| {
                k.starts_with("statstorm_syscalls_total{syscall=\"newfstatat\",result=\"unknown\"")
            })
            .map(|(_, v)| v)
            .sum::<f64>();
    assert!(stats >= 1_000_000.0, "{stats}");
    assert!(m["statstorm_exporter_dir_labels{of=\"given\"}"] <= 100.0);
    // the bound of docs/exporter.md
    assert!(hwm_kib < 64 * 1024, "peak resident {hwm_kib} KiB");
}
