//! A 1 GiB line without newline must not be buffered: it is skipped as
//! "line too long" with memory bounded by `Options::max_line` plus one read.
//! Alone in its file so that the process's peak RSS is this test's.

use statstorm_trace::{Options, Parser, SkipReason, VecSink};
use std::io::Read;

fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn one_gib_line_without_newline() {
    let head = b"1 1700000000.000001 close(3) = 0 <0.000001>\n".to_vec();
    let tail = b"\n2 1700000000.000002 close(4) = 0 <0.000001>\n".to_vec();
    // The sequential and the parallel reader path.
    for threads in [1, 2] {
        let huge = std::io::repeat(b'x').take(1 << 30);
        let input = (&head[..]).chain(huge).chain(&tail[..]);
        let opts = Options {
            threads,
            ..Options::default()
        };
        let mut p = Parser::new("huge", opts);
        let mut sink = VecSink::default();
        p.feed_reader(input, &mut sink).unwrap();
        let (st, _, _) = p.finish(&mut sink);
        assert_eq!(sink.events.len(), 2);
        assert_eq!(st.lines, 3);
        assert_eq!(st.first_skips, [(2, SkipReason::LineTooLong)]);
        assert_eq!(st.bytes, (head.len() + tail.len()) as u64 + (1 << 30));
    }
    let rss = peak_rss_kib();
    assert!(
        rss < 64 * 1024,
        "peak RSS {rss} KiB: the long line was buffered"
    );
}
