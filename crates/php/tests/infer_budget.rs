//! The realpath cache budget inferred from captures made with a cache too
//! small for the application (lift/budget.rs): every committed capture
//! recorded with a `realpath_cache_size` below the default and the
//! default TTL gets that size inferred, and no capture recorded with the
//! default size gets a size other than 0 (open_basedir, R58) inferred.
//! Captures: tests/fixtures/php (scripts/php-harness).

mod common;
use common::*;

/// Captures whose budget ran out (the file check's 7 entries fit in 1K:
/// nothing shows the budget, nothing is claimed).
const EXHAUSTED: &[&str] = &[
    "fpm-tree-rcs1k",
    "fpm-wordpress-rcs16k",
    "fpm-mediawiki-rcs16k",
];

#[test]
fn small_budgets_are_inferred_from_the_trace() {
    let caps = captures();
    let mut checked = 0;
    for c in &caps {
        let given = c
            .settings
            .iter()
            .find(|(k, _)| k == "realpath_cache_size")
            .map(|(_, v)| v.as_str());
        let ttl_given = c.settings.iter().any(|(k, _)| k == "realpath_cache_ttl");
        let l = load(c);
        let inferred = l
            .workload
            .evidence
            .inferred
            .iter()
            .find(|(k, _)| k == "realpath_cache_size")
            .map(|(_, v)| v.as_str());
        println!(
            "{:<28} recorded {:<6} inferred {:?}",
            c.name,
            given.unwrap_or("-"),
            inferred
        );
        match given {
            // a small budget with the default TTL: inferred as recorded
            // where the budget ran out, else nothing claimed
            Some(v) if v != "0" && !ttl_given => {
                if EXHAUSTED.contains(&c.name.as_str()) {
                    assert_eq!(inferred, Some(v), "{}", c.name);
                    checked += 1;
                } else {
                    assert!(
                        inferred.is_none() || inferred == Some(v),
                        "{}: {inferred:?}",
                        c.name
                    );
                }
            }
            // size 0 or a budget with a short TTL: nothing claimed
            Some(_) => assert!(
                inferred.is_none() || inferred == Some("0"),
                "{}: {inferred:?}",
                c.name
            ),
            None => assert!(
                inferred.is_none()
                    || (inferred == Some("0")
                        && c.settings.iter().any(|(k, _)| k == "open_basedir")),
                "{}: {inferred:?}",
                c.name
            ),
        }
    }
    assert_eq!(
        checked,
        EXHAUSTED.len(),
        "captures missing from the manifest"
    );
}
