//! `statstorm lab --self-test`'s built-in scenario: a capture, written here
//! as `strace -f -ttt -T` text, of two PHP CLI runs of the same small
//! application under [`ROOT`], the second 200 ms after the first. Each
//! run resolves and opens an entry script and five includes (the
//! `newfstatat` + `openat` + `fstat` + `read` + `close` of PHP without
//! OPcache), checks a cache file that does not exist, and lists a
//! directory. The first run meets a cold client, the second a warm one
//! (within the attribute cache's 3 s): the counts differ by option set
//! and by run, so a model that mistook either would show.

use std::fmt::Write;

/// The capture's application root (`--nfs-root`).
pub const ROOT: &str = "/srv/www";

/// The option sets the self-test checks: (version, options).
pub const SETS: [(&str, &str); 3] = [("3", ""), ("3", "lookupcache=none"), ("4.1", "")];

const FILES: [(&str, u64); 6] = [
    ("index.php", 415),
    ("inc/config.php", 1210),
    ("inc/lib/db.php", 9300),
    ("inc/lib/cache.php", 4100),
    ("inc/theme/header.php", 700),
    ("inc/theme/footer.php", 300),
];

struct Clock {
    t_us: u64,
}

impl Clock {
    fn line(&mut self, out: &mut String, pid: u32, call: &str) {
        self.t_us += 150;
        let _ = writeln!(
            out,
            "{pid} {}.{:06} {call} <0.000040>",
            1_800_000_000 + self.t_us / 1_000_000,
            self.t_us % 1_000_000
        );
    }
}

fn run(out: &mut String, clock: &mut Clock, pid: u32) {
    for (i, (name, size)) in FILES.iter().enumerate() {
        let p = format!("{ROOT}/{name}");
        clock.line(
            out,
            pid,
            &format!("newfstatat(AT_FDCWD, \"{p}\", {{st_mode=S_IFREG|0644, st_size={size}, ...}}, 0) = 0"),
        );
        let fd = 3 + i as u32 % 2;
        clock.line(
            out,
            pid,
            &format!("openat(AT_FDCWD, \"{p}\", O_RDONLY) = {fd}"),
        );
        clock.line(
            out,
            pid,
            &format!("fstat({fd}, {{st_mode=S_IFREG|0644, st_size={size}, ...}}) = 0"),
        );
        clock.line(
            out,
            pid,
            &format!("read({fd}, \"<?php\"..., 8192) = {}", size.min(&8192)),
        );
        if *size > 8192 {
            clock.line(
                out,
                pid,
                &format!("read({fd}, \"\"..., 8192) = {}", size - 8192),
            );
        }
        clock.line(out, pid, &format!("read({fd}, \"\", 8192) = 0"));
        clock.line(out, pid, &format!("close({fd}) = 0"));
    }
    clock.line(
        out,
        pid,
        &format!(
            "access(\"{ROOT}/cache/page.html\", F_OK) = -1 ENOENT (No such file or directory)"
        ),
    );
    let d = format!("{ROOT}/inc/theme");
    clock.line(
        out,
        pid,
        &format!("openat(AT_FDCWD, \"{d}\", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 5"),
    );
    clock.line(
        out,
        pid,
        "getdents64(5, 0x55d0c2a8 /* 4 entries */, 32768) = 112",
    );
    clock.line(
        out,
        pid,
        "getdents64(5, 0x55d0c2a8 /* 0 entries */, 32768) = 0",
    );
    clock.line(out, pid, "close(5) = 0");
}

/// The scenario's capture text.
pub fn capture() -> String {
    let mut out = String::new();
    let mut clock = Clock { t_us: 0 };
    run(&mut out, &mut clock, 4100);
    clock.t_us += 200_000;
    run(&mut out, &mut clock, 4101);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_parses_and_prepares_two_requests() {
        let text = capture();
        let t = statstorm_trace::read_bytes("self-test", text.as_bytes());
        assert_eq!(t.events.len(), text.lines().count(), "every line an event");
        let p = crate::replay::prepare(&t, ROOT.as_bytes(), b"/mnt/nfs");
        assert_eq!(p.left_out, 0, "{:?}", p.left_out_by_call);
        assert_eq!(p.marks.iter().filter(|m| m.start).count(), 2);
        let files = p
            .tree
            .iter()
            .filter(|e| matches!(e.kind, crate::replay::EntryKind::File { .. }))
            .count();
        assert_eq!(files, FILES.len());
        crate::replay::parse_script(&p.script).unwrap();
    }
}
