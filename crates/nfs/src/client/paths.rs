//! Interned absolute paths for the client model's state.
//!
//! A path is stored as (parent, last component), so each distinct path
//! costs one node and its last component's bytes: the prefixes of a path
//! `d` directories deep take O(d) memory here, where one `String` per
//! prefix took O(d^2) (issue 24: 200 paths 2,000 directories deep took
//! 4.35 GB). Node 0 is `/`. Ids are given in the order paths are first
//! seen, so they are deterministic for a given input.

use hashbrown::HashTable;
use statstorm_trace::event::FastHash;
use std::hash::{BuildHasher, Hasher};

/// An interned path (an index into [`Paths`]).
pub type PathId = u32;

/// The root, `/`.
pub const SLASH: PathId = 0;

/// No node (the end of a child or sibling list).
const NONE: PathId = PathId::MAX;

#[derive(Clone, Debug)]
pub struct Paths {
    /// (parent, last component) of each path; `/` is its own parent.
    nodes: Vec<(PathId, Box<str>)>,
    /// Each node's first child and next sibling ([`NONE`] for none): a
    /// subtree is listed in its own size ([`Paths::subtree`]), 8 bytes a
    /// node.
    first_child: Vec<PathId>,
    next_sibling: Vec<PathId>,
    /// The ids by (parent, name), hashed with the project's fast hash and
    /// compared against `nodes`: a lookup of a known path allocates
    /// nothing (the client walks every call's path through here).
    index: HashTable<PathId>,
}

fn key_hash(parent: PathId, name: &str) -> u64 {
    let mut h = FastHash.build_hasher();
    h.write_u32(parent);
    h.write(name.as_bytes());
    h.finish()
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            nodes: vec![(SLASH, "".into())],
            first_child: vec![NONE],
            next_sibling: vec![NONE],
            index: HashTable::new(),
        }
    }
}

impl Paths {
    /// `parent/name` (`name`: one component, no `/`).
    pub fn child(&mut self, parent: PathId, name: &str) -> PathId {
        let Paths {
            nodes,
            first_child,
            next_sibling,
            index,
        } = self;
        let h = key_hash(parent, name);
        let same = |&id: &PathId| {
            let (p, n) = &nodes[id as usize];
            *p == parent && &**n == name
        };
        if let Some(&id) = index.find(h, same) {
            return id;
        }
        let id = PathId::try_from(nodes.len()).expect("fewer than 2^32 distinct paths");
        nodes.push((parent, name.into()));
        first_child.push(NONE);
        next_sibling.push(first_child[parent as usize]);
        first_child[parent as usize] = id;
        index.insert_unique(h, id, |&id| {
            let (p, n) = &nodes[id as usize];
            key_hash(*p, n)
        });
        id
    }

    /// The id of `rel` (components separated by `/`, empty ones ignored)
    /// below `base`, pushing the id of every prefix after `base` onto `out`.
    pub fn walk_into(&mut self, base: PathId, rel: &str, out: &mut Vec<PathId>) -> PathId {
        let mut id = base;
        for c in rel.split('/').filter(|c| !c.is_empty()) {
            id = self.child(id, c);
            out.push(id);
        }
        id
    }

    /// The id of an absolute path.
    pub fn intern(&mut self, path: &str) -> PathId {
        let mut id = SLASH;
        for c in path.split('/').filter(|c| !c.is_empty()) {
            id = self.child(id, c);
        }
        id
    }

    pub fn parent(&self, id: PathId) -> PathId {
        self.nodes[id as usize].0
    }

    /// `id` and every path below it (in no particular order).
    pub fn subtree(&self, id: PathId) -> Vec<PathId> {
        let mut out = vec![id];
        let mut i = 0;
        while i < out.len() {
            let mut c = self.first_child[out[i] as usize];
            while c != NONE {
                out.push(c);
                c = self.next_sibling[c as usize];
            }
            i += 1;
        }
        out
    }

    /// Whether `id` is `anc` or below it.
    #[cfg(test)]
    pub fn is_within(&self, mut id: PathId, anc: PathId) -> bool {
        loop {
            if id == anc {
                return true;
            }
            if id == SLASH {
                return false;
            }
            id = self.parent(id);
        }
    }

    /// `id` moved from below `from` to the same place below `to` (`id` is
    /// within `from`).
    pub fn rebase(&mut self, id: PathId, from: PathId, to: PathId) -> PathId {
        let mut names: Vec<Box<str>> = Vec::new();
        let mut k = id;
        while k != from {
            names.push(self.nodes[k as usize].1.clone());
            k = self.parent(k);
        }
        let mut out = to;
        for n in names.iter().rev() {
            out = self.child(out, n);
        }
        out
    }

    /// The path as a string (built on demand: output only).
    pub fn string(&self, id: PathId) -> String {
        if id == SLASH {
            return "/".into();
        }
        let mut names: Vec<&str> = Vec::new();
        let mut k = id;
        while k != SLASH {
            names.push(&self.nodes[k as usize].1);
            k = self.parent(k);
        }
        let mut s = String::with_capacity(names.iter().map(|n| n.len() + 1).sum());
        for n in names.iter().rev() {
            s.push('/');
            s.push_str(n);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_walk_rebase_and_back() {
        let mut p = Paths::default();
        let m = p.intern("/m");
        let mut chain = Vec::new();
        let f = p.walk_into(m, "a/b//c.php", &mut chain);
        assert_eq!(chain.len(), 3);
        assert_eq!(p.string(f), "/m/a/b/c.php");
        assert_eq!(p.intern("/m/a/b/c.php"), f);
        assert_eq!(p.string(p.parent(f)), "/m/a/b");
        assert!(p.is_within(f, m) && !p.is_within(m, f));
        let a = chain[0];
        let z = p.intern("/m/z");
        let g = p.rebase(f, a, z);
        assert_eq!(p.string(g), "/m/z/b/c.php");
        assert_eq!(p.string(SLASH), "/");
        let mut sub = p.subtree(m);
        sub.sort_unstable();
        let mut within: Vec<PathId> = (0..p.nodes.len() as PathId)
            .filter(|&k| p.is_within(k, m))
            .collect();
        within.sort_unstable();
        assert_eq!(sub, within);
        assert_eq!(p.subtree(f), vec![f]);
        assert_eq!(p.intern("/"), SLASH);
    }
}
