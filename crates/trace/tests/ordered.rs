//! A file read as a stream (`trace::ordered`) gives its events in the
//! order of the whole read (`read_paths`: start, then line), whatever the
//! interleaving of processes and of calls strace split into
//! `<unfinished ...>` and `<... resumed>` (generated logs, each process
//! making one call at a time as strace shows it).

use proptest::prelude::*;
use std::fmt::Write as _;

/// A log of `calls` (pid index, split into unfinished/resumed, gap in µs
/// before it): each call of a process starts after its previous one
/// ended; a split call's resumed line comes after the next lines of the
/// other processes.
fn log(calls: &[(u8, bool, u16)]) -> String {
    let mut out = String::new();
    let mut t: i64 = 36_000_000_000;
    // per pid: the resumed line of its unfinished call, and when it ends
    let mut pending: Vec<Option<String>> = vec![None; 4];
    let ts = |t: i64| {
        format!(
            "{:02}:{:02}:{:02}.{:06}",
            t / 3_600_000_000 % 24,
            t / 60_000_000 % 60,
            t / 1_000_000 % 60,
            t % 1_000_000
        )
    };
    for (i, &(p, split, gap)) in calls.iter().enumerate() {
        let p = p as usize % 4;
        let pid = 100 + p;
        t += gap as i64 + 1;
        // a process with a call unfinished resumes it first
        if let Some(rest) = pending[p].take() {
            let _ = writeln!(out, "{pid} {} {rest}", ts(t));
            t += 1;
        }
        let path = format!("/srv/www/f{i}.php");
        if split {
            let _ = writeln!(
                out,
                "{pid} {} openat(AT_FDCWD, \"{path}\", O_RDONLY <unfinished ...>",
                ts(t)
            );
            pending[p] = Some("<... openat resumed>) = 3 <0.000005>".to_string());
        } else {
            let _ = writeln!(
                out,
                "{pid} {} newfstatat(AT_FDCWD, \"{path}\", {{st_mode=S_IFREG|0644, st_size=1, ...}}, 0) = 0 <0.000002>",
                ts(t)
            );
        }
    }
    for (p, rest) in pending.iter().enumerate() {
        if let Some(rest) = rest {
            t += 1;
            let _ = writeln!(out, "{} {} {rest}", 100 + p, ts(t));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn the_stream_gives_the_whole_reads_order(
        calls in proptest::collection::vec((0u8..4, any::<bool>(), 0u16..2000), 1..300)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        std::fs::write(&path, log(&calls)).unwrap();
        let whole = statstorm_trace::read_paths(std::slice::from_ref(&path)).unwrap();
        let mut got = Vec::new();
        let o = statstorm_trace::ordered::for_each_event(
            std::slice::from_ref(&path),
            &Default::default(),
            &mut |e, _| got.push(e.clone()),
        )
        .unwrap();
        prop_assert!(!o.whole);
        prop_assert_eq!(o.late, 0);
        prop_assert_eq!(got.len(), calls.len());
        prop_assert!(got == whole.events, "the stream's order differs");
    }
}

/// Each event with its strings as text, given by `for_each_event` or by
/// `for_each_event_apart`.
fn read_with(
    paths: &[std::path::PathBuf],
    apart: bool,
) -> Vec<(statstorm_trace::Event, String, String)> {
    let mut got = Vec::new();
    let mut f = |e: &statstorm_trace::Event, s: &statstorm_trace::Interner| {
        let text = |id: Option<statstorm_trace::PathId>| {
            id.map(|p| s.str(p).into_owned()).unwrap_or_default()
        };
        got.push((e.clone(), s.str(e.name).into_owned(), text(e.path)));
    };
    let o = if apart {
        statstorm_trace::ordered::for_each_event_apart(paths, &Default::default(), &mut f)
    } else {
        statstorm_trace::ordered::for_each_event(paths, &Default::default(), &mut f)
    }
    .unwrap();
    assert_eq!(o.events as usize, got.len());
    got
}

#[test]
fn the_fold_apart_sees_the_same_events_and_strings() {
    // more events than one batch, each path new: the fold's strings
    // follow the parser's across batches
    let mut x: u32 = 12345;
    let calls: Vec<(u8, bool, u16)> = (0..10_000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((x >> 8) as u8, (x >> 16) % 5 == 0, ((x >> 20) % 500) as u16)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let b = dir.path().join("b.log");
    std::fs::write(&a, log(&calls)).unwrap();
    // another host's processes: pids 200-203
    let other: String = log(&calls[..300])
        .lines()
        .map(|l| format!("2{}\n", &l[1..]))
        .collect();
    std::fs::write(&b, other).unwrap();
    let one = read_with(std::slice::from_ref(&a), false);
    assert_eq!(one.len(), calls.len());
    assert!(
        one == read_with(std::slice::from_ref(&a), true),
        "streamed apart"
    );
    // two inputs are read whole, then given out
    let two = [a.clone(), b.clone()];
    let whole = read_with(&two, false);
    assert_eq!(whole.len(), calls.len() + 300);
    assert!(whole == read_with(&two, true), "read whole apart");
}
