//! `statstorm simulate SCENARIO.toml [--format text|json] [--seed N]
//! [--stall-ms MS] [--reproducible]`
//!
//! Loads a scenario (docs/simulator.md), runs the discrete-event simulator
//! once and renders the same [`statstorm_sim::Report`] as text (with an explanation of the
//! stalls) or JSON (`statstorm.simulate/1`).
//!
//! Exit codes: 0 simulated; 2 the scenario could not be read or is invalid.

use anyhow::{Context, Result};
use statstorm_engine::simulate::scenario::Scenario;
use statstorm_sim::simulate_requests;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Scenario file (TOML; see scenarios/ and docs/simulator.md).
    pub scenario: PathBuf,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = super::format_parser::<statstorm_render::simulate::View<'static>>())]
    pub format: statstorm_render::Format,
    /// RNG seed (default: the scenario's `seed`, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A request slower than this (TTFB) belongs to a stall episode
    /// (default: the scenario's `stall_ms`, else 1000).
    #[arg(long)]
    pub stall_ms: Option<f64>,
    /// Leave out wall-clock figures (`engine.wall_ms` is null), so that the
    /// same scenario and seed give the same bytes.
    #[arg(long)]
    pub reproducible: bool,
}

pub fn run(args: Args) -> Result<i32> {
    let mut sc = match Scenario::load(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            errln!("statstorm simulate: {e}");
            return Ok(2);
        }
    };
    if let Some(ms) = args.stall_ms {
        sc.params.stall_ms = ms;
    }
    let seed = args.seed.or(sc.seed).unwrap_or(1);
    let t0 = std::time::Instant::now();
    let stages = crate::progress::Stages::new("simulate");
    stages.stage(&format!("{} requests", sc.requests.len()));
    let mut report = match simulate_requests(&sc.requests, &sc.params, seed) {
        Ok(r) => r,
        Err(e) => {
            errln!("statstorm simulate: {}: {e}", args.scenario.display());
            return Ok(2);
        }
    };
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    drop(stages);
    report.scenario = Some(sc.name.clone());
    if !args.reproducible {
        report.engine.wall_ms = Some((wall_ms * 1000.0).round() / 1000.0);
    }
    use statstorm_render::Export;
    use std::io::Write;
    let view = statstorm_render::simulate::View {
        scenario: &sc,
        report: &report,
    };
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    if let Err(e) = view
        .export(args.format, &mut stdout)
        .and_then(|_| stdout.flush())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing the report");
        }
    }
    Ok(0)
}
