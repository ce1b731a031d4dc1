//! Counts captures (`statstorm record --counts`): calls counted per
//! window and per process x syscall x result x path, one line per count
//! (docs/record.md has the format; the writer is statstorm-record's
//! `counts` module).
//!
//! ```text
//! # statstorm record counts 1: ...
//! @ 1764234600.123456 1764234610.123789
//! = 4242 newfstatat 0 523 0.001234 "/srv/www/index.php"
//! = 4242 newfstatat ENOENT 12 0.000031 "/srv/www/missing.php"
//! = ? newfstatat ? 77 0.000010
//! ```
//!
//! [`CountsReader`] turns each `=` line into a [`Counted`]: an [`Event`]
//! standing for `calls` calls (its duration their summed time, its time
//! the window's start) and the window. A line that does not parse is a
//! counted skip with its line number, never a panic (fuzzed:
//! fuzz/fuzz_targets/counts.rs).

use crate::event::{Errno, Event, Flags, Interner, Kind, Ret};
use crate::parse::{InputStats, SkipReason, COMMENT_PREFIX, FIRST_SKIPS, LOST_PREFIX};

/// The first line of a counts capture.
pub const MAGIC: &[u8] = b"# statstorm record counts 1";

/// Whether an input starting with `head` is a counts capture.
pub fn is_counts(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// One count: `calls` calls like `event`, in the window `window_us`
/// (epoch microseconds, start and end; `None` before the first `@` line).
#[derive(Clone, Debug, PartialEq)]
pub struct Counted {
    /// The calls' syscall, process (0: unknown), path and result (an
    /// unknown result, `?`, is `Ret::Unknown`); `ts_us` the window's
    /// start, `dur_us` the calls' summed time.
    pub event: Event,
    pub calls: u64,
    pub window_us: Option<(i64, i64)>,
}

/// Reads a counts capture line by line into [`Counted`]s, keeping the
/// counts of an strace input ([`InputStats`]): every line is an event (a
/// count), a comment, a window line (counted as a notice) or a skip.
pub struct CountsReader {
    pub stats: InputStats,
    window: Option<(i64, i64)>,
    path: Vec<u8>,
    input: u16,
}

/// Epoch seconds with up to six decimals as microseconds.
fn epoch_us(s: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(s).ok()?;
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 6 || sec.is_empty() || !sec.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let sec: i64 = sec.parse().ok()?;
    let mut us: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..6 {
        us *= 10;
    }
    sec.checked_mul(1_000_000)?.checked_add(us)
}

impl CountsReader {
    pub fn new(name: &str, input: u16) -> Self {
        CountsReader {
            stats: InputStats {
                name: name.to_string(),
                ..InputStats::default()
            },
            window: None,
            path: Vec::new(),
            input,
        }
    }

    /// A line the caller could not give (longer than it keeps): counted
    /// and skipped as `reason`.
    pub fn skip_line(&mut self, reason: SkipReason) {
        self.stats.lines += 1;
        let n = self.stats.lines;
        self.skip(n, reason);
    }

    fn skip(&mut self, line: u64, reason: SkipReason) {
        self.stats.skipped += 1;
        *self.stats.skipped_by_reason.entry(reason).or_insert(0) += 1;
        if self.stats.first_skips.len() < FIRST_SKIPS {
            self.stats.first_skips.push((line, reason));
        }
    }

    /// Reads one line (without its newline), the `lineno`-th (1-based):
    /// the count it holds, if any.
    pub fn line(&mut self, line: &[u8], strings: &mut Interner) -> Option<Counted> {
        self.stats.lines += 1;
        self.stats.bytes += line.len() as u64 + 1;
        let lineno = self.stats.lines;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(|c| c.is_ascii_whitespace()) {
            self.skip(lineno, SkipReason::EmptyLine);
            return None;
        }
        if line.starts_with(COMMENT_PREFIX.as_bytes()) {
            self.stats.comment_lines += 1;
            if let Some(rest) = line.strip_prefix(LOST_PREFIX.as_bytes()) {
                let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
                if let Some(n) = std::str::from_utf8(&rest[..n])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    self.stats.lost_calls = self.stats.lost_calls.saturating_add(n);
                }
            }
            return None;
        }
        if let Some(rest) = line.strip_prefix(b"@ ") {
            let mut t = rest.split(|&c| c == b' ').filter(|t| !t.is_empty());
            let w = match (
                t.next().and_then(epoch_us),
                t.next().and_then(epoch_us),
                t.next(),
            ) {
                (Some(a), Some(b), None) if a <= b => Some((a, b)),
                _ => None,
            };
            match w {
                Some(w) => {
                    self.window = Some(w);
                    self.stats.notice_lines += 1;
                }
                None => self.skip(lineno, SkipReason::BadTimestamp),
            }
            return None;
        }
        match self.count(line, lineno, strings) {
            Some(c) => {
                self.stats.events += 1;
                self.stats.syscall_lines += 1;
                Some(c)
            }
            None => {
                self.skip(lineno, SkipReason::Unrecognized);
                None
            }
        }
    }

    /// `= PID SYSCALL RESULT CALLS SECONDS [PATH]`.
    fn count(&mut self, line: &[u8], lineno: u64, strings: &mut Interner) -> Option<Counted> {
        let rest = line.strip_prefix(b"= ")?;
        let mut fields = [&b""[..]; 5];
        let mut at = 0usize;
        for f in fields.iter_mut() {
            let r = &rest[at..];
            let start = r.iter().position(|&c| c != b' ')?;
            let len = r[start..]
                .iter()
                .position(|&c| c == b' ')
                .unwrap_or(r.len() - start);
            *f = &r[start..start + len];
            at += start + len;
        }
        let [pid, name, result, calls, secs] = fields;
        let pid: u32 = match pid {
            b"?" => 0,
            p => std::str::from_utf8(p).ok()?.parse().ok()?,
        };
        // `newfstatat:AT_SYMLINK_NOFOLLOW`: an lstat-like call
        let (name, flags) = match name.iter().position(|&c| c == b':') {
            None => (name, Flags(0)),
            Some(i) if &name[i + 1..] == b"AT_SYMLINK_NOFOLLOW" => {
                (&name[..i], Flags(Flags::AT_SYMLINK_NOFOLLOW))
            }
            Some(_) => return None,
        };
        if name.is_empty() || !name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            return None;
        }
        let ret = match result {
            b"?" => Ret::Unknown,
            b"0" => Ret::Ok(0),
            e if e.len() > 1
                && e[0] == b'E'
                && e[1..]
                    .iter()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_') =>
            {
                Ret::Err(Errno(strings.intern(e)))
            }
            _ => return None,
        };
        let calls: u64 = std::str::from_utf8(calls).ok()?.parse().ok()?;
        let dur_us = epoch_us(secs)?;
        let tail = &rest[at..];
        let path = match tail.iter().position(|&c| c != b' ') {
            None => None,
            Some(i) => {
                let q = &tail[i..];
                let q = q.strip_suffix(b"...").unwrap_or(q);
                let inner = q.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
                self.path.clear();
                crate::args::unescape(inner, &mut self.path);
                Some(strings.intern(&self.path))
            }
        };
        let kind = Kind::from_name(name);
        Some(Counted {
            event: Event {
                pid,
                ts_us: self.window.map(|w| w.0),
                dur_us: Some(dur_us as u64),
                kind,
                name: strings.intern(name),
                path,
                path2: None,
                fd: None,
                fd_path: None,
                flags,
                ret,
                ret_path: None,
                mtime: None,
                ctime_us: None,
                input: self.input,
                line: lineno,
            },
            calls,
            window_us: self.window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::PathId;

    fn id(strings: &mut Interner, s: &str) -> PathId {
        strings.intern(s.as_bytes())
    }

    fn read(text: &str) -> (Vec<Counted>, InputStats, Interner) {
        let mut s = Interner::new();
        let mut r = CountsReader::new("c", 0);
        let out = text
            .lines()
            .filter_map(|l| r.line(l.as_bytes(), &mut s))
            .collect();
        (out, r.stats, s)
    }

    #[test]
    fn reads_windows_counts_and_comments() {
        let (c, st, mut s) = read(
            "# statstorm record counts 1: x\n\
             @ 1764234600.123456 1764234610.5\n\
             = 4242 newfstatat 0 523 0.001234 \"/srv/a\\\"b.php\"\n\
             = 4242 newfstatat ENOENT 12 0.000031 \"/srv/m.php\"...\n\
             = 4242 fstat 0 5 0.000002\n\
             = ? newfstatat ? 77 0.000010\n\
             = 4242 newfstatat:AT_SYMLINK_NOFOLLOW 0 2 0.000001 \"/srv\"\n\
             = 4242 newfstatat:AT_NO_AUTOMOUNT 0 2 0.000001 \"/srv\"\n\
             # statstorm record: lost 3 calls (x)\n",
        );
        assert_eq!(c.len(), 5);
        assert_eq!(
            (st.lines, st.events, st.comment_lines, st.notice_lines),
            (9, 5, 2, 1)
        );
        assert_eq!((st.skipped, st.lost_calls), (1, 3));
        assert_eq!(c[4].event.flags, Flags(Flags::AT_SYMLINK_NOFOLLOW));
        assert_eq!(c[4].event.kind, Kind::Newfstatat);
        assert_eq!(c[0].event.flags, Flags(0));
        let w = Some((1_764_234_600_123_456, 1_764_234_610_500_000));
        assert_eq!(c[0].window_us, w);
        assert_eq!(c[0].event.ts_us, Some(1_764_234_600_123_456));
        assert_eq!((c[0].calls, c[0].event.dur_us), (523, Some(1234)));
        assert_eq!(c[0].event.path, Some(id(&mut s, "/srv/a\"b.php")));
        assert_eq!(c[0].event.kind, Kind::Newfstatat);
        assert_eq!(c[1].event.ret, Ret::Err(Errno(id(&mut s, "ENOENT"))));
        assert_eq!(c[1].event.path, Some(id(&mut s, "/srv/m.php")));
        assert_eq!(c[2].event.path, None);
        assert_eq!((c[3].event.pid, c[3].event.ret), (0, Ret::Unknown));
    }

    #[test]
    fn bad_lines_are_counted_skips_with_their_line() {
        let (c, st, _) = read(
            "# statstorm record counts 1\n\
             = x newfstatat 0 1 0.1\n\
             = 1 newfstatat 0 1\n\
             = 1 new-fstatat 0 1 0.1\n\
             = 1 stat 0 1 0.1 \"unterminated\n\
             = 1 stat ok 1 0.1\n\
             @ 5 4\n\
             \n\
             = 1 stat 0 18446744073709551615 0.0000001\n\
             = 1 stat 0 2 1.5 \"/a\"\n",
        );
        assert_eq!(c.len(), 1);
        assert_eq!(st.skipped, 8);
        assert_eq!(
            st.first_skips.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![2, 3, 4, 5, 6, 7, 8, 9]
        );
        assert_eq!(c[0].event.dur_us, Some(1_500_000));
        assert_eq!(c[0].window_us, None);
    }
}
