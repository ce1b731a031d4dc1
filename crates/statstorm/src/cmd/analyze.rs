//! `statstorm analyze TRACE... [--format text|json|md] [--top N] [--sample]`
//!
//! Streams every input through the parser into the [`Analyzer`] sink (one
//! pass, memory bounded by distinct paths, pids and requests), then renders
//! the [`statstorm_engine::analyze::Profile`] once in the chosen format.
//!
//! Exit codes (docs/analyze.md): 0 analyzed (lines may have been skipped,
//! with a warning on stderr); 1 analyzed, but some input could not be read;
//! 2 nothing to analyze (no input is an strace log, all inputs empty or
//! unreadable, bad arguments).

use crate::progress::{is_stream, secs, Counters, Watch, WatchOptions};
use anyhow::Result;
use render::Export;
use statstorm_engine::analyze::{pids::PidCheck, Analyzer, InputInfo};
use statstorm_render as render;
use statstorm_trace::{Event, Interner, Options, Parser, Sink, SkipReason};
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
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

/// Granularity (a power of two, a multiple of any page size) at which the
/// merged part of a mapped input is released. Each release is a madvise
/// call that also makes the kernel flush the other cores' TLBs: 8 MiB
/// steps cost a few MiB of resident set and a eighth of the calls of 1 MiB
/// steps (the merge reports every block).
const RELEASE_STEP: usize = 8 << 20;

/// An input, opened.
enum Input {
    Read(Box<dyn Read>),
    Mapped(statstorm_trace::input::Mapped),
}

struct AnalyzeSink<'a> {
    a: &'a mut Analyzer,
    counters: &'a Counters,
    /// From the second input on: the pids of the earlier ones.
    pids: Option<&'a mut PidCheck>,
}

impl Sink for AnalyzeSink<'_> {
    fn event(&mut self, ev: &Event, strings: &Interner) -> bool {
        self.counters.event();
        if let Some(c) = &mut self.pids {
            if !c.check(ev.pid) {
                return false;
            }
        }
        self.a.push(ev, strings);
        true
    }
    fn exit(&mut self, exit: &statstorm_trace::Exit) {
        self.a.exit(exit.pid);
    }
    fn comm(&mut self, pid: u32, comm: &[u8]) {
        self.a.comm(pid, comm);
    }
    fn ids_ahead(&mut self, ids: &[u32]) {
        self.a.prefetch(ids);
    }
}

/// Counts bytes read for the [`Watch`] and ticks a progress bar (only
/// when stderr is a terminal).
struct Progress<'c, R> {
    inner: R,
    bar: Option<indicatif::ProgressBar>,
    pending: u64,
    counters: &'c Counters,
}

impl<R: Read> Read for Progress<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            self.pending += n as u64;
            if self.pending >= 8 << 20 || n == 0 {
                b.inc(self.pending);
                self.pending = 0;
            }
        }
        Ok(n)
    }
}

struct Collected {
    analyzer: Analyzer,
    strings: Interner,
    info: InputInfo,
    summary: Option<statstorm_trace::Summary>,
    errors: Vec<String>,
    /// Names of the inputs read, in order.
    names: Vec<String>,
    pids: PidCheck,
    /// Set when two inputs had the same pid: the message; nothing more is
    /// read and no report is made.
    refused: Option<String>,
    /// Inputs read so far that were strace logs, and counts captures.
    straces: usize,
    counts: usize,
}

impl Collected {
    fn new() -> Self {
        Collected {
            analyzer: Analyzer::new(),
            strings: Interner::new(),
            info: InputInfo::default(),
            summary: None,
            errors: Vec::new(),
            names: Vec::new(),
            pids: PidCheck::default(),
            refused: None,
            straces: 0,
            counts: 0,
        }
    }

    /// Ends input `name`'s pid check: `true` (and `refused` set) when its
    /// pids collide with an earlier input's.
    fn end_pids(&mut self, name: &str, later: bool) -> bool {
        if let Some((pid, first)) = self.pids.collision() {
            self.refused = Some(statstorm_trace::input::pid_collision_message(
                pid,
                &self.names[first],
                name,
            ));
            return true;
        }
        if later {
            self.pids.end_input(None);
        } else {
            self.pids.end_input(Some(self.analyzer.pids().collect()));
        }
        false
    }

    /// Counts captures and strace logs are not analyzed together: a count
    /// has no place in the request split of the logs' events.
    fn refuse_mix(&mut self, name: &str, counts: bool) -> bool {
        if counts {
            self.counts += 1;
        } else {
            self.straces += 1;
        }
        if self.counts > 0 && self.straces > 0 {
            self.refused = Some(format!(
                "{name}: counts captures (`statstorm record --counts`) and strace logs are analyzed apart, not in one run"
            ));
            return true;
        }
        false
    }

    /// Reads one counts capture (`statstorm record --counts`) into the
    /// analyzer: each count adds its calls ([`Analyzer::push_counted`]).
    fn add_counts(&mut self, name: &str, index: usize, mut r: impl BufRead) {
        /// Longest line kept; a longer one is skipped unread.
        const MAX_LINE: usize = 1 << 16;
        let later = !self.names.is_empty();
        self.pids.begin_input(self.names.len());
        self.names.push(name.to_string());
        let mut reader =
            statstorm_trace::counts::CountsReader::new(name, index.min(u16::MAX as usize) as u16);
        let bar = crate::progress::bytes(name);
        let mut line = Vec::with_capacity(256);
        let mut since_tick = 0u64;
        let mut err = None;
        loop {
            line.clear();
            let n = match (&mut r)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(n) => n,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            };
            if n == 0 {
                break;
            }
            since_tick += n as u64;
            let complete = line.last() == Some(&b'\n');
            if !complete && line.len() > MAX_LINE {
                // the rest of the line, unread
                let mut rest = Vec::new();
                loop {
                    rest.clear();
                    match (&mut r).take(MAX_LINE as u64).read_until(b'\n', &mut rest) {
                        Ok(0) => break,
                        Ok(_) if rest.last() == Some(&b'\n') => break,
                        Ok(_) => {}
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                reader.skip_line(SkipReason::LineTooLong);
                continue;
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            if let Some(c) = reader.line(text, &mut self.strings) {
                if later && c.event.pid != 0 && !self.pids.check(c.event.pid) {
                    break;
                }
                self.analyzer
                    .push_counted(&c.event, c.calls, c.window_us, &self.strings);
            }
            if since_tick >= 8 << 20 {
                if let Some(b) = &bar {
                    b.inc(since_tick);
                }
                since_tick = 0;
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        if self.end_pids(name, later) {
            return;
        }
        let mut st = reader.stats;
        if let Some(e) = err {
            let msg = format!("{name}: read error after line {}: {e}", st.lines);
            st.error = Some(msg.clone());
            self.errors.push(msg);
        }
        self.info.add_file(name, &st);
        if st.lost_calls > 0 {
            errln!(
                "statstorm: warning: {name}: the recording lost {} calls (its last lines say so): the counts are low by at least that",
                st.lost_calls
            );
        }
        if st.events == 0 {
            self.errors.push(format!(
                "{name}: a counts capture without counts ({} lines)",
                st.lines
            ));
        }
    }

    /// Reads one input into the analyzer. `stream`: the input is a pipe or
    /// a device (the stall guard of `watch` applies).
    fn add(
        &mut self,
        name: &str,
        index: usize,
        input: Input,
        pid: Option<u32>,
        mut watch: WatchOptions,
        stream: bool,
    ) {
        // a counts capture is told by its first line
        let input = match input {
            Input::Mapped(m) if statstorm_trace::counts::is_counts(&m) => {
                if !self.refuse_mix(name, true) {
                    self.add_counts(name, index, &m[..]);
                }
                return;
            }
            Input::Read(mut r) => {
                let mut head = Vec::new();
                let want = statstorm_trace::counts::MAGIC.len() as u64;
                if let Err(e) = (&mut r).take(want).read_to_end(&mut head) {
                    self.errors
                        .push(format!("{name}: read error after line 0: {e}"));
                    return;
                }
                let r = std::io::Cursor::new(head.clone()).chain(r);
                if statstorm_trace::counts::is_counts(&head) {
                    if !self.refuse_mix(name, true) {
                        self.add_counts(name, index, std::io::BufReader::with_capacity(1 << 16, r));
                    }
                    return;
                }
                Input::Read(Box::new(r))
            }
            m => m,
        };
        if self.refuse_mix(name, false) {
            return;
        }
        let opts = Options {
            input: index.min(u16::MAX as usize) as u16,
            default_pid: pid,
            // The analyzer reads no decoration text (a read's "is it a
            // file" is in `Flags::FD_FILE`) and no file times.
            fd_paths: false,
            stat_times: false,
            ..Options::default()
        };
        let mut p = Parser::with_interner(name, opts, std::mem::take(&mut self.strings));
        // The first input's pids are taken from the analyzer when it ends;
        // the later ones are checked event by event.
        let later = !self.names.is_empty();
        self.pids.begin_input(self.names.len());
        self.names.push(name.to_string());
        let counters = Arc::new(Counters::default());
        let mut sink = AnalyzeSink {
            a: &mut self.analyzer,
            counters: &counters,
            pids: later.then_some(&mut self.pids),
        };
        let bar = crate::progress::bytes(name);
        if !stream {
            watch.stall_after = None;
        }
        if bar.is_some() {
            // The bar shows it.
            watch.status_every = None;
        }
        let total = match &input {
            Input::Mapped(m) => Some(m.len() as u64),
            Input::Read(_) => None,
        };
        let _watch = Watch::start(name, total, Arc::clone(&counters), watch, bar.clone());
        let res = match input {
            Input::Read(reader) => {
                let reader = Progress {
                    inner: reader,
                    bar: bar.clone(),
                    pending: 0,
                    counters: &counters,
                };
                p.feed_reader(reader, &mut sink)
            }
            Input::Mapped(map) => {
                // Pages of the file already merged leave this process's
                // resident set (they stay in the page cache): memory stays
                // bounded as on the read path.
                let mut released = 0usize;
                let mut merged = |upto: usize| {
                    counters.bytes.store(upto as u64, Ordering::Relaxed);
                    if let Some(b) = &bar {
                        b.set_position(upto as u64);
                    }
                    let end = upto & !(RELEASE_STEP - 1);
                    if end > released {
                        statstorm_trace::input::release(&map, released..end);
                        released = end;
                    }
                };
                p.feed_slice_par_with(&map, &mut sink, &mut merged);
                match map.shrunk() {
                    None => Ok(()),
                    Some(now) => Err(std::io::Error::other(format!(
                        "the file shrank to {now} bytes while it was read ({} bytes mapped): \
                         what lay past its new end was read as zeros (--no-mmap reads a file \
                         that may change)",
                        map.len()
                    ))),
                }
            }
        };
        let (mut st, summary, strings) = p.finish(&mut sink);
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        if self.end_pids(name, later) {
            return;
        }
        self.strings = strings;
        if let Err(e) = res {
            let msg = format!("{name}: read error after line {}: {e}", st.lines);
            st.error = Some(msg.clone());
            self.errors.push(msg);
        }
        if let Some(s) = summary {
            self.summary.get_or_insert_with(Default::default).merge(&s);
        }
        self.info.add_file(name, &st);
        if st.lost_calls > 0 {
            errln!(
                "statstorm: warning: {name}: the recording lost {} calls (its last lines say so): the counts are low by at least that",
                st.lost_calls
            );
        }
        if let Some((line, back_us)) = st.first_time_backwards {
            errln!(
                "statstorm: warning: {name}: time runs backwards at {} line{} (first at line {line}, {} s before the line above it); per-second counts and spans there follow the times as printed",
                st.time_backwards,
                if st.time_backwards == 1 { "" } else { "s" },
                fmt_secs(back_us),
            );
        }
        if st.not_strace() {
            self.errors.push(format!(
                "{name}: not an strace log ({} lines, none recognized; first at line {})",
                st.lines,
                st.first_skips.first().map(|s| s.0).unwrap_or(1)
            ));
        } else if st.lines == 0
            || st.lines
                == st
                    .skipped_by_reason
                    .get(&SkipReason::EmptyLine)
                    .copied()
                    .unwrap_or(0)
        {
            self.errors
                .push(format!("{name}: empty input, nothing to analyze"));
        }
    }
}

/// Microseconds as seconds, with the microseconds when under a minute.
fn fmt_secs(us: u64) -> String {
    if us < 60_000_000 {
        format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
    } else {
        format!("{}", us / 1_000_000)
    }
}

pub fn run(args: Args) -> Result<i32> {
    let mut c = Collected::new();
    let mut open_failures = 0usize;
    let mut readable = 0usize;
    if args.sample {
        let r = statstorm_trace::input::decompressed(std::io::BufReader::new(SAMPLE))?;
        c.add(
            SAMPLE_NAME,
            0,
            Input::Read(r),
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
                Some(m) => Ok(Input::Mapped(m)),
                None => statstorm_trace::input::open(path).map(Input::Read),
            });
            match opened {
                Ok(input) => {
                    readable += 1;
                    c.add(
                        &name,
                        i,
                        input,
                        statstorm_trace::input::pid_from_name(path),
                        watch,
                        is_stream(path),
                    );
                    if let Some(msg) = &c.refused {
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
    let Collected {
        analyzer,
        strings,
        mut info,
        summary,
        errors,
        ..
    } = c;
    let read_errors = errors.iter().filter(|e| e.contains("read error")).count();
    for e in &errors {
        errln!("statstorm: error: {e}");
    }
    if let Some(s) = &summary {
        info.summary_rows = s.rows.len() as u64;
    }
    let mut profile = analyzer.finish(&strings, info, args.top);
    if let Some(s) = &summary {
        statstorm_engine::analyze::fold_summary(&mut profile, s);
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
