//! Helpers shared by the command-line tests: running `statstorm` and
//! reading its JSON.

#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::PathBuf;

/// `tests/fixtures/SUB` of the repository.
pub fn fixtures(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(sub)
}

/// `statstorm CMD ARGS...` with its stdout; panics with its stderr when
/// it fails.
pub fn run<S: AsRef<OsStr>>(cmd: &str, args: &[S]) -> String {
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .arg(cmd)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "statstorm {cmd} {:?} failed: {}",
        args.iter()
            .map(|a| a.as_ref().to_string_lossy())
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `statstorm CMD ARGS... --format json`, parsed.
pub fn json<S: AsRef<OsStr>>(cmd: &str, args: &[S]) -> Value {
    let mut all: Vec<&OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.extend([OsStr::new("--format"), OsStr::new("json")]);
    serde_json::from_str(&run(cmd, &all)).expect("JSON output")
}
