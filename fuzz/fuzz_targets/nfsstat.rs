//! Fuzzes the `nfsstat -c` reader of
//! `statstorm_engine::evidence::nfs_counters` on any text, decoded as
//! `read_nfsstat` decodes it (lossy UTF-8). It may not panic; an error names
//! a line of the text (or the line after its last, for a text without a
//! client table); a table read gives no procedure without a call, and its
//! total is the sum of its procedures' calls (saturating).
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_engine::evidence::nfs_counters::{parse_nfsstat, CountersError};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().count();
    match parse_nfsstat(&text, "fuzz.txt") {
        Ok(m) => {
            assert!(m.rpcs.values().all(|&n| n > 0));
            let sum = m.rpcs.values().fold(0u64, |a, &b| a.saturating_add(b));
            assert_eq!(sum, m.total);
        }
        Err(CountersError::Nfsstat { line, .. }) => {
            assert!(line >= 1 && line <= lines.max(1), "line {line} of {lines}");
        }
        Err(e) => panic!("parse_nfsstat returned {e}"),
    }
});
