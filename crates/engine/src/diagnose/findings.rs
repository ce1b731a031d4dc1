//! Findings: which mechanism makes the capture's metadata calls, each
//! measured by the model. A mechanism's share is what the change that
//! switches it off removes (the stat calls and GETATTRs
//! `validate_timestamps=0` removes are the OPcache revalidation storm),
//! so a finding never claims more than the plan that fixes it delivers.
//! Findings the changes do not measure (a file-check loop, writes into
//! code directories, queueing and refused requests) come from the lifted
//! operations and the baseline's simulated figures.

use super::candidates::{Candidate, Mechanism};
use super::figures::Predicted;
use serde::Serialize;
use statstorm_nfs::mount::MountOptions;
use statstorm_php::workload::PhpOpKind;
use statstorm_php::{PhpConfig, Workload};
use statstorm_trace::op::Name;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How much a finding matters, lowest first.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Under 5% of the metadata calls or RPCs.
    Info,
    /// 5% or more.
    Minor,
    /// 20% or more, or queueing that lengthens the slowest requests.
    Major,
    /// Half or more, or refused requests (502).
    Critical,
}

impl Severity {
    fn of_share(share: f64) -> Severity {
        if share >= 0.5 {
            Severity::Critical
        } else if share >= 0.2 {
            Severity::Major
        } else if share >= 0.05 {
            Severity::Minor
        } else {
            Severity::Info
        }
    }
}

/// What a finding's share is a share of.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ShareOf {
    /// The capture's metadata calls (storage that is not NFS).
    MetadataCalls,
    /// The RPCs to the NFS server: on NFS what loads the server and
    /// the transport.
    Rpcs,
    /// The simulated p99 TTFB.
    P99,
    /// The requests.
    Requests,
    /// The simulated stalls' time (requests past the simulator's stall
    /// line).
    StalledTime,
}

/// One finding: its kind and evidence, its severity, and its share (of
/// the RPCs on NFS, of the metadata calls otherwise).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    pub share: f64,
    pub share_of: ShareOf,
    #[serde(flatten)]
    pub kind: Kind,
}

impl Finding {
    /// The kind's stable identifier.
    pub fn id(&self) -> &'static str {
        self.kind.id()
    }
}

/// What the removal of a mechanism takes away, as the model predicts it.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Removed {
    /// Metadata calls removed, by syscall (those that drop).
    pub calls: BTreeMap<String, u64>,
    /// RPCs removed, by op (those that drop; with NFS).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rpcs: BTreeMap<String, u64>,
    /// The change that removes them (`key=value`, several joined by ",").
    pub by: String,
}

impl Removed {
    fn of(p: &Predicted, c: &Candidate) -> Removed {
        let drop = |b: u64, a: u64| b.saturating_sub(a);
        let calls = p
            .before
            .syscalls
            .iter()
            .map(|(k, &b)| (k.clone(), drop(b, p.after.calls(k))))
            .filter(|(_, v)| *v > 0)
            .collect();
        let rpcs = p
            .before
            .rpcs
            .iter()
            .flatten()
            .map(|(k, &b)| (k.clone(), drop(b, p.after.rpc(k))))
            .filter(|(_, v)| *v > 0)
            .collect();
        Removed {
            calls,
            rpcs,
            by: c
                .settings
                .iter()
                .map(|s| s.assignment())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
    fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
    fn total_rpcs(&self) -> u64 {
        self.rpcs.values().sum()
    }
    /// RPCs of `op` removed.
    pub fn rpc(&self, op: &str) -> u64 {
        self.rpcs.get(op).copied().unwrap_or(0)
    }
}

/// The kinds of finding, each with its evidence. In JSON:
/// `{"kind", "severity", "share", "evidence": {...}}`.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "kind", content = "evidence", rename_all = "snake_case")]
pub enum Kind {
    /// OPcache validates cached scripts' timestamps (R64): a stat per
    /// script every revalidate_freq seconds per worker; on NFS a GETATTR
    /// once the attribute cache has expired.
    OpcacheRevalidationStorm {
        removed: Removed,
        revalidate_freq_s: u64,
        /// The mount's acregmax (with NFS).
        #[serde(skip_serializing_if = "Option::is_none")]
        acregmax_s: Option<u32>,
        /// revalidate_freq >= acregmax: every validation finds the
        /// attributes expired and sends a GETATTR.
        #[serde(skip_serializing_if = "Option::is_none")]
        every_validation_getattr: Option<bool>,
    },
    /// OPcache off: every request compiles every script again.
    OpcacheOff { removed: Removed },
    /// OPcache's hash table full: scripts past it compile in every
    /// request.
    OpcacheFull {
        removed: Removed,
        max_accelerated_files: u64,
    },
    /// Realpath walks (lstat of every path component, R53) that a larger
    /// or longer-lived realpath cache keeps (R54).
    RealpathCacheMisses {
        removed: Removed,
        realpath_cache_size: u64,
        realpath_cache_ttl_s: u64,
    },
    /// open_basedir resolves paths around the realpath cache (R58).
    OpenBasedirWalks {
        removed: Removed,
        open_basedir: String,
    },
    /// NFS close-to-open: every open sends a GETATTR (and an ACCESS).
    CloseToOpenRevalidation { removed: Removed, opens: u64 },
    /// NFS attribute cache expiry: a stat past acregmin/acregmax is a
    /// synchronous GETATTR.
    AttributeCacheExpiry {
        removed: Removed,
        acregmin_s: u32,
        acregmax_s: u32,
    },
    /// file_exists/is_readable/filesize... over many distinct paths: each
    /// new path is a call no cache answers.
    FileCheckLoop {
        calls: u64,
        distinct_paths: u64,
        top_directory: String,
        top_directory_calls: u64,
        examples: Vec<String>,
    },
    /// The requests write into directories that hold scripts: on NFS a
    /// directory change invalidates the cached lookups under it.
    WritesIntoCodeDirectories { directories: Vec<String> },
    /// Requests wait for an RPC slot (simulated).
    RpcSlotQueueing { max_slot_wait_ms: f64, p99_ms: f64 },
    /// RPCs wait at the server for its IOPS budget (simulated with
    /// `--iops`): a burst of metadata RPCs spends the budget and every
    /// RPC after it waits for the next token.
    ServerThrottling {
        /// Of the stalled requests' time, the share waiting for the
        /// budget (the simulator's stalls: requests past its stall line).
        stall_share: f64,
        /// The longest wait of one RPC at the server.
        max_server_wait_ms: f64,
        /// The budget, RPCs per second (`--iops`).
        iops: f64,
    },
    /// Requests refused: every worker busy and the listen backlog full
    /// (simulated 502s).
    BacklogOverflow { dropped: u64, served: u64 },
}

impl Kind {
    /// Stable identifier.
    pub fn id(&self) -> &'static str {
        match self {
            Kind::OpcacheRevalidationStorm { .. } => "opcache_revalidation_storm",
            Kind::OpcacheOff { .. } => "opcache_off",
            Kind::OpcacheFull { .. } => "opcache_full",
            Kind::RealpathCacheMisses { .. } => "realpath_cache_misses",
            Kind::OpenBasedirWalks { .. } => "open_basedir_walks",
            Kind::CloseToOpenRevalidation { .. } => "close_to_open_revalidation",
            Kind::AttributeCacheExpiry { .. } => "attribute_cache_expiry",
            Kind::FileCheckLoop { .. } => "file_check_loop",
            Kind::WritesIntoCodeDirectories { .. } => "writes_into_code_directories",
            Kind::RpcSlotQueueing { .. } => "rpc_slot_queueing",
            Kind::ServerThrottling { .. } => "server_throttling",
            Kind::BacklogOverflow { .. } => "backlog_overflow",
        }
    }

    /// What the change that switches the mechanism off removes, for the
    /// findings the model measures that way.
    pub fn removed(&self) -> Option<&Removed> {
        match self {
            Kind::OpcacheRevalidationStorm { removed, .. }
            | Kind::OpcacheOff { removed }
            | Kind::OpcacheFull { removed, .. }
            | Kind::RealpathCacheMisses { removed, .. }
            | Kind::OpenBasedirWalks { removed, .. }
            | Kind::CloseToOpenRevalidation { removed, .. }
            | Kind::AttributeCacheExpiry { removed, .. } => Some(removed),
            _ => None,
        }
    }

    /// The mechanism whose change removes it (attributed findings).
    pub fn mechanism(&self) -> Option<Mechanism> {
        Some(match self {
            Kind::OpcacheRevalidationStorm { .. } => Mechanism::OpcacheValidation,
            Kind::OpcacheOff { .. } => Mechanism::OpcacheOff,
            Kind::OpcacheFull { .. } => Mechanism::OpcacheFull,
            Kind::RealpathCacheMisses { .. } => Mechanism::RealpathCache,
            Kind::OpenBasedirWalks { .. } => Mechanism::OpenBasedir,
            Kind::CloseToOpenRevalidation { .. } => Mechanism::CloseToOpen,
            Kind::AttributeCacheExpiry { .. } => Mechanism::AttributeCache,
            _ => return None,
        })
    }
}

/// What the findings are computed from.
pub struct Inputs<'a> {
    /// The capture under its recorded settings.
    pub base: &'a Predicted,
    /// Each single candidate and its prediction.
    pub singles: &'a [(Candidate, Predicted)],
    pub workload: &'a Workload,
    /// The directories the requests write into ([`super::written_dirs`]).
    pub written: &'a [String],
    pub php: &'a PhpConfig,
    pub mount: Option<&'a MountOptions>,
    /// The server's IOPS budget simulated (`--iops`).
    pub iops: Option<f64>,
}

/// A file-check loop: this many distinct paths at the least.
pub const LOOP_MIN_PATHS: u64 = 100;
/// ... each checked at most this many times a request on average.
pub const LOOP_MAX_CHECKS: u64 = 4;
/// Findings below this share are left out.
pub const MIN_SHARE: f64 = 0.01;
/// The server's IOPS budget is a finding when the stalled requests spent
/// at least this share of their time waiting for it.
pub const STALL_SHARE: f64 = 0.1;

/// The findings of `i`, most important first.
pub fn findings(i: &Inputs) -> std::io::Result<Vec<Finding>> {
    let mut out = Vec::new();
    let base = &i.base.before;
    // on NFS the RPCs are the storm (a call the client's caches answer
    // costs microseconds); elsewhere the calls themselves
    let (share_of, total) = match base.rpc_total {
        Some(t) if t > 0 => (ShareOf::Rpcs, t),
        _ => (ShareOf::MetadataCalls, base.metadata_calls),
    };
    let share = |r: &Removed| -> f64 {
        let n = match share_of {
            ShareOf::Rpcs => r.total_rpcs(),
            _ => r.total_calls(),
        };
        n as f64 / total.max(1) as f64
    };
    // per mechanism, the change that removes the most
    let mut best: BTreeMap<Mechanism, (Removed, f64)> = BTreeMap::new();
    for (c, p) in i.singles.iter().filter(|(c, _)| !c.hypothetical) {
        let r = Removed::of(p, c);
        let s = share(&r);
        if best.get(&c.mechanism).is_none_or(|(_, b)| s > *b) {
            best.insert(c.mechanism, (r, s));
        }
    }
    for (m, (removed, s)) in best {
        if s < MIN_SHARE {
            continue;
        }
        let kind = match m {
            Mechanism::OpcacheValidation => {
                let acregmax = i.mount.map(|m| m.acregmax_s());
                Kind::OpcacheRevalidationStorm {
                    removed,
                    revalidate_freq_s: i.php.revalidate_freq,
                    acregmax_s: acregmax,
                    every_validation_getattr: acregmax
                        .map(|a| i.php.revalidate_freq >= u64::from(a)),
                }
            }
            Mechanism::OpcacheOff => Kind::OpcacheOff { removed },
            Mechanism::OpcacheFull => Kind::OpcacheFull {
                removed,
                max_accelerated_files: i.php.max_accelerated_files,
            },
            Mechanism::RealpathCache => Kind::RealpathCacheMisses {
                removed,
                realpath_cache_size: i.php.realpath_cache_size,
                realpath_cache_ttl_s: i.php.realpath_cache_ttl,
            },
            Mechanism::OpenBasedir => Kind::OpenBasedirWalks {
                removed,
                open_basedir: i.php.open_basedir.clone(),
            },
            Mechanism::CloseToOpen => Kind::CloseToOpenRevalidation {
                removed,
                opens: base.calls("openat"),
            },
            Mechanism::AttributeCache => match i.mount {
                Some(m) => Kind::AttributeCacheExpiry {
                    removed,
                    acregmin_s: m.acregmin_s(),
                    acregmax_s: m.acregmax_s(),
                },
                None => continue,
            },
            // lookupcache, atime and the transport are not mechanisms of
            // a storm: their effect shows in the plans
            Mechanism::LookupCache
            | Mechanism::Atime
            | Mechanism::Transport
            | Mechanism::AccessCheck => continue,
        };
        out.push(Finding {
            severity: Severity::of_share(s),
            share: s,
            share_of,
            kind,
        });
    }
    if let Some(f) = file_check_loop(i.workload, base.metadata_calls)? {
        out.push(f);
    }
    if let Some(f) = writes_into_code(i.workload, i.written)? {
        out.push(f);
    }
    if let Some(l) = &base.latency {
        let all = l.dropped + l.served;
        if l.dropped > 0 {
            out.push(Finding {
                severity: Severity::Critical,
                share: l.drop_rate(),
                share_of: ShareOf::Requests,
                kind: Kind::BacklogOverflow {
                    dropped: l.dropped,
                    served: l.served,
                },
            });
        }
        // a slot wait that is a tenth of the slowest requests' time
        if all > 0 && l.max_slot_wait_ms >= 1.0 && l.max_slot_wait_ms >= 0.1 * l.p99_ms {
            let s = (l.max_slot_wait_ms / l.p99_ms.max(f64::MIN_POSITIVE)).min(1.0);
            out.push(waiting(
                s,
                ShareOf::P99,
                Kind::RpcSlotQueueing {
                    max_slot_wait_ms: l.max_slot_wait_ms,
                    p99_ms: l.p99_ms,
                },
            ));
        }
        // the stalled requests' time waiting for the server's IOPS
        // budget: a request makes its RPCs one after another, so a wait
        // of a few ms each adds up over a revalidation's hundreds
        if let Some(iops) = i.iops.filter(|_| l.stall_iops_share >= STALL_SHARE) {
            let s = l.stall_iops_share;
            out.push(waiting(
                s,
                ShareOf::StalledTime,
                Kind::ServerThrottling {
                    stall_share: s,
                    max_server_wait_ms: l.max_server_wait_ms,
                    iops,
                },
            ));
        }
    }
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.share.total_cmp(&a.share))
    });
    causes_first(&mut out);
    Ok(out)
}

/// A finding of time spent waiting (for a slot, for the server's budget):
/// major from a fifth of the time it is measured against.
fn waiting(share: f64, share_of: ShareOf, kind: Kind) -> Finding {
    Finding {
        severity: if share >= 0.2 {
            Severity::Major
        } else {
            Severity::Minor
        },
        share,
        share_of,
        kind,
    }
}

/// Share of `effect`'s RPCs that `cause` removes too (per op, the lesser).
fn covered(cause: &Removed, effect: &Removed) -> f64 {
    let both: u64 = effect
        .rpcs
        .iter()
        .map(|(op, &n)| n.min(cause.rpc(op)))
        .sum();
    both as f64 / effect.total_rpcs().max(1) as f64
}

/// An NFS-cache finding whose RPCs a PHP finding of the same severity
/// removes too (at least [`COVERED`] of them) is that finding's
/// consequence: the stats OPcache's validations make are what expire in
/// the attribute cache. The cause is put first.
fn causes_first(out: &mut [Finding]) {
    let php = |f: &Finding| f.kind.removed().is_some_and(|r| !r.calls.is_empty());
    let nfs = |f: &Finding| f.kind.removed().is_some_and(|r| r.calls.is_empty());
    let mut moved = true;
    while moved {
        moved = false;
        for i in 1..out.len() {
            let (a, b) = (&out[i - 1], &out[i]);
            if a.severity == b.severity
                && nfs(a)
                && php(b)
                && covered(b.kind.removed().unwrap(), a.kind.removed().unwrap()) >= COVERED
            {
                out.swap(i - 1, i);
                moved = true;
            }
        }
    }
}

/// How much of an NFS-cache finding's RPCs a PHP finding must remove to
/// be its cause.
pub const COVERED: f64 = 0.8;

/// file_exists/is_readable/filesize... calls: a loop when they reach many
/// distinct paths and a share of the metadata calls worth naming.
fn file_check_loop(w: &Workload, metadata_calls: u64) -> std::io::Result<Option<Finding>> {
    let mut calls = 0u64;
    let mut paths: HashSet<Name> = HashSet::new();
    // per request, its distinct paths (summed over the requests)
    let mut per_request = 0u64;
    let mut dirs: HashMap<String, u64> = HashMap::new();
    let mut examples = Vec::new();
    w.each_request(&mut |_, r| {
        let mut own: HashSet<&str> = HashSet::new();
        for o in &r.ops {
            let p = match &o.kind {
                PhpOpKind::Stat { path, .. } | PhpOpKind::Access { path, .. } => path,
                _ => continue,
            };
            calls += 1;
            own.insert(p);
            if !paths.contains(p) {
                paths.insert(p.clone());
                if examples.len() < 3 {
                    examples.push(p.to_string());
                }
            }
            let dir = p
                .rsplit_once('/')
                .map_or("/", |(d, _)| if d.is_empty() { "/" } else { d });
            match dirs.get_mut(dir) {
                Some(n) => *n += 1,
                None => {
                    dirs.insert(dir.to_string(), 1);
                }
            }
        }
        per_request += own.len() as u64;
    })?;
    let distinct = paths.len() as u64;
    let share = calls as f64 / metadata_calls.max(1) as f64;
    // a loop over unique paths: in a request each path checked a few
    // times at most (file_exists + is_readable + filesize is three); a
    // few paths checked over and over are not one
    if distinct < LOOP_MIN_PATHS || calls > LOOP_MAX_CHECKS * per_request || share < 0.05 {
        return Ok(None);
    }
    let (top, top_calls) = dirs
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .unwrap_or(("/".to_string(), 0));
    Ok(Some(Finding {
        severity: Severity::of_share(share),
        share: share.min(1.0),
        share_of: ShareOf::MetadataCalls,
        kind: Kind::FileCheckLoop {
            calls,
            distinct_paths: distinct,
            top_directory: top,
            top_directory_calls: top_calls,
            examples,
        },
    }))
}

/// Directories the requests write into (create, rename, unlink, mkdir,
/// rmdir, an open for writing) that also hold scripts they compile.
fn writes_into_code(w: &Workload, written: &[String]) -> std::io::Result<Option<Finding>> {
    if written.is_empty() {
        return Ok(None);
    }
    let compiled = w.compiled_scripts();
    let mut code: HashSet<&str> = HashSet::new();
    for p in &compiled {
        if let Some((d, _)) = p.rsplit_once('/') {
            code.insert(d);
        }
    }
    let dirs: Vec<String> = written
        .iter()
        .filter(|d| code.contains(d.as_str()))
        .cloned()
        .collect();
    if dirs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Finding {
        severity: Severity::Minor,
        share: 0.0,
        share_of: ShareOf::MetadataCalls,
        kind: Kind::WritesIntoCodeDirectories { directories: dirs },
    }))
}
