//! The NFS side of a prediction: mount options as recorded and as
//! proposed, the NFS root, the server assumptions, and the per-request RPC
//! counts before and after. (It reads a `/proc/mounts` copy and speaks of
//! the options' flags, so it lives here rather than in the model crate.)

use statstorm_nfs::client::{
    normalize, replay_groups_warm, ClientParams, Feed, RpcCounts, RpcOp, ServerChange,
};
use statstorm_nfs::mount::MountOptions;
use statstorm_trace::op::{Name, Op};
use statstorm_trace::Tally;
use std::collections::BTreeMap;
use std::path::Path;

/// Command-line inputs (all optional).
#[derive(Clone, Debug, Default)]
pub struct NfsFlags {
    /// `--from-mount OPTS`: the options the trace ran under (every root).
    pub from_mount: Option<String>,
    /// `--mounts FILE`: a copy of `/proc/mounts` of the recording machine.
    pub mounts_file: Option<std::path::PathBuf>,
    /// `--mount OPTS` (every root) or `--mount DIR:OPTS` (the root DIR):
    /// proposed options, applied over the recorded ones, in order.
    pub mount: Vec<String>,
    /// `--mount-apart DIR` (repeatable): the proposal mounts DIR, under a
    /// root, apart from it (a mount of its own, of the same server, with
    /// the root's recorded options; `--mount` applies to it as to a root).
    pub apart: Vec<String>,
    /// `--nfs-root DIR[:OPTS]` (repeatable): a directory on NFS, with the
    /// options it was recorded under (over `--from-mount`).
    pub nfs_root: Vec<String>,
    /// `--delegations on|off`.
    pub delegations: bool,
    /// `--server-change EPOCH:PATH` (repeatable).
    pub server_changes: Vec<String>,
    /// `--nfs-cache warm`: the client's caches are warmed by the capture's
    /// own read-side operations before its first call (else cold).
    pub warm: bool,
}

/// One NFS mount: its root, its options as recorded and as proposed, and
/// the client model's parameters. Each mount has a client of its own
/// (caches), as the kernel keeps them per superblock.
#[derive(Clone, Debug)]
pub struct Mount {
    pub root: String,
    pub recorded: MountOptions,
    pub proposed: MountOptions,
    pub params: ClientParams,
    /// A mount the proposal adds under a recorded root (`--mount-apart`):
    /// on the proposed side only. It is of the root's server, so it
    /// shares the root's RPC transport: the kernel gives every mount of
    /// one server, NFS version and protocol one `nfs_client`
    /// (fs/nfs/client.c, `nfs_match_client`), whose RPC client each
    /// superblock clones (its transport and slots shared).
    pub apart: bool,
}

/// Everything the NFS model needs for a before/after prediction.
#[derive(Clone, Debug)]
pub struct NfsSetup {
    /// The mounts, busiest first (most traced calls under the root). Each
    /// call goes to the mount of the longest root it lies under.
    pub mounts: Vec<Mount>,
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
pub fn rpc_map(c: &RpcCounts) -> Tally {
    let mut m: Tally = REPORT_OPS.iter().map(|o| (o.name(), c.of(*o))).collect();
    for (o, n) in c.nonzero() {
        m.set(o.name(), n);
    }
    m.shrunk()
}

/// `DIR:OPTS` split at the first `:` when the value starts with `/`
/// (a root and its options), else `None`.
fn root_and_options(v: &str) -> Option<(String, &str)> {
    if !v.starts_with('/') {
        return None;
    }
    match v.split_once(':') {
        Some((d, o)) => Some((normalize(d), o)),
        None => Some((normalize(v), "")),
    }
}

/// The index of the root of `roots` that `path` lies under (the longest).
fn root_of(roots: &[&str], path: &str) -> Option<usize> {
    roots
        .iter()
        .enumerate()
        .filter(|(_, r)| under(path, r))
        .max_by_key(|(_, r)| r.len())
        .map(|(i, _)| i)
}

impl NfsSetup {
    /// Builds the setup from the flags; `Ok(None)` when no NFS flag was
    /// given (the report then has no RPC columns). `ops` (the traced
    /// calls) pick the NFS roots among the NFS mounts of `--mounts`, and
    /// a setup whose roots hold none of them is an error naming where the
    /// traced paths are.
    pub fn from_flags(f: &NfsFlags, ops: &[&Op]) -> Result<Option<NfsSetup>, String> {
        NfsSetup::from_paths(f, &TracedPaths::of(ops.iter().copied()))
    }

    /// [`NfsSetup::from_flags`] from the traced calls' paths, each with
    /// how many calls named it.
    pub fn from_paths(f: &NfsFlags, ops: &TracedPaths) -> Result<Option<NfsSetup>, String> {
        let any = f.from_mount.is_some()
            || f.mounts_file.is_some()
            || !f.mount.is_empty()
            || !f.nfs_root.is_empty()
            || !f.server_changes.is_empty();
        if !any {
            return Ok(None);
        }
        let mut notes = Vec::new();
        // the roots given, each with the options stated for it
        let mut given: Vec<(String, Option<MountOptions>)> = Vec::new();
        for v in &f.nfs_root {
            let (dir, o) = root_and_options(v).ok_or_else(|| {
                format!("--nfs-root {v}: expected an absolute directory, DIR or DIR:OPTS")
            })?;
            if given.iter().any(|(d, _)| *d == dir) {
                return Err(format!("--nfs-root {dir} given twice"));
            }
            let o = if o.is_empty() {
                None
            } else {
                Some(MountOptions::parse_strict(o).map_err(|e| format!("--nfs-root {dir}: {e}"))?)
            };
            given.push((dir, o));
        }
        let entries = match &f.mounts_file {
            Some(p) => {
                let e = read_mounts(p).map_err(|e| format!("--mounts {e}"))?;
                if e.is_empty() {
                    return Err(format!("--mounts {}: no nfs or nfs4 line", p.display()));
                }
                e
            }
            None => Vec::new(),
        };
        // (root, recorded options from the mounts file)
        let mut roots: Vec<(String, Option<MountOptions>)> = Vec::new();
        if !given.is_empty() {
            for (dir, _) in &given {
                let e = entries.iter().find(|e| normalize(&e.target) == *dir);
                if f.mounts_file.is_some() && e.is_none() {
                    return Err(format!(
                        "--mounts {}: no NFS mount at {dir}",
                        f.mounts_file
                            .as_ref()
                            .map_or(String::new(), |p| p.display().to_string())
                    ));
                }
                roots.push((dir.clone(), e.map(|e| e.options.clone())));
            }
        } else if !entries.is_empty() {
            // every NFS mount the trace uses (all of them for no calls)
            let targets: Vec<String> = entries.iter().map(|e| normalize(&e.target)).collect();
            let refs: Vec<&str> = targets.iter().map(String::as_str).collect();
            let mut used = vec![0usize; entries.len()];
            for (path, n) in ops.iter() {
                if let Some(i) = root_of(&refs, path) {
                    used[i] += n;
                }
            }
            for (i, e) in entries.iter().enumerate() {
                if ops.is_empty() || used[i] > 0 {
                    roots.push((targets[i].clone(), Some(e.options.clone())));
                }
            }
            if roots.is_empty() {
                return Err(format!(
                    "no traced path is under an NFS mount of --mounts ({}); the traced paths are under {}",
                    targets.join(", "),
                    prefixes(ops).join(", ")
                ));
            }
        } else {
            return Err("which paths are on NFS? give --nfs-root PATH (or --mounts FILE)".into());
        }
        for e in &entries {
            if roots.iter().any(|(r, _)| *r == normalize(&e.target)) {
                notes.push(format!(
                    "recorded NFS mount from {}: {} on {}",
                    f.mounts_file
                        .as_ref()
                        .map_or(String::new(), |p| p.display().to_string()),
                    e.source,
                    e.target
                ));
            }
        }
        let from = match &f.from_mount {
            Some(o) => {
                Some(MountOptions::parse_strict(o).map_err(|e| format!("--from-mount: {e}"))?)
            }
            None => None,
        };
        let mut mounts: Vec<Mount> = Vec::new();
        let mut defaulted = false;
        for (root, file) in roots {
            let stated = given
                .iter()
                .find(|(d, _)| *d == root)
                .and_then(|(_, o)| o.clone());
            let mut recorded = file.clone();
            for o in [from.clone(), stated].into_iter().flatten() {
                recorded = Some(match recorded {
                    Some(r) => r.overlay(&o),
                    None => o,
                });
            }
            let recorded = recorded.unwrap_or_else(|| {
                defaulted = true;
                MountOptions::default()
            });
            let mut params = ClientParams::new(&root);
            params.delegations = f.delegations;
            // the links the capture read: a walk through one follows it
            params.symlinks = ops
                .links
                .iter()
                .map(|(l, t)| (statstorm_trace::op::normalize_path(l), t.to_string()))
                .filter(|(l, _)| l.starts_with(&params.nfs_root))
                .collect();
            mounts.push(Mount {
                proposed: recorded.clone(),
                recorded,
                params,
                root,
                apart: false,
            });
        }
        if defaulted {
            notes.push(
                "recorded mount options not given (--from-mount/--mounts): kernel defaults assumed"
                    .into(),
            );
        }
        // the mounts the proposal adds, each with the recorded options of
        // the root it lies under (the longest)
        let recorded_roots = mounts.len();
        for v in &f.apart {
            let dir = normalize(v);
            if !v.starts_with('/') {
                return Err(format!("--mount-apart {v}: expected an absolute directory"));
            }
            if mounts.iter().any(|m| m.root == dir) {
                return Err(format!("--mount-apart {dir}: already a mount of its own"));
            }
            let refs: Vec<&str> = mounts[..recorded_roots]
                .iter()
                .map(|m| m.root.as_str())
                .collect();
            let i = root_of(&refs, &dir).ok_or_else(|| {
                format!(
                    "--mount-apart {dir}: not under an NFS root (the roots: {})",
                    refs.join(", ")
                )
            })?;
            let parent = &mounts[i];
            let mut params = parent.params.clone();
            params.nfs_root = dir.clone();
            params.symlinks.retain(|l, _| under(l, &dir));
            let m = Mount {
                root: dir,
                recorded: parent.recorded.clone(),
                proposed: parent.recorded.clone(),
                params,
                apart: true,
            };
            mounts.push(m);
        }
        // proposed: each --mount over every root, or over the one it names
        let root_list = mounts
            .iter()
            .map(|m| m.root.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        for v in &f.mount {
            match root_and_options(v) {
                Some((dir, o)) => {
                    let m = mounts.iter_mut().find(|m| m.root == dir).ok_or_else(|| {
                        format!("--mount {v}: {dir} is not an NFS root (the roots: {root_list})")
                    })?;
                    let o = MountOptions::parse_strict(o).map_err(|e| format!("--mount: {e}"))?;
                    m.proposed = m.proposed.overlay(&o);
                }
                None => {
                    let o = MountOptions::parse_strict(v).map_err(|e| format!("--mount: {e}"))?;
                    for m in &mut mounts {
                        m.proposed = m.proposed.overlay(&o);
                    }
                }
            }
        }
        // every traced call to the mount of its root; none: an error
        let refs: Vec<&str> = mounts.iter().map(|m| m.root.as_str()).collect();
        let mut used = vec![0usize; mounts.len()];
        for (path, n) in ops.iter() {
            if let Some(i) = root_of(&refs, path) {
                used[i] += n;
            }
        }
        if !ops.is_empty() && used.iter().all(|&n| n == 0) {
            return Err(format!(
                "no traced path is under the NFS root{} {}; the traced paths are under {}",
                if mounts.len() > 1 { "s" } else { "" },
                refs.join(", "),
                prefixes(ops).join(", ")
            ));
        }
        if !ops.is_empty() {
            for (m, &n) in mounts.iter().zip(&used) {
                if n == 0 {
                    notes.push(format!(
                        "NFS root {}: no traced call under it (its mount makes no RPC)",
                        m.root
                    ));
                }
            }
        }
        // busiest first (stable: the order given for equal counts)
        let mut order: Vec<usize> = (0..mounts.len()).collect();
        // (the mounts a proposal adds come after those recorded)
        order.sort_by_key(|&i| (mounts[i].apart, std::cmp::Reverse(used[i])));
        let mut slots: Vec<Option<Mount>> = mounts.into_iter().map(Some).collect();
        let mounts: Vec<Mount> = order.iter().filter_map(|&i| slots[i].take()).collect();
        let several = mounts.len() > 1;
        for m in &mounts {
            let on = if several {
                format!(" on {}", m.root)
            } else {
                String::new()
            };
            for (what, o) in [("recorded", &m.recorded), ("proposed", &m.proposed)] {
                if !o.unknown.is_empty() {
                    notes.push(format!(
                        "{what} mount options{on} not modelled (unknown): {}",
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
                        "{what} mount{on} uses HYPOTHETICAL options (2013 RFC patches, not in Linux): {}",
                        h.join(",")
                    ));
                }
            }
        }
        let p0 = &mounts[0].params;
        notes.push(format!(
            "NFS model: {} {}, client kernel {}.{}, NFSv4 read delegations {} (--delegations)",
            if several { "roots" } else { "root" },
            if several {
                mounts
                    .iter()
                    .map(|m| {
                        format!(
                            "{} ({})",
                            m.root,
                            if m.apart {
                                "proposed: a mount of its own, the same server's transport"
                            } else {
                                "a client of its own"
                            }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                mounts[0].root.clone()
            },
            p0.kernel.0,
            p0.kernel.1,
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
        let (first, last) = (ops.first, ops.last);
        let secs = |us: i64| format!("{:.6}", us as f64 / 1e6);
        let refs: Vec<&str> = mounts.iter().map(|m| m.root.as_str()).collect();
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
            if several && root_of(&refs, &c.path).is_none() {
                notes.push(format!(
                    "--server-change {s}: not under any NFS root ({}): no client sees it",
                    refs.join(", ")
                ));
            }
            changes.push(c);
        }
        Ok(Some(NfsSetup {
            mounts,
            changes,
            warm: f.warm,
            notes,
        }))
    }

    /// The only mount as recorded, when there is one (the latency
    /// simulation models one RPC transport: the mounts a proposal adds
    /// apart share their root's, [`Mount::apart`]).
    pub fn single(&self) -> Option<&Mount> {
        let mut recorded = self.mounts.iter().filter(|m| !m.apart);
        match (recorded.next(), recorded.next()) {
            (Some(m), None) => Some(m),
            _ => None,
        }
    }

    /// The mounts of one side: the recorded ones, and on the proposed
    /// side those the proposal adds apart.
    fn side(&self, proposed: bool) -> Vec<&Mount> {
        self.mounts
            .iter()
            .filter(|m| proposed || !m.apart)
            .collect()
    }

    /// RPC counts per request: `before` ops under the recorded options,
    /// `after` ops under the proposed ones; each on one client per mount,
    /// requests merged by time.
    pub fn predict(&self, before: &[&[Op]], after: &[&[Op]]) -> (Vec<RpcCounts>, Vec<RpcCounts>) {
        (self.replay(before, false), self.replay(after, true))
    }

    /// RPCs per group of `groups` (all replayed in time order, one client
    /// per mount) under the recorded options, or the proposed ones.
    pub fn replay(&self, groups: &[&[Op]], proposed: bool) -> Vec<RpcCounts> {
        self.replay_with(groups, &[], proposed)
    }

    /// [`NfsSetup::replay`] of the requests' `groups` and the activity
    /// outside requests (`background`, counted after them), all in time
    /// order. The warm-up (`--nfs-cache warm`) repeats the requests'
    /// traffic only: a pool master's calls span the whole capture and
    /// would move the warm passes back by its length. With several
    /// mounts each call goes to the client of its root (the longest), and
    /// a group's counts are the sum over the mounts.
    pub fn replay_with(
        &self,
        groups: &[&[Op]],
        background: &[&[Op]],
        proposed: bool,
    ) -> Vec<RpcCounts> {
        fn opts(m: &Mount, proposed: bool) -> &MountOptions {
            if proposed {
                &m.proposed
            } else {
                &m.recorded
            }
        }
        let mounts = self.side(proposed);
        if let [m] = mounts.as_slice() {
            let warm = self.warmup(groups.iter().flat_map(|g| g.iter()));
            let all: Vec<&[Op]> = groups.iter().chain(background).copied().collect();
            return replay_groups_warm(&warm, &all, opts(m, proposed), &m.params, &self.changes);
        }
        let refs: Vec<&str> = mounts.iter().map(|m| m.root.as_str()).collect();
        // each group's calls split by mount in one pass: parts[mount][group]
        let n = mounts.len();
        let all_groups: Vec<&[Op]> = groups.iter().chain(background).copied().collect();
        let mut parts: Vec<Vec<Vec<Op>>> = vec![vec![Vec::new(); all_groups.len()]; n];
        for (g, ops) in all_groups.iter().enumerate() {
            for o in ops.iter() {
                if let Some(i) = root_of(&refs, &o.path) {
                    parts[i][g].push(o.clone());
                }
            }
        }
        let mut total = vec![RpcCounts::default(); all_groups.len()];
        for (i, (m, part)) in mounts.iter().zip(&parts).enumerate() {
            let warm = self.warmup(part[..groups.len()].iter().flatten());
            let all: Vec<&[Op]> = part.iter().map(Vec::as_slice).collect();
            let changes: Vec<ServerChange> = self
                .changes
                .iter()
                .filter(|c| root_of(&refs, &c.path) == Some(i))
                .cloned()
                .collect();
            let r = replay_groups_warm(&warm, &all, opts(m, proposed), &m.params, &changes);
            for (t, c) in total.iter_mut().zip(&r) {
                t.merge(c);
            }
        }
        total
    }

    /// The clients of one side for a replay call by call in time order
    /// ([`Clients::apply`]), cold (a warm start is fed first:
    /// [`Clients::warm`]). Gives the same counts as
    /// [`NfsSetup::replay_with`] fed the same calls in the order it sorts
    /// them in.
    pub fn clients(&self, proposed: bool) -> Clients<'_> {
        let mounts = self.side(proposed);
        let refs: Vec<&str> = mounts.iter().map(|m| m.root.as_str()).collect();
        let feeds = mounts
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let opts = if proposed { &m.proposed } else { &m.recorded };
                // one mount: every change; several: each its root's
                let changes: Vec<ServerChange> = self
                    .changes
                    .iter()
                    .filter(|c| mounts.len() == 1 || root_of(&refs, &c.path) == Some(i))
                    .cloned()
                    .collect();
                Feed::new(&[], opts, &m.params, &changes)
            })
            .collect();
        Clients { refs, feeds }
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

/// The NFS clients of one side of a prediction, fed call by call in time
/// order ([`NfsSetup::clients`]).
pub struct Clients<'a> {
    refs: Vec<&'a str>,
    feeds: Vec<Feed>,
}

impl Clients<'_> {
    /// Mounts (clients) of the side.
    pub fn mounts(&self) -> usize {
        self.feeds.len()
    }

    /// The mount `op` goes to: the only one, with one mount; with several,
    /// the longest root it is under (none when under no root).
    pub fn mount_of(&self, op: &Op) -> Option<usize> {
        if self.feeds.len() == 1 {
            Some(0)
        } else {
            root_of(&self.refs, &op.path)
        }
    }

    /// Applies `op` as warm-up on its mount's client, moved back by
    /// `back[mount]` µs (`--nfs-cache warm`, one pass of
    /// [`statstorm_nfs::warmup_ops`] fed call by call in time order,
    /// before the first call).
    pub fn warm(&mut self, op: &Op, back: &[i64]) {
        if let Some(i) = self.mount_of(op) {
            let mut w = op.clone();
            w.t_us -= back.get(i).copied().unwrap_or(0);
            self.feeds[i].warm(&w);
        }
    }

    /// Applies `op` on the client of its mount (the only one's, with one
    /// mount; none when it is under no root of several); its RPCs.
    pub fn apply(&mut self, op: &Op) -> RpcCounts {
        self.apply_listed(op, None)
    }

    /// [`Clients::apply`], also appending the call's RPCs to `list` in
    /// the order they are sent.
    pub fn apply_listed(&mut self, op: &Op, list: Option<&mut Vec<RpcOp>>) -> RpcCounts {
        match self.mount_of(op) {
            Some(i) => self.feeds[i].apply_listed(op, 0, list),
            None => RpcCounts::default(),
        }
    }
}

/// Each call of one request: its start and its RPCs, in the order the
/// calls were given and, per call, the order the client sent them (what
/// the latency simulation runs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpRpcs {
    /// Per call, its start (microseconds, the trace's clock).
    t_us: Vec<i64>,
    /// Per call, its kind (what it costs on storage that is not NFS).
    kinds: Vec<statstorm_trace::op::OpKind>,
    /// Per call, the end of its RPCs in `rpcs`.
    ends: Vec<u32>,
    rpcs: Vec<RpcOp>,
    /// Calls counted by kind alone ([`OpRpcs::count`]), apart from the
    /// listed ones.
    counted: Vec<(statstorm_trace::op::OpKind, u64)>,
}

impl OpRpcs {
    /// Adds the next call: its start, its kind and its RPCs.
    pub fn push(&mut self, t_us: i64, kind: statstorm_trace::op::OpKind, rpcs: &[RpcOp]) {
        self.t_us.push(t_us);
        self.kinds.push(kind);
        self.rpcs.extend_from_slice(rpcs);
        self.ends.push(self.rpcs.len() as u32);
    }

    /// Makes room for `calls` more calls (their starts, kinds and ends;
    /// not their RPCs, whose number the client decides).
    pub fn reserve(&mut self, calls: usize) {
        self.t_us.reserve_exact(calls);
        self.kinds.reserve_exact(calls);
        self.ends.reserve_exact(calls);
    }

    /// Frees the room the lists hold beyond their calls and RPCs.
    pub fn shrink_to_fit(&mut self) {
        self.t_us.shrink_to_fit();
        self.kinds.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.rpcs.shrink_to_fit();
        self.counted.shrink_to_fit();
    }

    /// Counts a call by its kind alone: on storage that is not NFS a
    /// call's cost is its kind's and every call is CPU time to the
    /// simulator, so neither its start nor its place is needed (13 bytes
    /// a call less, for every call of both sides).
    pub fn count(&mut self, kind: statstorm_trace::op::OpKind) {
        match self.counted.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => self.counted.push((kind, 1)),
        }
    }

    /// The calls counted by kind ([`OpRpcs::count`]).
    pub fn counted(&self) -> &[(statstorm_trace::op::OpKind, u64)] {
        &self.counted
    }

    /// Number of calls listed one by one.
    pub fn len(&self) -> usize {
        self.t_us.len()
    }

    /// True without calls.
    pub fn is_empty(&self) -> bool {
        self.t_us.is_empty()
    }

    /// The start of call `j`.
    pub fn t_us(&self, j: usize) -> i64 {
        self.t_us.get(j).copied().unwrap_or(0)
    }

    /// The kind of call `j`.
    pub fn kind(&self, j: usize) -> Option<statstorm_trace::op::OpKind> {
        self.kinds.get(j).copied()
    }

    /// The RPCs of call `j` (none for a call not given).
    pub fn of(&self, j: usize) -> &[RpcOp] {
        let Some(&end) = self.ends.get(j) else {
            return &[];
        };
        let start = if j == 0 { 0 } else { self.ends[j - 1] };
        &self.rpcs[start as usize..end as usize]
    }
}

/// [`OpRpcs`] as written: each RPC by its place in [`RpcOp::ALL`].
#[derive(serde::Serialize, serde::Deserialize)]
struct OpRpcsRec {
    t_us: Vec<i64>,
    kinds: Vec<statstorm_trace::op::OpKind>,
    ends: Vec<u32>,
    rpcs: Vec<u8>,
    counted: Vec<(statstorm_trace::op::OpKind, u64)>,
}

/// Every request's [`OpRpcs`] of one side, by request: in memory, or
/// written out as each request's last call is replayed (`Disk`, made by
/// [`OpRpcsWriter`]: encoded, held in memory up to 32 MiB and then in an
/// unnamed temporary file, where each lies kept in a column by request;
/// the simulation reads them back one request at a time, so a side's lists
/// cost the requests in flight, not the capture).
pub enum OpRpcsLists {
    Memory(Vec<OpRpcs>),
    /// Lists of calls counted by kind alone ([`OpRpcs::count`]), equal
    /// ones held once: requests repeat their counts.
    Shared(crate::column::Interned<OpRpcs>),
    Disk {
        blobs: crate::spill::Blobs,
        /// Per request, where its list lies (none: no call listed).
        at: crate::column::Column<Option<(u64, u32)>>,
    },
}

impl Default for OpRpcsLists {
    fn default() -> Self {
        OpRpcsLists::Memory(Vec::new())
    }
}

/// [`OpRpcsLists::Disk`] being written, requests in any order.
#[derive(Default)]
pub struct OpRpcsWriter {
    blobs: Option<crate::spill::Blobs>,
    at: crate::column::Scattered<Option<(u64, u32)>>,
}

impl OpRpcsWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes request `i`'s list (each request once).
    pub fn put(&mut self, i: usize, l: OpRpcs) -> std::io::Result<()> {
        let rec = OpRpcsRec {
            t_us: l.t_us,
            kinds: l.kinds,
            ends: l.ends,
            rpcs: l
                .rpcs
                .iter()
                .map(|r| RpcOp::ALL.iter().position(|a| a == r).unwrap_or(0) as u8)
                .collect(),
            counted: l.counted,
        };
        let buf = postcard::to_stdvec(&rec).map_err(std::io::Error::other)?;
        let placed = self
            .blobs
            .get_or_insert_with(crate::spill::Blobs::default)
            .put(&buf)?;
        self.at.put(i, Some(placed))
    }

    /// The lists of requests `0..n` (empty for those never put).
    pub fn finish(self, n: usize) -> std::io::Result<OpRpcsLists> {
        Ok(OpRpcsLists::Disk {
            blobs: self.blobs.unwrap_or_default(),
            at: self.at.finish(n, &None)?,
        })
    }
}

impl OpRpcsLists {
    /// Request `i`'s list (empty when none was put).
    pub fn get(&self, i: usize) -> std::io::Result<std::borrow::Cow<'_, OpRpcs>> {
        use std::borrow::Cow;
        match self {
            OpRpcsLists::Memory(v) => Ok(v
                .get(i)
                .map_or_else(|| Cow::Owned(OpRpcs::default()), Cow::Borrowed)),
            OpRpcsLists::Shared(v) => {
                if i >= v.len() {
                    return Ok(Cow::Owned(OpRpcs::default()));
                }
                v.get(i).map(Cow::Borrowed)
            }
            OpRpcsLists::Disk { blobs, at } => {
                if i >= at.len() {
                    return Ok(Cow::Owned(OpRpcs::default()));
                }
                let Some((offset, len)) = at.get(i)? else {
                    return Ok(Cow::Owned(OpRpcs::default()));
                };
                let buf = blobs.get(offset, len)?;
                let rec: OpRpcsRec = postcard::from_bytes(&buf).map_err(std::io::Error::other)?;
                let rpcs = rec
                    .rpcs
                    .iter()
                    .map(|&k| {
                        RpcOp::ALL.get(k as usize).copied().ok_or_else(|| {
                            std::io::Error::other("a listed call names an RPC that does not exist")
                        })
                    })
                    .collect::<std::io::Result<Vec<RpcOp>>>()?;
                Ok(Cow::Owned(OpRpcs {
                    t_us: rec.t_us,
                    kinds: rec.kinds,
                    ends: rec.ends,
                    rpcs,
                    counted: rec.counted,
                }))
            }
        }
    }
}

/// `path` is `root` or inside it (the one test of the kind: NFS roots,
/// diagnose's written directories, mountstats' mounts).
pub(crate) fn under(path: &str, root: &str) -> bool {
    root == "/"
        || path
            .strip_prefix(root)
            .is_some_and(|r| r.is_empty() || r.starts_with('/'))
}

/// The busiest directories two levels deep of the ops' absolute paths
/// (at most 8, busiest first), to show where a wrong root should point.
fn prefixes(ops: &TracedPaths) -> Vec<String> {
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for (path, k) in ops.iter().filter(|(p, _)| p.starts_with('/')) {
        let p: String = path
            .split('/')
            .skip(1)
            .take(2)
            .fold(String::new(), |acc, c| acc + "/" + c);
        *n.entry(p).or_default() += k;
    }
    let mut v: Vec<(String, usize)> = n.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter()
        .take(8)
        .map(|(p, c)| format!("{p} ({c} calls)"))
        .collect()
}

/// The traced calls' paths, each with how many calls named it: what the
/// choice of NFS roots reads of the calls (bounded by the distinct
/// paths, not by the calls).
#[derive(Clone, Debug, Default)]
pub struct TracedPaths {
    by_path: std::collections::HashMap<Name, usize>,
    /// The symbolic links the calls read: link path -> target.
    links: std::collections::HashMap<Name, Name>,
    calls: usize,
    /// The earliest and the latest call's start.
    first: Option<i64>,
    last: Option<i64>,
}

impl TracedPaths {
    /// The census of `ops`.
    pub fn of<'a>(ops: impl IntoIterator<Item = &'a Op>) -> TracedPaths {
        let mut t = TracedPaths::default();
        for o in ops {
            t.add(o);
        }
        t
    }

    /// Counts one more call.
    pub fn add(&mut self, o: &Op) {
        *self.by_path.entry(o.path.clone()).or_default() += 1;
        if o.kind == statstorm_trace::op::OpKind::Readlink && o.ok() {
            if let Some(t) = &o.path2 {
                self.links.insert(o.path.clone(), t.clone());
            }
        }
        self.calls += 1;
        self.first = Some(self.first.map_or(o.t_us, |f| f.min(o.t_us)));
        self.last = Some(self.last.map_or(o.t_us, |l| l.max(o.t_us)));
    }

    /// True without calls.
    pub fn is_empty(&self) -> bool {
        self.calls == 0
    }

    /// Each distinct path with its calls.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        self.by_path.iter().map(|(p, &n)| (p.as_ref(), n))
    }
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
    fn lists_on_disk_come_back_as_put() {
        use statstorm_trace::op::OpKind;
        let mut a = OpRpcs::default();
        a.reserve(3);
        a.push(10, OpKind::Stat, &[RpcOp::Lookup, RpcOp::Getattr]);
        a.push(-4, OpKind::Open, &[]);
        a.push(11, OpKind::Read, &[RpcOp::Read, RpcOp::Delegreturn]);
        a.count(OpKind::Getcwd);
        let mut b = OpRpcs::default();
        b.push(1, OpKind::Access, &[RpcOp::Access]);
        let mut w = OpRpcsWriter::new();
        w.put(2, b.clone()).unwrap();
        w.put(0, a.clone()).unwrap();
        let d = w.finish(4).unwrap();
        assert_eq!(*d.get(0).unwrap(), a);
        assert_eq!(*d.get(2).unwrap(), b);
        // none put, or past the end: empty
        assert_eq!(*d.get(1).unwrap(), OpRpcs::default());
        assert_eq!(*d.get(9).unwrap(), OpRpcs::default());
        let m = OpRpcsLists::Memory(vec![OpRpcs::default(), b.clone()]);
        assert_eq!(*m.get(1).unwrap(), b);
        assert_eq!(*m.get(0).unwrap(), OpRpcs::default());
    }

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
            mount: vec!["noaccesscheck,sloppycto=3".into()],
            nfs_root: vec!["/var/www/".into()],
            ..NfsFlags::default()
        };
        let s = NfsSetup::from_flags(&f, &[]).unwrap().unwrap();
        let m = s.single().unwrap();
        assert_eq!(m.params.nfs_root, "/var/www");
        assert!(m.proposed.noaccesscheck && !m.recorded.noaccesscheck);
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
            nfs_root: vec!["/m".into()],
            ..NfsFlags::default()
        };
        assert!(NfsSetup::from_flags(&f, &[])
            .unwrap_err()
            .contains("'vers'"));
        let f = NfsFlags {
            nfs_root: vec!["/m".into()],
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
        let op = Op::new(0, 1, statstorm_trace::op::OpKind::Stat, "/mnt/b/x.php");
        let f = NfsFlags {
            mounts_file: Some(p.clone()),
            ..NfsFlags::default()
        };
        let s = NfsSetup::from_flags(&f, &[&op]).unwrap().unwrap();
        assert_eq!(s.mounts.len(), 1);
        assert_eq!(s.mounts[0].params.nfs_root, "/mnt/b");
        assert_eq!(s.mounts[0].recorded.vers().as_str(), "4.1");
        assert_eq!(read_mounts(&p).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
