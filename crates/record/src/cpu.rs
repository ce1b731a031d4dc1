//! The cap on the recorder's own CPU (`--max-cpu`).

use std::time::{Duration, Instant};

/// The CPU time this process has used (user and system, every thread).
fn self_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Holds the recorder to a share of one CPU: over each second, once the
/// CPU used passes `cap` x one second (so that a short burst at the start
/// of a second does not pause it), the writer pauses until the share of
/// the time gone is back under the cap.
pub(crate) struct CpuCap {
    cap: f64,
    mark: Instant,
    cpu_mark: Duration,
    pub(crate) paused: Duration,
}

impl CpuCap {
    pub(crate) fn new(cap: f64) -> Self {
        CpuCap {
            cap,
            mark: Instant::now(),
            cpu_mark: self_cpu(),
            paused: Duration::ZERO,
        }
    }

    /// Pauses the caller if the cap is passed (see the type's doc).
    pub(crate) fn check(&mut self) {
        let (now, cpu) = (Instant::now(), self_cpu());
        let used = cpu.saturating_sub(self.cpu_mark).as_secs_f64();
        let gone = now.duration_since(self.mark).as_secs_f64();
        let over = used / self.cap - gone;
        if used > self.cap * gone.max(1.0) && over > 0.0 {
            let d = Duration::from_secs_f64(over.min(1.0));
            std::thread::sleep(d);
            self.paused += d;
        }
        if gone >= 1.0 {
            self.mark = Instant::now();
            self.cpu_mark = self_cpu();
        }
    }
}
