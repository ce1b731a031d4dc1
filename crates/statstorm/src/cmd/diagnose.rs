//! `statstorm diagnose (TRACE... | --live [--live-pid PID | --live-comm
//! NAME] [--live-duration 60s]) [--php-ini F] [--php-info F] [--php K=V]...
//! [--fpm-conf F [--fpm-pool NAME]] [--mounts F | --from-mount OPTS]
//! [--nfs-root DIR]... [--writable DIR]... [--mountstats F [--mountstats F]]
//! [--nfsstat F]
//! [simulator flags] [--format text|md|json|html] [-o FILE] [--progress [S]]
//! [--stall-warning S]`
//!
//! Glue: flags -> [`Options`] -> `statstorm_engine::diagnose` -> a
//! renderer (`render::diagnose`).
//!
//! Exit codes: 0 diagnosed; 2 bad arguments, unreadable input or a
//! malformed setting.

use super::predict::{NfsCache, OnOff, SimArgs};
use anyhow::{Context, Result};
use statstorm_engine::diagnose::{Diagnosis, Options};
use statstorm_engine::predict::{NfsCache as EngineCache, NfsOptions, PredictOptions};
use statstorm_render::Export;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// strace logs (`strace -f -ttt -T -y` of php-fpm or php-cli; .gz/.zst
    /// by content).
    #[arg(required_unless_present = "live")]
    pub traces: Vec<PathBuf>,
    /// Record live first (statstorm record: --live-pid or --live-comm, for
    /// --live-duration), then diagnose the capture (kept in the temporary
    /// directory; its path is printed).
    #[arg(long, conflicts_with = "traces")]
    pub live: bool,
    /// With --live: a process to record, with its descendants (repeatable).
    #[arg(long = "live-pid", value_name = "PID", requires = "live")]
    pub live_pid: Vec<u32>,
    /// With --live: record every process whose name starts with NAME.
    #[arg(long = "live-comm", value_name = "NAME", requires = "live")]
    pub live_comm: Option<String>,
    /// With --live: how long to record (60s, 5m).
    #[arg(long = "live-duration", value_name = "TIME", default_value = "60s", value_parser = humantime::parse_duration)]
    pub live_duration: std::time::Duration,
    /// The php.ini the capture ran under (default: inferred from the
    /// trace, the rest PHP's defaults; the report lists them).
    #[arg(long = "php-ini", value_name = "FILE")]
    pub php_ini: Option<PathBuf>,
    /// `php -i` / `php-fpm -i` output of the recording machine.
    #[arg(long = "php-info", value_name = "FILE")]
    pub php_info: Option<PathBuf>,
    /// A setting the capture ran under, over --php-ini (repeatable).
    #[arg(long = "php", value_name = "KEY=VALUE")]
    pub php: Vec<String>,
    /// The php-fpm pool file the capture ran under: its php_value /
    /// php_admin_value lines (over --php-ini), pm.max_children and
    /// listen.backlog (unless --workers / --listen-backlog).
    #[arg(long = "fpm-conf", value_name = "FILE")]
    pub fpm_conf: Option<PathBuf>,
    /// The pool of --fpm-conf (default: its first).
    #[arg(long = "fpm-pool", value_name = "NAME", requires = "fpm_conf")]
    pub fpm_pool: Option<String>,
    /// A copy of /proc/mounts (or /etc/fstab) of the recording machine (the
    /// NFS mounts the trace uses and their options).
    #[arg(long = "mounts", value_name = "FILE")]
    pub mounts: Option<PathBuf>,
    /// NFS mount options the capture ran under (e.g. "vers=4.1").
    #[arg(long = "from-mount", value_name = "OPTS")]
    pub from_mount: Option<String>,
    /// A directory on NFS, with the options it was recorded under after a
    /// colon (repeatable; default: the NFS mounts of --mounts the trace
    /// uses).
    #[arg(long = "nfs-root", value_name = "DIR[:OPTS]")]
    pub nfs_root: Vec<String>,
    /// Whether the NFS server grants NFSv4 read delegations.
    #[arg(long = "delegations", value_enum, default_value_t = OnOff::Off)]
    pub delegations: OnOff,
    /// The NFS client's caches at the first traced call.
    #[arg(long = "nfs-cache", value_enum, default_value_t = NfsCache::Cold)]
    pub nfs_cache: NfsCache,
    /// /proc/self/mountstats of the recording machine: once (the mount's
    /// RPCs since it was mounted) or twice, taken before and after the
    /// capture (the RPCs between). Its RPC mix is set beside the model's,
    /// and its mean round trip is the time per RPC (unless --server-latency).
    #[arg(long = "mountstats", value_name = "FILE", num_args = 1)]
    pub mountstats: Vec<PathBuf>,
    /// `nfsstat -c` output of the recording machine: its RPC mix set beside
    /// the model's.
    #[arg(long = "nfsstat", value_name = "FILE")]
    pub nfsstat: Option<PathBuf>,
    /// A directory written through other clients (uploads, caches shared
    /// by several nodes): never given nocto nor long attribute caching
    /// (repeatable; directories the trace writes to count too).
    #[arg(long = "writable", value_name = "DIR")]
    pub writable: Vec<String>,
    /// Simulator flags for the latency figures (with NFS).
    #[command(flatten)]
    pub sim: Box<SimArgs>,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = super::format_parser::<Diagnosis>())]
    pub format: statstorm_render::Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With stderr not a terminal, write a one-line status (bytes read,
    /// events, rate) every SECONDS (default 10) while reading the traces,
    /// and a line per stage.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "10")]
    pub progress: Option<f64>,
    /// Warn on stderr when a trace that is a pipe or a device (not a
    /// regular file) gives no new strace event for SECONDS; 0: never.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub stall_warning: f64,
}

impl From<Args> for Options {
    fn from(a: Args) -> Self {
        Options {
            predict: PredictOptions {
                traces: a.traces,
                from_php: a.php,
                from_php_ini: a.php_ini,
                from_php_info: a.php_info,
                nfs: NfsOptions {
                    from_mount: a.from_mount,
                    mounts: a.mounts,
                    nfs_root: a.nfs_root,
                    delegations: a.delegations == OnOff::On,
                    nfs_cache: match a.nfs_cache {
                        NfsCache::Cold => EngineCache::Cold,
                        NfsCache::Warm => EngineCache::Warm,
                    },
                    ..NfsOptions::default()
                },
                sim: (*a.sim).into(),
                ..PredictOptions::default()
            },
            writable: a.writable,
            fpm_conf: a.fpm_conf,
            fpm_pool: a.fpm_pool,
            mountstats: a.mountstats,
            nfsstat: a.nfsstat,
        }
    }
}

pub fn run(mut args: Args) -> Result<i32> {
    if args.live {
        let cfg = statstorm_record::recorder::Config {
            pids: std::mem::take(&mut args.live_pid),
            comm: args.live_comm.take(),
            command: None,
            duration: args.live_duration,
            ring_bytes: statstorm_record::recorder::DEFAULT_RING_BYTES,
            counts: None,
            max_cpu: Some(statstorm_record::recorder::DEFAULT_MAX_CPU),
        };
        let path = std::env::temp_dir().join(format!("statstorm-live-{}.txt", std::process::id()));
        if let Err(code) = super::record::capture(&cfg, Some(&path))? {
            return Ok(code);
        }
        errln!("diagnose: the capture is kept in {}", path.display());
        args.traces = vec![path];
    }
    let format = args.format;
    let output = args.output.clone();
    // as predict: the stall guard for traces that are pipes or devices,
    // status lines when asked, watching the reading only
    let (traces, progress, stall) = (args.traces.clone(), args.progress, args.stall_warning);
    let opts = Options::from(args);
    let d = crate::progress::watched(
        "diagnose",
        &traces,
        progress,
        stall,
        &opts.predict.read,
        statstorm_engine::predict::READING,
        |stage| statstorm_engine::diagnose::diagnose(&opts, stage),
    )?;
    match output {
        Some(p) => {
            let f =
                std::fs::File::create(&p).with_context(|| format!("writing {}", p.display()))?;
            let mut out = std::io::BufWriter::new(f);
            d.export(format, &mut out)
                .and_then(|_| out.flush())
                .with_context(|| format!("writing {}", p.display()))?;
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            d.export(format, &mut out)?;
            out.flush()?;
        }
    }
    Ok(0)
}
