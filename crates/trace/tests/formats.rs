//! Every strace format fixture (recorded by `scripts/record-format-fixtures`
//! with the real strace) through the slice path and the reader path with
//! tiny buffers, checked against independent awk counts and against the
//! workloads that produced them.

use statstorm_trace::op::{Normalizer, OpKind};
use statstorm_trace::{
    read_bytes, read_paths, Event, Flags, Interner, Kind, Options, Parser, PathId, PidStyle, Ret,
    Sink, TsKind, VecSink,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (fixture, pid style, timestamps, durations, -y seen)
const FIXTURES: &[(&str, PidStyle, TsKind, bool, bool)] = &[
    ("plain.txt", PidStyle::None, TsKind::None, false, false),
    ("f-ttt-T.txt", PidStyle::Column, TsKind::Epoch, true, false),
    (
        "f-bracket-tt-T.txt",
        PidStyle::Bracket,
        TsKind::TimeOfDayUs,
        true,
        false,
    ),
    ("t.txt", PidStyle::None, TsKind::TimeOfDay, false, false),
    ("f-r.txt", PidStyle::Column, TsKind::Relative, false, false),
    ("ttt.txt", PidStyle::None, TsKind::Epoch, false, false),
    ("f-y.txt", PidStyle::Column, TsKind::Epoch, true, true),
    (
        "f-yy-socket.txt",
        PidStyle::Column,
        TsKind::Epoch,
        true,
        true,
    ),
    ("renames.txt", PidStyle::Column, TsKind::Epoch, true, false),
    ("php-file.txt", PidStyle::Column, TsKind::Epoch, true, true),
    ("ls-lR.txt", PidStyle::Column, TsKind::Epoch, true, false),
    ("escapes.txt", PidStyle::None, TsKind::None, false, false),
    ("escapes-x.txt", PidStyle::None, TsKind::None, false, false),
    ("escapes-xx.txt", PidStyle::None, TsKind::None, false, false),
    (
        "truncated.txt",
        PidStyle::Column,
        TsKind::None,
        false,
        false,
    ),
    ("signals.txt", PidStyle::Column, TsKind::Epoch, true, false),
    ("summary-c.txt", PidStyle::None, TsKind::None, false, false),
    ("summary-w.txt", PidStyle::None, TsKind::None, false, false),
    (
        "summary-C.txt",
        PidStyle::Column,
        TsKind::None,
        false,
        false,
    ),
    ("dup.txt", PidStyle::Column, TsKind::Epoch, true, false),
    ("dup-y.txt", PidStyle::Column, TsKind::Epoch, true, true),
    ("dup-py.txt", PidStyle::Column, TsKind::Epoch, true, true),
    ("deleted-y.txt", PidStyle::Column, TsKind::Epoch, true, true),
    (
        "f-Y-tt-T-y.txt",
        PidStyle::Column,
        TsKind::TimeOfDayUs,
        true,
        true,
    ),
    (
        "f-Y-bracket-tt.txt",
        PidStyle::Bracket,
        TsKind::TimeOfDayUs,
        false,
        false,
    ),
    (
        "f-n-i-ttt-T.txt",
        PidStyle::Column,
        TsKind::Epoch,
        true,
        false,
    ),
    (
        "f-k-tt-T.txt",
        PidStyle::Column,
        TsKind::TimeOfDayUs,
        true,
        false,
    ),
    (
        "f-tt-r-T.txt",
        PidStyle::Column,
        TsKind::TimeOfDayUs,
        true,
        false,
    ),
    (
        "f-tt-T-s.txt",
        PidStyle::Column,
        TsKind::TimeOfDayUs,
        true,
        false,
    ),
    ("f-ns.txt", PidStyle::Column, TsKind::Epoch, true, false),
    ("f-unix-s.txt", PidStyle::Column, TsKind::Epoch, true, false),
    ("unix-s.txt", PidStyle::None, TsKind::Epoch, false, false),
    ("f-dumps.txt", PidStyle::Column, TsKind::None, false, false),
    (
        "y-odd-paths.txt",
        PidStyle::Column,
        TsKind::Epoch,
        true,
        true,
    ),
    ("X-raw.txt", PidStyle::Column, TsKind::Epoch, true, true),
    ("X-verbose.txt", PidStyle::Column, TsKind::Epoch, true, true),
    ("summary-U.txt", PidStyle::None, TsKind::None, false, false),
    (
        "summary-U-calls.txt",
        PidStyle::None,
        TsKind::None,
        false,
        false,
    ),
];

/// Syscall lines per name, counted by awk: drop a `[pid N]` prefix, a pid
/// column (each with `-Y`'s `<comm>`), a timestamp, `-t -r`'s `(+ delta)`
/// and `-n`/`-i`'s bracketed numbers, then take the word before `(`. A
/// resumed line is the second half of a call already counted.
fn awk_counts(path: &Path) -> BTreeMap<String, u64> {
    let script = r#"{ l = $0; sub(/^\[pid +[0-9]+(<[^>]*>)?\] /, "", l);
        sub(/^[0-9]+(<[^>]*>)? +/, "", l);
        sub(/^ *[0-9][0-9:.]* +/, "", l); sub(/^\(\+ *[0-9.]+\) +/, "", l);
        sub(/^\[ *([0-9]+|\?+)\] +/, "", l); sub(/^\[([0-9a-f]+|\?+)\] +/, "", l);
        if (match(l, /^[A-Za-z0-9_]+\(/)) c[substr(l, 1, RLENGTH - 1)]++ }
        END { for (k in c) print k, c[k] }"#;
    let out = Command::new("awk")
        .arg(script)
        .arg(path)
        .output()
        .expect("awk is needed for the independent count");
    assert!(out.status.success(), "awk failed on {}", path.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn counts(events: &[Event], s: &Interner) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for e in events {
        *m.entry(s.str(e.name).into_owned()).or_default() += 1;
    }
    m
}

struct Run {
    events: Vec<Event>,
    strings: Interner,
    stats: statstorm_trace::InputStats,
}

fn via_reader(data: &[u8], read_size: usize, threads: usize, block_size: usize) -> Run {
    let opts = Options {
        read_size,
        threads,
        block_size,
        ..Options::default()
    };
    let mut p = Parser::new("r", opts);
    let mut sink = VecSink::default();
    p.feed_reader(data, &mut sink).unwrap();
    let (stats, _, strings) = p.finish(&mut sink);
    Run {
        events: sink.events,
        strings,
        stats,
    }
}

fn via_slice(data: &[u8]) -> Run {
    let mut p = Parser::new("s", Options::default());
    let mut sink = VecSink::default();
    p.feed_slice(data, &mut sink);
    let (stats, _, strings) = p.finish(&mut sink);
    Run {
        events: sink.events,
        strings,
        stats,
    }
}

/// The parallel path over the input held in memory (a mapped file).
fn via_slice_par(data: &[u8], block_size: usize) -> Run {
    let opts = Options {
        threads: 2,
        block_size,
        ..Options::default()
    };
    let mut p = Parser::new("m", opts);
    let mut sink = VecSink::default();
    p.feed_slice_par(data, &mut sink);
    let (stats, _, strings) = p.finish(&mut sink);
    Run {
        events: sink.events,
        strings,
        stats,
    }
}

/// Another path's run of a fixture gives the slice path's events, string
/// ids and counts.
fn assert_same_run(r: &Run, s: &Run, what: &str) {
    if r.events != s.events {
        let i = (0..r.events.len().min(s.events.len()))
            .find(|&i| r.events[i] != s.events[i])
            .unwrap_or(r.events.len().min(s.events.len()));
        panic!(
            "{what}: events differ at {i} of {} / {}: {:?} vs {:?}",
            r.events.len(),
            s.events.len(),
            r.events.get(i),
            s.events.get(i)
        );
    }
    assert!(
        same_strings(&r.strings, &s.strings),
        "{what}: strings differ"
    );
    assert_eq!(r.stats.lines, s.stats.lines, "{what}");
    assert_eq!(r.stats.resumed_lines, s.stats.resumed_lines, "{what}");
    assert_eq!(r.stats.bytes, s.stats.bytes, "{what}");
    assert_eq!(r.stats.detected, s.stats.detected, "{what}");
}

fn same_strings(a: &Interner, b: &Interner) -> bool {
    a.len() == b.len()
        && (0..a.len() as u32)
            .all(|i| a.bytes(statstorm_trace::PathId(i)) == b.bytes(statstorm_trace::PathId(i)))
}

#[test]
fn every_fixture_same_events_through_every_path_and_buffer_size() {
    for &(name, pid, ts, dur, y) in FIXTURES {
        let data = read(name);
        let s = via_slice(&data);
        assert_eq!(s.stats.skipped, 0, "{name}: {:?}", s.stats.first_skips);
        assert_eq!(s.stats.lines, s.stats.accounted(), "{name}");
        let d = s.stats.detected;
        assert_eq!(
            (d.pid, d.timestamps, d.durations, d.fd_paths),
            (pid, ts, dur, y),
            "{name}"
        );
        assert_eq!(
            counts(&s.events, &s.strings),
            awk_counts(&dir().join(name)),
            "{name}"
        );
        // The sequential reader path (threads 1) and the parallel one with
        // blocks small enough to cut pairs and tables everywhere.
        for (threads, block) in [(1, 1 << 20), (2, 64), (2, 1000), (2, 1 << 20)] {
            for size in [1, 7, 64, 256 << 10] {
                let r = via_reader(&data, size, threads, block);
                let what = format!("{name}: reader(read {size}, threads {threads}, block {block})");
                assert_same_run(&r, &s, &what);
            }
        }
        // The parallel path over the input in memory, blocks from one line
        // to the whole file.
        for block in [1, 7, 64, 1000, 1 << 20] {
            let r = via_slice_par(&data, block);
            assert_same_run(&r, &s, &format!("{name}: slice_par(block {block})"));
        }
    }
}

/// An event with its strings spelled out (string ids depend on which
/// strings a run interned), its decoration texts and, unless `times`, its
/// stat times left out.
fn without_decoration_texts(e: &Event, s: &Interner, times: bool) -> String {
    let mut e = e.clone();
    e.fd_path = None;
    e.ret_path = None;
    if !times {
        e.mtime = None;
        e.ctime_us = None;
    }
    let name = s.str(e.name).into_owned();
    let path = e.path.map(|p| s.str(p).into_owned());
    let path2 = e.path2.map(|p| s.str(p).into_owned());
    let errno = e.errno().map(|x| s.str(x.0).into_owned());
    let zero = statstorm_trace::PathId(0);
    e.name = zero;
    e.path = e.path.map(|_| zero);
    e.path2 = e.path2.map(|_| zero);
    if let Ret::Err(x) = &mut e.ret {
        x.0 = zero;
    }
    format!("{e:?} {name} {path:?} {path2:?} {errno:?}")
}

/// `Options::fd_paths` off: on every path, each fixture gives the same
/// events but for the decoration texts (`fd_path`, `ret_path` None), with
/// `Flags::DECORATED` where either text was and `Flags::FD_FILE` where the
/// fd's text is a path, and the same detected format; `Options::stat_times`
/// off as well, the same but for the stat times (None).
#[test]
fn without_decoration_texts_the_same_events() {
    // v-stat.txt: stat structs with their times (`-v`).
    let names = FIXTURES.iter().map(|f| f.0).chain(["v-stat.txt"]);
    for name in names {
        let data = read(name);
        let on = via_slice(&data);
        if name == "v-stat.txt" {
            assert!(on.events.iter().any(|e| e.mtime.is_some()));
        }
        for e in &on.events {
            let deco = e.fd_path.is_some() || e.ret_path.is_some();
            assert_eq!(e.flags.has(Flags::DECORATED), deco, "{name}: {e:?}");
            let file = e
                .fd_path
                .is_some_and(|p| on.strings.bytes(p).starts_with(b"/"));
            assert_eq!(e.flags.has(Flags::FD_FILE), file, "{name}: {e:?}");
        }
        for (threads, block, times) in [(1, 1 << 20, true), (2, 64, true), (2, 1 << 20, false)] {
            let want: Vec<String> = on
                .events
                .iter()
                .map(|e| without_decoration_texts(e, &on.strings, times))
                .collect();
            let opts = Options {
                threads,
                block_size: block,
                read_size: 7,
                fd_paths: false,
                stat_times: times,
                ..Options::default()
            };
            let mut runs = Vec::new();
            let mut p = Parser::new("r", opts.clone());
            let mut sink = VecSink::default();
            p.feed_reader(&data[..], &mut sink).unwrap();
            runs.push(("reader", sink.events, p.finish(&mut VecSink::default())));
            let mut p = Parser::new("m", opts);
            let mut sink = VecSink::default();
            p.feed_slice_par(&data, &mut sink);
            runs.push(("slice_par", sink.events, p.finish(&mut VecSink::default())));
            for (how, events, (stats, _, strings)) in runs {
                let what =
                    format!("{name}: {how} (threads {threads}, block {block}, times {times})");
                assert!(
                    events.iter().all(|e| e.fd_path.is_none()
                        && e.ret_path.is_none()
                        && (times || (e.mtime.is_none() && e.ctime_us.is_none()))),
                    "{what}"
                );
                let got: Vec<String> = events
                    .iter()
                    .map(|e| without_decoration_texts(e, &strings, times))
                    .collect();
                assert!(got == want, "{what}: events differ");
                assert_eq!(stats.detected, on.stats.detected, "{what}");
            }
        }
    }
}

#[test]
fn compressed_inputs_by_magic_bytes() {
    let plain = read_paths(&[dir().join("f-ttt-T.txt")]).unwrap();
    for f in ["f-ttt-T.txt.gz", "f-ttt-T.txt.zst"] {
        let t = read_paths(&[dir().join(f)]).unwrap();
        assert!(t.events == plain.events, "{f}");
        assert!(same_strings(&t.strings, &plain.strings));
        // The slice entry point decompresses too.
        let b = read_bytes(f, &read(f));
        assert!(b.events == plain.events, "{f}");
    }
}

#[test]
fn unfinished_pairs_and_pids() {
    let t = read_bytes("f", &read("f-ttt-T.txt"));
    let st = &t.inputs[0];
    let grep = |pat: &str| {
        read("f-ttt-T.txt")
            .split(|&c| c == b'\n')
            .filter(|l| l.windows(pat.len()).any(|w| w == pat.as_bytes()))
            .count() as u64
    };
    assert_eq!(st.unfinished_lines, grep("<unfinished ...>"));
    assert_eq!(st.resumed_lines, grep(" resumed>"));
    assert!(st.unfinished_lines > 0);
    // wait4 of the shell: start line timed, result and duration from the
    // resumed line.
    let w = t
        .events
        .iter()
        .find(|e| t.strings.str(e.name) == "wait4" && e.dur_us.unwrap() > 100)
        .unwrap();
    assert!(matches!(w.ret, Ret::Ok(p) if p > 0));
    let pids: std::collections::BTreeSet<u32> = t.events.iter().map(|e| e.pid).collect();
    assert!(pids.len() >= 2 && !pids.contains(&0));

    // Bracket prefixes: the first process's unprefixed lines get its pid.
    let b = read_paths(&[dir().join("f-bracket-tt-T.txt")]).unwrap();
    assert!(b.inputs[0].initial_pid.is_some());
    assert!(b.events.iter().all(|e| e.pid != 0));
    assert_eq!(b.events.len(), t.events.len());
}

#[test]
fn ff_prefix_files_take_pid_from_name() {
    let t = read_paths(&[dir().join("ff/trace")]).unwrap();
    assert!(t.inputs.len() >= 2);
    let mut total = 0;
    for (i, st) in t.inputs.iter().enumerate() {
        assert_eq!(st.detected.pid, PidStyle::FileName);
        assert_eq!(st.skipped, 0);
        let pid: u32 = st.name.rsplit('.').next().unwrap().parse().unwrap();
        let evs: Vec<&Event> = t.events.iter().filter(|e| e.input as usize == i).collect();
        assert!(evs.iter().all(|e| e.pid == pid));
        let awk: u64 = awk_counts(Path::new(&st.name)).values().sum();
        assert_eq!(evs.len() as u64, awk, "{}", st.name);
        total += evs.len();
    }
    assert_eq!(t.events.len(), total);
    assert!(t.events.windows(2).all(|w| w[0].ts_us <= w[1].ts_us));
}

#[test]
fn relative_times_accumulate() {
    let t = read_bytes("r", &read("f-r.txt"));
    // awk sums every line's delta (column 2): the last line's start time.
    let out = Command::new("awk")
        .arg(r#"$2 ~ /^[0-9]+\.[0-9]+$/ { split($2, a, "."); s += a[1] * 1000000 + a[2] } END { print s }"#)
        .arg(dir().join("f-r.txt"))
        .output()
        .unwrap();
    let sum: i64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let last = t.events.iter().map(|e| e.ts_us.unwrap()).max().unwrap();
    assert!(last <= sum && last > 0);
    assert_eq!(t.events[0].ts_us, Some(0));
    // -t: seconds of the day.
    let t = read_bytes("t", &read("t.txt"));
    let first = std::str::from_utf8(&read("t.txt")[..8])
        .unwrap()
        .to_string();
    let hms: Vec<i64> = first.split(':').map(|x| x.parse().unwrap()).collect();
    assert_eq!(
        t.events[0].ts_us,
        Some((hms[0] * 3600 + hms[1] * 60 + hms[2]) * 1_000_000)
    );
}

#[test]
fn fd_decorations() {
    let t = read_bytes("y", &read("f-y.txt"));
    let s = &t.strings;
    let o = t
        .events
        .iter()
        .find(|e| e.kind == Kind::Openat && e.ret == Ret::Ok(3))
        .unwrap();
    assert!(o.flags.has(Flags::AT_FDCWD));
    assert!(o.fd_path.is_some(), "AT_FDCWD</cwd> keeps the cwd");
    assert!(s.str(o.ret_path.unwrap()).starts_with('/'));
    let c = t
        .events
        .iter()
        .find(|e| e.kind == Kind::Close && e.fd_path.is_some())
        .unwrap();
    assert_eq!(c.fd, Some(3));
    let yy = read_bytes("yy", &read("f-yy-socket.txt"));
    let s = &yy.strings;
    let acc = yy
        .events
        .iter()
        .find(|e| matches!(e.kind, Kind::Accept | Kind::Accept4))
        .unwrap();
    assert!(
        s.str(acc.fd_path.unwrap()).starts_with("TCP:["),
        "{}",
        s.str(acc.fd_path.unwrap())
    );
    let dn = yy
        .events
        .iter()
        .find(|e| e.kind == Kind::Openat && e.path.is_some_and(|p| s.bytes(p) == b"/dev/null"))
        .unwrap();
    assert_eq!(
        s.str(dn.ret_path.unwrap()),
        "/dev/null",
        "-yy device suffix dropped"
    );
}

#[test]
fn fds_of_unlinked_files_keep_fd_and_path() {
    // `exec 3>gone.txt; rm gone.txt; echo x >&3; exec 3>&-` under -y: the
    // calls after the unlink print `3</.../gone.txt>(deleted)`
    let t = read_bytes("del", &read("deleted-y.txt"));
    let s = &t.strings;
    let gone = |id: Option<PathId>| id.is_some_and(|p| s.str(p).ends_with("/gone.txt"));
    let marked: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| e.flags.has(Flags::FD_DELETED))
        .collect();
    let text = String::from_utf8(read("deleted-y.txt")).unwrap();
    let want = text
        .lines()
        .filter(|l| {
            // the first argument is an fd marked `(deleted)`
            let call = l
                .splitn(3, char::is_whitespace)
                .last()
                .unwrap_or("")
                .trim_start();
            call.split_once('(').is_some_and(|(_, args)| {
                args.find(">(deleted)")
                    .is_some_and(|i| !args[..i].contains(", "))
            })
        })
        .count();
    assert!(want >= 4, "fixture: {want} calls on the unlinked file");
    assert_eq!(marked.len(), want);
    for e in &marked {
        assert!(e.fd.is_some() && gone(e.fd_path), "{e:?}");
    }
    let kinds: Vec<Kind> = marked.iter().map(|e| e.kind).collect();
    for k in [Kind::Write, Kind::Close, Kind::Fcntl, Kind::Dup2] {
        assert!(kinds.contains(&k), "{k:?} on the unlinked file: {kinds:?}");
    }
}

#[test]
fn mtimes_of_verbose_stat_structs() {
    // `strace -v`: a.txt dated 1767225600 (touch -d), stat'ed by the
    // shell's test (newfstatat), coreutils stat (statx) and cat (fstat of
    // the open fd: newfstatat(3</.../a.txt>, "", ..., AT_EMPTY_PATH))
    let t = read_bytes("v", &read("v-stat.txt"));
    let s = &t.strings;
    let on_a = |e: &&Event| {
        [e.path, e.fd_path]
            .into_iter()
            .flatten()
            .any(|p| s.str(p).ends_with("a.txt"))
    };
    let stats: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| e.kind.is_stat_family())
        .filter(on_a)
        .collect();
    let kinds: Vec<Kind> = stats.iter().map(|e| e.kind).collect();
    assert!(
        kinds.contains(&Kind::Statx) && kinds.contains(&Kind::Newfstatat),
        "{kinds:?}"
    );
    for e in &stats {
        assert_eq!(e.mtime, Some(1_767_225_600), "{e:?}");
    }
    // every successful stat of the verbose fixture has one, no other
    // event does
    for e in &t.events {
        let want = e.kind.is_stat_family() && !e.is_error();
        assert_eq!(e.mtime.is_some(), want, "{e:?}");
    }
    // abbreviated structs (no -v) have none
    for f in ["f-y.txt", "php-file.txt", "f-ttt-T.txt"] {
        let t = read_bytes(f, &read(f));
        assert!(t.events.iter().all(|e| e.mtime.is_none()), "{f}");
        assert!(
            t.events
                .iter()
                .any(|e| e.kind.is_stat_family() && !e.is_error()),
            "{f}"
        );
    }
}

#[test]
fn dup_family_decoded() {
    let t = read_bytes("py", &read("dup-py.txt"));
    let s = &t.strings;
    let path = |id: Option<PathId>| id.map(|p| s.str(p).rsplit('/').next().unwrap().to_string());
    let row = |e: &Event| (e.kind, e.fd, e.ret, path(e.fd_path), path(e.path2));
    let dups: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.kind.is_dup() || e.kind == Kind::Fcntl)
        .map(row)
        .collect();
    let a = Some("a.txt".to_string());
    let b = Some("b.txt".to_string());
    // dup(3</a.txt>) = 5, fcntl(3, F_DUPFD_CLOEXEC, 20) = 20,
    // dup3(3</a.txt>, 4</b.txt>, O_CLOEXEC) = 4, dup2(20, 4</a.txt>) = 4
    assert_eq!(
        dups,
        [
            (Kind::Dup, Some(3), Ret::Ok(5), a.clone(), None),
            (Kind::Fcntl, Some(3), Ret::Ok(20), a.clone(), None),
            (Kind::Dup3, Some(3), Ret::Ok(4), a.clone(), b),
            (Kind::Dup2, Some(20), Ret::Ok(4), a.clone(), a),
        ]
    );
    let dup_of: Vec<_> = t.events.iter().filter_map(Event::dup_of).collect();
    assert_eq!(dup_of, [(3, 5), (3, 20), (3, 4), (20, 4)]);

    // The shell without -y: F_DUPFD saves, F_SETFD does not dup, a failed
    // F_DUPFD (`exec 5>&-` with fd 5 closed) gives no alias.
    let t = read_bytes("sh", &read("dup.txt"));
    let s = &t.strings;
    let fcntl: Vec<_> = t.events.iter().filter(|e| e.kind == Kind::Fcntl).collect();
    assert!(fcntl.iter().any(|e| match e.ret {
        Ret::Ok(n) => e.flags.has(Flags::F_DUPFD) && e.dup_of() == Some((1, n as i32)),
        _ => false,
    }));
    assert!(fcntl
        .iter()
        .any(|e| !e.flags.has(Flags::F_DUPFD) && e.dup_of().is_none()));
    let failed = fcntl.iter().find(|e| e.is_error()).expect("failed F_DUPFD");
    assert_eq!(s.str(failed.errno().unwrap().0), "EBADF");
    assert!(failed.flags.has(Flags::F_DUPFD) && failed.dup_of().is_none());
}

/// The file ops the Normalizer makes of one fixture, for paths whose last
/// component is in `names`: (event kind, op kind, last component).
fn file_ops(name: &str, names: &[&str]) -> Vec<(u32, Kind, OpKind, String)> {
    let t = read_bytes(name, &read(name));
    let mut n = Normalizer::new();
    let mut out = Vec::new();
    for e in &t.events {
        if let Some(op) = n.push(e, &t.strings) {
            let last = op.path.rsplit('/').next().unwrap().to_string();
            if names.contains(&last.as_str()) {
                out.push((e.pid, e.kind, op.kind, last));
            }
        }
    }
    out
}

#[test]
fn normalizer_follows_dups_in_recorded_traces() {
    // `echo x >out.txt` then `cat a.txt >>out.txt`: the shell's file is
    // written through fd 1 and closed by the dup2 that restores stdout, with
    // and without -y decorations. (cat's own write goes through the fd it
    // inherited; the Normalizer does not follow fork.)
    for name in ["dup.txt", "dup-y.txt"] {
        let ops = file_ops(name, &["out.txt"]);
        let sh = ops.first().expect("ops on out.txt").0;
        let sh_ops: Vec<_> = ops
            .iter()
            .filter(|o| o.0 == sh)
            .map(|o| (o.1, o.2))
            .collect();
        assert_eq!(
            sh_ops,
            [
                (Kind::Openat, OpKind::Open),
                (Kind::Write, OpKind::Write),
                (Kind::Dup2, OpKind::Close),
                (Kind::Openat, OpKind::Open),
                (Kind::Dup2, OpKind::Close),
            ],
            "{name}"
        );
    }
    // dup3 onto b.txt's only fd closes b.txt; a.txt is closed once, by its
    // last fd (4), after fds 3, 5 and 20 went.
    let ops: Vec<_> = file_ops("dup-py.txt", &["a.txt", "b.txt"])
        .into_iter()
        .map(|o| (o.1, o.2, o.3))
        .collect();
    let (a, b) = ("a.txt".to_string(), "b.txt".to_string());
    assert_eq!(
        ops,
        [
            (Kind::Openat, OpKind::Open, a.clone()),
            (Kind::Openat, OpKind::Open, b.clone()),
            (Kind::Read, OpKind::Read, a.clone()),
            (Kind::Dup3, OpKind::Close, b),
            (Kind::Newfstatat, OpKind::Fstat, a.clone()),
            (Kind::Close, OpKind::Close, a),
        ]
    );
}

#[test]
fn escapes_decode_to_raw_bytes() {
    let want: &[&[u8]] = &[
        b"/tmp/q\"uote\\back\nnl\ttab\xff\xfe-end\xc3\xa9",
        b"/tmp/\x01ctl\x7f",
    ];
    for f in ["escapes.txt", "escapes-x.txt", "escapes-xx.txt"] {
        let t = read_bytes(f, &read(f));
        let paths: Vec<&[u8]> = t
            .events
            .iter()
            .filter(|e| e.kind == Kind::Newfstatat)
            .map(|e| t.strings.bytes(e.path.unwrap()))
            .filter(|p| p.starts_with(b"/tmp/"))
            .collect();
        assert_eq!(paths, want, "{f}");
    }
}

#[test]
fn truncated_strings_flagged() {
    let t = read_bytes("t", &read("truncated.txt"));
    let reads: Vec<&Event> = t.events.iter().filter(|e| e.kind == Kind::Read).collect();
    assert!(!reads.is_empty());
    for r in &reads {
        let line = read("truncated.txt")
            .split(|&c| c == b'\n')
            .nth(r.line as usize - 1)
            .unwrap()
            .to_vec();
        let cut = line.windows(4).any(|w| w == b"\"...");
        assert_eq!(r.flags.has(Flags::TRUNCATED), cut);
    }
    assert!(reads.iter().any(|r| r.flags.has(Flags::TRUNCATED)));
}

#[derive(Default)]
struct Records {
    signals: Vec<String>,
    exits: Vec<statstorm_trace::ExitStatus>,
}
impl Sink for Records {
    fn event(&mut self, _: &Event, _: &Interner) -> bool {
        true
    }
    fn signal(&mut self, s: &statstorm_trace::Signal<'_>) {
        self.signals
            .push(String::from_utf8_lossy(s.name).into_owned());
    }
    fn exit(&mut self, e: &statstorm_trace::Exit) {
        self.exits.push(e.status);
    }
}

#[test]
fn signals_and_exits() {
    let data = read("signals.txt");
    let mut p = Parser::new("sig", Options::default());
    let mut r = Records::default();
    p.feed_slice(&data, &mut r);
    let (st, _, strings) = p.finish(&mut r);
    let text = String::from_utf8_lossy(&data);
    assert_eq!(st.signal_lines as usize, text.matches("--- SIG").count());
    assert_eq!(st.exit_lines as usize, text.matches("+++ ").count());
    let killed: Vec<String> = r
        .exits
        .iter()
        .filter_map(|e| match e {
            statstorm_trace::ExitStatus::Killed { signal, .. } => {
                Some(strings.str(*signal).into_owned())
            }
            _ => None,
        })
        .collect();
    assert_eq!(killed, ["SIGKILL", "SIGUSR1"]);
    assert!(r.signals.contains(&"SIGUSR1".to_string()));
}

#[test]
fn path_syscalls_decoded() {
    let t = read_bytes("renames", &read("renames.txt"));
    let s = &t.strings;
    let find = |k: Kind| {
        t.events
            .iter()
            .find(|e| e.kind == k)
            .unwrap_or_else(|| panic!("{k:?}"))
    };
    let r = find(Kind::Renameat2);
    assert_eq!(
        (s.str(r.path.unwrap()), s.str(r.path2.unwrap())),
        ("x".into(), "y".into())
    );
    assert!(r.flags.has(Flags::AT_FDCWD));
    let u = find(Kind::Unlinkat);
    assert_eq!(s.str(u.path.unwrap()), "y");
    assert!(!u.flags.has(Flags::AT_REMOVEDIR));
    assert_eq!(s.str(find(Kind::Mkdir).path.unwrap()), "d");
    assert_eq!(s.str(find(Kind::Rmdir).path.unwrap()), "d");
    let g = find(Kind::Getcwd);
    assert!(s.str(g.path.unwrap()).starts_with("/tmp/statstorm-fx."));

    let t = read_bytes("php", &read("php-file.txt"));
    let s = &t.strings;
    let a = t.events.iter().find(|e| e.kind == Kind::Access).unwrap();
    assert_eq!(s.str(a.path.unwrap()), "a.php");
    assert_eq!(
        a.flags.0 & (Flags::R_OK | Flags::W_OK | Flags::X_OK),
        0,
        "F_OK"
    );
    let ln = t
        .events
        .iter()
        .filter(|e| e.kind == Kind::Newfstatat && e.flags.has(Flags::AT_SYMLINK_NOFOLLOW))
        .count();
    assert!(ln >= 4, "realpath lstat walk");
    let en = t
        .events
        .iter()
        .filter(|e| e.errno().is_some_and(|x| s.str(x.0) == "ENOENT"))
        .count();
    assert_eq!(
        en,
        String::from_utf8_lossy(&read("php-file.txt"))
            .matches("ENOENT")
            .count()
    );
    let rn = t.events.iter().find(|e| e.kind == Kind::Rename).unwrap();
    assert!(s.str(rn.path2.unwrap()).ends_with("/n"));
    let rl = t.events.iter().find(|e| e.kind == Kind::Readlink).unwrap();
    assert_eq!(s.str(rl.path.unwrap()), "/proc/self/exe");

    let t = read_bytes("ls", &read("ls-lR.txt"));
    let s = &t.strings;
    let sx = t
        .events
        .iter()
        .find(|e| e.kind == Kind::Statx && s.str(e.path.unwrap()).ends_with("sub dir"))
        .unwrap();
    assert!(sx.flags.has(Flags::AT_SYMLINK_NOFOLLOW) && sx.flags.has(Flags::AT_FDCWD));
    assert!(t
        .events
        .iter()
        .any(|e| e.kind == Kind::Getdents64 && e.fd.is_some()));
    let od = t
        .events
        .iter()
        .find(|e| e.kind == Kind::Openat && e.flags.has(Flags::O_DIRECTORY))
        .unwrap();
    assert!(s.str(od.path.unwrap()).ends_with("/site"));
    assert!(t
        .events
        .iter()
        .any(|e| e.kind == Kind::Other && s.str(e.name) == "lgetxattr"));
}

#[test]
fn summary_tables_give_totals() {
    for f in ["summary-c.txt", "summary-w.txt", "summary-C.txt"] {
        let t = read_bytes(f, &read(f));
        let sm = t
            .summary
            .as_ref()
            .unwrap_or_else(|| panic!("{f}: no summary"));
        let total = sm.total.as_ref().unwrap();
        let calls: u64 = sm.rows.iter().map(|r| r.calls).sum();
        let errors: u64 = sm.rows.iter().map(|r| r.errors).sum();
        assert_eq!((calls, errors), (total.calls, total.errors), "{f}");
        // awk over the table rows.
        let out = Command::new("awk")
            .arg(r#"/^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+ / && $NF != "total" { n++ } END { print n }"#)
            .arg(dir().join(f))
            .output()
            .unwrap();
        let rows: usize = String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(sm.rows.len(), rows, "{f}");
        assert!(t.inputs[0].detected.summary);
    }
    // -U: columns picked and ordered. awk reads the rows by field count:
    // errors is the one cell that may be blank, just before the name.
    for (f, script) in [
        (
            "summary-U.txt",
            r#"NR > 2 && $1 ~ /^[0-9.]+$/ { print $NF, $5, (NF == 7 ? $6 : 0), $4 }"#,
        ),
        (
            "summary-U-calls.txt",
            r#"NR > 2 && $2 ~ /^[0-9]+$/ { print $1, $2, 0, "-" }"#,
        ),
    ] {
        let t = read_bytes(f, &read(f));
        assert_eq!(t.inputs[0].skipped, 0, "{f}");
        let sm = t.summary.unwrap_or_else(|| panic!("{f}: no summary"));
        let out = Command::new("awk")
            .arg(script)
            .arg(dir().join(f))
            .output()
            .unwrap();
        let awk = String::from_utf8(out.stdout).unwrap();
        let mut rows: Vec<String> = sm
            .rows
            .iter()
            .chain(sm.total.as_ref())
            .map(|r| {
                let secs = r.seconds.map_or("-".to_string(), |s| format!("{s:.6}"));
                format!("{} {} {} {secs}", r.name, r.calls, r.errors)
            })
            .collect();
        let mut want: Vec<String> = awk.lines().map(str::to_string).collect();
        rows.sort();
        want.sort();
        assert!(want.len() > 10, "{f}: awk read {} rows", want.len());
        assert_eq!(rows, want, "{f}");
    }
    // -C: trace lines and the table; per syscall, the table's calls equal
    // the events (strace -c leaves out calls that never returned, `= ?`).
    let t = read_bytes("C", &read("summary-C.txt"));
    let mut ev = counts(&t.events, &t.strings);
    for e in t.events.iter().filter(|e| e.ret == Ret::Unknown) {
        *ev.get_mut(&*t.strings.str(e.name)).unwrap() -= 1;
    }
    ev.retain(|_, n| *n > 0);
    let table: BTreeMap<String, u64> = t
        .summary
        .unwrap()
        .rows
        .iter()
        .map(|r| (r.name.clone(), r.calls))
        .collect();
    assert_eq!(ev, table);
}

/// Stops the parse after `left` events.
struct StopAfter {
    left: usize,
    events: Vec<Event>,
}
impl Sink for StopAfter {
    fn event(&mut self, ev: &Event, _: &Interner) -> bool {
        self.events.push(ev.clone());
        self.left -= 1;
        self.left > 0
    }
}

#[test]
fn a_sink_that_stops_gets_nothing_more_on_every_path() {
    // Many small blocks, so the parallel paths still have blocks on the
    // pool (parsed or not) when the sink says stop; they must be dropped,
    // not merged, and the call must return.
    let data = read("f-ttt-T.txt").repeat(20);
    let all = via_slice(&data).events;
    for stop in [1, 2, 37, all.len() / 2, all.len()] {
        let want = &all[..stop];
        let par = |threads, block_size| Options {
            threads,
            block_size,
            read_size: 512,
            ..Options::default()
        };
        for (what, opts, reader) in [
            ("slice", Options::default(), false),
            ("slice_par", par(2, 256), false),
            ("reader_par", par(2, 256), true),
            ("reader_par_3", par(3, 4096), true),
        ] {
            let threads = opts.threads;
            let mut p = Parser::new("stop", opts);
            let mut sink = StopAfter {
                left: stop,
                events: Vec::new(),
            };
            if reader {
                p.feed_reader(&data[..], &mut sink).unwrap();
            } else if threads > 1 {
                p.feed_slice_par(&data, &mut sink);
            } else {
                p.feed_slice(&data, &mut sink);
            }
            assert!(sink.events == want, "{what}, stop after {stop}");
        }
    }
}

/// Panics at its `n`th event.
struct PanicAt(usize);
impl Sink for PanicAt {
    fn event(&mut self, _: &Event, _: &Interner) -> bool {
        self.0 -= 1;
        assert!(self.0 > 0, "sink gave up");
        true
    }
}

#[test]
fn a_sink_that_panics_ends_the_parallel_path() {
    // The workers must be told to stop when the merge unwinds, or the
    // threads' scope would wait for them forever: run each case on its own
    // thread and fail, not hang, if it does not come back.
    let data = std::sync::Arc::new(read("f-ttt-T.txt").repeat(20));
    for threads in [2, 3] {
        for reader in [false, true] {
            let (tx, rx) = std::sync::mpsc::channel();
            let data = data.clone();
            std::thread::spawn(move || {
                let opts = Options {
                    threads,
                    block_size: 256,
                    ..Options::default()
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut p = Parser::new("panic", opts);
                    if reader {
                        p.feed_reader(&data[..], &mut PanicAt(5)).unwrap();
                    } else {
                        p.feed_slice_par(&data, &mut PanicAt(5));
                    }
                }));
                let _ = tx.send(r.is_err());
            });
            let panicked = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("threads {threads}, reader {reader}: hung"));
            assert!(panicked, "threads {threads}, reader {reader}");
        }
    }
}

/// awk's reading of each complete call line of a fixture (not unfinished,
/// not resumed): line number, pid (`-Y`'s `<comm>` dropped; `[pid N]` lines
/// only when `bracket`), start time in microseconds (time of day or epoch,
/// the fraction cut to six digits) and duration in microseconds (-1: none).
fn awk_calls(path: &Path, bracket: bool) -> Vec<(u64, u32, i64, i64)> {
    let script = r#"
        function us(t,   a, n, hms) {
            n = split(t, a, ".")
            if (index(a[1], ":")) { split(a[1], hms, ":"); a[1] = hms[1] * 3600 + hms[2] * 60 + hms[3] }
            return a[1] * 1000000 + substr(a[2] "000000", 1, 6)
        }
        / <unfinished \.\.\.>$/ || /<\.\.\. / || !/\) += / { next }
        {
            if (BRACKET) {
                if ($1 != "[pid") next
                p = $2; sub(/<.*/, "", p); sub(/\]$/, "", p); t = $3
            } else {
                p = $1; sub(/<.*/, "", p); t = $2
            }
            d = -1
            if ($NF ~ /^<[0-9.]+>$/) { x = substr($NF, 2, length($NF) - 2); d = (index(x, ".") ? us(x) : x * 1000000) }
            printf "%d %s %.0f %.0f\n", NR, p, us(t), d
        }"#;
    let out = Command::new("awk")
        .arg("-v")
        .arg(format!("BRACKET={}", bracket as u8))
        .arg(script)
        .arg(path)
        .output()
        .expect("awk is needed for the independent reading");
    assert!(out.status.success(), "awk failed on {}", path.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

/// `-Y`, `-n`, `-i`, `-k`, `-t -r`, `--syscall-times=s` and nanosecond
/// times (recorded by the real strace): every call line gives the event
/// awk reads in it (pid, start, duration), the options are reported, and
/// `-k`'s stack frames are counted as such, not skipped.
#[test]
fn pids_times_and_durations_under_more_options() {
    // (fixture, -Y, -n, -i, -k, `[pid N]` prefixes)
    let cases = [
        ("f-Y-tt-T-y.txt", true, false, false, false, false),
        ("f-Y-bracket-tt.txt", true, false, false, false, true),
        ("f-n-i-ttt-T.txt", false, true, true, false, false),
        ("f-k-tt-T.txt", false, false, false, true, false),
        ("f-tt-r-T.txt", false, false, false, false, false),
        ("f-tt-T-s.txt", false, false, false, false, false),
        ("f-ns.txt", false, false, false, false, false),
        ("f-unix-s.txt", false, false, false, false, false),
    ];
    for (name, comm, scno, ip, stack, bracket) in cases {
        let data = read(name);
        let s = via_slice(&data);
        assert_eq!(s.stats.skipped, 0, "{name}: {:?}", s.stats.first_skips);
        let d = s.stats.detected;
        assert_eq!(
            (
                d.comm,
                d.syscall_numbers,
                d.instruction_pointers,
                d.stack_traces
            ),
            (comm, scno, ip, stack),
            "{name}"
        );
        let frames = data
            .split(|&c| c == b'\n')
            .filter(|l| l.starts_with(b" > "))
            .count() as u64;
        assert_eq!(s.stats.stack_lines, frames, "{name}");
        assert_eq!(stack, frames > 0, "{name}");
        let calls = awk_calls(&dir().join(name), bracket);
        assert!(calls.len() > 20, "{name}: awk read {} calls", calls.len());
        for (line, pid, ts, dur) in calls {
            let ev = s
                .events
                .iter()
                .find(|e| e.line == line)
                .unwrap_or_else(|| panic!("{name}: no event for line {line}"));
            let want_dur = (dur >= 0).then_some(dur as u64);
            assert_eq!(
                (ev.pid, ev.ts_us, ev.dur_us),
                (pid, Some(ts), want_dur),
                "{name}: line {line}"
            );
        }
    }
    // -e read= / -e write=: the dump lines are counted, not skipped.
    let data = read("f-dumps.txt");
    let s = via_slice(&data);
    let dumps = data
        .split(|&c| c == b'\n')
        .filter(|l| l.starts_with(b" | "))
        .count() as u64;
    assert!(dumps > 100, "{dumps} dump lines");
    assert_eq!(
        (
            s.stats.dump_lines,
            s.stats.skipped,
            s.stats.detected.data_dumps
        ),
        (dumps, 0, true)
    );
    // The options of the other fixtures are none of these.
    for &(name, ..) in FIXTURES {
        if name.starts_with("f-Y") || name.starts_with("f-n-i") || name.starts_with("f-k") {
            continue;
        }
        let d = via_slice(&read(name)).stats.detected;
        assert!(
            !(d.comm || d.syscall_numbers || d.instruction_pointers || d.stack_traces),
            "{name}"
        );
        assert_eq!(d.data_dumps, name == "f-dumps.txt", "{name}");
    }
}

/// Records what `Sink::comm` gives, in order.
#[derive(Default)]
struct Comms {
    seen: Vec<(u32, String)>,
}
impl Sink for Comms {
    fn event(&mut self, _: &Event, _: &Interner) -> bool {
        true
    }
    fn comm(&mut self, pid: u32, comm: &[u8]) {
        self.seen
            .push((pid, String::from_utf8_lossy(comm).into_owned()));
    }
}

/// `-Y`: the sink gets each pid's command name when it first shows and
/// when it changes (an exec), the same on every path, as awk reads the
/// names off the lines.
#[test]
fn command_names_of_pids() {
    for (name, bracket) in [("f-Y-tt-T-y.txt", false), ("f-Y-bracket-tt.txt", true)] {
        let data = read(name);
        let script = r#"{
            if (BRACKET) { if ($1 != "[pid") next; w = $2 } else w = $1
            if (!match(w, /<[^>]*>/)) next
            p = substr(w, 1, RSTART - 1); c = substr(w, RSTART + 1, RLENGTH - 2)
            if (last[p] != c) { print p, c; last[p] = c }
        }"#;
        let out = Command::new("awk")
            .arg("-v")
            .arg(format!("BRACKET={}", bracket as u8))
            .arg(script)
            .arg(dir().join(name))
            .output()
            .expect("awk is needed for the independent reading");
        let want: Vec<(u32, String)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (p, c) = l.split_once(' ').unwrap();
                (p.parse().unwrap(), c.to_string())
            })
            .collect();
        // strace names a pid at its start (the first, `strace`, until its
        // execve of sh) and after an execve it sees.
        assert!(want.len() >= 2, "{name}: {want:?}");
        if !bracket {
            assert!(
                want.iter().filter(|w| w.0 == want[0].0).count() >= 2,
                "{name}: {want:?}"
            );
        }
        let mut runs = Vec::new();
        let mut p = Parser::new("s", Options::default());
        let mut s = Comms::default();
        p.feed_slice(&data, &mut s);
        runs.push(("slice", s.seen));
        for block in [1, 64, 1 << 20] {
            let opts = Options {
                threads: 2,
                block_size: block,
                ..Options::default()
            };
            let mut p = Parser::new("m", opts);
            let mut s = Comms::default();
            p.feed_slice_par(&data, &mut s);
            runs.push(("slice_par", s.seen));
        }
        for (how, got) in runs {
            assert_eq!(got, want, "{name}: {how}");
        }
    }
}

/// `-y` decorations of a cwd and a file whose names hold a comma, an
/// unbalanced `(` and `[`, braces, a quote, `<>` and a trailing `-`: the
/// decoration is one argument whatever its bytes. Each event names the
/// directory and the file as the quoted paths of the same trace do, in as
/// many events as awk finds lines for them.
#[test]
fn decorations_of_paths_with_structure_bytes() {
    let name = "y-odd-paths.txt";
    let data = read(name);
    for r in [
        via_slice(&data),
        via_reader(&data, 7, 2, 64),
        via_slice_par(&data, 1000),
    ] {
        assert_eq!(r.stats.skipped, 0, "{:?}", r.stats.first_skips);
        let s = &r.strings;
        let text = |p: Option<PathId>| p.map(|p| s.bytes(p).to_vec());
        // The directory, from chdir's quoted argument.
        let chdir = r.events.iter().find(|e| e.kind == Kind::Chdir).unwrap();
        let cwd = text(chdir.path).unwrap();
        assert!(cwd.ends_with(b"/odd, (dir [x {y} <a> q\"q -"), "{cwd:?}");
        let file = [&cwd[..], b"/f-"].concat();
        let cwd_events = r
            .events
            .iter()
            .filter(|e| e.flags.has(Flags::AT_FDCWD) && text(e.fd_path) == Some(cwd.clone()))
            .count();
        let fd_events: Vec<&Event> = r
            .events
            .iter()
            .filter(|e| e.fd == Some(3) && text(e.fd_path) == Some(file.clone()))
            .collect();
        // awk: the lines with the directory's decoration as dirfd, and
        // those with the file's as fd 3.
        let awk = |re: &str| -> usize {
            let out = Command::new("awk")
                .arg(format!("/{re}/ {{ n++ }} END {{ print n + 0 }}"))
                .arg(dir().join(name))
                .output()
                .unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        let want_cwd = awk(r#"\(AT_FDCWD<[^,]*odd, \(dir \[x \{y\} .74a.76 q.\"q ->, "#);
        let want_fd = awk(r#"\(3<[^,]*odd, \(dir \[x \{y\} .74a.76 q.\"q -\/f->"#);
        assert!(want_cwd >= 3 && want_fd >= 3, "{want_cwd} {want_fd}");
        assert_eq!((cwd_events, fd_events.len()), (want_cwd, want_fd));
        // The arguments after a decoration are in place: the file's
        // `newfstatat(3<...>, "", ..., AT_EMPTY_PATH)` and the
        // directory's stats with their paths and flags.
        assert!(fd_events
            .iter()
            .filter(|e| e.kind == Kind::Newfstatat)
            .all(|e| e.flags.has(Flags::AT_EMPTY_PATH) && text(e.path) == Some(Vec::new())));
        let stat_file = r
            .events
            .iter()
            .filter(|e| e.kind == Kind::Newfstatat && text(e.path) == Some(file.clone()))
            .count();
        assert_eq!(
            stat_file,
            awk(r#"newfstatat\(AT_FDCWD<.*, \"[^\"]*q.\"q -\/f-\""#)
        );
        // The open's returned fd is decorated with the file too.
        let open = r
            .events
            .iter()
            .find(|e| e.kind == Kind::Openat && text(e.path) == Some(file.clone()))
            .unwrap();
        assert_eq!(
            (open.ret, text(open.ret_path)),
            (Ret::Ok(3), Some(file.clone()))
        );
    }
}

/// `-X raw` and `-X verbose`: flags, access modes and `AT_FDCWD` printed
/// as numbers (with their names in a comment under verbose) decode to the
/// same flags as the names: for each flag, as many events carry it as awk
/// finds lines with its value.
#[test]
fn flags_printed_as_numbers() {
    // Bit `b` of a `0x...` number, for awk without bit operations.
    const HEX: &str = r#"function bit(s, b,   v, i) { v = 0
        for (i = 3; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
        return int(v / b) % 2 }"#;
    let numbered = |call: &str, b: u32| {
        format!(
            r#"{HEX} / {call}\(/ && match($0, /", 0x[0-9a-f]+/) {{ if (bit(substr($0, RSTART + 3, RLENGTH - 3), {b})) n++ }} END {{ print n + 0 }}"#
        )
    };
    let cases: Vec<(&str, Option<Kind>, u32, String)> = vec![
        (
            "AT_SYMLINK_NOFOLLOW",
            Some(Kind::Newfstatat),
            Flags::AT_SYMLINK_NOFOLLOW,
            r#"/ newfstatat\(.*, 0x100( \/\* AT_SYMLINK_NOFOLLOW \*\/)?\) = / { n++ } END { print n + 0 }"#.into(),
        ),
        (
            "AT_EMPTY_PATH",
            Some(Kind::Newfstatat),
            Flags::AT_EMPTY_PATH,
            r#"/ newfstatat\(.*, 0x1000( \/\* AT_EMPTY_PATH \*\/)?\) = / { n++ } END { print n + 0 }"#.into(),
        ),
        (
            "AT_REMOVEDIR",
            Some(Kind::Unlinkat),
            Flags::AT_REMOVEDIR,
            r#"/ unlinkat\(.*, 0x200( \/\* AT_REMOVEDIR \*\/)?\) = / { n++ } END { print n + 0 }"#.into(),
        ),
        (
            "AT_FDCWD",
            None,
            Flags::AT_FDCWD,
            r#"/ [a-z0-9_]+\(-100[ <]/ { n++ } END { print n + 0 }"#.into(),
        ),
        (
            "F_DUPFD",
            Some(Kind::Fcntl),
            Flags::F_DUPFD,
            r#"/ fcntl\([^,]*, (0|0x406)( \/\* F_DUPFD(_CLOEXEC)? \*\/)?, / { n++ } END { print n + 0 }"#.into(),
        ),
        ("R_OK", Some(Kind::Access), Flags::R_OK, numbered("access", 4)),
        ("O_CREAT", Some(Kind::Openat), Flags::O_CREAT, numbered("openat", 64)),
        (
            "O_DIRECTORY",
            Some(Kind::Openat),
            Flags::O_DIRECTORY,
            numbered("openat", 65536),
        ),
    ];
    for name in ["X-raw.txt", "X-verbose.txt"] {
        let r = via_slice(&read(name));
        assert_eq!(r.stats.skipped, 0, "{name}: {:?}", r.stats.first_skips);
        for (what, kind, flag, script) in &cases {
            let out = Command::new("awk")
                .arg(script)
                .arg(dir().join(name))
                .output()
                .expect("awk is needed for the independent reading");
            assert!(out.status.success(), "awk: {script}");
            let want: usize = String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let got = r
                .events
                .iter()
                .filter(|e| kind.is_none_or(|k| e.kind == k) && e.flags.has(*flag))
                .count();
            assert!(want > 0, "{name}: awk found no {what}");
            assert_eq!(got, want, "{name}: {what}");
        }
    }
}
