//! Bad input never panics: every complete line is an event, part of a pair,
//! a signal/exit/message/summary line, or a counted skip with its reason and
//! line number; the counts let the CLI tell "read with skips" from "not an
//! strace log at all".

use proptest::prelude::*;
use statstorm_trace::{
    read_bytes, read_paths, Error, InputStats, Options, Parser, SkipReason, VecSink,
};
use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/formats")
            .join(name),
    )
    .unwrap()
}

fn reasons(st: &InputStats) -> Vec<(u64, SkipReason)> {
    st.first_skips.clone()
}

#[test]
fn binary_garbage_is_not_strace() {
    // Deterministic pseudo-random bytes (xorshift), with some newlines.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let data: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let t = read_bytes("garbage", &data);
    let st = &t.inputs[0];
    assert!(t.events.is_empty());
    assert!(st.not_strace() && t.not_strace());
    assert_eq!(st.lines, st.accounted());
    assert_eq!(
        st.lines,
        data.iter().filter(|&&c| c == b'\n').count() as u64 + 1
    );
}

#[test]
fn an_elf_binary_is_not_strace() {
    let data = std::fs::read("/bin/true").expect("/bin/true");
    let t = read_bytes("/bin/true", &data);
    assert!(t.not_strace());
    assert!(t.events.is_empty());
}

#[test]
fn truncated_last_line() {
    let data = fixture("f-ttt-T.txt");
    let full = read_bytes("full", &data);
    // Cut the last line in its middle (the file ends with a newline).
    let last_start = data[..data.len() - 1]
        .iter()
        .rposition(|&c| c == b'\n')
        .unwrap()
        + 1;
    let cut = &data[..last_start + (data.len() - last_start) / 2];
    let t = read_bytes("cut", cut);
    let st = &t.inputs[0];
    assert_eq!(st.lines, full.inputs[0].lines);
    assert_eq!(reasons(st), [(st.lines, SkipReason::TruncatedLastLine)]);
    assert_eq!(st.lines, st.accounted());
    assert!(!t.not_strace());
}

#[test]
fn cut_lines_and_garbage_between_lines() {
    let data = fixture("f-ttt-T.txt");
    let lines: Vec<&[u8]> = data
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut bad = Vec::new();
    let mut expect = Vec::new();
    let mut n = 0u64;
    for (i, l) in lines.iter().enumerate() {
        n += 1;
        if i == 10 {
            // A line cut in the middle, the rest lost.
            bad.extend_from_slice(&l[..l.len() / 2]);
            expect.push((n, SkipReason::NoResult));
        } else if i == 20 {
            bad.extend_from_slice(b"\x00\x01\xff\xfegarbage \xc3(");
            bad.push(b'\n');
            expect.push((n, SkipReason::Unrecognized));
            n += 1;
            bad.extend_from_slice(l);
        } else if i == 30 {
            bad.extend_from_slice(b"Segmentation fault");
            bad.push(b'\n');
            expect.push((n, SkipReason::Unrecognized));
            n += 1;
            bad.extend_from_slice(l);
        } else {
            bad.extend_from_slice(l);
        }
        bad.push(b'\n');
    }
    let t = read_bytes("bad", &bad);
    let st = &t.inputs[0];
    assert_eq!(st.lines, n);
    assert_eq!(st.lines, st.accounted());
    assert_eq!(reasons(st), expect);
    assert!(!st.not_strace());
    let good = read_bytes("good", &data);
    assert_eq!(t.events.len() + 1, good.events.len());
}

#[test]
fn raw_non_utf8_bytes_in_paths_kept() {
    let log = b"1 1700000000.000001 openat(AT_FDCWD, \"/srv/\xff\xfe\xc3(.php\", O_RDONLY) = 3 <0.000010>\n";
    let t = read_bytes("x", log);
    assert_eq!(
        t.strings.bytes(t.events[0].path.unwrap()),
        b"/srv/\xff\xfe\xc3(.php"
    );
}

#[test]
fn empty_input() {
    let t = read_bytes("empty", b"");
    assert_eq!((t.events.len(), t.inputs[0].lines), (0, 0));
    assert!(!t.not_strace());
    let t = read_bytes("blank", b"\n\n  \n");
    assert_eq!(
        t.inputs[0].skipped_by_reason.get(&SkipReason::EmptyLine),
        Some(&3)
    );
    assert!(!t.not_strace());
}

#[test]
fn directory_is_a_clear_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    match read_paths(std::slice::from_ref(&dir)) {
        Err(e @ Error::IsDirectory { .. }) => {
            assert!(e.to_string().contains(&*dir.to_string_lossy()), "{e}");
        }
        other => panic!("expected IsDirectory, got {other:?}"),
    }
    match read_paths(&[dir.join("no-such-file")]) {
        Err(e @ Error::Open { .. }) => assert!(e.to_string().contains("no-such-file")),
        other => panic!("expected Open error, got {other:?}"),
    }
}

#[test]
fn long_line_skipped_same_on_both_paths() {
    let mut data = fixture("plain.txt");
    let mut long = b"read(3, \"".to_vec();
    long.resize(3000, b'a');
    long.extend_from_slice(b"\", 3000) = 3000\n");
    data.extend_from_slice(&long);
    data.extend_from_slice(b"close(3) = 0\n");
    let opts = Options {
        max_line: 2048,
        ..Options::default()
    };
    let mut p = Parser::new("s", opts.clone());
    let mut s = VecSink::default();
    p.feed_slice(&data, &mut s);
    let (st, _, _) = p.finish(&mut s);
    for size in [1, 7, 64, 1000, 1 << 16] {
        let mut p = Parser::new(
            "r",
            Options {
                read_size: size,
                ..opts.clone()
            },
        );
        let mut r = VecSink::default();
        p.feed_reader(&data[..], &mut r).unwrap();
        let (rst, _, _) = p.finish(&mut r);
        assert!(r.events == s.events, "read size {size}");
        assert_eq!(rst.first_skips, st.first_skips, "read size {size}");
        // the parallel path over the input in memory, `size` bytes a block
        let mut p = Parser::new(
            "m",
            Options {
                block_size: size,
                threads: 2,
                ..opts.clone()
            },
        );
        let mut m = VecSink::default();
        p.feed_slice_par(&data, &mut m);
        let (mst, _, _) = p.finish(&mut m);
        assert!(m.events == s.events, "block size {size}");
        assert_eq!(mst.first_skips, st.first_skips, "block size {size}");
        assert_eq!(mst.bytes, st.bytes, "block size {size}");
    }
    assert_eq!(st.first_skips, [(st.lines - 1, SkipReason::LineTooLong)]);
    assert_eq!(st.lines, st.accounted());
}

/// Lines to build random inputs from: real lines, pieces of them, and bytes.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let real: Vec<Vec<u8>> = [
        "f-ttt-T.txt",
        "f-bracket-tt-T.txt",
        "signals.txt",
        "summary-C.txt",
        "f-yy-socket.txt",
        "f-Y-bracket-tt.txt",
        "f-n-i-ttt-T.txt",
        "f-k-tt-T.txt",
        "f-tt-r-T.txt",
        "f-dumps.txt",
        "summary-U.txt",
    ]
    .iter()
    .flat_map(|f| {
        fixture(f)
            .split(|&c| c == b'\n')
            .map(<[u8]>::to_vec)
            .collect::<Vec<_>>()
    })
    .collect();
    let real2 = real.clone();
    prop_oneof![
        4 => proptest::sample::select(real).prop_map(|mut l| { l.push(b'\n'); l }),
        2 => (proptest::sample::select(real2), any::<usize>(), any::<usize>()).prop_map(|(l, a, b)| {
            let (a, b) = (a % (l.len() + 1), b % (l.len() + 1));
            l[a.min(b)..a.max(b)].to_vec()
        }),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => (900usize..1600).prop_map(|n| vec![b'x'; n]),
        1 => proptest::collection::vec(proptest::sample::select(b"\n\"\\()<>[]{}=, .:-+0123456789abcdefx?".to_vec()), 0..64),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn random_input_never_panics_and_every_line_is_accounted(
        parts in proptest::collection::vec(piece(), 0..60),
        read_size in 1usize..200,
        threads in 1usize..3,
        block_size in 1usize..2000,
    ) {
        let data: Vec<u8> = parts.concat();
        let newlines = data.iter().filter(|&&c| c == b'\n').count() as u64;
        let partial = u64::from(!data.is_empty() && *data.last().unwrap() != b'\n');
        let mut p = Parser::new("s", Options { max_line: 1000, ..Options::default() });
        let mut s = VecSink::default();
        p.feed_slice(&data, &mut s);
        let (st, _, _) = p.finish(&mut s);
        prop_assert_eq!(st.lines, newlines + partial);
        prop_assert_eq!(st.lines, st.accounted());
        prop_assert!(st.events <= st.syscall_lines + st.unfinished_lines);
        let mut p = Parser::new("r", Options { read_size, threads, block_size, max_line: 1000, ..Options::default() });
        let mut r = VecSink::default();
        p.feed_reader(&data[..], &mut r).unwrap();
        let (rst, _, _) = p.finish(&mut r);
        prop_assert!(r.events == s.events);
        prop_assert_eq!(&rst.first_skips, &st.first_skips);
        let mut p = Parser::new("m", Options { threads: 2, block_size, max_line: 1000, ..Options::default() });
        let mut m = VecSink::default();
        p.feed_slice_par(&data, &mut m);
        let (mst, _, _) = p.finish(&mut m);
        prop_assert!(m.events == s.events);
        prop_assert_eq!(&mst.first_skips, &st.first_skips);
        prop_assert_eq!(mst.lines, st.lines);
        prop_assert_eq!(mst.skipped_by_reason, st.skipped_by_reason);
    }
}
