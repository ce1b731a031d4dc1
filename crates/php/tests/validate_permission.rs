//! `opcache.validate_permission` (R68) against real PHP: the captures
//! fpm-tree-vp and fpm-filecheck-vp (php-fpm, revalidate_freq 2 with the
//! permission check on), fpm-wordpress-vp and fpm-mediawiki-vp (the same
//! settings), cli-tree-ocvp, cli-filecheck-ocvp (php-cli with OPcache
//! on), fpm-override-fo-vp (with opcache.enable_file_override) and
//! fpm-{tree,filecheck}-rpath1-vp (with opcache.revalidate_path: a plain
//! include's handle is opened first and not checked, the first *_once of a
//! script is), from scripts/php-harness, against the model.
//!
//! - Every committed capture gets `opcache.validate_permission=1` inferred
//!   from its trace exactly when it was recorded with it and the trace
//!   shows a check (cli-filecheck-ocvp includes nothing, and php-cli does
//!   not check its entry script: nothing shows there).
//! - In the vp captures the lift reads OPcache's checks as uses of cached
//!   scripts (`CachedUse`, or the validation that follows); no
//!   `access(R_OK)` of a compiled script's path is left as a file function.
//! - The rule matters: the round trip (every_capture_round_trips, exact on
//!   both captures) would fail without it — lowered with the setting off,
//!   every request after the first misses exactly the real `access()`
//!   calls of cached scripts, and nothing else changes.
//!
//! Run: `cargo test -p statstorm-php --release --test validate_permission -- --nocapture`.

mod common;
use common::*;
use statstorm_php::lower::count_by_syscall;
use statstorm_php::{PhpConfig, PhpOpKind};
use statstorm_trace::op::OpKind;

#[test]
fn permission_checks_are_inferred_lifted_and_lowered() {
    let caps = captures();
    let mut vp_caps = 0;
    for c in &caps {
        let given = c
            .settings
            .iter()
            .any(|(k, v)| k == "opcache.validate_permission" && v == "1");
        let l = load(c);
        // php-cli does not check its entry script: a run with no cached
        // include (the file check) shows nothing to infer from
        let trace = statstorm_trace::read_path(&c.path).unwrap();
        let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
        let shown = statstorm_php::lift::request_ops(&trace, &reqs)
            .iter()
            .flatten()
            .any(|o| o.kind == OpKind::Access && o.path.ends_with(".php"));
        let given = given && shown;
        let inferred = l
            .workload
            .evidence
            .inferred
            .iter()
            .any(|(k, v)| k == "opcache.validate_permission" && v == "1");
        assert_eq!(
            inferred, given,
            "{}: validate_permission inferred {inferred}, recorded {given}",
            c.name
        );
        if !given {
            continue;
        }
        vp_caps += 1;
        let ops = || l.workload.requests.iter().flat_map(|r| &r.ops);
        let uses = ops()
            .filter(|o| matches!(o.kind, PhpOpKind::CachedUse { .. }))
            .count();
        let compiled: std::collections::HashSet<&str> = ops()
            .filter_map(|o| match &o.kind {
                PhpOpKind::Compile { path, .. } => Some(path.as_ref()),
                _ => None,
            })
            .collect();
        // the application's own checks stay: file_exists() (F_OK) of
        // scripts (WordPress's theme files), is_readable() of other names
        // (MediaWiki's LocalSettings.php symlink and
        // `includes/../vendor/autoload.php`), as in the rf2 captures
        let left = ops()
            .filter(|o| match &o.kind {
                PhpOpKind::Access { path, mode, .. } => {
                    mode & statstorm_trace::Flags::R_OK != 0 && compiled.contains(path.as_ref())
                }
                _ => false,
            })
            .count();
        // (requests whose uses match a fuller request of the script take
        // its operations: the uses may all be templates' compiles)
        println!(
            "{}: {uses} cached uses lifted, {left} script access() left",
            c.name
        );
        assert_eq!(
            left, 0,
            "{}: script access() left as file functions",
            c.name
        );
        // the same workload lowered with the setting off: only access()
        // changes, by the real count of checks
        let on = statstorm_php::lower(&l.workload, &c.config);
        let off_cfg = PhpConfig {
            validate_permission: false,
            ..c.config.clone()
        };
        let off = statstorm_php::lower(&l.workload, &off_cfg);
        let mut missing = 0;
        for (i, (a, b)) in on.iter().zip(&off).enumerate() {
            let (ca, cb) = (count_by_syscall(a), count_by_syscall(b));
            let acc = |m: &statstorm_trace::Tally| m.of("access");
            for (k, v) in ca.iter() {
                if k != "access" {
                    assert_eq!(cb.get(k), Some(v), "{} request {i}: {k}", c.name);
                }
            }
            // exact for the lab workloads; for WordPress and MediaWiki
            // within the round trip's tolerance (1% of the request's
            // checked calls)
            let (model, real) = (acc(&ca), l.real[i]["access"]);
            let slack = if c.workload == "wordpress" || c.workload == "mediawiki" {
                let checked: u64 = l.real[i].values().sum();
                (checked as f64 * ROUND_TRIP_APP_TOLERANCE).floor() as u64
            } else {
                0
            };
            assert!(
                model.abs_diff(real) <= slack,
                "{} request {i}: access model {model} real {real}",
                c.name
            );
            missing += acc(&ca) - acc(&cb);
        }
        println!(
            "{}: {missing} access() calls are OPcache's permission checks",
            c.name
        );
        assert!(missing > 0, "{}: the setting changed nothing", c.name);
    }
    // fpm-{tree,filecheck,wordpress,mediawiki}-vp, cli-tree-ocvp, with
    // the file override (fpm-override-fo-vp) and with revalidate_path
    // (fpm-{tree,filecheck}-rpath1-vp)
    assert_eq!(
        vp_caps, 8,
        "the vp captures that show checks (scripts/php-harness)"
    );
}
