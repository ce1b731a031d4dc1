//! Reading the inputs of `analyze`: each strace log or counts capture
//! (`statstorm record --counts`) streamed into one [`Analyzer`], with what
//! could not be read kept as typed [`InputError`]s and what the reader
//! should know as [`InputNote`]s. Progress is the caller's: it gets the
//! byte position through a callback and may watch the [`Counters`].
//!
//! Several inputs are one trace: a pid seen in two of them is refused
//! ([`Refusal::PidCollision`]), and counts captures are not mixed with
//! strace logs ([`Refusal::Mixed`]).

use super::{pids::PidCheck, Analyzer, InputInfo, Profile};
use statstorm_trace::input::{Counters, Mapped};
use statstorm_trace::{Event, Interner, Options, Parser, Sink, SkipReason, Summary};
use std::io::{BufRead, Read};
use std::sync::atomic::Ordering;

/// Granularity (a power of two, a multiple of any page size) at which the
/// merged part of a mapped input is released. Each release is a madvise
/// call that also makes the kernel flush the other cores' TLBs: 8 MiB
/// steps cost a few MiB of resident set and a eighth of the calls of 1 MiB
/// steps (the merge reports every block).
const RELEASE_STEP: usize = 8 << 20;

/// Longest counts line kept; a longer one is skipped unread.
const MAX_COUNTS_LINE: usize = 1 << 16;

/// Bytes between two progress callbacks on a read (not mapped) input.
const TICK: u64 = 8 << 20;

/// An input, opened.
pub enum Source {
    Read(Box<dyn Read>),
    Mapped(Mapped),
}

impl Source {
    /// The input's size when it is known (a mapped file).
    pub fn size(&self) -> Option<u64> {
        match self {
            Source::Mapped(m) => Some(m.len() as u64),
            Source::Read(_) => None,
        }
    }
}

/// What an input holds, told by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Strace,
    Counts,
}

/// An input that could not be read whole, or holds nothing to analyze.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Reading stopped at an I/O error; what came before was analyzed.
    #[error("{file}: read error after line {line}: {source}")]
    Read {
        file: String,
        line: u64,
        source: std::io::Error,
    },
    #[error(
        "{file}: not an strace log ({lines} lines, none recognized; first at line {first_line})"
    )]
    NotStrace {
        file: String,
        lines: u64,
        first_line: u64,
    },
    #[error("{file}: empty input, nothing to analyze")]
    Empty { file: String },
    #[error("{file}: a counts capture without counts ({lines} lines)")]
    NoCounts { file: String, lines: u64 },
    /// The requests' table could not be kept (its temporary file): the
    /// profile lists only some.
    #[error("the request table is incomplete: its temporary file failed: {source}")]
    Requests {
        source: std::sync::Arc<std::io::Error>,
    },
}

/// Why the inputs are not analyzed together: nothing more is read.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("{}", statstorm_trace::input::pid_collision_message(*pid, first, second))]
    PidCollision {
        pid: u32,
        first: String,
        second: String,
    },
    #[error("{file}: counts captures (`statstorm record --counts`) and strace logs are analyzed apart, not in one run")]
    Mixed { file: String },
}

/// What the reader of one input should know; the analysis goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputNote {
    /// The recording's last lines say it lost calls.
    LostCalls { file: String, calls: u64 },
    /// Times go backwards at `count` lines, the first at `first_line`, by
    /// `back_us` against the line above it.
    TimeBackwards {
        file: String,
        count: u64,
        first_line: u64,
        back_us: u64,
    },
}

/// The analysis of the inputs read so far.
pub struct Reading {
    analyzer: Analyzer,
    strings: Interner,
    info: InputInfo,
    summary: Option<Summary>,
    errors: Vec<InputError>,
    /// Names of the inputs read, in order.
    names: Vec<String>,
    pids: PidCheck,
    refused: Option<Refusal>,
    /// Inputs read so far that were strace logs, and counts captures.
    straces: usize,
    counts: usize,
}

/// The inputs' analysis, once every input is read.
pub struct Analysis {
    pub profile: Profile,
    /// The strace summary table (`strace -c`) of the inputs, when they
    /// held one; already folded into the profile.
    pub summary: Option<Summary>,
    pub errors: Vec<InputError>,
}

impl Default for Reading {
    fn default() -> Self {
        Self::new()
    }
}

impl Reading {
    pub fn new() -> Self {
        Reading {
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

    /// Set when the inputs cannot be analyzed together; nothing more is
    /// read and no profile should be made.
    pub fn refused(&self) -> Option<&Refusal> {
        self.refused.as_ref()
    }

    /// Tells what `source` holds from its first bytes (a read input gets
    /// them back in front). `None` when they could not be read (the error
    /// is kept).
    pub fn sniff(&mut self, name: &str, source: Source) -> Option<(SourceKind, Source)> {
        let counts = statstorm_trace::counts::is_counts;
        match source {
            Source::Mapped(m) => {
                let kind = if counts(&m) {
                    SourceKind::Counts
                } else {
                    SourceKind::Strace
                };
                Some((kind, Source::Mapped(m)))
            }
            Source::Read(mut r) => {
                let mut head = Vec::new();
                let want = statstorm_trace::counts::MAGIC.len() as u64;
                if let Err(source) = (&mut r).take(want).read_to_end(&mut head) {
                    self.errors.push(InputError::Read {
                        file: name.to_string(),
                        line: 0,
                        source,
                    });
                    return None;
                }
                let kind = if counts(&head) {
                    SourceKind::Counts
                } else {
                    SourceKind::Strace
                };
                let r = std::io::Cursor::new(head).chain(r);
                Some((kind, Source::Read(Box::new(r))))
            }
        }
    }

    /// Reads input number `index` (of `kind`, from [`Reading::sniff`]) into
    /// the analysis. `pid`: the process of lines without one (a `strace
    /// -ff` file's). `counters`: bytes and events, for a watch. `position`:
    /// called with the bytes read (or merged) so far, every few MiB.
    /// Returns what the reader should know about this input.
    pub fn add(
        &mut self,
        name: &str,
        index: usize,
        (kind, source): (SourceKind, Source),
        pid: Option<u32>,
        counters: &Counters,
        position: &mut dyn FnMut(u64),
    ) -> Vec<InputNote> {
        if self.refuse_mix(name, kind == SourceKind::Counts) {
            return Vec::new();
        }
        match (kind, source) {
            (SourceKind::Counts, Source::Mapped(m)) => {
                self.add_counts(name, index, &m[..], position)
            }
            (SourceKind::Counts, Source::Read(r)) => self.add_counts(
                name,
                index,
                std::io::BufReader::with_capacity(1 << 16, r),
                position,
            ),
            (SourceKind::Strace, source) => {
                self.add_strace(name, index, source, pid, counters, position)
            }
        }
    }

    /// Ends the reading: the profile with `top` rows per table.
    pub fn finish(self, top: usize) -> Analysis {
        let Reading {
            analyzer,
            strings,
            mut info,
            summary,
            mut errors,
            ..
        } = self;
        if let Some(s) = &summary {
            info.summary_rows = s.rows.len() as u64;
        }
        let mut profile = analyzer.finish(&strings, info, top);
        if let Some(source) = profile.requests_error.take() {
            errors.push(InputError::Requests { source });
        }
        if let Some(s) = &summary {
            super::fold_summary(&mut profile, s);
        }
        Analysis {
            profile,
            summary,
            errors,
        }
    }

    /// Ends input `name`'s pid check: `true` (and `refused` set) when its
    /// pids collide with an earlier input's.
    fn end_pids(&mut self, name: &str, later: bool) -> bool {
        if let Some((pid, first)) = self.pids.collision() {
            self.refused = Some(Refusal::PidCollision {
                pid,
                first: self.names[first].clone(),
                second: name.to_string(),
            });
            return true;
        }
        if later {
            self.pids.end_input(None);
        } else {
            self.pids.end_input(Some(self.analyzer.pids().collect()));
        }
        false
    }

    /// Keeps the read error that stopped input `name` after `st`'s lines.
    fn read_failed(
        &mut self,
        name: &str,
        st: &mut statstorm_trace::InputStats,
        source: std::io::Error,
    ) {
        let e = InputError::Read {
            file: name.to_string(),
            line: st.lines,
            source,
        };
        st.error = Some(e.to_string());
        self.errors.push(e);
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
            self.refused = Some(Refusal::Mixed {
                file: name.to_string(),
            });
            return true;
        }
        false
    }

    /// Reads one counts capture into the analyzer: each count adds its
    /// calls ([`Analyzer::push_counted`]).
    fn add_counts(
        &mut self,
        name: &str,
        index: usize,
        mut r: impl BufRead,
        position: &mut dyn FnMut(u64),
    ) -> Vec<InputNote> {
        let later = !self.names.is_empty();
        self.pids.begin_input(self.names.len());
        self.names.push(name.to_string());
        let mut reader =
            statstorm_trace::counts::CountsReader::new(name, index.min(u16::MAX as usize) as u16);
        let mut line = Vec::with_capacity(256);
        let (mut read, mut ticked) = (0u64, 0u64);
        let mut err = None;
        loop {
            line.clear();
            let n = match (&mut r)
                .take(MAX_COUNTS_LINE as u64 + 1)
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
            read += n as u64;
            let complete = line.last() == Some(&b'\n');
            if !complete && line.len() > MAX_COUNTS_LINE {
                // the rest of the line, unread
                let mut rest = Vec::new();
                loop {
                    rest.clear();
                    match (&mut r)
                        .take(MAX_COUNTS_LINE as u64)
                        .read_until(b'\n', &mut rest)
                    {
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
            if read - ticked >= TICK {
                position(read);
                ticked = read;
            }
        }
        position(read);
        if self.end_pids(name, later) {
            return Vec::new();
        }
        let mut st = reader.stats;
        if let Some(source) = err {
            self.read_failed(name, &mut st, source);
        }
        self.info.add_file(name, &st);
        if st.events == 0 {
            self.errors.push(InputError::NoCounts {
                file: name.to_string(),
                lines: st.lines,
            });
        }
        let mut notes = Vec::new();
        if st.lost_calls > 0 {
            notes.push(InputNote::LostCalls {
                file: name.to_string(),
                calls: st.lost_calls,
            });
        }
        notes
    }

    /// Reads one strace log into the analyzer.
    fn add_strace(
        &mut self,
        name: &str,
        index: usize,
        source: Source,
        pid: Option<u32>,
        counters: &Counters,
        position: &mut dyn FnMut(u64),
    ) -> Vec<InputNote> {
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
        let mut sink = AnalyzeSink {
            a: &mut self.analyzer,
            counters,
            pids: later.then_some(&mut self.pids),
        };
        let res = match source {
            Source::Read(reader) => {
                let reader = Ticking {
                    inner: reader,
                    read: 0,
                    ticked: 0,
                    counters,
                    position: &mut *position,
                };
                p.feed_reader(reader, &mut sink)
            }
            Source::Mapped(map) => {
                // Pages of the file already merged leave this process's
                // resident set (they stay in the page cache): memory stays
                // bounded as on the read path.
                let mut released = 0usize;
                let mut merged = |upto: usize| {
                    counters.bytes.store(upto as u64, Ordering::Relaxed);
                    position(upto as u64);
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
        if self.end_pids(name, later) {
            return Vec::new();
        }
        self.strings = strings;
        if let Err(source) = res {
            self.read_failed(name, &mut st, source);
        }
        if let Some(s) = summary {
            self.summary.get_or_insert_with(Default::default).merge(&s);
        }
        self.info.add_file(name, &st);
        let mut notes = Vec::new();
        if st.lost_calls > 0 {
            notes.push(InputNote::LostCalls {
                file: name.to_string(),
                calls: st.lost_calls,
            });
        }
        if let Some((line, back_us)) = st.first_time_backwards {
            notes.push(InputNote::TimeBackwards {
                file: name.to_string(),
                count: st.time_backwards,
                first_line: line,
                back_us,
            });
        }
        if st.not_strace() {
            self.errors.push(InputError::NotStrace {
                file: name.to_string(),
                lines: st.lines,
                first_line: st.first_skips.first().map(|s| s.0).unwrap_or(1),
            });
        } else if st.lines == 0
            || st.lines
                == st
                    .skipped_by_reason
                    .get(&SkipReason::EmptyLine)
                    .copied()
                    .unwrap_or(0)
        {
            self.errors.push(InputError::Empty {
                file: name.to_string(),
            });
        }
        notes
    }
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

/// Counts the bytes read into the [`Counters`] and tells the position
/// every [`TICK`] bytes and at the end.
struct Ticking<'c, R> {
    inner: R,
    read: u64,
    ticked: u64,
    counters: &'c Counters,
    position: &'c mut dyn FnMut(u64),
}

impl<R: Read> Read for Ticking<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
        self.read += n as u64;
        if self.read - self.ticked >= TICK || n == 0 {
            (self.position)(self.read);
            self.ticked = self.read;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &'static str) -> Source {
        Source::Read(Box::new(std::io::Cursor::new(s.as_bytes())))
    }

    /// Sniffs and adds `source` as input `index`.
    fn add(r: &mut Reading, name: &str, index: usize, source: Source) -> Vec<InputNote> {
        let sniffed = r.sniff(name, source).expect("sniffed");
        r.add(
            name,
            index,
            sniffed,
            None,
            &Counters::default(),
            &mut |_| {},
        )
    }

    const LOG_A: &str = "7 1764234600.000001 newfstatat(AT_FDCWD, \"/srv/a.php\", {st_mode=S_IFREG|0644, st_size=1, ...}, 0) = 0 <0.000010>\n";
    const LOG_B: &str = "7 1764234601.000001 newfstatat(AT_FDCWD, \"/srv/b.php\", {st_mode=S_IFREG|0644, st_size=1, ...}, 0) = 0 <0.000010>\n";
    const COUNTS: &str = "# statstorm record counts 1\n@ 1764234600.000000 1764234610.0\n= 9 newfstatat 0 5 0.000100 \"/srv/a.php\"\n# statstorm record: lost 3 calls (x)\n";

    #[test]
    fn a_pid_in_two_inputs_is_refused_naming_both() {
        let mut r = Reading::new();
        add(&mut r, "a.log", 0, text(LOG_A));
        assert!(r.refused().is_none());
        add(&mut r, "b.log", 1, text(LOG_B));
        match r.refused() {
            Some(Refusal::PidCollision { pid, first, second }) => {
                assert_eq!(
                    (*pid, first.as_str(), second.as_str()),
                    (7, "a.log", "b.log")
                )
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn counts_and_strace_logs_are_not_read_together() {
        let mut r = Reading::new();
        let notes = add(&mut r, "c.counts", 0, text(COUNTS));
        assert_eq!(
            notes,
            vec![InputNote::LostCalls {
                file: "c.counts".into(),
                calls: 3
            }]
        );
        assert!(r.refused().is_none());
        add(&mut r, "a.log", 1, text(LOG_A));
        assert!(
            matches!(r.refused(), Some(Refusal::Mixed { file }) if file == "a.log"),
            "{:?}",
            r.refused()
        );
    }

    #[test]
    fn inputs_without_events_are_typed_errors() {
        let mut r = Reading::new();
        add(&mut r, "empty.log", 0, text(""));
        add(&mut r, "prose.txt", 1, text("hello\nworld\n"));
        let a = r.finish(5);
        let got: Vec<String> = a.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            got,
            [
                "empty.log: empty input, nothing to analyze",
                "prose.txt: not an strace log (2 lines, none recognized; first at line 1)"
            ]
        );
        assert_eq!(a.profile.input.events, 0);
    }
}
