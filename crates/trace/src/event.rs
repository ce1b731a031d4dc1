//! The typed records the parser produces.
//!
//! An [`Event`] is one completed syscall (an `<unfinished ...>` line and its
//! `<... resumed>` line are merged into one event, timed at the start of the
//! call). Strings (paths, unknown syscall names, errno names) are interned in
//! an [`Interner`], so memory is bounded by the number of distinct strings, not
//! by the number of lines.

use serde::Serialize;
use std::hash::{BuildHasher, Hasher};

/// A fast non-cryptographic hash for the maps keyed by integers (pids,
/// string ids, seconds: one multiply-rotate step per word, the scheme of
/// rustc's FxHash) and by byte strings (through `hash_bytes`, the
/// interner's hash). Trace files are not adversarial hash-flooding input;
/// speed matters more here.
#[derive(Clone, Copy, Default, Debug)]
pub struct FastHash;

/// A `HashMap` under [`FastHash`]: the models' maps keyed by paths, pids
/// and ids (build one with `default()`).
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastHash>;

/// A `HashSet` under [`FastHash`].
pub type FastSet<K> = std::collections::HashSet<K, FastHash>;

const FX_K: u64 = 0x517c_c1b7_2722_0a95;

#[doc(hidden)]
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(FX_K);
    }
}

/// `Hasher` methods that add an integer as one word.
macro_rules! word_writes {
    ($($name:ident: $t:ty),*) => {
        $(
            #[inline]
            fn $name(&mut self, n: $t) {
                self.add(n as u64);
            }
        )*
    };
}

impl Hasher for FastHasher {
    /// Byte strings (directory keys at the end of a run) through the
    /// interner's hash (`hash_bytes`), whose every bit depends on every
    /// byte: one multiply-rotate step per word leaves keys that differ only
    /// in a few bytes (`/srv/www/site1234/wp`) clustered in hashbrown's
    /// buckets, even with the rotation in `finish`.
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.add(hash_bytes(bytes));
    }
    // Integer keys (pids, ids, seconds) go in as one word: the default
    // `write_u32` etc. pass through `write`, whose byte copy into a
    // buffer makes the next load wait on store forwarding.
    word_writes!(
        write_u8: u8,
        write_u16: u16,
        write_u32: u32,
        write_u64: u64,
        write_i32: i32,
        write_i64: i64,
        write_usize: usize
    );
    /// The state rotated so that its best-mixed bits come out lowest:
    /// hashbrown picks the bucket from the low bits, and the low bits of a
    /// product depend only on the low bits of its factors, so without the
    /// rotation integer keys with equal low bits would share buckets. The
    /// same as rustc-hash 2.0's `FxHasher::finish` (`rotate_left(26)`).
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

impl BuildHasher for FastHash {
    type Hasher = FastHasher;
    #[inline]
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

/// Index of an interned path (or other string) in an [`Interner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PathId(pub u32);

/// Interned byte strings. Paths are kept as raw bytes: strace prints what the
/// kernel saw, which need not be UTF-8.
///
/// Layout: every string once, back to back in one arena (`ends[i]` is the
/// end of string `i`, which starts where string `i - 1` ends), its 64-bit
/// hash kept beside it, and an open-addressing table of `u64` slots
/// (`hash tag << 32 | id + 1`, 0 = empty, linear probing, at most half
/// full). A lookup hashes once, compares 32-bit tags in the table and
/// touches the arena only when a tag matches; a new string costs one copy
/// into the arena and no allocation of its own.
pub struct Interner {
    arena: Vec<u8>,
    ends: Vec<usize>,
    hashes: Vec<u64>,
    table: Vec<u64>,
    /// Unique to this interner's ids ([`Interner::generation`]).
    generation: u64,
}

/// The next [`Interner::generation`].
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            arena: Vec::new(),
            ends: Vec::new(),
            hashes: Vec::new(),
            table: Vec::new(),
            generation: next_generation(),
        }
    }
}

impl Clone for Interner {
    /// A copy with a generation of its own: the two may add different
    /// strings under the same new ids.
    fn clone(&self) -> Self {
        Interner {
            arena: self.arena.clone(),
            ends: self.ends.clone(),
            hashes: self.hashes.clone(),
            table: self.table.clone(),
            generation: next_generation(),
        }
    }
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interner")
            .field("strings", &self.ends.len())
            .field("bytes", &self.arena.len())
            .finish()
    }
}

/// Strings of an [`Interner`] from one id on ([`Interner::tail`]).
#[derive(Clone, Debug, Default)]
pub struct Tail {
    from: usize,
    arena: Vec<u8>,
    /// End of each string in `arena`.
    ends: Vec<usize>,
    hashes: Vec<u64>,
}

/// [`Interner::extend_tail`] given a tail that does not follow the
/// strings held (or holding a string twice).
#[derive(Debug, thiserror::Error)]
#[error("an interner tail from string {from} given to an interner holding {held}")]
pub struct TailMismatch {
    held: usize,
    from: usize,
}

/// The interner's string hash: 16 bytes per step folded through a 64x64->128
/// bit multiply (the scheme of wyhash/foldhash), seeded with the length, with
/// a final fold so that both the low bits (table index) and the high bits
/// (tag) depend on every byte. Twice the bytes per multiply of
/// [`FastHasher`]; paths are most of the interner's input. The bytes after
/// the last whole 16-byte step are read as (overlapping) word loads of the
/// string itself, as wyhash does: copying them into a zeroed buffer first
/// made every hash wait on store forwarding. Every byte is read, and the
/// length is in the seed, so strings of one length differ in some word.
#[inline]
pub(crate) fn hash_bytes(s: &[u8]) -> u64 {
    #[inline(always)]
    fn fold(a: u64, b: u64) -> u64 {
        let r = (a as u128).wrapping_mul(b as u128);
        (r as u64) ^ ((r >> 64) as u64)
    }
    #[inline(always)]
    fn word(b: &[u8]) -> u64 {
        u64::from_le_bytes(b.try_into().unwrap())
    }
    #[inline(always)]
    fn half(b: &[u8]) -> u64 {
        u32::from_le_bytes(b.try_into().unwrap()) as u64
    }
    const P0: u64 = 0xa076_1d64_78bd_642f;
    const P1: u64 = 0xe703_7ed1_a0b4_28db;
    const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
    let n = s.len();
    let mut h = P0 ^ (n as u64).wrapping_mul(P2);
    let (a, b) = if n > 16 {
        let mut c = s[..n - 1].chunks_exact(16);
        for w in &mut c {
            h = fold(word(&w[..8]) ^ h, word(&w[8..]) ^ P1);
        }
        // The last 16 bytes, overlapping the last whole step when `n` is
        // not a multiple of 16 (which always leaves 1..=16 bytes here).
        let t = &s[n - 16..];
        (word(&t[..8]), word(&t[8..]))
    } else if n >= 8 {
        (word(&s[..8]), word(&s[n - 8..]))
    } else if n >= 4 {
        (half(&s[..4]), half(&s[n - 4..]))
    } else if n > 0 {
        // 1 to 3 bytes: first, middle and last cover them all.
        (
            (s[0] as u64) << 16 | (s[n / 2] as u64) << 8 | s[n - 1] as u64,
            0,
        )
    } else {
        (0, 0)
    };
    h = fold(a ^ h, b ^ P2);
    fold(h ^ P1, h.rotate_left(29) ^ P0)
}

impl Interner {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn span(&self, id: usize) -> (usize, usize) {
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        (start, self.ends[id])
    }

    /// The slot holding `s` (hash `h`), or the empty slot where it goes.
    #[inline]
    fn find(&self, s: &[u8], h: u64) -> (usize, Option<u32>) {
        let mask = self.table.len() - 1;
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            let e = self.table[i];
            if e == 0 {
                return (i, None);
            }
            if e >> 32 == tag {
                let id = (e as u32).wrapping_sub(1);
                let (a, b) = self.span(id as usize);
                if &self.arena[a..b] == s {
                    return (i, Some(id));
                }
            }
            i = (i + 1) & mask;
        }
    }

    // The zeroing by writing below is deliberate (see there).
    #[allow(clippy::slow_vector_initialization)]
    fn grow(&mut self) {
        let n = (self.table.len() * 2).max(1024);
        // Zeroed by writing, not `vec![0; n]`: a large zeroed allocation is
        // fresh pages mapped to the shared zero page, so the probing below
        // faulted each page in twice (a read, then a write that copies it
        // and flushes the other cores' TLBs): 1.7% of analyze's CPU time on
        // the bench log.
        let mut t = Vec::with_capacity(n);
        t.resize(n, 0u64);
        let mask = n - 1;
        for (id, &h) in self.hashes.iter().enumerate() {
            let mut i = h as usize & mask;
            while t[i] != 0 {
                i = (i + 1) & mask;
            }
            t[i] = (h >> 32) << 32 | (id as u64 + 1);
        }
        self.table = t;
    }

    /// Forgets every string, keeping the memory for reuse.
    pub(crate) fn clear(&mut self) {
        self.arena.clear();
        self.ends.clear();
        self.hashes.clear();
        self.table.fill(0);
        self.generation = next_generation();
    }

    /// A number no other interner of the process has had, kept while
    /// strings are only added: an id's string is the same for as long as
    /// the generation is, so what is derived from it can be kept by id.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// [`Interner::intern`] with the string's [`hash_bytes`] already known.
    #[inline]
    pub(crate) fn intern_hashed(&mut self, s: &[u8], h: u64) -> PathId {
        if self.table.is_empty() {
            self.grow();
        }
        let (slot, found) = self.find(s, h);
        if let Some(id) = found {
            return PathId(id);
        }
        let id = self.ends.len() as u32;
        assert!(id < u32::MAX - 1, "more than 2^32 - 2 distinct strings");
        self.arena.extend_from_slice(s);
        self.ends.push(self.arena.len());
        self.hashes.push(h);
        self.table[slot] = (h >> 32) << 32 | (id as u64 + 1);
        if self.ends.len() * 2 > self.table.len() {
            self.grow();
        }
        PathId(id)
    }

    /// Returns the id of `s`, adding it if new.
    #[inline]
    pub fn intern(&mut self, s: &[u8]) -> PathId {
        self.intern_hashed(s, hash_bytes(s))
    }

    /// Interns string `id` of `other` here, reusing its stored hash.
    #[inline]
    pub(crate) fn intern_from(&mut self, other: &Interner, id: PathId) -> PathId {
        let i = id.0 as usize;
        self.intern_hashed(other.bytes(id), other.hashes[i])
    }

    /// Looks every string of `other` up here without adding any: `out[i]` becomes
    /// the id here of `other`'s string `i`, or `u32::MAX` when absent. The
    /// lookups are independent, so the table slot of the string `AHEAD`
    /// places on is fetched into the cache while this one is compared: with
    /// hundreds of thousands of distinct paths most slots are cache misses,
    /// and this overlaps them instead of waiting for each in turn.
    pub(crate) fn get_all_from(&self, other: &Interner, out: &mut Vec<u32>) {
        const AHEAD: usize = 12;
        out.clear();
        let n = other.len();
        if self.table.is_empty() {
            out.resize(n, u32::MAX);
            return;
        }
        let mask = self.table.len() - 1;
        let slot_of = |i: usize| other.hashes[i] as usize & mask;
        // The id in the home slot of string `i` when its tag matches (the
        // slot itself fetched earlier): most strings are found there.
        let home = |i: usize| {
            let e = self.table[slot_of(i)];
            (e != 0 && e >> 32 == other.hashes[i] >> 32)
                .then(|| (e as u32).wrapping_sub(1) as usize)
        };
        for i in 0..n.min(AHEAD) {
            prefetch(&self.table[slot_of(i)]);
        }
        for i in 0..n {
            // Three stages ahead of the lookup: the table slot, then the
            // end offsets of the id found there, then its bytes (each a
            // likely cache miss among hundreds of thousands of strings,
            // each needing the one before).
            if i + AHEAD < n {
                prefetch(&self.table[slot_of(i + AHEAD)]);
            }
            if let Some(id) = (i + AHEAD / 2 < n).then(|| home(i + AHEAD / 2)).flatten() {
                prefetch(&self.ends[id]);
            }
            if let Some(id) = (i + AHEAD / 4 < n).then(|| home(i + AHEAD / 4)).flatten() {
                if let Some(b) = self.arena.get(self.span(id).0) {
                    prefetch(b);
                }
            }
            let id = PathId(i as u32);
            out.push(
                self.find(other.bytes(id), other.hashes[i])
                    .1
                    .unwrap_or(u32::MAX),
            );
        }
    }

    /// The strings from id `from` on, to be added to a copy of this
    /// interner that holds the ones before ([`Interner::extend_tail`]):
    /// how a fold on another thread follows the parser's interner.
    pub fn tail(&self, from: usize) -> Tail {
        let from = from.min(self.len());
        let base = if from == 0 { 0 } else { self.ends[from - 1] };
        Tail {
            from,
            arena: self.arena[base..].to_vec(),
            ends: self.ends[from..].iter().map(|e| e - base).collect(),
            hashes: self.hashes[from..].to_vec(),
        }
    }

    /// Adds the strings of `t` (made by [`Interner::tail`] of an interner
    /// whose first strings are this one's): each gets the id it had there.
    /// An error when this interner does not hold exactly the strings
    /// before the tail.
    pub fn extend_tail(&mut self, t: &Tail) -> Result<(), TailMismatch> {
        if t.from != self.len() {
            return Err(TailMismatch {
                held: self.len(),
                from: t.from,
            });
        }
        let mut start = 0;
        for (&end, &h) in t.ends.iter().zip(&t.hashes) {
            let id = self.len();
            let got = self.intern_hashed(&t.arena[start..end], h);
            if got.0 as usize != id {
                return Err(TailMismatch {
                    held: self.len(),
                    from: t.from,
                });
            }
            start = end;
        }
        Ok(())
    }

    /// Looks `s` up without adding it.
    pub fn get(&self, s: &[u8]) -> Option<PathId> {
        if self.table.is_empty() {
            return None;
        }
        self.find(s, hash_bytes(s)).1.map(PathId)
    }
    #[inline]
    pub fn bytes(&self, id: PathId) -> &[u8] {
        let (a, b) = self.span(id.0 as usize);
        &self.arena[a..b]
    }
    /// Lossy UTF-8 view, for reports.
    pub fn str(&self, id: PathId) -> std::borrow::Cow<'_, str> {
        // the strict check first: it is much faster on valid text (paths
        // are), and the lossy one only replaces what it finds invalid
        let b = self.bytes(id);
        match std::str::from_utf8(b) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(b),
        }
    }
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Asks the CPU to bring `x`'s cache line in (a hint: no effect on
/// results; nothing at all elsewhere than x86-64).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing into the program;
    // the address is that of a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod fast_hash_tests {
    use super::*;

    /// The low bits of `FastHash` (hashbrown's bucket index) spread paths
    /// that differ in a few bytes, and integers: 65,536 keys over 2^17
    /// buckets fill about 51,600 of them when the low 17 bits are uniform
    /// (2^17 (1 - e^-0.5)). With the byte strings hashed a word per
    /// multiply-rotate step, the paths fill 572 buckets (9,161 with the
    /// rotation in `finish`); without the rotation the high-bit integers
    /// fill one.
    #[test]
    fn low_bits_spread_paths_and_integers() {
        let n = 1u64 << 16;
        let buckets = |keys: &mut dyn Iterator<Item = u64>| {
            keys.map(|h| h & ((1 << 17) - 1))
                .collect::<std::collections::HashSet<u64>>()
                .len()
        };
        let paths = buckets(
            &mut (0..n).map(|i| FastHash.hash_one(format!("/usr/share/php/x{i}").as_bytes())),
        );
        assert!(paths > 45_000, "paths fill {paths} buckets");
        let dirs = buckets(
            &mut (0..n).map(|i| FastHash.hash_one(format!("/srv/www/site{i}/wp").as_bytes())),
        );
        assert!(dirs > 45_000, "dirs fill {dirs} buckets");
        let ids = buckets(&mut (0..n).map(|i| FastHash.hash_one(i as u32)));
        assert!(ids > 45_000, "ids fill {ids} buckets");
        let secs = buckets(&mut (0..n).map(|i| FastHash.hash_one(1_795_223_123i64 + i as i64)));
        assert!(secs > 45_000, "seconds fill {secs} buckets");
        // Integers that differ only in high bits (without the rotation:
        // one bucket).
        let high = buckets(&mut (0..n).map(|i| FastHash.hash_one(i << 32)));
        assert!(high > 45_000, "high-bit integers fill {high} buckets");
    }
}

#[cfg(test)]
mod interner_tests {
    use super::*;

    #[test]
    fn a_copy_follows_by_tails() {
        let mut src = Interner::new();
        let mut copy = Interner::new();
        let mut sent = 0;
        for round in 0..5u32 {
            for i in 0..700u32 {
                // some strings again, most new
                src.intern(format!("/srv/www/r{}/f{}.php", round / 2, i).as_bytes());
            }
            copy.extend_tail(&src.tail(sent)).unwrap();
            sent = src.len();
            assert_eq!(copy.len(), src.len());
        }
        for id in 0..src.len() as u32 {
            assert_eq!(copy.bytes(PathId(id)), src.bytes(PathId(id)));
            assert_eq!(copy.get(src.bytes(PathId(id))), Some(PathId(id)));
        }
        // a tail that does not follow what the copy holds
        assert!(copy.extend_tail(&src.tail(3)).is_err());
        assert!(Interner::new().extend_tail(&src.tail(3)).is_err());
        // an empty tail
        copy.extend_tail(&src.tail(src.len())).unwrap();
    }

    #[test]
    fn hash_reads_every_byte_and_the_length() {
        // Each length around the word and step boundaries: changing any
        // one byte, or appending a zero byte, changes the hash.
        for n in 0..70usize {
            let s: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
            let h = hash_bytes(&s);
            for i in 0..n {
                let mut t = s.clone();
                t[i] ^= 0x01;
                assert_ne!(hash_bytes(&t), h, "length {n}, byte {i}");
            }
            let mut longer = s.clone();
            longer.push(0);
            assert_ne!(hash_bytes(&longer), h, "length {n} vs {}", n + 1);
        }
    }

    #[test]
    fn looking_all_up_finds_the_present_and_marks_the_absent() {
        let mut here = Interner::new();
        let mut out = vec![7];
        let mut other = Interner::new();
        // An empty interner (no table yet) holds nothing.
        for s in ["/a", "/b", "x"] {
            other.intern(s.as_bytes());
        }
        here.get_all_from(&other, &mut out);
        assert_eq!(out, [u32::MAX; 3]);
        // More strings than the prefetch distance, some present, some not,
        // across several table growths.
        let words: Vec<String> = (0..5000).map(|i| format!("/srv/www/p{i}.php")).collect();
        for w in words.iter().step_by(3) {
            here.intern(w.as_bytes());
        }
        let mut other = Interner::new();
        for w in words.iter().rev() {
            other.intern(w.as_bytes());
        }
        here.get_all_from(&other, &mut out);
        assert_eq!(out.len(), other.len());
        for (i, &g) in out.iter().enumerate() {
            let s = other.bytes(PathId(i as u32));
            match here.get(s) {
                Some(id) => assert_eq!(g, id.0),
                None => assert_eq!(g, u32::MAX),
            }
        }
        assert_eq!(out.iter().filter(|&&g| g != u32::MAX).count(), 1667);
    }

    #[test]
    fn ids_are_dense_and_stable_across_growth() {
        let mut t = Interner::new();
        let words: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!("/srv/www/site{}/f{}.php", i % 97, i).into_bytes())
            .collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.intern(w), PathId(i as u32));
        }
        assert_eq!(t.intern(b""), PathId(5000));
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.intern(w), PathId(i as u32));
            assert_eq!(t.get(w), Some(PathId(i as u32)));
            assert_eq!(t.bytes(PathId(i as u32)), &w[..]);
        }
        assert_eq!(t.get(b""), Some(PathId(5000)));
        assert_eq!(t.get(b"/nope"), None);
        assert_eq!(Interner::new().get(b"x"), None);
        assert_eq!(t.len(), 5001);
        let mut u = Interner::new();
        let b = u.intern(b"b");
        assert_eq!(u.intern_from(&t, PathId(3)), PathId(1));
        assert_eq!(u.bytes(PathId(1)), &words[3][..]);
        assert_eq!(u.intern(b"b"), b);
    }
}

/// The syscalls this crate decodes argument by argument. Every other syscall
/// is [`Kind::Other`] and still counted by name (`Event::name`).
///
/// One table (`Kind::ALL` with `Kind::name`) maps names to kinds; keep it the
/// only place that spells syscall names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[repr(u8)]
pub enum Kind {
    /// Any syscall not decoded; `Event::name` says which. First, so that
    /// its discriminant is 0 and the parser's empty event is all zero bytes.
    Other,
    Stat,
    Lstat,
    Fstat,
    Newfstatat,
    Fstatat64,
    Statx,
    Access,
    Faccessat,
    Faccessat2,
    Open,
    Openat,
    Openat2,
    Creat,
    Close,
    Read,
    Pread64,
    Mmap,
    Readlink,
    Readlinkat,
    Getcwd,
    Chdir,
    Fchdir,
    Getdents64,
    Rename,
    Renameat,
    Renameat2,
    Unlink,
    Unlinkat,
    Mkdir,
    Mkdirat,
    Rmdir,
    Write,
    Pwrite64,
    Accept,
    Accept4,
    Recvfrom,
    Recvmsg,
    /// `dup(oldfd)`: the result is a new fd for `oldfd`'s open file.
    Dup,
    /// `dup2(oldfd, newfd)`: `newfd` (the result) now refers to `oldfd`'s
    /// open file; a file `newfd` had open is closed first.
    Dup2,
    /// `dup3(oldfd, newfd, flags)`: dup2 with `O_CLOEXEC` allowed.
    Dup3,
    /// `fcntl(fd, cmd, ...)`: only the fd and whether `cmd` duplicates the
    /// fd ([`Flags::F_DUPFD`]) are decoded.
    Fcntl,
}

impl Kind {
    /// Every decoded kind, in declaration order (not `Other`).
    pub const ALL: [Kind; 41] = [
        Kind::Stat,
        Kind::Lstat,
        Kind::Fstat,
        Kind::Newfstatat,
        Kind::Fstatat64,
        Kind::Statx,
        Kind::Access,
        Kind::Faccessat,
        Kind::Faccessat2,
        Kind::Open,
        Kind::Openat,
        Kind::Openat2,
        Kind::Creat,
        Kind::Close,
        Kind::Read,
        Kind::Pread64,
        Kind::Mmap,
        Kind::Readlink,
        Kind::Readlinkat,
        Kind::Getcwd,
        Kind::Chdir,
        Kind::Fchdir,
        Kind::Getdents64,
        Kind::Rename,
        Kind::Renameat,
        Kind::Renameat2,
        Kind::Unlink,
        Kind::Unlinkat,
        Kind::Mkdir,
        Kind::Mkdirat,
        Kind::Rmdir,
        Kind::Write,
        Kind::Pwrite64,
        Kind::Accept,
        Kind::Accept4,
        Kind::Recvfrom,
        Kind::Recvmsg,
        Kind::Dup,
        Kind::Dup2,
        Kind::Dup3,
        Kind::Fcntl,
    ];

    /// The name strace prints on x86-64 Linux.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Stat => "stat",
            Kind::Lstat => "lstat",
            Kind::Fstat => "fstat",
            Kind::Newfstatat => "newfstatat",
            Kind::Fstatat64 => "fstatat64",
            Kind::Statx => "statx",
            Kind::Access => "access",
            Kind::Faccessat => "faccessat",
            Kind::Faccessat2 => "faccessat2",
            Kind::Open => "open",
            Kind::Openat => "openat",
            Kind::Openat2 => "openat2",
            Kind::Creat => "creat",
            Kind::Close => "close",
            Kind::Read => "read",
            Kind::Pread64 => "pread64",
            Kind::Mmap => "mmap",
            Kind::Readlink => "readlink",
            Kind::Readlinkat => "readlinkat",
            Kind::Getcwd => "getcwd",
            Kind::Chdir => "chdir",
            Kind::Fchdir => "fchdir",
            Kind::Getdents64 => "getdents64",
            Kind::Rename => "rename",
            Kind::Renameat => "renameat",
            Kind::Renameat2 => "renameat2",
            Kind::Unlink => "unlink",
            Kind::Unlinkat => "unlinkat",
            Kind::Mkdir => "mkdir",
            Kind::Mkdirat => "mkdirat",
            Kind::Rmdir => "rmdir",
            Kind::Write => "write",
            Kind::Pwrite64 => "pwrite64",
            Kind::Accept => "accept",
            Kind::Accept4 => "accept4",
            Kind::Recvfrom => "recvfrom",
            Kind::Recvmsg => "recvmsg",
            Kind::Dup => "dup",
            Kind::Dup2 => "dup2",
            Kind::Dup3 => "dup3",
            Kind::Fcntl => "fcntl",
            Kind::Other => "other",
        }
    }

    /// Kind for a syscall name as strace prints it.
    pub fn from_name(name: &[u8]) -> Kind {
        // Linear scan over 41 short names is cheap, but the hot path should
        // cache by name id; see the parser.
        for k in Kind::ALL {
            if k.name().as_bytes() == name {
                return k;
            }
        }
        Kind::Other
    }

    /// stat-family: the calls that read inode attributes.
    pub fn is_stat_family(self) -> bool {
        matches!(
            self,
            Kind::Stat
                | Kind::Lstat
                | Kind::Fstat
                | Kind::Newfstatat
                | Kind::Fstatat64
                | Kind::Statx
        )
    }
    pub fn is_access(self) -> bool {
        matches!(self, Kind::Access | Kind::Faccessat | Kind::Faccessat2)
    }
    pub fn is_open(self) -> bool {
        matches!(
            self,
            Kind::Open | Kind::Openat | Kind::Openat2 | Kind::Creat
        )
    }
    pub fn is_readlink(self) -> bool {
        matches!(self, Kind::Readlink | Kind::Readlinkat)
    }
    /// `dup`, `dup2`, `dup3`: the result is a new fd for the open file of
    /// `Event::fd` (see [`Event::dup_of`] for `fcntl(F_DUPFD)` too).
    pub fn is_dup(self) -> bool {
        matches!(self, Kind::Dup | Kind::Dup2 | Kind::Dup3)
    }
    /// Calls that resolve a path name (a metadata operation on a network FS).
    pub fn is_metadata(self) -> bool {
        self.is_stat_family() || self.is_access() || self.is_open() || self.is_readlink()
    }
}

/// Decoded flag bits, in statstorm's own encoding (independent of the
/// architecture's numeric values, which strace prints symbolically anyway).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Flags(pub u32);

impl Flags {
    pub const AT_SYMLINK_NOFOLLOW: u32 = 1 << 0;
    pub const AT_EMPTY_PATH: u32 = 1 << 1;
    pub const O_WRONLY: u32 = 1 << 2;
    pub const O_RDWR: u32 = 1 << 3;
    pub const O_CREAT: u32 = 1 << 4;
    pub const O_EXCL: u32 = 1 << 5;
    pub const O_TRUNC: u32 = 1 << 6;
    pub const O_DIRECTORY: u32 = 1 << 7;
    pub const O_APPEND: u32 = 1 << 8;
    pub const O_NOFOLLOW: u32 = 1 << 9;
    pub const O_PATH: u32 = 1 << 10;
    /// access()/faccessat() mode bits; F_OK is "none of these".
    pub const R_OK: u32 = 1 << 11;
    pub const W_OK: u32 = 1 << 12;
    pub const X_OK: u32 = 1 << 13;
    /// unlinkat(..., AT_REMOVEDIR)
    pub const AT_REMOVEDIR: u32 = 1 << 14;
    /// The dirfd argument was AT_FDCWD.
    pub const AT_FDCWD: u32 = 1 << 15;
    /// The string argument was cut by strace (`"..."...`).
    pub const TRUNCATED: u32 = 1 << 16;
    /// `fcntl(fd, F_DUPFD, n)` or `fcntl(fd, F_DUPFD_CLOEXEC, n)`: the call
    /// duplicates `fd` like `dup` (lowest free fd >= n).
    pub const F_DUPFD: u32 = 1 << 17;
    /// The fd argument's file had been unlinked (`-y`: `3</tmp/f>(deleted)`).
    pub const FD_DELETED: u32 = 1 << 18;
    /// The fd argument or the result carried a `-y` decoration
    /// (`3</a/b>`, `= 3<TCP:[...]>`), whether or not [`Options::fd_paths`]
    /// kept its text in `Event::fd_path` / `Event::ret_path`.
    ///
    /// [`Options::fd_paths`]: crate::Options::fd_paths
    pub const DECORATED: u32 = 1 << 19;
    /// The fd argument's decoration is a file path (it starts with `/`;
    /// sockets, pipes and anonymous inodes do not).
    pub const FD_FILE: u32 = 1 << 20;

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
    pub fn set(&mut self, bit: u32) {
        self.0 |= bit;
    }
}

/// An errno name (ENOENT, EACCES, ...), interned in the trace's interner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Errno(pub PathId);

/// The result of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Ret {
    /// `= ?` (the process exited or exec'd before the call returned).
    /// First, so that its tag is 0 and the parser's empty event is all zero bytes.
    Unknown,
    /// `= N` (decimal or hex).
    Ok(i64),
    /// `= -1 ENOENT (No such file or directory)`.
    Err(Errno),
}

/// One completed syscall.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// Process (thread) id; 0 when the trace has no pid column.
    pub pid: u32,
    /// Start of the call, microseconds: epoch time with `-ttt`, time of day
    /// with `-t`/`-tt`, accumulated from the deltas with `-r`. `None` without
    /// timestamps.
    pub ts_us: Option<i64>,
    /// Time spent in the call (`-T`), microseconds.
    pub dur_us: Option<u64>,
    pub kind: Kind,
    /// The syscall name as printed (interned); for decoded kinds it equals
    /// `kind.name()`.
    pub name: PathId,
    /// The path argument (first path for rename-like calls), as printed: may
    /// be relative to `dirfd` or the cwd.
    pub path: Option<PathId>,
    /// Second path argument (rename target; for `readlink`/`readlinkat`,
    /// the target returned, when strace printed it whole). For `dup2`/`dup3`, the path
    /// strace printed with `-y` for the target fd (`1</a/b>`): the file the
    /// target fd referred to before the call. For `execve`/`execveat`: the
    /// program's path and its arguments, each followed by a NUL byte (a
    /// string strace cut at `-s` and those after it left out).
    pub path2: Option<PathId>,
    /// The fd argument: fd of fstat/read/close/getdents/fchdir/mmap/write,
    /// the dirfd of *at calls (unless AT_FDCWD), the listening fd of accept,
    /// the old fd of dup/dup2/dup3 and the fd of fcntl (the new fd of a dup
    /// is the result, `Ret::Ok`).
    pub fd: Option<i32>,
    /// The path strace printed for `fd` with `-y` (`3</a/b>`), if any.
    pub fd_path: Option<PathId>,
    pub flags: Flags,
    pub ret: Ret,
    /// With `-y`, the path decoration of a returned fd (`= 3</a/b>`).
    pub ret_path: Option<PathId>,
    /// The file's modification time (epoch seconds) of a successful
    /// stat-family call when strace printed the whole struct (`-v`:
    /// `st_mtime=`, statx's `stx_mtime={tv_sec=`).
    pub mtime: Option<i64>,
    /// The inode's change time (epoch microseconds) beside `mtime`
    /// (`st_ctime=`/`st_ctime_nsec=`, statx's `stx_ctime={tv_sec=, tv_nsec=`):
    /// when the file was last written, renamed into place or given another
    /// mtime (`touch -d`, `rsync -t` keep an old mtime; the kernel sets the
    /// ctime to the time of the change).
    pub ctime_us: Option<i64>,
    /// Input number (index into the list of inputs) and 1-based line number
    /// of the line that started the call.
    pub input: u16,
    pub line: u64,
}

impl Event {
    /// An event with nothing known: the start the decoder fills in. All
    /// zero bytes (`Kind::Other` and `Ret::Unknown` are declared first):
    /// writing it into a block's record is a few vector stores, where a
    /// copy of the constant was a `memcpy` call a line (3.9 M of the 441 M
    /// instructions of `analyze` on the 30 MB slice of the bench log).
    pub(crate) const EMPTY: Event = Event {
        pid: 0,
        ts_us: None,
        dur_us: None,
        kind: Kind::Other,
        name: PathId(0),
        path: None,
        path2: None,
        fd: None,
        fd_path: None,
        flags: Flags(0),
        ret: Ret::Unknown,
        ret_path: None,
        mtime: None,
        ctime_us: None,
        input: 0,
        line: 0,
    };

    pub fn is_error(&self) -> bool {
        matches!(self.ret, Ret::Err(_))
    }
    pub fn errno(&self) -> Option<Errno> {
        match self.ret {
            Ret::Err(e) => Some(e),
            _ => None,
        }
    }
    /// For a successful `dup`, `dup2`, `dup3` or `fcntl(F_DUPFD*)`: the
    /// duplicated fd and the new fd, `(old, new)`.
    pub fn dup_of(&self) -> Option<(i32, i32)> {
        let dups =
            self.kind.is_dup() || (self.kind == Kind::Fcntl && self.flags.has(Flags::F_DUPFD));
        match (dups, self.fd, self.ret) {
            (true, Some(old), Ret::Ok(new)) if new >= 0 && new <= i32::MAX as i64 => {
                Some((old, new as i32))
            }
            _ => None,
        }
    }
}
