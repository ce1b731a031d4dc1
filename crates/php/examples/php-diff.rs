//! Prints the real and the modelled stat-family/open/access calls of one
//! request of a capture side by side (a debugging aid for the model).
//! usage: cargo run -p statstorm-php --example php-diff -- CAPTURE.strace.gz REQUEST [key=value ...]

use statstorm_php::request::split_requests;
use statstorm_php::PhpConfig;
use statstorm_trace::op::OpKind;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        eprintln!("usage: php-diff CAPTURE REQUEST [key=value ...]");
        std::process::exit(2);
    }
    let trace = statstorm_trace::read_path(a[0].as_ref()).expect("read");
    let reqs = split_requests(&trace.events, &trace.strings);
    let i: usize = a[1].parse().expect("request index");
    let mut cfg = PhpConfig::default();
    cfg.apply_flags(&a[2..]).expect("config");
    let mut real = statstorm_php::lift::request_ops(&trace, &reqs);
    let mut w = statstorm_php::lift(&trace, &reqs);
    // CROSS=capture: compare with another capture's request, re-timed
    if let Ok(other) = std::env::var("CROSS") {
        let t2 = statstorm_trace::read_path(other.as_ref()).expect("read");
        let r2 = split_requests(&t2.events, &t2.strings);
        real = statstorm_php::lift::request_ops(&t2, &r2);
        let w2 = statstorm_php::lift(&t2, &r2);
        for (a, b) in w.requests.iter_mut().zip(&w2.requests) {
            a.pid = b.pid;
            a.start_us = b.start_us;
            a.end_us = b.end_us;
            a.request_time_us = b.request_time_us;
        }
    }
    let low = statstorm_php::lower(&w, &cfg);
    let keep = |k: OpKind| {
        matches!(
            k,
            OpKind::Stat
                | OpKind::Lstat
                | OpKind::Fstat
                | OpKind::Open
                | OpKind::Access
                | OpKind::Readlink
        )
    };
    let r: Vec<String> = real[i]
        .iter()
        .filter(|o| keep(o.kind))
        .map(|o| format!("{:?} {}", o.kind, o.path))
        .collect();
    let m: Vec<String> = low[i]
        .iter()
        .filter(|o| keep(o.kind))
        .map(|o| format!("{:?} {}", o.kind, o.path))
        .collect();
    for o in &w.requests[i].ops {
        eprintln!("  PHPOP {:>8} {:?}", o.t_off_us, o.kind);
    }
    let n = r.len().max(m.len());
    for j in 0..n {
        let x = r.get(j).map(String::as_str).unwrap_or("");
        let y = m.get(j).map(String::as_str).unwrap_or("");
        println!("{} {:<70} | {}", if x == y { ' ' } else { '*' }, x, y);
    }
}
