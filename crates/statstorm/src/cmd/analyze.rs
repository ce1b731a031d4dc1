//! `statstorm analyze TRACE... [--format text|json|md] [--top N] [--sample]`
//!
//! Opens the inputs and hands each to a
//! [`statstorm_engine::analyze::read::Reading`] (one pass into the
//! analyzer, memory bounded by distinct paths, pids and requests), with a
//! byte counter and a watch on stderr; then renders the
//! [`statstorm_engine::analyze::Profile`] once in the chosen format.
//!
//! Exit codes (docs/analyze.md): 0 analyzed (lines may have been skipped,
//! with a warning on stderr); 1 analyzed, but some input could not be read;
//! 2 nothing to analyze (no input is an strace log, all inputs empty or
//! unreadable, bad arguments).

use crate::progress::{is_stream, secs, Counters, Watch, WatchOptions};
use anyhow::Result;
use render::Export;
use statstorm_engine::analyze::read::{InputError, Reading, Source, SourceKind};
use statstorm_render as render;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// The built-in sample: a real `strace -f -ttt -T -y` trace of php-cli 8.2
/// including the 14 files of a synthetic tree under `open_basedir`, which
/// disables the realpath cache (R58); made by `scripts/gen-fixtures`.
pub const SAMPLE: &[u8] =
    include_bytes!("../../../../tests/fixtures/strace/cli-open-basedir.strace.gz");
pub const SAMPLE_NAME: &str = "sample (php-cli, include tree under open_basedir, built in)";

#[derive(clap::Args)]
pub struct Args {
    /// strace logs (`-` or none for stdin; .gz/.zst by content; a `strace
    /// -ff -o PREFIX` prefix reads every PREFIX.PID file).
    pub traces: Vec<PathBuf>,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = super::format_parser::<render::profile::View<'static>>())]
    pub format: render::Format,
    /// Rows in each top-N table (paths, dirs, walked files; text also
    /// limits processes and requests).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Analyze the built-in sample trace instead of files.
    #[arg(long, conflicts_with = "traces")]
    pub sample: bool,
    /// Read uncompressed files with read() instead of mapping them into
    /// memory (mapping is faster, but a file truncated while it is being
    /// analyzed then stops the process with SIGBUS).
    #[arg(long)]
    pub no_mmap: bool,
    /// With stderr not a terminal, write a one-line status (bytes read,
    /// events, rate) every SECONDS (default 10) while reading. On a
    /// terminal, progress is shown anyway.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "10")]
    pub progress: Option<f64>,
    /// Warn on stderr when an input that is a pipe or a device (not a
    /// regular file) gives no new strace event for SECONDS; 0: never.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub stall_warning: f64,
}

/// Reads input number `index` into `reading` with a byte counter on a
/// terminal and, for an strace log, the [`Watch`] of `watch`; prints what
/// the reader should know about it.
fn read_one(
    reading: &mut Reading,
    name: &str,
    index: usize,
    source: Source,
    pid: Option<u32>,
    mut watch: WatchOptions,
    stream: bool,
) {
    let total = source.size();
    let Some(sniffed) = reading.sniff(name, source) else {
        return;
    };
    let counters = Arc::new(Counters::default());
    let bar = crate::progress::bytes(name);
    if !stream {
        watch.stall_after = None;
    }
    if bar.is_some() {
        // The bar shows it.
        watch.status_every = None;
    }
    // a counts capture counts no events: nothing to watch
    let _watch = (sniffed.0 == SourceKind::Strace)
        .then(|| Watch::start(name, total, Arc::clone(&counters), watch, bar.clone()));
    let mut position = |at: u64| {
        if let Some(b) = &bar {
            b.set_position(at);
        }
    };
    let notes = reading.add(name, index, sniffed, pid, &counters, &mut position);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    for n in &notes {
        errln!("statstorm: warning: {}", render::profile::input_note(n));
    }
}

pub fn run(args: Args) -> Result<i32> {
    let mut c = Reading::new();
    let mut open_failures = 0usize;
    let mut readable = 0usize;
    if args.sample {
        let r = statstorm_trace::input::decompressed(std::io::BufReader::new(SAMPLE))?;
        read_one(
            &mut c,
            SAMPLE_NAME,
            0,
            Source::Read(r),
            None,
            WatchOptions::default(),
            false,
        );
        readable += 1;
    } else {
        let mut files: Vec<PathBuf> = Vec::new();
        let mut traces = args.traces.clone();
        if traces.is_empty() {
            if std::io::stdin().is_terminal() {
                errln!("statstorm: error: no trace given: name strace logs, pipe one on stdin, or try --sample");
                return Ok(2);
            }
            traces.push(PathBuf::from("-"));
        }
        for p in &traces {
            match statstorm_trace::input::expand_prefix(p) {
                Some(list) => files.extend(list),
                None => files.push(p.clone()),
            }
        }
        let watch = WatchOptions {
            status_every: args.progress.and_then(secs),
            stall_after: secs(args.stall_warning),
        };
        for (i, path) in files.iter().enumerate() {
            let name = if path.as_os_str() == "-" {
                "<stdin>".to_string()
            } else {
                path.display().to_string()
            };
            let opened = match args.no_mmap {
                true => Ok(None),
                false => statstorm_trace::input::map(path),
            }
            .and_then(|m| match m {
                Some(m) => Ok(Source::Mapped(m)),
                None => statstorm_trace::input::open(path).map(Source::Read),
            });
            match opened {
                Ok(input) => {
                    readable += 1;
                    read_one(
                        &mut c,
                        &name,
                        i,
                        input,
                        statstorm_trace::input::pid_from_name(path),
                        watch,
                        is_stream(path),
                    );
                    if let Some(msg) = c.refused() {
                        errln!("statstorm: error: {msg}");
                        return Ok(2);
                    }
                }
                Err(e) => {
                    open_failures += 1;
                    errln!("statstorm: error: {e}");
                }
            }
        }
    }
    let analysis = c.finish(args.top);
    let (profile, summary) = (analysis.profile, analysis.summary);
    let read_errors = analysis
        .errors
        .iter()
        .filter(|e| matches!(e, InputError::Read { .. } | InputError::Requests { .. }))
        .count();
    for e in &analysis.errors {
        errln!("statstorm: error: {e}");
    }
    // Warnings for skipped lines: file, count, first lines with reasons.
    if profile.input.skipped.total > 0 {
        for f in &profile.input.files {
            if f.skipped == 0 {
                continue;
            }
            let first: Vec<String> = profile
                .input
                .skipped
                .first
                .iter()
                .filter(|s| s.file == f.name)
                .take(3)
                .map(|s| format!("line {}: {}", s.line, s.reason))
                .collect();
            errln!(
                "statstorm: warning: {}: {} of {} lines skipped ({})",
                f.name,
                f.skipped,
                f.lines,
                first.join("; ")
            );
        }
    }
    let nothing = profile.input.events == 0 && summary.is_none();
    if readable == 0 || nothing {
        if readable > 0 {
            errln!("statstorm: error: no strace events in the input; record with strace -f -ttt -T -y -o trace.txt");
        }
        return Ok(2);
    }
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let view = render::profile::View {
        profile: &profile,
        top: args.top,
    };
    let res = view
        .export(args.format, &mut stdout)
        .and_then(|_| stdout.flush());
    if let Err(e) = res {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    Ok(if open_failures > 0 || read_errors > 0 {
        1
    } else {
        0
    })
}
