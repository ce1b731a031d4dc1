//! Fuzzes the requests file reader (`statstorm_sim::requests_file::
//! load_requests`, `statstorm.requests/1` JSON). The library reads only
//! from a path, so each input is written to a file of this process first.
//! It must not panic, and a file it accepts has at least one request.
//! (Bounds on the values, e.g. a request's total CPU time, are checked
//! by the simulator when it starts, not here.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_sim::requests_file::load_requests;
use std::path::PathBuf;
use std::sync::OnceLock;

fn scratch() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        // /dev/shm when there is one: no disk under every run.
        let dir = match std::path::Path::new("/dev/shm") {
            d if d.is_dir() => d.to_path_buf(),
            _ => std::env::temp_dir(),
        };
        dir.join(format!(
            "statstorm-fuzz-requests-{}.json",
            std::process::id()
        ))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = scratch();
    std::fs::write(path, data).unwrap();
    if let Ok(reqs) = load_requests(path) {
        assert!(!reqs.is_empty());
    }
});
