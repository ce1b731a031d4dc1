//! A lower bound for `analyze`'s ingestion on one core: the least work per
//! line of an `strace -f -tt -T -y` log that per-path statistics need, done
//! naively and fast, with none of the parser's generality. Used by
//! `scripts/bench-ingest` to put the parser's speed in proportion.
//!
//! Per line: the pid column, the `-tt` time of day, the syscall name
//! (counted), the first quoted argument (a path, counted per distinct path
//! in a hash map keyed by slices of the mapped input, so no copy), the
//! error sign of the result and the `-T` duration. It ignores everything
//! the real parser must handle besides (other formats, fd decorations,
//! flags, escapes inside names, unfinished/resumed pairs, signals, bad
//! lines) and checks nothing: its counts are for the eye only.
//!
//! `lean_probe [--no-paths] < LOG` (stdin must be a regular file: it is
//! mapped). `--no-paths` leaves out the per-path map, to show its cost.

use statstorm_trace::event::FastHash;
use std::collections::HashMap;

fn main() {
    let no_paths = std::env::args().any(|a| a == "--no-paths");
    let stdin = std::io::stdin();
    // SAFETY: the mapping is only read; a log truncated while mapped would
    // fault, which is acceptable for a benchmark tool.
    let map = match unsafe { memmap2::Mmap::map(&stdin) } {
        Ok(m) => m,
        Err(e) => {
            eprintln!("lean_probe: stdin must be a regular file to map: {e}");
            std::process::exit(2);
        }
    };
    let t = std::time::Instant::now();
    let d = &map[..];
    let mut names: HashMap<&[u8], u64, FastHash> = HashMap::default();
    let mut paths: HashMap<&[u8], u64, FastHash> = HashMap::default();
    let (mut lines, mut errors, mut dur_us, mut ts_sum, mut pid_sum) =
        (0u64, 0u64, 0u64, 0i64, 0u64);
    let mut pos = 0;
    while pos < d.len() {
        let end = memchr::memchr(b'\n', &d[pos..]).map_or(d.len(), |i| pos + i);
        let l = &d[pos..end];
        pos = end + 1;
        lines += 1;
        let mut i = 0;
        let mut pid = 0u64;
        while i < l.len() && l[i].is_ascii_digit() {
            pid = pid * 10 + (l[i] - b'0') as u64;
            i += 1;
        }
        while i < l.len() && l[i] == b' ' {
            i += 1;
        }
        pid_sum = pid_sum.wrapping_add(pid);
        // HH:MM:SS.uuuuuu
        if l.len() < i + 16 || l[i + 2] != b':' {
            continue;
        }
        let ts = &l[i..i + 15];
        let dg = |c: u8| c.wrapping_sub(b'0') as i64;
        let secs = (dg(ts[0]) * 10 + dg(ts[1])) * 3600 + (dg(ts[3]) * 10 + dg(ts[4])) * 60;
        let secs = secs + dg(ts[6]) * 10 + dg(ts[7]);
        ts_sum = ts_sum.wrapping_add(ts[9..].iter().fold(secs, |v, &c| v * 10 + dg(c)));
        i += 16;
        let name_start = i;
        while i < l.len() && (l[i].is_ascii_alphanumeric() || l[i] == b'_') {
            i += 1;
        }
        if i >= l.len() || l[i] != b'(' {
            continue;
        }
        *names.entry(&l[name_start..i]).or_default() += 1;
        // The first quoted string before the argument list closes.
        if !no_paths {
            if let Some(q) = memchr::memchr3(b'"', b')', b'\n', &l[i..]).map(|k| i + k) {
                if l[q] == b'"' {
                    let mut e = q + 1;
                    while let Some(k) = memchr::memchr2(b'"', b'\\', &l[e..]) {
                        e += k;
                        if l[e] == b'\\' {
                            e += 2;
                        } else {
                            break;
                        }
                    }
                    *paths.entry(&l[q + 1..e.min(l.len())]).or_default() += 1;
                }
            }
        }
        // ` = RESULT <SECS.USECS>` at the end.
        if l.last() == Some(&b'>') {
            if let Some(lt) = memchr::memrchr(b'<', l) {
                dur_us += l[lt + 1..l.len() - 1]
                    .iter()
                    .filter(|c| c.is_ascii_digit())
                    .fold(0u64, |v, &c| v * 10 + (c - b'0') as u64);
                let mut k = lt;
                while k >= 4 {
                    if &l[k - 4..k - 1] == b") =" {
                        errors += (l[k] == b'-') as u64;
                        break;
                    }
                    k -= 1;
                }
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "lines {lines} names {} paths {} errors {errors} dur_us {dur_us} (checksums {ts_sum} {pid_sum}) {secs:.3} s {:.0} MB/s",
        names.len(),
        paths.len(),
        d.len() as f64 / 1e6 / secs.max(1e-9)
    );
}
