//! Fuzzes the replay script parser (`statstorm_lab::replay::parse_script`)
//! and the window parser: any text parses or is an error naming a line of
//! it, never a panic; a parsed script written out again parses to the same
//! ops.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_lab::replay::{parse_script, parse_window};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1);
    match parse_script(text) {
        Ok(s) => {
            let again = parse_script(&s.to_string()).expect("a written script parses");
            assert_eq!(again.ops.len(), s.ops.len());
            for (a, b) in again.ops.iter().zip(&s.ops) {
                assert_eq!((a.pid, a.t_us, a.call), (b.pid, b.t_us, b.call));
                assert_eq!((&a.args, &a.expect), (&b.args, &b.expect));
            }
        }
        Err(e) => assert!(e.line >= 1 && e.line <= lines, "line {}", e.line),
    }
    if let Err(e) = parse_window(text) {
        assert!(e.line >= 1 && e.line <= lines, "window line {}", e.line);
    }
});
