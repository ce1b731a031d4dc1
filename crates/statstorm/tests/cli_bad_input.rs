//! `statstorm analyze` on bad input (issue 2 point 5), driven through the
//! binary in temp dirs. Exit codes: 0 events read (skips warned on stderr),
//! 1 analyzed but an input could not be read, 2 nothing to analyze.

use assert_cmd::Command;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

const GOOD: &str = "\
100 1700000000.000100 newfstatat(AT_FDCWD, \"/srv/a.php\", {st_mode=S_IFREG|0644, st_size=10, ...}, AT_SYMLINK_NOFOLLOW) = 0 <0.000010>
100 1700000000.000200 newfstatat(AT_FDCWD, \"/srv\", {st_mode=S_IFDIR|0755, st_size=4096, ...}, AT_SYMLINK_NOFOLLOW) = 0 <0.000008>
100 1700000000.000300 openat(AT_FDCWD, \"/srv/a.php\", O_RDONLY) = 3 <0.000009>
100 1700000000.000400 access(\"/srv/missing.php\", F_OK) = -1 ENOENT (No such file or directory) <0.000007>
";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .current_dir(dir)
        .arg("analyze")
        .args(args)
        .output()
        .unwrap();
    let r = Run {
        code: out.status.code().expect("killed by a signal"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!r.stderr.contains("panicked"), "panic: {}", r.stderr);
    r
}

fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::write(dir.join(name), data).unwrap();
}

#[test]
fn good_trace_exits_0_without_warnings() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "t.strace", GOOD.as_bytes());
    let r = run(d.path(), &["--format", "json", "t.strace"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "");
    let v = json(&r);
    assert_eq!(v["input"]["events"], 4);
    assert_eq!(v["input"]["skipped"]["total"], 0);
}

#[test]
fn binary_file_is_not_an_strace_log() {
    let d = tempfile::tempdir().unwrap();
    let bin: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    write(d.path(), "core.bin", &bin);
    let r = run(d.path(), &["core.bin"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("core.bin: not an strace log"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("line 1"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
}

#[test]
fn truncated_last_line_is_counted_and_warned() {
    let d = tempfile::tempdir().unwrap();
    let mut t = GOOD.as_bytes().to_vec();
    t.extend_from_slice(b"100 1700000000.000500 openat(AT_FDCWD, \"/srv/b.p");
    write(d.path(), "t.strace", &t);
    let r = run(d.path(), &["--format", "json", "t.strace"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stderr
            .contains("warning: t.strace: 1 of 5 lines skipped (line 5: truncated last line)"),
        "{}",
        r.stderr
    );
    let v = json(&r);
    assert_eq!(v["input"]["events"], 4);
    assert_eq!(v["input"]["skipped"]["by_reason"]["truncated last line"], 1);
    assert_eq!(v["input"]["skipped"]["first"][0]["line"], 5);
    assert_eq!(v["input"]["skipped"]["first"][0]["file"], "t.strace");
}

#[test]
fn line_cut_in_the_middle_and_garbage_between_lines() {
    let d = tempfile::tempdir().unwrap();
    let lines: Vec<&str> = GOOD.lines().collect();
    let t = format!(
        "{}\n100 1700000000.000150 openat(AT_FDCWD, \"/srv/cut\n{}\n#### garbage {{ ]]\n\u{1}\u{2}\u{3}\n{}\n{}\n",
        lines[0], lines[1], lines[2], lines[3]
    );
    write(d.path(), "t.strace", t.as_bytes());
    let r = run(d.path(), &["--format", "json", "t.strace"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r);
    assert_eq!(v["input"]["events"], 4);
    assert_eq!(v["input"]["lines"], 7);
    assert_eq!(v["input"]["skipped"]["total"], 3);
    let lines: Vec<u64> = v["input"]["skipped"]["first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![2, 4, 5]);
    assert!(r.stderr.contains("line 2:"), "{}", r.stderr);
    assert_eq!(v["totals"]["by_syscall"]["newfstatat"]["calls"], 2);
}

#[test]
fn non_utf8_path_bytes() {
    let d = tempfile::tempdir().unwrap();
    let mut t = GOOD.as_bytes().to_vec();
    t.extend_from_slice(b"100 1700000000.000600 newfstatat(AT_FDCWD, \"/srv/caf\xe9\xff.php\", 0x7ffc, 0) = -1 ENOENT (No such file or directory) <0.000005>\n");
    t.extend_from_slice(b"100 1700000000.000700 newfstatat(AT_FDCWD, \"/srv/\\xe9t\\xe9.php\", 0x7ffc, 0) = -1 ENOENT (No such file or directory) <0.000005>\n");
    write(d.path(), "t.strace", &t);
    for fmt in ["json", "text", "md"] {
        let r = run(d.path(), &["--format", fmt, "t.strace"]);
        assert_eq!(r.code, 0, "{fmt}: {}", r.stderr);
    }
    let v = json(&run(d.path(), &["--format", "json", "t.strace"]));
    assert_eq!(v["input"]["events"], 6);
    assert_eq!(v["totals"]["enoent"], 3);
    let paths: Vec<&str> = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    assert!(
        paths
            .iter()
            .any(|p| p.starts_with("/srv/caf") && p.contains('\u{fffd}')),
        "{paths:?}"
    );
}

#[test]
fn empty_file_directory_and_missing_file_exit_2() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "empty.strace", b"");
    let r = run(d.path(), &["empty.strace"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("empty.strace: empty input"),
        "{}",
        r.stderr
    );

    std::fs::create_dir(d.path().join("logs")).unwrap();
    let r = run(d.path(), &["logs"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("logs: is a directory"), "{}", r.stderr);

    let r = run(d.path(), &["nope.strace"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("nope.strace"), "{}", r.stderr);
    assert!(r.stderr.contains("No such file"), "{}", r.stderr);
}

#[test]
fn one_bad_input_among_good_ones_exits_1_with_output() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "t.strace", GOOD.as_bytes());
    let r = run(d.path(), &["--format", "json", "t.strace", "nope.strace"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("nope.strace"));
    assert_eq!(json(&r)["input"]["events"], 4);
}

/// A 1 GiB line, streamed through stdin (nothing on disk), then a valid
/// trace: the line is skipped and reported, and peak RSS stays bounded (the
/// parser drops a line once it exceeds its 1 MiB cap). A line without
/// newline that is the whole input is not an strace log (exit 2); since the
/// cap makes the length irrelevant past 1 MiB, that case uses 64 MiB.
#[test]
fn one_gib_line_without_newline() {
    for (size, tail) in [(1usize << 30, &b"\n"[..]), (64 << 20, &b""[..])] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("statstorm"))
            .args(["analyze", "--format", "json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let with_good = !tail.is_empty();
        let pid = child.id();
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..size / chunk.len() {
                stdin.write_all(&chunk).unwrap();
            }
            // Peak RSS of the reader after it consumed most of the line.
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let hwm_kb: u64 = status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(
                hwm_kb < 64 * 1024,
                "peak RSS {hwm_kb} kB while reading a {size}-byte line"
            );
            if with_good {
                stdin.write_all(b"\n").unwrap();
                stdin.write_all(GOOD.as_bytes()).unwrap();
            }
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        if with_good {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            assert!(
                stderr.contains("<stdin>: 1 of 5 lines skipped (line 1: line too long)"),
                "{stderr}"
            );
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["input"]["events"], 4);
            assert_eq!(
                v["input"]["files"][0]["bytes"].as_u64().unwrap(),
                (size + 1 + GOOD.len()) as u64
            );
        } else {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains("<stdin>: not an strace log"), "{stderr}");
        }
    }
}

/// stderr closed before the messages are written (`2>&1 | head -1` that
/// stops reading): the command still ends with its own exit code, not a
/// panic's 101.
#[test]
fn closed_stderr_keeps_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.log"), "").unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("statstorm"))
        .current_dir(dir.path())
        .args(["analyze", "empty.log"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(2), "{status:?}");
}
