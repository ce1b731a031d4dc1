//! Every run of the NFS lab (../shared/fixtures/nfs-lab/runs.jsonl) as a
//! test case: per block (vers + option set) a fresh client with the block's
//! mount options is fed each run's strace in time order (fpm series files
//! hold several runs; RPCs are attributed to a run by its start/end), the
//! `modify_on_server` runs feed their `changed_paths` as server changes, and
//! the model's per-op counts are compared run by run with the RPC deltas
//! measured from `/proc/self/mountstats`.
//!
//! Tolerance (issue 4): per column, |model - lab| <= max(5% of lab, 2).
//! At least 97% of runs must match in every column; every run that misses is
//! listed in `KNOWN_MISSES` with the rule at stake.
//!
//! The full table is printed to stdout and written to
//! `target/nfs-lab-table.txt` (under the workspace root).

use serde_json::Value;
use statstorm_nfs::client::normalize;
use statstorm_nfs::{Client, ClientParams, MountOptions, RpcCounts, RpcOp, ServerChange};
use statstorm_trace::op::{Normalizer, Op, OpKind};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

const NFS_ROOT: &str = "/mnt/nfs";
const MIN_MATCH_PCT: f64 = 97.0;
const TOL_PCT: f64 = 5.0;
const TOL_ABS: u64 = 2;

/// Runs known to miss, with the rule at stake. Keyed by (vers, scenario, run).
const KNOWN_MISSES: &[(&str, &str, &str, &str)] = &[];

fn lab_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crate is at <root>/crates/nfs");
    root.join("../shared/fixtures/nfs-lab")
}

fn table_path() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crate is at <root>/crates/nfs");
    root.join("target/nfs-lab-table.txt")
}

struct Run {
    vers: String,
    oset: String,
    mount_options: String,
    scenario: String,
    run: String,
    kind: String,
    start_us: i64,
    end_us: i64,
    rpc: RpcCounts,
    strace: Option<String>,
    changed_paths: Vec<String>,
    delegations_held: Option<u64>,
}

fn secs_to_us(v: &Value) -> i64 {
    (v.as_f64().expect("number") * 1e6).round() as i64
}

fn load_runs(dir: &Path) -> Vec<Run> {
    let text = std::fs::read_to_string(dir.join("runs.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join("runs.jsonl").display()));
    let mut runs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("runs.jsonl:{}: {e}", n + 1));
        let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
        let mut rpc = RpcCounts::default();
        if let Some(m) = v["rpc"].as_object() {
            for (k, n) in m {
                let op = RpcOp::from_name(k).unwrap_or_else(|| {
                    panic!("runs.jsonl:{}: unknown RPC {k}", n.as_u64().unwrap_or(0))
                });
                rpc.add(op, n.as_u64().expect("count"));
            }
        }
        runs.push(Run {
            vers: s("vers"),
            oset: s("oset"),
            mount_options: s("mount_options"),
            scenario: s("scenario"),
            run: s("run"),
            kind: s("kind"),
            start_us: secs_to_us(&v["start"]),
            end_us: secs_to_us(&v["end"]),
            rpc,
            strace: v["strace"].as_str().map(str::to_string),
            delegations_held: v["delegations_held"].as_u64(),
            changed_paths: v["changed_paths"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| p.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    runs
}

/// Ops on NFS paths of one strace file. The Normalizer follows fds
/// duplicated by dup2/fcntl(F_DUPFD) (a shell's `> file` redirection):
/// writes through the alias go to the file and the file is closed when its
/// last fd is replaced or closed.
fn ops_of(path: &Path) -> Vec<Op> {
    let trace = statstorm_trace::read_path(path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !trace.events.is_empty(),
        "{}: no events parsed",
        path.display()
    );
    let mut norm = Normalizer::new();
    let on_nfs = |p: &str| p == NFS_ROOT || p.starts_with("/mnt/nfs/");
    trace
        .events
        .iter()
        .filter_map(|ev| norm.push(ev, &trace.strings))
        .filter(|op| on_nfs(&op.path) || op.path2.as_deref().is_some_and(on_nfs))
        .collect()
}

/// Columns compared (OPEN includes OPEN_NOATTR).
const COLS: [&str; 8] = [
    "GETATTR",
    "LOOKUP",
    "ACCESS",
    "READ",
    "OPEN",
    "CLOSE",
    "READDIRPLUS",
    "total",
];

fn col(c: &RpcCounts, name: &str) -> u64 {
    match name {
        "OPEN" => c.of(RpcOp::Open) + c.of(RpcOp::OpenNoattr),
        "total" => c.total(),
        n => c.get(n),
    }
}

fn within(model: u64, lab: u64) -> bool {
    let tol = ((lab as f64 * TOL_PCT / 100.0).floor() as u64).max(TOL_ABS);
    model.abs_diff(lab) <= tol
}

fn layout(dir: &Path) -> (HashSet<String>, HashMap<String, u64>) {
    let text = std::fs::read_to_string(dir.join("workload/layout.txt")).expect("layout.txt");
    let mut names = HashSet::new();
    let mut sizes = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 3 {
            continue;
        }
        let p = normalize(&format!("{NFS_ROOT}/{}", f[2]));
        if f[0] == "f" {
            sizes.insert(p.clone(), f[1].parse().expect("size"));
        }
        names.insert(p);
    }
    (names, sizes)
}

/// Mount options, model parameters, NFS ops (all strace files of the
/// block, each once, in time order) and server changes of one block.
fn block_input(
    dir: &Path,
    block: &[&Run],
    names: &HashSet<String>,
    sizes: &HashMap<String, u64>,
    trace_cache: &mut HashMap<String, Vec<Op>>,
) -> (MountOptions, ClientParams, Vec<Op>, Vec<ServerChange>) {
    let (vers, oset) = (&block[0].vers, &block[0].oset);
    let opts = MountOptions::parse(&block[0].mount_options)
        .unwrap_or_else(|e| panic!("block {vers}/{oset}: {e}"));
    let mut params = ClientParams::new(NFS_ROOT);
    // README: the lab's v4.1 server (Linux nfsd) grants read delegations.
    params.delegations = opts.vers().is_v4();
    params.namespace = names.clone();
    params.file_sizes = sizes.clone();
    // Events: each strace file once (series files hold several runs).
    let mut ops: Vec<Op> = Vec::new();
    let mut seen_files = HashSet::new();
    for r in block {
        if let Some(s) = &r.strace {
            if seen_files.insert(s.clone()) {
                let v = trace_cache
                    .entry(s.clone())
                    .or_insert_with(|| ops_of(&dir.join(s)))
                    .clone();
                ops.extend(v);
            }
        }
    }
    ops.sort_by_key(|o| o.t_us);
    let mut changes: Vec<ServerChange> = Vec::new();
    for r in block {
        for p in &r.changed_paths {
            // the listing names the directory that changed itself
            changes.push(ServerChange {
                t_us: r.start_us,
                path: p.clone(),
                entry: false,
            });
        }
    }
    changes.sort_by_key(|c| c.t_us);
    (opts, params, ops, changes)
}

#[test]
fn lab_runs_match_the_model() {
    let dir = lab_dir();
    assert!(
        dir.join("runs.jsonl").exists(),
        "lab fixtures missing at {}",
        dir.display()
    );
    let runs = load_runs(&dir);
    assert!(runs.len() >= 100, "only {} runs", runs.len());
    let (names, sizes) = layout(&dir);

    // blocks in first-appearance order
    let mut blocks: Vec<(String, String)> = Vec::new();
    for r in &runs {
        let k = (r.vers.clone(), r.oset.clone());
        if !blocks.contains(&k) {
            blocks.push(k);
        }
    }
    let mut rows: Vec<String> = Vec::new();
    let mut misses: Vec<String> = Vec::new();
    let mut matched = 0usize;
    let (mut deleg_total, mut deleg_equal) = (0usize, 0usize);
    let mut trace_cache: HashMap<String, Vec<Op>> = HashMap::new();
    for (vers, oset) in &blocks {
        let block: Vec<&Run> = runs
            .iter()
            .filter(|r| &r.vers == vers && &r.oset == oset)
            .collect();
        let (opts, params, ops, changes) =
            block_input(&dir, &block, &names, &sizes, &mut trace_cache);
        let mut client = Client::new(opts.clone(), params);
        let mut rpcs = Vec::new();
        let mut ci = 0;
        // delegations held at each run's end (README: read after the run)
        let mut ends: Vec<(i64, usize)> = block
            .iter()
            .enumerate()
            .map(|(i, r)| (r.end_us, i))
            .collect();
        ends.sort();
        let mut held = vec![0usize; block.len()];
        let mut ei = 0;
        for op in &ops {
            while ei < ends.len() && ends[ei].0 < op.t_us {
                held[ends[ei].1] = client.delegations_held();
                ei += 1;
            }
            while ci < changes.len() && changes[ci].t_us <= op.t_us {
                client.server_change(&changes[ci]);
                ci += 1;
            }
            client.apply(op);
            rpcs.extend(client.take_rpcs());
        }
        while ei < ends.len() {
            held[ends[ei].1] = client.delegations_held();
            ei += 1;
        }
        while ci < changes.len() {
            client.server_change(&changes[ci]);
            ci += 1;
        }
        rpcs.extend(client.take_rpcs());

        rows.push(format!(
            "== block vers={vers} oset={oset} ({} runs, {} NFS ops) options: {}",
            block.len(),
            ops.len(),
            opts.render()
        ));
        rows.push(format!(
            "{:<40} {}  {:>8}",
            "run",
            COLS.map(|c| format!("{:>15}", c)).join(" "),
            "deleg"
        ));
        for (bi, r) in block.iter().enumerate() {
            let mut model = RpcCounts::default();
            for x in rpcs
                .iter()
                .filter(|x| x.t_us >= r.start_us && x.t_us <= r.end_us)
            {
                model.add(x.op, 1);
            }
            let mut ok = true;
            let mut cells = Vec::new();
            for c in COLS {
                let (m, l) = (col(&model, c), col(&r.rpc, c));
                let hit = within(m, l);
                ok &= hit;
                cells.push(format!(
                    "{:>15}",
                    format!("{m}/{l}{}", if hit { "" } else { "!" })
                ));
            }
            let name = format!("{} {}", r.scenario, r.run);
            // NFS_LAB_DUMP="3 dirmod_cli modify_via_client" prints that run's RPCs.
            if std::env::var("NFS_LAB_DUMP").ok().as_deref() == Some(&format!("{vers} {name}")) {
                for x in rpcs
                    .iter()
                    .filter(|x| x.t_us >= r.start_us && x.t_us <= r.end_us)
                {
                    println!("  {} {} {} pid={}", x.t_us, x.op, x.path, x.pid);
                }
            }
            let deleg = match r.delegations_held {
                Some(l) => {
                    deleg_total += 1;
                    if held[bi] as u64 == l {
                        deleg_equal += 1;
                    }
                    format!("{}/{l}", held[bi])
                }
                None => "-".into(),
            };
            rows.push(format!(
                "{:<40} {}  {:>8}  {}",
                format!("{name} [{}]", r.kind),
                cells.join(" "),
                deleg,
                if ok { "ok" } else { "MISS" }
            ));
            if ok {
                matched += 1;
            } else {
                misses.push(format!("{vers} {} {}", r.scenario, r.run));
                rows.push(format!("    model: {model}\n    lab:   {}", r.rpc));
            }
        }
    }
    let pct = 100.0 * matched as f64 / runs.len() as f64;
    rows.push(format!(
        "matched {matched}/{} runs = {pct:.1}% (cells model/lab, '!' = outside max({TOL_PCT}%, {TOL_ABS}))",
        runs.len()
    ));
    rows.push(format!(
        "delegations held after the run (model/lab): equal in {deleg_equal}/{deleg_total} v4 runs"
    ));
    let table = rows.join("\n");
    println!("{table}");
    let tp = table_path();
    if let Some(p) = tp.parent() {
        let _ = std::fs::create_dir_all(p);
    }
    std::fs::write(&tp, &table).unwrap_or_else(|e| panic!("{}: {e}", tp.display()));

    let listed: HashSet<String> = KNOWN_MISSES
        .iter()
        .map(|(v, s, r, _)| format!("{v} {s} {r}"))
        .collect();
    let unlisted: Vec<&String> = misses.iter().filter(|m| !listed.contains(*m)).collect();
    for m in listed.iter().filter(|m| !misses.contains(m)) {
        println!("note: listed miss now matches: {m}");
    }
    assert!(
        unlisted.is_empty(),
        "runs missing the lab and not listed in KNOWN_MISSES: {unlisted:?}"
    );
    assert!(
        pct >= MIN_MATCH_PCT,
        "only {pct:.1}% of runs match (need {MIN_MATCH_PCT}%)"
    );
}

/// Every /proc/mounts NFS option string of the lab round-trips: parse ->
/// render -> parse gives the same options, with no unknown option.
#[test]
fn lab_mount_options_round_trip() {
    let runs = load_runs(&lab_dir());
    let mut seen = HashSet::new();
    for r in &runs {
        if !seen.insert(r.mount_options.clone()) {
            continue;
        }
        let a = MountOptions::parse(&r.mount_options)
            .unwrap_or_else(|e| panic!("{}: {e}", r.mount_options));
        assert!(a.unknown.is_empty(), "{:?}", a.unknown);
        let b = MountOptions::parse(&a.render()).unwrap();
        assert_eq!(a, b, "{}", r.mount_options);
        let line = format!("127.0.0.1:/ /mnt/nfs nfs {} 0 0", r.mount_options);
        let e = MountOptions::parse_mounts_line(&line).unwrap();
        assert_eq!(e.options, a);
        assert_eq!(e.options.vers().as_str(), r.vers);
    }
    assert_eq!(seen.len(), 2, "the lab has a v3 and a v4.1 option set");
}

/// Seed 004 reads "4 us per newfstatat" (strace -c) next to "45 us per
/// GETATTR" (ftrace). The lab's traces time every stat: split them by
/// whether the model says the stat sent an RPC, and print both means.
#[test]
fn stat_time_cached_vs_rpc() {
    let dir = lab_dir();
    let runs = load_runs(&dir);
    let (names, sizes) = layout(&dir);
    let mut cache = HashMap::new();
    for vers in ["3", "4.1"] {
        let block: Vec<&Run> = runs.iter().filter(|r| r.vers == vers).collect();
        let (opts, params, ops, changes) = block_input(&dir, &block, &names, &sizes, &mut cache);
        let r = statstorm_nfs::replay(&ops, &opts, &params, &changes);
        let (mut hit, mut miss): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
        for (i, o) in ops.iter().enumerate() {
            if !matches!(o.kind, OpKind::Stat | OpKind::Lstat | OpKind::Fstat) || !o.ok() {
                continue;
            }
            let Some(d) = o.dur_us else { continue };
            if r.per_op[i].total() == 0 {
                hit.push(d);
            } else if r.per_op[i].total() == 1 && r.per_op[i].of(RpcOp::Getattr) == 1 {
                miss.push(d);
            }
        }
        let stats = |v: &mut Vec<u64>| {
            v.sort_unstable();
            let mean = v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
            (v.len(), mean, v.get(v.len() / 2).copied().unwrap_or(0))
        };
        let (nh, mh, medh) = stats(&mut hit);
        let (nm, mm, medm) = stats(&mut miss);
        println!(
            "v{vers}: stat served from cache: n={nh} mean={mh:.1} us median={medh} us; \
             stat with one GETATTR: n={nm} mean={mm:.1} us median={medm} us (strace -T, traced guest)"
        );
        assert!(nh > 1000 && nm > 100, "v{vers}: too few stats ({nh}, {nm})");
        assert!(
            medh * 2 < medm,
            "v{vers}: cached {medh} us vs GETATTR {medm} us"
        );
    }
}

/// FINDINGS.md reports untraced runs under option sets whose strace is not
/// in the fixtures. Where the count does not depend on timing (every check
/// is an RPC, or no timer expires within an hour), the traced syscall
/// streams of the defaults blocks replayed under those options must give
/// FINDINGS' numbers. (vers, delegations, extra options, scenario, run, op,
/// FINDINGS count, section.)
type FindingsCase = (
    &'static str,
    bool,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    u64,
    &'static str,
);

const FINDINGS_CASES: &[FindingsCase] = &[
    (
        "3",
        false,
        "lookupcache=none",
        "cli_inc",
        "warm2",
        "LOOKUP",
        2_114,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "cli_inc_rp0",
        "warm",
        "LOOKUP",
        8_218,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "cli_inc_obd",
        "warm",
        "LOOKUP",
        15_578,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "cli_inc_obd_rp0",
        "warm",
        "LOOKUP",
        15_578,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "fpm_nooc",
        "r2",
        "LOOKUP",
        1_033,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "fpm_nooc_rp0",
        "r2",
        "LOOKUP",
        8_222,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "fpm_nooc_obd",
        "r2",
        "LOOKUP",
        15_589,
        "6",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "cli_inc",
        "warm2",
        "LOOKUP",
        1_752,
        "6",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "cli_inc_rp0",
        "warm",
        "LOOKUP",
        7_675,
        "6",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "cli_inc_obd",
        "warm",
        "LOOKUP",
        14_675,
        "6",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "fpm_nooc",
        "r2",
        "LOOKUP",
        852,
        "6",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "fpm_nooc_rp0",
        "r2",
        "LOOKUP",
        7_678,
        "6",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "fpm_nooc_obd",
        "r2",
        "LOOKUP",
        14_683,
        "6",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "cli_fe",
        "warm",
        "LOOKUP",
        30_003,
        "7",
    ),
    (
        "4.1",
        true,
        "lookupcache=none",
        "cli_fe",
        "warm",
        "LOOKUP",
        30_003,
        "7",
    ),
    (
        "3", false, "noac", "cli_inc", "warm2", "GETATTR", 5_149, "6",
    ),
    (
        "3",
        false,
        "noac",
        "cli_inc_rp0",
        "warm",
        "GETATTR",
        19_588,
        "6",
    ),
    (
        "3",
        false,
        "noac",
        "cli_inc_obd",
        "warm",
        "GETATTR",
        37_088,
        "6",
    ),
    ("3", false, "noac", "cli_fe", "warm", "GETATTR", 64_008, "7"),
    (
        "3",
        false,
        "noac",
        "fpm_oc_vt0",
        "r2",
        "total",
        3,
        "6: 1-3 per request",
    ),
    (
        "3",
        false,
        "lookupcache=none",
        "fpm_oc_vt0",
        "r2",
        "total",
        1,
        "6: 1-3 per request",
    ),
    (
        "3",
        false,
        "actimeo=3600",
        "cli_inc",
        "warm2",
        "GETATTR",
        181,
        "1",
    ),
    (
        "3",
        false,
        "actimeo=3600",
        "fpm_nooc",
        "r2",
        "GETATTR",
        181,
        "1",
    ),
    (
        "3",
        false,
        "actimeo=3600,nocto",
        "cli_inc",
        "warm2",
        "total",
        0,
        "1",
    ),
    (
        "3",
        false,
        "actimeo=3600,nocto",
        "fpm_nooc",
        "r2",
        "total",
        0,
        "1",
    ),
    (
        "3",
        false,
        "actimeo=3600",
        "cli_fe",
        "warm",
        "total",
        1,
        "7: 0-1",
    ),
    ("4.1", true, "noatime", "cli_inc", "warm1", "total", 0, "3"),
    (
        "4.1",
        false,
        "actimeo=3600",
        "cli_inc",
        "warm2",
        "total",
        362,
        "5",
    ),
    (
        "4.1",
        false,
        "actimeo=3600,nocto",
        "cli_inc",
        "warm2",
        "total",
        362,
        "5",
    ),
    (
        "4.1",
        false,
        "actimeo=3600",
        "fpm_nooc",
        "r2",
        "total",
        362,
        "5",
    ),
    (
        "4.1",
        false,
        "actimeo=3600,nocto",
        "fpm_nooc",
        "r2",
        "total",
        362,
        "5",
    ),
    (
        "4.1",
        false,
        "actimeo=3600",
        "dirmod_cli",
        "warm",
        "total",
        394,
        "8",
    ),
    (
        "4.1",
        false,
        "actimeo=3600",
        "cli_fe",
        "warm",
        "total",
        2,
        "7",
    ),
];

#[test]
fn findings_option_sets_from_the_traced_streams() {
    let dir = lab_dir();
    let runs = load_runs(&dir);
    let (names, sizes) = layout(&dir);
    let mut cache = HashMap::new();
    let mut results: HashMap<(String, bool, String), statstorm_nfs::Replay> = HashMap::new();
    let mut bad = Vec::new();
    for &(vers, deleg, extra, scen, run, opname, want, section) in FINDINGS_CASES {
        let block: Vec<&Run> = runs.iter().filter(|r| r.vers == vers).collect();
        let key = (vers.to_string(), deleg, extra.to_string());
        if !results.contains_key(&key) {
            let (opts, mut params, ops, changes) =
                block_input(&dir, &block, &names, &sizes, &mut cache);
            let opts = opts.overlay(&MountOptions::parse(extra).unwrap());
            params.delegations = deleg;
            results.insert(
                key.clone(),
                statstorm_nfs::replay(&ops, &opts, &params, &changes),
            );
        }
        let r = &results[&key];
        let run_ = block
            .iter()
            .find(|x| x.scenario == scen && x.run == run)
            .unwrap_or_else(|| panic!("no run {vers} {scen} {run}"));
        let c = r.counts_between(run_.start_us, run_.end_us + 1, None);
        let got = col(&c, opname);
        let ok = within(got, want);
        println!(
            "v{vers} deleg={} {extra:<20} {scen} {run}: {opname} model {got} FINDINGS {want} (section {section}) {}",
            if deleg { "on" } else { "off" },
            if ok { "ok" } else { "MISS" }
        );
        if !ok {
            bad.push(format!(
                "v{vers} {extra} {scen} {run} {opname}: {got} vs {want}"
            ));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Warm start (`statstorm predict --nfs-cache warm`): a run that followed
/// a run of the same scenario on the same client, predicted from its own
/// trace alone on a client warmed by that trace's read-side operations
/// (`warmup_ops`, `WARM_PASSES` times: as if the same traffic had run just
/// before), against the RPCs the lab measured for it, and on a cold client
/// (the default). Runs checked: every run of a cli or fpm series that
/// directly follows one of the same scenario, in the same mount block, with
/// no server or client change between them. At least three in four must be
/// within tolerance with the warm start, and fewer than one in ten is on a
/// cold client; the misses are printed (GETATTR counts that depend on how
/// long ago and how often the same files were revalidated before, which a
/// warm-up of fixed passes does not know: e.g. v3 `cli_inc warm1`, lab 361
/// GETATTR, warm start 181; v4.1 `cli_inc warm1`, the first run after a
/// cold one, lab 181, warm start 0 as for later runs).
#[test]
fn warm_start_predicts_runs_that_followed_the_same_work() {
    let dir = lab_dir();
    let runs = load_runs(&dir);
    let (names, sizes) = layout(&dir);
    let mut cache: HashMap<String, Vec<Op>> = HashMap::new();
    let (mut checked, mut warm_ok, mut cold_ok) = (0usize, 0usize, 0usize);
    let mut misses = Vec::new();
    println!(
        "{:<5} {:<22} {:<24} {:<8} {:>22} {:>22} {:>22}",
        "vers", "oset", "scenario", "run", "lab", "warm start", "cold start"
    );
    for (i, r) in runs.iter().enumerate() {
        let Some(p) = i.checked_sub(1).map(|j| &runs[j]) else {
            continue;
        };
        let same_block = p.vers == r.vers && p.oset == r.oset && p.scenario == r.scenario;
        let plain = |x: &Run| (x.kind == "cli" || x.kind == "fpm") && x.changed_paths.is_empty();
        if !same_block || !plain(p) || !plain(r) || r.strace.is_none() {
            continue;
        }
        let (opts, params, _, _) = block_input(&dir, &[r], &names, &sizes, &mut cache);
        let s = r.strace.as_ref().unwrap();
        let ops: Vec<Op> = cache[s]
            .iter()
            .filter(|o| o.t_us >= r.start_us && o.t_us < r.end_us)
            .cloned()
            .collect();
        let warm = statstorm_nfs::replay_warm(
            &statstorm_nfs::warmup_ops(&ops, statstorm_nfs::client::WARM_PASSES),
            &ops,
            &opts,
            &params,
            &[],
        );
        let cold = statstorm_nfs::replay(&ops, &opts, &params, &[]);
        let ok = |m: &RpcCounts| COLS.iter().all(|c| within(col(m, c), col(&r.rpc, c)));
        checked += 1;
        warm_ok += ok(&warm.totals) as usize;
        cold_ok += ok(&cold.totals) as usize;
        if !ok(&warm.totals) {
            misses.push(format!(
                "{}/{} {} {}: lab {} warm {}",
                r.vers, r.oset, r.scenario, r.run, r.rpc, warm.totals
            ));
        }
        println!(
            "{:<5} {:<22} {:<24} {:<8} {:>22} {:>22} {:>22}",
            r.vers,
            r.oset,
            r.scenario,
            r.run,
            r.rpc.to_string(),
            warm.totals.to_string(),
            cold.totals.to_string()
        );
    }
    println!("{checked} runs: warm start within tolerance {warm_ok}, cold start {cold_ok}");
    for m in &misses {
        println!("warm-start miss: {m}");
    }
    assert!(
        checked >= 20,
        "too few runs follow one of the same work: {checked}"
    );
    // the warm start must matter: a cold client misses nearly all of them
    assert!(
        cold_ok * 10 < checked,
        "cold start already matches {cold_ok} of {checked}"
    );
    assert!(
        warm_ok * 4 >= checked * 3,
        "warm start within tolerance for only {warm_ok} of {checked} runs"
    );
}
