//! The Linux NFS client as a deterministic state machine over time.
//!
//! Input: normalized [`Op`]s (syscalls with path, flags, pid, uid and a
//! timestamp) of any number of processes, plus [`ServerChange`]s made by
//! other clients. Output: the RPCs the client sends ([`Rpc`]) and counts per
//! op as `/proc/self/mountstats` names them. Time comes only from the input.
//!
//! State (all keyed by absolute path below the NFS root, interned: see
//! `paths`, memory linear in the distinct paths' components):
//! - inodes: attribute cache timer (R3-R7), invalid bits (R8), access cache
//!   per uid (R24-R28), page cache validity (R36), v4 open state and read
//!   delegations (R31, R33, R39);
//! - dentries: positive/negative, the parent verifier they were validated
//!   against, delegated-verifier bit (R15-R21);
//! - the server's view: a change counter per path, bumped by this client's
//!   own modifications and by [`ServerChange`]s; existence is learned from
//!   the trace (a successful op proves a path exists, ENOENT proves it does
//!   not).
//!
//! Every rule cites SEMANTICS.md (R-number) and the Linux 6.1 source
//! function it models; docs/nfs-model.md says which were checked against
//! the lab.

mod paths;
mod rpc;

use paths::{PathId, Paths};
pub use rpc::{Rpc, RpcCounts, RpcOp};

use crate::mount::{AtimeMode, LookupCache, MountOptions, Vers};
use serde::Serialize;
use statstorm_trace::op::{Op, OpKind};
use statstorm_trace::Flags;
use std::collections::BTreeMap;

// The client's maps, keyed by path ids, pids and small tuples: the
// project's fast hash (`statstorm_trace::event::FastHash`) instead of
// SipHash, which took ~8% of predict's cycles with NFS options (a
// capture is not adversarial hash-flooding input).
use statstorm_trace::event::FastMap as HashMap;
use statstorm_trace::event::FastSet as HashSet;

const S: i64 = 1_000_000;

/// Model parameters that are not mount options.
#[derive(Clone, Debug, Serialize)]
pub struct ClientParams {
    /// Where the NFS mount is (`/mnt/nfs`); ops on other paths are ignored.
    pub nfs_root: String,
    /// Kernel version of the client (major, minor). Default 6.1 (the lab's).
    /// From 6.2 the access cache honours the login time (R27).
    pub kernel: (u32, u32),
    /// Whether the server grants NFSv4 read delegations (Linux nfsd does;
    /// many NAS and cloud servers do not). Default off.
    pub delegations: bool,
    /// When the mount root's attributes were last fetched (mount time).
    /// `None`: at the first op.
    pub root_attr_time_us: Option<i64>,
    /// File sizes when known (READ count = ceil(size / rsize), R37).
    pub file_sizes: std::collections::HashMap<String, u64>,
    /// NFSv4 lease time of the server, seconds (Linux nfsd: 90). The
    /// client's renew daemon runs every 2/3 of it and returns delegations
    /// not referenced since its previous run.
    pub lease_s: u32,
    /// Paths known to exist on the server at the start (e.g. from a
    /// layout listing); the trace adds what it proves.
    pub namespace: std::collections::HashSet<String>,
    /// Whether `namespace` lists every path the server has at the start
    /// (the lab, which lays the tree out itself). Then a call that fails
    /// with ENOENT walks only down to the first component the server
    /// lacks, as `link_path_walk` stops at the first negative lookup
    /// (fs/namei.c); otherwise the last component is taken as the missing
    /// one (a trace does not say which was).
    pub namespace_complete: bool,
    /// Symbolic links on the server at the start: link path -> target as
    /// stored (relative to the link's directory, or absolute). A walk
    /// through one reads it (READLINK when its page is not cached) and
    /// goes on from its target.
    pub symlinks: std::collections::HashMap<String, String>,
    /// Paths known to be directories on the server (the lab's laid-out
    /// tree). A directory's first lookup then gets the directory's
    /// attribute timeouts (acdirmin..acdirmax), as the kernel's does from
    /// the type in the reply, even when no walk has gone through it yet.
    pub dirs: std::collections::HashSet<String>,
}

impl ClientParams {
    pub fn new(nfs_root: &str) -> ClientParams {
        ClientParams {
            nfs_root: normalize(nfs_root),
            kernel: (6, 1),
            delegations: false,
            root_attr_time_us: None,
            file_sizes: std::collections::HashMap::new(),
            namespace: Default::default(),
            namespace_complete: false,
            symlinks: std::collections::HashMap::new(),
            dirs: Default::default(),
            lease_s: 90,
        }
    }
}

/// A change made on the server by someone else (another client, a deploy).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerChange {
    pub t_us: i64,
    pub path: String,
    /// `true`: PATH was created, renamed or removed, so its parent
    /// directory changes too. `false`: only PATH itself changed (its data
    /// or, for a directory, its entries).
    pub entry: bool,
}

#[derive(Clone, Debug)]
struct Inode {
    is_dir: bool,
    /// Server change counter value the cached attributes reflect.
    change_seen: u64,
    /// R3: `read_cache_jiffies`, `attrtimeo`, `attrtimeo_timestamp`.
    read_cache_us: i64,
    attrtimeo_us: i64,
    attrtimeo_ts_us: i64,
    /// R8 `NFS_INO_INVALID_CHANGE` (forces a GETATTR at the next check).
    inval_change: bool,
    /// R8 `NFS_INO_INVALID_CTIME|MTIME` only: a stat() needs a GETATTR,
    /// cache-validity checks on the change attribute do not (v4 own
    /// directory ops, `nfs4_update_changeattr_locked`).
    inval_times: bool,
    /// R12 `NFS_INO_INVALID_ATIME`.
    inval_atime: bool,
    /// R36: the page cache (data, readdir pages, symlink) is populated and
    /// valid.
    has_pages: bool,
    /// R25: access cache entries: uid -> creation time.
    access: HashMap<u32, i64>,
    /// R15: `cache_change_attribute` of a directory (dentry verifier).
    cca: u64,
    /// R39: read delegation held.
    deleg: bool,
    /// `NFS_DELEGATION_REFERENCED`: used since the last renewd pass.
    deleg_ref: bool,
    /// R33: v4 open state obtained from the server, per uid: open count.
    open_state: HashMap<u32, u32>,
    /// Bytes written and not yet flushed.
    dirty_bytes: u64,
}

#[derive(Clone, Copy, Debug)]
struct Dentry {
    positive: bool,
    /// R15: parent's `cache_change_attribute` when last validated.
    verifier: u64,
    /// R15 bit 0: validated while the inode held a delegation.
    delegated: bool,
}

/// How a file was opened by one process (for close).
#[derive(Clone, Copy, Debug)]
struct OpenRec {
    uid: u32,
    write: bool,
    /// v4: the open holds server open state (CLOSE needed).
    server_state: bool,
}

/// Lookup intent of the final component (VFS `LOOKUP_*` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Intent {
    /// stat, access, readlink, unlink source: plain lookup.
    Plain,
    /// `LOOKUP_OPEN` (open(2)); `dir` for O_DIRECTORY / directories.
    Open { write: bool, create: bool },
    /// `LOOKUP_RENAME_TARGET` / exclusive create: negative dentry trusted,
    /// no LOOKUP for a missing dentry.
    Target,
}

/// The client model.
pub struct Client {
    opts: MountOptions,
    params: ClientParams,
    paths: Paths,
    /// `params.nfs_root`, interned.
    root: PathId,
    inodes: HashMap<PathId, Inode>,
    dentries: HashMap<PathId, Dentry>,
    server: HashMap<PathId, u64>,
    opens: HashMap<(u32, PathId), Vec<OpenRec>>,
    /// R27 login time per pid (first op seen).
    login: HashMap<u32, i64>,
    /// Existence learned from the trace: success proves a path, ENOENT
    /// disproves it; own creates/removes/renames update it.
    learned: HashMap<PathId, bool>,
    /// The current op's `.` components: for each, the index in its chain
    /// of the directory it is met in (taken by the op's first walk).
    dots: Vec<usize>,
    /// The paths of `learned` by parent directory (what a listing primes).
    learned_children: HashMap<PathId, Vec<PathId>>,
    /// The namespace's paths by parent directory, made at the first
    /// listing.
    namespace_children: Option<std::collections::HashMap<String, Vec<String>>>,
    /// [`ClientParams::dirs`], interned.
    dirs: HashSet<PathId>,
    /// The links of [`ClientParams::symlinks`], interned (asked at every
    /// walk).
    links: HashSet<PathId>,
    /// The id of the current op's path (normalized, under the root), once
    /// its walk has interned it.
    op_id: Option<PathId>,
    /// Where the current op's walk starts in its chain: the directory a
    /// relative path was given from (taken by the op's first walk).
    walk_start: usize,
    rpcs: Vec<RpcAt>,
    cur_pid: u32,
    cur_index: usize,
    cur_t: i64,
    started: bool,
    /// Next run of the v4 renew daemon.
    next_renewd_us: i64,
}

/// One RPC of a [`Replay`]: an [`Rpc`] whose path is kept interned
/// ([`Replay::path`] spells it), so a replay's memory does not grow with
/// path length times RPC count.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RpcAt {
    pub t_us: i64,
    pub op: RpcOp,
    /// Index of the path in the replay's path table.
    pub path: u32,
    /// As [`Rpc::pid`].
    pub pid: u32,
    /// As [`Rpc::op_index`].
    pub op_index: usize,
}

/// Result of [`replay`]. As JSON its RPCs are [`Rpc`]s, paths spelled out.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    pub schema: &'static str,
    pub rpcs: Vec<RpcAt>,
    /// The paths `rpcs` name (see [`Replay::path`]).
    paths: Paths,
    pub totals: RpcCounts,
    pub per_pid: BTreeMap<u32, RpcCounts>,
    /// RPC counts per input op (same length as the op stream).
    pub per_op: Vec<RpcCounts>,
}

impl Serialize for Replay {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            schema: &'a str,
            rpcs: Vec<Rpc>,
            totals: &'a RpcCounts,
            per_pid: &'a BTreeMap<u32, RpcCounts>,
            per_op: &'a [RpcCounts],
        }
        Out {
            schema: self.schema,
            rpcs: self
                .rpcs
                .iter()
                .map(|r| Rpc {
                    t_us: r.t_us,
                    op: r.op,
                    path: self.path(r),
                    pid: r.pid,
                    op_index: r.op_index,
                })
                .collect(),
            totals: &self.totals,
            per_pid: &self.per_pid,
            per_op: &self.per_op,
        }
        .serialize(s)
    }
}

impl Replay {
    /// The path of an RPC of this replay.
    pub fn path(&self, r: &RpcAt) -> String {
        self.paths.string(r.path)
    }

    /// Counts of the RPCs sent in `[from_us, to_us)`, optionally of one pid.
    pub fn counts_between(&self, from_us: i64, to_us: i64, pid: Option<u32>) -> RpcCounts {
        let mut c = RpcCounts::default();
        for r in &self.rpcs {
            if r.t_us >= from_us && r.t_us < to_us && pid.is_none_or(|p| p == r.pid) {
                c.add(r.op, 1);
            }
        }
        c
    }
}

/// Replays a whole op stream (sorted by time here) with server changes
/// merged in by time, on a fresh client.
pub fn replay(
    ops: &[Op],
    opts: &MountOptions,
    params: &ClientParams,
    server_changes: &[ServerChange],
) -> Replay {
    replay_warm(&[], ops, opts, params, server_changes)
}

/// [`replay`] on a client that first ran `warmup` (in time order, before
/// `ops` and before any server change): the caches it fills carry over,
/// its RPCs are not counted. See [`warmup_ops`].
pub fn replay_warm(
    warmup: &[Op],
    ops: &[Op],
    opts: &MountOptions,
    params: &ClientParams,
    server_changes: &[ServerChange],
) -> Replay {
    let mut f = Feed::new(warmup, opts, params, server_changes);
    f.keep_rpcs = true;
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| ops[i].t_us);
    let mut per_op = vec![RpcCounts::default(); ops.len()];
    for i in order {
        per_op[i] = f.apply(&ops[i], i);
    }
    let mut c = f.finish();
    let rpcs = std::mem::take(&mut c.rpcs);
    let mut totals = RpcCounts::default();
    let mut per_pid: BTreeMap<u32, RpcCounts> = BTreeMap::new();
    for r in &rpcs {
        totals.add(r.op, 1);
        per_pid.entry(r.pid).or_default().add(r.op, 1);
    }
    Replay {
        schema: "statstorm.nfs-replay/1",
        rpcs,
        totals,
        per_pid,
        per_op,
        paths: c.paths,
    }
}

/// A client fed op by op in time order, each op's RPCs counted as it is
/// applied: the replay of a capture too long to hold (state bounded by the
/// distinct paths and open files, not by the ops applied). Server changes
/// are applied before the first op at or after their time.
pub struct Feed {
    c: Client,
    changes: Vec<ServerChange>,
    next_change: usize,
    /// keep every RPC (for [`replay_warm`]'s list); else each op's are
    /// counted and dropped
    keep_rpcs: bool,
}

impl Feed {
    /// A client under `opts` that first ran `warmup` (see [`replay_warm`]).
    pub fn new(
        warmup: &[Op],
        opts: &MountOptions,
        params: &ClientParams,
        server_changes: &[ServerChange],
    ) -> Feed {
        let mut c = Client::new(opts.clone(), params.clone());
        let mut w: Vec<&Op> = warmup.iter().collect();
        w.sort_by_key(|o| o.t_us);
        for o in w {
            c.apply_indexed(o, usize::MAX);
        }
        c.rpcs.clear();
        let mut changes = server_changes.to_vec();
        changes.sort_by_key(|c| c.t_us);
        Feed {
            c,
            changes,
            next_change: 0,
            keep_rpcs: false,
        }
    }

    /// Applies `op` as warm-up (before every op and server change, in
    /// time order, its RPCs not counted): [`Feed::new`]'s `warmup` one op
    /// at a time.
    pub fn warm(&mut self, op: &Op) {
        self.c.apply_indexed(op, usize::MAX);
        self.c.rpcs.clear();
    }

    /// Applies `op` (not earlier than the ops applied before it); `index`
    /// names it in the RPCs kept ([`RpcAt::op_index`]). Its RPCs.
    pub fn apply(&mut self, op: &Op, index: usize) -> RpcCounts {
        self.apply_listed(op, index, None)
    }

    /// [`Feed::apply`], also appending the op's RPCs to `list` in the
    /// order the client sends them.
    pub fn apply_listed(
        &mut self,
        op: &Op,
        index: usize,
        mut list: Option<&mut Vec<RpcOp>>,
    ) -> RpcCounts {
        while let Some(ch) = self.changes.get(self.next_change) {
            if ch.t_us > op.t_us {
                break;
            }
            self.c.server_change(ch);
            self.next_change += 1;
        }
        let before = self.c.rpcs.len();
        self.c.apply_indexed(op, index);
        let mut n = RpcCounts::default();
        for r in &self.c.rpcs[before..] {
            n.add(r.op, 1);
            if let Some(l) = list.as_deref_mut() {
                l.push(r.op);
            }
        }
        if !self.keep_rpcs {
            self.c.rpcs.clear();
        }
        n
    }

    /// Applies the server changes left; the client.
    fn finish(mut self) -> Client {
        for ch in &self.changes[self.next_change..] {
            self.c.server_change(ch);
        }
        self.c
    }
}

/// Replays groups of ops (e.g. the requests of a trace) merged by time on
/// one client, so cache state carries from one group to the next, and
/// returns the RPC counts caused by each group's ops.
pub fn replay_groups(
    groups: &[&[Op]],
    opts: &MountOptions,
    params: &ClientParams,
    server_changes: &[ServerChange],
) -> Vec<RpcCounts> {
    replay_groups_warm(&[], groups, opts, params, server_changes)
}

/// [`replay_groups`] after a `warmup` pass (see [`replay_warm`]). Ops at
/// one time go in group order, then in their order in the group.
pub fn replay_groups_warm(
    warmup: &[Op],
    groups: &[&[Op]],
    opts: &MountOptions,
    params: &ClientParams,
    server_changes: &[ServerChange],
) -> Vec<RpcCounts> {
    replay_groups_warm_each(warmup, groups, opts, params, server_changes, None)
}

/// What [`replay_groups_warm_each`] tells of each op as it is applied:
/// its group, its position in the group, and its RPCs in the order the
/// client sent them.
pub type EachOp<'a> = &'a mut dyn FnMut(usize, usize, &[RpcOp]);

/// [`replay_groups_warm`], telling `each` every op's RPCs as it is
/// applied.
pub fn replay_groups_warm_each(
    warmup: &[Op],
    groups: &[&[Op]],
    opts: &MountOptions,
    params: &ClientParams,
    server_changes: &[ServerChange],
    mut each: Option<EachOp<'_>>,
) -> Vec<RpcCounts> {
    let mut order: Vec<(i64, u32, u32)> = Vec::new();
    for (g, ops) in groups.iter().enumerate() {
        order.extend(
            ops.iter()
                .enumerate()
                .map(|(j, o)| (o.t_us, g as u32, j as u32)),
        );
    }
    order.sort_unstable();
    let mut f = Feed::new(warmup, opts, params, server_changes);
    let mut out = vec![RpcCounts::default(); groups.len()];
    let mut list = Vec::new();
    for (i, &(_, g, j)) in order.iter().enumerate() {
        let (g, j) = (g as usize, j as usize);
        let n = match each.as_deref_mut() {
            Some(each) => {
                list.clear();
                let n = f.apply_listed(&groups[g][j], i, Some(&mut list));
                each(g, j, &list);
                n
            }
            None => f.apply(&groups[g][j], i),
        };
        out[g].merge(&n);
    }
    f.finish();
    out
}

/// Passes of [`warmup_ops`] that `statstorm predict --nfs-cache warm` uses.
/// Measured on the 72 NFS-lab runs that followed a run of the same work
/// (test `warm_start_predicts_runs_that_followed_the_same_work`): runs
/// within tolerance with 1 pass 49, with 2 passes 59, with 3 passes 55; on
/// a cold client 1.
pub const WARM_PASSES: usize = 2;

/// How far back [`warmup_ops`] moves its first pass (pass `k`: `k` times
/// this) for operations from `first` to `last`, µs: their span and 1 ms.
pub fn warm_shift(first: i64, last: i64) -> i64 {
    last.saturating_sub(first).saturating_add(1_000)
}

/// Which operations [`warmup_ops`] repeats, decided one at a time in time
/// order: the read side (stat, lstat, fstat, access, readlink, getdents,
/// reads, opens for reading and the closes of those), tracking per process
/// and path the opens for reading not closed yet. The same filter serves a
/// warm-up fed operation by operation ([`Feed::warm`]).
#[derive(Default)]
pub struct WarmFilter {
    open: HashMap<(u32, statstorm_trace::op::Name), u32>,
}

impl WarmFilter {
    /// Whether the warm-up repeats `o` (the next operation in time order).
    pub fn keep(&mut self, o: &Op) -> bool {
        const WRITING: u32 = Flags::O_WRONLY | Flags::O_RDWR | Flags::O_CREAT | Flags::O_TRUNC;
        match o.kind {
            OpKind::Stat
            | OpKind::Lstat
            | OpKind::Fstat
            | OpKind::Access
            | OpKind::Readlink
            | OpKind::Getdents
            | OpKind::Read
            | OpKind::Mmap
            | OpKind::Chdir
            | OpKind::Getcwd => true,
            OpKind::Open if o.flags & WRITING == 0 => {
                if o.ok() {
                    *self.open.entry((o.pid, o.path.clone())).or_default() += 1;
                }
                true
            }
            OpKind::Close => match self.open.get_mut(&(o.pid, o.path.clone())) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// The warm-up for a capture that did not start on a cold client: the
/// capture's own read-side operations (stat, lstat, fstat, access,
/// readlink, getdents, reads, opens for reading and their closes), `passes`
/// times, moved back in time so that the last pass ends 1 ms before its
/// first operation and each pass 1 ms before the next, as if the same
/// traffic had run that many times just before. Writes, creates, renames
/// and removals are left out (they would change the server again).
pub fn warmup_ops<'a>(ops: impl IntoIterator<Item = &'a Op>, passes: usize) -> Vec<Op> {
    let mut v: Vec<&Op> = ops.into_iter().collect();
    v.sort_by_key(|o| o.t_us);
    let (Some(first), Some(last)) = (v.first(), v.last()) else {
        return Vec::new();
    };
    let shift = warm_shift(first.t_us, last.t_us);
    let mut filter = WarmFilter::default();
    let mut out = Vec::new();
    for o in v {
        if filter.keep(o) {
            let mut w = o.clone();
            w.t_us -= shift;
            out.push(w);
        }
    }
    let one = out.len();
    for k in 1..passes {
        for i in 0..one {
            let mut w = out[i].clone();
            w.t_us -= shift * k as i64;
            out.push(w);
        }
    }
    if passes == 0 {
        out.clear();
    }
    out
}

impl ServerChange {
    /// Parses `EPOCH:PATH` (epoch seconds, fractions allowed): PATH was
    /// created, renamed or removed by another client at that time.
    pub fn parse(s: &str) -> Result<ServerChange, String> {
        let (t, p) = s
            .split_once(':')
            .ok_or_else(|| format!("server change '{s}': expected EPOCH:PATH"))?;
        let secs: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("server change '{s}': '{t}' is not epoch seconds"))?;
        if !secs.is_finite() {
            return Err(format!(
                "server change '{s}': '{t}' is not a finite number of seconds"
            ));
        }
        if !p.starts_with('/') {
            return Err(format!("server change '{s}': PATH must be absolute"));
        }
        Ok(ServerChange {
            // beyond i64 microseconds: saturates (`NfsSetup` notes a change
            // outside the trace's time span)
            t_us: (secs * 1e6).round() as i64,
            path: p.to_string(),
            entry: true,
        })
    }
}

/// Lexical normalization (one definition, shared with the other model).
pub use statstorm_trace::op::normalize_path as normalize;

use statstorm_trace::op::normalized_path as normalized;

impl Client {
    pub fn new(opts: MountOptions, params: ClientParams) -> Client {
        let mut paths = Paths::default();
        let root = paths.intern(&params.nfs_root);
        let dirs = params
            .dirs
            .iter()
            .map(|d| paths.intern(&normalize(d)))
            .collect();
        let links = params
            .symlinks
            .keys()
            .map(|l| paths.intern(&normalize(l)))
            .collect();
        Client {
            dirs,
            links,
            op_id: None,
            opts,
            params,
            paths,
            root,
            inodes: HashMap::default(),
            dentries: HashMap::default(),
            server: HashMap::default(),
            opens: HashMap::default(),
            login: HashMap::default(),
            learned: HashMap::default(),
            dots: Vec::new(),
            learned_children: HashMap::default(),
            namespace_children: None,
            walk_start: 0,
            rpcs: Vec::new(),
            cur_pid: 0,
            cur_index: usize::MAX,
            cur_t: 0,
            started: false,
            next_renewd_us: i64::MAX,
        }
    }

    pub fn options(&self) -> &MountOptions {
        &self.opts
    }

    /// RPCs produced so far (drained), paths spelled out.
    pub fn take_rpcs(&mut self) -> Vec<Rpc> {
        std::mem::take(&mut self.rpcs)
            .into_iter()
            .map(|r| Rpc {
                t_us: r.t_us,
                op: r.op,
                path: self.paths.string(r.path),
                pid: r.pid,
                op_index: r.op_index,
            })
            .collect()
    }

    /// Read delegations held now.
    pub fn delegations_held(&self) -> usize {
        self.inodes.values().filter(|i| i.deleg).count()
    }

    fn v4(&self) -> bool {
        self.opts.vers().is_v4()
    }

    fn under_root(&self, p: &str) -> bool {
        let r = &self.params.nfs_root;
        p == r
            || (p.starts_with(r.as_str()) && p.as_bytes().get(r.len()) == Some(&b'/'))
            || r == "/"
    }

    fn emit(&mut self, op: RpcOp, path: PathId) {
        self.rpcs.push(RpcAt {
            t_us: self.cur_t,
            op,
            path,
            pid: self.cur_pid,
            op_index: self.cur_index,
        });
    }

    fn server_change_of(&mut self, p: PathId) -> u64 {
        *self.server.entry(p).or_insert(1)
    }

    fn bump_server(&mut self, p: PathId) {
        *self.server.entry(p).or_insert(1) += 1;
    }

    fn ac_min_max(&self, is_dir: bool) -> (i64, i64) {
        if is_dir {
            (
                self.opts.acdirmin_s() as i64 * S,
                self.opts.acdirmax_s() as i64 * S,
            )
        } else {
            (
                self.opts.acregmin_s() as i64 * S,
                self.opts.acregmax_s() as i64 * S,
            )
        }
    }

    /// `p` proved a directory (a walk went through it) after its inode
    /// was made as a file's (its first call named it last, as
    /// `access("dir", F_OK)` does). The kernel knew the type from the
    /// first reply's attributes and gave the inode the directory's
    /// timeouts from the start (`nfs_fhget`: `nfsi->attrtimeo =
    /// NFS_MINATTRTIMEO(inode)`, acdirmin for a directory, fs/nfs/inode.c):
    /// its timeout moves into the directory's bounds. Found by `statstorm
    /// lab` on WordPress: with acregmin's 3 s the model revalidated each
    /// `wp-includes/blocks/*` directory of a request 3 s later, 29 GETATTRs
    /// the kernel did not send.
    fn mark_dir(&mut self, p: PathId) {
        let (min, max) = self.ac_min_max(true);
        if let Some(ino) = self.inodes.get_mut(&p) {
            if !ino.is_dir {
                ino.is_dir = true;
                ino.attrtimeo_us = ino.attrtimeo_us.clamp(min.min(max), max);
            }
        }
    }

    /// A new inode from a reply with attributes (R3, `nfs_fhget`).
    fn new_inode(&mut self, p: PathId, is_dir: bool) {
        let (min, _) = self.ac_min_max(is_dir);
        let change = self.server_change_of(p);
        let t = self.cur_t;
        self.inodes.insert(
            p,
            Inode {
                is_dir,
                change_seen: change,
                read_cache_us: t,
                attrtimeo_us: min,
                attrtimeo_ts_us: t,
                inval_change: false,
                inval_times: false,
                inval_atime: false,
                has_pages: false,
                access: HashMap::default(),
                cca: 0,
                deleg: false,
                deleg_ref: false,
                open_state: HashMap::default(),
                dirty_bytes: 0,
            },
        );
    }

    fn ensure_root(&mut self) {
        if !self.started {
            self.started = true;
            let root = self.root;
            let t = self.cur_t;
            self.cur_t = self.params.root_attr_time_us.unwrap_or(t);
            self.new_inode(root, true);
            self.cur_t = t;
            if self.v4() {
                self.next_renewd_us = t.saturating_add(self.renewd_period_us());
            }
        }
    }

    fn renewd_period_us(&self) -> i64 {
        (2 * self.params.lease_s as i64 * S / 3).max(5 * S)
    }

    /// `nfs4_renew_state` (fs/nfs/nfs4renewd.c) runs every 2/3 of the lease
    /// and ends in `nfs_expire_unreferenced_delegations`
    /// (fs/nfs/delegation.c): a delegation not referenced since the previous
    /// run is returned (DELEGRETURN). Lab: v4.1 fpm_nooc_obd r1 returned the
    /// delegation of fe.php, idle for ~90 s, and fpm_fe r1 re-opened it.
    ///
    /// `next_renewd_us == i64::MAX` means never (v3, or a pass later than
    /// time can count). Only ops grant delegations, and this runs before
    /// each op, so over an idle span at most two passes do anything (the
    /// first clears the referenced bits, the second returns the rest);
    /// once none is held, the passes up to `until_us` are skipped in one
    /// step: a run of this loop is bounded whatever the gap.
    fn run_renewd(&mut self, until_us: i64) {
        let period = self.renewd_period_us();
        while self.next_renewd_us != i64::MAX && self.next_renewd_us <= until_us {
            let t = self.next_renewd_us;
            let mut ret: Vec<(String, PathId)> = Vec::new();
            let mut held = 0usize;
            for (&p, i) in self.inodes.iter_mut() {
                if i.deleg {
                    if i.deleg_ref {
                        i.deleg_ref = false;
                        held += 1;
                    } else {
                        ret.push((self.paths.string(p), p));
                    }
                }
            }
            // returned in path order
            ret.sort();
            let (pid, idx, now) = (self.cur_pid, self.cur_index, self.cur_t);
            self.cur_pid = 0;
            self.cur_index = usize::MAX;
            self.cur_t = t;
            for (_, p) in ret {
                self.return_delegation(p);
            }
            self.cur_pid = pid;
            self.cur_index = idx;
            self.cur_t = now;
            // The next pass, or with no delegation left the first pass
            // after `until_us` (i64::MAX: beyond what time can count).
            let (t, period) = (t as i128, period as i128);
            let skip = if held == 0 {
                (until_us as i128 - t) / period + 1
            } else {
                1
            };
            self.next_renewd_us = i64::try_from(t + skip * period).unwrap_or(i64::MAX);
        }
    }

    /// `nfs4_have_delegation` marks the delegation referenced whenever a
    /// cache check consults it.
    fn touch(&mut self, p: PathId) {
        if let Some(i) = self.inodes.get_mut(&p) {
            if i.deleg {
                i.deleg_ref = true;
            }
        }
    }

    /// R4 `nfs_attribute_cache_expired`: expired unless a delegation is held.
    fn expired(&self, ino: &Inode) -> bool {
        if ino.deleg {
            return false;
        }
        let t = self.cur_t;
        !(t >= ino.read_cache_us && t < ino.read_cache_us + ino.attrtimeo_us)
    }

    /// R5-R7: a reply carrying attributes for `p` (`nfs_refresh_inode` ->
    /// `nfs_update_inode`). Creates the inode if new.
    fn refresh(&mut self, p: PathId, is_dir: bool) {
        if !self.inodes.contains_key(&p) {
            self.new_inode(p, is_dir);
            return;
        }
        let server = self.server_change_of(p);
        let (min, max) = self.ac_min_max(is_dir);
        let t = self.cur_t;
        let ino = self.inodes.get_mut(&p).expect("checked");
        if server != ino.change_seen {
            // R7: change attribute moved (`nfs_update_inode`, "change_attr
            // change on server"): reset the timeout, invalidate data and the
            // access cache, and for a directory `nfs_force_lookup_revalidate`.
            ino.change_seen = server;
            if !ino.deleg {
                ino.attrtimeo_us = min;
                ino.has_pages = false;
                ino.access.clear();
                if ino.is_dir {
                    ino.cca += 2;
                }
            }
            ino.attrtimeo_ts_us = t;
        } else {
            // R6: unchanged; double the timeout once out of the window.
            if t >= ino.attrtimeo_ts_us + ino.attrtimeo_us {
                ino.attrtimeo_us = (ino.attrtimeo_us * 2).min(max).max(min.min(max));
            }
            ino.attrtimeo_ts_us = t;
        }
        ino.read_cache_us = t;
        ino.inval_change = false;
        ino.inval_times = false;
        ino.inval_atime = false;
    }

    /// A GETATTR of `p` (`__nfs_revalidate_inode`).
    fn getattr(&mut self, p: PathId) {
        self.emit(RpcOp::Getattr, p);
        let is_dir = self.inodes.get(&p).is_some_and(|i| i.is_dir);
        self.refresh(p, is_dir);
    }

    /// `nfs_revalidate_inode` / R36 `nfs_revalidate_mapping`: GETATTR iff
    /// the timer expired or `INVALID_CHANGE` is set.
    fn revalidate(&mut self, p: PathId) {
        self.touch(p);
        let need = match self.inodes.get(&p) {
            Some(i) => i.inval_change || self.expired(i),
            None => false,
        };
        if need {
            self.getattr(p);
        }
    }

    /// R24-R27, R29 `nfs_permission` -> `nfs_do_access` for a mask with
    /// READ/WRITE/EXEC bits (directory MAY_EXEC in a walk, v3 open,
    /// access(2) with R/W/X, chdir).
    fn permission(&mut self, p: PathId, uid: u32) {
        self.touch(p);
        if !self.inodes.contains_key(&p) {
            return;
        }
        // HYPOTHETICAL `noaccesscheck` (2013 RFC patch 1/2, seed 002, R48):
        // for uid != 0 revalidate the inode and check the mode bits locally
        // (`nfs_revalidate_inode` + `generic_permission`), never ACCESS.
        if self.opts.noaccesscheck && uid != 0 {
            self.revalidate(p);
            return;
        }
        let login = self.login.get(&self.cur_pid).copied().unwrap_or(i64::MIN);
        let r27 = self.params.kernel >= (6, 2);
        let ino = &self.inodes[&p];
        // R27 (6.2+, `nfs_access_login_time`): entries older than the
        // caller's login time are ignored.
        let entry = ino
            .access
            .get(&uid)
            .copied()
            .filter(|&created| !r27 || created >= login);
        let valid_attrs = !ino.inval_change && !self.expired(ino);
        match entry {
            Some(_) if valid_attrs => {}
            Some(_) => {
                // R25 `nfs_access_get_cached_locked`: entry present but the
                // attributes expired: one GETATTR, then retry once; a change
                // (R7) zaps the cache and an ACCESS follows.
                self.getattr(p);
                if !self.inodes[&p].access.contains_key(&uid) {
                    self.access_rpc(p, uid);
                }
            }
            None => self.access_rpc(p, uid),
        }
    }

    /// An ACCESS RPC: reply carries attributes (R5, R26).
    fn access_rpc(&mut self, p: PathId, uid: u32) {
        self.emit(RpcOp::Access, p);
        let is_dir = self.inodes.get(&p).is_some_and(|i| i.is_dir);
        self.refresh(p, is_dir);
        let t = self.cur_t;
        if let Some(i) = self.inodes.get_mut(&p) {
            i.access.insert(uid, t);
        }
    }

    /// R16 `nfs_check_verifier(dir, dentry)`.
    fn check_verifier(&mut self, dir: PathId, d: Dentry) -> bool {
        if self.opts.lookupcache() == LookupCache::None {
            return false;
        }
        let Some(di) = self.inodes.get(&dir) else {
            return false;
        };
        if d.verifier != di.cca {
            return false;
        }
        // `nfs_mapping_need_revalidate_inode(dir)`: GETATTR of the parent.
        if di.inval_change || self.expired(di) {
            self.getattr(dir);
        }
        d.verifier == self.inodes[&dir].cca
    }

    fn set_dentry(&mut self, dir: PathId, child: PathId, positive: bool) {
        let verifier = self.inodes.get(&dir).map_or(0, |i| i.cca);
        // `nfs_set_verifier_locked`: tagged delegated when the inode holds
        // a read delegation (R15, R39).
        let delegated = positive && self.inodes.get(&child).is_some_and(|i| i.deleg);
        self.dentries.insert(
            child,
            Dentry {
                positive,
                verifier,
                delegated,
            },
        );
    }

    /// R21 `nfs_lookup` / R17 step 3 `nfs_lookup_revalidate_dentry`: one
    /// LOOKUP RPC. v3 replies also carry the directory's attributes; v4
    /// LOOKUP compounds do not.
    fn lookup_rpc(&mut self, dir: PathId, child: PathId, exists: bool, is_dir: bool) {
        self.emit(RpcOp::Lookup, child);
        if !self.v4() {
            self.refresh(dir, true);
        }
        if exists {
            self.refresh(child, is_dir);
        } else {
            self.drop_inode(child);
        }
        self.set_dentry(dir, child, exists);
    }

    fn drop_inode(&mut self, p: PathId) {
        self.inodes.remove(&p);
    }

    /// Looks up `child` in `dir` with `intent`; `exists`: what the server
    /// says (from the op's outcome). Returns true when a LOOKUP (or a v4
    /// OPEN by name, for the caller) refreshed the child in this call.
    fn lookup(
        &mut self,
        dir: PathId,
        child: PathId,
        intent: Intent,
        exists: bool,
        is_dir: bool,
    ) -> bool {
        let lc = self.opts.lookupcache();
        match self.dentries.get(&child).copied() {
            None => {
                // dcache miss (R21).
                if intent == Intent::Target {
                    // `nfs_lookup`: exclusive create / rename target: no RPC.
                    return false;
                }
                if self.v4() && matches!(intent, Intent::Open { .. }) && !is_dir {
                    // R31: `nfs_atomic_open`: OPEN by name, no LOOKUP.
                    return false;
                }
                self.lookup_rpc(dir, child, exists, is_dir);
                true
            }
            Some(d) if !d.positive => {
                // R19 `nfs_neg_need_reval`.
                let trusted = match intent {
                    Intent::Target => true,
                    Intent::Open { create: true, .. } => true,
                    _ if lc != LookupCache::All => false,
                    _ => self.check_verifier(dir, d),
                };
                if trusted && !exists {
                    return false;
                }
                if trusted && exists {
                    // the cache says "absent" but the trace shows the file:
                    // it was created meanwhile; a create path handles it.
                    if matches!(intent, Intent::Open { create: true, .. } | Intent::Target) {
                        return false;
                    }
                }
                if self.v4() && matches!(intent, Intent::Open { .. }) && !is_dir && exists {
                    return false;
                }
                self.lookup_rpc(dir, child, exists, is_dir);
                true
            }
            Some(d) => {
                // R17 / R18: positive dentry.
                if d.delegated && self.inodes.get(&child).is_some_and(|i| i.deleg) {
                    // `nfs_lookup_revalidate_delegated`.
                    return false;
                }
                if intent == Intent::Target && !exists {
                    self.dentries.remove(&child);
                    return false;
                }
                let v4_open_file =
                    self.v4() && matches!(intent, Intent::Open { .. }) && !is_dir && exists;
                if self.check_verifier(dir, d) {
                    if !exists {
                        // server says gone: the revalidation finds out.
                        self.lookup_rpc(dir, child, false, is_dir);
                        return true;
                    }
                    if v4_open_file {
                        // R18 `nfs4_lookup_revalidate`: ->open does the OPEN.
                        return false;
                    }
                    if let Intent::Open { write, .. } = intent {
                        // R17 `nfs_lookup_verify_inode` with LOOKUP_OPEN:
                        // close-to-open GETATTR (R30) unless nocto.
                        if self.cto_needed(child, is_dir, write) {
                            self.getattr(child);
                        }
                    }
                    false
                } else {
                    // R17 step 3 / R18 reval_dentry: LOOKUP.
                    self.lookup_rpc(dir, child, exists, is_dir);
                    true
                }
            }
        }
    }

    /// Whether an open needs the forced close-to-open GETATTR (R17, R30,
    /// R35) — v3 regular files and directories of any version.
    fn cto_needed(&self, p: PathId, is_dir: bool, write: bool) -> bool {
        if !self.opts.cto() {
            return false;
        }
        if !is_dir && self.v4() {
            return false;
        }
        // HYPOTHETICAL `sloppycto=N` (2013 RFC patch 2/2, R48): skip for a
        // read-only open of a regular file whose attributes were updated
        // less than N s ago (`time_in_range_open(jiffies,
        // attrtimeo_timestamp, attrtimeo_timestamp + N)`).
        if let (Some(n), false, false) = (self.opts.sloppycto_s, is_dir, write) {
            if let Some(i) = self.inodes.get(&p) {
                let t = self.cur_t;
                if t >= i.attrtimeo_ts_us && t < i.attrtimeo_ts_us + n as i64 * S {
                    return false;
                }
            }
        }
        true
    }

    /// Whether the server has `p` now, as far as the client model knows:
    /// what the trace proved, else the namespace given at the start.
    fn present(&self, p: PathId) -> bool {
        match self.learned.get(&p) {
            Some(&b) => b,
            None => self.params.namespace.contains(&self.paths.string(p)),
        }
    }

    /// R38 (`nfs_prime_dcache`): a listing with attributes (READDIRPLUS,
    /// or v4 READDIR in the same "plus" mode) refreshes each entry's
    /// attributes and sets its dentry, a new one created for a name not
    /// cached. The entries known here: the directory's children the trace
    /// proved to exist or the namespace lists (a trace does not show the
    /// names a listing returned).
    fn prime_children(&mut self, dir: PathId) {
        let ns = self.namespace_children.get_or_insert_with(|| {
            let mut by_dir: std::collections::HashMap<String, Vec<String>> = Default::default();
            for n in &self.params.namespace {
                if let Some((d, name)) = n.rsplit_once('/') {
                    if !name.is_empty() {
                        let d = if d.is_empty() { "/" } else { d };
                        by_dir.entry(d.to_string()).or_default().push(n.clone());
                    }
                }
            }
            by_dir
        });
        let listed = ns.get(&self.paths.string(dir)).cloned().unwrap_or_default();
        let mut kids: Vec<PathId> = self.learned_children.get(&dir).cloned().unwrap_or_default();
        kids.extend(listed.iter().map(|n| self.paths.intern(n)));
        kids.sort_unstable();
        kids.dedup();
        for k in kids {
            if k == dir || self.learned.get(&k) == Some(&false) {
                continue;
            }
            let is_dir = self.known_dir(k);
            self.refresh(k, is_dir);
            self.set_dentry(dir, k, true);
        }
    }

    /// The ids of `path` (normalized, under the root) and of each
    /// directory from the root down to it: `[root, ..., path]`.
    fn chain(&mut self, path: &str) -> Vec<PathId> {
        let rel = if self.params.nfs_root == "/" {
            path
        } else {
            &path[self.params.nfs_root.len()..]
        };
        let mut chain = vec![self.root];
        self.paths.walk_into(self.root, rel, &mut chain);
        chain
    }

    /// Path walk of the parent directories of `chain`'s last path (R14,
    /// `link_path_walk`): MAY_EXEC on each directory walked, lookup of each
    /// intermediate component. Returns the parent of the final component,
    /// or None when the path is the root.
    fn walk_parents(&mut self, chain: &[PathId], uid: u32) -> Option<PathId> {
        let n = chain.len() - 1;
        let dots = std::mem::take(&mut self.dots);
        let start = std::mem::take(&mut self.walk_start);
        if n == 0 {
            return None;
        }
        // R14: a relative path's walk starts in its directory (the cwd or
        // the dirfd: `path_init` takes it as is, with no lookup or
        // revalidation of it or its ancestors); an absolute one at `/`.
        for i in start.min(n - 1)..n {
            // R14: `link_path_walk` checks search permission before every
            // component, a `.` included (`may_lookup`, then `handle_dots`
            // stays in the directory): one more check of the same
            // directory, which costs an RPC when its attributes or access
            // cache have expired (noac: always).
            for _ in dots.iter().filter(|&&d| d == i) {
                self.permission(chain[i], uid);
            }
            // R24: MAY_EXEC on the directory being searched.
            self.permission(chain[i], uid);
            if i + 1 == n {
                break;
            }
            let child = chain[i + 1];
            self.lookup(chain[i], child, Intent::Plain, true, true);
            self.mark_dir(child);
        }
        // a final `.` (`/a/b/.`): checked in the directory it names
        for _ in dots.iter().filter(|&&d| d == n) {
            self.permission(chain[n], uid);
        }
        Some(chain[n - 1])
    }

    /// The chain index of the directory `op`'s relative path was given
    /// from ([`Op::walk_base`]); 0 (the root) for an absolute path, a
    /// rename, a directory outside the mount, or a path that climbs out of
    /// it with `..`, or when no component follows it in the chain.
    fn walk_start_of(&self, op: &Op, chain_len: usize) -> usize {
        let b = op.walk_base as usize;
        if b == 0 || op.path2.is_some() {
            return 0;
        }
        let (Some(base), Some(rel)) = (op.path.get(..b), op.path.get(b..)) else {
            return 0;
        };
        if rel.split('/').any(|c| c == "..") {
            return 0;
        }
        let base = normalize(base);
        if !self.under_root(&base) {
            return 0;
        }
        let r = self.params.nfs_root.as_str();
        let inside = if r == "/" {
            &base[..]
        } else {
            &base[r.len()..]
        };
        let depth = inside.split('/').filter(|c| !c.is_empty()).count();
        if depth + 1 < chain_len {
            depth
        } else {
            0
        }
    }

    /// R14 through symbolic links (`pick_link`, `nfs_get_link`): the
    /// components of `path` that are links of [`ClientParams::symlinks`]
    /// (the last one too when the call follows it: stat, access, chdir,
    /// open without O_NOFOLLOW), each walked to, looked up and read (its
    /// page revalidated, READLINK when not cached), the walk going on from
    /// the link's directory (a relative target) or the root (absolute).
    /// Returns the path the walk ends on and, when a link was followed,
    /// the chain index the rest of the walk starts at.
    fn follow_links<'p>(
        &mut self,
        op: &Op,
        path: std::borrow::Cow<'p, str>,
        chain: &[PathId],
    ) -> (std::borrow::Cow<'p, str>, Option<usize>) {
        if self.links.is_empty() {
            return (path, None);
        }
        let follow_last = matches!(op.kind, OpKind::Stat | OpKind::Access | OpKind::Chdir)
            || (op.kind == OpKind::Open && !op.flags().has(Flags::O_NOFOLLOW));
        // no component of the chain (below the root) is a known link: the
        // walk is the chain (the common case, decided on ids)
        let upto = if follow_last {
            chain.len()
        } else {
            chain.len().saturating_sub(1)
        };
        if !chain
            .get(1..upto)
            .unwrap_or(&[])
            .iter()
            .any(|id| self.links.contains(id))
        {
            return (path, None);
        }
        let root = self.params.nfs_root.clone();
        let mut cur = path.into_owned();
        let mut start = None;
        for _ in 0..40 {
            let rel = if root == "/" {
                &cur[..]
            } else {
                &cur[root.len()..]
            };
            let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
            let upto = if follow_last {
                comps.len()
            } else {
                comps.len().saturating_sub(1)
            };
            let mut found = None;
            let mut prefix = root.trim_end_matches('/').to_string();
            for (i, c) in comps.iter().enumerate().take(upto) {
                prefix.push('/');
                prefix.push_str(c);
                if let Some(t) = self.params.symlinks.get(&prefix) {
                    found = Some((prefix.clone(), t.clone(), comps[i + 1..].join("/")));
                    break;
                }
            }
            let Some((link, target, rest)) = found else {
                break;
            };
            let chain = self.chain(&link);
            let id = chain[chain.len() - 1];
            if let Some(dir) = self.walk_parents(&chain, op.uid) {
                self.lookup(dir, id, Intent::Plain, true, false);
            }
            self.revalidate(id);
            if self.inodes.get(&id).is_some_and(|i| !i.has_pages) {
                self.emit(RpcOp::Readlink, id);
                if let Some(i) = self.inodes.get_mut(&id) {
                    i.has_pages = true;
                }
            }
            let parent = match link.rfind('/') {
                Some(0) | None => "/".to_string(),
                Some(k) => link[..k].to_string(),
            };
            let base = if target.starts_with('/') {
                String::new()
            } else {
                parent.clone()
            };
            cur = normalize(&format!("{base}/{target}/{rest}"));
            start = Some(if target.starts_with('/') || !self.under_root(&parent) {
                0
            } else {
                let inside = if root == "/" {
                    &parent[..]
                } else {
                    &parent[root.len()..]
                };
                inside.split('/').filter(|c| !c.is_empty()).count()
            });
            if !self.under_root(&cur) {
                break;
            }
        }
        (std::borrow::Cow::Owned(cur), start)
    }

    /// Where the `.` components of `raw` (an op's path as the call gave
    /// it) are met, as indexes into its normalized chain (see
    /// [`Client::walk_parents`]). None when the path reaches the root
    /// another way or has a `..` (the lexical chain then no longer follows
    /// the walk).
    fn dot_positions(&self, raw: &str) -> Vec<usize> {
        if !raw.contains("/.") {
            return Vec::new();
        }
        let r = self.params.nfs_root.as_str();
        let rest = if r == "/" {
            raw
        } else {
            match raw.strip_prefix(r) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
                _ => return Vec::new(),
            }
        };
        let mut pos = 0;
        let mut out = Vec::new();
        for c in rest.split('/') {
            match c {
                "" => {}
                "." => out.push(pos),
                ".." => return Vec::new(),
                _ => pos += 1,
            }
        }
        out
    }

    /// R9 `nfs_getattr`: GETATTR iff expired, `INVALID_CHANGE`, a requested
    /// time invalid, or `INVALID_ATIME` on an atime-sensitive mount (R11).
    fn stat_inode(&mut self, p: PathId) {
        self.touch(p);
        let Some(i) = self.inodes.get(&p) else {
            return;
        };
        let atime_sensitive =
            self.opts.atime() != AtimeMode::Noatime && !(i.is_dir && self.opts.nodiratime());
        let need = i.inval_change
            || i.inval_times
            || (i.inval_atime && atime_sensitive)
            || self.expired(i);
        if need {
            self.getattr(p);
        }
    }

    /// Applies one server change made by someone else.
    pub fn server_change(&mut self, ch: &ServerChange) {
        let p = self.paths.intern(&normalize(&ch.path));
        self.run_renewd(ch.t_us);
        self.cur_t = ch.t_us;
        self.cur_pid = 0;
        self.cur_index = usize::MAX;
        self.bump_server(p);
        if ch.entry {
            let parent = self.paths.parent(p);
            self.bump_server(parent);
        }
        // R41: a conflicting change recalls the delegation.
        if self.inodes.get(&p).is_some_and(|i| i.deleg) {
            self.emit(RpcOp::Delegreturn, p);
            if let Some(i) = self.inodes.get_mut(&p) {
                i.deleg = false;
                i.inval_change = true;
            }
        }
    }

    /// Applies one op; RPCs go to the internal list (see [`Client::take_rpcs`]).
    pub fn apply(&mut self, op: &Op) {
        self.apply_indexed(op, usize::MAX);
    }

    fn apply_indexed(&mut self, op: &Op, index: usize) {
        self.apply_inner(op, index);
        let ok = op.errno.is_none();
        let enoent = matches!(op.errno.as_deref(), Some("ENOENT"));
        match op.kind {
            OpKind::Unlink | OpKind::Rmdir if ok => {
                self.learn_op(op, false);
            }
            OpKind::Rename if ok => {
                if let Some(to) = op.path2.as_deref() {
                    self.learn_op(op, false);
                    self.learn(to, true);
                }
            }
            OpKind::Rename => {}
            _ if ok => {
                self.learn_op(op, true);
            }
            _ if enoent => {
                self.learn_op(op, false);
            }
            _ => {}
        }
    }

    /// [`Client::learn`] of `op.path`, by the id its walk interned when it
    /// made one ([`Client::op_id`]).
    fn learn_op(&mut self, op: &Op, exists: bool) {
        match self.op_id {
            Some(id) => self.learn_id(id, exists),
            None => self.learn(&op.path, exists),
        }
    }

    /// Records what an op proved about `path`. Only paths under the root
    /// are ever asked about (an O_CREAT open), so only those are kept.
    fn learn(&mut self, path: &str, exists: bool) {
        let path = normalized(path);
        if self.under_root(&path) {
            let id = self.paths.intern(&path);
            self.learn_id(id, exists);
        }
    }

    fn learn_id(&mut self, id: PathId, exists: bool) {
        if self.learned.insert(id, exists).is_none() {
            let parent = self.paths.parent(id);
            self.learned_children.entry(parent).or_default().push(id);
        }
    }

    fn apply_inner(&mut self, op: &Op, index: usize) {
        self.op_id = None;
        if !op.path.starts_with('/') {
            // unresolved relative path (cwd unknown): cannot be placed
            return;
        }
        let path = normalized(&op.path);
        if !self.under_root(&path) {
            // A rename may still move a file onto the mount; ignore.
            return;
        }
        self.cur_t = op.t_us;
        self.cur_pid = op.pid;
        self.cur_index = index;
        self.login.entry(op.pid).or_insert(op.t_us);
        self.ensure_root();
        self.run_renewd(op.t_us);
        self.dots = self.dot_positions(&op.path);
        let mut chain = self.chain(&path);
        self.op_id = chain.last().copied();
        self.walk_start = self.walk_start_of(op, chain.len());
        let (path, link_start) = self.follow_links(op, path, &chain);
        if let Some(start) = link_start {
            if !self.under_root(&path) {
                return; // a link led off the mount
            }
            chain = self.chain(&path);
            self.dots.clear();
            self.walk_start = if start + 1 < chain.len() { start } else { 0 };
        }
        let uid = op.uid;
        let errno = op.errno.as_deref();
        // ENOENT/ENOTDIR prove absence of the final component; other errors
        // (EINVAL from unsupported flags, EEXIST, ...) are treated as calls
        // the kernel refused before any RPC when they are not lookups.
        let exists = !matches!(errno, Some("ENOENT") | Some("ENOTDIR"));
        if !exists && self.params.namespace_complete {
            if let Some(i) = (1..chain.len().saturating_sub(1)).find(|&i| !self.present(chain[i])) {
                chain.truncate(i + 1);
            }
        }
        let id = chain[chain.len() - 1];
        let fl = op.flags();
        match op.kind {
            OpKind::Stat | OpKind::Lstat | OpKind::Access | OpKind::Readlink | OpKind::Chdir => {
                let is_dir = matches!(op.kind, OpKind::Chdir) || self.known_dir(id);
                if let Some(dir) = self.walk_parents(&chain, uid) {
                    self.lookup(dir, id, Intent::Plain, exists, is_dir);
                }
                if !exists {
                    return;
                }
                match op.kind {
                    OpKind::Stat | OpKind::Lstat => self.stat_inode(id),
                    // R29: access(F_OK) asks for no bits: path walk only.
                    OpKind::Access
                        if fl.has(Flags::R_OK) || fl.has(Flags::W_OK) || fl.has(Flags::X_OK) =>
                    {
                        self.permission(id, uid)
                    }
                    OpKind::Chdir => self.permission(id, uid),
                    OpKind::Readlink => {
                        // symlink page cache (R36): `nfs_get_link`
                        // revalidates the mapping (a GETATTR when the
                        // attributes expired), READLINK when not cached.
                        self.revalidate(id);
                        let need = self.inodes.get(&id).is_some_and(|i| !i.has_pages);
                        if need {
                            self.emit(RpcOp::Readlink, id);
                            if let Some(i) = self.inodes.get_mut(&id) {
                                i.has_pages = true;
                            }
                        }
                    }
                    _ => {}
                }
            }
            OpKind::Fstat => self.stat_inode(id),
            OpKind::Getcwd => {}
            OpKind::Open => self.open(op, &chain, exists),
            OpKind::Close => self.close(op, id),
            OpKind::Read | OpKind::Mmap => self.read(id, &path, op.bytes),
            OpKind::Getdents => {
                self.revalidate(id);
                let need = self.inodes.get(&id).is_some_and(|i| !i.has_pages);
                if need {
                    // R38: first chunk of a listing is READDIRPLUS unless
                    // readdirplus hinting is off (acregmax <= 5 s or noac);
                    // v4 counts it as READDIR, in the same "plus" mode
                    // (its minor versions' init_caps carry
                    // NFS_CAP_READDIRPLUS, fs/nfs/nfs4proc.c).
                    let plus = self.opts.ac() && self.opts.acregmax_s() > 5;
                    let rop = if plus && !self.v4() {
                        RpcOp::Readdirplus
                    } else {
                        RpcOp::Readdir
                    };
                    self.emit(rop, id);
                    if let Some(i) = self.inodes.get_mut(&id) {
                        i.has_pages = true;
                        i.inval_atime = true; // R12: READDIR invalidates atime
                    }
                    if plus {
                        self.prime_children(id);
                    }
                }
            }
            OpKind::Write => {
                if let Some(i) = self.inodes.get_mut(&id) {
                    i.dirty_bytes += op.bytes.max(1);
                }
            }
            OpKind::Mkdir | OpKind::Unlink | OpKind::Rmdir => {
                if errno.is_some() && exists {
                    // EEXIST and friends: the lookup found the answer.
                    if let Some(dir) = self.walk_parents(&chain, uid) {
                        self.lookup(dir, id, Intent::Plain, true, op.kind == OpKind::Mkdir);
                    }
                    return;
                }
                let Some(dir) = self.walk_parents(&chain, uid) else {
                    return;
                };
                match op.kind {
                    OpKind::Mkdir => {
                        // exclusive create: no LOOKUP (`nfs_is_exclusive_create`).
                        self.lookup(dir, id, Intent::Target, false, true);
                        self.emit(RpcOp::Mkdir, id);
                        self.bump_server(id);
                        self.new_inode(id, true);
                        self.dir_modified(dir);
                        self.set_dentry(dir, id, true);
                    }
                    _ => {
                        let is_dir = op.kind == OpKind::Rmdir;
                        self.lookup(dir, id, Intent::Plain, exists, is_dir);
                        if !exists {
                            return;
                        }
                        self.return_delegation(id);
                        let rop = if is_dir { RpcOp::Rmdir } else { RpcOp::Remove };
                        self.emit(rop, id);
                        self.bump_server(id);
                        self.drop_inode(id);
                        self.dir_modified(dir);
                        self.set_dentry(dir, id, false);
                    }
                }
            }
            OpKind::Rename => self.rename(op, &chain, errno),
        }
    }

    fn known_dir(&self, p: PathId) -> bool {
        p == self.root || self.inodes.get(&p).is_some_and(|i| i.is_dir) || self.dirs.contains(&p)
    }

    /// A directory this client modified (CREATE, REMOVE, RENAME, MKDIR,
    /// RMDIR). The reply carries the directory's change before and after the
    /// operation (v3: wcc pre-op ctime + post-op attributes; v4: an atomic
    /// change_info4). When "before" equals the cached change attribute the
    /// client takes the new value as its own change: no access-cache zap, no
    /// forced lookup revalidation, only the readdir cache dropped
    /// (v3 `nfs_wcc_update_inode` inside `nfs_update_inode`; v4
    /// `nfs4_update_changeattr_locked`, which also marks ctime/mtime
    /// invalid). When the cached value is stale (someone else changed the
    /// directory and this client has not seen it yet) it is a change (R7):
    /// access cache zapped, `nfs_force_lookup_revalidate`, timeout reset.
    /// Lab: v3 dirmod runs, after_via_client_r1 of fpm_oc_rf0 (absorbed, 0
    /// LOOKUP) against fpm_nooc (stale, 30 LOOKUP).
    fn dir_modified(&mut self, dir: PathId) {
        let before = self.server_change_of(dir);
        self.bump_server(dir);
        let after = self.server_change_of(dir);
        let v4 = self.v4();
        let Some(i) = self.inodes.get_mut(&dir) else {
            return;
        };
        if i.change_seen == before {
            i.change_seen = after;
            i.has_pages = false;
            if v4 {
                let t = self.cur_t;
                i.attrtimeo_ts_us = t;
                i.read_cache_us = t;
                i.inval_times = true;
                return;
            }
        }
        // v3: post-op attributes go through `nfs_update_inode` (R5-R7);
        // v4 with a stale cache: the same effects as R7.
        self.refresh(dir, true);
    }

    fn return_delegation(&mut self, p: PathId) {
        if self.inodes.get(&p).is_some_and(|i| i.deleg) {
            self.emit(RpcOp::Delegreturn, p);
            if let Some(i) = self.inodes.get_mut(&p) {
                i.deleg = false;
            }
        }
    }

    fn open(&mut self, op: &Op, chain: &[PathId], exists: bool) {
        let path = chain[chain.len() - 1];
        let fl = op.flags();
        let uid = op.uid;
        let write = fl.has(Flags::O_WRONLY) || fl.has(Flags::O_RDWR);
        let create = fl.has(Flags::O_CREAT);
        let is_dir = fl.has(Flags::O_DIRECTORY) || self.known_dir(path);
        let Some(dir) = self.walk_parents(chain, uid) else {
            // open of the mount root itself: a directory open (R17 CTO).
            if self.opts.cto() {
                self.getattr(self.root);
            }
            return;
        };
        if op.errno.is_some() && exists {
            // refused (EACCES, EEXIST with O_EXCL, ...): the lookup happened.
            self.lookup(dir, path, Intent::Plain, true, is_dir);
            return;
        }
        // With O_CREAT a success does not say whether the file was there:
        // ask what the client knows (dentry), then the learned namespace;
        // unknown counts as new.
        let pre_exists =
            if create && exists {
                match self.dentries.get(&path) {
                    Some(d) => d.positive,
                    None => self.learned.get(&path).copied().unwrap_or_else(|| {
                        self.params.namespace.contains(&self.paths.string(path))
                    }),
                }
            } else {
                exists
            };
        let looked = self.lookup(
            dir,
            path,
            Intent::Open { write, create },
            pre_exists,
            is_dir,
        );
        if !exists {
            return;
        }
        let created = create && !pre_exists;
        if is_dir {
            // R17: directory opens get the CTO GETATTR in the lookup
            // (positive cached dentry); nothing at ->open.
            if !self.inodes.contains_key(&path) {
                self.lookup_rpc(dir, path, true, true);
            }
            self.push_open(op.pid, path, uid, false, false);
            return;
        }
        if self.v4() {
            self.v4_open(op, dir, path, write, created, looked);
            return;
        }
        // ---- NFSv3 regular file (R30) ----
        if created {
            // `nfs_create` -> CREATE; reply carries the new file's attributes
            // and the directory's post-op attributes.
            self.emit(RpcOp::Create, path);
            self.bump_server(path);
            self.new_inode(path, false);
            self.dir_modified(dir);
            self.set_dentry(dir, path, true);
            // `do_open`: FMODE_CREATED skips the permission check.
        } else {
            // `may_open` -> `nfs_permission(MAY_READ|MAY_OPEN)`: v3 checks.
            self.permission(path, uid);
            if write && fl.has(Flags::O_TRUNC) {
                self.emit(RpcOp::Setattr, path);
                self.bump_server(path);
                self.refresh(path, false);
            }
        }
        self.push_open(op.pid, path, uid, write, false);
    }

    /// R31-R33, R39-R41: v4 open of a regular file.
    fn v4_open(
        &mut self,
        op: &Op,
        dir: PathId,
        path: PathId,
        write: bool,
        created: bool,
        looked: bool,
    ) {
        let uid = op.uid;
        self.touch(path);
        let have = self.inodes.get(&path).is_some_and(|i| i.deleg);
        if have && !write {
            // `can_open_delegated`: no RPC; no CLOSE later.
            self.push_open(op.pid, path, uid, false, false);
            return;
        }
        // CLAIM_FH (OPEN_NOATTR) when a positive dentry is cached on v4.1+,
        // else CLAIM_NULL by name (OPEN). A LOOKUP just done leaves the
        // dentry cached, so the OPEN is by filehandle.
        let cached = !created && self.dentries.get(&path).is_some_and(|d| d.positive);
        let _ = looked;
        let rop = if cached && self.opts.vers() >= Vers::V4_1 {
            RpcOp::OpenNoattr
        } else {
            RpcOp::Open
        };
        self.emit(rop, path);
        if created {
            self.bump_server(path);
            self.new_inode(path, false);
            self.dir_modified(dir);
        } else {
            self.refresh(path, false);
        }
        let t = self.cur_t;
        // R41: Linux nfsd 6.1 offers read delegations for read-only opens
        // (write delegations only from 6.6).
        let grant = self.params.delegations && !write;
        if let Some(i) = self.inodes.get_mut(&path) {
            // R26: the OPEN compound's ACCESS result is cached.
            i.access.insert(uid, t);
            if grant {
                i.deleg = true;
                i.deleg_ref = true;
            }
            *i.open_state.entry(uid).or_insert(0) += 1;
        }
        if !cached {
            // CLAIM_NULL instantiates the dentry (`nfs_set_verifier`, tagged
            // delegated when a delegation came back). A CLAIM_FH open of a
            // cached dentry leaves its verifier alone, so such dentries are
            // revalidated against the parent later (lab: v4.1
            // dirmod_fpm_nooc before_r1, 30 LOOKUP with 182 delegations held).
            self.set_dentry(dir, path, true);
        }
        self.push_open(op.pid, path, uid, write, true);
    }

    fn push_open(&mut self, pid: u32, path: PathId, uid: u32, write: bool, server_state: bool) {
        self.opens.entry((pid, path)).or_default().push(OpenRec {
            uid,
            write,
            server_state,
        });
    }

    fn close(&mut self, op: &Op, path: PathId) {
        let Some(rec) = self.opens.get_mut(&(op.pid, path)).and_then(|v| v.pop()) else {
            return;
        };
        let dirty = self.inodes.get(&path).map_or(0, |i| i.dirty_bytes);
        if rec.write && dirty > 0 {
            // `nfs_file_flush` -> writeback: WRITE RPCs of wsize each; the
            // reply's attributes are this client's own change.
            let n = dirty.div_ceil(self.opts.wsize() as u64).max(1);
            for _ in 0..n {
                self.emit(RpcOp::Write, path);
            }
            self.bump_server(path);
            let server = self.server_change_of(path);
            let t = self.cur_t;
            if let Some(i) = self.inodes.get_mut(&path) {
                i.dirty_bytes = 0;
                i.change_seen = server;
                i.read_cache_us = t;
                i.has_pages = true;
            }
            // R32 `nfs_close_context` revalidates a written file at close
            // under CTO only if INVALID_CHANGE/SIZE is set or the timer
            // expired (`nfs_revalidate_inode(inode, CHANGE|SIZE)`); the
            // WRITE reply's post-op attributes have just refreshed it, so no
            // GETATTR (lab v3 dirmod modify_via_client: WRITE, no GETATTR).
            self.revalidate(path);
        }
        if rec.server_state {
            let last = match self.inodes.get_mut(&path) {
                Some(i) => {
                    let c = i.open_state.entry(rec.uid).or_insert(1);
                    *c = c.saturating_sub(1);
                    *c == 0
                }
                None => true,
            };
            if last {
                // R33 `__nfs4_close`: CLOSE when the last open of the state
                // goes; the compound carries a GETATTR unless delegated.
                self.emit(RpcOp::Close, path);
                if self.inodes.get(&path).is_some_and(|i| !i.deleg) {
                    self.refresh(path, false);
                }
            }
        }
    }

    /// R36, R37, R12: read(2)/mmap of a file.
    fn read(&mut self, path: PathId, name: &str, bytes: u64) {
        if !self.inodes.contains_key(&path) {
            return;
        }
        // `nfs_file_read` -> `nfs_revalidate_mapping` on every call.
        self.revalidate(path);
        let has = self.inodes[&path].has_pages;
        if has {
            return;
        }
        let size = self.params.file_sizes.get(name).copied().unwrap_or(bytes);
        let n = size.div_ceil(self.opts.rsize() as u64).max(1);
        for _ in 0..n {
            self.emit(RpcOp::Read, path);
        }
        let v4 = self.v4();
        if !v4 {
            // v3 READ replies carry post-op attributes (R5, R12).
            self.refresh(path, false);
        }
        if let Some(i) = self.inodes.get_mut(&path) {
            i.has_pages = true;
            if v4 {
                // R12 `nfs4_read_done` -> `nfs_invalidate_atime`.
                i.inval_atime = true;
            }
        }
    }

    fn rename(&mut self, op: &Op, chain: &[PathId], errno: Option<&str>) {
        let Some(to) = op.path2.as_deref().map(normalize) else {
            return;
        };
        if errno.is_some() || !self.under_root(&to) {
            // EINVAL for RENAME_NOREPLACE etc.: refused before any RPC.
            return;
        }
        let from = chain[chain.len() - 1];
        let to_chain = self.chain(&to);
        let to = to_chain[to_chain.len() - 1];
        let uid = op.uid;
        let is_dir = self.known_dir(from);
        let Some(fdir) = self.walk_parents(chain, uid) else {
            return;
        };
        self.lookup(fdir, from, Intent::Plain, true, is_dir);
        let Some(tdir) = self.walk_parents(&to_chain, uid) else {
            return;
        };
        self.lookup(tdir, to, Intent::Target, false, is_dir);
        self.return_delegation(to);
        self.emit(RpcOp::Rename, from);
        // move client state of `from` (and below) to `to`
        // (the paths below `from`, not every inode: a deploy's renames
        // each scanned the whole cache)
        let mut moved: Vec<PathId> = self
            .paths
            .subtree(from)
            .into_iter()
            .filter(|k| self.inodes.contains_key(k))
            .collect();
        moved.sort_unstable();
        self.inodes.remove(&to);
        for k in moved {
            let nk = self.paths.rebase(k, from, to);
            if let Some(mut i) = self.inodes.remove(&k) {
                // `nfs_rename`: the renamed inode's ctime changed ->
                // `nfs_mark_for_revalidate`.
                if k == from {
                    i.inval_change = true;
                }
                let c = self.server.get(&k).copied().unwrap_or(1);
                self.server.insert(nk, c);
                self.inodes.insert(nk, i);
            }
        }
        self.bump_server(from);
        self.dir_modified(fdir);
        if tdir != fdir {
            self.dir_modified(tdir);
        }
        // `d_move`: the dentry moves to the new name; the old name has no
        // dentry left (not a negative one).
        self.dentries.remove(&from);
        self.set_dentry(tdir, to, true);
    }
}

#[cfg(test)]
mod tests;
