//! php-fpm pool files (`/etc/php/*/fpm/pool.d/*.conf`): each pool's
//! process manager, worker count, listen socket and backlog, and its
//! `php_value`s, read the way php-fpm reads them.
//!
//! What php-fpm does (php-src `sapi/fpm/fpm/fpm_conf.c`, `fpm_php.c`,
//! `fpm_sockets.h`; checked line by line against Debian 12's php-fpm
//! 8.2.36, `php-fpm8.2 -tt`), and what this reader does with it:
//!
//! - `fpm_conf_load_ini_file` hands each line on its own to the INI parser
//!   (`zend_parse_ini_string`, `ZEND_INI_SCANNER_NORMAL`): a value never
//!   spans lines, and lines are numbered from 1 by `\n`.
//! - `;` starts a comment, at the start of a line or after a value (not
//!   inside quotes). `#` does not: PHP 7.0 dropped `#` comments from INI
//!   files, and php-fpm refuses a line that starts with `#` ("value is
//!   NULL" or "unknown directive"). Such a line is skipped and named.
//! - `[name]` opens a pool and `[global]` (any case) the global section
//!   (`fpm_conf_ini_parser_section`); a name seen before (compared without
//!   case, `strcasecmp`) reopens that pool. Global entries are no pool's:
//!   passed over, not counted.
//! - A value is bare text (trimmed; `on`/`yes`/`true` alone read as `1`,
//!   `off`/`no`/`false`/`none`/`null` alone as empty, as the INI scanner
//!   reads them), double-quoted text (`\"`, `\\`, `\$` escaped, `;` kept),
//!   single-quoted text (raw), or these side by side. `$pool` is replaced
//!   by the pool's name, again until none is left
//!   (`fpm_conf_expand_pool_name`; in strings and `php_value`s, not in
//!   `include`). Kept as written, not evaluated: PHP constants and INI
//!   expressions (`E_ALL & ~E_NOTICE`, which php-fpm turns into a number)
//!   and `${VAR}` (php-fpm's environment, not in the file).
//! - Entries are matched without case against php-fpm's pool options
//!   (`ini_fpm_pool_options`, `fpm_conf_ini_parser_entry`). An unknown
//!   option, or a value its parser refuses (`fpm_conf_set_integer`: an
//!   optional `-` then digits, read by `atoi`; `fpm_conf_set_pm`;
//!   booleans; times with an `s`/`m`/`h`/`d` suffix), makes php-fpm refuse
//!   the file: the line is skipped and named. So is `pm.max_children`
//!   below 1 (`fpm_conf_process_all_pools`: "must be a positive value").
//!   A later line of an option wins (`fpm_conf_set_string` replaces).
//! - `php_value[K]`, `php_admin_value[K]`, `php_flag[K]`, `php_admin_flag[K]`
//!   (`fpm_conf_ini_parser_array`; names matched exactly, with case) need
//!   a key; a flag must be a boolean and is kept as `1` or `0`
//!   (`fpm_conf_set_array`). `env[K]` and `access.suppress_path[]` are
//!   checked, not kept.
//! - `include = GLOB` (exactly `include`) is recorded with its line, not
//!   followed.
//! - Entries before any section: php-fpm gives them to the section open
//!   where the file is included (`[global]`, from php-fpm.conf's
//!   `include=`). Here they belong to no pool: skipped and counted.
//!
//! Compared line by line with `php-fpm8.2 -tt` (1,370 lines, hand-made
//! and random): the values read and the lines refused agree, apart from
//! checks across a pool or the machine that a line reader does not make
//! (the `user` must exist; a dynamic pool's spare servers; `slowlog` for
//! `request_slowlog_timeout`).
//!
//! Nothing is read beyond the text: each value is a piece of it, and all
//! `$pool` expansions of a file may add at most the file's own length
//! (a line that would go beyond is skipped and named).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// net.core.somaxconn as Linux sets it since 5.4 (`SOMAXCONN`, raised
/// from 128 by torvalds/linux 19f92a030ca6). Linux caps every listen(2)
/// backlog at net.core.somaxconn, and a negative one asks for exactly that
/// (net/socket.c `__sys_listen` compares the backlog as unsigned).
pub const DEFAULT_SOMAXCONN: u32 = 4096;

/// The `listen.backlog` php-fpm passes to listen(2) for a pool that states
/// none, on Linux since PHP 8.2.0: `FPM_BACKLOG_DEFAULT` of fpm_sockets.h,
/// set by `fpm_worker_pool_config_alloc` (php/php-src#8410; NEWS of 8.2.0,
/// "Changed default for listen.backlog on Linux to -1"; Debian 12's
/// `php-fpm8.2 -tt` prints `listen.backlog = -1`).
pub const FPM_BACKLOG_DEFAULT: i32 = -1;

/// `FPM_BACKLOG_DEFAULT` on Linux before PHP 8.2: 511 (php/php-src#731,
/// 2014, to 8.1). Those versions also raised an `ondemand` pool's smaller
/// backlog to it.
pub const FPM_BACKLOG_DEFAULT_BEFORE_8_2: i32 = 511;

/// The listen queue of a pool that states no `listen.backlog`, under
/// php-fpm >= 8.2 on Linux >= 5.4: the -1 php-fpm passes gets
/// net.core.somaxconn, [`DEFAULT_SOMAXCONN`] unless the machine changed it.
/// (php-fpm 8.1 and older asked for [`FPM_BACKLOG_DEFAULT_BEFORE_8_2`].)
pub const DEFAULT_LISTEN_BACKLOG: u32 = DEFAULT_SOMAXCONN;

/// A pool's process manager (`pm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pm {
    Static,
    Dynamic,
    Ondemand,
}

impl Pm {
    /// `static`, `dynamic` or `ondemand`, in any case (`fpm_conf_set_pm`).
    pub fn parse(s: &str) -> Option<Pm> {
        [Pm::Static, Pm::Dynamic, Pm::Ondemand]
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Pm::Static => "static",
            Pm::Dynamic => "dynamic",
            Pm::Ondemand => "ondemand",
        }
    }
}

impl fmt::Display for Pm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pool (`[name]` section) of a pool file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The section's name as first written.
    pub name: String,
    pub pm: Option<Pm>,
    /// `pm.max_children` (at least 1).
    pub max_children: Option<u32>,
    /// `listen.backlog` as stated, as php-fpm reads it (`atoi`); a negative
    /// one asks for the kernel's maximum. [`Pool::backlog`] resolves it.
    pub listen_backlog: Option<i32>,
    /// `listen`, with `$pool` replaced.
    pub listen: Option<String>,
    /// The `php_value`/`php_admin_value`/`php_flag`/`php_admin_flag`
    /// lines, in file order (see [`Pool::php_settings`] for the order
    /// php-fpm applies them in).
    pub php: Vec<PhpValue>,
    /// The line of the `[name]` header (the first, when reopened).
    pub line: usize,
}

/// One `php_value[key] = value` line (or its admin or flag kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhpValue {
    pub key: String,
    /// The value php-fpm hands to PHP: `$pool` replaced; for a flag `1` or
    /// `0`.
    pub value: String,
    /// `php_admin_value`/`php_admin_flag`.
    pub admin: bool,
    /// `php_flag`/`php_admin_flag`.
    pub flag: bool,
    pub line: usize,
}

/// A line that was not read, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub line: usize,
    /// The line as written.
    pub text: String,
    pub why: String,
}

impl Skipped {
    /// `FILE:LINE: why: text`.
    pub fn describe(&self, file: &str) -> String {
        format!("{file}:{}: {}: {}", self.line, self.why, self.text.trim())
    }
}

/// What a pool file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolFile {
    /// In the order of their first header.
    pub pools: Vec<Pool>,
    pub skipped: Vec<Skipped>,
    /// `include = GLOB` lines (line, glob as written), not followed.
    pub includes: Vec<(usize, String)>,
}

impl PoolFile {
    /// The pool of this name (compared without case, as php-fpm does).
    pub fn pool(&self, name: &str) -> Option<&Pool> {
        self.pools
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
    }
}

/// A pool file that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct Error {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

impl Pool {
    fn new(name: &str, line: usize) -> Pool {
        Pool {
            name: name.to_string(),
            pm: None,
            max_children: None,
            listen_backlog: None,
            listen: None,
            php: Vec::new(),
            line,
        }
    }

    /// The listen queue: `listen.backlog` as stated, or
    /// [`DEFAULT_LISTEN_BACKLOG`] when none is; a negative one gives
    /// [`DEFAULT_SOMAXCONN`]. Not capped: Linux caps it at the machine's
    /// net.core.somaxconn, which [`Pool::backlog_under`] takes.
    pub fn backlog(&self) -> u32 {
        match self.listen_backlog {
            Some(n) if n >= 0 => n as u32,
            Some(_) => DEFAULT_SOMAXCONN,
            None => DEFAULT_LISTEN_BACKLOG,
        }
    }

    /// The listen queue Linux gives the pool under net.core.somaxconn
    /// `somaxconn` (php-fpm >= 8.2): the stated backlog, or -1 when none
    /// is, compared as unsigned and capped at `somaxconn`, as
    /// `__sys_listen` does.
    pub fn backlog_under(&self, somaxconn: u32) -> u32 {
        (self.listen_backlog.unwrap_or(FPM_BACKLOG_DEFAULT) as u32).min(somaxconn)
    }

    /// `key=value` for each php value, in the order php-fpm applies them,
    /// so that applied in this order the last one of a key wins as in the
    /// pool: `fpm_conf_set_array` puts each line at the head of its list
    /// (`kv->next = **parent`) and `fpm_php_apply_defines` applies
    /// `php_value`s and `php_flag`s, then the admin ones, each list from
    /// its head. So: the non-admin lines from the last to the first, then
    /// the admin lines from the last to the first; of two lines of a key
    /// the first in the file wins, and an admin line beats any non-admin
    /// one (seen on php-fpm 8.2: `php_admin_value[memory_limit]` lines of
    /// 100M then 200M, after `php_value` lines, give 100M). Flags are `1`
    /// or `0`.
    pub fn php_settings(&self) -> Vec<String> {
        let user = self.php.iter().rev().filter(|v| !v.admin);
        let admin = self.php.iter().rev().filter(|v| v.admin);
        user.chain(admin)
            .map(|v| format!("{}={}", v.key, v.value))
            .collect()
    }

    /// [`Pool::php_settings`] as settings of `file`, each naming its line
    /// (`FILE:LINE`).
    pub fn php_pairs(&self, file: &str) -> Vec<statstorm_php::config::Pair> {
        let user = self.php.iter().rev().filter(|v| !v.admin);
        let admin = self.php.iter().rev().filter(|v| v.admin);
        user.chain(admin)
            .map(|v| statstorm_php::config::Pair {
                key: v.key.clone(),
                value: v.value.clone(),
                at: format!("{file}:{}", v.line),
            })
            .collect()
    }

    /// The line of `key` that takes effect (see [`Pool::php_settings`]):
    /// the first admin line of it, else its first line.
    pub fn php_value(&self, key: &str) -> Option<&PhpValue> {
        let of_key = || self.php.iter().filter(move |v| v.key == key);
        of_key().find(|v| v.admin).or_else(|| of_key().next())
    }
}

/// Reads a pool file (bytes that are not UTF-8 are replaced, as the other
/// readers of the recording machine's files do).
pub fn read(path: &Path) -> Result<PoolFile, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error {
        path: path.display().to_string(),
        source,
    })?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

/// Reads the text of a pool file. Never fails: a line php-fpm would refuse,
/// or that belongs to no pool, goes to [`PoolFile::skipped`].
pub fn parse(text: &str) -> PoolFile {
    let mut p = Parser {
        file: PoolFile::default(),
        section: Section::None,
        by_name: HashMap::new(),
        budget: text.len(),
    };
    for (i, line) in text.lines().enumerate() {
        if let Err(why) = p.line(i + 1, line) {
            p.file.skipped.push(Skipped {
                line: i + 1,
                text: line.to_string(),
                why,
            });
        }
    }
    p.file
}

/// The value kinds of php-fpm's option parsers.
#[derive(Clone, Copy)]
enum Kind {
    /// `fpm_conf_set_string`
    Str,
    /// `fpm_conf_set_integer`
    Int,
    /// `fpm_conf_set_boolean`
    Bool,
    /// `fpm_conf_set_time`
    Time,
    /// `fpm_conf_set_pm`
    Pm,
    /// `fpm_conf_set_rlimit_core`
    Rlimit,
}

/// php-fpm's pool options (`ini_fpm_pool_options` of fpm_conf.c), with
/// those of other versions and builds (ACL, FreeBSD's setfib, AppArmor):
/// which ones a given php-fpm knows is not in the file.
const POOL_OPTIONS: &[(&str, Kind)] = &[
    ("prefix", Kind::Str),
    ("user", Kind::Str),
    ("group", Kind::Str),
    ("listen", Kind::Str),
    ("listen.backlog", Kind::Int),
    ("listen.acl_users", Kind::Str),
    ("listen.acl_groups", Kind::Str),
    ("listen.owner", Kind::Str),
    ("listen.group", Kind::Str),
    ("listen.mode", Kind::Str),
    ("listen.allowed_clients", Kind::Str),
    ("listen.setfib", Kind::Int),
    ("process.priority", Kind::Int),
    ("process.dumpable", Kind::Bool),
    ("pm", Kind::Pm),
    ("pm.max_children", Kind::Int),
    ("pm.start_servers", Kind::Int),
    ("pm.min_spare_servers", Kind::Int),
    ("pm.max_spare_servers", Kind::Int),
    ("pm.max_spawn_rate", Kind::Int),
    ("pm.process_idle_timeout", Kind::Time),
    ("pm.max_requests", Kind::Int),
    ("pm.status_path", Kind::Str),
    ("pm.status_listen", Kind::Str),
    ("ping.path", Kind::Str),
    ("ping.response", Kind::Str),
    ("access.log", Kind::Str),
    ("access.format", Kind::Str),
    ("slowlog", Kind::Str),
    ("request_slowlog_timeout", Kind::Time),
    ("request_slowlog_trace_depth", Kind::Int),
    ("request_terminate_timeout", Kind::Time),
    ("request_terminate_timeout_track_finished", Kind::Bool),
    ("rlimit_files", Kind::Int),
    ("rlimit_core", Kind::Rlimit),
    ("chroot", Kind::Str),
    ("chdir", Kind::Str),
    ("catch_workers_output", Kind::Bool),
    ("decorate_workers_output", Kind::Bool),
    ("clear_env", Kind::Bool),
    ("security.limit_extensions", Kind::Str),
    ("apparmor_hat", Kind::Str),
];

/// Values php-fpm 8.2 takes as a true and a false boolean, after the INI
/// scanner has turned bare `on`/`yes`/`true` into `1` and bare
/// `off`/`no`/`false`/`none`/`null` into empty (quoted words are compared
/// as written, with case: `"on"` is true, `"On"` is refused).
const TRUE_WORDS: [&str; 4] = ["1", "on", "yes", "true"];
const FALSE_WORDS: [&str; 6] = ["", "0", "off", "no", "false", "none"];

fn flag_value(v: &str) -> Option<&'static str> {
    if TRUE_WORDS.contains(&v) {
        Some("1")
    } else if FALSE_WORDS.contains(&v) {
        Some("0")
    } else {
        None
    }
}

enum Section {
    /// Before any section header.
    None,
    Global,
    /// Index into `pools`.
    Pool(usize),
}

struct Parser {
    file: PoolFile,
    section: Section,
    /// Pools by their name in lower case (php-fpm compares names with
    /// `strcasecmp`).
    by_name: HashMap<String, usize>,
    /// Bytes `$pool` expansions may still add.
    budget: usize,
}

fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

fn trim_blanks(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

impl Parser {
    /// Reads one line; `Err(why)` skips it.
    fn line(&mut self, n: usize, raw: &str) -> Result<(), String> {
        // blanks at the end stay: a value's end may depend on them
        let t = raw.trim_start_matches([' ', '\t']);
        if trim_blanks(t).is_empty() || t.starts_with(';') {
            return Ok(());
        }
        if t.starts_with('#') {
            return Err(
                "`#` starts no comment in php-fpm (PHP 7.0 dropped `#` comments \
                        from INI files), which refuses this line; comment with `;`"
                    .into(),
            );
        }
        if let Some(rest) = t.strip_prefix('[') {
            return self.header(n, rest);
        }
        let Some((key, value)) = t.split_once('=') else {
            return Err("no `=`: php-fpm refuses an entry without a value".into());
        };
        let key = trim_blanks(key);
        if key.is_empty() {
            return Err("no name before `=`".into());
        }
        let value = ini_value(value)?;
        if key == "include" {
            self.file.includes.push((n, value));
            return Ok(());
        }
        match self.section {
            Section::None => Err("before any [pool] section: belongs to no pool (php-fpm \
                                  gives it to the section open where the file is included)"
                .into()),
            Section::Global if key.contains('[') => Err(format!(
                "`{key}` in [global]: php-fpm takes arrays in pools only"
            )),
            Section::Global => Ok(()),
            Section::Pool(i) => self.entry(i, n, key, value),
        }
    }

    /// `[name]`, `rest` being what follows the `[`.
    fn header(&mut self, n: usize, rest: &str) -> Result<(), String> {
        let Some(end) = rest.find(']') else {
            return Err("a section header without `]`".into());
        };
        let name = &rest[..end];
        let after = trim_blanks(&rest[end + 1..]);
        if !(after.is_empty() || after.starts_with(';')) {
            return Err("text after the section header's `]`".into());
        }
        if name.eq_ignore_ascii_case("global") {
            self.section = Section::Global;
        } else {
            let next = self.file.pools.len();
            let i = *self
                .by_name
                .entry(name.to_ascii_lowercase())
                .or_insert(next);
            if i == next {
                self.file.pools.push(Pool::new(name, n));
            }
            self.section = Section::Pool(i);
        }
        Ok(())
    }

    /// `key = value` in the pool `i`.
    fn entry(&mut self, i: usize, n: usize, key: &str, value: String) -> Result<(), String> {
        if let Some(open) = key.find('[') {
            // blanks between the name and `[` are dropped
            return self.array(i, n, trim_blanks(&key[..open]), &key[open + 1..], value);
        }
        let Some(&(name, kind)) = POOL_OPTIONS
            .iter()
            .find(|(o, _)| o.eq_ignore_ascii_case(key))
        else {
            return Err(format!(
                "unknown pool option `{key}`: php-fpm refuses the file"
            ));
        };
        match kind {
            Kind::Str => {
                if name == "listen" {
                    if value.is_empty() {
                        // fpm_conf_process_all_pools: "no listen address"
                        return Err("listen: empty; php-fpm wants an address".into());
                    }
                    let v = expand(&mut self.budget, &self.file.pools[i].name, value)?;
                    self.file.pools[i].listen = Some(v);
                }
            }
            Kind::Int => {
                let Some(v) = fpm_int(&value) else {
                    return Err(format!(
                        "{name} `{value}`: not a number (php-fpm takes an optional `-` then digits)"
                    ));
                };
                let pool = &mut self.file.pools[i];
                match name {
                    "pm.max_children" if v < 1 => {
                        return Err(format!("pm.max_children {v}: php-fpm wants at least 1"));
                    }
                    "pm.max_children" => pool.max_children = Some(v as u32),
                    "listen.backlog" => pool.listen_backlog = Some(v),
                    _ => {}
                }
            }
            Kind::Bool => {
                if flag_value(&value).is_none() {
                    return Err(format!("{name} `{value}`: not a boolean"));
                }
            }
            Kind::Time => {
                // fpm_conf_set_time: judged by the last character only
                match value.bytes().last() {
                    None => return Err(format!("{name}: an empty time")),
                    Some(c) if c.is_ascii_digit() || b"smhd".contains(&c) => {}
                    Some(_) => {
                        return Err(format!(
                            "{name} `{value}`: not a time (digits, then s, m, h or d)"
                        ))
                    }
                }
            }
            Kind::Pm => match Pm::parse(&value) {
                Some(pm) => self.file.pools[i].pm = Some(pm),
                None => return Err(format!("pm `{value}`: not static, dynamic or ondemand")),
            },
            Kind::Rlimit => {
                if !value.eq_ignore_ascii_case("unlimited") && fpm_int(&value).is_none_or(|v| v < 0)
                {
                    return Err(format!(
                        "{name} `{value}`: neither `unlimited` nor a number of at least 0"
                    ));
                }
            }
        }
        Ok(())
    }

    /// `name[key] = value` in the pool `i`; `rest` is what follows the `[`.
    fn array(
        &mut self,
        i: usize,
        n: usize,
        name: &str,
        rest: &str,
        value: String,
    ) -> Result<(), String> {
        let Some(key) = rest.strip_suffix(']') else {
            return Err(format!("`{name}[` without a closing `]` before `=`"));
        };
        // the scanner drops the blanks after `[`, not those before `]`
        let key = key.trim_start_matches([' ', '\t']);
        let (admin, flag) = match name {
            "php_value" => (false, false),
            "php_admin_value" => (true, false),
            "php_flag" => (false, true),
            "php_admin_flag" => (true, true),
            "env" if key.is_empty() => return Err("`env[]` needs a key".into()),
            "env" if value.is_empty() => return Err(format!("`env[{key}]` has no value")),
            "env" => return Ok(()),
            "access.suppress_path" if !key.is_empty() || !value.starts_with('/') => {
                return Err(
                    "access.suppress_path[] takes no key and a value starting with `/`".into(),
                )
            }
            "access.suppress_path" => return Ok(()),
            _ => {
                return Err(format!(
                    "unknown directive `{name}[...]`: php-fpm refuses the file"
                ))
            }
        };
        if key.is_empty() {
            return Err(format!("`{name}[]` needs a key"));
        }
        let value = if flag {
            match flag_value(&value) {
                Some(v) => v.to_string(),
                None => {
                    return Err(format!(
                        "{name}[{key}] `{value}`: not a boolean (1/on/yes/true or \
                         0/off/no/false/none/empty)"
                    ))
                }
            }
        } else {
            expand(&mut self.budget, &self.file.pools[i].name, value)?
        };
        self.file.pools[i].php.push(PhpValue {
            key: key.to_string(),
            value,
            admin,
            flag,
            line: n,
        });
        Ok(())
    }
}

/// `atoi` of a value `fpm_conf_set_integer` takes (an optional `-`, then
/// digits; empty and `-` read as 0), else `None`. glibc's `atoi` is
/// `(int) strtol(..)`: saturated at the 64-bit range, then cut to 32 bits.
fn fpm_int(s: &str) -> Option<i32> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: i64 = 0;
    for b in digits.bytes() {
        let d = i64::from(b - b'0');
        v = v.saturating_mul(10);
        v = if neg {
            v.saturating_sub(d)
        } else {
            v.saturating_add(d)
        };
    }
    Some(v as i32)
}

/// `value` with every `$pool` replaced by `pool`, the way
/// `fpm_conf_expand_pool_name` does it: again from the start until none is
/// left, so a `$pool` formed by a replacement is replaced too. What it adds
/// comes out of `budget`.
fn expand(budget: &mut usize, pool: &str, value: String) -> Result<String, String> {
    const TOKEN: &[u8] = b"$pool";
    if !value.contains("$pool") {
        return Ok(value);
    }
    if pool.contains("$pool") {
        return Err("the pool's name holds `$pool`: php-fpm would replace it forever".into());
    }
    // Bytes move from `todo` (a stack, reversed) to `out`; `out` holds no
    // `$pool`, so one can only end at the byte just moved. Each
    // replacement adds `pool.len() - 5` bytes: a longer name runs into the
    // limit, a shorter one shrinks the rest, and `turns` bounds the 5-byte
    // case.
    let limit = value.len().saturating_add(*budget);
    let mut turns = limit;
    let mut out: Vec<u8> = Vec::with_capacity(value.len());
    let mut todo: Vec<u8> = value.bytes().rev().collect();
    while let Some(c) = todo.pop() {
        out.push(c);
        if out.ends_with(TOKEN) {
            out.truncate(out.len() - TOKEN.len());
            if out.len() + todo.len() + pool.len() > limit || turns == 0 {
                return Err("replacing `$pool` here would make the values longer than \
                            the file: not read"
                    .into());
            }
            turns -= 1;
            todo.extend(pool.bytes().rev());
        }
    }
    *budget -= out.len().saturating_sub(value.len());
    // Only whole strings were spliced, at ASCII bytes: still UTF-8.
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// A bare word the INI scanner reads as a boolean or null, and what it
/// gives.
fn keyword(w: &[u8]) -> Option<&'static str> {
    const TRUE: [&[u8]; 3] = [b"true", b"on", b"yes"];
    const FALSE: [&[u8]; 5] = [b"false", b"off", b"no", b"none", b"null"];
    if TRUE.iter().any(|k| k.eq_ignore_ascii_case(w)) {
        Some("1")
    } else if FALSE.iter().any(|k| k.eq_ignore_ascii_case(w)) {
        Some("")
    } else {
        None
    }
}

/// The value after `=` as php-fpm's INI parser gives it (see the module
/// doc), or why the parser refuses it.
fn ini_value(raw: &str) -> Result<String, String> {
    let b = raw.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    // words, single- and double-quoted pieces; a bare keyword among them
    let mut tokens = 0usize;
    let mut kw: Option<&'static str> = None;
    let mut word_end = |w: &[u8], tokens: &mut usize| {
        *tokens += 1;
        if let Some(k) = keyword(w) {
            kw = Some(k);
        }
    };
    loop {
        while i < b.len() && is_blank(b[i]) {
            i += 1;
        }
        if i >= b.len() || b[i] == b';' {
            break;
        }
        if b[i] == b'"' {
            tokens += 1;
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err("a `\"` not closed on its line".into()),
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    // `\"` ending the line ends the string, `\` kept
                    Some(b'\\')
                        if matches!(b.get(i + 1), Some(b'"' | b'\\' | b'$'))
                            && !(b[i + 1] == b'"' && i + 2 == b.len()) =>
                    {
                        out.push(b[i + 1]);
                        i += 2;
                    }
                    Some(&c) => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            continue;
        }
        // a bare run: words, and single-quoted pieces kept raw
        let first = tokens == 0 && out.is_empty();
        let mut keep = out.len(); // the run's trailing blanks after this are dropped
        let mut word: Option<usize> = None; // where the bare word being read starts
        let mut cut = false;
        while i < b.len() && b[i] != b';' && b[i] != b'"' {
            let c = b[i];
            if c == b'\'' || is_blank(c) {
                if let Some(w) = word.take() {
                    word_end(&out[w..], &mut tokens);
                }
            }
            match c {
                b'\'' => {
                    let Some(k) = b[i + 1..].iter().position(|&c| c == b'\'') else {
                        // php-fpm refuses it first; after text, drops it and
                        // the rest of the line, keeping the text as it is
                        if first && out.is_empty() {
                            return Err("a `'` not closed on its line".into());
                        }
                        cut = true;
                        break;
                    };
                    tokens += 1;
                    out.extend_from_slice(&b[i + 1..i + 1 + k]);
                    i += k + 2;
                    keep = out.len();
                }
                b'=' => {
                    return Err(
                        "`=` in a value: php-fpm's INI parser refuses it (quote the value)".into(),
                    )
                }
                c => {
                    if !is_blank(c) {
                        word.get_or_insert(out.len());
                    }
                    out.push(c);
                    i += 1;
                    if !is_blank(c) {
                        keep = out.len();
                    }
                }
            }
        }
        if let Some(w) = word.take() {
            word_end(&out[w..keep.max(w)], &mut tokens);
        }
        if cut {
            break;
        }
        out.truncate(keep);
    }
    if let Some(k) = kw {
        if tokens == 1 {
            return Ok(k.to_string());
        }
        return Err(
            "a boolean or null word (on, off, yes, no, true, false, none, null) \
                    among other text: php-fpm's INI parser refuses it (quote the value)"
                .into(),
        );
    }
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}
