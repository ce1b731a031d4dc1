//! `statstorm diagnose` through the command line: the JSON document's
//! shape (statstorm.diagnose/1), 80-column text, -o, and partial or odd
//! input giving a report that says what it could not determine.

mod common;

use assert_cmd::Command;
use common::{fixtures, json, run};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn lab(file: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/nfs-lab/strace/3/defaults")
        .join(file);
    assert!(p.exists(), "missing lab fixture {}", p.display());
    p
}

/// The JSON diagnosis of a lab capture (NFSv3 under /mnt/nfs).
fn lab_json(file: &str) -> Value {
    let t = lab(file);
    let mut args = vec![t.to_str().unwrap()];
    args.extend(LAB_NFS);
    json("diagnose", &args)
}

/// The lab's mount: NFSv3 under /mnt/nfs.
const LAB_NFS: [&str; 4] = ["--from-mount", "vers=3", "--nfs-root", "/mnt/nfs"];

fn arr<'a>(v: &'a Value, k: &str) -> &'a Vec<Value> {
    v[k].as_array()
        .unwrap_or_else(|| panic!("{k} is not an array: {v}"))
}

fn narrow(text: &str) {
    for (i, l) in text.lines().enumerate() {
        assert!(
            l.chars().count() <= 80,
            "line {} has {} columns: {l:?}",
            i + 1,
            l.chars().count()
        );
    }
}

#[test]
fn json_document_has_the_documented_fields() {
    let v = lab_json("fpm_nooc-series.strace.gz");
    assert_eq!(v["schema"], "statstorm.diagnose/1");
    let f = arr(&v, "findings");
    assert!(!f.is_empty());
    for x in f {
        for k in [
            "kind",
            "severity",
            "summary",
            "evidence",
            "mechanism",
            "share",
        ] {
            assert!(!x[k].is_null(), "finding without {k}: {x}");
        }
    }
    // ranked: most important first
    let sev = |x: &Value| match x["severity"].as_str().unwrap() {
        "critical" => 3,
        "major" => 2,
        "minor" => 1,
        _ => 0,
    };
    assert!(f.windows(2).all(|w| sev(&w[0]) >= sev(&w[1])));
    let plans = arr(&v, "plans");
    assert!(!plans.is_empty());
    for (i, p) in plans.iter().enumerate() {
        assert_eq!(p["rank"], i + 1);
        for c in arr(p, "changes") {
            assert!(c["key"].is_string() && c["value"].is_string(), "{c}");
        }
        for k in ["predicted", "risk", "verify", "effect", "risks"] {
            assert!(!p[k].is_null(), "plan without {k}: {p}");
        }
        assert!(p["predicted"]["before"]["rpcs"].is_object());
        assert!(p["predicted"]["after"]["latency"]["p99_ms"].is_number());
    }
    for n in arr(&v, "will_not_help") {
        assert!(
            n["effect"]["metadata_calls"]["direction"].is_string(),
            "{n}"
        );
    }
    assert!(!arr(&v, "assumed").is_empty());
    assert!(v["unknown"].is_array());
}

#[test]
fn text_fits_80_columns_and_o_writes_the_file() {
    let t = lab("fpm_nooc-series.strace.gz");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.txt");
    let stdout = run(
        "diagnose",
        &[
            &[t.to_str().unwrap()][..],
            &LAB_NFS,
            &["-o", out.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(stdout.is_empty());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("What is wrong") && text.contains("Plan 1"));
    narrow(&text);
    let text = run(
        "diagnose",
        &[fixtures("php/fpm-wordpress-obd.strace.zst")
            .to_str()
            .unwrap()],
    );
    narrow(&text);
}

/// Markdown says what the JSON holds: a heading per plan, in rank order,
/// each change in its heading, the snippets in code blocks, a table row
/// per change that will not help; and an strace -c table alone gives the
/// totals and what could not be determined.
#[test]
fn markdown_holds_every_plan_and_change() {
    let t = lab("fpm_nooc-series.strace.gz");
    let mut args = vec![t.to_str().unwrap()];
    args.extend(LAB_NFS);
    let j = json("diagnose", &args);
    args.extend(["--format", "md"]);
    let md = run("diagnose", &args);
    assert!(md.starts_with("# statstorm diagnose\n"), "{md}");
    let plans = arr(&j, "plans");
    assert!(!plans.is_empty());
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("### Plan ")).collect();
    assert_eq!(headings.len(), plans.len(), "{md}");
    for (h, p) in headings.iter().zip(plans) {
        assert!(
            h.starts_with(&format!("### Plan {} (risk: ", p["rank"])),
            "{h}"
        );
        for c in arr(p, "changes") {
            assert!(h.contains(c["key"].as_str().unwrap()), "{h} lacks {c}");
        }
    }
    let fences = md.lines().filter(|l| l.starts_with("```")).count();
    assert!(fences >= 2 && fences % 2 == 0, "{md}");
    let rows = md
        .lines()
        .skip_while(|l| !l.starts_with("## Will not help"))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .count();
    assert_eq!(rows, arr(&j, "will_not_help").len(), "{md}");
    for section in ["## What is wrong", "## What to change", "## Assumed"] {
        assert!(md.contains(section), "{section}: {md}");
    }
    let table = fixtures("seeds/004-strace-c-before.txt");
    let md = run("diagnose", &[table.to_str().unwrap(), "--format", "md"]);
    assert!(
        md.contains("## Could not determine") && md.contains("| newfstatat |"),
        "{md}"
    );
}

/// Odd input: a report that says what it could not determine, exit 0.
#[test]
fn partial_input_says_what_it_could_not_determine() {
    let dir = tempfile::tempdir().unwrap();
    // no timestamps, no durations, not PHP
    let plain = dir.path().join("plain.strace");
    std::fs::write(
        &plain,
        "1234 open(\"/etc/passwd\", O_RDONLY) = 3\n1234 stat(\"/etc/hosts\", {st_mode=S_IFREG|0644, st_size=1, ...}) = 0\n1234 close(3) = 0\n",
    )
    .unwrap();
    let v = json("diagnose", &[plain.to_str().unwrap()]);
    let unknown: Vec<&str> = arr(&v, "unknown")
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(unknown, ["no_timestamps", "no_durations", "not_php"]);
    assert!(arr(&v, "plans").is_empty());
    // nothing PHP proposed nor assumed for a program that is not PHP
    assert!(arr(&v, "will_not_help").is_empty());
    assert!(arr(&v, "assumed").iter().all(|a| a["topic"] != "php"));
    let text = run("diagnose", &[plain.to_str().unwrap()]);
    assert!(text.contains("Could not determine"));
    narrow(&text);
    // an strace -c table alone
    let table = fixtures("seeds/004-strace-c-before.txt");
    let v = json("diagnose", &[table.to_str().unwrap()]);
    assert_eq!(arr(&v, "unknown")[0], "summary_only");
    assert_eq!(v["baseline"]["recorded"]["metadata_calls"], 12025);
    let text = run("diagnose", &[table.to_str().unwrap()]);
    assert!(text.contains("an strace -c table has no calls"), "{text}");
    narrow(&text);
}

#[test]
fn missing_file_and_bad_setting_exit_2_naming_them() {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .args(["diagnose", "/nonexistent/x.strace"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.strace"));
    let t = lab("fpm_nooc-series.strace.gz");
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .args([
            "diagnose",
            t.to_str().unwrap(),
            "--php",
            "realpath_cache_sise=1M",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("realpath_cache_sise"), "{err}");
}

/// A change that does nothing alone can help beside another: php-cli
/// runs under open_basedir and realpath_cache_size=0 on their command
/// line (the lab's obd+rp0 run). The realpath cache does nothing while
/// open_basedir is set (R58); without it, the cache keeps the walks that
/// removing open_basedir alone leaves (3,905 newfstatat a run). The
/// diagnosis proposes both together and does not list the cache under
/// "will not help" (it did: only changes that helped alone were
/// combined).
#[test]
fn a_change_that_helps_only_beside_another_is_a_plan() {
    let v = lab_json("cli_inc_obd_rp0-warm.strace.gz");
    let keys = |changes: &Value| -> Vec<String> {
        changes
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["key"].as_str().unwrap().to_string())
            .collect()
    };
    let plan = arr(&v, "plans")
        .iter()
        .find(|p| {
            let k = keys(&p["changes"]);
            k.contains(&"open_basedir".to_string())
                && k.contains(&"realpath_cache_size".to_string())
        })
        .unwrap_or_else(|| {
            let plans: Vec<Vec<String>> = arr(&v, "plans")
                .iter()
                .map(|p| keys(&p["changes"]))
                .collect();
            panic!("no plan with both: {plans:?}")
        });
    let calls = &plan["predicted"];
    let (before, after) = (
        calls["before"]["metadata_calls"].as_f64().unwrap(),
        calls["after"]["metadata_calls"].as_f64().unwrap(),
    );
    assert!(after < 0.3 * before, "{before} -> {after}");
    for n in arr(&v, "will_not_help") {
        assert!(
            !keys(&n["changes"]).contains(&"realpath_cache_size".to_string()),
            "listed as no help: {n}"
        );
    }
}

/// The NFS client's counters (`--mountstats` twice, `--nfsstat`) of the
/// lab run that made the capture: the measured mix beside the model's in
/// the text (80 columns), the JSON (`counters[]`) and the HTML; modelled
/// without the server's read delegations, the warning names them. A
/// counters file that cannot be read exits 2 naming it and its line.
#[test]
fn counters_beside_the_model_and_bad_counters_exit_2() {
    let e = |f: &str| fixtures(&format!("evidence/{f}"));
    let (cap, before, after, nfsstat) = (
        e("lab-v41-php.strace.gz"),
        e("lab-v41-mountstats-before.txt"),
        e("lab-v41-mountstats-after.txt"),
        e("lab-v41-nfsstat-c.txt"),
    );
    let args: Vec<&str> = vec![
        cap.to_str().unwrap(),
        "--from-mount",
        "vers=4.1",
        "--nfs-root",
        "/mnt/nfs",
        "--mountstats",
        before.to_str().unwrap(),
        "--mountstats",
        after.to_str().unwrap(),
        "--nfsstat",
        nfsstat.to_str().unwrap(),
    ];
    let text = run("diagnose", &args);
    narrow(&text);
    assert!(
        text.contains("measured: mountstats of /mnt/nfs between"),
        "{text}"
    );
    assert!(text.contains("give --delegations on"), "{text}");
    assert!(
        text.contains("transport: 238 sends, 1.00 RPCs in flight and 0.00 waiting for a slot"),
        "{text}"
    );
    let v = json("diagnose", &args);
    let c = arr(&v, "counters");
    assert_eq!(c.len(), 2);
    assert_eq!(c[0]["measured"]["source"]["kind"], "mountstats");
    assert_eq!(c[0]["measured"]["total"], 238);
    assert_eq!(c[0]["measured"]["transport"]["sends"], 238);
    assert_eq!(c[0]["measured"]["transport"]["max_slots"], 2);
    assert!(c[1]["measured"].get("transport").is_none());
    assert_eq!(c[0]["hint"], "delegations");
    assert_eq!(c[1]["measured"]["source"]["kind"], "nfsstat");
    assert!(arr(&v, "assumed").iter().any(|a| a["basis"] == "measured"));
    // with the server's delegations, no warning
    let mut with = args.clone();
    with.extend(["--delegations", "on"]);
    let text = run("diagnose", &with);
    assert!(!text.contains("RPC mix differs"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    with.extend(["--format", "html", "-o", html.to_str().unwrap()]);
    run("diagnose", &with);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Measured by the NFS client") && page.contains("OPEN_NOATTR"));
    // a line mountstats cannot read
    let bad = dir.path().join("ms.txt");
    std::fs::write(
        &bad,
        "device s:/ mounted on /mnt/nfs with fstype nfs4 statvers=1.1\n\tper-op statistics\n\t     GETATTR: 1 x\n",
    )
    .unwrap();
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .args(["diagnose", cap.to_str().unwrap(), "--mountstats"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ms.txt") && err.contains("line 3"), "{err}");
}

/// `--mounts` reads an fstab as it reads /proc/mounts: comments and
/// other file systems skipped, the NFS lines' options (`_netdev`,
/// `nofail`, `defaults` among them) taken as written; a bad NFS line
/// exits 2 naming its line.
#[test]
fn mounts_reads_an_fstab() {
    let cap = fixtures("php/fpm-theme-rf60.strace.gz");
    let fstab = fixtures("evidence/fstab-theme");
    let v = json(
        "diagnose",
        &[cap.to_str().unwrap(), "--mounts", fstab.to_str().unwrap()],
    );
    assert_eq!(v["baseline"]["nfs"]["root"], "/tmp/statstorm-lab");
    let opts = v["baseline"]["nfs"]["options"].as_str().unwrap();
    assert!(
        opts.contains("vers=4.1") && opts.contains("noatime") && opts.contains("acregmax=60"),
        "{opts}"
    );
    // a misspelled option (no kernel mounts with it): kept, not modelled,
    // and said with the option it is likely a typo of
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("fstab-typo");
    let text = std::fs::read_to_string(&fstab).unwrap();
    std::fs::write(&typo, text.replace("actimeo=60", "actime=60")).unwrap();
    let args = [cap.to_str().unwrap(), "--mounts", typo.to_str().unwrap()];
    let v = json("diagnose", &args);
    assert_eq!(v["baseline"]["nfs"]["unknown"][0]["option"], "actime=60");
    assert_eq!(v["baseline"]["nfs"]["unknown"][0]["suggestion"], "actimeo");
    let out = run("diagnose", &args);
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("actime=60 (did you mean actimeo?)"), "{out}");
    narrow(&out);
    // an NFS line cut short
    let bad = dir.path().join("fstab");
    let text = std::fs::read_to_string(&fstab).unwrap();
    std::fs::write(
        &bad,
        text.replace("nfs4  rw,noatime,_netdev,vers=4.1,actimeo=60  0  0", "nfs4"),
    )
    .unwrap();
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .args(["diagnose", cap.to_str().unwrap(), "--mounts"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("8"), "{err}");
}
