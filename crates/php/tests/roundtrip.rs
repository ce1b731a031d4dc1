//! Round trip on every committed capture: lowering the lifted workload
//! under the config the capture was recorded with gives the recorded
//! per-request counts of stat-family, open, access and readlink calls.
//! Captures: tests/fixtures/php (regenerate: scripts/php-harness --apps).
//!
//! The synthetic workloads (tree, filecheck; php-fpm and php-cli) must match
//! exactly. WordPress and MediaWiki must match within 1% per request
//! (`ROUND_TRIP_APP_TOLERANCE`); the remaining differences are printed.
//! They come from calls the lift cannot attribute to a PHP operation with
//! certainty: lone lstat()s that may be a realpath-cache miss under a
//! cached parent or PHP's lstat() (the lift decides from repetition,
//! R54/R72), and stat()s of scripts that may be an OPcache validation or
//! the application's own filemtime()/is_file() (the lift decides from how
//! often each script is stat()ed, R64).

mod common;
use common::*;

#[test]
fn every_capture_round_trips() {
    let caps = captures();
    let loaded: Vec<Loaded> = caps.iter().map(load).collect();
    assert_round_trip(&caps, &loaded);
    // php-fpm resolves SCRIPT_FILENAME once per request: a request whose
    // scripts all hit OPcache (fpm-mediawiki-fo request 1: 18 before the
    // rule, fpm-wordpress-fc request 1) has later
    // script resolutions, which are the application's
    for (c, l) in caps.iter().zip(&loaded) {
        for (i, r) in l.workload.requests.iter().enumerate() {
            let primary = r
                .ops
                .iter()
                .filter(|o| matches!(o.kind, statstorm_php::PhpOpKind::PrimaryResolve { .. }))
                .count();
            assert!(
                primary <= 1,
                "{} request {i}: {primary} entry resolutions",
                c.name
            );
        }
    }
}

/// The real php-cli captures with OPcache on (cli-tree-oc, cli-filecheck-oc:
/// `opcache.enable_cli=1`) against their twins with OPcache off: OPcache's
/// own calls (its lock file at startup, the entry script's extra `getcwd`
/// and `fstat`) are lifted as OPcache's, not as the application's, and come
/// back only when OPcache is on for the CLI. Checked beyond the four
/// acceptance syscalls: `getcwd` and `unlink` too.
#[test]
fn cli_opcache_calls_are_opcaches() {
    use statstorm_php::lower::count_by_syscall;
    use statstorm_php::workload::PhpOpKind;
    const MORE: &[&str] = &[
        "newfstatat",
        "openat",
        "access",
        "readlink",
        "getcwd",
        "unlink",
        "close",
    ];
    let caps = captures();
    let find = |n: &str| capture(&caps, n);
    let real_counts = |c: &Capture| -> Counts {
        let trace = statstorm_trace::read_path(&c.path).unwrap();
        let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
        let ops = statstorm_php::lift::request_ops(&trace, &reqs);
        assert_eq!(ops.len(), 1, "{}: one php-cli process", c.name);
        let m = count_by_syscall(&ops[0]);
        MORE.iter().map(|k| (k.to_string(), m.of(k))).collect()
    };
    let lowered = |w: &statstorm_php::Workload, cfg: &statstorm_php::PhpConfig| -> Counts {
        let m = count_by_syscall(&statstorm_php::lower(w, cfg)[0]);
        MORE.iter().map(|k| (k.to_string(), m.of(k))).collect()
    };
    for wl in ["tree", "filecheck"] {
        let oc = find(&format!("cli-{wl}-oc"));
        let off = find(&format!("cli-{wl}-rp0"));
        let nooc = find(&format!("cli-{wl}-nooc"));
        assert!(oc.config.opcache_on(true) && !nooc.config.opcache_on(true));
        let (loc, lrp0, lnooc) = (load(oc), load(off), load(nooc));
        let (roc, rnooc) = (real_counts(oc), real_counts(nooc));
        // the real difference OPcache makes at startup: one open and one
        // unlink of its lock file
        assert_eq!(roc["unlink"], rnooc["unlink"] + 1, "{wl}: lock file unlink");
        // lifted: one OpcacheStartup in /tmp (opcache.lockfile_path's
        // default), no raw call on the lock file, and the evidence
        let ops = &loc.workload.requests[0].ops;
        let starts: Vec<&String> = ops
            .iter()
            .filter_map(|o| match &o.kind {
                PhpOpKind::OpcacheStartup { lock_dir } => Some(lock_dir),
                _ => None,
            })
            .collect();
        assert_eq!(starts, ["/tmp"], "cli-{wl}-oc: OPcache's start");
        assert!(
            !ops.iter().any(|o| matches!(&o.kind,
                PhpOpKind::Raw { op } | PhpOpKind::Write { op } if op.path.contains("/.ZendSem."))),
            "cli-{wl}-oc: the lock file left as the application's"
        );
        let inferred = &loc.workload.evidence.inferred;
        assert!(inferred.contains(&("opcache.enable_cli".into(), "1".into())));
        assert!(inferred.contains(&("opcache.enable".into(), "1".into())));
        for l in [&lrp0, &lnooc] {
            assert!(!l.workload.requests[0]
                .ops
                .iter()
                .any(|o| matches!(o.kind, PhpOpKind::OpcacheStartup { .. })));
            let inferred = &l.workload.evidence.inferred;
            assert!(!inferred.contains(&("opcache.enable_cli".into(), "1".into())));
            // off for the CLI is read as enable_cli's default, not as
            // opcache.enable=0: proposing opcache.enable_cli=1 on top of
            // the inferred settings turns OPcache on, as it would on a
            // php.ini with PHP's defaults
            assert!(!inferred.contains(&("opcache.enable".into(), "0".into())));
            let (mut c, _) = statstorm_php::predict::inferred_config(&l.workload).unwrap();
            assert!(!c.opcache_on(true), "cli-{wl}: inferred OPcache off");
            c.apply_flags(&["opcache.enable_cli=1".to_string()])
                .unwrap();
            assert!(c.opcache_on(true), "cli-{wl}: enable_cli=1 turns it on");
        }
        // round trip with getcwd and unlink, both ways across OPcache: from
        // the complete capture (rp0) to OPcache on, and from OPcache on to
        // off (exact for filecheck, whose only script is the entry; the
        // tree's repeated includes are hidden by OPcache: 3 opens and 3
        // fstats fewer, not asserted here, see cross.rs)
        assert_eq!(
            lowered(&loc.workload, &oc.config),
            roc,
            "cli-{wl}-oc round trip"
        );
        assert_eq!(
            lowered(&lrp0.workload, &oc.config),
            roc,
            "cli-{wl}-rp0 -> oc"
        );
        assert_eq!(
            lowered(&lnooc.workload, &nooc.config),
            rnooc,
            "cli-{wl}-nooc round trip"
        );
        let back = lowered(&loc.workload, &nooc.config);
        if wl == "filecheck" {
            assert_eq!(back, rnooc, "cli-{wl}-oc -> nooc");
        } else {
            for k in ["getcwd", "unlink", "access", "readlink"] {
                assert_eq!(back[k], rnooc[k], "cli-{wl}-oc -> nooc: {k}");
            }
        }
        println!(
            "cli-{wl}-oc real {roc:?}\ncli-{wl}-nooc real {rnooc:?}\ncli-{wl}-oc -> nooc {back:?}"
        );
    }
}

/// `opcache.enable_file_override` (R66) on the real captures of the
/// override workload (file_exists(), is_file(), is_readable() on three
/// included scripts, a data file and a missing file, three rounds): with it,
/// no `access()` of a script is left (fpm-override-fo, -fo-rf0, -fo-vt0)
/// while without it every check shows (fpm-override-rf2); the complete
/// capture (rp0) lowered under each override config gives its real counts
/// exactly, and the same config with the override off gives other counts in
/// every request (so the rule, not the rest of the model, makes the match).
#[test]
fn file_override_answers_for_cached_scripts() {
    use statstorm_php::lower::count_by_syscall;
    let caps = captures();
    let find = |n: &str| capture(&caps, n);
    let script_access = |c: &Capture| -> usize {
        let trace = statstorm_trace::read_path(&c.path).unwrap();
        let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
        statstorm_php::lift::request_ops(&trace, &reqs)
            .iter()
            .flatten()
            .filter(|o| o.kind == statstorm_trace::op::OpKind::Access && o.path.ends_with(".php"))
            .count()
    };
    // 3 scripts x 2 access() (file_exists, is_readable) x 3 rounds x 8 requests
    assert_eq!(script_access(find("fpm-override-rf2")), 144);
    let rp0 = load(find("fpm-override-rp0"));
    for y in ["fo", "fo-rf0", "fo-vt0"] {
        let cy = find(&format!("fpm-override-{y}"));
        assert!(cy.config.enable_file_override, "{}", cy.name);
        assert_eq!(script_access(cy), 0, "{}: access() of a script", cy.name);
        let ly = load(cy);
        let mut w = rp0.workload.clone();
        retime(&mut w, &ly.workload);
        let mut off = cy.config.clone();
        off.enable_file_override = false;
        let (on_ops, off_ops) = (
            statstorm_php::lower(&w, &cy.config),
            statstorm_php::lower(&w, &off),
        );
        let sum = |ops: &[Vec<statstorm_trace::op::Op>]| -> u64 {
            ops.iter()
                .map(|o| checked(&count_by_syscall(o)).values().sum::<u64>())
                .sum()
        };
        println!(
            "fpm-override-rp0 -> {}: predicted {} (override off: {}), real {}",
            cy.name,
            sum(&on_ops),
            sum(&off_ops),
            ly.real.iter().map(|c| c.values().sum::<u64>()).sum::<u64>()
        );
        for (i, real) in ly.real.iter().enumerate() {
            let on = checked(&count_by_syscall(&on_ops[i]));
            let off = checked(&count_by_syscall(&off_ops[i]));
            assert_eq!(&on, real, "fpm-override-rp0 -> {} request {i}", cy.name);
            // with revalidate_freq=0 the override trades access() for
            // validation stats: other calls, not always fewer
            assert_ne!(
                &off, real,
                "{} request {i}: the override made no difference",
                cy.name
            );
        }
    }
}
