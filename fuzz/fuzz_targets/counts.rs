//! Fuzzes the reader of counts captures (`statstorm_trace::counts`): any
//! bytes, line by line, are a count, a comment, a window or a counted
//! skip, never a panic; every line is accounted exactly once; a count's
//! line number is its own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_trace::counts::CountsReader;
use statstorm_trace::Interner;

fuzz_target!(|data: &[u8]| {
    let mut r = CountsReader::new("fuzz", 0);
    let mut strings = Interner::new();
    let mut counted = 0u64;
    for (i, line) in data.split(|&c| c == b'\n').enumerate() {
        if let Some(c) = r.line(line, &mut strings) {
            counted += 1;
            assert_eq!(c.event.line, i as u64 + 1);
            if let Some((a, b)) = c.window_us {
                assert!(a <= b);
            }
        }
    }
    let st = &r.stats;
    assert_eq!(st.events, counted);
    assert_eq!(
        st.events + st.comment_lines + st.notice_lines + st.skipped,
        st.lines
    );
});
