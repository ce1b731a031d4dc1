//! `statstorm diagnose` as Markdown: the text report's sections for a
//! ticket, a wiki page or a pull request (headings, lists, a table for
//! the changes that will not help, the snippets in code blocks ready to
//! paste). The sentences are the text report's (crate::diagnose).

use crate::diagnose::{
    assignments, assumed_lines, effect_parts, evidence, head, mechanism, not_proposed_groups, risk,
    severity, summary, unknown, verify_words, Head,
};
use statstorm_engine::diagnose::{Diagnosis, NoHelp, Plan};
use std::io::{Result, Write};

/// `s` as a code span (a span holding a backtick is fenced by two).
fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

/// `s` safe in a table cell (one line, no column break).
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn fenced(out: &mut dyn Write, lang: &str, lines: &[String]) -> Result<()> {
    writeln!(out, "```{lang}")?;
    for l in lines {
        writeln!(out, "{l}")?;
    }
    writeln!(out, "```\n")
}

fn plan(out: &mut dyn Write, p: &Plan, requests: usize) -> Result<()> {
    writeln!(
        out,
        "### Plan {} (risk: {}): {}\n",
        p.rank,
        risk(p.risk),
        code(&assignments(&p.changes))
    )?;
    writeln!(
        out,
        "- **Predicted:** {}",
        effect_parts(&p.effect, requests).join("; ")
    )?;
    for r in &p.risks {
        writeln!(out, "- **Risk:** {r}")?;
    }
    for d in &p.deploy {
        writeln!(out, "- **Deploy:** {d}")?;
    }
    for v in &p.verify {
        writeln!(out, "- **Verify:** {}", verify_words(v))?;
    }
    for (k, at) in &p.snippets.set_at {
        writeln!(
            out,
            "- **Note:** {} is set at {}: change it there",
            code(k),
            code(at)
        )?;
    }
    writeln!(out)?;
    if !p.snippets.php_ini.is_empty() {
        writeln!(out, "php.ini:\n")?;
        fenced(out, "ini", &p.snippets.php_ini)?;
    }
    if !p.snippets.fpm_pool.is_empty() {
        writeln!(out, "or in the php-fpm pool (wins over php.ini):\n")?;
        fenced(out, "ini", &p.snippets.fpm_pool)?;
    }
    if let Some(m) = &p.snippets.mount_options {
        writeln!(out, "Mount options (fstab's fourth field):\n")?;
        fenced(out, "", std::slice::from_ref(m))?;
    }
    if !p.snippets.apart_mounts.is_empty() {
        writeln!(out, "Mounts of their own (today's options):\n")?;
        let lines: Vec<String> = p
            .snippets
            .apart_mounts
            .iter()
            .map(|(d, o)| format!("{d}  {o}"))
            .collect();
        fenced(out, "", &lines)?;
    }
    Ok(())
}

/// Changes and their predicted effect, a table row each.
fn effects(out: &mut dyn Write, rows: &[NoHelp], requests: usize, mark: bool) -> Result<()> {
    writeln!(out, "| change | predicted |")?;
    writeln!(out, "|---|---|")?;
    for n in rows {
        let note = if mark && n.hypothetical {
            " (no kernel has it)"
        } else {
            ""
        };
        writeln!(
            out,
            "| {}{note} | {} |",
            cell(&code(&assignments(&n.changes))),
            cell(&effect_parts(&n.effect, requests).join("; "))
        )?;
    }
    writeln!(out)
}

/// The diagnosis as Markdown.
pub fn markdown(out: &mut dyn Write, d: &Diagnosis) -> Result<()> {
    writeln!(out, "# statstorm diagnose\n")?;
    writeln!(
        out,
        "Input: {}\n",
        d.inputs
            .iter()
            .map(|i| code(i))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    for (tag, line) in head(d) {
        match tag {
            Head::Plain => writeln!(out, "- {line}")?,
            Head::Skipped => writeln!(out, "  - skipped: {line}")?,
            Head::Now => writeln!(out, "- **now:** {line}")?,
            Head::Warning => writeln!(out, "- **warning:** {line}")?,
            Head::Measured => writeln!(out, "- **measured:** {line}")?,
            Head::MeasuredMix => writeln!(out, "  - {line}")?,
        }
    }
    writeln!(out)?;
    if !d.unknown.is_empty() {
        writeln!(out, "## Could not determine\n")?;
        for u in &d.unknown {
            writeln!(out, "- {}", unknown(*u))?;
        }
        writeln!(out)?;
    }
    if let Some(s) = &d.summary {
        writeln!(out, "## Metadata calls in the table\n")?;
        writeln!(out, "| syscall | calls | errors |")?;
        writeln!(out, "|---|---:|---:|")?;
        for r in s
            .rows
            .iter()
            .filter(|r| d.baseline.recorded.syscalls.contains_key(&r.name))
        {
            writeln!(out, "| {} | {} | {} |", cell(&r.name), r.calls, r.errors)?;
        }
        return Ok(());
    }
    writeln!(out, "## What is wrong\n")?;
    if d.findings.is_empty() {
        writeln!(out, "Nothing the models can attribute to a setting.\n")?;
    }
    for (i, f) in d.findings.iter().enumerate() {
        writeln!(
            out,
            "{}. **{}** [{}]  \n   {}  \n   *Evidence:* {}",
            i + 1,
            summary(f),
            severity(f.severity),
            mechanism(&f.kind),
            evidence(f)
        )?;
    }
    if !d.findings.is_empty() {
        writeln!(out)?;
    }
    writeln!(out, "## What to change (best first)\n")?;
    if d.plans.is_empty() {
        writeln!(out, "No candidate change is predicted to help.\n")?;
    }
    for p in &d.plans {
        plan(out, p, d.requests)?;
    }
    if !d.will_not_help.is_empty() {
        writeln!(out, "## Will not help here (predicted)\n")?;
        effects(out, &d.will_not_help, d.requests, true)?;
    }
    if !d.unavailable.is_empty() {
        writeln!(
            out,
            "## In no released Linux kernel (predicted for comparison)\n"
        )?;
        effects(out, &d.unavailable, d.requests, false)?;
    }
    if !d.not_proposed.is_empty() {
        writeln!(out, "## Not proposed\n")?;
        for (why, changes) in not_proposed_groups(d) {
            let c: Vec<String> = changes.iter().map(|c| code(c)).collect();
            writeln!(out, "- {}: {why}", c.join(", "))?;
        }
        writeln!(out)?;
    }
    if !d.assumed.is_empty() {
        writeln!(out, "## Assumed (state them for a sharper answer)\n")?;
        for a in assumed_lines(d) {
            writeln!(out, "- {a}")?;
        }
    }
    Ok(())
}
