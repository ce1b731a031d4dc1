//! Live ground truth for WordPress: runs `scripts/php-harness --apps` at
//! test time for Debian's WordPress (on MariaDB, set up by
//! scripts/php-harness.d/setup-wordpress.sh, which starts MariaDB if it is
//! not running) under two settings, 8 requests each at 0 .. 7.6 s, into a
//! temporary directory, then checks on those fresh captures, with the
//! committed-capture tolerances:
//!
//! - round trip within 1% per request (`ROUND_TRIP_APP_TOLERANCE`; the
//!   differences are printed, see roundtrip.rs for their causes);
//! - rp0 (`opcache.enable=0 realpath_cache_size=0`, a complete source) ->
//!   rf2 (OPcache on, `revalidate_freq=2`) within 5% per request; rf2 ->
//!   rp0 is printed (caches on: an incomplete source).
//!
//! It fails if php-fpm8.2, cgi-fcgi, strace, php, gzip, zstd, the
//! `wordpress` package or MariaDB (`mysql`) is missing. About 35 s.

mod common;
use common::harness::require;
use common::*;
use std::time::Duration;

const CAPTURES: &[&str] = &["fpm-wordpress-rp0", "fpm-wordpress-rf2"];
const HARNESS_LIMIT: Duration = Duration::from_secs(150);

#[test]
fn live_wordpress_round_trip_and_cross_config() {
    require("mysql");
    assert!(
        std::path::Path::new("/usr/share/wordpress/index.php").is_file(),
        "WordPress is missing: the live WordPress test needs Debian's wordpress package (apt-get install wordpress mariadb-server php-mysql)"
    );
    let (_run, caps, loaded) = live_captures(CAPTURES, true, HARNESS_LIMIT, Some(8));
    assert_round_trip(&caps, &loaded);
    let c = cross(&caps, &loaded, &[]);
    assert_cross(&c);
    assert_eq!(c.pairs, 2);
    assert_eq!(c.asserted, 1, "complete source: rp0");
}
