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
