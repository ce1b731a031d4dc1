//! A capture checked against the real client: prepared for replay, its
//! tree laid out as the guest's export, replayed in the guest by
//! `statstorm-replay` once per option set (each on a fresh mount), and
//! each request's kernel counts set beside the model's ([`crate::check`]).
//!
//! One boot serves every option set when the replay changes nothing on
//! the server (no write, create, truncate, mkdir, unlink, rmdir or
//! rename); otherwise each set gets its own boot, so every set starts from
//! the tree the capture saw.
//!
//! The replayer and its script are copied to a scratch directory under
//! `/var/tmp`: the guest sees the host's tree read-only except `/tmp`,
//! `/run`, `/proc`, `/sys` and `/dev`, which are its own.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use statstorm_trace::Trace;

use crate::check::{self, RequestCheck};
use crate::replay::{self, Arg, Call};
use crate::{Block, GuestCommand, Lab, LabError, NfsVersion, Plan, Result, NFS_MOUNTPOINT};

/// Where the scratch directory goes (visible in the guest).
pub const SCRATCH_PARENT: &str = "/var/tmp";

/// One option set: the version, the other `mount -o` options, and whether
/// the server hands out delegations (v4 only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionSet {
    pub version: NfsVersion,
    pub options: String,
    pub delegations: bool,
}

/// What one option set gave.
#[derive(Clone, Debug)]
pub struct SetOutcome {
    pub set: OptionSet,
    /// The options the kernel reports in effect (`/proc/mounts`): the
    /// model runs under these.
    pub effective_options: String,
    /// The replayer's exit status and its report (how many results
    /// matched the capture's, the first mismatches).
    pub replay_status: i32,
    pub replay_report: String,
    /// Guest time of the whole replay.
    pub replay_duration: Duration,
    pub requests: Vec<RequestCheck>,
}

impl SetOutcome {
    pub fn agrees(&self) -> bool {
        self.requests.iter().all(RequestCheck::agrees)
    }
}

/// What [`verify`] gives.
#[derive(Clone, Debug)]
pub struct Verification {
    /// The kernel package the guest booted.
    pub kernel: String,
    /// The capture's application root (`--nfs-root`).
    pub nfs_root: String,
    /// Entries of the laid-out tree.
    pub tree_entries: usize,
    /// Calls the replay makes (markers, cwd, fork and exit lines not
    /// counted).
    pub replayed_calls: usize,
    /// File calls under the root the replay leaves out, per call name.
    pub left_out: BTreeMap<String, u64>,
    /// File calls outside the root (neither replayed nor modelled).
    pub outside_root: u64,
    /// Whether the replay changes the server's tree (one boot per set).
    pub writes: bool,
    pub boots: usize,
    /// Host wall time of the boots.
    pub wall: Duration,
    pub sets: Vec<SetOutcome>,
}

impl Verification {
    pub fn agrees(&self) -> bool {
        self.sets.iter().all(SetOutcome::agrees)
    }
}

fn writes(script: &replay::Script) -> bool {
    let create = libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY | libc::O_RDWR;
    script.ops.iter().any(|o| match o.call {
        Call::Write
        | Call::Mkdir
        | Call::Mkdirat
        | Call::Rmdir
        | Call::Unlink
        | Call::Unlinkat
        | Call::Rename
        | Call::Renameat => true,
        Call::Open | Call::Openat => o
            .args
            .iter()
            .any(|a| matches!(a, Arg::Open(f) if f & create != 0)),
        _ => false,
    })
}

/// Replays `trace` (its calls under `capture_root`) through the real
/// client under each of `sets` and compares each request with the model.
/// `replayer`: the `statstorm-replay` binary. `timeout`: per boot.
pub fn verify(
    lab: &Lab,
    trace: &Trace,
    capture_root: &str,
    sets: &[OptionSet],
    replayer: &Path,
    timeout: Duration,
) -> Result<Verification> {
    if sets.is_empty() {
        return Err(LabError::Plan("no option set".into()));
    }
    let scratch = tempfile::Builder::new()
        .prefix("statstorm-lab-")
        .tempdir_in(SCRATCH_PARENT)
        .map_err(|e| LabError::io(format!("creating a directory in {SCRATCH_PARENT}"), e))?;
    let prepared = replay::prepare(trace, capture_root.as_bytes(), NFS_MOUNTPOINT.as_bytes());
    let script = replay::parse_script(&prepared.script)
        .map_err(|e| LabError::Plan(format!("the replay script: {e}")))?;
    let calls = replayed_calls(&script);
    if calls == 0 || prepared.marks.is_empty() {
        return Err(LabError::Plan(format!(
            "no file call of the capture is under {capture_root} (--nfs-root){}",
            where_calls_are(trace)
        )));
    }
    let tree = scratch.path().join("tree");
    replay::lay_out(&prepared.tree, &tree)
        .map_err(|e| LabError::io("laying out the capture's tree".into(), e))?;
    let script_path = scratch.path().join("script.txt");
    fs::write(&script_path, &prepared.script)
        .map_err(|e| LabError::io("writing the replay script".into(), e))?;
    let bin = scratch.path().join("statstorm-replay");
    fs::copy(replayer, &bin)
        .map_err(|e| LabError::io(format!("copying {}", replayer.display()), e))?;

    let command = GuestCommand::new([
        bin.to_string_lossy().into_owned(),
        script_path.to_string_lossy().into_owned(),
    ])
    .cwd(NFS_MOUNTPOINT);
    let block = |s: &OptionSet| {
        Block::new(s.version, s.options.clone(), s.delegations).command(command.clone())
    };
    let writes = writes(&script);
    let plans: Vec<Vec<Block>> = if writes {
        sets.iter().map(|s| vec![block(s)]).collect()
    } else {
        vec![sets.iter().map(block).collect()]
    };
    let start = Instant::now();
    let mut outcomes = Vec::new();
    for blocks in plans {
        let mut plan = Plan::new(&tree);
        plan.timeout = timeout;
        plan.blocks = blocks;
        outcomes.extend(lab.run(&plan)?.blocks);
    }
    let wall = start.elapsed();

    let mut out_sets = Vec::new();
    for (set, b) in sets.iter().zip(outcomes) {
        let c = &b.commands[0];
        let window = c.window.as_deref().unwrap_or_default();
        if c.status != 0 || window.is_empty() {
            return Err(LabError::Guest {
                message: format!(
                    "the replay under vers={} {:?} exited {} with no complete window file: {}{}",
                    set.version,
                    set.options,
                    c.status,
                    c.stdout.trim(),
                    c.stderr.trim()
                ),
                console: String::new(),
            });
        }
        let kernel = check::kernel_requests(window).map_err(|e| LabError::Guest {
            message: format!(
                "the replay under vers={} {:?}: {e}",
                set.version, set.options
            ),
            console: String::new(),
        })?;
        let model = check::model_requests(
            trace,
            &prepared,
            capture_root,
            &b.effective_options,
            set.delegations,
        )
        .map_err(|e| LabError::Plan(e.to_string()))?;
        out_sets.push(SetOutcome {
            set: set.clone(),
            effective_options: b.effective_options.clone(),
            replay_status: c.status,
            replay_report: c.stdout.trim().to_string(),
            replay_duration: c.duration,
            requests: check::compare(&kernel, &model),
        });
    }
    Ok(Verification {
        kernel: lab.kernel().package.clone(),
        nfs_root: capture_root.to_string(),
        tree_entries: prepared.tree.len(),
        replayed_calls: calls,
        left_out: prepared.left_out_by_call,
        outside_root: prepared.outside_root,
        writes,
        boots: if writes { sets.len() } else { 1 },
        wall,
        sets: out_sets,
    })
}

/// The calls a script makes (not its cwd, fork, exit and marker lines).
fn replayed_calls(script: &replay::Script) -> usize {
    script
        .ops
        .iter()
        .filter(|o| {
            !matches!(
                o.call,
                Call::Cwd | Call::Fork | Call::Exit | Call::RequestStart | Call::RequestEnd
            )
        })
        .count()
}

/// `"; its file calls are under /srv/www (812), /usr/lib (95), ..."`: the
/// directories (two levels) the capture's absolute paths are in, most
/// named first, for a root that matched nothing.
fn where_calls_are(trace: &Trace) -> String {
    let mut by_dir: BTreeMap<String, u64> = BTreeMap::new();
    for e in &trace.events {
        let Some(p) = e.path.map(|p| trace.strings.str(p)) else {
            continue;
        };
        if !p.starts_with('/') {
            continue;
        }
        let dir: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).take(2).collect();
        if dir.len() == 2 {
            *by_dir.entry(format!("/{}", dir.join("/"))).or_default() += 1;
        }
    }
    if by_dir.is_empty() {
        return if trace.events.is_empty() {
            "; no syscall was read from it (strace -f output?)".into()
        } else {
            String::new()
        };
    }
    let mut top: Vec<(String, u64)> = by_dir.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let list: Vec<String> = top
        .iter()
        .take(5)
        .map(|(d, n)| format!("{d} ({n})"))
        .collect();
    format!("; its file calls are under {}", list.join(", "))
}

/// The `statstorm-replay` binary: `$STATSTORM_REPLAY`, else beside the
/// running executable, else in `PATH`.
pub fn find_replayer() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STATSTORM_REPLAY").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if let Some(p) = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join("statstorm-replay")))
        .filter(|p| p.is_file())
    {
        return Ok(p);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("statstorm-replay"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            LabError::Plan(
                "statstorm-replay not found beside statstorm or in PATH: install it with \
                 `cargo install --path crates/statstorm` installs both (or set STATSTORM_REPLAY)"
                    .into(),
            )
        })
}
