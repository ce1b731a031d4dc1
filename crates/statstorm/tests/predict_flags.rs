//! `statstorm predict` refuses what it cannot honour: a misspelled mount
//! option or php setting (once dropped or only noted), and an NFS root no
//! traced path is under (once all-zero RPC tables without a word). Each is
//! exit 2 with a message saying what to change.

mod common;

use assert_cmd::Command;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/php")
        .join(format!("{name}.strace.gz"))
        .display()
        .to_string()
}

fn fails(args: &[&str]) -> String {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .arg("predict")
        .arg(fixture("fpm-tree-rf0"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    err
}

#[test]
fn misspelled_mount_option_is_an_error_with_a_suggestion() {
    let e = fails(&["--nfs-root", "/tmp", "--mount", "actime=3600"]);
    assert!(
        e.contains("unknown mount option 'actime' (did you mean actimeo?)"),
        "{e}"
    );
    let e = fails(&["--nfs-root", "/tmp", "--from-mount", "foo=bar,nocto"]);
    assert!(
        e.contains("--from-mount: unknown mount option 'foo'"),
        "{e}"
    );
}

#[test]
fn misspelled_php_setting_is_an_error_with_a_suggestion() {
    let e = fails(&["--php", "realpath_cache_sise=4M"]);
    assert!(e.contains("did you mean realpath_cache_size?"), "{e}");
    let e = fails(&["--from-php", "opcache.revalidate_frq=0"]);
    assert!(e.contains("did you mean opcache.revalidate_freq?"), "{e}");
}

#[test]
fn an_nfs_root_no_traced_path_is_under_is_an_error_listing_the_paths() {
    let e = fails(&["--from-mount", "vers=3", "--nfs-root", "/mnt/nothere"]);
    assert!(
        e.contains("no traced path is under the NFS root /mnt/nothere")
            && e.contains("/tmp/statstorm-lab ("),
        "{e}"
    );
}

#[test]
fn a_mount_apart_outside_every_root_is_an_error() {
    let e = fails(&[
        "--from-mount",
        "vers=3",
        "--nfs-root",
        "/tmp/statstorm-lab",
        "--mount-apart",
        "/srv/uploads",
    ]);
    assert!(
        e.contains(
            "--mount-apart /srv/uploads: not under an NFS root (the roots: /tmp/statstorm-lab)"
        ),
        "{e}"
    );
}

fn predict_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec![fixture("fpm-filecheck-rf2")];
    all.extend(args.iter().map(|s| s.to_string()));
    common::json("predict", &all)
}

/// Two NFS roots are two mounts with a client each: every request's RPCs
/// are the sum of what each root alone gives (fpm-filecheck: code under www/, data
/// under data/ of the lab tree), and `--mount DIR:OPTS` changes one
/// mount only. Before, `--nfs-root` took one directory.
#[test]
fn several_nfs_roots_are_mounts_with_a_client_each() {
    let www = "/tmp/statstorm-lab/www:vers=3";
    let data = "/tmp/statstorm-lab/data:vers=3";
    let both = predict_json(&[
        "--nfs-root",
        www,
        "--nfs-root",
        data,
        "--mount",
        "/tmp/statstorm-lab/data:actimeo=600",
    ]);
    let a = predict_json(&["--nfs-root", www]);
    let b = predict_json(&["--nfs-root", data, "--mount", "actimeo=600"]);
    let mounts = both["nfs"]["mounts"].as_array().expect("nfs.mounts");
    assert_eq!(mounts.len(), 2, "{}", both["nfs"]);
    // busiest first: filecheck makes more calls on data than on code
    assert_eq!(
        mounts[0]["root"], "/tmp/statstorm-lab/data",
        "busiest first"
    );
    let reqs = |v: &serde_json::Value| v["requests"].as_array().unwrap().clone();
    let (rb, ra, rd) = (reqs(&both), reqs(&a), reqs(&b));
    let mut data_rpcs = 0;
    for side in ["before", "after"] {
        for (i, q) in rb.iter().enumerate() {
            for (op, n) in q[side]["rpc"].as_object().unwrap() {
                let x = ra[i][side]["rpc"][op].as_u64().unwrap_or(0);
                let y = rd[i][side]["rpc"][op].as_u64().unwrap_or(0);
                data_rpcs += y;
                assert_eq!(n.as_u64().unwrap(), x + y, "request {i} {side} {op}");
            }
        }
    }
    assert!(
        data_rpcs > 0,
        "the data root saw no RPC: not a test of the sum"
    );
    assert_eq!(
        both["latency"]["simulated"], false,
        "one transport per mount is not simulated"
    );
}
