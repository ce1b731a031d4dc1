//! `statstorm analyze --format json` on every committed fixture, checked
//! against the construction (manifests written by scripts/gen-fixtures) and
//! against an independent count of syscall names made with awk.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.ends_with(".strace.gz") || (n.ends_with(".txt") && dir.ends_with("seeds"))
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in {dir}");
    v
}

fn analyze(path: &Path) -> Value {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .args(["analyze", "--format", "json", "--top", "1000000"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: exit {:?}\n{}",
        path.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["schema"], "statstorm.analyze/1");
    v
}

/// The text of a fixture, decompressed into a temp file for awk.
fn plain(path: &Path, dir: &Path) -> PathBuf {
    let raw = std::fs::read(path).unwrap();
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut s = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut s)
            .unwrap();
        s
    } else if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        zstd::stream::decode_all(&raw[..]).unwrap()
    } else {
        raw
    };
    let out = dir.join(format!(
        "{}.plain",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&out, text).unwrap();
    out
}

/// Independent count of calls per syscall name: strip the `[pid N]` or pid
/// column (each with `-Y`'s `<comm>`), the timestamp, `-t -r`'s `(+ delta)`
/// and `-n`/`-i`'s bracketed numbers, skip `<... resumed>` lines (the
/// unfinished line counted the call), count `name(` of lines that have a
/// result or are unfinished. A line that strace's own `Process N attached`
/// message cut (stderr output) is joined with its rest on the next line.
const AWK_COUNT: &str = r#"
{
  l = held $0
  held = ""
  if (l ~ /.strace: Process [0-9]+ attached$/) {
    sub(/strace: Process [0-9]+ attached$/, "", l)
    held = l
    next
  }
  sub(/^\[pid +[0-9]+(<[^>]*>)?\] +/, "", l)
  sub(/^[0-9]+(<[^>]*>)? +/, "", l)
  sub(/^[0-9][0-9:.]* +/, "", l)
  sub(/^\(\+ *[0-9.]+\) +/, "", l)
  sub(/^\[ *([0-9]+|\?+)\] +/, "", l)
  sub(/^\[([0-9a-f]+|\?+)\] +/, "", l)
  if (l ~ /^<\.\.\. /) next
  if (l !~ /\) += / && l !~ /<unfinished \.\.\.>$/) next
  if (match(l, /^[a-z_0-9]+\(/)) n[substr(l, 1, RLENGTH - 1)]++
}
END { for (k in n) print k, n[k] }
"#;

fn awk_counts(file: &Path) -> BTreeMap<String, u64> {
    let out = std::process::Command::new("awk")
        .arg(AWK_COUNT)
        .arg(file)
        .output()
        .expect("awk is required");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn json_counts(v: &Value) -> BTreeMap<String, u64> {
    v["totals"]["by_syscall"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, r)| (k.clone(), r["calls"].as_u64().unwrap()))
        .collect()
}

/// Checks one analyze result against a manifest written by gen-fixtures.
pub fn check_manifest(v: &Value, m: &Value, what: &str) {
    let req = &m["requests"];
    assert_eq!(v["request_split"]["mode"], req["mode"], "{what}: mode");
    let n = req["count"].as_u64().unwrap();
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len() as u64, n, "{what}: requests");
    // Time order.
    let starts: Vec<i64> = reqs.iter().filter_map(|r| r["start_us"].as_i64()).collect();
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "{what}: requests not in time order"
    );
    if let Some(each) = req["each_by_syscall"].as_object() {
        for r in reqs {
            for (k, c) in each {
                assert_eq!(&r["by_syscall"][k], c, "{what}: request {} {k}", r["index"]);
            }
        }
    }
    let paths = v["paths"].as_array().unwrap();
    for spec in m["paths"].as_array().into_iter().flatten() {
        let (pre, suf) = (
            spec["prefix"].as_str().unwrap(),
            spec["suffix"].as_str().unwrap(),
        );
        let hits: Vec<&Value> = paths
            .iter()
            .filter(|p| {
                let s = p["path"].as_str().unwrap();
                s.starts_with(pre) && s.ends_with(suf)
            })
            .collect();
        assert_eq!(
            hits.len() as u64,
            spec["count"].as_u64().unwrap(),
            "{what}: paths {pre}*{suf}"
        );
        for h in &hits {
            if let Some(exact) = spec["by_syscall"].as_object() {
                let got = h["by_syscall"].as_object().unwrap();
                assert_eq!(got, exact, "{what}: {}", h["path"]);
            }
            if let Some(min) = spec["by_syscall_at_least"].as_object() {
                for (k, c) in min {
                    assert!(
                        h["by_syscall"][k].as_u64().unwrap_or(0) >= c.as_u64().unwrap(),
                        "{what}: {} {k}",
                        h["path"]
                    );
                }
            }
            if let Some(max) = spec["by_syscall_at_most"].as_object() {
                for (k, c) in max {
                    assert!(
                        h["by_syscall"][k].as_u64().unwrap_or(0) <= c.as_u64().unwrap(),
                        "{what}: {} {k}",
                        h["path"]
                    );
                }
            }
            if let Some(e) = spec["enoent"].as_u64() {
                assert_eq!(
                    h["enoent"].as_u64().unwrap(),
                    e,
                    "{what}: {} ENOENT",
                    h["path"]
                );
            }
        }
    }
    let by_file = v["realpath"]["by_file"].as_array().unwrap();
    for spec in m["walks"].as_array().into_iter().flatten() {
        let pre = spec["prefix"].as_str().unwrap();
        let hits: Vec<&Value> = by_file
            .iter()
            .filter(|w| w["path"].as_str().unwrap().starts_with(pre))
            .collect();
        assert_eq!(
            hits.len() as u64,
            spec["files"].as_u64().unwrap(),
            "{what}: walked files"
        );
        for h in hits {
            assert_eq!(h["walks"], spec["walks_each"], "{what}: {}", h["path"]);
            assert_eq!(h["lstats"], spec["lstats_each"], "{what}: {}", h["path"]);
        }
    }
    for spec in m["walks_min"].as_array().into_iter().flatten() {
        let pre = spec["prefix"].as_str().unwrap();
        let hits: Vec<&Value> = by_file
            .iter()
            .filter(|w| {
                let p = w["path"].as_str().unwrap();
                p.starts_with(pre) && p.ends_with(".php")
            })
            .collect();
        assert_eq!(
            hits.len() as u64,
            spec["files"].as_u64().unwrap(),
            "{what}: walked files"
        );
        for h in hits {
            assert!(
                h["walks"].as_u64().unwrap() >= spec["walks_each_at_least"].as_u64().unwrap(),
                "{what}: {}",
                h["path"]
            );
        }
    }
    if let Some(b) = m.get("bursts") {
        let bursts = v["bursts"].as_array().unwrap();
        assert!(
            bursts.len() as u64 >= b["at_least"].as_u64().unwrap(),
            "{what}: bursts {bursts:?}"
        );
        assert_eq!(
            v["timeseries"]["burst_period_s"].as_f64(),
            b["period_s"].as_f64(),
            "{what}: burst period"
        );
        for x in &bursts[1..] {
            assert_eq!(
                x["metadata_calls"], b["calls_each_after_first"],
                "{what}: {x}"
            );
        }
        for w in bursts.windows(2) {
            assert_eq!(
                w[1]["start_s"].as_i64().unwrap() - w[0]["start_s"].as_i64().unwrap(),
                b["period_s"].as_i64().unwrap(),
                "{what}: burst spacing"
            );
        }
    }
    // Per-request counts add up to the totals for request-bound events.
    let sum_walks: u64 = reqs
        .iter()
        .map(|r| r["realpath_walks"].as_u64().unwrap())
        .sum();
    assert!(sum_walks <= v["totals"]["realpath_walks"].as_u64().unwrap());
}

/// Every strace log committed anywhere in the repository.
fn all_committed_traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
                continue;
            }
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            // tests/fixtures/evidence holds the recording machine's files
            // (pool files, fstab, mountstats, nfsstat -c) beside its
            // captures: only its captures are traces
            let evidence = p.parent().is_some_and(|d| d.ends_with("evidence"));
            let trace = n.contains(".strace")
                || (n.ends_with(".txt") && !n.starts_with("README") && !evidence)
                || n.ends_with(".txt.gz")
                || n.ends_with(".txt.zst")
                || n.rsplit_once('.').is_some_and(|(b, pid)| {
                    b.ends_with("trace") && pid.bytes().all(|c| c.is_ascii_digit())
                });
            if trace && !n.ends_with(".json") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&repo().join("tests/fixtures"), &mut v);
    walk(&repo().join("crates/trace/tests/fixtures"), &mut v);
    v.sort();
    v
}

/// Every committed trace (this crate's fixtures, the seeds' excerpts, the
/// PHP model's captures, the parser's format fixtures): the count of each
/// syscall name equals awk's. Pure `strace -c` tables (no call lines) are
/// checked in `seed_004_summary_tables`.
#[test]
fn every_fixture_matches_awk_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let files = all_committed_traces();
    assert!(files.len() >= 40, "{} traces", files.len());
    for f in files {
        let name = f.strip_prefix(repo()).unwrap_or(&f).display().to_string();
        let v = analyze(&f);
        if v["input"]["events"] == 0 && v["input"]["summary_rows"].as_u64().unwrap() > 0 {
            continue; // a summary table only
        }
        let text = plain(&f, tmp.path());
        let awk = awk_counts(&text);
        let got = json_counts(&v);
        assert!(!awk.is_empty(), "{name}: awk found nothing");
        assert_eq!(
            got, awk,
            "{name}: calls per syscall differ from awk's count"
        );
        let events: u64 = got.values().sum();
        assert_eq!(v["totals"]["events"].as_u64().unwrap(), events, "{name}");
    }
}

/// Every committed trace with a manifest matches its construction.
#[test]
fn fixtures_match_construction() {
    let dir = repo().join("tests/fixtures/strace");
    let mut n = 0;
    for f in fixtures("tests/fixtures/strace") {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let stem = name.trim_end_matches(".strace.gz");
        let mpath = dir.join(format!("{stem}.manifest.json"));
        if !mpath.exists() {
            continue; // checked by awk only
        }
        let m: Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
        assert_eq!(m["trace"], name.as_str());
        check_manifest(&analyze(&f), &m, &name);
        n += 1;
    }
    assert!(n >= 5);
}

#[test]
fn seed_003_walk_is_shallowest_first() {
    let v = analyze(&repo().join("tests/fixtures/seeds/003-strace-r.txt"));
    assert_eq!(v["input"]["events"], 14);
    assert_eq!(v["input"]["skipped"]["total"], 3);
    let rp = &v["realpath"];
    assert_eq!(rp["walks"], 1);
    assert_eq!(rp["lstats"], 8);
    assert_eq!(rp["shallowest_first"], 1);
    assert_eq!(rp["deepest_first"], 0);
    assert_eq!(v["request_split"]["mode"], "whole");
}

#[test]
fn seed_004_summary_tables() {
    for (file, calls, us) in [
        ("004-strace-c-before.txt", 12025, 48102),
        ("004-strace-c-after.txt", 12501, 102),
    ] {
        let path = repo().join("tests/fixtures/seeds").join(file);
        let v = analyze(&path);
        // Independent reading of the same table with awk.
        let out = std::process::Command::new("awk")
            .arg(r#"$NF == "newfstatat" { print $4, $5, $2 }"#)
            .arg(&path)
            .output()
            .unwrap();
        let awk = String::from_utf8(out.stdout).unwrap();
        let f: Vec<&str> = awk.split_whitespace().collect();
        let t = &v["totals"]["by_syscall"]["newfstatat"];
        assert_eq!(t["calls"].as_u64().unwrap(), f[0].parse::<u64>().unwrap());
        assert_eq!(t["calls"], calls);
        assert_eq!(t["errors"].as_u64().unwrap(), f[1].parse::<u64>().unwrap());
        let secs: f64 = f[2].parse().unwrap();
        assert_eq!(t["time_us"].as_u64().unwrap(), (secs * 1e6).round() as u64);
        assert_eq!(t["time_us"], us);
        assert_eq!(v["input"]["events"], 0);
    }
}

#[test]
fn sample_runs_and_says_what_it_is() {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .args(["analyze", "--sample"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Findings"), "{text}");
    assert!(text.contains("Realpath walks"), "{text}");
    assert!(
        text.contains("of metadata calls are realpath walks"),
        "{text}"
    );
    assert!(text.contains("open_basedir"), "{text}");
    assert!(text.contains("the realpath cache keeps nothing"), "{text}");
}

#[test]
fn markdown_and_text_render_the_same_totals() {
    let f = repo().join("tests/fixtures/strace/cli-file-exists.strace.gz");
    let md = Command::cargo_bin("statstorm")
        .unwrap()
        .args(["analyze", "--format", "md"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(md.status.success());
    let md = String::from_utf8(md.stdout).unwrap();
    let v = analyze(&f);
    let access = v["totals"]["by_syscall"]["access"]["calls"]
        .as_u64()
        .unwrap();
    assert!(md.starts_with("# statstorm analyze"));
    assert!(md.contains(&format!("| access | {access} |")), "{md}");
}

/// Regenerates small traces with the real php, php-fpm and strace of this
/// machine (scripts/gen-fixtures in a temp dir) and checks them against
/// their construction and against awk. Fails if a tool is missing.
#[test]
fn regenerated_with_real_php_matches_construction() {
    for tool in ["php", "strace", "php-fpm8.2", "cgi-fcgi"] {
        let ok = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(
            ok,
            "{tool} is required for this test (apt-get install php-cli php8.2-fpm libfcgi-bin strace)"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let root = tmp.path().join("root");
    let st = std::process::Command::new(repo().join("scripts/gen-fixtures"))
        .arg(&out)
        .args(["cli-include-tree", "cli-file-exists", "fpm-include"])
        .env("STATSTORM_FX_ROOT", &root)
        .env(
            "STATSTORM_FX_PORT",
            (20000 + std::process::id() % 20000).to_string(),
        )
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "gen-fixtures failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    for name in ["cli-include-tree", "cli-file-exists", "fpm-include"] {
        let trace = out.join(format!("{name}.strace.gz"));
        let m: Value = serde_json::from_slice(
            &std::fs::read(out.join(format!("{name}.manifest.json"))).unwrap(),
        )
        .unwrap();
        assert!(m["paths"][0]["prefix"]
            .as_str()
            .unwrap()
            .starts_with(root.to_str().unwrap()));
        let v = analyze(&trace);
        check_manifest(&v, &m, name);
        let text = plain(&trace, tmp.path());
        assert_eq!(json_counts(&v), awk_counts(&text), "{name}: awk");
    }
}

/// The request split against the NFS lab's own bookkeeping: every php-fpm
/// series trace in `../shared/fixtures/nfs-lab` (a worker traced for a
/// whole series of requests) has one request per lab run in `runs.jsonl`,
/// each starting inside that run's measured `start`..`end` window.
#[test]
fn request_split_matches_nfs_lab_runs() {
    let lab = repo().join("../shared/fixtures/nfs-lab");
    let runs = std::fs::read_to_string(lab.join("runs.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e}", lab.join("runs.jsonl").display()));
    let mut by_file: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for line in runs.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let Some(f) = r["strace"].as_str() else {
            continue;
        };
        if r["kind"] != "cli" && f.contains("series") {
            by_file
                .entry(f.to_string())
                .or_default()
                .push((r["start"].as_f64().unwrap(), r["end"].as_f64().unwrap()));
        }
    }
    assert!(by_file.len() >= 10, "lab series files: {}", by_file.len());
    for (f, windows) in &by_file {
        let v = analyze(&lab.join(f));
        assert_eq!(v["request_split"]["mode"], "fpm", "{f}");
        let reqs = v["requests"].as_array().unwrap();
        assert_eq!(reqs.len(), windows.len(), "{f}: requests vs lab runs");
        for (s, e) in windows {
            let inside = reqs.iter().any(|q| {
                let t = q["start_us"].as_i64().unwrap() as f64;
                t >= s * 1e6 && t <= e * 1e6
            });
            assert!(inside, "{f}: no request starts in the lab run {s}..{e}");
        }
    }
}

/// `strace -Y`: each process row carries the pid's last command name (awk
/// reads it off the lines); without `-Y` it is null.
#[test]
fn processes_carry_command_names_under_dash_y() {
    let f = repo().join("crates/trace/tests/fixtures/formats/f-Y-tt-T-y.txt");
    let v = analyze(&f);
    let out = std::process::Command::new("awk")
        .arg(r#"match($1, /<[^>]*>/) { c[substr($1, 1, RSTART - 1)] = substr($1, RSTART + 1, RLENGTH - 2) }
            END { for (p in c) print p, c[p] }"#)
        .arg(&f)
        .output()
        .expect("awk is required");
    let want: BTreeMap<u64, String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (p, c) = l.split_once(' ').unwrap();
            (p.parse().unwrap(), c.to_string())
        })
        .collect();
    let got: BTreeMap<u64, String> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["comm"].as_str().expect("a command name").to_string(),
            )
        })
        .collect();
    assert!(want.len() >= 2, "{want:?}");
    assert_eq!(got, want);
    let plain = analyze(&repo().join("crates/trace/tests/fixtures/formats/f-ttt-T.txt"));
    for p in plain["processes"].as_array().unwrap() {
        assert!(p["comm"].is_null(), "{p}");
    }
}
