//! `statstorm diagnose` in words: the findings (mechanism, evidence), the
//! ranked plans (snippets, predicted effect, risk, deploy step, how to
//! verify), the changes that will not help, what was assumed. Text fits
//! 80 columns; JSON is the diagnosis with a sentence per finding added;
//! Markdown (crate::diagnose_md) says the same sentences.

use statstorm_engine::diagnose::candidates::{Risk, Setting};
use statstorm_engine::diagnose::figures::{Change, Direction, Effect, Figures};
use statstorm_engine::diagnose::findings::{Finding, Kind, Removed, Severity, ShareOf};
use statstorm_engine::diagnose::{
    Assumed, Basis, Compared, CounterSource, Counters, Diagnosis, MixHint, Plan, Topic, Unknown,
};
use statstorm_engine::evidence::nfs_counters::Source;
use std::io::{Result, Write};

/// Width of the text output.
pub const WIDTH: usize = 80;

/// The name a person can search for.
pub fn name(k: &Kind) -> &'static str {
    match k {
        Kind::OpcacheRevalidationStorm { .. } => "OPcache revalidation storm",
        Kind::OpcacheOff { .. } => "OPcache off",
        Kind::OpcacheFull { .. } => "OPcache full (max_accelerated_files)",
        Kind::RealpathCacheMisses { .. } => "realpath cache misses (lstat walks)",
        Kind::OpenBasedirWalks { .. } => "open_basedir realpath walks",
        Kind::CloseToOpenRevalidation { .. } => "NFS close-to-open revalidation",
        Kind::AttributeCacheExpiry { .. } => "NFS attribute cache expiry",
        Kind::FileCheckLoop { .. } => "file-check loop over unique paths",
        Kind::WritesIntoCodeDirectories { .. } => "writes into code directories",
        Kind::RpcSlotQueueing { .. } => "RPC slot queueing",
        Kind::ServerThrottling { .. } => "NFS server IOPS throttling",
        Kind::BacklogOverflow { .. } => "php-fpm listen backlog overflow (502)",
    }
}

/// How the mechanism works, in plain words.
pub fn mechanism(k: &Kind) -> String {
    match k {
        Kind::OpcacheRevalidationStorm {
            revalidate_freq_s,
            acregmax_s,
            every_validation_getattr,
            ..
        } => {
            let mut s = if *revalidate_freq_s == 0 {
                "OPcache checks a cached script's timestamp with a stat() at every use (opcache.validate_timestamps=1, revalidate_freq=0): every script of every page is stat()ed again.".to_string()
            } else {
                format!(
                    "OPcache checks a cached script's timestamp with a stat() when its last check is more than {revalidate_freq_s} s old (opcache.validate_timestamps=1, revalidate_freq={revalidate_freq_s}): the first page after that stats every script it includes, in each worker that runs one before the first check ends."
                )
            };
            match (acregmax_s, every_validation_getattr) {
                (Some(a), Some(true)) => s.push_str(&format!(
                    " revalidate_freq is at least the mount's acregmax ({a} s): the attributes have always expired by then, so every validation is a GETATTR to the server."
                )),
                (Some(a), Some(false)) => s.push_str(&format!(
                    " On NFS a validation is a GETATTR once the file's cached attributes are older than acregmin..acregmax (here at most {a} s)."
                )),
                _ => {}
            }
            s
        }
        Kind::OpcacheOff { .. } => "OPcache is off: every request opens, reads and compiles every script it includes again.".into(),
        Kind::OpcacheFull { max_accelerated_files, .. } => format!(
            "OPcache's hash table (opcache.max_accelerated_files={max_accelerated_files}) is full: the scripts that do not fit are compiled again in every request."
        ),
        Kind::RealpathCacheMisses { realpath_cache_size, realpath_cache_ttl_s, .. } => format!(
            "PHP resolves each included path with an lstat() of every directory component when the realpath cache does not hold it; the cache (realpath_cache_size={realpath_cache_size} bytes, realpath_cache_ttl={realpath_cache_ttl_s} s) is too small or expires too soon for this application."
        ),
        Kind::OpenBasedirWalks { open_basedir, .. } => format!(
            "With open_basedir set ({open_basedir}) PHP resolves paths itself to check them, walking every directory component with lstat() around the realpath cache."
        ),
        Kind::CloseToOpenRevalidation { opens, removed } => format!(
            "On NFS each open() revalidates its file with the server (close-to-open consistency): a GETATTR{} per open, even when the attributes are cached ({opens} opens here).",
            if removed.rpc("ACCESS") > 0 { " and an ACCESS" } else { "" }
        ),
        Kind::AttributeCacheExpiry { acregmin_s, acregmax_s, .. } => format!(
            "The NFS client trusts a file's cached attributes for acregmin={acregmin_s} s growing to acregmax={acregmax_s} s; a stat() past that is a synchronous GETATTR to the server."
        ),
        Kind::FileCheckLoop { distinct_paths, top_directory, .. } => format!(
            "The application checks {distinct_paths} distinct paths (file_exists, is_readable, filesize and the like), mostly under {top_directory}: a path checked for the first time is a call no cache answers."
        ),
        Kind::WritesIntoCodeDirectories { directories } => format!(
            "Requests create, rename or remove files in directories that hold scripts ({}): on NFS each such change makes the client look the directory's entries up again.",
            directories.join(", ")
        ),
        Kind::RpcSlotQueueing { max_slot_wait_ms, .. } => format!(
            "Requests wait for a free RPC slot on the mount's transport (up to {max_slot_wait_ms:.1} ms in the simulation): bursts of metadata calls from many workers queue behind each other."
        ),
        Kind::ServerThrottling { iops, max_server_wait_ms, .. } => format!(
            "The server serves at most {} RPCs per second (its IOPS budget, --iops): a burst of metadata RPCs spends the budget and each RPC after it waits for the next token (up to {max_server_wait_ms:.1} ms in the simulation); a request makes its RPCs one after another, so the waits add up and every request behind the burst stalls.",
            num(*iops)
        ),
        Kind::BacklogOverflow { dropped, served } => format!(
            "Every php-fpm worker is busy and the listen backlog is full: {dropped} of {} requests are refused (502) in the simulation.",
            dropped + served
        ),
    }
}

fn removed_words(r: &Removed) -> String {
    let mut parts: Vec<String> = r.calls.iter().map(|(k, v)| format!("{v} {k}")).collect();
    parts.extend(r.rpcs.iter().map(|(k, v)| format!("{v} {k}")));
    format!("{} removed by {}", parts.join(", "), r.by)
}

/// The finding's evidence in one sentence.
pub fn evidence(f: &Finding) -> String {
    if let Some(r) = f.kind.removed() {
        return removed_words(r);
    }
    match &f.kind {
        Kind::FileCheckLoop {
            calls,
            distinct_paths,
            top_directory,
            top_directory_calls,
            examples,
        } => format!(
            "{calls} checks of {distinct_paths} distinct paths; {top_directory_calls} under {top_directory}; e.g. {}",
            examples.join(", ")
        ),
        Kind::WritesIntoCodeDirectories { directories } => {
            format!("written: {}", directories.join(", "))
        }
        Kind::RpcSlotQueueing {
            max_slot_wait_ms,
            p99_ms,
        } => format!("longest slot wait {max_slot_wait_ms:.1} ms; p99 TTFB {p99_ms:.1} ms (simulated)"),
        Kind::ServerThrottling {
            stall_share,
            max_server_wait_ms,
            ..
        } => format!(
            "{:.0}% of the stalled requests' time waiting for the budget; an RPC waited up to {max_server_wait_ms:.1} ms (simulated)",
            stall_share * 100.0
        ),
        Kind::BacklogOverflow { dropped, served } => {
            format!("{dropped} refused, {served} served (simulated)")
        }
        // measured by a change: handled above
        _ => String::new(),
    }
}

/// One line: the name and the share.
pub fn summary(f: &Finding) -> String {
    let pct = f.share * 100.0;
    let share = match (&f.kind, f.share_of) {
        (Kind::WritesIntoCodeDirectories { .. }, _) => String::new(),
        (_, ShareOf::P99) => format!(" ({pct:.0}% of the p99 TTFB)"),
        (_, ShareOf::Requests) => format!(" ({pct:.2}% of the requests)"),
        (_, ShareOf::StalledTime) => format!(" ({pct:.0}% of the stalled requests' time)"),
        (_, ShareOf::Rpcs) => format!(" ({pct:.0}% of the RPCs)"),
        (_, ShareOf::MetadataCalls) => format!(" ({pct:.0}% of the metadata calls)"),
    };
    format!("{}{share}", name(&f.kind))
}

/// The changes set aside, those of one reason together: (reason, each
/// change's assignments), in the diagnosis's order.
pub fn not_proposed_groups(d: &Diagnosis) -> Vec<(&str, Vec<String>)> {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for n in &d.not_proposed {
        let a = assignments(&n.settings);
        match groups.iter_mut().find(|(w, _)| *w == n.why) {
            Some((_, v)) => v.push(a),
            None => groups.push((&n.why, vec![a])),
        }
    }
    groups
}

/// What an unknown means, and how to give what is missing.
pub fn unknown(u: Unknown) -> &'static str {
    match u {
        Unknown::SummaryOnly => "anything beyond totals: an strace -c table has no calls, paths, requests or times, so no mechanism can be measured and no change predicted; record with strace -f -ttt -T -y (the calls themselves) for a diagnosis",
        Unknown::NoTimestamps => "time windows and latency: the trace has no timestamps, so OPcache's revalidate_freq, the attribute cache's expiry and the realpath cache's ttl cannot be judged (record with strace -ttt)",
        Unknown::NoDurations => "the capture's own call times: the trace has no -T durations (record with strace -T)",
        Unknown::NotPhp => "PHP settings: the trace shows neither php-fpm requests nor php-cli processes, so no php.ini change is proposed (trace the PHP workers: strace -f -p PID of the php-fpm master)",
    }
}

pub(crate) fn risk(r: Risk) -> &'static str {
    match r {
        Risk::None => "none",
        Risk::Low => "low",
        Risk::Medium => "medium",
        Risk::High => "high",
    }
}

pub(crate) fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Minor => "minor",
        Severity::Major => "major",
        Severity::Critical => "critical",
    }
}

/// `text` wrapped to the width with `first` before the first line and
/// `indent` before the others.
fn wrap(out: &mut impl Write, first: &str, indent: &str, text: &str) -> Result<()> {
    let opts = textwrap::Options::new(WIDTH)
        .initial_indent(first)
        .subsequent_indent(indent)
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    for l in textwrap::wrap(text, opts) {
        writeln!(out, "{}", l.trim_end())?;
    }
    Ok(())
}

pub(crate) fn assignments(s: &[Setting]) -> String {
    s.iter()
        .map(Setting::assignment)
        .collect::<Vec<_>>()
        .join(" ")
}

fn num(v: f64) -> String {
    if v >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn arrow(c: &Change, per: f64, unit: &str) -> String {
    let mark = match c.direction {
        Direction::Down => "",
        Direction::Same => " (same)",
        Direction::Up => " (worse)",
    };
    format!(
        "{} -> {}{unit}{mark}",
        num(c.before / per),
        num(c.after / per)
    )
}

/// The effect as "label before -> after" parts, per request for counts.
pub fn effect_parts(e: &Effect, requests: usize) -> Vec<String> {
    let n = requests.max(1) as f64;
    let mut v = vec![format!(
        "metadata calls/req {}",
        arrow(&e.metadata_calls, n, "")
    )];
    if let Some(r) = &e.rpcs {
        v.push(format!("RPCs/req {}", arrow(r, n, "")));
    }
    if let Some(p) = &e.p99_ms {
        v.push(format!("p99 TTFB {}", arrow(p, 1.0, " ms")));
    }
    if let Some(d) = &e.dropped {
        if d.before > 0.0 || d.after > 0.0 {
            v.push(format!("502s {}", arrow(d, 1.0, "")));
        }
    }
    if let Some(s) = &e.stalls {
        if s.before > 0.0 || s.after > 0.0 {
            v.push(format!("stalls {}", arrow(s, 1.0, "")));
        }
    }
    v
}

/// The "now" line: the model's figures under the recorded settings.
pub fn figures_line(f: &Figures, requests: usize) -> String {
    let n = requests.max(1) as f64;
    let mut s = format!("metadata calls/req {}", num(f.metadata_calls as f64 / n));
    if let Some(t) = f.rpc_total {
        s.push_str(&format!(", RPCs/req {}", num(t as f64 / n)));
    }
    if let Some(l) = &f.latency {
        s.push_str(&format!(
            ", TTFB p50 {} ms p99 {} ms (simulated)",
            num(l.p50_ms),
            num(l.p99_ms)
        ));
        if l.dropped > 0 {
            s.push_str(&format!(", {} refused (502)", l.dropped));
        }
        if l.stalls > 0 {
            s.push_str(&format!(
                ", {} stall{} (over {} ms: {} x the median, {} ms over it at the least)",
                l.stalls,
                if l.stalls == 1 { "" } else { "s" },
                num(statstorm_engine::diagnose::figures::stall_above(l.p50_ms)),
                num(statstorm_engine::diagnose::figures::STALL_FACTOR),
                num(statstorm_engine::diagnose::figures::STALL_EXTRA_MS)
            ));
        }
    }
    s
}

fn plan_text(out: &mut impl Write, p: &Plan, requests: usize) -> Result<()> {
    wrap(
        out,
        &format!("  Plan {} (risk: {}): ", p.rank, risk(p.risk)),
        "      ",
        &assignments(&p.changes),
    )?;
    wrap(
        out,
        "      predicted: ",
        "                 ",
        &effect_parts(&p.effect, requests).join("; "),
    )?;
    for l in &p.snippets.php_ini {
        writeln!(out, "      php.ini:   {l}")?;
    }
    for l in &p.snippets.fpm_pool {
        writeln!(out, "      (or pool)  {l}")?;
    }
    for (k, at) in &p.snippets.set_at {
        wrap(
            out,
            "      note:      ",
            "                 ",
            &format!("{k} is set at {at}: change it there"),
        )?;
    }
    if let Some(m) = &p.snippets.mount_options {
        wrap(out, "      mount:     ", "                 ", m)?;
    }
    for (dir, o) in &p.snippets.apart_mounts {
        wrap(
            out,
            "      apart:     ",
            "                 ",
            &format!("{dir}: a mount of its own, {o} (as now)"),
        )?;
    }
    for r in &p.risks {
        wrap(out, "      risk:      ", "                 ", r)?;
    }
    for d in &p.deploy {
        wrap(out, "      deploy:    ", "                 ", d)?;
    }
    for v in &p.verify {
        wrap(
            out,
            "      verify:    ",
            "                 ",
            &verify_words(v),
        )?;
    }
    Ok(())
}

/// What a line of the report's head is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    Plain,
    /// A pool file's line the reader skipped.
    Skipped,
    /// The figures as recorded.
    Now,
    Warning,
    /// The NFS client's own counters.
    Measured,
    /// The counters' RPC mix beside the model's.
    MeasuredMix,
}

/// The report's head after its inputs: the requests, the storage, the
/// pool, the figures now, the warnings and the measured counters.
pub(crate) fn head(d: &Diagnosis) -> Vec<(Head, String)> {
    let mut h = vec![(
        Head::Plain,
        format!("{} requests ({})", d.requests, d.split),
    )];
    h.push((
        Head::Plain,
        match &d.baseline.nfs {
            Some(m) => format!("storage: NFS under {} ({})", m.root, m.options),
            None => "storage: not NFS (no mount given)".into(),
        },
    ));
    if let Some(m) = &d.baseline.nfs {
        if !m.unknown.is_empty() {
            h.push((Head::Warning, unknown_options(&m.unknown)));
        }
    }
    if let Some(p) = &d.pool {
        let children = p
            .max_children
            .map_or("pm.max_children not stated".to_string(), |n| {
                format!("pm.max_children {n}")
            });
        h.push((
            Head::Plain,
            format!(
                "php-fpm pool [{}] of {}: {children}, listen.backlog {}, {} php values the model uses",
                p.name,
                p.file,
                p.listen_backlog,
                p.php.len()
            ),
        ));
        h.extend(p.skipped.iter().map(|s| (Head::Skipped, s.clone())));
    }
    h.push((
        Head::Now,
        if d.summary.is_some() {
            format!(
                "{} metadata calls in the table (totals only)",
                d.baseline.recorded.metadata_calls
            )
        } else {
            figures_line(&d.baseline.modelled, d.requests)
        },
    ));
    let bc = &d.baseline.before_check;
    if bc.requests_beyond > 0 {
        h.push((
            Head::Warning,
            format!(
                "the model's figures under the recorded settings differ from the recorded calls on {} of {} requests: check {} (give the php.ini the capture ran under)",
                bc.requests_beyond,
                bc.requests,
                bc.suspects.join(", ")
            ),
        ));
    }
    for c in &d.counters {
        let w = counters_words(c);
        h.push((Head::Measured, w.headline));
        h.push((Head::MeasuredMix, w.mix));
        if let Some(x) = w.transport {
            h.push((Head::MeasuredMix, x));
        }
        for x in [w.warning, w.slot_warning].into_iter().flatten() {
            h.push((Head::Warning, x));
        }
    }
    h
}

/// How to check a plan once applied, in one sentence.
pub(crate) fn verify_words(v: &statstorm_engine::diagnose::Verify) -> String {
    let how = match v.source {
        CounterSource::Syscalls => "strace -c -f, or statstorm analyze of a new capture",
        CounterSource::NfsOps => "nfsstat -c or /proc/self/mountstats",
    };
    format!(
        "{} per request ({how}) should fall from {} to about {}",
        v.counter,
        num(v.per_request_before),
        num(v.per_request_after)
    )
}

/// The assumptions, a sentence each: the PHP settings of one basis
/// together, then each other value with the flag that states it.
pub(crate) fn assumed_lines(d: &Diagnosis) -> Vec<String> {
    let mut out = Vec::new();
    for (basis, words) in [
        (Basis::Inferred, "PHP settings read from the trace"),
        (Basis::Default, "PHP settings at PHP 8.2's defaults"),
    ] {
        let php: Vec<&Assumed> = d
            .assumed
            .iter()
            .filter(|a| a.topic == Topic::Php && a.basis == basis)
            .collect();
        if let Some(a) = php.first() {
            let pairs: Vec<String> = php
                .iter()
                .map(|a| format!("{}={}", a.what, a.value))
                .collect();
            out.push(format!(
                "{words}: {} (state them with {})",
                pairs.join(" "),
                a.supply
            ));
        }
    }
    for a in d.assumed.iter().filter(|a| a.topic != Topic::Php) {
        out.push(format!("{} = {}: give {}", a.what, a.value, a.supply));
    }
    out
}

/// The diagnosis as text, 80 columns.
pub fn text(out: &mut impl Write, d: &Diagnosis) -> Result<()> {
    // (paths may be longer than a line: cut where they must be)
    let opts = textwrap::Options::new(WIDTH)
        .initial_indent("statstorm diagnose: ")
        .subsequent_indent("  ")
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    for l in textwrap::wrap(&d.inputs.join(", "), opts) {
        writeln!(out, "{}", l.trim_end())?;
    }
    for (tag, line) in head(d) {
        let (first, indent) = match tag {
            Head::Plain => ("", "  "),
            Head::Skipped => ("  skipped: ", "    "),
            Head::Now => ("now: ", "     "),
            Head::Warning => ("warning: ", "         "),
            Head::Measured => ("measured: ", "          "),
            Head::MeasuredMix => ("          ", "          "),
        };
        wrap(out, first, indent, &line)?;
    }
    if !d.unknown.is_empty() {
        writeln!(out, "\nCould not determine")?;
        for u in &d.unknown {
            wrap(out, "  - ", "    ", unknown(*u))?;
        }
    }
    if let Some(s) = &d.summary {
        writeln!(out, "\nMetadata calls in the table")?;
        for r in s
            .rows
            .iter()
            .filter(|r| d.baseline.recorded.syscalls.contains_key(&r.name))
        {
            writeln!(
                out,
                "  {:<12} {:>12} calls {:>10} errors",
                r.name, r.calls, r.errors
            )?;
        }
        return Ok(());
    }
    writeln!(out, "\nWhat is wrong")?;
    if d.findings.is_empty() {
        writeln!(out, "  nothing the models can attribute to a setting")?;
    }
    for (i, f) in d.findings.iter().enumerate() {
        wrap(
            out,
            &format!("{:>3}. [{}] ", i + 1, severity(f.severity)),
            "     ",
            &summary(f),
        )?;
        wrap(out, "     ", "     ", &mechanism(&f.kind))?;
        wrap(out, "     evidence: ", "     ", &evidence(f))?;
    }
    writeln!(out, "\nWhat to change (best first)")?;
    if d.plans.is_empty() {
        writeln!(out, "  no candidate change is predicted to help")?;
    }
    for p in &d.plans {
        plan_text(out, p, d.requests)?;
    }
    if !d.will_not_help.is_empty() {
        writeln!(out, "\nWill not help here (predicted)")?;
        for n in &d.will_not_help {
            let mark = if n.hypothetical {
                " (no kernel has it)"
            } else {
                ""
            };
            wrap(
                out,
                &format!("  {:<22} ", format!("{}{mark}", assignments(&n.changes))),
                "                         ",
                &effect_parts(&n.effect, d.requests).join("; "),
            )?;
        }
    }
    if !d.unavailable.is_empty() {
        writeln!(
            out,
            "\nIn no released Linux kernel (predicted for comparison)"
        )?;
        for n in &d.unavailable {
            wrap(
                out,
                &format!("  {:<22} ", assignments(&n.changes)),
                "                         ",
                &effect_parts(&n.effect, d.requests).join("; "),
            )?;
        }
    }
    if !d.not_proposed.is_empty() {
        writeln!(out, "\nNot proposed")?;
        for (why, changes) in not_proposed_groups(d) {
            wrap(out, &format!("  {}: ", changes.join(", ")), "    ", why)?;
        }
    }
    if !d.assumed.is_empty() {
        writeln!(out, "\nAssumed (state them for a sharper answer)")?;
        for a in assumed_lines(d) {
            // the PHP settings' lines name what they list after a colon
            wrap(out, "  ", "    ", &a)?;
        }
    }
    Ok(())
}

/// The recorded mount's options the model does not know, in words.
pub fn unknown_options(u: &[statstorm_engine::diagnose::UnknownOption]) -> String {
    let each: Vec<String> = u
        .iter()
        .map(|o| match o.suggestion {
            Some(s) => format!("{} (did you mean {s}?)", o.option),
            None => o.option.clone(),
        })
        .collect();
    format!(
        "mount options the model does not know, not modelled: {}; no kernel mounts NFS with an option it does not know: a typo, or not the recording machine's mounts",
        each.join(", ")
    )
}

/// The NFS client's counters in words: where they come from, the RPC
/// mix beside the model's, and a warning when the two disagree.
pub struct CountersWords {
    pub headline: String,
    pub mix: String,
    pub warning: Option<String>,
    /// The transports' use (mountstats).
    pub transport: Option<String>,
    /// RPCs waited for a transport slot.
    pub slot_warning: Option<String>,
}

/// [`CountersWords`] of `c`.
pub fn counters_words(c: &Counters) -> CountersWords {
    let m = &c.measured;
    // the files by name (their paths are in the JSON): a path is one word
    // the 80 columns cannot break
    let name = |f: &String| {
        std::path::Path::new(f)
            .file_name()
            .map_or(f.clone(), |n| n.to_string_lossy().into_owned())
    };
    let source = match &m.source {
        Source::Mountstats {
            files, mountpoint, ..
        } => match files.as_slice() {
            [a, b] => format!(
                "mountstats of {mountpoint} between {} and {}",
                name(a),
                name(b)
            ),
            _ => format!(
                "mountstats of {mountpoint} since it was mounted ({})",
                files.iter().map(name).collect::<Vec<_>>().join(", ")
            ),
        },
        Source::Nfsstat { file, version } => {
            format!(
                "nfsstat -c {}: NFS v{version}, every mount, since boot",
                name(file)
            )
        }
    };
    let mut headline = format!("{source}: {} RPCs", m.total);
    if let Some(r) = m.rtt_ms {
        headline.push_str(&format!(", mean round trip {} ms", num(r)));
    }
    if let Some(e) = m.execute_ms {
        headline.push_str(&format!(", mean time to completion {} ms", num(e)));
    }
    let pct = |f: f64| format!("{:.0}%", f * 100.0);
    let rows: Vec<String> = c
        .mix
        .iter()
        .map(|r| {
            format!(
                "{} {} vs {}",
                r.op,
                pct(r.modelled_share),
                pct(r.measured_share)
            )
        })
        .collect();
    let mix = if c.compared == Compared::NoNfsModel {
        "no NFS mount modelled to set them beside (give --mounts FILE, or --from-mount OPTS and --nfs-root DIR)".to_string()
    } else if rows.is_empty() {
        "no RPC of the procedures the model counts, on either side".to_string()
    } else if c.compared == Compared::TooFew {
        format!(
            "RPC mix, modelled vs measured: {} (too few measured RPCs to compare: fewer than {})",
            rows.join(", "),
            statstorm_engine::diagnose::MIX_AT
        )
    } else {
        format!("RPC mix, modelled vs measured: {}", rows.join(", "))
    };
    let warning = (!c.disagree.is_empty()).then(|| {
        let why = match c.hint {
            Some(MixHint::Delegations) => "the client sent fewer OPENs than modelled without NFSv4 read delegations: the server likely grants them (an open under a delegation sends no OPEN): give --delegations on",
            None => "the capture may not hold all of the mount's traffic (other processes, a longer window than the capture's), or the settings it is modelled under are wrong",
        };
        format!(
            "the modelled RPC mix differs from the measured one on {} (by more than {:.0} points of the share): {why}",
            c.disagree.join(", "),
            statstorm_engine::diagnose::MIX_GAP * 100.0
        )
    });
    let transport = m.transport.as_ref().map(|t| {
        let max = t
            .max_slots
            .map_or(String::new(), |n| format!(" (at most {n} slots in use at once since the mount)"));
        let over = if t.transports > 1 {
            format!(" over {} transports", t.transports)
        } else {
            String::new()
        };
        format!(
            "transport: {} sends{over}, {:.2} RPCs in flight and {:.2} waiting for a slot per send on average{max}",
            t.sends, t.mean_in_flight, t.mean_backlog
        )
    });
    let slot_warning = m.transport.as_ref().filter(|_| c.slot_wait).map(|t| {
        format!(
            "RPCs waited for a free slot of the transport ({:.2} waiting per send on average): the slot table limits this mount (more connections with nconnect, or a larger sunrpc.tcp_max_slot_table_entries, give it more)",
            t.mean_backlog
        )
    });
    CountersWords {
        headline,
        mix,
        warning,
        transport,
        slot_warning,
    }
}

/// A finding with its words, for JSON.
#[derive(serde::Serialize)]
struct FindingJson<'a> {
    #[serde(flatten)]
    finding: &'a Finding,
    name: &'static str,
    summary: String,
    mechanism: String,
}

impl crate::Export for Diagnosis {
    const FORMATS: &'static [crate::Format] = &[
        crate::Format::Text,
        crate::Format::Markdown,
        crate::Format::Json,
        crate::Format::Html,
    ];
    fn export(&self, format: crate::Format, out: &mut dyn Write) -> Result<()> {
        match format {
            crate::Format::Text => text(&mut &mut *out, self),
            crate::Format::Markdown => crate::diagnose_md::markdown(out, self),
            crate::Format::Html => crate::diagnose_html::html(self, out),
            crate::Format::Json => {
                // the diagnosis's own fields, each finding with its words
                let mut doc = serde_json::to_value(self)?;
                let findings: Vec<FindingJson> = self
                    .findings
                    .iter()
                    .map(|f| FindingJson {
                        finding: f,
                        name: name(&f.kind),
                        summary: summary(f),
                        mechanism: mechanism(&f.kind),
                    })
                    .collect();
                doc["findings"] = serde_json::to_value(findings)?;
                serde_json::to_writer_pretty(&mut *out, &doc)?;
                writeln!(out)
            }
        }
    }
}
