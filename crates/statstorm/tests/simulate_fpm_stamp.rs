//! The simulator's `scope = "pool"` rests on R64: OPcache keeps a script's
//! `revalidate` stamp in shared memory, so once one worker has re-checked a
//! script, the other workers skip it until the window ends. This test checks
//! that against the real php-fpm 8.2 under strace: two static workers,
//! `revalidate_freq=2`, a page including five scripts. It fails if php-fpm,
//! cgi-fcgi or strace is missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const INCLUDES: usize = 5;

fn find(names: &[&str]) -> PathBuf {
    for n in names {
        for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
            let p = Path::new(dir).join(n);
            if p.exists() {
                return p;
            }
        }
    }
    panic!(
        "{} not found: install it (Debian: php8.2-fpm, libfcgi-bin, strace)",
        names.join(" or ")
    );
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

struct Fpm {
    strace: Child,
    pidfile: PathBuf,
}

impl Drop for Fpm {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pidfile) {
            let _ = Command::new("kill").arg("-TERM").arg(pid.trim()).status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.strace.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.strace.kill();
        let _ = self.strace.wait();
    }
}

/// One request; returns (start, end, worker pid).
fn request(cgi: &Path, sock: &Path, script: &Path) -> (f64, f64, u32) {
    let t0 = now();
    let out = Command::new(cgi)
        .args(["-bind", "-connect"])
        .arg(sock)
        .env("SCRIPT_FILENAME", script)
        .env("REQUEST_METHOD", "GET")
        .output()
        .expect("run cgi-fcgi");
    let t1 = now();
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no worker pid in the response: {text:?}"));
    (t0, t1, pid)
}

#[test]
fn simulate_real_fpm_shares_the_revalidation_stamp() {
    let fpm = find(&["php-fpm8.2", "php-fpm"]);
    let cgi = find(&["cgi-fcgi"]);
    let strace = find(&["strace"]);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let site = d.join("site");
    std::fs::create_dir(&site).unwrap();
    for i in 1..=INCLUDES {
        std::fs::write(
            site.join(format!("inc{i}.php")),
            format!("<?php $x{i} = {i};\n"),
        )
        .unwrap();
    }
    let index = site.join("index.php");
    std::fs::write(
        &index,
        format!("<?php\nfor ($i = 1; $i <= {INCLUDES}; $i++) {{ include __DIR__ . \"/inc$i.php\"; }}\necho getmypid(), \"\\n\";\n"),
    )
    .unwrap();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let sock = d.join("fpm.sock");
    let pidfile = d.join("fpm.pid");
    let conf = d.join("fpm.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\npid = {}\nerror_log = {}\ndaemonize = no\n[www]\nlisten = {}\nuser = {}\npm = static\npm.max_children = 2\n",
            pidfile.display(),
            d.join("fpm.log").display(),
            sock.display(),
            user.trim()
        ),
    )
    .unwrap();
    let trace = d.join("trace.txt");
    let child = Command::new(&strace)
        .args(["-f", "-ttt", "-e", "trace=newfstatat,stat,statx", "-o"])
        .arg(&trace)
        .arg(&fpm)
        .args(["-R", "-y"])
        .arg(&conf)
        .args([
            "-d",
            "opcache.enable=1",
            "-d",
            "opcache.validate_timestamps=1",
            "-d",
            "opcache.revalidate_freq=2",
            // The scripts were written a moment ago; OPcache would refuse to
            // cache them for 2 s (file_update_protection) and recompile.
            "-d",
            "opcache.file_update_protection=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start strace php-fpm");
    let guard = Fpm {
        strace: child,
        pidfile,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(
            Instant::now() < deadline,
            "php-fpm did not open {}",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));

    // Compile once (and warm both workers), then wait for the window to end:
    // the stamp is request_time + 2 (whole seconds), checked when
    // request_time > stamp.
    let first = request(&cgi, &sock, &index);
    std::thread::sleep(Duration::from_millis(200));
    let second = request(&cgi, &sock, &index);
    let resume = second.1.floor() + 3.05;
    std::thread::sleep(Duration::from_secs_f64((resume - now()).max(0.0)));
    let mut window = Vec::new();
    for _ in 0..4 {
        window.push(request(&cgi, &sock, &index));
        std::thread::sleep(Duration::from_millis(150));
    }
    drop(guard);

    let text = std::fs::read_to_string(&trace).unwrap();
    // Timestamp checks: stat() (no AT_SYMLINK_NOFOLLOW) of an included script.
    let checks: Vec<(u32, f64)> = text
        .lines()
        .filter(|l| l.contains("/site/inc") && !l.contains("AT_SYMLINK_NOFOLLOW"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    let in_request = |r: &(f64, f64, u32)| {
        checks
            .iter()
            .filter(|(p, t)| *p == r.2 && *t >= r.0 && *t <= r.1)
            .count()
    };
    let pids: std::collections::BTreeSet<u32> = window.iter().map(|r| r.2).collect();
    let per_request: Vec<usize> = window.iter().map(in_request).collect();
    eprintln!(
        "first {:?} second {:?} window {:?} checks per request {:?}",
        first, second, window, per_request
    );
    assert_eq!(
        pids.len(),
        2,
        "inconclusive: one worker served every request in the window {window:?}"
    );
    // Exactly one request (the first after the window) checks the scripts;
    // the other worker, which never checked them, skips them too: the stamp
    // is shared by the pool.
    assert_eq!(
        per_request[0], INCLUDES,
        "first request after the window: {per_request:?}"
    );
    assert!(
        per_request[1..].iter().all(|&n| n == 0),
        "later requests in the window: {per_request:?}"
    );
}
