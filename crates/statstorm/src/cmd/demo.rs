//! `statstorm demo [-o FILE]`: `diagnose` on the case built into the
//! binary, the HTML report written, the text report printed.
//!
//! The case is seed 000's (docs/examples/seed-000.md): a real php-fpm
//! capture made by the project's harness (scripts/php-harness,
//! `fpm-theme-rf60`: a WordPress-style theme of 180 `require_once`, 4
//! workers, OPcache revalidate_freq=60, a request every 2 s for 150 s)
//! on an NFSv4.1 mount with 16 session slots and 2 ms per RPC, a pool of
//! 50 workers. Nothing is installed or read for it but the binary.

use anyhow::{Context, Result};
use statstorm_engine::diagnose::Options;
use statstorm_engine::predict::{NfsOptions, PredictOptions, SimOptions};
use statstorm_render::{Export, Format};
use std::io::Write;
use std::path::PathBuf;

/// The built-in capture (gzip, ~64 KB).
pub const CAPTURE: &[u8] =
    include_bytes!("../../../../tests/fixtures/php/fpm-theme-rf60.strace.gz");
/// Where the capture's site lies (its NFS root).
pub const ROOT: &str = "/tmp/statstorm-lab/site";

#[derive(clap::Args)]
pub struct Args {
    /// Where to write the HTML report.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "statstorm-demo.html"
    )]
    pub output: PathBuf,
}

/// The demo's options for a capture at `trace`.
pub fn options(trace: PathBuf) -> Options {
    Options {
        predict: PredictOptions {
            traces: vec![trace],
            nfs: NfsOptions {
                from_mount: Some("vers=4.1".into()),
                nfs_root: vec![ROOT.into()],
                ..NfsOptions::default()
            },
            sim: SimOptions {
                workers: Some(50),
                slots: Some(16),
                server_latency: Some(2.0),
                ..SimOptions::default()
            },
            ..PredictOptions::default()
        },
        writable: Vec::new(),
        fpm_conf: None,
        fpm_pool: None,
        ..Options::default()
    }
}

pub fn run(args: Args) -> Result<i32> {
    // the capture into a file of its own (the engine reads paths)
    let dir = std::env::temp_dir();
    let trace = (0..100)
        .map(|i| {
            dir.join(format!(
                "statstorm-demo-{}-{i}.strace.gz",
                std::process::id()
            ))
        })
        .find_map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
                .ok()
                .map(|f| (p, f))
        });
    let (path, mut f) = trace
        .with_context(|| format!("writing the demo's capture in {} ($TMPDIR)", dir.display()))?;
    let written = f.write_all(CAPTURE);
    drop(f);
    let stages = crate::progress::Stages::new("demo");
    let d = written.map_err(anyhow::Error::from).and_then(|_| {
        statstorm_engine::diagnose::diagnose(&options(path.clone()), &mut |s| stages.stage(s))
            .map_err(anyhow::Error::from)
    });
    drop(stages);
    let _ = std::fs::remove_file(&path);
    let mut d = d.context("diagnosing the built-in case")?;
    d.inputs = vec![format!(
        "built in: tests/fixtures/php/fpm-theme-rf60.strace.gz (seed 000's case), NFS root {ROOT}"
    )];
    let html = std::fs::File::create(&args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let mut html = std::io::BufWriter::new(html);
    d.export(Format::Html, &mut html)
        .and_then(|_| html.flush())
        .with_context(|| format!("writing {}", args.output.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    writeln!(
        out,
        "statstorm demo: seed 000's case (a theme of 180 includes, OPcache revalidate_freq=60,\nNFSv4.1, 16 slots, 2 ms per RPC), built in\n"
    )?;
    d.export(Format::Text, &mut out)?;
    writeln!(
        out,
        "\nHTML report: {}",
        std::fs::canonicalize(&args.output)
            .unwrap_or(args.output.clone())
            .display()
    )?;
    out.flush()?;
    Ok(0)
}
