//! Time distributions (service times, hold times) sampled from a seeded RNG.

use rand::Rng;
use serde::{Deserialize, Serialize};

/// A distribution of durations, written with units in the field names.
///
/// TOML: `{ kind = "fixed", ms = 2.0 }`, `{ kind = "exp", mean_ms = 1.0 }`,
/// `{ kind = "uniform", lo_ms = 87.0, hi_ms = 92.0 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    /// Always the same duration.
    Fixed { ms: f64 },
    /// Exponential with the given mean (memoryless; M/M/c service).
    Exp { mean_ms: f64 },
    /// Uniform between `lo_ms` and `hi_ms`.
    Uniform { lo_ms: f64, hi_ms: f64 },
}

impl Dist {
    /// A fixed duration in milliseconds.
    pub fn fixed_ms(ms: f64) -> Dist {
        Dist::Fixed { ms }
    }

    /// Mean in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        match *self {
            Dist::Fixed { ms } => ms,
            Dist::Exp { mean_ms } => mean_ms,
            Dist::Uniform { lo_ms, hi_ms } => (lo_ms + hi_ms) / 2.0,
        }
    }

    /// Checks the parameters; `what` names the field in the message.
    pub fn validate(&self, what: &str) -> Result<(), String> {
        // At most 10^9 ms (11.6 days): keeps nanosecond sums far from u64 overflow.
        let ok = |v: f64| v.is_finite() && (0.0..=MAX_MS).contains(&v);
        let good = match *self {
            Dist::Fixed { ms } => ok(ms),
            Dist::Exp { mean_ms } => ok(mean_ms),
            Dist::Uniform { lo_ms, hi_ms } => ok(lo_ms) && ok(hi_ms) && lo_ms <= hi_ms,
        };
        if good {
            Ok(())
        } else {
            Err(format!(
                "{what}: durations must be finite, >= 0 (and lo <= hi): {self:?}"
            ))
        }
    }

    pub(crate) fn compile(&self) -> CDist {
        match *self {
            Dist::Fixed { ms } => CDist::Fixed(ms_to_ns(ms)),
            Dist::Exp { mean_ms } => CDist::Exp(mean_ms * 1e6),
            Dist::Uniform { lo_ms, hi_ms } => CDist::Uniform(ms_to_ns(lo_ms), ms_to_ns(hi_ms)),
        }
    }
}

/// Longest duration a parameter may take, in milliseconds.
pub const MAX_MS: f64 = 1e9;

/// Milliseconds (f64) to integer nanoseconds, rounded.
pub fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round().max(0.0) as u64
}

/// Compiled form, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CDist {
    Fixed(u64),
    Exp(f64),
    Uniform(u64, u64),
}

impl CDist {
    #[inline]
    pub(crate) fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        match *self {
            CDist::Fixed(v) => v,
            CDist::Exp(mean) => {
                // Inverse transform; 1-u lies in (0, 1] so ln is finite.
                let u: f64 = rng.gen();
                (-(1.0 - u).ln() * mean).round() as u64
            }
            CDist::Uniform(lo, hi) => {
                if hi > lo {
                    rng.gen_range(lo..=hi)
                } else {
                    lo
                }
            }
        }
    }
}
