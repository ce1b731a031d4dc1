//! The argument scan alone, on the call text of every line of a log, with
//! each mask source this CPU has: nanoseconds per line (the fastest of
//! several passes, so other work on the machine shows less) and a checksum
//! of the results, which must be the same for every source.
//!
//!   cargo run --release -p statstorm-trace --example scan_bench -- LOG [PASSES]

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: scan_bench LOG [PASSES]");
        std::process::exit(2);
    };
    let passes: usize = match args.get(1).map(|p| p.parse()) {
        None => 15,
        Some(Ok(p)) if p > 0 => p,
        Some(_) => {
            eprintln!("scan_bench: PASSES must be a positive number");
            std::process::exit(2);
        }
    };
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("scan_bench: {path}: {e}");
            std::process::exit(2);
        }
    };
    // The text after the first `(` of each line (signal and exit lines
    // have none and are left out).
    let texts: Vec<&[u8]> = data
        .split(|&c| c == b'\n')
        .filter_map(|l| memchr::memchr(b'(', l).map(|i| &l[i + 1..]))
        .collect();
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    println!("{path}: {} call texts, {bytes} bytes", texts.len());
    let mut sums = Vec::new();
    for how in ["sse2", "avx2", "auto"] {
        if statstorm_trace::bench::scan_call(b") = 0", how).is_none() {
            println!("{how:>10}: not on this CPU");
            continue;
        }
        let mut best = f64::MAX;
        let mut sum = 0u64;
        for _ in 0..passes {
            let t = Instant::now();
            sum = 0;
            for &text in &texts {
                if let Some((close, n)) = statstorm_trace::bench::scan_call(text, how) {
                    sum = sum
                        .wrapping_mul(31)
                        .wrapping_add(close.map_or(0, |c| c as u64 + 1) * 8 + n as u64);
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{how:>10}: {:6.1} ns/line {:7.0} MB/s  checksum {sum:016x}",
            best * 1e9 / texts.len() as f64,
            bytes as f64 / best / 1e6
        );
        sums.push(sum);
    }
    if sums.windows(2).any(|w| w[0] != w[1]) {
        eprintln!("scan_bench: the mask sources disagree");
        std::process::exit(1);
    }
}
