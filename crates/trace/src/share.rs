//! Equal values shared: what the models keep per request (calls per
//! syscall, a side's RPCs, the latency simulation's lists of calls)
//! repeats from request to request on a real capture (the same script,
//! the same calls), so a vector of them holds one copy of each distinct
//! value and a pointer per request.

// (a pool is asked once per request and side: the fast hash of the
// crate's maps instead of SipHash)
use crate::event::FastSet as HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// The distinct values seen, each once.
pub struct Pool<T>(HashSet<Arc<T>>);

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool(HashSet::default())
    }
}

impl<T: Hash + Eq> Pool<T> {
    /// `v`, or the equal value the pool already holds.
    pub fn share(&mut self, v: T) -> Arc<T> {
        if let Some(a) = self.0.get(&v) {
            return Arc::clone(a);
        }
        let a = Arc::new(v);
        self.0.insert(Arc::clone(&a));
        a
    }

    /// Distinct values held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_are_one_allocation() {
        let mut p = Pool::default();
        let a = p.share(vec![1, 2]);
        let b = p.share(vec![1, 2]);
        let c = p.share(vec![3]);
        assert!(Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
        assert_eq!((p.len(), c.as_slice()), (2, &[3][..]));
    }
}
