//! `--call-latency SYSCALL=DURATION`: the proposed storage's time per call
//! of one kind, as strace names it.

use statstorm_trace::op::OpKind;
use std::collections::BTreeMap;

/// `SYSCALL=DURATION` of `predict --call-latency`: the kinds of call the
/// syscall stands for (as strace names them for PHP 8.2 with glibc 2.36:
/// `newfstatat` is stat, lstat and fstat; `stat` is accepted for it) and
/// the duration in µs (`5ms`, `800us`, `0.02s`; a bare number is µs).
pub fn parse_call_latency(s: &str) -> Result<(Vec<OpKind>, u64), String> {
    let (name, dur) = s.split_once('=').ok_or_else(|| {
        format!("--call-latency {s:?}: expected SYSCALL=DURATION (e.g. newfstatat=5ms)")
    })?;
    let name = match name.trim() {
        "stat" | "lstat" | "fstat" => "newfstatat",
        "open" => "openat",
        n => n,
    };
    let kinds: Vec<OpKind> = OpKind::ALL
        .into_iter()
        .filter(|k| k.syscall_name(statstorm_trace::Flags::default()) == name)
        .collect();
    if kinds.is_empty() {
        let mut known: Vec<&str> = OpKind::ALL
            .iter()
            .map(|k| k.syscall_name(statstorm_trace::Flags::default()))
            .collect();
        known.dedup();
        return Err(format!(
            "--call-latency {s:?}: {name:?} is not a call the PHP model makes (one of: {})",
            known.join(", ")
        ));
    }
    let dur = dur.trim();
    let (num, scale) = if let Some(n) = dur.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = dur.strip_suffix("µs") {
        (n, 1.0)
    } else if let Some(n) = dur.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = dur.strip_suffix('s') {
        (n, 1e6)
    } else {
        (dur, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("--call-latency {s:?}: {dur:?} is not a duration (e.g. 5ms, 800us, 0.02s)")
    })?;
    if !(v.is_finite() && v >= 0.0) || v * scale > 3.6e9 {
        return Err(format!(
            "--call-latency {s:?}: the duration must be between 0 and 1 hour"
        ));
    }
    Ok((kinds, (v * scale).round() as u64))
}

/// The `--call-latency` flags as the lower's table (later flags win).
pub fn call_latencies_of(flags: &[String]) -> Result<BTreeMap<OpKind, u64>, String> {
    let mut out = BTreeMap::new();
    for f in flags {
        let (kinds, us) = parse_call_latency(f)?;
        for k in kinds {
            out.insert(k, us);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_latency_flags() {
        let (k, us) = parse_call_latency("newfstatat=5ms").unwrap();
        assert_eq!(k, vec![OpKind::Stat, OpKind::Lstat, OpKind::Fstat]);
        assert_eq!(us, 5000);
        assert_eq!(parse_call_latency("stat=0.02s").unwrap().1, 20_000);
        assert_eq!(
            parse_call_latency("openat=800us").unwrap(),
            (vec![OpKind::Open], 800)
        );
        assert_eq!(
            parse_call_latency("access=45").unwrap(),
            (vec![OpKind::Access], 45)
        );
        for bad in [
            "newfstatat",
            "futex=1ms",
            "openat=fast",
            "openat=-1ms",
            "openat=2h",
        ] {
            let e = parse_call_latency(bad).unwrap_err();
            assert!(e.contains("--call-latency"), "{bad}: {e}");
        }
        let m = call_latencies_of(&["stat=1ms".into(), "newfstatat=2ms".into()]).unwrap();
        assert_eq!(m[&OpKind::Lstat], 2000);
    }
}
