//! From the aggregator's state to a [`Profile`]: sorting, top-N selection,
//! realpath walk summaries, bursts, requests.

use super::*;
use statstorm_php::request::RequestMode;
use std::sync::Arc;

fn names_map(v: impl IntoIterator<Item = (u32, u64)>, strings: &Interner) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (id, n) in v {
        *m.entry(strings.str(PathId(id)).into_owned()).or_insert(0) += n;
    }
    m
}

fn median(v: &mut [u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

/// Bursts: seconds with at least `BURST_FACTOR` x the median and
/// `BURST_MIN_CALLS` metadata calls, merged when closer than `BURST_GAP_S`.
pub fn find_bursts(start_s: i64, series: &[u64]) -> (f64, Vec<Burst>, Option<f64>) {
    let med = median(&mut series.to_vec());
    let thr = (med * BURST_FACTOR).max(BURST_MIN_CALLS as f64);
    let mut bursts: Vec<Burst> = Vec::new();
    for (i, &n) in series.iter().enumerate() {
        if (n as f64) < thr {
            continue;
        }
        let s = start_s + i as i64;
        match bursts.last_mut() {
            Some(b) if s - b.end_s <= BURST_GAP_S => {
                b.end_s = s;
                b.metadata_calls += n;
                b.peak_per_s = b.peak_per_s.max(n);
            }
            _ => bursts.push(Burst {
                start_s: s,
                end_s: s,
                metadata_calls: n,
                peak_per_s: n,
            }),
        }
    }
    let period = if bursts.len() >= 3 {
        let mut gaps: Vec<u64> = bursts
            .windows(2)
            .map(|w| (w[1].start_s - w[0].start_s) as u64)
            .collect();
        Some(median(&mut gaps))
    } else {
        None
    };
    (med, bursts, period)
}

/// The first `top` elements of `v` in `cmp` order, sorted; the rest is left
/// unsorted. `cmp` must be a total order (every caller breaks ties by a
/// unique key), so the result is the same as sorting everything.
pub(super) fn top_sorted<T>(
    v: &mut [T],
    top: usize,
    mut cmp: impl FnMut(&T, &T) -> Ordering,
) -> &[T] {
    let n = top.min(v.len());
    if n == 0 {
        return &[];
    }
    if n < v.len() {
        v.select_nth_unstable_by(n - 1, &mut cmp);
    }
    let head = &mut v[..n];
    head.sort_by(&mut cmp);
    head
}

/// Per directory: calls, ENOENT, distinct paths, (name id, calls).
type DirAgg = (u64, u64, u64, Vec<(u32, u64)>);

/// Leaves in `rows` ((path id, calls)) only those that can be among the
/// `top` busiest of any set of rows containing them: the rows with at
/// least the `top`-th highest calls (all ties kept, the tie-break by name
/// comes later). A row of the overall top has fewer than `top` rows
/// busier than itself in any subset, so pruning each part and then the
/// union of pruned parts keeps every row of the overall top, and exactly
/// the rows a plain selection over all rows would keep.
fn keep_top_candidates(rows: &mut Vec<(u32, u64)>, top: usize) {
    if top == 0 {
        rows.clear();
        return;
    }
    if rows.len() <= top {
        return;
    }
    let mut calls: Vec<u64> = rows.iter().map(|r| r.1).collect();
    let (_, &mut least, _) = calls.select_nth_unstable_by(top - 1, |x, y| y.cmp(x));
    rows.retain(|r| r.1 >= least);
}

pub(super) fn build_profile(
    mut a: Analyzer,
    plan: StreamPlan,
    strings: &Interner,
    input: InputInfo,
    top: usize,
) -> Profile {
    let durations = a.durations;
    // Totals by syscall.
    let mut by_syscall: BTreeMap<String, SyscallTotals> = BTreeMap::new();
    let mut errors = 0;
    let mut syscall_time = 0u64;
    let mut metadata_time = 0u64;
    let mut add = |name: String, na: &NameAgg, metadata: bool| {
        errors += na.errors;
        syscall_time += na.time_us;
        if metadata {
            metadata_time += na.time_us;
        }
        let mut ebe = BTreeMap::new();
        for &(e, n) in &na.errnos {
            *ebe.entry(strings.str(PathId(e)).into_owned()).or_insert(0) += n;
        }
        by_syscall.insert(
            name,
            SyscallTotals {
                calls: na.calls,
                errors: na.errors,
                errors_by_errno: ebe,
                time_us: durations.then_some(na.time_us),
                mean_us: (na.timed > 0).then(|| na.time_us as f64 / na.timed as f64),
                metadata,
            },
        );
    };
    for na in a.kinds.iter() {
        if na.calls == 0 {
            continue;
        }
        let name = na
            .name
            .map(|p| strings.str(p).into_owned())
            .unwrap_or_default();
        let metadata = Kind::from_name(name.as_bytes()).is_metadata();
        add(name, na, metadata);
    }
    for na in &a.other {
        if let Some(name) = na.name {
            add(strings.str(name).into_owned(), na, false);
        }
    }
    // Paths and directories, over the path records on every core: at the
    // end of the run only this thread is left busy. The path counts and
    // the rows that can be in the path top (see `keep_top_candidates`)
    // come from one pass in parts (three passes one after the other took
    // ~8 ms more on the bench log); beside it, directories are added up
    // by the index each path got when first seen (`Analyzer::path_dir`).
    // Every order of the adding gives the same rows (names are summed into
    // sorted maps below, the tops are sorted in full).
    #[derive(Default)]
    struct Part {
        enoent: u64,
        paths: u64,
        /// (path id, calls): candidates for the path top.
        rows: Vec<(u32, u64)>,
    }
    fn add_names(e: &mut DirAgg, names: impl IntoIterator<Item = (u32, u64)>) {
        for (n, c) in names {
            match e.3.iter_mut().find(|x| x.0 == n) {
                Some(x) => x.1 += c,
                None => e.3.push((n, c)),
            }
        }
    }
    // Pieces of at least a thread's share: rayon only hands work to the
    // pool when it splits, and it splits only into pieces no shorter than
    // this (`len / threads + 1`, used before, allowed no split at all, so
    // everything ran on this thread).
    let part = (a.path_hot.len() / rayon::current_num_threads().max(1)).max(1);
    let paths_part = || {
        a.path_hot
            .par_iter()
            .with_min_len(part)
            .enumerate()
            .fold(Part::default, |mut p, (id, pa)| {
                if pa.kind == KIND_PATH {
                    p.enoent += pa.enoent;
                    p.paths += 1;
                    p.rows.push((id as u32, pa.calls));
                }
                p
            })
            .map(|mut p| {
                keep_top_candidates(&mut p.rows, top);
                p
            })
            .reduce(Part::default, |mut x, y| {
                x.enoent += y.enoent;
                x.paths += y.paths;
                x.rows.extend(y.rows);
                keep_top_candidates(&mut x.rows, top);
                x
            })
    };
    let dirs_part = || {
        let mut dirs: Vec<DirAgg> = Vec::new();
        dirs.resize_with(a.dirs.len(), Default::default);
        for (id, pa) in a.path_hot.iter().enumerate() {
            if pa.kind == KIND_PATH {
                let e = &mut dirs[a.path_dir[id] as usize];
                e.0 += pa.calls;
                e.1 += pa.enoent;
                e.2 += 1;
                add_names(e, pa.iter(&a.path_more));
            }
        }
        dirs
    };
    let (
        Part {
            enoent: enoent_total,
            paths: distinct_paths,
            rows: mut path_rows,
        },
        dirs,
    ) = rayon::join(paths_part, dirs_part);
    let path_rows = top_sorted(&mut path_rows, top, |x, y| {
        y.1.cmp(&x.1)
            // Lazily: most pairs differ in calls, and reading the two
            // paths (cold, among 100,000s) for every comparison was most of
            // the serial time after the parse.
            .then_with(|| strings.bytes(PathId(x.0)).cmp(strings.bytes(PathId(y.0))))
    });
    let distinct_dirs = dirs.len() as u64;
    let dir_name = |d: u32| a.dirs.bytes(PathId(d));
    let mut dir_rows: Vec<(u32, DirAgg)> = dirs
        .into_iter()
        .enumerate()
        .map(|(d, agg)| (d as u32, agg))
        .collect();
    let dir_rows = top_sorted(&mut dir_rows, top, |x, y| {
        y.1 .0
            .cmp(&x.1 .0)
            .then_with(|| dir_name(x.0).cmp(dir_name(y.0)))
    });
    let paths: Vec<PathRow> = path_rows
        .iter()
        .map(|&(id, _)| (id, &a.path_hot[id as usize]))
        .map(|(id, pa)| PathRow {
            path: strings.str(PathId(id)).into_owned(),
            calls: pa.calls,
            errors: pa.errors,
            enoent: pa.enoent,
            by_syscall: names_map(pa.iter(&a.path_more), strings),
        })
        .collect();
    let dirs: Vec<DirRow> = dir_rows
        .iter()
        .map(|(d, (c, en, dp, bn))| DirRow {
            dir: String::from_utf8_lossy(dir_name(*d)).into_owned(),
            calls: *c,
            enoent: *en,
            distinct_paths: *dp,
            by_syscall: names_map(bn.iter().copied(), strings),
        })
        .collect();

    // Processes.
    let mut wall = 0u64;
    let processes: Vec<ProcessRow> = a
        .proc_order
        .iter()
        .map(|&si| {
            let p = &a.procs[si as usize];
            let (first_us, last_us) = (p.timed.then_some(p.first_us), p.timed.then_some(p.last_us));
            if let (Some(f), Some(l)) = (first_us, last_us) {
                wall += (l - f).max(0) as u64;
            }
            ProcessRow {
                pid: p.pid,
                comm: a.comms.get(&p.pid).cloned(),
                events: p.events,
                metadata_calls: p.metadata,
                errors: p.errors,
                time_us: durations.then_some(p.time_us),
                metadata_time_us: durations.then_some(p.metadata_time_us),
                first_us,
                last_us,
            }
        })
        .collect();

    // Requests: the rows made as their units closed, in time order, and
    // each list of calls per syscall they hold made a map once.
    let mut by_list: HashMap<u32, Arc<BTreeMap<String, u64>>> = HashMap::new();
    for &list in &a.row_lists {
        by_list.insert(
            list,
            Arc::new(names_map(a.tallies.names(list, &a.ix_name), strings)),
        );
    }
    let requests = Rows::new(std::mem::take(&mut a.rows).finish(), by_list, durations);
    let summary = match RequestsSummary::of(&requests, top) {
        Ok(s) => s,
        Err(e) => {
            a.rows_error.get_or_insert(e);
            RequestsSummary::default()
        }
    };
    let (total_repeats, rewalks) = (a.total_repeats, a.rewalks);

    // Realpath walks by file.
    let mut wf: Vec<(u32, u64, u64)> = a
        .walks
        .iter()
        .enumerate()
        .filter(|(_, w)| w.0 > 0)
        .map(|(id, w)| (id as u32, w.0, w.1))
        .collect();
    let walks: u64 = wf.iter().map(|v| v.1).sum();
    let walk_lstats: u64 = wf.iter().map(|v| v.2).sum();
    let files = wf.len() as u64;
    let wf = top_sorted(&mut wf, top, |x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let realpath = Realpath {
        walks,
        lstats: walk_lstats,
        files,
        rewalks,
        requests_with_walks: summary.with_walks,
        deepest_first: a.walks_deepest_first,
        shallowest_first: a.walks_shallowest_first,
        by_file: wf
            .iter()
            .map(|&(id, w, l)| WalkFile {
                path: strings.str(PathId(id)).into_owned(),
                walks: w,
                lstats: l,
            })
            .collect(),
    };

    // Time series and bursts.
    let (start_s, series) = match (a.per_sec.keys().min(), a.per_sec.keys().max()) {
        (Some(&lo), Some(&hi)) if hi - lo < 10_000_000 => {
            let mut v = vec![0u64; (hi - lo + 1) as usize];
            for (&s, &n) in &a.per_sec {
                v[(s - lo) as usize] += n;
            }
            (Some(lo), v)
        }
        _ => (None, Vec::new()),
    };
    let (median_per_s, bursts, period) = find_bursts(start_s.unwrap_or(0), &series);
    let timeseries = TimeSeries {
        start_s,
        max_per_s: series.iter().copied().max().unwrap_or(0),
        metadata_per_s: series,
        median_per_s,
        burst_period_s: period,
    };

    let (req_wall, req_md) = (summary.wall_us, summary.metadata_time_us);
    let split = plan.mode != RequestMode::Whole && a.timestamps;
    let totals = Totals {
        events: a.events,
        metadata_calls: a.metadata,
        errors,
        enoent: enoent_total,
        distinct_paths,
        distinct_dirs,
        realpath_walks: walks,
        walk_lstats,
        repeats: total_repeats,
        syscall_time_us: durations.then_some(syscall_time),
        metadata_time_us: durations.then_some(metadata_time),
        traced_wall_us: (a.timestamps).then_some(wall),
        metadata_share_of_wall: (durations && a.timestamps && wall > 0)
            .then(|| metadata_time as f64 / wall as f64),
        request_wall_us: split.then_some(req_wall),
        metadata_share_of_requests: (split && durations && req_wall > 0)
            .then(|| req_md as f64 / req_wall as f64),
        by_syscall,
    };
    let c = &a.counted;
    let counts = (c.lines > 0).then(|| CountsInfo {
        count_lines: c.lines,
        windows: c.windows,
        mean_window_s: (c.windows > 0).then(|| c.window_us as f64 / c.windows as f64 / 1e6),
        map_full_calls: c.map_full,
        accepts: c.accepts,
        metadata_per_accept: (c.accepts > 0).then(|| a.metadata as f64 / c.accepts as f64),
        unobservable: vec!["requests", "realpath_walks", "repeats"],
    });
    let mut p = Profile {
        schema: SCHEMA,
        input,
        has_timestamps: a.timestamps,
        has_durations: durations,
        totals,
        paths,
        dirs,
        processes,
        request_split: RequestsInfo {
            mode: plan.mode,
            note: plan.note.clone(),
            count: plan.requests,
        },
        requests,
        requests_summary: summary,
        requests_error: a.rows_error.take().map(Arc::new),
        realpath,
        timeseries,
        bursts,
        counts,
        findings: Vec::new(),
    };
    p.findings = findings::findings(&p);
    p
}
