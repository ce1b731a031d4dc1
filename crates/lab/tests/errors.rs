//! The lab's failures: a guest that fails reports why with the console's
//! tail, a boot that overruns its timeout is killed, and neither leaves a
//! qemu process or a temporary directory behind.

use std::collections::BTreeSet;
use std::fs;
use std::time::Duration;

use statstorm_lab::{default_cache, Block, GuestCommand, Lab, LabError, NfsVersion, Plan};

fn run_dirs() -> BTreeSet<String> {
    fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("statstorm-lab-run-"))
        .collect()
}

/// Command lines of running processes that name a run directory other
/// than those in `known`.
fn stray_qemus(known: &BTreeSet<String>) -> Vec<String> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("qemu-system") && c.contains("statstorm-lab-run-"))
        .filter(|c| !known.iter().any(|k| c.contains(k.as_str())))
        .collect()
}

fn lab() -> Lab {
    Lab::prepare(&default_cache())
        .unwrap_or_else(|e| panic!("the NFS lab cannot run on this host: {e}"))
}

#[test]
fn failures_are_reported_and_cleaned_up() {
    let lab = lab();
    let export = tempfile::tempdir().unwrap();
    fs::write(export.path().join("a"), "a").unwrap();
    let before = run_dirs();

    // killed during boot
    let mut plan = Plan::new(export.path());
    plan.blocks
        .push(Block::new(NfsVersion::V3, "", true).command(GuestCommand::new(["true"])));
    plan.timeout = Duration::from_secs(3);
    match lab.run(&plan) {
        Err(LabError::Timeout { secs: 3, .. }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(run_dirs(), before, "temporary directory left behind");
    assert_eq!(stray_qemus(&before), Vec::<String>::new());

    // a mount option the client refuses: the guest says which block failed
    plan.timeout = Duration::from_secs(240);
    plan.blocks[0].mount_options = "no_such_option".into();
    match lab.run(&plan) {
        Err(LabError::Guest { message, console }) => {
            assert!(message.contains("block 0: mount"), "{message}");
            assert!(console.contains("lab: FAIL"), "{console}");
        }
        other => panic!("expected the guest's failure, got {other:?}"),
    }
    assert_eq!(run_dirs(), before, "temporary directory left behind");
    assert_eq!(stray_qemus(&before), Vec::<String>::new());
}
