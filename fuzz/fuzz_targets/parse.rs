//! Fuzzes the strace text parser on one thread: any bytes, through the
//! slice path and the reader path (read size from the first byte), must
//! give the same events and account for every line, without panicking.
//! The parallel paths are `parse_par` (thread start-up there costs most
//! of a run; apart, this target runs several times faster).
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
        read_size,
        threads: 1,
        ..Options::default()
    };

    let mut p = Parser::new("slice", opts.clone());
    let mut s = VecSink::default();
    p.feed_slice(data, &mut s);
    let (st, _, _) = p.finish(&mut s);
    assert_eq!(st.lines, st.accounted());

    let mut p = Parser::new("reader", opts);
    let mut r = VecSink::default();
    p.feed_reader(data, &mut r).unwrap();
    let (rst, _, _) = p.finish(&mut r);
    assert!(r.events == s.events);
    assert_eq!(rst.lines, st.lines);
    assert_eq!(rst.first_skips, st.first_skips);
});
