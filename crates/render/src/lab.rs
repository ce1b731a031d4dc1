//! `statstorm lab`'s result ([`Verification`]): per option set, each
//! request's RPCs as the real kernel client sent them beside the model's.
//! Text (one table per option set, `kernel/model` cells, `!` outside the
//! tolerance) and JSON (`"schema": "statstorm.lab/1"`).

use std::collections::BTreeSet;
use std::io::{Result, Write};

use serde_json::{json, Value};
use statstorm_lab::check::{RequestCheck, TOL_ABS, TOL_PCT};
use statstorm_lab::verify::{SetOutcome, Verification};

use crate::{Align, Export, Format, Table};

/// The JSON schema's name.
pub const SCHEMA: &str = "statstorm.lab/1";

fn set_name(s: &SetOutcome) -> String {
    let mut name = format!("vers={}", s.set.version);
    if !s.set.options.is_empty() {
        name.push(',');
        name.push_str(&s.set.options);
    }
    if s.set.version.to_string() != "3" {
        name.push_str(if s.set.delegations {
            " (delegations on)"
        } else {
            " (delegations off)"
        });
    }
    name
}

fn request_json(r: &RequestCheck) -> Value {
    json!({
        "pid": r.pid,
        "request": r.request,
        "agrees": r.agrees(),
        "misses": r.misses,
        "kernel": { "rpc": r.kernel, "not_compared": r.kernel_other },
        "model": { "rpc": r.model },
    })
}

/// The JSON document.
pub fn to_json(v: &Verification) -> Value {
    json!({
        "schema": SCHEMA,
        "kernel": v.kernel,
        "nfs_root": v.nfs_root,
        "tolerance": { "percent": TOL_PCT, "absolute": TOL_ABS },
        "agrees": v.agrees(),
        "tree_entries": v.tree_entries,
        "replayed_calls": v.replayed_calls,
        "left_out": v.left_out,
        "outside_root": v.outside_root,
        "writes": v.writes,
        "boots": v.boots,
        "wall_s": v.wall.as_secs_f64(),
        "runs": v.sets.iter().map(|s| json!({
            "vers": s.set.version.to_string(),
            "options": s.set.options,
            "delegations": s.set.delegations,
            "effective_options": s.effective_options,
            "agrees": s.agrees(),
            "replay": {
                "status": s.replay_status,
                "report": s.replay_report,
                "guest_s": s.replay_duration.as_secs_f64(),
            },
            "requests": s.requests.iter().map(request_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The text report.
pub fn text(v: &Verification) -> String {
    let mut out = format!(
        "statstorm lab: {} requests replayed through the real NFS client ({}), {} boot{} in {:.0} s\n\
         tree: {} entries laid out; {} calls under the root replayed ({} outside it are not)",
        v.sets.first().map_or(0, |s| s.requests.len()),
        v.kernel,
        v.boots,
        if v.boots == 1 { "" } else { "s" },
        v.wall.as_secs_f64(),
        v.tree_entries,
        v.replayed_calls,
        v.outside_root,
    );
    let left: u64 = v.left_out.values().sum();
    if left > 0 {
        let by: Vec<String> = v.left_out.iter().map(|(c, n)| format!("{c} {n}")).collect();
        out.push_str(&format!(
            "; {left} under the root left out (neither side sees them: {})",
            by.join(", ")
        ));
    }
    out.push('\n');
    for s in &v.sets {
        let agree = s.requests.iter().filter(|r| r.agrees()).count();
        out.push_str(&format!(
            "\n== {}: {agree} of {} requests agree\n   in effect: {}\n   replay: {}\n",
            set_name(s),
            s.requests.len(),
            s.effective_options,
            s.replay_report
        ));
        let ops: BTreeSet<&String> = s
            .requests
            .iter()
            .flat_map(|r| r.kernel.keys().chain(r.model.keys()))
            .collect();
        let mut cols: Vec<(&str, Align)> = vec![("pid", Align::Right), ("req", Align::Right)];
        cols.extend(ops.iter().map(|o| (o.as_str(), Align::Right)));
        cols.push(("", Align::Left));
        let mut t = Table::new(&cols);
        for r in &s.requests {
            let mut row = vec![r.pid.to_string(), r.request.to_string()];
            for o in &ops {
                let k = r.kernel.get(*o).copied().unwrap_or(0);
                let m = r.model.get(*o).copied().unwrap_or(0);
                let miss = if r.misses.contains(o) { "!" } else { "" };
                row.push(format!("{k}/{m}{miss}"));
            }
            row.push(if r.agrees() { "ok" } else { "MISS" }.into());
            t.row(row);
        }
        if !s.requests.is_empty() {
            out.push_str(&t.to_text());
        }
    }
    out.push_str(&format!(
        "\ncells: kernel/model RPCs per request; '!' outside max({TOL_PCT}%, {TOL_ABS}); \
         NULL, SEQUENCE and RENEW not compared\n{}\n",
        if v.agrees() {
            "kernel and model agree on every request"
        } else {
            "kernel and model DISAGREE (rows marked MISS)"
        }
    ));
    out
}

impl Export for Verification {
    const FORMATS: &'static [Format] = &[Format::Text, Format::Json];
    fn export(&self, format: Format, out: &mut dyn Write) -> Result<()> {
        match format {
            Format::Text => out.write_all(text(self).as_bytes()),
            Format::Json => {
                serde_json::to_writer_pretty(&mut *out, &to_json(self))?;
                out.write_all(b"\n")
            }
            f => Err(crate::unsupported("a lab run", f, Self::FORMATS)),
        }
    }
}
