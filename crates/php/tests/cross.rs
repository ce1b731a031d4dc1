//! Cross-config prediction: from the capture under config X, predict the
//! capture under config Y (same workload and SAPI) and compare per request
//! with the real capture under Y. The prediction is made at Y's request
//! times and workers (X's requests re-timed onto Y's), so that only the
//! settings differ. Prints the table of predicted vs real.
//! Asserted within 2% per request (5% for WordPress and
//! MediaWiki) for every pair whose source capture is
//! complete (the lift saw every include and resolution: OPcache and the
//! realpath cache off, or no include besides the entry script). From
//! captures where caches hid includes the table is printed but not
//! asserted: the trace does not say whether a hidden include was include
//! or include_once, nor how many include_once repeats there were.
//! Captures: tests/fixtures/php (regenerate: scripts/php-harness).

mod common;
use common::*;

/// Pairs known not to meet the tolerance, with the reason; printed, not
/// asserted (and reported as open in docs/php-model.md).
const KNOWN_GAPS: &[(&str, &str, &str)] = &[
    (
        "fpm-mediawiki-rp0",
        "fpm-mediawiki-rf2",
        "MediaWiki removes a lock file (unlink: realpath cache cleared, R57) only in a worker's first request; the template replays it in later requests, whose re-walks are then predicted without OPcache hiding them (~10% more newfstatat)",
    ),
    (
        "fpm-mediawiki-rp0",
        "fpm-mediawiki-rf60",
        "as fpm-mediawiki-rp0 -> fpm-mediawiki-rf2",
    ),
];

#[test]
fn predictions_match_real_captures_of_other_configs() {
    let caps = captures();
    let loaded: Vec<Loaded> = caps.iter().map(load).collect();
    let c = cross(&caps, &loaded, KNOWN_GAPS);
    print_cross(&c);
    // the complete sources must cover every workload and SAPI
    assert!(c.asserted >= 40, "too few complete sources: {}", c.asserted);
    assert!(
        c.failures.is_empty(),
        "{} requests beyond tolerance (table above)",
        c.failures.len()
    );
}
