//! diagnose with the NFS client's own counters: `/proc/self/mountstats`
//! snapshots and `nfsstat -c` output the VM lab made around three php-cli
//! runs on an NFSv4.1 mount (tests/fixtures/evidence/README.md), with the
//! capture strace made of the same runs. The lab's server grants read
//! delegations: modelled without them the RPC mix disagrees (and the
//! report points to delegations), modelled with them it matches the
//! kernel's counts; the mean round trip becomes the simulator's time per
//! RPC.

use statstorm_engine::diagnose::{diagnose, Basis, Compared, Diagnosis, MixHint, Options};
use statstorm_engine::evidence::nfs_counters::Source;
use statstorm_engine::predict::{NfsOptions, PredictOptions};
use std::path::{Path, PathBuf};

fn evidence(file: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/evidence")
        .join(file);
    assert!(p.exists(), "missing fixture {}", p.display());
    p
}

fn options(delegations: bool, mountstats: &[&str], nfsstat: bool) -> Options {
    Options {
        predict: PredictOptions {
            traces: vec![evidence("lab-v41-php.strace.gz")],
            nfs: NfsOptions {
                from_mount: Some("vers=4.1".into()),
                nfs_root: vec!["/mnt/nfs".into()],
                delegations,
                ..NfsOptions::default()
            },
            ..PredictOptions::default()
        },
        mountstats: mountstats.iter().map(|f| evidence(f)).collect(),
        nfsstat: nfsstat.then(|| evidence("lab-v41-nfsstat-c.txt")),
        ..Options::default()
    }
}

fn run(o: &Options) -> Diagnosis {
    diagnose(o, &mut |_| {}).expect("diagnose")
}

const BOTH: [&str; 2] = [
    "lab-v41-mountstats-before.txt",
    "lab-v41-mountstats-after.txt",
];

#[test]
fn without_delegations_the_mix_disagrees_and_points_to_them() {
    let d = run(&options(false, &BOTH, true));
    assert_eq!(d.counters.len(), 2);
    let ms = &d.counters[0];
    assert!(matches!(ms.measured.source, Source::Mountstats { ref files, .. } if files.len() == 2));
    // the kernel's counts between the snapshots (the file's own figures)
    assert_eq!(ms.measured.total, 238);
    assert_eq!(ms.measured.rpcs["OPEN_NOATTR"], 40);
    assert_eq!(ms.measured.rpcs["GETATTR"], 41);
    assert_eq!(ms.compared, Compared::Yes);
    for op in ["OPEN_NOATTR", "CLOSE", "GETATTR"] {
        assert!(
            ms.disagree.iter().any(|o| o == op),
            "{op}: {:?}",
            ms.disagree
        );
    }
    assert_eq!(ms.hint, Some(MixHint::Delegations));
    // the transport between the snapshots (xprt: sends 17 -> 255): one
    // RPC on the wire at a time, none waiting for a slot
    let t = ms.measured.transport.as_ref().expect("xprt counters");
    assert_eq!((t.transports, t.sends, t.max_slots), (1, 238, Some(2)));
    assert_eq!((t.mean_in_flight, t.mean_backlog), (1.0, 0.0));
    assert!(!ms.slot_wait);
    // nfsstat counts the same client since boot: the same gap
    let ns = &d.counters[1];
    assert!(
        matches!(&ns.measured.source, Source::Nfsstat { version, .. } if version == "4"),
        "{:?}",
        ns.measured.source
    );
    assert_eq!(ns.measured.total, 255);
    assert_eq!(ns.hint, Some(MixHint::Delegations));
}

#[test]
fn with_delegations_the_model_matches_the_kernels_counts() {
    let d = run(&options(true, &BOTH, true));
    for c in &d.counters {
        assert_eq!(c.compared, Compared::Yes);
        assert!(c.disagree.is_empty(), "{:?}", c.mix);
        assert_eq!(c.hint, None);
    }
    // between the snapshots, per procedure within the lab's tolerance,
    // max(5%, 2)
    for r in &d.counters[0].mix {
        let tol = (r.measured as f64 * 0.05).max(2.0);
        assert!(
            (r.modelled as f64 - r.measured as f64).abs() <= tol,
            "{}: modelled {} measured {}",
            r.op,
            r.modelled,
            r.measured
        );
    }
}

#[test]
fn the_mean_round_trip_is_the_time_per_rpc() {
    let d = run(&options(true, &BOTH, false));
    let m = &d.counters[0].measured;
    // the rtt column summed over the mount's procedures, between the
    // snapshots: 13 ms over 238 RPCs
    let rtt = m.rtt_ms.expect("a mean round trip");
    assert!((rtt - 13.0 / 238.0).abs() < 1e-9, "{rtt}");
    let server = d
        .assumed
        .iter()
        .find(|a| a.what == "NFS server time per RPC")
        .expect("the server's time per RPC listed");
    assert_eq!(server.basis, Basis::Measured);
    assert!(
        server.value.starts_with(&format!("{:.3} ms", 13.0 / 238.0)),
        "{}",
        server.value
    );
    let network = d
        .assumed
        .iter()
        .find(|a| a.what == "network round trip to the NFS server")
        .expect("the network's round trip listed");
    assert_eq!(network.basis, Basis::Measured);
    // without counters both are defaults
    let plain = run(&options(true, &[], false));
    assert!(plain
        .assumed
        .iter()
        .any(|a| a.what == "NFS server time per RPC" && a.basis == Basis::Default));
}

/// A transport whose RPCs waited for slots (the lab's later snapshot with
/// 119 tasks more in the backlog over its 238 sends): the diagnosis says
/// so.
#[test]
fn a_backlog_on_the_transport_is_slot_wait() {
    let dir = tempfile::tempdir().unwrap();
    let after = std::fs::read_to_string(evidence("lab-v41-mountstats-after.txt")).unwrap();
    let line = "\txprt:\ttcp 0 0 2 0 0 255 255 0 255 0 2 0 0";
    assert!(after.contains(line));
    let busy = dir.path().join("after-busy.txt");
    std::fs::write(
        &busy,
        after.replace(line, "\txprt:\ttcp 0 0 2 0 0 255 255 0 510 119 16 0 0"),
    )
    .unwrap();
    let mut o = options(true, &[], false);
    o.mountstats = vec![evidence("lab-v41-mountstats-before.txt"), busy];
    let d = run(&o);
    let c = &d.counters[0];
    let t = c.measured.transport.as_ref().unwrap();
    assert_eq!(t.sends, 238);
    assert!((t.mean_backlog - 0.5).abs() < 1e-9, "{t:?}");
    assert!((t.mean_in_flight - 493.0 / 238.0).abs() < 1e-9, "{t:?}");
    assert_eq!(t.max_slots, Some(16));
    assert!(c.slot_wait);
}

#[test]
fn one_snapshot_counts_since_the_mount() {
    let d = run(&options(true, &["lab-v41-mountstats-after.txt"], false));
    let m = &d.counters[0].measured;
    assert!(matches!(m.source, Source::Mountstats { ref files, .. } if files.len() == 1));
    // more than between the snapshots: the mount's own RPCs before them
    assert!(m.total > 238, "{}", m.total);
}

#[test]
fn counters_that_cannot_be_read_are_errors_naming_the_file() {
    // the snapshots the wrong way round: a counter went back
    let e = diagnose(
        &options(
            true,
            &[
                "lab-v41-mountstats-after.txt",
                "lab-v41-mountstats-before.txt",
            ],
            false,
        ),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("lab-v41-mountstats-before.txt") && e.contains("went from"),
        "{e}"
    );
    // a root on no NFS mount of the snapshot
    let mut o = options(true, &BOTH, false);
    o.predict.nfs.nfs_root = vec!["/srv/www".into()];
    let e = diagnose(&o, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("no NFS mount holds /srv/www"), "{e}");
    // mountstats given as nfsstat
    let mut o = options(true, &[], false);
    o.nfsstat = Some(evidence("lab-v41-mountstats-after.txt"));
    let e = diagnose(&o, &mut |_| {}).unwrap_err().to_string();
    assert!(
        e.contains("lab-v41-mountstats-after.txt") && e.contains("no client table"),
        "{e}"
    );
}
