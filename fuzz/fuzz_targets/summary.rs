//! Fuzzes the `strace -c` / `-w` / `-C` summary tables (`summary.rs`,
//! reached through the parser as a trace file is): the input is cut in two
//! at a point taken from its first byte, each part is read as one input,
//! and the two tables are merged as `read_paths` merges several inputs.
//! Neither may panic; a table must not depend on how the reader's chunks
//! fall; the merge must add the calls and errors of each syscall
//! (saturating at u64::MAX).
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_trace::{Options, Parser, Summary, VecSink};

fn table(name: &str, data: &[u8], read_size: usize) -> Option<Summary> {
    let opts = Options {
        max_line: 4096,
        ..Options::default()
    };
    let mut p = Parser::new(name, opts.clone());
    let mut s = VecSink::default();
    p.feed_slice(data, &mut s);
    let (_, slice, _) = p.finish(&mut s);

    let mut p = Parser::new(
        name,
        Options {
            read_size,
            threads: 1,
            ..opts
        },
    );
    let mut s = VecSink::default();
    p.feed_reader(data, &mut s).unwrap();
    let (_, reader, _) = p.finish(&mut s);
    assert_eq!(slice, reader, "table depends on the read size");
    slice
}

fn calls(s: &Summary, name: &str) -> (u64, u64) {
    s.rows
        .iter()
        .filter(|r| r.name == name)
        .fold((0u64, 0u64), |(c, e), r| {
            (c.saturating_add(r.calls), e.saturating_add(r.errors))
        })
}

fuzz_target!(|data: &[u8]| {
    let Some((&b, data)) = data.split_first() else {
        return;
    };
    let cut = data.len() * b as usize / 255;
    let read_size = b as usize % 61 + 3;
    let (a, b) = data.split_at(cut);
    let ta = table("a", a, read_size);
    let tb = table("b", b, read_size);
    let (Some(ta), Some(tb)) = (ta, tb) else {
        return;
    };
    let mut m = ta.clone();
    m.merge(&tb);
    // Names repeated within one table are not merged with each other
    // (only the first row of a name collects the other input's rows).
    let unique = |s: &Summary| {
        let mut n: Vec<&str> = s.rows.iter().map(|r| r.name.as_str()).collect();
        n.sort_unstable();
        n.windows(2).all(|w| w[0] != w[1])
    };
    if unique(&ta) && unique(&tb) {
        for r in ta.rows.iter().chain(&tb.rows) {
            let (ca, ea) = calls(&ta, &r.name);
            let (cb, eb) = calls(&tb, &r.name);
            // (counts saturate at u64::MAX)
            let sum = (ca.saturating_add(cb), ea.saturating_add(eb));
            assert_eq!(calls(&m, &r.name), sum, "{}", r.name);
        }
    }
});
