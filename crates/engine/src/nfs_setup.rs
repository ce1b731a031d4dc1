//! The NFS side of a prediction: mount options as recorded and as
//! proposed, the NFS root, the server assumptions, and the per-request RPC
//! counts before and after. (It reads a `/proc/mounts` copy and speaks of
//! the options' flags, so it lives here rather than in the model crate.)

use statstorm_nfs::client::{
    normalize, replay_groups_warm, ClientParams, RpcCounts, RpcOp, ServerChange,
};
use statstorm_nfs::mount::MountOptions;
use statstorm_trace::op::Op;
use std::collections::BTreeMap;
use std::path::Path;

/// Command-line inputs (all optional).
#[derive(Clone, Debug, Default)]
pub struct NfsFlags {
    /// `--from-mount OPTS`: the options the trace ran under.
    pub from_mount: Option<String>,
    /// `--mounts FILE`: a copy of `/proc/mounts` of the recording machine.
    pub mounts_file: Option<std::path::PathBuf>,
    /// `--mount OPTS`: proposed options, applied over the recorded ones.
    pub mount: Option<String>,
    /// `--nfs-root PATH`.
    pub nfs_root: Option<String>,
    /// `--delegations on|off`.
    pub delegations: bool,
    /// `--server-change EPOCH:PATH` (repeatable).
    pub server_changes: Vec<String>,
    /// `--nfs-cache warm`: the client's caches are warmed by the capture's
    /// own read-side operations before its first call (else cold).
    pub warm: bool,
}

/// Everything the NFS model needs for a before/after prediction.
#[derive(Clone, Debug)]
pub struct NfsSetup {
    pub recorded: MountOptions,
    pub proposed: MountOptions,
    pub params: ClientParams,
    pub changes: Vec<ServerChange>,
    /// Warm the client with the capture's read-side operations first
    /// ([`statstorm_nfs::warmup_ops`], [`statstorm_nfs::client::WARM_PASSES`] passes).
    pub warm: bool,
    /// Assumptions to print with the report.
    pub notes: Vec<String>,
}

/// The RPC ops shown in every report, in this order.
pub const REPORT_OPS: [RpcOp; 8] = [
    RpcOp::Getattr,
    RpcOp::Lookup,
    RpcOp::Access,
    RpcOp::Read,
    RpcOp::Open,
    RpcOp::OpenNoattr,
    RpcOp::Close,
    RpcOp::Readdirplus,
];

/// `{OP: n}` with the report ops always present and other ops when nonzero.
pub fn rpc_map(c: &RpcCounts) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = REPORT_OPS
        .iter()
        .map(|o| (o.name().to_string(), c.of(*o)))
        .collect();
    for (o, n) in c.nonzero() {
        m.insert(o.name().to_string(), n);
    }
    m
}

impl NfsSetup {
    /// Builds the setup from the flags; `Ok(None)` when no NFS flag was
    /// given (the report then has no RPC columns). `ops` helps pick the
    /// NFS root among several NFS mounts.
    pub fn from_flags(f: &NfsFlags, ops: &[&Op]) -> Result<Option<NfsSetup>, String> {
        let any = f.from_mount.is_some()
            || f.mounts_file.is_some()
            || f.mount.is_some()
            || f.nfs_root.is_some()
            || !f.server_changes.is_empty();
        if !any {
            return Ok(None);
        }
        let mut notes = Vec::new();
        let mut recorded: Option<MountOptions> = None;
        let mut root = f.nfs_root.as_deref().map(normalize);
        if let Some(p) = &f.mounts_file {
            let text = statstorm_trace::input::read_text_capped(
                p,
                statstorm_trace::input::SIDE_FILE_LIMIT,
            )
            .map_err(|e| format!("--mounts {}: {e}", p.display()))?;
            let entries = MountOptions::parse_mounts(&text)
                .map_err(|e| format!("--mounts {}: {e}", p.display()))?;
            if entries.is_empty() {
                return Err(format!("--mounts {}: no nfs or nfs4 line", p.display()));
            }
            // the entry for --nfs-root, else the one most trace paths use
            let pick = match &root {
                Some(r) => entries.iter().find(|e| normalize(&e.target) == *r),
                None => entries.iter().max_by_key(|e| {
                    let t = normalize(&e.target);
                    ops.iter()
                        .filter(|o| o.path == t || o.path.starts_with(&format!("{t}/")))
                        .count()
                }),
            };
            let e = pick.ok_or_else(|| {
                format!(
                    "--mounts {}: no NFS mount at {}",
                    p.display(),
                    root.as_deref().unwrap_or("?")
                )
            })?;
            root = Some(normalize(&e.target));
            recorded = Some(e.options.clone());
            notes.push(format!(
                "recorded NFS mount from {}: {} on {}",
                p.display(),
                e.source,
                e.target
            ));
        }
        if let Some(o) = &f.from_mount {
            let o = MountOptions::parse_strict(o).map_err(|e| format!("--from-mount: {e}"))?;
            recorded = Some(match recorded {
                Some(r) => r.overlay(&o),
                None => o,
            });
        }
        let recorded = match recorded {
            Some(r) => r,
            None => {
                notes.push(
                    "recorded mount options not given (--from-mount/--mounts): kernel defaults assumed"
                        .into(),
                );
                MountOptions::default()
            }
        };
        let root = root.ok_or_else(|| {
            "which paths are on NFS? give --nfs-root PATH (or --mounts FILE)".to_string()
        })?;
        if !ops.is_empty() && !ops.iter().any(|o| under(&o.path, &root)) {
            return Err(format!(
                "no traced path is under the NFS root {root}; the traced paths are under {}",
                prefixes(ops).join(", ")
            ));
        }
        let proposed = match &f.mount {
            Some(o) => {
                let o = MountOptions::parse_strict(o).map_err(|e| format!("--mount: {e}"))?;
                recorded.overlay(&o)
            }
            None => recorded.clone(),
        };
        for (what, o) in [("recorded", &recorded), ("proposed", &proposed)] {
            if !o.unknown.is_empty() {
                notes.push(format!(
                    "{what} mount options not modelled (unknown): {}",
                    o.unknown
                        .iter()
                        .map(|(k, v)| match v {
                            Some(v) => format!("{k}={v}"),
                            None => k.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            let h = o.hypothetical();
            if !h.is_empty() {
                notes.push(format!(
                    "{what} mount uses HYPOTHETICAL options (2013 RFC patches, not in Linux): {}",
                    h.join(",")
                ));
            }
        }
        let mut params = ClientParams::new(&root);
        params.delegations = f.delegations;
        notes.push(format!(
            "NFS model: root {root}, client kernel {}.{}, NFSv4 read delegations {} (--delegations)",
            params.kernel.0,
            params.kernel.1,
            if f.delegations {
                "granted by the server"
            } else {
                "not granted (assumed)"
            }
        ));
        notes.push(if f.warm {
            format!(
                "NFS client caches warm at the first traced call: the capture's read-side operations ran {} times \
                 just before it, as if the same traffic had been running (--nfs-cache warm); \
                 requests of all traces share one client, merged by time",
                statstorm_nfs::client::WARM_PASSES
            )
        } else {
            "NFS client caches assumed cold at the first traced call (a fresh mount; \
             --nfs-cache warm for a capture from a client that had been serving the same traffic); \
             requests of all traces share one client, merged by time"
                .into()
        });
        let mut changes = Vec::new();
        let first = ops.iter().map(|o| o.t_us).min();
        let last = ops.iter().map(|o| o.t_us).max();
        let secs = |us: i64| format!("{:.6}", us as f64 / 1e6);
        for s in &f.server_changes {
            let c = ServerChange::parse(s).map_err(|e| format!("--server-change: {e}"))?;
            // Outside the calls' time span the change comes before every call
            // or after every call: often a time in another clock (epoch
            // seconds against a trace of seconds of the day).
            if let (Some(first), Some(last)) = (first, last) {
                let side = if c.t_us < first {
                    Some("before the first")
                } else if c.t_us > last {
                    Some("after the last")
                } else {
                    None
                };
                if let Some(side) = side {
                    notes.push(format!(
                        "--server-change {s}: {side} traced call (the calls run from {} to {} s); \
                         give the time in the trace's clock if that is not what you meant",
                        secs(first),
                        secs(last)
                    ));
                }
            }
            changes.push(c);
        }
        Ok(Some(NfsSetup {
            recorded,
            proposed,
            params,
            changes,
            warm: f.warm,
            notes,
        }))
    }

    /// RPC counts per request: `before` ops under the recorded options,
    /// `after` ops under the proposed ones; each on one client, requests
    /// merged by time.
    pub fn predict(&self, before: &[&[Op]], after: &[&[Op]]) -> (Vec<RpcCounts>, Vec<RpcCounts>) {
        (self.replay(before, false), self.replay(after, true))
    }

    /// RPCs per group of `groups` (all replayed by one client in time
    /// order) under the recorded options, or the proposed ones.
    pub fn replay(&self, groups: &[&[Op]], proposed: bool) -> Vec<RpcCounts> {
        self.replay_with(groups, &[], proposed)
    }

    /// [`NfsSetup::replay`] of the requests' `groups` and the activity
    /// outside requests (`background`, counted after them), all on one
    /// client in time order. The warm-up (`--nfs-cache warm`) repeats the
    /// requests' traffic only: a pool master's calls span the whole
    /// capture and would move the warm passes back by its length.
    pub fn replay_with(
        &self,
        groups: &[&[Op]],
        background: &[&[Op]],
        proposed: bool,
    ) -> Vec<RpcCounts> {
        let opts = if proposed {
            &self.proposed
        } else {
            &self.recorded
        };
        let warm = self.warmup(groups.iter().flat_map(|g| g.iter()));
        let all: Vec<&[Op]> = groups.iter().chain(background).copied().collect();
        replay_groups_warm(&warm, &all, opts, &self.params, &self.changes)
    }

    /// The warm-up operations for `ops` (none unless `warm`).
    pub fn warmup<'a>(&self, ops: impl IntoIterator<Item = &'a Op>) -> Vec<Op> {
        if self.warm {
            statstorm_nfs::warmup_ops(ops, statstorm_nfs::client::WARM_PASSES)
        } else {
            Vec::new()
        }
    }
}

/// `path` is `root` or inside it.
fn under(path: &str, root: &str) -> bool {
    root == "/"
        || path
            .strip_prefix(root)
            .is_some_and(|r| r.is_empty() || r.starts_with('/'))
}

/// The busiest directories two levels deep of the ops' absolute paths
/// (at most 8, busiest first), to show where a wrong root should point.
fn prefixes(ops: &[&Op]) -> Vec<String> {
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for o in ops.iter().filter(|o| o.path.starts_with('/')) {
        let p: String = o
            .path
            .split('/')
            .skip(1)
            .take(2)
            .fold(String::new(), |acc, c| acc + "/" + c);
        *n.entry(p).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = n.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter()
        .take(8)
        .map(|(p, c)| format!("{p} ({c} calls)"))
        .collect()
}

/// Reads a `/proc/mounts` copy and returns its NFS entries.
pub fn read_mounts(p: &Path) -> Result<Vec<statstorm_nfs::mount::MountEntry>, String> {
    let text = statstorm_trace::input::read_text_capped(p, statstorm_trace::input::SIDE_FILE_LIMIT)
        .map_err(|e| format!("{}: {e}", p.display()))?;
    MountOptions::parse_mounts(&text).map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flags_no_setup() {
        assert!(NfsSetup::from_flags(&NfsFlags::default(), &[])
            .unwrap()
            .is_none());
    }

    #[test]
    fn proposed_overlays_recorded_and_notes_hypothetical() {
        let f = NfsFlags {
            from_mount: Some("vers=3,noatime".into()),
            mount: Some("noaccesscheck,sloppycto=3".into()),
            nfs_root: Some("/var/www/".into()),
            ..NfsFlags::default()
        };
        let s = NfsSetup::from_flags(&f, &[]).unwrap().unwrap();
        assert_eq!(s.params.nfs_root, "/var/www");
        assert!(s.proposed.noaccesscheck && !s.recorded.noaccesscheck);
        assert!(s.notes.iter().any(|n| n.contains("HYPOTHETICAL")));
        assert!(s.notes.iter().any(|n| n.contains("not granted")));
    }

    #[test]
    fn missing_root_and_bad_options_are_errors() {
        let f = NfsFlags {
            from_mount: Some("vers=3".into()),
            ..NfsFlags::default()
        };
        assert!(NfsSetup::from_flags(&f, &[])
            .unwrap_err()
            .contains("--nfs-root"));
        let f = NfsFlags {
            from_mount: Some("vers=7".into()),
            nfs_root: Some("/m".into()),
            ..NfsFlags::default()
        };
        assert!(NfsSetup::from_flags(&f, &[])
            .unwrap_err()
            .contains("'vers'"));
        let f = NfsFlags {
            nfs_root: Some("/m".into()),
            server_changes: vec!["abc:/m/x".into()],
            ..NfsFlags::default()
        };
        assert!(NfsSetup::from_flags(&f, &[])
            .unwrap_err()
            .contains("--server-change"));
    }

    #[test]
    fn mounts_file_picks_root_by_usage() {
        let dir = std::env::temp_dir().join(format!("statstorm-nfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("mounts");
        std::fs::write(
            &p,
            "proc /proc proc rw 0 0\n\
             srv:/a /mnt/a nfs rw,vers=3,hard 0 0\n\
             srv:/ /mnt/b nfs4 rw,vers=4.1,noatime 0 0\n",
        )
        .unwrap();
        let op = Op {
            t_us: 0,
            dur_us: None,
            pid: 1,
            uid: 0,
            kind: statstorm_trace::op::OpKind::Stat,
            path: "/mnt/b/x.php".into(),
            path2: None,
            flags: 0,
            errno: None,
            bytes: 0,
        };
        let f = NfsFlags {
            mounts_file: Some(p.clone()),
            ..NfsFlags::default()
        };
        let s = NfsSetup::from_flags(&f, &[&op]).unwrap().unwrap();
        assert_eq!(s.params.nfs_root, "/mnt/b");
        assert_eq!(s.recorded.vers().as_str(), "4.1");
        assert_eq!(read_mounts(&p).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
