//! Fuzzes the parallel paths of the strace text parser (`par.rs`): any
//! bytes, through the parallel reader path (read size from the first
//! byte) and the parallel path over the bytes in memory, both on 2 threads
//! with blocks of 7 reads, must give the events, line count and skips of
//! the one-thread slice path, without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_trace::{InputStats, Options, Parser, VecSink};

fn same(name: &str, st: &InputStats, s: &VecSink, other: (InputStats, &VecSink)) {
    let (ost, o) = other;
    assert!(o.events == s.events, "{name}: events differ");
    assert_eq!(ost.lines, st.lines, "{name}: lines");
    assert_eq!(ost.first_skips, st.first_skips, "{name}: first skips");
}

fuzz_target!(|data: &[u8]| {
    let (read_size, data) = match data.split_first() {
        Some((&b, rest)) => (b as usize % 64 + 1, rest),
        None => (1, data),
    };
    let opts = Options {
        max_line: 4096,
        read_size,
        threads: 1,
        ..Options::default()
    };
    let par = Options {
        threads: 2,
        block_size: read_size * 7,
        ..opts.clone()
    };

    let mut p = Parser::new("slice", opts);
    let mut s = VecSink::default();
    p.feed_slice(data, &mut s);
    let (st, _, _) = p.finish(&mut s);

    let mut p = Parser::new("reader-par", par.clone());
    let mut r = VecSink::default();
    p.feed_reader(data, &mut r).unwrap();
    same("reader-par", &st, &s, (p.finish(&mut r).0, &r));

    let mut p = Parser::new("mapped", par);
    let mut m = VecSink::default();
    p.feed_slice_par(data, &mut m);
    same("mapped", &st, &s, (p.finish(&mut m).0, &m));
});
