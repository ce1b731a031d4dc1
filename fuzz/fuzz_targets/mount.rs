//! Fuzzes the NFS mount option parsers of `statstorm_nfs::MountOptions`:
//! the text as one option string (`parse`, as `--from-mount`/`--mount`
//! take it) and as a `/proc/mounts` copy (`parse_mounts`, as `--mounts`
//! reads it). Neither may panic; options that parse must print
//! (`render`) to a string that parses back to the same options, alone and
//! overlaid (`overlay`, a proposed `--mount` over the recorded options).
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_nfs::MountOptions;

fn round_trip(o: &MountOptions) {
    let r = o.render();
    let back = MountOptions::parse(&r).unwrap_or_else(|e| panic!("{r:?} does not parse: {e}"));
    assert_eq!(&back, o, "{r:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(o) = MountOptions::parse(text) {
        round_trip(&o);
    }
    if let Ok(entries) = MountOptions::parse_mounts(text) {
        for e in &entries {
            round_trip(&e.options);
        }
        for w in entries.windows(2) {
            let o = w[0].options.overlay(&w[1].options);
            let _ = o.render();
        }
    }
});
