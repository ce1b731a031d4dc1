//! Records wanted in key order, made in another: held in memory up to a
//! count, beyond it written out in sorted runs to an unnamed temporary file
//! (`spill::AppendFile`) and merged as they are read back. Holding them
//! costs the bound and one read buffer per run, not their number: what
//! `analyze` keeps of its requests (each made as its worker moves on,
//! listed by start).
//!
//! A run is the held records sorted by key, each written as a 4-byte
//! little-endian length and its `postcard` bytes. Reading merges the runs
//! and the records still held (a heap of each source's next key; equal
//! keys come in the order they were pushed).

use crate::spill::AppendFile;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;

/// A record's place in the order.
pub trait Keyed {
    type Key: Ord + Copy;
    fn key(&self) -> Self::Key;
}

/// Records being pushed; [`SortedSpill::finish`] gives them in order.
pub struct SortedSpill<T> {
    held: Vec<T>,
    cap: usize,
    file: Option<AppendFile>,
    runs: Vec<Run>,
    len: usize,
}

/// One sorted run in the file.
#[derive(Clone, Copy, Debug)]
struct Run {
    offset: u64,
    end: u64,
}

impl<T: Keyed + Serialize + DeserializeOwned> Default for SortedSpill<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Keyed + Serialize + DeserializeOwned> SortedSpill<T> {
    /// Records held in memory before a run is written out.
    pub const HELD: usize = 1 << 16;

    pub fn new() -> Self {
        Self::with_cap(Self::HELD)
    }

    /// At most `cap` records held (at least one).
    pub fn with_cap(cap: usize) -> Self {
        SortedSpill {
            held: Vec::new(),
            cap: cap.max(1),
            file: None,
            runs: Vec::new(),
            len: 0,
        }
    }

    pub fn push(&mut self, t: T) -> io::Result<()> {
        if self.held.len() >= self.cap {
            self.write_run()?;
        }
        self.held.push(t);
        self.len += 1;
        Ok(())
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn write_run(&mut self) -> io::Result<()> {
        // stable: equal keys keep the order they were pushed in
        self.held.sort_by_key(Keyed::key);
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(AppendFile::new()?),
        };
        // the run encoded whole (a few MB at the bound), then appended
        let mut run = Vec::new();
        for t in self.held.drain(..) {
            let at = run.len();
            run.extend_from_slice(&[0; 4]);
            run = postcard::to_extend(&t, run).map_err(io::Error::other)?;
            let n = u32::try_from(run.len() - at - 4)
                .map_err(|_| io::Error::other("a record past 4 GiB"))?;
            run[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
        let offset = file.len();
        file.append(&run)?;
        self.runs.push(Run {
            offset,
            end: file.len(),
        });
        Ok(())
    }

    /// Every record pushed, readable in key order ([`Sorted::iter`]).
    pub fn finish(mut self) -> Sorted<T> {
        self.held.sort_by_key(Keyed::key);
        Sorted {
            held: self.held,
            file: self.file.map(Arc::new),
            runs: self.runs,
            len: self.len,
        }
    }
}

/// Records in key order: [`SortedSpill::finish`].
pub struct Sorted<T> {
    /// The records never written out (the last ones pushed), sorted.
    held: Vec<T>,
    file: Option<Arc<AppendFile>>,
    runs: Vec<Run>,
    len: usize,
}

impl<T: Clone> Clone for Sorted<T> {
    fn clone(&self) -> Self {
        Sorted {
            held: self.held.clone(),
            file: self.file.clone(),
            runs: self.runs.clone(),
            len: self.len,
        }
    }
}

impl<T> Default for Sorted<T> {
    fn default() -> Self {
        Sorted {
            held: Vec::new(),
            file: None,
            runs: Vec::new(),
            len: 0,
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Sorted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sorted")
            .field("len", &self.len)
            .field("runs", &self.runs.len())
            .finish()
    }
}

impl<T: Keyed + Clone + DeserializeOwned> Sorted<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs written to the temporary file (0: all held in memory).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The records in key order (each run read through a buffer of its
    /// own); a read of the temporary file that fails ends the iteration
    /// with its error.
    pub fn iter(&self) -> SortedIter<'_, T> {
        let mut it = SortedIter {
            sorted: self,
            readers: self.runs.iter().map(|r| RunReader::new(*r)).collect(),
            next_held: 0,
            heads: (0..=self.runs.len()).map(|_| None).collect(),
            heap: BinaryHeap::new(),
            pending: None,
            failed: false,
        };
        for s in 0..=self.runs.len() {
            if let Err(e) = it.advance(s) {
                it.pending = Some(e);
                break;
            }
        }
        it
    }
}

/// Reads one run through a window.
struct RunReader {
    offset: u64,
    end: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl RunReader {
    const WINDOW: usize = 64 << 10;

    fn new(r: Run) -> Self {
        RunReader {
            offset: r.offset,
            end: r.end,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// At least `need` unread bytes in the buffer (false: the run ended
    /// first).
    fn fill(&mut self, file: &AppendFile, need: usize) -> io::Result<bool> {
        if self.buf.len() - self.pos >= need {
            return Ok(true);
        }
        self.buf.drain(..self.pos);
        self.pos = 0;
        let left = self.end - self.offset;
        let want = (need - self.buf.len()).max(Self::WINDOW) as u64;
        let n = want.min(left) as usize;
        if n > 0 {
            let from = self.buf.len();
            self.buf.resize(from + n, 0);
            file.read_at(&mut self.buf[from..], self.offset)?;
            self.offset += n as u64;
        }
        Ok(self.buf.len() >= need)
    }

    fn next<T: DeserializeOwned>(&mut self, file: &AppendFile) -> io::Result<Option<T>> {
        if !self.fill(file, 4)? {
            if self.buf.len() > self.pos {
                return Err(io::Error::other("a sorted run ends inside a record"));
            }
            return Ok(None);
        }
        let mut n = [0u8; 4];
        n.copy_from_slice(&self.buf[self.pos..self.pos + 4]);
        let n = u32::from_le_bytes(n) as usize;
        if !self.fill(file, 4 + n)? {
            return Err(io::Error::other("a sorted run ends inside a record"));
        }
        let rec = &self.buf[self.pos + 4..self.pos + 4 + n];
        let t = postcard::from_bytes(rec).map_err(io::Error::other)?;
        self.pos += 4 + n;
        Ok(Some(t))
    }
}

/// [`Sorted::iter`].
pub struct SortedIter<'a, T: Keyed> {
    sorted: &'a Sorted<T>,
    readers: Vec<RunReader>,
    next_held: usize,
    /// Each source's next record (the runs, then the held records).
    heads: Vec<Option<T>>,
    /// (key, source) of each source's next record.
    heap: BinaryHeap<Reverse<(T::Key, usize)>>,
    /// A read that failed while the sources were opened: given first.
    pending: Option<io::Error>,
    failed: bool,
}

impl<T: Keyed + Clone + DeserializeOwned> SortedIter<'_, T> {
    /// Reads source `s`'s next record into its head.
    fn advance(&mut self, s: usize) -> io::Result<()> {
        let next = if s < self.readers.len() {
            let file = self
                .sorted
                .file
                .as_ref()
                .ok_or_else(|| io::Error::other("sorted runs without their file"))?;
            self.readers[s].next(file)?
        } else {
            let t = self.sorted.held.get(self.next_held).cloned();
            self.next_held += 1;
            t
        };
        if let Some(t) = &next {
            self.heap.push(Reverse((t.key(), s)));
        }
        self.heads[s] = next;
        Ok(())
    }
}

impl<T: Keyed + Clone + DeserializeOwned> Iterator for SortedIter<'_, T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.failed {
            return None;
        }
        if let Some(e) = self.pending.take() {
            self.failed = true;
            return Some(Err(e));
        }
        let Reverse((_, s)) = self.heap.pop()?;
        let t = self.heads[s].take()?;
        if let Err(e) = self.advance(s) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok(t))
    }
}

/// Serializes records read back one at a time as a sequence of `len`
/// (a listing that streams: JSON of a million rows holds one); a read
/// that fails ends it with the read's error.
pub fn serialize_listed<S: serde::Serializer, T: Serialize>(
    s: S,
    len: usize,
    items: impl Iterator<Item = io::Result<T>>,
) -> Result<S::Ok, S::Error> {
    use serde::ser::{Error, SerializeSeq};
    let mut seq = s.serialize_seq(Some(len))?;
    for r in items {
        seq.serialize_element(&r.map_err(S::Error::custom)?)?;
    }
    seq.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct R {
        k: i64,
        seq: u32,
        text: String,
    }

    impl Keyed for R {
        type Key = i64;
        fn key(&self) -> i64 {
            self.k
        }
    }

    fn records(n: u32, seed: u64) -> Vec<R> {
        let mut x = seed;
        (0..n)
            .map(|seq| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                R {
                    // few distinct keys: ties in and across runs
                    k: (x >> 33) as i64 % 97 - 40,
                    seq,
                    text: "x".repeat((x >> 60) as usize * 1000),
                }
            })
            .collect()
    }

    fn sorted_by(recs: &[R], cap: usize) -> (Vec<R>, usize) {
        let mut s = SortedSpill::with_cap(cap);
        for r in recs {
            s.push(r.clone()).unwrap();
        }
        let done = s.finish();
        assert_eq!(done.len(), recs.len());
        let got: Vec<R> = done.iter().map(Result::unwrap).collect();
        // read twice: the same
        let again: Vec<R> = done.iter().map(Result::unwrap).collect();
        assert_eq!(got, again);
        (got, done.runs())
    }

    /// Any bound gives what a stable sort of everything gives: equal keys
    /// in the order pushed, records larger than a read window whole.
    #[test]
    fn runs_merged_are_a_stable_sort() {
        for (n, seed) in [(0, 1), (1, 2), (7, 3), (1000, 4), (5000, 5)] {
            let recs = records(n, seed);
            let mut want = recs.clone();
            want.sort_by_key(|r| r.k);
            for cap in [1, 2, 3, 64, 999, 1000, 100_000] {
                let (got, runs) = sorted_by(&recs, cap);
                assert_eq!(got, want, "n {n} cap {cap}");
                assert_eq!(runs, n.saturating_sub(1) as usize / cap, "n {n} cap {cap}");
            }
        }
    }

    /// Held records beyond the bound go out: memory holds `cap`, whatever
    /// was pushed.
    #[test]
    fn holds_at_most_its_bound() {
        let mut s = SortedSpill::with_cap(10);
        for r in records(1000, 9) {
            s.push(r).unwrap();
            assert!(s.held.len() <= 10);
        }
        assert_eq!(s.finish().runs(), 99);
    }
}
