//! Requests made a chunk ahead: a pass over the requests of a capture
//! whose per-request work (reading a request back from a spill, decoding
//! its calls, lifting it) can run on the thread pool, and whose fold
//! across requests (a cache that carries from request to request, a
//! store appended in order) must see them one at a time, in order.
//!
//! [`pipelined`] makes the next chunks on a thread of its own while the
//! calling thread folds the current one, so a pass costs about the larger
//! of its two halves rather than their sum. The fold runs on the calling
//! thread and need not be `Send`. What is held is at most three chunks of
//! items, never the capture.
//!
//! The calling thread waits on the maker. When it is one of rayon's
//! workers (diagnose predicts its candidates on the pool), the maker must
//! not use the pool: a maker waiting for a pool whose workers all wait on
//! their makers would never finish. [`each_ahead`] makes its items on the
//! pool only when [`may_use_pool`] says so, and a caller giving its own
//! maker asks the same.

use std::ops::Range;

/// Items in the first chunk: small enough that three chunks of the
/// largest requests (a few thousand calls each) stay a few megabytes.
pub const CHUNK: usize = 64;

/// Most items in a chunk. A chunk made in less than 1 ms is followed
/// by one twice as large (up to this), one slower than 4 ms by one
/// half as large (down to [`CHUNK`]): many small requests are handed over
/// a few thousand at a time instead of paying a hand-off (and a wake-up
/// of the pool) every 64, and what three chunks hold stays what the maker
/// makes in a few milliseconds.
pub const MAX_CHUNK: usize = 4096;
const FAST: std::time::Duration = std::time::Duration::from_millis(1);
const SLOW: std::time::Duration = std::time::Duration::from_millis(4);

/// Gives `take` the items `0..n` in order, made by `make` a chunk at a
/// time (one item per index of the range it is given, in order; the
/// chunks in order; [`CHUNK`] to [`MAX_CHUNK`] items each, by how long the
/// one before took). `make` runs on a thread of its own, up to two chunks
/// ahead of `take`. Stops at `take`'s first error (`make` then stops after
/// its current chunk).
pub fn pipelined<T: Send, E>(
    n: usize,
    make: &mut (dyn FnMut(Range<usize>) -> Vec<T> + Send),
    take: &mut dyn FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<T>>(1);
        s.spawn(move || {
            let mut at = 0;
            let mut size = CHUNK;
            while at < n {
                let end = (at + size).min(n);
                let t0 = std::time::Instant::now();
                let chunk = make(at..end);
                let took = t0.elapsed();
                if took < FAST {
                    size = (size * 2).min(MAX_CHUNK);
                } else if took > SLOW {
                    size = (size / 2).max(CHUNK);
                }
                if tx.send(chunk).is_err() {
                    // the fold stopped
                    return;
                }
                at = end;
            }
        });
        let mut at = 0;
        for chunk in rx {
            for t in chunk {
                take(at, t)?;
                at += 1;
            }
        }
        Ok(())
    })
}

/// Whether a maker started from this thread may use rayon's pool: this
/// thread is none of its workers.
pub fn may_use_pool() -> bool {
    rayon::current_thread_index().is_none()
}

/// [`pipelined`] where each item is made on its own by `each` (the
/// items of a chunk side by side on the pool when [`may_use_pool`]).
pub fn each_ahead<T: Send, E>(
    n: usize,
    each: &(dyn Fn(usize) -> T + Sync),
    take: &mut dyn FnMut(usize, T) -> Result<(), E>,
) -> Result<(), E> {
    use rayon::prelude::*;
    if may_use_pool() {
        pipelined(
            n,
            &mut |r: Range<usize>| r.into_par_iter().map(each).collect(),
            take,
        )
    } else {
        pipelined(n, &mut |r: Range<usize>| r.map(each).collect(), take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_taken_once_in_order() {
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] {
            let mut got = Vec::new();
            let r: Result<(), ()> = each_ahead(n, &|i| i * 2, &mut |i, v| {
                assert_eq!(v, i * 2);
                got.push(i);
                Ok(())
            });
            assert!(r.is_ok());
            assert_eq!(got, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn the_maker_sees_the_chunks_in_order() {
        let n = 5 * CHUNK + 3;
        let mut ranges = Vec::new();
        let mut taken = 0;
        let r: Result<(), ()> = pipelined(
            n,
            &mut |r: Range<usize>| {
                ranges.push(r.clone());
                r.collect()
            },
            &mut |_, _| {
                taken += 1;
                Ok(())
            },
        );
        assert!(r.is_ok());
        assert_eq!(taken, n);
        // contiguous; a fast maker's chunks double
        assert_eq!(ranges.first().map(|r| r.start), Some(0));
        assert_eq!(ranges.last().map(|r| r.end), Some(n));
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        let lens: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
        assert_eq!(lens, vec![CHUNK, 2 * CHUNK, 2 * CHUNK + 3]);
    }

    #[test]
    fn chunks_grow_to_the_most_and_shrink_when_slow() {
        let n = 6 * MAX_CHUNK;
        let mut lens = Vec::new();
        let r: Result<(), ()> = pipelined(
            n,
            &mut |r: Range<usize>| {
                lens.push(r.len());
                // slow once past half of the items
                if r.start >= n / 2 {
                    std::thread::sleep(SLOW + std::time::Duration::from_millis(2));
                }
                r.map(|_| ()).collect()
            },
            &mut |_, _| Ok(()),
        );
        assert!(r.is_ok());
        assert_eq!(lens.iter().sum::<usize>(), n);
        assert!(lens.iter().all(|&l| l <= MAX_CHUNK));
        assert!(lens.contains(&MAX_CHUNK), "{lens:?}");
        // slow chunks halve down to the first size, and stay there
        assert_eq!(lens.last(), Some(&CHUNK), "{lens:?}");
    }

    #[test]
    fn the_first_error_stops_the_pass_and_the_maker() {
        let mut taken = Vec::new();
        let mut made = 0;
        let r = pipelined(
            100 * CHUNK,
            &mut |r: Range<usize>| {
                made += 1;
                r.collect()
            },
            &mut |i, _| {
                if i == CHUNK + 5 {
                    return Err(i);
                }
                taken.push(i);
                Ok(())
            },
        );
        assert_eq!(r, Err(CHUNK + 5));
        assert_eq!(taken.len(), CHUNK + 5);
        // the maker is at most a few chunks ahead when the fold stops
        assert!(made <= 5, "made {made} chunks");
    }

    #[test]
    fn folds_on_every_worker_of_the_pool_finish() {
        // each worker folds a pass of its own and waits on its maker
        use rayon::prelude::*;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let sums: Vec<usize> = pool.install(|| {
            (0..8)
                .into_par_iter()
                .map(|k| {
                    let mut sum = 0;
                    let r: Result<(), ()> = each_ahead(10 * CHUNK, &|i| i + k, &mut |_, v| {
                        sum += v;
                        Ok(())
                    });
                    assert!(r.is_ok());
                    sum
                })
                .collect()
        });
        let n = 10 * CHUNK;
        for (k, s) in sums.into_iter().enumerate() {
            assert_eq!(s, n * (n - 1) / 2 + n * k);
        }
    }

    #[test]
    fn a_fold_that_is_not_send_is_fed() {
        let seen = std::rc::Rc::new(std::cell::Cell::new(0));
        let r: Result<(), ()> = each_ahead(200, &|i| i, &mut |_, _| {
            seen.set(seen.get() + 1);
            Ok(())
        });
        assert!(r.is_ok());
        assert_eq!(seen.get(), 200);
    }
}
