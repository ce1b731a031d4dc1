//! `statstorm predict` as text: the settings changed, evidence and notes,
//! the per-request syscall table, the NFS RPC table and the latency summary.

use statstorm_engine::predict::{NfsOut, Report, Side};
use statstorm_php::lower::CHECKED;
use std::io::Result;
use std::io::Write;

/// The whole report as text.
pub fn text(out: &mut impl Write, r: &Report) -> Result<()> {
    writeln!(out, "statstorm predict: {}", r.inputs.join(", "))?;
    writeln!(out, "requests: {} ({})", r.requests.len(), r.split)?;
    if r.changes.is_empty() {
        writeln!(
            out,
            "proposed settings: same as recorded (use --php KEY=VALUE)"
        )?;
    } else {
        writeln!(out, "proposed changes:")?;
        for c in &r.changes {
            writeln!(out, "  {} = {:?} -> {:?}", c.key, c.from, c.to)?;
        }
    }
    for e in &r.evidence {
        writeln!(out, "evidence: {e}")?;
    }
    for n in &r.notes {
        writeln!(out, "note: {n}")?;
    }
    check_warning(out, &r.before_check)?;
    let short = |k: &'static str| -> &'static str {
        match k {
            "newfstatat" => "stat",
            "openat" => "open",
            "access" => "access",
            "readlink" => "rdlink",
            _ => k,
        }
    };
    let cols: Vec<String> = CHECKED.iter().map(|k| format!("{:>7}", short(k))).collect();
    writeln!(
        out,
        "\n{:>4} {:>8} {:>17} | before {} | after {}",
        "#",
        "pid",
        "start",
        cols.join(""),
        cols.join("")
    )?;
    let row = |s: &Side| {
        CHECKED
            .iter()
            .map(|k| format!("{:>7}", s.get(k)))
            .collect::<String>()
    };
    side_rows(out, r, row)?;
    if let Some(n) = &r.nfs {
        render_rpcs(out, r, n)?;
    }
    latency(out, r)?;
    Ok(())
}

/// The warning of a modelled "before" that does not give back the capture.
fn check_warning(out: &mut impl Write, c: &statstorm_engine::check::BeforeCheck) -> Result<()> {
    if c.requests_beyond == 0 {
        return Ok(());
    }
    let gaps: Vec<String> = c
        .gaps
        .iter()
        .map(|g| {
            format!(
                "#{} {} {} modelled, {} recorded",
                g.request, g.syscall, g.modelled, g.recorded
            )
        })
        .collect();
    writeln!(
        out,
        "warning: the modelled \"before\" of {} of {} requests differs from the recorded calls by more than max({}%, {}) ({}); the recorded settings are likely wrong: check {}",
        c.requests_beyond,
        c.requests,
        statstorm_engine::check::TOL_PCT,
        statstorm_engine::check::TOL_ABS,
        gaps.join("; "),
        if c.suspects.is_empty() {
            "the stated settings".to_string()
        } else {
            c.suspects.join(", ")
        }
    )?;
    if let Some(first) = c.explained.first() {
        let tried: Vec<String> = c
            .explained
            .iter()
            .map(|e| {
                let value = if e.value.is_empty() {
                    "(unset)"
                } else {
                    &e.value
                };
                format!(
                    "{}={value} gives back {} of the {} that missed, {} that matched then miss",
                    e.setting, e.fixed, e.missed, e.broken
                )
            })
            .collect();
        let why = if first.fixed == first.missed && first.broken == 0 {
            format!("the recorded {} is likely wrong", first.setting)
        } else {
            "the requests may have run under different settings (several pools, php-cli beside a pool, a .user.ini): predict their traces apart, or state the settings most of them ran under".to_string()
        };
        writeln!(
            out,
            "note: one setting changed over the recorded ones, on the first {} requests: {}; {why}",
            first.requests,
            tried.join("; ")
        )?;
    }
    Ok(())
}

/// NFS RPCs per request, before and after, next to the syscall table.
fn render_rpcs(out: &mut impl Write, r: &Report, n: &NfsOut) -> Result<()> {
    if n.mounts.len() > 1 {
        writeln!(
            out,
            "\nNFS RPCs (kernel {}, delegations {}; summed over {} mounts, one client each):",
            n.kernel,
            if n.delegations { "on" } else { "off" },
            n.mounts.len()
        )?;
        for m in &n.mounts {
            writeln!(
                out,
                "  root {}: before = {} | after = {}",
                m.root, m.recorded_mount, m.proposed_mount
            )?;
        }
    } else {
        writeln!(
            out,
            "\nNFS RPCs (root {}, kernel {}, delegations {}): before = {} | after = {}",
            n.nfs_root,
            n.kernel,
            if n.delegations { "on" } else { "off" },
            n.recorded_mount,
            n.proposed_mount
        )?;
    }
    let ops = ["GETATTR", "LOOKUP", "ACCESS", "READ", "OPEN", "CLOSE"];
    let short = |k: &'static str| -> &'static str {
        match k {
            "GETATTR" => "G",
            "LOOKUP" => "L",
            "ACCESS" => "A",
            "READ" => "R",
            "OPEN" => "O",
            "CLOSE" => "C",
            _ => k,
        }
    };
    let cols: String = ops
        .iter()
        .map(|k| format!("{:>7}", short(k)))
        .collect::<String>()
        + "    all";
    writeln!(
        out,
        "{:>4} {:>8} {:>17} | before {}{} | after {}{}",
        "#",
        "pid",
        "start",
        cols,
        header(r),
        cols,
        header(r)
    )?;
    let row = |s: &Side| -> String {
        let m = s.rpc.clone().unwrap_or_default();
        let g = |k: &str| m.of(k);
        let mut t: String = ops
            .iter()
            .map(|k| {
                let v = if *k == "OPEN" {
                    g("OPEN") + g("OPEN_NOATTR")
                } else {
                    g(k)
                };
                format!("{v:>7}")
            })
            .collect();
        t.push_str(&format!("{:>7}", m.total()));
        t.push_str(&cell(r, s));
        t
    };
    side_rows(out, r, row)
}

/// One row per request and a totals row, before and after side by side (the
/// layout every predict table shares).
fn side_rows(out: &mut impl Write, r: &Report, row: impl Fn(&Side) -> String) -> Result<()> {
    for (i, q) in r.requests.iter().enumerate() {
        let q = q?;
        writeln!(
            out,
            "{:>4} {:>8} {:>17.6} |        {} |       {}",
            i,
            q.pid,
            q.start,
            row(&q.before),
            row(&q.after)
        )?;
    }
    writeln!(
        out,
        "{:>4} {:>8} {:>17} |        {} |       {}",
        "all",
        "",
        "",
        row(&r.totals.before),
        row(&r.totals.after)
    )?;
    Ok(())
}

/// The TTFB cell of a row of the RPC table ("" when not simulated).
fn cell(r: &Report, s: &Side) -> String {
    if !r.latency.as_ref().is_some_and(|l| l.simulated) {
        return String::new();
    }
    match s.latency_ms {
        Some(ms) => format!("{ms:>10.1}"),
        None => format!("{:>10}", "-"),
    }
}

/// Header of the TTFB column ("" when not simulated).
fn header(r: &Report) -> String {
    if r.latency.as_ref().is_some_and(|l| l.simulated) {
        format!("{:>10}", "ttfb_ms")
    } else {
        String::new()
    }
}

/// The latency summary and its assumptions (text output).
fn latency(out: &mut impl Write, r: &Report) -> Result<()> {
    let Some(l) = &r.latency else {
        return Ok(());
    };
    if !l.simulated {
        writeln!(
            out,
            "\n{}",
            l.reason.as_deref().unwrap_or("latency not simulated")
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "\nlatency (simulated estimate, TTFB ms): {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "p50", "p90", "p99", "max", "dropped", "rpcs"
    )?;
    for (name, s) in [("before", &l.before), ("after", &l.after)] {
        if let Some(s) = s {
            writeln!(
                out,
                "  {:<36} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8}",
                name, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms, s.dropped, s.rpcs
            )?;
        }
    }
    if let Some(q) = &l.recorded {
        writeln!(
            out,
            "  {:<36} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            "recorded (trace wall time)", q.p50_ms, q.p90_ms, q.p99_ms, q.max_ms
        )?;
    }
    writeln!(out, "assumed:")?;
    for a in &l.assumptions {
        writeln!(out, "  - {a}")?;
    }
    Ok(())
}

impl crate::Export for Report {
    const FORMATS: &'static [crate::Format] = &[crate::Format::Text, crate::Format::Json];
    fn export(&self, format: crate::Format, out: &mut dyn Write) -> Result<()> {
        match format {
            crate::Format::Text => text(&mut &mut *out, self),
            crate::Format::Json => {
                serde_json::to_writer_pretty(&mut *out, self)?;
                writeln!(out)
            }
            f => Err(crate::unsupported("predict's report", f, Self::FORMATS)),
        }
    }
}
