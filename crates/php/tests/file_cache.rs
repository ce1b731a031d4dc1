//! OPcache's file cache (R67) against real PHP, alone
//! (`opcache.file_cache_only=1`: {cli,fpm}-{tree,filecheck}-fco, the cache
//! filled by an earlier process, and -fco-cold, the cache empty) and beside
//! shared memory ({cli,fpm}-{tree,filecheck}-fc, -fc-cold, and
//! fpm-{wordpress,mediawiki}-fc, -fc-cold), in php-cli and php-fpm, from
//! scripts/php-harness.
//!
//! - The lift finds the cache in exactly those captures, with the settings
//!   inferred (`opcache.file_cache=<dir>`; `opcache.file_cache_only=1` where
//!   php-cli created no lock file or a php-fpm worker loaded the same
//!   script from the cache in two requests) and the state on disk: every
//!   compiled script's `.bin` there in the filled ones, none in the cold.
//! - Lowered under the recorded settings, every request makes exactly the
//!   recorded number of calls of every syscall name (not only the checked
//!   stat/open/access/readlink of the round trip).
//! - The rule matters: lowered without the file cache (OPcache's shared
//!   memory alone), the same workloads give other counts; with the cache
//!   alone every compile opens a `.bin`, beside shared memory once per
//!   script for the process or pool (round trip exact:
//!   every_capture_round_trips; predictions from the complete captures:
//!   cross.rs).
//!
//! Run: `cargo test -p statstorm-php --release --test file_cache -- --nocapture`.

mod common;
use common::*;
use statstorm_php::lower::count_by_syscall;
use statstorm_php::{PhpConfig, PhpOpKind};

#[test]
fn file_cache_alone_is_found_lifted_and_lowered() {
    let caps = captures();
    let mut seen = 0;
    for c in &caps {
        let given = !c.config.file_cache.is_empty();
        let l = load(c);
        let w = &l.workload;
        let inferred = |k: &str| {
            w.evidence
                .inferred
                .iter()
                .find(|(x, _)| x == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            w.file_cache.is_some(),
            given,
            "{}: file cache found",
            c.name
        );
        if !given {
            assert_eq!(inferred("opcache.file_cache"), None, "{}", c.name);
            continue;
        }
        seen += 1;
        let fc = w.file_cache.as_ref().unwrap();
        assert_eq!(fc.dir, c.config.file_cache, "{}: directory", c.name);
        assert_eq!(
            inferred("opcache.file_cache").as_deref(),
            Some(fc.dir.as_str())
        );
        assert_eq!(
            inferred("opcache.enable").as_deref(),
            Some("1"),
            "{}",
            c.name
        );
        let only = c.config.file_cache_only;
        assert_eq!(
            c.name.contains("-fco"),
            only,
            "{}: the harness's settings",
            c.name
        );
        assert_eq!(
            inferred("opcache.file_cache_only").as_deref(),
            only.then_some("1"),
            "{}",
            c.name
        );
        let compiled: std::collections::BTreeSet<String> = w
            .requests
            .iter()
            .flat_map(|r| r.compiled())
            .map(str::to_string)
            .collect();
        if c.name.ends_with("-cold") {
            assert!(fc.present.is_empty(), "{}: an empty cache", c.name);
        } else {
            assert_eq!(fc.present, compiled, "{}: every script's .bin", c.name);
        }
        // the cache alone: every compile opens its .bin (read or,
        // missing, stored), nothing is kept in memory; beside shared
        // memory: each script once for the process or pool, shared memory
        // after
        let low = statstorm_php::lower(w, &c.config);
        let bins = low
            .iter()
            .flatten()
            .filter(|o| o.path.starts_with(&fc.dir) && o.path.ends_with(".bin"))
            .filter(|o| o.kind == statstorm_trace::op::OpKind::Open)
            .count();
        let compiles = if only {
            w.requests
                .iter()
                .flat_map(|r| &r.ops)
                .filter(|o| matches!(o.kind, PhpOpKind::Compile { .. }))
                .count()
        } else {
            compiled.len()
        };
        let stores = if c.name.ends_with("-cold") {
            compiled.len()
        } else {
            0
        };
        assert_eq!(bins, compiles + stores, "{}: .bin opens", c.name);
        // every syscall name, not only the checked ones (round trip):
        // the .bin's opens, reads, mkdirs and closes, the entry script's
        // getcwd, per request as recorded
        let trace = statstorm_trace::read_path(&c.path).unwrap();
        let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
        let real = statstorm_php::lift::request_ops(&trace, &reqs);
        // (the lab workloads; WordPress and MediaWiki round-trip within
        // 1% of the checked calls, roundtrip.rs)
        for (i, (a, b)) in low.iter().zip(&real).enumerate() {
            if is_app(&c.workload) {
                break;
            }
            assert_eq!(
                count_by_syscall(a),
                count_by_syscall(b),
                "{} request {i}: every syscall, model vs recorded",
                c.name
            );
        }
        // without the file cache: OPcache's shared memory
        let shm = PhpConfig {
            file_cache: String::new(),
            file_cache_only: false,
            ..c.config.clone()
        };
        let other = statstorm_php::lower(w, &shm);
        let (a, b) = (count_by_syscall(&low[0]), count_by_syscall(&other[0]));
        println!(
            "{}: with the file cache {a:?}\n{}  shared memory   {b:?}",
            c.name,
            " ".repeat(c.name.len())
        );
        assert_ne!(a, b, "{}: the file cache changed nothing", c.name);
    }
    assert_eq!(
        seen, 20,
        "{{cli,fpm}}-{{tree,filecheck}}-{{fc,fco}}{{,-cold}}, fpm-{{wordpress,mediawiki}}-fc{{,-cold}} (scripts/php-harness)"
    );
}
