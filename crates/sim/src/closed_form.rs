//! Closed-form queueing results the engine is validated against.
//! Rates are per second, times in seconds. `rho` = lambda / (c mu) < 1.

/// Erlang C: probability that an arrival waits in an M/M/c queue.
pub fn erlang_c(c: u32, lambda: f64, mu: f64) -> f64 {
    let a = lambda / mu; // offered load in Erlangs
    let rho = a / c as f64;
    assert!(rho < 1.0, "unstable queue: rho = {rho}");
    // Sum a^k/k! iteratively to avoid overflow.
    let mut term = 1.0;
    let mut sum = 0.0;
    for k in 0..c {
        if k > 0 {
            term *= a / k as f64;
        }
        sum += term;
    }
    let last = term * a / c as f64 / (1.0 - rho); // a^c/c! / (1 - rho)
    last / (sum + last)
}

/// Mean wait in queue (excluding service) of M/M/c.
pub fn mmc_wait(c: u32, lambda: f64, mu: f64) -> f64 {
    erlang_c(c, lambda, mu) / (c as f64 * mu - lambda)
}

/// Mean wait in queue of M/M/1: rho / (mu - lambda).
pub fn mm1_wait(lambda: f64, mu: f64) -> f64 {
    let rho = lambda / mu;
    rho / (mu - lambda)
}

/// Mean wait in queue of M/D/1 (Pollaczek-Khinchine with zero service
/// variance): rho / (2 mu (1 - rho)).
pub fn md1_wait(lambda: f64, mu: f64) -> f64 {
    let rho = lambda / mu;
    rho / (2.0 * mu * (1.0 - rho))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_reduces_to_mm1() {
        let (l, m) = (0.8, 1.0);
        assert!((mmc_wait(1, l, m) - mm1_wait(l, m)).abs() < 1e-12);
        assert!((erlang_c(1, l, m) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn erlang_c_textbook_value() {
        // c = 2, a = 1 Erlang: C = (1/2 * 1/(1-0.5)) / (1 + 1 + 1) = 1/3.
        assert!((erlang_c(2, 1.0, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    }
}
