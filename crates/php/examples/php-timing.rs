//! How long a capture's requests took against how many file calls they
//! made: per request the span from its first to its last file call (ms)
//! and the number of calls, and the quantiles of the gap between two
//! consecutive metadata calls (stat, lstat, access, readlink) of one
//! request. Measures whether a request's duration under strace follows its
//! call count (docs/php-model.md "Not done", timing across
//! configurations).
//! usage: cargo run -p statstorm-php --release --example php-timing -- CAPTURE...

use statstorm_php::request::split_requests;
use statstorm_trace::op::OpKind;

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: php-timing CAPTURE...");
        std::process::exit(2);
    }
    for path in &paths {
        let trace = match statstorm_trace::read_path(path.as_ref()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("php-timing: {e}");
                std::process::exit(1);
            }
        };
        let reqs = split_requests(&trace.events, &trace.strings);
        let ops = statstorm_php::lift::request_ops(&trace, &reqs);
        let meta = |k: OpKind| {
            matches!(
                k,
                OpKind::Stat | OpKind::Lstat | OpKind::Access | OpKind::Readlink
            )
        };
        let mut gaps: Vec<i64> = Vec::new();
        let mut per = Vec::new();
        for r in &ops {
            let span = r.last().map_or(0, |o| o.t_us) - r.first().map_or(0, |o| o.t_us);
            per.push(format!("{:.1}/{}", span as f64 / 1000.0, r.len()));
            gaps.extend(
                r.windows(2)
                    .filter(|p| meta(p[0].kind) && meta(p[1].kind))
                    .map(|p| p[1].t_us - p[0].t_us),
            );
        }
        gaps.sort_unstable();
        let q = |f: f64| {
            gaps.get(((gaps.len().max(1) - 1) as f64 * f) as usize)
                .copied()
                .unwrap_or(0)
        };
        println!(
            "{path}\n  metadata-call gaps (us): {} pairs, p10 {} p25 {} median {} p75 {}\n  per request ms/calls: {}",
            gaps.len(),
            q(0.1),
            q(0.25),
            q(0.5),
            q(0.75),
            per.join(" ")
        );
    }
}
