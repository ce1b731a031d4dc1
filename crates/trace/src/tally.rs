//! [`Tally`]: counts by a static name (a syscall as strace names it, an
//! RPC as mountstats names it), sorted by name. The per-request counts of
//! a prediction are held once per request and side: a sorted vector of
//! `(&'static str, u64)` is 24 bytes per name in one allocation, where a
//! `BTreeMap<String, u64>` took a node of eleven slots and a string per
//! name (about 500 bytes for three names).

use serde::ser::{Serialize, SerializeMap, Serializer};

/// Counts by name, sorted by name; serializes as a map (`{"name": n}`),
/// as a `BTreeMap<String, u64>` of the same counts would.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tally(Vec<(&'static str, u64)>);

impl Tally {
    pub fn new() -> Self {
        Tally(Vec::new())
    }

    /// Adds `n` to `name`'s count (a name added with 0 is listed).
    pub fn add(&mut self, name: &'static str, n: u64) {
        match self.0.binary_search_by(|(k, _)| (*k).cmp(name)) {
            Ok(i) => self.0[i].1 += n,
            Err(i) => self.0.insert(i, (name, n)),
        }
    }

    /// Sets `name`'s count to `n`.
    pub fn set(&mut self, name: &'static str, n: u64) {
        match self.0.binary_search_by(|(k, _)| (*k).cmp(name)) {
            Ok(i) => self.0[i].1 = n,
            Err(i) => self.0.insert(i, (name, n)),
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
        self.0.shrink_to_fit();
        self
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
        for (k, n) in &self.0 {
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
    }
}
