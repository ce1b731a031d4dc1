//! The parser core: one line at a time, bytes in, records pushed into a
//! [`Sink`].
//!
//! [`Parser`] owns the state that spans lines: the interner, the
//! `<unfinished ...>` calls waiting for their `<... resumed>` line (per pid),
//! the `-r` time accumulator and what was detected about the format. It is
//! fed either a whole slice ([`Parser::feed_slice`]) or a reader
//! ([`Parser::feed_reader`]); both cut the input into the same lines and give
//! the same records.

use crate::args::{self, ArgList};
use crate::event::{Errno, Event, Flags, Interner, Kind, PathId, Ret};
use crate::summary::{Layout, Summary, SummaryRow};
use memchr::{memchr, memchr_iter};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read};

mod par;

/// Why a line was not turned into a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Nothing but white space.
    EmptyLine,
    /// Not a syscall, signal, exit, strace message or summary line.
    Unrecognized,
    /// A syscall line whose argument list or `= result` is missing.
    NoResult,
    /// The line starts with a number that is not a pid or a timestamp.
    BadTimestamp,
    /// `<... NAME resumed>` with no `<unfinished ...>` start for that pid
    /// (the trace began in the middle of the call) or for another syscall.
    OrphanResumed,
    /// Longer than [`Options::max_line`]; the bytes were not kept.
    LineTooLong,
    /// The input ended without a newline inside a line that does not parse.
    TruncatedLastLine,
}

impl SkipReason {
    pub const ALL: [SkipReason; 7] = [
        SkipReason::EmptyLine,
        SkipReason::Unrecognized,
        SkipReason::NoResult,
        SkipReason::BadTimestamp,
        SkipReason::OrphanResumed,
        SkipReason::LineTooLong,
        SkipReason::TruncatedLastLine,
    ];
    /// Text for messages ("line 12: syscall line without result").
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::EmptyLine => "empty line",
            SkipReason::Unrecognized => "not an strace line",
            SkipReason::NoResult => "syscall line without result",
            SkipReason::BadTimestamp => "bad timestamp",
            SkipReason::OrphanResumed => "resumed call without its start",
            SkipReason::LineTooLong => "line too long",
            SkipReason::TruncatedLastLine => "truncated last line",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the pid of a line came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PidStyle {
    /// No pid anywhere (plain `strace`): `Event::pid` is 0.
    #[default]
    None,
    /// `strace -f -o FILE`: every line starts with the pid.
    Column,
    /// `strace -f` to stderr: `[pid N]` prefixes (the first process's lines
    /// before any fork carry none and get pid 0).
    Bracket,
    /// `strace -ff -o PREFIX`: the pid is the file name's `.PID` suffix.
    FileName,
}

/// Timestamp format of the input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TsKind {
    #[default]
    None,
    /// `-t`: `HH:MM:SS`, time of day in seconds.
    TimeOfDay,
    /// `-tt`: `HH:MM:SS.uuuuuu`, time of day in microseconds.
    TimeOfDayUs,
    /// `-ttt`: seconds since the epoch with microseconds.
    Epoch,
    /// `-r`: delta to the previous line; events carry the running sum.
    Relative,
}

/// What the parser found out about an input's format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Detected {
    pub pid: PidStyle,
    pub timestamps: TsKind,
    /// `-T` durations (`<0.000016>`) seen.
    pub durations: bool,
    /// `-y` fd decorations (`3</path>`) seen.
    pub fd_paths: bool,
    /// An `strace -c`/`-w`/`-C` summary table seen.
    pub summary: bool,
    /// `-Y`: each pid printed with its command name (`1234<php-fpm> `,
    /// `[pid 1234<php>] `).
    pub comm: bool,
    /// `-n`: syscall numbers (`[ 262] newfstatat(...`).
    pub syscall_numbers: bool,
    /// `-i`: instruction pointers (`[00007f4bec616000] newfstatat(...`).
    pub instruction_pointers: bool,
    /// `-k`: a stack trace (` > /lib/x86_64-linux-gnu/libc.so.6(...)`
    /// lines) after each call.
    pub stack_traces: bool,
    /// `-e read=SET` / `-e write=SET`: hex dumps of the data read or
    /// written (` | 00000  7f 45 4c 46 ...  .ELF... |` lines).
    pub data_dumps: bool,
}

/// Counts for one input. Every line is in exactly one of the `*_lines`
/// counters or in `skipped`, so `lines == accounted()`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InputStats {
    pub name: String,
    pub bytes: u64,
    pub lines: u64,
    /// Completed syscalls pushed to the sink (a merged unfinished/resumed
    /// pair is one event).
    pub events: u64,
    /// Complete `name(...) = ret` lines.
    pub syscall_lines: u64,
    /// `<unfinished ...>` lines.
    pub unfinished_lines: u64,
    /// `<... resumed>` lines merged with their start.
    pub resumed_lines: u64,
    /// `<unfinished ...>` calls never resumed (the process exited in the
    /// call or the trace ended): events with result `Ret::Unknown`.
    pub never_resumed: u64,
    pub signal_lines: u64,
    pub exit_lines: u64,
    /// strace's own messages (`strace: Process N attached`, ...).
    pub notice_lines: u64,
    /// Stack frames printed by `strace -k` (` > /usr/lib/...(sym+0x1f) [0x2261]`).
    pub stack_lines: u64,
    /// Hex dump lines of `-e read=` / `-e write=` (` | 00000  7f 45 ... |`).
    pub dump_lines: u64,
    /// Comment lines (`# statstorm record...`): a `statstorm record`
    /// capture's header and trailer. (Other lines starting with `#` are
    /// not strace's: skipped as such.)
    #[serde(skip_serializing_if = "is_zero")]
    pub comment_lines: u64,
    /// Calls the recording lost, as its trailer says
    /// (`# statstorm record: lost N calls ...`): the capture is incomplete.
    #[serde(skip_serializing_if = "is_zero")]
    pub lost_calls: u64,
    pub summary_lines: u64,
    pub skipped: u64,
    pub skipped_by_reason: BTreeMap<SkipReason, u64>,
    /// The first [`FIRST_SKIPS`] skipped lines: (1-based line, reason).
    pub first_skips: Vec<(u64, SkipReason)>,
    pub detected: Detected,
    /// With `[pid N]` prefixes: the pid of the first process, learned when
    /// a call it started without prefix resumed with one. Its earlier
    /// unprefixed lines have pid 0 in the stream; [`crate::read_paths`]
    /// rewrites them.
    pub initial_pid: Option<u32>,
    /// A read or decompression error that ended this input early.
    pub error: Option<String>,
    /// Lines whose time is earlier than the time of the line before them
    /// with one (strace prints lines in time order, so a clock set back or
    /// files joined out of order); their times are kept as printed.
    pub time_backwards: u64,
    /// The first such line: (1-based line, microseconds back).
    pub first_time_backwards: Option<(u64, u64)>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The start of a `statstorm record` capture's comment lines.
pub const COMMENT_PREFIX: &str = "# statstorm record";

/// The trailer of a `statstorm record` capture that lost calls:
/// `# statstorm record: lost N calls (...)`.
pub const LOST_PREFIX: &str = "# statstorm record: lost ";

/// N of a [`LOST_PREFIX`] line.
fn lost_calls(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(LOST_PREFIX.as_bytes())?;
    std::str::from_utf8(token(rest)).ok()?.parse().ok()
}

/// How many skipped line numbers [`InputStats::first_skips`] keeps.
pub const FIRST_SKIPS: usize = 10;

impl InputStats {
    /// Sum of the per-category line counters; equals `lines`.
    pub fn accounted(&self) -> u64 {
        self.syscall_lines
            + self.unfinished_lines
            + self.resumed_lines
            + self.signal_lines
            + self.exit_lines
            + self.notice_lines
            + self.stack_lines
            + self.dump_lines
            + self.comment_lines
            + self.summary_lines
            + self.skipped
    }
    /// True when nothing in the input was recognized as strace output
    /// (no event, signal, exit, strace message or summary) although it had
    /// non-empty lines: the CLI's "not an strace log" case. An empty input
    /// is not flagged.
    pub fn not_strace(&self) -> bool {
        let empty = self
            .skipped_by_reason
            .get(&SkipReason::EmptyLine)
            .copied()
            .unwrap_or(0);
        self.lines > empty && self.accounted() - self.skipped == 0
    }
}

/// Parser settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// Longest line kept, in bytes (without the newline); longer lines are
    /// skipped as [`SkipReason::LineTooLong`] without being buffered.
    pub max_line: usize,
    /// Bytes asked from the reader per `read` call.
    pub read_size: usize,
    /// Pid for lines that carry none (from a `-ff` file name).
    pub default_pid: Option<u32>,
    /// Index of this input, stored in `Event::input`.
    pub input: u16,
    /// Threads for [`Parser::feed_reader`] and [`Parser::feed_slice_par`]:
    /// 1 parses on the calling thread; otherwise blocks of `block_size`
    /// bytes are parsed on that many threads (the calling thread and
    /// `threads - 1` workers) and merged in order on the calling thread. 0:
    /// as many as the rayon pool has (the cores, or `RAYON_NUM_THREADS`).
    pub threads: usize,
    /// Bytes per block in the parallel reader path.
    pub block_size: usize,
    /// Keep the text of `-y` fd decorations: `Event::fd_path` and
    /// `Event::ret_path` (default). Off, both stay `None` (the flags
    /// [`Flags::DECORATED`] and [`Flags::FD_FILE`] still tell a decoration
    /// and a file from the rest): a consumer that needs neither saves
    /// decoding and interning ~0.75 strings a line of an `strace -y` log
    /// (`statstorm analyze`: 476.7 M -> 457.5 M instructions on s30.log).
    pub fd_paths: bool,
    /// Read the file times of `-v` stat structs: `Event::mtime` and
    /// `Event::ctime_us` (default). Off, both stay `None` and a successful
    /// stat-family call's text is not searched for them (`statstorm
    /// analyze`, which reads neither: 457.5 M -> 451.4 M instructions on
    /// s30.log).
    pub stat_times: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_line: 1 << 20,
            read_size: 256 << 10,
            default_pid: None,
            input: 0,
            threads: 0,
            block_size: 1 << 20,
            fd_paths: true,
            stat_times: true,
        }
    }
}

/// A `--- SIGNAME ... ---` line.
#[derive(Clone, Debug, PartialEq)]
pub struct Signal<'a> {
    pub pid: u32,
    pub ts_us: Option<i64>,
    /// `SIGCHLD`, or for `--- stopped by SIGSTOP ---` the whole text.
    pub name: &'a [u8],
    pub line: u64,
}

/// How a process ended (`+++ exited with N +++`, `+++ killed by SIG +++`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ExitStatus {
    Exited(i32),
    /// Killed by the named signal (interned); `core` if it dumped core.
    Killed {
        signal: PathId,
        core: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub pid: u32,
    pub ts_us: Option<i64>,
    pub status: ExitStatus,
    pub line: u64,
}

/// Receives the parser's records in input order. A merged
/// unfinished/resumed call is pushed when its resumed line is read (its
/// `ts_us` and `line` are those of the start); calls never resumed are
/// pushed at the process's exit or at the end of the input.
pub trait Sink {
    /// A completed syscall. Return `false` to stop parsing.
    fn event(&mut self, ev: &Event, strings: &Interner) -> bool;
    fn signal(&mut self, _sig: &Signal<'_>) {}
    fn exit(&mut self, _exit: &Exit) {}
    /// A skipped line (1-based line number).
    fn skip(&mut self, _line: u64, _reason: SkipReason) {}
    /// Under `strace -Y`, the command name of process `pid` (as strace
    /// printed it, escapes kept), given before the first event of the line
    /// that shows it, and again whenever it changes (an `execve`).
    fn comm(&mut self, _pid: u32, _comm: &[u8]) {}
    /// The parallel path is about to give the events of one block: these
    /// are the parser's ids of most strings they hold (`u32::MAX` for the
    /// rest), for a sink that wants to fetch its per-string records ahead.
    fn ids_ahead(&mut self, _ids: &[u32]) {}
}

/// Collects events into a vector.
#[derive(Default)]
pub struct VecSink {
    pub events: Vec<Event>,
}

impl Sink for VecSink {
    fn event(&mut self, ev: &Event, _: &Interner) -> bool {
        self.events.push(ev.clone());
        true
    }
}

struct Pending {
    ts_us: Option<i64>,
    line: u64,
    /// `name(` followed by the arguments printed before `<unfinished ...>`.
    text: Vec<u8>,
    name_len: usize,
}

/// Argument positions of a decoded syscall: which argument is the fd or
/// dirfd, the path, the rename target and the flag sets. One row per
/// [`Kind`]; positions follow the Linux x86-64 prototypes
/// (`include/linux/syscalls.h`).
#[derive(Clone, Copy)]
struct ArgSpec {
    fd: i8,
    path: i8,
    path2: i8,
    flags: i8,
    flags2: i8,
    /// A second fd whose `-y` decoration goes in `Event::path2` (the target
    /// fd of dup2/dup3).
    fd2: i8,
}

const fn spec(fd: i8, path: i8, path2: i8, flags: i8, flags2: i8) -> ArgSpec {
    ArgSpec {
        fd,
        path,
        path2,
        flags,
        flags2,
        fd2: -1,
    }
}

impl ArgSpec {
    /// How many leading arguments must be split off to reach every
    /// argument used (and the data buffer of read/write, for truncation).
    fn want(self, k: Kind) -> usize {
        let m = [
            self.fd,
            self.path,
            self.path2,
            self.flags,
            self.flags2,
            self.fd2,
        ]
        .into_iter()
        .max()
        .unwrap_or(-1);
        // fcntl: the command, to tell F_DUPFD from the others.
        let m = if matches!(
            k,
            Kind::Read | Kind::Pread64 | Kind::Write | Kind::Pwrite64 | Kind::Fcntl
        ) {
            m.max(1)
        } else {
            m
        };
        (m + 1) as usize
    }
}

fn arg_spec(k: Kind) -> ArgSpec {
    use Kind::*;
    match k {
        Stat | Lstat => spec(-1, 0, -1, -1, -1),
        Fstat => spec(0, -1, -1, -1, -1),
        Newfstatat | Fstatat64 => spec(0, 1, -1, 3, -1),
        Statx => spec(0, 1, -1, 2, -1),
        Access => spec(-1, 0, -1, 1, -1),
        Faccessat => spec(0, 1, -1, 2, -1),
        Faccessat2 => spec(0, 1, -1, 2, 3),
        Open => spec(-1, 0, -1, 1, -1),
        Openat | Openat2 => spec(0, 1, -1, 2, -1),
        Creat => spec(-1, 0, -1, -1, -1),
        Close | Read | Pread64 | Fchdir | Getdents64 | Write | Pwrite64 => spec(0, -1, -1, -1, -1),
        Accept | Accept4 | Recvfrom | Recvmsg => spec(0, -1, -1, -1, -1),
        Mmap => spec(4, -1, -1, -1, -1),
        // path2: the target the call returned
        Readlink => spec(-1, 0, 1, -1, -1),
        Readlinkat => spec(0, 1, 2, -1, -1),
        Getcwd | Chdir | Unlink | Mkdir | Rmdir => spec(-1, 0, -1, -1, -1),
        Rename => spec(-1, 0, 1, -1, -1),
        Renameat | Renameat2 => spec(0, 1, 3, -1, -1),
        Unlinkat => spec(0, 1, -1, 2, -1),
        Mkdirat => spec(0, 1, -1, -1, -1),
        // fs/file.c: dup(oldfd), dup2(oldfd, newfd), dup3(oldfd, newfd, flags),
        // fs/fcntl.c: fcntl(fd, cmd, arg).
        Dup | Fcntl => spec(0, -1, -1, -1, -1),
        Dup2 | Dup3 => ArgSpec {
            fd2: 1,
            ..spec(0, -1, -1, -1, -1)
        },
        Other => spec(-1, -1, -1, -1, -1),
    }
}

/// What the flag argument `slot` (0: `ArgSpec::flags`, 1: `flags2`) of a
/// call holds, for flags printed as numbers (`-X raw`, `-X verbose`).
fn flag_class(k: Kind, slot: usize) -> args::FlagClass {
    use args::FlagClass::*;
    match (k, slot) {
        (Kind::Access | Kind::Faccessat, _) | (Kind::Faccessat2, 0) => Mode,
        (Kind::Open | Kind::Openat | Kind::Openat2, _) => Open,
        (Kind::Unlinkat, _) => AtRemove,
        _ => At,
    }
}

const KIND_UNKNOWN: u8 = u8::MAX;

/// The line parser and pairing stage for one input.
pub struct Parser {
    dec: Decoder,
    opts: Options,
    stats: InputStats,
    line_no: u64,
    pending: HashMap<u32, Pending>,
    pool: Vec<Vec<u8>>,
    rel_us: i64,
    tod_last: i64,
    tod_days: i64,
    /// The last line's resolved time (`i64::MIN` before the first).
    ts_last: i64,
    in_summary: bool,
    /// The columns of the summary table being read (from its header).
    summary_layout: Option<Layout>,
    /// `-Y`: the last command name given to the sink for each pid.
    comms: HashMap<u32, Vec<u8>>,
    summary: Option<Summary>,
    stopped: bool,
    /// Start of a line that strace's own message cut in two (stderr output:
    /// `clone(...strace: Process 12 attached` then ` <unfinished ...>`).
    carry: Vec<u8>,
    join: Vec<u8>,
    /// With `[pid N]` prefixes: processes seen and not exited, to give
    /// unprefixed lines the pid of the only process left.
    alive: Vec<u32>,
    /// Pids announced by `strace: Process N attached`.
    attached: Vec<u32>,
}

impl Parser {
    pub fn new(name: &str, opts: Options) -> Self {
        Self::with_interner(name, opts, Interner::new())
    }

    /// A parser that adds to an existing interner (several inputs, one
    /// string table).
    pub fn with_interner(name: &str, opts: Options, strings: Interner) -> Self {
        let stats = InputStats {
            name: name.to_string(),
            ..Default::default()
        };
        Parser {
            dec: Decoder {
                fd_paths: opts.fd_paths,
                stat_times: opts.stat_times,
                ..Decoder::new(strings)
            },
            opts,
            stats,
            line_no: 0,
            pending: HashMap::new(),
            pool: Vec::new(),
            rel_us: 0,
            tod_last: 0,
            tod_days: 0,
            ts_last: i64::MIN,
            in_summary: false,
            summary_layout: None,
            comms: HashMap::new(),
            summary: None,
            stopped: false,
            carry: Vec::new(),
            join: Vec::new(),
            alive: Vec::new(),
            attached: Vec::new(),
        }
    }

    pub fn strings(&self) -> &Interner {
        &self.dec.strings
    }

    pub fn stats(&self) -> &InputStats {
        &self.stats
    }

    /// Parses a whole input held in memory. A last line without newline is
    /// parsed as the end of the input.
    pub fn feed_slice<S: Sink>(&mut self, data: &[u8], sink: &mut S) {
        self.stats.bytes += data.len() as u64;
        let mut start = 0;
        for nl in memchr_iter(b'\n', data) {
            if self.stopped {
                return;
            }
            self.line(&data[start..nl], false, sink);
            start = nl + 1;
        }
        if start < data.len() && !self.stopped {
            self.line(&data[start..], true, sink);
        }
    }

    /// Parses a whole input from a reader, `opts.read_size` bytes per read,
    /// on `opts.threads` threads. Memory stays bounded by `max_line` plus
    /// the blocks in flight, whatever the input.
    pub fn feed_reader<R: Read, S: Sink>(&mut self, r: R, sink: &mut S) -> io::Result<()> {
        let threads = match self.opts.threads {
            0 => rayon::current_num_threads(),
            n => n,
        };
        if threads <= 1 {
            self.feed_reader_seq(r, sink)
        } else {
            self.feed_reader_par(r, sink)
        }
    }

    /// The reader path on the calling thread alone.
    fn feed_reader_seq<R: Read, S: Sink>(&mut self, mut r: R, sink: &mut S) -> io::Result<()> {
        let chunk = self.opts.read_size.max(1);
        let max_line = self.opts.max_line;
        // `buf[..filled]` is data; the rest stays initialized space for the
        // next reads (no zeroing per read).
        let mut buf: Vec<u8> = Vec::new();
        let mut filled = 0usize;
        // Bytes before `start` are consumed; `scan` is where the newline
        // search resumes.
        let mut start = 0usize;
        let mut discarding = false;
        let mut err = None;
        loop {
            if self.stopped {
                return Ok(());
            }
            if start > 0 {
                buf.copy_within(start..filled, 0);
                filled -= start;
                start = 0;
            }
            let old = filled;
            if buf.len() < old + chunk {
                buf.resize(old + chunk, 0);
            }
            let n = loop {
                match r.read(&mut buf[old..old + chunk]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // The input ends here; its last bytes are its last
                        // line, as at the end of the input (the parallel
                        // path does the same).
                        err = Some(e);
                        break 0;
                    }
                }
            };
            filled = old + n;
            self.stats.bytes += n as u64;
            if n == 0 {
                break;
            }
            let mut scan = old;
            while let Some(i) = memchr(b'\n', &buf[scan..filled]) {
                let nl = scan + i;
                if discarding {
                    discarding = false;
                } else {
                    self.line(&buf[start..nl], false, sink);
                    if self.stopped {
                        return Ok(());
                    }
                }
                start = nl + 1;
                scan = start;
            }
            if discarding {
                start = filled;
            } else if filled - start > max_line {
                self.too_long(sink);
                discarding = true;
                start = filled;
            }
        }
        if !discarding && start < filled {
            let rest = buf[start..filled].to_vec();
            self.line(&rest, true, sink);
        }
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Ends the input: calls still unfinished become events with an unknown
    /// result. Returns the counts, the summary table if any, and the
    /// interner.
    pub fn finish<S: Sink>(mut self, sink: &mut S) -> (InputStats, Option<Summary>, Interner) {
        let mut left: Vec<(u32, Pending)> = self.pending.drain().collect();
        left.sort_by_key(|(_, p)| p.line);
        for (pid, p) in left {
            if self.stopped {
                break;
            }
            self.never_resumed(pid, p, sink);
        }
        (self.stats, self.summary, self.dec.strings)
    }

    fn skip<S: Sink>(&mut self, reason: SkipReason, sink: &mut S) {
        let st = &mut self.stats;
        st.skipped += 1;
        *st.skipped_by_reason.entry(reason).or_insert(0) += 1;
        if st.first_skips.len() < FIRST_SKIPS {
            st.first_skips.push((self.line_no, reason));
        }
        sink.skip(self.line_no, reason);
    }

    fn too_long<S: Sink>(&mut self, sink: &mut S) {
        self.line_no += 1;
        self.stats.lines += 1;
        self.skip(SkipReason::LineTooLong, sink);
    }

    /// One line, without its newline. `last` marks a final line that had
    /// no newline.
    fn line<S: Sink>(&mut self, line: &[u8], last: bool, sink: &mut S) {
        if line.len() > self.opts.max_line {
            self.too_long(sink);
            return;
        }
        self.line_no += 1;
        self.stats.lines += 1;
        let line = match line {
            [rest @ .., b'\r'] => rest,
            l => l,
        };
        if line.starts_with(COMMENT_PREFIX.as_bytes()) && self.carry.is_empty() {
            self.stats.comment_lines += 1;
            if let Some(n) = lost_calls(line) {
                self.stats.lost_calls = self.stats.lost_calls.saturating_add(n);
            }
            return;
        }
        if line.ends_with(b" attached") || line.ends_with(b" detached") {
            if let Some(i) = memchr::memmem::find(line, b"strace: Process ") {
                if i > 0 {
                    // strace's message cut this line; the rest comes next.
                    self.carry.clear();
                    self.carry.extend_from_slice(&line[..i]);
                    self.stats.notice_lines += 1;
                    self.notice(&line[i..]);
                    return;
                }
            }
        }
        let mut joined = std::mem::take(&mut self.join);
        let line = if self.carry.is_empty() {
            line
        } else {
            joined.clear();
            joined.extend_from_slice(&self.carry);
            joined.extend_from_slice(line);
            self.carry.clear();
            &joined[..]
        };
        let (ts_last, backwards) = (self.ts_last, self.stats.time_backwards);
        let res = self.line_inner(line, sink);
        self.join = joined;
        if let Err(reason) = res {
            // A skipped line's time (often cut short) is not the trace's.
            self.ts_last = ts_last;
            if self.stats.time_backwards != backwards {
                self.stats.time_backwards = backwards;
                if backwards == 0 {
                    self.stats.first_time_backwards = None;
                }
            }
            let reason = if last && reason != SkipReason::EmptyLine {
                SkipReason::TruncatedLastLine
            } else {
                reason
            };
            self.skip(reason, sink);
        }
    }

    /// Records the prefix options (`Prefix::extras`) seen in a line.
    pub(crate) fn note_extras(&mut self, extras: u8) {
        let d = &mut self.stats.detected;
        d.comm |= extras & PRE_COMM != 0;
        d.syscall_numbers |= extras & PRE_SCNO != 0;
        d.instruction_pointers |= extras & PRE_IP != 0;
    }

    /// Gives the sink the `-Y` command name of `line` (whose pid is `pid`)
    /// when it is new for the pid.
    pub(crate) fn note_comm<S: Sink>(&mut self, pid: u32, line: &[u8], sink: &mut S) {
        let Some(c) = line_comm(line) else {
            return;
        };
        if self.comms.get(&pid).is_some_and(|old| old[..] == *c) {
            return;
        }
        self.comms.insert(pid, c.to_vec());
        sink.comm(pid, c);
    }

    fn line_inner<S: Sink>(&mut self, line: &[u8], sink: &mut S) -> Result<(), SkipReason> {
        let body = args::trim(line);
        if body.is_empty() {
            return Err(SkipReason::EmptyLine);
        }
        if self.in_summary || body.starts_with(b"% time") {
            return self.summary_line(line, body);
        }
        // `strace -k`: the frames of the call's stack, each on a line of
        // its own after the call (` > /usr/lib/x86_64-linux-gnu/libc.so.6
        // (__stat+0x14) [0xf1234]`, or ` > unexpected_backtracing_error
        // [0x...]`), with no pid or time.
        if body.starts_with(b"> ") {
            self.stats.stack_lines += 1;
            self.stats.detected.stack_traces = true;
            return Ok(());
        }
        // `-e read=SET`, `-e write=SET`: the data in hex and text, 16
        // bytes a line (` | 00000  7f 45 4c 46 02 01 01 03  00 00 ...
        // .ELF............ |`), after the call.
        if is_dump_line(body) {
            self.stats.dump_lines += 1;
            self.stats.detected.data_dumps = true;
            return Ok(());
        }
        let pre = split_prefix(line, &mut self.dec.tod)?;
        if pre.extras != 0 {
            self.note_extras(pre.extras);
        }
        let pid = self.resolve_pid(pre.pid);
        if pre.extras & PRE_COMM != 0 {
            self.note_comm(pid, line, sink);
        }
        let ts_us = pre.ts.map(|t| self.resolve_ts(t));
        let rest = pre.rest;
        match rest.first() {
            Some(b'+') if rest.starts_with(b"+++ ") => self.exit_line(pid, ts_us, rest, sink),
            Some(b'-') if rest.starts_with(b"--- ") => {
                let inner = &rest[4..];
                let name = if inner.starts_with(b"SIG") {
                    token(inner)
                } else {
                    inner.strip_suffix(b" ---").unwrap_or(inner)
                };
                self.stats.signal_lines += 1;
                sink.signal(&Signal {
                    pid,
                    ts_us,
                    name,
                    line: self.line_no,
                });
                Ok(())
            }
            Some(b'<') if rest.starts_with(b"<... ") => {
                self.resumed_line(pid, ts_us, &rest[5..], sink)
            }
            _ => {
                if rest.starts_with(b"strace: ") || rest.starts_with(b"[ Process PID=") {
                    self.stats.notice_lines += 1;
                    self.notice(rest);
                    return Ok(());
                }
                let nlen = name_len(rest).ok_or(SkipReason::Unrecognized)?;
                if nlen == 0 || rest[nlen] != b'(' {
                    // `strace -c -U name,calls,...`: a table whose header
                    // does not start with `% time`.
                    if Layout::header(body).is_some() {
                        return self.summary_line(line, body);
                    }
                    return Err(SkipReason::Unrecognized);
                }
                let after = &rest[nlen + 1..];
                if let Some(a) = after.strip_suffix(b" <unfinished ...>") {
                    self.stats.unfinished_lines += 1;
                    let mut text = self.pool.pop().unwrap_or_default();
                    text.clear();
                    text.extend_from_slice(&rest[..nlen + 1]);
                    text.extend_from_slice(a);
                    let p = Pending {
                        ts_us,
                        line: self.line_no,
                        text,
                        name_len: nlen,
                    };
                    if let Some(old) = self.pending.insert(pid, p) {
                        // A second start for the same thread: the first was
                        // never resumed.
                        self.never_resumed(pid, old, sink);
                    }
                    return Ok(());
                }
                if let Some(a) = after.strip_suffix(b"<detached ...>") {
                    // strace detached during the call: no result.
                    self.stats.syscall_lines += 1;
                    let line = self.line_no;
                    self.emit(pid, ts_us, line, &rest[..nlen], a, None, None, sink);
                    return Ok(());
                }
                let (args, ret, dur) = self.dec.split_call(after).ok_or(SkipReason::NoResult)?;
                self.stats.syscall_lines += 1;
                let line = self.line_no;
                self.emit(pid, ts_us, line, &rest[..nlen], args, Some(ret), dur, sink);
                Ok(())
            }
        }
    }

    fn resumed_line<S: Sink>(
        &mut self,
        pid: u32,
        _ts: Option<i64>,
        r: &[u8],
        sink: &mut S,
    ) -> Result<(), SkipReason> {
        let end = find_resumed(r).ok_or(SkipReason::Unrecognized)?;
        let name = &r[..end];
        let tail = &r[end + 9..];
        let p = match self.pending.remove(&pid) {
            Some(p) => p,
            // With `[pid N]` prefixes, the first process's lines before its
            // first fork carry no pid (0 here).
            None if self.stats.detected.pid == PidStyle::Bracket => {
                let p = self.pending.remove(&0).ok_or(SkipReason::OrphanResumed)?;
                if self.stats.initial_pid.is_none() {
                    self.stats.initial_pid = Some(pid);
                }
                p
            }
            None => return Err(SkipReason::OrphanResumed),
        };
        if &p.text[..p.name_len] != name {
            self.pending.insert(pid, p);
            return Err(SkipReason::OrphanResumed);
        }
        let p_text_len = p.text.len();
        let mut text = p.text;
        let tail = match (text.last(), tail.first()) {
            (Some(b' '), Some(b' ')) => &tail[1..],
            _ => tail,
        };
        text.extend_from_slice(tail);
        let after = &text[p.name_len + 1..];
        let res = match self.dec.split_call(after) {
            Some((args, ret, dur)) => {
                self.stats.resumed_lines += 1;
                let name = &text[..p.name_len];
                self.emit(pid, p.ts_us, p.line, name, args, Some(ret), dur, sink);
                Ok(())
            }
            None => {
                // The resumed line is unreadable: keep the start as a call
                // without result and skip this line.
                self.stats.never_resumed += 1;
                let name = &text[..p.name_len];
                let args = &text[p.name_len + 1..p_text_len];
                self.emit(pid, p.ts_us, p.line, name, args, None, None, sink);
                Err(SkipReason::NoResult)
            }
        };
        self.pool.push(text);
        res
    }

    /// Remembers pids of `strace: Process N attached` (stderr output).
    fn notice(&mut self, text: &[u8]) {
        if let Some(r) = text.strip_prefix(b"strace: Process ") {
            if let (Some(p), true) = (parse_u32(token(r)), r.ends_with(b" attached")) {
                if self.attached.len() < 1 << 16 {
                    self.attached.push(p);
                }
            }
        }
    }

    fn never_resumed<S: Sink>(&mut self, pid: u32, p: Pending, sink: &mut S) {
        self.stats.never_resumed += 1;
        let name = &p.text[..p.name_len];
        let args = &p.text[p.name_len + 1..];
        self.emit(pid, p.ts_us, p.line, name, args, None, None, sink);
        self.pool.push(p.text);
    }

    fn exit_line<S: Sink>(
        &mut self,
        pid: u32,
        ts_us: Option<i64>,
        rest: &[u8],
        sink: &mut S,
    ) -> Result<(), SkipReason> {
        let inner = rest[4..]
            .strip_suffix(b" +++")
            .ok_or(SkipReason::Unrecognized)?;
        let status = if let Some(n) = inner.strip_prefix(b"exited with ") {
            ExitStatus::Exited(
                args::parse_i64(args::trim(n)).ok_or(SkipReason::Unrecognized)? as i32,
            )
        } else if let Some(s) = inner.strip_prefix(b"killed by ") {
            let sig = token(s);
            let core = s[sig.len()..].windows(11).any(|w| w == b"core dumped");
            ExitStatus::Killed {
                signal: self.dec.strings.intern(sig),
                core,
            }
        } else {
            return Err(SkipReason::Unrecognized);
        };
        self.stats.exit_lines += 1;
        self.alive.retain(|&p| p != pid);
        if let Some(p) = self.pending.remove(&pid) {
            self.never_resumed(pid, p, sink);
        }
        sink.exit(&Exit {
            pid,
            ts_us,
            status,
            line: self.line_no,
        });
        Ok(())
    }

    /// A line of an `strace -c`/`-w`/`-C` table: its header (the columns,
    /// `-U` may pick and order them), its rules (the first gives each
    /// column's place), its rows and its `total` row, which ends it. `line`
    /// is the line as read (rows are cut by position), `body` the same
    /// trimmed.
    fn summary_line(&mut self, line: &[u8], body: &[u8]) -> Result<(), SkipReason> {
        self.stats.detected.summary = true;
        let s = self.summary.get_or_insert_with(Summary::default);
        if !self.in_summary {
            // A `% time` header with a column this code does not know:
            // rows by the default columns.
            let layout = Layout::header(body);
            if layout.is_none() && !body.starts_with(b"% time") {
                return Err(SkipReason::Unrecognized);
            }
            self.summary_layout = layout;
            self.in_summary = true;
            self.stats.summary_lines += 1;
            return Ok(());
        }
        if body.iter().all(|&c| c == b'-' || c == b' ') {
            if let Some(l) = &mut self.summary_layout {
                if !l.has_spans() && !l.rule(line) {
                    // A rule that does not match the header: rows are read
                    // by the default columns.
                    self.summary_layout = None;
                }
            }
            self.stats.summary_lines += 1;
            return Ok(());
        }
        let row = match &self.summary_layout {
            Some(l) if l.has_spans() => l.row(line),
            _ => SummaryRow::parse(body),
        }
        .ok_or(SkipReason::Unrecognized)?;
        self.stats.summary_lines += 1;
        if row.name == "total" {
            s.total = Some(row);
            self.in_summary = false;
            self.summary_layout = None;
        } else {
            s.rows.push(row);
        }
        Ok(())
    }

    /// The pid of a line: its own, the `-ff` file's, or with `[pid N]`
    /// prefixes the only process left (strace drops the prefix while one
    /// process is traced).
    fn resolve_pid(&mut self, pid: PidTok) -> u32 {
        match pid {
            PidTok::Bracket(p) => {
                self.stats.detected.pid = PidStyle::Bracket;
                if !self.alive.contains(&p) {
                    self.alive.push(p);
                    // The first process is the one strace did not announce.
                    if self.stats.initial_pid.is_none() && !self.attached.contains(&p) {
                        self.stats.initial_pid = Some(p);
                    }
                }
                p
            }
            PidTok::Column(p) => {
                if self.stats.detected.pid == PidStyle::None {
                    self.stats.detected.pid = PidStyle::Column;
                }
                p
            }
            PidTok::None => match self.opts.default_pid {
                Some(p) => {
                    self.stats.detected.pid = PidStyle::FileName;
                    p
                }
                None if self.alive.len() == 1 => self.alive[0],
                None => 0,
            },
        }
    }

    /// `resolve_pid` with the block parser's common case inline: a column
    /// pid once the pid style is known returns itself (`resolve_pid` only
    /// records the style on the first one). As a call per event,
    /// `resolve_pid` cost 3.8 M instructions on the 30 MB log.
    #[inline(always)]
    pub(crate) fn resolve_pid_fast(&mut self, pid: PidTok) -> u32 {
        match pid {
            PidTok::Column(p) if self.stats.detected.pid != PidStyle::None => p,
            _ => self.resolve_pid(pid),
        }
    }

    /// Turns a timestamp into microseconds, fixing the format on the first.
    #[inline]
    fn resolve_ts(&mut self, t: RawTs) -> i64 {
        let t = self.resolve_ts_raw(t);
        if t < self.ts_last {
            self.time_backwards(t);
        }
        self.ts_last = t;
        t
    }

    #[cold]
    fn time_backwards(&mut self, t: i64) {
        let st = &mut self.stats;
        st.time_backwards += 1;
        if st.first_time_backwards.is_none() {
            st.first_time_backwards = Some((self.line_no, self.ts_last.abs_diff(t)));
        }
    }

    #[inline(always)]
    fn resolve_ts_raw(&mut self, t: RawTs) -> i64 {
        let det = &mut self.stats.detected;
        match t {
            RawTs::Tod { us, frac } => {
                if det.timestamps == TsKind::None {
                    det.timestamps = if frac {
                        TsKind::TimeOfDayUs
                    } else {
                        TsKind::TimeOfDay
                    };
                }
                // Past midnight the clock restarts; keep time increasing.
                if us + 12 * 3600 * 1_000_000 < self.tod_last {
                    self.tod_days += 1;
                }
                self.tod_last = us;
                us + self.tod_days * 86_400 * 1_000_000
            }
            RawTs::Num { us, secs } => {
                if det.timestamps == TsKind::None {
                    // Epoch seconds are > 1e8 since 1973; `-r` deltas are small.
                    det.timestamps = if secs >= 100_000_000 {
                        TsKind::Epoch
                    } else {
                        TsKind::Relative
                    };
                }
                if det.timestamps == TsKind::Relative {
                    self.rel_us += us;
                    self.rel_us
                } else {
                    us
                }
            }
        }
    }

    /// Builds and pushes one event. `ret` is `None` for calls that never
    /// returned in the trace.
    #[allow(clippy::too_many_arguments)]
    fn emit<S: Sink>(
        &mut self,
        pid: u32,
        ts_us: Option<i64>,
        line: u64,
        name: &[u8],
        argtext: &[u8],
        ret: Option<&[u8]>,
        dur: Option<u64>,
        sink: &mut S,
    ) {
        let mut ev = Event::EMPTY;
        self.dec
            .event(name, argtext, ret, dur, self.opts.input, &mut ev);
        ev.pid = pid;
        ev.ts_us = ts_us;
        ev.line = line;
        self.push_event(&ev, sink);
    }

    fn push_event<S: Sink>(&mut self, ev: &Event, sink: &mut S) {
        if ev.dur_us.is_some() {
            self.stats.detected.durations = true;
        }
        if ev.flags.has(Flags::DECORATED) {
            self.stats.detected.fd_paths = true;
        }
        self.stats.events += 1;
        if !sink.event(ev, &self.dec.strings) {
            self.stopped = true;
        }
    }
}

/// Turns the text of one call into an [`Event`] with strings interned in
/// its own interner. The sequential parser has one; each block of the
/// parallel reader path has its own.
pub(crate) struct Decoder {
    pub(crate) strings: Interner,
    /// [`Options::fd_paths`].
    pub(crate) fd_paths: bool,
    /// [`Options::stat_times`].
    pub(crate) stat_times: bool,
    /// Syscall names to their id (a cache of their own: every line has a
    /// name, and the few hundred names would crowd out `short`'s strings).
    names: ShortCache,
    /// Kind of each interned name, by id (`KIND_UNKNOWN` = not computed).
    kinds: Vec<u8>,
    scratch: Vec<u8>,
    argl: ArgList,
    /// Address and length of the argument text `argl` was split from by
    /// [`Decoder::split_call`]; consumed by the next [`Decoder::event`].
    argl_text: (usize, usize),
    short: ShortCache,
    pub(crate) tod: TodCache,
    /// `Prefix::extras` of the lines split so far, or-ed (the parallel
    /// path reports them per block).
    pub(crate) extras: u8,
}

/// Direct-mapped cache of short strings (1 to 32 bytes: syscall names,
/// `-y` decorations such as `/srv/www/site0`, errno names, short paths) to
/// their id: a lookup compares two words and a length, where the interner
/// hashes the bytes, probes and calls `memcmp` (every line has a name, and
/// most lines of a `-y` log intern the same few directory decorations).
struct ShortCache {
    slots: Box<[ShortEntry]>,
    /// log2 of the slot count.
    bits: u32,
}

/// (first 16 bytes, last 16 bytes, length, id + 1; 0 = empty).
type ShortEntry = (u128, u128, u32, u32);

impl ShortCache {
    /// A cache of `slots` entries (a power of two).
    fn new(slots: usize) -> Self {
        debug_assert!(slots.is_power_of_two());
        ShortCache {
            slots: vec![(0, 0, 0, 0); slots].into_boxed_slice(),
            bits: slots.trailing_zeros(),
        }
    }

    /// The slot of a string of `n` bytes with this head and tail.
    #[inline(always)]
    fn slot(&self, head: u128, tail: u128, n: usize) -> usize {
        (((head as u64)
            ^ ((head >> 64) as u64).rotate_left(21)
            ^ (tail as u64).rotate_left(43)
            ^ n as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> (64 - self.bits)) as usize
    }

    /// The id of a string of 1 to 16 bytes whose [`name_key`] is `head`,
    /// if cached (what [`ShortCache::intern`] would find in its slot).
    #[inline(always)]
    fn get_short(&self, head: u128, n: usize) -> Option<PathId> {
        let e = &self.slots[self.slot(head, 0, n)];
        (e.3 != 0 && e.0 == head && e.1 == 0 && e.2 == n as u32).then(|| PathId(e.3 - 1))
    }

    /// `strings.intern(s)`, through the cache when `s` is short.
    ///
    /// Inlined into each caller (ret, fd, path, path2): as a call it saved
    /// and restored registers around ~305k lookups on s30.log, most of
    /// them hits of a few instructions (analyze 527.0 M -> 521.0 M).
    #[inline(always)]
    fn intern(&mut self, strings: &mut Interner, s: &[u8]) -> PathId {
        let n = s.len();
        if n == 0 || n > 32 {
            return strings.intern(s);
        }
        // Equal (head, tail, length) means equal bytes: up to 16 bytes the
        // head is the zero-padded string (the length tells `ab` from `ab\0`);
        // from 16 on head and tail are its first and last 16 bytes, which
        // cover it.
        let (head, tail) = if n <= 16 {
            (name_key(s), 0)
        } else {
            let w = |b: &[u8]| u128::from_le_bytes(b.try_into().unwrap());
            (w(&s[..16]), w(&s[n - 16..]))
        };
        let e = &mut self.slots[self.slot(head, tail, n)];
        if e.3 != 0 && e.0 == head && e.1 == tail && e.2 == n as u32 {
            return PathId(e.3 - 1);
        }
        let id = strings.intern(s);
        if id.0 < u32::MAX - 1 {
            *e = (head, tail, n as u32, id.0 + 1);
        }
        id
    }
}

impl Decoder {
    pub(crate) fn new(strings: Interner) -> Self {
        Decoder {
            strings,
            fd_paths: true,
            stat_times: true,
            names: ShortCache::new(256),
            kinds: Vec::new(),
            scratch: Vec::new(),
            argl: ArgList::default(),
            argl_text: (0, 0),
            // 512 slots: s30.log's 1 MB blocks each see a hundred-odd
            // `AT_FDCWD</srv/www/siteN>` decorations besides the short
            // paths; 64 slots missed often (analyze 529.2 M -> 527.0 M at
            // 512; 1024: 527.7 M, 2048: 529.4 M).
            short: ShortCache::new(512),
            tod: TodCache::default(),
            extras: 0,
        }
    }

    /// [`split_call`], keeping the argument split for the next
    /// [`Decoder::event`] on the same text.
    #[inline(always)]
    pub(crate) fn split_call<'a>(
        &mut self,
        after: &'a [u8],
    ) -> Option<(&'a [u8], &'a [u8], Option<u64>)> {
        let r = split_call(after, &mut self.argl);
        if let Some((a, _, _)) = r {
            self.argl_text = (a.as_ptr() as usize, a.len());
        }
        r
    }

    /// The id and kind of a syscall name: the id through the names' own
    /// short-string cache (most lines skip the interner for the name), the
    /// kind from `kinds`, computed once per id.
    ///
    /// A name of up to 16 bytes found in the cache is looked up inline
    /// (the call to `ShortCache::intern` took 74 instructions per line).
    fn intern_kind(&mut self, name: &[u8]) -> (PathId, Kind) {
        let n = name.len();
        if (1..=16).contains(&n) {
            if let Some(id) = self.names.get_short(name_key(name), n) {
                if let Some(&k) = self.kinds.get(id.0 as usize) {
                    if k != KIND_UNKNOWN {
                        return (id, kind_from_u8(k));
                    }
                }
            }
        }
        let id = self.names.intern(&mut self.strings, name);
        let i = id.0 as usize;
        if i >= self.kinds.len() {
            self.kinds.resize(i + 1, KIND_UNKNOWN);
        }
        let k = self.kinds[i];
        if k != KIND_UNKNOWN {
            return (id, kind_from_u8(k));
        }
        let kind = Kind::from_name(name);
        self.kinds[i] = kind as u8;
        (id, kind)
    }

    /// Decodes one call into `ev`, which must be [`Event::EMPTY`]; `pid`,
    /// `ts_us` and `line` are left for the caller. Strings are interned in
    /// the order name, result, fd path, path, path2 (the parallel merge
    /// relies on it). Written in place: the parallel path decodes straight
    /// into a block's record.
    pub(crate) fn event(
        &mut self,
        name: &[u8],
        argtext: &[u8],
        ret: Option<&[u8]>,
        dur: Option<u64>,
        input: u16,
        ev: &mut Event,
    ) {
        let split =
            std::mem::take(&mut self.argl_text) == (argtext.as_ptr() as usize, argtext.len());
        let (name_id, kind) = self.intern_kind(name);
        ev.dur_us = dur;
        ev.kind = kind;
        ev.name = name_id;
        ev.input = input;
        if let Some(r) = ret {
            self.decode_ret(r, ev, name);
        }
        if kind != Kind::Other {
            self.decode_args(argtext, split, ev);
        } else if name == b"execve" || name == b"execveat" {
            self.decode_exec(argtext, name.len() == 8, ev);
        }
    }

    /// An `execve`/`execveat`: the program and its argument list in
    /// `Event::path2` (the path, then each argument, each followed by a
    /// NUL byte; [`args::exec_argv`]), for what a model reads from a
    /// command line. The call makes no operation: `path` stays unset.
    fn decode_exec(&mut self, argtext: &[u8], at: bool, ev: &mut Event) {
        let first = usize::from(at);
        args::split_args(argtext, &mut self.argl, first + 2);
        let (Some(path), Some(argv)) = (
            self.argl.get(argtext, first),
            self.argl.get(argtext, first + 1),
        ) else {
            return;
        };
        let Some((path, _)) = args::decode_string_ref(path, &mut self.scratch) else {
            return;
        };
        let mut line = path.to_vec();
        line.push(0);
        if args::exec_argv(argv, &mut line) {
            ev.path2 = Some(self.short.intern(&mut self.strings, &line));
        }
    }
    fn decode_ret(&mut self, r: &[u8], ev: &mut Event, name: &[u8]) {
        // A one-digit result (`= 0`: 136k of s30.log's 201k results) is the
        // whole text: no blank, `?`, `<` or errno to look for.
        if let &[c @ b'0'..=b'9'] = r {
            ev.ret = Ret::Ok((c - b'0') as i64);
            return;
        }
        // A decorated fd of one or two digits (`= 3</lib/x/libz.so.1>`: 13k
        // of s30.log's results, every open): the whole text when the
        // decoration has no `<` or `>` inside (the general steps count
        // their nesting, blanks included): their four byte loops over the
        // decoration took ~400 instructions a result.
        let (fd, deco) = match r {
            [c @ b'0'..=b'9', b'<', deco @ .., b'>'] => ((c - b'0') as i64, deco),
            [c @ b'1'..=b'9', d @ b'0'..=b'9', b'<', deco @ .., b'>'] => {
                (((c - b'0') * 10 + (d - b'0')) as i64, deco)
            }
            _ => {
                // A number alone (`= 832`, mmap's `= 0x7f4bec616000`: 25k of
                // s30.log's results): what the general steps find for a
                // text without blanks or `<`, and `parse_i64` accepts no
                // other; their token, decoration and errno steps took ~350
                // instructions a result. Anything else (an errno, a flag
                // comment) fails within a few bytes.
                if let Some(v) = args::parse_i64(r) {
                    ev.ret = Ret::Ok(v);
                    return;
                }
                return self.decode_ret_any(r, ev, name);
            }
        };
        if args::find2(deco, b'<', b'>').is_some() {
            return self.decode_ret_any(r, ev, name);
        }
        ev.ret = Ret::Ok(fd);
        // Under `-Y` a returned pid carries its process's command name
        // (`getpid() = 1234<php>`): not an fd's decoration, and not a
        // string of the trace.
        if ev.kind == Kind::Other && returns_pid(name) {
            return;
        }
        ev.flags.set(Flags::DECORATED);
        if self.fd_paths {
            let d = args::decode_deco_ref(deco, &mut self.scratch);
            ev.ret_path = Some(self.short.intern(&mut self.strings, d));
        }
    }

    /// [`Decoder::decode_ret`] for every shape.
    fn decode_ret_any(&mut self, r: &[u8], ev: &mut Event, name: &[u8]) {
        let tok = token(r);
        if tok == b"?" {
            // `= ? ERESTARTSYS (To be restarted ...)`: interrupted, restarted.
            let rest = skip_ws(&r[1..]);
            if rest.first() == Some(&b'E') {
                ev.ret = Ret::Err(Errno(self.short.intern(&mut self.strings, token(rest))));
            }
            return;
        }
        // `6</dev/null<char 1:3>>` (-yy) has a blank inside the decoration.
        // Short haystacks: a plain loop beats memchr's dispatch.
        let tok = match tok.iter().position(|&c| c == b'<') {
            Some(i) => {
                let mut depth = 0usize;
                let mut end = r.len();
                for (j, &c) in r.iter().enumerate().skip(i) {
                    match c {
                        b'<' => depth += 1,
                        b'>' => {
                            depth -= 1;
                            if depth == 0 {
                                end = j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                &r[..end]
            }
            None => tok,
        };
        let (num, deco) = args::split_deco(tok);
        let Some(v) = args::parse_i64(num) else {
            return;
        };
        if v == -1 {
            let rest = skip_ws(&r[tok.len()..]);
            if rest.first() == Some(&b'E') {
                ev.ret = Ret::Err(Errno(self.short.intern(&mut self.strings, token(rest))));
                return;
            }
        }
        ev.ret = Ret::Ok(v);
        if let Some(d) = deco.filter(|_| !(ev.kind == Kind::Other && returns_pid(name))) {
            ev.flags.set(Flags::DECORATED);
            if self.fd_paths {
                let d = args::decode_deco_ref(d, &mut self.scratch);
                ev.ret_path = Some(self.short.intern(&mut self.strings, d));
            }
        }
    }

    /// `split`: `self.argl` already holds the arguments of `text`.
    fn decode_args(&mut self, text: &[u8], split: bool, ev: &mut Event) {
        let sp = arg_spec(ev.kind);
        if !split {
            args::split_args(text, &mut self.argl, sp.want(ev.kind));
        }
        // `argl` borrowed beside the other fields: taking it out of `self`
        // and putting it back copied its 72 bytes twice per event (analyze
        // s30.log 484.7 M -> 481.0 M).
        let Decoder {
            argl: al,
            short,
            strings,
            scratch,
            fd_paths,
            stat_times,
            ..
        } = self;
        let get = |i: i8| {
            if i < 0 {
                None
            } else {
                al.get(text, i as usize)
            }
        };
        if let Some(a) = get(sp.fd) {
            let f = args::parse_fd(a);
            if f.at_fdcwd {
                ev.flags.set(Flags::AT_FDCWD);
            } else if !(ev.kind == Kind::Mmap && f.fd == Some(-1)) {
                ev.fd = f.fd;
            }
            if let Some(d) = f.deco {
                ev.flags.set(Flags::DECORATED);
                // `/...`, or an escape that may decode to `/` (`-xx`).
                let file = match d.first() {
                    Some(b'/') => true,
                    Some(b'\\') => args::decode_deco_ref(d, scratch).first() == Some(&b'/'),
                    _ => false,
                };
                if file {
                    ev.flags.set(Flags::FD_FILE);
                }
                if *fd_paths {
                    let d = args::decode_deco_ref(d, scratch);
                    ev.fd_path = Some(short.intern(strings, d));
                }
            }
            if f.deleted {
                ev.flags.set(Flags::FD_DELETED);
            }
        }
        if let Some(a) = get(sp.path) {
            if let Some((p, trunc)) = args::decode_string_ref(a, scratch) {
                ev.path = Some(short.intern(strings, p));
                if trunc {
                    ev.flags.set(Flags::TRUNCATED);
                }
            }
        }
        if let Some(a) = get(sp.path2) {
            if let Some((p, trunc)) = args::decode_string_ref(a, scratch) {
                if ev.kind.is_readlink() {
                    // the link's target, kept only when printed whole
                    // (strace cuts strings at `-s`, 32 bytes by default)
                    if !trunc {
                        ev.path2 = Some(short.intern(strings, p));
                    }
                } else {
                    ev.path2 = Some(short.intern(strings, p));
                    if trunc {
                        ev.flags.set(Flags::TRUNCATED);
                    }
                }
            }
        }
        if let Some(a) = get(sp.fd2) {
            if let Some(d) = args::parse_fd(a).deco {
                let d = args::decode_deco_ref(d, scratch);
                ev.path2 = Some(short.intern(strings, d));
            }
        }
        if ev.kind == Kind::Fcntl && get(1).is_some_and(args::is_fcntl_dupfd) {
            ev.flags.set(Flags::F_DUPFD);
        }
        for (slot, fi) in [sp.flags, sp.flags2].into_iter().enumerate() {
            if let Some(a) = get(fi) {
                // openat2 passes `{flags=O_RDONLY|O_CLOEXEC, resolve=...}`.
                let found = match a.first() {
                    Some(b'{') => memchr::memmem::find(a, b"flags="),
                    _ => None,
                };
                let a = match found {
                    Some(i) => {
                        let v = &a[i + 6..];
                        let e = v
                            .iter()
                            .position(|&c| c == b',' || c == b'}')
                            .unwrap_or(v.len());
                        &v[..e]
                    }
                    _ => a,
                };
                // `-X verbose` (`0x100 /* AT_SYMLINK_NOFOLLOW */`): the
                // names in the comment; `-X raw` (`0x100`): the number,
                // read by what the argument holds.
                let bits = if a.len() > 1 && a[0].is_ascii_digit() {
                    match args::split_comment(a).1 {
                        Some(names) => args::parse_flags(names),
                        None => args::numeric_flags(a, flag_class(ev.kind, slot)),
                    }
                } else {
                    args::parse_flags(a)
                };
                ev.flags.set(bits);
            }
        }
        if matches!(
            ev.kind,
            Kind::Read | Kind::Pread64 | Kind::Write | Kind::Pwrite64
        ) && get(1).is_some_and(|a| a.ends_with(b"\"..."))
        {
            ev.flags.set(Flags::TRUNCATED);
        }
        if *stat_times && ev.kind.is_stat_family() && matches!(ev.ret, Ret::Ok(_)) {
            ev.mtime = stat_mtime(text);
            if ev.mtime.is_some() {
                ev.ctime_us = stat_ctime_us(text);
            }
        }
    }
}

/// `st_mtime=N` or statx's `stx_mtime={tv_sec=N` in a stat-family call's
/// arguments: strace prints them with `-v` only (the abbreviated struct
/// ends in `...}`, which is checked first: no search on ordinary logs).
fn stat_mtime(text: &[u8]) -> Option<i64> {
    let end = memchr::memrchr(b'}', text)?;
    if text[..end].ends_with(b"...") {
        return None;
    }
    let v = if let Some(i) = memchr::memmem::find(text, b"st_mtime=") {
        &text[i + 9..]
    } else {
        let i = memchr::memmem::find(text, b"stx_mtime={tv_sec=")?;
        &text[i + 18..]
    };
    leading_i64(v)
}

/// `st_ctime=S` with `st_ctime_nsec=N`, or statx's
/// `stx_ctime={tv_sec=S, tv_nsec=N}`, as epoch microseconds (`-v` only,
/// like [`stat_mtime`]; without the nanoseconds, the whole second).
fn stat_ctime_us(text: &[u8]) -> Option<i64> {
    let (secs, nsec) = if let Some(i) = memchr::memmem::find(text, b"st_ctime=") {
        let rest = &text[i + 9..];
        let nsec = memchr::memmem::find(rest, b"st_ctime_nsec=").map(|j| &rest[j + 14..]);
        (rest, nsec)
    } else {
        let i = memchr::memmem::find(text, b"stx_ctime={tv_sec=")?;
        let rest = &text[i + 18..];
        let nsec = memchr::memmem::find(rest, b"tv_nsec=").map(|j| &rest[j + 8..]);
        (rest, nsec)
    };
    let s = leading_i64(secs)?;
    let ns = nsec
        .and_then(leading_i64)
        .filter(|n| (0..1_000_000_000).contains(n));
    s.checked_mul(1_000_000)?
        .checked_add(ns.unwrap_or(0) / 1000)
}

/// The decimal integer (optionally negative, at most 18 digits) at the
/// start of `v`.
fn leading_i64(v: &[u8]) -> Option<i64> {
    let (neg, v) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        _ => (false, v),
    };
    let n = v.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 18 {
        return None;
    }
    let x: i64 = std::str::from_utf8(&v[..n]).ok()?.parse().ok()?;
    Some(if neg { -x } else { x })
}

/// A name of at most 16 bytes as a zero-padded little-endian `u128`, built
/// from (overlapping) word loads: a byte copy into a stack buffer read back
/// as one word stalls on store forwarding, and this runs once per line.
#[inline]
fn name_key(name: &[u8]) -> u128 {
    let n = name.len();
    debug_assert!(n <= 16);
    let w8 = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap());
    let w4 = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap()) as u64;
    let (lo, hi) = if n >= 8 {
        // bytes 8..n: the last 8 bytes shifted down past those of 0..8
        let hi = if n > 8 {
            w8(&name[n - 8..]) >> ((16 - n) * 8)
        } else {
            0
        };
        (w8(&name[..8]), hi)
    } else if n >= 4 {
        // two overlapping 4-byte words: the shared bytes are equal
        (w4(&name[..4]) | w4(&name[n - 4..]) << ((n - 4) * 8), 0)
    } else {
        let mut v = 0u64;
        for (i, &b) in name.iter().enumerate() {
            v |= (b as u64) << (i * 8);
        }
        (v, 0)
    };
    (hi as u128) << 64 | lo as u128
}

/// The pid part of a line's prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PidTok {
    None,
    /// `strace -f -o FILE`: `1234  ...`
    Column(u32),
    /// `strace -f` to stderr: `[pid  1234] ...`
    Bracket(u32),
}

/// A timestamp as printed, before the per-input state (format, `-r` sum,
/// midnight) turns it into microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawTs {
    /// `HH:MM:SS[.frac]` in microseconds of the day.
    Tod { us: i64, frac: bool },
    /// `SECS.frac`: epoch time (`-ttt`) or a delta (`-r`).
    Num { us: i64, secs: i64 },
}

#[derive(Debug, PartialEq)]
pub(crate) struct Prefix<'a> {
    pub pid: PidTok,
    pub ts: Option<RawTs>,
    /// The rest of the line, trimmed.
    pub rest: &'a [u8],
    /// `PRE_*` bits: the optional parts the line had.
    pub extras: u8,
}

/// `Prefix::extras`: a command name after the pid (`-Y`) ...
pub(crate) const PRE_COMM: u8 = 1;
/// ... a syscall number (`-n`) ...
pub(crate) const PRE_SCNO: u8 = 2;
/// ... an instruction pointer (`-i`).
pub(crate) const PRE_IP: u8 = 4;

/// Splits `[pid N] ` or a pid column and a timestamp off a line. The same
/// for every path, whatever `tod` holds (a memo of the last time of day
/// read, see [`TodCache`]).
#[inline]
pub(crate) fn split_prefix<'a>(
    line: &'a [u8],
    tod: &mut TodCache,
) -> Result<Prefix<'a>, SkipReason> {
    match prefix_pid_tt(line, tod) {
        Some(p) => Ok(p),
        None => split_prefix_general(line),
    }
}

/// The last `HH:MM:SS` word [`prefix_pid_tt`] read and its seconds of the
/// day: lines come in time order, so most lines repeat the line before's
/// second, and its digit checks and value are not computed again (they
/// were ~20 instructions a line).
#[derive(Clone, Copy, Default)]
pub(crate) struct TodCache {
    /// 0 when empty: a word that passed the colon test is never 0.
    word: u64,
    secs: i64,
}

/// [`split_prefix`] for every shape: `[pid N] ` or a pid column `N `
/// (each with `<comm>` after the pid under `-Y`), a timestamp (with `-r`'s
/// `(+ delta)` after it under `-t -r`), then `-n`'s `[ 262] ` and `-i`'s
/// `[00007f4bec616000] `, in the order strace's `printleader`
/// (src/strace.c) prints them. A part that is not there is skipped; the
/// delta beside an absolute time is dropped (the time says more).
#[inline(never)]
fn split_prefix_general(line: &[u8]) -> Result<Prefix<'_>, SkipReason> {
    let mut rest = line;
    let mut pid = PidTok::None;
    let mut extras = 0;
    if let Some(r) = rest.strip_prefix(b"[pid") {
        let r = skip_ws(r);
        let nd = r.iter().take_while(|c| c.is_ascii_digit()).count();
        let end = comm_end(r, nd).ok_or(SkipReason::Unrecognized)?;
        if r.get(end) != Some(&b']') {
            return Err(SkipReason::Unrecognized);
        }
        if end > nd {
            extras |= PRE_COMM;
        }
        pid = PidTok::Bracket(parse_u32(&r[..nd]).ok_or(SkipReason::Unrecognized)?);
        rest = skip_ws(&r[end + 1..]);
    } else {
        rest = skip_ws(rest);
        // A pid column: digits (and `<comm>`), then a blank. Not more than
        // Linux's largest pid (PID_MAX_LIMIT, 4194304, include/linux/threads.h):
        // a larger number is a time (`--timestamps=unix,s`).
        let nd = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        if nd > 0 && parse_u32(&rest[..nd]).is_some_and(|p| p <= 4_194_304) {
            if let Some(end) = comm_end(rest, nd) {
                if matches!(rest.get(end), Some(b' ' | b'\t')) {
                    pid = PidTok::Column(parse_u32(&rest[..nd]).ok_or(SkipReason::BadTimestamp)?);
                    if end > nd {
                        extras |= PRE_COMM;
                    }
                    rest = skip_ws(&rest[end..]);
                }
            }
        }
    }
    let mut ts = None;
    if rest.first().is_some_and(u8::is_ascii_digit) {
        let tok = token(rest);
        ts = Some(raw_ts(tok).ok_or(SkipReason::BadTimestamp)?);
        rest = &rest[tok.len()..];
        // `-t -r`: `HH:MM:SS (+     0.000604) `.
        let r = skip_ws(rest);
        if let Some(d) = r.strip_prefix(b"(+") {
            if let Some(e) = memchr(b')', d) {
                if args::parse_secs_us(skip_ws(&d[..e])).is_some() {
                    rest = &d[e + 1..];
                }
            }
        }
    }
    // `-n` and `-i`: up to two bracketed numbers, the syscall's first.
    for first in [true, false] {
        let r = skip_ws(rest);
        let Some(inner) = r.strip_prefix(b"[").and_then(|i| {
            let e = i.iter().take(24).position(|&c| c == b']')?;
            Some(&i[..e])
        }) else {
            break;
        };
        let Some(bit) = bracket_extra(inner, first) else {
            break;
        };
        extras |= bit;
        rest = &r[inner.len() + 2..];
        if bit == PRE_IP {
            break;
        }
    }
    Ok(Prefix {
        pid,
        ts,
        rest: args::trim(rest),
        extras,
    })
}

/// The end of a pid's digits `s[..nd]` and of the `<comm>` that `-Y`
/// prints right after them (strace escapes `<` and `>` inside the name, so
/// the first `>` ends it); `None` for a `<` without its `>`.
fn comm_end(s: &[u8], nd: usize) -> Option<usize> {
    if nd == 0 || s.get(nd) != Some(&b'<') {
        return Some(nd);
    }
    let e = memchr(b'>', &s[nd..])?;
    Some(nd + e + 1)
}

/// The command name `-Y` prints after a line's pid (`1234<php> `,
/// `[pid 1234<php>] `), as printed.
pub(crate) fn line_comm(line: &[u8]) -> Option<&[u8]> {
    let r = skip_ws(line.strip_prefix(b"[pid").unwrap_or(line));
    let nd = r.iter().take_while(|c| c.is_ascii_digit()).count();
    let end = comm_end(r, nd)?;
    (end > nd).then(|| &r[nd + 1..end - 1])
}

/// What a bracketed word after the time is: `-n`'s syscall number
/// (`[%4u]`, `[????]` when unknown; only as the first word) or `-i`'s
/// instruction pointer (8 or 16 hex digits, or as many `?`). `None` for
/// anything else (`[ Process PID=1234 runs in 32 bit mode. ]`).
fn bracket_extra(inner: &[u8], first: bool) -> Option<u8> {
    let t = skip_ws(inner);
    let digits = !t.is_empty() && t.iter().all(u8::is_ascii_digit);
    let ip_len = matches!(inner.len(), 8 | 16);
    if first && (inner == b"????" || (digits && (t.len() < inner.len() || !ip_len))) {
        return Some(PRE_SCNO);
    }
    if ip_len && (inner.iter().all(u8::is_ascii_hexdigit) || inner.iter().all(|&c| c == b'?')) {
        return Some(PRE_IP);
    }
    None
}

/// The prefix of `strace -f -tt -o FILE` lines, `PID  HH:MM:SS.uuuuuu `,
/// by position: the shape of most lines of most logs, read here without
/// the general code's token scans. `None` for any other shape (and for a
/// line under 8 bytes or a pid of 8 or more digits); for this shape the
/// general code gives the same prefix.
///
/// The pid, the time of day and the microseconds are each read from one
/// 8-byte word (digit checks and values by SWAR steps, [`digits8`]):
/// the byte loops and checks took ~250 instructions a line (54 M of the
/// 691 M of `analyze` on the 30 MB log).
#[inline]
fn prefix_pid_tt<'a>(line: &'a [u8], tod: &mut TodCache) -> Option<Prefix<'a>> {
    let w = u64::from_le_bytes(line.get(..8)?.try_into().ok()?);
    // The pid: the digits before the first other byte of the word.
    let i = (nondigit_bytes(w).trailing_zeros() / 8) as usize;
    if i == 0 || i == 8 {
        return None;
    }
    // The pid's digits at the top of a word of `0` bytes.
    let s = 8 * (8 - i);
    let pid = digits8((w << s) | (ZEROS8 & ((1 << s) - 1))) as u32;
    // No pid is above PID_MAX_LIMIT (see `split_prefix_general`).
    if pid > 4_194_304 {
        return None;
    }
    let mut j = i;
    while matches!(line.get(j), Some(b' ' | b'\t')) {
        j += 1;
    }
    if j == i {
        return None;
    }
    let t = line.get(j..j + 16)?;
    // `HH:MM:SS` and `.uuuuuu `, first byte lowest.
    let w0 = u64::from_le_bytes(t[..8].try_into().ok()?);
    let w1 = u64::from_le_bytes(t[8..].try_into().ok()?);
    const COLONS: u64 = 0x0000_ff00_00ff_0000;
    if w0 & COLONS != 0x0000_3a00_003a_0000
        || w1 as u8 != b'.'
        || !matches!((w1 >> 56) as u8, b' ' | b'\t')
    {
        return None;
    }
    let secs = if w0 == tod.word {
        tod.secs
    } else {
        // The colons read as `0`.
        let hms = (w0 & !COLONS) | (ZEROS8 & COLONS);
        if nondigit_bytes(hms) != 0 {
            return None;
        }
        // Each byte's digit times ten plus the next: HH in byte 0, MM in
        // byte 3, SS in byte 6 (at most 99, no carry between bytes).
        let x = hms - ZEROS8;
        let p = x * 10 + (x >> 8);
        let (h, m, sec) = (p & 0xff, (p >> 24) & 0xff, (p >> 48) & 0xff);
        let secs = (h * 3600 + m * 60 + sec) as i64;
        *tod = TodCache { word: w0, secs };
        secs
    };
    // `.` and the blank dropped: `00uuuuuu`.
    let frac = (w1 << 8) & !0xffff | 0x3030;
    if nondigit_bytes(frac) != 0 {
        return None;
    }
    let us = digits8(frac) as i64;
    let rest = args::trim(&line[j + 15..]);
    // `-n`/`-i` words or `-r`'s delta after the time: the general steps.
    if matches!(rest.first(), Some(b'[' | b'(')) {
        return None;
    }
    Some(Prefix {
        pid: PidTok::Column(pid),
        ts: Some(RawTs::Tod {
            us: secs * 1_000_000 + us,
            frac: true,
        }),
        rest,
        extras: 0,
    })
}

const ZEROS8: u64 = 0x3030_3030_3030_3030;

/// The high bit (bits 4-7 at most) of each byte of `w` that is not an
/// ASCII digit set, the digits' bytes zero: a digit's high nibble is 3 and
/// it stays 3 after adding 6. The sum can carry from a byte >= 0xfa into
/// the next, which changes only bytes after a non-digit.
#[inline]
fn nondigit_bytes(w: u64) -> u64 {
    const HI: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    ((w & HI) ^ ZEROS8) | ((w.wrapping_add(0x0606_0606_0606_0606) & HI) ^ ZEROS8)
}

/// The value of eight ASCII digits (checked by the caller), the first
/// (lowest) byte the highest digit: pairs, quads, then all eight.
#[inline]
fn digits8(w: u64) -> u64 {
    let x = w - ZEROS8;
    let x = (x * 10 + (x >> 8)) & 0x00ff_00ff_00ff_00ff;
    let x = (x * 100 + (x >> 16)) & 0x0000_ffff_0000_ffff;
    (x * 10_000 + (x >> 32)) & 0xffff_ffff
}

fn raw_ts(tok: &[u8]) -> Option<RawTs> {
    // `-tt`'s `HH:MM:SS.uuuuuu`, by position (the general parse below gives
    // the same value).
    if let [h1, h2, b':', m1, m2, b':', s1, s2, b'.', f @ ..] = tok {
        if f.len() == 6 {
            let d = |c: u8| c.wrapping_sub(b'0') as i64;
            let digits = [*h1, *h2, *m1, *m2, *s1, *s2];
            if digits.iter().chain(f).all(u8::is_ascii_digit) {
                let secs = (d(*h1) * 10 + d(*h2)) * 3600
                    + (d(*m1) * 10 + d(*m2)) * 60
                    + d(*s1) * 10
                    + d(*s2);
                let us = f.iter().fold(0i64, |v, &c| v * 10 + d(c));
                return Some(RawTs::Tod {
                    us: secs * 1_000_000 + us,
                    frac: true,
                });
            }
        }
    }
    let (int, frac) = match memchr(b'.', tok) {
        Some(d) => (&tok[..d], Some(&tok[d + 1..])),
        None => (tok, None),
    };
    let frac_us = match frac {
        Some(f) => args::frac_us(f)?,
        None => 0,
    };
    if memchr(b':', int).is_some() {
        let mut secs: i64 = 0;
        let mut parts = 0;
        for p in int.split(|&c| c == b':') {
            if p.is_empty() || p.len() > 2 {
                return None;
            }
            secs = secs * 60 + args::parse_i64(p)?;
            parts += 1;
        }
        if parts != 3 {
            return None;
        }
        return Some(RawTs::Tod {
            us: secs * 1_000_000 + frac_us,
            frac: frac.is_some(),
        });
    }
    // Whole seconds only as epoch time (`--timestamps=unix,s`: nine digits
    // or more, 1973 on); a delta always has its fraction.
    if frac.is_none() && int.len() < 9 {
        return None;
    }
    if int.is_empty() || int.len() > 12 || !int.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let secs = args::parse_i64(int)?;
    Some(RawTs::Num {
        us: secs * 1_000_000 + frac_us,
        secs,
    })
}

fn kind_from_u8(k: u8) -> Kind {
    // `Kind::ALL[i]` has discriminant `i + 1` (`Other` is 0).
    Kind::ALL
        .get((k as usize).wrapping_sub(1))
        .copied()
        .unwrap_or(Kind::Other)
}

/// Splits the text after `name(` into (arguments, result, duration), and
/// the arguments into `argl` on the way.
#[inline(always)]
fn split_call<'a>(
    after: &'a [u8],
    argl: &mut ArgList,
) -> Option<(&'a [u8], &'a [u8], Option<u64>)> {
    let close = args::scan_call(after, argl)?;
    let args_text = &after[..close];
    let tail = &after[close + 1..];
    // `) = R <S.uuuuuu>` with one blank each side of `=` (what strace
    // prints): no blank to trim from either end of `R <dur>`, one before
    // `<dur>`, so `R` is a slice by position; the skip, strip and three
    // trims of the general steps below took ~45 instructions a line
    // (9 M of 618 M on the 30 MB log).
    let fast = match tail {
        [b' ', b'=', b' ', r @ ..]
            if !matches!(r.first(), Some(b' ' | b'\t'))
                && r.len() > 11
                && r[r.len() - 11] == b' ' =>
        {
            tail_dur(r).map(|d| (&r[..r.len() - 11], d))
        }
        _ => None,
    };
    let (ret, dur) = match fast {
        Some((r, d)) if !matches!(r.last(), Some(b' ' | b'\t' | b'\r')) => (r, Some(d)),
        _ => {
            let rest = skip_ws(tail);
            let rest = rest.strip_prefix(b"=")?;
            let ret = args::trim(rest);
            match tail_dur(ret) {
                Some(d) => (args::trim(&ret[..ret.len() - 10]), Some(d)),
                None => split_dur(ret),
            }
        }
    };
    if ret.is_empty() {
        return None;
    }
    Some((args_text, ret, dur))
}

/// Splits a `<dur>` (`-T`) off the end of a result: (the result before it,
/// trimmed, and the duration in microseconds); the result as it is when it
/// has none.
fn split_dur(ret: &[u8]) -> (&[u8], Option<u64>) {
    if ret.last() == Some(&b'>') {
        // `<dur>` is the last few bytes: a plain backward loop.
        if let Some(lt) = ret.iter().rposition(|&c| c == b'<') {
            let t = &ret[lt + 1..ret.len() - 1];
            if let Some(d) = args::parse_secs_us(t) {
                return (args::trim(&ret[..lt]), Some(d));
            }
            // `--syscall-times=s`: whole seconds (`<0>`), after a blank
            // (a `-Y` pid or `-y` fd decoration of digits has none).
            if lt > 0 && ret[lt - 1] == b' ' {
                if let Some(v) = parse_u32(t) {
                    return (args::trim(&ret[..lt]), Some(v as u64 * 1_000_000));
                }
            }
        }
    }
    (ret, None)
}

/// The duration of a result ending in `<S.uuuuuu>` (the 10 bytes strace
/// prints for any call under ten seconds), read as one word: `None` for
/// any other ending, which [`split_dur`] then reads. For this ending
/// [`split_dur`] finds the same `<` (none of the 9 bytes after it is one)
/// and the same value; its backward search and byte loop took 100
/// instructions a line, 17 M of the 691 M of `analyze` on the 30 MB log.
#[inline(always)]
fn tail_dur(ret: &[u8]) -> Option<u64> {
    // The last 10 bytes as one array: one length check instead of one per
    // index (and inlined: 42 instructions a call, 186,557 calls on the 30
    // MB slice).
    let t: &[u8; 10] = ret.get(ret.len().checked_sub(10)?..)?.try_into().ok()?;
    if t[0] != b'<' || t[9] != b'>' {
        return None;
    }
    // `S.uuuuuu`, first byte lowest.
    let w = u64::from_le_bytes(t[1..9].try_into().ok()?);
    if (w >> 8) as u8 != b'.' {
        return None;
    }
    // `0Suuuuuu`: eight digits whose value is the microseconds.
    let v = (w & !0xffff) | (w & 0xff) << 8 | 0x30;
    if nondigit_bytes(v) != 0 {
        return None;
    }
    Some(digits8(v))
}

/// Bytes of a syscall name: ASCII letters, digits and `_`.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_';
        c += 1;
    }
    t
};

/// Length of the syscall name `s` starts with: the index of its first byte
/// that is not a letter, digit or `_` (`None` when every byte is). A table
/// lookup per byte instead of three range tests (4.5% of the one-thread
/// parser's instructions went to this scan).
///
/// On x86-64 the first 16 bytes are classified at once (SSE2 range
/// compares): the byte loop took ~50 instructions a line, 10 M of the 534 M
/// of `analyze` on a 30 MB log. Longer names continue in the loop.
#[inline]
pub(crate) fn name_len(s: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let head = match s.get(..16) {
            Some(h) => u128::from_le_bytes(h.try_into().unwrap()),
            None => args::load_upto16(s),
        };
        let m = non_name_mask16(head);
        if m != 0 {
            let i = m.trailing_zeros() as usize;
            // Past the text: the zero padding of a short text.
            return (i < s.len()).then_some(i);
        }
        s[16..]
            .iter()
            .position(|&c| !NAME_BYTE[c as usize])
            .map(|i| 16 + i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        s.iter().position(|&c| !NAME_BYTE[c as usize])
    }
}

/// Bit k set when byte k of the 16 bytes `w` (little-endian) is not a
/// letter, digit or `_`. Letters by their lower-case form (`| 0x20` maps
/// `A..Z` onto `a..z` and no other byte onto them), each range by an
/// unsigned `min` test: `c - lo <= hi - lo`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn non_name_mask16(w: u128) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline; registers only.
    unsafe {
        let v = _mm_set_epi64x((w >> 64) as i64, w as i64);
        let in_range = |x: __m128i, lo: u8, span: u8| {
            let t = _mm_sub_epi8(x, _mm_set1_epi8(lo as i8));
            _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(span as i8)), t)
        };
        let letter = in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), b'a', 25);
        let digit = in_range(v, b'0', 9);
        let under = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'_' as i8));
        let name = _mm_or_si128(letter, _mm_or_si128(digit, under));
        !(_mm_movemask_epi8(name) as u32) & 0xffff
    }
}

/// Where ` resumed>` starts in the text after `<... ` (the same as
/// `memmem::find`, without building a searcher when the name is followed
/// by it, as in every line strace writes).
pub(crate) fn find_resumed(r: &[u8]) -> Option<usize> {
    let i = name_len(r).unwrap_or(r.len());
    if r[i..].starts_with(b" resumed>") {
        // No earlier match: one would start with a blank before `i`.
        return Some(i);
    }
    memchr::memmem::find(r, b" resumed>")
}

fn skip_ws(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    s
}

/// Bytes up to the first blank.
fn token(s: &[u8]) -> &[u8] {
    let e = s
        .iter()
        .position(|&c| c == b' ' || c == b'\t')
        .unwrap_or(s.len());
    &s[..e]
}

/// A line of `-e read=`/`-e write=`'s hex dumps, trimmed: `| `, a hex
/// offset of five or more digits, two blanks, ..., ` |` (strace's
/// `dumpstr`).
fn is_dump_line(body: &[u8]) -> bool {
    let Some(r) = body.strip_prefix(b"| ") else {
        return false;
    };
    let nd = r.iter().take_while(|c| c.is_ascii_hexdigit()).count();
    nd >= 5 && r[nd..].starts_with(b"  ") && body.ends_with(b" |")
}

/// Whether the call returns a process or thread id (which `-Y` decorates
/// with the command name, as `-y` decorates an fd with its path).
fn returns_pid(name: &[u8]) -> bool {
    matches!(
        name,
        b"getpid"
            | b"getppid"
            | b"gettid"
            | b"getpgid"
            | b"getpgrp"
            | b"getsid"
            | b"setsid"
            | b"fork"
            | b"vfork"
            | b"clone"
            | b"clone2"
            | b"clone3"
            | b"wait4"
            | b"waitpid"
            | b"set_tid_address"
    )
}

fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    u32::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::xorshift;

    /// The kind cache stores `kind as u8`; every kind, `Other` included,
    /// comes back from it, and no byte outside the kinds is a decoded kind.
    #[test]
    fn kind_bytes_round_trip() {
        for k in Kind::ALL.into_iter().chain([Kind::Other]) {
            assert_eq!(kind_from_u8(k as u8), k);
            assert_eq!(Kind::from_name(k.name().as_bytes()), k);
        }
        for b in Kind::ALL.len() as u8 + 1..=u8::MAX {
            assert_eq!(kind_from_u8(b), Kind::Other);
        }
    }

    /// `resolve_pid_fast` against `resolve_pid` on generated pid tokens
    /// (column, bracket and missing pids mixed, with and without a default
    /// pid): same pids, detected style, live pids and initial pid.
    #[test]
    fn resolve_pid_fast_matches_resolve_pid() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for default_pid in [None, Some(7)] {
            for mix in 0..4u64 {
                let opts = Options {
                    default_pid,
                    ..Options::default()
                };
                let (mut a, mut b) = (Parser::new("a", opts.clone()), Parser::new("b", opts));
                for _ in 0..2000 {
                    let x = next();
                    let p = (x >> 8) as u32 % 50;
                    let tok = match (x % 8).min(mix + 4) {
                        0..=4 => PidTok::Column(p),
                        5 => PidTok::Bracket(p),
                        _ => PidTok::None,
                    };
                    assert_eq!(a.resolve_pid_fast(tok), b.resolve_pid(tok));
                    assert_eq!(a.stats.detected.pid, b.stats.detected.pid);
                    assert_eq!(a.alive, b.alive);
                    assert_eq!(a.stats.initial_pid, b.stats.initial_pid);
                }
            }
        }
    }

    fn run(text: &[u8]) -> (Vec<Event>, InputStats, Interner) {
        let mut p = Parser::new("t", Options::default());
        let mut sink = VecSink::default();
        p.feed_slice(text, &mut sink);
        let (st, _, strings) = p.finish(&mut sink);
        (sink.events, st, strings)
    }

    /// Verbatim from `strace -f -tt -T sh -c '...' 2>log` on this machine:
    /// strace's own message cut the clone line, and the first process's
    /// lines carry no `[pid N]` until it has a child.
    #[test]
    fn positional_prefix_equals_the_general_one() {
        // Every line the positional reader takes gets the general code's
        // prefix; lines it declines are left to the general code.
        let mut taken = 0;
        let pids: [&[u8]; 7] = [
            b"1",
            b"20001",
            b"123456789",
            b"1234567890",
            b"",
            b"0",
            b" 7",
        ];
        let gaps: [&[u8]; 4] = [b" ", b"  ", b"\t", b""];
        let times: [&[u8]; 8] = [
            b"10:00:00.000004",
            b"23:59:59.999999",
            b"99:99:99.999999",
            b"1:00:00.000004",
            b"10:00:00.00004",
            b"10:00:00,000004",
            b"10:0a:00.000004",
            b"1700000000.000100",
        ];
        let tails: [&[u8]; 7] = [
            b" stat(\"/a\") = 0",
            b"\tx",
            b"",
            b"  +++ exited with 0 +++  ",
            b"x",
            b" [ 262] [00007f4bec616000] stat(\"/a\") = 0",
            b" (+     0.000604) x",
        ];
        for p in pids {
            for g in gaps {
                for t in times {
                    for tail in tails {
                        let line = [p, g, t, tail].concat();
                        if let Some(fast) = prefix_pid_tt(&line, &mut TodCache::default()) {
                            taken += 1;
                            assert_eq!(
                                Ok(fast),
                                split_prefix_general(&line),
                                "{:?}",
                                String::from_utf8_lossy(&line)
                            );
                        }
                    }
                }
            }
        }
        assert!(taken >= 30, "the positional reader took only {taken} lines");
    }

    /// The parts `-Y`, `-n`, `-i` and `-t -r` add around the pid and the
    /// time, as strace 6.1 prints them (src/strace.c, `printleader`).
    #[test]
    fn prefixes_of_more_options() {
        let epoch = Some(RawTs::Num {
            us: 1_795_636_679_000_000,
            secs: 1_795_636_679,
        });
        let tod = |h: i64, m: i64, s: i64, us: i64| {
            Some(RawTs::Tod {
                us: (h * 3600 + m * 60 + s) * 1_000_000 + us,
                frac: true,
            })
        };
        // (line, pid, time, rest, extras)
        type Case<'a> = (&'a [u8], PidTok, Option<RawTs>, &'a [u8], u8);
        let cases: Vec<Case> = vec![
            (
                b"1234<php-fpm8.2> 10:00:00.000004 stat(\"/a\") = 0",
                PidTok::Column(1234),
                tod(10, 0, 0, 4),
                b"stat(\"/a\") = 0",
                PRE_COMM,
            ),
            (
                b"[pid  1234<php>] 10:00:00.000004 x()",
                PidTok::Bracket(1234),
                tod(10, 0, 0, 4),
                b"x()",
                PRE_COMM,
            ),
            // A `]` inside the name; `<` and `>` are escaped by strace.
            (
                b"[pid 7<a]b>] x()",
                PidTok::Bracket(7),
                None,
                b"x()",
                PRE_COMM,
            ),
            (
                b"1234 10:00:00.000004 [ 262] [00007f4bec616000] stat(\"/a\") = 0",
                PidTok::Column(1234),
                tod(10, 0, 0, 4),
                b"stat(\"/a\") = 0",
                PRE_SCNO | PRE_IP,
            ),
            (
                b"1234 [????] [????????????????] +++ exited with 0 +++",
                PidTok::Column(1234),
                None,
                b"+++ exited with 0 +++",
                PRE_SCNO | PRE_IP,
            ),
            (
                b"[  59] execve()",
                PidTok::None,
                None,
                b"execve()",
                PRE_SCNO,
            ),
            (
                b"[0000000000401000] x()",
                PidTok::None,
                None,
                b"x()",
                PRE_IP,
            ),
            (
                b"[00007f4bec616000] x()",
                PidTok::None,
                None,
                b"x()",
                PRE_IP,
            ),
            (
                b"1 10:00:01.000000 (+     0.000604) brk(NULL) = 0",
                PidTok::Column(1),
                tod(10, 0, 1, 0),
                b"brk(NULL) = 0",
                0,
            ),
            // `--timestamps=unix,s`: whole epoch seconds, not a pid (no
            // pid is above 4194304).
            (b"1795636679 execve()", PidTok::None, epoch, b"execve()", 0),
            (
                b"4194304 1795636679 x()",
                PidTok::Column(4_194_304),
                epoch,
                b"x()",
                0,
            ),
            // Not one of them: left as it is.
            (
                b"1234 [ Process PID=1234 runs in 32 bit mode. ]",
                PidTok::Column(1234),
                None,
                b"[ Process PID=1234 runs in 32 bit mode. ]",
                0,
            ),
            (b"[pid 7] (+ x) y", PidTok::Bracket(7), None, b"(+ x) y", 0),
        ];
        for (line, pid, ts, rest, extras) in cases {
            let what = String::from_utf8_lossy(line);
            let want = Prefix {
                pid,
                ts,
                rest,
                extras,
            };
            assert_eq!(split_prefix_general(line), Ok(want), "{what}");
            let got = split_prefix(line, &mut TodCache::default());
            assert_eq!(
                got.map(|p| (p.pid, p.rest, p.extras)),
                Ok((pid, rest, extras)),
                "{what}"
            );
        }
        // A name without its `>`: no pid column, and no time either.
        assert!(split_prefix_general(b"1234<php execve()").is_err());
    }

    /// `-Y` decorates returned pids with the command name: the pid is the
    /// result, and the name is neither an fd's path nor a string.
    #[test]
    fn pids_with_command_names_are_not_fd_paths() {
        let (ev, st, s) = run(b"1<sh> getpid() = 1234<sh>\n\
1<sh> clone(child_stack=NULL, flags=SIGCHLD) = 56<sh>\n\
1<sh> openat(AT_FDCWD, \"/a\", O_RDONLY) = 3</a>\n");
        assert_eq!(st.skipped, 0);
        assert_eq!(
            (ev[0].ret, ev[1].ret, ev[2].ret),
            (Ret::Ok(1234), Ret::Ok(56), Ret::Ok(3))
        );
        assert!(!ev[0].flags.has(Flags::DECORATED) && ev[0].ret_path.is_none());
        assert!(!ev[1].flags.has(Flags::DECORATED) && ev[1].ret_path.is_none());
        assert_eq!(
            ev[2].ret_path.map(|p| s.str(p).into_owned()),
            Some("/a".into())
        );
        assert!((0..s.len()).all(|i| s.str(PathId(i as u32)) != "sh"));
        assert!(st.detected.comm && st.detected.fd_paths);
        assert_eq!(ev[0].pid, 1);
    }

    #[test]
    fn whole_second_durations() {
        // `--syscall-times=s`; a digit decoration (no blank before it) is no
        // duration.
        let (ev, st, _) = run(b"1 brk(NULL) = 0 <2>\n1 getpid() = 1234<5678>\n");
        assert_eq!(st.skipped, 0);
        assert_eq!((ev[0].dur_us, ev[0].ret), (Some(2_000_000), Ret::Ok(0)));
        assert_eq!((ev[1].dur_us, ev[1].ret), (None, Ret::Ok(1234)));
    }

    #[test]
    fn word_duration_equals_the_general_one() {
        // Results ending in every mix of the bytes around a duration; each
        // one the word reader takes must split as the general code does.
        let alphabet = b"0123456789.<> x/:";
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut taken = 0;
        for k in 0..300_000u32 {
            let x = next();
            let mut r: Vec<u8> = (0..(x % 14) as usize)
                .map(|i| alphabet[((x >> (8 + 3 * i)) % alphabet.len() as u64) as usize])
                .collect();
            // Most cases near the real shape: `0 <D.DDDDDD>` with a byte
            // or two changed.
            if k % 2 == 0 {
                let mut t = format!("0 <{}.{:06}>", x % 10, (x >> 20) % 1_000_000).into_bytes();
                for j in 0..(k / 2 % 3) as usize {
                    let at = ((x >> (40 + 5 * j)) % t.len() as u64) as usize;
                    t[at] = alphabet[((x >> (50 + 4 * j)) % alphabet.len() as u64) as usize];
                }
                r.extend_from_slice(&t);
            }
            if let Some(d) = tail_dur(&r) {
                taken += 1;
                let fast = (args::trim(&r[..r.len() - 10]), Some(d));
                assert_eq!(fast, split_dur(&r), "{:?}", String::from_utf8_lossy(&r));
            }
        }
        assert!(taken > 50_000, "the word reader took only {taken}");
        assert_eq!(tail_dur(b"= 0 <9.999999>"), Some(9_999_999));
        assert_eq!(tail_dur(b"<0.000011>"), Some(11));
        assert_eq!(tail_dur(b"<10.000011>"), None);
    }

    #[test]
    fn word_prefix_equals_the_general_one_on_generated_lines() {
        // `PID  HH:MM:SS.uuuuuu call` with pids of 1-9 digits and up to
        // three bytes changed to bytes next to digits, colons and dots
        // (and high bytes, whose +6 carries): every line the word reader
        // takes must get the general code's prefix.
        let alphabet = b"0123456789:;./ \t\xfa\xff\x2f\x3a\x40a";
        let mut next = xorshift(0x0bad_5eed_1234_5678);
        let mut taken = 0;
        // One cache across the lines, as in a block: half the lines repeat
        // one of three times of day, so the cached second is reused with
        // other bytes changed, and changed times are checked afresh.
        let mut tod = TodCache::default();
        for k in 0..400_000u32 {
            let x = next();
            let pid = (x >> 3) % 10u64.pow(1 + (x % 9) as u32);
            let gap = [" ", "  ", "\t", " \t"][(x >> 40) as usize % 4];
            let (h, m, sec) = match (x >> 60) % 6 {
                0 => (10, 0, 0),
                1 => (10, 0, 1),
                2 => (23, 59, 59),
                _ => ((x >> 10) % 100, (x >> 17) % 100, (x >> 24) % 100),
            };
            let mut line = format!(
                "{pid}{gap}{h:02}:{m:02}:{sec:02}.{:06} read(3, \"\", 1) = 0",
                (x >> 31) % 1_000_000
            )
            .into_bytes();
            for j in 0..(k % 4) as usize {
                let at = ((x >> (20 + 7 * j)) % 30) as usize % line.len();
                line[at] = alphabet[((x >> (5 * j)) % alphabet.len() as u64) as usize];
            }
            line.truncate(((x >> 50) % 64) as usize + (k as usize % 2) * 64);
            if let Some(fast) = prefix_pid_tt(&line, &mut tod) {
                taken += 1;
                assert_eq!(
                    Ok(fast),
                    split_prefix_general(&line),
                    "{:?}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
        assert!(taken > 100_000, "the word reader took only {taken}");
    }

    /// `split_call` before its `) = R <dur>` path: skip, strip, trim.
    fn split_call_reference<'a>(
        after: &'a [u8],
        argl: &mut ArgList,
    ) -> Option<(&'a [u8], &'a [u8], Option<u64>)> {
        let close = args::scan_call(after, argl)?;
        let rest = skip_ws(&after[close + 1..]);
        let rest = rest.strip_prefix(b"=")?;
        let (ret, dur) = split_dur(args::trim(rest));
        if ret.is_empty() {
            return None;
        }
        Some((&after[..close], ret, dur))
    }

    #[test]
    fn split_call_equals_the_reference() {
        // Call texts with every mix of blanks around `=`, results with
        // blanks and CRs at either end, durations of other shapes.
        let eqs: [&[u8]; 6] = [b" = ", b"= ", b" =", b"  =  ", b"\t=\t", b" = \t"];
        let rets: [&[u8]; 8] = [
            b"0",
            b"-1 ENOENT (No such file or directory)",
            b"3</srv/www/a.php>",
            b"",
            b" ",
            b"0 ",
            b"0\r",
            b"?",
        ];
        let durs: [&[u8]; 9] = [
            b" <0.000011>",
            b"<0.000011>",
            b"  <0.000011>",
            b"\t<0.000011>",
            b" <0.000011>\r",
            b" <0.000011> ",
            b" <10.000011>",
            b" <0.00001x>",
            b"",
        ];
        let mut taken = 0;
        let (mut a1, mut a2) = (ArgList::default(), ArgList::default());
        for e in eqs {
            for r in rets {
                for d in durs {
                    for head in [&b"3, \"x\", 1)"[..], b")"] {
                        let text = [head, e, r, d].concat();
                        let fast = split_call(&text, &mut a1);
                        taken += fast.is_some() as u32;
                        assert_eq!(
                            fast,
                            split_call_reference(&text, &mut a2),
                            "{:?}",
                            String::from_utf8_lossy(&text)
                        );
                    }
                }
            }
        }
        assert!(taken > 300, "{taken}");
    }

    /// The vector classification equals the byte table for every byte at
    /// every place, and for texts of every length to 40.
    #[test]
    fn name_len_equals_the_byte_loop() {
        let byte_loop = |s: &[u8]| s.iter().position(|&c| !NAME_BYTE[c as usize]);
        for k in 0..20 {
            for c in 0..=255u8 {
                let mut s = b"abcdefghijklmnopqrst".to_vec();
                s[k] = c;
                assert_eq!(name_len(&s), byte_loop(&s), "byte {c} at {k}");
                assert_eq!(name_len(&s[..k + 1]), byte_loop(&s[..k + 1]));
            }
        }
        let mut next = xorshift(0x85eb_ca6b_c2b2_ae35);
        for round in 0..100_000 {
            let x = next();
            let len = round % 41;
            let s: Vec<u8> = (0..len)
                .map(|i| {
                    let r = x.rotate_left(i as u32 * 5);
                    // Mostly name bytes, so names of every length occur.
                    if r % 8 == 0 {
                        r as u8 >> 1
                    } else {
                        b"_aZ09zA"[(r >> 8) as usize % 7]
                    }
                })
                .collect();
            assert_eq!(name_len(&s), byte_loop(&s), "{s:?}");
        }
    }

    #[test]
    fn name_table_is_the_name_test() {
        for c in 0..=255u8 {
            let want = c.is_ascii_alphanumeric() || c == b'_';
            assert_eq!(name_len(&[c]).is_none(), want, "byte {c}");
        }
        assert_eq!(name_len(b"newfstatat(AT_FDCWD"), Some(10));
        assert_eq!(name_len(b"_llseek"), None);
    }

    #[test]
    fn short_cache_gives_the_interners_ids() {
        // Strings of 0-40 bytes sharing heads or tails (the cache's key
        // parts), zero bytes inside, far more than its 64 slots; every
        // answer must be the interner's own (a key without its tail fails).
        let mut cache = ShortCache::new(64);
        let mut with = Interner::new();
        let mut plain = Interner::new();
        let mut next = xorshift(0x0123_4567_89ab_cdef);
        for _ in 0..200_000 {
            let x = next();
            // A head from three, then a tail from a small alphabet: many
            // strings share their first 16 (or last 16) bytes.
            let heads: [&[u8]; 3] = [b"/srv/www/site1/t", b"/srv/www/site2/t", b"ab\0"];
            let mut s = heads[(x % 3) as usize].to_vec();
            s.truncate(((x >> 2) % 17) as usize);
            let extra = ((x >> 8) % 24) as usize;
            s.extend((0..extra).map(|i| b"xy/\0"[((x >> (16 + i % 40)) % 4) as usize]));
            let a = cache.intern(&mut with, &s);
            let b = plain.intern(&s);
            assert_eq!(a, b, "{s:?}");
        }
        assert_eq!(with.len(), plain.len());
    }

    #[test]
    fn intern_kind_gives_the_interners_ids_and_the_kinds() {
        // Syscall names, their prefixes, extensions and zero-padded
        // variants (equal keys, other lengths), 0 to 20 bytes, far more
        // than the names cache's 256 slots: the inline lookup must answer
        // as the interner and `Kind::from_name` do.
        let mut dec = Decoder::new(Interner::new());
        let mut plain = Interner::new();
        let mut next = xorshift(0x7fb5_d329_728e_a185);
        for _ in 0..200_000 {
            let x = next();
            let k = Kind::ALL[(x % Kind::ALL.len() as u64) as usize];
            let mut s = k.name().as_bytes().to_vec();
            match (x >> 8) % 5 {
                0 => s.truncate(((x >> 12) % 17) as usize),
                1 => s.push(b'\0'),
                2 => s.extend_from_slice(&b"64\0xyz_at"[..((x >> 12) % 10) as usize]),
                3 => s = format!("sys{}", (x >> 12) % 700).into_bytes(),
                _ => {}
            }
            let want = (plain.intern(&s), Kind::from_name(&s));
            assert_eq!(dec.intern_kind(&s), want, "{s:?}");
        }
    }

    #[test]
    fn name_key_is_the_zero_padded_name() {
        for n in 0..=16usize {
            let name: Vec<u8> = (0..n as u8).map(|i| b'a' + i).collect();
            let mut k = [0u8; 16];
            k[..n].copy_from_slice(&name);
            assert_eq!(name_key(&name), u128::from_le_bytes(k), "length {n}");
        }
    }

    #[test]
    fn stderr_line_cut_by_attach_message() {
        let log = b"02:26:48.827595 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLDstrace: Process 31238 attached\n <unfinished ...>\n[pid 31238] 02:26:48.827692 set_robust_list(0x7fda5f080a20, 24) = 0 <0.000007>\n[pid 31237] 02:26:48.827712 <... clone resumed>, child_tidptr=0x7fda5f080a10) = 31238 <0.000111>\n[pid 31238] 02:26:48.831580 +++ exited with 0 +++\n02:26:48.831707 wait4(-1, 0x7ffc9a5b732c, WNOHANG, NULL) = -1 ECHILD (No child processes) <0.000007>\n";
        let (ev, st, s) = run(log);
        assert_eq!(st.skipped, 0, "{:?}", st.first_skips);
        assert_eq!(st.lines, st.accounted());
        assert_eq!(ev.len(), 3);
        assert_eq!(s.str(ev[1].name), "clone");
        assert_eq!(
            (ev[1].pid, ev[1].ret, ev[1].dur_us),
            (31237, Ret::Ok(31238), Some(111))
        );
        assert_eq!(ev[1].line, 2);
        // After the child exited, the unprefixed line is the parent's.
        assert_eq!(ev[2].pid, 31237);
        assert_eq!(st.initial_pid, Some(31237));
    }

    #[test]
    fn a_recordings_comment_lines_are_counted_and_its_losses_read() {
        let log = b"# statstorm record 0.1.0: strace -f -ttt -T -y compatible lines\n\
            7 1795759391.545962 access(\"/a\", F_OK) = 0 <0.000003>\n\
            # statstorm record: 1 calls in 0.1 s, stopped: interrupted\n\
            # statstorm record: lost 12 calls (ring buffer full: 12, too many calls in flight: 0, undecodable: 0)\n\
            # another comment\n";
        let (ev, st, _) = run(log);
        assert_eq!(ev.len(), 1);
        // another `#` line is not the recorder's: not strace, skipped
        assert_eq!((st.comment_lines, st.lost_calls, st.skipped), (3, 12, 1));
        assert_eq!(st.lines, st.accounted());
        // a `#` in the middle of a call's line is no comment
        let (ev, st, _) = run(b"7 1.0 access(\"/#a\", F_OK) = 0\n");
        assert_eq!((ev.len(), st.comment_lines), (1, 0));
    }

    #[test]
    fn stat_mtimes_of_every_shape() {
        let v = |t: &str| stat_mtime(t.as_bytes());
        assert_eq!(
            v(
                r#""/a", {st_mode=S_IFREG|0644, st_mtime=1767225600 /* 2026-01-01T00:00:00+0000 */, st_mtime_nsec=0}"#
            ),
            Some(1_767_225_600)
        );
        // before 1970
        assert_eq!(v("3, {st_mtime=-5 /* 1969 */, st_mtime_nsec=0}"), Some(-5));
        // statx
        assert_eq!(
            v(
                r#"AT_FDCWD, "/a", 0, STATX_ALL, {stx_atime={tv_sec=1, tv_nsec=0}, stx_mtime={tv_sec=42, tv_nsec=7}}"#
            ),
            Some(42)
        );
        // abbreviated (no -v), no struct, no digits, too many digits, cut
        assert_eq!(v(r#""/a", {st_mode=S_IFREG|0644, st_size=3, ...}"#), None);
        assert_eq!(v(r#""/a", 0x7ffd1234"#), None);
        assert_eq!(v("{st_mtime=, st_mtime_nsec=0}"), None);
        assert_eq!(v("{st_mtime=123456789012345678901}"), None);
        assert_eq!(v("{st_mtime=12"), None);
    }

    #[test]
    fn stat_ctimes_of_every_shape() {
        let v = |t: &str| stat_ctime_us(t.as_bytes());
        assert_eq!(
            v(
                r#""/a", {st_mtime=1780272000 /* 2026-06-01T00:00:00+0000 */, st_mtime_nsec=0, st_ctime=1795245806 /* 2026-11-21T07:23:26.480849731+0000 */, st_ctime_nsec=480849731}"#
            ),
            Some(1_795_245_806_480_849)
        );
        // no nanoseconds printed: the whole second
        assert_eq!(v("{st_ctime=7}"), Some(7_000_000));
        assert_eq!(
            v("AT_FDCWD, \"/a\", 0, STATX_ALL, {stx_mtime={tv_sec=1, tv_nsec=0}, stx_ctime={tv_sec=42, tv_nsec=7000}}"),
            Some(42_000_007)
        );
        assert_eq!(v("{st_ctime=-1, st_ctime_nsec=0}"), Some(-1_000_000));
        assert_eq!(v("{st_ctime=, st_ctime_nsec=0}"), None);
        assert_eq!(v("{st_ctime=1, st_ctime_nsec=5000000000}"), Some(1_000_000));
        assert_eq!(v("{st_ctime=123456789012345678}"), None);
        assert_eq!(v("{st_mtime=12}"), None);
    }

    #[test]
    fn decode_ret_equals_the_general_steps() {
        // Every 1- and 2-byte text and pieces of results (digits, `-1`,
        // errno names, decorations, `?`, blanks), into two decoders; the
        // events and the interned strings must be equal.
        let pieces: [&[u8]; 12] = [
            b"0", b"7", b"-1", b" ", b"ENOENT", b"(x)", b"<", b">", b"/a", b"?", b"0x1f", b"",
        ];
        let mut texts: Vec<Vec<u8>> = (0..=255u8).map(|a| vec![a]).collect();
        texts.extend((0..=255u8).flat_map(|a| [vec![a, b' '], vec![b'1', a], vec![a, b'0']]));
        texts.push(Vec::new());
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..200_000 {
            let x = next();
            let mut t = Vec::new();
            for k in 0..(x % 8) {
                t.extend_from_slice(pieces[((x >> (4 + 4 * k)) % 12) as usize]);
            }
            texts.push(t);
        }
        // Decorated fds of one to three digits, with and without the
        // decoration texts kept.
        for fd in ["3", "12", "123", "03"] {
            for deco in ["/a/b", "/a b", "/a<b", "x>y", "", "TCP:[1->2]"] {
                texts.push(format!("{fd}<{deco}>").into_bytes());
            }
        }
        for fd_paths in [true, false] {
            let mut fast = Decoder {
                fd_paths,
                ..Decoder::new(Interner::new())
            };
            let mut slow = Decoder {
                fd_paths,
                ..Decoder::new(Interner::new())
            };
            for t in &texts {
                let (mut a, mut b) = (Event::EMPTY, Event::EMPTY);
                fast.decode_ret(t, &mut a, b"openat");
                slow.decode_ret_any(t, &mut b, b"openat");
                assert_eq!(
                    format!("{a:?}"),
                    format!("{b:?}"),
                    "{}",
                    String::from_utf8_lossy(t)
                );
            }
            assert_eq!(fast.strings.len(), slow.strings.len());
        }
    }

    #[test]
    fn results_of_every_shape() {
        let log = b"1 read(0, \"\", 1) = ? ERESTARTSYS (To be restarted if SA_RESTART is set)\n\
1 exit_group(0) = ?\n\
1 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f4bec616000\n\
1 poll([{fd=3, events=POLLIN}], 1, 5000) = 1 ([{fd=3, revents=POLLIN}])\n\
1 openat(AT_FDCWD, \"/a\", O_RDONLY) = -1 ENOENT (No such file or directory)\n";
        let (ev, st, s) = run(log);
        assert_eq!(st.skipped, 0);
        assert_eq!(s.str(ev[0].errno().unwrap().0), "ERESTARTSYS");
        assert_eq!(ev[1].ret, Ret::Unknown);
        assert_eq!((ev[2].ret, ev[2].fd), (Ret::Ok(0x7f4bec616000), None));
        assert_eq!(ev[3].ret, Ret::Ok(1));
        assert!(ev[4].is_error());
    }
}
