//! Calls kept on disk: what a capture recorded, written as it is read
//! and read back request by request, so that holding a capture costs its
//! distinct paths, not its length.
//!
//! A [`Spill`] is an unnamed temporary file (in `$TMPDIR`, removed when
//! the spill is dropped, or by the system if the process dies) holding
//! chunks of calls. Each chunk is one `postcard` record of the calls with
//! their paths and errno names as numbers into a table kept in memory
//! (each distinct name once): about 25 bytes per call on disk, against
//! 96 in memory.

use serde::{Deserialize, Serialize};
use statstorm_trace::op::{Name, Op, OpKind};
// names are looked up once per call written or read: the trace crate's
// fast hash instead of SipHash
use statstorm_trace::event::FastMap as HashMap;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

/// Where one chunk lies in the spill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    offset: u64,
    len: u32,
}

impl crate::column::Fixed for Chunk {
    const SIZE: usize = 12;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }
    fn take(b: &mut crate::column::Bytes<'_>) -> Chunk {
        Chunk {
            offset: b.u64(),
            len: b.u32(),
        }
    }
}

/// A call as written: [`Op`] with its names as numbers into [`Names`].
#[derive(Serialize, Deserialize)]
pub(crate) struct CallRec {
    t_us: i64,
    dur_us: Option<u64>,
    pid: u32,
    uid: u32,
    kind: OpKind,
    path: u32,
    path2: Option<u32>,
    flags: u32,
    errno: Option<u32>,
    bytes: u64,
    walk_base: u32,
}

impl CallRec {
    pub(crate) fn of(o: &Op, names: &mut Names) -> CallRec {
        CallRec {
            t_us: o.t_us,
            dur_us: o.dur_us,
            pid: o.pid,
            uid: o.uid,
            kind: o.kind,
            path: names.id(&o.path),
            path2: o.path2.as_ref().map(|n| names.id(n)),
            flags: o.flags,
            errno: o.errno.as_ref().map(|n| names.id(n)),
            bytes: o.bytes,
            walk_base: o.walk_base,
        }
    }

    pub(crate) fn op(self, names: &Names) -> io::Result<Op> {
        Ok(Op {
            t_us: self.t_us,
            dur_us: self.dur_us,
            pid: self.pid,
            uid: self.uid,
            kind: self.kind,
            path: names.get(self.path)?,
            path2: self.path2.map(|i| names.get(i)).transpose()?,
            flags: self.flags,
            errno: self.errno.map(|i| names.get(i)).transpose()?,
            bytes: self.bytes,
            walk_base: self.walk_base,
        })
    }
}

/// A call with its position in the capture (`seq`).
#[derive(Serialize, Deserialize)]
struct Rec {
    seq: u64,
    call: CallRec,
}

/// The distinct names (paths, errno names) of what a spill holds, each
/// once, and their numbers.
#[derive(Default)]
pub(crate) struct Names {
    names: Vec<Name>,
    /// Name -> number, by the address of the shared text: the normalizer
    /// gives each distinct path one `Name`, and `names` keeps every one
    /// alive, so an address is never reused for another text (a text
    /// seen under two addresses is stored twice, still read back right).
    ids: HashMap<usize, u32>,
    /// Name -> number by the text itself ([`Names::by_text`]).
    texts: Option<HashMap<Name, u32>>,
}

impl Names {
    /// Numbers given by the text: for names not shared by one interner
    /// (a lifted operation's paths are made from strings), where numbers
    /// by address would grow with the operations, not the distinct paths.
    pub(crate) fn by_text() -> Names {
        Names {
            texts: Some(HashMap::default()),
            ..Names::default()
        }
    }

    pub(crate) fn id(&mut self, n: &Name) -> u32 {
        if let Some(texts) = &mut self.texts {
            if let Some(&i) = texts.get(n) {
                return i;
            }
            let i = self.names.len() as u32;
            self.names.push(n.clone());
            texts.insert(n.clone(), i);
            return i;
        }
        let key = std::sync::Arc::as_ptr(n) as *const u8 as usize;
        if let Some(&i) = self.ids.get(&key) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(n.clone());
        self.ids.insert(key, i);
        i
    }

    pub(crate) fn get(&self, i: u32) -> io::Result<Name> {
        self.names
            .get(i as usize)
            .cloned()
            .ok_or_else(|| io::Error::other("a record names a path the spill never stored"))
    }
}

/// Records appended and read back by place: held in memory up to
/// [`Blobs::HELD_BYTES`], then in an unnamed temporary file (so a small
/// capture needs no temporary file, and a large one holds at most that
/// much in memory).
pub struct Blobs {
    mem: Vec<u8>,
    file: Option<AppendFile>,
    end: u64,
    /// Bytes held in memory before the records go to a file.
    held: usize,
}

impl Default for Blobs {
    fn default() -> Self {
        Blobs::holding(Self::HELD_BYTES)
    }
}

impl Blobs {
    /// Bytes held in memory before the records go to a temporary file.
    pub const HELD_BYTES: usize = 32 << 20;

    pub fn new() -> Blobs {
        Blobs::default()
    }

    /// Blobs held in memory up to `held` bytes.
    pub fn holding(held: usize) -> Blobs {
        Blobs {
            mem: Vec::new(),
            file: None,
            end: 0,
            held,
        }
    }

    /// Appends `buf`; gives its offset and length.
    pub fn put(&mut self, buf: &[u8]) -> io::Result<(u64, u32)> {
        let len = u32::try_from(buf.len()).map_err(|_| io::Error::other("a record past 4 GiB"))?;
        let at = self.end;
        match &mut self.file {
            Some(f) => {
                f.append(buf)?;
            }
            None if self.mem.len() + buf.len() <= self.held => {
                self.mem.extend_from_slice(buf);
            }
            None => {
                let mut f = AppendFile::new()?;
                f.append(&self.mem)?;
                f.append(buf)?;
                self.mem = Vec::new();
                self.file = Some(f);
            }
        }
        self.end += buf.len() as u64;
        Ok((at, len))
    }

    /// The record at `offset` of `len` bytes.
    pub fn get(&self, offset: u64, len: u32) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        self.read_into(offset, &mut buf)?;
        Ok(buf)
    }

    /// Fills `buf` with the bytes at `offset`.
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match &self.file {
            Some(f) => f.read_at(buf, offset),
            None => {
                let from = usize::try_from(offset).map_err(io::Error::other)?;
                let held = from
                    .checked_add(buf.len())
                    .and_then(|to| self.mem.get(from..to))
                    .ok_or_else(|| io::Error::other("a record past the end of what was written"))?;
                buf.copy_from_slice(held);
                Ok(())
            }
        }
    }

    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.end
    }

    /// Whether the records went to a temporary file.
    pub fn on_disk(&self) -> bool {
        self.file.is_some()
    }
}

/// An unnamed temporary file written at its end and read anywhere, with a
/// buffer on each side: appends are gathered into writes of
/// [`AppendFile::WRITE`] bytes, and a read of a small record fills a
/// window of [`AppendFile::WINDOW`] bytes from there, which serves the
/// records after it. Records are mostly read back in about the order they
/// were written (request after request), so a capture of many small
/// requests costs a system call per window, not one per record.
pub(crate) struct AppendFile {
    file: std::fs::File,
    /// Bytes in the file; what follows is in `pending`.
    flushed: u64,
    pending: Vec<u8>,
    /// The bytes last read ahead, and where they start. Readers on
    /// several threads share it: one that finds it taken reads directly.
    window: std::sync::Mutex<(u64, Vec<u8>)>,
}

impl AppendFile {
    const WRITE: usize = 1 << 20;
    const WINDOW: usize = 256 << 10;

    pub(crate) fn new() -> io::Result<AppendFile> {
        Ok(AppendFile {
            file: tempfile::tempfile()?,
            flushed: 0,
            pending: Vec::new(),
            window: std::sync::Mutex::new((0, Vec::new())),
        })
    }

    /// Bytes appended.
    pub(crate) fn len(&self) -> u64 {
        self.flushed + self.pending.len() as u64
    }

    pub(crate) fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.pending.len() + buf.len() > Self::WRITE {
            self.flush()?;
        }
        if buf.len() >= Self::WRITE {
            (&self.file).write_all(buf)?;
            self.flushed += buf.len() as u64;
        } else {
            self.pending.extend_from_slice(buf);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            (&self.file).write_all(&self.pending)?;
            self.flushed += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }

    /// Fills `out` with the bytes at `offset`.
    pub(crate) fn read_at(&self, out: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset
            .checked_add(out.len() as u64)
            .filter(|&e| e <= self.len())
            .ok_or_else(|| io::Error::other("a record past the end of what was written"))?;
        // the part not yet written out
        let split = end.min(self.flushed).max(offset);
        let (in_file, in_pending) = out.split_at_mut((split - offset) as usize);
        if !in_pending.is_empty() {
            let from = (split - self.flushed) as usize;
            in_pending.copy_from_slice(&self.pending[from..from + in_pending.len()]);
        }
        if in_file.is_empty() {
            return Ok(());
        }
        if in_file.len() > Self::WINDOW / 4 {
            return self.file.read_exact_at(in_file, offset);
        }
        let Ok(mut w) = self.window.try_lock() else {
            return self.file.read_exact_at(in_file, offset);
        };
        let (at, bytes) = &mut *w;
        let hit = offset >= *at && split <= *at + bytes.len() as u64;
        if !hit {
            let n = (self.flushed - offset).min(Self::WINDOW as u64) as usize;
            bytes.resize(n, 0);
            self.file.read_exact_at(bytes, offset)?;
            *at = offset;
        }
        let from = (offset - *at) as usize;
        in_file.copy_from_slice(&bytes[from..from + in_file.len()]);
        Ok(())
    }
}

/// Calls on disk; see the module docs.
pub struct Spill {
    file: AppendFile,
    names: Names,
    buf: Vec<u8>,
    recs: Vec<Rec>,
}

impl Spill {
    /// An empty spill in a new temporary file.
    pub fn new() -> io::Result<Spill> {
        Ok(Spill {
            file: AppendFile::new()?,
            names: Names::default(),
            buf: Vec::new(),
            recs: Vec::new(),
        })
    }

    /// Writes `calls` (each with its position in the capture) as one
    /// chunk.
    pub fn put(&mut self, calls: &[(u64, Op)]) -> io::Result<Chunk> {
        let mut recs = std::mem::take(&mut self.recs);
        recs.clear();
        for (seq, o) in calls {
            recs.push(Rec {
                seq: *seq,
                call: CallRec::of(o, &mut self.names),
            });
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let res = postcard::to_io(&recs, &mut buf)
            .map(|_| ())
            .map_err(io::Error::other);
        self.recs = recs;
        res?;
        let len = u32::try_from(buf.len())
            .map_err(|_| io::Error::other("a chunk of calls past 4 GiB"))?;
        let chunk = Chunk {
            offset: self.file.len(),
            len,
        };
        self.file.append(&buf)?;
        self.buf = buf;
        Ok(chunk)
    }

    /// Reads a chunk back, appending its calls to `out`.
    pub fn get(&self, c: Chunk, out: &mut Vec<(u64, Op)>) -> io::Result<()> {
        let mut buf = vec![0u8; c.len as usize];
        self.file.read_at(&mut buf, c.offset)?;
        let recs: Vec<Rec> = postcard::from_bytes(&buf).map_err(io::Error::other)?;
        out.reserve(recs.len());
        for r in recs {
            out.push((r.seq, r.call.op(&self.names)?));
        }
        Ok(())
    }

    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.file.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_from_memory_then_from_the_file() {
        let mut b = Blobs::new();
        let small = b.put(b"first").unwrap();
        assert!(!b.on_disk());
        let big = vec![7u8; Blobs::HELD_BYTES];
        let past = b.put(&big).unwrap();
        assert!(b.on_disk());
        let last = b.put(b"last").unwrap();
        assert_eq!(b.get(small.0, small.1).unwrap(), b"first");
        assert_eq!(b.get(past.0, past.1).unwrap(), big);
        assert_eq!(b.get(last.0, last.1).unwrap(), b"last");
        assert_eq!(b.bytes(), 9 + big.len() as u64);
        assert!(Blobs::new().get(0, 1).is_err());
    }

    #[test]
    fn an_append_file_reads_back_every_record_in_any_order() {
        // sizes around each buffer's edges: records inside a window,
        // across the written and pending parts, and larger than either
        let sizes = [
            1,
            7,
            AppendFile::WINDOW / 4,
            AppendFile::WINDOW / 4 + 1,
            AppendFile::WINDOW - 3,
            AppendFile::WRITE - 5,
            AppendFile::WRITE + 9,
            300,
            2,
        ];
        let mut f = AppendFile::new().unwrap();
        let mut placed = Vec::new();
        for k in 0..60 {
            let n = sizes[k % sizes.len()];
            let rec: Vec<u8> = (0..n).map(|i| (i * 31 + k * 7) as u8).collect();
            placed.push((f.len(), rec.clone()));
            f.append(&rec).unwrap();
            // reads while writing: some of it still pending
            let (at, want) = &placed[k / 2];
            let mut got = vec![0u8; want.len()];
            f.read_at(&mut got, *at).unwrap();
            assert_eq!(&got, want, "record {} read while writing", k / 2);
        }
        let total: u64 = placed.iter().map(|(_, r)| r.len() as u64).sum();
        assert_eq!(f.len(), total);
        let mut order: Vec<usize> = (0..placed.len()).collect();
        order.extend((0..placed.len()).rev());
        order.extend((0..placed.len()).map(|i| (i * 37) % placed.len()));
        for i in order {
            let (at, want) = &placed[i];
            let mut got = vec![0u8; want.len()];
            f.read_at(&mut got, *at).unwrap();
            assert_eq!(&got, want, "record {i}");
        }
        let mut past = [0u8; 2];
        assert!(f.read_at(&mut past, total - 1).is_err());
        assert!(f.read_at(&mut past, u64::MAX).is_err());
    }

    #[test]
    fn calls_come_back_as_written() {
        let mut s = Spill::new().unwrap();
        let a: Name = "/srv/a.php".into();
        let mut o1 = Op::new(5, 10, OpKind::Stat, "/srv/b.php");
        o1.errno = Some("ENOENT".into());
        o1.dur_us = Some(7);
        let mut o2 = Op::new(6, 11, OpKind::Open, "/x");
        o2.path = a.clone();
        o2.path2 = Some(a.clone());
        o2.bytes = 1 << 40;
        let calls = vec![(3, o1.clone()), (9, o2.clone())];
        let c1 = s.put(&calls).unwrap();
        let c2 = s.put(&calls[1..]).unwrap();
        let mut back = Vec::new();
        s.get(c2, &mut back).unwrap();
        s.get(c1, &mut back).unwrap();
        assert_eq!(back, vec![(9, o2.clone()), (3, o1), (9, o2)]);
        assert!(s.bytes() > 0);
    }
}
