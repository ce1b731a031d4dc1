//! Prints what the lift of a capture says: its evidence notes, the settings
//! it inferred, each request's worker and times, and the scripts compiled
//! in more than one request (a debugging aid for the lift's inferences).
//! usage: cargo run -p statstorm-php --example php-evidence -- CAPTURE
fn main() {
    let p = std::env::args()
        .nth(1)
        .expect("usage: php-evidence CAPTURE");
    let trace = statstorm_trace::read_path(p.as_ref()).expect("read");
    let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
    let w = statstorm_php::lift(&trace, &reqs);
    for n in &w.evidence.notes {
        println!("note: {n}");
    }
    for (k, v) in &w.evidence.inferred {
        println!("inferred: {k}={v}");
    }
    for (i, r) in w.requests.iter().enumerate() {
        println!(
            "request {i} pid {} start {} end {}",
            r.pid, r.start_us, r.end_us
        );
    }
    let mut compiled: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, r) in w.requests.iter().enumerate() {
        for o in &r.ops {
            if let statstorm_php::PhpOpKind::Compile { path, .. } = &o.kind {
                compiled.entry(path).or_default().push(i);
            }
        }
    }
    for (p, v) in compiled.iter().filter(|(_, v)| v.len() > 1) {
        println!("compiled in requests {v:?}: {p}");
    }
}
