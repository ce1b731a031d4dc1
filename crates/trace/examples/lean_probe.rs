//! A lower bound for `analyze`'s ingestion: the least work per line of an
//! `strace -f -tt -T -y` log that per-path statistics need, done naively
//! and fast, with none of the parser's generality. Used by
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
//! `lean_probe [--no-paths] [--hash-only] [--threads N] < LOG` (stdin must
//! be a regular file: it is mapped). `--no-paths` leaves out the per-path
//! map, to show its cost; `--hash-only` keys it by a 64-bit hash of the
//! path instead of the path (no comparison of path bytes: a floor, not a
//! correct count); `--threads N` splits the log into N parts at line ends,
//! one thread each, and merges their maps at the end (the floor of a
//! parallel design; default 1).

use statstorm_trace::event::FastHash;
use std::collections::HashMap;
use std::hash::BuildHasher;

#[derive(Default)]
struct Counts<'a> {
    names: HashMap<&'a [u8], u64, FastHash>,
    paths: HashMap<&'a [u8], u64, FastHash>,
    hashes: HashMap<u64, u64, FastHash>,
    lines: u64,
    errors: u64,
    dur_us: u64,
    ts_sum: i64,
    pid_sum: u64,
}

#[derive(Clone, Copy)]
enum PathMode {
    None,
    Bytes,
    Hash,
}

fn scan(d: &[u8], mode: PathMode) -> Counts<'_> {
    let mut c = Counts::default();
    let mut pos = 0;
    while pos < d.len() {
        let end = memchr::memchr(b'\n', &d[pos..]).map_or(d.len(), |i| pos + i);
        let l = &d[pos..end];
        pos = end + 1;
        c.lines += 1;
        let mut i = 0;
        let mut pid = 0u64;
        while i < l.len() && l[i].is_ascii_digit() {
            pid = pid * 10 + (l[i] - b'0') as u64;
            i += 1;
        }
        while i < l.len() && l[i] == b' ' {
            i += 1;
        }
        c.pid_sum = c.pid_sum.wrapping_add(pid);
        // HH:MM:SS.uuuuuu
        if l.len() < i + 16 || l[i + 2] != b':' {
            continue;
        }
        let ts = &l[i..i + 15];
        let dg = |c: u8| c.wrapping_sub(b'0') as i64;
        let secs = (dg(ts[0]) * 10 + dg(ts[1])) * 3600 + (dg(ts[3]) * 10 + dg(ts[4])) * 60;
        let secs = secs + dg(ts[6]) * 10 + dg(ts[7]);
        c.ts_sum = c
            .ts_sum
            .wrapping_add(ts[9..].iter().fold(secs, |v, &c| v * 10 + dg(c)));
        i += 16;
        let name_start = i;
        while i < l.len() && (l[i].is_ascii_alphanumeric() || l[i] == b'_') {
            i += 1;
        }
        if i >= l.len() || l[i] != b'(' {
            continue;
        }
        *c.names.entry(&l[name_start..i]).or_default() += 1;
        // The first quoted string before the argument list closes.
        if !matches!(mode, PathMode::None) {
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
                    let p = &l[q + 1..e.min(l.len())];
                    match mode {
                        PathMode::Hash => *c.hashes.entry(FastHash.hash_one(p)).or_default() += 1,
                        _ => *c.paths.entry(p).or_default() += 1,
                    }
                }
            }
        }
        // ` = RESULT <SECS.USECS>` at the end.
        if l.last() == Some(&b'>') {
            if let Some(lt) = memchr::memrchr(b'<', l) {
                c.dur_us += l[lt + 1..l.len() - 1]
                    .iter()
                    .filter(|c| c.is_ascii_digit())
                    .fold(0u64, |v, &c| v * 10 + (c - b'0') as u64);
                let mut k = lt;
                while k >= 4 {
                    if &l[k - 4..k - 1] == b") =" {
                        c.errors += (l[k] == b'-') as u64;
                        break;
                    }
                    k -= 1;
                }
            }
        }
    }
    c
}

fn merge<'a>(mut a: Counts<'a>, b: Counts<'a>) -> Counts<'a> {
    for (k, v) in b.names {
        *a.names.entry(k).or_default() += v;
    }
    for (k, v) in b.paths {
        *a.paths.entry(k).or_default() += v;
    }
    for (k, v) in b.hashes {
        *a.hashes.entry(k).or_default() += v;
    }
    a.lines += b.lines;
    a.errors += b.errors;
    a.dur_us += b.dur_us;
    a.ts_sum = a.ts_sum.wrapping_add(b.ts_sum);
    a.pid_sum = a.pid_sum.wrapping_add(b.pid_sum);
    a
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = if args.iter().any(|a| a == "--no-paths") {
        PathMode::None
    } else if args.iter().any(|a| a == "--hash-only") {
        PathMode::Hash
    } else {
        PathMode::Bytes
    };
    let threads: usize = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .map_or(1, |n| n.parse().unwrap_or(1))
        .max(1);
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
    // parts ending at line ends
    let mut cuts = vec![0usize];
    for k in 1..threads {
        let at = (d.len() * k / threads).max(*cuts.last().unwrap());
        let end = memchr::memchr(b'\n', &d[at..]).map_or(d.len(), |i| at + i + 1);
        cuts.push(end);
    }
    cuts.push(d.len());
    let c = std::thread::scope(|s| {
        let handles: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let part = &d[w[0]..w[1]];
                s.spawn(move || scan(part, mode))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("scan thread"))
            .reduce(merge)
            .unwrap_or_default()
    });
    let secs = t.elapsed().as_secs_f64();
    println!(
        "lines {} names {} paths {} errors {} dur_us {} (checksums {} {}) threads {threads} {secs:.3} s {:.0} MB/s",
        c.lines,
        c.names.len(),
        c.paths.len() + c.hashes.len(),
        c.errors,
        c.dur_us,
        c.ts_sum,
        c.pid_sum,
        d.len() as f64 / 1e6 / secs.max(1e-9)
    );
}
