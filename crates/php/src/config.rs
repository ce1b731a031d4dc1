//! `PhpConfig`: the php.ini settings that change which file syscalls PHP
//! makes, with PHP 8.2's defaults, read from php.ini files, `php -i` output
//! or `key=value` flags.
//!
//! Defaults (one table, [`DEFAULTS`]) were checked against the real PHP here:
//! `php -n -d zend_extension=opcache.so -i` (PHP 8.2.35, Debian 12). The
//! `include_path` default `.:/usr/share/php` is Debian's compiled-in value.

use std::fmt;
use std::path::Path;

/// How a setting's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Bool,
    Int,
    /// Integer with an optional K/M/G suffix (`zend_atol`).
    Size,
    Str,
}

/// Every setting the model knows: (name, PHP 8.2 default, type).
/// Sources: `main/main.c` INI table (realpath_cache_*, open_basedir,
/// include_path, user_ini.*), `ext/opcache/zend_accelerator_module.c` INI
/// table (opcache.*); R55, R60 in SEMANTICS.md.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("opcache.enable", "1"),
    ("opcache.enable_cli", "0"),
    ("opcache.validate_timestamps", "1"),
    ("opcache.revalidate_freq", "2"),
    ("opcache.revalidate_path", "0"),
    ("opcache.max_accelerated_files", "10000"),
    ("opcache.file_update_protection", "2"),
    ("opcache.enable_file_override", "0"),
    ("opcache.validate_permission", "0"),
    ("opcache.file_cache", ""),
    ("opcache.file_cache_only", "0"),
    ("realpath_cache_size", "4096K"),
    ("realpath_cache_ttl", "120"),
    ("open_basedir", ""),
    ("include_path", ".:/usr/share/php"),
    ("user_ini.cache_ttl", "300"),
    ("user_ini.filename", ".user.ini"),
];

fn ty(key: &str) -> Option<Ty> {
    Some(match key {
        "opcache.enable"
        | "opcache.enable_cli"
        | "opcache.validate_timestamps"
        | "opcache.revalidate_path"
        | "opcache.enable_file_override"
        | "opcache.validate_permission"
        | "opcache.file_cache_only" => Ty::Bool,
        "opcache.revalidate_freq"
        | "opcache.max_accelerated_files"
        | "opcache.file_update_protection"
        | "realpath_cache_ttl"
        | "user_ini.cache_ttl" => Ty::Int,
        "realpath_cache_size" => Ty::Size,
        "open_basedir" | "include_path" | "user_ini.filename" | "opcache.file_cache" => Ty::Str,
        _ => return None,
    })
}

/// The settings in force for one PHP SAPI.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PhpConfig {
    pub opcache_enable: bool,
    pub opcache_enable_cli: bool,
    pub validate_timestamps: bool,
    pub revalidate_freq: u64,
    pub revalidate_path: bool,
    pub max_accelerated_files: u64,
    pub file_update_protection: u64,
    pub enable_file_override: bool,
    /// R68: a script found in OPcache is checked with `access(R_OK)`.
    pub validate_permission: bool,
    /// R67: the directory of OPcache's file cache (empty: none) ...
    pub file_cache: String,
    /// ... and whether it is the only cache (no shared memory).
    pub file_cache_only: bool,
    /// Bytes.
    pub realpath_cache_size: u64,
    /// Seconds.
    pub realpath_cache_ttl: u64,
    /// Empty: not set.
    pub open_basedir: String,
    pub include_path: String,
    pub user_ini_cache_ttl: u64,
    pub user_ini_filename: String,
}

/// A value that does not parse, with the key and where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: {key}: bad value {value:?}: expected {expected}")]
    BadValue {
        origin: String,
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("{origin}: expected key=value, got {line:?}")]
    BadLine { origin: String, line: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}: unknown setting {key:?}{}: the model uses {}", suggestion.map(|s| format!(" (did you mean {s}?)")).unwrap_or_default(), KEYS.join(", "))]
    Unknown {
        origin: String,
        key: String,
        suggestion: Option<&'static str>,
    },
}

/// Every setting the model uses ([`PhpConfig::set`] knows each).
pub const KEYS: &[&str] = &[
    "opcache.enable",
    "opcache.enable_cli",
    "opcache.validate_timestamps",
    "opcache.revalidate_freq",
    "opcache.revalidate_path",
    "opcache.max_accelerated_files",
    "opcache.file_update_protection",
    "opcache.enable_file_override",
    "opcache.validate_permission",
    "opcache.file_cache",
    "opcache.file_cache_only",
    "realpath_cache_size",
    "realpath_cache_ttl",
    "open_basedir",
    "include_path",
    "user_ini.filename",
    "user_ini.cache_ttl",
];

/// The setting of [`KEYS`] nearest to `key` by edit distance (at most a
/// third of its length), for "did you mean".
pub fn suggest(key: &str) -> Option<&'static str> {
    statstorm_trace::suggest::closest(key, KEYS.iter().copied())
}

impl Default for PhpConfig {
    fn default() -> Self {
        let mut c = PhpConfig {
            opcache_enable: false,
            opcache_enable_cli: false,
            validate_timestamps: false,
            revalidate_freq: 0,
            revalidate_path: false,
            max_accelerated_files: 0,
            file_update_protection: 0,
            enable_file_override: false,
            validate_permission: false,
            file_cache: String::new(),
            file_cache_only: false,
            realpath_cache_size: 0,
            realpath_cache_ttl: 0,
            open_basedir: String::new(),
            include_path: String::new(),
            user_ini_cache_ttl: 0,
            user_ini_filename: String::new(),
        };
        for (k, v) in DEFAULTS {
            c.set(k, v, "defaults")
                .expect("the defaults table parses")
                .expect("every default key is known");
        }
        c
    }
}

/// `On/Off/1/0/yes/no/true/false/none/""` as PHP's `zend_ini_parse_bool`
/// (plus the integer form) reads them.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" => Some(true),
        "off" | "no" | "false" | "none" | "" => Some(false),
        n => n.parse::<i64>().ok().map(|i| i != 0),
    }
}

/// Integer with an optional K/M/G suffix (`zend_atol`).
pub fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mul) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1u64 << 10),
        'm' | 'M' => (&v[..v.len() - 1], 1 << 20),
        'g' | 'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

fn unquote(v: &str) -> &str {
    let v = v.trim();
    if v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
    {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

impl PhpConfig {
    /// Sets one key. `Ok(None)` when the key is not one the model uses
    /// (the caller notes it); an error names the key for a malformed value.
    pub fn set(&mut self, key: &str, value: &str, origin: &str) -> Result<Option<()>, ConfigError> {
        let key = key.trim();
        let value = unquote(value);
        let Some(t) = ty(key) else { return Ok(None) };
        let bad = |expected| ConfigError::BadValue {
            origin: origin.to_string(),
            key: key.to_string(),
            value: value.to_string(),
            expected,
        };
        let b = || parse_bool(value).ok_or_else(|| bad("a boolean (On/Off/1/0/yes/no/true/false)"));
        let i = || {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| bad("a non-negative integer"))
        };
        match (key, t) {
            ("opcache.enable", _) => self.opcache_enable = b()?,
            ("opcache.enable_cli", _) => self.opcache_enable_cli = b()?,
            ("opcache.validate_timestamps", _) => self.validate_timestamps = b()?,
            ("opcache.revalidate_path", _) => self.revalidate_path = b()?,
            ("opcache.enable_file_override", _) => self.enable_file_override = b()?,
            ("opcache.validate_permission", _) => self.validate_permission = b()?,
            ("opcache.file_cache_only", _) => self.file_cache_only = b()?,
            ("opcache.file_cache", _) => self.file_cache = value.to_string(),
            ("opcache.revalidate_freq", _) => self.revalidate_freq = i()?,
            ("opcache.max_accelerated_files", _) => self.max_accelerated_files = i()?,
            ("opcache.file_update_protection", _) => self.file_update_protection = i()?,
            ("realpath_cache_ttl", _) => self.realpath_cache_ttl = i()?,
            ("user_ini.cache_ttl", _) => self.user_ini_cache_ttl = i()?,
            ("realpath_cache_size", _) => {
                self.realpath_cache_size =
                    parse_size(value).ok_or_else(|| bad("a size (number with optional K, M, G)"))?
            }
            ("open_basedir", _) => self.open_basedir = value.to_string(),
            ("include_path", _) => self.include_path = value.to_string(),
            ("user_ini.filename", _) => self.user_ini_filename = value.to_string(),
            _ => return Ok(None),
        }
        Ok(Some(()))
    }

    /// Applies `key=value` settings a person typed (`--php`, `--from-php`):
    /// a key the model does not use is an error with the nearest known one
    /// (a php.ini, by contrast, holds many settings the model has no use
    /// for). Returns no notes; the `Vec` keeps the callers' shape.
    pub fn apply_flags<S: AsRef<str>>(&mut self, flags: &[S]) -> Result<Vec<String>, ConfigError> {
        for f in flags {
            let f = f.as_ref();
            let Some((k, v)) = f.split_once('=') else {
                return Err(ConfigError::BadLine {
                    origin: "--php flag".into(),
                    line: f.to_string(),
                });
            };
            if self.set(k, v, &format!("setting {f:?}"))?.is_none() {
                return Err(ConfigError::Unknown {
                    origin: format!("setting {f:?}"),
                    key: k.trim().to_string(),
                    suggestion: suggest(k.trim()),
                });
            }
        }
        Ok(Vec::new())
    }

    /// Applies a php.ini text (`key = value`, `;` comments, `[sections]`);
    /// keys the model does not use are returned as notes.
    pub fn apply_ini(&mut self, text: &str, origin: &str) -> Result<Vec<String>, ConfigError> {
        let mut notes = Vec::new();
        for p in ini_pairs(text, origin)? {
            if self.set(&p.key, &p.value, &p.at)?.is_none() {
                notes.push(format!("{}: ignored unknown setting {:?}", p.at, p.key));
            }
        }
        Ok(notes)
    }

    /// Applies `php -i` / `php-fpm -i` text output (see [`php_info_pairs`]).
    pub fn apply_php_info(&mut self, text: &str, origin: &str) -> Result<Vec<String>, ConfigError> {
        let pairs = php_info_pairs(text, origin);
        for p in &pairs {
            self.set(&p.key, &p.value, &p.at)?;
        }
        let mut notes = Vec::new();
        if pairs.is_empty() {
            notes.push(format!(
                "{origin}: no known settings found (is it `php -i` output?)"
            ));
        }
        Ok(notes)
    }

    pub fn from_ini_file(path: &Path) -> Result<(Self, Vec<String>), ConfigError> {
        let mut c = Self::default();
        let notes = c.apply_ini_file(path)?;
        Ok((c, notes))
    }

    pub fn apply_ini_file(&mut self, path: &Path) -> Result<Vec<String>, ConfigError> {
        let text = read(path)?;
        self.apply_ini(&text, &path.display().to_string())
    }

    pub fn apply_php_info_file(&mut self, path: &Path) -> Result<Vec<String>, ConfigError> {
        let text = read(path)?;
        self.apply_php_info(&text, &path.display().to_string())
    }

    /// Whether OPcache caches scripts for this SAPI.
    pub fn opcache_on(&self, cli: bool) -> bool {
        self.opcache_enable && (!cli || self.opcache_enable_cli)
    }

    /// R58: a non-empty open_basedir forces the realpath cache size to 0
    /// (`main/main.c` `php_request_startup`).
    pub fn realpath_cache_enabled(&self) -> bool {
        self.realpath_cache_size > 0 && self.open_basedir.is_empty()
    }

    /// The settings as `key=value` strings, in the defaults table's order.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let b = |x: bool| if x { "1" } else { "0" }.to_string();
        vec![
            ("opcache.enable".into(), b(self.opcache_enable)),
            ("opcache.enable_cli".into(), b(self.opcache_enable_cli)),
            (
                "opcache.validate_timestamps".into(),
                b(self.validate_timestamps),
            ),
            (
                "opcache.revalidate_freq".into(),
                self.revalidate_freq.to_string(),
            ),
            ("opcache.revalidate_path".into(), b(self.revalidate_path)),
            (
                "opcache.max_accelerated_files".into(),
                self.max_accelerated_files.to_string(),
            ),
            (
                "opcache.file_update_protection".into(),
                self.file_update_protection.to_string(),
            ),
            (
                "opcache.enable_file_override".into(),
                b(self.enable_file_override),
            ),
            (
                "opcache.validate_permission".into(),
                b(self.validate_permission),
            ),
            ("opcache.file_cache".into(), self.file_cache.clone()),
            ("opcache.file_cache_only".into(), b(self.file_cache_only)),
            (
                "realpath_cache_size".into(),
                self.realpath_cache_size.to_string(),
            ),
            (
                "realpath_cache_ttl".into(),
                self.realpath_cache_ttl.to_string(),
            ),
            ("open_basedir".into(), self.open_basedir.clone()),
            ("include_path".into(), self.include_path.clone()),
            (
                "user_ini.cache_ttl".into(),
                self.user_ini_cache_ttl.to_string(),
            ),
            ("user_ini.filename".into(), self.user_ini_filename.clone()),
        ]
    }

    /// The keys whose values differ from `other`'s.
    pub fn diff(&self, other: &PhpConfig) -> Vec<(String, String, String)> {
        self.to_pairs()
            .into_iter()
            .zip(other.to_pairs())
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, b)| (a.0, a.1, b.1))
            .collect()
    }
}

impl fmt::Display for PhpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in self.to_pairs() {
            writeln!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// One `key = value` of a settings text, with where it was (`file:line`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub key: String,
    pub value: String,
    pub at: String,
}

/// The `key = value` lines of a php.ini text (`;` and `#` comments,
/// `[sections]` skipped; a trailing `; comment` outside quotes dropped), in
/// order, every key kept (known to the model or not).
pub fn ini_pairs(text: &str, origin: &str) -> Result<Vec<Pair>, ConfigError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with(';') || l.starts_with('#') || l.starts_with('[') {
            continue;
        }
        let at = format!("{origin}:{}", n + 1);
        let Some((k, v)) = l.split_once('=') else {
            return Err(ConfigError::BadLine {
                origin: at,
                line: l.to_string(),
            });
        };
        let v = v.trim();
        let v = if v.starts_with('"') {
            v
        } else {
            v.split(';').next().unwrap_or("")
        };
        out.push(Pair {
            key: k.trim().to_string(),
            value: v.to_string(),
            at,
        });
    }
    Ok(out)
}

/// The settings the model uses in `php -i` / `php-fpm -i` text output
/// (`key => local => master`; the local value is the one in force, `no
/// value` an empty one). The rest of the page is not settings.
pub fn php_info_pairs(text: &str, origin: &str) -> Vec<Pair> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut parts = line.split(" => ");
        let (Some(k), Some(local)) = (parts.next(), parts.next()) else {
            continue;
        };
        if ty(k.trim()).is_none() {
            continue;
        }
        let local = if local.trim() == "no value" {
            ""
        } else {
            local
        };
        out.push(Pair {
            key: k.trim().to_string(),
            value: local.to_string(),
            at: format!("{origin}:{}", n + 1),
        });
    }
    out
}

/// Largest settings file read (php.ini, `php -i` output): real ones are a
/// few hundred KiB at most; anything bigger is not one (`/dev/zero`).
pub const MAX_SETTINGS_FILE: u64 = statstorm_trace::input::SIDE_FILE_LIMIT;

/// Reads a settings file of at most [`MAX_SETTINGS_FILE`] bytes.
pub fn read(path: &Path) -> Result<String, ConfigError> {
    statstorm_trace::input::read_text_capped(path, MAX_SETTINGS_FILE).map_err(|e| ConfigError::Io {
        path: path.display().to_string(),
        source: e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_one_set_knows_and_typos_get_a_suggestion() {
        for k in KEYS {
            assert!(ty(k).is_some(), "{k}");
        }
        let mut c = PhpConfig::default();
        let e = c.apply_flags(&["realpath_cache_sise=4M"]).unwrap_err();
        assert!(
            matches!(
                &e,
                ConfigError::Unknown { key, suggestion: Some("realpath_cache_size"), .. } if key == "realpath_cache_sise"
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("did you mean realpath_cache_size?"),
            "{e}"
        );
        let e = c.apply_flags(&["memory_limit=1G"]).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::Unknown {
                    suggestion: None,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn defaults_are_php_82() {
        let c = PhpConfig::default();
        assert!(c.opcache_enable && !c.opcache_enable_cli && c.validate_timestamps);
        assert_eq!(c.revalidate_freq, 2);
        assert_eq!(c.realpath_cache_size, 4096 * 1024);
        assert_eq!(c.realpath_cache_ttl, 120);
        assert_eq!(c.file_update_protection, 2);
        assert_eq!(c.max_accelerated_files, 10000);
        assert!(c.open_basedir.is_empty() && c.realpath_cache_enabled());
    }

    #[test]
    fn ini_text_with_comments_quotes_sections_and_unknown_keys() {
        let mut c = PhpConfig::default();
        let notes = c
            .apply_ini(
                "[PHP]\n; comment\nrealpath_cache_size = 16k ; old default\n\
                 open_basedir = \"/srv:/tmp\"\nmemory_limit = 128M\n\
                 [opcache]\nopcache.validate_timestamps=Off\nopcache.revalidate_freq = 60\n",
                "php.ini",
            )
            .unwrap();
        assert_eq!(c.realpath_cache_size, 16 * 1024);
        assert_eq!(c.open_basedir, "/srv:/tmp");
        assert!(!c.validate_timestamps);
        assert_eq!(c.revalidate_freq, 60);
        assert!(!c.realpath_cache_enabled(), "R58: open_basedir disables it");
        assert_eq!(
            notes,
            vec!["php.ini:5: ignored unknown setting \"memory_limit\""]
        );
    }

    #[test]
    fn malformed_values_name_the_key_and_line() {
        let mut c = PhpConfig::default();
        let e = c
            .apply_ini("\n\nopcache.revalidate_freq = soon\n", "x.ini")
            .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("x.ini:3") && m.contains("opcache.revalidate_freq"),
            "{m}"
        );
        let e = c
            .apply_flags(&["opcache.enable=maybe"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("opcache.enable"), "{e}");
        let e = c
            .apply_flags(&["realpath_cache_size=12X"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("realpath_cache_size"), "{e}");
        assert!(c.apply_flags(&["novalue"]).is_err());
    }

    #[test]
    fn booleans_and_sizes() {
        for (s, b) in [
            ("On", true),
            ("off", false),
            ("1", true),
            ("0", false),
            ("yes", true),
        ] {
            assert_eq!(parse_bool(s), Some(b), "{s}");
        }
        assert_eq!(parse_bool("TRUE"), Some(true));
        assert_eq!(parse_bool("nope"), None);
        assert_eq!(parse_size("4096K"), Some(4 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("K"), None);
    }

    #[test]
    fn php_info_output() {
        let text = "Directive => Local Value => Master Value\n\
                    open_basedir => no value => no value\n\
                    realpath_cache_size => 0 => 4096K\n\
                    opcache.revalidate_freq => 60 => 60\n\
                    opcache.enable => On => On\n\
                    PHP Version => 8.2.35\n";
        let mut c = PhpConfig {
            open_basedir: "/x".into(),
            ..Default::default()
        };
        let notes = c.apply_php_info(text, "info").unwrap();
        assert!(notes.is_empty());
        assert_eq!(c.open_basedir, "");
        assert_eq!(
            c.realpath_cache_size, 0,
            "the local value is the one in force"
        );
        assert_eq!(c.revalidate_freq, 60);
    }

    /// The defaults table matches the real `php -i` of this machine.
    #[test]
    fn defaults_match_real_php() {
        let so = std::process::Command::new("php")
            .args(["-n", "-r", "echo ini_get('extension_dir');"])
            .output()
            .expect("php (php-cli 8.2) must be installed for this test");
        let dir = String::from_utf8_lossy(&so.stdout).to_string();
        let out = std::process::Command::new("php")
            .args([
                "-n",
                "-d",
                &format!("zend_extension={dir}/opcache.so"),
                "-i",
            ])
            .output()
            .expect("php -i");
        assert!(out.status.success());
        // start from something else so every key must be read
        let mut c = PhpConfig {
            revalidate_freq: 999,
            realpath_cache_size: 1,
            ..Default::default()
        };
        c.apply_php_info(&String::from_utf8_lossy(&out.stdout), "php -i")
            .unwrap();
        assert_eq!(c, PhpConfig::default());
    }
}
