//! One side of a prediction (the recorded settings, or the proposed ones)
//! lowered and replayed request by request: the [`Lowerer`] gives out each
//! request's syscalls once it is replayed whole, and the NFS clients take
//! every call in time order through a merge that releases a call once no
//! call given out later can come before it ([`Lowerer::horizon`]). A
//! request's calls are counted, replayed and dropped (for the latency
//! simulation, each call's start and RPCs are listed). Memory is bounded
//! by the requests in flight, not by the capture's length: what stays per
//! request (its counts, its RPCs, where its listed calls lie) is written
//! out as the request is given out ([`crate::column::Interned`],
//! [`crate::column::Scattered`]) and read back by index.

use crate::column::{Interned, InternedMaker};
use crate::nfs_setup::{NfsSetup, OpRpcs, OpRpcsLists, OpRpcsWriter};
use statstorm_nfs::RpcCounts;
use statstorm_php::lower::{count_by_syscall, Lowerer};
use statstorm_php::{PhpConfig, Workload};
use statstorm_trace::op::{Op, OpKind};
use statstorm_trace::Tally;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// What one side gives, per request of the workload (its order).
pub(crate) struct SideRun {
    /// Calls per syscall name.
    pub counts: Interned<Tally>,
    /// With NFS: RPCs per request, and per background group.
    pub rpcs: Option<(Interned<RpcCounts>, Vec<RpcCounts>)>,
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
    let mut counts = InternedMaker::<Tally>::new();
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
    let mut local_lists = InternedMaker::<OpRpcs>::new();
    let mut take = |done: Vec<(usize, Vec<Op>)>, merge: &mut Merge| -> std::io::Result<()> {
        for (i, ops) in done {
            counts.put(i, count_by_syscall(&ops))?;
            if local {
                let mut l = OpRpcs::default();
                for o in &ops {
                    l.count(o.kind);
                }
                l.shrink_to_fit();
                local_lists.put(i, l)?;
            }
            if keep {
                kept[i] = ops;
            } else if replaying {
                merge.add(i, Source::Owned(ops));
            }
        }
        Ok(())
    };
    // each call's start and RPCs, for the latency simulation (one mount)
    let listing = list && nfs.is_some_and(|(s, _)| s.single().is_some());
    // the lists of the requests in flight
    let mut op_rpcs: HashMap<usize, OpRpcs> = HashMap::new();
    let list_calls = listing && replaying;
    // each request's list written out once its last call is replayed
    let mut written = OpRpcsWriter::new();
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
            if let Err(e) = rpcs.add(at, &c.apply_listed(o, Some(&mut scratch))) {
                failed.get_or_insert(e);
            }
            l.push(o.t_us, o.kind, &scratch);
            if at.pos + 1 == at.of {
                let l = op_rpcs.remove(&g).unwrap_or_default();
                if let Err(e) = written.put(g, l) {
                    failed.get_or_insert(e);
                }
            }
        } else if let Err(e) = rpcs.add(at, &c.apply(o)) {
            failed.get_or_insert(e);
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
            take(low.done(), &mut merge)?;
            if let Some(c) = clients.as_mut() {
                merge.release(Some(low.horizon()), &mut |at, o| apply(c, at, o));
            }
            Ok::<(), std::io::Error>(())
        },
    )?;
    take(low.finish(), &mut merge)?;
    if let Some(c) = clients.as_mut() {
        merge.release(None, &mut |at, o| apply(c, at, o));
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let counts = counts.finish(n, Tally::new())?;
    let (rpcs, op_rpcs) = match (nfs, replaying) {
        (None, _) => (
            None,
            if local {
                Some(OpRpcsLists::Shared(
                    local_lists.finish(n, OpRpcs::default())?,
                ))
            } else {
                None
            },
        ),
        (Some(_), true) => (
            Some(rpcs.finish()?),
            if listing {
                Some(written.finish(n)?)
            } else {
                None
            },
        ),
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
            (Some((shared(all)?, bg)), lists)
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
/// RPCs per request, and per background group. A request's calls are
/// read when no call left to read can start before the merge's next one
/// (the least first call of the requests not yet read), so only the
/// requests in flight are held.
pub(crate) fn replay_recorded(
    n: &NfsSetup,
    rec: &crate::capture::Recorded,
    background: &[&[Op]],
) -> std::io::Result<(Interned<RpcCounts>, Vec<RpcCounts>)> {
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
    let mut order = crate::sorted::SortedSpill::<First>::new();
    for i in 0..k {
        if let Some(t) = rec.first_call(i)? {
            order.push(First(t, i as u64))?;
        }
    }
    let order = order.finish();
    let mut firsts = order.iter();
    let mut failed: Option<std::io::Error> = None;
    // (each request's calls decoded a chunk ahead of the replay; the
    // order read on that thread too)
    statstorm_trace::ahead::pipelined(
        order.len(),
        &mut |r: std::ops::Range<usize>| {
            use rayon::prelude::*;
            let next: Vec<std::io::Result<First>> = firsts.by_ref().take(r.len()).collect();
            let read = |f: std::io::Result<First>| {
                f.and_then(|First(t, i)| Ok((t, i as usize, rec.calls(i as usize)?)))
            };
            if statstorm_trace::ahead::may_use_pool() {
                next.into_par_iter().map(read).collect()
            } else {
                next.into_iter().map(read).collect()
            }
        },
        &mut |_, got: std::io::Result<(i64, usize, Vec<Op>)>| {
            let (first, i, calls) = got?;
            merge.release(Some(first), &mut |at, o| {
                if let Err(e) = rpcs.add(at, &clients.apply(o)) {
                    failed.get_or_insert(e);
                }
            });
            merge.add(i, Source::Owned(calls));
            Ok::<(), std::io::Error>(())
        },
    )?;
    merge.release(None, &mut |at, o| {
        if let Err(e) = rpcs.add(at, &clients.apply(o)) {
            failed.get_or_insert(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    rpcs.finish()
}

/// A request's first call: its time, then the request.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct First(i64, u64);

impl crate::sorted::Keyed for First {
    type Key = (i64, u64);
    fn key(&self) -> (i64, u64) {
        (self.0, self.1)
    }
}

/// A replay's RPCs per request, counted while its calls are replayed and
/// written out once its last call is given ([`InternedMaker`]): what is
/// held whole is the counts of the requests in flight and of the
/// background groups.
struct RpcsPerRequest {
    n: usize,
    done: InternedMaker<RpcCounts>,
    open: HashMap<usize, RpcCounts>,
    background: Vec<RpcCounts>,
}

impl RpcsPerRequest {
    /// For `n` requests (groups `0..n`) and `background` groups after.
    fn new(n: usize, background: usize) -> Self {
        RpcsPerRequest {
            n,
            done: InternedMaker::new(),
            open: HashMap::new(),
            background: vec![RpcCounts::default(); background],
        }
    }

    /// Adds `c`, the RPCs of call `at`.
    fn add(&mut self, at: Given, c: &RpcCounts) -> std::io::Result<()> {
        let n = self.n;
        if at.group >= n {
            if let Some(b) = self.background.get_mut(at.group - n) {
                b.merge(c);
            }
            return Ok(());
        }
        let acc = self.open.entry(at.group).or_default();
        acc.merge(c);
        if at.pos + 1 == at.of {
            let acc = self.open.remove(&at.group).unwrap_or_default();
            self.done.put(at.group, acc)?;
        }
        Ok(())
    }

    /// Per request, then per background group.
    fn finish(mut self) -> std::io::Result<(Interned<RpcCounts>, Vec<RpcCounts>)> {
        // (every request's last call was given: nothing is left open)
        for (g, acc) in std::mem::take(&mut self.open) {
            self.done.put(g, acc)?;
        }
        Ok((
            self.done.finish(self.n, RpcCounts::default())?,
            self.background,
        ))
    }
}

/// `counts` per request, equal ones held once.
pub(crate) fn shared(counts: Vec<RpcCounts>) -> std::io::Result<Interned<RpcCounts>> {
    let n = counts.len();
    let mut m = InternedMaker::new();
    for (i, c) in counts.into_iter().enumerate() {
        m.put(i, c)?;
    }
    m.finish(n, RpcCounts::default())
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
                assert_eq!(
                    got.counts.to_vec().unwrap(),
                    counts,
                    "{file} {roots:?}: calls"
                );
                let got_rpcs: Vec<RpcCounts> = got.rpcs.unwrap().0.to_vec().unwrap();
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
            let got: Vec<RpcCounts> = got.to_vec().unwrap().into_iter().chain(got_bg).collect();
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
            .to_vec()
            .unwrap()
            .iter()
            .map(|c| c.of(statstorm_nfs::RpcOp::Lookup))
            .collect();
        assert_eq!(lookups, vec![2, 0, 1], "LOOKUPs per request: {lookups:?}");
    }
}
