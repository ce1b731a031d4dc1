//! The settings inferred from captures whose walks show a realpath cache
//! too small for the application or a short TTL, or whose compiles show
//! a full OPcache hash table (lift/budget.rs): every capture recorded with
//! a small `opcache.max_accelerated_files` gets its table size inferred;
//! every committed capture recorded with a short `realpath_cache_ttl` gets
//! that TTL inferred, every capture whose budget ran out gets its
//! `realpath_cache_size`, and no other capture gets either claimed
//! (a size of 0 under open_basedir or realpath_cache_size=0 aside, R58).
//! Captures: tests/fixtures/php (scripts/php-harness).

mod common;
use common::*;

/// Captures whose budget ran out (the file check's 7 entries fit in 1K:
/// nothing shows the budget, nothing is claimed).
const EXHAUSTED: &[&str] = &[
    "fpm-tree-rcs1k",
    "fpm-tree-rcs1k-ttl1",
    "fpm-wordpress-rcs16k",
    "fpm-mediawiki-rcs16k",
];

#[test]
fn realpath_cache_settings_are_inferred_from_the_trace() {
    let caps = captures();
    let (mut sizes, mut ttls, mut tables) = (0, 0, 0);
    for c in &caps {
        let given = |key: &str| {
            c.settings
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let l = load(c);
        let inferred = |key: &str| {
            l.workload
                .evidence
                .inferred
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let (size, ttl) = (given("realpath_cache_size"), given("realpath_cache_ttl"));
        let (isize, ittl) = (
            inferred("realpath_cache_size"),
            inferred("realpath_cache_ttl"),
        );
        println!(
            "{:<28} recorded size {:<5} ttl {:<4} inferred size {:?} ttl {:?}",
            c.name,
            size.as_deref().unwrap_or("-"),
            ttl.as_deref().unwrap_or("-"),
            isize,
            ittl
        );
        if EXHAUSTED.contains(&c.name.as_str()) {
            assert_eq!(isize, size, "{}: size", c.name);
            sizes += 1;
        } else {
            let off =
                size.as_deref() == Some("0") || c.settings.iter().any(|(k, _)| k == "open_basedir");
            assert!(
                isize.is_none() || (off && isize.as_deref() == Some("0")),
                "{}: size {isize:?}",
                c.name
            );
        }
        // a short TTL shows in every capture made with it (the requests
        // are spaced across it)
        assert_eq!(ittl, ttl, "{}: ttl", c.name);
        // a hash table smaller than the application: its size (the next
        // prime above the setting, which is what the trace can show)
        let maf = given("opcache.max_accelerated_files")
            .map(|v| statstorm_php::lower::accel_hash_size(v.parse().unwrap()).to_string());
        assert_eq!(
            inferred("opcache.max_accelerated_files"),
            maf,
            "{}: max_accelerated_files",
            c.name
        );
        tables += usize::from(maf.is_some());
        ttls += usize::from(ttl.is_some());
    }
    assert_eq!(sizes, EXHAUSTED.len(), "captures missing from the manifest");
    assert!(ttls >= 4, "only {ttls} captures with a short TTL");
    assert!(
        tables >= 2,
        "only {tables} captures with a small hash table"
    );
}
