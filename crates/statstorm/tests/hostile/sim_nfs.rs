//! Hostile input to the simulator and the NFS model (issue 24: 1-4).

use crate::common::{many_requests_gz, run, run_capped, run_with_into};
use std::fmt::Write as _;
use std::path::Path;

/// A small php-cli trace: three stats under /srv at epoch times.
fn small_trace(dir: &Path) {
    let mut t = String::new();
    for (i, f) in ["a.php", "b.php", "a.php"].iter().enumerate() {
        writeln!(
            t,
            "100 1700000000.{:06} newfstatat(AT_FDCWD, \"/srv/{f}\", {{st_mode=S_IFREG|0644, st_size=10, ...}}, 0) = 0 <0.000010>",
            100 + i * 100
        )
        .unwrap();
    }
    std::fs::write(dir.join("t.strace"), t).unwrap();
}

fn predict_nfs<'a>(vers: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "predict",
        "t.strace",
        "--nfs-root",
        "/srv",
        "--from-mount",
        vers,
    ];
    a.extend_from_slice(extra);
    a
}

/// Case 1: more requests than a 20-bit event id holds (1,048,577 replayed
/// requests panicked with "index out of bounds", exit 101).
#[test]
fn simulate_replays_more_than_2_pow_20_requests() {
    let d = tempfile::tempdir().unwrap();
    let n = (1usize << 20) + 1;
    let mut reqs = String::with_capacity(n * 26 + 64);
    reqs.push_str("{\"schema\": \"statstorm.requests/1\", \"requests\": [");
    for i in 0..n {
        if i > 0 {
            reqs.push(',');
        }
        reqs.push_str("{\"start_s\":0,\"steps\":[]}");
    }
    reqs.push_str("]}");
    std::fs::write(d.path().join("reqs.json"), reqs).unwrap();
    std::fs::write(
        d.path().join("s.toml"),
        "name = \"many\"\nduration_s = 1\n[arrivals]\nkind = \"replay\"\n[workload]\nkind = \"file\"\n\
         file = \"reqs.json\"\n[pool]\nmax_children = 1\nlisten_backlog = 1\n\
         [server]\nrtt_ms = 1.0\nservice = { kind = \"fixed\", ms = 1.0 }\n",
    )
    .unwrap();
    let r = run(d.path(), &["simulate", "s.toml", "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["requests"]["arrived"], n as u64);
    assert_eq!(v["requests"]["served"], n as u64);
}

/// Case 1 through predict: a valid trace of 1,048,577 php-fpm requests
/// (one stat each; 360 MB of text, written gzipped) took 3.9 GB and then
/// panicked in the simulator; at c6faa8b it ran but peaked at 4.5 GB
/// (every request's counts a map of strings, copied several times). At
/// 656a671 it needed 768 MiB of address space (two threads, two malloc
/// arenas): the report's rows, the fold's units and the split's plan, the
/// simulator's tables, one each per request; at ee1aeb3 it needed more
/// than 288 MiB (each side's counts, the latency simulation's arrivals and
/// TTFBs, one each per request). It is predicted whole within 256 MiB:
/// what is kept per request is on disk (`engine::column`).
#[test]
fn predict_of_more_than_2_pow_20_requests_fits_in_256_mib() {
    let d = tempfile::tempdir().unwrap();
    let n = (1usize << 20) + 1;
    many_requests_gz(&d.path().join("many.strace.gz"), n);
    let out = std::fs::File::create(d.path().join("out.txt")).unwrap();
    let r = run_with_into(
        d.path(),
        Some(256),
        &CAPPED_ENV,
        out,
        &["predict", "--php", "opcache.enable=0", "many.strace.gz"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(d.path().join("out.txt")).unwrap();
    assert!(
        text.contains(&format!(
            "requests: {n} (php-fpm: {n} requests in 4 workers"
        )),
        "{}",
        &text[..text.len().min(2000)]
    );
    let all = text
        .lines()
        .find(|l| l.starts_with(" all "))
        .expect("a totals row");
    let cells: Vec<&str> = all.split_whitespace().collect();
    // all | before: stat open access rdlink | after: the same
    assert_eq!(cells[2], n.to_string(), "{all}");
    assert_eq!(cells[7], n.to_string(), "{all}");
}

/// The same capture through diagnose (a baseline and each candidate
/// predicted on it): 656a671 needed more than 896 MiB (each prediction's
/// rows in memory), ee1aeb3 more than 320 MiB (each plan's TTFBs listed
/// for its quantiles, each side's counts per request); it runs within 320
/// MiB.
#[test]
fn diagnose_of_more_than_2_pow_20_requests_fits_in_320_mib() {
    let d = tempfile::tempdir().unwrap();
    let n = (1usize << 20) + 1;
    many_requests_gz(&d.path().join("many.strace.gz"), n);
    let out = std::fs::File::create(d.path().join("out.json")).unwrap();
    let r = run_with_into(
        d.path(),
        Some(320),
        &CAPPED_ENV,
        out,
        &["diagnose", "--format", "json", "many.strace.gz"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(d.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], "statstorm.diagnose/1");
    assert_eq!(v["requests"], n as u64);
}

/// Two of rayon's threads and two malloc arenas: the address space a
/// capped run needs does not follow the machine's cores.
const CAPPED_ENV: [(&str, &str); 2] = [("RAYON_NUM_THREADS", "2"), ("MALLOC_ARENA_MAX", "2")];

/// Case 2: a Poisson rate whose gaps round to 0 ns never ended; it is
/// refused, naming the limit.
#[test]
fn predict_rate_beyond_one_per_ns_is_refused() {
    let d = tempfile::tempdir().unwrap();
    small_trace(d.path());
    let r = run(d.path(), &predict_nfs("vers=3", &["--rate", "1e11"]));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("arrivals.rate_per_s must be at most 1e9 (one request per ns"),
        "{}",
        r.stderr
    );
}

/// Case 2, the scenario form: `rate_per_s = 1e12`.
#[test]
fn simulate_scenario_rate_beyond_one_per_ns_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("s.toml"),
        "name = \"fast\"\nduration_s = 60\n[arrivals]\nkind = \"poisson\"\nrate_per_s = 1e12\n\
         [workload]\nkind = \"opcache_includes\"\ncpu_ms = 1.0\nincludes = 1\nrevalidate_freq_s = 0\n\
         fs = \"local\"\n[pool]\nmax_children = 2\nlisten_backlog = 2\n[local_fs]\nop_us = 4.0\n",
    )
    .unwrap();
    let r = run(d.path(), &["simulate", "s.toml"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("arrivals.rate_per_s must be at most 1e9"),
        "{}",
        r.stderr
    );
    // a rate the clock holds, but 6e11 arrivals: refused too
    std::fs::write(
        d.path().join("s.toml"),
        std::fs::read_to_string(d.path().join("s.toml"))
            .unwrap()
            .replace("duration_s = 60", "duration_s = 600")
            .replace("1e12", "1e9"),
    )
    .unwrap();
    let r = run(d.path(), &["simulate", "s.toml"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("6.000e11 requests"), "{}", r.stderr);
}

/// Case 3: a server change far after the trace saturated to i64::MAX and
/// the NFSv4 renewal loop never ended. It ends, and the note says the
/// change lies outside the trace.
#[test]
fn predict_server_change_far_after_the_trace_ends_with_a_note() {
    let d = tempfile::tempdir().unwrap();
    small_trace(d.path());
    for t in ["1e13", "36000"] {
        let change = format!("{t}:/srv/a.php");
        let r = run(
            d.path(),
            &predict_nfs(
                "vers=4.1",
                &["--delegations", "on", "--server-change", &change],
            ),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let side = if t == "36000" {
            "before the first traced call"
        } else {
            "after the last traced call"
        };
        assert!(
            r.stdout
                .contains(&format!("--server-change {change}: {side}")),
            "{}",
            r.stdout
        );
    }
}

/// Case 10 (the NFS part): `nan` and `inf` are not times.
#[test]
fn predict_server_change_at_nan_is_refused() {
    let d = tempfile::tempdir().unwrap();
    small_trace(d.path());
    for t in ["nan", "inf", "-inf"] {
        let change = format!("{t}:/srv/a.php");
        let flag = format!("--server-change={change}");
        let r = run(d.path(), &predict_nfs("vers=4.1", &[&flag]));
        assert_eq!(r.code, 2, "{t}: {}\n{}", r.stdout, r.stderr);
        assert!(
            r.stderr
                .contains(&format!("'{t}' is not a finite number of seconds")),
            "{}",
            r.stderr
        );
    }
}

/// Case 4: 200 distinct paths about 2,000 directories deep (~800 KB of
/// trace). The NFS model kept a full-path string per prefix (4.35 GB); with
/// prefixes interned the run fits in 512 MiB of address space.
#[test]
fn predict_nfs_on_deep_paths_fits_in_512_mib() {
    let d = tempfile::tempdir().unwrap();
    let (paths, depth) = (200usize, 1995usize);
    let deep = "/d".repeat(depth);
    let mut t = String::new();
    for i in 0..paths {
        writeln!(
            t,
            "100 1700000000.{:06} newfstatat(AT_FDCWD, \"/srv/p{i:03}{deep}/f.php\", {{st_mode=S_IFREG|0644, st_size=10, ...}}, 0) = 0 <0.000010>",
            100 + i * 100
        )
        .unwrap();
    }
    assert!(t.len() > 800_000, "{}", t.len());
    std::fs::write(d.path().join("t.strace"), t).unwrap();
    let r = run_capped(d.path(), 512, &predict_nfs("vers=3", &["--format", "json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    // A cold v3 client within the attribute timeouts: one LOOKUP per
    // component below /srv (p000, 1995 x d, f.php) and one ACCESS per
    // directory searched (/srv once, then p000 and every d) per path.
    let rpc = &v["totals"]["before"]["rpc"];
    assert_eq!(rpc["LOOKUP"], (paths * (depth + 2)) as u64, "{rpc}");
    assert_eq!(rpc["ACCESS"], (1 + paths * (depth + 1)) as u64, "{rpc}");
}
