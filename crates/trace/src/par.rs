//! The parallel reader path.
//!
//! The calling thread reads blocks of whole lines; the rayon pool parses
//! the plain complete syscall lines of each block with a block-local
//! interner; the calling thread then walks the blocks in input order,
//! resolving what depends on earlier lines (timestamps under `-r` and
//! midnight, `[pid N]` state, unfinished/resumed pairs, summary tables) and
//! mapping block-local string ids to the parser's interner. Every line the
//! blocks did not parse (unfinished, resumed, signals, exits, odd lines)
//! goes through the sequential line parser there, so both paths give the
//! same events, ids included.
//!
//! Reading, parsing and merging overlap: while the pool parses batch k+1,
//! the calling thread merges batch k and reads batch k+2.

use super::*;

/// Bytes of whole lines, or the mark of a line longer than `max_line`
/// whose bytes were dropped.
enum Chunk {
    Data { bytes: Vec<u8>, last_partial: bool },
    TooLong,
}

struct BlockReader<R> {
    r: R,
    buf: Vec<u8>,
    read_size: usize,
    block_size: usize,
    max_line: usize,
    discarding: bool,
    eof: bool,
    bytes: u64,
}

impl<R: Read> BlockReader<R> {
    fn next(&mut self) -> io::Result<Option<Chunk>> {
        let mut want = self.block_size;
        loop {
            while !self.eof && self.buf.len() < want {
                let old = self.buf.len();
                self.buf.resize(old + self.read_size, 0);
                let n = loop {
                    match self.r.read(&mut self.buf[old..]) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            self.buf.truncate(old);
                            return Err(e);
                        }
                    }
                };
                self.buf.truncate(old + n);
                self.bytes += n as u64;
                if n == 0 {
                    self.eof = true;
                }
                if self.discarding {
                    match memchr(b'\n', &self.buf) {
                        Some(i) => {
                            self.buf.drain(..=i);
                            self.discarding = false;
                        }
                        None => self.buf.clear(),
                    }
                }
            }
            if let Some(i) = memrchr(b'\n', &self.buf) {
                let rest = self.buf[i + 1..].to_vec();
                self.buf.truncate(i + 1);
                let bytes = std::mem::replace(&mut self.buf, rest);
                self.buf.reserve(self.block_size);
                return Ok(Some(Chunk::Data {
                    bytes,
                    last_partial: false,
                }));
            }
            if self.buf.len() > self.max_line {
                self.discarding = true;
                self.buf.clear();
                return Ok(Some(Chunk::TooLong));
            }
            if self.eof {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(Chunk::Data {
                    bytes: std::mem::take(&mut self.buf),
                    last_partial: true,
                }));
            }
            want = self.buf.len() + self.read_size;
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
}

enum Parsed {
    Block {
        bytes: Vec<u8>,
        last_partial: bool,
        recs: Vec<Rec>,
        strings: Interner,
    },
    TooLong,
}

#[derive(Clone, Copy)]
struct Cfg {
    max_line: usize,
    input: u16,
}

/// A plain complete syscall line, parsed without any state from earlier
/// lines; `None` for everything the sequential parser must see (the same
/// dispatch as `Parser::line_inner`).
fn fast_line(dec: &mut Decoder, line: &[u8], cfg: Cfg) -> Option<(PidTok, Option<RawTs>, Event)> {
    if line.len() > cfg.max_line {
        return None;
    }
    let line = match line {
        [rest @ .., b'\r'] => rest,
        l => l,
    };
    if line.ends_with(b" attached") || line.ends_with(b" detached") {
        return None;
    }
    let body = args::trim(line);
    if body.is_empty() || body.starts_with(b"% time") {
        return None;
    }
    let pre = split_prefix(line).ok()?;
    let rest = pre.rest;
    if rest.starts_with(b"+++ ")
        || rest.starts_with(b"--- ")
        || rest.starts_with(b"<... ")
        || rest.starts_with(b"strace: ")
        || rest.starts_with(b"[ Process PID=")
    {
        return None;
    }
    let nlen = rest
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))?;
    if nlen == 0 || rest[nlen] != b'(' {
        return None;
    }
    let after = &rest[nlen + 1..];
    if after.ends_with(b" <unfinished ...>") || after.ends_with(b"<detached ...>") {
        return None;
    }
    let (argtext, ret, dur) = split_call(after)?;
    let ev = dec.event(&rest[..nlen], argtext, Some(ret), dur, cfg.input);
    Some((pre.pid, pre.ts, ev))
}

fn parse_chunk(c: Chunk, cfg: Cfg) -> Parsed {
    let (bytes, last_partial) = match c {
        Chunk::TooLong => return Parsed::TooLong,
        Chunk::Data {
            bytes,
            last_partial,
        } => (bytes, last_partial),
    };
    let mut dec = Decoder::new(Interner::new());
    let mut recs = Vec::with_capacity(bytes.len() / 128 + 1);
    let mut start = 0usize;
    let mut one = |start: usize, end: usize, recs: &mut Vec<Rec>| {
        let (s, e) = (start as u32, end as u32);
        recs.push(match fast_line(&mut dec, &bytes[start..end], cfg) {
            Some((pid, ts, ev)) => Rec::Fast {
                start: s,
                end: e,
                pid,
                ts,
                ev,
            },
            None => Rec::Slow { start: s, end: e },
        });
    };
    for nl in memchr_iter(b'\n', &bytes) {
        one(start, nl, &mut recs);
        start = nl + 1;
    }
    if start < bytes.len() {
        one(start, bytes.len(), &mut recs);
    }
    Parsed::Block {
        bytes,
        last_partial,
        recs,
        strings: dec.strings,
    }
}

fn read_batch<R: Read>(
    rd: &mut BlockReader<R>,
    n: usize,
    err: &mut Option<io::Error>,
) -> Vec<Chunk> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        match rd.next() {
            Ok(Some(c)) => v.push(c),
            Ok(None) => break,
            Err(e) => {
                *err = Some(e);
                break;
            }
        }
    }
    v
}

impl Parser {
    pub(super) fn feed_reader_par<R: Read, S: Sink>(
        &mut self,
        r: R,
        sink: &mut S,
    ) -> io::Result<()> {
        let cfg = Cfg {
            max_line: self.opts.max_line,
            input: self.opts.input,
        };
        let mut rd = BlockReader {
            r,
            buf: Vec::new(),
            read_size: self.opts.read_size.max(1),
            block_size: self.opts.block_size.max(1),
            max_line: self.opts.max_line,
            discarding: false,
            eof: false,
            bytes: 0,
        };
        let batch = (rayon::current_num_threads() * 4).max(2);
        let mut err: Option<io::Error> = None;
        let mut to_parse = read_batch(&mut rd, batch, &mut err);
        let mut parsed: Vec<Parsed> = Vec::new();
        // Merged blocks, freed on the pool rather than on this thread.
        let mut done: Vec<Parsed> = Vec::new();
        let work_left = |a: &Vec<Chunk>, b: &Vec<Parsed>| !a.is_empty() || !b.is_empty();
        while !self.stopped && work_left(&to_parse, &parsed) {
            let mut out: Vec<Option<Parsed>> = (0..to_parse.len()).map(|_| None).collect();
            let mut next_read = Vec::new();
            let old = std::mem::take(&mut done);
            rayon::in_place_scope(|sc| {
                for (slot, chunk) in out.iter_mut().zip(to_parse.drain(..)) {
                    sc.spawn(move |_| *slot = Some(parse_chunk(chunk, cfg)));
                }
                sc.spawn(move |_| drop(old));
                for p in parsed.drain(..) {
                    if self.stopped {
                        break;
                    }
                    done.push(self.merge(p, sink));
                }
                if err.is_none() && !self.stopped {
                    next_read = read_batch(&mut rd, batch, &mut err);
                }
            });
            parsed = out.into_iter().flatten().collect();
            to_parse = next_read;
        }
        self.stats.bytes += rd.bytes;
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The ordered stage for one parsed block; gives the block back to be
    /// freed elsewhere.
    fn merge<S: Sink>(&mut self, p: Parsed, sink: &mut S) -> Parsed {
        let Parsed::Block {
            bytes,
            last_partial,
            recs,
            strings,
        } = &p
        else {
            self.too_long(sink);
            return p;
        };
        let (bytes, last_partial, strings) = (&bytes[..], *last_partial, strings);
        let mut remap = vec![u32::MAX; strings.len()];
        for rec in recs {
            if self.stopped {
                break;
            }
            match *rec {
                Rec::Slow { start, end } => {
                    let last = last_partial && end as usize == bytes.len();
                    self.line(&bytes[start as usize..end as usize], last, sink);
                }
                Rec::Fast {
                    start,
                    end,
                    pid,
                    ts,
                    ref ev,
                } => {
                    let mut ev = ev.clone();
                    if !self.carry.is_empty() || self.in_summary {
                        let last = last_partial && end as usize == bytes.len();
                        self.line(&bytes[start as usize..end as usize], last, sink);
                        continue;
                    }
                    self.line_no += 1;
                    self.stats.lines += 1;
                    ev.pid = self.resolve_pid(pid);
                    ev.ts_us = ts.map(|t| self.resolve_ts(t));
                    ev.line = self.line_no;
                    self.stats.syscall_lines += 1;
                    // Same interning order as `Decoder::event`.
                    let mut m = |id: PathId| {
                        let g = &mut remap[id.0 as usize];
                        if *g == u32::MAX {
                            *g = self.dec.strings.intern(strings.bytes(id)).0;
                        }
                        PathId(*g)
                    };
                    ev.name = m(ev.name);
                    if let Ret::Err(Errno(e)) = ev.ret {
                        ev.ret = Ret::Err(Errno(m(e)));
                    }
                    ev.ret_path = ev.ret_path.map(&mut m);
                    ev.fd_path = ev.fd_path.map(&mut m);
                    ev.path = ev.path.map(&mut m);
                    ev.path2 = ev.path2.map(&mut m);
                    self.push_event(&ev, sink);
                }
            }
        }
        p
    }
}
