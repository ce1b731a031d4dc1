//! `statstorm analyze` maps uncompressed regular files (named, or on stdin
//! redirected from a file) and parses them on the parallel path over the
//! mapped bytes; `--no-mmap`, pipes and compressed inputs are read with
//! read(2). Every way in must give the same JSON, on inputs of several
//! blocks (the parallel path cuts at 1 MiB) built from real strace fixtures.

use serde_json::Value;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn formats() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/fixtures/formats")
}

/// A log of `copies` copies of a real fixture (about 3 MiB for the
/// defaults below), so that the parallel path has several blocks.
fn big_log(dir: &Path, name: &str, copies: usize) -> PathBuf {
    let one = std::fs::read(formats().join(name)).unwrap();
    let path = dir.join(format!("{name}.x{copies}"));
    let mut f = File::create(&path).unwrap();
    for _ in 0..copies {
        f.write_all(&one).unwrap();
    }
    path
}

fn analyze(args: &[&str], stdin: Stdio) -> Value {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("statstorm"))
        .arg("analyze")
        .args(["--format", "json"])
        .args(args)
        .stdin(stdin)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "analyze {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // the input's name differs between a path and stdin
    for f in v["input"]["files"].as_array_mut().unwrap() {
        f["name"] = Value::Null;
    }
    for s in v["input"]["skipped"]["first"].as_array_mut().unwrap() {
        s["file"] = Value::Null;
    }
    v
}

#[test]
fn mapped_and_read_inputs_give_the_same_analysis() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, copies) in [("f-ttt-T.txt", 400), ("f-bracket-tt-T.txt", 400)] {
        let log = big_log(tmp.path(), name, copies);
        let size = std::fs::metadata(&log).unwrap().len();
        assert!(size > 3 << 20, "{name}: {size} bytes, want several blocks");
        let p = log.to_str().unwrap();
        let mapped = analyze(&[p], Stdio::null());
        assert!(mapped["input"]["events"].as_u64().unwrap() > 1000, "{name}");
        let read = analyze(&["--no-mmap", p], Stdio::null());
        assert_eq!(mapped, read, "{name}: path mapped vs --no-mmap");
        let stdin_file = analyze(&[], Stdio::from(File::open(&log).unwrap()));
        assert_eq!(mapped, stdin_file, "{name}: stdin redirected from the file");
        // a pipe cannot be mapped: read(2)
        let mut child = std::process::Command::new("cat")
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let piped = analyze(&[], Stdio::from(child.stdout.take().unwrap()));
        child.wait().unwrap();
        assert_eq!(mapped, piped, "{name}: stdin from a pipe");
    }
}

#[test]
fn stdin_already_read_from_is_analyzed_from_where_it_stands() {
    let tmp = tempfile::tempdir().unwrap();
    let log = big_log(tmp.path(), "f-ttt-T.txt", 50);
    let data = std::fs::read(&log).unwrap();
    // skip the first line, as `(head -n 1 >/dev/null; statstorm ...) < log`
    let first = data.iter().position(|&c| c == b'\n').unwrap() + 1;
    let rest = tmp.path().join("rest.txt");
    std::fs::write(&rest, &data[first..]).unwrap();
    let want = analyze(&[rest.to_str().unwrap()], Stdio::null());
    let mut f = File::open(&log).unwrap();
    f.seek(SeekFrom::Start(first as u64)).unwrap();
    let got = analyze(&[], Stdio::from(f));
    assert_eq!(got["input"]["lines"], want["input"]["lines"]);
    assert_eq!(got, want);
    // and the whole file has one line more
    let whole = analyze(&[log.to_str().unwrap()], Stdio::null());
    assert_eq!(
        whole["input"]["lines"].as_u64().unwrap(),
        want["input"]["lines"].as_u64().unwrap() + 1
    );
}
