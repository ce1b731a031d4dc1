//! Fuzzes the `/proc/self/mountstats` parser
//! (`statstorm_nfs::mountstats::parse`) and the snapshot diff: any text
//! parses or is an error naming a line of it, never a panic; a parsed
//! snapshot diffed with itself has no delta; and every mount it lists can
//! be found again by its mountpoint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_nfs::mountstats::{op_deltas, parse, MountStatsError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(s) => {
            for m in &s.mounts {
                assert!(op_deltas(m, m).unwrap().is_empty());
                assert!(s.mount(&m.mountpoint).is_some());
            }
        }
        Err(MountStatsError::Syntax { line, .. }) => {
            assert!(line >= 1 && line <= text.lines().count(), "line {line}");
        }
        Err(e) => panic!("parse returned {e}"),
    }
});
