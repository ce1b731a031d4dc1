//! One side of a prediction (the recorded settings, or the proposed ones)
//! lowered and replayed request by request: the [`Lowerer`] gives out each
//! request's syscalls once it is replayed whole, and the NFS clients take
//! every call in time order through a merge that releases a call once no
//! call given out later can come before it ([`Lowerer::horizon`]). A
//! request's calls are counted, replayed and dropped (for the latency
//! simulation, each call's start and RPCs are listed). Memory is bounded
//! by the requests in flight, not by the capture's length (the lifted
//! workload itself is still held: docs/predict-streaming.md).

use crate::nfs_setup::{NfsSetup, OpRpcs, OpRpcsLists};
use statstorm_nfs::RpcCounts;
use statstorm_php::lower::{count_by_syscall, Lowerer};
use statstorm_php::{PhpConfig, Workload};
use statstorm_trace::op::{Op, OpKind};
use statstorm_trace::share::Pool;
use statstorm_trace::{Tally, TallyPool};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;

/// What one side gives, per request of the workload (its order).
pub(crate) struct SideRun {
    /// Calls per syscall name.
    pub counts: Vec<Tally>,
    /// With NFS: RPCs per request (equal ones shared), and per background
    /// group.
    pub rpcs: Option<(Vec<Arc<RpcCounts>>, Vec<RpcCounts>)>,
    /// When listed, with one NFS mount: each call's start and RPCs, from
    /// the same replay as `rpcs` (the latency simulation's input).
    pub op_rpcs: Option<OpRpcsLists>,
}

/// Where the merge takes calls from: a request's calls given out by the
/// lowerer, or a background group's recorded calls.
enum Source<'a> {
    Owned(Vec<Op>),
    Borrowed(&'a [Op]),
}

impl Source<'_> {
    fn get(&self, i: usize) -> Option<&Op> {
        match self {
            Source::Owned(v) => v.get(i),
            Source::Borrowed(v) => v.get(i),
        }
    }

    fn len(&self) -> usize {
        match self {
            Source::Owned(v) => v.len(),
            Source::Borrowed(v) => v.len(),
        }
    }
}

/// Where a call given by [`Merge::release`] stands: its group, its
/// position in the group, and the group's number of calls.
#[derive(Clone, Copy)]
struct Given {
    group: usize,
    pos: usize,
    of: usize,
}

/// The calls of every group, merged by (time, group, position): the
/// order the batch replay sorts them in.
struct Merge<'a> {
    sources: HashMap<usize, Source<'a>>,
    heap: BinaryHeap<Reverse<(i64, usize, usize)>>,
}

impl<'a> Merge<'a> {
    fn add(&mut self, group: usize, s: Source<'a>) {
        if let Some(o) = s.get(0) {
            self.heap.push(Reverse((o.t_us, group, 0)));
            self.sources.insert(group, s);
        }
    }

    /// Applies every call before `upto` (all with None) to `apply`, with
    /// its group and position.
    fn release(&mut self, upto: Option<i64>, apply: &mut dyn FnMut(Given, &Op)) {
        while let Some(&Reverse((t, g, j))) = self.heap.peek() {
            if upto.is_some_and(|u| t >= u) {
                return;
            }
            self.heap.pop();
            let s = &self.sources[&g];
            let o = s.get(j).expect("queued call");
            apply(
                Given {
                    group: g,
                    pos: j,
                    of: s.len(),
                },
                o,
            );
            match s.get(j + 1) {
                Some(n) => self.heap.push(Reverse((n.t_us, g, j + 1))),
                None => {
                    self.sources.remove(&g);
                }
            }
        }
    }
}

/// Lowers every request of `w` under `cfg` (calls taking `latency`, as
/// `lower_with`), counts each request's calls and, with `nfs`, replays
/// them with the `background` groups' recorded calls on the side's NFS
/// clients (`proposed`: the proposed mount options); lists each call's
/// start and RPCs when `list` and there is one mount. A warm client start
/// (`--nfs-cache warm`) needs the whole side's calls first: the calls are
/// then kept and replayed after.
pub(crate) fn run(
    w: &Workload,
    cfg: &PhpConfig,
    latency: &BTreeMap<OpKind, u64>,
    nfs: Option<(&NfsSetup, bool)>,
    background: &[&[Op]],
    list: bool,
) -> std::io::Result<SideRun> {
    let n = w.len();
    let stream_nfs = nfs.filter(|(s, _)| !s.warm);
    let keep = nfs.is_some() && stream_nfs.is_none();
    let target = statstorm_php::lower::targets(w, latency);
    let compiled = w.compiled_scripts();
    let mut low = Lowerer::new(w, cfg, &target, &compiled);
    let mut counts: Vec<Tally> = vec![Tally::new(); n];
    let mut kept: Vec<Vec<Op>> = if keep {
        vec![Vec::new(); n]
    } else {
        Vec::new()
    };
    let mut clients = stream_nfs.map(|(s, proposed)| s.clients(proposed));
    let replaying = clients.is_some();
    // (only a replay counts RPCs)
    let mut rpcs = RpcsPerRequest::new(if replaying { n } else { 0 }, background.len());
    let mut merge = Merge {
        sources: HashMap::new(),
        heap: BinaryHeap::new(),
    };
    if replaying {
        for (b, ops) in background.iter().enumerate() {
            merge.add(n + b, Source::Borrowed(ops));
        }
    }
    // without NFS, each request's calls by kind for the latency simulation
    // (a call's cost: the capture's time for its kind)
    let local = list && nfs.is_none();
    let mut local_lists: Vec<std::sync::Arc<OpRpcs>> = if local {
        vec![std::sync::Arc::default(); n]
    } else {
        Vec::new()
    };
    let mut shared_lists = Pool::default();
    // requests repeat their counts: one copy of each
    let mut pool = TallyPool::new();
    let mut take = |done: Vec<(usize, Vec<Op>)>, merge: &mut Merge| {
        for (i, ops) in done {
            counts[i] = pool.share(count_by_syscall(&ops));
            if let Some(slot) = local_lists.get_mut(i) {
                let mut l = OpRpcs::default();
                for o in &ops {
                    l.count(o.kind);
                }
                l.shrink_to_fit();
                *slot = shared_lists.share(l);
            }
            if keep {
                kept[i] = ops;
            } else if replaying {
                merge.add(i, Source::Owned(ops));
            }
        }
    };
    // each call's start and RPCs, for the latency simulation (one mount)
    let listing = list && nfs.is_some_and(|(s, _)| s.single().is_some());
    // the lists of the requests in flight
    let mut op_rpcs: HashMap<usize, OpRpcs> = HashMap::new();
    let list_calls = listing && replaying;
    // each request's list written out once its last call is replayed
    let mut written = if listing && replaying {
        OpRpcsLists::on_disk(n)
    } else {
        OpRpcsLists::default()
    };
    let mut failed: Option<std::io::Error> = None;
    let mut scratch = Vec::new();
    let mut apply = |c: &mut crate::nfs_setup::Clients, at: Given, o: &Op| {
        let g = at.group;
        if list_calls && g < n {
            // a request's list sized by its calls, its RPCs' room trimmed
            // after its last (grown by doubling, both sides' lists held
            // up to twice their calls until the simulation)
            let l = op_rpcs.entry(g).or_default();
            if at.pos == 0 {
                l.reserve(at.of);
            }
            scratch.clear();
            rpcs.add(at, &c.apply_listed(o, Some(&mut scratch)));
            l.push(o.t_us, o.kind, &scratch);
            if at.pos + 1 == at.of {
                let l = op_rpcs.remove(&g).unwrap_or_default();
                if let Err(e) = written.put(g, l) {
                    failed.get_or_insert(e);
                }
            }
        } else {
            rpcs.add(at, &c.apply(o));
        }
    };
    // (None: the index order)
    let order = w.start_order()?;
    let at = |k: usize| order.as_ref().map_or(k, |o| o[k]);
    // (each read back from the workload's store, when it has one, on a
    // thread of its own a chunk ahead of the lowering)
    statstorm_trace::ahead::each_ahead(
        n,
        &|k| w.request(at(k)).map(|r| (at(k), r)),
        &mut |_, got| {
            let (i, r) = got?;
            low.push(i, r);
            take(low.done(), &mut merge);
            if let Some(c) = clients.as_mut() {
                merge.release(Some(low.horizon()), &mut |at, o| apply(c, at, o));
            }
            Ok::<(), std::io::Error>(())
        },
    )?;
    take(low.finish(), &mut merge);
    if let Some(c) = clients.as_mut() {
        merge.release(None, &mut |at, o| apply(c, at, o));
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let (rpcs, op_rpcs) = match (nfs, replaying) {
        (None, _) => (None, local.then_some(OpRpcsLists::Shared(local_lists))),
        (Some(_), true) => (Some(rpcs.finish()), listing.then_some(written)),
        // warm: the batch replay of the kept calls
        (Some((s, proposed)), false) => {
            let groups: Vec<&[Op]> = kept.iter().map(Vec::as_slice).collect();
            let listed = if listing {
                s.replay_listed(&groups, background, proposed)
            } else {
                None
            };
            let (mut all, lists) = match listed {
                Some((all, lists)) => (all, Some(OpRpcsLists::Memory(lists))),
                None => (s.replay_with(&groups, background, proposed), None),
            };
            let bg = all.split_off(n);
            (Some((shared(all), bg)), lists)
        }
    };
    Ok(SideRun {
        counts,
        rpcs,
        op_rpcs,
    })
}

/// The capture's recorded calls replayed on cold clients under the
/// recorded mount options: every request's calls (read back one request
/// at a time, in the split's order) and the `background` groups, merged
/// by (time, group, position) as [`NfsSetup::replay_with`] merges them.
/// RPCs per request (equal ones shared), and per background group. A
/// request's calls are
/// read when no call left to read can start before the merge's next one
/// (the least first call of the requests not yet read), so only the
/// requests in flight are held.
pub(crate) fn replay_recorded(
    n: &NfsSetup,
    rec: &crate::capture::Recorded,
    background: &[&[Op]],
) -> std::io::Result<(Vec<Arc<RpcCounts>>, Vec<RpcCounts>)> {
    let k = rec.len();
    let mut clients = n.clients(false);
    let mut rpcs = RpcsPerRequest::new(k, background.len());
    let mut merge = Merge {
        sources: HashMap::new(),
        heap: BinaryHeap::new(),
    };
    for (b, ops) in background.iter().enumerate() {
        merge.add(k + b, Source::Borrowed(ops));
    }
    // The requests are read in the order of their first calls, each just
    // before its first call is due: what is held is the requests in
    // flight. (The merge gives the calls in (time, request, position)
    // order whatever the order they are read in: a call is given only
    // once every request not yet read starts later.) Read in the split's
    // order instead, one request starting early but split late held every
    // request before it: 157 MB of calls on the 1 GB bench log.
    let mut order: Vec<(i64, usize)> = Vec::new();
    for i in 0..k {
        if let Some(t) = rec.first_call(i)? {
            order.push((t, i));
        }
    }
    order.sort_unstable();
    // (each request's calls decoded a chunk ahead of the replay)
    statstorm_trace::ahead::each_ahead(
        order.len(),
        &|k| rec.calls(order[k].1),
        &mut |k, calls| {
            let (first, i) = order[k];
            merge.release(Some(first), &mut |at, o| rpcs.add(at, &clients.apply(o)));
            merge.add(i, Source::Owned(calls?));
            Ok::<(), std::io::Error>(())
        },
    )?;
    merge.release(None, &mut |at, o| rpcs.add(at, &clients.apply(o)));
    Ok(rpcs.finish())
}

/// A replay's RPCs per request, counted while its calls are replayed and
/// then shared ([`Pool`]): what stays per request is a pointer; the
/// counts of the requests in flight and of the background groups are
/// the only ones held whole.
struct RpcsPerRequest {
    done: Vec<Arc<RpcCounts>>,
    open: HashMap<usize, RpcCounts>,
    background: Vec<RpcCounts>,
    pool: Pool<RpcCounts>,
}

impl RpcsPerRequest {
    /// For `n` requests (groups `0..n`) and `background` groups after.
    fn new(n: usize, background: usize) -> Self {
        let mut pool = Pool::default();
        let none = pool.share(RpcCounts::default());
        RpcsPerRequest {
            done: vec![none; n],
            open: HashMap::new(),
            background: vec![RpcCounts::default(); background],
            pool,
        }
    }

    /// Adds `c`, the RPCs of call `at`.
    fn add(&mut self, at: Given, c: &RpcCounts) {
        let n = self.done.len();
        if at.group >= n {
            if let Some(b) = self.background.get_mut(at.group - n) {
                b.merge(c);
            }
            return;
        }
        let acc = self.open.entry(at.group).or_default();
        acc.merge(c);
        if at.pos + 1 == at.of {
            let acc = self.open.remove(&at.group).unwrap_or_default();
            self.done[at.group] = self.pool.share(acc);
        }
    }

    /// Per request, then per background group.
    fn finish(mut self) -> (Vec<Arc<RpcCounts>>, Vec<RpcCounts>) {
        // (every request's last call was given: nothing is left open)
        for (g, acc) in std::mem::take(&mut self.open) {
            self.done[g] = self.pool.share(acc);
        }
        (self.done, self.background)
    }
}

/// `counts` per request, equal ones shared.
pub(crate) fn shared(counts: Vec<RpcCounts>) -> Vec<Arc<RpcCounts>> {
    let mut pool = Pool::default();
    counts.into_iter().map(|c| pool.share(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs_setup::NfsFlags;

    /// Captures whose requests overlap across workers (fpm) and run alone
    /// (cli), each with its NFS roots (two mounts in the last).
    const CASES: &[(&str, &[&str])] = &[
        ("php/fpm-race-obd.strace.gz", &["/tmp/statstorm-lab"]),
        (
            "php/fpm-wordpress-rf2.strace.zst",
            &["/usr/share/wordpress"],
        ),
        ("php/cli-tree-oc.strace.gz", &["/tmp/statstorm-lab"]),
        (
            "strace/fpm-opcache-bursts.strace.gz",
            &["/tmp/statstorm-fx/fpm-opcache-bursts"],
        ),
        (
            "php/fpm-race-obd.strace.gz",
            &["/tmp/statstorm-lab:vers=3", "/usr:vers=4.2"],
        ),
    ];

    /// The streaming side gives what lowering everything and replaying
    /// it in one sorted batch gives: the same calls per request and the
    /// same RPCs per request, on captures whose requests overlap across
    /// workers (fpm) and run alone (cli), with two mounts too.
    #[test]
    fn streaming_side_matches_the_batch_lower_and_replay() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        for &(file, roots) in CASES {
            let path = dir.join(file);
            let trace = statstorm_trace::read_paths(std::slice::from_ref(&path))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let split = statstorm_php::request::split_requests(&trace.events, &trace.strings);
            let w = statstorm_php::lift(&trace, &split);
            let (recorded, _) = statstorm_php::infer::inferred_config(&w).unwrap();
            let mut proposed = recorded.clone();
            proposed.apply_flags(&["opcache.enable=0"]).unwrap();
            let flags = NfsFlags {
                from_mount: (roots.len() == 1).then(|| "vers=3,relatime".into()),
                nfs_root: roots.iter().map(|r| r.to_string()).collect(),
                ..NfsFlags::default()
            };
            let none = BTreeMap::new();
            for (cfg, is_proposed) in [(&recorded, false), (&proposed, true)] {
                let batch = statstorm_php::lower::lower_with(&w, cfg, &none);
                let refs: Vec<&Op> = batch.iter().flatten().collect();
                let n = NfsSetup::from_flags(&flags, &refs).unwrap().unwrap();
                let groups: Vec<&[Op]> = batch.iter().map(Vec::as_slice).collect();
                let want = n.replay_with(&groups, &[], is_proposed);
                let got = run(&w, cfg, &none, Some((&n, is_proposed)), &[], false).unwrap();
                let counts: Vec<Tally> = batch.iter().map(|o| count_by_syscall(o)).collect();
                assert_eq!(got.counts, counts, "{file} {roots:?}: calls");
                let got_rpcs: Vec<RpcCounts> = got.rpcs.unwrap().0.iter().map(|c| **c).collect();
                assert_eq!(got_rpcs, want, "{file} {roots:?}: RPCs");
                assert!(got.op_rpcs.is_none(), "calls listed though not asked");
                assert!(
                    want.iter().any(|c| *c != RpcCounts::default()),
                    "{file}: no RPC at all"
                );
            }
        }
    }

    /// The recorded calls replayed request by request from the capture
    /// (written out to its temporary file) give what one sorted batch of
    /// them all gives, background activity included, on one mount and on
    /// two.
    #[test]
    fn recorded_replay_request_by_request_matches_the_batch() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        for &(file, roots) in CASES {
            let path = dir.join(file);
            let trace = statstorm_trace::read_paths(std::slice::from_ref(&path))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut fold = crate::capture::Fold::holding(5);
            for e in &trace.events {
                fold.push(e, &trace.strings);
            }
            let (_, rec, _) = fold.finish().unwrap();
            assert!(rec.spilled_bytes() > 0, "{file}: nothing written out");
            let all = rec.all().unwrap();
            let refs: Vec<&Op> = all.iter().flatten().collect();
            let flags = NfsFlags {
                from_mount: (roots.len() == 1).then(|| "vers=3,relatime".into()),
                nfs_root: roots.iter().map(|r| r.to_string()).collect(),
                ..NfsFlags::default()
            };
            let n = NfsSetup::from_flags(&flags, &refs).unwrap().unwrap();
            let bg: Vec<&[Op]> = rec.background.iter().map(|b| b.ops.as_slice()).collect();
            let groups: Vec<&[Op]> = all.iter().map(Vec::as_slice).collect();
            let want = n.replay_with(&groups, &bg, false);
            let (got, got_bg) = replay_recorded(&n, &rec, &bg).unwrap();
            let got: Vec<RpcCounts> = got.iter().map(|c| **c).chain(got_bg).collect();
            assert_eq!(got, want, "{file} {roots:?}");
            assert!(
                want.iter().any(|c| *c != RpcCounts::default()),
                "{file}: no RPC at all"
            );
        }
    }

    /// A request that ends while an earlier one is still running on
    /// another worker: its calls wait for the earlier one's (the first
    /// stat of a path makes the LOOKUP, and it belongs to the request that
    /// made it first in time, not to the one that ended first).
    #[test]
    fn a_request_ended_first_waits_for_the_earlier_calls_of_one_in_flight() {
        use statstorm_php::{PhpOp, PhpOpKind, WorkRequest};
        let stat = |off: i64, p: &str| PhpOp {
            t_off_us: off,
            stat_us: None,
            kind: PhpOpKind::Stat {
                path: p.into(),
                missing: false,
            },
        };
        let req = |pid: u32, start: i64, end: i64, ops: Vec<PhpOp>| WorkRequest {
            pid,
            start_us: start,
            end_us: end,
            request_time_us: start,
            cli: false,
            script: None,
            from_template: false,
            settings: None,
            ops,
        };
        // A: P at 1 ms, Q at 40 ms; B: P at 6 ms, ends at 7 ms; C starts
        // at 20 ms, when B has ended and A has not
        let w = Workload {
            requests: vec![
                req(
                    1,
                    0,
                    50_000,
                    vec![stat(1_000, "/m/p"), stat(40_000, "/m/q")],
                ),
                req(2, 5_000, 7_000, vec![stat(1_000, "/m/p")]),
                req(3, 20_000, 21_000, vec![stat(500, "/m/r")]),
            ],
            schema: String::new(),
            evidence: Default::default(),
            links: Default::default(),
            mtimes: Default::default(),
            file_cache: None,
            latency_us: Default::default(),
            lock_us: 0,
            stored: Default::default(),
        };
        let cfg = PhpConfig::default();
        let flags = NfsFlags {
            from_mount: Some("vers=3,relatime".into()),
            nfs_root: vec!["/m".into()],
            ..NfsFlags::default()
        };
        let n = NfsSetup::from_flags(&flags, &[]).unwrap().unwrap();
        let got = run(&w, &cfg, &BTreeMap::new(), Some((&n, false)), &[], false).unwrap();
        let (rpcs, _) = got.rpcs.unwrap();
        let lookups: Vec<u64> = rpcs
            .iter()
            .map(|c| c.of(statstorm_nfs::RpcOp::Lookup))
            .collect();
        assert_eq!(lookups, vec![2, 0, 1], "LOOKUPs per request: {rpcs:?}");
    }
}
