//! The events of a capture in time order without holding them all.
//!
//! [`crate::read_paths`] holds every event and sorts them: (start time,
//! input, line). A consumer that folds events one by one (the request
//! split, the call normalizer) needs that order but not the whole vector.
//! [`for_each_event`] gives it:
//!
//! - one regular file whose lines carry a pid column (`strace -f -o FILE`,
//!   the common production capture) is parsed as a stream. The parser gives
//!   a call when it is whole: a call strace split into `<unfinished ...>`
//!   and `<... resumed>` comes at its resumed line, after calls that
//!   started later. A reorder buffer holds the events of the last
//!   [`WINDOW_US`] of trace time (at most [`WINDOW_EVENTS`] events) and
//!   gives them out by (start, line): the order of the whole read, as long
//!   as no call stays unfinished longer than the window. A call that does
//!   (a php-fpm worker idle in `accept()` for minutes) is given when it
//!   ends, after calls that started later; [`Ordered::late`] counts such
//!   calls. Each process's own calls stay in order either way (a process
//!   makes no call while one is unfinished), which is what the consumers
//!   per process (the split, the fd tables) rely on.
//! - anything else (several inputs, `-ff` files, standard input, a pipe,
//!   `[pid N]` prefixed output whose first lines carry no pid) is read
//!   whole and sorted as [`crate::read_paths`] does: memory grows with
//!   the input there.

use crate::input::{self, Counters, Error};
use crate::parse::{Exit, InputStats, Options, Parser, Signal, Sink, SkipReason};
use crate::{Event, Interner, Summary, Trace};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// Trace time the reorder buffer covers, microseconds: an unfinished call
/// resumed within it is given in start order.
pub const WINDOW_US: i64 = 10_000_000;

/// Events the reorder buffer holds at most (an event is ~150 bytes: about
/// 10 MB); past it the earliest is given out even within [`WINDOW_US`].
pub const WINDOW_EVENTS: usize = 1 << 16;

/// What [`for_each_event`] read.
#[derive(Debug, Default)]
pub struct Ordered {
    /// One entry per input, in the order given.
    pub inputs: Vec<InputStats>,
    /// Totals from `strace -c` tables, summed over inputs.
    pub summary: Option<Summary>,
    /// Events given.
    pub events: u64,
    /// Events given after an event that started later (the reorder window
    /// was too short for them: calls unfinished for longer than it).
    pub late: u64,
    /// The input was read whole (not streamed): see the module docs.
    pub whole: bool,
}

impl Ordered {
    /// Lines skipped over all inputs.
    pub fn skipped(&self) -> u64 {
        self.inputs.iter().map(|i| i.skipped).sum()
    }
}

/// Gives every event of `paths` to `f` in time order (see the module
/// docs), with the interner its ids refer to. The inputs, their expansion
/// (`-ff` prefixes), the errors and `counters` are those of
/// [`crate::read_paths_counted`].
pub fn for_each_event(
    paths: &[PathBuf],
    counters: &Counters,
    f: &mut dyn FnMut(&Event, &Interner),
) -> Result<Ordered, Error> {
    if let [one] = paths {
        if input::expand_prefix(one).is_none() && streamable(one) {
            if let Some((done, _)) = stream_one(one, counters, f)? {
                return Ok(done);
            }
        }
    }
    let trace = crate::read_paths_counted(paths, counters)?;
    Ok(replay(trace, f))
}

/// Events handed to [`for_each_event_apart`]'s fold at a time.
const BATCH: usize = 4096;

/// A batch for the fold thread: the strings interned since the batch
/// before, then the events.
struct Batch {
    tail: crate::event::Tail,
    events: Vec<Event>,
}

/// [`for_each_event`] with `f` on a thread of its own: the parse, its
/// merge and the reorder buffer run on the calling thread (and the parse
/// workers), the fold beside them, fed batches of 4096 events with
/// the strings interned since the batch before. `f` sees the same events
/// in the same order, with an interner that gives each id the same string
/// (a copy that follows the parser's). Holds at most three batches.
pub fn for_each_event_apart(
    paths: &[PathBuf],
    counters: &Counters,
    f: &mut (dyn FnMut(&Event, &Interner) + Send),
) -> Result<Ordered, Error> {
    if let [one] = paths {
        if input::expand_prefix(one).is_none() && streamable(one) {
            let streamed = std::thread::scope(|s| -> Result<Option<Ordered>, Error> {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(1);
                let fold = std::thread::Builder::new()
                    .name("fold".into())
                    .spawn_scoped(s, || -> Result<(), crate::event::TailMismatch> {
                        let mut mirror = Interner::new();
                        for b in rx {
                            mirror.extend_tail(&b.tail)?;
                            for e in &b.events {
                                f(e, &mirror);
                            }
                        }
                        Ok(())
                    })
                    .map_err(|e| Error::Read {
                        path: one.display().to_string(),
                        line: 0,
                        source: e,
                    })?;
                let mut events: Vec<Event> = Vec::with_capacity(BATCH);
                let mut sent = 0usize;
                let mut send = |events: &mut Vec<Event>, strings: &Interner| {
                    let b = Batch {
                        tail: strings.tail(sent),
                        events: std::mem::replace(events, Vec::with_capacity(BATCH)),
                    };
                    sent = strings.len();
                    // the fold thread ends early only by panicking: its
                    // join below passes the panic on
                    let _ = tx.send(b);
                };
                let res = stream_one(one, counters, &mut |e, strings| {
                    events.push(e.clone());
                    if events.len() == BATCH {
                        send(&mut events, strings);
                    }
                });
                let res = res.map(|o| {
                    o.map(|(done, strings)| {
                        if !events.is_empty() {
                            send(&mut events, &strings);
                        }
                        done
                    })
                });
                // the channel closes: the fold thread ends its loop
                drop(tx);
                match fold.join() {
                    Ok(Ok(())) => res,
                    // a tail that does not follow the copy: a bug, said
                    // as an error rather than a wrong string for an id
                    Ok(Err(e)) => Err(Error::Read {
                        path: one.display().to_string(),
                        line: 0,
                        source: std::io::Error::other(e),
                    }),
                    Err(p) => std::panic::resume_unwind(p),
                }
            })?;
            if let Some(done) = streamed {
                return Ok(done);
            }
        }
    }
    let trace = crate::read_paths_counted(paths, counters)?;
    Ok(replay(trace, f))
}

/// Gives the events of a trace read whole, in its order.
fn replay(trace: Trace, f: &mut dyn FnMut(&Event, &Interner)) -> Ordered {
    for e in &trace.events {
        f(e, &trace.strings);
    }
    Ordered {
        events: trace.events.len() as u64,
        inputs: trace.inputs,
        summary: trace.summary,
        late: 0,
        whole: true,
    }
}

/// A regular file (plain or compressed), not standard input.
fn streamable(p: &Path) -> bool {
    p.as_os_str() != "-" && std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// Streams one file; `None` when it must be read whole after all (its
/// first event carries no pid: `[pid N]` output, whose first process's
/// pid is learned later). Nothing has reached `f` then. Gives the
/// parser's interner with what was read.
fn stream_one(
    path: &Path,
    counters: &Counters,
    f: &mut dyn FnMut(&Event, &Interner),
) -> Result<Option<(Ordered, Interner)>, Error> {
    let name = path.display().to_string();
    let opts = Options {
        input: 0,
        default_pid: input::pid_from_name(path),
        ..Options::default()
    };
    let r = input::Counted {
        inner: input::open(path)?,
        counters,
    };
    let mut sink = Reorder::new(counters, f);
    let mut p = Parser::new(&name, opts);
    let res = p.feed_reader(r, &mut sink);
    let line = p.stats().lines;
    if sink.unnamed {
        return Ok(None);
    }
    let (st, summary, strings) = p.finish(&mut sink);
    if sink.unnamed {
        return Ok(None);
    }
    if let Err(source) = res {
        return Err(Error::Read {
            path: name,
            line,
            source,
        });
    }
    sink.flush(&strings);
    Ok(Some((
        Ordered {
            inputs: vec![st],
            summary,
            events: sink.given,
            late: sink.late,
            whole: false,
        },
        strings,
    )))
}

/// The order of the whole read within one input: (start, line).
fn key(e: &Event) -> (Option<i64>, u64) {
    (e.ts_us, e.line)
}

/// The reorder buffer: a sink that passes events on by (start, line).
/// Events come nearly in that order (all but the resumed calls), so the
/// buffer is a queue kept sorted: most events go to its back, a resumed
/// call a few places before it.
struct Reorder<'a> {
    queue: VecDeque<Event>,
    /// Latest start seen.
    newest: Option<i64>,
    /// Key of the last event given.
    last: Option<(Option<i64>, u64)>,
    given: u64,
    late: u64,
    /// An event without a pid came first: read the input whole instead.
    unnamed: bool,
    counters: &'a Counters,
    f: &'a mut dyn FnMut(&Event, &Interner),
}

impl<'a> Reorder<'a> {
    fn new(counters: &'a Counters, f: &'a mut dyn FnMut(&Event, &Interner)) -> Self {
        Reorder {
            queue: VecDeque::new(),
            newest: None,
            last: None,
            given: 0,
            late: 0,
            unnamed: false,
            counters,
            f,
        }
    }

    fn give(&mut self, e: Event, strings: &Interner) {
        let k = key(&e);
        if self.last.is_some_and(|l| k < l) {
            self.late += 1;
        } else {
            self.last = Some(k);
        }
        self.given += 1;
        (self.f)(&e, strings);
    }

    /// Gives out what the window no longer covers.
    fn drain(&mut self, strings: &Interner) {
        while let Some(front) = self.queue.front() {
            let old = match (front.ts_us, self.newest) {
                (Some(t), Some(n)) => n.saturating_sub(t) > WINDOW_US,
                _ => false,
            };
            if !old && self.queue.len() <= WINDOW_EVENTS {
                break;
            }
            let Some(e) = self.queue.pop_front() else {
                break;
            };
            self.give(e, strings);
        }
    }

    fn flush(&mut self, strings: &Interner) {
        while let Some(e) = self.queue.pop_front() {
            self.give(e, strings);
        }
    }
}

impl Sink for Reorder<'_> {
    fn event(&mut self, ev: &Event, strings: &Interner) -> bool {
        self.counters.event();
        if ev.pid == 0 && self.given == 0 && self.queue.is_empty() {
            self.unnamed = true;
            return false;
        }
        if let Some(t) = ev.ts_us {
            self.newest = Some(self.newest.map_or(t, |n| n.max(t)));
        }
        let k = key(ev);
        if self.queue.back().is_none_or(|b| key(b) <= k) {
            self.queue.push_back(ev.clone());
        } else {
            let at = self.queue.partition_point(|e| key(e) <= k);
            self.queue.insert(at, ev.clone());
        }
        self.drain(strings);
        true
    }
    fn signal(&mut self, _sig: &Signal<'_>) {}
    fn exit(&mut self, _exit: &Exit) {}
    fn skip(&mut self, _line: u64, _reason: SkipReason) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(paths: &[PathBuf]) -> (Vec<Event>, Vec<String>, Ordered) {
        let mut evs = Vec::new();
        let mut names = Vec::new();
        let o = for_each_event(paths, &Counters::default(), &mut |e, s| {
            evs.push(e.clone());
            names.push(e.path.map(|p| s.str(p).into_owned()).unwrap_or_default());
        })
        .unwrap();
        (evs, names, o)
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The stream gives the order of the whole read: an unfinished call
    /// comes at its start, before the calls that started after it.
    #[test]
    fn stream_matches_the_whole_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "t.log",
            "10 00:00:01.000001 openat(AT_FDCWD, \"/a\", O_RDONLY <unfinished ...>\n\
             11 00:00:01.000002 stat(\"/b\", {st_mode=S_IFREG|0644, st_size=1, ...}) = 0 <0.000001>\n\
             11 00:00:01.000003 stat(\"/c\", {st_mode=S_IFREG|0644, st_size=1, ...}) = 0 <0.000001>\n\
             10 00:00:01.000004 <... openat resumed>) = 3 <0.000003>\n\
             10 00:00:01.000005 close(3) = 0 <0.000001>\n",
        );
        let (evs, names, o) = collect(std::slice::from_ref(&p));
        assert!(!o.whole);
        assert_eq!(o.late, 0);
        assert_eq!(names, ["/a", "/b", "/c", ""]);
        let whole = crate::read_paths(&[p]).unwrap();
        assert_eq!(evs, whole.events);
    }

    /// A call unfinished for longer than the window comes when it ends,
    /// counted as late; the other calls keep their order.
    #[test]
    fn a_call_past_the_window_is_late() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("10 00:00:01.000000 accept(0, NULL, NULL <unfinished ...>\n");
        text.push_str("11 00:00:02.000000 stat(\"/b\", {st_mode=S_IFREG|0644, st_size=1, ...}) = 0 <0.000001>\n");
        text.push_str("11 00:00:30.000000 stat(\"/c\", {st_mode=S_IFREG|0644, st_size=1, ...}) = 0 <0.000001>\n");
        text.push_str("10 00:00:31.000000 <... accept resumed>) = 3 <30.000000>\n");
        let p = write(dir.path(), "t.log", &text);
        let (_, names, o) = collect(&[p]);
        assert_eq!(o.late, 1);
        assert_eq!(o.events, 3);
        assert_eq!(names, ["/b", "", "/c"]);
    }

    /// Several inputs, and output without a pid column, are read whole.
    #[test]
    fn several_inputs_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(
            dir.path(),
            "a.log",
            "10 00:00:01.000002 close(3) = 0 <0.000001>\n",
        );
        let b = write(
            dir.path(),
            "b.log",
            "11 00:00:01.000001 close(4) = 0 <0.000001>\n",
        );
        let (evs, _, o) = collect(&[a, b]);
        assert!(o.whole);
        assert_eq!(evs.iter().map(|e| e.pid).collect::<Vec<_>>(), [11, 10]);
        let c = write(
            dir.path(),
            "c.log",
            "00:00:01.000001 close(4) = 0 <0.000001>\n",
        );
        let (_, _, o) = collect(&[c]);
        assert!(o.whole);
    }
}
