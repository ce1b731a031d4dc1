//! Lift: from the filesystem calls of each request, recover what PHP did
//! (scripts compiled, OPcache revalidations, realpath walks, file function
//! calls) and what the trace says about the settings in force.
//!
//! Patterns (PHP 8.2, checked under strace with `scripts/php-harness`):
//! - an lstat chain `lstat(p)`, `lstat(parent(p))`, ... is one
//!   `tsrm_realpath` of `p` that missed the realpath cache (R53); a single
//!   failing `lstat(p)` (ENOENT) is a failed include_path candidate (R50).
//! - `open(p, O_RDONLY)` of a script followed by `fstat(fd)` and a sized
//!   `read` is a compile (R51); the chains of `p` right before it are its
//!   resolutions (1 for include/require, 2 for a first include_once/
//!   require_once and for the entry script: R52, measured).
//! - a chain of a proper ancestor directory right before an operation on
//!   `p`, after two chains of `p`, is `php_check_open_basedir` (R59,
//!   measured: `expand_filepath(p)`, `VCWD_REALPATH(p)`,
//!   `expand_filepath(basedir)`); it is dropped here and re-derived by the
//!   lower under the config.
//! - `stat(p)` of a script that is not opened is OPcache's timestamp
//!   validation (R64); `stat(dir/.user.ini)` is php-fpm's user ini lookup.
//! - `access(p)` is file_exists/is_readable (R71); `stat(p)` of another
//!   file is a stat-family function after a stat-cache miss (R72).
//! - in a php-cli process, `openat(<dir>/.ZendSem.XXXXXX,
//!   O_RDWR|O_CREAT|O_EXCL)` and its `unlink` before the entry script is
//!   opened are OPcache starting (`zend_shared_alloc_create_lock`), and
//!   with it the lock's `close` at the end and one `getcwd`/`fstat` on the
//!   entry script are OPcache's (docs/php-model.md "CLI OPcache startup").
//!
//! Requests whose work caches hid take it from a fuller request of the same
//! script (`templates`) or from a complete reference capture (`reference`).

use crate::request::{RequestKind, RequestList, Requests};
use crate::workload::{
    Evidence, FileCacheSeen, PhpOp, PhpOpKind, ReferenceUse, RequestStore, Via, WorkRequest,
    Workload, WORKLOAD_SCHEMA,
};
use statstorm_trace::op::{Normalizer, Op, OpKind};
use statstorm_trace::{ahead, Flags, Trace};
use std::collections::{BTreeMap, BTreeSet};
// the lift's maps are keyed by paths and pids, hashed many times per call:
// the trace crate's fast hash instead of SipHash
use statstorm_trace::event::FastMap as HashMap;
use statstorm_trace::event::FastSet as HashSet;

mod evidence;
mod facts;
mod permission;
mod reference;
mod templates;

use evidence::evidence;
pub use reference::{lift_with_reference_from, lift_with_reference_parts, ReferenceError};
use templates::{apply_templates, take_template_by, Fit};

/// The start of the evidence note of an incomplete capture.
const HIDDEN_NOTE: &str = "caches hid part of the includes";

/// Within this time after a path was lstat'ed, a lone lstat of it again
/// cannot be a realpath-cache miss under the default TTL (120 s, R55).
const LSTAT_REPEAT_US: i64 = 120_000_000;

/// Files libsqlite3 creates and removes next to a database.
const SQLITE_SUFFIXES: &[&str] = &["-wal", "-shm", "-journal"];

/// The system time zone database ext/date reads (Debian's PHP).
const TZDIR: &str = "/usr/share/zoneinfo/";

pub use crate::opcache::{entry_getcwd, OPCACHE_LOCK_PREFIX};
use crate::paths::{basename, is_ancestor};
pub use crate::paths::{is_script, parent};

/// Lexical normalization (one definition, shared with the other model).
pub use statstorm_trace::op::normalize_path as normalize;

#[derive(Debug, Clone)]
struct Chain {
    path: String,
    /// The path the walk resolved to (through symlinks).
    resolved: String,
    /// The first lstat succeeded.
    ok: bool,
    /// The walk went on to the parent (a missing path checked by
    /// open_basedir is walked up anyway, R59).
    walked: bool,
    /// The parent was lstat'ed before by this worker (a lone lstat of a
    /// path whose parent never was cannot be a realpath-cache miss).
    parent_seen: bool,
    /// The last path the walk lstat'ed.
    top: String,
    t_us: i64,
}

/// What the walks of one request tell about the settings.
#[derive(Debug, Default, Clone)]
pub struct WalkFacts {
    /// open_basedir checks by the basedir they walked (R59).
    pub basedirs: BTreeMap<String, u32>,
    /// Walks that stopped below the top directory: a cached prefix, so the
    /// realpath cache is on (R53/R54).
    pub short_walks: u32,
}

enum Item {
    Chain(Chain),
    Op(Op),
}

/// Groups lstat walks into chains. A successful `readlink` of the walk's
/// current path is a symlink: the next lstat is its target (R53:
/// `tsrm_realpath_r` resolves an absolute link target instead of the
/// parent); the link is recorded in `links`.
fn items(
    ops: &[Op],
    links: &mut BTreeMap<String, String>,
    walked_before: &mut HashSet<String>,
) -> Vec<Item> {
    let mut out: Vec<Item> = Vec::new();
    let mut last: Option<String> = None;
    let mut jump: Option<String> = None;
    let mut prev_lstat: Option<Op> = None;
    for op in ops {
        // a root-first walk (`/var`, `/var/lib`, ...) is not PHP's (PHP
        // walks deepest first, R53): libsqlite3's unixFullPathname and the
        // like; replayed as recorded
        if op.kind == OpKind::Lstat && op.ok() {
            if let (Some(prev), Some(Item::Chain(c))) = (&prev_lstat, out.last()) {
                if parent(&op.path) == Some(prev.path.as_ref())
                    && !c.walked
                    && *c.path == *prev.path
                {
                    let prev = prev.clone();
                    out.pop();
                    out.push(Item::Op(prev));
                }
            }
            if let Some(Item::Op(p)) = out.last() {
                if p.kind == OpKind::Lstat && parent(&op.path) == Some(p.path.as_ref()) {
                    out.push(Item::Op(op.clone()));
                    prev_lstat = Some(op.clone());
                    last = None;
                    continue;
                }
            }
            prev_lstat = Some(op.clone());
        } else {
            prev_lstat = None;
        }
        if op.kind == OpKind::Lstat {
            let cont = match (&last, out.last_mut()) {
                // a missing path's walk goes on through its missing
                // parents (ENOENT) up to the first that exists: the
                // CWD_FILEPATH walks of an open_basedir check (R59,
                // measured on MediaWiki's autoloader probing
                // `includes/libs//RemexHtml/...` under open_basedir=/)
                (Some(prev), Some(Item::Chain(c)))
                    if op.ok() || (!c.ok && parent(prev) == Some(op.path.as_ref())) =>
                {
                    if let Some(link) = jump.take() {
                        // the link's target
                        links.insert(link.clone(), op.path.to_string());
                        if c.resolved == link {
                            c.resolved = op.path.to_string();
                        } else if let Some(rest) = c.resolved.strip_prefix(&format!("{link}/")) {
                            c.resolved = format!("{}/{rest}", op.path);
                        }
                        c.walked = true;
                        true
                    } else {
                        let yes = parent(prev) == Some(op.path.as_ref());
                        if yes {
                            c.walked = true;
                        }
                        yes
                    }
                }
                _ => false,
            };
            jump = None;
            if cont {
                if let Some(Item::Chain(c)) = out.last_mut() {
                    c.top = op.path.to_string();
                }
            }
            if !cont {
                out.push(Item::Chain(Chain {
                    path: op.path.to_string(),
                    resolved: normalize(&op.path),
                    ok: op.ok(),
                    walked: false,
                    parent_seen: parent(&op.path).is_none_or(|q| walked_before.contains(q)),
                    top: op.path.to_string(),
                    t_us: op.t_us,
                }));
            }
            walked_before.insert(op.path.to_string());
            last = Some(op.path.to_string());
        } else if op.kind == OpKind::Readlink
            && last.as_deref() == Some(op.path.as_ref())
            && matches!(out.last(), Some(Item::Chain(_)))
        {
            // part of the walk: a symlink (ok), or the symlink test of a
            // missing path's walk (ENOENT, R59)
            if op.ok() {
                jump = Some(op.path.to_string());
            }
        } else {
            last = None;
            jump = None;
            out.push(Item::Op(op.clone()));
        }
    }
    out
}

struct Lifter {
    start_us: i64,
    fpm: bool,
    out: Vec<PhpOp>,
    pending: Vec<Chain>,
    /// Index in `out` of the compile whose fd is open, and its path.
    active: Option<(usize, String)>,
    /// Whether an fd call has confirmed the active path.
    active_fixed: bool,
    compiled: HashMap<String, usize>,
    probe_target: HashMap<String, String>,
    basedirs: BTreeMap<String, u32>,
    links: BTreeMap<String, String>,
    /// Paths this worker lstat'ed, and when (across requests).
    seen: HashMap<String, i64>,
    /// The request shows open_basedir checks (a missing path's second
    /// walk tries `readlink`, R59) whose basedir leaves no walk of its own
    /// (`open_basedir=/`: the root is never lstat'ed, R53): a check is
    /// then the two walks of the path and of its real path alone.
    root_basedir: bool,
    /// Paths at the end of a root-first walk (libsqlite3's
    /// `unixFullPathname`): its database files.
    root_first: HashSet<String>,
    /// The entry script's resolution (`PrimaryResolve`) was lifted.
    primary_seen: bool,
}

impl Lifter {
    /// The name through a symlink under which the request just resolved
    /// `path` (the last resolution among its recent operations).
    fn linked_name_of(&self, path: &str) -> Option<String> {
        self.out.iter().rev().take(16).find_map(|o| match &o.kind {
            PhpOpKind::Resolve { path: n, .. }
                if **n != *path && crate::realpath::resolved(&self.links, n) == path =>
            {
                Some(n.to_string())
            }
            _ => None,
        })
    }

    /// `p` is a journal, WAL or shared-memory file of a database
    /// libsqlite3 walked root-first.
    fn sqlite_side_file(&self, p: &str) -> bool {
        ["-journal", "-wal", "-shm"].iter().any(|x| {
            p.strip_suffix(x)
                .is_some_and(|db| self.root_first.contains(db))
        })
    }

    fn push(&mut self, t_us: i64, kind: PhpOpKind) {
        self.push_timed(t_us, None, kind);
    }

    /// [`Self::push`] of a validation whose stat took `stat_us`
    /// ([`PhpOp::stat_us`]).
    fn push_timed(&mut self, t_us: i64, stat_us: Option<u64>, kind: PhpOpKind) {
        self.out.push(PhpOp {
            t_off_us: t_us - self.start_us,
            stat_us: stat_us.map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
            kind,
        });
    }

    /// Takes the chains belonging to an operation on `p` from the end of
    /// the pending list: chains of `p`, an ancestor chain (open_basedir)
    /// and, when `probes`, the failed candidates before them. Returns
    /// (resolutions of p net of the basedir check, probes).
    fn take(&mut self, p: &str, probes: bool) -> (u32, Vec<String>) {
        self.take_named(p, probes).0
    }

    /// [`Self::take`], also returning the name resolved when it is not
    /// `p` itself (e.g. with `./` in it).
    fn take_named(&mut self, p: &str, probes: bool) -> ((u32, Vec<String>), Option<String>) {
        let mut n = 0u32;
        let mut basedir = false;
        let mut pr = Vec::new();
        let mut name = None;
        // the check's VCWD_REALPATH walks the real path (R59)
        let real = crate::realpath::resolved(&self.links, p);
        while let Some(c) = self.pending.last() {
            let real_walk = self.root_basedir && c.resolved == real;
            if (c.ok || c.walked) && pr.is_empty() && (c.path == p || c.resolved == p || real_walk)
            {
                if c.path != p {
                    name = Some(c.path.clone());
                }
                n += 1;
            } else if c.ok && !basedir && pr.is_empty() && is_ancestor(&c.path, p) {
                basedir = true;
                *self.basedirs.entry(c.path.clone()).or_default() += 1;
            } else if !c.ok && !c.walked && probes && basename(&c.path) == basename(p) {
                pr.push(c.path.clone());
            } else {
                break;
            }
            self.pending.pop();
        }
        if basedir {
            n -= 2.min(n);
        } else if self.root_basedir && n >= 2 {
            // a check with basedir `/`: evidence of open_basedir=/
            *self.basedirs.entry("/".into()).or_default() += 1;
            n -= 2;
        }
        pr.reverse();
        ((n, pr), name)
    }

    /// `n` resolutions of `path` (walks of the path itself) left pending,
    /// to be flushed as operations of their own.
    fn resolutions_of(&mut self, path: &str, n: u32, t_us: i64) {
        for _ in 0..n {
            self.pending.push(Chain {
                path: path.to_string(),
                resolved: path.to_string(),
                ok: true,
                walked: true,
                parent_seen: true,
                top: path.to_string(),
                t_us,
            });
        }
    }

    fn flush(&mut self) {
        let mut pending = std::mem::take(&mut self.pending).into_iter().peekable();
        let mut probes: Vec<(String, i64)> = Vec::new();
        while let Some(c) = pending.next() {
            if !c.ok {
                probes.push((c.path, c.t_us));
                continue;
            }
            if self.root_basedir && c.walked {
                // open_basedir=/ (see `root_basedir`): two walks of the
                // real path right after are the check of PHP's realpath()
                // (R59, ext/standard/file.c PHP_FUNCTION(realpath) checks
                // what VCWD_REALPATH returned); two walks of p right
                // before a lone lstat(p) are the check of PHP's lstat()
                // family (R72)
                let rest: Vec<Chain> = pending.clone().take(2).collect();
                let walks = |x: &Chain| x.walked && x.path == c.resolved;
                if rest.len() == 2
                    && walks(&rest[0])
                    && rest[1].path == c.path
                    && !rest[1].walked
                    && rest[1].ok
                {
                    // walk, walk, lone lstat: the lstat() and its check
                    pending.next();
                    let last = pending.next().expect("two chains follow");
                    self.seen.insert(last.path.clone(), last.t_us);
                    self.push(
                        last.t_us,
                        PhpOpKind::Lstat {
                            path: last.path.into(),
                        },
                    );
                    continue;
                }
                if rest.len() == 2 && walks(&rest[0]) && walks(&rest[1]) {
                    pending.next();
                    pending.next();
                } else if !rest.is_empty()
                    && walks(&rest[0])
                    && !(is_script(&c.path) && self.compiled.contains_key(&c.path))
                {
                    // a walk of the name and one of its real path with no
                    // call after them: a check alone, glob()'s of each
                    // match (ext/standard/dir.c; measured on WordPress's
                    // theme patterns under open_basedir=/)
                    pending.next();
                    self.seen.insert(c.path.clone(), c.t_us);
                    self.push(
                        c.t_us,
                        PhpOpKind::BasedirCheck {
                            path: c.path.into(),
                        },
                    );
                    continue;
                }
            }
            let kind = if is_script(&c.path) && self.compiled.contains_key(&c.path) {
                PhpOpKind::OnceRepeat {
                    path: c.path.as_str().into(),
                    probes: probes.drain(..).map(|p| p.0.into()).collect(),
                    resolves: 1,
                }
            } else if self.fpm
                && self.compiled.is_empty()
                && is_script(&c.path)
                && !self.primary_seen
            {
                // php-fpm resolves SCRIPT_FILENAME once, first (a request
                // whose scripts all hit OPcache compiles nothing, and its
                // later script resolutions are the application's)
                self.primary_seen = true;
                PhpOpKind::PrimaryResolve {
                    path: c.path.as_str().into(),
                }
            } else if !c.walked
                && self
                    .seen
                    .get(&c.path)
                    .is_some_and(|&t| c.t_us - t < LSTAT_REPEAT_US)
            {
                // the same path lstat'ed again by this worker while a
                // realpath cache entry would still be fresh: PHP's lstat()
                // family (is_link, filetype, directory iterators: R72), not
                // a resolution
                self.flush_probes(&mut probes);
                PhpOpKind::Lstat {
                    path: c.path.as_str().into(),
                }
            } else {
                self.flush_probes(&mut probes);
                PhpOpKind::Resolve {
                    path: c.path.as_str().into(),
                    lone: !c.walked && !c.parent_seen,
                }
            };
            self.seen.insert(c.path.clone(), c.t_us);
            self.push(c.t_us, kind);
        }
        self.flush_probes(&mut probes);
    }

    fn flush_probes(&mut self, probes: &mut Vec<(String, i64)>) {
        // failed candidates whose successful candidate was a cache hit:
        // an include_once repeat of a relative name (R50, R52)
        let all: Vec<(String, i64)> = std::mem::take(probes);
        let mut i = 0;
        while i < all.len() {
            let (p, t) = &all[i];
            if let Some(target) = self.probe_target.get(p).cloned() {
                let mut group = vec![p.clone()];
                while i + 1 < all.len() && self.probe_target.get(&all[i + 1].0) == Some(&target) {
                    i += 1;
                    group.push(all[i].0.clone());
                }
                self.push(
                    *t,
                    PhpOpKind::OnceRepeat {
                        path: target.into(),
                        probes: group.into_iter().map(Into::into).collect(),
                        resolves: 1,
                    },
                );
            } else {
                self.push(
                    *t,
                    PhpOpKind::Probe {
                        path: p.as_str().into(),
                    },
                );
            }
            i += 1;
        }
    }

    fn op(&mut self, op: Op) {
        // fd calls on the script being compiled
        if let Some((idx, path)) = &self.active {
            // fd calls show the opened file's real path (`-y`), which
            // differs from the name opened when it has symlinks, `..` or
            // `//`: the first fd call after the open names it
            let fd_call = matches!(op.kind, OpKind::Fstat | OpKind::Read | OpKind::Close);
            if fd_call && !self.active_fixed && basename(&op.path) == basename(path) {
                if *op.path != **path {
                    self.active = Some((*idx, op.path.to_string()));
                }
                self.active_fixed = true;
            }
        }
        if let Some((idx, path)) = &self.active {
            if *op.path == **path {
                let idx = *idx;
                match op.kind {
                    OpKind::Fstat => {
                        if let PhpOpKind::Compile { fstats, .. } = &mut self.out[idx].kind {
                            *fstats += 1;
                        } else {
                            let t = op.t_us;
                            self.push(t, PhpOpKind::Raw { op: Box::new(op) });
                        }
                        return;
                    }
                    OpKind::Read => {
                        if op.bytes == 0 {
                            // a read at end of file: a buffered fopen/
                            // file_get_contents of the script as data (R74);
                            // a compile reads the fstat size once and never
                            // reads again (R51, measured)
                            if let PhpOpKind::Compile {
                                path,
                                resolve_as,
                                resolves,
                                fstats,
                                reads,
                                ..
                            } = &self.out[idx].kind
                            {
                                let kind = PhpOpKind::Open {
                                    path: path.clone(),
                                    resolve_as: resolve_as.clone(),
                                    resolves: (*resolves).min(1),
                                    flags: 0,
                                };
                                let (p, nf, nr) = (path.clone(), *fstats, *reads);
                                let t = self.start_us + self.out[idx].t_off_us;
                                self.out[idx].kind = kind;
                                if self.compiled.get(&*p) == Some(&idx) {
                                    self.compiled.remove(&*p);
                                }
                                // the fd calls taken for the compile are the
                                // fopen's own
                                for (k, n) in [(OpKind::Fstat, nf), (OpKind::Read, nr)] {
                                    for _ in 0..n {
                                        let mut o = op.clone();
                                        o.kind = k;
                                        o.t_us = t;
                                        self.push(t, PhpOpKind::Raw { op: Box::new(o) });
                                    }
                                }
                            }
                            let t = op.t_us;
                            self.push(t, PhpOpKind::Raw { op: Box::new(op) });
                            return;
                        }
                        if let PhpOpKind::Compile { reads, .. } = &mut self.out[idx].kind {
                            *reads += 1;
                        } else {
                            let t = op.t_us;
                            self.push(t, PhpOpKind::Raw { op: Box::new(op) });
                        }
                        return;
                    }
                    OpKind::Close => {
                        if let PhpOpKind::Compile { keep_open, .. } = &mut self.out[idx].kind {
                            *keep_open = false;
                        } else {
                            let t = op.t_us;
                            self.push(t, PhpOpKind::Raw { op: Box::new(op) });
                        }
                        self.active = None;
                        return;
                    }
                    _ => {}
                }
            }
        }
        if op.path.starts_with(TZDIR) {
            // the time zone database: libc calls of ext/date, not PHP file
            // functions, so no open_basedir check (measured: `stat` of
            // /usr/share/zoneinfo/UTC alone under open_basedir=/ in
            // fpm-wordpress-obd and `php -n -d open_basedir=/`; Debian's
            // system-tzdata patch to ext/date/lib/parse_tz.c)
            self.flush();
            let t = op.t_us;
            self.push(t, PhpOpKind::Raw { op: Box::new(op) });
            return;
        }
        let readonly = op.flags & (Flags::O_WRONLY | Flags::O_RDWR | Flags::O_CREAT) == 0;
        match op.kind {
            OpKind::Open if op.ok() && readonly && is_script(&op.path) => {
                let ((resolves, probes), resolve_as) = self.take_named(&op.path, true);
                // an include whose name the realpath cache knew (no walk)
                // right after the application resolved the same script
                // under a name through a link: that name (WordPress reads
                // a theme pattern's header by its /var/lib name, then
                // includes it by the same: fpm-wordpress-fc, where only a
                // name that is not the script's path misses OPcache's keys
                // of a script loaded from the file cache)
                let resolve_as = resolve_as.or_else(|| self.linked_name_of(&op.path));
                self.flush();
                for p in &probes {
                    self.probe_target.insert(p.clone(), op.path.to_string());
                }
                let idx = self.out.len();
                let via = if self.compiled.is_empty() {
                    Via::Main
                } else if resolves >= 2 {
                    Via::Once
                } else {
                    Via::Include
                };
                self.compiled.insert(op.path.to_string(), idx);
                // a `stat` of the script just before its compile is a file
                // function (is_file/file_exists by an autoloader), not an
                // OPcache validation (which never opens the script)
                if let Some(PhpOp {
                    kind: PhpOpKind::Revalidate { path: q, .. },
                    ..
                }) = self.out.last()
                {
                    if normalize(q) == *op.path || **q == *op.path {
                        let q = q.clone();
                        let last = self.out.len() - 1;
                        self.out[last].kind = PhpOpKind::Stat {
                            path: q,
                            missing: false,
                        };
                    }
                }
                let idx = self.out.len();
                self.push(
                    op.t_us,
                    PhpOpKind::Compile {
                        path: op.path.clone(),
                        resolve_as: resolve_as.map(Into::into),
                        probes: probes.into_iter().map(Into::into).collect(),
                        via,
                        resolves,
                        fstats: 0,
                        reads: 0,
                        keep_open: true,
                    },
                );
                self.active = Some((idx, op.path.to_string()));
                self.active_fixed = false;
            }
            // a root-first walk is not PHP's (see `items`)
            OpKind::Lstat => {
                self.root_first.insert(op.path.to_string());
                self.flush();
                let t = op.t_us;
                self.push(t, PhpOpKind::Raw { op: Box::new(op) });
            }
            // libsqlite3's own `stat`s of a database it walked root-first
            // (unixOpen, journal and WAL checks): not PHP's file functions,
            // no open_basedir check (measured: fpm-mediawiki-obd shows the
            // check walks only before PHP's first stat of each database),
            // and of its journal and WAL files beside it (the database's
            // name with `-journal`, `-wal` or `-shm`, sqlite3.c
            // hasHotJournal / unixOpenSharedMemory: fpm-mediawiki-obd makes
            // no check walk before them either)
            OpKind::Stat
                if self.root_first.contains(&*op.path) || self.sqlite_side_file(&op.path) =>
            {
                self.flush();
                let t = op.t_us;
                self.push(t, PhpOpKind::Raw { op: Box::new(op) });
            }
            OpKind::Stat if op.path.ends_with("/.user.ini") => {
                self.flush();
                self.push(
                    op.t_us,
                    PhpOpKind::UserIni {
                        path: op.path.clone(),
                    },
                );
            }
            OpKind::Stat if is_script(&op.path) && op.ok() => {
                let (resolves, _) = self.take(&op.path, false);
                self.flush();
                self.push_timed(
                    op.t_us,
                    op.dur_us,
                    PhpOpKind::Revalidate {
                        path: op.path.clone(),
                        resolves,
                    },
                );
            }
            OpKind::Stat | OpKind::Access => {
                let (n, _) = self.take(&op.path, false);
                // chains of p not explained by the basedir check stay
                // resolutions of their own
                self.resolutions_of(&op.path, n, op.t_us);
                self.flush();
                let missing = op.errno.as_deref() == Some("ENOENT");
                let kind = if op.kind == OpKind::Stat {
                    PhpOpKind::Stat {
                        path: op.path.clone(),
                        missing,
                    }
                } else {
                    PhpOpKind::Access {
                        path: op.path.clone(),
                        mode: op.flags,
                        missing,
                    }
                };
                self.push(op.t_us, kind);
            }
            OpKind::Open if op.ok() => {
                // fopen/file_get_contents through the plain wrapper (R74):
                // one expand_filepath resolution of the path (visible on a
                // realpath cache miss), after the open_basedir check;
                // opendir (O_DIRECTORY) does not resolve (measured)
                let ((n, _), resolve_as) = self.take_named(&op.path, false);
                let own = if op.flags & Flags::O_DIRECTORY != 0 {
                    0
                } else {
                    1
                };
                self.resolutions_of(&op.path, n.saturating_sub(own), op.t_us);
                self.flush();
                self.push(
                    op.t_us,
                    PhpOpKind::Open {
                        path: op.path.clone(),
                        resolve_as: resolve_as.map(Into::into),
                        resolves: (n > 0) as u32,
                        flags: op.flags,
                    },
                );
            }
            // SQLite's own WAL/journal files are removed by the library,
            // not through PHP's plain wrapper: no realpath cache clear
            OpKind::Unlink | OpKind::Rename | OpKind::Rmdir | OpKind::Mkdir
                if !SQLITE_SUFFIXES.iter().any(|s| op.path.ends_with(s)) =>
            {
                self.flush();
                let t = op.t_us;
                self.push(t, PhpOpKind::Write { op: Box::new(op) });
            }
            _ => {
                self.flush();
                let t = op.t_us;
                self.push(t, PhpOpKind::Raw { op: Box::new(op) });
            }
        }
    }
}

/// Lifts the ops of one request (in time order).
///
/// For a php-cli process (`cli`), the calls before the entry script is
/// opened are process startup (finding the binary, loading extensions and
/// time zone data, before any request state exists): replayed as recorded.
pub fn lift_request(
    ops: &[Op],
    start_us: i64,
    fpm: bool,
    cli: bool,
    seen: &mut HashMap<String, i64>,
    walked_before: &mut HashSet<String>,
) -> (Vec<PhpOp>, WalkFacts, BTreeMap<String, String>) {
    let mut l = Lifter {
        start_us,
        fpm,
        out: Vec::new(),
        pending: Vec::new(),
        active: None,
        active_fixed: false,
        compiled: HashMap::default(),
        probe_target: HashMap::default(),
        basedirs: BTreeMap::new(),
        links: BTreeMap::new(),
        seen: std::mem::take(seen),
        root_first: HashSet::default(),
        primary_seen: false,
        root_basedir: ops.windows(2).any(|w| {
            w[0].kind == OpKind::Lstat
                && w[0].errno.as_deref() == Some("ENOENT")
                && w[1].kind == OpKind::Readlink
                && w[1].path == w[0].path
                && w[1].errno.as_deref() == Some("ENOENT")
        }),
    };
    let mut ops = ops;
    let mut opcache_cli = false;
    let mut lock_path: Option<String> = None;
    if cli {
        let first = ops
            .iter()
            .position(|o| o.kind == OpKind::Open && o.ok() && is_script(&o.path))
            .unwrap_or(ops.len());
        let mut lock: Option<&str> = None;
        for o in &ops[..first] {
            if lock.is_none() && is_opcache_lock_create(o) {
                // OPcache's start in this process (zend_shared_alloc_create_lock)
                lock = Some(&o.path);
                let dir = o.path.rsplit_once('/').map_or("", |(d, _)| d);
                l.push(
                    o.t_us,
                    PhpOpKind::OpcacheStartup {
                        lock_dir: if dir.is_empty() { "/" } else { dir }.to_string(),
                    },
                );
                continue;
            }
            if o.kind == OpKind::Unlink && lock == Some(o.path.as_ref()) {
                // the same function unlinks the lock file at once
                continue;
            }
            l.push(
                o.t_us,
                PhpOpKind::Raw {
                    op: Box::new(o.clone()),
                },
            );
        }
        opcache_cli = lock.is_some();
        lock_path = lock.map(str::to_string);
        ops = &ops[first..];
    }
    let mut links = BTreeMap::new();
    let its = items(ops, &mut links, walked_before);
    l.links = links;
    let mut short_walks = 0;
    let n_items = its.len();
    for (i, it) in its.into_iter().enumerate() {
        match it {
            Item::Chain(c) => {
                // a walk of two or more lstats that ends below the top
                // directory found the next prefix cached: never seen with
                // realpath_cache_size=0 or open_basedir. Not the request's
                // last item: a worker stopped mid-walk (SIGQUIT at the
                // end of fpm-mediawiki-obd) leaves a cut walk.
                if c.ok && c.walked && parent(&c.top).is_some() && i + 1 < n_items {
                    short_walks += 1;
                }
                // a chain of the script being compiled (php-cli resolves the
                // entry script after opening it)
                if let Some((idx, path)) = &l.active {
                    if c.ok && c.path == *path {
                        if let PhpOpKind::Compile { resolves, .. } = &mut l.out[*idx].kind {
                            *resolves += 1;
                        }
                        continue;
                    }
                }
                l.pending.push(c)
            }
            Item::Op(op) => l.op(op),
        }
    }
    l.flush();
    if opcache_cli {
        absorb_opcache_entry(&mut l.out);
        // the lock file's close at shutdown (zend_shared_alloc_shutdown,
        // measured at the end of the process) is OPcache's too: the lower
        // emits it with the startup
        l.out.retain(|o| {
            !matches!(&o.kind, PhpOpKind::Raw { op }
                if op.kind == OpKind::Close && Some(&*op.path) == lock_path.as_deref())
        });
    }
    *seen = std::mem::take(&mut l.seen);
    let facts = WalkFacts {
        basedirs: l.basedirs,
        short_walks,
    };
    (l.out, facts, l.links)
}

/// `openat(<dir>/.ZendSem.XXXXXX, O_RDWR|O_CREAT|O_EXCL)`: `mkstemp`
/// creating OPcache's lock file.
fn is_opcache_lock_create(o: &Op) -> bool {
    const CREATE: u32 = Flags::O_RDWR | Flags::O_CREAT | Flags::O_EXCL;
    o.kind == OpKind::Open
        && o.ok()
        && o.flags & CREATE == CREATE
        && basename(&o.path).starts_with(OPCACHE_LOCK_PREFIX)
        && basename(&o.path).len() == OPCACHE_LOCK_PREFIX.len() + 6
}

/// With OPcache on in a php-cli process, the entry script's compile shows
/// two calls of OPcache's own (measured, cli-tree-oc against
/// cli-tree-nooc): a `getcwd` for the key of a relative name (R61:
/// `accel_make_persistent_key` -> `accel_getcwd`, once per request), right
/// after PHP's own `getcwd`s, and one more `fstat` of the open handle before
/// PHP's own (R64 step 2 on a cache store: `cache_script_in_shared_memory`
/// -> `zend_get_file_handle_timestamp`, which `fstat`s a `ZEND_HANDLE_FP`
/// handle, the kind php-cli opens its script with). They are taken out
/// here (the compile keeps PHP's own `fstat`s, one `getcwd` less stays
/// raw) and re-emitted by the lower whenever OPcache is on for the CLI.
fn absorb_opcache_entry(out: &mut Vec<PhpOp>) {
    let Some(i) = out
        .iter()
        .position(|o| matches!(o.kind, PhpOpKind::Compile { via: Via::Main, .. }))
    else {
        return;
    };
    if let PhpOpKind::Compile { fstats, .. } = &mut out[i].kind {
        *fstats = fstats.saturating_sub(1);
    }
    if entry_getcwd(out).is_none() {
        return;
    }
    // the last getcwd of the raw calls that follow the entry's open
    let mut last = None;
    for (j, o) in out.iter().enumerate().skip(i + 1) {
        match &o.kind {
            PhpOpKind::Raw { op } if op.kind == OpKind::Getcwd => last = Some(j),
            PhpOpKind::Raw { .. } => {}
            _ => break,
        }
    }
    if let Some(j) = last.filter(|&j| j > i + 1) {
        out.remove(j);
    }
}

/// include or include_once: what every request of the workload says about
/// each script (R52/R63, measured), applied to all its compiles.
/// - with the realpath cache off every compile shows its own: two
///   resolutions before the open are *_once, one is include; nothing is
///   guessed;
/// - an OPcache validation after its own lstat walk: include (a *_once
///   validation does not resolve, measured);
/// - a repeated *_once: *_once.
///
/// Unknown scripts stay `include`.
/// Paths some request opened through the plain wrapper after resolving
/// them (fopen, file_get_contents: R74).
fn resolved_opens(reqs: &[WorkRequest]) -> HashSet<&str> {
    reqs.iter()
        .flat_map(|r| &r.ops)
        .filter_map(|o| match &o.kind {
            PhpOpKind::Open {
                path,
                resolves: 1..,
                ..
            } => Some(path.as_ref()),
            _ => None,
        })
        .collect()
}

/// Scripts compiled in more than one request, and scripts compiled in one
/// request and only validated or stat()ed in others (mtime-explained
/// recompiles left out).
pub(super) struct Recompiles {
    pub(super) again: usize,
    pub(super) once: usize,
}

impl Recompiles {
    /// Scripts compiled again say OPcache is off only when nearly every
    /// script used by several requests was compiled again: with OPcache
    /// on and a hash table too small (max_accelerated_files), the scripts
    /// past the table are compiled in every request while the cached
    /// ones are validated (measured: fpm-wordpress-maf200, 214 compiled
    /// again, 223 cached).
    pub(super) fn opcache_off(&self) -> bool {
        self.again > 0 && self.again >= 20 * self.once
    }
}

/// How recent a change must be for a recompile to be taken for
/// file_update_protection's (its default is 2 s; larger settings are
/// rare).
const FRESH_S: i64 = 60;

/// What every request says about each script ([`facts::FactsSeen`]),
/// applied to every request ([`facts::ScriptFacts::apply`]).
/// `recompiled`: [`Evidence::scripts_recompiled`] of the same requests.
fn script_facts(
    reqs: &mut [WorkRequest],
    mtimes: &BTreeMap<String, Vec<(i64, i64)>>,
    recompiled: bool,
) {
    let mut seen = facts::FactsSeen::new(mtimes);
    let mut order: Vec<usize> = (0..reqs.len()).collect();
    order.sort_by_key(|&i| (reqs[i].start_us, i));
    for i in order {
        seen.see(i, &reqs[i]);
    }
    let f = seen.finish(recompiled);
    for r in reqs.iter_mut() {
        f.apply(r);
    }
}

fn script_of(ops: &[PhpOp]) -> Option<String> {
    ops.iter().find_map(|o| match &o.kind {
        PhpOpKind::PrimaryResolve { path }
        | PhpOpKind::Compile { path, .. }
        | PhpOpKind::Revalidate { path, .. }
        | PhpOpKind::CachedUse { path } => Some(path.to_string()),
        _ => None,
    })
}

/// Normalized ops of each request of a split trace, in time order.
pub fn request_ops(trace: &Trace, requests: &Requests) -> Vec<Vec<Op>> {
    // which request each event belongs to (an event listed by several
    // requests goes to each), so that only the requests' calls are kept
    let mut owner: Vec<u32> = vec![u32::MAX; trace.events.len()];
    let mut more: HashMap<u32, Vec<u32>> = HashMap::default();
    for (r, q) in requests.requests.iter().enumerate() {
        for &e in &q.events {
            match owner.get_mut(e as usize) {
                Some(o) if *o == u32::MAX => *o = r as u32,
                Some(_) => more.entry(e).or_default().push(r as u32),
                None => {}
            }
        }
    }
    let mut out: Vec<Vec<Op>> = vec![Vec::new(); requests.requests.len()];
    let mut norm = Normalizer::new();
    for (i, e) in trace.events.iter().enumerate() {
        let Some(op) = norm.push(e, &trace.strings) else {
            continue;
        };
        if owner[i] == u32::MAX {
            continue;
        }
        if let Some(rs) = more.get(&(i as u32)) {
            for &r in rs {
                out[r as usize].push(op.clone());
            }
        }
        out[owner[i] as usize].push(op);
    }
    for v in &mut out {
        v.sort_by_key(|o| o.t_us);
    }
    out
}

/// Scripts' modification times the trace shows (stat structs printed
/// whole: `strace -v`), with the time of each stat, in time order; one
/// entry per change, a change timed by the stat's ctime when it falls
/// between the two stats.
pub fn script_mtimes(trace: &Trace) -> BTreeMap<String, Vec<(i64, i64)>> {
    let mut m = Mtimes::default();
    for e in &trace.events {
        m.push(e, &trace.strings);
    }
    m.0
}

/// [`script_mtimes`] folded event by event (in the trace's order).
#[derive(Clone, Debug, Default)]
pub struct Mtimes(pub BTreeMap<String, Vec<(i64, i64)>>);

impl Mtimes {
    pub fn push(&mut self, e: &statstorm_trace::Event, s: &statstorm_trace::Interner) {
        let (Some(m), Some(t)) = (e.mtime, e.ts_us) else {
            return;
        };
        let name = |id: Option<statstorm_trace::PathId>| id.map(|p| s.str(p).into_owned());
        let path = match (name(e.path), name(e.fd_path)) {
            // fstat(fd), newfstatat(fd, "", AT_EMPTY_PATH): the fd's file
            (None, Some(f)) => f,
            (Some(p), Some(f)) if p.is_empty() => f,
            (Some(p), _) if p.starts_with('/') => p,
            // relative to the dirfd (AT_FDCWD</cwd> with -y)
            (Some(p), Some(d)) => normalize(&format!("{d}/{p}")),
            _ => return,
        };
        if !is_script(&path) {
            return;
        }
        let v = self.0.entry(path).or_default();
        match v.last() {
            None => v.push((t, m)),
            Some(&(seen, last)) if last != m => {
                // a new mtime: in effect since the inode's change (the
                // ctime of this stat, when the trace printed it), not only
                // since this stat — a capture validating every 2 s sees a
                // deploy up to 2 s late, a prediction toward shorter
                // windows needs the change itself (fpm-change-rf2: touched
                // before request 4, seen in request 6)
                let since = e.ctime_us.filter(|&c| c > seen && c <= t).unwrap_or(t);
                v.push((since, m));
            }
            Some(_) => {}
        }
    }
}

/// [`TraceFacts`] folded event by event, in the trace's order (a capture
/// streamed, never held whole).
#[derive(Clone, Debug, Default)]
pub struct FactsBuilder {
    mtimes: Mtimes,
    lock: crate::workload::LockTimes,
}

impl FactsBuilder {
    /// Folds one event.
    pub fn push(&mut self, e: &statstorm_trace::Event, s: &statstorm_trace::Interner) {
        self.mtimes.push(e, s);
        self.lock.push(e);
    }

    /// The facts, once every event is in and the split names the
    /// requests.
    pub fn finish(self, requests: &dyn RequestList) -> TraceFacts {
        TraceFacts {
            mtimes: self.mtimes.0,
            lock_us: self.lock.latency(
                &(0..requests.len())
                    .map(|i| requests.request(i).pid)
                    .collect(),
            ),
        }
    }
}

/// Lifts every request of a trace into a [`Workload`], with each request's
/// recorded calls (what the settings inference of [`crate::infer`] checks
/// its trials against). [`crate::lift()`] runs both.
pub fn lift_parts(trace: &Trace, requests: &Requests) -> (Workload, Vec<Vec<Op>>) {
    let real = request_ops(trace, requests);
    let (w, _) = lift_parts_from(&TraceFacts::of(trace, requests), requests, &real);
    (w, real)
}

/// What the lift reads from the events themselves besides the requests'
/// calls: scripts' mtimes ([`script_mtimes`]) and OPcache's lock time
/// ([`crate::workload::lock_latency`]). With them and the calls the
/// events are no longer needed.
#[derive(Clone, Debug, Default)]
pub struct TraceFacts {
    pub mtimes: BTreeMap<String, Vec<(i64, i64)>>,
    pub lock_us: u64,
}

impl TraceFacts {
    pub fn of(trace: &Trace, requests: &Requests) -> TraceFacts {
        let mut b = FactsBuilder::default();
        for e in &trace.events {
            b.push(e, &trace.strings);
        }
        b.finish(requests)
    }
}

/// [`lift_parts`] of the requests' calls `real` as [`request_ops`] gives
/// them (normalized by the caller) and the trace's `facts`; with the
/// first `infer::SEARCH_REQUESTS` (16) requests' calls (those alone,
/// not a list per request), what the settings inference needs.
pub fn lift_parts_from(
    facts: &TraceFacts,
    requests: &Requests,
    real: &dyn CallSource,
) -> (Workload, Vec<Vec<Op>>) {
    let Lifted {
        mut reqs,
        evidence,
        links,
        file_cache,
        real,
        latency_us,
    } = lift_requests(requests, real, &facts.mtimes);
    let mtimes = facts.mtimes.clone();
    script_facts(&mut reqs, &mtimes, evidence.scripts_recompiled);
    apply_templates(&mut reqs);
    // kept as long as the capture: no room left over from building
    for r in &mut reqs {
        r.ops.shrink_to_fit();
    }

    let w = Workload {
        schema: WORKLOAD_SCHEMA.to_string(),
        requests: reqs,
        evidence,
        links,
        mtimes,
        file_cache,
        latency_us,
        lock_us: facts.lock_us,
        stored: Default::default(),
    };
    (w, real)
}

/// [`lift_parts_from`] with the requests kept outside memory: each
/// request is lifted into a store `make` gives, the passes that look
/// across requests read them back one at a time (folds bounded by the
/// distinct paths, and the templates' operations), and the workload's
/// requests go to a second store; the workload's `requests` are empty
/// ([`Workload::meta`] and [`Workload::request`] read them back). Gives
/// the same workload as [`lift_parts_from`]. What the passes need of
/// every request is folded as it is lifted: nothing is held per request
/// (but the order by start when the lift moved one, see below).
pub fn lift_parts_stored(
    facts: &TraceFacts,
    requests: &dyn RequestList,
    real: &dyn CallSource,
    make: &mut dyn FnMut() -> std::io::Result<Box<dyn RequestStore>>,
) -> std::io::Result<(Workload, Vec<Vec<Op>>)> {
    let mtimes = &facts.mtimes;
    let mut raw = make()?;
    let mut checks_seen = permission::ChecksSeen::default();
    let mut entry = evidence::EntrySeen::default();
    let mut startup = false;
    // what the passes below need of every request, folded as they are
    // lifted (no list per request: the requests are read back from the
    // store)
    let mut stated = Stated::default();
    let mut cli_n = 0usize;
    // each php-fpm worker's last request by start (the lowering's)
    let mut last_of_worker: std::collections::HashMap<u32, (i64, usize)> = Default::default();
    let mut in_order = true;
    let mut last_start = i64::MIN;
    let each = lift_each::<std::io::Error>(requests, real, &mut |i, r| {
        checks_seen.see(&r);
        entry.see(i, &r);
        startup |= starts_opcache(&r);
        stated.see(&r);
        cli_n += usize::from(r.cli);
        if !r.cli {
            let e = last_of_worker.entry(r.pid).or_insert((r.start_us, i));
            if (r.start_us, i) > *e {
                *e = (r.start_us, i);
            }
        }
        in_order &= r.start_us >= last_start;
        last_start = r.start_us;
        raw.push(&r)
    })?;
    let checks = checks_seen.finish();
    let n = raw.len();
    let cli = cli_n > 0;
    // the evidence and the script facts, requests in start order (their
    // index order, unless the lift moved a start: a request without a
    // timestamp starts at its first call)
    let order: Option<Vec<usize>> = if in_order {
        None
    } else {
        let mut starts = Vec::with_capacity(n);
        for i in 0..n {
            starts.push((raw.meta(i)?.start_us, i));
        }
        starts.sort_unstable();
        Some(starts.into_iter().map(|(_, i)| i).collect())
    };
    let mut ev =
        evidence::EvidenceSeen::new(entry.finish(), mtimes).stated_apart(stated.unstated > 0);
    let mut fs = facts::FactsSeen::new(mtimes);
    let mut checked = 0;
    let store = &*raw;
    ahead::each_ahead(
        n,
        &|k| {
            let i = order.as_ref().map_or(k, |o| o[k]);
            let mut r = store.get(i)?;
            let checked = checks.as_ref().map_or(0, |c| c.apply(&mut r));
            Ok((i, r, checked))
        },
        &mut |_, got: std::io::Result<_>| {
            let (i, r, c) = got?;
            checked += c;
            ev.see(i, &r);
            fs.see(i, &r);
            Ok::<(), std::io::Error>(())
        },
    )?;
    let mut evidence = ev.finish(&each.basedirs, each.short_walks);
    let reloads = |bins: &[BTreeSet<String>]| -> std::io::Result<bool> {
        let mut seen = ReloadsSeen::default();
        for (i, b) in bins.iter().enumerate() {
            if !b.is_empty() && seen.see(raw.meta(i)?.pid, b) {
                return Ok(true);
            }
        }
        Ok(false)
    };
    let shm = each.file_cache.is_some() && ((each.fpm && !reloads(&each.bin_scripts)?) || startup);
    settings_evidence(&mut evidence, checked, &each, shm, cli, stated);
    // each request as the checks and the script facts leave it
    let sf = fs.finish(evidence.scripts_recompiled);
    let read = |i: usize| -> std::io::Result<WorkRequest> {
        let mut r = raw.get(i)?;
        if let Some(c) = &checks {
            c.apply(&mut r);
        }
        sf.apply(&mut r);
        Ok(r)
    };
    let mut ts = templates::TemplatesSeen::default();
    ahead::each_ahead(n, &read, &mut |i, r| {
        ts.see(i, &r?);
        Ok::<(), std::io::Error>(())
    })?;
    let mut t = ts.finish();
    let wanted: Vec<usize> = t.wanted().collect();
    for i in wanted {
        t.hold(i, read(i)?.ops);
    }
    let mut done = make()?;
    let mut compiled = BTreeSet::new();
    let mut templated = 0;
    let applied = |i: usize| -> std::io::Result<WorkRequest> {
        let mut r = read(i)?;
        t.apply(i, &mut r);
        r.ops.shrink_to_fit();
        Ok(r)
    };
    ahead::each_ahead(n, &applied, &mut |_, r| {
        let r = r?;
        for c in r.compiled() {
            if !compiled.contains(c) {
                compiled.insert(c.to_string());
            }
        }
        templated += usize::from(r.from_template);
        done.push(&r)
    })?;
    drop(raw);
    let w = Workload {
        schema: WORKLOAD_SCHEMA.to_string(),
        requests: Vec::new(),
        evidence,
        links: each.links,
        mtimes: mtimes.clone(),
        file_cache: each.file_cache,
        latency_us: each.latency_us,
        lock_us: facts.lock_us,
        stored: crate::workload::Stored(Some(crate::workload::StoredParts {
            store: std::sync::Arc::from(done),
            compiled,
            cli,
            fpm: cli_n < n,
            last_of_worker: last_of_worker
                .into_iter()
                .map(|(p, (_, i))| (p, i))
                .collect(),
            in_order,
            templated,
        })),
    };
    Ok((w, each.first))
}

/// A request served by a worker of a pool (php-fpm, by accept or FastCGI
/// header read; or an HTTP server's process running PHP, Apache's prefork
/// children with mod_php): a process that serves request after request,
/// its OPcache shared with the pool's other processes.
fn is_fpm(k: RequestKind) -> bool {
    matches!(
        k,
        RequestKind::FpmAccept | RequestKind::FpmHeaderRead | RequestKind::HttpdAccept
    )
}

/// A php-fpm worker went through OPcache's file cache for the same script
/// in two of its requests: no shared memory kept it (R67,
/// `opcache.file_cache_only=1`).
fn reloads_from_file_cache(reqs: &[WorkRequest], bins: &[BTreeSet<String>]) -> bool {
    let mut seen = ReloadsSeen::default();
    reqs.iter().zip(bins).any(|(r, b)| seen.see(r.pid, b))
}

/// [`reloads_from_file_cache`] folded request by request: the (worker,
/// script) pairs loaded from the file cache so far.
#[derive(Default)]
struct ReloadsSeen(HashSet<(u32, String)>);

impl ReloadsSeen {
    /// Whether worker `pid` loads one of `bins` again.
    fn see(&mut self, pid: u32, bins: &BTreeSet<String>) -> bool {
        let mut again = false;
        for p in bins {
            again |= !self.0.insert((pid, p.clone()));
        }
        again
    }
}

/// Every request lifted on its own, and what the trace says about the
/// settings: the part of [`lift`] before facts and templates are shared
/// across requests.
/// What [`lift_requests`] gives: the requests, the evidence, the links
/// seen, the file cache, and each request's recorded calls.
struct Lifted {
    reqs: Vec<WorkRequest>,
    evidence: Evidence,
    links: BTreeMap<String, String>,
    file_cache: Option<FileCacheSeen>,
    /// The first `infer::SEARCH_REQUESTS` (16) requests' calls, for
    /// the settings inference (those alone).
    real: Vec<Vec<Op>>,
    /// The calls' median durations ([`Workload::latency_us`]).
    latency_us: BTreeMap<OpKind, u64>,
}

/// The requests' recorded calls ([`request_ops`]), one request at a time
/// in the split's order: held in memory, or read back from where the
/// caller keeps them (a capture larger than memory).
pub trait CallSource: Sync {
    /// Number of requests.
    fn requests(&self) -> usize;
    /// Request `i`'s calls, in time order.
    fn calls(&self, i: usize) -> std::borrow::Cow<'_, [Op]>;
    /// What a pass over every request's calls would learn, when the
    /// source learned it as it gathered them; `None`: the lift reads every
    /// request once more before lifting them.
    fn summary(&self) -> Option<CallsSummary> {
        None
    }
}

/// What the lift needs of all the requests' calls before it lifts the
/// first ([`CallSource::summary`]).
#[derive(Clone, Debug, Default)]
pub struct CallsSummary {
    /// Every request's calls' durations.
    pub latencies: crate::workload::Latencies,
    /// Whether some call may touch an OPcache file cache's `.bin` (false:
    /// none of the requests' calls does).
    pub file_cache_calls: bool,
}

impl CallSource for [Vec<Op>] {
    fn requests(&self) -> usize {
        self.len()
    }
    fn calls(&self, i: usize) -> std::borrow::Cow<'_, [Op]> {
        std::borrow::Cow::Borrowed(self.get(i).map_or(&[], Vec::as_slice))
    }
}

impl CallSource for Vec<Vec<Op>> {
    fn requests(&self) -> usize {
        self.len()
    }
    fn calls(&self, i: usize) -> std::borrow::Cow<'_, [Op]> {
        self.as_slice().calls(i)
    }
}

/// What the lift of each request leaves besides the requests: the
/// evidence of the walks, the links, OPcache's file cache, the first
/// requests' calls and the calls' durations.
struct Each {
    basedirs: BTreeMap<String, u32>,
    short_walks: u32,
    links: BTreeMap<String, String>,
    file_cache: Option<FileCacheSeen>,
    /// Per request, the scripts it loaded from OPcache's file cache.
    bin_scripts: Vec<BTreeSet<String>>,
    /// The first `infer::SEARCH_REQUESTS` (16) requests' calls, for
    /// the settings inference (those alone).
    first: Vec<Vec<Op>>,
    /// The calls' median durations ([`Workload::latency_us`]).
    latency_us: BTreeMap<OpKind, u64>,
    /// The trace holds a pool.
    fpm: bool,
    /// Every request is a php-cli process whose command line states the
    /// same settings (one command, run once or several times): those are
    /// the capture's settings ([`Stated::common`]), not kept per request.
    common: Option<crate::request::CliSettings>,
}

/// `real`: [`request_ops`] of the trace and `requests`. Reads each
/// request's calls twice: once for what looks across requests first (the
/// calls' durations, OPcache's file cache), once to lift it; gives each
/// lifted request to `sink` in the split's order.
fn lift_each<E>(
    requests: &dyn RequestList,
    real: &dyn CallSource,
    sink: &mut dyn FnMut(usize, WorkRequest) -> Result<(), E>,
) -> Result<Each, E> {
    let n = real.requests();
    let mut scan = crate::file_cache::Scan::default();
    let latencies = match real.summary() {
        // no call of a file cache: the scan would find nothing
        Some(s) if !s.file_cache_calls => s.latencies,
        _ => {
            let mut latencies = crate::workload::Latencies::default();
            let read = ahead::each_ahead::<_, std::convert::Infallible>(
                n,
                &|i| real.calls(i),
                &mut |_, ops| {
                    for o in ops.iter() {
                        latencies.push(o);
                    }
                    scan.push(&ops);
                    Ok(())
                },
            );
            let Ok(()) = read;
            latencies
        }
    };
    let latency_us = latencies.medians();
    // OPcache's file cache's calls are not the requests' (each request's
    // own calls copied as it is lifted, only for a trace that has them)
    let (file_cache, bin_scripts) = match scan.finish() {
        Some((seen, by_req)) => (Some(seen), by_req),
        None => (None, Vec::new()),
    };
    let own = file_cache
        .as_ref()
        .map(|fc| crate::file_cache::Own::new(&fc.dir));
    // the first requests' calls, for the settings inference
    let mut first: Vec<Vec<Op>> = vec![Vec::new(); n.min(crate::infer::SEARCH_REQUESTS)];
    // per request in a mixed trace; `fpm`: the trace holds a pool
    // (one pass over the split: a split kept on disk is read in order)
    let mut fpm = false;
    let mut common: Option<Option<crate::request::CliSettings>> = None;
    let mut all_stated = true;
    // each process's last request, in the order they are lifted
    let mut final_of_pid: HashMap<u32, usize> = HashMap::default();
    for i in 0..requests.len() {
        let r = requests.request(i);
        fpm |= is_fpm(r.kind);
        all_stated &= r.settings.is_some();
        match &common {
            None => common = Some(r.settings.clone()),
            Some(Some(c)) if r.settings.as_ref() != Some(c) => common = Some(None),
            _ => {}
        }
        final_of_pid.insert(r.pid, i);
    }
    let common = common.flatten();
    let mut basedirs: BTreeMap<String, u32> = BTreeMap::new();
    let mut short_walks = 0u32;
    let mut links: BTreeMap<String, String> = BTreeMap::new();
    // each process's walks so far: its realpath cache's entries and the
    // directories it walked
    let mut walks_by_pid: HashMap<u32, Walks> = HashMap::default();
    let lift_one = |i: usize, walks: &mut Walks| -> Lifted1 {
        let r = requests.request(i);
        let recorded = real.calls(i);
        let stripped;
        let ops: &[Op] = match &own {
            Some(own) => {
                stripped = own.of(&recorded);
                &stripped
            }
            None => &recorded,
        };
        let start = r
            .start_us
            .or_else(|| ops.first().map(|o| o.t_us))
            .unwrap_or(0);
        let cli = r.kind == RequestKind::CliProcess;
        let (mut lifted, facts, links) = lift_request(
            ops,
            start,
            is_fpm(r.kind),
            cli,
            &mut walks.seen,
            &mut walks.walked,
        );
        // kept as long as the capture: no room left over from building
        // (a request's ops grown by doubling held half again as many
        // slots as ops, 596k for 385k on the bench log's first 100 MB)
        lifted.shrink_to_fit();
        let mut w = WorkRequest {
            pid: r.pid,
            request_time_us: ops.first().map_or(start, |o| o.t_us.max(start)),
            start_us: start,
            end_us: r.end_us.unwrap_or(start),
            cli,
            script: script_of(&lifted),
            from_template: false,
            settings: r.settings.clone().filter(|_| common.is_none()),
            ops: lifted,
        };
        if let Some(bins) = bin_scripts.get(i) {
            file_cache_compiles(&mut w, bins);
        }
        let first = (i < crate::infer::SEARCH_REQUESTS).then(|| recorded.into_owned());
        if cli || final_of_pid.get(&r.pid) == Some(&i) {
            // a php-cli process ends with its request, a worker with its
            // last: what it walked is no later request's (another process
            // with the pid has a realpath cache of its own), and kept it
            // would grow with the processes of the capture
            *walks = Walks::default();
        }
        Lifted1 {
            w,
            facts,
            links,
            first,
        }
    };
    // lifted on the maker's thread, a chunk ahead of the fold below: the
    // chunk's processes side by side on the pool (each process's requests
    // in order), unless this thread is one of the pool's workers
    let side_by_side = ahead::may_use_pool();
    let mut make = |range: std::ops::Range<usize>| -> Vec<Lifted1> {
        use rayon::prelude::*;
        let mut by_pid: Vec<(u32, Vec<usize>, Walks)> = Vec::new();
        let mut slot: HashMap<u32, usize> = HashMap::default();
        for i in range.clone() {
            let pid = requests.request(i).pid;
            let k = *slot.entry(pid).or_insert_with(|| {
                let walks = walks_by_pid.remove(&pid).unwrap_or_default();
                by_pid.push((pid, Vec::new(), walks));
                by_pid.len() - 1
            });
            by_pid[k].1.push(i);
        }
        let lift_all = |(_, is, walks): &mut (u32, Vec<usize>, Walks)| -> Vec<(usize, Lifted1)> {
            is.iter().map(|&i| (i, lift_one(i, walks))).collect()
        };
        let done: Vec<Vec<(usize, Lifted1)>> = if side_by_side {
            by_pid.par_iter_mut().map(lift_all).collect()
        } else {
            by_pid.iter_mut().map(lift_all).collect()
        };
        for (pid, _, walks) in by_pid {
            if !walks.is_empty() {
                walks_by_pid.insert(pid, walks);
            }
        }
        let mut out: Vec<Option<Lifted1>> = range.clone().map(|_| None).collect();
        for (i, l) in done.into_iter().flatten() {
            out[i - range.start] = Some(l);
        }
        out.into_iter().flatten().collect()
    };
    // what the capture's settings are read from: not the php-cli
    // processes whose command line states settings of their own (`-d`),
    // unless every request is one
    ahead::pipelined(requests.len(), &mut make, &mut |i, l: Lifted1| {
        links.extend(l.links);
        if all_stated || l.w.settings.is_none() {
            for (k, v) in l.facts.basedirs {
                *basedirs.entry(k).or_default() += v;
            }
            short_walks += l.facts.short_walks;
        }
        if let (Some(f), Some(calls)) = (first.get_mut(i), l.first) {
            *f = calls;
        }
        sink(i, l.w)
    })?;
    Ok(Each {
        basedirs,
        short_walks,
        links,
        file_cache,
        bin_scripts,
        first,
        latency_us,
        fpm,
        common,
    })
}

/// A process's walks so far, as [`lift_request`] keeps them.
#[derive(Default)]
struct Walks {
    seen: HashMap<String, i64>,
    walked: HashSet<String>,
}

impl Walks {
    fn is_empty(&self) -> bool {
        self.seen.is_empty() && self.walked.is_empty()
    }
}

/// One request as [`lift_each`] lifts it, before the fold across requests.
struct Lifted1 {
    w: WorkRequest,
    facts: WalkFacts,
    links: BTreeMap<String, String>,
    first: Option<Vec<Op>>,
}

/// The file cache's compiles show no read (a .bin was loaded) or
/// OPcache's extra fstats: the compile's own calls are those of a compile
/// without it (R51: php-cli's entry script fstat'ed twice, the others
/// once, one read each). `bins`: the scripts the request loaded from the
/// file cache.
fn file_cache_compiles(r: &mut WorkRequest, bins: &BTreeSet<String>) {
    let cli = r.cli;
    for o in r.ops.iter_mut() {
        if let PhpOpKind::Compile {
            path,
            via,
            fstats,
            reads,
            ..
        } = &mut o.kind
        {
            // (an open of a script whose .bin this request did not
            // touch is no compile: kept as recorded)
            if !bins.contains(path.as_ref()) {
                continue;
            }
            // (php-fpm's entry script: one fstat)
            *fstats = if *via == Via::Main && cli { 2 } else { 1 };
            *reads = 1;
        }
    }
}

/// The evidence of OPcache's permission checks (`checks` of them) and of
/// its file cache (`fc`), added to `evidence`. `shm`: OPcache's shared
/// memory shows (a php-cli lock file, or a pool whose workers do not load
/// a script from the file cache twice); `cli`: the trace has php-cli
/// processes.
fn checks_and_file_cache(
    evidence: &mut Evidence,
    checks: usize,
    fc: Option<&FileCacheSeen>,
    shm: bool,
    cli: bool,
) {
    if checks > 0 {
        evidence.notes.push(format!(
            "{checks} uses of cached scripts were checked with access(R_OK) (OPcache's permission check): OPcache on with opcache.validate_permission=1 (R68)"
        ));
        evidence
            .inferred
            .push(("opcache.validate_permission".into(), "1".into()));
        if !evidence.inferred.iter().any(|(k, _)| k == "opcache.enable") {
            evidence
                .inferred
                .push(("opcache.enable".into(), "1".into()));
        }
    }
    let Some(fc) = fc else {
        return;
    };
    evidence.notes.push(format!(
        "OPcache's file cache in {} ({} scripts found there, the others stored){}: opcache.file_cache={} (R67)",
        fc.dir,
        fc.present.len(),
        if shm { "" } else { ", no shared memory lock file: opcache.file_cache_only=1" },
        fc.dir
    ));
    evidence
        .inferred
        .push(("opcache.file_cache".into(), fc.dir.clone()));
    if !shm {
        // every process compiles each script through the cache: no
        // sign of OPcache off, and no lock file to look for
        evidence.notes.retain(|n| {
            !n.contains("OPcache off (or not caching)")
                && !n.contains("OPcache off for the CLI")
                && !n.contains("created OPcache's lock file")
        });
        evidence
            .inferred
            .retain(|(k, _)| k != "opcache.enable" && k != "opcache.enable_cli");
        evidence
            .inferred
            .push(("opcache.file_cache_only".into(), "1".into()));
        for (k, v) in [("opcache.enable", "1"), ("opcache.enable_cli", "1")] {
            if !evidence.inferred.iter().any(|(x, _)| x == k) && (cli || k == "opcache.enable") {
                evidence.inferred.push((k.into(), v.into()));
            }
        }
    }
}

/// The evidence's last settings, over the requests `reqs` (their
/// operations not needed): OPcache's permission checks seen (`checks`)
/// and file cache (`shm`: beside shared memory), then what command lines
/// state ([`Stated`]).
fn settings_evidence(
    evidence: &mut Evidence,
    checks: usize,
    each: &Each,
    shm: bool,
    cli: bool,
    stated: Stated,
) {
    checks_and_file_cache(evidence, checks, stated.unstated_file_cache(each), shm, cli);
    stated.leave_out(evidence);
    Stated::common(evidence, each.common.as_deref());
}

/// The settings php-cli command lines state (`php -d KEY=VALUE`), over a
/// capture's requests: what the capture's own settings (its php.ini) are
/// not read from. The evidence leaves those processes out while other
/// requests remain (`EvidenceSeen::stated_apart`, the walks in
/// `lift_each`); when every request states settings, what the evidence
/// shows of a key some command line states is that command line's, not
/// the php.ini's ([`Stated::leave_out`]).
#[derive(Default)]
struct Stated {
    keys: BTreeMap<String, BTreeSet<String>>,
    /// Requests seen, and those stating no setting.
    seen: usize,
    unstated: usize,
}

impl Stated {
    fn of<'r>(reqs: impl Iterator<Item = &'r WorkRequest>) -> Stated {
        let mut s = Stated::default();
        for r in reqs {
            s.see(r);
        }
        s
    }

    fn see(&mut self, r: &WorkRequest) {
        self.seen += 1;
        match &r.settings {
            Some(set) => {
                for (k, v) in set.iter() {
                    self.keys.entry(k.clone()).or_default().insert(v.clone());
                }
            }
            None => self.unstated += 1,
        }
    }

    /// Every request (there are some) states settings.
    fn all(&self) -> bool {
        self.seen > 0 && self.unstated == 0
    }

    /// The file cache the trace showed, unless a command line names its
    /// directory (then it is that process's, not the capture's).
    fn unstated_file_cache<'e>(&self, each: &'e Each) -> Option<&'e FileCacheSeen> {
        let named = |dir: &str| {
            self.keys.get("opcache.file_cache").is_some_and(|v| {
                v.iter()
                    .any(|d| d.trim_end_matches('/') == dir.trim_end_matches('/'))
            })
        };
        each.file_cache.as_ref().filter(|fc| !named(&fc.dir))
    }

    /// The settings every request's command line states alike: the
    /// capture's (a change the user proposes reaches them, as a changed
    /// command line would), over what the evidence inferred of them.
    fn common(evidence: &mut Evidence, common: Option<&[(String, String)]>) {
        let Some(set) = common else {
            return;
        };
        for (k, v) in set {
            evidence.inferred.retain(|(key, _)| key != k);
            evidence.inferred.push((k.clone(), v.clone()));
            evidence.stated.push(k.clone());
        }
        evidence.notes.push(format!(
            "the php-cli command line states {} (-d): the capture's settings",
            set.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }

    fn leave_out(&self, evidence: &mut Evidence) {
        if self.keys.is_empty() {
            return;
        }
        if self.all() {
            evidence
                .inferred
                .retain(|(k, _)| !self.keys.contains_key(k));
        }
        evidence.notes.push(format!(
            "php-cli command lines state {} (-d): those processes run under them, over the capture's settings, which are not read from them",
            self.keys
                .iter()
                .map(|(k, v)| {
                    // a few values each (a host's cron jobs, one a site)
                    let shown: Vec<&str> = v.iter().take(3).map(String::as_str).collect();
                    let more = match v.len() {
                        n if n > 3 => format!("|... ({n} values)"),
                        _ => String::new(),
                    };
                    format!("{k}={}{more}", shown.join("|"))
                })
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
}

/// A request that shows OPcache starting (its php-cli lock file).
fn starts_opcache(r: &WorkRequest) -> bool {
    r.ops
        .iter()
        .any(|o| matches!(o.kind, PhpOpKind::OpcacheStartup { .. }))
}

/// Every request lifted and held in memory, with the evidence that looks
/// at all of them (before the script facts and the templates).
fn lift_requests(
    requests: &Requests,
    real: &dyn CallSource,
    mtimes: &BTreeMap<String, Vec<(i64, i64)>>,
) -> Lifted {
    let mut reqs: Vec<WorkRequest> = Vec::new();
    let each = lift_each::<std::convert::Infallible>(requests, real, &mut |_, r| {
        reqs.push(r);
        Ok(())
    });
    let Ok(each) = each;
    let checks = permission::permission_checks(&mut reqs);
    let mut evidence = evidence(&reqs, &each.basedirs, each.short_walks, mtimes);
    // shared memory too: php-cli created its lock file; php-fpm creates
    // it in the master, outside requests, so a pool's trace tells it
    // otherwise: without shared memory a worker loads the same script
    // from the file cache in each of its requests (measured: fpm-*-fco),
    // with it once for the pool
    let shm = each.file_cache.is_some()
        && ((each.fpm && !reloads_from_file_cache(&reqs, &each.bin_scripts))
            || reqs.iter().any(starts_opcache));
    settings_evidence(
        &mut evidence,
        checks,
        &each,
        shm,
        reqs.iter().any(|r| r.cli),
        Stated::of(reqs.iter()),
    );
    Lifted {
        reqs,
        evidence,
        links: each.links,
        file_cache: each.file_cache,
        real: each.first,
        latency_us: each.latency_us,
    }
}

/// Operations a request keeps as its own when it takes a template:
/// unmodelled (raw) calls, and writes — `unlink`/`rename`/`rmdir`/`mkdir`
/// and opens that create or write a file. No cache hides a write (each is
/// a syscall every time, R57/R74), so a request's writes are exactly the
/// ones it made: a write that happens only in some requests (a lock file,
/// a cache rebuild) is not replayed into the others, where it would clear
/// their realpath cache (R57).
fn own_op(o: &PhpOp) -> bool {
    match &o.kind {
        PhpOpKind::Raw { .. } | PhpOpKind::Write { .. } | PhpOpKind::OpcacheStartup { .. } => true,
        PhpOpKind::Open { flags, .. } => {
            flags & (Flags::O_CREAT | Flags::O_WRONLY | Flags::O_RDWR | Flags::O_TRUNC) != 0
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn op(t: i64, kind: OpKind, path: &str, err: bool) -> Op {
        Op {
            t_us: t,
            dur_us: None,
            pid: 1,
            uid: 0,
            kind,
            path: path.into(),
            path2: None,
            flags: 0,
            errno: err.then(|| "ENOENT".into()),
            bytes: if kind == OpKind::Read { 100 } else { 0 },
            walk_base: 0,
        }
    }

    fn req(pid: u32, ops: Vec<PhpOp>) -> WorkRequest {
        WorkRequest {
            pid,
            start_us: 0,
            end_us: 1000,
            request_time_us: 0,
            cli: false,
            script: script_of(&ops),
            from_template: false,
            settings: None,
            ops,
        }
    }

    /// A script compiled at `t` (one resolution, fstat and read).
    fn compile(t: i64, path: &str, via: Via) -> PhpOp {
        PhpOp {
            t_off_us: t,
            stat_us: None,
            kind: PhpOpKind::Compile {
                path: path.into(),
                resolve_as: None,
                probes: Box::default(),
                via,
                resolves: 1,
                fstats: 1,
                reads: 1,
                keep_open: false,
            },
        }
    }

    #[test]
    fn templates_do_not_copy_writes() {
        let write = |t: i64, path: &str| PhpOp {
            t_off_us: t,
            stat_us: None,
            kind: PhpOpKind::Write {
                op: Box::new(op(t, OpKind::Unlink, path, false)),
            },
        };
        let create = |t: i64, path: &str| PhpOp {
            t_off_us: t,
            stat_us: None,
            kind: PhpOpKind::Open {
                path: path.into(),
                resolve_as: None,
                resolves: 1,
                flags: Flags::O_CREAT | Flags::O_WRONLY,
            },
        };
        let main = || PhpOp {
            t_off_us: 1,
            stat_us: None,
            kind: PhpOpKind::Revalidate {
                path: "/w/index.php".into(),
                resolves: 0,
            },
        };
        // the fullest request removes a lock file and creates a cache file
        let a = req(
            1,
            vec![
                compile(1, "/w/index.php", Via::Main),
                compile(5, "/w/a.php", Via::Include),
                create(7, "/w/cache/x"),
                write(8, "/w/lock"),
                compile(10, "/w/b.php", Via::Include),
            ],
        );
        // caches hid its includes; it wrote nothing
        let b = req(2, vec![main()]);
        // caches hid its includes; it removed another file
        let c = req(1, vec![main(), write(9, "/w/other")]);
        let mut reqs = vec![a, b, c];
        apply_templates(&mut reqs);
        let writes = |r: &WorkRequest| -> Vec<String> {
            r.ops
                .iter()
                .filter(|o| own_op(o))
                .map(|o| o.kind.key().1.to_string())
                .collect()
        };
        assert!(reqs[1].from_template && reqs[2].from_template);
        let scripts = |r: &WorkRequest| r.ops.iter().filter(|o| o.kind.key().0 == "script").count();
        assert_eq!(scripts(&reqs[1]), 3);
        assert_eq!(scripts(&reqs[2]), 3);
        assert_eq!(writes(&reqs[0]), ["/w/cache/x", "/w/lock"]);
        assert!(writes(&reqs[1]).is_empty());
        assert_eq!(writes(&reqs[2]), ["/w/other"]);
    }

    /// A warm request that shows none of its template's scripts takes the
    /// template even with a call of its own the template lacks (kept), and
    /// without the template's file-function calls it did not make.
    #[test]
    fn warm_requests_take_their_template_tolerantly() {
        let at = |t: i64, kind: PhpOpKind| PhpOp {
            t_off_us: t,
            stat_us: None,
            kind,
        };
        let access = |t: i64, path: &str| {
            at(
                t,
                PhpOpKind::Access {
                    path: path.into(),
                    mode: 0,
                    missing: false,
                },
            )
        };
        let lstat = |t: i64, path: &str| at(t, PhpOpKind::Lstat { path: path.into() });
        // the compiling request: 30 scripts, each after a file_exists()
        // check, and one check of a file only it made
        let mut full = vec![at(
            0,
            PhpOpKind::PrimaryResolve {
                path: "/w/index.php".into(),
            },
        )];
        for i in 0..30 {
            full.push(access(10 * i + 1, &format!("/w/c{i}")));
            full.push(compile(10 * i + 2, &format!("/w/s{i}.php"), Via::Include));
        }
        full.push(access(400, "/w/only-first"));
        let a = req(1, full);
        // the warm request: the 30 checks, an lstat of its own among them
        let mut warm = vec![at(
            0,
            PhpOpKind::PrimaryResolve {
                path: "/w/index.php".into(),
            },
        )];
        for i in 0..30 {
            warm.push(access(10 * i + 1, &format!("/w/c{i}")));
            if i == 15 {
                warm.push(lstat(10 * i + 5, "/w/theme/part.html"));
            }
        }
        let b = req(2, warm);
        let mut reqs = vec![a, b];
        apply_templates(&mut reqs);
        let r = &reqs[1];
        assert!(r.from_template);
        let count = |k: &str| r.ops.iter().filter(|o| o.kind.key().0 == k).count();
        assert_eq!(count("script"), 30);
        assert_eq!(
            count("access"),
            30,
            "the template's unmade check is left out"
        );
        assert_eq!(count("lstat"), 1, "the request's own lstat is kept");
        assert!(r.ops.windows(2).all(|w| w[0].t_off_us <= w[1].t_off_us));
    }

    #[test]
    fn parent_skips_dot_and_stops_below_root() {
        assert_eq!(parent("/m/a/b.php"), Some("/m/a"));
        assert_eq!(parent("/m/./rel"), Some("/m"));
        assert_eq!(parent("/m"), None);
        assert_eq!(parent("/m/a/../b"), Some("/m/a"));
        assert_eq!(parent("/m/a//b"), Some("/m/a"));
        assert_eq!(normalize("/m/a/../b//c/./d"), "/m/b/c/d");
    }

    /// The call sequence of real php-cli 8.2 with `opcache.enable_cli=1`
    /// running `php tree.php` (cli-tree-oc, abridged): OPcache's lock file,
    /// the entry script with PHP's and OPcache's getcwd/fstat, the lock's
    /// close at shutdown.
    fn cli_entry(opcache: bool, lock: &str) -> Vec<Op> {
        use OpKind::*;
        let mut v = Vec::new();
        let e = "/w/tree.php";
        if opcache {
            let mut o = op(1, Open, lock, false);
            o.flags = Flags::O_RDWR | Flags::O_CREAT | Flags::O_EXCL;
            v.push(o);
            v.push(op(2, Unlink, lock, false));
        }
        v.extend([
            op(3, Open, e, false),
            op(4, Getcwd, "/w", false),
            op(5, Lstat, e, false),
            op(6, Lstat, "/w", false),
            op(7, Fstat, "/dev/null", false),
            op(8, Getcwd, "/w", false),
        ]);
        if opcache {
            v.push(op(9, Getcwd, "/w", false));
            v.push(op(10, Fstat, e, false));
        }
        v.extend([op(11, Fstat, e, false), op(12, Fstat, e, false)]);
        v.push(op(13, Read, e, false));
        if opcache {
            let mut c = op(14, Close, lock, false);
            c.flags = Flags::FD_DELETED;
            v.push(c);
        }
        v
    }

    #[test]
    fn cli_opcache_calls_are_lifted_as_opcaches() {
        let lift = |ops: &[Op]| {
            lift_request(
                ops,
                0,
                false,
                true,
                &mut HashMap::default(),
                &mut HashSet::default(),
            )
            .0
        };
        let on = lift(&cli_entry(true, "/tmp/.ZendSem.AbC123"));
        let off = lift(&cli_entry(false, ""));
        // the same workload but OPcache's start
        assert_eq!(
            on[0].kind,
            PhpOpKind::OpcacheStartup {
                lock_dir: "/tmp".into()
            }
        );
        let kinds = |l: &[PhpOp]| -> Vec<PhpOpKind> {
            l.iter()
                .map(|o| o.kind.clone())
                .filter(|k| !matches!(k, PhpOpKind::OpcacheStartup { .. }))
                .collect()
        };
        assert_eq!(kinds(&on), kinds(&off));
        assert!(matches!(
            &off[0].kind,
            PhpOpKind::Compile {
                via: Via::Main,
                fstats: 2,
                ..
            }
        ));
        assert!(entry_getcwd(&off).is_some());
        // not OPcache's: another name, or no O_EXCL
        for (name, flags) in [
            (
                "/tmp/.ZendSem.AbC12",
                Flags::O_RDWR | Flags::O_CREAT | Flags::O_EXCL,
            ),
            ("/tmp/.ZendSem.AbC123", Flags::O_RDWR | Flags::O_CREAT),
        ] {
            let mut ops = cli_entry(true, name);
            ops[0].flags = flags;
            let l = lift(&ops);
            assert!(!l
                .iter()
                .any(|o| matches!(o.kind, PhpOpKind::OpcacheStartup { .. })));
            assert!(matches!(&l[0].kind, PhpOpKind::Raw { op } if op.path == name.into()));
        }
    }

    #[test]
    fn lifts_chain_compile_probe_and_once_repeat() {
        use OpKind::*;
        let ops = vec![
            op(10, Lstat, "/w/./lib/u.php", true),
            op(11, Lstat, "/w/inc/lib/u.php", false),
            op(12, Lstat, "/w/inc/lib", false),
            op(13, Open, "/w/inc/lib/u.php", false),
            op(14, Fstat, "/w/inc/lib/u.php", false),
            op(15, Read, "/w/inc/lib/u.php", false),
            op(16, Close, "/w/inc/lib/u.php", false),
            // include_once 'lib/u.php' again: failed candidate, cached hit
            op(20, Lstat, "/w/./lib/u.php", true),
            op(30, Access, "/d/f.txt", false),
            op(31, Stat, "/d/f.txt", false),
        ];
        let (l, _, _) = lift_request(
            &ops,
            0,
            false,
            false,
            &mut HashMap::default(),
            &mut HashSet::default(),
        );
        let kinds: Vec<&PhpOpKind> = l.iter().map(|o| &o.kind).collect();
        assert_eq!(
            kinds[0],
            &PhpOpKind::Compile {
                path: "/w/inc/lib/u.php".into(),
                resolve_as: None,
                via: Via::Main,
                probes: Box::new(["/w/./lib/u.php".into()]),
                resolves: 1,
                fstats: 1,
                reads: 1,
                keep_open: false
            }
        );
        assert!(
            matches!(kinds[1], PhpOpKind::OnceRepeat { path, probes, .. } if &**path == "/w/inc/lib/u.php" && probes.len() == 1)
        );
        assert!(matches!(kinds[2], PhpOpKind::Access { .. }));
        assert!(matches!(kinds[3], PhpOpKind::Stat { .. }));
        assert_eq!(l.len(), 4);
    }

    #[test]
    fn basedir_check_is_recognised() {
        use OpKind::*;
        let mut ops = Vec::new();
        for _ in 0..3 {
            ops.push(op(1, Lstat, "/b/x/f.php", false));
            ops.push(op(1, Lstat, "/b/x", false));
            ops.push(op(1, Lstat, "/b", false));
        }
        ops.push(op(2, Lstat, "/b", false));
        ops.push(op(3, Open, "/b/x/f.php", false));
        ops.push(op(4, Fstat, "/b/x/f.php", false));
        let (l, b, _) = lift_request(
            &ops,
            0,
            false,
            false,
            &mut HashMap::default(),
            &mut HashSet::default(),
        );
        assert_eq!(l.len(), 1);
        assert!(matches!(&l[0].kind, PhpOpKind::Compile { resolves: 1, .. }));
        assert_eq!(b.basedirs.get("/b"), Some(&1));
    }

    /// open_basedir=/ (the sequences of fpm-wordpress-obd and
    /// fpm-mediawiki-obd, on a small tree with a link /l -> /r): the checks
    /// are recognised without a basedir walk, dropped, and re-derived by
    /// the lower with the same calls.
    #[test]
    fn root_basedir_checks_are_recognised() {
        use OpKind::*;
        let walk = |ops: &mut Vec<Op>, p: &str| {
            let mut q = Some(p);
            while let Some(c) = q {
                ops.push(op(1, Lstat, c, false));
                if c == "/l" {
                    let mut r = op(1, Readlink, c, false);
                    r.bytes = 2;
                    ops.push(r);
                    ops.push(op(1, Lstat, "/r", false));
                    break;
                }
                q = parent(c);
            }
        };
        let mut ops = Vec::new();
        // file_exists() of a missing file whose parent is missing too
        ops.push(op(1, Lstat, "/r/x/y", true));
        ops.push(op(1, Lstat, "/r/x", true));
        walk(&mut ops, "/r");
        ops.push(op(1, Lstat, "/r/x/y", true));
        ops.push(op(1, Readlink, "/r/x/y", true));
        ops.push(op(1, Lstat, "/r/x", true));
        walk(&mut ops, "/r");
        ops.push(op(1, Access, "/r/x/y", true));
        // realpath("/l/f"): its walk, then the check of the result
        walk(&mut ops, "/l/f");
        walk(&mut ops, "/r/f");
        walk(&mut ops, "/r/f");
        ops.push(op(1, Getcwd, "/", false));
        // glob() returning /l/g: the check alone
        walk(&mut ops, "/l/g");
        walk(&mut ops, "/r/g");
        ops.push(op(1, Getcwd, "/", false));
        // is_file("/l/h"): the check, then stat
        walk(&mut ops, "/l/h");
        walk(&mut ops, "/r/h");
        ops.push(op(1, Stat, "/l/h", false));
        let (l, _, links) = lift_request(
            &ops,
            0,
            true,
            false,
            &mut HashMap::default(),
            &mut HashSet::default(),
        );
        let kinds: Vec<&PhpOpKind> = l
            .iter()
            .map(|o| &o.kind)
            .filter(|k| !matches!(k, PhpOpKind::Raw { .. }))
            .collect();
        assert!(
            matches!(
                kinds[..],
                [
                    PhpOpKind::Access { missing: true, .. },
                    PhpOpKind::Resolve { .. },
                    PhpOpKind::BasedirCheck { .. },
                    PhpOpKind::Stat { missing: false, .. },
                ]
            ),
            "{kinds:?}"
        );
        // and back: the same calls under open_basedir=/
        let w = Workload {
            schema: WORKLOAD_SCHEMA.to_string(),
            requests: vec![req(1, l)],
            evidence: Default::default(),
            links,
            mtimes: Default::default(),
            file_cache: None,
            latency_us: Default::default(),
            lock_us: 0,
            stored: Default::default(),
        };
        let mut cfg = crate::PhpConfig::default();
        cfg.apply_flags(&["open_basedir=/".to_string()]).unwrap();
        let low = crate::lower(&w, &cfg);
        let count = |v: &[Op], k: OpKind| v.iter().filter(|o| o.kind == k).count();
        for k in [Lstat, Readlink, Access, Stat] {
            assert_eq!(count(&low[0], k), count(&ops, k), "{k:?}");
        }
        // without open_basedir only realpath()'s walk and the calls remain
        let low = crate::lower(&w, &crate::PhpConfig::default());
        assert_eq!(count(&low[0], Lstat), 3);
        assert_eq!(count(&low[0], Readlink), 1);
    }
}
