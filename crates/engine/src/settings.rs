//! The settings a capture ran under, each with where its value came from.
//!
//! Stated settings win key by key (a `php -i` page, then a php.ini, then
//! `key=value` flags, each over the one before); what the trace shows fills
//! the keys nobody stated; every other key is PHP's default, *assumed* and
//! listed as such, never presented as known. A php.ini without the pool's
//! overrides therefore keeps the inferred values of the keys it does not
//! name, and a key the trace cannot show (the realpath cache's size under
//! open_basedir) is not guessed.

use serde::Serialize;
use statstorm_php::config::{ini_pairs, php_info_pairs, read, ConfigError, Pair, KEYS};
use statstorm_php::{PhpConfig, Workload};
use std::collections::BTreeMap;
use std::path::Path;

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Provenance {
    /// Stated: `at` is a flag (`--from-php`) or a file's line (`php.ini:12`).
    Stated { at: String },
    /// Shown by the trace (the lift's evidence says how).
    Inferred,
    /// Neither stated nor shown: PHP's default, assumed.
    Default,
}

/// The stated sources of the recorded settings (all optional).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stated<'a> {
    /// `php -i` / `php-fpm -i` output of the recording machine.
    pub php_info: Option<&'a Path>,
    /// The php.ini in force.
    pub ini: Option<&'a Path>,
    /// The php-fpm pool's php values (`php_admin_value[...]`, ...), in the
    /// order that reproduces the pool (over the php.ini; `at` names the
    /// file's line).
    pub pool: &'a [Pair],
    /// `key=value` settings (`at` names where they were given).
    pub flags: &'a [String],
}

impl Stated<'_> {
    /// Whether anything was stated.
    pub fn any(&self) -> bool {
        self.php_info.is_some()
            || self.ini.is_some()
            || !self.pool.is_empty()
            || !self.flags.is_empty()
    }
}

/// The recorded settings and the provenance of each key of [`KEYS`].
#[derive(Clone, Debug)]
pub struct Recorded {
    pub config: PhpConfig,
    pub provenance: BTreeMap<&'static str, Provenance>,
    /// Notes of the readers (settings in a php.ini the model has no use
    /// for, a `php -i` page with none of them).
    pub notes: Vec<String>,
}

impl Recorded {
    /// Keys at PHP's default, assumed.
    pub fn assumed(&self) -> Vec<&'static str> {
        self.provenance
            .iter()
            .filter(|(_, p)| **p == Provenance::Default)
            .map(|(k, _)| *k)
            .collect()
    }
}

fn key_of(k: &str) -> Option<&'static str> {
    KEYS.iter().copied().find(|x| *x == k)
}

/// The recorded settings of `w`: PHP's defaults, the trace's inferences
/// over them, the stated sources over those.
pub fn recorded(w: &Workload, stated: Stated<'_>) -> Result<Recorded, ConfigError> {
    let mut r = Recorded {
        config: PhpConfig::default(),
        provenance: KEYS.iter().map(|k| (*k, Provenance::Default)).collect(),
        notes: Vec::new(),
    };
    for (k, v) in &w.evidence.inferred {
        if r.config.set(k, v, "the trace")?.is_some() {
            if let Some(k) = key_of(k) {
                r.provenance.insert(k, Provenance::Inferred);
            }
        }
    }
    let apply = |pairs: Vec<Pair>, r: &mut Recorded, strict: bool| -> Result<(), ConfigError> {
        for p in pairs {
            match r.config.set(&p.key, &p.value, &p.at)? {
                Some(()) => {
                    if let Some(k) = key_of(&p.key) {
                        r.provenance
                            .insert(k, Provenance::Stated { at: p.at.clone() });
                    }
                }
                None if strict => {
                    return Err(ConfigError::Unknown {
                        suggestion: statstorm_php::config::suggest(&p.key),
                        origin: p.at,
                        key: p.key,
                    })
                }
                None => r
                    .notes
                    .push(format!("{}: ignored unknown setting {:?}", p.at, p.key)),
            }
        }
        Ok(())
    };
    if let Some(p) = stated.php_info {
        let origin = p.display().to_string();
        let pairs = php_info_pairs(&read(p)?, &origin);
        if pairs.is_empty() {
            r.notes.push(format!(
                "{origin}: no known settings found (is it `php -i` output?)"
            ));
        }
        apply(pairs, &mut r, false)?;
    }
    if let Some(p) = stated.ini {
        let pairs = ini_pairs(&read(p)?, &p.display().to_string())?;
        apply(pairs, &mut r, false)?;
    }
    apply(stated.pool.to_vec(), &mut r, false)?;
    let mut flags = Vec::new();
    for f in stated.flags {
        let Some((k, v)) = f.split_once('=') else {
            return Err(ConfigError::BadLine {
                origin: "--from-php".into(),
                line: f.clone(),
            });
        };
        flags.push(Pair {
            key: k.trim().to_string(),
            value: v.to_string(),
            at: "--from-php".into(),
        });
    }
    apply(flags, &mut r, true)?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(inferred: &[(&str, &str)]) -> Workload {
        let mut w: Workload = serde_json::from_str(
            r#"{"schema":"statstorm.workload/1","requests":[],"evidence":{"notes":[],"inferred":[],"complete":false}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        w.evidence.inferred = inferred
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        w
    }

    #[test]
    fn stated_keys_win_and_inference_fills_the_rest() {
        let w = workload(&[("open_basedir", "/srv"), ("opcache.enable", "0")]);
        let flags = vec!["opcache.enable=1".to_string()];
        let r = recorded(
            &w,
            Stated {
                flags: &flags,
                ..Stated::default()
            },
        )
        .unwrap();
        assert!(r.config.opcache_enable);
        assert_eq!(r.config.open_basedir, "/srv");
        assert_eq!(
            r.provenance["opcache.enable"],
            Provenance::Stated {
                at: "--from-php".into()
            }
        );
        assert_eq!(r.provenance["open_basedir"], Provenance::Inferred);
        assert_eq!(r.provenance["realpath_cache_size"], Provenance::Default);
        assert!(r.assumed().contains(&"realpath_cache_size"));
    }
}
