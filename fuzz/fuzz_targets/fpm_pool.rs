//! Fuzzes the php-fpm pool file reader of
//! `statstorm_engine::evidence::fpm` on any text, decoded as `fpm::read`
//! decodes it (lossy UTF-8). It may not panic; each skipped line, include
//! and pool header must be a line of the text (a skipped one with that
//! line's text); flags read 1 or 0; `php_settings` gives one setting per
//! php value; and the pools hold at most twice the text (its pieces, plus
//! `$pool` expansions of at most its length).
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_engine::evidence::fpm;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let f = fpm::parse(&text);
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();

    for s in &f.skipped {
        assert!((1..=n).contains(&s.line), "skipped line {} of {n}", s.line);
        assert_eq!(s.text, lines[s.line - 1]);
        let _ = s.describe("fuzz.conf");
    }
    for (line, _) in &f.includes {
        assert!((1..=n).contains(line), "include at line {line} of {n}");
    }
    let mut held = 0;
    for p in &f.pools {
        assert!((1..=n).contains(&p.line), "pool at line {} of {n}", p.line);
        assert!(lines[p.line - 1].contains('['));
        assert!(p.max_children.is_none_or(|m| m >= 1));
        let _ = p.backlog();
        let _ = p.backlog_under(fpm::DEFAULT_SOMAXCONN);
        assert_eq!(p.php_settings().len(), p.php.len());
        for (k, v) in p.php.iter().enumerate() {
            assert!(
                v.line > p.line && v.line <= n,
                "php value at line {}",
                v.line
            );
            assert!(!v.flag || v.value == "0" || v.value == "1", "{v:?}");
            // (a lookup walks the values: the first few only)
            assert!(k >= 16 || p.php_value(&v.key).is_some());
            held += v.key.len() + v.value.len();
        }
        held += p.name.len() + p.listen.as_ref().map_or(0, String::len);
    }
    assert!(
        held <= 2 * text.len(),
        "{held} bytes held of {}",
        text.len()
    );
});
