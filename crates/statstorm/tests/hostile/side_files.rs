//! Hostile side files (issue 24 case 8): `/dev/zero` given as a php.ini, a
//! `php -i` page, a `/proc/mounts` copy, a scenario or a requests file is a
//! clear error (exit 2) with memory capped, never an allocation that grows
//! until it fails.

use super::common::{many_requests_gz, run_capped, run_with};

const TRACE: &str = "\
100 1700000000.000100 execve(\"/usr/bin/php\", [\"php\", \"/srv/a.php\"], 0x7ffd0 /* 1 var */) = 0 <0.000100>
100 1700000000.000200 newfstatat(AT_FDCWD, \"/srv/a.php\", {st_mode=S_IFREG|0644, st_size=10, ...}, 0) = 0 <0.000010>
100 1700000000.000300 openat(AT_FDCWD, \"/srv/a.php\", O_RDONLY) = 3 <0.000009>
";

/// Address space for each run: the binary, its threads and a 16 MiB cap
/// read, far below what reading /dev/zero whole would take.
const MIB: u64 = 512;

#[test]
fn dev_zero_as_a_settings_or_mounts_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("t.strace"), TRACE).unwrap();
    for flag in ["--from-php-ini", "--php-ini", "--from-php-info"] {
        let r = run_capped(d.path(), MIB, &["predict", "t.strace", flag, "/dev/zero"]);
        assert_eq!(r.code, 2, "{flag}: {}", r.stderr);
        assert!(
            r.stderr.contains("/dev/zero") && r.stderr.contains("larger than 16777216 bytes"),
            "{flag}: {}",
            r.stderr
        );
    }
    let r = run_capped(
        d.path(),
        MIB,
        &["predict", "t.strace", "--mounts", "/dev/zero"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--mounts /dev/zero"), "{}", r.stderr);
}

#[test]
fn dev_zero_as_a_scenario_or_requests_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let r = run_capped(d.path(), MIB, &["simulate", "/dev/zero"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("larger than"), "{}", r.stderr);
    std::fs::write(
        d.path().join("s.toml"),
        "name = \"z\"\nduration_s = 1\n[arrivals]\nkind = \"replay\"\n[workload]\nkind = \"file\"\nfile = \"/dev/zero\"\n[pool]\nmax_children = 2\nlisten_backlog = 2\n",
    )
    .unwrap();
    let r = run_capped(d.path(), MIB, &["simulate", "s.toml"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("/dev/zero"), "{}", r.stderr);
}

/// A reference capture is lifted in memory: past 128 MiB of text it is
/// refused, naming the file and the line reached, within 768 MiB of
/// address space (2^20 requests, 360 MB of text, read whole into memory
/// as before needed more).
#[test]
fn a_reference_capture_past_its_cap_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("t.strace"), TRACE).unwrap();
    many_requests_gz(&d.path().join("big.strace.gz"), 1 << 20);
    // (two threads and two malloc arenas: the address space does not
    // follow the machine's cores)
    let r = run_with(
        d.path(),
        Some(768),
        &[("RAYON_NUM_THREADS", "2"), ("MALLOC_ARENA_MAX", "2")],
        None,
        &["predict", "t.strace", "--reference", "big.strace.gz"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("reference capture big.strace.gz")
            && r.stderr.contains("more than 128 MiB of text")
            && r.stderr.contains("line "),
        "{}",
        r.stderr
    );
}
