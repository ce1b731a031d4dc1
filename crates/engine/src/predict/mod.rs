//! `predict`: a capture under another php.ini and other mount options.
//!
//! Load traces -> split requests (every process kind) -> lift (PHP
//! operations per request; with a reference capture, completed from a short
//! capture of the same application made with both caches off) -> lower
//! under the recorded settings (before) and under the proposed ones (after)
//! -> the NFS client model on the recorded calls, before and after (every
//! event in time order, background activity included) -> the simulator for
//! latency. The result is a [`Report`]; renderers put it into words.
//! The models live in `statstorm-php`, `statstorm-nfs` and `statstorm-sim`
//! (docs/php-model.md, docs/nfs-model.md, docs/simulator.md).

use serde::Serialize;
use statstorm_nfs::RpcCounts;
use statstorm_php::lower::{count_by_syscall, CHECKED};
use statstorm_php::request::split_requests;
use statstorm_php::{PhpConfig, Workload};
use statstorm_trace::Tally;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub mod call_latency;
pub mod gap_trials;
pub mod latency;
mod notes;
pub mod rows;
mod side;

pub use latency::SimOptions;

/// Why a prediction could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}")]
    Input {
        what: String,
        #[source]
        source: statstorm_trace::input::Error,
    },
    #[error("no strace events in {files} (expected `strace -f -ttt -T -y` output)")]
    NoEvents { files: String },
    /// The input is `strace -c` tables only: totals, no calls to model.
    #[error("{files}: an `strace -c` summary table (totals only, no calls): predicting needs the calls themselves (`strace -f -ttt -T -y`)")]
    SummaryOnly {
        files: String,
        summary: statstorm_trace::Summary,
    },
    /// A counts capture (`record --counts`): counts, not calls.
    #[error("{file}: a counts capture (`statstorm record --counts`: calls counted, not their order): predicting needs the calls themselves (`statstorm record` without --counts, or `strace -f -ttt -T -y`); `statstorm analyze` reads it")]
    CountsCapture { file: String },
    #[error(transparent)]
    Setting(#[from] statstorm_php::ConfigError),
    /// The reference capture cannot complete the requests.
    #[error("reference capture {files}: {why}")]
    Reference { files: String, why: String },
    /// The NFS options are inconsistent, or name no traced path.
    #[error("{0}")]
    Nfs(String),
    /// A simulator option is out of range.
    #[error("{0}")]
    Sim(String),
    #[error("--call-latency: {0}")]
    CallLatency(String),
    /// A configuration file of the recording machine is unreadable or
    /// names nothing usable.
    #[error("{0}")]
    Evidence(String),
    /// The capture's calls, its lifted requests or a side's calls for the
    /// latency simulation could not be written to, or read back from,
    /// their temporary file.
    #[error(
        "the capture's calls or lifted requests in a temporary file in {dir} ($TMPDIR): {source}"
    )]
    Spill {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A temporary file of the capture (in `$TMPDIR`) failed.
    pub(crate) fn spill(source: std::io::Error) -> Error {
        Error::Spill {
            dir: std::env::temp_dir().display().to_string(),
            source,
        }
    }
}

/// The name of the first stage [`predict`] reports: reading the traces.
pub const READING: &str = "reading traces";

/// `Result` of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// What to predict: the capture, the settings it ran under, the change.
#[derive(Clone, Debug, Default)]
pub struct PredictOptions {
    /// strace logs (`strace -f -ttt -T -y` of php-fpm or php-cli; .gz/.zst
    /// by content).
    pub traces: Vec<PathBuf>,
    /// A proposed setting, applied on top of the recorded ones (repeatable).
    pub php: Vec<String>,
    /// A php.ini whose settings are proposed (before the --php flags).
    pub php_ini: Option<PathBuf>,
    /// The proposed storage's time per call of one kind, as strace names
    /// it (`newfstatat=5ms`: every stat, lstat and fstat; also `openat`,
    /// `access`, `readlink`, ...; `stat` stands for `newfstatat`): the
    /// requests' later operations move by the difference with the
    /// capture's median for each call, and OPcache's race windows
    /// (several workers validating or compiling the same script) follow
    /// (repeatable).
    pub call_latency: Vec<String>,
    /// A setting the trace was recorded under (repeatable).
    pub from_php: Vec<String>,
    /// The php.ini the trace was recorded under.
    pub from_php_ini: Option<PathBuf>,
    /// `php -i` / `php-fpm -i` output of the recording machine.
    pub from_php_info: Option<PathBuf>,
    /// The php values of the php-fpm pool the trace ran under, over the
    /// php.ini ([`crate::evidence::fpm::Pool::php_pairs`]).
    pub from_pool: Vec<statstorm_php::config::Pair>,
    /// A reference capture of the same application, recorded with OPcache and
    /// the realpath cache off (`opcache.enable=0 realpath_cache_size=0`, or
    /// open_basedir set), e.g. a few requests on one staging pool: it shows
    /// every include, include vs include_once and every *_once repeat, which
    /// a capture made with caches on hides. Its PHP operations complete the
    /// requests of TRACE (whose times, workers, request mix and writes are
    /// kept); its own requests are not predicted. Refused when caches hid
    /// part of its includes (repeatable: files of one capture).
    pub reference: Vec<PathBuf>,
    /// A setting the reference capture was recorded under (repeatable); only
    /// needed when the trace alone does not show that both caches were off.
    pub reference_php: Vec<String>,
    /// The php.ini the reference capture was recorded under.
    pub reference_php_ini: Option<PathBuf>,
    /// Also write the lifted PHP operations (statstorm.workload/1 JSON).
    pub workload_out: Option<PathBuf>,
    /// The NFS model's inputs.
    pub nfs: NfsOptions,
    /// The simulator's parameters for the latency columns (with NFS).
    pub sim: SimOptions,
    /// Bytes and events read so far from the traces, published as they
    /// are read (for a status line or a stall guard on another thread).
    pub read: std::sync::Arc<statstorm_trace::input::Counters>,
}

/// The NFS inputs of a prediction.
#[derive(Clone, Debug, Default)]
pub struct NfsOptions {
    /// NFS mount options the trace ran under (e.g. "vers=3,relatime").
    pub from_mount: Option<String>,
    /// A copy of /proc/mounts of the recording machine (recorded options
    /// and, unless --nfs-root, the NFS root).
    pub mounts: Option<PathBuf>,
    /// Proposed NFS mount options, applied over the recorded ones in
    /// order: `OPTS` for every root, `DIR:OPTS` for the root DIR
    /// (default: same as recorded).
    pub mount: Vec<String>,
    /// Directories under a root the proposal mounts apart, each a mount of
    /// its own with the root's recorded options (`--mount-apart`).
    pub mount_apart: Vec<String>,
    /// Which paths are on NFS: `DIR` or `DIR:OPTS` (the options DIR was
    /// recorded under), one per mount (default: the NFS mounts of --mounts
    /// that the trace uses).
    pub nfs_root: Vec<String>,
    /// Whether the NFS server grants NFSv4 read delegations (Linux nfsd
    /// does; many NAS and cloud services do not).
    pub delegations: bool,
    /// Another client created, renamed or removed PATH at EPOCH (repeatable).
    pub server_change: Vec<String>,
    /// The NFS client's caches at the first traced call: cold (a fresh
    /// mount) or warm (the capture's read-side operations ran twice just
    /// before, as on a client that had been serving the same traffic).
    pub nfs_cache: NfsCache,
}

impl NfsOptions {
    /// Whether the recorded calls reach the NFS model: an NFS root or the
    /// mount options the capture ran under is given (a proposed --mount
    /// alone names no root).
    pub fn replays(&self) -> bool {
        self.from_mount.is_some()
            || self.mounts.is_some()
            || !self.nfs_root.is_empty()
            || !self.server_change.is_empty()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NfsCache {
    #[default]
    Cold,
    Warm,
}

/// One column group of a request (before or after). Later models add
/// fields here (RPCs, latency).
#[derive(Debug, Default, Serialize)]
pub struct Side {
    pub by_syscall: Tally,
    /// NFS RPCs by op as /proc/self/mountstats names them (with NFS flags).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc: Option<Tally>,
    /// Simulated TTFB of the request, ms (an estimate; with NFS flags).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

impl Side {
    fn counted(by_syscall: Tally) -> Self {
        Side {
            by_syscall,
            rpc: None,
            latency_ms: None,
        }
    }
    /// Calls of syscall `k`.
    pub fn get(&self, k: &str) -> u64 {
        self.by_syscall.of(k)
    }
}

#[derive(Serialize)]
pub struct RequestOut {
    pub pid: u32,
    /// Epoch seconds (the trace's clock).
    pub start: f64,
    pub end: f64,
    /// The entry script (one shared copy per distinct script).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<statstorm_trace::op::Name>,
    /// Operations taken from a richer request of the same script.
    pub from_template: bool,
    /// Operations taken from a request of the reference capture (with
    /// --reference).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_reference: bool,
    pub before: Side,
    pub after: Side,
    /// What the capture recorded for this request: its own calls, and the
    /// RPCs the NFS model gives for them under the recorded options (the
    /// reference the modelled "before" is checked against).
    pub recorded: Side,
}

#[derive(Serialize)]
pub struct Totals {
    pub before: Side,
    pub after: Side,
    pub recorded: Side,
}

/// A process's calls outside any request (pool master, worker startup,
/// other programs): they reach the NFS model on both sides unchanged.
#[derive(Serialize)]
pub struct BackgroundOut {
    pub pid: u32,
    pub start: f64,
    pub end: f64,
    pub recorded: Side,
}

#[derive(Serialize)]
pub struct Settings {
    /// "given" (something was stated: flags or files; the trace fills the
    /// keys they do not name) or "inferred" (from the trace, over PHP's
    /// defaults).
    pub source: String,
    pub settings: BTreeMap<String, String>,
    /// Per key, where its value came from (recorded settings only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub provenance: BTreeMap<String, crate::settings::Provenance>,
}

/// One setting the change moves, as the report lists it.
#[derive(Serialize)]
pub struct SettingChange {
    pub key: String,
    pub from: String,
    pub to: String,
}

#[derive(Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub inputs: Vec<String>,
    /// How requests were split (php-fpm, php-cli, whole trace).
    pub split: String,
    pub recorded: Settings,
    pub proposed: Settings,
    pub changes: Vec<SettingChange>,
    pub evidence: Vec<String>,
    pub notes: Vec<String>,
    /// One row per request, by start (read back when listed).
    pub requests: rows::Rows,
    pub totals: Totals,
    /// Activity outside PHP requests, per process.
    pub background: Vec<BackgroundOut>,
    /// The modelled "before" against the recorded calls, per request.
    pub before_check: crate::check::BeforeCheck,
    /// The NFS model's inputs (present with NFS flags).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NfsOut>,
    /// Simulated latency before/after (docs/simulator.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<latency::LatencyOut>,
    /// The reference capture (with --reference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceOut>,
    /// Per syscall, the capture's median time per call and the proposed
    /// one, µs (with --call-latency).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub call_latency_us: BTreeMap<String, LatencyPair>,
}

/// A kind of call's time: the capture's median (`-T`) and the proposed.
#[derive(Serialize)]
pub struct LatencyPair {
    pub recorded: Option<u64>,
    pub proposed: u64,
}

/// What the reference capture gave (`--reference`).
#[derive(Serialize)]
pub struct ReferenceOut {
    pub files: Vec<String>,
    /// Requests in the reference capture (not predicted).
    pub requests: usize,
    /// The reference showed every include and resolution.
    pub complete: bool,
    /// "inferred" (from the reference trace) or "given"
    /// (--reference-php/--reference-php-ini).
    pub complete_from: String,
    /// TRACE showed every include itself: the reference was not used.
    pub capture_complete: bool,
    /// Requests of TRACE that took their PHP operations from the reference.
    pub completed_requests: usize,
    /// Requests of TRACE left as lifted: their script has reference
    /// requests, but they made operations none of them showed.
    pub unmatched_requests: usize,
    /// Requests of TRACE left as lifted: no reference request ran their
    /// script.
    pub no_reference_requests: usize,
}

#[derive(Serialize)]
pub struct NfsOut {
    /// The busiest mount's root and options (the only one's, with one).
    pub nfs_root: String,
    pub recorded_mount: String,
    pub proposed_mount: String,
    pub delegations: bool,
    pub kernel: String,
    /// Every mount, busiest first (present with several).
    #[serde(skip_serializing_if = "one_mount")]
    pub mounts: Vec<MountOut>,
}

/// One NFS mount of a prediction.
#[derive(Serialize)]
pub struct MountOut {
    pub root: String,
    pub recorded_mount: String,
    pub proposed_mount: String,
    /// A mount the proposal adds apart from its root (`--mount-apart`):
    /// not in the recorded side.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub apart: bool,
}

fn one_mount(m: &[MountOut]) -> bool {
    m.len() <= 1
}

/// The recorded settings and where they came from (docs of
/// [`crate::settings`]), with the notes that say so.
fn recorded_config(
    args: &PredictOptions,
    w: &Workload,
    notes: &mut Vec<String>,
) -> Result<(crate::settings::Recorded, String)> {
    use crate::settings::Provenance;
    let stated = crate::settings::Stated {
        php_info: args.from_php_info.as_deref(),
        ini: args.from_php_ini.as_deref(),
        pool: &args.from_pool,
        flags: &args.from_php,
    };
    let r = crate::settings::recorded(w, stated)?;
    notes.extend(r.notes.iter().cloned());
    let pairs: BTreeMap<String, String> = r.config.to_pairs().into_iter().collect();
    let with = |p: &dyn Fn(&Provenance) -> bool| -> Vec<String> {
        r.provenance
            .iter()
            .filter(|(_, v)| p(v))
            .map(|(k, _)| format!("{k}={}", pairs.get(*k).map_or("", String::as_str)))
            .collect()
    };
    let inferred = with(&|p| *p == Provenance::Inferred);
    let source = if stated.any() { "given" } else { "inferred" };
    if !stated.any() {
        notes.push(format!(
            "recorded settings inferred from the trace: {} (give --from-php/--from-php-ini/--from-php-info to state them)",
            if inferred.is_empty() {
                "nothing".to_string()
            } else {
                inferred.join(" ")
            }
        ));
    } else if !inferred.is_empty() {
        notes.push(format!(
            "recorded settings not stated, inferred from the trace: {}",
            inferred.join(" ")
        ));
    }
    let assumed = with(&|p| *p == Provenance::Default);
    if !assumed.is_empty() {
        notes.push(format!(
            "assumed (PHP 8.2's defaults: neither stated nor shown by the trace): {}",
            assumed.join(" ")
        ));
    }
    Ok((r, source.into()))
}

/// Loads and lifts the reference capture; an error unless it is complete
/// (by its own trace, or by the settings given for it: both caches off and
/// nothing in the trace against it).
/// Text read of a reference capture (`--reference`), which is lifted in
/// memory: a few requests per script run with caches off (the harness's
/// WordPress and MediaWiki captures under open_basedir, whole runs of
/// requests, are 30 and 52 MB of text).
pub const REFERENCE_LIMIT: u64 = 128 << 20;

fn reference_workload(
    args: &PredictOptions,
    notes: &mut Vec<String>,
) -> Result<(Workload, String)> {
    let files = args
        .reference
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    // (held in memory whole: a reference needs a few requests per
    // script, so its size is capped)
    let trace = statstorm_trace::read_paths_limited(&args.reference, REFERENCE_LIMIT).map_err(
        |source| Error::Input {
            what: format!(
                "reading the reference capture {files} (a reference needs a few requests per script, run with OPcache off; at most {} MiB of text is read)",
                REFERENCE_LIMIT >> 20
            ),
            source,
        },
    )?;
    let refuse = |why: String| Error::Reference {
        files: files.clone(),
        why,
    };
    if trace.events.is_empty() {
        return Err(refuse(
            "no strace events (expected `strace -f -ttt -T -y` output)".into(),
        ));
    }
    let split = split_requests(&trace.events, &trace.strings);
    let mut w = statstorm_php::lift(&trace, &split);
    let given = !args.reference_php.is_empty() || args.reference_php_ini.is_some();
    if w.evidence.complete {
        return Ok((w, "inferred".into()));
    }
    if !given {
        return Err(refuse(format!(
            "{} (its evidence: {})",
            statstorm_php::ReferenceError::Incomplete,
            w.evidence.notes.join("; ")
        )));
    }
    let mut c = PhpConfig::default();
    if let Some(p) = &args.reference_php_ini {
        notes.extend(c.apply_ini_file(p)?);
    }
    notes.extend(c.apply_flags(&args.reference_php)?);
    let cli = w.has_cli();
    let realpath_off = c.realpath_cache_size == 0 || !c.open_basedir.is_empty();
    let opcache_seen = w
        .evidence
        .inferred
        .iter()
        .any(|(k, v)| k == "opcache.enable" && v == "1");
    if c.opcache_on(cli) || !realpath_off {
        return Err(refuse(format!(
            "the settings given for it keep {} on, so caches hid part of its includes; record it with opcache.enable=0 and realpath_cache_size=0 (or open_basedir set)",
            if c.opcache_on(cli) {
                "OPcache"
            } else {
                "the realpath cache"
            }
        )));
    }
    if opcache_seen {
        return Err(refuse(
            "the settings given for it say OPcache was off, but the trace shows OPcache timestamp validations (scripts stat()ed without being opened)".into(),
        ));
    }
    notes.push(format!(
        "reference capture {files}: complete by the settings given for it (OPcache off, {}); its trace alone did not show it",
        if c.open_basedir.is_empty() {
            "realpath_cache_size=0"
        } else {
            "open_basedir set"
        }
    ));
    w.evidence.complete = true;
    Ok((w, "given".into()))
}

fn settings_map(c: &PhpConfig) -> BTreeMap<String, String> {
    c.to_pairs().into_iter().collect()
}

fn secs(us: i64) -> f64 {
    us as f64 / 1e6
}

/// A capture read once, for any number of predictions
/// ([`Capture::predict`]): its requests and the calls each recorded, the
/// activity outside requests, the lifted workload (completed from the
/// reference capture, if any), and the settings it was recorded under with
/// their provenance. The trace itself is not kept; a prediction lowers
/// the proposed side request by request (`side`), listing each call's start
/// and RPCs only when the latency simulation needs them; the recorded
/// side and the recorded calls' NFS replay are the same for every change,
/// computed by the first prediction and kept.
pub struct Capture {
    inputs: Vec<String>,
    split_note: String,
    /// The recorded calls (in memory, or in a temporary file for a large
    /// capture), read back when an NFS replay needs them.
    rec: crate::capture::Recorded,
    /// The recorded calls' paths, each with its calls (what the choice of
    /// NFS roots reads; empty when no change replays the calls).
    traced: crate::nfs_setup::TracedPaths,
    /// Per background process, its recorded calls per syscall.
    background_counts: Vec<Tally>,
    w: Workload,
    /// The reference workload, how its completeness was known, its use.
    reference: Option<(Workload, String, statstorm_php::ReferenceUse)>,
    reference_files: Vec<String>,
    recorded: crate::settings::Recorded,
    source: String,
    /// Notes about the capture itself (skipped lines, the reference, the
    /// recorded settings); a prediction's own notes follow them.
    notes: Vec<String>,
    /// The NFS side as recorded (`mount`, the proposal, is ignored here).
    nfs: NfsOptions,
    /// What every prediction on the capture shares, once computed.
    fixed: std::sync::Mutex<Option<std::sync::Arc<Fixed>>>,
    /// The before-check's trials (`gap_trials`): the recorded side is
    /// every prediction's, so they are made once (diagnose predicts many
    /// changes on one capture).
    explained: std::sync::OnceLock<Vec<crate::check::Explained>>,
    /// How the requests were split.
    mode: statstorm_php::request::RequestMode,
    format: InputFormat,
}

/// What does not depend on the change predicted: the recorded settings'
/// side, and the recorded calls replayed by the NFS model (with NFS).
struct Fixed {
    side: side::SideRun,
    /// Per request, then per background group.
    replayed: Option<(crate::column::Interned<RpcCounts>, Vec<RpcCounts>)>,
}

/// What the traces' format shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InputFormat {
    /// Every input has timestamps (`-t`, `-tt`, `-ttt` or `-r`).
    pub timestamps: bool,
    /// Every input has `-T` durations.
    pub durations: bool,
}

/// A change to predict on a [`Capture`]: proposed php settings, storage
/// call times, mount options and the simulator's parameters.
#[derive(Clone, Debug, Default)]
pub struct Change {
    /// Proposed settings, applied on top of the recorded ones.
    pub php: Vec<String>,
    /// A php.ini whose settings are proposed (before `php`).
    pub php_ini: Option<PathBuf>,
    /// The proposed storage's time per call of one kind
    /// ([`PredictOptions::call_latency`]).
    pub call_latency: Vec<String>,
    /// Proposed mount options: `OPTS` for every root, `DIR:OPTS` for one.
    pub mount: Vec<String>,
    /// Directories mounted apart from their root (proposed side only).
    pub mount_apart: Vec<String>,
    /// The simulator's parameters for the latency columns.
    pub sim: SimOptions,
}

impl Change {
    /// The change `args` asks for.
    pub fn of(args: &PredictOptions) -> Change {
        Change {
            php: args.php.clone(),
            php_ini: args.php_ini.clone(),
            call_latency: args.call_latency.clone(),
            mount: args.nfs.mount.clone(),
            mount_apart: args.nfs.mount_apart.clone(),
            sim: args.sim.clone(),
        }
    }
}

/// Predicts `args`: [`Capture::load`], then [`Capture::predict`] of the
/// change it asks for. `stage` is told each stage's name as it starts
/// (progress for long runs).
/// Whether the file at `p` (plain or compressed; stdin is not looked at)
/// starts as a counts capture does.
fn is_counts_capture(p: &std::path::Path) -> bool {
    use std::io::Read;
    if p.as_os_str() == "-" {
        return false;
    }
    let Ok(r) = statstorm_trace::input::open(p) else {
        return false;
    };
    let mut head = Vec::new();
    let want = statstorm_trace::counts::MAGIC.len() as u64;
    r.take(want).read_to_end(&mut head).is_ok() && statstorm_trace::counts::is_counts(&head)
}

pub fn predict(args: &PredictOptions, stage: &mut dyn FnMut(&'static str)) -> Result<Report> {
    let cap = Capture::load(args, stage)?;
    cap.predict(&Change::of(args), stage)
}

impl Capture {
    /// Reads, splits and lifts the capture of `args` and finds the settings
    /// it was recorded under (the proposal in `args` is not used).
    pub fn load(args: &PredictOptions, stage: &mut dyn FnMut(&'static str)) -> Result<Capture> {
        stage(READING);
        for p in &args.traces {
            if is_counts_capture(p) {
                return Err(Error::CountsCapture {
                    file: p.display().to_string(),
                });
            }
        }
        // each event folded as it is read (split, normalized, the lift's
        // facts): the events are not held
        let mut fold = crate::capture::Fold::new();
        let read = statstorm_trace::ordered::for_each_event_apart(
            &args.traces,
            &args.read,
            &mut |e, s| fold.push(e, s),
        )
        .map_err(|source| Error::Input {
            what: "reading traces".into(),
            source,
        })?;
        if read.events == 0 {
            let files = args
                .traces
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(match read.summary {
                Some(summary) => Error::SummaryOnly { files, summary },
                None => Error::NoEvents { files },
            });
        }
        let format = InputFormat {
            timestamps: read
                .inputs
                .iter()
                .all(|i| i.detected.timestamps != statstorm_trace::TsKind::None),
            durations: read.inputs.iter().all(|i| i.detected.durations),
        };
        let mut notes = Vec::new();
        if read.skipped() > 0 {
            notes.push(format!(
                "{} input lines were not strace events and were skipped",
                read.skipped()
            ));
        }
        let lost: u64 = read.inputs.iter().map(|i| i.lost_calls).sum();
        if lost > 0 {
            notes.push(format!(
                "the recording lost {lost} calls (its last lines say so): the recorded counts are low by at least that, and the requests that lost them are modelled from what remains"
            ));
        }
        if read.late > 0 {
            notes.push(format!(
                "{} calls stayed unfinished longer than the reading window ({} s of trace time) and reached the model when they ended, after calls that started later",
                read.late,
                statstorm_trace::ordered::WINDOW_US / 1_000_000
            ));
        }
        stage("splitting requests");
        let (split, mut rec, facts) = fold.finish().map_err(Error::spill)?;
        let (split_note, mode) = (split.note.clone(), split.mode);
        let background_counts: Vec<Tally> = rec
            .background
            .iter()
            .map(|b| count_by_syscall(&b.ops))
            .collect();
        // lift (completed from the reference capture, if any), each
        // request's calls read back as it is lifted
        stage("lifting to PHP operations");
        let reference_files: Vec<String> = args
            .reference
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let mut reference = None;
        let w = if args.reference.is_empty() {
            // each lifted request on disk, read back as each pass and each
            // side needs it: memory is the distinct paths and the requests
            // in flight, not the capture's length
            statstorm_php::lift_stored(&facts, &rec, &rec, &mut || {
                Ok(Box::new(crate::lifted::LiftedSpill::new()?))
            })
            .map_err(Error::spill)?
        } else {
            let (rw, complete_from) = reference_workload(args, &mut notes)?;
            let split = rec.requests(&split).map_err(Error::spill)?;
            let (w, used) = statstorm_php::lift_with_reference_from(&facts, &split, &rw, &rec)
                .map_err(|e| Error::Reference {
                    files: reference_files.join(", "),
                    why: e.to_string(),
                })?;
            reference = Some((rw, complete_from, used));
            w
        };
        if let Some(source) = rec.take_error() {
            return Err(Error::spill(source));
        }
        crate::memory::give_back();
        // the recorded calls' paths, for the choice of NFS roots
        let mut traced = crate::nfs_setup::TracedPaths::default();
        if args.nfs.replays() {
            // (each request's calls decoded a chunk ahead)
            statstorm_trace::ahead::each_ahead(rec.len(), &|i| rec.calls(i), &mut |_, calls| {
                for o in &calls? {
                    traced.add(o);
                }
                Ok::<(), std::io::Error>(())
            })
            .map_err(Error::spill)?;
        }
        if let Some(p) = &args.workload_out {
            let write = |source| Error::Write {
                path: p.display().to_string(),
                source,
            };
            let f = std::fs::File::create(p).map_err(write)?;
            // (every request's operations read back: written whole)
            let full = w.loaded().map_err(Error::spill)?;
            serde_json::to_writer_pretty(std::io::BufWriter::new(f), &full)
                .map_err(|e| write(std::io::Error::from(e)))?;
        }
        let (recorded, source) = recorded_config(args, &w, &mut notes)?;
        // without an NFS root or mount options for the capture no change
        // replays its calls (a proposed --mount alone names no root)
        if !args.nfs.replays() {
            for b in &mut rec.background {
                b.ops = Vec::new();
            }
        }
        Ok(Capture {
            inputs: args
                .traces
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            split_note,
            rec,
            traced,
            background_counts,
            w,
            reference,
            reference_files,
            recorded,
            source,
            notes,
            nfs: args.nfs.clone(),
            mode,
            format,
            fixed: std::sync::Mutex::new(None),
            explained: std::sync::OnceLock::new(),
        })
    }

    /// How the requests were split (php-fpm, php-cli, both, or neither:
    /// the whole trace as one request).
    pub fn mode(&self) -> statstorm_php::request::RequestMode {
        self.mode
    }

    /// What the traces' format shows (timestamps, durations).
    pub fn format(&self) -> InputFormat {
        self.format
    }

    /// The capture's metadata calls over time and by directory.
    pub fn timeline(&self) -> &crate::capture::Timeline {
        &self.rec.timeline
    }

    /// The settings the capture was recorded under.
    pub fn recorded_settings(&self) -> &PhpConfig {
        &self.recorded.config
    }

    /// The lifted PHP operations of the capture's requests.
    pub fn workload(&self) -> &Workload {
        &self.w
    }

    /// The directories the activity outside requests writes into (kept
    /// only when the capture's calls reach the NFS model).
    pub fn background_written(&self) -> Vec<String> {
        let mut out = std::collections::BTreeSet::new();
        for b in &self.rec.background {
            for o in b.ops.iter().filter(|o| crate::diagnose::op_writes(o)) {
                for p in std::iter::once(&*o.path).chain(o.path2.as_deref()) {
                    if let Some((d, _)) = p.rsplit_once('/') {
                        out.insert(if d.is_empty() { "/" } else { d }.to_string());
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    /// Predicts `change` on this capture: both sides (the recorded and the
    /// proposed settings) lowered and replayed by the NFS model request by
    /// request, the recorded calls replayed too, latency simulated.
    pub fn predict(&self, change: &Change, stage: &mut dyn FnMut(&'static str)) -> Result<Report> {
        let cap = self;
        let w = &cap.w;
        let mut notes = cap.notes.clone();
        let recorded = cap.recorded.config.clone();
        let mut proposed = recorded.clone();
        if let Some(p) = &change.php_ini {
            notes.extend(proposed.apply_ini_file(p)?);
        }
        notes.extend(proposed.apply_flags(&change.php)?);
        // what a capture made with caches on cannot show: a lower bound,
        // unless the reference completed every request
        notes.extend(notes::hidden_work_notes(w, &recorded, &proposed));
        if let Some((rw, _, used)) = &cap.reference {
            notes.push(notes::reference_note(w, rw, used));
        }
        notes.extend(notes::file_cache_note(w, &proposed));
        notes.extend(notes::opcache_off_note(w, &recorded, &proposed));
        // the proposed storage's call times
        let latency =
            call_latency::call_latencies_of(&change.call_latency).map_err(Error::CallLatency)?;
        let mut call_latency_us: BTreeMap<String, LatencyPair> = BTreeMap::new();
        for (k, &us) in &latency {
            let name = k
                .syscall_name(statstorm_trace::Flags::default())
                .to_string();
            call_latency_us.entry(name).or_insert(LatencyPair {
                recorded: w.latency_us.get(k).copied(),
                proposed: us,
            });
        }
        if !call_latency_us.is_empty() {
            let what: Vec<String> = call_latency_us
                .iter()
                .map(|(n, l)| match l.recorded {
                    Some(r) => format!("{n} {} us (capture: {r} us)", l.proposed),
                    None => format!("{n} {} us (the capture has no -T durations)", l.proposed),
                })
                .collect();
            notes.push(format!(
                "after: calls take {} each; every call moves the request's later operations by the difference, and a worker busy past its next request's arrival starts it late; OPcache's stores (compiles, renewed stamps) reach the other workers when their calls end (R64's race)",
                what.join(", ")
            ));
        }
        // NFS: which roots, and the options (statstorm-nfs); the traced
        // calls pick the roots
        let flags = crate::nfs_setup::NfsFlags {
            from_mount: cap.nfs.from_mount.clone(),
            mounts_file: cap.nfs.mounts.clone(),
            mount: change.mount.clone(),
            apart: change.mount_apart.clone(),
            nfs_root: cap.nfs.nfs_root.clone(),
            delegations: cap.nfs.delegations,
            server_changes: cap.nfs.server_change.clone(),
            warm: cap.nfs.nfs_cache == NfsCache::Warm,
        };
        let rec = &cap.rec;
        let nfs =
            crate::nfs_setup::NfsSetup::from_paths(&flags, &cap.traced).map_err(Error::Nfs)?;
        // each side lowered and replayed request by request; each call's
        // start and RPCs listed for the latency simulation (one mount)
        // without NFS, calls take the capture's own times (`-T`): the
        // latency is simulated when the capture has them
        let local = nfs.is_none() && !w.latency_us.is_empty();
        let list = nfs.as_ref().is_some_and(|n| n.single().is_some()) || local;
        let bg: Vec<&[statstorm_trace::op::Op]> =
            rec.background.iter().map(|b| b.ops.as_slice()).collect();
        // with NFS options, one side after the other: at once (one thread
        // each) they took 15% less time on the bench log but held both
        // sides' NFS clients together (deep paths: tests/hostile/sim_nfs.rs
        // no longer fit in 512 MiB of address space); so for the recorded
        // side beside the recorded calls' replay (+nfs on the 1.1 GB bench
        // log 22 -> 17 s, but 547 -> 668 MB and the same test out of
        // memory).
        // The recorded side and the recorded calls' replay depend on the
        // capture alone: computed for its first prediction, kept for the
        // others (diagnose predicts dozens of changes on one capture).
        let run_after = || {
            side::run(
                w,
                &proposed,
                &latency,
                nfs.as_ref().map(|n| (n, true)),
                &bg,
                list,
            )
        };
        // Without NFS options a side holds its lowering's caches alone
        // (the workers' realpath caches and OPcache's keys, bounded by the
        // distinct paths): the two sides are lowered at once, one thread
        // each (1.1 GB bench log: predict wall 0.92x, peak unchanged).
        // Not from one of rayon's workers: the other side's thread may
        // give the pool work while this worker waits for it to end.
        let at_once = nfs.is_none() && statstorm_trace::ahead::may_use_pool();
        let mut after_early = None;
        let fixed = {
            let mut kept = cap.fixed.lock().unwrap_or_else(|e| e.into_inner());
            match kept.as_ref() {
                Some(f) => std::sync::Arc::clone(f),
                None => {
                    stage(if at_once {
                        "lowering under the recorded and the proposed settings"
                    } else {
                        "lowering under the recorded settings"
                    });
                    let run_before = || {
                        side::run(
                            w,
                            &recorded,
                            &BTreeMap::new(),
                            nfs.as_ref().map(|n| (n, false)),
                            &bg,
                            list,
                        )
                    };
                    let side = if at_once {
                        let (b, a) = std::thread::scope(|s| {
                            let h = s.spawn(run_before);
                            let a = run_after();
                            (h.join(), a)
                        });
                        after_early = Some(a);
                        match b {
                            Ok(b) => b,
                            Err(p) => std::panic::resume_unwind(p),
                        }
                    } else {
                        run_before()
                    }
                    .map_err(Error::spill)?;
                    // the recorded calls read back request by request (a
                    // warm client start reads them once more per pass)
                    let replayed = match nfs.as_ref() {
                        None => None,
                        Some(n) => {
                            stage("NFS client model");
                            Some(side::replay_recorded(n, rec, &bg).map_err(Error::spill)?)
                        }
                    };
                    let f = std::sync::Arc::new(Fixed { side, replayed });
                    *kept = Some(std::sync::Arc::clone(&f));
                    f
                }
            }
        };
        let before = &fixed.side;
        let after = match after_early {
            Some(a) => a,
            None => {
                stage("lowering under the proposed settings");
                run_after()
            }
        }
        .map_err(Error::spill)?;
        // (the calls themselves are not kept: the latency simulation
        // takes each call's start and RPCs from the sides)
        // the requests by start (None: their index order)
        let order = crate::column::start_order(w).map_err(Error::spill)?;
        let completed: std::collections::HashSet<usize> = cap
            .reference
            .as_ref()
            .map(|(_, _, u)| u.completed.iter().copied().collect())
            .unwrap_or_default();
        let templated = if completed.is_empty() {
            w.templated()
        } else {
            let mut n = 0;
            w.each_meta(&mut |i, p| {
                n += usize::from(p.from_template && !completed.contains(&i));
            })
            .map_err(Error::spill)?;
            n
        };
        if templated > 0 {
            let (who, its, they) = if templated == 1 {
                ("1 request".to_string(), "its", "it is")
            } else {
                (format!("{templated} requests"), "their", "they are")
            };
            notes.push(format!(
                "{who} showed only part of {its} work (caches hid the rest); {they} modelled with the operations of the fullest request of the same script, keeping {its} own calls"
            ));
        }
        // NFS: RPCs per request, before and after (statstorm-nfs), every
        // side with the background activity too, in time order
        let rpcs = match nfs.as_ref() {
            None => None,
            Some(n) => {
                notes.extend(n.notes.iter().cloned());
                Some(NfsRpcs {
                    before: before.rpcs.as_ref().map(|r| &r.0),
                    after: after.rpcs.as_ref().map(|r| &r.0),
                    recorded: fixed.replayed.as_ref().map(|r| &r.0),
                    background: fixed
                        .replayed
                        .as_ref()
                        .map_or_else(Vec::new, |r| r.1.clone()),
                })
            }
        };
        let mut after_costs = w.latency_us.clone();
        after_costs.extend(latency.iter().map(|(k, v)| (*k, *v)));
        let storage = match nfs.as_ref().and_then(|n| n.single()) {
            Some(m) => Some(latency::Storage::Nfs(m)),
            None if local => Some(latency::Storage::Local([&w.latency_us, &after_costs])),
            None => None,
        };
        let lat = match storage {
            Some(storage) => {
                stage("simulating latency");
                let none = crate::nfs_setup::OpRpcsLists::default();
                let lists = [
                    before.op_rpcs.as_ref().unwrap_or(&none),
                    after.op_rpcs.as_ref().unwrap_or(&none),
                ];
                Some(latency::compute(&change.sim, storage, rec, w, lists)?)
            }
            None => None,
        };
        let mut report = build(
            cap,
            recorded,
            proposed,
            order.as_ref(),
            PerRequest {
                counts: [&before.counts, &after.counts],
                from_reference: &completed,
                rpcs: rpcs.as_ref(),
                latency: lat.as_ref().map(|c| [&c.before, &c.after]),
            },
            notes,
        )
        .map_err(Error::spill)?;
        report.call_latency_us = call_latency_us;
        report.reference = cap
            .reference
            .as_ref()
            .map(|(rw, complete_from, used)| ReferenceOut {
                files: cap.reference_files.clone(),
                requests: rw.requests.len(),
                complete: rw.evidence.complete,
                complete_from: complete_from.clone(),
                capture_complete: used.capture_complete,
                completed_requests: used.completed.len(),
                unmatched_requests: used.unmatched.len(),
                no_reference_requests: used.no_reference.len(),
            });
        if let (Some(n), Some(r)) = (&nfs, &rpcs) {
            attach_rpcs(&mut report, n, r, w.len()).map_err(Error::spill)?;
        }
        match lat {
            Some(c) => report.latency = Some(c.out),
            None => {
                let mut o = latency::not_simulated(&change.sim);
                if nfs.as_ref().is_some_and(|n| n.single().is_none()) {
                    o.reason = Some(
                        "latency is not simulated: several NFS roots, and the simulator models one RPC transport (one mount); give one --nfs-root for the latency columns"
                            .into(),
                    );
                }
                report.latency = Some(o);
            }
        }
        Ok(report)
    }
}

/// Per request of `preds` (in their order; the RPCs in the report's),
/// what the report's rows show besides the request itself.
struct PerRequest<'a> {
    /// Calls per syscall, before and after.
    counts: [&'a crate::column::Interned<Tally>; 2],
    /// The requests completed from a reference capture.
    from_reference: &'a std::collections::HashSet<usize>,
    rpcs: Option<&'a NfsRpcs<'a>>,
    /// Simulated TTFB, before and after, ms.
    latency: Option<[&'a crate::column::Column<Option<f64>>; 2]>,
}

/// The report of the capture's requests: its rows written in order
/// (start, then index: `order`, None when that is the index order;
/// `rows::Rows`), the totals and the before-vs-recorded check folded as
/// they are written.
fn build(
    cap: &Capture,
    recorded: PhpConfig,
    proposed: PhpConfig,
    order: Option<&crate::column::Column<u32>>,
    per: PerRequest<'_>,
    notes: Vec<String>,
) -> std::io::Result<Report> {
    let (w, rec, source, provenance) = (
        &cap.w,
        &cap.rec,
        cap.source.clone(),
        &cap.recorded.provenance,
    );
    let mut totals = Totals {
        before: Side::default(),
        after: Side::default(),
        recorded: Side::default(),
    };
    let mut rows = rows::RowsMaker::new();
    let mut check = crate::check::CheckFold::new(CHECKED);
    // requests repeat their RPC counts: one copy of each
    let mut pool = statstorm_trace::TallyPool::new();
    for k in 0..w.len() {
        let i = match order {
            Some(o) => o.get(k)? as usize,
            None => k,
        };
        let p = w.meta(i)?;
        let recorded_count = rec.count(i)?;
        let calls = [
            per.counts[0].get(i)?,
            per.counts[1].get(i)?,
            &recorded_count,
        ];
        let rpc: [Option<Tally>; 3] = match per.rpcs {
            Some(c) => {
                let mut r = [None, None, None];
                for (slot, v) in r.iter_mut().zip([c.before, c.after, c.recorded]) {
                    if let Some(v) = v.filter(|v| i < v.len()) {
                        *slot = Some(pool.share(crate::nfs_setup::rpc_map(v.get(i)?)));
                    }
                }
                r
            }
            None => [None, None, None],
        };
        let mut latency_ms = [None, None];
        if let Some(l) = per.latency {
            for (slot, v) in latency_ms.iter_mut().zip(l) {
                if i < v.len() {
                    *slot = v.get(i)?;
                }
            }
        }
        totals.before.by_syscall.merge(calls[0]);
        totals.after.by_syscall.merge(calls[1]);
        totals.recorded.by_syscall.merge(calls[2]);
        check.push(calls[0], calls[2]);
        rows.push(rows::Row {
            pid: p.pid,
            start_us: p.start_us,
            end_us: p.end_us,
            script: p.script.as_deref(),
            from_template: p.from_template,
            from_reference: per.from_reference.contains(&i),
            calls,
            rpc: [rpc[0].as_ref(), rpc[1].as_ref(), rpc[2].as_ref()],
            latency_ms,
        })?;
    }
    let mut before_check = check.finish();
    if before_check.requests_beyond > 0 {
        before_check.explained = cap
            .explained
            .get_or_init(|| {
                // (the counts unreadable: no trial to explain the gap with)
                let first = rec
                    .first_counts(gap_trials::TRIAL_REQUESTS)
                    .unwrap_or_default();
                gap_trials::explain(w, &first, &recorded, &before_check.suspects)
            })
            .clone();
    }
    let changes = recorded
        .diff(&proposed)
        .into_iter()
        .map(|(key, from, to)| SettingChange { key, from, to })
        .collect();
    Ok(Report {
        schema: "statstorm.predict/1",
        inputs: cap.inputs.clone(),
        split: cap.split_note.clone(),
        recorded: Settings {
            source,
            settings: settings_map(&recorded),
            provenance: provenance
                .iter()
                .map(|(k, p)| (k.to_string(), p.clone()))
                .collect(),
        },
        proposed: Settings {
            source: "recorded + --php-ini + --php".into(),
            settings: settings_map(&proposed),
            provenance: BTreeMap::new(),
        },
        changes,
        evidence: w.evidence.notes.clone(),
        notes,
        requests: rows.finish(),
        totals,
        before_check,
        background: rec
            .background
            .iter()
            .zip(&cap.background_counts)
            .map(|(b, c)| BackgroundOut {
                pid: b.pid,
                start: secs(b.start_us),
                end: secs(b.end_us),
                recorded: Side::counted(c.clone()),
            })
            .collect(),
        nfs: None,
        latency: None,
        reference: None,
        call_latency_us: BTreeMap::new(),
    })
}

/// RPCs per request of the workload (by index) on each side, and per
/// background process.
struct NfsRpcs<'a> {
    before: Option<&'a crate::column::Interned<RpcCounts>>,
    after: Option<&'a crate::column::Interned<RpcCounts>>,
    recorded: Option<&'a crate::column::Interned<RpcCounts>>,
    background: Vec<RpcCounts>,
}

/// Adds the NFS RPC totals and the background rows' RPCs to `r` (the
/// requests' rows took theirs in `build`).
fn attach_rpcs(
    r: &mut Report,
    n: &crate::nfs_setup::NfsSetup,
    c: &NfsRpcs,
    requests: usize,
) -> std::io::Result<()> {
    let mut t = [statstorm_nfs::RpcCounts::default(); 3];
    for (t, v) in t.iter_mut().zip([c.before, c.after, c.recorded]) {
        if let Some(v) = v {
            for i in 0..requests.min(v.len()) {
                t.merge(v.get(i)?);
            }
        }
    }
    let [tb, ta, tr] = t;
    for (b, rpc) in r.background.iter_mut().zip(&c.background) {
        b.recorded.rpc = Some(crate::nfs_setup::rpc_map(rpc));
    }
    r.totals.before.rpc = Some(crate::nfs_setup::rpc_map(&tb));
    r.totals.after.rpc = Some(crate::nfs_setup::rpc_map(&ta));
    r.totals.recorded.rpc = Some(crate::nfs_setup::rpc_map(&tr));
    let m0 = &n.mounts[0];
    r.nfs = Some(NfsOut {
        nfs_root: m0.root.clone(),
        recorded_mount: m0.recorded.render(),
        proposed_mount: m0.proposed.render(),
        delegations: m0.params.delegations,
        kernel: format!("{}.{}", m0.params.kernel.0, m0.params.kernel.1),
        mounts: n
            .mounts
            .iter()
            .map(|m| MountOut {
                root: m.root.clone(),
                recorded_mount: m.recorded.render(),
                proposed_mount: m.proposed.render(),
                apart: m.apart,
            })
            .collect(),
    });
    Ok(())
}
