//! Fuzzes the scenario file parser (`statstorm_engine::simulate::scenario::
//! Scenario::parse_with`, what `statstorm simulate` reads): the TOML, the
//! `[workload]` section and its request, and the parameters through
//! `Params::validate`. It must not panic, and a scenario it accepts has a
//! request to run. A `kind = "file"` workload's requests file is not read
//! here (the loader refuses every path): the `requests` target fuzzes that
//! reader.
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_engine::simulate::scenario::Scenario;
use statstorm_sim::requests_file::FileError;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let no_files = |p: &Path| -> Result<Vec<statstorm_sim::RequestSpec>, FileError> {
        Err(FileError::Io {
            path: p.to_path_buf(),
            source: std::io::Error::other("the fuzzer reads no requests file"),
        })
    };
    if let Ok(s) = Scenario::parse_with(text, Path::new("fuzz.toml"), &no_files) {
        assert!(!s.requests.is_empty(), "an accepted scenario has a request");
    }
});
