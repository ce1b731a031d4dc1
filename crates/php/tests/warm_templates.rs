//! Warm requests of a capture made with OPcache on: inside the
//! revalidate_freq window a request compiles and validates nothing, so
//! its includes make no syscall at all, and the lift gives it the
//! operations of the request of the same script that compiled them (its
//! template, `lift::templates`). Such a request also makes a few calls the
//! compiling request did not (a theme part's lstat once its realpath cache
//! entry has expired), so its visible operations follow the template's
//! only for the most part (97.4% on WordPress): it must still take the
//! template, keeping those calls as its own. Before it did, WordPress's
//! warm requests were predicted with none of their 340 includes (50% under
//! the real count toward OPcache off) and MediaWiki's with none of its
//! 1093 (92% under).
//!
//! Checked here against the real captures: from each application's
//! captures with OPcache on (rf2: revalidate_freq=2; fc: its file cache
//! beside shared memory; fo: enable_file_override) toward OPcache off
//! (nooc), a hash table too small for the application (maf200, every
//! request compiles part of it) and the permission check (vp), every
//! request within the applications' tolerance (5%, as tests/cross.rs), at
//! the target's request times and workers. Targets that disable or empty
//! the realpath cache (rp0, obd, rcs16k) stay out: the capture cannot show
//! the walks a warm realpath cache served (tests/hidden_info.rs).

mod common;
use common::*;
use statstorm_php::lower::count_by_syscall;

const SOURCES: &[&str] = &["rf2", "fc", "fo"];
const TARGETS: &[&str] = &["nooc", "maf200", "vp"];

#[test]
fn warm_requests_take_their_template_toward_opcache_off() {
    let mut failures = Vec::new();
    let templated = check(&captures(), SOURCES, TARGETS, &mut failures);
    // the sources' warm requests are the ones completed from a template
    assert!(templated >= 12, "only {templated} requests took a template");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Under validate_timestamps=0 a warm request makes no syscall for its
/// includes, nor for its entry script: only the application's own calls
/// show (MediaWiki's file_exists() of LocalSettings.php, which named the
/// request's script before the lift checked it against the entry
/// scripts), and the other worker's first request resolves the includes'
/// names (a cold realpath cache) without compiling them. Before either
/// was handled, MediaWiki's warm requests were predicted at 167
/// newfstatat toward OPcache off where real PHP made 1,249. The captures
/// of tests/fixtures/php-vt0 come from one harness run each per
/// application, so both share the application's state.
#[test]
fn warm_requests_under_validate_timestamps_0_take_their_template() {
    let dir = fixtures().join("../php-vt0");
    let mut failures = Vec::new();
    let templated = check(&captures_in(&dir), &["vt0"], &["nooc"], &mut failures);
    assert!(templated >= 12, "only {templated} requests took a template");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Predicts each `fpm-APP-TARGET` of `caps` from each `fpm-APP-SOURCE`
/// (WordPress and MediaWiki) at the target's request times and workers,
/// pushing every request beyond the applications' tolerance to
/// `failures`; returns how many source requests took a template.
fn check(
    caps: &[Capture],
    sources: &[&str],
    targets: &[&str],
    failures: &mut Vec<String>,
) -> usize {
    let find = |n: &str| capture(caps, n);
    let mut templated = 0;
    for app in ["wordpress", "mediawiki"] {
        for x in sources {
            let cx = find(&format!("fpm-{app}-{x}"));
            let lx = load(cx);
            assert!(
                !lx.workload.evidence.complete,
                "{}: expected a capture whose caches hid includes",
                cx.name
            );
            templated += lx
                .workload
                .requests
                .iter()
                .filter(|r| r.from_template)
                .count();
            for y in targets {
                let cy = find(&format!("fpm-{app}-{y}"));
                let ly = load(cy);
                let mut w = lx.workload.clone();
                retime(&mut w, &ly.workload);
                let pred = statstorm_php::lower(&w, &cy.config);
                let tol = cross_tolerance(&cx.workload);
                let mut row = Vec::new();
                for (i, (ops, real)) in pred.iter().zip(&ly.real).enumerate() {
                    let (p, r) = (sum(&checked(&count_by_syscall(ops))), sum(real));
                    row.push(format!("{p}/{r}"));
                    let err = rel_err(p, r);
                    if err > tol && app_db_excuse(&cx.workload, ops, &ly.real_ops[i], tol).is_none()
                    {
                        failures.push(format!(
                            "{} -> {} request {i}: predicted {p}, real {r} ({:.1}%)",
                            cx.name,
                            cy.name,
                            err * 100.0
                        ));
                    }
                }
                println!("{} -> {}: {}", cx.name, cy.name, row.join(" "));
            }
        }
    }
    templated
}
