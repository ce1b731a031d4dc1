//! What a request does, as the simulator sees it: CPU time and synchronous
//! filesystem operations, each a list of RPCs or one local-filesystem call.

use serde::{Deserialize, Serialize};

/// One step of a request. Steps run one after another: a PHP worker is a
/// single thread and every filesystem call it makes is synchronous, so a
/// worker never has more than one RPC in flight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// On-CPU (or otherwise un-modelled) time.
    Cpu { ns: u64 },
    /// A filesystem call answered by NFS: its RPCs, sent one after another
    /// (e.g. `["LOOKUP", "GETATTR"]`; empty: answered from the client caches).
    Rpcs {
        ops: Vec<String>,
        /// Validation key: the call is skipped while the key is fresh
        /// (see [`crate::Validation`]).
        key: Option<u32>,
    },
    /// A call answered by a local filesystem ([`crate::LocalFs`]).
    Local { key: Option<u32> },
}

/// One request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestSpec {
    /// Arrival time, used by [`crate::Arrivals::Replay`].
    pub start_ns: Option<u64>,
    pub steps: Vec<Step>,
}

impl RequestSpec {
    /// Its CPU time, ns (summed wide: steps of u64::MAX each add up).
    pub fn cpu_ns(&self) -> u128 {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Cpu { ns } => *ns as u128,
                _ => 0,
            })
            .sum()
    }

    /// A request of `cpu_ns` CPU time spread evenly around `n` filesystem
    /// calls (each the RPCs `rpcs`, or one local call when `local`), call `i`
    /// having key `Some(i)` when `keyed`.
    pub fn interleaved(
        cpu_ns: u64,
        n: u32,
        rpcs: &[String],
        local: bool,
        keyed: bool,
    ) -> RequestSpec {
        let chunks = n as u64 + 1;
        let mut steps = Vec::with_capacity(2 * n as usize + 1);
        let mut spent = 0;
        for i in 0..n {
            // (in u128: cpu_ns * (i + 1) overflows u64 for hours of CPU)
            let c = (cpu_ns as u128 * (i as u128 + 1) / chunks as u128) as u64 - spent;
            spent += c;
            if c > 0 {
                steps.push(Step::Cpu { ns: c });
            }
            let key = keyed.then_some(i);
            if local {
                steps.push(Step::Local { key });
            } else {
                steps.push(Step::Rpcs {
                    ops: rpcs.to_vec(),
                    key,
                });
            }
        }
        if cpu_ns - spent > 0 {
            steps.push(Step::Cpu { ns: cpu_ns - spent });
        }
        RequestSpec {
            start_ns: None,
            steps,
        }
    }

    /// Number of RPCs if no call is skipped.
    pub fn rpc_count(&self) -> usize {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Rpcs { ops, .. } => ops.len(),
                _ => 0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_does_not_overflow_on_huge_cpu_times() {
        // cpu_ms = 1e15 in a scenario saturates to u64::MAX ns
        let r = RequestSpec::interleaved(u64::MAX, 3, &["GETATTR".into()], false, false);
        let cpu = r.cpu_ns();
        assert_eq!(cpu, u64::MAX as u128);
    }

    #[test]
    fn interleaved_spreads_cpu_exactly() {
        let r = RequestSpec::interleaved(45_000_000, 180, &["GETATTR".into()], false, true);
        let cpu: u64 = r
            .steps
            .iter()
            .map(|s| if let Step::Cpu { ns } = s { *ns } else { 0 })
            .sum();
        assert_eq!(cpu, 45_000_000);
        assert_eq!(r.rpc_count(), 180);
        assert_eq!(r.steps.len(), 361);
    }
}
