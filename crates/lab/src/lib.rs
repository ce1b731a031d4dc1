//! statstorm-lab: runs commands against the real Linux NFS client and
//! server, in a throwaway qemu guest booted from Debian's kernel.
//!
//! [`Lab::prepare`] finds qemu, mkfs.ext4 and the static busybox, fetches
//! and caches the kernel package's kernel and modules, and builds the
//! initramfs. [`Lab::run`] builds an ext4 image of a [`Plan`]'s export
//! tree, boots one guest which serves it with the kernel's nfsd, and runs
//! the plan's [`Block`]s in order: each mounts the export afresh over
//! loopback (NFSv3 or v4.1, given options, server delegations on or off)
//! and runs its [`GuestCommand`]s, recording for each the per-RPC counts
//! the client sent (from `/proc/self/mountstats`, see
//! [`statstorm_nfs::mountstats`]). See docs/lab.md.
//!
//! ```no_run
//! use statstorm_lab::{Block, GuestCommand, Lab, NfsVersion, Plan};
//! let lab = Lab::prepare(&statstorm_lab::default_cache())?;
//! let mut plan = Plan::new("/srv/tree");
//! plan.blocks.push(Block::new(NfsVersion::V3, "", true)
//!     .command(GuestCommand::new(["/usr/bin/stat", "index.php"]).cwd("/mnt/nfs")));
//! let out = lab.run(&plan)?;
//! println!("{:?}", out.blocks[0].commands[0].ops); // {"ACCESS": 1, "LOOKUP": 1, ...}
//! # Ok::<(), statstorm_lab::LabError>(())
//! ```

pub mod assets;
pub mod check;
pub mod cpio;
mod guest;
pub mod perform;
pub mod replay;
pub mod selftest;
pub mod verify;
mod vm;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use statstorm_nfs::mountstats;
use statstorm_nfs::mountstats::{MountStat, MountStatsError};
use thiserror::Error;

pub use assets::KernelAssets;
pub use guest::{EXPORT_OPTIONS, GRACE_SECS};

/// The asset cache used when `STATSTORM_LAB_CACHE` is not set.
pub const DEFAULT_CACHE: &str = "/var/cache/statstorm/lab";

/// Where the guest mounts the export, in the commands' root.
pub const NFS_MOUNTPOINT: &str = "/mnt/nfs";

/// The export's directory on the server side, in the commands' root.
pub const EXPORT_DIR: &str = "/srv/export";

/// The environment variable naming a command's window file (see
/// [`CommandOutcome::window`]).
pub const WINDOW_ENV: &str = "STATSTORM_LAB_WINDOW";

/// `$STATSTORM_LAB_CACHE`, or [`DEFAULT_CACHE`].
pub fn default_cache() -> PathBuf {
    std::env::var_os("STATSTORM_LAB_CACHE")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_CACHE), PathBuf::from)
}

/// Everything that can go wrong preparing or running the lab.
#[derive(Debug, Error)]
pub enum LabError {
    #[error(
        "{program} not found: install the Debian package {package} (apt-get install {package})"
    )]
    Missing {
        program: String,
        package: &'static str,
    },
    #[error("{} is dynamically linked, and the guest's /init must be static: install the Debian package busybox-static", path.display())]
    BusyboxNotStatic { path: PathBuf },
    #[error("cannot tell which kernel package to use: {detail}")]
    KernelPackage { detail: String },
    #[error("cannot fetch the kernel package {package} (apt-get download {package}): {output}")]
    KernelDownload { package: String, output: String },
    #[error("kernel module {name}: {what}")]
    Module { name: String, what: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid plan: {0}")]
    Plan(String),
    #[error("mkfs.ext4 -d {} failed: {stderr}", dir.display())]
    Mkfs { dir: PathBuf, stderr: String },
    #[error("qemu exited ({status}) before the guest finished: {stderr}\n--- console (last lines) ---\n{console}")]
    Qemu {
        status: String,
        stderr: String,
        console: String,
    },
    #[error("guest failed: {message}\n--- console (last lines) ---\n{console}")]
    Guest { message: String, console: String },
    #[error("the guest did not finish within {secs} s (qemu killed)\n--- console (last lines) ---\n{console}")]
    Timeout { secs: u64, console: String },
    #[error("block {block} command {command}: {what}")]
    Result {
        block: usize,
        command: usize,
        what: String,
    },
    #[error(transparent)]
    MountStats(#[from] MountStatsError),
}

impl LabError {
    pub(crate) fn io(what: String, source: std::io::Error) -> Self {
        LabError::Io { what, source }
    }
}

pub type Result<T, E = LabError> = std::result::Result<T, E>;

/// The NFS protocol version a block mounts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NfsVersion {
    /// `vers=3`, mounting `127.0.0.1:/srv/export`.
    V3,
    /// `vers=4.1`, mounting the pseudo-root `127.0.0.1:/`.
    V4_1,
}

impl FromStr for NfsVersion {
    type Err = LabError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "3" => Ok(NfsVersion::V3),
            "4.1" => Ok(NfsVersion::V4_1),
            _ => Err(LabError::Plan(format!(
                "NFS version {s:?}: the lab mounts \"3\" or \"4.1\""
            ))),
        }
    }
}

impl fmt::Display for NfsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NfsVersion::V3 => "3",
            NfsVersion::V4_1 => "4.1",
        })
    }
}

/// One command run in the guest: argv (when `argv[0]` has no slash it is
/// looked up in `PATH` and replaced by the path found; not found, the
/// status is 127), the directory it starts in, and its environment beyond
/// `PATH`, `HOME=/root`, `LC_ALL=C` and `STATSTORM_LAB_WINDOW`. It runs
/// in the host's file tree (read-only) with the guest's own /proc, /sys,
/// /dev, /tmp, /run, /srv/export and /mnt/nfs; stdin is /dev/null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestCommand {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
}

impl GuestCommand {
    /// `argv` starting in `/`, with no extra environment.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        GuestCommand {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: "/".into(),
            env: Vec::new(),
        }
    }

    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = cwd.into();
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// A fresh mount and the commands run on it, in order (sharing the
/// client's caches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub version: NfsVersion,
    /// Options beyond `vers=`, as for `mount -o` (`noatime,actimeo=60`);
    /// may be empty.
    pub mount_options: String,
    /// Whether the server may hand out NFSv4 delegations
    /// (`fs.leases-enable`; no effect on NFSv3).
    pub delegations: bool,
    pub commands: Vec<GuestCommand>,
}

impl Block {
    pub fn new(version: NfsVersion, mount_options: impl Into<String>, delegations: bool) -> Self {
        Block {
            version,
            mount_options: mount_options.into(),
            delegations,
            commands: Vec::new(),
        }
    }

    pub fn command(mut self, c: GuestCommand) -> Self {
        self.commands.push(c);
        self
    }
}

/// What one guest boot runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The host directory the export is built from (copied into an ext4
    /// image: the guest's nfsd serves the copy, never the host's tree).
    pub export: PathBuf,
    pub blocks: Vec<Block>,
    /// Wall-clock limit of the whole boot; qemu is killed after it.
    pub timeout: Duration,
    /// Guest memory.
    pub memory_mib: u32,
}

impl Plan {
    /// No block yet, a 240 s timeout, 1 GiB of guest memory.
    pub fn new(export: impl Into<PathBuf>) -> Self {
        Plan {
            export: export.into(),
            blocks: Vec::new(),
            timeout: Duration::from_secs(240),
            memory_mib: 1024,
        }
    }
}

/// What one command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    pub argv: Vec<String>,
    /// The shell's `$?`: the exit status, or 128 + the signal number when
    /// a signal ended it; 127 when `argv[0]` was not found.
    pub status: i32,
    /// Output, decoded as UTF-8 (invalid sequences replaced).
    pub stdout: String,
    pub stderr: String,
    /// Per RPC procedure, the requests the client sent on /mnt/nfs while
    /// the command ran (procedures with none left out).
    pub ops: BTreeMap<String, u64>,
    /// The /mnt/nfs mount's statistics just before and just after.
    pub before: MountStat,
    pub after: MountStat,
    /// Guest monotonic time from just before the command's start to just
    /// after its end.
    pub duration: Duration,
    /// The file the command wrote at `$STATSTORM_LAB_WINDOW`, if it did
    /// (a replayer's own mountstats snapshots, for example: parse them with
    /// [`mountstats::parse`]).
    pub window: Option<String>,
}

/// What one block did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockOutcome {
    pub version: NfsVersion,
    /// The block's `/proc/mounts` line for /mnt/nfs.
    pub mount_line: String,
    /// The options field of that line: what the kernel reports as in
    /// effect (`nfs_show_mount_options`, fs/nfs/super.c, leaves out some
    /// options at their defaults, such as `acregmin=3`; the mountstats
    /// `opts:` line, in each command's [`CommandOutcome::before`], lists
    /// those too).
    pub effective_options: String,
    pub commands: Vec<CommandOutcome>,
}

/// What one boot did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub blocks: Vec<BlockOutcome>,
    /// Host wall time from starting qemu until the guest's NFS server ran.
    pub boot_to_ready: Option<Duration>,
    /// The same in guest time (the guest's uptime then).
    pub guest_boot_to_ready: Option<Duration>,
    /// Host wall time of the whole boot, qemu start to exit.
    pub wall: Duration,
    /// The guest's serial console.
    pub console: String,
}

/// The prepared assets: run as many plans as wanted, one boot each.
#[derive(Debug)]
pub struct Lab {
    qemu: PathBuf,
    mkfs: PathBuf,
    kernel: KernelAssets,
    /// Holds `initramfs.cpio`.
    dir: tempfile::TempDir,
}

impl Lab {
    /// Finds the host programs, fetches (once, into `cache`) the kernel
    /// and modules of the distribution's kernel package and builds the
    /// initramfs. Errors name the Debian package to install.
    pub fn prepare(cache: &Path) -> Result<Lab> {
        let qemu = assets::find_program("qemu-system-x86_64", "qemu-system-x86")?;
        let mkfs = assets::find_program("mkfs.ext4", "e2fsprogs")?;
        for (p, pkg) in [
            ("rpc.nfsd", "nfs-kernel-server"),
            ("mount.nfs", "nfs-common"),
        ] {
            assets::find_program(p, pkg)?;
        }
        let (_, busybox) = assets::static_busybox()?;
        // without apt's lists (offline, no apt-get update) a kernel
        // cached before still serves
        let package = match assets::kernel_package() {
            Ok(p) => p,
            Err(e) => assets::cached_kernel(cache).ok_or(e)?,
        };
        let kernel = assets::kernel_assets(cache, &package)?;
        let dir = tempfile::Builder::new()
            .prefix("statstorm-lab-")
            .tempdir()
            .map_err(|e| LabError::io("creating a temporary directory".into(), e))?;
        let initramfs = assets::initramfs(&busybox, &kernel)?;
        fs::write(dir.path().join("initramfs.cpio"), initramfs)
            .map_err(|e| LabError::io("writing the initramfs".into(), e))?;
        Ok(Lab {
            qemu,
            mkfs,
            kernel,
            dir,
        })
    }

    /// The kernel the guest boots.
    pub fn kernel(&self) -> &KernelAssets {
        &self.kernel
    }

    /// Boots the guest once and runs `plan`'s blocks in order. qemu is
    /// killed and the temporary files removed on every path out.
    pub fn run(&self, plan: &Plan) -> Result<RunOutcome> {
        check_plan(plan)?;
        let tmp = tempfile::Builder::new()
            .prefix("statstorm-lab-run-")
            .tempdir()
            .map_err(|e| LabError::io("creating a temporary directory".into(), e))?;
        let share = tmp.path().join("out");
        fs::create_dir(&share).map_err(|e| LabError::io("creating the share".into(), e))?;
        fs::write(share.join("plan.sh"), guest::plan_script(&plan.blocks))
            .map_err(|e| LabError::io("writing the plan".into(), e))?;
        let image = tmp.path().join("export.img");
        vm::export_image(&self.mkfs, &plan.export, &image)?;
        let boot = vm::Boot {
            qemu: &self.qemu,
            kernel: &self.kernel.vmlinuz,
            initramfs: &self.dir.path().join("initramfs.cpio"),
            image: &image,
            share: &share,
            console: &tmp.path().join("console.log"),
            memory_mib: plan.memory_mib,
            timeout: plan.timeout,
        };
        let booted = boot.run()?;
        let blocks = plan
            .blocks
            .iter()
            .enumerate()
            .map(|(b, block)| read_block(&share, b, block))
            .collect::<Result<_>>()?;
        // /proc/uptime's first field, seconds with two decimals
        let guest_boot_to_ready = fs::read_to_string(share.join("ready"))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        Ok(RunOutcome {
            blocks,
            boot_to_ready: booted.boot_to_ready,
            guest_boot_to_ready,
            wall: booted.wall,
            console: booted.console,
        })
    }
}

fn check_plan(plan: &Plan) -> Result<()> {
    if !plan.export.is_dir() {
        return Err(LabError::Plan(format!(
            "export {} is not a directory",
            plan.export.display()
        )));
    }
    if plan.blocks.is_empty() {
        return Err(LabError::Plan("no block".into()));
    }
    for (b, block) in plan.blocks.iter().enumerate() {
        if block.mount_options.contains(char::is_whitespace) {
            return Err(LabError::Plan(format!(
                "block {b}: mount options with white space"
            )));
        }
        if block
            .mount_options
            .split(',')
            .any(|o| o.starts_with("vers=") || o.starts_with("nfsvers="))
        {
            return Err(LabError::Plan(format!(
                "block {b}: the version is the block's, not a mount option"
            )));
        }
        for (c, cmd) in block.commands.iter().enumerate() {
            if cmd.argv.is_empty() {
                return Err(LabError::Plan(format!("block {b} command {c}: empty argv")));
            }
            if !cmd.cwd.starts_with('/') {
                return Err(LabError::Plan(format!(
                    "block {b} command {c}: cwd {:?} is not absolute",
                    cmd.cwd
                )));
            }
            if cmd.env.iter().any(|(k, _)| k.is_empty() || k.contains('=')) {
                return Err(LabError::Plan(format!(
                    "block {b} command {c}: bad environment name"
                )));
            }
        }
    }
    Ok(())
}

fn read_block(share: &Path, b: usize, block: &Block) -> Result<BlockOutcome> {
    let dir = share.join(format!("b{b}"));
    let read = |p: &Path, c: usize| {
        fs::read(p).map_err(|e| LabError::Result {
            block: b,
            command: c,
            what: format!("reading {}: {e}", p.display()),
        })
    };
    let mount_line = String::from_utf8_lossy(&read(&dir.join("mount"), 0)?)
        .trim()
        .to_string();
    let effective_options = mount_line.split(' ').nth(3).unwrap_or_default().to_string();
    let mut commands = Vec::new();
    for (c, cmd) in block.commands.iter().enumerate() {
        let d = dir.join(format!("c{c}"));
        let err = |what: String| LabError::Result {
            block: b,
            command: c,
            what,
        };
        if let Ok(e) = fs::read_to_string(d.join("cd_error")) {
            return Err(err(format!("cannot enter {}: {}", cmd.cwd, e.trim())));
        }
        let text =
            |name: &str| read(&d.join(name), c).map(|v| String::from_utf8_lossy(&v).into_owned());
        let status = text("status")?;
        let status = status
            .trim()
            .parse::<i32>()
            .map_err(|_| err(format!("status {status:?}")))?;
        let ns = text("duration_ns")?;
        let ns = ns
            .trim()
            .parse::<u64>()
            .map_err(|_| err(format!("duration {ns:?}")))?;
        let snap = |name: &str| -> Result<MountStat> {
            let s = mountstats::parse(&text(name)?)?;
            s.mount(NFS_MOUNTPOINT)
                .cloned()
                .ok_or_else(|| err(format!("{name} snapshot has no {NFS_MOUNTPOINT} mount")))
        };
        let before = snap("before")?;
        let after = snap("after")?;
        let ops = mountstats::op_deltas(&before, &after)?;
        commands.push(CommandOutcome {
            argv: cmd.argv.clone(),
            status,
            stdout: text("stdout")?,
            stderr: text("stderr")?,
            ops,
            before,
            after,
            duration: Duration::from_nanos(ns),
            window: fs::read(d.join("window"))
                .ok()
                .map(|v| String::from_utf8_lossy(&v).into_owned()),
        });
    }
    Ok(BlockOutcome {
        version: block.version,
        mount_line,
        effective_options,
        commands,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!("3".parse::<NfsVersion>().unwrap(), NfsVersion::V3);
        assert_eq!("4.1".parse::<NfsVersion>().unwrap().to_string(), "4.1");
        assert!("4"
            .parse::<NfsVersion>()
            .unwrap_err()
            .to_string()
            .contains("\"4\""));
    }

    #[test]
    fn plans_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let mut p = Plan::new(d.path());
        assert!(check_plan(&p).unwrap_err().to_string().contains("no block"));
        p.blocks.push(Block::new(NfsVersion::V3, "vers=4", true));
        assert!(check_plan(&p).is_err());
        p.blocks[0].mount_options = "noatime".into();
        p.blocks[0]
            .commands
            .push(GuestCommand::new(["ls"]).cwd("mnt"));
        assert!(check_plan(&p)
            .unwrap_err()
            .to_string()
            .contains("not absolute"));
        p.blocks[0].commands[0].cwd = "/mnt/nfs".into();
        check_plan(&p).unwrap();
        p.export = d.path().join("missing");
        assert!(check_plan(&p).is_err());
    }
}
