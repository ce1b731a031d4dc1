//! Counts mode (`record --counts`): calls counted in the kernel per
//! process x syscall x result x path, drained from the kernel's maps once
//! per window and written as one line per count.
//!
//! A recording of hours at tens of thousands of calls a second would make
//! gigabytes of call lines; the counts of one window are bounded by the
//! distinct keys of that window (the kernel's map holds at most
//! `max_keys`), whatever the call rate. What counts lose is the order of
//! the calls: the request split, realpath walks and repeats within a
//! request cannot be seen in them (`analyze` says so), and `predict` and
//! `diagnose` need a call-by-call capture.
//!
//! The format (docs/record.md), one window:
//!
//! ```text
//! @ 1764234600.123456 1764234610.123789
//! = 4242 newfstatat 0 523 0.001234 "/srv/www/index.php"
//! = 4242 newfstatat ENOENT 12 0.000031 "/srv/www/missing.php"
//! = 4242 fstat 0 500 0.000210
//! = ? newfstatat ? 77 0.000010
//! ```
//!
//! `@ START END`: the window (epoch seconds). `= PID SYSCALL RESULT CALLS
//! SECONDS [PATH]`: SYSCALL is followed by `:AT_SYMLINK_NOFOLLOW` for an
//! lstat-like newfstatat or statx; RESULT is `0` for success or the errno's name, SECONDS
//! the calls' summed entry-to-exit time, PATH quoted as strace quotes it
//! (`"..."...` when cut at 255 bytes), absent for a call without one. A
//! `?` pid and result: calls that found the kernel's map full, counted per
//! syscall alone.

use crate::event::Syscall;
use crate::text::{errno_name, quoted};
use std::fmt::Write as _;

/// Bytes kept of a path in a key, its NUL included (`COUNT_PATH`).
pub const COUNT_PATH: usize = 256;
/// `sizeof(struct count_key)`.
pub const KEY_BYTES: usize = 16 + COUNT_PATH;
/// `sizeof(struct count_val)`.
pub const VAL_BYTES: usize = 16;
/// Syscall numbers are below this (`COUNT_NR`).
pub const COUNT_NR: u32 = 512;

/// The first line of a counts capture: what the reader recognizes it by.
pub const COUNTS_MAGIC: &str = "# statstorm record counts 1";

const FLAG_CUT: u16 = 1;
const FLAG_NOFOLLOW: u16 = 4;

/// Classes of the per-request histograms (`REQ_*` of record.h).
pub const REQ_CLASSES: [&str; 3] = ["stat", "open", "access"];
/// Buckets of each (`REQ_BUCKETS`).
pub const REQ_BUCKETS: usize = 24;

/// Per-request histograms of stat, open and access calls (a request: from
/// an accept's return to the worker's next accept), cumulative since the
/// recording began. Bucket 0 holds requests with no call of the class,
/// bucket b > 0 those with 2^(b-1) to 2^b - 1 calls, the last one the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHistograms {
    pub buckets: [[u64; REQ_BUCKETS]; 3],
    /// Calls of each class in the requests counted.
    pub sums: [u64; 3],
}

impl Default for RequestHistograms {
    fn default() -> Self {
        RequestHistograms {
            buckets: [[0; REQ_BUCKETS]; 3],
            sums: [0; 3],
        }
    }
}

impl RequestHistograms {
    /// Requests ended so far.
    pub fn requests(&self) -> u64 {
        self.buckets[0].iter().sum()
    }

    /// The most calls bucket `b` holds (its Prometheus `le`); `None` for
    /// the last (`+Inf`).
    pub fn upper_bound(b: usize) -> Option<u64> {
        (b + 1 < REQ_BUCKETS).then(|| (1u64 << b) - 1)
    }
}

/// One count of a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The process; `None` for calls that found the map full.
    pub pid: Option<u32>,
    pub syscall: Syscall,
    /// 0 for success, else the errno; `None` for calls that found the map
    /// full.
    pub errno: Option<i32>,
    /// The call's (first) path as passed; `None` without one.
    pub path: Option<Vec<u8>>,
    /// The path was longer than 255 bytes and is cut there.
    pub cut: bool,
    /// newfstatat or statx with AT_SYMLINK_NOFOLLOW (lstat-like: a step of
    /// PHP's realpath walk).
    pub nofollow: bool,
    pub calls: u64,
    /// Summed entry-to-exit time.
    pub dur_ns: u64,
}

/// Why a key or value from the kernel could not be read (a layout
/// mismatch between the BPF program and this side; none expected).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("a counts key of {0} bytes (expected {KEY_BYTES})")]
    KeySize(usize),
    #[error("a counts value of {0} bytes (expected {VAL_BYTES})")]
    ValueSize(usize),
    #[error("a count of syscall number {0}, which is not followed")]
    Syscall(u16),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

impl Row {
    /// A `struct count_key` and its `struct count_val` as the kernel's map
    /// holds them.
    pub fn decode(key: &[u8], val: &[u8]) -> Result<Row, DecodeError> {
        if key.len() != KEY_BYTES {
            return Err(DecodeError::KeySize(key.len()));
        }
        if val.len() != VAL_BYTES {
            return Err(DecodeError::ValueSize(val.len()));
        }
        let nr = u16::from_ne_bytes([key[4], key[5]]);
        let flags = u16::from_ne_bytes([key[6], key[7]]);
        let syscall = Syscall::from_nr(nr).ok_or(DecodeError::Syscall(nr))?;
        let p = &key[16..];
        let len = p.iter().position(|&b| b == 0).unwrap_or(p.len());
        Ok(Row {
            pid: Some(u32_at(key, 0)),
            syscall,
            errno: Some(u32_at(key, 8) as i32),
            path: (len > 0).then(|| p[..len].to_vec()),
            cut: flags & FLAG_CUT != 0,
            nofollow: flags & FLAG_NOFOLLOW != 0,
            calls: u64_at(val, 0),
            dur_ns: u64_at(val, 8),
        })
    }

    /// The key of this row as the kernel lays it out (tests, fuzzing).
    pub fn encode_key(&self) -> Vec<u8> {
        let mut k = vec![0u8; KEY_BYTES];
        let nr = Syscall::ALL
            .iter()
            .find(|(_, s)| *s == self.syscall)
            .map_or(0, |&(n, _)| n);
        k[0..4].copy_from_slice(&self.pid.unwrap_or(0).to_ne_bytes());
        k[4..6].copy_from_slice(&nr.to_ne_bytes());
        let flags =
            if self.cut { FLAG_CUT } else { 0 } | if self.nofollow { FLAG_NOFOLLOW } else { 0 };
        k[6..8].copy_from_slice(&flags.to_ne_bytes());
        k[8..12].copy_from_slice(&self.errno.unwrap_or(0).to_ne_bytes());
        if let Some(p) = &self.path {
            let n = p.len().min(COUNT_PATH - 1);
            k[16..16 + n].copy_from_slice(&p[..n]);
        }
        k
    }
}

/// The counts of one window, in a stable order (process, syscall, result,
/// path; the map-full counts last).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Epoch nanoseconds of the window's start and end.
    pub start_ns: i128,
    pub end_ns: i128,
    pub rows: Vec<Row>,
    /// The per-request histograms at the window's end (cumulative).
    pub requests: RequestHistograms,
    /// Calls the recording could not count so far (in-flight slot taken,
    /// undecodable), cumulative.
    pub lost_calls: u64,
}

impl Window {
    /// Calls counted in the window.
    pub fn calls(&self) -> u64 {
        self.rows.iter().map(|r| r.calls).sum()
    }

    /// Sorts the rows and merges rows of the same key (a key drained in
    /// two parts).
    pub fn normalize(&mut self) {
        let key = |r: &Row| {
            (
                r.pid.is_none(),
                r.pid,
                r.syscall.name(),
                r.nofollow,
                r.errno,
                r.path.clone(),
                r.cut,
            )
        };
        self.rows.sort_by_key(key);
        let mut out: Vec<Row> = Vec::with_capacity(self.rows.len());
        for r in self.rows.drain(..) {
            match out.last_mut() {
                Some(l) if key(l) == key(&r) => {
                    l.calls += r.calls;
                    l.dur_ns += r.dur_ns;
                }
                _ => out.push(r),
            }
        }
        self.rows = out;
    }

    /// The window as lines of the counts format (see the module's doc).
    pub fn write(&self, out: &mut String) {
        let _ = writeln!(out, "@ {} {}", epoch(self.start_ns), epoch(self.end_ns));
        for r in &self.rows {
            out.push_str("= ");
            match r.pid {
                Some(p) => {
                    let _ = write!(out, "{p}");
                }
                None => out.push('?'),
            }
            let _ = write!(out, " {}", r.syscall.name());
            if r.nofollow {
                out.push_str(":AT_SYMLINK_NOFOLLOW");
            }
            out.push(' ');
            match r.errno {
                Some(0) => out.push('0'),
                Some(e) => out.push_str(&errno_name(e)),
                None => out.push('?'),
            }
            let _ = write!(
                out,
                " {} {}.{:06}",
                r.calls,
                r.dur_ns / 1_000_000_000,
                (r.dur_ns % 1_000_000_000) / 1000
            );
            if let Some(p) = &r.path {
                out.push(' ');
                quoted(p, out);
                if r.cut {
                    out.push_str("...");
                }
            }
            out.push('\n');
        }
    }
}

/// Epoch nanoseconds as seconds with six decimals.
fn epoch(ns: i128) -> String {
    let us = ns.div_euclid(1000);
    format!(
        "{}.{:06}",
        us.div_euclid(1_000_000),
        us.rem_euclid(1_000_000)
    )
}

/// A counts capture's first lines (comment lines, `# statstorm record...`).
pub fn header(what: &str, started_epoch_s: i64, kernel: &str, window_s: f64, keys: u32) -> String {
    format!(
        "{COUNTS_MAGIC}: counts per window of process x syscall x result x path (docs/record.md)\n\
         # statstorm record: started at {started_epoch_s} (epoch seconds), kernel {kernel}, following {what}\n\
         # statstorm record: windows of {window_s} s, at most {keys} keys a window (calls beyond: counted per syscall alone)\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        pid: Option<u32>,
        s: Syscall,
        errno: Option<i32>,
        path: Option<&str>,
        calls: u64,
    ) -> Row {
        Row {
            pid,
            syscall: s,
            errno,
            path: path.map(|p| p.as_bytes().to_vec()),
            cut: false,
            nofollow: false,
            calls,
            dur_ns: calls * 1500,
        }
    }

    #[test]
    fn key_round_trip() {
        let r = row(
            Some(42),
            Syscall::Newfstatat,
            Some(2),
            Some("/srv/a b.php"),
            3,
        );
        let mut v = vec![0u8; VAL_BYTES];
        v[0..8].copy_from_slice(&3u64.to_ne_bytes());
        v[8..16].copy_from_slice(&4500u64.to_ne_bytes());
        assert_eq!(Row::decode(&r.encode_key(), &v), Ok(r));
    }

    #[test]
    fn bad_keys_are_errors() {
        assert_eq!(
            Row::decode(&[0; 5], &[0; VAL_BYTES]),
            Err(DecodeError::KeySize(5))
        );
        assert_eq!(
            Row::decode(&[0; KEY_BYTES], &[0; 3]),
            Err(DecodeError::ValueSize(3))
        );
        let mut k = vec![0u8; KEY_BYTES];
        k[4] = 7; // poll: not followed
        assert_eq!(
            Row::decode(&k, &[0; VAL_BYTES]),
            Err(DecodeError::Syscall(7))
        );
    }

    #[test]
    fn bucket_bounds() {
        assert_eq!(RequestHistograms::upper_bound(0), Some(0));
        assert_eq!(RequestHistograms::upper_bound(1), Some(1));
        assert_eq!(RequestHistograms::upper_bound(3), Some(7));
        assert_eq!(RequestHistograms::upper_bound(REQ_BUCKETS - 1), None);
    }

    #[test]
    fn window_lines() {
        let mut w = Window {
            start_ns: 1_764_234_600_123_456_000,
            end_ns: 1_764_234_610_000_001_000,
            rows: vec![
                row(None, Syscall::Newfstatat, None, None, 77),
                row(Some(9), Syscall::Newfstatat, Some(2), Some("/x\"y"), 2),
                row(Some(9), Syscall::Fstat, Some(0), None, 5),
                Row {
                    nofollow: true,
                    ..row(Some(9), Syscall::Newfstatat, Some(0), Some("/x"), 4)
                },
                row(Some(9), Syscall::Newfstatat, Some(2), Some("/x\"y"), 1),
            ],
            requests: RequestHistograms::default(),
            lost_calls: 0,
        };
        w.normalize();
        let mut s = String::new();
        w.write(&mut s);
        assert_eq!(
            s,
            "@ 1764234600.123456 1764234610.000001\n\
             = 9 fstat 0 5 0.000007\n\
             = 9 newfstatat ENOENT 3 0.000004 \"/x\\\"y\"\n\
             = 9 newfstatat:AT_SYMLINK_NOFOLLOW 0 4 0.000006 \"/x\"\n\
             = ? newfstatat ? 77 0.000115\n"
        );
        assert_eq!(w.calls(), 89);
    }
}
