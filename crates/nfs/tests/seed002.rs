//! Seed 002 (Miquel van Smoorenburg, linux-nfs RFC, April 2013): a Joomla
//! site on NFSv3 (`rw,nosuid,tcp,noatime,vers=3`), five page loads with wget
//! from a cold cache, counted with nfsstat:
//!
//! | options                          | GETATTR | LOOKUP | ACCESS | READ |
//! |----------------------------------|--------:|-------:|-------:|-----:|
//! | noatime,vers=3                   |   1,308 |    416 |    667 |  216 |
//! | + noaccesscheck,sloppycto=3      |     902 |    416 |      0 |  216 |
//!
//! Both options are HYPOTHETICAL (never merged; SEMANTICS.md R48). This test
//! builds the same workload shape the way the lab's index.php is built
//! (fixtures/nfs-lab/workload): one entry script that includes many files in
//! nested directories, every include stat()ed then opened, fstat'ed, read
//! and closed; five page loads with the seed's wget durations; web server
//! uid 33 (the noaccesscheck patch exempts uid 0).
//!
//! The seed does not say how far apart the loads were, and the answer
//! depends on it (the sweep below prints it): loads that start more than
//! acregmin (3 s) after the previous one reproduce the seed's proportions
//! (model: GETATTR 1,296 -> 864, a third; seed 1,308 -> 902); loads back to
//! back inside 3 s lose every GETATTR under `sloppycto=3`.
//!
//! Why a third: in the base case each load after the first pays the
//! close-to-open GETATTR on every open (R30), and the second load also a
//! GETATTR on the stat because the 3 s attribute timeout has run out (R4,
//! R9); the timeout then doubles to 6 s (R6) and the CTO GETATTRs keep the
//! attributes fresh, so later stats are free: 216 + 432 + 3 x 216 = 1,296.
//! `sloppycto=3` skips the CTO GETATTR when the attributes were refreshed
//! less than 3 s ago: in load 1 (just looked up) and load 2 (just
//! refreshed by the stat's GETATTR), but not in loads 3-5 (3.5 s after the
//! last refresh): 216 + 3 x 216 = 864. ACCESS goes to 0 because uid 33 never
//! asks (patch 1/2); LOOKUP and READ are untouched because neither patch
//! touches the dentry cache or the page cache. The seed's ACCESS count (667)
//! is higher than the model's (247): on a 6.1 client an access entry whose
//! attributes expired is revalidated with a GETATTR (R25), not an ACCESS.

use statstorm_nfs::{replay, ClientParams, MountOptions, RpcCounts, RpcOp};
use statstorm_trace::op::{Op, OpKind};

const ROOT: &str = "/var/www";
/// Seed 002: wget times of the five requests (first session), seconds.
const PAGE_S: [f64; 5] = [1.287, 0.550, 0.453, 0.343, 0.379];
/// Files read once each in the seed (READ = 216): the entry script plus
/// 215 includes.
const INCLUDES: usize = 215;

fn op(t_s: f64, kind: OpKind, path: &str, bytes: u64) -> Op {
    Op {
        uid: 33,
        bytes,
        ..Op::new((t_s * 1e6).round() as i64, 4242, kind, path)
    }
}

/// Include paths spread over 24 directories, 3 levels deep, like a CMS
/// tree (libraries/<pkg>/<sub>/file.php).
fn include_paths() -> Vec<String> {
    (0..INCLUDES)
        .map(|i| {
            let pkg = i % 4;
            let sub = (i / 4) % 6;
            format!("{ROOT}/site/libraries/p{pkg}/s{sub}/f{i}.php")
        })
        .collect()
}

/// Page loads: `PAGE_S` durations, each followed by `pause_s` of idle time.
fn workload(pause_s: f64) -> Vec<Op> {
    let entry = format!("{ROOT}/site/index.php");
    let files = include_paths();
    let mut ops = Vec::new();
    let mut t = 100.0;
    for dur in PAGE_S {
        let per = dur / (files.len() + 1) as f64;
        let mut tt = t;
        for f in std::iter::once(&entry).chain(files.iter()) {
            let step = per / 5.0;
            ops.push(op(tt, OpKind::Stat, f, 0));
            ops.push(op(tt + step, OpKind::Open, f, 0));
            ops.push(op(tt + 2.0 * step, OpKind::Fstat, f, 0));
            ops.push(op(tt + 3.0 * step, OpKind::Read, f, 2000));
            ops.push(op(tt + 4.0 * step, OpKind::Close, f, 0));
            tt += per;
        }
        t += dur + pause_s;
    }
    ops
}

const BASE: &str = "rw,nosuid,tcp,noatime,vers=3";
const PATCHED: &str = "rw,nosuid,tcp,noatime,noaccesscheck,sloppycto=3,vers=3";

fn run(opts: &str, pause_s: f64) -> RpcCounts {
    let mut p = ClientParams::new(ROOT);
    p.root_attr_time_us = Some(100 * 1_000_000);
    let o = MountOptions::parse(opts).unwrap();
    replay(&workload(pause_s), &o, &p, &[]).totals
}

fn row(name: &str, c: &RpcCounts) -> String {
    format!(
        "{:<44} {:>8} {:>8} {:>8} {:>8} {:>8}",
        name,
        c.of(RpcOp::Getattr),
        c.of(RpcOp::Lookup),
        c.of(RpcOp::Access),
        c.of(RpcOp::Read),
        c.total()
    )
}

#[test]
fn seed002_table_with_loads_3s_apart() {
    let pause = 3.0;
    let base = run(BASE, pause);
    let patched = run(PATCHED, pause);
    println!("{INCLUDES} includes + entry script, 5 page loads, {pause} s pause after each");
    println!(
        "{:<44} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "options", "GETATTR", "LOOKUP", "ACCESS", "READ", "total"
    );
    println!("{}", row("noatime,vers=3", &base));
    println!(
        "{}",
        row("+ noaccesscheck,sloppycto=3 (hypothetical)", &patched)
    );
    assert!(base.of(RpcOp::Access) > 0);
    assert_eq!(patched.of(RpcOp::Access), 0, "ACCESS to zero");
    assert_eq!(base.of(RpcOp::Lookup), patched.of(RpcOp::Lookup));
    assert_eq!(base.of(RpcOp::Read), patched.of(RpcOp::Read));
    assert_eq!(
        base.of(RpcOp::Read),
        INCLUDES as u64 + 1,
        "one READ per file"
    );
    let n = INCLUDES as u64 + 1;
    // derivation in the module docs
    assert_eq!(base.of(RpcOp::Getattr), 6 * n);
    assert_eq!(patched.of(RpcOp::Getattr), 4 * n);
}

#[test]
fn seed002_sweep_over_load_spacing() {
    println!(
        "{:>8} {:>10} {:>10} {:>8}",
        "pause_s", "G base", "G patched", "cut"
    );
    for pause in [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 20.0] {
        let b = run(BASE, pause);
        let p = run(PATCHED, pause);
        let (gb, gp) = (b.of(RpcOp::Getattr), p.of(RpcOp::Getattr));
        println!(
            "{pause:>8} {gb:>10} {gp:>10} {:>7.0}%",
            100.0 * (1.0 - gp as f64 / gb as f64)
        );
        assert_eq!(p.of(RpcOp::Access), 0);
        assert_eq!(b.of(RpcOp::Lookup), p.of(RpcOp::Lookup));
        assert_eq!(b.of(RpcOp::Read), p.of(RpcOp::Read));
        assert!(gp < gb, "pause {pause}: GETATTR {gb} -> {gp}");
    }
}
