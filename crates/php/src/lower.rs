//! Lower: PHP operations + settings + state across requests -> the
//! syscalls PHP makes, in order.
//!
//! State: each worker's realpath cache (R54: per process, TTL counted from
//! insertion, byte budget without eviction, no negative entries; disabled
//! by open_basedir, R58; cleared by unlink/rename/rmdir, R57), each
//! worker's user-ini cache (php-fpm), and the OPcache shared memory of the
//! pool (R64/R69: one revalidation stamp per script for all workers; a
//! php-cli process has its own). Requests are replayed in start order with
//! their recorded times and workers.

use crate::config::PhpConfig;
use crate::file_cache::Disk;
use crate::paths::parent;
use crate::realpath::{Call, RealpathCache};
use crate::workload::{PhpOp, PhpOpKind, Via, WorkRequest, Workload};
use statstorm_trace::op::{Name, Op, OpKind};
use statstorm_trace::Flags;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

// The lowering's maps (paths, pids, indices): the project's fast hash
// (`statstorm_trace::event::FastHash`) instead of SipHash (a capture is
// not adversarial hash-flooding input).
use statstorm_trace::event::FastMap as HashMap;
use statstorm_trace::event::FastSet as HashSet;

struct Worker {
    realpath: RealpathCache,
    /// user ini path -> expiry (epoch seconds)
    user_ini: HashMap<String, i64>,
    /// non-canonical `*_once` names this worker has already resolved on
    /// an OPcache hit (R63, measured: resolved once per worker)
    once_names: HashSet<String>,
    /// names other than a script's path this worker has used as OPcache
    /// keys (compiled under, or resolved on a hit): only these find the
    /// script for the file override (measured: fpm-mediawiki-fo, the
    /// worker that did not compile vendor/autoload.php answers
    /// file_exists('.../includes/../vendor/autoload.php') with access()
    /// until its own require_once of that name)
    keys: HashSet<String>,
}

impl Worker {
    fn new(cfg: &PhpConfig) -> Self {
        // open_basedir turns the cache off (R58): limit 0
        let limit = if cfg.realpath_cache_enabled() {
            cfg.realpath_cache_size
        } else {
            0
        };
        Worker {
            realpath: RealpathCache::new(limit, cfg.realpath_cache_ttl),
            user_ini: HashMap::default(),
            once_names: HashSet::default(),
            keys: HashSet::default(),
        }
    }
}

/// A store into the pool's OPcache that the other workers do not see yet:
/// OPcache stores a script after compiling it and renews its stamp after
/// the validation's `stat` (ZendAccelerator.c
/// `validate_timestamp_and_record`: `revalidate = request_time +
/// revalidate_freq` once `do_validate_timestamps` returned), so while
/// that operation's calls run, another worker finds the script as it was
/// (`before`: uncached, or the old stamp) and compiles or validates it
/// too — R64's race, measured with every `newfstatat` held 5 ms
/// (fpm-race-rf2: two workers at once both compile and both validate
/// every script).
struct Unseen {
    before: Option<i64>,
    /// when the store's operation ends (its start + its calls' latencies)
    visible_us: i64,
    /// the worker that made it (it sees its own store at once)
    pid: u32,
}

/// No worker: what the others see.
const OTHERS: u32 = u32::MAX;

#[derive(Default)]
struct Shm {
    /// stores still in progress (see [`Unseen`])
    unseen: HashMap<String, Unseen>,
    /// script -> revalidate stamp (epoch seconds): valid while >= request_time
    scripts: HashMap<String, i64>,
    /// names a script was compiled under that are not its path (`..`,
    /// `a//b.php`, a symlink) -> the script: OPcache keys the script under
    /// the name too (ZendAccelerator.c persistent_compile_file ->
    /// zend_accel_add_key), so the file override finds it by that name
    aliases: HashMap<String, String>,
    /// script -> the mtime it was cached with, when the trace shows it
    /// (R64 step 3: a validation that finds another one recompiles)
    timestamps: HashMap<String, i64>,
    /// keys in OPcache's hash table: a script's path, and each name it
    /// was compiled under that is not its path (`aliases`)
    keys: u64,
    /// scripts loaded from OPcache's file cache (R67, beside shared
    /// memory): keyed by their path only, until a use of another name
    /// finds them by their real path and adds the name's key
    unkeyed: HashSet<String>,
    /// script -> when the include_path name of its repeated `*_once`
    /// became a key (the end of the resolution that added it)
    once_keys: HashMap<String, i64>,
}

impl Shm {
    /// The revalidate stamp of `path` as worker `pid` finds it at `t_us`
    /// (None: not cached).
    fn stamp(&self, path: &str, pid: u32, t_us: i64) -> Option<i64> {
        match self.unseen.get(path) {
            Some(u) if u.pid != pid && t_us < u.visible_us => u.before,
            _ => self.scripts.get(path).copied(),
        }
    }

    fn cached(&self, path: &str, pid: u32, t_us: i64) -> bool {
        self.stamp(path, pid, t_us).is_some()
    }

    /// Stores `stamp` for `path` by the operation of worker `pid` that
    /// started at `t_us` and ends at `end_us`.
    fn store(&mut self, path: &str, stamp: i64, pid: u32, t_us: i64, end_us: i64) {
        if end_us > t_us {
            let before = self.stamp(path, OTHERS, t_us);
            let u = Unseen {
                before,
                visible_us: end_us,
                pid,
            };
            self.unseen.insert(path.to_string(), u);
        } else {
            self.unseen.remove(path);
        }
        self.scripts.insert(path.to_string(), stamp);
    }

    /// A second compile of `path`, begun while another worker's was
    /// still running, ends at `end_us`: from then on the script is stored
    /// for every worker, whichever of the two stored it.
    fn stored_again(&mut self, path: &str, end_us: i64) {
        if let Some(u) = self.unseen.get_mut(path) {
            u.visible_us = u.visible_us.min(end_us);
        }
    }
}

/// OPcache's hash table size for `opcache.max_accelerated_files`: the
/// first prime of its list at or above the setting
/// (ext/opcache/zend_accelerator_hash.c `zend_accel_hash_init`); a script
/// or a name past it is not cached (`zend_accel_hash_is_full`; measured:
/// with 200, WordPress keeps 223 scripts cached, MediaWiki 219 scripts
/// and 4 names through `..`).
pub fn accel_hash_size(max_accelerated_files: u64) -> u64 {
    const PRIMES: [u64; 18] = [
        5, 11, 19, 53, 107, 223, 463, 983, 1979, 3907, 7963, 16229, 32531, 65407, 130987, 262237,
        524521, 1048793,
    ];
    PRIMES
        .into_iter()
        .find(|&p| max_accelerated_files <= p)
        .unwrap_or(max_accelerated_files)
}

struct Ctx<'a> {
    cfg: &'a PhpConfig,
    links: &'a BTreeMap<String, String>,
    /// the workload, for its scripts' mtimes (R65)
    mtimes: &'a Workload,
    out: Vec<Op>,
    pid: u32,
    t_us: i64,
    /// request_time, whole seconds (SAPI request start; R64)
    req_s: i64,
    /// Whether the next compile's open runs the open_basedir check (not
    /// for php-cli's entry script, which the SAPI opens itself: measured).
    check_open: bool,
    /// OPcache's own calls on the next compile's open handle (php-cli's
    /// entry script with OPcache on): the `getcwd` of a relative name's
    /// key, if any, and the `fstat` of the timestamp.
    opcache_entry: Option<Option<Op>>,
    /// the latency of each kind of call ([`Workload::latency_us`], or
    /// the storage's of [`lower_with`]) ...
    latency: &'a BTreeMap<OpKind, u64>,
    /// ... the capture's, for the difference ...
    recorded: &'a BTreeMap<OpKind, u64>,
    /// ... summed over the calls of the current operation from its
    /// first `open` or `stat` on: the call the lift times the operation
    /// by (a compile's open, a validation's stat; the resolution before
    /// it comes earlier) ...
    busy_us: i64,
    anchored: bool,
    /// ... but for a validation's stat as the capture timed it
    /// ([`PhpOp::stat_us`]; the kind of call, and its duration)
    anchor: Option<(OpKind, u64)>,
    /// The lowering's names ([`Names`]).
    names: Names,
}

/// The paths and errno names of the lowered calls, each stored once per
/// [`Lowerer`]: a call emitted on a path seen before shares its name
/// rather than copying it (bounded by the distinct paths).
#[derive(Clone, Default)]
struct Names(std::rc::Rc<std::cell::RefCell<HashSet<Name>>>);

impl Names {
    fn get(&self, s: &str) -> Name {
        let mut set = self.0.borrow_mut();
        if let Some(n) = set.get(s) {
            return n.clone();
        }
        let n: Name = s.into();
        set.insert(n.clone());
        n
    }
}

impl Ctx<'_> {
    /// When the current operation's calls so far end.
    fn end_us(&self) -> i64 {
        self.t_us + self.busy_us
    }

    fn push(&mut self, op: Op) {
        let of = |m: &BTreeMap<OpKind, u64>| m.get(&op.kind).copied().unwrap_or(0) as i64;
        let mut took = of(self.latency);
        if !self.anchored && matches!(op.kind, OpKind::Open | OpKind::Stat) {
            self.anchored = true;
            self.busy_us = 0;
            // the call the capture timed the operation by: its own
            // duration, moved by the storage's difference
            if let Some((k, d)) = self.anchor.take() {
                if k == op.kind {
                    took += d as i64 - of(self.recorded);
                }
            }
        }
        self.busy_us = (self.busy_us + took).max(0);
        self.out.push(op);
    }

    fn emit(&mut self, kind: OpKind, path: &str, flags: u32, errno: Option<&str>) {
        self.push(Op {
            t_us: self.t_us,
            dur_us: None,
            pid: self.pid,
            uid: 0,
            kind,
            path: self.names.get(path),
            path2: None,
            flags,
            errno: errno.map(|e| self.names.get(e)),
            bytes: 0,
            walk_base: 0,
        });
    }

    /// R65: a script modified less than file_update_protection seconds
    /// before the request is compiled but not cached
    /// (ZendAccelerator.c persistent_compile_file:
    /// `request_time - file_update_protection < timestamp`; measured:
    /// fpm-fresh-rf0). Scripts whose mtime the trace does not show are
    /// taken as old.
    fn cacheable(&self, script: &str) -> bool {
        let fup = self.cfg.file_update_protection as i64;
        fup == 0
            || self
                .mtimes
                .mtime_at(script, self.t_us)
                .is_none_or(|m| self.req_s - fup >= m)
    }

    fn now_s(&self) -> i64 {
        self.t_us.div_euclid(1_000_000)
    }

    /// `tsrm_realpath` of an existing path (R53/R54): lstat from the full
    /// path up to the first cached prefix (the root is never lstat'ed),
    /// inserting each resolved prefix while the budget allows.
    fn resolve(&mut self, w: &mut Worker, p: &str) {
        let links = self.links;
        let now = self.now_s();
        w.realpath.resolve(p, now, links, &mut |c| match c {
            Call::Lstat(c) => self.emit(OpKind::Lstat, c, Flags::AT_SYMLINK_NOFOLLOW, None),
            Call::Readlink(c) => self.emit(OpKind::Readlink, c, 0, None),
        });
    }

    /// The path `p` names once the known symlinks are followed
    /// (`tsrm_realpath_r`, absolute link targets, R53).
    fn realpath_of(&self, p: &str) -> String {
        crate::realpath::resolved(self.links, p)
    }

    /// A failed include_path candidate: one lstat, nothing cached (R50).
    fn probe(&mut self, p: &str) {
        self.emit(OpKind::Lstat, p, Flags::AT_SYMLINK_NOFOLLOW, Some("ENOENT"));
    }

    /// `php_check_open_basedir` (R59, measured): per basedir entry until
    /// one contains the path: `expand_filepath(p)`, `VCWD_REALPATH(p)`,
    /// `expand_filepath(entry)` — with the realpath cache off (R58) each is
    /// a full lstat walk.
    fn basedir_check(&mut self, w: &mut Worker, p: &str) {
        self.basedir_check_ex(w, p, false)
    }

    /// [`Self::basedir_check`] of a path that may not exist: the walks
    /// then start with a failing `lstat(p)` (the second also tries
    /// `readlink(p)`, measured) and go on with the parent.
    fn basedir_check_ex(&mut self, w: &mut Worker, p: &str, missing: bool) {
        if self.cfg.open_basedir.is_empty() {
            return;
        }
        let entries: Vec<String> = self
            .cfg
            .open_basedir
            .split(':')
            .filter(|e| !e.is_empty())
            .map(|e| e.trim_end_matches('/').to_string())
            .collect();
        for e in entries {
            if missing {
                // the second walk is VCWD_REALPATH's of what
                // expand_filepath returned: the real path (through
                // symlinks of the parents, measured on WordPress's
                // missing theme `block-templates/index.html` under
                // open_basedir=/)
                let real = self.realpath_of(p);
                for (q, readlink) in [(p, false), (real.as_str(), true)] {
                    self.emit(OpKind::Lstat, q, Flags::AT_SYMLINK_NOFOLLOW, Some("ENOENT"));
                    if readlink {
                        self.emit(OpKind::Readlink, q, 0, Some("ENOENT"));
                    }
                    if let Some(parent) = parent(q) {
                        self.resolve(w, parent);
                    }
                }
            } else {
                // php_check_specific_open_basedir: `expand_filepath(path)`
                // walks the name; `VCWD_REALPATH` then walks what that
                // returned, the real path (through symlinks: measured on
                // WordPress, whose themes are links from /var/lib into
                // /usr/share, fpm-wordpress-obd; R59)
                self.resolve(w, p);
                let real = self.realpath_of(p);
                self.resolve(w, &real);
            }
            if !e.is_empty() {
                self.resolve(w, &e);
            }
            if p.starts_with(&e) {
                break;
            }
        }
    }

    /// R51: resolution(s), open_basedir check, open, fstat(s), read(s),
    /// close.
    /// A new file's `open(O_RDWR|O_CREAT|O_EXCL)` (`mkstemp`, OPcache's
    /// stores).
    fn create(&mut self, path: &str) {
        self.emit(
            OpKind::Open,
            path,
            Flags::O_RDWR | Flags::O_CREAT | Flags::O_EXCL,
            None,
        );
    }

    /// A compile's way to the script's `open`: the failed include_path
    /// candidates, the name's resolution, then (include_once, the entry
    /// script) the resolved path's again — zend_include_or_eval resolves
    /// the name, then zend_stream_open resolves what it returned (R52,
    /// measured: a non-canonical name like `a//b.php` walks both keys) —
    /// and the open_basedir check.
    fn open_to_compile(
        &mut self,
        w: &mut Worker,
        path: &str,
        name: &str,
        probes: &[Name],
        resolves: u32,
    ) {
        for p in probes {
            self.probe(p);
        }
        self.resolve(w, name);
        for _ in 1..resolves.max(1) {
            self.resolve(w, path);
        }
        if self.check_open {
            self.basedir_check(w, path);
        }
        self.check_open = true;
        self.emit(OpKind::Open, path, 0, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn compile(
        &mut self,
        w: &mut Worker,
        path: &str,
        name: &str,
        probes: &[Name],
        resolves: u32,
        fstats: u32,
        reads: u32,
        keep_open: bool,
    ) {
        self.open_to_compile(w, path, name, probes, resolves);
        if let Some(getcwd) = self.opcache_entry.take() {
            // docs/php-model.md "CLI OPcache startup": R61's getcwd for a
            // relative name's key (ZendAccelerator.c
            // accel_make_persistent_key -> accel_getcwd), then the
            // timestamp of the handle being cached (R64 step 2:
            // cache_script_in_shared_memory -> zend_get_file_handle_timestamp,
            // fstat of the ZEND_HANDLE_FP php-cli opened), before PHP's own
            // fstats (measured order)
            if let Some(g) = getcwd {
                self.emit(OpKind::Getcwd, &g.path, g.flags, None);
            }
            self.emit(OpKind::Fstat, path, Flags::AT_EMPTY_PATH, None);
        }
        for _ in 0..fstats {
            self.emit(OpKind::Fstat, path, Flags::AT_EMPTY_PATH, None);
        }
        for _ in 0..reads {
            self.emit(OpKind::Read, path, 0, None);
        }
        if !keep_open {
            self.emit(OpKind::Close, path, 0, None);
        }
    }

    /// R67: a compile through OPcache's file cache alone (php-cli with
    /// `opcache.file_cache_only=1`; crate::file_cache): the name resolved
    /// and the source opened as for any compile, then the `.bin` read
    /// (the entry script: its timestamp `fstat` unless
    /// `validate_timestamps=0`; an include: PHP's `fstat` of the source) or,
    /// missing, the source read and the `.bin` stored. Measured:
    /// cli-tree-fco, cli-tree-fco-cold, cli-filecheck-fco.
    #[allow(clippy::too_many_arguments)]
    fn compile_from_file_cache(
        &mut self,
        w: &mut Worker,
        disk: &mut Disk,
        path: &str,
        name: &str,
        probes: &[Name],
        resolves: u32,
        main: bool,
        keep_open: bool,
    ) {
        self.open_to_compile(w, path, name, probes, resolves);
        if let Some(Some(g)) = self.opcache_entry.take() {
            // php-cli's entry script beside shared memory: R61's getcwd
            // for a relative name's key as in `compile` (cli-tree-fc: 8
            // getcwd as recorded); the timestamp's fstat is the file
            // cache's below
            self.emit(OpKind::Getcwd, &g.path, g.flags, None);
        }
        let bin = disk.bin(path);
        if !main {
            self.emit(OpKind::Fstat, path, Flags::AT_EMPTY_PATH, None);
        }
        if disk.has(path) {
            // the .bin's header, then the script (zend_file_cache.c
            // zend_file_cache_script_load: two reads under flock; measured:
            // two per load in every capture with the cache)
            self.emit(OpKind::Open, &bin, 0, None);
            self.emit(OpKind::Read, &bin, 0, None);
            if main && self.cfg.validate_timestamps {
                self.emit(OpKind::Fstat, path, Flags::AT_EMPTY_PATH, None);
            }
            self.emit(OpKind::Read, &bin, 0, None);
            self.emit(OpKind::Close, &bin, 0, None);
        } else {
            self.emit(OpKind::Open, &bin, 0, Some("ENOENT"));
            if main {
                let n = 2 + u32::from(self.cfg.validate_timestamps);
                for _ in 0..n {
                    self.emit(OpKind::Fstat, path, Flags::AT_EMPTY_PATH, None);
                }
            }
            self.emit(OpKind::Read, path, 0, None);
            for (d, existed) in disk.store(path) {
                self.emit(OpKind::Mkdir, &d, 0, existed.then_some("EEXIST"));
            }
            self.create(&bin);
            self.emit(OpKind::Close, &bin, 0, None);
        }
        if !keep_open {
            self.emit(OpKind::Close, path, 0, None);
        }
    }

    /// R68: with `opcache.validate_permission`, a script found in OPcache
    /// through a handle not opened yet is checked with `access(R_OK)`
    /// before anything else (ZendAccelerator.c persistent_compile_file:
    /// `check_persistent_script_access` when `file_handle->type ==
    /// ZEND_HANDLE_FILENAME`). Measured (fpm-tree-vp, fpm-filecheck-vp):
    /// every use of a cached script in php-fpm — the entry script, each
    /// include and require, each repeat of a plain include, the first
    /// *_once of the request — is checked, before the validation `stat`
    /// when one is due; a compile (cache miss) is not. php-cli: the entry
    /// script is opened by the CLI itself (not checked), each cached
    /// include is checked (cli-tree-ocvp: the three repeats of
    /// `t/d1/d2/d3/d4/m0.php`).
    fn permission_check(&mut self, path: &str) {
        if self.cfg.validate_permission {
            self.emit(OpKind::Access, path, Flags::R_OK, None);
        }
    }

    /// R64: skipped while the shared stamp is >= request_time (and
    /// revalidate_freq > 0); else the name is resolved when the handle has
    /// no opened path (`resolve`: plain include/require; measured: the
    /// entry script and *_once scripts come with their path and are not
    /// resolved), then `stat`; the stamp becomes request_time +
    /// revalidate_freq for the whole pool.
    fn revalidate(
        &mut self,
        w: &mut Worker,
        shm: &mut Shm,
        path: &str,
        resolve: Option<(&str, &[Name])>,
    ) {
        self.revalidate_ex(w, shm, path, resolve, false);
    }

    /// [`Ctx::revalidate`]; for an include (`recompile`), a validation
    /// that finds another mtime than the one the script was cached with
    /// (the trace's, `strace -v`) compiles the script again (R64 step 3;
    /// measured: fpm-change-rf0, `t/d1/m1.php` given another mtime before
    /// request 4: its validation `stat`, a second `stat`, then open, fstat,
    /// read and close, no resolution), cached again unless too new (R65).
    fn revalidate_ex(
        &mut self,
        w: &mut Worker,
        shm: &mut Shm,
        path: &str,
        resolve: Option<(&str, &[Name])>,
        recompile: bool,
    ) {
        if !self.cfg.validate_timestamps {
            return;
        }
        let stamp = shm.stamp(path, self.pid, self.t_us).unwrap_or(i64::MIN);
        if self.cfg.revalidate_freq > 0 && stamp >= self.req_s {
            return;
        }
        if let Some((name, probes)) = resolve {
            // the original resolver: include_path candidates (R49/R50),
            // then the realpath cache (R53)
            for p in probes {
                self.probe(p);
            }
            self.resolve(w, name);
        }
        self.emit(OpKind::Stat, path, 0, None);
        let now = self.mtimes.mtime_at(path, self.t_us);
        let changed = matches!((now, shm.timestamps.get(path)), (Some(a), Some(&b)) if a != b);
        if changed && recompile {
            self.emit(OpKind::Stat, path, 0, None);
            self.compile(w, path, path, &[], 0, 1, 1, false);
            if !self.cacheable(path) {
                shm.scripts.remove(path);
                shm.unseen.remove(path);
                shm.timestamps.remove(path);
                return;
            }
            if let Some(m) = now {
                shm.timestamps.insert(path.to_string(), m);
            }
        }
        let stamp = self.req_s + self.cfg.revalidate_freq as i64;
        shm.store(path, stamp, self.pid, self.t_us, self.end_us());
    }
}

/// The syscalls of every request of `w` under `cfg`, in request order.
///
/// php-fpm requests are replayed together in time order (each operation at
/// its request's start + offset), so requests that overlap on different
/// workers share the pool's OPcache stamps as they did: several workers can
/// find the same stamp expired before any of them renews it (R64's race).
/// php-cli processes have caches of their own.
pub fn lower(w: &Workload, cfg: &PhpConfig) -> Vec<Vec<Op>> {
    lower_with(w, cfg, &BTreeMap::new())
}

/// [`lower`] on a storage whose calls take `latency` µs per kind of call
/// (kinds not given keep the capture's, [`Workload::latency_us`]).
///
/// Each call the lowered request makes shifts its later operations by the
/// difference between the two latencies of its kind, and a php-fpm worker
/// still busy when its next request arrives starts that one late by what
/// is left of the shift after the recorded gap between the two (the
/// request waits in the listen queue). The OPcache windows of R64's race
/// follow the new latencies. With the capture's own latencies nothing
/// moves, and the result is [`lower`]'s. Measured: the race workload at the
/// calls' own speed lowered with every `newfstatat` at 5 ms, against the
/// same workload with strace holding each `newfstatat` 5 ms
/// (tests/latency.rs).
pub fn lower_with(w: &Workload, cfg: &PhpConfig, latency: &BTreeMap<OpKind, u64>) -> Vec<Vec<Op>> {
    let target = targets(w, latency);
    let disk = file_cache_of(w, cfg, &w.compiled_scripts());
    lower_from(w, cfg, &target, disk)
}

/// The file cache a lowering of `w` under `cfg` starts with (R67; None
/// without `opcache.file_cache`): as the trace showed it, else holding
/// every script `compiled`.
pub fn file_cache_of(w: &Workload, cfg: &PhpConfig, compiled: &BTreeSet<String>) -> Option<Disk> {
    (!cfg.file_cache.is_empty())
        .then(|| Disk::new(&cfg.file_cache, w.file_cache.as_ref(), compiled))
}

/// [`lower_with`] with the latencies ([`targets`]) and the file cache
/// ([`file_cache_of`]) given: a search that lowers the same requests
/// under many settings builds the cache once.
pub fn lower_from(
    w: &Workload,
    cfg: &PhpConfig,
    target: &BTreeMap<OpKind, u64>,
    disk: Option<Disk>,
) -> Vec<Vec<Op>> {
    lower_from_peak(w, cfg, target, disk).0
}

/// What a lowering's realpath caches showed about their settings, over
/// every process: the most bytes one held and whether any refused an
/// entry ([`RealpathCache::peak`]), and the longest any entry can have
/// lived when looked at ([`RealpathCache::span`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RealpathUse {
    pub peak: u64,
    pub refused: bool,
    pub span_s: u64,
}

impl RealpathUse {
    fn add(&mut self, c: &crate::realpath::RealpathCache) {
        let (p, r) = c.peak();
        self.peak = self.peak.max(p);
        self.refused |= r;
        self.span_s = self.span_s.max(c.span());
    }
}

/// [`lower_from`], with the realpath caches' [`Lowerer::realpath_peak`]
/// at the end.
pub fn lower_from_peak(
    w: &Workload,
    cfg: &PhpConfig,
    target: &BTreeMap<OpKind, u64>,
    disk: Option<Disk>,
) -> (Vec<Vec<Op>>, RealpathUse) {
    let mut low = Lowerer::with_file_cache(w, cfg, target, disk);
    let mut order: Vec<usize> = (0..w.requests.len()).collect();
    order.sort_by_key(|&i| (w.requests[i].start_us, i));
    let mut out: Vec<Vec<Op>> = vec![Vec::new(); w.requests.len()];
    for i in order {
        low.push(i, Cow::Borrowed(&w.requests[i]));
        for (k, ops) in low.done() {
            out[k] = ops;
        }
    }
    low.run(None);
    for (k, ops) in std::mem::take(&mut low.finished) {
        out[k] = ops;
    }
    (out, low.realpath_peak())
}

/// The latency of each kind of call on the lowered side: the capture's
/// ([`Workload::latency_us`]) with `latency` on top.
pub fn targets(w: &Workload, latency: &BTreeMap<OpKind, u64>) -> BTreeMap<OpKind, u64> {
    let mut target = w.latency_us.clone();
    target.extend(latency.iter().map(|(&k, &v)| (k, v)));
    target
}

/// A request being replayed by a [`Lowerer`].
struct Live<'a> {
    r: Cow<'a, WorkRequest>,
    st: ReqState<'a>,
    /// push order (ties in time go to the request pushed first)
    rank: u64,
    /// the shift of its operations (µs), from its calls' latencies and a
    /// late start
    shift: i64,
    /// its worker's next request, once pushed, and its start (its
    /// operations stop before it)
    next: Option<(usize, i64)>,
    /// begun: its next operation is queued
    begun: bool,
    /// the operation queued
    next_op: usize,
    /// the time its next operation may not precede: the previous one's
    after: i64,
    /// the generation of its entry in the queue (older entries are stale)
    gen: u64,
    /// the earliest time of the syscalls it emitted so far
    first_t: Option<i64>,
}

/// An operation queued by a [`Lowerer`]: (time, push order of its
/// request, request, operation, generation).
type Queued = (i64, u64, usize, usize, u64);

/// Per php-fpm worker (pid) of `w`, its last request by start.
fn final_requests(w: &Workload) -> HashMap<u32, usize> {
    if let Some(p) = &w.stored.0 {
        return p.last_of_worker.iter().map(|(&k, &v)| (k, v)).collect();
    }
    let mut out: HashMap<u32, (i64, usize)> = HashMap::default();
    for (i, r) in w.requests.iter().enumerate().filter(|(_, r)| !r.cli) {
        let e = out.entry(r.pid).or_insert((r.start_us, i));
        if (r.start_us, i) > *e {
            *e = (r.start_us, i);
        }
    }
    out.into_iter().map(|(p, (_, i))| (p, i)).collect()
}

/// The last request pushed for a php-fpm worker.
struct Last {
    idx: usize,
    end_us: i64,
    /// once replayed whole: its shift and the time of its last operation
    ended: Option<(i64, i64)>,
}

/// [`lower_with`] fed request by request: the workers' caches, the pool's
/// OPcache and the file cache are kept between requests, and a request's
/// syscalls are given out ([`Lowerer::done`]) once all of its operations
/// are replayed.
///
/// Requests are pushed in start order. php-fpm operations are replayed in
/// time order across the pool (each at its request's start + offset, plus
/// the shift of the calls' latencies), so requests that overlap on
/// different workers share the pool's OPcache stamps as they did: several
/// workers can find the same stamp expired before any of them renews it
/// (R64's race). An operation is replayed once no request pushed later can
/// have an earlier one: when it comes before the start of the last request
/// pushed. A worker serves one request at a time (fpm_main.c: accept, run,
/// finish, accept again), so a request's operations are replayed before
/// the worker's next request even when their offsets (e.g. of a slower
/// capture re-timed onto a faster one) run past its start, and the next
/// request's operations are scheduled when it ends. A php-cli process has
/// caches of its own and is replayed alone when pushed, after the pool's
/// operations before its start (OPcache's file cache is shared). State is
/// bounded by the distinct paths and the requests in flight.
pub struct Lowerer<'a> {
    facts: &'a Workload,
    cfg: &'a PhpConfig,
    target: &'a BTreeMap<OpKind, u64>,
    workers: HashMap<u32, Worker>,
    pool: Shm,
    disk: Option<Disk>,
    live: HashMap<usize, Live<'a>>,
    /// per php-fpm worker, its last request pushed
    last: HashMap<u32, Last>,
    queue: BinaryHeap<Reverse<Queued>>,
    pushed: u64,
    /// the start of the last request pushed
    last_start: i64,
    /// requests replayed whole, not yet taken by [`Lowerer::done`]
    finished: Vec<(usize, Vec<Op>)>,
    names: Names,
    /// [`RealpathCache::peak`] of the caches let go: the php-cli
    /// requests' (each its own process) and the workers' whose last
    /// request ended, folded as they end.
    cli_peak: RealpathUse,
    /// Per php-fpm worker, its last request in `facts` (by start): once
    /// it ends, the worker's caches serve no other request and are let
    /// go (a pool whose workers are replaced would otherwise hold every
    /// worker it ever had).
    final_of_pid: HashMap<u32, usize>,
}

impl<'a> Lowerer<'a> {
    /// A lowering under `cfg` of requests whose facts (links, mtimes, the
    /// file cache seen, latencies) are those of `facts` (its requests are
    /// not used); `target`: [`targets`]; `compiled`: every script the
    /// capture compiled (what OPcache's file cache may hold).
    pub fn new(
        facts: &'a Workload,
        cfg: &'a PhpConfig,
        target: &'a BTreeMap<OpKind, u64>,
        compiled: &BTreeSet<String>,
    ) -> Self {
        Self::with_file_cache(facts, cfg, target, file_cache_of(facts, cfg, compiled))
    }

    /// [`Lowerer::new`] with OPcache's file cache (R67, on disk across
    /// processes and requests) as it starts given ([`file_cache_of`]).
    pub fn with_file_cache(
        facts: &'a Workload,
        cfg: &'a PhpConfig,
        target: &'a BTreeMap<OpKind, u64>,
        disk: Option<Disk>,
    ) -> Self {
        Lowerer {
            facts,
            cfg,
            target,
            workers: HashMap::default(),
            pool: Shm::default(),
            disk,
            live: HashMap::default(),
            last: HashMap::default(),
            queue: BinaryHeap::new(),
            pushed: 0,
            last_start: i64::MIN,
            finished: Vec::new(),
            names: Names::default(),
            cli_peak: RealpathUse::default(),
            final_of_pid: final_requests(facts),
        }
    }

    fn state(&self, r: &WorkRequest) -> ReqState<'a> {
        Self::state_under(self.facts, self.cfg, self.target, self.names.clone(), r)
    }

    /// A request's state under `cfg` (a php-cli process's own settings
    /// live as long as its replay alone).
    fn state_under<'b>(
        facts: &'b Workload,
        cfg: &'b PhpConfig,
        target: &'b BTreeMap<OpKind, u64>,
        names: Names,
        r: &WorkRequest,
    ) -> ReqState<'b> {
        ReqState {
            cx: Ctx {
                cfg,
                links: &facts.links,
                mtimes: facts,
                out: Vec::new(),
                pid: r.pid,
                t_us: r.start_us,
                req_s: r.request_time_us.max(r.start_us).div_euclid(1_000_000),
                check_open: true,
                opcache_entry: None,
                latency: target,
                recorded: &facts.latency_us,
                busy_us: 0,
                anchored: false,
                anchor: None,
                names,
            },
            included: HashMap::default(),
            added: HashMap::default(),
            raced: HashSet::default(),
            opcache: cfg.opcache_on(r.cli),
            opcache_started: false,
            lock_path: String::new(),
            stat_cache: StatCache::default(),
        }
    }

    /// Adds request `idx` (pushed in start order, each index once): lent
    /// by a caller that holds the requests, given by one that streams them.
    pub fn push(&mut self, idx: usize, r: Cow<'a, WorkRequest>) {
        // nothing pushed later starts before this request
        self.run(Some(r.start_us));
        self.last_start = self.last_start.max(r.start_us);
        if r.cli {
            self.push_cli(idx, r);
            return;
        }
        let rank = self.pushed;
        self.pushed += 1;
        let (pid, start, end_us) = (r.pid, r.start_us, r.end_us);
        let st = self.state(&r);
        self.live.insert(
            idx,
            Live {
                r,
                st,
                rank,
                shift: 0,
                next: None,
                begun: false,
                next_op: 0,
                after: i64::MIN,
                gen: 0,
                first_t: None,
            },
        );
        let prev = self.last.insert(
            pid,
            Last {
                idx,
                end_us,
                ended: None,
            },
        );
        match prev {
            None => self.begin(idx, 0, i64::MIN),
            // it ended: this one begins now, late by what is left of its
            // shift after the recorded gap
            Some(Last {
                end_us,
                ended: Some((shift, last_t)),
                ..
            }) => self.begin(idx, late_start(shift, end_us, start), last_t),
            // still replayed: its operations now stop before this one
            // starts, and this one begins when it ends
            Some(Last { idx: p, .. }) => {
                let l = self
                    .live
                    .get_mut(&p)
                    .expect("a worker's request not ended is live");
                l.next = Some((idx, start));
                if l.begun {
                    l.gen += 1;
                    self.queue_next(p);
                }
            }
        }
    }

    /// A php-cli process: caches of its own, replayed alone, under the
    /// settings its command line states (`-d`, over the side's: a php.ini
    /// change does not reach them; keys the model has no use for, and
    /// values it cannot read, are left out).
    fn push_cli(&mut self, idx: usize, r: Cow<'a, WorkRequest>) {
        let own = r.settings.as_ref().map(|set| {
            let mut c = self.cfg.clone();
            for (k, v) in set.iter() {
                let _ = c.set(k, v, "the command line");
            }
            c
        });
        let cfg = own.as_ref().unwrap_or(self.cfg);
        if self.disk.is_none() && !cfg.file_cache.is_empty() {
            // a file cache only this process's command line names: as
            // the trace showed it (else empty: the scripts it compiled
            // are not known here)
            self.disk = Some(Disk::new(
                &cfg.file_cache,
                self.facts.file_cache.as_ref(),
                &BTreeSet::new(),
            ));
        }
        let mut st = Self::state_under(self.facts, cfg, self.target, self.names.clone(), &r);
        let mut wk = Worker::new(cfg);
        let mut shm = Shm::default();
        let mut shift = 0i64;
        let mut last_t = i64::MIN;
        for o in &r.ops {
            let t = (r.start_us + o.t_off_us + shift).max(last_t);
            last_t = t;
            let from = st.cx.out.len();
            lower_op(o, t, &r, &mut st, &mut wk, &mut shm, &mut self.disk);
            shift += shifted(self.target, &self.facts.latency_us, &st.cx.out[from..]);
        }
        if st.opcache_started {
            // OPcache's shutdown closes its lock file
            // (zend_shared_alloc_shutdown), after the script's last
            // call (measured)
            st.cx.t_us = r.start_us + r.ops.last().map_or(0, |o| o.t_off_us) + shift;
            let path = st.lock_path.clone();
            st.cx.emit(OpKind::Close, &path, Flags::FD_DELETED, None);
        }
        st.cx.out.shrink_to_fit();
        self.finished.push((idx, st.cx.out));
        self.cli_peak.add(&wk.realpath);
    }

    /// What the realpath caches of every process so far showed
    /// ([`RealpathUse`]).
    pub fn realpath_peak(&self) -> RealpathUse {
        let mut u = self.cli_peak;
        for w in self.workers.values() {
            u.add(&w.realpath);
        }
        u
    }

    /// Queues the next operation of live request `i` at its time (never
    /// before the operation it follows).
    fn queue_next(&mut self, i: usize) {
        let l = &self.live[&i];
        let j = l.next_op;
        let stop = l.next.map_or(i64::MAX, |(_, s)| s - 1);
        let t = ((l.r.start_us + l.r.ops[j].t_off_us).min(stop) + l.shift).max(l.after);
        self.queue.push(Reverse((t, l.rank, i, j, l.gen)));
    }

    /// Starts live request `i` with `carry` µs of lateness, its first
    /// operation not before `after`: queues it, or (no operations) ends
    /// the request.
    fn begin(&mut self, i: usize, carry: i64, after: i64) {
        let l = self.live.get_mut(&i).expect("live request");
        l.shift = carry;
        l.after = after;
        l.begun = true;
        if l.r.ops.is_empty() {
            self.end(i);
        } else {
            self.queue_next(i);
        }
    }

    /// Request `i` is replayed whole: its syscalls are given out, and its
    /// worker's next request, if pushed, begins; after the worker's last
    /// request its caches are let go.
    fn end(&mut self, i: usize) {
        let mut l = self.live.remove(&i).expect("live request");
        let (shift, after, end_us) = (l.shift, l.after, l.r.end_us);
        l.st.cx.out.shrink_to_fit();
        self.finished.push((i, l.st.cx.out));
        let pid = l.r.pid;
        match l.next {
            Some((k, start)) => self.begin(k, late_start(shift, end_us, start), after),
            None if self.final_of_pid.get(&pid) == Some(&i) => {
                self.last.remove(&pid);
                if let Some(w) = self.workers.remove(&pid) {
                    self.cli_peak.add(&w.realpath);
                }
            }
            None => {
                if let Some(last) = self.last.get_mut(&pid) {
                    last.ended = Some((shift, after));
                }
            }
        }
    }

    /// Replays every queued operation before `upto` (all with None).
    fn run(&mut self, upto: Option<i64>) {
        while let Some(&Reverse((t, _, i, j, gen))) = self.queue.peek() {
            if upto.is_some_and(|u| t >= u) {
                return;
            }
            self.queue.pop();
            let Some(l) = self.live.get_mut(&i) else {
                continue;
            };
            if l.gen != gen || l.next_op != j {
                continue; // re-queued since
            }
            let wk = self
                .workers
                .entry(l.r.pid)
                .or_insert_with(|| Worker::new(self.cfg));
            let from = l.st.cx.out.len();
            lower_op(
                &l.r.ops[j],
                t,
                &l.r,
                &mut l.st,
                wk,
                &mut self.pool,
                &mut self.disk,
            );
            l.shift += shifted(self.target, &self.facts.latency_us, &l.st.cx.out[from..]);
            if let Some(m) = l.st.cx.out[from..].iter().map(|o| o.t_us).min() {
                l.first_t = Some(l.first_t.map_or(m, |f| f.min(m)));
            }
            l.after = t;
            l.next_op = j + 1;
            if l.next_op < l.r.ops.len() {
                self.queue_next(i);
            } else {
                self.end(i);
            }
        }
    }

    /// A time no syscall given out from now on comes before (µs): the
    /// earliest of the next operation queued, what the requests in flight
    /// emitted so far (or, not begun yet, their start), and the start of
    /// the last request pushed (every later one starts after it). A
    /// replay in time order can take every call before it.
    pub fn horizon(&self) -> i64 {
        let mut h = self.last_start;
        if let Some(Reverse((t, ..))) = self.queue.peek() {
            h = h.min(*t);
        }
        for l in self.live.values() {
            let t = if l.begun {
                l.first_t
            } else {
                Some(l.r.start_us)
            };
            if let Some(t) = t {
                h = h.min(t);
            }
        }
        h
    }

    /// The requests replayed whole since the last call, with their
    /// syscalls, in the order they ended.
    pub fn done(&mut self) -> Vec<(usize, Vec<Op>)> {
        std::mem::take(&mut self.finished)
    }

    /// Replays what is left; the requests not yet given out.
    pub fn finish(mut self) -> Vec<(usize, Vec<Op>)> {
        self.run(None);
        std::mem::take(&mut self.finished)
    }
}

/// What calls `out` add to a request's shift: per call, the lowered
/// side's latency of its kind minus the capture's.
fn shifted(target: &BTreeMap<OpKind, u64>, recorded: &BTreeMap<OpKind, u64>, out: &[Op]) -> i64 {
    out.iter()
        .map(|o| {
            target.get(&o.kind).copied().unwrap_or(0) as i64
                - recorded.get(&o.kind).copied().unwrap_or(0) as i64
        })
        .sum()
}

/// How late a worker's next request starts (µs): what is left of the
/// previous request's shift after the recorded gap between its end and the
/// next one's start (none when the previous one ended earlier than
/// recorded).
fn late_start(shift: i64, end_us: i64, next_start_us: i64) -> i64 {
    (shift - (next_start_us - end_us).max(0)).max(0)
}

/// The state of one request while it is replayed.
struct ReqState<'a> {
    cx: Ctx<'a>,
    /// included_files of this request (R52)
    included: HashMap<String, ()>,
    /// scripts this request put into OPcache
    added: HashMap<String, ()>,
    /// scripts this request compiled while another worker's compile of
    /// them was running (that one stored them)
    raced: HashSet<String>,
    opcache: bool,
    /// OPcache's lock file was created (php-cli)
    opcache_started: bool,
    /// its name
    lock_path: String,
    /// PHP's one-entry stat cache, as far as the file override changes it
    stat_cache: StatCache,
}

/// PHP's stat cache (main/streams/streams.c `php_stream_stat_path_ex`:
/// `BG(CurrentStatFile)`, the last path a PHP stat function stat()ed
/// successfully; a stat function on that same path is answered without a
/// syscall; unlink/rename/rmdir clear it, ext/standard/filestat.c
/// `php_clear_stat_cache`). A capture only holds the misses, so the model
/// only needs it where a configuration removes stats the capture had: with
/// `opcache.enable_file_override` an is_file() on a cached script no longer
/// reaches `php_stat`, so the entry it used to replace stays, and a later
/// stat of the previous path becomes a hit (measured: fpm-override-fo,
/// is_file() of the data file in rounds 2 and 3 of each request).
#[derive(Default)]
struct StatCache {
    /// the path of the last successful stat function's stat()
    last: Option<String>,
    /// an overridden is_file() came after it (the capture's intervening
    /// miss is gone)
    overridden: bool,
}

/// `opcache.enable_file_override` (R66): OPcache replaces file_exists(),
/// is_file() and is_readable() (ext/opcache/zend_accelerator_module.c
/// `accel_file_exists`/`accel_is_file`/`accel_is_readable`). When the path
/// is a key of a script in the shared cache (`filename_is_in_cache`:
/// `accel_make_persistent_key`, `zend_accel_hash_find`), the answer is true
/// after the same timestamp validation as an include
/// (`validate_timestamp_and_record_ex`, R64: no syscall within
/// revalidate_freq of the last check, else a resolution of the name and one
/// `stat`, and the stamp renewed; none at all with validate_timestamps=0);
/// otherwise the original function
/// runs (R71/R72). Returns true when the call was answered from the cache
/// (its validation, if due, already emitted).
///
/// Approximations: the key is the path as called, matched against the
/// paths scripts were cached under (a relative name or one through a
/// symlink falls back to the original, as in php-src, but the model does
/// not compute `accel_make_persistent_key`'s cwd/include_path keys); a
/// lifted `stat()` cannot tell is_file() from filesize()/filemtime()/
/// is_dir(), so every successful stat function on a cached script is taken
/// as is_file(); a script modified since its check (validation failure) is
/// not modelled (the model has no mtimes).
fn file_override(
    cx: &mut Ctx,
    w: &mut Worker,
    shm: &mut Shm,
    opcache: bool,
    path: &str,
    missing: bool,
) -> bool {
    if !(opcache && cx.cfg.enable_file_override) || missing {
        return false;
    }
    // the name as a key: the script's path, or a name it was compiled
    // under that this worker has used (filename_is_in_cache:
    // accel_make_persistent_key, then zend_accel_hash_find; measured on
    // MediaWiki, fpm-mediawiki-fo: file_exists() of
    // '.../includes/../vendor/autoload.php' makes no call then)
    let script = if shm.cached(path, cx.pid, cx.t_us) {
        path.to_string()
    } else if let Some(s) = shm.aliases.get(path).filter(|_| w.keys.contains(path)) {
        s.clone()
    } else {
        return false;
    };
    // do_validate_timestamps (ZendAccelerator.c): the handle has no
    // opened_path, so the name is resolved by the original resolver
    // (realpath cache, R53) before the stat of the script (measured:
    // fpm-override-fo-rf0, the first file_exists() of each script in the
    // worker that did not compile it walks the script's path)
    cx.revalidate(w, shm, &script, Some((path, &[][..])));
    true
}

/// `opcache.lockfile_path`'s default (ext/opcache/zend_accelerator_module.c
/// INI table: `/tmp`), where a php-cli process whose trace showed no lock
/// file would create it.
const LOCKFILE_PATH: &str = "/tmp";

/// R67: OPcache's startup checks the file cache's directory (measured:
/// `stat`, then `access(R_OK|W_OK|X_OK)`; php-cli, before the shared
/// memory's lock file when there is one).
fn file_cache_startup(cx: &mut Ctx) {
    let dir = cx.cfg.file_cache.trim_end_matches('/');
    cx.emit(OpKind::Stat, dir, 0, None);
    cx.emit(
        OpKind::Access,
        dir,
        Flags::R_OK | Flags::W_OK | Flags::X_OK,
        None,
    );
}

/// OPcache's start in a php-cli process (docs/php-model.md "CLI OPcache
/// startup"): the file cache's directory checked when there is one (R67,
/// measured: cli-*-fc), then `mkstemp` of the lock file and its `unlink`
/// (ext/opcache/zend_shared_alloc.c `zend_shared_alloc_create_lock`, from
/// `accel_startup`; `fchmod` and `fcntl` are not file-system operations of
/// the model). The random suffix cannot be predicted: `XXXXXX` stands for it.
fn opcache_startup(cx: &mut Ctx, lock_dir: &str) -> String {
    if !cx.cfg.file_cache.is_empty() {
        file_cache_startup(cx);
    }
    let dir = lock_dir.trim_end_matches('/');
    let path = format!("{dir}/{}XXXXXX", crate::opcache::OPCACHE_LOCK_PREFIX);
    cx.create(&path);
    cx.emit(OpKind::Unlink, &path, 0, None);
    path
}

/// Replays operation `o` of request `r` at `t_us` (its start + offset,
/// kept before the worker's next request).
fn lower_op(
    o: &PhpOp,
    t_us: i64,
    r: &WorkRequest,
    st: &mut ReqState,
    w: &mut Worker,
    shm: &mut Shm,
    disk: &mut Option<Disk>,
) {
    let ReqState {
        cx,
        included,
        added,
        raced,
        opcache,
        opcache_started,
        lock_path,
        stat_cache,
    } = st;
    let opcache = *opcache;
    let cfg = cx.cfg;
    cx.t_us = t_us;
    cx.busy_us = 0;
    cx.anchored = false;
    cx.anchor = match o.kind {
        PhpOpKind::Revalidate { .. } => o.stat_us.map(|d| (OpKind::Stat, u64::from(d))),
        _ => None,
    };
    let pid = cx.pid;
    match &o.kind {
        PhpOpKind::Compile {
            path,
            resolve_as,
            probes,
            via,
            resolves,
            fstats,
            reads,
            keep_open,
        } => {
            let name = resolve_as.as_deref().unwrap_or(path);
            let first = included.insert(path.to_string(), ()).is_none();
            if let Some(disk) = disk.as_mut().filter(|_| opcache && cfg.file_cache_only) {
                // R67: the file cache alone, nothing kept in memory
                // between compiles (php-cli; php-fpm alike, every request
                // of every worker, measured: fpm-*-fco). php-fpm's entry
                // script is opened like an include (one fstat), and the
                // directory is checked in the master, outside requests
                let main = *via == Via::Main && r.cli;
                cx.check_open = !main;
                if main {
                    // its startup, in place of the shared memory's lock
                    // file: the cache directory checked (measured: `stat`,
                    // then `access(R_OK|W_OK|X_OK)`, before the entry
                    // script is opened)
                    file_cache_startup(cx);
                }
                let n = match via {
                    Via::Main => 2,
                    Via::Include => 1,
                    Via::Once => 2,
                };
                cx.compile_from_file_cache(w, disk, path, name, probes, n, main, *keep_open);
                return;
            }
            if opcache && shm.cached(path, pid, t_us) {
                // R62/R63: a cached key costs no file-system call to
                // find or open the script, only the R64 validation; a
                // *_once script already included costs nothing
                match via {
                    // R62 with revalidate_path=1 (measured): the name is
                    // resolved and the file opened to learn its real
                    // path — open, fstat, close, no read — and the
                    // timestamp comes from that handle (no stat)
                    Via::Include
                        if cfg.revalidate_path
                            || ((name != path.as_ref() || !probes.is_empty())
                                && shm.unkeyed.contains(path.as_ref())) =>
                    {
                        // (a script loaded from the file cache, reached by
                        // another name: found by its real path the same
                        // way, and the name becomes a key)
                        if shm.unkeyed.remove(path.as_ref()) {
                            shm.aliases.insert(name.to_string(), path.to_string());
                        }
                        for p in probes {
                            cx.probe(p);
                        }
                        cx.resolve(w, name);
                        cx.basedir_check(w, path);
                        cx.emit(OpKind::Open, path, 0, None);
                        cx.emit(OpKind::Fstat, path, Flags::AT_EMPTY_PATH, None);
                        cx.emit(OpKind::Close, path, 0, None);
                        let due = cfg.validate_timestamps
                            && (cfg.revalidate_freq == 0
                                || shm.stamp(path, pid, t_us).unwrap_or(i64::MIN) < cx.req_s);
                        if due {
                            let stamp = cx.req_s + cfg.revalidate_freq as i64;
                            shm.store(path, stamp, pid, t_us, cx.end_us());
                        }
                    }
                    Via::Include => {
                        cx.permission_check(path);
                        cx.revalidate_ex(w, shm, path, Some((name, probes)), true)
                    }
                    Via::Main => {
                        cx.permission_check(path);
                        cx.revalidate_ex(w, shm, path, None, true)
                    }
                    // revalidate_path=1: *_once names go through the
                    // original resolver (include_path candidates,
                    // realpath cache) but are not opened (measured)
                    Via::Once if cfg.revalidate_path => {
                        for p in probes {
                            cx.probe(p);
                        }
                        cx.resolve(w, name);
                        if first {
                            // R68: a *_once handle is not opened, so it is
                            // checked; a plain include's above is opened
                            // (ZEND_HANDLE_FP): not checked (measured:
                            // fpm-tree-rpath1-vp)
                            cx.permission_check(path);
                            cx.revalidate_ex(w, shm, path, None, true);
                        }
                    }
                    // a name that is not the script's path (`a//b.php`,
                    // `..`, a symlink) is not the key it was cached
                    // under: the name is resolved (realpath cache), then
                    // found by its path (measured). Only on the name's
                    // first use in the worker: later requests of the
                    // same worker do not resolve it again, even after an
                    // unlink cleared the realpath cache (R57), nor when
                    // the worker's compile of the script already resolved
                    // it — measured on MediaWiki (fpm-mediawiki-rf2/rf60:
                    // the lock-file unlink of every request is followed
                    // by a walk of `skins/Vector/includes//Hooks.php`
                    // only in the first request of the worker that did
                    // not compile it). php-src:
                    // ZendAccelerator.c persistent_zend_resolve_path
                    // looks the name up as a key before resolving it.
                    Via::Once if first => {
                        if resolve_as.is_some() && w.once_names.insert(name.to_string()) {
                            cx.resolve(w, name);
                            w.keys.insert(name.to_string());
                        }
                        shm.unkeyed.remove(path.as_ref());
                        cx.permission_check(path);
                        cx.revalidate_ex(w, shm, path, None, true)
                    }
                    Via::Once => {}
                }
            } else {
                // R51/R52: include resolves once; *_once resolves, then
                // opens with a second resolution (a cache hit unless the
                // cache is off); the entry script as recorded
                cx.check_open = !(r.cli && *via == Via::Main);
                if r.cli && *via == Via::Main && opcache {
                    // OPcache on for the CLI: started before the entry
                    // script is opened (measured position), whether or not
                    // the trace showed it (a capture with OPcache off)
                    if !*opcache_started {
                        *lock_path = opcache_startup(cx, LOCKFILE_PATH);
                        *opcache_started = true;
                    }
                    cx.opcache_entry = Some(crate::opcache::entry_getcwd(&r.ops).cloned());
                }
                // the entry script: two resolutions (php-fpm and php-cli,
                // measured with realpath_cache_size=0)
                let _ = resolves;
                let n = match via {
                    Via::Main => 2,
                    Via::Include => 1,
                    Via::Once => 2,
                };
                // R67 beside shared memory: the compile that misses it
                // goes through the file cache; php-fpm's entry script like
                // an include (PHP's stream, one fstat), php-cli's as with
                // the cache alone (measured: cli-*-fc, cli-*-fc-cold)
                let fresh_stamp = cx.req_s + cfg.revalidate_freq as i64;
                let mut stamp = fresh_stamp;
                let mut loaded = false;
                match disk.as_mut().filter(|_| opcache) {
                    Some(disk) => {
                        loaded = disk.has(path);
                        if loaded {
                            stamp = disk.stamp(path);
                        }
                        let main = r.cli && *via == Via::Main;
                        cx.compile_from_file_cache(
                            w, disk, path, name, probes, n, main, *keep_open,
                        );
                        if !loaded {
                            disk.set_stamp(path, fresh_stamp);
                        }
                    }
                    None => cx.compile(w, path, name, probes, n, *fstats, *reads, *keep_open),
                }
                if *via == Via::Once && resolve_as.is_some() {
                    // the compile resolved the name: the worker's later
                    // hits do not (R63 above; measured on MediaWiki)
                    w.once_names.insert(name.to_string());
                }
                let table = accel_hash_size(cfg.max_accelerated_files);
                if opcache && shm.scripts.contains_key(path.as_ref()) {
                    // another worker's compile of it, still running when
                    // this one looked: whichever ends first stores it, the
                    // other finds it stored (cache_script_in_shared_memory),
                    // and this request does not count as the one that added
                    // it: its later *_once resolves from the name's key once
                    // the adder's resolution added it (OnceRepeat below)
                    shm.stored_again(path, cx.end_us());
                    raced.insert(path.to_string());
                } else if opcache && cx.cacheable(path) && shm.keys < table {
                    added.insert(path.to_string(), ());
                    shm.store(path, stamp, pid, t_us, cx.end_us());
                    shm.keys += 1;
                    if let Some(m) = cx.mtimes.mtime_at(path, cx.t_us) {
                        shm.timestamps.insert(path.to_string(), m);
                    }
                    // zend_accel_add_key: the name as a key too, if there
                    // is room — not for a script loaded from the file
                    // cache (measured: fpm-tree-fc, the other worker's
                    // first include of `lib/u1.php` resolves and opens it)
                    if loaded {
                        shm.unkeyed.insert(path.to_string());
                    } else if *name != **path && shm.keys < table && !shm.aliases.contains_key(name)
                    {
                        shm.aliases.insert(name.to_string(), path.to_string());
                        shm.keys += 1;
                        w.keys.insert(name.to_string());
                    }
                }
            }
        }
        PhpOpKind::Revalidate { .. } | PhpOpKind::CachedUse { .. } => {
            let (path, resolves) = match &o.kind {
                PhpOpKind::Revalidate { path, resolves } => (path, *resolves),
                PhpOpKind::CachedUse { path } => (path, 0),
                _ => unreachable!("matched above"),
            };
            let again = included.insert(path.to_string(), ()).is_some();
            if opcache && shm.cached(path, pid, t_us) {
                // a validation of a script already in this request's
                // included_files is a plain include's or a file function's
                // under opcache.enable_file_override (R66), never a
                // *_once's (R63: no cost): its handle has no opened_path,
                // so do_validate_timestamps (ZendAccelerator.c) resolves the
                // name first, a realpath cache hit the capture may not show
                // (measured: fpm-override-fo-rf0, the worker that found the
                // scripts cached walks each one before its first
                // file_exists())
                let named = (resolves > 0 || again).then_some((path.as_ref(), &[][..]));
                cx.permission_check(path);
                cx.revalidate_ex(w, shm, path, named, true);
            } else {
                // not cached under this config: compiled (R51), with the
                // read pattern measured for small scripts
                cx.compile(w, path, path, &[], 1, 1, 1, false);
                if opcache && shm.scripts.contains_key(path.as_ref()) {
                    // stored by another worker's compile meanwhile (above)
                    shm.stored_again(path, cx.end_us());
                } else if opcache
                    && cx.cacheable(path)
                    && shm.keys < accel_hash_size(cfg.max_accelerated_files)
                {
                    shm.keys += 1;
                    if let Some(m) = cx.mtimes.mtime_at(path, cx.t_us) {
                        shm.timestamps.insert(path.to_string(), m);
                    }
                    added.insert(path.to_string(), ());
                    let stamp = cx.req_s + cfg.revalidate_freq as i64;
                    shm.store(path, stamp, pid, t_us, cx.end_us());
                }
            }
        }
        PhpOpKind::OnceRepeat {
            path,
            probes,
            resolves,
        } => {
            // R63: OPcache resolves *_once names from the key, no
            // syscall — measured: except a name found through
            // include_path in the request that compiled the script,
            // where the original resolver runs again
            // (ZendAccelerator.c persistent_zend_resolve_path: the name's
            // key is missing, the original resolver runs, and the name is
            // added as a key once the real path is found in the hash). A
            // request that compiled it in a race with the one that stored
            // it finds the name's key only if that one's resolution has
            // ended (measured: fpm-race-rf2 request 1 after it,
            // fpm-racefast-rf2 request 1 before it)
            let raced_first = raced.contains(path.as_ref())
                && shm.once_keys.get(path.as_ref()).is_none_or(|&v| t_us < v);
            let fresh = (added.contains_key(path.as_ref()) || raced_first || cfg.revalidate_path)
                && !probes.is_empty();
            // a *_once name resolved to a script loaded from the file cache
            // becomes its key (persistent_zend_resolve_path ->
            // zend_accel_add_key; R67)
            shm.unkeyed.remove(path.as_ref());
            if opcache && shm.cached(path, pid, t_us) && !fresh {
                // already validated by the first *_once of the request
            } else {
                for p in probes {
                    cx.probe(p);
                }
                for _ in 0..(*resolves).max(1) {
                    cx.resolve(w, path);
                }
                if fresh {
                    // added under OPcache's lock once the name resolved
                    let end = cx.end_us() + cx.mtimes.lock_us as i64;
                    shm.once_keys.entry(path.to_string()).or_insert(end);
                }
            }
        }
        PhpOpKind::PrimaryResolve { path } => cx.resolve(w, path),
        PhpOpKind::Resolve { path, .. } => {
            // a resolution of its own is PHP's realpath() (R56):
            // ext/standard/file.c PHP_FUNCTION(realpath) runs
            // php_check_open_basedir on what VCWD_REALPATH returned (R59;
            // measured on WordPress: 3 walks of each realpath()'d
            // block.json/style.min.css in fpm-wordpress-obd, 1 in rp0)
            cx.resolve(w, path);
            let real = cx.realpath_of(path);
            cx.basedir_check(w, &real);
        }
        // R59 alone (glob()'s check of each match)
        PhpOpKind::BasedirCheck { path } => cx.basedir_check(w, path),
        PhpOpKind::Probe { path } => cx.probe(path),
        PhpOpKind::UserIni { path } => {
            // php_cgi_ini_activate_user_config: per worker, per
            // directory, re-read after user_ini.cache_ttl
            let now = cx.req_s;
            let due = w.user_ini.get(path.as_ref()).is_none_or(|&exp| exp < now);
            if due && !r.cli {
                cx.emit(OpKind::Stat, path, 0, Some("ENOENT"));
                w.user_ini
                    .insert(path.to_string(), now + cfg.user_ini_cache_ttl as i64);
            }
        }
        PhpOpKind::Access {
            path,
            mode,
            missing,
        } => {
            // R66: file_exists() (F_OK) and is_readable() (R_OK) of a
            // cached script; is_writable()/is_executable() are not replaced
            if (*mode == 0 || *mode == Flags::R_OK)
                && file_override(cx, w, shm, opcache, path, *missing)
            {
                return;
            }
            // R71 (+ R59 check first)
            cx.basedir_check_ex(w, path, *missing);
            cx.emit(OpKind::Access, path, *mode, None);
        }
        PhpOpKind::Lstat { path } => {
            // R72 (+ R59 check first)
            cx.basedir_check(w, path);
            cx.emit(OpKind::Lstat, path, Flags::AT_SYMLINK_NOFOLLOW, None);
        }
        PhpOpKind::Stat { path, missing } => {
            // R66: is_file() of a cached script (see file_override)
            if file_override(cx, w, shm, opcache, path, *missing) {
                stat_cache.overridden = true;
                return;
            }
            // PHP's stat cache: a hit only where an overridden is_file()
            // left the entry in place (StatCache)
            if !*missing
                && stat_cache.overridden
                && stat_cache.last.as_deref() == Some(path.as_ref())
            {
                return;
            }
            // R72 (+ R59 check first)
            cx.basedir_check_ex(w, path, *missing);
            cx.emit(OpKind::Stat, path, 0, None);
            if !*missing {
                stat_cache.last = Some(path.to_string());
                stat_cache.overridden = false;
            }
        }
        PhpOpKind::Open {
            path,
            resolve_as,
            resolves,
            flags,
        } => {
            // R74: open_basedir check, expand_filepath (realpath
            // cache), open (measured in this order); opendir does not
            // resolve
            let name = resolve_as.as_deref().unwrap_or(path);
            if *resolves > 0 {
                // the plain wrapper checks the name it was given, then
                // expand_filepath resolves it and the real path is opened
                // (measured on WordPress's theme files, opened through
                // the /var/lib symlink, under open_basedir=/)
                cx.basedir_check(w, name);
                cx.resolve(w, name);
            } else if flags & Flags::O_DIRECTORY != 0 {
                // opendir: checked, not resolved (not measured)
                cx.basedir_check(w, path);
            }
            cx.emit(OpKind::Open, path, *flags, None);
        }
        PhpOpKind::Write { op } => {
            let mut op = Op::clone(op);
            op.t_us = cx.t_us;
            op.pid = r.pid;
            if op.ok() && matches!(op.kind, OpKind::Unlink | OpKind::Rename | OpKind::Rmdir) {
                // R57: the whole realpath cache of the process
                w.realpath.clean();
                // and PHP's stat cache (php_clear_stat_cache)
                *stat_cache = StatCache::default();
            }
            cx.push(op);
        }
        PhpOpKind::OpcacheStartup { lock_dir } => {
            // only when OPcache is on for this SAPI (opcache.enable and,
            // for php-cli, opcache.enable_cli: accel_startup returns
            // before creating the lock otherwise); with the file cache
            // alone there is no shared memory and no lock (R67: its
            // directory is checked at the entry script instead)
            if opcache && r.cli && !*opcache_started && !cfg.file_cache_only {
                *lock_path = opcache_startup(cx, lock_dir);
                *opcache_started = true;
            }
        }
        PhpOpKind::Raw { op } => {
            let mut op = Op::clone(op);
            op.t_us = cx.t_us;
            op.pid = r.pid;
            cx.push(op);
        }
    }
}

/// Per-syscall call counts, named as strace names them on x86-64.
pub fn count_by_syscall(ops: &[Op]) -> statstorm_trace::Tally {
    let mut m = statstorm_trace::Tally::new();
    for o in ops {
        m.add(o.kind.syscall_name(o.flags()), 1);
    }
    m.shrunk()
}

/// The syscalls the acceptance checks compare exactly.
pub const CHECKED: &[&str] = &["newfstatat", "openat", "access", "readlink"];
