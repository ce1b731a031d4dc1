//! Every block of the NFS lab (../shared/fixtures/nfs-lab: the real Linux
//! 6.1 client) through the command line: all the block's straces in one
//! `statstorm predict`, `--server-change` for the changes made on the
//! server, `--delegations on` for the v4.1 block (Linux nfsd grants them),
//! the block's mount options as recorded. Each lab run is matched with the
//! requests and background processes of the output that started inside
//! it, and their recorded-side RPCs are compared with the kernel's counts
//! per op: |model - lab| <= max(5% of lab, 2), on at least 97% of runs.
//!
//! This is the command-line twin of `crates/nfs/tests/lab.rs` (which feeds
//! the library every event): php-cli runs, php-fpm workers and the shells
//! that modified the tree all reach one NFS client in time order.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MIN_MATCH_PCT: f64 = 97.0;
const COLS: [&str; 8] = [
    "GETATTR",
    "LOOKUP",
    "ACCESS",
    "READ",
    "OPEN",
    "CLOSE",
    "READDIRPLUS",
    "total",
];

fn lab_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/nfs-lab")
}

fn col(m: &BTreeMap<String, u64>, c: &str) -> u64 {
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    match c {
        "OPEN" => g("OPEN") + g("OPEN_NOATTR"),
        "total" => m.values().sum(),
        k => g(k),
    }
}

fn counts(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| (k.clone(), n.as_u64().expect("count")))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_lab_block_through_predict_matches_the_kernel() {
    let dir = lab_dir();
    let text = std::fs::read_to_string(dir.join("runs.jsonl"))
        .unwrap_or_else(|e| panic!("lab fixtures missing at {}: {e}", dir.display()));
    let runs: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("runs.jsonl line"))
        .collect();
    let mut blocks: Vec<(String, String)> = Vec::new();
    for r in &runs {
        let k = (
            r["vers"].as_str().unwrap().to_string(),
            r["oset"].as_str().unwrap().to_string(),
        );
        if !blocks.contains(&k) {
            blocks.push(k);
        }
    }
    let (mut total, mut matched) = (0usize, 0usize);
    let mut misses = Vec::new();
    for (vers, oset) in &blocks {
        let block: Vec<&Value> = runs
            .iter()
            .filter(|r| r["vers"] == vers.as_str() && r["oset"] == oset.as_str())
            .collect();
        let mut files: Vec<String> = block
            .iter()
            .filter_map(|r| r["strace"].as_str())
            .map(|s| dir.join(s).display().to_string())
            .collect();
        files.sort();
        files.dedup();
        let mut args: Vec<String> = vec![
            "predict".into(),
            "--format".into(),
            "json".into(),
            "--from-mount".into(),
            block[0]["mount_options"].as_str().unwrap().into(),
            "--nfs-root".into(),
            "/mnt/nfs".into(),
        ];
        if vers.starts_with('4') {
            args.extend(["--delegations".into(), "on".into()]);
        }
        for r in &block {
            for p in r["changed_paths"].as_array().into_iter().flatten() {
                args.push("--server-change".into());
                args.push(format!(
                    "{:.6}:{}",
                    r["start"].as_f64().unwrap(),
                    p.as_str().unwrap()
                ));
            }
        }
        args.extend(files);
        let out = Command::cargo_bin("statstorm")
            .unwrap()
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "block {vers}/{oset}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        // php-cli runs are requests of their own beside the fpm workers'
        let kinds = j["split"].as_str().unwrap();
        assert!(kinds.starts_with("php-fpm and php-cli"), "split: {kinds}");
        let rows: Vec<(f64, BTreeMap<String, u64>)> = j["requests"]
            .as_array()
            .unwrap()
            .iter()
            .chain(j["background"].as_array().unwrap())
            .map(|q| (q["start"].as_f64().unwrap(), counts(&q["recorded"]["rpc"])))
            .collect();
        for r in &block {
            let (s, e) = (r["start"].as_f64().unwrap(), r["end"].as_f64().unwrap());
            let mut model: BTreeMap<String, u64> = BTreeMap::new();
            for (t, c) in &rows {
                if *t >= s - 1e-6 && *t <= e {
                    for (k, n) in c {
                        *model.entry(k.clone()).or_default() += n;
                    }
                }
            }
            let lab = counts(&r["rpc"]);
            let bad: Vec<String> = COLS
                .iter()
                .filter(|c| {
                    let (m, l) = (col(&model, c), col(&lab, c));
                    m.abs_diff(l) > ((l as f64 * 0.05).floor() as u64).max(2)
                })
                .map(|c| format!("{c} model {} lab {}", col(&model, c), col(&lab, c)))
                .collect();
            total += 1;
            if bad.is_empty() {
                matched += 1;
            } else {
                misses.push(format!(
                    "{vers}/{oset} {} {}: {}",
                    r["scenario"].as_str().unwrap(),
                    r["run"].as_str().unwrap(),
                    bad.join(", ")
                ));
            }
        }
    }
    let pct = 100.0 * matched as f64 / total as f64;
    println!("{matched} of {total} lab runs within tolerance ({pct:.1}%)");
    for m in &misses {
        println!("  miss: {m}");
    }
    assert!(total >= 100, "only {total} runs");
    assert!(
        pct >= MIN_MATCH_PCT,
        "{matched} of {total} runs within tolerance:\n{}",
        misses.join("\n")
    );
}
