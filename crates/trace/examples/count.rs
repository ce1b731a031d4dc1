//! Counts events per syscall name in strace logs (a small consumer of the
//! streaming API, used by `scripts/bench-ingest` as a floor for the parser
//! alone).
//!
//! `cargo run --release -p statstorm-trace --example count -- [--threads N] FILE...`
//! (`-` = stdin; threads 0 = all cores, 1 = the sequential reader path)

use statstorm_trace::{Event, Interner, Options, PathId, Sink};
use std::io::Write;
use std::path::PathBuf;

#[derive(Default)]
struct Count {
    by_name: Vec<u64>,
}

impl Sink for Count {
    fn event(&mut self, ev: &Event, _: &Interner) -> bool {
        let i = ev.name.0 as usize;
        if i >= self.by_name.len() {
            self.by_name.resize(i + 1, 0);
        }
        self.by_name[i] += 1;
        true
    }
}

/// CPU seconds (user + system) used so far by the calling thread, from
/// `/proc/thread-self/stat` (clock ticks of 10 ms); `None` off Linux.
fn thread_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn main() {
    let mut code = 0;
    let mut threads = 0;
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--threads") {
        threads = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
        args.drain(i..(i + 2).min(args.len()));
    }
    let mut block_size = Options::default().block_size;
    if let Some(i) = args.iter().position(|a| a == "--block") {
        block_size = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(block_size);
        args.drain(i..(i + 2).min(args.len()));
    }
    for arg in args {
        let path = PathBuf::from(&arg);
        let r = match statstorm_trace::input::open(&path) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                code = 1;
                continue;
            }
        };
        let mut sink = Count::default();
        let opts = Options {
            threads,
            block_size,
            ..Options::default()
        };
        match statstorm_trace::stream(&arg, r, &mut sink, opts) {
            Ok((st, _, strings)) => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "{arg}: lines {} events {} skipped {} {:?} detected {:?}",
                    st.lines, st.events, st.skipped, st.first_skips, st.detected
                );
                // The calling thread reads, merges and runs the sink (the
                // serial part of the parallel path) and parses the blocks
                // no worker has started when it would otherwise wait.
                if let Some(c) = thread_cpu_s() {
                    eprintln!("{arg}: calling thread cpu_s {c:.2}");
                }
                let mut v: Vec<(u64, String)> = sink
                    .by_name
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(i, &n)| (n, strings.str(PathId(i as u32)).into_owned()))
                    .collect();
                v.sort_by(|a, b| b.cmp(a));
                for (n, name) in v {
                    let _ = writeln!(out, "  {name} {n}");
                }
            }
            Err(e) => {
                eprintln!("{e}");
                code = 1;
            }
        }
    }
    std::process::exit(code);
}
