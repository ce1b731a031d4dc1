//! Figures kept per request, on disk: fixed-size records appended in
//! request order and read back by index.
//!
//! A capture of millions of small requests would hold tens of bytes per
//! request in vectors for the whole prediction (its times, its counts,
//! where its calls lie). A [`Column`] keeps them in [`Blobs`]: in memory up
//! to [`Column::HELD_BYTES`], then in an unnamed temporary file, each
//! record at `index * T::SIZE`, read a page at a time: a few pages are
//! kept, so readers going through the column in index order (several at
//! once at different places: both sides of a prediction) cost a system
//! call per page, not per record.

use crate::spill::Blobs;
use std::io;
use std::marker::PhantomData;

/// A record of a fixed size, written and read as bytes.
pub trait Fixed: Sized {
    /// Bytes a record takes.
    const SIZE: usize;
    /// Appends exactly [`Fixed::SIZE`] bytes.
    fn put(&self, out: &mut Vec<u8>);
    /// The record of [`Fixed::SIZE`] bytes `b`.
    fn take(b: &mut Bytes<'_>) -> Self;
}

/// Records appended in order, read back by index.
pub struct Column<T> {
    blobs: Blobs,
    len: usize,
    buf: Vec<u8>,
    /// Pages read from the file, the least recently used replaced.
    pages: std::sync::Mutex<Vec<Page>>,
    _t: PhantomData<fn() -> T>,
}

/// Records `first..first + bytes.len() / SIZE` of a column, as read.
struct Page {
    first: usize,
    bytes: Vec<u8>,
    used: u64,
}

impl<T: Fixed> Default for Column<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Fixed> Column<T> {
    /// Bytes held in memory before the records go to a temporary file.
    pub const HELD_BYTES: usize = 1 << 20;
    /// Bytes of a page read from the file, and pages kept.
    const PAGE_BYTES: usize = 128 << 10;
    const PAGES: usize = 4;

    pub fn new() -> Column<T> {
        Column {
            blobs: Blobs::holding(Self::HELD_BYTES),
            len: 0,
            buf: Vec::with_capacity(T::SIZE),
            pages: std::sync::Mutex::new(Vec::new()),
            _t: PhantomData,
        }
    }

    /// Appends `v` as record `len()`.
    pub fn push(&mut self, v: &T) -> io::Result<()> {
        self.buf.clear();
        v.put(&mut self.buf);
        debug_assert_eq!(self.buf.len(), T::SIZE, "a record of the wrong size");
        self.blobs.put(&self.buf)?;
        self.len += 1;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Record `i`.
    pub fn get(&self, i: usize) -> io::Result<T> {
        if i >= self.len {
            return Err(io::Error::other(format!(
                "no record {i} of {} in the column",
                self.len
            )));
        }
        if !self.blobs.on_disk() {
            let mut b = [0u8; 128];
            let b = b
                .get_mut(..T::SIZE)
                .ok_or_else(|| io::Error::other("a column's record is larger than 128 bytes"))?;
            self.blobs.read_into((i * T::SIZE) as u64, b)?;
            return Ok(T::take(&mut Bytes(b)));
        }
        let mut pages = self
            .pages
            .lock()
            .map_err(|_| io::Error::other("a column's pages were left broken"))?;
        let tick = pages.iter().map(|p| p.used).max().unwrap_or(0) + 1;
        let held = |p: &Page| i >= p.first && i < p.first + p.bytes.len() / T::SIZE;
        let k = match pages.iter().position(held) {
            Some(k) => k,
            None => {
                let per = (Self::PAGE_BYTES / T::SIZE).max(1);
                let first = i / per * per;
                let n = per.min(self.len - first);
                let mut bytes = vec![0u8; n * T::SIZE];
                self.blobs.read_into((first * T::SIZE) as u64, &mut bytes)?;
                let page = Page {
                    first,
                    bytes,
                    used: tick,
                };
                if pages.len() < Self::PAGES {
                    pages.push(page);
                    pages.len() - 1
                } else {
                    let (k, _) = pages
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, p)| p.used)
                        .expect("a full set of pages");
                    pages[k] = page;
                    k
                }
            }
        };
        let p = &mut pages[k];
        p.used = tick;
        let at = (i - p.first) * T::SIZE;
        Ok(T::take(&mut Bytes(&p.bytes[at..at + T::SIZE])))
    }

    /// Whether the records went to a temporary file.
    pub fn on_disk(&self) -> bool {
        self.blobs.on_disk()
    }
}

/// Bytes a [`Fixed`] record is read from, front to back.
pub struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    /// The next `N` bytes (zeros past the end: a record is read whole,
    /// so only a wrong [`Fixed::SIZE`] gets there).
    fn take<const N: usize>(&mut self) -> [u8; N] {
        match self.0.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.0 = rest;
                *head
            }
            None => {
                let mut out = [0u8; N];
                out[..self.0.len()].copy_from_slice(self.0);
                self.0 = &[];
                out
            }
        }
    }

    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.take())
    }

    /// An `Option<i64>` written by [`put_opt_i64`].
    pub fn opt_i64(&mut self) -> Option<i64> {
        let some = self.u8() != 0;
        let v = self.i64();
        some.then_some(v)
    }
}

/// Appends `v` in 9 bytes (a flag, then the value).
pub fn put_opt_i64(out: &mut Vec<u8>, v: Option<i64>) {
    out.push(v.is_some() as u8);
    out.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct R {
        a: u32,
        b: Option<i64>,
        c: u64,
    }

    impl Fixed for R {
        const SIZE: usize = 4 + 9 + 8;
        fn put(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&self.a.to_le_bytes());
            put_opt_i64(out, self.b);
            out.extend_from_slice(&self.c.to_le_bytes());
        }
        fn take(b: &mut Bytes<'_>) -> R {
            R {
                a: b.u32(),
                b: b.opt_i64(),
                c: b.u64(),
            }
        }
    }

    fn r(i: usize) -> R {
        R {
            a: i as u32,
            b: (i % 3 != 0).then_some(-(i as i64) * 1_000_003),
            c: (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// Past the bytes held in memory the records go to a file and still
    /// read back as written, in order and out of it.
    #[test]
    fn reads_back_what_was_written() {
        let n = Column::<R>::HELD_BYTES / R::SIZE * 3 + 17;
        let mut c = Column::new();
        for i in 0..n {
            c.push(&r(i)).unwrap();
        }
        assert_eq!(c.len(), n);
        assert!(c.on_disk());
        for i in 0..n {
            assert_eq!(c.get(i).unwrap(), r(i), "record {i}");
        }
        for i in (0..n).rev().step_by(997) {
            assert_eq!(c.get(i).unwrap(), r(i), "record {i}");
        }
        assert!(c.get(n).is_err());
    }

    #[test]
    fn a_small_column_stays_in_memory() {
        let mut c = Column::new();
        for i in 0..100 {
            c.push(&r(i)).unwrap();
        }
        assert!(!c.on_disk());
        assert_eq!(c.get(42).unwrap(), r(42));
    }
}
