//! The capture's lines read back by the project's strace parser: every
//! call the recorder writes parses, as the call it was (kind, path,
//! decorations, result, errno, time, duration, mtime), with nothing
//! skipped.

use statstorm_record::event::{Call, StatInfo, Syscall};
use statstorm_record::text::Text;
use statstorm_trace::event::{Kind, Ret};

fn call(syscall: Syscall, args: [u64; 6], ret: i64, path: Option<&'static [u8]>) -> Call<'static> {
    Call {
        ts_ns: 1_000_000_000,
        dur_ns: 12_000,
        ret,
        args,
        extra: 0,
        stat: None,
        pid: 40,
        tid: 41,
        syscall,
        cut: false,
        path,
        path2: None,
    }
}

const AT_FDCWD: u64 = -100i64 as u64;

#[test]
fn written_lines_parse_back_as_the_calls() {
    let mut text = Text::new(
        1_795_000_000_000_000_000,
        Box::new(|_| Some(b"/srv/www".to_vec())),
    );
    let mut out = String::new();
    let mut stat = call(
        Syscall::Newfstatat,
        [AT_FDCWD, 0, 0, 0x100, 0, 0],
        0,
        Some(b"/srv/www/index.php"),
    );
    stat.stat = Some(StatInfo {
        mode: 0o100644,
        size: 120,
        mtime: 1_767_225_600,
        mtime_nsec: 0,
        ctime: 1_767_225_600,
        ctime_nsec: 5,
    });
    let calls = [
        stat,
        call(
            Syscall::Openat,
            [AT_FDCWD, 0, 0o2000000, 0, 0, 0],
            3,
            Some(b"inc/a.php"),
        ),
        call(Syscall::Read, [3, 0, 8192, 0, 0, 0], 100, Some(b"<?php ec")),
        call(Syscall::Newfstatat, [3, 0, 0, 0x1000, 0, 0], -9, Some(b"")),
        call(Syscall::Close, [3, 0, 0, 0, 0, 0], 0, None),
        call(
            Syscall::Access,
            [0, 4, 0, 0, 0, 0],
            -2,
            Some(b"/srv/www/missing \"x\".txt"),
        ),
        call(Syscall::Accept, [5, 0, 0, 0, 0, 0], 7, None),
        call(
            Syscall::Read,
            [7, 0, 8, 0, 0, 0],
            8,
            Some(b"\x01\x01\x00\x01\x00\x08\x00\x00"),
        ),
    ];
    for c in &calls {
        text.line(c, &mut out);
    }
    let t = statstorm_trace::read_bytes("cap", out.as_bytes());
    assert_eq!(t.skipped(), 0, "{out}");
    assert_eq!(t.events.len(), calls.len(), "{out}");
    let e = &t.events;
    let s = |id| t.strings.str(id).into_owned();
    assert_eq!(e[0].kind, Kind::Newfstatat);
    assert_eq!(s(e[0].path.unwrap()), "/srv/www/index.php");
    assert_eq!(e[0].mtime, Some(1_767_225_600));
    assert_eq!(e[0].ts_us, Some(1_795_000_001_000_000));
    assert_eq!(e[0].dur_us, Some(12));
    assert_eq!(e[0].pid, 41);
    // a relative open: AT_FDCWD decorated with the cwd, the fd with the
    // file's absolute name
    assert_eq!(s(e[1].ret_path.unwrap()), "/srv/www/inc/a.php");
    assert_eq!(e[1].ret, Ret::Ok(3));
    assert_eq!(s(e[2].fd_path.unwrap()), "/srv/www/inc/a.php");
    assert!(matches!(e[3].ret, Ret::Err(_)), "{:?}", e[3].ret);
    assert_eq!(s(e[4].fd_path.unwrap()), "/srv/www/inc/a.php");
    assert_eq!(s(e[5].path.unwrap()), "/srv/www/missing \"x\".txt");
    assert_eq!(e[6].kind, Kind::Accept);
    assert_eq!(e[6].ret, Ret::Ok(7));
    assert_eq!(
        (e[7].kind, e[7].fd, e[7].ret),
        (Kind::Read, Some(7), Ret::Ok(8))
    );
    // after the close, fd 3 is no longer named
    assert!(out
        .lines()
        .nth(4)
        .unwrap()
        .contains("close(3</srv/www/inc/a.php>)"));
}
