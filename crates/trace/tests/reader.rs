//! The reader against hostile input (issue 24): read errors in the middle
//! of an input, gzip padding, blocks of short lines, files that shrink
//! while mapped, time that runs backwards, inputs whose pids collide.

use statstorm_trace::{input, Event, Interner, Options, Parser, VecSink};
use std::io::{self, Read, Write};

/// `n` complete `-f -tt -T` lines of four processes, with unfinished and
/// resumed pairs.
fn log(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let pid = 100 + i % 4;
        let us = i % 1_000_000;
        if i % 7 == 3 {
            writeln!(
                out,
                "{pid} 10:00:00.{us:06} openat(AT_FDCWD, \"/srv/f{i}.php\", O_RDONLY <unfinished ...>"
            )
            .unwrap();
            writeln!(
                out,
                "{pid} 10:00:00.{us:06} <... openat resumed>) = 3 <0.000020>"
            )
            .unwrap();
        } else {
            writeln!(
                out,
                "{pid} 10:00:00.{us:06} stat(\"/srv/www/site{}/f{}.php\", 0x7ffd) = -1 ENOENT (No such file or directory) <0.000010>",
                i % 13,
                i % 101
            )
            .unwrap();
        }
    }
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Events as comparable text (strings resolved).
fn dump(events: &[Event], strings: &Interner) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} {:?} {} {:?} {:?}",
                e.line,
                e.pid,
                e.ts_us,
                strings.str(e.name),
                e.path.map(|p| strings.str(p).into_owned()),
                e.ret
            )
        })
        .collect()
}

struct Out {
    events: Vec<String>,
    lines: u64,
    bytes: u64,
    accounted: u64,
    err: Option<io::Error>,
}

fn opts(threads: usize, block_size: usize) -> Options {
    Options {
        threads,
        block_size,
        read_size: 4096,
        ..Options::default()
    }
}

fn read_with<R: Read>(r: R, o: Options) -> Out {
    let mut p = Parser::new("t", o);
    let mut sink = VecSink::default();
    let err = p.feed_reader(r, &mut sink).err();
    let (st, _, strings) = p.finish(&mut sink);
    Out {
        events: dump(&sink.events, &strings),
        lines: st.lines,
        bytes: st.bytes,
        accounted: st.accounted(),
        err,
    }
}

fn slice_with(data: &[u8], o: Options) -> Out {
    let mut p = Parser::new("t", o);
    let mut sink = VecSink::default();
    p.feed_slice_par(data, &mut sink);
    let (st, _, strings) = p.finish(&mut sink);
    Out {
        events: dump(&sink.events, &strings),
        lines: st.lines,
        bytes: st.bytes,
        accounted: st.accounted(),
        err: None,
    }
}

/// A reader that gives `data` in pieces, then fails.
struct FailsAfter<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Read for FailsAfter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.data.len() {
            return Err(io::Error::other("device gone"));
        }
        let n = buf.len().min(self.data.len() - self.pos).min(1000);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Every line read before a read error reaches the sink, on every thread
/// count: the parallel path dropped the lines it had buffered (4,702 of
/// 8,230 on 2 threads). The cut last line is the input's last line, so
/// the bytes counted are the bytes parsed.
#[test]
fn a_read_error_loses_no_line_read_before_it() {
    let data = log(20_000);
    // Cut inside a line.
    let cut = data.len() * 2 / 3 + 17;
    let want = slice_with(&data[..cut], opts(1, 1 << 16));
    assert!(want.events.len() > 10_000);
    for threads in [1, 2, 8] {
        for block in [4096, 1 << 16, 1 << 20] {
            let got = read_with(
                FailsAfter {
                    data: &data[..cut],
                    pos: 0,
                },
                opts(threads, block),
            );
            let e = got.err.as_ref().expect("the read error is returned");
            assert_eq!(e.to_string(), "device gone");
            assert_eq!(
                got.events, want.events,
                "{threads} threads, blocks of {block}"
            );
            assert_eq!(got.lines, want.lines);
            assert_eq!(got.bytes, cut as u64);
            assert_eq!(got.accounted, got.lines);
        }
    }
}

/// A cut .gz: the complete lines before the cut, on every thread count.
#[test]
fn a_cut_gzip_gives_every_line_before_the_cut() {
    let data = log(40_000);
    let gz = gzip(&data);
    let cut = &gz[..gz.len() / 2];
    // What zcat gives before its error.
    let mut plain = Vec::new();
    let zerr = flate2::read::GzDecoder::new(cut)
        .read_to_end(&mut plain)
        .is_err();
    assert!(zerr);
    let want = slice_with(&plain, opts(1, 1 << 16));
    for threads in [1, 2, 8] {
        let got = read_with(input::decompressed(cut).unwrap(), opts(threads, 1 << 16));
        assert!(got.err.is_some());
        assert_eq!(got.events, want.events, "{threads} threads");
        assert_eq!(got.bytes, plain.len() as u64);
    }
}

/// Zero bytes after the last gzip member end the data, as for gzip itself
/// (which exited 1 after 18,501 of 22,275 lines); members one after the
/// other are read in turn; other trailing bytes are an error, after every
/// line.
#[test]
fn gzip_padding_members_and_trailing_garbage() {
    let data = log(30_000);
    let want = slice_with(&data, opts(1, 1 << 16));
    let mut padded = gzip(&data);
    padded.extend(vec![0u8; 10_000]);
    let half = data.len() / 2;
    let half = half + data[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut members = gzip(&data[..half]);
    members.extend(gzip(&data[half..]));
    let mut members_padded = members.clone();
    members_padded.extend([0u8; 512]);
    for threads in [1, 2] {
        for gz in [&padded, &members, &members_padded] {
            let got = read_with(
                input::decompressed(&gz[..]).unwrap(),
                opts(threads, 1 << 16),
            );
            assert!(got.err.is_none(), "{:?}", got.err);
            assert_eq!(got.events, want.events);
            assert_eq!(got.bytes, data.len() as u64);
        }
        let mut garbage = gzip(&data);
        garbage.extend(b"\0\0not gzip");
        let got = read_with(
            input::decompressed(&garbage[..]).unwrap(),
            opts(threads, 1 << 16),
        );
        let e = got.err.expect("trailing garbage is an error");
        assert!(
            e.to_string()
                .contains("neither a gzip member nor zero padding"),
            "{e}"
        );
        assert_eq!(got.events, want.events);
    }
}

/// Blocks of short lines: past `block_size / 64` records a block leaves
/// the rest of its lines to the merge (bounded memory); the events are the
/// sequential parser's, on the reader and the slice paths, with pairs
/// across the cut.
#[test]
fn blocks_of_short_lines_give_the_sequential_events() {
    let mut data = Vec::new();
    for i in 0..60_000usize {
        match i % 5 {
            0 => data.extend_from_slice(b"\n"),
            1 => writeln!(data, "{} close({}) = 0", 100 + i % 3, i % 9).unwrap(),
            2 => writeln!(data, "{} read(3 <unfinished ...>", 200 + i % 2).unwrap(),
            3 => writeln!(
                data,
                "{} <... read resumed>, \"\", 1) = 0",
                200 + (i - 1) % 2
            )
            .unwrap(),
            _ => data.extend_from_slice(b"x\n"),
        }
    }
    // Blank lines only, and one long run of them inside calls.
    let blank = vec![b'\n'; 300_000];
    let mut mixed = log(2_000);
    mixed.extend_from_slice(&blank);
    mixed.extend(log(2_000));
    for input in [&data, &blank, &mixed] {
        let want = slice_with(input, opts(1, 1 << 16));
        for threads in [2, 8] {
            for block in [4096, 1 << 16] {
                let got = slice_with(input, opts(threads, block));
                assert_eq!(got.events, want.events, "slice, {threads} threads, {block}");
                assert_eq!((got.lines, got.bytes), (want.lines, want.bytes));
                let got = read_with(&input[..], opts(threads, block));
                assert_eq!(
                    got.events, want.events,
                    "reader, {threads} threads, {block}"
                );
                assert_eq!((got.lines, got.bytes), (want.lines, want.bytes));
            }
        }
    }
}

/// The one-thread path over a slice tells `merged` as it goes (so a
/// mapped input's pages can go), at line ends, not once at the end.
#[test]
fn one_thread_slice_path_reports_merged_pieces() {
    let data = log(300_000);
    assert!(data.len() > 2 * (8 << 20) + 1, "{}", data.len());
    let mut p = Parser::new("t", opts(1, 1 << 20));
    let mut sink = VecSink::default();
    let mut at = Vec::new();
    p.feed_slice_par_with(&data, &mut sink, &mut |upto| at.push(upto));
    assert!(at.len() >= 3, "{at:?}");
    assert_eq!(*at.last().unwrap(), data.len());
    for &u in &at {
        assert!(u == data.len() || data[u - 1] == b'\n');
    }
    let (st, _, strings) = p.finish(&mut sink);
    assert_eq!(
        dump(&sink.events, &strings),
        slice_with(&data, opts(2, 1 << 16)).events
    );
    assert_eq!(st.bytes, data.len() as u64);
}

/// A mapped file truncated before its pages are read: reading it (both
/// paths) gives no SIGBUS (which stopped the process, exit 135), the part
/// past the new end reads as zeros, and `shrunk` says so.
#[test]
fn a_mapped_file_truncated_while_read_is_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.log");
    let data = log(100_000);
    std::fs::write(&path, &data).unwrap();
    for threads in [1, 2] {
        let map = input::map(&path).unwrap().expect("a regular file maps");
        assert_eq!(map.shrunk(), None);
        let keep = 1 << 20;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(keep)
            .unwrap();
        let mut p = Parser::new("t", opts(threads, 1 << 16));
        let mut sink = VecSink::default();
        p.feed_slice_par(&map, &mut sink);
        let (st, _, _) = p.finish(&mut sink);
        assert!(map[data.len() - 1] == 0, "past the end: zeros");
        assert_eq!(map.shrunk(), Some(keep));
        let lines_kept = data[..keep as usize]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        assert!(st.lines as usize > lines_kept);
        drop(map);
        std::fs::write(&path, &data).unwrap();
    }
}

/// Time that runs backwards is counted with its first line; a midnight
/// wrap under `-tt` is not; nor a skipped line's time; same on the
/// parallel path.
#[test]
fn time_running_backwards_is_counted() {
    let good = b"1 1700000000.000100 close(3) = 0\n\
                 1 1700000000.000200 close(3) = 0\n\
                 1 1700000000.000150 close(3) = 0\n\
                 1 1700000000.000300 close(3) = 0\n\
                 1 1700000000.000100 close(3) = 0\n";
    let midnight = b"1 23:59:59.000000 close(3) = 0\n\
                     1 00:00:01.000000 close(3) = 0\n\
                     1 00:00:00.500000 close(3) = 0\n";
    let skipped = b"1 1700000000.000100 close(3) = 0\n\
                    1 1800000000.000000 garbage\n\
                    1 1700000000.000200 close(3) = 0\n";
    for threads in [1, 2] {
        let st = stats(good, threads);
        assert_eq!(st.time_backwards, 2);
        assert_eq!(st.first_time_backwards, Some((3, 50)));
        let st = stats(midnight, threads);
        assert_eq!(st.time_backwards, 1);
        assert_eq!(st.first_time_backwards, Some((3, 500_000)));
        let st = stats(skipped, threads);
        assert_eq!(st.skipped, 1);
        assert_eq!(st.time_backwards, 0);
    }
    let st = stats(&log(10_000), 2);
    assert_eq!(st.time_backwards, 0);
}

fn stats(data: &[u8], threads: usize) -> statstorm_trace::InputStats {
    let mut p = Parser::new("t", opts(threads, 64));
    let mut sink = VecSink::default();
    p.feed_slice_par(data, &mut sink);
    p.finish(&mut sink).0
}

/// `read_paths` refuses inputs whose pids collide, naming both; `-ff`
/// files (pid from the name) and inputs of distinct pids are merged.
#[test]
fn read_paths_refuses_colliding_pids() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.log");
    let b = dir.path().join("b.log");
    std::fs::write(&a, b"7 1700000000.000100 close(3) = 0\n").unwrap();
    std::fs::write(&b, b"8 1700000000.000200 close(3) = 0\n").unwrap();
    let t = statstorm_trace::read_paths(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(t.events.len(), 2);
    let e = statstorm_trace::read_paths(&[a.clone(), b.clone(), a.clone()]).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, statstorm_trace::Error::PidCollision { pid: 7, .. }),
        "{msg}"
    );
    assert!(msg.contains(&a.display().to_string()), "{msg}");
    assert!(msg.contains("pid 7 is in both"), "{msg}");
    let ff = dir.path().join("tr");
    std::fs::write(dir.path().join("tr.11"), b"close(3) = 0\n").unwrap();
    std::fs::write(dir.path().join("tr.12"), b"close(3) = 0\n").unwrap();
    let t = statstorm_trace::read_paths(&[ff]).unwrap();
    assert_eq!(t.events.len(), 2);
}
