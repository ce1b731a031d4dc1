//! The parallel reader path.
//!
//! The calling thread reads blocks of whole lines; worker threads (one
//! fewer than the cores) and the calling thread itself parse the plain
//! complete syscall lines of each block with a block-local interner; the
//! calling thread then walks the blocks in input order,
//! resolving what depends on earlier lines (timestamps under `-r` and
//! midnight, `[pid N]` state, unfinished/resumed pairs, summary tables) and
//! mapping block-local string ids to the parser's interner. Every line the
//! blocks did not parse (unfinished, resumed, signals, exits, odd lines)
//! goes through the sequential line parser there, so both paths give the
//! same events, ids included.
//!
//! Reading, parsing and merging overlap without barriers: the calling
//! thread keeps a window of blocks handed out ([`Queue`]), merges each
//! block as soon as it and every block before it are parsed, parses the
//! oldest unstarted block itself rather than wait, and hands out the next
//! block in its place.
//!
//! The same stages run over an input already in memory (a mapped file,
//! [`Parser::feed_slice_par`]): blocks are then borrowed slices of it, so
//! nothing is read or copied on the calling thread.

use super::{
    find_resumed, name_len, split_prefix, Decoder, Options, Parser, PidTok, RawTs, Sink, PRE_COMM,
};
use crate::args;
use crate::event::{Errno, Event, Interner, PathId, Ret};
use memchr::{memchr, memchr_iter, memrchr};
use std::collections::HashMap;
use std::io::{self, Read};
use std::ops::Deref;

/// A block's bytes: a buffer of its own (the reader path) or a slice of an
/// input held in memory.
enum Buf<'a> {
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

impl Deref for Buf<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buf::Owned(v) => v,
            Buf::Borrowed(s) => s,
        }
    }
}

/// Bytes of whole lines, or the mark of a line longer than `max_line`
/// whose bytes were dropped.
enum Chunk<'a> {
    /// `buf[..len]` holds the lines; the rest of an owned `buf` is
    /// initialized space kept for reuse.
    Data {
        buf: Buf<'a>,
        len: usize,
        last_partial: bool,
    },
    TooLong,
}

/// Where the parallel path gets its blocks from.
trait Blocks<'a> {
    fn next(&mut self) -> io::Result<Option<Chunk<'a>>>;
    /// A merged block's buffer, for reuse.
    fn recycle(&mut self, _buf: Vec<u8>) {}
    /// The next `n` blocks handed out have been merged.
    fn merged(&mut self, _n: usize) {}
    /// Input bytes consumed so far.
    fn bytes(&self) -> u64;
}

/// Blocks of an input held in memory: slices ending at a newline (the
/// last one at the end of the input), about `block_size` bytes each. A line
/// longer than `max_line` that starts a block is dropped as
/// [`Chunk::TooLong`] (one inside a block is skipped by the line parser, as
/// in [`Parser::feed_slice`]), so a block spans at most
/// `max(block_size, max_line + 1)` bytes and its offsets fit in `u32`.
struct SliceBlocks<'a, 'p> {
    data: &'a [u8],
    pos: usize,
    block_size: usize,
    max_line: usize,
    /// End offsets of the blocks handed out and not merged yet.
    ends: std::collections::VecDeque<usize>,
    /// Told the offset up to which the input has been merged.
    merged: &'p mut dyn FnMut(usize),
}

impl<'a> Blocks<'a> for SliceBlocks<'a, '_> {
    fn next(&mut self) -> io::Result<Option<Chunk<'a>>> {
        let (data, pos) = (self.data, self.pos);
        if pos >= data.len() {
            return Ok(None);
        }
        let window = (pos + self.block_size).min(data.len());
        let end = if window == data.len() {
            // The rest fits in one block, whether or not it ends with a
            // newline.
            data.len()
        } else if let Some(i) = memrchr(b'\n', &data[pos..window]) {
            pos + i + 1
        } else {
            // The block's first line is longer than a block.
            let nl = memchr(b'\n', &data[window..]).map(|j| window + j);
            let line_end = nl.unwrap_or(data.len());
            let next = nl.map_or(data.len(), |n| n + 1);
            self.pos = next;
            if line_end - pos > self.max_line {
                self.ends.push_back(next);
                return Ok(Some(Chunk::TooLong));
            }
            next
        };
        self.pos = end;
        self.ends.push_back(end);
        Ok(Some(Chunk::Data {
            buf: Buf::Borrowed(&data[pos..end]),
            len: end - pos,
            last_partial: data[end - 1] != b'\n',
        }))
    }

    fn bytes(&self) -> u64 {
        self.pos as u64
    }

    fn merged(&mut self, n: usize) {
        let mut upto = None;
        for _ in 0..n {
            upto = self.ends.pop_front().or(upto);
        }
        if let Some(u) = upto {
            (self.merged)(u);
        }
    }
}

struct BlockReader<R> {
    r: R,
    /// `buf[..filled]` is data; the rest is initialized space for reads
    /// (kept across blocks, so reads do not zero memory first).
    buf: Vec<u8>,
    filled: usize,
    read_size: usize,
    block_size: usize,
    max_line: usize,
    discarding: bool,
    eof: bool,
    /// A read error, returned once the bytes read before it have been
    /// handed out as blocks (so no thread count loses lines to it).
    err: Option<io::Error>,
    bytes: u64,
    /// Buffers of merged blocks, reused for the next blocks (at most
    /// `free_max`).
    free: Vec<Vec<u8>>,
    free_max: usize,
}

/// Threads of the parallel path for `opts` (at least 2: the calling thread
/// and a worker).
fn par_threads(opts: &Options) -> usize {
    match opts.threads {
        0 => rayon::current_num_threads(),
        n => n,
    }
    .max(2)
}

/// Records a block of `block_size` bytes keeps at most (1 MiB: 16,384,
/// lines of 64 bytes on average; the bench log's blocks have ~7,400). A
/// block of shorter lines leaves the lines after that many to the
/// sequential line parser at its merge ([`Rec::Rest`]), so a block's
/// memory is bounded in bytes whatever its lines: a record per line of a
/// 1 MiB block of blank lines took 180 MB, and a window of them several GB.
fn max_recs(block_size: usize) -> usize {
    (block_size / 64).max(1024)
}

/// Bytes the one-thread path over an input in memory parses between two
/// calls of its `merged` callback.
const SEQ_PIECE: usize = 8 << 20;

/// Bytes of blocks in flight (their bytes, at most `block_size +
/// read_size` each, and their records), at most.
const IN_FLIGHT_BYTES: usize = 96 << 20;

/// Blocks handed out and not merged yet, at most: enough for every thread
/// to have work while the calling thread merges (4 a thread), few enough
/// that the blocks' bytes and records stay within [`IN_FLIGHT_BYTES`]
/// (which engages from about 7 threads on, with 1 MiB blocks), and at
/// least 2.
fn window_len(threads: usize, block_size: usize, read_size: usize) -> usize {
    let per_block = block_size + read_size + max_recs(block_size) * std::mem::size_of::<Rec>();
    (threads * 4).min(IN_FLIGHT_BYTES / per_block).max(2)
}

impl<R: Read> BlockReader<R> {
    /// Takes the buffer out as a chunk of `keep_from` data bytes, leaving
    /// `keep_from..filled` at the start of a recycled buffer.
    fn cut<'a>(&mut self, keep_from: usize, last_partial: bool) -> Chunk<'a> {
        let mut next = self.free.pop().unwrap_or_default();
        let rest = self.filled - keep_from;
        let room = (self.block_size + self.read_size).max(rest + self.read_size);
        // A recycled buffer keeps its length: only a new one (or a longer
        // one) is zeroed.
        if next.len() < room {
            next.resize(room, 0);
        }
        next[..rest].copy_from_slice(&self.buf[keep_from..self.filled]);
        let buf = std::mem::replace(&mut self.buf, next);
        self.filled = rest;
        Chunk::Data {
            buf: Buf::Owned(buf),
            len: keep_from,
            last_partial,
        }
    }
}

impl<'a, R: Read> Blocks<'a> for BlockReader<R> {
    fn recycle(&mut self, buf: Vec<u8>) {
        if self.free.len() < self.free_max {
            self.free.push(buf);
        }
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn next(&mut self) -> io::Result<Option<Chunk<'a>>> {
        let mut want = self.block_size;
        loop {
            while !self.eof && self.filled < want {
                let end = self.filled + self.read_size;
                if self.buf.len() < end {
                    self.buf.resize(end, 0);
                }
                let n = loop {
                    match self.r.read(&mut self.buf[self.filled..end]) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            // The input ends here: what was read before
                            // the error still goes out, its last line as
                            // the input's last.
                            self.err = Some(e);
                            break 0;
                        }
                    }
                };
                self.filled += n;
                self.bytes += n as u64;
                if n == 0 {
                    self.eof = true;
                }
                if self.discarding {
                    match memchr(b'\n', &self.buf[..self.filled]) {
                        Some(i) => {
                            self.buf.copy_within(i + 1..self.filled, 0);
                            self.filled -= i + 1;
                            self.discarding = false;
                        }
                        None => self.filled = 0,
                    }
                }
            }
            if let Some(i) = memrchr(b'\n', &self.buf[..self.filled]) {
                return Ok(Some(self.cut(i + 1, false)));
            }
            if self.filled > self.max_line {
                self.discarding = true;
                self.filled = 0;
                return Ok(Some(Chunk::TooLong));
            }
            if self.eof {
                if self.filled == 0 {
                    return match self.err.take() {
                        Some(e) => Err(e),
                        None => Ok(None),
                    };
                }
                return Ok(Some(self.cut(self.filled, true)));
            }
            want = self.filled + self.read_size;
        }
    }
}

/// One line of a parsed block: either an event parsed in the block (ids
/// local to the block's interner) or a line left to the sequential parser.
enum Rec {
    Slow {
        start: u32,
        end: u32,
    },
    Fast {
        start: u32,
        end: u32,
        pid: PidTok,
        ts: Option<RawTs>,
        ev: Event,
    },
    /// The lines from `start` to the block's end, which the block did not
    /// look at: it had [`max_recs`] records. The merge gives them to the
    /// sequential line parser.
    Rest {
        start: u32,
    },
    /// An `<unfinished ...>` line whose `<... resumed>` line is later in
    /// the same block, with only other pids' lines in between: the block
    /// merged the pair (`Rec::PairEnd` holds the event).
    PairStart {
        start: u32,
        end: u32,
        pid: u32,
        ts: Option<RawTs>,
        pair: u32,
    },
    PairEnd {
        start: u32,
        end: u32,
        pid: u32,
        ts: Option<RawTs>,
        ev: Event,
        pair: u32,
    },
}

enum Parsed<'a> {
    Block {
        /// `buf[..len]`: the block's lines.
        buf: Buf<'a>,
        len: usize,
        last_partial: bool,
        recs: Vec<Rec>,
        strings: Interner,
        pairs: u32,
        /// Block-local string id -> the parser's id, `u32::MAX` while
        /// unknown: filled at the start of the block's merge for the
        /// strings the parser's interner already holds
        /// (`Interner::get_all_from`), the rest as the merge interns them.
        remap: Vec<u32>,
        /// `Prefix::extras` of the block's lines, or-ed.
        extras: u8,
    },
    TooLong,
}

#[derive(Clone, Copy)]
struct Cfg {
    max_line: usize,
    max_recs: usize,
    input: u16,
    fd_paths: bool,
    stat_times: bool,
}

/// What a line is, as far as a block can tell without earlier lines.
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Class<'a> {
    /// A plain complete syscall line, parsed.
    /// (The event is decoded straight into its record by the caller.)
    Fast {
        pid: PidTok,
        ts: Option<RawTs>,
        name: &'a [u8],
        args: &'a [u8],
        ret: &'a [u8],
        dur: Option<u64>,
    },
    /// `PID ... name(args <unfinished ...>` with a pid column.
    Unfinished {
        pid: u32,
        ts: Option<RawTs>,
        name: &'a [u8],
        args: &'a [u8],
    },
    /// `PID ... <... name resumed>tail` with a pid column.
    Resumed {
        pid: u32,
        ts: Option<RawTs>,
        name: &'a [u8],
        tail: &'a [u8],
    },
    /// Everything else: left to the sequential line parser.
    Other,
}

/// Classifies one line without any state from earlier lines, with the
/// same dispatch as `Parser::line_inner`.
///
/// Tests that cannot pass on a plain call line are skipped by a byte test
/// first (the last byte for the ` attached`/` detached` and `...>`
/// endings, the first for a blank or `%` line, the name for the prefixes
/// of other lines): 50 instructions a line of the 213 k lines of the 30 MB
/// log went to them. `classify_reference` in the tests is the plain order.
fn classify<'a>(dec: &mut Decoder, line: &'a [u8], cfg: Cfg) -> Class<'a> {
    if line.len() > cfg.max_line {
        return Class::Other;
    }
    let line = match line {
        [rest @ .., b'\r'] => rest,
        l => l,
    };
    if line.last() == Some(&b'd') && (line.ends_with(b" attached") || line.ends_with(b" detached"))
    {
        return Class::Other;
    }
    // A line starting with another byte keeps it after trimming: not
    // empty, and no `% time`.
    if matches!(line.first(), None | Some(b' ' | b'\t' | b'\r' | b'%')) {
        let body = args::trim(line);
        if body.is_empty() || body.starts_with(b"% time") {
            return Class::Other;
        }
    }
    let Ok(pre) = split_prefix(line, &mut dec.tod) else {
        return Class::Other;
    };
    dec.extras |= pre.extras;
    let rest = pre.rest;
    // `name(`: then `rest` starts with a name byte, which no prefix
    // tested below starts with but `strace: `, whose name is not followed
    // by `(`.
    let nlen = match name_len(rest) {
        Some(n) if n > 0 && rest[n] == b'(' => n,
        _ => {
            if let Some(r) = rest.strip_prefix(b"<... ") {
                return match (pre.pid, find_resumed(r)) {
                    (PidTok::Column(pid), Some(end)) if pid != 0 => Class::Resumed {
                        pid,
                        ts: pre.ts,
                        name: &r[..end],
                        tail: &r[end + 9..],
                    },
                    _ => Class::Other,
                };
            }
            return Class::Other;
        }
    };
    let after = &rest[nlen + 1..];
    if after.ends_with(b"...>") {
        if let Some(a) = after.strip_suffix(b" <unfinished ...>") {
            return match pre.pid {
                PidTok::Column(pid) if pid != 0 => Class::Unfinished {
                    pid,
                    ts: pre.ts,
                    name: &rest[..nlen],
                    args: a,
                },
                _ => Class::Other,
            };
        }
        if after.ends_with(b"<detached ...>") {
            return Class::Other;
        }
    }
    match dec.split_call(after) {
        Some((args, ret, dur)) => Class::Fast {
            pid: pre.pid,
            ts: pre.ts,
            name: &rest[..nlen],
            args,
            ret,
            dur,
        },
        None => Class::Other,
    }
}

/// Blocks between the calling thread, which hands them out in order and
/// merges them in order, and the workers that parse them. The calling
/// thread parses too when the block it must merge next is not parsed: the
/// oldest block no worker has started, so the workers and it share the
/// parsing with no thread idle while there is work.
#[derive(Default)]
struct Queue<'a> {
    st: std::sync::Mutex<QueueState<'a>>,
    /// Workers wait here for blocks (or the end) ...
    work_cv: std::sync::Condvar,
    /// ... and the calling thread for a parsed block.
    done_cv: std::sync::Condvar,
}

type Job<'a> = (u64, Chunk<'a>, Scratch);
type Done<'a> = (u64, std::thread::Result<Parsed<'a>>);

#[derive(Default)]
struct QueueState<'a> {
    /// Handed out, not started, in block order.
    todo: std::collections::VecDeque<Job<'a>>,
    /// Parsed, not merged yet (a few at most).
    done: Vec<Done<'a>>,
    closing: bool,
}

/// Parses a block; `bits` is the parsing thread's newline map, reused.
fn parse_job<'a>((i, chunk, scratch): Job<'a>, cfg: Cfg, bits: &mut Vec<u64>) -> Done<'a> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        parse_chunk(chunk, cfg, scratch, bits)
    }));
    (i, r)
}

impl<'a> Queue<'a> {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState<'a>> {
        // A panic while holding the lock only happens in this module's
        // few lines around it; the state stays consistent.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, i: u64, chunk: Chunk<'a>, scratch: Scratch) {
        self.lock().todo.push_back((i, chunk, scratch));
        self.work_cv.notify_one();
    }

    /// A worker: parses blocks until told to stop.
    fn work(&self, cfg: Cfg) {
        let mut bits = Vec::new();
        loop {
            let job = {
                let mut g = self.lock();
                loop {
                    if let Some(j) = g.todo.pop_front() {
                        break j;
                    }
                    if g.closing {
                        return;
                    }
                    g = self.work_cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            };
            let d = parse_job(job, cfg, &mut bits);
            self.lock().done.push(d);
            self.done_cv.notify_one();
        }
    }

    /// Block `i`, parsed (here if need be); a panic in its parse is
    /// resumed here.
    fn take(&self, i: u64, cfg: Cfg, bits: &mut Vec<u64>) -> Parsed<'a> {
        let mut g = self.lock();
        let r = loop {
            if let Some(k) = g.done.iter().position(|d| d.0 == i) {
                break g.done.swap_remove(k).1;
            }
            if let Some(job) = g.todo.pop_front() {
                drop(g);
                let d = parse_job(job, cfg, bits);
                if d.0 == i {
                    break d.1;
                }
                g = self.lock();
                g.done.push(d);
                continue;
            }
            // A worker is parsing block `i`.
            g = self.done_cv.wait(g).unwrap_or_else(|e| e.into_inner());
        };
        r.unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

/// Tells the workers of a [`Queue`] to stop when dropped.
struct CloseOnDrop<'q, 'a>(&'q Queue<'a>);

impl Drop for CloseOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.lock().closing = true;
        self.0.work_cv.notify_all();
    }
}

/// An `<unfinished ...>` line of this block still waiting for its pair.
/// Its name and arguments are slices of the block: the text of a pair is
/// joined only when its `<... resumed>` line comes (a copy per start,
/// grown again by most resumed tails, took ~10 M of the 552 M instructions
/// of `analyze` on a 30 MB log with 11% of its lines in pairs).
struct Open<'a> {
    rec: usize,
    ts: Option<RawTs>,
    name: &'a [u8],
    /// The arguments before ` <unfinished ...>`.
    args: &'a [u8],
}

/// The open starts of a block by pid, with the count of open pids per
/// `pid % 64`: most lines are calls of pids with no open start, and the
/// count answers them without hashing (the map's lookup and removal for
/// every call line of a block with an open start took ~3 M of the 541 M
/// instructions of `analyze` on a 30 MB log).
struct OpenStarts<'a> {
    map: HashMap<u32, Open<'a>, crate::event::FastHash>,
    per_residue: [u32; 64],
}

impl Default for OpenStarts<'_> {
    fn default() -> Self {
        OpenStarts {
            map: HashMap::default(),
            per_residue: [0; 64],
        }
    }
}

impl<'a> OpenStarts<'a> {
    fn insert(&mut self, pid: u32, o: Open<'a>) {
        if self.map.insert(pid, o).is_none() {
            self.per_residue[pid as usize % 64] += 1;
        }
    }

    #[inline]
    fn remove(&mut self, pid: u32) -> Option<Open<'a>> {
        let r = &mut self.per_residue[pid as usize % 64];
        if *r == 0 {
            return None;
        }
        let o = self.map.remove(&pid);
        if o.is_some() {
            *r -= 1;
        }
        o
    }

    fn clear(&mut self) {
        if !self.map.is_empty() {
            self.map.clear();
            self.per_residue = [0; 64];
        }
    }
}

/// Memory of a merged block, reused by a later one: its interner, records
/// and id map (cleared on the pool, before reuse).
#[derive(Default)]
struct Scratch {
    strings: Interner,
    recs: Vec<Rec>,
    remap: Vec<u32>,
}

/// Sets bit `k` of `out[w]` when `bytes[64 * w + k]` is a newline (`out`
/// becomes one word per 64 bytes, each written): one pass of vector compares over the block, where
/// a `memchr` call per line (setup, dispatch, a vector loop over a
/// 150-byte line) took ~100 instructions a line; each line end is then
/// taken from the words in a few ([`Newlines`]).
fn newline_bits(bytes: &[u8], out: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { newline_bits_avx2(bytes, out) };
        return;
    }
    newline_bits_with(bytes, out, newline_mask64);
}

#[inline(always)]
fn newline_bits_with(bytes: &[u8], out: &mut Vec<u64>, mask64: impl Fn(&[u8; 64]) -> u64) {
    // A plain loop over words set up front: `extend` left the loop in a
    // function of its own, without AVX2 and calling `mask64`.
    // Every word is written below: no zeroing (a memset of the block's
    // words, 0.7% of the run, when the map was cleared and refilled).
    let words = bytes.len().div_ceil(64);
    if out.len() < words {
        out.resize(words, 0);
    } else {
        out.truncate(words);
    }
    let chunks = bytes.chunks_exact(64);
    let rest = chunks.remainder();
    for (w, c) in out.iter_mut().zip(chunks) {
        *w = mask64(c.try_into().unwrap());
    }
    if !rest.is_empty() {
        let mut tail = [0u8; 64];
        tail[..rest.len()].copy_from_slice(rest);
        out[bytes.len() / 64] = mask64(&tail);
    }
}

/// [`newline_bits`] with AVX2 compares, 32 bytes each.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn newline_bits_avx2(bytes: &[u8], out: &mut Vec<u64>) {
    use std::arch::x86_64::*;
    newline_bits_with(bytes, out, |c| {
        // SAFETY: the CPU has AVX2 (this function's contract); the two
        // loads read the 64 bytes of `c` (unaligned loads allowed).
        unsafe {
            let nl = _mm256_set1_epi8(b'\n' as i8);
            let lo = _mm256_loadu_si256(c.as_ptr() as *const __m256i);
            let hi = _mm256_loadu_si256(c.as_ptr().add(32) as *const __m256i);
            let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, nl)) as u32 as u64;
            let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, nl)) as u32 as u64;
            lo | hi << 32
        }
    })
}

/// The newline mask of 64 bytes, SSE2 compares of 16 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
fn newline_mask64(c: &[u8; 64]) -> u64 {
    use std::arch::x86_64::*;
    let mut m = 0u64;
    for k in 0..4 {
        // SAFETY: SSE2 is part of the x86-64 baseline; the load reads 16
        // of the 64 bytes of `c` (unaligned load allowed).
        let w = unsafe {
            let v = _mm_loadu_si128(c.as_ptr().add(16 * k) as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8))) as u32 as u64
        };
        m |= w << (16 * k);
    }
    m
}

/// [`newline_mask64`] without SSE2.
#[cfg(not(target_arch = "x86_64"))]
fn newline_mask64(c: &[u8; 64]) -> u64 {
    c.iter()
        .enumerate()
        .fold(0, |m, (k, &b)| m | ((b == b'\n') as u64) << k)
}

/// Offsets of the newlines of a [`newline_bits`] map, in order.
struct Newlines<'b> {
    words: std::slice::Iter<'b, u64>,
    /// Bits of the current word not taken yet.
    cur: u64,
    /// Offset of the current word's bit 0.
    base: usize,
}

impl<'b> Newlines<'b> {
    fn new(bits: &'b [u64]) -> Self {
        let mut words = bits.iter();
        let cur = words.next().copied().unwrap_or(0);
        Newlines {
            words,
            cur,
            base: 0,
        }
    }
}

impl Iterator for Newlines<'_> {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.cur == 0 {
            self.cur = *self.words.next()?;
            self.base += 64;
        }
        let k = self.cur.trailing_zeros() as usize;
        self.cur &= self.cur - 1;
        Some(self.base + k)
    }
}

fn parse_chunk<'a>(c: Chunk<'a>, cfg: Cfg, scratch: Scratch, bits: &mut Vec<u64>) -> Parsed<'a> {
    let (buf, len, last_partial) = match c {
        Chunk::TooLong => return Parsed::TooLong,
        Chunk::Data {
            buf,
            len,
            last_partial,
        } => (buf, len, last_partial),
    };
    let bytes = &buf[..len];
    let Scratch {
        mut strings,
        mut recs,
        mut remap,
    } = scratch;
    strings.clear();
    recs.clear();
    recs.reserve(bytes.len() / 128 + 1);
    remap.clear();
    let mut dec = Decoder {
        fd_paths: cfg.fd_paths,
        stat_times: cfg.stat_times,
        ..Decoder::new(strings)
    };
    // Pairs are merged here only when nothing between the two lines can
    // change what the sequential parser would do with them: every line in
    // between is a parsed call or another pid's half of a pair, all with a
    // pid column. Anything else drops the open starts (they stay `Slow`).
    let mut open = OpenStarts::default();
    // A pair's joined text (`name(` args tail), reused.
    let mut text: Vec<u8> = Vec::new();
    let mut pairs = 0u32;
    newline_bits(bytes, bits);
    let mut lines = Newlines::new(bits).map(|nl| (nl, false)).chain(
        // The last line when the input ends without a newline.
        (bytes.last().is_some_and(|&c| c != b'\n')).then_some((bytes.len(), true)),
    );
    let mut start = 0usize;
    #[allow(clippy::while_let_on_iterator)]
    while let Some((end, _)) = lines.next() {
        if recs.len() >= cfg.max_recs {
            recs.push(Rec::Rest {
                start: start as u32,
            });
            break;
        }
        let (s, e) = (start as u32, end as u32);
        let line = &bytes[start..end];
        start = end + 1;
        match classify(&mut dec, line, cfg) {
            Class::Fast {
                pid,
                ts,
                name,
                args,
                ret,
                dur,
            } => {
                match pid {
                    PidTok::Column(p) => {
                        open.remove(p);
                    }
                    _ => open.clear(),
                }
                // The event is decoded in place: built elsewhere and moved
                // in, its 144 bytes were copied through the stack, and
                // read back wider than written (store-forwarding stalls).
                recs.push(Rec::Fast {
                    start: s,
                    end: e,
                    pid,
                    ts,
                    ev: Event::EMPTY,
                });
                if let Some(Rec::Fast { ev, .. }) = recs.last_mut() {
                    dec.event(name, args, Some(ret), dur, cfg.input, ev);
                }
            }
            Class::Unfinished {
                pid,
                ts,
                name,
                args,
            } => {
                open.insert(
                    pid,
                    Open {
                        rec: recs.len(),
                        ts,
                        name,
                        args,
                    },
                );
                recs.push(Rec::Slow { start: s, end: e });
            }
            Class::Resumed {
                pid,
                ts,
                name,
                tail,
            } => {
                let merged = open.remove(pid).filter(|o| o.name == name);
                let Some(o) = merged else {
                    recs.push(Rec::Slow { start: s, end: e });
                    continue;
                };
                text.clear();
                text.extend_from_slice(o.name);
                text.push(b'(');
                text.extend_from_slice(o.args);
                // The same joining as `Parser::resumed_line`.
                let tail = match (text.last(), tail.first()) {
                    (Some(b' '), Some(b' ')) => &tail[1..],
                    _ => tail,
                };
                text.extend_from_slice(tail);
                let name_len = o.name.len();
                let ev = dec
                    .split_call(&text[name_len + 1..])
                    .map(|(argtext, ret, dur)| {
                        let mut ev = Event::EMPTY;
                        let name = &text[..name_len];
                        dec.event(name, argtext, Some(ret), dur, cfg.input, &mut ev);
                        ev
                    });
                let Some(ev) = ev else {
                    recs.push(Rec::Slow { start: s, end: e });
                    continue;
                };
                let Rec::Slow { start: us, end: ue } = recs[o.rec] else {
                    unreachable!("an open start is a Slow record")
                };
                recs[o.rec] = Rec::PairStart {
                    start: us,
                    end: ue,
                    pid,
                    ts: o.ts,
                    pair: pairs,
                };
                recs.push(Rec::PairEnd {
                    start: s,
                    end: e,
                    pid,
                    ts,
                    ev,
                    pair: pairs,
                });
                pairs += 1;
            }
            Class::Other => {
                open.clear();
                recs.push(Rec::Slow { start: s, end: e });
            }
        }
    }
    Parsed::Block {
        buf,
        len,
        last_partial,
        recs,
        extras: dec.extras,
        strings: dec.strings,
        pairs,
        remap,
    }
}

impl Parser {
    pub(super) fn feed_reader_par<R: Read, S: Sink>(
        &mut self,
        r: R,
        sink: &mut S,
    ) -> io::Result<()> {
        let rd = BlockReader {
            r,
            buf: Vec::new(),
            filled: 0,
            read_size: self.opts.read_size.max(1),
            block_size: self.opts.block_size.max(1),
            max_line: self.opts.max_line,
            discarding: false,
            eof: false,
            err: None,
            bytes: 0,
            free: Vec::new(),
            free_max: window_len(
                par_threads(&self.opts),
                self.opts.block_size.max(1),
                self.opts.read_size.max(1),
            ),
        };
        self.feed_blocks(rd, sink)
    }

    /// Parses a whole input held in memory (e.g. a mapped file) on
    /// `opts.threads` threads: the parallel path over blocks borrowed from
    /// `data`, with nothing read or copied on the calling thread (with
    /// `opts.threads` 1, [`Parser::feed_slice`] itself). Gives the events
    /// of [`Parser::feed_slice`], ids included.
    pub fn feed_slice_par<S: Sink>(&mut self, data: &[u8], sink: &mut S) {
        self.feed_slice_par_with(data, sink, &mut |_| {})
    }

    /// [`Parser::feed_slice_par`], telling `merged` the offset in `data`
    /// up to which every line has gone to the sink, after each merged
    /// block (for a progress bar, or to let the pages of a mapped file
    /// before that offset go).
    pub fn feed_slice_par_with<S: Sink>(
        &mut self,
        data: &[u8],
        sink: &mut S,
        merged: &mut dyn FnMut(usize),
    ) {
        let threads = match self.opts.threads {
            0 => rayon::current_num_threads(),
            n => n,
        };
        if threads <= 1 {
            // In pieces of whole lines, each told to `merged` when parsed,
            // so the pages of a mapped input can go as on the parallel path
            // (told only at the end, a 1.1 GB log was all resident).
            let mut pos = 0;
            while pos < data.len() && !self.stopped {
                let window = (pos + SEQ_PIECE).min(data.len());
                let end = if window == data.len() {
                    data.len()
                } else if let Some(i) = memrchr(b'\n', &data[pos..window]) {
                    pos + i + 1
                } else {
                    memchr(b'\n', &data[window..]).map_or(data.len(), |j| window + j + 1)
                };
                self.feed_slice(&data[pos..end], sink);
                merged(end);
                pos = end;
            }
            return;
        }
        let blocks = SliceBlocks {
            data,
            pos: 0,
            block_size: self.opts.block_size.max(1),
            max_line: self.opts.max_line,
            ends: Default::default(),
            merged,
        };
        // Reading a slice never fails.
        let _ = self.feed_blocks(blocks, sink);
    }

    fn feed_blocks<'a, B: Blocks<'a>, S: Sink>(
        &mut self,
        mut rd: B,
        sink: &mut S,
    ) -> io::Result<()> {
        let cfg = Cfg {
            max_line: self.opts.max_line,
            max_recs: max_recs(self.opts.block_size.max(1)),
            input: self.opts.input,
            fd_paths: self.opts.fd_paths,
            stat_times: self.opts.stat_times,
        };
        let threads = par_threads(&self.opts);
        let window = window_len(
            threads,
            self.opts.block_size.max(1),
            self.opts.read_size.max(1),
        ) as u64;
        // One thread fewer than cores: this thread parses too (see
        // `Queue::take`), and a thread per core more than that only made
        // the three time-share two cores (5 interleaved rounds on the bench
        // log: 1.47 s mean with two workers, 1.35 s with one).
        let workers = threads - 1;
        let mut err: Option<io::Error> = None;
        let q = Queue::default();
        let mut spare: Vec<Scratch> = Vec::new();
        // This thread's newline map when it parses a block.
        let mut bits = Vec::new();
        let (mut next_read, mut next_merge) = (0u64, 0u64);
        let mut eof = false;
        std::thread::scope(|sc| {
            // However this scope ends (a sink that panics too), the workers
            // are told to stop, so the scope's join cannot wait forever.
            let _close = CloseOnDrop(&q);
            for _ in 0..workers {
                sc.spawn(|| q.work(cfg));
            }
            loop {
                // Keep `window` blocks handed out and not merged.
                while !eof && !self.stopped && err.is_none() && next_read - next_merge < window {
                    match rd.next() {
                        Ok(Some(chunk)) => {
                            let scratch = spare.pop().unwrap_or_default();
                            q.push(next_read, chunk, scratch);
                            next_read += 1;
                        }
                        Ok(None) => eof = true,
                        Err(e) => err = Some(e),
                    }
                }
                if next_merge == next_read {
                    break;
                }
                // Block `next_merge`, parsed by a worker or, rather than
                // wait for it, by this thread (which then also parses the
                // blocks no worker has started yet).
                let p = q.take(next_merge, cfg, &mut bits);
                next_merge += 1;
                if self.stopped {
                    continue;
                }
                let mut p = self.merge(p, sink);
                rd.merged(1);
                if let Parsed::Block {
                    buf,
                    strings,
                    recs,
                    remap,
                    ..
                } = &mut p
                {
                    if let Buf::Owned(buf) = buf {
                        rd.recycle(std::mem::take(buf));
                    }
                    spare.push(Scratch {
                        strings: std::mem::take(strings),
                        recs: std::mem::take(recs),
                        remap: std::mem::take(remap),
                    });
                }
            }
        });
        self.stats.bytes += rd.bytes();
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Maps an event's block-local string ids to the parser's interner (in
    /// the order `Decoder::event` interns them) and pushes it.
    fn remap_push<S: Sink>(
        &mut self,
        ev: &mut Event,
        strings: &Interner,
        remap: &mut [u32],
        sink: &mut S,
    ) {
        // A plain function, inlined: the closure this was stayed out of
        // line, a call per id (7.6 M instructions on the 30 MB log).
        #[inline(always)]
        fn m(to: &mut Interner, strings: &Interner, remap: &mut [u32], id: PathId) -> PathId {
            let g = &mut remap[id.0 as usize];
            if *g == u32::MAX {
                *g = to.intern_from(strings, id).0;
            }
            PathId(*g)
        }
        let to = &mut self.dec.strings;
        ev.name = m(to, strings, remap, ev.name);
        if let Ret::Err(Errno(e)) = ev.ret {
            ev.ret = Ret::Err(Errno(m(to, strings, remap, e)));
        }
        for p in [
            &mut ev.ret_path,
            &mut ev.fd_path,
            &mut ev.path,
            &mut ev.path2,
        ] {
            if let Some(id) = *p {
                *p = Some(m(to, strings, remap, id));
            }
        }
        self.push_event(ev, sink);
    }

    /// The ordered stage for one parsed block; gives the block back to be
    /// freed elsewhere.
    fn merge<'a, S: Sink>(&mut self, mut p: Parsed<'a>, sink: &mut S) -> Parsed<'a> {
        let Parsed::Block {
            buf,
            len,
            last_partial,
            recs,
            strings,
            pairs,
            remap,
            extras,
            ..
        } = &mut p
        else {
            self.too_long(sink);
            return p;
        };
        if *extras != 0 {
            self.note_extras(*extras);
        }
        // `-Y`: the lines' command names, read again from the lines the
        // block parsed (only blocks that had one pay).
        let comms = *extras & PRE_COMM != 0;
        // Ids of the strings the parser holds already; the rest are
        // interned by `remap_push` in line order, as the sequential parser
        // would.
        self.dec.strings.get_all_from(strings, remap);
        sink.ids_ahead(remap);
        let (bytes, last_partial, strings) = (&buf[..*len], *last_partial, strings);
        // Start line and time of each merged pair; `None` when the start
        // had to go through the line parser (then so does the end).
        let mut starts: Vec<Option<(u64, Option<i64>)>> = vec![None; *pairs as usize];
        let strings = &*strings;
        let remap = &mut remap[..];
        // Events are completed in their records (which are cleared for
        // reuse after the merge), not copied out.
        for rec in recs.iter_mut() {
            if self.stopped {
                break;
            }
            match *rec {
                Rec::Slow { start, end } => {
                    let last = last_partial && end as usize == bytes.len();
                    self.line(&bytes[start as usize..end as usize], last, sink);
                }
                Rec::Rest { start } => {
                    let rest = &bytes[start as usize..];
                    let mut from = 0;
                    for nl in memchr_iter(b'\n', rest) {
                        if self.stopped {
                            break;
                        }
                        self.line(&rest[from..nl], false, sink);
                        from = nl + 1;
                    }
                    if from < rest.len() && !self.stopped {
                        self.line(&rest[from..], last_partial, sink);
                    }
                }
                Rec::Fast {
                    start,
                    end,
                    pid,
                    ts,
                    ref mut ev,
                } => {
                    if !self.carry.is_empty() || self.in_summary {
                        let last = last_partial && end as usize == bytes.len();
                        self.line(&bytes[start as usize..end as usize], last, sink);
                        continue;
                    }
                    self.line_no += 1;
                    self.stats.lines += 1;
                    ev.pid = self.resolve_pid_fast(pid);
                    if comms {
                        self.note_comm(ev.pid, &bytes[start as usize..end as usize], sink);
                    }
                    ev.ts_us = ts.map(|t| self.resolve_ts(t));
                    ev.line = self.line_no;
                    self.stats.syscall_lines += 1;
                    self.remap_push(ev, strings, remap, sink);
                }
                Rec::PairStart {
                    start,
                    end,
                    pid,
                    ts,
                    pair,
                } => {
                    if !self.carry.is_empty() || self.in_summary {
                        let last = last_partial && end as usize == bytes.len();
                        self.line(&bytes[start as usize..end as usize], last, sink);
                        continue;
                    }
                    self.line_no += 1;
                    self.stats.lines += 1;
                    let pid = self.resolve_pid_fast(PidTok::Column(pid));
                    if comms {
                        self.note_comm(pid, &bytes[start as usize..end as usize], sink);
                    }
                    let t = ts.map(|t| self.resolve_ts(t));
                    self.stats.unfinished_lines += 1;
                    if let Some(old) = self.pending.remove(&pid) {
                        self.never_resumed(pid, old, sink);
                    }
                    starts[pair as usize] = Some((self.line_no, t));
                }
                Rec::PairEnd {
                    start,
                    end,
                    pid,
                    ts,
                    ref mut ev,
                    pair,
                } => {
                    let Some((line, t)) = starts[pair as usize] else {
                        let last = last_partial && end as usize == bytes.len();
                        self.line(&bytes[start as usize..end as usize], last, sink);
                        continue;
                    };
                    self.line_no += 1;
                    self.stats.lines += 1;
                    ev.pid = self.resolve_pid_fast(PidTok::Column(pid));
                    if comms {
                        self.note_comm(ev.pid, &bytes[start as usize..end as usize], sink);
                    }
                    if let Some(ts) = ts {
                        self.resolve_ts(ts);
                    }
                    ev.ts_us = t;
                    ev.line = line;
                    self.stats.resumed_lines += 1;
                    self.remap_push(ev, strings, remap, sink);
                }
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::TodCache;
    use crate::testutil::xorshift;
    use std::io::Write;

    /// `classify` as it was before its byte tests: each test in the plain
    /// order.
    fn classify_reference<'a>(dec: &mut Decoder, line: &'a [u8], cfg: Cfg) -> Class<'a> {
        if line.len() > cfg.max_line {
            return Class::Other;
        }
        let line = match line {
            [rest @ .., b'\r'] => rest,
            l => l,
        };
        if line.ends_with(b" attached") || line.ends_with(b" detached") {
            return Class::Other;
        }
        let body = args::trim(line);
        if body.is_empty() || body.starts_with(b"% time") {
            return Class::Other;
        }
        let Ok(pre) = split_prefix(line, &mut TodCache::default()) else {
            return Class::Other;
        };
        let rest = pre.rest;
        if let Some(r) = rest.strip_prefix(b"<... ") {
            return match (pre.pid, find_resumed(r)) {
                (PidTok::Column(pid), Some(end)) if pid != 0 => Class::Resumed {
                    pid,
                    ts: pre.ts,
                    name: &r[..end],
                    tail: &r[end + 9..],
                },
                _ => Class::Other,
            };
        }
        if rest.starts_with(b"+++ ")
            || rest.starts_with(b"--- ")
            || rest.starts_with(b"strace: ")
            || rest.starts_with(b"[ Process PID=")
        {
            return Class::Other;
        }
        let Some(nlen) = name_len(rest) else {
            return Class::Other;
        };
        if nlen == 0 || rest[nlen] != b'(' {
            return Class::Other;
        }
        let after = &rest[nlen + 1..];
        if let Some(a) = after.strip_suffix(b" <unfinished ...>") {
            return match pre.pid {
                PidTok::Column(pid) if pid != 0 => Class::Unfinished {
                    pid,
                    ts: pre.ts,
                    name: &rest[..nlen],
                    args: a,
                },
                _ => Class::Other,
            };
        }
        if after.ends_with(b"<detached ...>") {
            return Class::Other;
        }
        match dec.split_call(after) {
            Some((args, ret, dur)) => Class::Fast {
                pid: pre.pid,
                ts: pre.ts,
                name: &rest[..nlen],
                args,
                ret,
                dur,
            },
            None => Class::Other,
        }
    }

    /// Lines of every kind (calls, unfinished and resumed halves, exits,
    /// signals, strace's messages, blanks, `% time`, `attached`) with
    /// bytes changed: `classify` must give what the plain order gives.
    #[test]
    fn classify_equals_the_plain_order() {
        let lines: [&[u8]; 19] = [
            b"20001 10:00:00.000004 read(3, \"ab\", 2) = 2 <0.000011>",
            b"20001 10:00:00.000004 close(3) = 0 <0.000003> attached",
            b" 20001 10:00:00.000004 close(3) = 0",
            b"20001 10:00:00.000004 (3) = 0",
            b"20001 10:00:00.000004 openat(AT_FDCWD, \"/a\", O_RDONLY <unfinished ...>",
            b"20001 10:00:00.000004 <... openat resumed>) = 3</a> <0.000020>",
            b"20001 10:00:00.000004 +++ exited with 0 +++",
            b"20001 10:00:00.000004 --- SIGCHLD {si_signo=SIGCHLD} ---",
            b"strace: Process 20002 attached",
            b"20001 10:00:00.000004 strace: (x) = 1",
            b"[pid 20001] 10:00:00.000004 close(3) = 0",
            b"20001 10:00:00.000004 exit_group(0 <detached ...>",
            b"% time     seconds  usecs/call     calls    errors syscall",
            b"  \t ",
            b"20001 10:00:00.000004 [ Process PID=20001 runs in 32 bit mode. ]",
            b"20001 write(1, \"x detached\", 10) = 10",
            b"10:00:00.000004 close(3) = 0 <0.000003>\r",
            b"1 close(3) = 0 ...>",
            b"",
        ];
        let alphabet = b" \t\r%d.>(<a0:";
        let cfg = Cfg {
            max_line: 200,
            max_recs: 1024,
            input: 0,
            fd_paths: true,
            stat_times: true,
        };
        let (mut d1, mut d2) = (Decoder::new(Interner::new()), Decoder::new(Interner::new()));
        let mut next = xorshift(0x5851_f42d_4c95_7f2d);
        let mut kinds = [0usize; 5];
        for k in 0..200_000usize {
            let x = next();
            let mut line = lines[k % lines.len()].to_vec();
            for j in 0..(k / lines.len() % 3) {
                if line.is_empty() {
                    break;
                }
                // near either end, where the tests look
                let off = ((x >> (8 * j)) % 24) as usize % line.len();
                let at = if (x >> (40 + j)) & 1 == 0 {
                    off
                } else {
                    line.len() - 1 - off
                };
                line[at] = alphabet[((x >> (48 + 4 * j)) % alphabet.len() as u64) as usize];
            }
            let a = classify(&mut d1, &line, cfg);
            let b = classify_reference(&mut d2, &line, cfg);
            kinds[match &a {
                Class::Fast { .. } => 0,
                Class::Unfinished { .. } => 1,
                Class::Resumed { .. } => 2,
                Class::Other => 3,
            }] += 1;
            assert_eq!(a, b, "{:?}", String::from_utf8_lossy(&line));
        }
        assert!(kinds[..4].iter().all(|&n| n > 1000), "{kinds:?}");
    }

    /// Newlines of generated blocks of every length around the 64-byte
    /// words (none, runs, at each word edge), by every mask function the
    /// CPU has, against `memchr_iter`.
    /// `OpenStarts` answers as a plain map under random inserts, removals
    /// and clears, with pids that share residues mod 64.
    #[test]
    fn open_starts_equal_a_map() {
        let mut next = xorshift(0x1b87_3593_cc9e_2d51);
        let mut open = OpenStarts::default();
        let mut plain: HashMap<u32, usize> = HashMap::new();
        let o = |rec| Open {
            rec,
            ts: None,
            name: b"read",
            args: b"",
        };
        for step in 0..200_000usize {
            let x = next();
            let pid = [0u32, 1, 64, 65, 128, 7, 71, u32::MAX][(x % 8) as usize];
            match (x >> 8) % 100 {
                0 => {
                    open.clear();
                    plain.clear();
                }
                1..=40 => {
                    open.insert(pid, o(step));
                    plain.insert(pid, step);
                }
                _ => assert_eq!(open.remove(pid).map(|o| o.rec), plain.remove(&pid)),
            }
        }
    }

    /// `Sink::ids_ahead` announces, before each block's events, the ids
    /// of the strings they use that the parser held already: every name
    /// and path (and errno) of a later block's events interned in an
    /// earlier block is in its list, and nothing else is.
    #[test]
    fn ids_ahead_are_the_known_strings_of_the_next_events() {
        #[derive(Default)]
        struct S {
            ahead: std::collections::HashSet<u32>,
            /// Ids below this were interned before the current block.
            known: u32,
            seen_max: u32,
            used: std::collections::HashSet<u32>,
            calls: usize,
            checked: usize,
        }
        impl S {
            fn end_block(&mut self) {
                // Each announced id is used by the block's events.
                assert!(self.ahead.is_subset(&self.used), "announced but not used");
                self.used.clear();
            }
        }
        impl Sink for S {
            fn event(&mut self, ev: &Event, _: &Interner) -> bool {
                for id in [Some(ev.name), ev.path, ev.errno().map(|e| e.0)]
                    .into_iter()
                    .flatten()
                {
                    if id.0 < self.known {
                        assert!(self.ahead.contains(&id.0), "id {} not announced", id.0);
                        self.checked += 1;
                    }
                    self.used.insert(id.0);
                    self.seen_max = self.seen_max.max(id.0 + 1);
                }
                true
            }
            fn ids_ahead(&mut self, ids: &[u32]) {
                if self.calls > 0 {
                    self.end_block();
                }
                self.calls += 1;
                self.ahead = ids.iter().copied().filter(|&i| i != u32::MAX).collect();
                self.known = self.seen_max;
            }
        }
        let mut next = xorshift(77);
        let mut log = Vec::new();
        for i in 0..20_000u64 {
            let x = next();
            let path = format!("/srv/www/site{}/f{}.php", x % 7, (x >> 8) % 40);
            let name = ["stat", "lstat", "openat", "access"][(x >> 20) as usize % 4];
            writeln!(
                log,
                "{} 10:00:00.{:06} {name}(\"{path}\", 0x7ffd) = -1 ENOENT (No such file or directory) <0.000010>",
                100 + x % 5,
                i % 1_000_000
            )
            .unwrap();
        }
        let mut p = Parser::new(
            "t",
            Options {
                threads: 2,
                block_size: 4096,
                ..Options::default()
            },
        );
        let mut s = S::default();
        p.feed_slice_par(&log, &mut s);
        s.end_block();
        assert!(s.calls > 100, "{} blocks", s.calls);
        assert!(s.checked > 30_000, "{} ids checked", s.checked);
    }

    #[test]
    fn newline_map_finds_what_memchr_finds() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        // One map reused: lengths up, then down (a longer block's words
        // are left in it and must not show).
        let mut bits = Vec::new();
        let lens: Vec<usize> = (0..300usize).chain([1023, 1024, 1025, 4096 + 17]).collect();
        for &len in lens.iter().chain(lens.iter().rev()) {
            for density in [0u64, 1, 8, 64, 255] {
                let block: Vec<u8> = (0..len)
                    .map(|_| {
                        let x = next();
                        if x % 256 < density {
                            b'\n'
                        } else {
                            // bytes next to '\n' (0x0a) and high bytes
                            [b'\t', b'\x0b', b'a', 0x8a, b'\r'][(x >> 8) as usize % 5]
                        }
                    })
                    .collect();
                let want: Vec<usize> = memchr_iter(b'\n', &block).collect();
                newline_bits(&block, &mut bits);
                assert_eq!(bits.len(), len.div_ceil(64));
                assert_eq!(Newlines::new(&bits).collect::<Vec<_>>(), want, "len {len}");
                let mut sse = Vec::new();
                newline_bits_with(&block, &mut sse, newline_mask64);
                assert_eq!(sse, bits, "len {len}");
            }
        }
    }
}
