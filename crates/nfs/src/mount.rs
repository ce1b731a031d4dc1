//! NFS mount options: parsed from an fstab / `mount -o` string or a
//! `/proc/mounts` line, with the kernel's defaults in one table.
//!
//! Fields hold what was written (`None` = not given); the accessors
//! (`acregmin_s()`, `cto()`, ...) apply [`DEFAULTS`]. Rendering writes back
//! what was given, so `parse(render(parse(s))) == parse(s)`.
//!
//! Conflicts. The kernel (`fs/nfs/fs_context.c` `nfs_fs_context_parse_param`)
//! and mount.nfs process options left to right and the last one wins
//! (`ac,noac` is `noac`; `vers=3,vers=4.1` is 4.1). A string that says both
//! is almost always a mistake, so this parser refuses it and names the
//! option: a flag and its negation (`ac`/`noac`, `cto`/`nocto`,
//! `hard`/`soft`, two atime modes), the same key twice with different
//! values, and `noac` next to a nonzero `ac*` timeout. Exceptions, because
//! the kernel itself prints them together in `/proc/mounts`: `actimeo=N`
//! followed by a single `acregmin=`-style override (last wins), and `noac`
//! with all timeouts 0.
//!
//! `noaccesscheck` and `sloppycto=N` are **hypothetical**: they come from an
//! RFC patch series of 2013 (seed 002, SEMANTICS.md R48) that is not in
//! mainline Linux. They are accepted so the model can show what the patches
//! would have done; [`MountOptions::hypothetical`] lists them when set.

use serde::Serialize;
use std::fmt;

/// NFS protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Vers {
    V3,
    V4_0,
    V4_1,
    V4_2,
}

impl Vers {
    pub fn is_v4(self) -> bool {
        self != Vers::V3
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Vers::V3 => "3",
            Vers::V4_0 => "4.0",
            Vers::V4_1 => "4.1",
            Vers::V4_2 => "4.2",
        }
    }
    fn parse(v: &str) -> Option<Vers> {
        Some(match v {
            "3" => Vers::V3,
            "4" | "4.0" => Vers::V4_0,
            "4.1" => Vers::V4_1,
            "4.2" => Vers::V4_2,
            _ => return None,
        })
    }
}

/// `lookupcache=` (R19, R20).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LookupCache {
    /// Positive and negative dentries trusted while the parent verifier holds.
    All,
    /// Negative dentries always re-looked-up (`pos` or `positive`).
    Pos,
    /// Every revalidation is a LOOKUP.
    None,
}

impl LookupCache {
    pub fn as_str(self) -> &'static str {
        match self {
            LookupCache::All => "all",
            LookupCache::Pos => "pos",
            LookupCache::None => "none",
        }
    }
}

/// atime handling of the vfsmount (R11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AtimeMode {
    /// Default since Linux 2.6.30; for NFS it behaves like strictatime (R11).
    Relatime,
    Strictatime,
    Noatime,
}

impl AtimeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AtimeMode::Relatime => "relatime",
            AtimeMode::Strictatime => "strictatime",
            AtimeMode::Noatime => "noatime",
        }
    }
}

/// Kernel defaults (R1, R47). One table; every accessor reads it.
pub struct Defaults {
    /// mount.nfs negotiates 4.2 -> 4.1 -> 4.0 -> 3 (R47, user space).
    pub vers: Vers,
    /// `include/linux/nfs_fs.h` `NFS_DEF_ACREGMIN` etc., seconds (R1).
    pub acregmin_s: u32,
    pub acregmax_s: u32,
    pub acdirmin_s: u32,
    pub acdirmax_s: u32,
    pub ac: bool,
    pub cto: bool,
    pub lookupcache: LookupCache,
    pub atime: AtimeMode,
    pub nodiratime: bool,
    /// Negotiated with the server; Linux nfsd offers 1 MiB.
    pub rsize: u32,
    pub wsize: u32,
    /// `fs_context.c` `Opt_nconnect` (1..=16, `NFS_MAX_CONNECTIONS`).
    pub nconnect: u32,
    pub hard: bool,
    /// Deciseconds; `NFS_DEF_TCP_TIMEO` = 600.
    pub timeo_ds: u32,
    /// `NFS_DEF_TCP_RETRANS` = 2.
    pub retrans: u32,
    pub sec: &'static str,
}

pub const DEFAULTS: Defaults = Defaults {
    vers: Vers::V4_2,
    acregmin_s: 3,
    acregmax_s: 60,
    acdirmin_s: 30,
    acdirmax_s: 60,
    ac: true,
    cto: true,
    lookupcache: LookupCache::All,
    atime: AtimeMode::Relatime,
    nodiratime: false,
    rsize: 1_048_576,
    wsize: 1_048_576,
    nconnect: 1,
    hard: true,
    timeo_ds: 600,
    retrans: 2,
    sec: "sys",
};

/// Options the parser recognises but the model does not use (transport,
/// addressing, locking); kept verbatim for rendering.
const PASSTHROUGH: &[&str] = &[
    "rw",
    "ro",
    "proto",
    "namlen",
    "mountaddr",
    "mountvers",
    "mountport",
    "mountproto",
    "local_lock",
    "addr",
    "clientaddr",
    "port",
    "nosuid",
    "suid",
    "nodev",
    "dev",
    "noexec",
    "exec",
    "sync",
    "async",
    "_netdev",
    "nofail",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "defaults",
    "bg",
    "fg",
    "intr",
    "nointr",
    "lock",
    "nolock",
    "fsc",
    "nofsc",
    "resvport",
    "noresvport",
    "rdirplus",
    "nordirplus",
    "sharecache",
    "nosharecache",
    "tcp",
    "udp",
    "rdma",
    "softreval",
    "nosoftreval",
    "softerr",
    "migration",
    "nomigration",
    "fsid",
    "retry",
    "mounthost",
    "nfsvers",
    "minorversion",
    "write",
    "xprtsec",
    "trunkdiscovery",
    "notrunkdiscovery",
    "max_connect",
    "acl",
    "noacl",
    "posix",
    "noposix",
];

/// Parsed mount options.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MountOptions {
    pub vers: Option<Vers>,
    /// `Some(false)` = `noac`.
    pub ac: Option<bool>,
    pub acregmin_s: Option<u32>,
    pub acregmax_s: Option<u32>,
    pub acdirmin_s: Option<u32>,
    pub acdirmax_s: Option<u32>,
    /// `Some(false)` = `nocto`.
    pub cto: Option<bool>,
    pub lookupcache: Option<LookupCache>,
    pub atime: Option<AtimeMode>,
    pub nodiratime: Option<bool>,
    pub rsize: Option<u32>,
    pub wsize: Option<u32>,
    pub nconnect: Option<u32>,
    /// `Some(false)` = `soft`.
    pub hard: Option<bool>,
    pub timeo_ds: Option<u32>,
    pub retrans: Option<u32>,
    pub sec: Option<String>,
    /// HYPOTHETICAL (2013 RFC patch, not in mainline; R48): no ACCESS RPCs
    /// for uid != 0, permission checked locally after attribute revalidation.
    pub noaccesscheck: bool,
    /// HYPOTHETICAL (2013 RFC patch, not in mainline; R48): skip the
    /// close-to-open GETATTR of a read-only open of a regular file when its
    /// attributes were updated less than N seconds ago.
    pub sloppycto_s: Option<u32>,
    /// Recognised options the model does not use, in input order.
    pub passthrough: Vec<(String, Option<String>)>,
    /// Options nobody here knows; kept and reported.
    pub unknown: Vec<(String, Option<String>)>,
}

/// A bad option string.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MountError {
    #[error("mount option '{option}': bad value '{value}' ({why})")]
    BadValue {
        option: String,
        value: String,
        why: &'static str,
    },
    #[error("mount option '{option}' needs a value (e.g. {option}=N)")]
    MissingValue { option: String },
    #[error("mount option '{option}' takes no value")]
    UnexpectedValue { option: String },
    #[error("mount options '{first}' and '{second}' contradict each other (the kernel would silently keep the last)")]
    Contradictory { first: String, second: String },
    #[error("mounts line {line}: {why}")]
    BadMountsLine { line: String, why: &'static str },
    /// An NFS line of a mounts text (/proc/mounts, fstab) whose options
    /// do not parse.
    #[error("mounts line {line}: {source}")]
    AtLine {
        line: usize,
        source: Box<MountError>,
    },
    #[error("unknown mount option '{option}'{}", suggestion.map(|s| format!(" (did you mean {s}?)")).unwrap_or_default())]
    Unknown {
        option: String,
        suggestion: Option<&'static str>,
    },
}

/// The options [`MountOptions::parse`] models (each changes what the client
/// does in the model).
pub const MODELLED: &[&str] = &[
    "ac",
    "accesscheck",
    "acdirmax",
    "acdirmin",
    "acregmax",
    "acregmin",
    "actimeo",
    "atime",
    "cto",
    "diratime",
    "hard",
    "lookupcache",
    "nconnect",
    "nfsvers",
    "noac",
    "noaccesscheck",
    "noatime",
    "nocto",
    "nodiratime",
    "relatime",
    "retrans",
    "rsize",
    "sec",
    "sloppycto",
    "soft",
    "strictatime",
    "timeo",
    "vers",
    "wsize",
];

/// The known option nearest to `option` by edit distance (at most a third
/// of its length, and at least 1 edit allowed), for "did you mean".
pub fn suggest(option: &str) -> Option<&'static str> {
    statstorm_trace::suggest::closest(option, MODELLED.iter().chain(PASSTHROUGH).copied())
}

/// One line of `/proc/mounts`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MountEntry {
    pub source: String,
    pub target: String,
    pub fstype: String,
    pub options: MountOptions,
}

fn need<'a>(key: &str, v: Option<&'a str>) -> Result<&'a str, MountError> {
    v.ok_or_else(|| MountError::MissingValue {
        option: key.to_string(),
    })
}

fn num(option: &str, v: &str) -> Result<u32, MountError> {
    v.parse::<u32>().map_err(|_| MountError::BadValue {
        option: option.to_string(),
        value: v.to_string(),
        why: "not a non-negative integer",
    })
}

/// Which field a token sets, for conflict detection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Vers,
    Ac,
    AcRegMin,
    AcRegMax,
    AcDirMin,
    AcDirMax,
    Actimeo,
    Cto,
    LookupCache,
    Atime,
    NoDirAtime,
    Rsize,
    Wsize,
    Nconnect,
    Hard,
    Timeo,
    Retrans,
    Sec,
    NoAccessCheck,
    SloppyCto,
}

impl MountOptions {
    /// Parses a comma-separated option string (`mount -o`, fstab field 4,
    /// or the options field of `/proc/mounts`).
    pub fn parse(s: &str) -> Result<MountOptions, MountError> {
        let mut o = MountOptions::default();
        // (slot, token as written, canonical value) of each setting seen.
        let mut seen: Vec<(Slot, String, String)> = Vec::new();
        for tok in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, val) = match tok.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (tok, None),
            };
            let flag = |v: Option<&str>| match v {
                Some(_) => Err(MountError::UnexpectedValue {
                    option: key.to_string(),
                }),
                None => Ok(()),
            };
            let slot_val: (Slot, String) = match key {
                "vers" | "nfsvers" => {
                    let v = need(key, val)?;
                    let ver = Vers::parse(v).ok_or_else(|| MountError::BadValue {
                        option: key.to_string(),
                        value: v.to_string(),
                        why: "expected 3, 4, 4.0, 4.1 or 4.2",
                    })?;
                    o.vers = Some(ver);
                    (Slot::Vers, ver.as_str().to_string())
                }
                "ac" | "noac" => {
                    flag(val)?;
                    o.ac = Some(key == "ac");
                    (Slot::Ac, key.to_string())
                }
                "actimeo" => {
                    let n = num(key, need(key, val)?)?;
                    o.acregmin_s = Some(n);
                    o.acregmax_s = Some(n);
                    o.acdirmin_s = Some(n);
                    o.acdirmax_s = Some(n);
                    (Slot::Actimeo, n.to_string())
                }
                "acregmin" | "acregmax" | "acdirmin" | "acdirmax" => {
                    let n = num(key, need(key, val)?)?;
                    let (slot, field) = match key {
                        "acregmin" => (Slot::AcRegMin, &mut o.acregmin_s),
                        "acregmax" => (Slot::AcRegMax, &mut o.acregmax_s),
                        "acdirmin" => (Slot::AcDirMin, &mut o.acdirmin_s),
                        _ => (Slot::AcDirMax, &mut o.acdirmax_s),
                    };
                    *field = Some(n);
                    (slot, n.to_string())
                }
                "cto" | "nocto" => {
                    flag(val)?;
                    o.cto = Some(key == "cto");
                    (Slot::Cto, key.to_string())
                }
                "lookupcache" => {
                    let v = need(key, val)?;
                    let lc = match v {
                        "all" => LookupCache::All,
                        "pos" | "positive" => LookupCache::Pos,
                        "none" => LookupCache::None,
                        _ => {
                            return Err(MountError::BadValue {
                                option: key.to_string(),
                                value: v.to_string(),
                                why: "expected all, pos, positive or none",
                            })
                        }
                    };
                    o.lookupcache = Some(lc);
                    (Slot::LookupCache, lc.as_str().to_string())
                }
                "atime" | "relatime" | "strictatime" | "noatime" => {
                    flag(val)?;
                    let m = match key {
                        "noatime" => AtimeMode::Noatime,
                        "strictatime" => AtimeMode::Strictatime,
                        // `atime` clears MNT_NOATIME; relatime stays the default.
                        _ => AtimeMode::Relatime,
                    };
                    o.atime = Some(m);
                    (Slot::Atime, m.as_str().to_string())
                }
                "nodiratime" | "diratime" => {
                    flag(val)?;
                    o.nodiratime = Some(key == "nodiratime");
                    (Slot::NoDirAtime, key.to_string())
                }
                "rsize" | "wsize" => {
                    let n = num(key, need(key, val)?)?;
                    if n == 0 {
                        return Err(MountError::BadValue {
                            option: key.to_string(),
                            value: "0".into(),
                            why: "must be positive",
                        });
                    }
                    if key == "rsize" {
                        o.rsize = Some(n);
                        (Slot::Rsize, n.to_string())
                    } else {
                        o.wsize = Some(n);
                        (Slot::Wsize, n.to_string())
                    }
                }
                "nconnect" => {
                    let n = num(key, need(key, val)?)?;
                    if !(1..=16).contains(&n) {
                        return Err(MountError::BadValue {
                            option: key.to_string(),
                            value: n.to_string(),
                            why: "out of range 1..=16 (NFS_MAX_CONNECTIONS)",
                        });
                    }
                    o.nconnect = Some(n);
                    (Slot::Nconnect, n.to_string())
                }
                "hard" | "soft" => {
                    flag(val)?;
                    o.hard = Some(key == "hard");
                    (Slot::Hard, key.to_string())
                }
                "timeo" | "retrans" => {
                    let n = num(key, need(key, val)?)?;
                    if key == "timeo" {
                        o.timeo_ds = Some(n);
                        (Slot::Timeo, n.to_string())
                    } else {
                        o.retrans = Some(n);
                        (Slot::Retrans, n.to_string())
                    }
                }
                "sec" => {
                    let v = need(key, val)?;
                    let ok = v.split(':').all(|f| {
                        matches!(
                            f,
                            "none"
                                | "sys"
                                | "krb5"
                                | "krb5i"
                                | "krb5p"
                                | "lkey"
                                | "lkeyi"
                                | "lkeyp"
                                | "spkm"
                                | "spkmi"
                                | "spkmp"
                        )
                    });
                    if !ok {
                        return Err(MountError::BadValue {
                            option: key.to_string(),
                            value: v.to_string(),
                            why: "expected sys, none, krb5, krb5i or krb5p",
                        });
                    }
                    o.sec = Some(v.to_string());
                    (Slot::Sec, v.to_string())
                }
                "noaccesscheck" | "accesscheck" => {
                    flag(val)?;
                    o.noaccesscheck = key == "noaccesscheck";
                    (Slot::NoAccessCheck, key.to_string())
                }
                "sloppycto" => {
                    let n = num(key, need(key, val)?)?;
                    o.sloppycto_s = (n > 0).then_some(n);
                    (Slot::SloppyCto, n.to_string())
                }
                k if PASSTHROUGH.contains(&k) => {
                    o.passthrough.push((k.to_string(), val.map(str::to_string)));
                    continue;
                }
                k => {
                    o.unknown.push((k.to_string(), val.map(str::to_string)));
                    continue;
                }
            };
            let (slot, v) = slot_val;
            if let Some((_, first, _)) = seen.iter().find(|(s, _, fv)| *s == slot && *fv != v) {
                return Err(MountError::Contradictory {
                    first: first.clone(),
                    second: tok.to_string(),
                });
            }
            seen.push((slot, tok.to_string(), v));
        }
        // noac forces every timeout to 0 (R2); a nonzero timeout next to it
        // is a contradiction (the kernel silently zeroes it).
        if o.ac == Some(false) {
            let timeouts = [o.acregmin_s, o.acregmax_s, o.acdirmin_s, o.acdirmax_s];
            if timeouts.iter().any(|t| matches!(t, Some(n) if *n > 0)) {
                let first = seen
                    .iter()
                    .find(|(s, _, v)| {
                        matches!(
                            s,
                            Slot::Actimeo
                                | Slot::AcRegMin
                                | Slot::AcRegMax
                                | Slot::AcDirMin
                                | Slot::AcDirMax
                        ) && v != "0"
                    })
                    .map(|(_, t, _)| t.clone())
                    .unwrap_or_default();
                return Err(MountError::Contradictory {
                    first,
                    second: "noac".into(),
                });
            }
        }
        Ok(o)
    }

    /// [`MountOptions::parse`] for options a person typed: an option the
    /// parser does not know is an error naming the nearest known one (a
    /// `/proc/mounts` line, written by the kernel, may carry options newer
    /// than the model; typed ones are far more often misspelled).
    pub fn parse_strict(s: &str) -> Result<MountOptions, MountError> {
        let o = MountOptions::parse(s)?;
        match o.unknown.first() {
            Some((k, _)) => Err(MountError::Unknown {
                option: k.clone(),
                suggestion: suggest(k),
            }),
            None => Ok(o),
        }
    }

    /// Parses one `/proc/mounts` (or fstab) line:
    /// `source target fstype options [dump pass]`.
    pub fn parse_mounts_line(line: &str) -> Result<MountEntry, MountError> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            return Err(MountError::BadMountsLine {
                line: line.to_string(),
                why: "expected at least 4 fields: source target fstype options",
            });
        }
        let mut options = MountOptions::parse(f[3])?;
        if f[2] == "nfs4" && options.vers.is_none() {
            options.vers = Some(Vers::V4_0);
        }
        Ok(MountEntry {
            source: f[0].to_string(),
            target: f[1].to_string(),
            fstype: f[2].to_string(),
            options,
        })
    }

    /// The NFS entries of a `/proc/mounts` or fstab text; other lines
    /// (comments, other file systems) are skipped, bad NFS lines are errors
    /// naming the line number.
    pub fn parse_mounts(text: &str) -> Result<Vec<MountEntry>, MountError> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let fstype = line.split_whitespace().nth(2).unwrap_or("");
            if fstype == "nfs" || fstype == "nfs4" {
                out.push(Self::parse_mounts_line(line).map_err(|e| match e {
                    MountError::BadMountsLine { why, .. } => MountError::BadMountsLine {
                        line: format!("{}", i + 1),
                        why,
                    },
                    other => MountError::AtLine {
                        line: i + 1,
                        source: Box::new(other),
                    },
                })?);
            }
        }
        Ok(out)
    }

    pub fn vers(&self) -> Vers {
        self.vers.unwrap_or(DEFAULTS.vers)
    }
    /// False under `noac` (R2).
    pub fn ac(&self) -> bool {
        self.ac.unwrap_or(DEFAULTS.ac)
    }
    fn timeout(&self, v: Option<u32>, d: u32) -> u32 {
        if self.ac() {
            v.unwrap_or(d)
        } else {
            0
        }
    }
    /// Effective timeouts in seconds; all 0 under `noac` (R1, R2).
    pub fn acregmin_s(&self) -> u32 {
        self.timeout(self.acregmin_s, DEFAULTS.acregmin_s)
    }
    pub fn acregmax_s(&self) -> u32 {
        self.timeout(self.acregmax_s, DEFAULTS.acregmax_s)
    }
    pub fn acdirmin_s(&self) -> u32 {
        self.timeout(self.acdirmin_s, DEFAULTS.acdirmin_s)
    }
    pub fn acdirmax_s(&self) -> u32 {
        self.timeout(self.acdirmax_s, DEFAULTS.acdirmax_s)
    }
    pub fn cto(&self) -> bool {
        self.cto.unwrap_or(DEFAULTS.cto)
    }
    pub fn lookupcache(&self) -> LookupCache {
        self.lookupcache.unwrap_or(DEFAULTS.lookupcache)
    }
    pub fn atime(&self) -> AtimeMode {
        self.atime.unwrap_or(DEFAULTS.atime)
    }
    pub fn nodiratime(&self) -> bool {
        self.nodiratime.unwrap_or(DEFAULTS.nodiratime)
    }
    pub fn rsize(&self) -> u32 {
        self.rsize.unwrap_or(DEFAULTS.rsize)
    }
    pub fn wsize(&self) -> u32 {
        self.wsize.unwrap_or(DEFAULTS.wsize)
    }
    pub fn nconnect(&self) -> u32 {
        self.nconnect.unwrap_or(DEFAULTS.nconnect)
    }
    pub fn hard(&self) -> bool {
        self.hard.unwrap_or(DEFAULTS.hard)
    }
    pub fn timeo_ds(&self) -> u32 {
        self.timeo_ds.unwrap_or(DEFAULTS.timeo_ds)
    }
    pub fn retrans(&self) -> u32 {
        self.retrans.unwrap_or(DEFAULTS.retrans)
    }
    pub fn sec(&self) -> &str {
        self.sec.as_deref().unwrap_or(DEFAULTS.sec)
    }

    /// The hypothetical (not mainline) options in force, for reports.
    pub fn hypothetical(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.noaccesscheck {
            v.push("noaccesscheck".to_string());
        }
        if let Some(n) = self.sloppycto_s {
            v.push(format!("sloppycto={n}"));
        }
        v
    }

    /// Applies `other` on top of `self` (fields `other` sets win), e.g. a
    /// proposed `--mount actimeo=3600,nocto` over the recorded options.
    pub fn overlay(&self, other: &MountOptions) -> MountOptions {
        let mut o = self.clone();
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { o.$f = other.$f.clone(); } )* };
        }
        take!(
            vers,
            ac,
            acregmin_s,
            acregmax_s,
            acdirmin_s,
            acdirmax_s,
            cto,
            lookupcache,
            atime,
            nodiratime,
            rsize,
            wsize,
            nconnect,
            hard,
            timeo_ds,
            retrans,
            sec,
            sloppycto_s
        );
        if other.ac == Some(true) && self.ac == Some(false) {
            // leaving noac: forget the zeroed timeouts /proc/mounts printed
            for (f, of) in [
                (&mut o.acregmin_s, other.acregmin_s),
                (&mut o.acregmax_s, other.acregmax_s),
                (&mut o.acdirmin_s, other.acdirmin_s),
                (&mut o.acdirmax_s, other.acdirmax_s),
            ] {
                if of.is_none() && *f == Some(0) {
                    *f = None;
                }
            }
        }
        o.noaccesscheck |= other.noaccesscheck;
        o
    }

    /// The option string, as given (defaults are not spelled out).
    pub fn render(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        for (k, v) in &self.passthrough {
            out.push(match v {
                Some(v) => format!("{k}={v}"),
                None => k.clone(),
            });
        }
        if let Some(v) = self.vers {
            out.push(format!("vers={}", v.as_str()));
        }
        if let Some(ac) = self.ac {
            out.push(if ac { "ac" } else { "noac" }.into());
        }
        for (k, v) in [
            ("acregmin", self.acregmin_s),
            ("acregmax", self.acregmax_s),
            ("acdirmin", self.acdirmin_s),
            ("acdirmax", self.acdirmax_s),
        ] {
            if let Some(v) = v {
                out.push(format!("{k}={v}"));
            }
        }
        if let Some(c) = self.cto {
            out.push(if c { "cto" } else { "nocto" }.into());
        }
        if let Some(l) = self.lookupcache {
            out.push(format!("lookupcache={}", l.as_str()));
        }
        if let Some(a) = self.atime {
            out.push(a.as_str().into());
        }
        if let Some(d) = self.nodiratime {
            out.push(if d { "nodiratime" } else { "diratime" }.into());
        }
        for (k, v) in [
            ("rsize", self.rsize),
            ("wsize", self.wsize),
            ("nconnect", self.nconnect),
            ("timeo", self.timeo_ds),
            ("retrans", self.retrans),
        ] {
            if let Some(v) = v {
                out.push(format!("{k}={v}"));
            }
        }
        if let Some(h) = self.hard {
            out.push(if h { "hard" } else { "soft" }.into());
        }
        if let Some(s) = &self.sec {
            out.push(format!("sec={s}"));
        }
        if self.noaccesscheck {
            out.push("noaccesscheck".into());
        }
        if let Some(n) = self.sloppycto_s {
            out.push(format!("sloppycto={n}"));
        }
        for (k, v) in &self.unknown {
            out.push(match v {
                Some(v) => format!("{k}={v}"),
                None => k.clone(),
            });
        }
        out.join(",")
    }
}

impl fmt::Display for MountOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::str::FromStr for MountOptions {
    type Err = MountError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MountOptions::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_options_must_be_known_and_typos_get_a_suggestion() {
        let e = MountOptions::parse_strict("actime=3600").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown mount option 'actime' (did you mean actimeo?)"
        );
        let e = MountOptions::parse_strict("foo=bar,nocto").unwrap_err();
        assert!(
            matches!(e, MountError::Unknown { ref option, suggestion: None } if option == "foo"),
            "{e:?}"
        );
        // a /proc/mounts line's options, passthrough ones included, pass
        MountOptions::parse_strict(
            "rw,relatime,vers=3,rsize=262144,wsize=262144,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=127.0.0.1,mountvers=3,mountport=47314,mountproto=udp,local_lock=none,addr=127.0.0.1",
        )
        .unwrap();
        // the lenient parse keeps unknown options for the report
        assert_eq!(MountOptions::parse("actime=3600").unwrap().unknown.len(), 1);
    }

    const LAB_V3: &str = "rw,relatime,vers=3,rsize=262144,wsize=262144,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=127.0.0.1,mountvers=3,mountport=47314,mountproto=udp,local_lock=none,addr=127.0.0.1";

    #[test]
    fn lab_v3_line() {
        let o = MountOptions::parse(LAB_V3).unwrap();
        assert_eq!(o.vers(), Vers::V3);
        assert_eq!(o.rsize(), 262_144);
        assert_eq!(o.acregmin_s(), 3);
        assert_eq!(o.acdirmin_s(), 30);
        assert!(o.cto() && o.ac() && o.hard());
        assert_eq!(o.atime(), AtimeMode::Relatime);
        assert!(o.unknown.is_empty(), "{:?}", o.unknown);
        assert_eq!(MountOptions::parse(&o.render()).unwrap(), o);
    }

    #[test]
    fn actimeo_sets_all_four_and_override_wins() {
        let o = MountOptions::parse("actimeo=3600,nocto").unwrap();
        assert_eq!(
            (
                o.acregmin_s(),
                o.acregmax_s(),
                o.acdirmin_s(),
                o.acdirmax_s()
            ),
            (3600, 3600, 3600, 3600)
        );
        assert!(!o.cto());
        let o = MountOptions::parse("actimeo=10,acregmax=20").unwrap();
        assert_eq!((o.acregmin_s(), o.acregmax_s()), (10, 20));
    }

    #[test]
    fn noac_zeroes_timeouts() {
        let o = MountOptions::parse("noac").unwrap();
        assert_eq!((o.acregmin_s(), o.acdirmax_s()), (0, 0));
        // what /proc/mounts prints for a noac mount
        let o = MountOptions::parse("noac,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0").unwrap();
        assert!(!o.ac());
    }

    #[test]
    fn contradictions_name_the_options() {
        for (s, a, b) in [
            ("ac,noac", "ac", "noac"),
            ("vers=3,vers=4.1", "vers=3", "vers=4.1"),
            ("cto,nocto", "cto", "nocto"),
            ("hard,soft", "hard", "soft"),
            ("noatime,strictatime", "noatime", "strictatime"),
            ("actimeo=5,noac", "actimeo=5", "noac"),
        ] {
            match MountOptions::parse(s) {
                Err(MountError::Contradictory { first, second }) => {
                    assert_eq!((first.as_str(), second.as_str()), (a, b), "{s}")
                }
                other => panic!("{s}: {other:?}"),
            }
        }
        // the same value twice is not a contradiction
        assert!(MountOptions::parse("vers=3,nfsvers=3").is_ok());
    }

    #[test]
    fn bad_values_name_the_option() {
        for (s, opt) in [
            ("vers=5", "vers"),
            ("actimeo=x", "actimeo"),
            ("lookupcache=some", "lookupcache"),
            ("nconnect=17", "nconnect"),
            ("sec=foo", "sec"),
            ("acregmin", "acregmin"),
            ("noac=1", "noac"),
            ("sloppycto=-1", "sloppycto"),
        ] {
            let e = MountOptions::parse(s).unwrap_err();
            assert!(e.to_string().contains(&format!("'{opt}'")), "{s}: {e}");
        }
    }

    #[test]
    fn unknown_kept_and_rendered() {
        let o = MountOptions::parse("vers=4.1,frobnicate=2,zap").unwrap();
        assert_eq!(
            o.unknown,
            vec![
                ("frobnicate".into(), Some("2".into())),
                ("zap".into(), None)
            ]
        );
        assert_eq!(MountOptions::parse(&o.render()).unwrap(), o);
    }

    #[test]
    fn hypothetical_options_are_labelled() {
        let o = MountOptions::parse("vers=3,noatime,noaccesscheck,sloppycto=3").unwrap();
        assert_eq!(o.hypothetical(), vec!["noaccesscheck", "sloppycto=3"]);
        assert_eq!(o.sloppycto_s, Some(3));
        assert_eq!(o.atime(), AtimeMode::Noatime);
        assert_eq!(MountOptions::parse(&o.render()).unwrap(), o);
    }

    #[test]
    fn mounts_line_and_nfs4_fstype() {
        let e = MountOptions::parse_mounts_line(
            "127.0.0.1:/ /mnt/nfs nfs4 rw,relatime,lookupcache=positive 0 0",
        )
        .unwrap();
        assert_eq!(e.target, "/mnt/nfs");
        assert_eq!(e.options.vers(), Vers::V4_0);
        assert_eq!(e.options.lookupcache(), LookupCache::Pos);
        assert!(MountOptions::parse_mounts_line("x y").is_err());
    }

    #[test]
    fn overlay_takes_proposed_fields() {
        let rec = MountOptions::parse(LAB_V3).unwrap();
        let new = rec.overlay(&MountOptions::parse("actimeo=3600,nocto").unwrap());
        assert_eq!(new.vers(), Vers::V3);
        assert_eq!(new.acregmin_s(), 3600);
        assert!(!new.cto());
    }
}
