//! Fuzzes the sections of a scenario file that the simulator library
//! reads: TOML into `Arrivals`, `Pool`, `Transport`, `Server` and `LocalFs`
//! (their own `Deserialize`, as `statstorm simulate` uses them) and the
//! resulting `Params` through `Params::validate`. Neither may panic.
//!
//! The scenario file's top level and its `[workload]` section are parsed by
//! `Scenario::parse` in the binary crate (`crates/statstorm/src/cmd/simulate/
//! scenario.rs`), which no library exposes; this target does not reach them.
//! A `kind = "file"` workload's requests file is the `requests` target.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use statstorm_sim::{Arrivals, LocalFs, Params, Pool, Server, Transport};

/// The scenario keys the library gives types to; other keys (`name`,
/// `workload`, `published`...) are accepted and ignored, so the committed
/// scenarios parse as they are.
#[derive(Deserialize)]
struct Sections {
    duration_s: Option<f64>,
    stall_ms: Option<f64>,
    series_step_s: Option<f64>,
    arrivals: Option<Arrivals>,
    pool: Option<Pool>,
    transport: Option<Transport>,
    server: Option<Server>,
    local_fs: Option<LocalFs>,
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(s) = toml::from_str::<Sections>(text) else {
        return;
    };
    let d = Params::default();
    let p = Params {
        arrivals: s.arrivals.unwrap_or(d.arrivals),
        duration_s: s.duration_s.unwrap_or(d.duration_s),
        pool: s.pool.unwrap_or(d.pool),
        transport: s.transport.unwrap_or(d.transport),
        server: s.server.unwrap_or(d.server),
        local_fs: s.local_fs.unwrap_or(d.local_fs),
        validation: d.validation,
        stall_ms: s.stall_ms.unwrap_or(d.stall_ms),
        series_step_s: s.series_step_s.unwrap_or(d.series_step_s),
    };
    let _ = p.validate();
});
