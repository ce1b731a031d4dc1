//! The NFS client's own counters as evidence: `/proc/self/mountstats`
//! (one snapshot: the mount's RPCs since it was mounted; two: those sent
//! between them) and `nfsstat -c` output (the client's RPCs since boot,
//! every mount of a version together).
//!
//! What they give a diagnosis ([`crate::diagnose`]): the RPC mix the
//! client really sent, set beside the one the NFS model gives the capture
//! (a large gap says the capture does not cover the mount's traffic, or
//! the settings it is modelled under are wrong), and, from mountstats, the
//! mean round trip of an RPC (`rtt`: transmission to reply, the server's
//! time and the network's; net/sunrpc/stats.c `rpc_count_iostats_metrics`
//! sums it in nanoseconds, `_print_rpc_iostats` prints the sum in
//! milliseconds), which calibrates the simulator's time per RPC.
//!
//! Procedure names are the kernel's as mountstats prints them (`GETATTR`,
//! `OPEN_NOATTR`, ...): nfsstat's lower-case and shortened names
//! (`open_noat`, nfs-utils `utils/nfsstat/nfsstat.c`) are mapped to them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use statstorm_nfs::mountstats::{self, MountStat};
use thiserror::Error;

/// Where measured counters came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// `/proc/self/mountstats`: one snapshot (`files` of one: since the
    /// mount) or two (before and after).
    Mountstats {
        files: Vec<String>,
        /// The mount's directory.
        mountpoint: String,
        /// Its `opts:` line, when the snapshot has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        options: Option<String>,
    },
    /// `nfsstat -c`: the client's table of one NFS version.
    Nfsstat { file: String, version: String },
}

/// RPC counts the NFS client itself kept.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measured {
    pub source: Source,
    /// Per procedure (the kernel's names), procedures with none left out.
    pub rpcs: BTreeMap<String, u64>,
    /// Every RPC counted (`NULL` too).
    pub total: u64,
    /// The mean round trip of those RPCs, milliseconds (mountstats only;
    /// none without an RPC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// The mean time from queueing to completion, milliseconds (the round
    /// trip plus the wait for a slot: mountstats only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execute_ms: Option<f64>,
    /// The RPC transports' use over the same span (mountstats only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportUse>,
}

/// How busy the mount's RPC transports were ([`mountstats::Transport`]):
/// a backlog means RPCs waited for a free slot of the transport's slot
/// table (an NFSv4.1 session's own slot table is not counted here).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransportUse {
    /// Transports (`nconnect`).
    pub transports: usize,
    /// Transmissions.
    pub sends: u64,
    /// Requests on the wire when one was sent, on average (itself
    /// included).
    pub mean_in_flight: f64,
    /// Tasks waiting for a slot when one was sent, on average.
    pub mean_backlog: f64,
    /// The most slots in use at once since the mount (not between
    /// snapshots: the kernel keeps the maximum only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_slots: Option<u64>,
}

/// The transports' use of `after` since `before` (the sums of every
/// transport; `None` without a send between them, or when a counter went
/// back: a transport made again).
fn transport_use(before: Option<&MountStat>, after: &MountStat) -> Option<TransportUse> {
    let sum = |m: &MountStat, f: fn(&mountstats::Transport) -> u64| -> u64 {
        m.transports.iter().map(f).fold(0u64, u64::saturating_add)
    };
    let delta = |f: fn(&mountstats::Transport) -> u64| -> Option<u64> {
        sum(after, f).checked_sub(before.map_or(0, |b| sum(b, f)))
    };
    let sends = delta(|t| t.sends)?;
    if sends == 0 {
        return None;
    }
    let req_u = delta(|t| t.req_u)?;
    let bklog_u = delta(|t| t.bklog_u)?;
    Some(TransportUse {
        transports: after.transports.len(),
        sends,
        mean_in_flight: req_u as f64 / sends as f64,
        mean_backlog: bklog_u as f64 / sends as f64,
        max_slots: after.transports.iter().filter_map(|t| t.max_slots).max(),
    })
}

/// Why counters could not be read.
#[derive(Debug, Error)]
pub enum CountersError {
    #[error("{file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Mountstats {
        file: String,
        source: mountstats::MountStatsError,
    },
    #[error("{file}: line {line}: {what}")]
    Nfsstat {
        file: String,
        line: usize,
        what: String,
    },
    #[error("{file}: {what}")]
    Mount { file: String, what: String },
}

/// The mountstats snapshots `files` (one or two, in the order taken) of
/// the NFS mount `roots` lie under (the deepest such mount), or of the
/// only NFS mount when no root is given.
pub fn read_mountstats(files: &[&Path], roots: &[String]) -> Result<Measured, CountersError> {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut snaps = Vec::new();
    for (f, name) in files.iter().zip(&names) {
        let text = std::fs::read(f).map_err(|source| CountersError::Read {
            file: name.clone(),
            source,
        })?;
        let text = String::from_utf8_lossy(&text);
        let s = mountstats::parse(&text).map_err(|source| CountersError::Mountstats {
            file: name.clone(),
            source,
        })?;
        snaps.push(s);
    }
    let (Some(last), Some(last_name)) = (snaps.last(), names.last()) else {
        return Err(CountersError::Mount {
            file: String::new(),
            what: "no mountstats snapshot given".into(),
        });
    };
    if snaps.len() > 2 {
        return Err(CountersError::Mount {
            file: names[2].clone(),
            what: "at most two mountstats snapshots (before and after the capture)".into(),
        });
    }
    let after = pick(last, roots).map_err(|what| CountersError::Mount {
        file: last_name.clone(),
        what,
    })?;
    let before = match snaps.first().filter(|_| snaps.len() == 2) {
        Some(b) => Some(
            b.mount(&after.mountpoint)
                .ok_or_else(|| CountersError::Mount {
                    file: names[0].clone(),
                    what: format!("no mount on {} (the later snapshot's)", after.mountpoint),
                })?,
        ),
        None => None,
    };
    let file = last_name.clone();
    between(before, after, names.clone())
        .map_err(|source| CountersError::Mountstats { file, source })
}

/// The NFS mount of `s` that `roots` lie under, or its only NFS mount.
fn pick<'a>(s: &'a mountstats::MountStats, roots: &[String]) -> Result<&'a MountStat, String> {
    let nfs: Vec<&MountStat> = s
        .mounts
        .iter()
        .filter(|m| m.fstype.starts_with("nfs"))
        .collect();
    let list = || {
        nfs.iter()
            .map(|m| m.mountpoint.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if nfs.is_empty() {
        return Err("no NFS mount in the snapshot".into());
    }
    // a root is `DIR` or `DIR:OPTS` (--nfs-root)
    let dirs: Vec<&str> = roots
        .iter()
        .map(|r| r.split_once(':').map_or(r.as_str(), |(d, _)| d))
        .collect();
    if dirs.is_empty() {
        return match nfs.as_slice() {
            [m] => Ok(m),
            _ => Err(format!(
                "{} NFS mounts ({}): give --nfs-root DIR under the one the capture used",
                nfs.len(),
                list()
            )),
        };
    }
    // each root's deepest NFS mount
    let mut on: Vec<&MountStat> = Vec::new();
    for d in &dirs {
        let m = nfs
            .iter()
            .copied()
            .filter(|m| crate::nfs_setup::under(d, &m.mountpoint))
            .max_by_key(|m| m.mountpoint.len())
            .ok_or_else(|| format!("no NFS mount holds {d} (NFS mounts: {})", list()))?;
        if !on.iter().any(|o| o.mountpoint == m.mountpoint) {
            on.push(m);
        }
    }
    match on.as_slice() {
        [m] => Ok(m),
        _ => Err(format!(
            "the NFS roots lie on {} mounts ({}): the counters are one mount's, diagnose one root at a time",
            on.len(),
            on.iter()
                .map(|m| m.mountpoint.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The RPCs of `after` (since `before`, when given).
fn between(
    before: Option<&MountStat>,
    after: &MountStat,
    files: Vec<String>,
) -> Result<Measured, mountstats::MountStatsError> {
    let mut rpcs = BTreeMap::new();
    let (mut total, mut rtt, mut exec) = (0u64, 0u64, 0u64);
    for (op, a) in &after.ops {
        let b = before
            .and_then(|b| b.ops.get(op))
            .copied()
            .unwrap_or_default();
        if a.ops < b.ops {
            return Err(mountstats::MountStatsError::CounterWentBack {
                op: op.clone(),
                before: b.ops,
                after: a.ops,
            });
        }
        let n = a.ops - b.ops;
        if n > 0 {
            rpcs.insert(op.clone(), n);
        }
        total = total.saturating_add(n);
        rtt = rtt.saturating_add(a.rtt_ms.saturating_sub(b.rtt_ms));
        exec = exec.saturating_add(a.execute_ms.saturating_sub(b.execute_ms));
    }
    let mean = |ms: u64| (total > 0).then(|| ms as f64 / total as f64);
    Ok(Measured {
        source: Source::Mountstats {
            files,
            mountpoint: after.mountpoint.clone(),
            options: after.opts.clone(),
        },
        rpcs,
        total,
        rtt_ms: mean(rtt),
        execute_ms: mean(exec),
        transport: transport_use(before, after),
    })
}

/// `nfsstat -c` output read from `file`: the table of the NFS version
/// with the most calls.
pub fn read_nfsstat(file: &Path) -> Result<Measured, CountersError> {
    let name = file.display().to_string();
    let text = std::fs::read(file).map_err(|source| CountersError::Read {
        file: name.clone(),
        source,
    })?;
    parse_nfsstat(&String::from_utf8_lossy(&text), &name)
}

/// A client table of `nfsstat -c` ([`read_nfsstat`]); `file` names the
/// text in messages.
pub fn parse_nfsstat(text: &str, file: &str) -> Result<Measured, CountersError> {
    let err = |line: usize, what: String| CountersError::Nfsstat {
        file: file.to_string(),
        line,
        what,
    };
    // per version, the counts of its table
    let mut tables: Vec<(String, BTreeMap<String, u64>)> = Vec::new();
    let mut names: Option<(usize, Vec<String>)> = None;
    let mut in_table = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            in_table = false;
            names = None;
            continue;
        }
        if let Some(v) = line
            .strip_prefix("Client nfs v")
            .and_then(|r| r.strip_suffix(':'))
        {
            if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return Err(err(n, format!("a table of NFS version {v:?}")));
            }
            tables.push((v.to_string(), BTreeMap::new()));
            in_table = true;
            names = None;
            continue;
        }
        if !in_table {
            // the rpc, packet and other sections
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match names.take() {
            None => {
                if words.iter().any(|w| w.ends_with('%')) {
                    return Err(err(n, format!("counts with no names above them: {line:?}")));
                }
                names = Some((n, words.iter().map(|w| w.to_string()).collect()));
            }
            Some((_, ns)) => {
                // `count pct%` for each name above
                if words.len() != 2 * ns.len() {
                    return Err(err(
                        n,
                        format!(
                            "{} values for {} names (each takes a count and a percentage): {line:?}",
                            words.len(),
                            ns.len()
                        ),
                    ));
                }
                let table = &mut tables.last_mut().expect("a table is open").1;
                for (name, pair) in ns.iter().zip(words.chunks(2)) {
                    let count: u64 = pair[0]
                        .parse()
                        .map_err(|_| err(n, format!("{:?} is not a count of {name}", pair[0])))?;
                    if !pair[1].ends_with('%') {
                        return Err(err(n, format!("{:?} is not a percentage", pair[1])));
                    }
                    let op = kernel_name(name);
                    let c = table.entry(op).or_default();
                    *c = c.saturating_add(count);
                }
            }
        }
    }
    let Some((version, table)) = tables
        .into_iter()
        .max_by_key(|(_, t)| t.values().fold(0u64, |a, &b| a.saturating_add(b)))
    else {
        return Err(err(
            text.lines().count().max(1),
            "no client table (`Client nfs v3:`, `Client nfs v4:`): is this `nfsstat -c` output?"
                .into(),
        ));
    };
    let total = table.values().fold(0u64, |a, &b| a.saturating_add(b));
    Ok(Measured {
        source: Source::Nfsstat {
            file: file.to_string(),
            version,
        },
        rpcs: table.into_iter().filter(|(_, n)| *n > 0).collect(),
        total,
        rtt_ms: None,
        execute_ms: None,
        transport: None,
    })
}

/// The kernel's (mountstats') name of an nfsstat procedure name.
fn kernel_name(nfsstat: &str) -> String {
    match nfsstat {
        "open_noat" => "OPEN_NOATTR".into(),
        "open_conf" => "OPEN_CONFIRM".into(),
        "open_dgrd" => "OPEN_DOWNGRADE".into(),
        "setclntid" => "SETCLIENTID".into(),
        "confirm" => "SETCLIENTID_CONFIRM".into(),
        "rel_lkowner" => "RELEASE_LOCKOWNER".into(),
        "server_caps" => "SERVER_CAPS".into(),
        "getdevinfo" => "GETDEVICEINFO".into(),
        "bind_conn_to_ses" => "BIND_CONN_TO_SESSION".into(),
        other => other.to_ascii_uppercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V4: &str = "Client rpc stats:
calls      retrans    authrefrsh
60         0          60

Client nfs v4:
null             read             write            commit           open
1         1%     4         6%     0         0%     0         0%     2         3%
open_conf        open_noat        open_dgrd        close            setattr
0         0%     3         5%     0         0%     5         8%     0         0%
getattr          lookup           access
30       50%     12       20%     3         5%

";

    #[test]
    fn an_nfsstat_table_gives_the_kernels_names() {
        let m = parse_nfsstat(V4, "n.txt").unwrap();
        assert_eq!(
            m.source,
            Source::Nfsstat {
                file: "n.txt".into(),
                version: "4".into()
            }
        );
        assert_eq!(m.rpcs["OPEN_NOATTR"], 3);
        assert_eq!(m.rpcs["GETATTR"], 30);
        assert_eq!(m.rpcs["NULL"], 1);
        assert!(!m.rpcs.contains_key("WRITE"));
        assert_eq!(m.total, 60);
        assert_eq!(m.rtt_ms, None);
    }

    #[test]
    fn a_bad_nfsstat_line_is_named() {
        let bad = V4.replace("30       50%", "30       50");
        match parse_nfsstat(&bad, "n.txt") {
            Err(CountersError::Nfsstat { line: 11, .. }) => {}
            other => panic!("{other:?}"),
        }
        let short = V4.replace("3         5%\n\n", "3\n\n");
        assert!(parse_nfsstat(&short, "n.txt").is_err());
        match parse_nfsstat("Client rpc stats:\ncalls\n1\n", "n.txt") {
            Err(CountersError::Nfsstat { line: 3, what, .. }) => {
                assert!(what.contains("no client table"), "{what}")
            }
            other => panic!("{other:?}"),
        }
    }

    const MS: &str = "device s:/e mounted on /mnt/nfs with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.1,acregmin=3
\tper-op statistics
\t        NULL: 1 1 0 44 24 0 0 0 0
\t     GETATTR: 100 100 0 0 0 2 60 70 0
\t      LOOKUP: 20 20 0 0 0 0 12 14 5
device other:/x mounted on /home with fstype nfs statvers=1.1
\tper-op statistics
\t     GETATTR: 5 5 0 0 0 0 1 1 0
";

    fn snap(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn mountstats_since_the_mount_and_between_two_snapshots() {
        let a = snap(MS);
        // two NFS mounts and no root: which one is not guessed
        assert!(read_mountstats(&[a.path()], &[]).is_err());
        let m = read_mountstats(&[a.path()], &["/mnt/nfs/site:vers=4.1".into()]).unwrap();
        assert_eq!(m.total, 121);
        assert_eq!(m.rpcs["GETATTR"], 100);
        assert_eq!(m.rtt_ms, Some(72.0 / 121.0));
        let later = MS
            .replace(
                "GETATTR: 100 100 0 0 0 2 60 70 0",
                "GETATTR: 160 160 0 0 0 2 90 100 0",
            )
            .replace("LOOKUP: 20 20", "LOOKUP: 30 30");
        let b = snap(&later);
        let d = read_mountstats(&[a.path(), b.path()], &["/mnt/nfs".into()]).unwrap();
        assert_eq!(d.total, 70);
        assert_eq!(d.rpcs.get("NULL"), None);
        assert_eq!(d.rpcs["LOOKUP"], 10);
        assert_eq!(d.rtt_ms, Some(30.0 / 70.0));
        // the snapshots the wrong way round
        assert!(read_mountstats(&[b.path(), a.path()], &["/mnt/nfs".into()]).is_err());
        // a root on no NFS mount
        assert!(read_mountstats(&[a.path()], &["/srv/www".into()]).is_err());
    }
}
