//! Counts mode: draining the kernel's counts maps at the end of each
//! window into a [`crate::counts::Window`].

use crate::recorder::{counters, Error};
use crate::skel::RecordSkel;
use libbpf_rs::{MapCore, MapFlags};
use std::time::{Duration, Instant};

/// CLOCK_REALTIME now, nanoseconds.
pub(crate) fn realtime_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// The kernel's per-request histograms, summed over CPUs.
fn request_histograms(skel: &RecordSkel) -> crate::counts::RequestHistograms {
    use crate::counts::REQ_BUCKETS;
    let mut h = crate::counts::RequestHistograms::default();
    for c in 0..3 {
        for b in 0..=REQ_BUCKETS {
            let key = ((c * (REQ_BUCKETS + 1) + b) as u32).to_ne_bytes();
            let Ok(Some(per_cpu)) = skel.maps.req_hist.lookup_percpu(&key, MapFlags::ANY) else {
                continue;
            };
            let n: u64 = per_cpu
                .iter()
                .filter_map(|v| v.get(..8))
                .map(|v| u64::from_ne_bytes(v.try_into().unwrap_or_default()))
                .sum();
            if b == REQ_BUCKETS {
                h.sums[c] = n;
            } else {
                h.buckets[c][b] = n;
            }
        }
    }
    h
}

/// Counts mode's windows: which map the kernel writes, and when the
/// current window began.
pub(crate) struct Windows {
    pub(crate) cur: u32,
    pub(crate) start_ns: i128,
    pub(crate) started: Instant,
    pub(crate) written: u64,
}

impl Windows {
    /// Ends the current window: the kernel is switched to the other map,
    /// the programs already running are given time to finish, and the map
    /// of the window ended is drained (each key read and deleted at once,
    /// so an increment racing the drain stays in the map for a later
    /// window rather than being lost). `flip`: the kernel's `counts_cur`.
    pub(crate) fn next(
        &mut self,
        skel: &RecordSkel,
        flip: Option<*mut u32>,
        undecodable: &mut u64,
    ) -> Result<crate::counts::Window, Error> {
        use crate::counts::{Row, COUNT_NR};
        let old = self.cur;
        self.cur ^= 1;
        let Some(flip) = flip else {
            return Err(Error::Load("no .bss section to switch counts maps".into()));
        };
        // SAFETY: the pointer is into the skeleton's mapping of .bss,
        // which lives as long as `skel`; the kernel reads it, this side is
        // its only writer.
        unsafe { std::ptr::write_volatile(flip, self.cur) };
        // a program that read the old value finishes within microseconds
        // (it never sleeps); one preempted longer leaves its count in the
        // old map, which is drained again at the next flip
        std::thread::sleep(Duration::from_millis(2));
        let end_ns = realtime_ns();
        let map = if old == 0 {
            &skel.maps.counts0
        } else {
            &skel.maps.counts1
        };
        let mut rows = Vec::new();
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for k in keys {
            let v = map
                .lookup_and_delete(&k)
                .map_err(|e| Error::Load(format!("draining the counts map: {e}")))?;
            if let Some(v) = v {
                match Row::decode(&k, &v) {
                    Ok(r) => rows.push(r),
                    Err(_) => *undecodable += 1,
                }
            }
        }
        let ncpu = libbpf_rs::num_possible_cpus()
            .map_err(|e| Error::Load(format!("counting CPUs: {e}")))?;
        let zeros = vec![vec![0u8; crate::counts::VAL_BYTES]; ncpu];
        for &(nr, syscall) in crate::event::Syscall::ALL.iter() {
            let key = (old * COUNT_NR + nr as u32).to_ne_bytes();
            let Ok(Some(per_cpu)) = skel.maps.counts_over.lookup_percpu(&key, MapFlags::ANY) else {
                continue;
            };
            let (mut calls, mut dur) = (0u64, 0u64);
            for v in &per_cpu {
                if v.len() >= 16 {
                    calls += u64::from_ne_bytes(v[0..8].try_into().unwrap_or_default());
                    dur += u64::from_ne_bytes(v[8..16].try_into().unwrap_or_default());
                }
            }
            if calls > 0 {
                skel.maps
                    .counts_over
                    .update_percpu(&key, &zeros, MapFlags::ANY)
                    .map_err(|e| Error::Load(format!("resetting the map-full counts: {e}")))?;
                rows.push(Row {
                    pid: None,
                    syscall,
                    errno: None,
                    path: None,
                    cut: false,
                    nofollow: false,
                    calls,
                    dur_ns: dur,
                });
            }
        }
        let mut w = crate::counts::Window {
            start_ns: self.start_ns,
            end_ns,
            rows,
            requests: request_histograms(skel),
            lost_calls: counters(skel)[2] + *undecodable,
        };
        w.normalize();
        self.start_ns = end_ns;
        self.started = Instant::now();
        self.written += 1;
        Ok(w)
    }

    /// The recording's last window: the current one, and what a program
    /// still running at the previous flip added to the other map, as one.
    pub(crate) fn last(
        &mut self,
        skel: &RecordSkel,
        flip: Option<*mut u32>,
        undecodable: &mut u64,
    ) -> Result<crate::counts::Window, Error> {
        let mut w = self.next(skel, flip, undecodable)?;
        let mut late = self.next(skel, flip, undecodable)?;
        w.rows.append(&mut late.rows);
        w.end_ns = late.end_ns;
        w.requests = late.requests;
        w.lost_calls = late.lost_calls;
        w.normalize();
        // two drains, one window; none when nothing was counted
        self.written -= if w.rows.is_empty() { 2 } else { 1 };
        Ok(w)
    }
}
