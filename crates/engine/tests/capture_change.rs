//! One capture, many changes (what diagnose needs): a [`Capture`] read
//! once and predicted under several changes gives, for each, the report a
//! whole `predict` of the same options gives, and predicting one change
//! does not leak into the next.

use statstorm_engine::predict::{predict, Capture, Change, NfsOptions, PredictOptions};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/php")
        .join(name)
}

#[test]
fn a_capture_predicts_each_change_as_a_whole_predict_does() {
    let base = PredictOptions {
        traces: vec![fixture("fpm-wordpress-rf2.strace.zst")],
        nfs: NfsOptions {
            from_mount: Some("vers=3".into()),
            nfs_root: vec!["/usr/share/wordpress".into()],
            ..NfsOptions::default()
        },
        ..PredictOptions::default()
    };
    let capture = Capture::load(&base, &mut |_| {}).unwrap();
    let changes: [(&[&str], &[&str]); 4] = [
        (&["opcache.enable=0"], &[]),
        (&["realpath_cache_size=0"], &["actimeo=60"]),
        (&[], &["nocto"]),
        (&["opcache.enable=0"], &[]),
    ];
    let mut firsts = Vec::new();
    for (php, mount) in changes {
        let mut opts = base.clone();
        opts.php = php.iter().map(|s| s.to_string()).collect();
        opts.nfs.mount = mount.iter().map(|s| s.to_string()).collect();
        let whole = serde_json::to_value(predict(&opts, &mut |_| {}).unwrap()).unwrap();
        let on_capture =
            serde_json::to_value(capture.predict(&Change::of(&opts), &mut |_| {}).unwrap())
                .unwrap();
        assert_eq!(whole, on_capture, "{php:?} {mount:?}");
        firsts.push(on_capture);
    }
    // the same change again, after others: the same report
    assert_eq!(firsts[0], firsts[3]);
    // and the changes do differ
    assert_ne!(firsts[0]["totals"]["after"], firsts[2]["totals"]["after"]);
}
