//! `statstorm record`: a live capture with eBPF (statstorm_record), written
//! as strace-compatible text that analyze, predict and diagnose read.

use anyhow::{Context, Result};
use statstorm_record::recorder::{
    self, Config, CountsConfig, Error, Summary, DEFAULT_MAX_CPU, DEFAULT_MAX_KEYS,
    DEFAULT_RING_BYTES,
};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// A process to record, with its descendants (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Record every process whose name starts with NAME (e.g. php-fpm).
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,
    /// The hard limit: the recording stops after this long (60s, 5m, 1h).
    #[arg(long, value_name = "TIME", default_value = "60s", value_parser = humantime::parse_duration)]
    pub duration: std::time::Duration,
    /// Where to write the capture (default: stdout).
    #[arg(short = 'o', long = "output", value_name = "CAPTURE")]
    pub output: Option<PathBuf>,
    /// The ring buffer's size in MiB (a power of two).
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_RING_BYTES >> 20)]
    pub ring_mib: u32,
    /// Count calls in the kernel per process x syscall x result x path and
    /// write the counts once per window, for captures of hours (analyze
    /// reads them; predict and diagnose need the calls themselves).
    #[arg(long)]
    pub counts: bool,
    /// With --counts: how often the counts are written.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = humantime::parse_duration, requires = "counts")]
    pub window: std::time::Duration,
    /// With --counts: the most keys kept in a window (calls beyond are
    /// counted per syscall alone, and the capture says how many).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_KEYS, requires = "counts")]
    pub max_keys: u32,
    /// The most CPU the recorder itself may use, in percent of one CPU;
    /// above it the writer pauses and the calls the ring buffer cannot
    /// hold meanwhile are lost, counted and reported (0: no cap).
    #[arg(long, value_name = "PERCENT", default_value_t = DEFAULT_MAX_CPU * 100.0)]
    pub max_cpu: f64,
    /// A command to run and record with its children until it exits.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

pub fn run(a: Args) -> Result<i32> {
    let cfg = Config {
        pids: a.pids,
        comm: a.comm,
        command: (!a.command.is_empty()).then_some(a.command),
        duration: a.duration,
        ring_bytes: a.ring_mib.saturating_mul(1 << 20),
        counts: a.counts.then_some(CountsConfig {
            window: a.window,
            max_keys: a.max_keys,
        }),
        max_cpu: (a.max_cpu != 0.0).then_some(a.max_cpu / 100.0),
    };
    Ok(match capture(&cfg, a.output.as_deref())? {
        Err(code) => code,
        Ok(s) => match s.command_status {
            Some(st) if !st.success() => st.code().unwrap_or(1),
            _ => 0,
        },
    })
}

/// Records `cfg` into `output` (stdout when `None`), with the header,
/// trailer and messages of `record`; `Err(code)` when it was refused (the
/// message printed).
pub fn capture(cfg: &Config, output: Option<&std::path::Path>) -> Result<Result<Summary, i32>> {
    // refused before the output file is created
    if let Err(e) = recorder::check() {
        errln!("statstorm: error: {e}");
        return Ok(Err(2));
    }
    let mut out: Box<dyn Write> = match output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing a signal handler")?;
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let header = match &cfg.counts {
        None => statstorm_record::text::header(&cfg.describe(), epoch, kernel.trim()),
        Some(c) => statstorm_record::counts::header(
            &cfg.describe(),
            epoch,
            kernel.trim(),
            c.window.as_secs_f64(),
            c.max_keys,
        ),
    };
    out.write_all(header.as_bytes())?;
    let tty = std::io::stderr().is_terminal();
    let summary = recorder::record(cfg, &mut out, &stop, &mut |p| {
        if tty {
            errln!(
                "record: {:.0} s, {} calls, {} lost",
                p.elapsed.as_secs_f64(),
                p.calls,
                p.lost
            );
        }
    });
    let summary: Summary = match summary {
        Ok(s) => s,
        Err(
            e @ (Error::Privilege(_)
            | Error::Kernel(_)
            | Error::NoTarget
            | Error::NoProcess(_)
            | Error::MaxCpu(_)
            | Error::Counts
            | Error::Comm(_)
            | Error::Ring(_)),
        ) => {
            errln!("statstorm: error: {e}");
            return Ok(Err(2));
        }
        Err(e) => return Err(e.into()),
    };
    out.write_all(statstorm_record::text::trailer(&summary).as_bytes())?;
    out.flush()?;
    errln!(
        "{}",
        statstorm_record::text::trailer(&summary)
            .trim_end()
            .replace("# statstorm record: ", "record: ")
    );
    if summary.lost() > 0 {
        let more = if summary.throttled.is_zero() {
            "a larger --ring-mib keeps more"
        } else {
            "a higher --max-cpu or a larger --ring-mib keeps more"
        };
        errln!(
            "record: warning: the capture is incomplete ({} calls lost); {more}",
            summary.lost()
        );
    }
    Ok(Ok(summary))
}
