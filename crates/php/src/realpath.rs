//! PHP's per-process realpath cache (R54), entry for entry.
//!
//! php-src `Zend/zend_virtual_cwd.c`: `realpath_cache_key` (a 64-bit
//! FNV-1 style hash: start 2166136261, multiply by 16777619, then xor the
//! byte as a signed `char`), a table of 1024 chains (`key % 1024`, new
//! entries at the head), `realpath_cache_find` (walks the chain from the
//! head; every expired entry it passes, `expires < now` with a non-zero
//! TTL, is unlinked and its bytes given back, the looked-up one included),
//! `realpath_cache_add` (no insertion once `size + entry > limit`; no
//! eviction), `realpath_cache_clean` (everything).
//!
//! Entry size, measured with php-cli 8.2 (`realpath_cache_size()` after
//! known resolutions, test `realpath_live`): 48 bytes of
//! `realpath_cache_bucket`, the path and its NUL, and the resolved path
//! and its NUL only when it differs from the path (a symlink, or a path
//! through one). `tsrm_realpath_r` adds a walk's entries on its way back
//! out of the recursion, so the shallowest prefix first: a budget that
//! runs out mid-walk keeps the top directories and loses the leaf
//! (measured, same test).

use crate::paths::parent;
use std::collections::BTreeMap;

/// `sizeof(realpath_cache_bucket)` on x86-64 (measured, see above).
pub const BUCKET_BYTES: u64 = 48;
/// Chains in `virtual_cwd_globals.realpath_cache`.
pub const CHAINS: usize = 1024;

/// `realpath_cache_key` of a path (non-Windows).
pub fn key(path: &[u8]) -> u64 {
    let mut h: u64 = 2_166_136_261;
    for &b in path {
        h = h.wrapping_mul(16_777_619);
        // `h ^= *path++` with a signed `char`: bytes >= 0x80 are
        // sign-extended
        h ^= b as i8 as i64 as u64;
    }
    h
}

/// The path `p` resolves to (the entry's `realpath`): components in
/// order, absolute symlink targets followed, `.` and empty components
/// dropped, `..` dropping the last component of what its prefix resolved
/// to (`tsrm_realpath_r`). After 32 links (ELOOP) the name as it is.
pub fn resolved(links: &BTreeMap<String, String>, p: &str) -> String {
    let mut cur = String::new();
    let mut hops = 0;
    for c in p.split('/') {
        match c {
            "" | "." => continue,
            ".." => {
                let cut = cur.rfind('/').unwrap_or(0);
                cur.truncate(cut);
                continue;
            }
            _ => {}
        }
        cur.push('/');
        cur.push_str(c);
        while let Some(t) = links.get(&cur) {
            hops += 1;
            if hops > 32 {
                return p.to_string();
            }
            cur = t.trim_end_matches('/').to_string();
        }
    }
    if cur.is_empty() {
        "/".to_string()
    } else {
        cur
    }
}

/// Bytes one entry takes from the budget.
pub fn entry_bytes(path: &str, realpath: &str) -> u64 {
    let mut n = BUCKET_BYTES + path.len() as u64 + 1;
    if realpath != path {
        n += realpath.len() as u64 + 1;
    }
    n
}

/// A syscall of a resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// `lstat` (strace: `newfstatat(..., AT_SYMLINK_NOFOLLOW)`)
    Lstat(&'a str),
    Readlink(&'a str),
}

#[derive(Debug, Clone)]
struct Bucket {
    key: u64,
    path: String,
    expires: i64,
    bytes: u64,
}

/// One process's realpath cache.
#[derive(Debug, Clone)]
pub struct RealpathCache {
    /// chain i: its head is the last element
    chains: Vec<Vec<Bucket>>,
    bytes: u64,
    limit: u64,
    ttl: u64,
    /// The most bytes ever in use, and whether an entry was ever refused
    /// for want of room: with no refusal, any budget of at least `peak`
    /// behaves as this one did ([`RealpathCache::peak`]).
    peak: u64,
    refused: bool,
    /// The first entry's insertion time and the last lookup's (epoch
    /// seconds; `i64::MAX` / `i64::MIN` before either): see
    /// [`RealpathCache::span`].
    first_add: i64,
    last_find: i64,
}

impl RealpathCache {
    /// `limit` is `realpath_cache_size` in bytes (0: off, as under
    /// `open_basedir`, R58), `ttl` is `realpath_cache_ttl` in seconds.
    pub fn new(limit: u64, ttl: u64) -> Self {
        RealpathCache {
            chains: Vec::new(),
            bytes: 0,
            limit,
            ttl,
            peak: 0,
            refused: false,
            first_add: i64::MAX,
            last_find: i64::MIN,
        }
    }

    /// Seconds from the first entry added to the last lookup that found
    /// entries in the cache (0 before both): no entry can have been older
    /// than this when looked at, so any TTL of at least this many seconds
    /// (or none) let every entry live, and gives the same hits and misses.
    pub fn span(&self) -> u64 {
        if self.first_add == i64::MAX || self.last_find == i64::MIN {
            return 0;
        }
        self.last_find.saturating_sub(self.first_add).max(0) as u64
    }

    /// The most bytes ever in use, and whether the limit ever refused an
    /// entry. Without a refusal every limit of at least that many bytes
    /// gives the same hits and misses (an entry is refused only when it
    /// would take the cache past its limit).
    pub fn peak(&self) -> (u64, bool) {
        (self.peak, self.refused)
    }

    /// Whether lookups happen at all (`realpath_cache_size_limit != 0`).
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Bytes in use (`realpath_cache_size()`).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The cached paths, expired entries not yet unlinked included (as
    /// `realpath_cache_get()` lists them).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.chains.iter().flatten().map(|b| b.path.as_str())
    }

    /// `realpath_cache_find` at `now` (epoch seconds): true on a hit.
    pub fn find(&mut self, path: &str, now: i64) -> bool {
        if !self.enabled() || self.chains.is_empty() {
            return false;
        }
        self.last_find = self.last_find.max(now);
        let k = key(path.as_bytes());
        let chain = &mut self.chains[(k % CHAINS as u64) as usize];
        let mut i = chain.len();
        while i > 0 {
            i -= 1;
            let b = &chain[i];
            if self.ttl != 0 && b.expires < now {
                self.bytes -= b.bytes;
                chain.remove(i);
            } else if b.key == k && b.path == path {
                return true;
            }
        }
        false
    }

    /// `realpath_cache_add` at `now`: `path` resolved to `realpath`.
    pub fn add(&mut self, path: &str, realpath: &str, now: i64) {
        let n = entry_bytes(path, realpath);
        if self.bytes + n > self.limit {
            self.refused = true;
            return;
        }
        if self.chains.is_empty() {
            self.chains = vec![Vec::new(); CHAINS];
        }
        let k = key(path.as_bytes());
        self.chains[(k % CHAINS as u64) as usize].push(Bucket {
            key: k,
            path: path.to_string(),
            expires: now.saturating_add(self.ttl as i64),
            bytes: n,
        });
        self.bytes += n;
        self.peak = self.peak.max(self.bytes);
        self.first_add = self.first_add.min(now);
    }

    /// `tsrm_realpath_r` of an existing path at `now` (R53): from the full
    /// path up to the first cached prefix, one `lstat` per prefix (the
    /// root never); a symlink (`links`: absolute targets) is read and its
    /// target resolved instead of its parent; the walked prefixes are
    /// added on the way out, the shallowest first. `call` sees each
    /// syscall in order.
    pub fn resolve(
        &mut self,
        p: &str,
        now: i64,
        links: &BTreeMap<String, String>,
        call: &mut dyn FnMut(Call<'_>),
    ) {
        self.resolve_from(p, now, links, call, &mut 0);
    }

    fn resolve_from(
        &mut self,
        p: &str,
        now: i64,
        links: &BTreeMap<String, String>,
        call: &mut dyn FnMut(Call<'_>),
        hops: &mut u32,
    ) {
        let mut cur = Some(p);
        let mut walked: Vec<&str> = Vec::new();
        while let Some(c) = cur {
            if self.find(c, now) {
                break;
            }
            call(Call::Lstat(c));
            if let Some(target) = links.get(c) {
                call(Call::Readlink(c));
                // tsrm_realpath_r's link count: ELOOP after 32 (LINK_MAX)
                *hops += 1;
                if *hops > 32 {
                    return;
                }
                walked.push(c);
                self.resolve_from(target, now, links, call, hops);
                break;
            }
            cur = parent(c);
            walked.push(c);
        }
        if self.enabled() {
            for c in walked.iter().rev() {
                self.add(c, &resolved(links, c), now);
            }
        }
    }

    /// `realpath_cache_clean`: everything (unlink, rename, rmdir, R57).
    pub fn clean(&mut self) {
        for c in &mut self.chains {
            c.clear();
        }
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_through_a_link_and_a_loop() {
        let links: BTreeMap<String, String> = [
            ("/r/lnk", "/r/a/bb"),
            ("/x/l1", "/x/l2"),
            ("/x/l2", "/x/l1"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let mut c = RealpathCache::new(1 << 20, 120);
        let mut calls = Vec::new();
        c.resolve("/r/lnk/ccc/f.php", 0, &links, &mut |k| {
            calls.push(format!("{k:?}"))
        });
        assert_eq!(
            calls,
            [
                "Lstat(\"/r/lnk/ccc/f.php\")",
                "Lstat(\"/r/lnk/ccc\")",
                "Lstat(\"/r/lnk\")",
                "Readlink(\"/r/lnk\")",
                "Lstat(\"/r/a/bb\")",
                "Lstat(\"/r/a\")",
                "Lstat(\"/r\")",
            ]
        );
        // cached: nothing the second time; the link's entries hold both names
        calls.clear();
        c.resolve("/r/lnk/ccc/f.php", 1, &links, &mut |k| {
            calls.push(format!("{k:?}"))
        });
        assert!(calls.is_empty());
        let plain: u64 = ["/r", "/r/a", "/r/a/bb"]
            .iter()
            .map(|p| entry_bytes(p, p))
            .sum();
        let linked = entry_bytes("/r/lnk", "/r/a/bb")
            + entry_bytes("/r/lnk/ccc", "/r/a/bb/ccc")
            + entry_bytes("/r/lnk/ccc/f.php", "/r/a/bb/ccc/f.php");
        assert_eq!(c.bytes(), plain + linked);
        // a symlink loop ends (ELOOP) instead of recursing forever
        calls.clear();
        c.resolve("/x/l1/f", 0, &links, &mut |k| calls.push(format!("{k:?}")));
        assert!(calls.len() < 200, "{}", calls.len());
    }

    #[test]
    fn resolved_paths() {
        let links: BTreeMap<String, String> = [("/v/l".to_string(), "/w/x".to_string())]
            .into_iter()
            .collect();
        assert_eq!(resolved(&links, "/v/c/../r"), "/v/r");
        assert_eq!(resolved(&links, "/v/l/../r"), "/w/r");
        assert_eq!(resolved(&links, "/v//l/./f"), "/w/x/f");
        assert_eq!(resolved(&links, "/v/.."), "/");
        // an entry through `..` holds both names (MediaWiki's
        // vendor/composer/../ralouphie paths)
        assert_eq!(
            entry_bytes("/v/c/../r", &resolved(&links, "/v/c/../r")),
            48 + 10 + 5
        );
    }

    #[test]
    fn keys_are_php_s() {
        // realpath_cache_get()['key'] printed by php-cli 8.2
        assert_eq!(key(b"/tmp/rc"), 4_341_054_110_123_224_307);
        assert_eq!(key(b"/tmp/rc/a"), 6_797_427_114_417_531_699);
        assert_eq!(key(b"/tmp"), 16_709_564_980_243_423_075);
        assert_eq!(key(b"/tmp/rc/a/g.php"), 16_205_814_752_405_326_035);
    }

    #[test]
    fn sizes_and_budget() {
        // php -n /tmp/rc/t.php: /tmp, /tmp/rc and the script = 171 bytes
        let mut c = RealpathCache::new(290, 120);
        for p in ["/tmp", "/tmp/rc", "/tmp/rc/t.php"] {
            c.add(p, p, 0);
        }
        assert_eq!(c.bytes(), 171);
        // shallowest first: /tmp/rc/a (58) and /tmp/rc/a/bb (61) fit in
        // 290 exactly, the rest not
        for p in [
            "/tmp/rc/a",
            "/tmp/rc/a/bb",
            "/tmp/rc/a/bb/ccc",
            "/tmp/rc/a/bb/ccc/f.php",
        ] {
            c.add(p, p, 0);
        }
        assert_eq!(c.bytes(), 290);
        assert_eq!(c.paths().count(), 5);
        // a symlink's entry holds both names
        assert_eq!(entry_bytes("/tmp/rc/lnk", "/tmp/rc/a/bb"), 73);
        // the peak: 290 bytes held, two entries refused
        assert_eq!(c.peak(), (290, true));
    }

    /// A TTL of at least the span (first entry added to last lookup) ends
    /// no entry: the same hits as no TTL; one second less ends one (what
    /// the settings search relies on to read one TTL's trial from
    /// another's).
    #[test]
    fn a_ttl_of_the_span_ends_no_entry() {
        let run = |ttl: u64| {
            let mut c = RealpathCache::new(1 << 20, ttl);
            let mut hits = Vec::new();
            for t in 10..16i64 {
                hits.push(c.find("/a", t));
                c.add("/a", "/a", t);
                hits.push(c.find("/a/b", t + 1));
                if t == 10 {
                    c.add("/a/b", "/a/b", t);
                }
            }
            (hits, c.span())
        };
        let (none, span) = run(0);
        assert_eq!(span, 15 - 10 + 1);
        assert_eq!(run(span).0, none);
        assert_eq!(run(span + 100).0, none);
        assert_ne!(run(span - 1).0, none);
        assert_eq!(RealpathCache::new(100, 2).span(), 0);
    }

    /// A cache whose limit is at least another's peak, where that one
    /// refused nothing, keeps the same entries (what the settings search
    /// relies on to stop its bisection at the peak).
    #[test]
    fn a_limit_at_the_peak_behaves_as_no_limit() {
        let paths = ["/a", "/a/b", "/a/b/c.php", "/a/d.php", "/a/b/e.php"];
        let mut big = RealpathCache::new(1 << 30, 2);
        for (t, p) in paths.iter().enumerate() {
            big.add(p, p, t as i64);
            big.find("/a", t as i64);
        }
        let (peak, refused) = big.peak();
        assert!(!refused && peak > 0);
        let mut at = RealpathCache::new(peak, 2);
        let mut below = RealpathCache::new(peak - 1, 2);
        for (t, p) in paths.iter().enumerate() {
            at.add(p, p, t as i64);
            at.find("/a", t as i64);
            below.add(p, p, t as i64);
            below.find("/a", t as i64);
        }
        let sorted = |c: &RealpathCache| {
            let mut v: Vec<String> = c.paths().map(str::to_string).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&at), sorted(&big));
        assert_eq!(at.peak(), (peak, false));
        assert!(below.peak().1, "one byte less refuses an entry");
    }

    #[test]
    fn expired_entries_go_when_a_lookup_passes_them() {
        let chain = |p: &str| key(p.as_bytes()) % CHAINS as u64;
        let a = "/a";
        // another path in a's chain, and one in another chain
        let b = (0..100_000)
            .map(|i| format!("/b{i}"))
            .find(|p| chain(p) == chain(a))
            .unwrap();
        let other = (0..100)
            .map(|i| format!("/o{i}"))
            .find(|p| chain(p) != chain(a))
            .unwrap();
        let mut c = RealpathCache::new(1 << 20, 1);
        c.add(a, a, 10); // expires 11
        c.add(&b, &b, 11); // expires 12, nearer the head
                           // at 12 a has expired; the lookup of b stops at b (a live hit) and
                           // never reaches a, nor does a lookup in another chain
        assert!(c.find(&b, 12));
        assert!(!c.find(&other, 12));
        assert_eq!(c.paths().count(), 2);
        // a lookup of a reaches a: expired, unlinked, a miss
        assert!(!c.find(a, 12));
        assert_eq!(c.paths().collect::<Vec<_>>(), vec![b.as_str()]);
        assert_eq!(c.bytes(), entry_bytes(&b, &b));
        // a miss walks the whole chain: at 13 b goes too
        assert!(!c.find(a, 13));
        assert_eq!((c.paths().count(), c.bytes()), (0, 0));
        // a TTL of 0 never expires
        let mut c = RealpathCache::new(1 << 20, 0);
        c.add(a, a, 10);
        assert!(c.find(a, 1_000_000));
    }
}
