//! Request files (`statstorm.requests/1`): the per-request sequences of CPU
//! time, RPCs and local calls that the models produce, as JSON:
//!
//! ```json
//! {"schema": "statstorm.requests/1",
//!  "requests": [{"start_s": 0.25, "steps": [{"cpu_ms": 1.5}, {"rpcs": ["LOOKUP", "GETATTR"]},
//!                                            {"local": true}, {"rpcs": ["GETATTR"], "key": 7}]}]}
//! ```
//!
//! `start_s` is used with [`crate::Arrivals::Replay`]; `key` makes the call a
//! keyed one (see [`crate::Validation`]).

use crate::request::{RequestSpec, Step};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Schema of a requests file.
pub const REQUESTS_SCHEMA: &str = "statstorm.requests/1";

/// What went wrong reading a file; the message names the file (and the line
/// where the parser knows it).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestsFile {
    schema: String,
    requests: Vec<FileRequest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRequest {
    #[serde(default)]
    start_s: Option<f64>,
    steps: Vec<FileStep>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FileStep {
    Cpu {
        cpu_ms: f64,
    },
    Rpcs {
        rpcs: Vec<String>,
        #[serde(default)]
        key: Option<u32>,
    },
    Local {
        local: bool,
        #[serde(default)]
        key: Option<u32>,
    },
}

/// Largest requests file read: 1 GiB (about 5M requests). The file is
/// parsed as it is read, so an input that is no JSON (`/dev/zero`) fails at
/// its first byte, and one that never ends stops at the cap.
pub const MAX_REQUESTS_FILE: u64 = 1 << 30;

/// The `"schema"` a JSON file names in its first 4 KiB, when it is
/// another statstorm document (a workload, a report).
fn other_schema(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    let text = String::from_utf8_lossy(&head);
    let at = text.find("\"schema\"")?;
    let rest = &text[at + 8..];
    let start = rest.find('"')? + 1;
    let end = start + rest[start..].find('"')?;
    let s = &rest[start..end];
    (s.starts_with("statstorm.") && s != REQUESTS_SCHEMA).then(|| s.to_string())
}

/// Reads a `statstorm.requests/1` file (at most [`MAX_REQUESTS_FILE`]
/// bytes).
pub fn load_requests(path: &Path) -> Result<Vec<RequestSpec>, FileError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| FileError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let reader = std::io::BufReader::new(file.take(MAX_REQUESTS_FILE));
    let f: RequestsFile = serde_json::from_reader(reader).map_err(|e| FileError::Parse {
        path: path.to_path_buf(),
        message: match other_schema(path) {
            Some(s) => format!(
                "a {s} file, not {REQUESTS_SCHEMA} (line {} column {}: {e}){}",
                e.line(),
                e.column(),
                if s == "statstorm.workload/1" {
                    ": a workload (predict --workload-out) holds PHP operations, which the PHP and NFS models turn into the calls and RPCs a requests file holds; predict simulates it itself (its latency columns)"
                } else {
                    ""
                }
            ),
            None => format!("line {} column {}: {e}", e.line(), e.column()),
        },
    })?;
    let invalid = |message: String| FileError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    if f.schema != REQUESTS_SCHEMA {
        return Err(invalid(format!(
            "schema is \"{}\", expected \"{REQUESTS_SCHEMA}\"",
            f.schema
        )));
    }
    let mut out = Vec::with_capacity(f.requests.len());
    for (i, r) in f.requests.into_iter().enumerate() {
        let start_ns = match r.start_s {
            Some(s) if s.is_finite() && s >= 0.0 => Some((s * 1e9).round() as u64),
            Some(s) => {
                return Err(invalid(format!(
                    "requests[{i}].start_s must be >= 0, got {s}"
                )))
            }
            None => None,
        };
        let mut steps = Vec::with_capacity(r.steps.len());
        for (j, s) in r.steps.into_iter().enumerate() {
            steps.push(match s {
                FileStep::Cpu { cpu_ms } if cpu_ms.is_finite() && cpu_ms >= 0.0 => Step::Cpu {
                    ns: crate::dist::ms_to_ns(cpu_ms),
                },
                FileStep::Cpu { cpu_ms } => {
                    return Err(invalid(format!(
                        "requests[{i}].steps[{j}].cpu_ms must be >= 0, got {cpu_ms}"
                    )))
                }
                FileStep::Rpcs { rpcs, key } => Step::Rpcs { ops: rpcs, key },
                FileStep::Local { local: true, key } => Step::Local { key },
                FileStep::Local { local: false, .. } => {
                    return Err(invalid(format!(
                        "requests[{i}].steps[{j}]: \"local\" must be true"
                    )))
                }
            });
        }
        out.push(RequestSpec { start_ns, steps });
    }
    if out.is_empty() {
        return Err(invalid("no requests".into()));
    }
    Ok(out)
}
