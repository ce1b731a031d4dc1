//! Round-trip summary of one capture: per request, the recorded and the
//! modelled counts of the checked syscalls (a debugging aid).
//! usage: cargo run -p statstorm-php --example php-rt -- CAPTURE [key=value ...]

use statstorm_php::lower::{count_by_syscall, CHECKED};
use statstorm_php::request::split_requests;
use statstorm_php::PhpConfig;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = a.first() else {
        eprintln!("usage: php-rt CAPTURE [key=value ...]");
        std::process::exit(2);
    };
    let trace = statstorm_trace::read_path(path.as_ref()).expect("read");
    let reqs = split_requests(&trace.events, &trace.strings);
    let mut cfg = PhpConfig::default();
    cfg.apply_flags(&a[1..]).expect("config");
    let real = statstorm_php::lift::request_ops(&trace, &reqs);
    let w = statstorm_php::lift(&trace, &reqs);
    let low = statstorm_php::lower(&w, &cfg);
    let (mut tr, mut tm) = (0u64, 0u64);
    for (i, (r, m)) in real.iter().zip(&low).enumerate() {
        let (cr, cm) = (count_by_syscall(r), count_by_syscall(m));
        let f = |c: &statstorm_trace::Tally| CHECKED.iter().map(|k| c.of(k)).collect::<Vec<_>>();
        let (a, b) = (f(&cr), f(&cm));
        tr += a.iter().sum::<u64>();
        tm += b.iter().sum::<u64>();
        println!(
            "request {i} pid {}: real {a:?} model {b:?}",
            w.requests[i].pid
        );
    }
    println!(
        "total real {tr} model {tm} ({:+.2}%)",
        (tm as f64 - tr as f64) * 100.0 / tr.max(1) as f64
    );
}
