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

use crate::column::{AtTime, Interned, InternedMaker};
use crate::nfs_setup::{NfsSetup, OpRpcs, OpRpcsLists, OpRpcsWriter};
use statstorm_nfs::client::WARM_PASSES;
use statstorm_nfs::{warm_shift, RpcCounts, WarmFilter};
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
/// (`--nfs-cache warm`) is fed first by lowering the side again: once for
/// the calls' span per mount, once per warm pass ([`warm_up`]), so no
/// call is kept.
pub(crate) fn run(
    w: &Workload,
    cfg: &PhpConfig,
    latency: &BTreeMap<OpKind, u64>,
    nfs: Option<(&NfsSetup, bool)>,
    background: &[&[Op]],
    list: bool,
) -> std::io::Result<SideRun> {
    let n = w.len();
    let target = statstorm_php::lower::targets(w, latency);
    let compiled = w.compiled_scripts();
    // (None: the index order)
    let order = crate::column::start_order(w)?;
    let lowering = Lowering {
        w,
        cfg,
        target: &target,
        compiled: &compiled,
        order: order.as_ref(),
    };
    let mut clients = match nfs {
        Some((s, proposed)) => {
            let mut c = s.clients(proposed);
            if s.warm {
                warm_up(&mut c, &mut |each| lowering.each_call(each))?;
            }
            Some(c)
        }
        None => None,
    };
    let mut low = Lowerer::new(w, cfg, &target, &compiled);
    let mut counts = InternedMaker::<Tally>::new();
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
            if replaying {
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
    // (each read back from the workload's store, when it has one, on a
    // thread of its own a chunk ahead of the lowering)
    statstorm_trace::ahead::each_ahead(n, &|k| lowering.request(k), &mut |_, got| {
        let (i, r) = got?;
        low.push(i, r);
        take(low.done(), &mut merge)?;
        if let Some(c) = clients.as_mut() {
            merge.release(Some(low.horizon()), &mut |at, o| apply(c, at, o));
        }
        Ok::<(), std::io::Error>(())
    })?;
    take(low.finish(), &mut merge)?;
    if let Some(c) = clients.as_mut() {
        merge.release(None, &mut |at, o| apply(c, at, o));
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let counts = counts.finish(n, Tally::new())?;
    let (rpcs, op_rpcs) = match nfs {
        None => (
            None,
            if local {
                Some(OpRpcsLists::Shared(
                    local_lists.finish(n, OpRpcs::default())?,
                ))
            } else {
                None
            },
        ),
        Some(_) => (
            Some(rpcs.finish()?),
            if listing {
                Some(written.finish(n)?)
            } else {
                None
            },
        ),
    };
    Ok(SideRun {
        counts,
        rpcs,
        op_rpcs,
    })
}

/// What a side lowers: the workload's requests in start order under
/// `cfg`, each read back from the store as needed.
struct Lowering<'a> {
    w: &'a Workload,
    cfg: &'a PhpConfig,
    target: &'a BTreeMap<OpKind, u64>,
    compiled: &'a std::collections::BTreeSet<String>,
    /// The requests by start (None: the index order).
    order: Option<&'a crate::column::Column<u32>>,
}

impl Lowering<'_> {
    /// The `k`-th request by start, and its index.
    fn request(
        &self,
        k: usize,
    ) -> std::io::Result<(usize, std::borrow::Cow<'_, statstorm_php::WorkRequest>)> {
        let i = match self.order {
            Some(o) => o.get(k)? as usize,
            None => k,
        };
        Ok((i, self.w.request(i)?))
    }

    /// Every call the requests make, lowered again, given to `each` in the
    /// replay's order (time, request, position), none kept.
    fn each_call(&self, each: &mut dyn FnMut(&Op)) -> std::io::Result<()> {
        let mut low = Lowerer::new(self.w, self.cfg, self.target, self.compiled);
        let mut merge = Merge {
            sources: HashMap::new(),
            heap: BinaryHeap::new(),
        };
        statstorm_trace::ahead::each_ahead(self.w.len(), &|k| self.request(k), &mut |_, got| {
            let (i, r) = got?;
            low.push(i, r);
            for (i, ops) in low.done() {
                merge.add(i, Source::Owned(ops));
            }
            merge.release(Some(low.horizon()), &mut |_, o| each(o));
            Ok::<(), std::io::Error>(())
        })?;
        for (i, ops) in low.finish() {
            merge.add(i, Source::Owned(ops));
        }
        merge.release(None, &mut |_, o| each(o));
        Ok(())
    }
}

/// Gives every call of a side's requests, in the replay's order, to the
/// function it is given.
type Walk<'a> = dyn FnMut(&mut dyn FnMut(&Op)) -> std::io::Result<()> + 'a;

/// Warms `c` as [`NfsSetup::replay_with`] does for `--nfs-cache warm`:
/// the requests' read-side calls ([`WarmFilter`]) repeated
/// [`WARM_PASSES`] times, moved back by the span of each mount's calls
/// ([`warm_shift`]), before the first call. `walk` gives every call of
/// the requests (not the background's) in the replay's order, and is
/// walked once for the spans and once per pass: nothing is kept.
fn warm_up(c: &mut crate::nfs_setup::Clients, walk: &mut Walk<'_>) -> std::io::Result<()> {
    let mut span: Vec<Option<(i64, i64)>> = vec![None; c.mounts()];
    walk(&mut |o| {
        if let Some(s) = c.mount_of(o).and_then(|m| span.get_mut(m)) {
            *s = Some(s.map_or((o.t_us, o.t_us), |(f, l)| (f.min(o.t_us), l.max(o.t_us))));
        }
    })?;
    for pass in (1..=WARM_PASSES).rev() {
        let back: Vec<i64> = span
            .iter()
            .map(|s| s.map_or(0, |(f, l)| warm_shift(f, l).saturating_mul(pass as i64)))
            .collect();
        let mut filter = WarmFilter::default();
        walk(&mut |o| {
            if filter.keep(o) {
                c.warm(o, &back);
            }
        })?;
    }
    Ok(())
}

/// The capture's recorded calls replayed on clients under the recorded
/// mount options (cold, or warmed by [`warm_up`] with `--nfs-cache warm`): every request's calls (read back one request
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
    // The requests are read in the order of their first calls, each just
    // before its first call is due: what is held is the requests in
    // flight. (The merge gives the calls in (time, request, position)
    // order whatever the order they are read in: a call is given only
    // once every request not yet read starts later.) Read in the split's
    // order instead, one request starting early but split late held every
    // request before it: 157 MB of calls on the 1 GB bench log.
    let mut order = crate::sorted::SortedSpill::<AtTime>::new();
    for i in 0..k {
        if let Some(t) = rec.first_call(i)? {
            order.push(AtTime(
                t,
                u32::try_from(i).map_err(|_| std::io::Error::other("more than 2^32 requests"))?,
            ))?;
        }
    }
    let order = order.finish();
    let mut clients = n.clients(false);
    if n.warm {
        warm_up(&mut clients, &mut |each| {
            each_recorded_call(rec, &order, &[], &mut |_, o| each(o))
        })?;
    }
    let mut rpcs = RpcsPerRequest::new(k, background.len());
    let mut failed: Option<std::io::Error> = None;
    each_recorded_call(rec, &order, background, &mut |at, o| {
        if let Err(e) = rpcs.add(at, &clients.apply(o)) {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    rpcs.finish()
}

/// Every recorded call of the requests (read in `order`, by first call)
/// and of the `background` groups (numbered after the requests), given to
/// `each` merged by (time, group, position).
fn each_recorded_call(
    rec: &crate::capture::Recorded,
    order: &crate::sorted::Sorted<AtTime>,
    background: &[&[Op]],
    each: &mut dyn FnMut(Given, &Op),
) -> std::io::Result<()> {
    let k = rec.len();
    let mut merge = Merge {
        sources: HashMap::new(),
        heap: BinaryHeap::new(),
    };
    for (b, ops) in background.iter().enumerate() {
        merge.add(k + b, Source::Borrowed(ops));
    }
    let mut firsts = order.iter();
    // (each request's calls decoded a chunk ahead of the replay; the
    // order read on that thread too)
    statstorm_trace::ahead::pipelined(
        order.len(),
        &mut |r: std::ops::Range<usize>| {
            use rayon::prelude::*;
            let next: Vec<std::io::Result<AtTime>> = firsts.by_ref().take(r.len()).collect();
            let read = |f: std::io::Result<AtTime>| {
                f.and_then(|AtTime(t, i)| Ok((t, i as usize, rec.calls(i as usize)?)))
            };
            if statstorm_trace::ahead::may_use_pool() {
                next.into_par_iter().map(read).collect()
            } else {
                next.into_iter().map(read).collect()
            }
        },
        &mut |_, got: std::io::Result<(i64, usize, Vec<Op>)>| {
            let (first, i, calls) = got?;
            merge.release(Some(first), each);
            merge.add(i, Source::Owned(calls));
            Ok::<(), std::io::Error>(())
        },
    )?;
    merge.release(None, each);
    Ok(())
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
            let none = BTreeMap::new();
            for (cfg, is_proposed, warm) in [
                (&recorded, false, false),
                (&proposed, true, false),
                (&recorded, false, true),
                (&proposed, true, true),
            ] {
                let flags = NfsFlags {
                    from_mount: (roots.len() == 1).then(|| "vers=3,relatime".into()),
                    nfs_root: roots.iter().map(|r| r.to_string()).collect(),
                    warm,
                    ..NfsFlags::default()
                };
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
            let mut by_warm = Vec::new();
            for warm in [false, true] {
                let flags = NfsFlags {
                    from_mount: (roots.len() == 1).then(|| "vers=3,relatime".into()),
                    nfs_root: roots.iter().map(|r| r.to_string()).collect(),
                    warm,
                    ..NfsFlags::default()
                };
                let n = NfsSetup::from_flags(&flags, &refs).unwrap().unwrap();
                let bg: Vec<&[Op]> = rec.background.iter().map(|b| b.ops.as_slice()).collect();
                let groups: Vec<&[Op]> = all.iter().map(Vec::as_slice).collect();
                let want = n.replay_with(&groups, &bg, false);
                let (got, got_bg) = replay_recorded(&n, &rec, &bg).unwrap();
                let got: Vec<RpcCounts> = got.to_vec().unwrap().into_iter().chain(got_bg).collect();
                assert_eq!(got, want, "{file} {roots:?} warm {warm}");
                assert!(
                    want.iter().any(|c| *c != RpcCounts::default()),
                    "{file}: no RPC at all"
                );
                by_warm.push(want);
            }
            // (the warm-up changes what the requests send)
            assert_ne!(by_warm[0], by_warm[1], "{file} {roots:?}: warm as cold");
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
        let w = Workload::of_requests(vec![
            req(
                1,
                0,
                50_000,
                vec![stat(1_000, "/m/p"), stat(40_000, "/m/q")],
            ),
            req(2, 5_000, 7_000, vec![stat(1_000, "/m/p")]),
            req(3, 20_000, 21_000, vec![stat(500, "/m/r")]),
        ]);
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
