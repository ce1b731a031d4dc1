//! Runs `scripts/php-harness` at test time (the live tests): a fresh
//! temporary directory for the lab, the captures and the harness's work
//! files, a free loopback port, and a process group of its own that is
//! stopped (with php-fpm's pool, which runs in a session of its own) if the
//! test fails or the harness overruns its limit.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn require(tool: &str) {
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
pub fn free_port() -> u16 {
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

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Captures made at test time; the directory goes when this is dropped.
pub struct LiveRun {
    pub dir: tempfile::TempDir,
    /// Where the captures and manifest.jsonl are.
    pub out: PathBuf,
}

/// Runs the harness for the captures named in `only` (`--apps` for the
/// applications), failing the test with the harness's output if it fails
/// or runs past `limit`.
pub fn run_harness(only: &[&str], apps: bool, limit: Duration) -> LiveRun {
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
    let mut cmd = Command::new(repo_root().join("scripts/php-harness"));
    cmd.arg("--out")
        .arg(&out)
        .arg("--lab")
        .arg(&lab)
        .args(["--port", &port.to_string()])
        .args(["--only", &only.join(",")]);
    if apps {
        cmd.arg("--apps");
    }
    let mut h = Harness {
        child: cmd
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
    let res = h.wait(limit);
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
    LiveRun { dir: tmp, out }
}
