//! The realpath cache model (`statstorm_php::realpath`) against real
//! php-cli 8.2: after each step of a script, PHP's own view of its cache
//! (`realpath_cache_size()`, `realpath_cache_get()`) must equal the
//! model's after the same resolutions at the same seconds: bytes in use,
//! the cached paths (expired ones not yet unlinked included) and their
//! keys.
//!
//! Two scenarios: (a) a byte budget that runs out in the middle of a walk
//! (which prefixes get in), with a path through a symlink (entry size with
//! both names) and a directory name with non-ASCII bytes (the key's signed
//! `char`); (b) a one-second TTL: an expired entry is unlinked when a
//! lookup of another path in its chain passes it, and an expired entry no
//! lookup reached is still listed; and a name through `..` (its entry
//! holds the resolved name too).

mod common;

use serde_json::Value;
use statstorm_php::realpath::{entry_bytes, key, RealpathCache, CHAINS};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One step of the script: sleep first (µs), then include these files.
struct Step {
    sleep_us: u64,
    includes: Vec<String>,
}

/// PHP's view after a step.
#[derive(Debug)]
struct Snap {
    t0: i64,
    t1: i64,
    bytes: u64,
    /// path -> (key as PHP gives it, expires)
    entries: BTreeMap<String, (Value, i64)>,
}

fn lab() -> (tempfile::TempDir, PathBuf) {
    common::harness::require("php");
    let dir = tempfile::Builder::new()
        .prefix("statstorm-rpc.")
        .tempdir()
        .expect("temporary directory");
    // canonical: PHP's walks see the names the model is given
    let root = std::fs::canonicalize(dir.path()).expect("canonical lab path");
    for d in ["a/bb/ccc", "h", "dé"] {
        std::fs::create_dir_all(root.join(d)).expect("lab directories");
    }
    for f in ["a/bb/ccc/f.php", "a/g.php", "h/i.php", "dé/k.php"] {
        std::fs::write(root.join(f), "<?php\n").expect("lab file");
    }
    std::os::unix::fs::symlink(root.join("a/bb"), root.join("lnk")).expect("lab symlink");
    (dir, root)
}

fn run_php(root: &Path, settings: &[&str], steps: &[Step]) -> Vec<Snap> {
    let mut src = String::from(
        "<?php\nfunction snap($t0, $t1) { $e = []; foreach (realpath_cache_get() as $p => $v) { $e[$p] = [$v['key'], $v['expires']]; } echo json_encode(['t0' => $t0, 't1' => $t1, 'bytes' => realpath_cache_size(), 'entries' => $e]), \"\\n\"; }\n$t = time(); snap($t, $t);\n",
    );
    for s in steps {
        if s.sleep_us > 0 {
            src.push_str(&format!("usleep({});\n", s.sleep_us));
        }
        src.push_str("$t0 = time();\n");
        for i in &s.includes {
            src.push_str(&format!("include '{i}';\n"));
        }
        src.push_str("snap($t0, time());\n");
    }
    let script = root.join("t.php");
    std::fs::write(&script, src).expect("script");
    let mut cmd = Command::new("php");
    cmd.arg("-n");
    for s in settings {
        cmd.args(["-d", s]);
    }
    let out = cmd.arg(&script).output().expect("run php");
    assert!(out.status.success(), "php failed: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            let entries = match &v["entries"] {
                Value::Object(m) => m
                    .iter()
                    .map(|(p, e)| (p.clone(), (e[0].clone(), e[1].as_i64().unwrap())))
                    .collect(),
                // json_encode of an empty array
                _ => BTreeMap::new(),
            };
            Snap {
                t0: v["t0"].as_i64().unwrap(),
                t1: v["t1"].as_i64().unwrap(),
                bytes: v["bytes"].as_u64().unwrap(),
                entries,
            }
        })
        .collect()
}

/// Replays the steps on the model, starting from PHP's first snapshot
/// (the script's own path, resolved before it ran), and compares every
/// snapshot. None when a step straddled a second boundary (the model
/// would not know which second PHP used): the caller runs again.
fn compare(
    root: &Path,
    limit: u64,
    ttl: u64,
    steps: &[Step],
    snaps: &[Snap],
    links: &BTreeMap<String, String>,
) -> Option<()> {
    assert_eq!(snaps.len(), steps.len() + 1, "one snapshot per step");
    if snaps.iter().any(|s| s.t0 != s.t1) {
        return None;
    }
    let mut m = RealpathCache::new(limit, ttl);
    // the start: prefixes of the script's path, shallowest first
    let mut first: Vec<(&String, &(Value, i64))> = snaps[0].entries.iter().collect();
    first.sort_by_key(|(p, _)| p.len());
    for (p, (_, exp)) in first {
        assert!(
            root.join("t.php").starts_with(p),
            "unexpected entry {p} at the start"
        );
        m.add(p, p, exp - ttl as i64);
    }
    for (i, (step, snap)) in [None]
        .into_iter()
        .chain(steps.iter().map(Some))
        .zip(snaps)
        .enumerate()
    {
        if let Some(step) = step {
            for f in &step.includes {
                m.resolve(f, snap.t0, links, &mut |_| {});
            }
        }
        let model: BTreeSet<&str> = m.paths().collect();
        let php: BTreeSet<&str> = snap.entries.keys().map(String::as_str).collect();
        assert_eq!(model, php, "step {i}: cached paths (model, PHP)");
        assert_eq!(m.bytes(), snap.bytes, "step {i}: bytes in use (model, PHP)");
        for (p, (k, _)) in &snap.entries {
            let ours = key(p.as_bytes());
            // keys above PHP_INT_MAX come as floats (and serde_json parses
            // them to within an ulp or two): the high bits still tell a
            // wrong key (e.g. an unsigned char) apart
            let same = match k.as_u64() {
                Some(k) => k == ours,
                None => k
                    .as_f64()
                    .is_some_and(|f| (f - ours as f64).abs() <= 1e-15 * f.abs() * 4.0),
            };
            assert!(same, "step {i}: key of {p}: PHP {k}, model {ours}");
        }
        println!(
            "step {i}: {} entries, {} bytes: model = PHP",
            php.len(),
            snap.bytes
        );
    }
    Some(())
}

fn check(root: &Path, limit: u64, ttl: u64, steps: &[Step], links: &BTreeMap<String, String>) {
    let settings = [
        format!("realpath_cache_size={limit}"),
        format!("realpath_cache_ttl={ttl}"),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    for _ in 0..3 {
        let snaps = run_php(root, &settings, steps);
        if compare(root, limit, ttl, steps, &snaps, links).is_some() {
            return;
        }
        println!("a step straddled a second boundary: once more");
    }
    panic!("three runs straddled second boundaries");
}

fn s(root: &Path, rel: &str) -> String {
    root.join(rel).display().to_string()
}

fn prefixes(p: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in p.split('/').filter(|c| !c.is_empty()) {
        cur.push('/');
        cur.push_str(c);
        out.push(cur.clone());
    }
    out
}

#[test]
fn budget_running_out_mid_walk() {
    let (_dir, root) = lab();
    let links: BTreeMap<String, String> = [(s(&root, "lnk"), s(&root, "a/bb"))].into();
    // the budget: the script's entries, then what the first step needs,
    // then room for a/ and a/g.php's directory only: the second step's
    // walk a/g.php -> a is cut after a (shallowest first)
    let start: u64 = prefixes(&s(&root, "t.php"))
        .iter()
        .map(|p| entry_bytes(p, p))
        .sum();
    let step1: u64 = [s(&root, "dé"), s(&root, "dé/k.php")]
        .iter()
        .map(|p| entry_bytes(p, p))
        .sum();
    let a = s(&root, "a");
    let limit = start
        + step1
        + entry_bytes(&a, &a)
        + entry_bytes(&s(&root, "a/bb"), &s(&root, "a/bb"))
        + 10;
    let steps = [
        Step {
            sleep_us: 0,
            includes: vec![s(&root, "dé/k.php")],
        },
        // a, a/bb fit; a/bb/ccc and f.php do not
        Step {
            sleep_us: 0,
            includes: vec![s(&root, "a/bb/ccc/f.php")],
        },
        // the link's entry (both names) does not fit either
        Step {
            sleep_us: 0,
            includes: vec![s(&root, "lnk/ccc/f.php"), s(&root, "h/i.php")],
        },
    ];
    check(&root, limit, 120, &steps, &links);
}

#[test]
fn expired_entries_unlinked_by_lookups_that_pass_them() {
    let (_dir, root) = lab();
    // a script in the same chain as the directory a/
    let a = s(&root, "a");
    let chain = |p: &str| key(p.as_bytes()) % CHAINS as u64;
    let c = (0..200_000)
        .map(|i| s(&root, &format!("c{i}.php")))
        .find(|p| chain(p) == chain(&a))
        .expect("a name in a/'s chain");
    std::fs::write(&c, "<?php\n").expect("lab file");
    // and a script under a/ in another chain
    let g = (0..100)
        .map(|i| s(&root, &format!("a/g{i}.php")))
        .find(|p| chain(p) != chain(&a))
        .expect("a name outside a/'s chain");
    std::fs::write(&g, "<?php\n").expect("lab file");
    let links = BTreeMap::new();
    let steps = [
        // a, a/gN.php cached (TTL 1: expired two seconds later)
        Step {
            sleep_us: 0,
            includes: vec![g.clone()],
        },
        // the lookup of c passes a (expired: unlinked, its bytes back);
        // a/gN.php, in another chain, is expired but still listed
        Step {
            sleep_us: 2_200_000,
            includes: vec![c.clone()],
        },
        // a resolved again from scratch
        Step {
            sleep_us: 0,
            includes: vec![s(&root, "a/bb/ccc/f.php")],
        },
        // a name through `..`: its entry holds the resolved name too
        Step {
            sleep_us: 0,
            includes: vec![format!("{a}/bb/../{}", g.rsplit('/').next().unwrap())],
        },
    ];
    check(&root, 1 << 20, 1, &steps, &links);
}
