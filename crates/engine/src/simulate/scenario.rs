//! Scenario files: a TOML description of the workload, the pool, the
//! transport and the server, turned into the simulator's `Params` and
//! `RequestSpec`s. The PHP vocabulary (includes, OPcache revalidation) lives
//! here, in the command; the simulator knows requests and RPCs only.
//!
//! ```toml
//! name = "example"
//! duration_s = 600
//! [arrivals]
//! kind = "poisson"
//! rate_per_s = 3.0
//! [workload]
//! kind = "opcache_includes"   # or "file" with file = "requests.json"
//! cpu_ms = 45.0
//! includes = 180
//! rpcs = ["GETATTR"]          # RPCs of one timestamp check (fs = "nfs")
//! revalidate_freq_s = 60
//! [pool]
//! max_children = 50
//! listen_backlog = 511
//! [server]
//! rtt_ms = 1.0
//! service = { kind = "fixed", ms = 1.0 }
//! ```
//!
//! A requests file (`kind = "file"`) is a `statstorm.requests/1` JSON file
//! ([`statstorm_sim::requests_file`]).

use serde::{Deserialize, Serialize};
use statstorm_sim::requests_file::{load_requests, FileError as ScenarioError};
use statstorm_sim::{
    Arrivals, LocalFs, Params, Pool, RequestSpec, Scope, Server, Transport, Validation,
};
use std::path::{Path, PathBuf};

/// The most RPC names one request of an `opcache_includes` workload holds
/// (includes x RPCs per stat).
const MAX_RPCS: u64 = 10_000_000;

/// Which filesystem answers the timestamp checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fs {
    Nfs,
    Local,
}

/// The request shapes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// A page that includes `includes` cached scripts. With OPcache holding
    /// them, an include makes no filesystem call to find or open the script
    /// (R62/R63); its only call is the timestamp check of R64: one stat()
    /// per script, made when the script's shared `revalidate` stamp is older
    /// than the request (`revalidate_freq_s` > 0), on every include
    /// (`revalidate_freq_s` = 0), or never (`validate_timestamps = false`).
    OpcacheIncludes {
        cpu_ms: f64,
        includes: u32,
        #[serde(default = "yes")]
        validate_timestamps: bool,
        revalidate_freq_s: u64,
        /// Who shares a stamp; OPcache keeps it in shared memory (`pool`).
        #[serde(default = "pool_scope")]
        scope: Scope,
        /// Where the stat() goes.
        #[serde(default = "nfs")]
        fs: Fs,
        /// RPCs of one stat() on NFS (e.g. `["GETATTR"]` once the attribute
        /// cache has expired).
        #[serde(default)]
        rpcs: Vec<String>,
    },
    /// Request shapes from a JSON file (`statstorm.requests/1`), relative to
    /// the scenario file.
    File { file: PathBuf },
}

fn yes() -> bool {
    true
}
fn pool_scope() -> Scope {
    Scope::Pool
}
fn nfs() -> Fs {
    Fs::Nfs
}
fn default_stall() -> f64 {
    1000.0
}
fn default_step() -> f64 {
    1.0
}

/// Figures a source publishes, kept beside the scenario so a report can
/// compare its own arithmetic with the simulation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// Workers the source says hit the storm at once.
    pub workers: Option<u32>,
    /// RPCs per worker in the storm.
    pub rpcs_per_worker: Option<u32>,
    /// Slots the source divides by.
    pub slots: Option<u32>,
    /// Per-RPC times the source uses (normal, degraded).
    #[serde(default)]
    pub rpc_ms: Vec<f64>,
    /// The stall the source reports.
    pub stall_ms: Option<f64>,
    /// The 502 rate the source reports.
    pub drop_rate_pct: Option<f64>,
    /// Slow calls the source measured.
    #[serde(default)]
    pub slow_call_ms: Vec<f64>,
    /// Free text: where the figures come from.
    pub source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    seed: Option<u64>,
    duration_s: f64,
    #[serde(default = "default_stall")]
    stall_ms: f64,
    #[serde(default = "default_step")]
    series_step_s: f64,
    arrivals: Arrivals,
    workload: Workload,
    pool: Pool,
    #[serde(default)]
    transport: Transport,
    #[serde(default)]
    server: Server,
    #[serde(default)]
    local_fs: LocalFs,
    #[serde(default)]
    published: Option<Published>,
}

/// A loaded scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: Option<u64>,
    pub workload: Workload,
    pub params: Params,
    pub requests: Vec<RequestSpec>,
    pub published: Option<Published>,
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text =
            statstorm_trace::input::read_text_capped(path, statstorm_trace::input::SIDE_FILE_LIMIT)
                .map_err(|e| ScenarioError::Io {
                    path: path.to_path_buf(),
                    source: e,
                })?;
        Scenario::parse(&text, path)
    }

    /// Parses scenario text; `path` names it in messages and anchors a
    /// relative requests file.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with(text, path, &load_requests)
    }

    /// [`Scenario::parse`] with the requests file of a `kind = "file"`
    /// workload read by `load` (a fuzzer gives one that reads nothing).
    pub fn parse_with(
        text: &str,
        path: &Path,
        load: &dyn Fn(&Path) -> Result<Vec<RequestSpec>, ScenarioError>,
    ) -> Result<Scenario, ScenarioError> {
        let f: File = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| ScenarioError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut validation = Validation::default();
        let requests = match &f.workload {
            Workload::OpcacheIncludes {
                cpu_ms,
                includes,
                validate_timestamps,
                revalidate_freq_s,
                scope,
                fs,
                rpcs,
            } => {
                if !(cpu_ms.is_finite() && *cpu_ms >= 0.0) {
                    return Err(invalid(format!(
                        "workload.cpu_ms must be >= 0, got {cpu_ms}"
                    )));
                }
                if *includes > 1_000_000 {
                    return Err(invalid(format!(
                        "workload.includes must be at most 1000000, got {includes}"
                    )));
                }
                // the request's steps hold every include's RPC names
                if (*includes as u64).saturating_mul(rpcs.len().max(1) as u64) > MAX_RPCS {
                    return Err(invalid(format!(
                        "workload.includes x workload.rpcs must be at most {MAX_RPCS}, got {includes} x {}",
                        rpcs.len()
                    )));
                }
                if *fs == Fs::Nfs && rpcs.is_empty() && *validate_timestamps {
                    return Err(invalid(
                        "workload.rpcs: name the RPCs of one stat() on NFS, e.g. [\"GETATTR\"]"
                            .into(),
                    ));
                }
                validation = Validation {
                    freq_s: *revalidate_freq_s,
                    scope: *scope,
                    initial_stamp_s: None,
                };
                let cpu_ns = statstorm_sim::ms_to_ns(*cpu_ms);
                // R64: validate_timestamps=0 never stats a cached script.
                let n = if *validate_timestamps { *includes } else { 0 };
                vec![RequestSpec::interleaved(
                    cpu_ns,
                    n,
                    rpcs,
                    *fs == Fs::Local,
                    true,
                )]
            }
            Workload::File { file } => {
                let p = path.parent().unwrap_or(Path::new(".")).join(file);
                load(&p)?
            }
        };
        let params = Params {
            arrivals: f.arrivals,
            duration_s: f.duration_s,
            pool: f.pool,
            transport: f.transport,
            server: f.server,
            local_fs: f.local_fs,
            validation,
            stall_ms: f.stall_ms,
            series_step_s: f.series_step_s,
        };
        params.validate().map_err(invalid)?;
        Ok(Scenario {
            name: f.name,
            description: f.description,
            seed: f.seed,
            workload: f.workload,
            params,
            requests,
            published: f.published,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_toml_names_file_and_line() {
        let e = Scenario::parse("name = \"x\"\nduration_s = \n", Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.toml: "), "{e}");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn a_request_too_large_to_hold_is_refused() {
        let t = r#"
name = "x"
duration_s = 10
[arrivals]
kind = "poisson"
rate_per_s = 1
[workload]
kind = "opcache_includes"
cpu_ms = 1e15
includes = 1000000
revalidate_freq_s = 0
rpcs = ["GETATTR", "ACCESS", "LOOKUP", "GETATTR", "ACCESS", "LOOKUP", "GETATTR", "ACCESS", "LOOKUP", "GETATTR", "ACCESS"]
[pool]
max_children = 2
listen_backlog = 1
"#;
        let e = Scenario::parse(t, Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("workload.includes x workload.rpcs"), "{e}");
    }

    #[test]
    fn invalid_value_is_named() {
        let t = r#"
name = "x"
duration_s = 10
[arrivals]
kind = "poisson"
rate_per_s = -1
[workload]
kind = "opcache_includes"
cpu_ms = 1
includes = 3
revalidate_freq_s = 0
rpcs = ["GETATTR"]
[pool]
max_children = 2
listen_backlog = 1
"#;
        let e = Scenario::parse(t, Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("arrivals.rate_per_s"), "{e}");
    }
}
