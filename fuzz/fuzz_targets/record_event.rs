//! Fuzzes the decoder of the recorder's ring buffer records
//! (`statstorm_record::event::Call::decode`) and the strace-text writer
//! fed what it decodes: any bytes either decode or are an error, never a
//! panic; a decoded call's paths lie inside the record; its line is one
//! line that starts with its thread id; and the writer's table of
//! processes holds at most two entries per call written (its process, a child).
#![no_main]

use libfuzzer_sys::fuzz_target;
use statstorm_record::event::Call;
use statstorm_record::text::Text;

fuzz_target!(|data: &[u8]| {
    let mut text = Text::new(0, Box::new(|_| Some(b"/srv/www".to_vec())));
    let mut out = String::new();
    let mut n = 0;
    // the input as a sequence of records, each prefixed by its length
    let mut rest = data;
    while rest.len() >= 2 {
        let len = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let take = len.min(rest.len() - 2);
        let rec = &rest[2..2 + take];
        rest = &rest[2 + take..];
        let Ok(c) = Call::decode(rec) else {
            continue;
        };
        for p in [c.path, c.path2].into_iter().flatten() {
            assert!(p.len() <= rec.len());
        }
        out.clear();
        text.line(&c, &mut out);
        assert!(out.ends_with('\n'));
        assert_eq!(out.matches('\n').count(), 1, "{out:?}");
        assert!(out.starts_with(&format!("{} ", c.tid)), "{out:?}");
        n += 1;
        assert!(text.processes() <= 2 * n);
    }
});
