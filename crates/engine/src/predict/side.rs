//! One side of a prediction (the recorded settings, or the proposed ones)
//! lowered and replayed request by request: the [`Lowerer`] gives out each
//! request's syscalls once it is replayed whole, and the NFS clients take
//! every call in time order through a merge that releases a call once no
//! call given out later can come before it ([`Lowerer::horizon`]). A
//! request's calls are counted, replayed and dropped; they are kept only
//! when the latency simulation needs them. Memory is bounded by the
//! requests in flight, not by the capture's length (the lifted workload
//! itself is still held: docs/predict-streaming.md).

use crate::nfs_setup::NfsSetup;
use statstorm_nfs::RpcCounts;
use statstorm_php::lower::{count_by_syscall, Lowerer};
use statstorm_php::{PhpConfig, Workload};
use statstorm_trace::op::{Op, OpKind};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

/// What one side gives, per request of the workload (its order).
pub(crate) struct SideRun {
    /// Calls per syscall name.
    pub counts: Vec<BTreeMap<String, u64>>,
    /// With NFS: RPCs per request, and per background group.
    pub rpcs: Option<(Vec<RpcCounts>, Vec<RpcCounts>)>,
    /// The calls themselves, when kept.
    pub ops: Option<Vec<Vec<Op>>>,
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

    /// Applies every call before `upto` (all with None) to `apply`.
    fn release(&mut self, upto: Option<i64>, apply: &mut dyn FnMut(usize, &Op)) {
        while let Some(&Reverse((t, g, j))) = self.heap.peek() {
            if upto.is_some_and(|u| t >= u) {
                return;
            }
            self.heap.pop();
            let s = &self.sources[&g];
            let o = s.get(j).expect("queued call");
            apply(g, o);
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
/// clients (`proposed`: the proposed mount options); keeps the calls
/// when `keep`. A warm client start (`--nfs-cache warm`) needs the whole
/// side's calls first: the calls are then kept and replayed after.
pub(crate) fn run(
    w: &Workload,
    cfg: &PhpConfig,
    latency: &BTreeMap<OpKind, u64>,
    nfs: Option<(&NfsSetup, bool)>,
    background: &[&[Op]],
    keep: bool,
) -> SideRun {
    let n = w.requests.len();
    let stream_nfs = nfs.filter(|(s, _)| !s.warm);
    let keep = keep || (nfs.is_some() && stream_nfs.is_none());
    let target = statstorm_php::lower::targets(w, latency);
    let compiled: BTreeSet<String> = w
        .requests
        .iter()
        .flat_map(|r| r.compiled())
        .map(str::to_string)
        .collect();
    let mut low = Lowerer::new(w, cfg, &target, &compiled);
    let mut counts: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); n];
    let mut kept: Vec<Vec<Op>> = if keep {
        vec![Vec::new(); n]
    } else {
        Vec::new()
    };
    let mut clients = stream_nfs.map(|(s, proposed)| s.clients(proposed));
    let mut rpcs = vec![RpcCounts::default(); n + background.len()];
    let mut merge = Merge {
        sources: HashMap::new(),
        heap: BinaryHeap::new(),
    };
    let replaying = clients.is_some();
    if replaying {
        for (b, ops) in background.iter().enumerate() {
            merge.add(n + b, Source::Borrowed(ops));
        }
    }
    let mut take = |done: Vec<(usize, Vec<Op>)>, merge: &mut Merge| {
        for (i, ops) in done {
            counts[i] = count_by_syscall(&ops);
            if keep {
                if replaying {
                    merge.add(i, Source::Owned(ops.clone()));
                }
                kept[i] = ops;
            } else if replaying {
                merge.add(i, Source::Owned(ops));
            }
        }
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (w.requests[i].start_us, i));
    for i in order {
        low.push(i, Cow::Borrowed(&w.requests[i]));
        take(low.done(), &mut merge);
        if let Some(c) = clients.as_mut() {
            merge.release(Some(low.horizon()), &mut |g, o| rpcs[g].merge(&c.apply(o)));
        }
    }
    take(low.finish(), &mut merge);
    if let Some(c) = clients.as_mut() {
        merge.release(None, &mut |g, o| rpcs[g].merge(&c.apply(o)));
    }
    let rpcs = match (nfs, replaying) {
        (None, _) => None,
        (Some(_), true) => {
            let bg = rpcs.split_off(n);
            Some((rpcs, bg))
        }
        // warm: the batch replay of the kept calls
        (Some((s, proposed)), false) => {
            let groups: Vec<&[Op]> = kept.iter().map(Vec::as_slice).collect();
            let mut all = s.replay_with(&groups, background, proposed);
            let bg = all.split_off(n);
            Some((all, bg))
        }
    };
    SideRun {
        counts,
        rpcs,
        ops: keep.then_some(kept),
    }
}
