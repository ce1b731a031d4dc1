//! statstorm-trace: bytes of an strace log in, typed syscall events out.
//!
//! This crate knows strace's text formats and nothing of PHP, NFS or printing.
//! The parser core ([`Parser`]) works on `&[u8]` lines; a slice path and a
//! reader path feed it and it pushes records into a [`Sink`]. Pairing of
//! `<unfinished ...>` / `<... resumed>` lines, `-r` time accumulation and the
//! pid of `-ff` files happen in the parser; the merge of several inputs by
//! time happens in [`read_paths`].
//!
//! ```
//! let log = b"123 1700000000.000100 openat(AT_FDCWD, \"/a.php\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000011>\n";
//! let t = statstorm_trace::read_bytes("example", log);
//! assert_eq!(t.events.len(), 1);
//! let ev = &t.events[0];
//! assert_eq!(ev.kind, statstorm_trace::Kind::Openat);
//! assert_eq!(t.strings.str(ev.path.unwrap()), "/a.php");
//! assert_eq!(ev.dur_us, Some(11));
//! ```
//!
//! [`op`] turns events into [`op::Op`]s, the normalized filesystem calls that
//! the PHP and NFS models exchange.

pub mod ahead;
mod args;
pub mod counts;
pub mod event;
pub mod input;
pub mod op;
pub mod ordered;
pub mod parse;
pub mod share;
pub mod suggest;
pub mod summary;
pub mod tally;

/// Entry points for the benchmark examples (`examples/scan_bench.rs`);
/// not part of the API.
#[doc(hidden)]
pub mod bench {
    /// The argument scan of the parser on `text` (what follows `name(`),
    /// with the masks of `how` (`auto`: what the parser uses; `sse2`,
    /// `avx2`): the
    /// index of the closing `)` and the number of arguments, or `None`
    /// when `how` is unknown or this CPU lacks it.
    pub fn scan_call(text: &[u8], how: &str) -> Option<(Option<usize>, usize)> {
        crate::args::scan_call_by(text, how)
    }
}

/// Helpers of the unit tests.
#[cfg(test)]
pub(crate) mod testutil {
    /// A xorshift sequence (fixed seed: reproducible generated inputs).
    pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }
}

pub use event::{Errno, Event, Flags, Interner, Kind, PathId, Ret};
pub use input::Error;
pub use parse::{
    Detected, Exit, ExitStatus, InputStats, Options, Parser, PidStyle, Signal, Sink, SkipReason,
    TsKind, VecSink,
};
pub use summary::{Summary, SummaryRow};
pub use tally::{Tally, TallyPool};

use std::io::Read;
use std::path::{Path, PathBuf};

/// All events of one or more inputs, in time order.
#[derive(Debug, Default)]
pub struct Trace {
    /// Sorted by (start time, input, line); without timestamps, in input
    /// and line order.
    pub events: Vec<Event>,
    pub strings: Interner,
    /// One entry per input, in the order given.
    pub inputs: Vec<InputStats>,
    /// Totals from `strace -c` tables, summed over inputs.
    pub summary: Option<Summary>,
}

impl Trace {
    /// Lines skipped over all inputs.
    pub fn skipped(&self) -> u64 {
        self.inputs.iter().map(|i| i.skipped).sum()
    }
    /// True when some input had lines but none of them was strace output.
    pub fn not_strace(&self) -> bool {
        self.inputs.iter().any(InputStats::not_strace)
    }

    /// Gives unprefixed lines of `[pid N]` traces the pid learned later.
    fn fix_initial_pids(&mut self) {
        for (i, st) in self.inputs.iter().enumerate() {
            if let Some(p) = st.initial_pid {
                for e in self
                    .events
                    .iter_mut()
                    .filter(|e| e.input as usize == i && e.pid == 0)
                {
                    e.pid = p;
                }
            }
        }
    }

    /// A pid that events of two inputs have, with the two inputs (the one
    /// that had it first, and the other): `None` when every pid belongs
    /// to one input. Events must be in input order.
    fn pid_collision(&self) -> Option<(u32, u16, u16)> {
        let mut owner: std::collections::HashMap<u32, u16> = Default::default();
        let mut last = None;
        for e in &self.events {
            // Runs of one process's events: one lookup per run.
            if last == Some((e.input, e.pid)) {
                continue;
            }
            last = Some((e.input, e.pid));
            let first = *owner.entry(e.pid).or_insert(e.input);
            if first != e.input {
                return Some((e.pid, first, e.input));
            }
        }
        None
    }

    fn sort(&mut self) {
        self.fix_initial_pids();
        // (input, line) names one event: the key is unique, so an
        // unstable sort gives the stable order, in place
        self.events
            .sort_unstable_by_key(|e| (e.ts_us, e.input, e.line));
    }

    fn add_summary(&mut self, s: Option<Summary>) {
        if let Some(s) = s {
            self.summary.get_or_insert_with(Summary::default).merge(&s);
        }
    }
}

/// Parses one input from a reader, pushing records into `sink` in input
/// order and never holding more than one line plus one read buffer. The
/// sink sees each event with the parser's interner.
pub fn stream<R: Read, S: Sink>(
    name: &str,
    reader: R,
    sink: &mut S,
    opts: Options,
) -> Result<(InputStats, Option<Summary>, Interner), Error> {
    let mut p = Parser::new(name, opts);
    let res = p.feed_reader(reader, sink);
    let line = p.stats().lines;
    let out = p.finish(sink);
    match res {
        Ok(()) => Ok(out),
        Err(source) => Err(Error::Read {
            path: name.to_string(),
            line,
            source,
        }),
    }
}

/// Parses an input held in memory (plain, gzip or zstd). A decompression
/// error ends the input and is reported in `InputStats::error`.
pub fn read_bytes(name: &str, data: &[u8]) -> Trace {
    read_bytes_with(name, data, Options::default())
}

/// [`read_bytes`] with options.
pub fn read_bytes_with(name: &str, data: &[u8], opts: Options) -> Trace {
    let mut t = Trace::default();
    let mut sink = VecSink::default();
    let mut p = Parser::with_interner(name, opts, std::mem::take(&mut t.strings));
    let mut err = None;
    match input::sniff(data) {
        input::Compression::None => p.feed_slice(data, &mut sink),
        _ => {
            let r = input::decompressed(data).and_then(|r| p.feed_reader(r, &mut sink));
            if let Err(e) = r {
                err = Some(format!(
                    "{name}: read error after line {}: {e}",
                    p.stats().lines
                ));
            }
        }
    }
    let (mut st, summary, strings) = p.finish(&mut sink);
    st.error = err;
    t.strings = strings;
    t.events = sink.events;
    t.inputs.push(st);
    t.add_summary(summary);
    t.sort();
    t
}

/// Reads files (`-` is stdin; gzip and zstd by magic bytes) and merges
/// their events by time. A path that does not exist but names a
/// `strace -ff -o PREFIX` prefix reads every `PREFIX.PID`; the pid of lines
/// in such files comes from the file name. Inputs whose pids collide (the
/// same file twice, two captures of one host) are refused with
/// [`Error::PidCollision`]: merged, their processes would be one.
pub fn read_paths(paths: &[PathBuf]) -> Result<Trace, Error> {
    read_paths_counted(paths, &input::Counters::default())
}

/// [`read_paths`], publishing the bytes read and the events parsed in
/// `counters` as it goes (for a progress line or a stall guard on
/// another thread).
pub fn read_paths_counted(paths: &[PathBuf], counters: &input::Counters) -> Result<Trace, Error> {
    read_paths_within(paths, counters, u64::MAX)
}

/// [`read_paths`] of inputs that must stay small (they are held in
/// memory whole): an error naming the file and line once more than
/// `limit` bytes of text (after decompression) come from one file.
pub fn read_paths_limited(paths: &[PathBuf], limit: u64) -> Result<Trace, Error> {
    read_paths_within(paths, &input::Counters::default(), limit)
}

fn read_paths_within(
    paths: &[PathBuf],
    counters: &input::Counters,
    limit: u64,
) -> Result<Trace, Error> {
    let mut files: Vec<PathBuf> = Vec::new();
    for p in paths {
        match input::expand_prefix(p) {
            Some(list) => files.extend(list),
            None => files.push(p.clone()),
        }
    }
    if files.len() > u16::MAX as usize + 1 {
        return Err(Error::TooManyInputs(files.len()));
    }
    let mut t = Trace::default();
    let mut sink = VecSink::default();
    for (i, path) in files.iter().enumerate() {
        let name = path.display().to_string();
        let opts = Options {
            input: i as u16,
            default_pid: input::pid_from_name(path),
            ..Options::default()
        };
        let r = input::Counted {
            inner: input::Limited {
                inner: input::open(path)?,
                limit,
                read: 0,
            },
            counters,
        };
        let mut p = Parser::with_interner(&name, opts, std::mem::take(&mut t.strings));
        let mut counted = CountedSink {
            inner: &mut sink,
            counters,
        };
        let res = p.feed_reader(r, &mut counted);
        let line = p.stats().lines;
        let (st, summary, strings) = p.finish(&mut sink);
        t.strings = strings;
        if let Err(source) = res {
            return Err(Error::Read {
                path: name,
                line,
                source,
            });
        }
        t.inputs.push(st);
        t.add_summary(summary);
    }
    t.events = sink.events;
    t.fix_initial_pids();
    if let Some((pid, first, second)) = t.pid_collision() {
        return Err(Error::PidCollision {
            pid,
            first: files[first as usize].display().to_string(),
            second: files[second as usize].display().to_string(),
        });
    }
    t.sort();
    Ok(t)
}

/// A sink that counts the events it passes on.
struct CountedSink<'a, S> {
    inner: &'a mut S,
    counters: &'a input::Counters,
}

impl<S: Sink> Sink for CountedSink<'_, S> {
    fn event(&mut self, ev: &Event, strings: &Interner) -> bool {
        self.counters.event();
        self.inner.event(ev, strings)
    }
    fn signal(&mut self, sig: &Signal<'_>) {
        self.inner.signal(sig)
    }
    fn exit(&mut self, exit: &Exit) {
        self.inner.exit(exit)
    }
    fn skip(&mut self, line: u64, reason: SkipReason) {
        self.inner.skip(line, reason)
    }
    fn comm(&mut self, pid: u32, comm: &[u8]) {
        self.inner.comm(pid, comm)
    }
}

/// Reads one path; see [`read_paths`].
pub fn read_path(path: &Path) -> Result<Trace, Error> {
    read_paths(&[path.to_path_buf()])
}
