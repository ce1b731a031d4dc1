//! A log-linear histogram of nanosecond durations: exact below 1,024 ns,
//! then 1,024 sub-buckets per power of two (relative error below 0.05%).

const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;

#[derive(Clone, Debug)]
pub(crate) struct Hist {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

impl Hist {
    pub(crate) fn new() -> Hist {
        Hist {
            counts: vec![0; ((64 - SUB_BITS + 1) as usize) << SUB_BITS],
            n: 0,
            sum: 0,
            max: 0,
        }
    }

    #[inline]
    fn index(v: u64) -> usize {
        if v < SUB {
            v as usize
        } else {
            let e = 63 - v.leading_zeros();
            let shift = e - SUB_BITS;
            let m = v >> shift; // in [SUB, 2 SUB)
            (((shift + 1) as u64) << SUB_BITS | (m - SUB)) as usize
        }
    }

    /// Midpoint of bucket `i`.
    fn value(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            i
        } else {
            let shift = (i >> SUB_BITS) - 1;
            let m = (i & (SUB - 1)) + SUB;
            let lo = m << shift;
            lo + ((1u64 << shift) >> 1)
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        if v > self.max {
            self.max = v;
        }
    }

    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    pub(crate) fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// The value at quantile `q` (nearest rank), never above the maximum.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Self::value(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_tight() {
        for v in [
            0u64,
            1,
            1023,
            1024,
            1025,
            2047,
            2048,
            123_456_789,
            u64::MAX / 3,
        ] {
            let got = Hist::value(Hist::index(v));
            let err = (got as f64 - v as f64).abs() / (v.max(1) as f64);
            assert!(err < 0.001, "{v} -> {got}");
        }
    }

    #[test]
    fn quantiles_of_1_to_1000() {
        let mut h = Hist::new();
        for v in 1..=1000u64 {
            h.add(v);
        }
        assert_eq!(h.quantile(0.5), 500);
        assert_eq!(h.quantile(0.99), 990);
        assert_eq!(h.quantile(1.0), 1000);
        assert_eq!(h.mean(), 500.5);
    }
}
