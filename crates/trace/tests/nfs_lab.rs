//! The parser on the real `strace -f -ttt -T` logs of the NFS lab
//! (`../shared/fixtures/nfs-lab/strace/**/*.strace.gz`), checked against an
//! independent count made with zcat + awk.

use statstorm_trace::{read_bytes, read_paths, Flags, Kind, PidStyle, Ret, TsKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn lab() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/nfs-lab/strace")
}

fn fixtures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for ver in std::fs::read_dir(lab()).expect("nfs-lab strace fixtures missing") {
        let d = ver.unwrap().path().join("defaults");
        for f in std::fs::read_dir(&d).unwrap() {
            let p = f.unwrap().path();
            if p.to_string_lossy().ends_with(".strace.gz") {
                v.push(p);
            }
        }
    }
    v.sort();
    assert!(v.len() >= 50, "expected the 56 lab logs, found {}", v.len());
    v
}

/// Calls per syscall name, counted by awk: the third field of a
/// `PID TIME name(...` line starts with the name and `(`; resumed lines
/// (`<... name resumed>`) are the second half of a counted call.
fn awk_counts(path: &Path) -> BTreeMap<String, u64> {
    let script = r#"{ if (match($3, /^[A-Za-z0-9_]+\(/)) c[substr($3, 1, RLENGTH - 1)]++ } END { for (k in c) print k, c[k] }"#;
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("zcat '{}' | awk '{}'", path.display(), script))
        .output()
        .expect("sh/zcat/awk needed for the independent count");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_lab_log_parses_and_counts_match_awk() {
    for f in fixtures() {
        let t = read_paths(std::slice::from_ref(&f)).unwrap();
        let st = &t.inputs[0];
        assert_eq!(st.skipped, 0, "{}: {:?}", f.display(), st.first_skips);
        assert_eq!(st.lines, st.accounted(), "{}", f.display());
        assert_eq!(st.detected.pid, PidStyle::Column);
        assert_eq!(st.detected.timestamps, TsKind::Epoch);
        assert!(st.detected.durations);
        let mut ours: BTreeMap<String, u64> = BTreeMap::new();
        for e in &t.events {
            *ours.entry(t.strings.str(e.name).into_owned()).or_default() += 1;
        }
        assert_eq!(ours, awk_counts(&f), "{}", f.display());
        assert!(t.events.windows(2).all(|w| w[0].ts_us <= w[1].ts_us));
        assert!(t.events.iter().all(|e| e.ts_us.is_some()));
    }
}

#[test]
fn slice_path_equals_reader_path_on_lab_logs() {
    for f in fixtures() {
        let t = read_paths(std::slice::from_ref(&f)).unwrap();
        let gz = std::fs::read(&f).unwrap();
        // Compressed bytes go through the reader path, plain bytes through
        // the slice path.
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
        let s = read_bytes("x", &plain);
        assert_eq!(s.events.len(), t.events.len());
        for (a, b) in s.events.iter().zip(&t.events) {
            assert_eq!(a.line, b.line);
            assert_eq!(a.ts_us, b.ts_us);
            assert_eq!(a.kind, b.kind);
            assert_eq!(a.ret, b.ret);
            assert_eq!(s.strings.bytes(a.name), t.strings.bytes(b.name));
            assert_eq!(
                a.path.map(|p| s.strings.bytes(p)),
                b.path.map(|p| t.strings.bytes(p))
            );
        }
    }
}

#[test]
fn decoded_fields_of_known_lines() {
    let f = lab().join("3/defaults/cli_fe-cold.strace.gz");
    let t = read_paths(&[f]).unwrap();
    let s = &t.strings;
    // 303   1795223123.365865 execve("/bin/php", ...) = 0 <0.034554>
    let e = &t.events[0];
    assert_eq!(
        (e.pid, e.ts_us, e.dur_us, e.line),
        (303, Some(1795223123365865), Some(34554), 1)
    );
    assert_eq!(s.str(e.name), "execve");
    assert_eq!(e.kind, Kind::Other);
    // access("/etc/ld.so.preload", R_OK) = -1 ENOENT (...) <0.000016>
    let e = &t.events[3];
    assert_eq!(e.kind, Kind::Access);
    assert_eq!(s.str(e.path.unwrap()), "/etc/ld.so.preload");
    assert!(e.flags.has(Flags::R_OK));
    assert_eq!(s.str(e.errno().unwrap().0), "ENOENT");
    // openat(AT_FDCWD, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3 <0.000760>
    let e = &t.events[4];
    assert_eq!(e.kind, Kind::Openat);
    assert!(e.flags.has(Flags::AT_FDCWD));
    assert_eq!((e.fd, e.ret, e.dur_us), (None, Ret::Ok(3), Some(760)));
    // newfstatat(3, "", {...}, AT_EMPTY_PATH) = 0
    let e = &t.events[5];
    assert_eq!(e.kind, Kind::Newfstatat);
    assert_eq!(e.fd, Some(3));
    assert_eq!(s.str(e.path.unwrap()), "");
    assert!(e.flags.has(Flags::AT_EMPTY_PATH) && !e.flags.has(Flags::AT_FDCWD));
    // mmap(NULL, 48079, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f4bec60a000
    let e = &t.events[6];
    assert_eq!(
        (e.kind, e.fd, e.ret),
        (Kind::Mmap, Some(3), Ret::Ok(0x7f4bec60a000))
    );
    // read(3, "\177ELF\2\1\1\3\0..."..., 832) = 832: data cut by strace
    let e = &t.events[9];
    assert_eq!((e.kind, e.fd, e.ret), (Kind::Read, Some(3), Ret::Ok(832)));
    assert!(e.flags.has(Flags::TRUNCATED));
}

#[test]
fn unfinished_resumed_pairs_merge() {
    // 1149 1795223356.335224 wait4(-1,  <unfinished ...>            (line 275)
    // 1149 1795223356.351301 <... wait4 resumed>[{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 1150 <0.016035>
    let f = lab().join("3/defaults/dirmod_fpm_nooc-modify_via_client.strace.gz");
    let t = read_paths(&[f]).unwrap();
    let st = &t.inputs[0];
    assert_eq!(st.unfinished_lines, 5);
    assert_eq!(st.resumed_lines, 5);
    assert_eq!(st.never_resumed, 0);
    let e = t.events.iter().find(|e| e.line == 275).unwrap();
    assert_eq!(t.strings.str(e.name), "wait4");
    assert_eq!((e.pid, e.ts_us), (1149, Some(1795223356335224)));
    assert_eq!((e.ret, e.dur_us), (Ret::Ok(1150), Some(16035)));
    // 1151 getpid( <unfinished ...> (line 406) / <... getpid resumed>) = 1151 <0.000063>
    let e = t.events.iter().find(|e| e.line == 406).unwrap();
    assert_eq!((e.pid, e.ret, e.dur_us), (1151, Ret::Ok(1151), Some(63)));
}

#[test]
fn several_inputs_merge_by_time() {
    let a = lab().join("3/defaults/cli_inc-cold.strace.gz");
    let b = lab().join("3/defaults/fpm_oc_rf0-series.strace.gz");
    let t = read_paths(&[b.clone(), a.clone()]).unwrap();
    let ta = read_paths(&[a]).unwrap();
    let tb = read_paths(&[b]).unwrap();
    assert_eq!(t.events.len(), ta.events.len() + tb.events.len());
    assert_eq!(t.inputs.len(), 2);
    assert!(t.events.windows(2).all(|w| w[0].ts_us <= w[1].ts_us));
    assert!(t.events.iter().any(|e| e.input == 0) && t.events.iter().any(|e| e.input == 1));
}
