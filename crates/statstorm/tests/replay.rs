//! The replayer on its own, on the host (no VM, no NFS): a capture made
//! under strace is prepared (`replay::prepare`), its tree laid out in a
//! second directory, and `statstorm-replay` run under strace: its file
//! calls under the target root are the capture's under the capture root,
//! in order, call by call (kind, path, flags, result). Needs strace and
//! php (the tests fail without them).

use std::path::{Path, PathBuf};
use std::process::Command;

use statstorm_lab::replay::{self, parse_script, parse_window, Call};
use statstorm_trace::{Flags, Kind, Ret, Trace};

const STRACE: [&str; 5] = ["-f", "-ttt", "-T", "-y", "-o"];

fn need(program: &str) {
    let ok = Command::new(program)
        .arg(if program == "php" { "-v" } else { "-V" })
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{program} is needed by this test (Debian package {program})"
    );
}

/// Runs `argv` under `strace -f` in `cwd`, returns the parsed capture.
fn capture(argv: &[&str], cwd: &Path, out: &Path) -> (Trace, std::process::Output) {
    let o = Command::new("strace")
        .args(STRACE)
        .arg(out)
        .args(argv)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LC_ALL", "C")
        .output()
        .expect("strace runs");
    let t = statstorm_trace::read_paths(&[out.to_path_buf()]).expect("capture parses");
    (t, o)
}

fn normalize(p: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in p.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::new();
    for c in parts {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    out
}

const REPLAYED: [Kind; 25] = [
    Kind::Stat,
    Kind::Lstat,
    Kind::Fstat,
    Kind::Newfstatat,
    Kind::Statx,
    Kind::Access,
    Kind::Faccessat,
    Kind::Faccessat2,
    Kind::Open,
    Kind::Openat,
    Kind::Close,
    Kind::Read,
    Kind::Write,
    Kind::Getdents64,
    Kind::Readlink,
    Kind::Readlinkat,
    Kind::Chdir,
    Kind::Fchdir,
    Kind::Mkdir,
    Kind::Mkdirat,
    Kind::Rmdir,
    Kind::Unlink,
    Kind::Unlinkat,
    Kind::Rename,
    Kind::Renameat,
];

/// The file calls of `t` on paths under `root`, one line each: the kind,
/// the path (`ROOT/...`; a relative path strace printed with no directory
/// as it is), the decoded flags and the result (`ok`, a byte count for
/// read/readlink, an errno), after the process (`P0`, `P1`, ...: in the
/// order of their first line here). The path of an fd call is its `-y`
/// decoration.
/// `setup`: the replayer's trace, whose first such call, the chdir of the
/// script's `cwd` line, is its own and left out.
fn file_calls(t: &Trace, root: &Path, setup: bool) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    let root = normalize(root.as_os_str().as_bytes());
    let st = &t.strings;
    let mut out = Vec::new();
    let mut procs: Vec<u32> = Vec::new();
    let mut setup = setup;
    for e in &t.events {
        if !REPLAYED.contains(&e.kind) {
            continue;
        }
        let dir = e.fd_path.map(|p| st.bytes(p).to_vec());
        let abs = match (e.path.map(|p| st.bytes(p).to_vec()), dir) {
            (Some(p), _) if p.first() == Some(&b'/') => normalize(&p),
            (Some(p), Some(d)) => {
                let mut v = d;
                v.push(b'/');
                v.extend_from_slice(&p);
                normalize(&v)
            }
            (Some(p), None) => {
                let mut v = b"rel:".to_vec();
                v.extend_from_slice(&p);
                v
            }
            (None, Some(d)) => normalize(&d),
            (None, None) => continue,
        };
        let shown = if abs.starts_with(b"rel:") {
            abs
        } else if let Some(rest) = abs.strip_prefix(root.as_slice()) {
            if !(rest.is_empty() || rest.starts_with(b"/")) {
                continue;
            }
            [b"ROOT".as_slice(), rest].concat()
        } else {
            continue;
        };
        let res = match e.ret {
            Ret::Ok(n) if matches!(e.kind, Kind::Read | Kind::Readlink | Kind::Readlinkat) => {
                n.to_string()
            }
            Ret::Ok(0) if e.kind == Kind::Getdents64 => "0".into(),
            Ret::Ok(_) => "ok".into(),
            Ret::Err(er) => st.str(er.0).into_owned(),
            Ret::Unknown => "?".into(),
        };
        if std::mem::take(&mut setup) && e.kind == Kind::Chdir {
            continue;
        }
        let proc_ = match procs.iter().position(|&p| p == e.pid) {
            Some(i) => i,
            None => {
                procs.push(e.pid);
                procs.len() - 1
            }
        };
        out.push(format!(
            "P{proc_} {} {} {:#x} = {res}",
            e.kind.name(),
            String::from_utf8_lossy(&shown),
            e.flags.0 & ((Flags::AT_REMOVEDIR << 1) - 1)
        ));
    }
    out
}

struct Replayed {
    capture: Vec<String>,
    replay: Vec<String>,
    stdout: String,
    window: String,
    script: String,
    prepared: replay::Prepared,
}

/// Captures `argv` in a fresh tree made by `make`, prepares, lays out and
/// replays it under strace.
fn capture_and_replay(make: &dyn Fn(&Path), argv: &[&str], cwd: &str) -> Replayed {
    use std::os::unix::ffi::OsStrExt;
    need("strace");
    let work = tempfile::tempdir().unwrap();
    let croot = work.path().join("capture-root");
    let troot = work.path().join("target-root");
    std::fs::create_dir(&croot).unwrap();
    make(&croot);
    let cap_file = work.path().join("capture.strace");
    let (trace, out) = capture(argv, &croot.join(cwd), &cap_file);
    assert!(out.status.success(), "{argv:?}: {out:?}");
    let prepared = replay::prepare(
        &trace,
        croot.as_os_str().as_bytes(),
        troot.as_os_str().as_bytes(),
    );
    parse_script(&prepared.script).expect("prepare's script parses");
    replay::lay_out(&prepared.tree, &troot).unwrap();
    let script = work.path().join("script.txt");
    std::fs::write(&script, &prepared.script).unwrap();
    let window = work.path().join("window.txt");
    let rep_file = work.path().join("replay.strace");
    let o = Command::new("strace")
        .args(STRACE)
        .arg(&rep_file)
        .arg(env!("CARGO_BIN_EXE_statstorm-replay"))
        .arg(&script)
        .arg("--window")
        .arg(&window)
        .args(["--speed", "0"])
        .current_dir(work.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "replayer: {o:?}\nscript:\n{}",
        prepared.script
    );
    let rep = statstorm_trace::read_paths(&[rep_file]).unwrap();
    let replay = file_calls(&rep, &troot, true);
    Replayed {
        capture: file_calls(&trace, &croot, false),
        replay,
        stdout,
        window: std::fs::read_to_string(&window).unwrap(),
        script: prepared.script.clone(),
        prepared,
    }
}

fn assert_same(r: &Replayed) {
    assert!(
        r.capture.len() >= 5,
        "too few calls: {:?}\n{}",
        r.capture,
        r.script
    );
    if r.capture != r.replay {
        let n = r.capture.len().max(r.replay.len());
        let mut diff = String::new();
        for i in 0..n {
            let a = r.capture.get(i).map_or("-", String::as_str);
            let b = r.replay.get(i).map_or("-", String::as_str);
            diff.push_str(&format!(
                "{} {a:<60} | {b}\n",
                if a == b { ' ' } else { '!' }
            ));
        }
        panic!("capture | replay differ:\n{diff}\nscript:\n{}", r.script);
    }
    assert!(
        r.stdout.contains(" 0 not "),
        "mismatches reported: {}",
        r.stdout
    );
}

fn write(p: PathBuf, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn php_cli_include_tree_replays_the_same_calls() {
    need("php");
    let make = |root: &Path| {
        write(
            root.join("app/index.php"),
            r#"<?php
include __DIR__ . '/lib/a.php';
require_once 'lib/b.php';
var_dump(file_exists(__DIR__ . '/missing.php'), is_readable(__DIR__ . '/lib/a.php'));
var_dump(is_file('conf/none.ini'), file_exists(__DIR__ . '/conf/app.ini'));
echo strlen(file_get_contents(__DIR__ . '/conf/app.ini')), "\n";
@include 'lib/nope.php';
var_dump(is_dir(__DIR__ . '/lib'), count(scandir(__DIR__ . '/lib')));
"#,
        );
        write(root.join("app/lib/a.php"), "<?php $a = 1;\n");
        write(
            root.join("app/lib/b.php"),
            "<?php $b = str_repeat('x', 10);\n",
        );
        write(root.join("app/conf/app.ini"), &"k = v\n".repeat(2000));
    };
    let r = capture_and_replay(&make, &["php", "-n", "index.php"], "app");
    assert_same(&r);
    // The tree: what the capture showed, not what was there.
    let paths: Vec<String> = r
        .prepared
        .tree
        .iter()
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect();
    assert!(paths.contains(&"app/lib/a.php".to_string()), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains("missing")), "{paths:?}");
    let ini = r
        .prepared
        .tree
        .iter()
        .find(|e| e.path == b"app/conf/app.ini")
        .expect("app.ini laid out");
    assert_eq!(ini.kind, replay::EntryKind::File { size: 12000 });
    assert!(
        r.prepared.outside_root > 0,
        "the system paths are not replayed"
    );
    // One request (php-cli: the process), its start and end marked.
    let marks = parse_window(&r.window).unwrap();
    assert_eq!(marks.len(), 2, "{}", r.window);
    assert!(marks[0].start && !marks[1].start);
    assert_eq!(marks[0].request, 1);
}

#[test]
fn shell_with_forks_replays_the_same_calls_in_each_process() {
    let make = |root: &Path| {
        write(root.join("a"), "hello\n");
        write(root.join("b/c"), "12345");
        write(root.join("b/d/e"), "");
    };
    let r = capture_and_replay(
        &make,
        &[
            "sh",
            "-c",
            "stat -c %s a >/dev/null; cat b/c >/dev/null; ls missing 2>/dev/null; ls -d b/d; true",
        ],
        ".",
    );
    assert_same(&r);
    let script = parse_script(&r.script).unwrap();
    let forks = script.ops.iter().filter(|o| o.call == Call::Fork).count();
    assert!(forks >= 4, "{}", r.script);
    let procs: std::collections::HashSet<u32> = script.ops.iter().map(|o| o.pid).collect();
    assert_eq!(procs.len(), forks + 1);
    // A request per process (none accepts): a start and an end each.
    let marks = parse_window(&r.window).unwrap();
    assert_eq!(marks.len(), 2 * procs.len(), "{}", r.window);
}

#[test]
fn a_bad_script_exits_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    std::fs::write(&s, "statstorm-replay 1\n1 0 stat \"a\"\n1 1 frobnicate\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_statstorm-replay"))
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn mismatches_are_reported_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let p = dir.path().join("there");
    std::fs::write(&p, "x").unwrap();
    std::fs::write(
        &s,
        format!(
            "statstorm-replay 1\n1 0 stat {} = ENOENT\n1 0 stat \"/nonexistent/x\" = ENOENT\n1 0 close 7 = 0\n1 0 exit\n",
            replay::quote(p.to_str().unwrap().as_bytes())
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_statstorm-replay"))
        .arg(&s)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(out.contains("1 results as in the capture, 2 not"), "{out}");
    assert!(out.contains("line 2:") && out.contains("got 0"), "{out}");
    assert!(
        out.contains("line 4:") && out.contains("fd not open"),
        "{out}"
    );
}

#[test]
fn symbolic_links_are_laid_out_with_their_targets_and_walked_through() {
    let make = |root: &Path| {
        write(root.join("releases/12/index.php"), "<?php echo 1;\n");
        std::os::unix::fs::symlink("releases/12", root.join("current")).unwrap();
    };
    let r = capture_and_replay(
        &make,
        &[
            "sh",
            "-c",
            "readlink current; cat current/index.php; stat -c %s current/index.php",
        ],
        ".",
    );
    assert_same(&r);
    let kind = |p: &[u8]| {
        r.prepared
            .tree
            .iter()
            .find(|e| e.path == p)
            .map(|e| e.kind.clone())
    };
    assert_eq!(
        kind(b"current"),
        Some(replay::EntryKind::Symlink {
            target: b"releases/12".to_vec()
        })
    );
    // the file read through the link is laid out where the link leads
    assert!(matches!(
        kind(b"releases/12/index.php"),
        Some(replay::EntryKind::File { size: 14 })
    ));
    assert_eq!(kind(b"current/index.php"), None);
}
