//! The php-fpm pool file reader (engine::evidence::fpm): Debian's stock
//! pool, a hand-made seed, bad lines named by their line, php-fpm's order
//! of php values, and arbitrary text (never a panic).

use proptest::prelude::*;
use statstorm_engine::evidence::fpm::{
    self, parse, Pm, PoolFile, DEFAULT_LISTEN_BACKLOG, DEFAULT_SOMAXCONN,
};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/evidence")
        .join(name)
}

fn whys(f: &PoolFile) -> Vec<(usize, &str)> {
    f.skipped.iter().map(|s| (s.line, s.why.as_str())).collect()
}

/// Debian 12's /etc/php/8.2/fpm/pool.d/www.conf as the package ships it.
#[test]
fn debian_www_conf() {
    let f = fpm::read(&fixture("www.conf")).unwrap();
    assert!(f.skipped.is_empty(), "{:?}", f.skipped);
    assert!(f.includes.is_empty());
    assert_eq!(f.pools.len(), 1);
    let p = &f.pools[0];
    assert_eq!(p.name, "www");
    assert_eq!(p.pm, Some(Pm::Dynamic));
    assert_eq!(p.max_children, Some(5));
    assert_eq!(p.listen.as_deref(), Some("/run/php/php8.2-fpm.sock"));
    assert_eq!(p.listen_backlog, None);
    assert_eq!(p.backlog(), DEFAULT_LISTEN_BACKLOG);
    // php-fpm 8.2 passes -1: the kernel's somaxconn, whatever it is
    assert_eq!(p.backlog_under(DEFAULT_SOMAXCONN), DEFAULT_SOMAXCONN);
    assert_eq!(p.backlog_under(128), 128);
    assert!(p.php.is_empty());
    assert!(p.php_settings().is_empty());
    assert_eq!(f.pool("WWW").map(|p| p.line), Some(4));
}

#[test]
fn seed_001() {
    let f = fpm::read(&fixture("seed-001.conf")).unwrap();
    assert!(f.skipped.is_empty(), "{:?}", f.skipped);
    assert_eq!(f.pools.len(), 1);
    let p = &f.pools[0];
    assert_eq!((p.name.as_str(), p.line), ("app", 5));
    assert_eq!(p.pm, Some(Pm::Static));
    assert_eq!(p.max_children, Some(200));
    assert_eq!(p.listen_backlog, Some(128));
    assert_eq!(p.backlog(), 128);
    assert_eq!(p.backlog_under(DEFAULT_SOMAXCONN), 128);
    assert_eq!(p.listen.as_deref(), Some("/run/php/app.sock"));

    let lines: Vec<_> = p
        .php
        .iter()
        .map(|v| (v.line, v.key.as_str(), v.value.as_str(), v.admin, v.flag))
        .collect();
    assert_eq!(
        lines,
        [
            (13, "opcache.revalidate_freq", "0", true, false),
            (15, "realpath_cache_size", "16K", false, false),
            (16, "display_errors", "0", false, true),
        ]
    );
    // php-fpm's order: php_value/php_flag from the last line up, then the
    // admin ones (as `php-fpm8.2 -tt` lists them for this file)
    assert_eq!(
        p.php_settings(),
        [
            "display_errors=0",
            "realpath_cache_size=16K",
            "opcache.revalidate_freq=0"
        ]
    );
}

#[test]
fn a_bad_line_is_skipped_with_its_line_number() {
    let text = "[www]\npm = dynamic\npm.max_children = abc\npm.max_children = 7\n";
    let f = parse(text);
    assert_eq!(f.skipped.len(), 1, "{:?}", f.skipped);
    let s = &f.skipped[0];
    assert_eq!(s.line, 3);
    assert_eq!(s.text, "pm.max_children = abc");
    assert!(s.why.contains("not a number"), "{}", s.why);
    assert_eq!(
        s.describe("pool.d/www.conf"),
        format!("pool.d/www.conf:3: {}: pm.max_children = abc", s.why)
    );
    // the good lines around it are read
    assert_eq!(f.pools[0].pm, Some(Pm::Dynamic));
    assert_eq!(f.pools[0].max_children, Some(7));
}

#[test]
fn lines_php_fpm_refuses_are_named() {
    let text = "\
user = early
[www]
pm = sometimes
pm.max_children = 0
listen.backlog = 12 # no comment
php_flag[display_errors] = 2
php_value[] = 1
php_values[x] = 1
pm.max_childen = 5
# a comment php-fpm 7+ refuses
php_value[x] = a=b
php_value[y] = \"unclosed
php_value[z] = on off
request_terminate_timeout = 30x
listen
[oops
[x] y
";
    let f = parse(text);
    let lines: Vec<usize> = f.skipped.iter().map(|s| s.line).collect();
    let mut want = vec![1];
    want.extend(3..=17);
    assert_eq!(lines, want, "{:#?}", whys(&f));
    let www = f.pool("www").unwrap();
    assert_eq!(
        (www.pm, www.max_children, www.listen_backlog),
        (None, None, None)
    );
    assert!(www.php.is_empty());
    assert!(f.skipped[0].why.contains("before any [pool] section"));
    assert!(f.skipped[8].why.contains("`#`"), "{}", f.skipped[8].why);
}

#[test]
fn ini_values_as_php_fpm_reads_them() {
    let text = r#"
[global]
; global entries are php-fpm's own, no pool's: passed over, not counted
error_log = /var/log/php-fpm.log
log_level = whatever
include = /etc/php/8.2/fpm/pool.d/*.conf

[shop]
LISTEN = "/run/php/$pool.sock" ; a comment
PM = OnDemand
pm.max_children = "12"
listen.backlog = -1
catch_workers_output = yes
request_terminate_timeout = 30s
rlimit_core = unlimited
env[TMP] = /tmp/$pool
access.suppress_path[] = /ping
php_value[include_path] = ".:/srv/$pool/lib"
php_value[session.save_path] = '/var/lib/php;sessions'
php_value[error_log] = /var/log/$pool.log ; trailing comment
php_value[auto_prepend_file] = none
php_value[open_basedir] = /srv "/tmp" /x
php_admin_flag[log_errors] = On
php_flag[short_open_tag] = "no"
php_value[ spaced] = 1
include = shop.d/*.conf
"#;
    let f = parse(text);
    assert!(f.skipped.is_empty(), "{:#?}", whys(&f));
    assert_eq!(
        f.includes,
        [
            (6, "/etc/php/8.2/fpm/pool.d/*.conf".to_string()),
            (26, "shop.d/*.conf".to_string())
        ]
    );
    let p = f.pool("SHOP").unwrap();
    assert_eq!(p.line, 8);
    assert_eq!(p.listen.as_deref(), Some("/run/php/shop.sock"));
    assert_eq!(p.pm, Some(Pm::Ondemand));
    assert_eq!(p.max_children, Some(12));
    assert_eq!(p.listen_backlog, Some(-1));
    assert_eq!(p.backlog(), DEFAULT_SOMAXCONN);
    assert_eq!(p.backlog_under(1024), 1024);
    let kv: Vec<(&str, &str)> = p
        .php
        .iter()
        .map(|v| (v.key.as_str(), v.value.as_str()))
        .collect();
    assert_eq!(
        kv,
        [
            ("include_path", ".:/srv/shop/lib"),
            ("session.save_path", "/var/lib/php;sessions"),
            ("error_log", "/var/log/shop.log"),
            ("auto_prepend_file", ""),
            ("open_basedir", "/srv/tmp/x"),
            ("log_errors", "1"),
            ("short_open_tag", "0"),
            ("spaced", "1"),
        ]
    );
}

/// Corners of the INI scanner, each as php-fpm 8.2.36 read it.
#[test]
fn quoting_corners_as_php_fpm_8_2_reads_them() {
    let cases: &[(&str, Option<&str>)] = &[
        (r#""a\"b""#, Some("a\"b")),
        (r#""a\""#, Some("a\\")), // `\"` ending the line ends the string
        ("\"a\\\"  ", None),      // ... but not before blanks
        (r#""a\\b""#, Some("a\\b")),
        (r#""a\nb""#, Some("a\\nb")),
        ("'a' x", Some("a x")),
        ("'a'  'b'", Some("a  b")),
        ("\"a\" 'b'", Some("ab")),
        ("x 'y", Some("x ")), // an unclosed `'` after text cuts the line
        ("'x", None),
        ("on 'y", Some("1")),
        ("'on'", Some("on")),
        ("\"on\" x", Some("onx")),
        ("\"a\" on", None),
        ("foo on", None),
        ("a # b", Some("a # b")),
        ("a;b", Some("a")),
        ("a=b", None),
        ("  yes  ", Some("1")),
        ("NULL", Some("")),
        ("0x10", Some("0x10")),
    ];
    for (value, want) in cases {
        let f = parse(&format!("[www]\nphp_value[k] = {value}"));
        let got = f.pools[0].php.first().map(|v| v.value.as_str());
        assert_eq!(got, *want, "{value:?}: {:?}", f.skipped);
    }
    // blanks between an array's name and `[` are dropped, not those before `]`
    let f = parse("[www]\nphp_value [ a ] = 1\nlisten =\n");
    assert_eq!(f.pools[0].php[0].key, "a ");
    assert_eq!(whys(&f).len(), 1, "an empty listen");
    assert_eq!(f.skipped[0].line, 3);
}

/// Of two lines of a key the first wins, and an admin line beats any
/// other: seen on php-fpm 8.2 with a request asking `ini_get()`.
#[test]
fn php_settings_follow_php_fpms_order() {
    let text = "\
[www]
php_admin_value[memory_limit] = 100M
php_value[memory_limit] = 64M
php_value[realpath_cache_size] = 1M
php_value[memory_limit] = 128M
php_flag[display_errors] = on
php_admin_value[memory_limit] = 200M
";
    let p = parse(text).pools.remove(0);
    let s = p.php_settings();
    assert_eq!(
        s,
        [
            "display_errors=1",
            "memory_limit=128M",
            "realpath_cache_size=1M",
            "memory_limit=64M",
            "memory_limit=200M",
            "memory_limit=100M",
        ]
    );
    // applied in order, the last of a key wins: what php-fpm gave
    let last = |k: &str| {
        s.iter()
            .rev()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
    };
    assert_eq!(last("memory_limit").as_deref(), Some("100M"));
    assert_eq!(p.php_value("memory_limit").unwrap().line, 2);
    assert_eq!(last("realpath_cache_size").as_deref(), Some("1M"));
    assert_eq!(p.php_value("display_errors").unwrap().value, "1");
}

#[test]
fn a_section_named_again_reopens_its_pool() {
    let f = parse("[a]\npm = static\n[global]\n[A]\npm.max_children = 3\n[b]\n");
    let names: Vec<_> = f.pools.iter().map(|p| (p.name.as_str(), p.line)).collect();
    assert_eq!(names, [("a", 1), ("b", 6)]);
    assert_eq!(f.pools[0].pm, Some(Pm::Static));
    assert_eq!(f.pools[0].max_children, Some(3));
}

/// `$pool` keeps being replaced while one is left (as php-fpm does), and
/// all replacements of a file add at most its length.
#[test]
fn pool_name_expansion_is_bounded() {
    let f = parse("[pool]\nphp_value[a] = $$pool\n");
    assert_eq!(f.pools[0].php[0].value, "pool");

    let name = "n".repeat(1000);
    let text = format!("[{name}]\nphp_value[a] = {}\n", "$pool".repeat(2000));
    let f = parse(&text);
    assert!(f.pools[0].php.is_empty());
    assert_eq!(f.skipped.len(), 1);
    assert!(f.skipped[0].why.contains("longer than"), "{:?}", f.skipped);

    let f = parse("[$pool]\nlisten = /run/$pool.sock\n");
    assert_eq!(f.skipped.len(), 1);
    assert_eq!(f.pools[0].listen, None);
}

#[test]
fn a_missing_file_names_its_path() {
    let e = fpm::read(&fixture("no-such-pool.conf")).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("no-such-pool.conf: "), "{msg}");
}

/// Lines that look like pool files, and some that do not.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => any::<String>(),
        2 => "[ \t]{0,2}\\[[a-zA-Z$ ]{0,6}\\][ ;a-z]{0,3}",
        4 => "[ \t]{0,2}(pm|pm\\.max_children|listen|listen\\.backlog|include|user|env\\[x\\]|php_value\\[[a-z. ]{0,6}\\]|php_admin_flag\\[a\\]|php_flag\\[b\\])[ ]{0,2}=[ ]{0,2}[\"';#a-z0-9$=\\\\ {}-]{0,16}",
        1 => "[;#]?[ -~]{0,30}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn any_text_reads_without_panic(text in any::<String>()) {
        let f = parse(&text);
        let n = text.lines().count();
        for s in &f.skipped {
            prop_assert!(s.line >= 1 && s.line <= n, "line {} of {}", s.line, n);
        }
    }

    #[test]
    fn pool_like_text_reads_within_its_lines(lines in proptest::collection::vec(line(), 0..24)) {
        let text = lines.join("\n");
        let f = parse(&text);
        let all: Vec<&str> = text.lines().collect();
        for s in &f.skipped {
            prop_assert!(s.line >= 1 && s.line <= all.len(), "line {} of {}", s.line, all.len());
            prop_assert_eq!(s.text.as_str(), all[s.line - 1]);
        }
        for p in &f.pools {
            prop_assert!(p.line >= 1 && p.line <= all.len());
            for v in &p.php {
                prop_assert!(v.line > p.line);
                prop_assert!(!v.flag || v.value == "0" || v.value == "1");
            }
            prop_assert_eq!(p.php_settings().len(), p.php.len());
        }
        // nothing beyond the text: the values add at most its length
        let held: usize = f.pools.iter().flat_map(|p| &p.php).map(|v| v.key.len() + v.value.len()).sum::<usize>()
            + f.pools.iter().map(|p| p.name.len() + p.listen.as_ref().map_or(0, String::len)).sum::<usize>();
        prop_assert!(held <= 2 * text.len(), "{held} bytes held of {}", text.len());
    }
}
