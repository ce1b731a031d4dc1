//! Human renderings of an analyze [`Profile`]: the same sections as plain
//! text or as Markdown.

use super::{human_us, Align, Table};
use statstorm_engine::analyze::read::InputNote;
use statstorm_engine::analyze::Profile;
use std::collections::BTreeMap;

enum Block {
    Line(String),
    Table(Table),
}

struct Section {
    title: String,
    blocks: Vec<Block>,
}

fn by_syscall_short(m: &BTreeMap<String, u64>, n: usize) -> String {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut s: Vec<String> = v.iter().take(n).map(|(k, c)| format!("{k} {c}")).collect();
    if v.len() > n {
        s.push("...".into());
    }
    s.join(", ")
}

fn opt_us(v: Option<u64>) -> String {
    v.map(|x| human_us(x as f64)).unwrap_or_else(|| "-".into())
}

fn sections(p: &Profile, top: usize) -> Vec<Section> {
    let mut out = Vec::new();
    let t = &p.totals;
    let i = &p.input;

    // Overview.
    let mut ov = vec![Block::Line(format!(
        "{} input(s), {} lines, {} events, {} lines skipped",
        i.files.len(),
        i.lines,
        i.events,
        i.skipped.total
    ))];
    ov.push(Block::Line(format!(
        "{} metadata calls, {} errors ({} ENOENT), {} distinct paths in {} directories",
        t.metadata_calls, t.errors, t.enoent, t.distinct_paths, t.distinct_dirs
    )));
    match &p.counts {
        None => ov.push(Block::Line(format!(
            "requests: {} ({})",
            p.request_split.count, p.request_split.note
        ))),
        Some(c) => {
            ov.push(Block::Line(format!(
                "counts capture: {} windows{}; calls counted, not their order: requests, realpath walks and repeated stats cannot be seen in it (shown as 0), and per-second counts are each window's spread evenly",
                c.windows,
                c.mean_window_s
                    .map(|w| format!(" of {w:.1} s"))
                    .unwrap_or_default()
            )));
            if let Some(m) = c.metadata_per_accept {
                ov.push(Block::Line(format!(
                    "{} accept calls: {:.1} metadata calls per accept (a request's mean when every process counted is a php-fpm worker)",
                    c.accepts, m
                )));
            }
            if c.map_full_calls > 0 {
                ov.push(Block::Line(format!(
                    "{} calls were counted without process, path or result (the recording's map of keys was full): in the syscall totals only",
                    c.map_full_calls
                )));
            }
        }
    }
    if let (Some(m), Some(w)) = (t.metadata_time_us, t.traced_wall_us) {
        ov.push(Block::Line(format!(
            "time in metadata syscalls: {} of {} traced wall time ({:.1}%)",
            human_us(m as f64),
            human_us(w as f64),
            t.metadata_share_of_wall.unwrap_or(0.0) * 100.0
        )));
    }
    out.push(Section {
        title: "Summary".into(),
        blocks: ov,
    });

    if !p.findings.is_empty() {
        out.push(Section {
            title: "Findings".into(),
            blocks: p
                .findings
                .iter()
                .map(|f| Block::Line(format!("- {}", crate::findings::text(f))))
                .collect(),
        });
    }

    // Syscalls.
    let mut tb = Table::new(&[
        ("syscall", Align::Left),
        ("calls", Align::Right),
        ("errors", Align::Right),
        ("errnos", Align::Left),
        ("time", Align::Right),
        ("mean", Align::Right),
    ]);
    let mut rows: Vec<_> = t.by_syscall.iter().collect();
    rows.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(b.0)));
    for (name, r) in rows.iter().take(top.max(1)) {
        tb.row(vec![
            name.to_string(),
            r.calls.to_string(),
            r.errors.to_string(),
            r.errors_by_errno
                .iter()
                .map(|(e, n)| format!("{e} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            opt_us(r.time_us),
            r.mean_us.map(human_us).unwrap_or_else(|| "-".into()),
        ]);
    }
    let mut b = vec![Block::Table(tb)];
    if rows.len() > top {
        b.push(Block::Line(format!("({} more syscalls)", rows.len() - top)));
    }
    out.push(Section {
        title: "Syscalls".into(),
        blocks: b,
    });

    if !p.paths.is_empty() {
        let mut tb = Table::new(&[
            ("calls", Align::Right),
            ("ENOENT", Align::Right),
            ("path", Align::Left),
            ("by syscall", Align::Left),
        ]);
        for r in p.paths.iter().take(top) {
            tb.row(vec![
                r.calls.to_string(),
                r.enoent.to_string(),
                r.path.clone(),
                by_syscall_short(&r.by_syscall, 4),
            ]);
        }
        out.push(Section {
            title: format!("Top paths (of {})", t.distinct_paths),
            blocks: vec![Block::Table(tb)],
        });
        let mut tb = Table::new(&[
            ("calls", Align::Right),
            ("ENOENT", Align::Right),
            ("paths", Align::Right),
            ("directory", Align::Left),
            ("by syscall", Align::Left),
        ]);
        for r in p.dirs.iter().take(top) {
            tb.row(vec![
                r.calls.to_string(),
                r.enoent.to_string(),
                r.distinct_paths.to_string(),
                r.dir.clone(),
                by_syscall_short(&r.by_syscall, 4),
            ]);
        }
        out.push(Section {
            title: format!("Top directories (of {})", t.distinct_dirs),
            blocks: vec![Block::Table(tb)],
        });
    }

    if !p.processes.is_empty() {
        let mut procs: Vec<_> = p.processes.iter().collect();
        procs.sort_by(|a, b| {
            b.metadata_calls
                .cmp(&a.metadata_calls)
                .then(a.pid.cmp(&b.pid))
        });
        // The command name column only for a trace recorded with -Y.
        let comms = procs.iter().any(|r| r.comm.is_some());
        let mut cols = vec![("pid", Align::Right)];
        if comms {
            cols.push(("command", Align::Left));
        }
        cols.extend([
            ("events", Align::Right),
            ("metadata", Align::Right),
            ("errors", Align::Right),
            ("syscall time", Align::Right),
            ("metadata time", Align::Right),
        ]);
        let mut tb = Table::new(&cols);
        for r in procs.iter().take(top) {
            let mut row = vec![r.pid.to_string()];
            if comms {
                row.push(r.comm.clone().unwrap_or_default());
            }
            row.extend([
                r.events.to_string(),
                r.metadata_calls.to_string(),
                r.errors.to_string(),
                opt_us(r.time_us),
                opt_us(r.metadata_time_us),
            ]);
            tb.row(row);
        }
        out.push(Section {
            title: format!(
                "Processes (top {} of {} by metadata calls)",
                top.min(procs.len()),
                procs.len()
            ),
            blocks: vec![Block::Table(tb)],
        });
    }

    if !p.requests.is_empty() {
        let n = p.requests.len() as f64;
        let rs = &p.requests_summary;
        let mut b = vec![Block::Line(format!(
            "{} request{}: {:.1} metadata calls per request on average (max {}), {:.1} realpath walks and {:.1} repeated stats per request",
            p.requests.len(),
            if p.requests.len() == 1 { "" } else { "s" },
            rs.metadata_calls as f64 / n,
            rs.max_metadata_calls,
            rs.realpath_walks as f64 / n,
            rs.repeats as f64 / n
        ))];
        let reqs = &rs.top;
        let mut tb = Table::new(&[
            ("#", Align::Right),
            ("pid", Align::Right),
            ("duration", Align::Right),
            ("metadata", Align::Right),
            ("walks", Align::Right),
            ("repeats", Align::Right),
            ("ENOENT", Align::Right),
            ("by syscall", Align::Left),
        ]);
        for r in reqs.iter().take(top) {
            let dur = match (r.start_us, r.end_us) {
                (Some(s), Some(e)) => human_us((e - s).max(0) as f64),
                _ => "-".into(),
            };
            tb.row(vec![
                r.index.to_string(),
                r.pid.to_string(),
                dur,
                r.metadata_calls.to_string(),
                r.realpath_walks.to_string(),
                r.repeats.to_string(),
                r.enoent.to_string(),
                by_syscall_short(&r.by_syscall, 4),
            ]);
        }
        b.push(Block::Table(tb));
        out.push(Section {
            title: "Requests (by metadata calls)".into(),
            blocks: b,
        });
    }

    if p.realpath.walks > 0 {
        let rp = &p.realpath;
        let mut b = vec![Block::Line(format!(
            "{} walks, {} lstat calls ({:.1} per walk); {} deepest first (PHP's order, R53), {} shallowest first",
            rp.walks,
            rp.lstats,
            rp.lstats as f64 / rp.walks as f64,
            rp.deepest_first,
            rp.shallowest_first
        ))];
        let mut tb = Table::new(&[
            ("walks", Align::Right),
            ("lstats", Align::Right),
            ("resolved file", Align::Left),
        ]);
        for w in rp.by_file.iter().take(top) {
            tb.row(vec![
                w.walks.to_string(),
                w.lstats.to_string(),
                w.path.clone(),
            ]);
        }
        b.push(Block::Table(tb));
        out.push(Section {
            title: "Realpath walks".into(),
            blocks: b,
        });
    }

    if let Some(start) = p.timeseries.start_s {
        let ts = &p.timeseries;
        let mut b = vec![Block::Line(format!(
            "{} s traced from second {}: median {:.0} metadata calls/s, max {}/s",
            ts.metadata_per_s.len(),
            start,
            ts.median_per_s,
            ts.max_per_s
        ))];
        if !p.bursts.is_empty() {
            if let Some(per) = ts.burst_period_s {
                b.push(Block::Line(format!("bursts recur every ~{per:.0} s")));
            }
            let mut tb = Table::new(&[
                ("start s", Align::Right),
                ("length s", Align::Right),
                ("calls", Align::Right),
                ("peak/s", Align::Right),
            ]);
            for x in p.bursts.iter().take(top) {
                tb.row(vec![
                    (x.start_s - start).to_string(),
                    (x.end_s - x.start_s + 1).to_string(),
                    x.metadata_calls.to_string(),
                    x.peak_per_s.to_string(),
                ]);
            }
            b.push(Block::Table(tb));
        }
        out.push(Section {
            title: "Metadata calls over time".into(),
            blocks: b,
        });
    }
    out
}

/// What the reader of an input should know, as a sentence (after
/// `statstorm: warning: `).
pub fn input_note(n: &InputNote) -> String {
    match n {
        InputNote::LostCalls { file, calls } => format!(
            "{file}: the recording lost {calls} calls (its last lines say so): the counts are low by at least that"
        ),
        InputNote::TimeBackwards {
            file,
            count,
            first_line,
            back_us,
        } => format!(
            "{file}: time runs backwards at {count} line{} (first at line {first_line}, {} s before the line above it); per-second counts and spans there follow the times as printed",
            if *count == 1 { "" } else { "s" },
            secs_us(*back_us),
        ),
    }
}

/// Microseconds as seconds, with the microseconds when under a minute.
fn secs_us(us: u64) -> String {
    if us < 60_000_000 {
        format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
    } else {
        format!("{}", us / 1_000_000)
    }
}

/// Plain text for a terminal.
pub fn text(p: &Profile, top: usize) -> String {
    let mut s = String::new();
    for (i, sec) in sections(p, top).iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&sec.title);
        s.push('\n');
        for b in &sec.blocks {
            match b {
                Block::Line(l) => {
                    s.push_str("  ");
                    s.push_str(l);
                    s.push('\n');
                }
                Block::Table(t) => {
                    for l in t.to_text().lines() {
                        s.push_str("  ");
                        s.push_str(l);
                        s.push('\n');
                    }
                }
            }
        }
    }
    s
}

/// GitHub-flavoured Markdown.
pub fn markdown(p: &Profile, top: usize) -> String {
    let mut s = String::from("# statstorm analyze\n");
    for sec in sections(p, top) {
        s.push_str(&format!("\n## {}\n\n", sec.title));
        for b in &sec.blocks {
            match b {
                Block::Line(l) => {
                    s.push_str(l);
                    s.push_str("\n\n");
                }
                Block::Table(t) => {
                    s.push_str(&t.to_markdown());
                    s.push('\n');
                }
            }
        }
    }
    s
}

/// `analyze`'s profile with the number of rows its tables show.
pub struct View<'a> {
    pub profile: &'a Profile,
    pub top: usize,
}

/// A finding as JSON: its typed value and its sentence.
#[derive(serde::Serialize)]
struct FindingJson<'a> {
    #[serde(flatten)]
    finding: &'a statstorm_engine::analyze::Finding,
    text: String,
}

/// The profile as JSON: its own fields, then the findings with their text.
#[derive(serde::Serialize)]
struct ProfileJson<'a> {
    #[serde(flatten)]
    profile: &'a Profile,
    findings: Vec<FindingJson<'a>>,
}

impl super::Export for View<'_> {
    const FORMATS: &'static [super::Format] = &[
        super::Format::Text,
        super::Format::Markdown,
        super::Format::Json,
    ];
    fn export(&self, format: super::Format, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match format {
            super::Format::Text => out.write_all(text(self.profile, self.top).as_bytes()),
            super::Format::Markdown => out.write_all(markdown(self.profile, self.top).as_bytes()),
            // streamed: no copy of the whole document in memory
            super::Format::Json => {
                let doc = ProfileJson {
                    profile: self.profile,
                    findings: self
                        .profile
                        .findings
                        .iter()
                        .map(|f| FindingJson {
                            finding: f,
                            text: crate::findings::text(f),
                        })
                        .collect(),
                };
                serde_json::to_writer(&mut *out, &doc)?;
                out.write_all(b"\n")
            }
            f => Err(super::unsupported("analyze's profile", f, Self::FORMATS)),
        }
    }
}
