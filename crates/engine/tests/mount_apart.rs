//! A directory mounted apart from its NFS root (`--mount-apart`, and the
//! plans diagnose makes of it when the trace writes under the root): the
//! directory keeps the recorded options on a mount of its own while the
//! root takes the proposed ones; the recorded side is untouched; both
//! share one RPC transport, so the latency is still simulated.
//!
//! The case: the PHP harness's php-fpm capture of seed 000's theme (180
//! includes under /tmp/statstorm-lab/site/theme, OPcache revalidating
//! every 60 s) on NFSv4.1.

use serde_json::Value;
use statstorm_engine::diagnose::candidates::Layer;
use statstorm_engine::diagnose::{diagnose, Diagnosis, Options, Plan};
use statstorm_engine::predict::{Capture, Change, NfsOptions, PredictOptions, SimOptions};
use std::path::PathBuf;

const ROOT: &str = "/tmp/statstorm-lab/site";

fn options() -> PredictOptions {
    PredictOptions {
        traces: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/php/fpm-theme-rf60.strace.gz")],
        nfs: NfsOptions {
            from_mount: Some("vers=4.1".into()),
            nfs_root: vec![ROOT.into()],
            ..NfsOptions::default()
        },
        sim: SimOptions {
            slots: Some(16),
            workers: Some(50),
            server_latency: Some(2.0),
            ..SimOptions::default()
        },
        ..PredictOptions::default()
    }
}

fn rpcs(r: &Value, side: &str) -> u64 {
    r["totals"][side]["rpc"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

fn getattr(r: &Value, side: &str) -> u64 {
    r["totals"][side]["rpc"]["GETATTR"].as_u64().unwrap()
}

#[test]
fn a_directory_apart_keeps_its_options_and_the_root_takes_the_change() {
    let base = options();
    let cap = Capture::load(&base, &mut |_| {}).unwrap();
    let predict = |mount: &[&str], apart: &[&str]| -> Value {
        let mut opts = base.clone();
        opts.nfs.mount = mount.iter().map(|s| s.to_string()).collect();
        opts.nfs.mount_apart = apart.iter().map(|s| s.to_string()).collect();
        serde_json::to_value(cap.predict(&Change::of(&opts), &mut |_| {}).unwrap()).unwrap()
    };
    let whole = predict(&[&format!("{ROOT}:actimeo=3600")], &[]);
    let theme = format!("{ROOT}/theme");
    let uploads = format!("{ROOT}/wp-content/uploads");
    // the code (theme) apart with today's options: the root's long
    // attribute caching reaches none of its scripts
    let code_apart = predict(&[&format!("{ROOT}:actimeo=3600")], &[&theme]);
    // an untraced directory apart: the change holds for every call
    let uploads_apart = predict(&[&format!("{ROOT}:actimeo=3600")], &[&uploads]);
    // nothing changed but the mount apart
    let only_apart = predict(&[], &[&theme]);

    // the recorded side never sees the mount apart
    for r in [&code_apart, &uploads_apart, &only_apart] {
        assert_eq!(r["totals"]["before"], whole["totals"]["before"]);
    }
    let before = getattr(&whole, "before");
    assert_eq!(before, 389, "the case's recorded GETATTRs");
    // the whole root under actimeo=3600: the revalidations' GETATTRs go
    assert!(getattr(&whole, "after") * 10 < before, "{whole:?}");
    // with the written uploads apart, the same (no traced call there)
    assert_eq!(uploads_apart["totals"]["after"], whole["totals"]["after"]);
    // with the code apart, the scripts keep their GETATTRs: within 2% of
    // the recorded side (the mount apart starts at the theme directory,
    // so the walk down to it is the root's)
    let kept = getattr(&code_apart, "after");
    assert!(
        kept * 100 >= before * 98 && kept <= before,
        "{kept} of {before}"
    );
    let (b, a) = (rpcs(&only_apart, "before"), rpcs(&only_apart, "after"));
    assert!(a * 100 >= b * 99 && a <= b, "{a} against {b}");
    // one transport: the latency is simulated with a mount apart
    assert!(
        code_apart["latency"]["after"]["p99_ms"].as_f64().is_some(),
        "{:?}",
        code_apart["latency"]
    );
    let mounts = code_apart["nfs"]["mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 2);
    assert_eq!(mounts[1]["root"], theme.as_str());
    assert_eq!(mounts[1]["apart"], true);
    assert_eq!(mounts[1]["proposed_mount"], "vers=4.1");
}

#[test]
fn a_mount_apart_must_lie_under_a_root() {
    let base = options();
    let cap = Capture::load(&base, &mut |_| {}).unwrap();
    for (dir, says) in [
        ("/srv/elsewhere", "not under an NFS root"),
        (ROOT, "already a mount of its own"),
        ("relative/dir", "expected an absolute directory"),
    ] {
        let mut opts = base.clone();
        opts.nfs.mount_apart = vec![dir.into()];
        let e = cap
            .predict(&Change::of(&opts), &mut |_| {})
            .err()
            .unwrap_or_else(|| panic!("--mount-apart {dir} taken"))
            .to_string();
        assert!(e.contains(says) && e.contains("--mount-apart"), "{e}");
    }
}

/// diagnose with the uploads marked writable (seed 000's theme writes its
/// CSS there): long attribute caching is not given to the whole root, it
/// is proposed for the code with the uploads on a mount of their own, and
/// predicted as the whole root's change is (no traced call in uploads).
#[test]
fn a_written_directory_goes_apart_in_the_plan() {
    let uploads = format!("{ROOT}/wp-content/uploads");
    let run = |writable: Vec<String>| {
        diagnose(
            &Options {
                predict: options(),
                writable,
                ..Options::default()
            },
            &mut |_| {},
        )
        .unwrap()
    };
    let free = run(Vec::new());
    let marked = run(vec![uploads.clone()]);
    fn with(d: &Diagnosis, apart: bool) -> Option<&Plan> {
        d.plans.iter().find(|p| {
            p.changes
                .iter()
                .any(|s| s.key == "actimeo" && s.value == "3600")
                && p.changes.iter().any(|s| s.layer == Layer::MountApart) == apart
        })
    }
    let whole = with(&free, false).expect("actimeo=3600 for the whole root");
    assert!(
        with(&marked, false).is_none(),
        "actimeo=3600 on a written root"
    );
    let plan = with(&marked, true).expect("actimeo=3600, uploads apart");
    assert_eq!(
        plan.predicted.after.rpc_total,
        whole.predicted.after.rpc_total
    );
    assert!(plan.predicted.after.rpc_total < plan.predicted.before.rpc_total);
    let apart: Vec<&str> = plan
        .changes
        .iter()
        .filter(|s| s.layer == Layer::MountApart)
        .map(|s| s.key.as_str())
        .collect();
    assert_eq!(apart, [uploads.as_str()]);
    assert_eq!(
        plan.snippets.apart_mounts,
        [(uploads.clone(), "vers=4.1".to_string())]
    );
    assert!(plan.deploy.iter().any(|d| d.contains("apart first")));
    // the whole root's change is set aside, with where it went
    assert!(marked
        .not_proposed
        .iter()
        .any(|n| n.settings.iter().any(|s| s.key == "actimeo")
            && n.why.contains("mounts of their own")));
}
