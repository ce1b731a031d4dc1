//! Helpers of the tests that run real PHP under the recorder or the
//! exporter: required tools, the lab tree, a php-fpm pool, FastCGI
//! requests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Fails (never skips) when `tool` is missing.
pub fn need(tool: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(found, "{tool} is missing: scripts/install-deps installs it");
}

pub fn need_root() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(uid, 0, "recording needs root (CAP_BPF, CAP_PERFMON)");
}

/// The lab tree (scripts/php-harness.d/mklab.sh) in a fresh directory.
pub fn lab(dir: &Path) -> PathBuf {
    let lab = dir.join("lab");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/php-harness.d/mklab.sh");
    let st = Command::new("bash").arg(script).arg(&lab).status().unwrap();
    assert!(st.success(), "mklab.sh failed");
    lab
}

/// Waits up to 30 s for `ok`, or fails naming `what`.
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the processes a test started when it ends, passed or not.
pub struct Reap(pub Vec<String>);

impl Drop for Reap {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", p])
                .stderr(Stdio::null())
                .status();
        }
    }
}

pub fn fcgi(port: u16, script: &Path, lab: &Path) {
    let out = Command::new("cgi-fcgi")
        .args(["-bind", "-connect", &format!("127.0.0.1:{port}")])
        .env("SCRIPT_FILENAME", script)
        .env(
            "SCRIPT_NAME",
            format!("/{}", script.file_name().unwrap().to_string_lossy()),
        )
        .env("REQUEST_METHOD", "GET")
        .env("DOCUMENT_ROOT", lab.join("www"))
        .env("SERVER_NAME", "localhost")
        .env("SERVER_PORT", "80")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("HTTP_HOST", "localhost")
        .env("REQUEST_URI", "/")
        .output()
        .unwrap();
    assert!(out.status.success(), "cgi-fcgi failed");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(!body.contains("Fatal error"), "{body}");
}

/// A php-fpm pool of two static workers on 127.0.0.1:`port` serving the
/// lab (OPcache off: every request opens its scripts), run directly or
/// under `strace -f -ttt -T -y -o STRACE_LOG`.
pub struct Pool {
    pub master: String,
    child: Child,
}

impl Pool {
    pub fn start(dir: &Path, lab: &Path, port: u16, strace_log: Option<&Path>) -> Pool {
        let conf = dir.join(format!("fpm-{port}.conf"));
        let pidfile = dir.join(format!("fpm-{port}.pid"));
        let _ = std::fs::remove_file(&pidfile);
        std::fs::write(
            &conf,
            format!(
                "[global]\npid = {}\nerror_log = {}\ndaemonize = no\n[t]\nlisten = 127.0.0.1:{port}\npm = static\npm.max_children = 2\n",
                pidfile.display(),
                dir.join(format!("fpm-{port}.log")).display()
            ),
        )
        .unwrap();
        let mut cmd = match strace_log {
            Some(log) => {
                let mut c = Command::new("strace");
                c.args(["-f", "-ttt", "-T", "-y", "-o"])
                    .arg(log)
                    .arg("php-fpm8.2");
                c
            }
            None => Command::new("php-fpm8.2"),
        };
        let child = cmd
            .args(["-n", "-F", "-R", "-y"])
            .arg(&conf)
            .args([
                "-d",
                &format!("include_path=.:{}", lab.join("www/inc").display()),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("php-fpm's pid file", || {
            std::fs::read_to_string(&pidfile).is_ok_and(|s| !s.trim().is_empty())
        });
        std::thread::sleep(Duration::from_millis(500));
        let master = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .to_string();
        Pool { master, child }
    }

    /// Ends the pool (SIGTERM to its master) and waits for it (and the
    /// strace around it) to exit.
    pub fn stop(mut self) {
        Command::new("kill")
            .args(["-TERM", &self.master])
            .status()
            .unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.master])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
    }
}
