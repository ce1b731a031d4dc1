//! The pids of the inputs read so far, to refuse a pid that two inputs
//! have (the same file twice, two captures of one host): the analyzer
//! keys processes by pid, so they would be merged into one.

use std::collections::{HashMap, HashSet};

pub struct PidCheck {
    /// Pid -> index of the first input that had it.
    owner: HashMap<u32, usize>,
    /// The input being read.
    input: usize,
    /// Its pids (added to `owner` when it ends).
    mine: HashSet<u32>,
    /// The last event's pid (`u32::MAX` before the first): runs of one
    /// process's events cost one comparison each.
    last: u32,
    /// A pid of this input that an earlier one had: (pid, that input).
    collision: Option<(u32, usize)>,
}

impl Default for PidCheck {
    fn default() -> Self {
        PidCheck {
            owner: HashMap::new(),
            input: 0,
            mine: HashSet::new(),
            last: u32::MAX,
            collision: None,
        }
    }
}

impl PidCheck {
    /// Input `index` starts.
    pub fn begin_input(&mut self, index: usize) {
        self.input = index;
    }

    /// `false` when `pid` belongs to an earlier input.
    #[inline]
    pub fn check(&mut self, pid: u32) -> bool {
        if pid == self.last {
            return true;
        }
        self.last = pid;
        if let Some(&first) = self.owner.get(&pid) {
            self.collision = Some((pid, first));
            return false;
        }
        self.mine.insert(pid);
        true
    }

    /// A pid of the current input that an earlier one had: (pid, the
    /// index of that input).
    pub fn collision(&self) -> Option<(u32, usize)> {
        self.collision
    }

    /// The current input has ended: `pids` (its own, or those
    /// [`PidCheck::check`] saw when `None`) join the earlier ones'.
    pub fn end_input(&mut self, pids: Option<Vec<u32>>) {
        let input = self.input;
        let pids = match pids {
            Some(p) => p,
            None => std::mem::take(&mut self.mine).into_iter().collect(),
        };
        for pid in pids {
            self.owner.entry(pid).or_insert(input);
        }
        self.mine.clear();
        self.last = u32::MAX;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_of_an_earlier_input_is_refused() {
        let mut c = PidCheck::default();
        c.begin_input(0);
        c.end_input(Some(vec![10, 11]));
        c.begin_input(1);
        assert!(c.check(12));
        assert!(c.check(12));
        assert_eq!(c.collision(), None);
        assert!(!c.check(11));
        assert_eq!(c.collision(), Some((11, 0)));
        c.end_input(None);
        c.begin_input(2);
        assert!(!c.check(12));
        assert_eq!(c.collision(), Some((12, 1)));
    }
}
