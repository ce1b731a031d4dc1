//! `statstorm predict` refuses what it cannot honour: a misspelled mount
//! option or php setting (once dropped or only noted), and an NFS root no
//! traced path is under (once all-zero RPC tables without a word). Each is
//! exit 2 with a message saying what to change.

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
