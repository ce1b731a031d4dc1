//! Fuzzes the strace parser: any bytes, through the slice path, the
//! reader path (read size from the first byte) and the parallel path over
//! the bytes in memory (block size from the first byte), must give the same
//! events and account for every line, without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_trace::{Options, Parser, VecSink};

fuzz_target!(|data: &[u8]| {
    let (read_size, data) = match data.split_first() {
        Some((&b, rest)) => (b as usize % 64 + 1, rest),
        None => (1, data),
    };
    let opts = Options {
        max_line: 4096,
        ..Options::default()
    };
    let mut p = Parser::new("slice", opts.clone());
    let mut s = VecSink::default();
    p.feed_slice(data, &mut s);
    let (st, _, _) = p.finish(&mut s);
    assert_eq!(st.lines, st.accounted());

    let mut p = Parser::new(
        "reader",
        Options {
            read_size,
            ..opts.clone()
        },
    );
    let mut r = VecSink::default();
    p.feed_reader(data, &mut r).unwrap();
    let (rst, _, _) = p.finish(&mut r);
    assert!(r.events == s.events);
    assert_eq!(rst.lines, st.lines);
    assert_eq!(rst.first_skips, st.first_skips);

    let mut p = Parser::new(
        "mapped",
        Options {
            threads: 2,
            block_size: read_size * 7,
            ..opts
        },
    );
    let mut m = VecSink::default();
    p.feed_slice_par(data, &mut m);
    let (mst, _, _) = p.finish(&mut m);
    assert!(m.events == s.events);
    assert_eq!(mst.lines, st.lines);
    assert_eq!(mst.first_skips, st.first_skips);
});
