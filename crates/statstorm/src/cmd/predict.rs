//! `statstorm predict TRACE... --php KEY=VALUE ... [--php-ini FILE]
//! [--from-php K=V ...] [--from-php-ini FILE] [--from-php-info FILE]
//! [--reference REFTRACE [--reference-php K=V ... | --reference-php-ini F]]
//! [NFS flags] [simulator flags] [--format text|json]`
//!
//! Glue: flags -> [`PredictOptions`] -> `statstorm_engine::predict` ->
//! a renderer (`render::predict` for text, serde for JSON).
//!
//! Exit codes: 0 predicted; 2 bad arguments, unreadable input or a
//! malformed setting.

use anyhow::Result;
use statstorm_engine::predict::{NfsCache as EngineCache, NfsOptions, PredictOptions, SimOptions};
use statstorm_render::Export;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// strace logs (`strace -f -ttt -T -y` of php-fpm or php-cli; .gz/.zst
    /// by content).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// A proposed setting, applied on top of the recorded ones (repeatable).
    #[arg(long = "php", value_name = "KEY=VALUE")]
    pub php: Vec<String>,
    /// A php.ini whose settings are proposed (before the --php flags).
    #[arg(long = "php-ini", value_name = "FILE")]
    pub php_ini: Option<PathBuf>,
    /// The proposed storage's time per call of one kind, as strace names
    /// it (`newfstatat=5ms`: every stat, lstat and fstat; also `openat`,
    /// `access`, `readlink`, ...; `stat` stands for `newfstatat`): the
    /// requests' later operations move by the difference with the
    /// capture's median for each call, and OPcache's race windows
    /// (several workers validating or compiling the same script) follow
    /// (repeatable).
    #[arg(long = "call-latency", value_name = "SYSCALL=DURATION")]
    pub call_latency: Vec<String>,
    /// A setting the trace was recorded under (repeatable).
    #[arg(long = "from-php", value_name = "KEY=VALUE")]
    pub from_php: Vec<String>,
    /// The php.ini the trace was recorded under.
    #[arg(long = "from-php-ini", value_name = "FILE")]
    pub from_php_ini: Option<PathBuf>,
    /// `php -i` / `php-fpm -i` output of the recording machine.
    #[arg(long = "from-php-info", value_name = "FILE")]
    pub from_php_info: Option<PathBuf>,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = super::format_parser::<statstorm_engine::predict::Report>())]
    pub format: statstorm_render::Format,
    /// With stderr not a terminal, write a one-line status (bytes read,
    /// events, rate) every SECONDS (default 10) while reading the traces.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "10")]
    pub progress: Option<f64>,
    /// Warn on stderr when a trace that is a pipe or a device (not a
    /// regular file) gives no new strace event for SECONDS; 0: never.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub stall_warning: f64,
    /// A reference capture of the same application, recorded with OPcache and
    /// the realpath cache off (`opcache.enable=0 realpath_cache_size=0`, or
    /// open_basedir set), e.g. a few requests on one staging pool: it shows
    /// every include, include vs include_once and every *_once repeat, which
    /// a capture made with caches on hides. Its PHP operations complete the
    /// requests of TRACE (whose times, workers, request mix and writes are
    /// kept); its own requests are not predicted. Refused when caches hid
    /// part of its includes (repeatable: files of one capture).
    #[arg(long = "reference", value_name = "REFTRACE")]
    pub reference: Vec<PathBuf>,
    /// A setting the reference capture was recorded under (repeatable); only
    /// needed when the trace alone does not show that both caches were off.
    #[arg(
        long = "reference-php",
        value_name = "KEY=VALUE",
        requires = "reference"
    )]
    pub reference_php: Vec<String>,
    /// The php.ini the reference capture was recorded under.
    #[arg(
        long = "reference-php-ini",
        value_name = "FILE",
        requires = "reference"
    )]
    pub reference_php_ini: Option<PathBuf>,
    /// Also write the lifted PHP operations (statstorm.workload/1 JSON).
    #[arg(long = "workload-out", value_name = "FILE")]
    pub workload_out: Option<PathBuf>,
    /// NFS model flags (boxed: keeps the subcommand enum small).
    #[command(flatten)]
    pub nfs: Box<NfsArgs>,
    /// Simulator flags for the latency columns (with NFS flags).
    #[command(flatten)]
    pub sim: Box<SimArgs>,
}

/// The NFS flags of `predict`.
#[derive(clap::Args, Clone, Debug)]
pub struct NfsArgs {
    /// NFS mount options the trace ran under (e.g. "vers=3,relatime").
    #[arg(long = "from-mount", value_name = "OPTS")]
    pub from_mount: Option<String>,
    /// A copy of /proc/mounts (or /etc/fstab) of the recording machine
    /// (recorded options and, unless --nfs-root, the NFS root).
    #[arg(long = "mounts", value_name = "FILE")]
    pub mounts: Option<PathBuf>,
    /// Proposed NFS mount options, applied over the recorded ones
    /// (default: same as recorded). OPTS applies to every NFS root;
    /// DIR:OPTS to the root DIR only (repeatable, applied in order).
    #[arg(long = "mount", value_name = "[DIR:]OPTS")]
    pub mount: Vec<String>,
    /// Proposed: DIR, under an NFS root, gets a mount of its own (the same
    /// server, the root's recorded options), so that the root's options
    /// can change while DIR keeps its own: a read-only code mount apart
    /// from a written uploads directory (repeatable; `--mount DIR:OPTS`
    /// then names it as a root).
    #[arg(long = "mount-apart", value_name = "DIR")]
    pub mount_apart: Vec<String>,
    /// A directory on NFS, with the options it was recorded under after a
    /// colon (over --from-mount); one per mount, each with a client of its
    /// own (repeatable; default: the NFS mounts of --mounts that the trace
    /// uses).
    #[arg(long = "nfs-root", value_name = "DIR[:OPTS]")]
    pub nfs_root: Vec<String>,
    /// Whether the NFS server grants NFSv4 read delegations (Linux nfsd
    /// does; many NAS and cloud services do not).
    #[arg(long = "delegations", value_enum, default_value_t = OnOff::Off)]
    pub delegations: OnOff,
    /// Another client created, renamed or removed PATH at EPOCH (repeatable).
    #[arg(long = "server-change", value_name = "EPOCH:PATH")]
    pub server_change: Vec<String>,
    /// The NFS client's caches at the first traced call: cold (a fresh
    /// mount) or warm (the capture's read-side operations ran twice just
    /// before, as on a client that had been serving the same traffic).
    #[arg(long = "nfs-cache", value_enum, default_value_t = NfsCache::Cold)]
    pub nfs_cache: NfsCache,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NfsCache {
    Cold,
    Warm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// The simulator flags of `predict` (see `statstorm_sim::QuickParams`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SimArgs {
    /// php-fpm workers (pm.max_children) for the latency simulation
    /// [default: 50].
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// Synthetic Poisson arrivals at this many requests per second, the
    /// trace's requests used in turn [default: the trace's own start times].
    #[arg(long, value_name = "PER_S")]
    pub rate: Option<f64>,
    /// RPC slots: NFSv4.1+ session slots [default: 64], or the SunRPC slot
    /// table on NFSv3/v4.0 [default: 65536].
    #[arg(long, value_name = "N")]
    pub slots: Option<u32>,
    /// Network round trip to the NFS server, ms [default: 0.5].
    #[arg(long, value_name = "MS")]
    pub rtt: Option<f64>,
    /// Server time per RPC, ms, fixed [default: 0.5].
    #[arg(long = "server-latency", value_name = "MS")]
    pub server_latency: Option<f64>,
    /// Server IOPS budget (token bucket; RPCs queue when it is empty)
    /// [default: 0 = none].
    #[arg(long, value_name = "N")]
    pub iops: Option<f64>,
    /// IOPS bucket size [default: one second of --iops].
    #[arg(long, value_name = "N")]
    pub burst: Option<f64>,
    /// php-fpm's listen.backlog [default: 4096: php-fpm 8.2 listens with
    /// -1, which Linux caps at net.core.somaxconn].
    #[arg(long = "listen-backlog", value_name = "N")]
    pub listen_backlog: Option<u32>,
}

impl From<Args> for PredictOptions {
    fn from(a: Args) -> Self {
        let n = *a.nfs;
        let s = *a.sim;
        PredictOptions {
            traces: a.traces,
            php: a.php,
            php_ini: a.php_ini,
            call_latency: a.call_latency,
            from_php: a.from_php,
            from_php_ini: a.from_php_ini,
            from_php_info: a.from_php_info,
            from_pool: Vec::new(),
            reference: a.reference,
            reference_php: a.reference_php,
            reference_php_ini: a.reference_php_ini,
            workload_out: a.workload_out,
            nfs: NfsOptions {
                from_mount: n.from_mount,
                mounts: n.mounts,
                mount: n.mount,
                mount_apart: n.mount_apart,
                nfs_root: n.nfs_root,
                delegations: n.delegations == OnOff::On,
                server_change: n.server_change,
                nfs_cache: match n.nfs_cache {
                    NfsCache::Cold => EngineCache::Cold,
                    NfsCache::Warm => EngineCache::Warm,
                },
            },
            sim: s.into(),
            read: Default::default(),
        }
    }
}

impl From<SimArgs> for SimOptions {
    fn from(s: SimArgs) -> Self {
        SimOptions {
            workers: s.workers,
            rate: s.rate,
            slots: s.slots,
            rtt: s.rtt,
            server_latency: s.server_latency,
            iops: s.iops,
            burst: s.burst,
            listen_backlog: s.listen_backlog,
        }
    }
}

pub fn run(args: Args) -> Result<i32> {
    let format = args.format;
    // the stall guard for traces that are pipes or devices, and status
    // lines when asked (a spinner names the stages on a terminal)
    let (traces, progress, stall) = (args.traces.clone(), args.progress, args.stall_warning);
    let opts = PredictOptions::from(args);
    let report = crate::progress::watched(
        "predict",
        &traces,
        progress,
        stall,
        &opts.read,
        statstorm_engine::predict::READING,
        |stage| statstorm_engine::predict::predict(&opts, stage),
    )?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    report.export(format, &mut out)?;
    out.flush()?;
    Ok(0)
}
