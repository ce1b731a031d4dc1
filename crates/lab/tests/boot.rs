//! Boots the lab guest once and checks the RPCs the real Linux NFS client
//! (Debian 12's 6.1 kernel) sends for `stat` of N files, cold then warm,
//! over NFSv3 and NFSv4.1 with default mount options.
//!
//! A missing host component (qemu, busybox-static, e2fsprogs, nfs-kernel-
//! server, the kernel package) fails the test with the package to install:
//! the lab is never skipped silently.

use std::collections::BTreeMap;
use std::fs;

use statstorm_lab::{default_cache, mountstats, Block, GuestCommand, Lab, NfsVersion, Plan};

const N: usize = 20;

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn stat_cold_and_warm_over_v3_and_v41() {
    let lab = match Lab::prepare(&default_cache()) {
        Ok(l) => l,
        Err(e) => panic!("the NFS lab cannot run on this host: {e}"),
    };
    let export = tempfile::tempdir().unwrap();
    fs::create_dir(export.path().join("d")).unwrap();
    let files: Vec<String> = (0..N).map(|i| format!("d/f{i:02}")).collect();
    for f in &files {
        fs::write(export.path().join(f), f.as_bytes()).unwrap();
    }
    // stat(1) of each file, the whole list twice in one process
    let mut argv = vec!["/usr/bin/stat".to_string(), "-c".into(), "%n %s".into()];
    argv.extend(files.iter().cloned());
    argv.extend(files.iter().cloned());
    let stat = GuestCommand::new(argv).cwd("/mnt/nfs");
    let window = GuestCommand::new([
        "/bin/sh",
        "-c",
        "cat /proc/sys/fs/leases-enable; cat /proc/self/mountstats >\"$STATSTORM_LAB_WINDOW\"",
    ]);
    let mut plan = Plan::new(export.path());
    // delegations off on the v3 block (no effect on v3 itself): the switch
    // is checked through fs.leases-enable
    for (v, deleg) in [(NfsVersion::V3, false), (NfsVersion::V4_1, true)] {
        plan.blocks.push(
            Block::new(v, "", deleg)
                .command(stat.clone())
                .command(stat.clone())
                .command(window.clone()),
        );
    }
    let t = std::time::Instant::now();
    let out = lab.run(&plan).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "boot to ready {:?}, whole boot {:?} (test so far {:?})",
        out.boot_to_ready,
        out.wall,
        t.elapsed()
    );
    assert_eq!(out.blocks.len(), 2);

    let expected_stdout: String = files
        .iter()
        .chain(&files)
        .map(|f| format!("{f} {}\n", f.len()))
        .collect();
    for (b, (vers, deleg)) in out.blocks.iter().zip([("vers=3", "0"), ("vers=4.1", "1")]) {
        let ctx = format!("block {b:?}", b = b.version);
        assert!(
            b.effective_options.split(',').any(|o| o == vers),
            "{ctx}: {}",
            b.effective_options
        );
        for c in &b.commands[..2] {
            assert_eq!(c.status, 0, "{ctx}: stat failed: {}", c.stderr);
            assert_eq!(c.stdout, expected_stdout, "{ctx}");
        }
        // Cold (fresh mount, the wrapper's chdir to /mnt/nfs already done):
        // one LOOKUP for `d` and one per file (nfs_lookup, fs/nfs/dir.c;
        // the reply carries the attributes, so no GETATTR), one ACCESS for
        // `d` (search permission, nfs_permission -> nfs_do_access; the
        // root's was cached by the chdir). The second pass in the same
        // process sends nothing: the dentries are revalidated from the
        // cache (nfs_lookup_revalidate: parent directory attributes fresh
        // for acdirmin=30 s) and the inodes' attributes are younger than
        // acregmin=3 s (nfs_getattr -> nfs_attribute_cache_expired).
        // Observed the same on v3 and v4.1 (v4.1 sends a LOOKUP compound
        // with a GETATTR inside, counted as LOOKUP).
        let cold = &b.commands[0];
        assert_eq!(
            cold.ops,
            counts(&[("ACCESS", 1), ("LOOKUP", N as u64 + 1)]),
            "{ctx}: cold pass"
        );
        // A second process milliseconds later: everything still cached.
        let warm = &b.commands[1];
        assert_eq!(warm.ops, counts(&[]), "{ctx}: warm pass");
        assert!(
            warm.duration < std::time::Duration::from_secs(3),
            "{ctx}: {:?}",
            warm.duration
        );
        assert!(cold.duration > std::time::Duration::ZERO);

        // the server's lease switch, and the window file the command wrote
        let w = &b.commands[2];
        assert_eq!(w.status, 0, "{ctx}: {}", w.stderr);
        assert_eq!(w.stdout.trim(), deleg, "{ctx}: fs.leases-enable");
        let snap = mountstats::parse(w.window.as_deref().expect("window file")).unwrap();
        let m = snap.mount("/mnt/nfs").expect("/mnt/nfs in the window");
        assert!(
            m.opts.as_deref().unwrap_or_default().contains(vers),
            "{ctx}"
        );
        assert_eq!(
            m.ops.get("LOOKUP").map(|o| o.ops),
            Some(N as u64 + 1),
            "{ctx}"
        );
    }
    assert_eq!(out.blocks[0].commands[0].after.fstype, "nfs");
    assert_eq!(out.blocks[1].commands[0].after.fstype, "nfs4");
}
