//! OPcache's file cache (`opcache.file_cache`, R67) used alone
//! (`opcache.file_cache_only=1`, no shared memory), the way php-cli keeps
//! compiled scripts across processes: one `<dir>/<system id>/<script
//! path>.bin` per script, on disk (php-src ext/opcache/zend_file_cache.c,
//! `zend_file_cache_script_load` / `zend_file_cache_script_store`).
//!
//! Measured with `scripts/php-harness --only 'cli-*-fco*'` (php-cli 8.2,
//! `opcache.enable_cli=1`, the cache filled by an earlier process: fco;
//! empty: fco-cold):
//! - at startup, `stat(dir)` and `access(dir, R_OK|W_OK|X_OK)`, and no lock
//!   file (no shared memory);
//! - every include, require and repeat of a plain include (nothing stays in
//!   memory between them) resolves the name as usual and opens the source
//!   (`open`, PHP's `fstat`), then the `.bin`: found, it is read (`open`,
//!   `close`; `flock`/`read` between) and the source is not read; missing,
//!   the source is read and compiled, the directories of the `.bin` are
//!   made one by one from `dir` down (`mkdir`, EEXIST for those that
//!   exist), and the `.bin` is written (`open(O_RDWR|O_CREAT|O_EXCL)`,
//!   `writev`, `close`); then the source is closed;
//! - the entry script (opened by php-cli itself): a `getcwd` for its key,
//!   then the `.bin`; found, one `fstat` of the entry script for its
//!   timestamp (none with `validate_timestamps=0`) and no read; missing,
//!   PHP's two `fstat`s and OPcache's one, the read, the store.

use crate::workload::FileCacheSeen;
use statstorm_trace::op::{Op, OpKind};
use std::collections::{BTreeMap, BTreeSet};

/// The `.bin` files and directories on disk while a workload is replayed.
#[derive(Clone, Debug)]
pub struct Disk {
    dir: String,
    system_id: String,
    /// scripts with a `.bin`
    present: BTreeSet<String>,
    /// directories below `dir` that exist
    dirs: BTreeSet<String>,
    /// the OPcache revalidation stamp stored in each `.bin` written during
    /// the replay (a `.bin` there from the start has an old one)
    stamps: BTreeMap<String, i64>,
}

/// The system id a prediction uses when the trace did not show one (it is
/// a hash of PHP's build: the same for every script of one PHP binary).
pub const UNKNOWN_SYSTEM_ID: &str = "00000000000000000000000000000000";

impl Disk {
    /// The cache at the start of the workload: as the trace showed it (the
    /// scripts whose `.bin` was there at their first use), else, for a
    /// workload recorded without the cache, filled with every script the
    /// workload compiles (the steady state of a cache that earlier
    /// processes filled).
    pub fn new(dir: &str, seen: Option<&FileCacheSeen>, scripts: &BTreeSet<String>) -> Disk {
        let (system_id, present) = match seen {
            Some(s) => (s.system_id.clone(), s.present.clone()),
            None => (UNKNOWN_SYSTEM_ID.to_string(), scripts.clone()),
        };
        let mut d = Disk {
            dir: dir.trim_end_matches('/').to_string(),
            system_id,
            present: BTreeSet::new(),
            dirs: BTreeSet::new(),
            stamps: BTreeMap::new(),
        };
        for p in &present {
            for dir in d.parents(p) {
                d.dirs.insert(dir);
            }
        }
        d.present = present;
        d
    }

    /// The `.bin` of `script`.
    pub fn bin(&self, script: &str) -> String {
        format!("{}/{}{}.bin", self.dir, self.system_id, script)
    }

    pub fn has(&self, script: &str) -> bool {
        self.present.contains(script)
    }

    /// The revalidation stamp a script loaded from its `.bin` comes with
    /// (epoch seconds): the one it was stored with, kept by the load
    /// (measured: fpm-tree-fc, the cache filled 3 s before the pool
    /// started: the loaded scripts are validated at their next use, a
    /// plain include's repeat in the same request included); an old one
    /// for a `.bin` that was there from the start.
    pub fn stamp(&self, script: &str) -> i64 {
        self.stamps.get(script).copied().unwrap_or(i64::MIN)
    }

    /// Records the stamp OPcache stored in `script`'s `.bin`.
    pub fn set_stamp(&mut self, script: &str, stamp: i64) {
        self.stamps.insert(script.to_string(), stamp);
    }

    /// The directories `zend_file_cache_mkdir` makes for the `.bin` of
    /// `script`, from `dir` itself down to the `.bin`'s parent.
    fn parents(&self, script: &str) -> Vec<String> {
        let bin = self.bin(script);
        let mut out = vec![self.dir.clone()];
        let rest = &bin[self.dir.len()..];
        for (i, c) in rest.char_indices().skip(1) {
            if c == '/' {
                out.push(format!("{}{}", self.dir, &rest[..i]));
            }
        }
        out
    }

    /// Stores `script`: the `mkdir`s it makes, each with whether the
    /// directory existed (EEXIST).
    pub fn store(&mut self, script: &str) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        for d in self.parents(script) {
            // the cache directory itself exists (the startup checked it)
            let existed = d == self.dir || !self.dirs.insert(d.clone());
            out.push((d, existed));
        }
        self.present.insert(script.to_string());
        out
    }
}

/// What the trace shows of the cache: for a path `<dir>/<32 hex
/// digits><script>.bin`, the cache directory, the system id and the
/// script.
pub fn parse_bin(path: &str) -> Option<(String, String, String)> {
    let stem = path.strip_suffix(".bin")?;
    // the system id: the last component of 32 hex digits before the
    // script's absolute path
    let mut start = 0;
    while let Some(i) = stem[start..].find('/') {
        let at = start + i;
        let comp = &stem[at + 1..];
        if comp.len() > 33
            && comp.as_bytes()[32] == b'/'
            && comp[..32].bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Some((
                stem[..at].to_string(),
                comp[..32].to_string(),
                comp[32..].to_string(),
            ));
        }
        start = at + 1;
    }
    None
}

/// OPcache's file cache calls are not the requests' own (the lower
/// derives them from the settings): every call on the cache directory or
/// below it, the startup's `stat`/`access` of the directory included.
/// `scan` finds what they showed, and for each request the scripts whose
/// `.bin` it loaded or stored (`None` when the trace has no `.bin`);
/// [`Own`] tells a request's own calls from the cache's.
pub fn scan(per_req: &[Vec<Op>]) -> Option<(FileCacheSeen, Vec<BTreeSet<String>>)> {
    let mut s = Scan::default();
    for ops in per_req {
        s.push(ops);
    }
    s.finish()
}

/// [`scan`] folded request by request, in the split's order.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// The directory and system id of the first `.bin`.
    found: Option<(String, String)>,
    first_use: BTreeMap<String, bool>,
    by_req: Vec<BTreeSet<String>>,
}

impl Scan {
    /// Folds the next request's calls.
    pub fn push(&mut self, ops: &[Op]) {
        let mut mine = BTreeSet::new();
        for o in ops {
            let Some((d, id, script)) = parse_bin(&o.path) else {
                continue;
            };
            if self.found.is_none() {
                self.found = Some((d, id));
            }
            if o.kind == OpKind::Open {
                // the first open of a script's .bin: found (read) or
                // missing (the store's O_CREAT open comes after a missing
                // one)
                self.first_use.entry(script.clone()).or_insert(o.ok());
                mine.insert(script);
            }
        }
        self.by_req.push(mine);
    }

    /// What the calls showed; `None` when no call touched a `.bin`.
    pub fn finish(self) -> Option<(FileCacheSeen, Vec<BTreeSet<String>>)> {
        let (dir, system_id) = self.found?;
        let seen = FileCacheSeen {
            dir,
            system_id,
            present: self
                .first_use
                .into_iter()
                .filter_map(|(s, found)| found.then_some(s))
                .collect(),
        };
        Some((seen, self.by_req))
    }
}

/// Tells a request's own calls from those of OPcache's file cache in
/// `dir` (see [`scan`]).
pub struct Own {
    dir: String,
    below: String,
}

impl Own {
    pub fn new(dir: &str) -> Own {
        Own {
            dir: dir.to_string(),
            below: format!("{dir}/"),
        }
    }

    /// The calls of `ops` that are not the file cache's.
    pub fn of(&self, ops: &[Op]) -> Vec<Op> {
        ops.iter()
            .filter(|o| *o.path != *self.dir && !o.path.starts_with(&self.below))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_paths_and_directories() {
        let id = "e7e3dd0254b1dcd8db4dcdceb0cbff0f";
        let p = format!("/tmp/fc/{id}/srv/www/a.php.bin");
        assert_eq!(
            parse_bin(&p),
            Some(("/tmp/fc".into(), id.into(), "/srv/www/a.php".into()))
        );
        assert_eq!(parse_bin("/tmp/fc/x/srv/a.php.bin"), None);
        assert_eq!(parse_bin(&format!("/tmp/fc/{id}/srv/a.php")), None);
        let seen = FileCacheSeen {
            dir: "/tmp/fc".into(),
            system_id: id.into(),
            present: BTreeSet::new(),
        };
        let mut d = Disk::new("/tmp/fc", Some(&seen), &BTreeSet::new());
        assert_eq!(d.bin("/srv/www/a.php"), p);
        let made = d.store("/srv/www/a.php");
        let names: Vec<&str> = made.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "/tmp/fc".to_string(),
                format!("/tmp/fc/{id}"),
                format!("/tmp/fc/{id}/srv"),
                format!("/tmp/fc/{id}/srv/www")
            ]
        );
        // the first store makes all but the cache directory; the next, in
        // the same directory, none
        assert_eq!(made.iter().filter(|(_, e)| !e).count(), 3);
        assert!(d.store("/srv/www/b.php").iter().all(|(_, e)| *e));
        assert!(d.has("/srv/www/a.php") && d.has("/srv/www/b.php"));
    }
}
