//! Fuzzes the PHP settings readers of `statstorm_php::PhpConfig`: the same
//! text as a php.ini (`apply_ini`), as `php -i` output (`apply_php_info`)
//! and, line by line, as `--php key=value` flags (`apply_flags`), each from
//! the defaults. The text is decoded as the file readers decode it (lossy
//! UTF-8). None may panic; a setting it accepts must print (`Display`) and
//! compare (`diff`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_php::PhpConfig;

fn check(c: &PhpConfig) {
    let _ = c.to_string();
    let _ = c.diff(&PhpConfig::default());
    let _ = c.realpath_cache_enabled();
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    let mut c = PhpConfig::default();
    if c.apply_ini(&text, "fuzz.ini").is_ok() {
        check(&c);
    }

    let mut c = PhpConfig::default();
    if c.apply_php_info(&text, "fuzz-php-i.txt").is_ok() {
        check(&c);
    }

    let lines: Vec<&str> = text.lines().collect();
    let mut c = PhpConfig::default();
    if c.apply_flags(&lines).is_ok() {
        check(&c);
    }
});
