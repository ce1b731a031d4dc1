//! Live ground truth: runs the real harness (`scripts/php-harness`: a
//! php-fpm pool of its own on loopback driven by cgi-fcgi, under strace) at
//! test time for the synthetic include tree under four settings, into a
//! temporary directory, then checks on those fresh captures what
//! `roundtrip.rs` and `cross.rs` check on the committed ones, with the
//! same tolerances:
//!
//! - nooc (`opcache.enable=0`), rp0 (`realpath_cache_size=0`), obd
//!   (`open_basedir`), rf2 (OPcache on, `revalidate_freq=2`); requests at
//!   0, 0.2, 0.5, 1.3, 2.6, 2.8, 4.9 and 7.6 s, inside and outside the 1 s
//!   (request_time) and 2 s (revalidate_freq) windows;
//! - round trip exact for every request;
//! - every pair from a complete source (rp0, obd) within 2% per request;
//!   the pairs from nooc and rf2 (caches on) are printed.
//!
//! It fails if php-fpm8.2, cgi-fcgi, strace, php, gzip or zstd is missing.
//! The pool listens on a port the test gets free from the kernel; the lab
//! and the captures live in a fresh temporary directory; the harness runs
//! in a process group of its own that is killed if the test fails or the
//! harness overruns its time limit.

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The captures made: name globs for `--only`.
const CAPTURES: &[&str] = &[
    "fpm-tree-nooc",
    "fpm-tree-rp0",
    "fpm-tree-obd",
    "fpm-tree-rf2",
];
/// The harness normally takes ~40 s for these (four pools of 8 requests
/// over 7.6 s each); beyond this it is killed and the test fails.
const HARNESS_LIMIT: Duration = Duration::from_secs(150);

fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
        || ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(tool).is_file());
    assert!(
        found,
        "{tool} is missing: the live PHP test needs it (Debian: apt-get install php-cli php-fpm libfcgi-bin strace gzip zstd)"
    );
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().unwrap().port()
}

/// The harness in its own process group (strace, cgi-fcgi, php-fpm);
/// dropping it before it finished stops it and its pool.
struct Harness {
    child: Child,
    /// The harness's TMPDIR (its work directory goes there).
    work: PathBuf,
    done: bool,
}

impl Harness {
    /// Stops the harness: TERM lets it stop its pool (its EXIT trap); then
    /// KILL for its process group and for the pool, which php-fpm moves to
    /// a session of its own (the master's pid file under `work`).
    fn stop(&mut self) {
        let pid = self.child.id();
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut groups = vec![pid.to_string()];
        for e in std::fs::read_dir(&self.work)
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(p) = std::fs::read_to_string(e.path().join("fpm.pid")) {
                groups.push(p.trim().to_string());
            }
        }
        for g in groups {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{g}")])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.wait();
        self.done = true;
    }

    /// Waits for the harness; kills the group past `limit`.
    fn wait(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    self.done = true;
                    return if st.success() {
                        Ok(())
                    } else {
                        Err(format!("scripts/php-harness exited with {st}"))
                    };
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Ok(None) => {
                    self.stop();
                    return Err(format!(
                        "scripts/php-harness ran past {} s and was killed",
                        limit.as_secs()
                    ));
                }
                Err(e) => return Err(format!("waiting for scripts/php-harness: {e}")),
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if !self.done {
            self.stop();
        }
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn live_harness_round_trip_and_cross_config() {
    for tool in ["php", "php-fpm8.2", "cgi-fcgi", "strace", "gzip", "zstd"] {
        require(tool);
    }
    let tmp = tempfile::Builder::new()
        .prefix("statstorm-php-live.")
        .tempdir()
        .expect("temporary directory");
    let out = tmp.path().join("captures");
    let lab = tmp.path().join("lab");
    let port = free_port();
    let log = tmp.path().join("harness.log");
    let log_file = std::fs::File::create(&log).expect("harness log");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).expect("work directory");
    let t0 = Instant::now();
    let mut h = Harness {
        child: Command::new(repo_root().join("scripts/php-harness"))
            .arg("--out")
            .arg(&out)
            .arg("--lab")
            .arg(&lab)
            .args(["--port", &port.to_string()])
            .args(["--only", &CAPTURES.join(",")])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("harness log"))
            .stderr(log_file)
            .env("TMPDIR", &work)
            .process_group(0)
            .spawn()
            .expect("start scripts/php-harness"),
        work,
        done: false,
    };
    let res = h.wait(HARNESS_LIMIT);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    if let Err(e) = res {
        panic!("{e}; its output:\n{log_text}");
    }
    println!(
        "harness: {:.1} s, port {port}, {}",
        t0.elapsed().as_secs_f64(),
        out.display()
    );
    print!("{log_text}");

    let caps = captures_in(&out);
    let names: Vec<&str> = caps.iter().map(|c| c.name.as_str()).collect();
    let mut want = CAPTURES.to_vec();
    want.sort();
    assert_eq!(names, want, "captures in {}", out.display());
    let loaded: Vec<Loaded> = caps.iter().map(load).collect();
    for (c, l) in caps.iter().zip(&loaded) {
        assert_eq!(
            l.real.len(),
            8,
            "{}: 8 requests sent, {} found in the capture",
            c.name,
            l.real.len()
        );
    }

    let r = round_trip(&caps, &loaded);
    println!("round trip: {} requests checked", r.requests);
    assert!(
        r.failures.is_empty(),
        "round trip: {} mismatches:\n{}",
        r.failures.len(),
        r.failures.join("\n")
    );

    let c = cross(&caps, &loaded, &[]);
    print_cross(&c);
    // rp0 and obd are complete sources (OPcache and the realpath cache
    // off): 2 sources x 3 targets
    assert_eq!(c.pairs, 12);
    assert_eq!(c.asserted, 6, "complete sources: rp0 and obd");
    assert!(
        c.failures.is_empty(),
        "{} requests beyond tolerance (table above)",
        c.failures.len()
    );
}
