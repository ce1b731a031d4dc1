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

use crate::sorted::{Keyed, SortedSpill};
use crate::spill::Blobs;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use statstorm_trace::event::FastMap;
use std::hash::Hash;
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

/// Records made out of index order (a request's figures as the request
/// finishes, not as it starts), wanted by index. They come nearly in
/// order (requests finish about as they start), so a record whose
/// predecessors are all in is appended to a [`Column`] at once, and one
/// that comes early waits in a window until they are. Should the window
/// pass [`Scattered::WINDOW`] records (a request that runs across the
/// whole capture holds back every record after it), the records from
/// then on are sorted by index in a [`SortedSpill`] instead and laid out
/// by [`Scattered::finish`]: what is held is a bound, never their number.
pub struct Scattered<T> {
    done: Column<T>,
    early: std::collections::BTreeMap<usize, T>,
    cap: usize,
    /// Past the window: every record not yet in `done`.
    late: Option<SortedSpill<At<T>>>,
}

/// Record `i` of a [`Scattered`].
#[derive(Clone, Serialize, Deserialize)]
struct At<T> {
    i: u64,
    v: T,
}

impl<T> Keyed for At<T> {
    type Key = u64;
    fn key(&self) -> u64 {
        self.i
    }
}

impl<T: Fixed + Serialize + DeserializeOwned + Clone> Default for Scattered<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Fixed + Serialize + DeserializeOwned + Clone> Scattered<T> {
    /// Records waiting for their predecessors before the rest are sorted
    /// on disk.
    pub const WINDOW: usize = 1 << 16;

    pub fn new() -> Self {
        Self::holding(Self::WINDOW)
    }

    /// At most `cap` records waiting (and held in a sorted run).
    fn holding(cap: usize) -> Self {
        Scattered {
            done: Column::new(),
            early: std::collections::BTreeMap::new(),
            cap: cap.max(1),
            late: None,
        }
    }

    /// Record `i` is `v` (each index once).
    pub fn put(&mut self, i: usize, v: T) -> io::Result<()> {
        if let Some(late) = self.late.as_mut() {
            return late.push(At { i: i as u64, v });
        }
        if i != self.done.len() {
            if i < self.done.len() || self.early.insert(i, v).is_some() {
                return Err(twice(i));
            }
            if self.early.len() > self.cap {
                let mut late = SortedSpill::with_cap(self.cap);
                for (i, v) in std::mem::take(&mut self.early) {
                    late.push(At { i: i as u64, v })?;
                }
                self.late = Some(late);
            }
            return Ok(());
        }
        self.done.push(&v)?;
        while let Some(v) = self.early.remove(&self.done.len()) {
            self.done.push(&v)?;
        }
        Ok(())
    }

    /// Records `0..n` in a column, `fill` where none was put; an index
    /// put twice or past `n` is an error.
    pub fn finish(self, n: usize, fill: &T) -> io::Result<Column<T>> {
        let mut c = self.done;
        let mut lay = |i: usize, v: &T| -> io::Result<()> {
            if i < c.len() || i >= n {
                return Err(twice(i));
            }
            while c.len() < i {
                c.push(fill)?;
            }
            c.push(v)
        };
        match self.late {
            Some(late) => {
                for r in late.finish().iter() {
                    let r = r?;
                    lay(usize::try_from(r.i).unwrap_or(usize::MAX), &r.v)?;
                }
            }
            None => {
                for (i, v) in &self.early {
                    lay(*i, v)?;
                }
            }
        }
        if c.len() > n {
            return Err(twice(c.len() - 1));
        }
        while c.len() < n {
            c.push(fill)?;
        }
        Ok(c)
    }
}

fn twice(i: usize) -> io::Error {
    io::Error::other(format!("record {i} put twice or out of range"))
}

/// Per request, one of a few distinct values (requests repeat their
/// counts): each value held once, a request's the id of one in a
/// [`Column`] ([`InternedMaker`] makes it).
pub struct Interned<T> {
    ids: Column<u32>,
    distinct: Vec<T>,
}

impl<T> Interned<T> {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Request `i`'s value.
    pub fn get(&self, i: usize) -> io::Result<&T> {
        let id = self.ids.get(i)?;
        self.distinct
            .get(id as usize)
            .ok_or_else(|| io::Error::other(format!("request {i} names no value ({id})")))
    }

    /// Distinct values held.
    pub fn distinct(&self) -> usize {
        self.distinct.len()
    }
}

impl<T: Clone> Interned<T> {
    /// Every request's value, in memory (tests, and small captures).
    pub fn to_vec(&self) -> io::Result<Vec<T>> {
        (0..self.len()).map(|i| self.get(i).cloned()).collect()
    }
}

/// An [`Interned`] being made, its requests' values put in any order.
pub struct InternedMaker<T> {
    ids: Scattered<u32>,
    index: FastMap<T, u32>,
    distinct: Vec<T>,
}

impl<T: Hash + Eq + Clone> Default for InternedMaker<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone> InternedMaker<T> {
    pub fn new() -> Self {
        InternedMaker {
            ids: Scattered::new(),
            index: FastMap::default(),
            distinct: Vec::new(),
        }
    }

    fn id(&mut self, v: T) -> u32 {
        if let Some(&id) = self.index.get(&v) {
            return id;
        }
        let id = self.distinct.len() as u32;
        self.distinct.push(v.clone());
        self.index.insert(v, id);
        id
    }

    /// Request `i`'s value is `v` (each request once).
    pub fn put(&mut self, i: usize, v: T) -> io::Result<()> {
        let id = self.id(v);
        self.ids.put(i, id)
    }

    /// Requests `0..n`, `fill` for those never put.
    pub fn finish(mut self, n: usize, fill: T) -> io::Result<Interned<T>> {
        let fill = self.id(fill);
        Ok(Interned {
            ids: self.ids.finish(n, &fill)?,
            distinct: self.distinct,
        })
    }
}

/// The requests of `w` by start, then index, as a column of indices:
/// `None` when that is their index order
/// ([`statstorm_php::Workload::in_start_order`]); sorted through a
/// [`SortedSpill`] otherwise, so no list per request is held.
pub fn start_order(w: &statstorm_php::Workload) -> io::Result<Option<Column<u32>>> {
    if w.in_start_order()? {
        return Ok(None);
    }
    let mut by_start = SortedSpill::<AtTime>::new();
    let mut failed = None;
    w.each_time(&mut |i, s, _| {
        let put = u32::try_from(i)
            .map_err(|_| io::Error::other("more than 2^32 requests"))
            .and_then(|i| by_start.push(AtTime(s, i)));
        if let Err(e) = put {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut c = Column::new();
    for r in by_start.finish().iter() {
        c.push(&r?.1)?;
    }
    Ok(Some(c))
}

/// A request's time (its start, its first call) and its index, sorted by
/// both: the order of replays and simulations ([`start_order`],
/// `predict::latency`, `predict::side`).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct AtTime(pub i64, pub u32);

impl Keyed for AtTime {
    type Key = (i64, u32);
    fn key(&self) -> (i64, u32) {
        (self.0, self.1)
    }
}

impl Fixed for u32 {
    const SIZE: usize = 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(b: &mut Bytes<'_>) -> u32 {
        b.u32()
    }
}

impl Fixed for Option<f64> {
    const SIZE: usize = 9;
    fn put(&self, out: &mut Vec<u8>) {
        put_opt_i64(out, self.map(|v| v.to_bits() as i64));
    }
    fn take(b: &mut Bytes<'_>) -> Option<f64> {
        b.opt_i64().map(|v| f64::from_bits(v as u64))
    }
}

/// Where a record lies in a file: offset and length.
impl Fixed for Option<(u64, u32)> {
    const SIZE: usize = 13;
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.is_some() as u8);
        let (o, n) = self.unwrap_or((0, 0));
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
    }
    fn take(b: &mut Bytes<'_>) -> Option<(u64, u32)> {
        let some = b.u8() != 0;
        let o = b.u64();
        let n = b.u32();
        some.then_some((o, n))
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

    /// Records put out of order, some never, come back by index; an index
    /// put twice is refused.
    #[test]
    fn scattered_records_come_back_by_index() {
        // a window of 1,000 never passed, and one of 5 passed early
        for cap in [1000, 5] {
            let n = 50_000;
            let mut s = Scattered::<u32>::holding(cap);
            // in windows of 7, backwards; every 11th left out
            for w in (0..n).step_by(7) {
                for i in (w..(w + 7).min(n)).rev() {
                    if i % 11 != 0 {
                        s.put(i, i as u32 * 3).unwrap();
                    }
                }
            }
            let c = s.finish(n, &u32::MAX).unwrap();
            assert_eq!(c.len(), n);
            for i in 0..n {
                let want = if i % 11 == 0 { u32::MAX } else { i as u32 * 3 };
                assert_eq!(c.get(i).unwrap(), want, "record {i}");
            }
        }
        // a record put twice: refused as it comes, or at the end once the
        // window is passed
        for (cap, order) in [(2, [0, 1, 2, 1]), (2, [3, 2, 1, 2]), (1, [5, 6, 7, 6])] {
            let mut twice = Scattered::<u32>::holding(cap);
            let put = order.iter().try_for_each(|&i| twice.put(i, 0));
            assert!(put.is_err() || twice.finish(8, &0).is_err(), "{order:?}");
        }
        let mut past = Scattered::<u32>::new();
        past.put(5, 0).unwrap();
        assert!(past.finish(5, &0).is_err());
        let mut past_in_order = Scattered::<u32>::new();
        for i in 0..3 {
            past_in_order.put(i, 0).unwrap();
        }
        assert!(past_in_order.finish(2, &0).is_err());
        // one held back across the window: every record after it waits
        let mut held = Scattered::<u32>::holding(10);
        for i in 1..100 {
            held.put(i, i as u32).unwrap();
        }
        held.put(0, 0).unwrap();
        let c = held.finish(100, &7).unwrap();
        assert!((0..100).all(|i| c.get(i).unwrap() == i as u32));
    }

    #[test]
    fn interned_values_are_held_once() {
        let mut m = InternedMaker::<String>::new();
        for i in (0..1000).rev() {
            if i != 500 {
                m.put(i, format!("v{}", i % 3)).unwrap();
            }
        }
        let v = m.finish(1000, "none".to_string()).unwrap();
        assert_eq!(v.distinct(), 4);
        assert_eq!(v.get(500).unwrap(), "none");
        assert_eq!(v.get(7).unwrap(), "v1");
        assert_eq!(v.to_vec().unwrap().len(), 1000);
        assert!(v.get(1000).is_err());
    }

    #[test]
    fn option_records_round_trip() {
        let mut c = Column::new();
        for v in [None, Some(0.0), Some(-1.5), Some(f64::MAX)] {
            c.push(&v).unwrap();
        }
        assert_eq!(c.get(2).unwrap(), Some(-1.5));
        assert_eq!(c.get(0).unwrap(), None);
        let mut d = Column::new();
        for v in [None, Some((u64::MAX, 7u32))] {
            d.push(&v).unwrap();
        }
        assert_eq!(d.get(1).unwrap(), Some((u64::MAX, 7)));
        assert_eq!(d.get(0).unwrap(), None);
    }

    /// The order by start of a workload whose index order is not its start
    /// order comes back as the workload's own listed order (ties by
    /// index); in start order, none.
    #[test]
    fn start_order_matches_the_workloads() {
        use statstorm_php::{WorkRequest, Workload};
        let req = |start: i64| WorkRequest {
            pid: 1,
            start_us: start,
            end_us: start + 10,
            request_time_us: start,
            cli: false,
            script: None,
            from_template: false,
            settings: None,
            ops: Vec::new(),
        };
        let w = |starts: &[i64]| Workload::of_requests(starts.iter().map(|&s| req(s)).collect());
        let moved = w(&[50, 10, 70, 10, 5, 60]);
        let want = moved.start_order().unwrap().unwrap();
        let got = start_order(&moved).unwrap().unwrap();
        let got: Vec<usize> = (0..got.len())
            .map(|k| got.get(k).unwrap() as usize)
            .collect();
        assert_eq!(got, want);
        assert_eq!(got, vec![4, 1, 3, 0, 5, 2]);
        assert!(start_order(&w(&[1, 1, 2])).unwrap().is_none());
    }
}
