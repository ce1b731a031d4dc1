//! [`Tally`]: counts by a static name (a syscall as strace names it, an
//! RPC as mountstats names it), sorted by name. The per-request counts of
//! a prediction are held once per request and side, and copied into the
//! report's rows: a tally is a shared, copy-on-write sorted vector of
//! `(&'static str, u64)` (24 bytes per name; a clone is a reference), where
//! a `BTreeMap<String, u64>` took a node of eleven slots and a string per
//! name (about 500 bytes for three names) and a clone copied them all. A
//! [`TallyPool`] shares equal tallies: the requests of a capture repeat
//! the same counts, so a vector of them holds one copy of each.

use crate::share::Pool;
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::sync::Arc;

type Entries = Vec<(&'static str, u64)>;

/// Counts by name, sorted by name; serializes as a map (`{"name": n}`),
/// as a `BTreeMap<String, u64>` of the same counts would.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tally(Arc<Entries>);

impl Tally {
    pub fn new() -> Self {
        Tally(Arc::default())
    }

    /// Adds `n` to `name`'s count (a name added with 0 is listed).
    pub fn add(&mut self, name: &'static str, n: u64) {
        let v = Arc::make_mut(&mut self.0);
        match v.binary_search_by(|(k, _)| (*k).cmp(name)) {
            Ok(i) => v[i].1 += n,
            Err(i) => v.insert(i, (name, n)),
        }
    }

    /// Sets `name`'s count to `n`.
    pub fn set(&mut self, name: &'static str, n: u64) {
        let v = Arc::make_mut(&mut self.0);
        match v.binary_search_by(|(k, _)| (*k).cmp(name)) {
            Ok(i) => v[i].1 = n,
            Err(i) => v.insert(i, (name, n)),
        }
    }

    /// `name`'s count, when it is listed.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0
            .binary_search_by(|(k, _)| (*k).cmp(name))
            .ok()
            .map(|i| self.0[i].1)
    }

    /// `name`'s count, 0 when it is not listed.
    pub fn of(&self, name: &str) -> u64 {
        self.get(name).unwrap_or(0)
    }

    /// Every name listed with its count, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().copied()
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Tally) {
        for (k, n) in other.iter() {
            self.add(k, n);
        }
    }

    /// The sum of the counts.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Gives back the spare capacity (a tally kept per request).
    pub fn shrunk(mut self) -> Tally {
        if let Some(v) = Arc::get_mut(&mut self.0) {
            v.shrink_to_fit();
        }
        self
    }
}

/// Equal tallies shared ([`Pool`]): [`TallyPool::share`] gives back the
/// pool's copy of a tally it holds an equal of.
#[derive(Default)]
pub struct TallyPool(Pool<Entries>);

impl TallyPool {
    pub fn new() -> Self {
        Self::default()
    }

    /// `t`, or the equal tally the pool already holds (kept as given:
    /// give it [`Tally::shrunk`]).
    pub fn share(&mut self, t: Tally) -> Tally {
        let v = Arc::try_unwrap(t.0).unwrap_or_else(|a| (*a).clone());
        Tally(self.0.share(v))
    }

    /// Distinct tallies held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(&'static str, u64)> for Tally {
    fn from_iter<I: IntoIterator<Item = (&'static str, u64)>>(it: I) -> Self {
        let mut t = Tally::new();
        for (k, n) in it {
            t.add(k, n);
        }
        t
    }
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, n)| (k, n)))
            .finish()
    }
}

impl Serialize for Tally {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, n) in self.0.iter() {
            m.serialize_entry(k, n)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn counts_and_serializes_as_the_same_btreemap_would() {
        let names = [
            "openat",
            "access",
            "newfstatat",
            "openat",
            "readlink",
            "access",
        ];
        let mut t = Tally::new();
        let mut m: BTreeMap<String, u64> = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            t.add(n, i as u64);
            *m.entry(n.to_string()).or_default() += i as u64;
        }
        t.set("close", 0);
        m.insert("close".into(), 0);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
        assert_eq!(t.get("openat"), Some(3));
        assert_eq!(t.get("stat"), None);
        assert_eq!(t.of("stat"), 0);
        assert_eq!(t.total(), m.values().sum::<u64>());
        let mut u = t.clone();
        u.merge(&t);
        assert_eq!(u.of("access"), 12);
        assert_eq!(u.len(), t.len());
        // the clone was copied on write: t is as it was
        assert_eq!(t.of("access"), 6);
    }

    #[test]
    fn a_pool_shares_equal_tallies() {
        let mut pool = TallyPool::new();
        let make = |n| -> Tally { [("openat", n), ("access", 1)].into_iter().collect() };
        let a = pool.share(make(2));
        let b = pool.share(make(2));
        let c = pool.share(make(3));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        assert_eq!((a.of("openat"), c.of("openat"), pool.len()), (2, 3, 2));
        let mut d = b.clone();
        d.add("openat", 1);
        assert_eq!((a.of("openat"), d.of("openat")), (2, 3));
    }
}
