//! OPcache's file cache used alone (`opcache.file_cache_only=1`, R67)
//! against real php-cli: the captures cli-{tree,filecheck}-fco (the cache
//! filled by an earlier process) and cli-{tree,filecheck}-fco-cold (the
//! cache empty), from scripts/php-harness.
//!
//! - The lift finds the cache in exactly those captures, with the settings
//!   inferred (`opcache.file_cache=<dir>`, `opcache.file_cache_only=1`) and
//!   the state on disk: every compiled script's `.bin` there in fco, none
//!   in fco-cold.
//! - The rule matters: lowered without the file cache (OPcache's shared
//!   memory instead, `opcache.enable_cli=1`), the same workloads give other
//!   counts; with it, every compile opens a `.bin` (round trip exact:
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
        let given = c.config.file_cache_only && !c.config.file_cache.is_empty();
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
        assert_eq!(inferred("opcache.file_cache_only").as_deref(), Some("1"));
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
        // every compile opens its .bin (read or, missing, stored)
        let low = statstorm_php::lower(w, &c.config);
        let bins = low
            .iter()
            .flatten()
            .filter(|o| o.path.starts_with(&fc.dir) && o.path.ends_with(".bin"))
            .filter(|o| o.kind == statstorm_trace::op::OpKind::Open)
            .count();
        let compiles = w
            .requests
            .iter()
            .flat_map(|r| &r.ops)
            .filter(|o| matches!(o.kind, PhpOpKind::Compile { .. }))
            .count();
        let stores = if c.name.ends_with("-cold") {
            compiled.len()
        } else {
            0
        };
        assert_eq!(bins, compiles + stores, "{}: .bin opens", c.name);
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
        seen, 4,
        "cli-{{tree,filecheck}}-fco{{,-cold}} (scripts/php-harness)"
    );
}
