//! Shared helpers for the capture tests: the manifest written by
//! `scripts/php-harness` and the real per-request counts.

#![allow(dead_code)]

use statstorm_php::lower::{count_by_syscall, CHECKED};
use statstorm_php::PhpConfig;
use statstorm_trace::request::split_requests;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub struct Capture {
    pub name: String,
    pub sapi: String,
    pub workload: String,
    pub config: PhpConfig,
    pub settings: Vec<(String, String)>,
    pub path: PathBuf,
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/php")
}

pub fn captures() -> Vec<Capture> {
    let dir = fixtures();
    let text = std::fs::read_to_string(dir.join("manifest.jsonl"))
        .expect("tests/fixtures/php/manifest.jsonl (run scripts/php-harness)");
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let m: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("manifest.jsonl:{}: {e}", n + 1));
        let name = m["name"].as_str().unwrap().to_string();
        let mut config = PhpConfig::default();
        let mut settings = Vec::new();
        for (k, v) in m["config"].as_object().unwrap() {
            let v = v.as_str().unwrap();
            config
                .set(k, v, "manifest")
                .unwrap()
                .unwrap_or_else(|| panic!("{name}: setting {k} unknown to PhpConfig"));
            settings.push((k.clone(), v.to_string()));
        }
        let gz = dir.join(format!("{name}.strace.gz"));
        let path = if gz.exists() {
            gz
        } else {
            dir.join(format!("{name}.strace.zst"))
        };
        assert!(
            path.exists(),
            "{name}: no {name}.strace.gz or .zst in {}",
            dir.display()
        );
        out.push(Capture {
            path,
            sapi: m["sapi"].as_str().unwrap().to_string(),
            workload: m["workload"].as_str().unwrap().to_string(),
            name,
            config,
            settings,
        });
    }
    assert!(!out.is_empty(), "no captures in the manifest");
    out
}

pub type Counts = BTreeMap<String, u64>;

/// Requests of a capture: (pid, start_us, real counts) and the workload.
pub struct Loaded {
    pub real: Vec<Counts>,
    pub workload: statstorm_php::Workload,
}

pub fn load(c: &Capture) -> Loaded {
    let trace = statstorm_trace::read_path(&c.path).unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let reqs = split_requests(&trace.events, &trace.strings);
    let ops = statstorm_php::lift::request_ops(&trace, &reqs);
    let real = ops.iter().map(|o| checked(&count_by_syscall(o))).collect();
    let workload = statstorm_php::lift(&trace, &reqs);
    Loaded { real, workload }
}

pub fn checked(m: &Counts) -> Counts {
    CHECKED
        .iter()
        .map(|k| (k.to_string(), m.get(*k).copied().unwrap_or(0)))
        .collect()
}

pub fn fmt(c: &Counts) -> String {
    CHECKED
        .iter()
        .map(|k| format!("{}={}", &k[..4], c.get(*k).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(" ")
}
