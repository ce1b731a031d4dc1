//! The changes diagnose tries: each single change tied to the mechanism
//! it switches off, with its risk in one sentence and the step a deploy
//! needs. What is already recorded is not proposed; what a constraint
//! forbids (a written directory under the NFS root) is set aside with the
//! reason.

use serde::Serialize;
use statstorm_nfs::mount::{AtimeMode, LookupCache, MountOptions};
use statstorm_php::PhpConfig;

/// The mechanism a change acts on (one change per mechanism in a plan).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// OPcache's timestamp validation (R64).
    OpcacheValidation,
    /// OPcache off: every include compiled again.
    OpcacheOff,
    /// OPcache's hash table full (`opcache.max_accelerated_files`).
    OpcacheFull,
    /// The realpath cache's size and time to live (R54).
    RealpathCache,
    /// open_basedir: resolutions that bypass the realpath cache (R58).
    OpenBasedir,
    /// NFS close-to-open: a GETATTR (and ACCESS) per open.
    CloseToOpen,
    /// NFS ACCESS calls (permission checks against the server).
    AccessCheck,
    /// NFS attribute cache expiry (acregmin/acregmax, acdirmin/acdirmax).
    AttributeCache,
    /// NFS lookup cache (dentry revalidation).
    LookupCache,
    /// NFS access time updates.
    Atime,
    /// NFS transport: connections (and their slots) per mount.
    Transport,
}

/// How much a change risks, lowest first.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    None,
    Low,
    Medium,
    High,
}

/// Where a setting lives.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// php.ini (or the pool's `php_admin_value`).
    Php,
    /// The NFS mount's options (fstab).
    Mount,
    /// A directory under the NFS root mounted apart from it (a mount of
    /// its own, of the same server, with the root's recorded options):
    /// `key` the directory, `value` its options, `from` the root.
    MountApart,
}

/// One setting and its new value.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Setting {
    pub layer: Layer,
    pub key: String,
    /// The new value ("" for a flag option such as `nocto`).
    pub value: String,
    /// The recorded value (as the model had it).
    pub from: String,
}

impl Setting {
    fn php(key: &str, value: impl ToString, from: impl ToString) -> Setting {
        Setting {
            layer: Layer::Php,
            key: key.into(),
            value: value.to_string(),
            from: from.to_string(),
        }
    }
    fn apart(dir: &str, options: &str, root: &str) -> Setting {
        Setting {
            layer: Layer::MountApart,
            key: dir.into(),
            value: options.into(),
            from: root.into(),
        }
    }
    fn mount(key: &str, value: impl ToString, from: impl ToString) -> Setting {
        Setting {
            layer: Layer::Mount,
            key: key.into(),
            value: value.to_string(),
            from: from.to_string(),
        }
    }

    /// `key=value`, `key` for a flag option, `DIR apart` for a directory
    /// mounted apart.
    pub fn assignment(&self) -> String {
        match self.layer {
            Layer::Mount if self.value.is_empty() => self.key.clone(),
            Layer::MountApart => format!("{} apart", self.key),
            _ => format!("{}={}", self.key, self.value),
        }
    }
}

/// A single change diagnose predicts.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Candidate {
    pub mechanism: Mechanism,
    pub settings: Vec<Setting>,
    pub risk: Risk,
    /// The risk in one sentence.
    pub risk_text: String,
    /// What a deploy must do once the change is in (reload, remount).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deploy: Option<String>,
    /// In no released Linux kernel (the 2013 patches seed 002 proposes,
    /// R48): predicted for comparison, never part of a plan.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hypothetical: bool,
}

/// A change not proposed, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NotProposed {
    pub settings: Vec<Setting>,
    pub why: String,
}

/// What the catalogue looks at.
pub struct Context<'a> {
    /// The recorded settings.
    pub php: &'a PhpConfig,
    /// The trace is no PHP program's: no PHP setting is proposed.
    pub not_php: bool,
    /// Some request ran in php-fpm (not only php-cli).
    pub fpm: bool,
    /// Some request ran in php-cli.
    pub cli: bool,
    /// The NFS mount's recorded options and its root (with NFS).
    pub mount: Option<(&'a str, &'a MountOptions)>,
    /// Directories written to (by the trace or `--writable`) under the
    /// NFS root.
    pub written: &'a [String],
    /// The lift saw OPcache's hash table full.
    pub opcache_full: bool,
    /// Distinct scripts the capture compiled.
    pub scripts: usize,
}

/// A long attribute cache time (`actimeo`, seconds) and a very long one.
pub const ACTIMEO: [u32; 2] = [60, 3600];
/// The realpath cache settings proposed (PHP's own defaults are 4M and
/// 120 s since 7.0.16; the seeds propose 1M-4M and 120-300 s).
pub const REALPATH_SIZE: &str = "4M";
pub const REALPATH_TTL_S: u64 = 600;
/// revalidate_freq proposed when validations must stay on.
pub const REVALIDATE_FREQ_S: u64 = 60;

/// The candidates of `ctx`, and the changes set aside with the reason.
pub fn catalogue(ctx: &Context) -> (Vec<Candidate>, Vec<NotProposed>) {
    let mut out = Vec::new();
    if !ctx.not_php {
        php_candidates(ctx, &mut out);
    }
    let aside = match ctx.mount {
        Some((root, m)) => mount_candidates(ctx, root, m, &mut out),
        None => Vec::new(),
    };
    (out, aside)
}

/// A candidate.
fn c(
    mechanism: Mechanism,
    settings: Vec<Setting>,
    risk: Risk,
    risk_text: &str,
    deploy: Option<&str>,
) -> Candidate {
    Candidate {
        mechanism,
        settings,
        risk,
        risk_text: risk_text.into(),
        deploy: deploy.map(str::to_string),
        hypothetical: false,
    }
}

/// The php.ini changes.
fn php_candidates(ctx: &Context, out: &mut Vec<Candidate>) {
    let p = ctx.php;
    let opcache = (ctx.fpm && p.opcache_enable) || (ctx.cli && p.opcache_on(true));
    if opcache && p.validate_timestamps {
        out.push(c(
            Mechanism::OpcacheValidation,
            vec![Setting::php("opcache.validate_timestamps", 0, 1)],
            Risk::Medium,
            "a changed script is not seen until php-fpm reloads or opcache_reset() runs: a deploy that skips the reload keeps serving the old code",
            Some("reload php-fpm after every deploy (systemctl reload php8.2-fpm), or call opcache_reset()"),
        ));
        if p.revalidate_freq < REVALIDATE_FREQ_S {
            out.push(c(
                Mechanism::OpcacheValidation,
                vec![Setting::php(
                    "opcache.revalidate_freq",
                    REVALIDATE_FREQ_S,
                    p.revalidate_freq,
                )],
                Risk::Low,
                "a changed script is seen up to 60 s after the change",
                None,
            ));
        }
    }
    if ctx.fpm && !p.opcache_enable {
        out.push(c(
            Mechanism::OpcacheOff,
            vec![Setting::php("opcache.enable", 1, 0)],
            Risk::Low,
            "compiled scripts are kept in shared memory and a change is seen only when its timestamp is validated (every revalidate_freq s)",
            None,
        ));
    }
    if opcache && ctx.opcache_full {
        // the next prime above the setting is the table's size; four times
        // the scripts seen leaves room for the code not exercised here
        let n = (ctx.scripts as u64 * 4)
            .max(p.max_accelerated_files * 2)
            .max(20_000);
        out.push(c(
            Mechanism::OpcacheFull,
            vec![Setting::php(
                "opcache.max_accelerated_files",
                n,
                p.max_accelerated_files,
            )],
            Risk::Low,
            "OPcache's hash table takes more shared memory: check that opcache.memory_consumption still holds every script",
            None,
        ));
    }
    if p.realpath_cache_size < 4 << 20 {
        out.push(c(
            Mechanism::RealpathCache,
            vec![Setting::php(
                "realpath_cache_size",
                REALPATH_SIZE,
                p.realpath_cache_size,
            )],
            Risk::None,
            "a few megabytes more memory per worker at most",
            None,
        ));
    }
    if p.realpath_cache_ttl < REALPATH_TTL_S {
        out.push(c(
            Mechanism::RealpathCache,
            vec![Setting::php(
                "realpath_cache_ttl",
                REALPATH_TTL_S,
                p.realpath_cache_ttl,
            )],
            Risk::Low,
            "a path whose target changes (a symlink switched by a deploy) resolves to the old target for up to 600 s",
            Some("reload php-fpm after a deploy that switches a symlink"),
        ));
    }
    if !p.open_basedir.is_empty() {
        out.push(c(
            Mechanism::OpenBasedir,
            vec![Setting::php("open_basedir", "", &p.open_basedir)],
            Risk::Medium,
            "PHP no longer limits which files a script may open: keep sites apart by other means (a user per site, a container)",
            None,
        ));
    }
}

/// The mount option changes, and those set aside (a written directory
/// under the root).
fn mount_candidates(
    ctx: &Context,
    root: &str,
    m: &MountOptions,
    out: &mut Vec<Candidate>,
) -> Vec<NotProposed> {
    let mut aside = Vec::new();
    // close-to-open and long attribute caching serve stale data to a
    // directory written through another client
    let mut guarded = Vec::new();
    if m.cto() {
        guarded.push(c(
            Mechanism::CloseToOpen,
            vec![Setting::mount("nocto", "", "cto")],
            Risk::Medium,
            "a file changed through another client can be read stale until its cached attributes expire: only for code changed by deploys, never for shared writable data",
            Some("after a deploy, remount the code mount (or wait acregmax) on every node"),
        ));
    }
    for s in ACTIMEO {
        if m.ac() && m.acregmin_s() < s {
            guarded.push(c(
                Mechanism::AttributeCache,
                vec![Setting::mount(
                    "actimeo",
                    s,
                    format!("acregmin={},acregmax={}", m.acregmin_s(), m.acregmax_s()),
                )],
                if s > 600 { Risk::High } else { Risk::Medium },
                &format!(
                    "a change made through another client (a deploy on another node) is seen up to {} late",
                    if s >= 3600 { "an hour".to_string() } else { format!("{s} s") }
                ),
                Some("after a deploy, remount the code mount on every node"),
            ));
        }
    }
    if ctx.written.is_empty() {
        out.extend(guarded);
    } else {
        let dirs = ctx.written.join(", ");
        let apart = apart_dirs(root, ctx.written);
        for g in guarded {
            // the written directories on mounts of their own, as they are
            // now: the change holds for the rest of the root (the code)
            if let Some(apart) = &apart {
                let mut settings = g.settings.clone();
                let recorded = m.render();
                settings.extend(apart.iter().map(|d| Setting::apart(d, &recorded, root)));
                let mut deploy = vec![format!(
                    "mount {} apart first (each a mount of its own of the same export, with today's options), then remount {root} with the new options, on every node",
                    apart.join(", ")
                )];
                deploy.extend(g.deploy.clone());
                out.push(Candidate {
                    mechanism: g.mechanism,
                    settings,
                    risk: g.risk,
                    risk_text: format!(
                        "for the code only ({} keep today's options): {}",
                        apart.join(", "),
                        g.risk_text
                    ),
                    deploy: Some(deploy.join("; ")),
                    hypothetical: false,
                });
            }
            aside.push(NotProposed {
                settings: g.settings,
                why: format!(
                    "written to under the NFS root {root} ({dirs}): stale attributes there would hide other clients' writes; {}",
                    if apart.is_some() {
                        "proposed instead with the written directories on mounts of their own"
                    } else {
                        "a mount of its own for the code would allow it"
                    }
                ),
            });
        }
    }
    match m.lookupcache() {
        LookupCache::All => out.push(c(
            Mechanism::LookupCache,
            vec![Setting::mount("lookupcache", "pos", "all")],
            Risk::Low,
            "lookups of missing files are no longer cached: one LOOKUP each time the application probes a missing file",
            None,
        )),
        l @ (LookupCache::Pos | LookupCache::None) => out.push(c(
            Mechanism::LookupCache,
            vec![Setting::mount("lookupcache", "all", l.as_str())],
            Risk::Low,
            "a file created through another client can be reported missing until its directory's attributes expire",
            None,
        )),
    }
    if m.atime() != AtimeMode::Noatime {
        out.push(c(
            Mechanism::Atime,
            vec![Setting::mount("noatime", "", m.atime().as_str())],
            Risk::Low,
            "access times are no longer updated (tmp cleaners and mail readers that rely on them)",
            None,
        ));
    }
    // seed 002's mount options: patches never merged (R48), predicted so
    // that the advice is checked, never proposed
    // (noaccesscheck spares the ACCESS calls of users other than root; a
    // trace does not show the calls' user, so its effect is not known)
    if !m.noaccesscheck {
        aside.push(NotProposed {
            settings: vec![Setting::mount("noaccesscheck", "", "")],
            why: "in no released Linux kernel (a 2013 patch), and its effect depends on the calling user (root keeps its ACCESS calls), which strace does not show".into(),
        });
    }
    if m.cto() && m.sloppycto_s.is_none() {
        let mut h = c(
            Mechanism::CloseToOpen,
            vec![Setting::mount("sloppycto", 3, "")],
            Risk::High,
            "not in any released Linux kernel (a 2013 patch): shown for comparison",
            None,
        );
        h.hypothetical = true;
        out.push(h);
    }
    if m.nconnect() == 1 {
        out.push(c(
            Mechanism::Transport,
            vec![Setting::mount("nconnect", 4, 1)],
            Risk::Low,
            "four TCP connections to the server per mount instead of one",
            Some("remount (nconnect takes effect on a new mount of the server)"),
        ));
    }
    aside
}

/// At most this many directories are mounted apart from a root.
pub const APART_MAX: usize = 4;

/// The directories to mount apart from `root` so that none of `written`
/// stays on it: the outermost written directories under the root, those
/// of more than [`APART_MAX`] gathered into their parents (never the
/// root). `None` when the root itself is written to, or the directories
/// do not fit.
fn apart_dirs(root: &str, written: &[String]) -> Option<Vec<String>> {
    use crate::nfs_setup::under;
    let root = root.trim_end_matches('/');
    let strictly_under = |d: &str| d != root && under(d, root);
    let mut dirs: Vec<String> = Vec::new();
    for d in written {
        let d = d.trim_end_matches('/');
        if !strictly_under(d) {
            return None;
        }
        dirs.push(d.to_string());
    }
    loop {
        // the outermost: a directory under another one goes with it
        dirs.sort();
        dirs.dedup();
        let all = dirs.clone();
        dirs.retain(|d| !all.iter().any(|o| o != d && under(d, o)));
        if dirs.len() <= APART_MAX {
            return Some(dirs);
        }
        // the deepest gathered into their parents
        let deepest = dirs.iter().map(|d| d.matches('/').count()).max()?;
        let mut moved = false;
        for d in dirs.iter_mut() {
            if d.matches('/').count() == deepest {
                let parent = d.rsplit_once('/').map(|(p, _)| p.to_string())?;
                if strictly_under(&parent) {
                    *d = parent;
                    moved = true;
                }
            }
        }
        if !moved {
            return None;
        }
    }
}

/// Whether two settings cannot stand in one plan: the same key, or
/// `validate_timestamps=0` with a `revalidate_freq` (moot without
/// validations). The same directory mounted apart by two changes is one
/// mount, no conflict.
pub fn conflict(a: &Setting, b: &Setting) -> bool {
    if a.layer == Layer::MountApart || b.layer == Layer::MountApart {
        return a.key == b.key && a != b;
    }
    let vt = |s: &Setting| s.key == "opcache.validate_timestamps";
    let rf = |s: &Setting| s.key == "opcache.revalidate_freq";
    a.key == b.key || (vt(a) && rf(b)) || (rf(a) && vt(b))
}

#[cfg(test)]
mod tests {
    use super::apart_dirs;

    fn v(d: &[&str]) -> Vec<String> {
        d.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn written_directories_mounted_apart() {
        // outermost only
        assert_eq!(
            apart_dirs("/srv", &v(&["/srv/up/2024", "/srv/up", "/srv/cache"])),
            Some(v(&["/srv/cache", "/srv/up"]))
        );
        // the root written: nothing to keep apart from it
        assert_eq!(apart_dirs("/srv", &v(&["/srv", "/srv/up"])), None);
        assert_eq!(apart_dirs("/srv", &v(&["/"])), None);
        // too many: gathered into their parents
        let many = v(&[
            "/srv/up/a",
            "/srv/up/b",
            "/srv/up/c",
            "/srv/up/d",
            "/srv/up/e",
        ]);
        assert_eq!(apart_dirs("/srv", &many), Some(v(&["/srv/up"])));
        // too many directly under the root: none fits
        let flat = v(&["/srv/a", "/srv/b", "/srv/c", "/srv/d", "/srv/e"]);
        assert_eq!(apart_dirs("/srv", &flat), None);
        // a sibling's prefix is no parent
        assert_eq!(
            apart_dirs("/srv", &v(&["/srv/up", "/srv/upload"])),
            Some(v(&["/srv/up", "/srv/upload"]))
        );
    }
}
