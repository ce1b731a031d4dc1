//! diagnose on the seeds' cases (../shared/seeds): each built from real
//! captures (the PHP harness's, or the NFS lab's for 002 and 004) with
//! that seed's mount settings. For each: the seed's mechanism is the top
//! finding, the seed's fix (or a better one) is a plan with the predicted
//! effect stated here, and the seed's advice that the model shows to do
//! nothing here is under "will not help".

use statstorm_engine::diagnose::candidates::Setting;
use statstorm_engine::diagnose::figures::Direction;
use statstorm_engine::diagnose::findings::Kind;
use statstorm_engine::diagnose::{diagnose, Diagnosis, Options, Plan};
use statstorm_engine::predict::{NfsOptions, PredictOptions, SimOptions};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lab(block: &str, file: &str) -> PathBuf {
    let p = repo()
        .join("../shared/fixtures/nfs-lab/strace")
        .join(block)
        .join(file);
    assert!(p.exists(), "missing lab fixture {}", p.display());
    p
}

fn php(file: &str) -> PathBuf {
    repo().join("tests/fixtures/php").join(file)
}

fn run(traces: Vec<PathBuf>, mount: Option<(&str, &str)>) -> Diagnosis {
    run_with(traces, mount, SimOptions::default())
}

fn run_with(traces: Vec<PathBuf>, mount: Option<(&str, &str)>, sim: SimOptions) -> Diagnosis {
    let nfs = match mount {
        Some((opts, root)) => NfsOptions {
            from_mount: Some(opts.into()),
            nfs_root: vec![root.into()],
            ..NfsOptions::default()
        },
        None => NfsOptions::default(),
    };
    let opts = Options {
        predict: PredictOptions {
            traces,
            nfs,
            sim,
            ..PredictOptions::default()
        },
        writable: Vec::new(),
        ..Options::default()
    };
    diagnose(&opts, &mut |_| {}).expect("diagnose")
}

fn keys(s: &[Setting]) -> Vec<String> {
    s.iter().map(Setting::assignment).collect()
}

/// The best plan holding `change`.
fn plan_with<'a>(d: &'a Diagnosis, change: &str) -> &'a Plan {
    d.plans
        .iter()
        .find(|p| keys(&p.changes).iter().any(|k| k == change))
        .unwrap_or_else(|| panic!("no plan with {change}: {:?}", plans(d)))
}

fn plans(d: &Diagnosis) -> Vec<Vec<String>> {
    d.plans.iter().map(|p| keys(&p.changes)).collect()
}

fn no_help(d: &Diagnosis) -> Vec<String> {
    d.will_not_help
        .iter()
        .flat_map(|n| keys(&n.changes))
        .collect()
}

fn per_request(v: f64, d: &Diagnosis) -> f64 {
    v / d.requests as f64
}

/// Seed 000: a WordPress-style theme (180 require_once) on NFSv4.1,
/// OPcache revalidate_freq=60, 16 session slots, 2 ms per RPC. The
/// harness's capture: 4 workers, a request every 2 s for 150 s. The fix
/// applied: validate_timestamps=0 with a reload on deploy; the advice
/// lookupcache=pos does nothing here.
#[test]
fn seed_000_opcache_revalidation() {
    let d = run_with(
        vec![php("fpm-theme-rf60.strace.gz")],
        Some(("vers=4.1", "/tmp/statstorm-lab/site")),
        SimOptions {
            slots: Some(16),
            workers: Some(50),
            server_latency: Some(2.0),
            ..SimOptions::default()
        },
    );
    let f = &d.findings[0];
    assert_eq!(f.id(), "opcache_revalidation_storm", "{:?}", d.findings);
    // revalidate_freq (60) >= acregmax (60): every validation a GETATTR
    match &f.kind {
        Kind::OpcacheRevalidationStorm {
            every_validation_getattr,
            removed,
            ..
        } => {
            assert_eq!(*every_validation_getattr, Some(true));
            // two windows of 180 includes + the entry script
            assert!((350..=400).contains(&removed.rpc("GETATTR")), "{removed:?}");
        }
        k => panic!("{k:?}"),
    }
    let p = &d.plans[0];
    assert_eq!(keys(&p.changes), ["opcache.validate_timestamps=0"]);
    assert!(p.deploy.iter().any(|s| s.contains("reload php-fpm")));
    let getattr = (
        per_request(p.predicted.before.rpc("GETATTR") as f64, &d),
        per_request(p.predicted.after.rpc("GETATTR") as f64, &d),
    );
    assert!(getattr.0 > 4.0 && getattr.1 < 0.5, "{getattr:?}");
    // the requests that revalidate (one a minute: OPcache's stamp is
    // shared by the pool) wait ~490 ms for 181 GETATTRs; after: none
    let spikes: Vec<(f64, f64)> = d
        .plots
        .requests
        .iter()
        .skip(1)
        .filter(|q| q.rpcs_before.unwrap_or(0) > 150)
        .map(|q| (q.ttfb_before_ms.unwrap(), q.ttfb_after_ms.unwrap()))
        .collect();
    assert_eq!(spikes.len(), 2, "{:?}", d.plots.requests);
    for (b, a) in spikes {
        assert!(b > 400.0 && a < 50.0, "{b} -> {a}");
    }
    // as stalls (past 3x the median and 100 ms over it): the cold first
    // request and the two revalidating ones before, the cold one after
    let stalls = p.effect.stalls.expect("stalls with latency");
    assert_eq!((stalls.before, stalls.after), (3.0, 1.0));
    assert_eq!(stalls.direction, Direction::Down);
    assert!(no_help(&d).contains(&"lookupcache=pos".to_string()));
}

/// Seed 001: a theme on local storage (ZFS), revalidate_freq=0: OPcache
/// stats every script of every page. The fix applied: revalidate_freq=60.
#[test]
fn seed_001_revalidate_freq_0() {
    // the pool of seed 001 (200 static children, backlog 128,
    // php_admin_value[opcache.revalidate_freq] = 0)
    let pool = repo().join("tests/fixtures/evidence/seed-001.conf");
    let d = diagnose(
        &Options {
            predict: PredictOptions {
                traces: vec![php("fpm-tree-rf0.strace.gz")],
                ..PredictOptions::default()
            },
            fpm_conf: Some(pool),
            ..Options::default()
        },
        &mut |_| {},
    )
    .unwrap();
    let p = d.pool.as_ref().unwrap();
    assert_eq!((p.max_children, p.listen_backlog), (Some(200), 128));
    // the pool's admin value wins over any php.ini: the plan says where
    let at = &d.plans[0].snippets.set_at;
    assert_eq!(at.len(), 1, "{at:?}");
    assert!(at[0].1.ends_with("seed-001.conf:13"), "{at:?}");
    assert_eq!(
        d.findings[0].id(),
        "opcache_revalidation_storm",
        "{:?}",
        d.findings
    );
    assert_eq!(keys(&d.plans[0].changes), ["opcache.revalidate_freq=60"]);
    let e = &d.plans[0].effect;
    assert_eq!(e.metadata_calls.direction, Direction::Down);
    // 28.1 -> 9.4 metadata calls per request (two thirds fewer)
    let (b, a) = (
        per_request(e.metadata_calls.before, &d),
        per_request(e.metadata_calls.after, &d),
    );
    assert!(
        (27.0..30.0).contains(&b) && (8.0..11.0).contains(&a),
        "{b} -> {a}"
    );
    // validate_timestamps=0 does as well over this capture, at more risk
    let vt = plan_with(&d, "opcache.validate_timestamps=0");
    assert!(vt.rank > 1 && vt.deploy.iter().any(|s| s.contains("reload")));
}

/// Seed 001's 502s: the same pool with stats that sleep (the harness's
/// race capture: every newfstatat held 5 ms, revalidate_freq=2 stated as
/// the pool's 0), at 1,800 requests a second: the backlog of 128
/// overflows; revalidate_freq=60 ends the refusals. Storage that is not
/// NFS: each call takes the capture's time for its kind.
#[test]
fn seed_001_backlog_overflow() {
    let pool = repo().join("tests/fixtures/evidence/seed-001.conf");
    let d = diagnose(
        &Options {
            predict: PredictOptions {
                traces: vec![php("fpm-race-rf2.strace.gz")],
                sim: SimOptions {
                    rate: Some(1800.0),
                    ..SimOptions::default()
                },
                ..PredictOptions::default()
            },
            fpm_conf: Some(pool),
            ..Options::default()
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(d.findings[0].id(), "backlog_overflow", "{:?}", d.findings);
    assert_eq!(d.findings[1].id(), "opcache_revalidation_storm");
    let p = &d.plans[0];
    assert_eq!(keys(&p.changes), ["opcache.revalidate_freq=60"]);
    let (b, a) = (
        p.predicted.before.latency.as_ref().unwrap(),
        p.predicted.after.latency.as_ref().unwrap(),
    );
    // 253 of ~20,000 refused (1.3%) -> none; p99 326 -> 255 ms
    assert!(b.dropped > 100 && a.dropped == 0, "{b:?} -> {a:?}");
    assert!(a.p99_ms < 0.9 * b.p99_ms, "{b:?} -> {a:?}");
}

/// Seed 002: OPcache off on NFSv3 (mod_php): stat -> GETATTR, open ->
/// GETATTR (close-to-open). The lab's real client, defaults.
#[test]
fn seed_002_close_to_open() {
    let d = run(
        vec![lab("3/defaults", "fpm_nooc-series.strace.gz")],
        Some(("vers=3", "/mnt/nfs")),
    );
    assert_eq!(
        d.findings[0].id(),
        "close_to_open_revalidation",
        "{:?}",
        d.findings
    );
    // nocto alone (plans that add to it come first, below)
    let p = d
        .plans
        .iter()
        .find(|p| keys(&p.changes) == ["nocto"])
        .unwrap_or_else(|| panic!("no plan of nocto alone: {:?}", plans(&d)));
    let r = p.effect.rpcs.expect("rpcs");
    // 324 -> 188 RPCs per request: the open's GETATTR gone
    let (b, a) = (per_request(r.before, &d), per_request(r.after, &d));
    assert!(
        (300.0..350.0).contains(&b) && (170.0..200.0).contains(&a),
        "{b} -> {a}"
    );
    // the better plan also turns OPcache on (no open at all)
    let best = &d.plans[0];
    assert!(keys(&best.changes).contains(&"opcache.enable=1".to_string()));
    assert!(best.predicted.after.rpc_total <= p.predicted.after.rpc_total);
    // ... and with nocto and OPcache on, a longer attribute cache (nil
    // alone: each open's GETATTR refreshed the attributes) spares the
    // validations' GETATTRs: 143 RPCs a request
    assert!(
        keys(&best.changes).contains(&"actimeo=60".to_string()),
        "{:?}",
        plans(&d)
    );
    let b = per_request(best.effect.rpcs.expect("rpcs").after, &d);
    assert!((130.0..160.0).contains(&b), "best plan: {b} RPCs a request");
    assert!(!no_help(&d).contains(&"actimeo=60".to_string()));
    assert!(no_help(&d).contains(&"lookupcache=pos".to_string()));
    // the seed's own patches: sloppycto=3 would spare fewer GETATTRs than
    // nocto; noaccesscheck depends on the calls' user, not in the trace
    let sloppy = d
        .unavailable
        .iter()
        .find(|n| keys(&n.changes) == ["sloppycto=3"])
        .expect("sloppycto=3 predicted for comparison");
    let s = sloppy.effect.rpcs.unwrap();
    assert!(
        s.after > r.after && s.after < r.before,
        "{s:?} against nocto's {r:?}"
    );
    assert!(d
        .plans
        .iter()
        .all(|p| p.changes.iter().all(|c| c.key != "sloppycto")));
    assert!(d
        .not_proposed
        .iter()
        .any(|n| n.settings[0].key == "noaccesscheck" && n.why.contains("user")));
}

/// Seed 003: on realpath cache misses PHP lstat()s every path component
/// (10-15 per included file); the fix applied: realpath_cache_size=1M,
/// realpath_cache_ttl=300. Real WordPress with the 16K cache of the
/// seed's days (OPcache off); the seed counts syscalls, so no NFS mount.
#[test]
fn seed_003_realpath_cache_size() {
    let d = run(vec![php("fpm-wordpress-rcs16k.strace.zst")], None);
    assert_eq!(
        d.findings[0].id(),
        "realpath_cache_misses",
        "{:?}",
        d.findings
    );
    let p = d
        .plans
        .iter()
        .find(|p| keys(&p.changes) == ["realpath_cache_size=4M"])
        .unwrap_or_else(|| panic!("{:?}", plans(&d)));
    let b = per_request(p.predicted.before.calls("newfstatat") as f64, &d);
    let a = per_request(p.predicted.after.calls("newfstatat") as f64, &d);
    // 2,258 -> 836 stat calls per request with the cache alone
    assert!(
        (2_100.0..2_400.0).contains(&b) && (700.0..950.0).contains(&a),
        "{b} -> {a}"
    );
    // the best plan also turns OPcache on
    assert!(d.plans[0].predicted.after.metadata_calls <= p.predicted.after.metadata_calls);
    // the capture lasts 7 s: a longer ttl changes nothing in it
    assert!(no_help(&d).contains(&"realpath_cache_ttl=600".to_string()));
}

/// Seed 003's commenter: with open_basedir ~15k lstat per request, a few
/// after removing it. Real WordPress under open_basedir; realpath cache
/// tuning does nothing while open_basedir is set.
#[test]
fn seed_003_open_basedir() {
    let d = run(vec![php("fpm-wordpress-obd.strace.zst")], None);
    assert_eq!(d.findings[0].id(), "open_basedir_walks", "{:?}", d.findings);
    let p = plan_with(&d, "open_basedir=");
    assert_eq!(p.rank, 1, "{:?}", plans(&d));
    let b = per_request(p.predicted.before.calls("newfstatat") as f64, &d);
    let a = per_request(p.predicted.after.calls("newfstatat") as f64, &d);
    // 18,655 -> under 1,000 stat calls per request
    assert!(b > 15_000.0 && a < 1_000.0, "{b} -> {a}");
    assert!(
        no_help(&d).contains(&"realpath_cache_ttl=600".to_string()),
        "{:?}",
        no_help(&d)
    );
}

/// Seed 004: a job checks thousands of unique attachment paths on
/// NFSv4.1; each stat past acregmin is a GETATTR. Long attribute caching
/// removes them; nocto does nothing for a stat loop (the lab shows it).
#[test]
fn seed_004_file_check_loop() {
    let d = run(
        vec![
            lab("4.1/defaults", "cli_fe-cold.strace.gz"),
            lab("4.1/defaults", "cli_fe-warm.strace.gz"),
        ],
        Some(("vers=4.1", "/mnt/nfs")),
    );
    assert_eq!(d.findings[0].id(), "file_check_loop", "{:?}", d.findings);
    assert!(d
        .findings
        .iter()
        .any(|f| f.id() == "attribute_cache_expiry"));
    let p = &d.plans[0];
    assert!(
        keys(&p.changes)[0].starts_with("actimeo="),
        "{:?}",
        plans(&d)
    );
    // GETATTR 1,002 -> 0 per run
    let g = (
        per_request(p.predicted.before.rpc("GETATTR") as f64, &d),
        per_request(p.predicted.after.rpc("GETATTR") as f64, &d),
    );
    assert!(g.0 > 900.0 && g.1 < 10.0, "{g:?}");
    assert!(
        no_help(&d).contains(&"nocto".to_string()),
        "{:?}",
        no_help(&d)
    );
}
