//! Properties of diagnose's plans over generated traces: no plan holds
//! two settings of one key or contradictory ones (validate_timestamps=0
//! with a revalidate_freq), no plan gives `nocto` or long attribute
//! caching to a directory the trace writes to (it is mounted apart from
//! the root that takes them), and no change is both a plan and under
//! "will not help".

use proptest::prelude::*;
use statstorm_engine::diagnose::candidates::{conflict, Layer, Setting};
use statstorm_engine::diagnose::{diagnose, Options};
use statstorm_engine::predict::{NfsOptions, PredictOptions};

/// A php-cli run under /srv/app: the entry script includes `n` scripts
/// (stat, open, fstat, read, close each), checks `checks` data files,
/// then writes: (kind, directory) with kind 0 = create, 1 = unlink,
/// 2 = rename, 3 = mkdir.
fn trace(n: usize, checks: usize, writes: &[(u8, u8)]) -> String {
    let mut t = 1_700_000_000_000_000i64;
    let mut s = String::new();
    let line = |s: &mut String, t: &mut i64, call: String| {
        *t += 50;
        s.push_str(&format!(
            "100 {}.{:06} {call} <0.000010>\n",
            *t / 1_000_000,
            *t % 1_000_000
        ));
    };
    line(
        &mut s,
        &mut t,
        r#"execve("/usr/bin/php", ["php", "/srv/app/index.php"], 0x7ffd0 /* 1 var */) = 0"#.into(),
    );
    let script = |s: &mut String, t: &mut i64, p: &str| {
        line(
            s,
            t,
            format!(
                r#"newfstatat(AT_FDCWD, "{p}", {{st_mode=S_IFREG|0644, st_size=10, ...}}, 0) = 0"#
            ),
        );
        line(
            s,
            t,
            format!(r#"openat(AT_FDCWD, "{p}", O_RDONLY) = 3<{p}>"#),
        );
        line(
            s,
            t,
            format!(
                r#"newfstatat(3<{p}>, "", {{st_mode=S_IFREG|0644, st_size=10, ...}}, AT_EMPTY_PATH) = 0"#
            ),
        );
        line(s, t, format!(r#"read(3<{p}>, "<?php ", 8192) = 10"#));
        line(s, t, "close(3) = 0".into());
    };
    script(&mut s, &mut t, "/srv/app/index.php");
    for i in 0..n {
        script(&mut s, &mut t, &format!("/srv/app/inc/f{i}.php"));
    }
    for i in 0..checks {
        line(
            &mut s,
            &mut t,
            format!(r#"access("/srv/data/u{i}.jpg", F_OK) = 0"#),
        );
        line(
            &mut s,
            &mut t,
            format!(
                r#"newfstatat(AT_FDCWD, "/srv/data/u{i}.jpg", {{st_mode=S_IFREG|0644, st_size=10, ...}}, 0) = 0"#
            ),
        );
    }
    let dirs = ["/srv/app/cache", "/srv/data", "/srv/app/inc", "/tmp"];
    for (k, &(kind, d)) in writes.iter().enumerate() {
        let d = dirs[d as usize % dirs.len()];
        let call = match kind % 4 {
            0 => format!(
                r#"openat(AT_FDCWD, "{d}/w{k}", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 4<{d}/w{k}>"#
            ),
            1 => format!(r#"unlink("{d}/w{k}") = 0"#),
            2 => format!(r#"rename("{d}/w{k}", "{d}/v{k}") = 0"#),
            _ => format!(r#"mkdir("{d}/m{k}", 0755) = 0"#),
        };
        line(&mut s, &mut t, call);
        if kind % 4 == 0 {
            line(&mut s, &mut t, "close(4) = 0".into());
        }
    }
    line(&mut s, &mut t, "exit_group(0) = ?".into());
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn plans_are_consistent(
        n in 0usize..30,
        checks in 0usize..200,
        writes in proptest::collection::vec((0u8..4, 0u8..4), 0..4),
        writable in proptest::option::of(0u8..3),
        php in proptest::sample::select(vec![
            "opcache.enable_cli=1",
            "opcache.enable_cli=1 opcache.revalidate_freq=0",
            "realpath_cache_size=16K",
            "open_basedir=/srv",
            "",
        ]),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.strace");
        std::fs::write(&p, trace(n, checks, &writes)).unwrap();
        let marked = writable.map(|w| ["/srv/data", "/srv", "/srv/app/cache"][w as usize].to_string());
        let opts = Options {
            predict: PredictOptions {
                traces: vec![p],
                from_php: php.split_whitespace().map(str::to_string).collect(),
                nfs: NfsOptions {
                    from_mount: Some("vers=3".into()),
                    nfs_root: vec!["/srv".into()],
                    ..NfsOptions::default()
                },
                ..PredictOptions::default()
            },
            writable: marked.iter().cloned().collect(),
            ..Options::default()
        };
        let d = diagnose(&opts, &mut |_| {}).unwrap();
        // a write under /srv (the NFS root), by the trace or marked
        let dirs = ["/srv/app/cache", "/srv/data", "/srv/app/inc", "/tmp"];
        let written_dirs: Vec<String> = marked
            .iter()
            .cloned()
            .chain(writes.iter().map(|&(_, d)| dirs[d as usize % 4].to_string()))
            .filter(|d| d.starts_with("/srv"))
            .collect();
        let no_help: Vec<String> = d
            .will_not_help
            .iter()
            .flat_map(|n| n.changes.iter().map(Setting::assignment))
            .collect();
        for plan in &d.plans {
            let c = &plan.changes;
            for (i, a) in c.iter().enumerate() {
                for b in &c[i + 1..] {
                    prop_assert!(!conflict(a, b), "{a:?} with {b:?}");
                }
            }
            // a written directory under the root gets no nocto nor long
            // attribute caching: it is mounted apart from the root that
            // takes them (the whole root written: neither is proposed)
            let guarded = c.iter().any(|s| s.key == "nocto" || s.key.starts_with("ac"));
            if guarded {
                for w in &written_dirs {
                    prop_assert!(
                        w.as_str() != "/srv"
                            && c.iter().any(|s| s.layer == Layer::MountApart
                                && (w == &s.key || w.starts_with(&format!("{}/", s.key)))),
                        "{c:?} on a mount written under {w}"
                    );
                }
            }
            if c.len() == 1 {
                prop_assert!(!no_help.contains(&c[0].assignment()));
            }
            prop_assert!(plan.effect.helps(), "{:?}", plan.effect);
        }
    }
}

fn run(t: &str, writable: &[&str]) -> statstorm_engine::diagnose::Diagnosis {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("run.strace");
    std::fs::write(&p, t).unwrap();
    let opts = Options {
        predict: PredictOptions {
            traces: vec![p],
            nfs: NfsOptions {
                from_mount: Some("vers=3".into()),
                nfs_root: vec!["/srv".into()],
                ..NfsOptions::default()
            },
            ..PredictOptions::default()
        },
        writable: writable.iter().map(|s| s.to_string()).collect(),
        ..Options::default()
    };
    diagnose(&opts, &mut |_| {}).unwrap()
}

/// A plan gives `key` to the whole root (no directory mounted apart).
fn proposed(d: &statstorm_engine::diagnose::Diagnosis, key: &str) -> bool {
    d.plans.iter().any(|p| {
        p.changes.iter().any(|s| s.key == key)
            && !p.changes.iter().any(|s| s.layer == Layer::MountApart)
    })
}

/// A plan gives `key` to the root with `dir` mounted apart.
fn proposed_apart(d: &statstorm_engine::diagnose::Diagnosis, key: &str, dir: &str) -> bool {
    d.plans.iter().any(|p| {
        p.changes.iter().any(|s| s.key == key)
            && p.changes
                .iter()
                .any(|s| s.layer == Layer::MountApart && s.key == dir)
    })
}

fn set_aside(d: &statstorm_engine::diagnose::Diagnosis, key: &str) -> bool {
    d.not_proposed
        .iter()
        .any(|n| n.settings.iter().any(|s| s.key == key))
}

/// The same run with and without a write under the NFS root (or a
/// directory marked writable): nocto helps it, and is set aside once the
/// mount is written to.
#[test]
fn a_written_mount_never_gets_nocto() {
    let clean = run(&trace(20, 0, &[]), &[]);
    assert!(proposed(&clean, "nocto"), "{:?}", clean.plans);
    let written = run(&trace(20, 0, &[(0, 0)]), &[]);
    assert!(!proposed(&written, "nocto") && set_aside(&written, "nocto"));
    let why = &written.not_proposed[0].why;
    assert!(why.contains("/srv/app/cache"), "{why}");
    // ... and proposed for the rest of the root, the written directory
    // on a mount of its own, with nocto's effect on the code's opens
    assert!(
        proposed_apart(&written, "nocto", "/srv/app/cache"),
        "{:?}",
        written.plans
    );
    let marked = run(&trace(20, 0, &[]), &["/srv/data"]);
    assert!(!proposed(&marked, "nocto") && set_aside(&marked, "nocto"));
    assert!(proposed_apart(&marked, "nocto", "/srv/data"));
    // the whole root written: no mount apart can spare it
    let root = run(&trace(20, 0, &[]), &["/srv"]);
    assert!(set_aside(&root, "nocto"));
    assert!(!root
        .plans
        .iter()
        .any(|p| p.changes.iter().any(|s| s.key == "nocto")));
    // a write outside the root does not count
    let tmp = run(&trace(20, 0, &[(0, 3)]), &[]);
    assert!(proposed(&tmp, "nocto"));
}
