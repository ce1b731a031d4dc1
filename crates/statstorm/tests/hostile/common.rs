//! Running the binary on hostile input.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The result of one run: exit code, stdout, stderr.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A run still going after this long has hung: `timeout` ends it and the
/// test fails naming the hang, instead of hanging the suite (a guard, not
/// a timed assertion: every case here ends in well under a minute).
const HANG_S: u32 = 300;

/// Runs `statstorm ARGS` in `dir`; fails the test on a signal, a panic or
/// a hang.
pub fn run(dir: &Path, args: &[&str]) -> Run {
    let mut c = Command::new("timeout");
    c.arg(HANG_S.to_string())
        .arg(env!("CARGO_BIN_EXE_statstorm"))
        .args(args)
        .current_dir(dir);
    run_cmd(&mut c)
}

/// Runs `statstorm ARGS` in `dir` with its address space capped at
/// `mib` MiB (`prlimit --as`): a run that needs more fails its allocation
/// instead of taking the machine.
pub fn run_capped(dir: &Path, mib: u64, args: &[&str]) -> Run {
    run_cmd(&mut capped(dir, mib, args))
}

/// [`run_capped`] with stdout written to `out` (a large report, not held
/// by the test).
pub fn run_capped_into(dir: &Path, mib: u64, out: std::fs::File, args: &[&str]) -> Run {
    run_cmd(capped(dir, mib, args).stdout(out))
}

fn capped(dir: &Path, mib: u64, args: &[&str]) -> Command {
    let mut c = Command::new("timeout");
    c.arg(HANG_S.to_string())
        .arg("prlimit")
        .arg(format!("--as={}", mib << 20))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_statstorm"))
        .args(args)
        .current_dir(dir);
    c
}

fn run_cmd(c: &mut Command) -> Run {
    let out: Output = c.output().expect("running statstorm");
    assert_ne!(
        out.status.code(),
        Some(124),
        "hung: no exit within {HANG_S} s\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Run {
        code: out.status.code().unwrap_or_else(|| {
            panic!(
                "killed by a signal: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        }),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!r.stderr.contains("panicked"), "panic: {}", r.stderr);
    r
}

/// Runs `statstorm ARGS` in `dir` with `env` added, stdin from `stdin`
/// when given, and the address space capped at `mib` MiB when given.
pub fn run_with(
    dir: &Path,
    mib: Option<u64>,
    env: &[(&str, &str)],
    stdin: Option<std::fs::File>,
    args: &[&str],
) -> Run {
    let mut c = with(dir, mib, env, args);
    if let Some(f) = stdin {
        c.stdin(f);
    }
    run_cmd(&mut c)
}

/// [`run_with`] without stdin, stdout written to `out`.
pub fn run_with_into(
    dir: &Path,
    mib: Option<u64>,
    env: &[(&str, &str)],
    out: std::fs::File,
    args: &[&str],
) -> Run {
    run_cmd(with(dir, mib, env, args).stdout(out))
}

fn with(dir: &Path, mib: Option<u64>, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new("timeout");
    c.arg(HANG_S.to_string());
    if let Some(mib) = mib {
        c.arg("prlimit")
            .arg(format!("--as={}", mib << 20))
            .arg("--");
    }
    c.arg(env!("CARGO_BIN_EXE_statstorm"));
    c.args(args).current_dir(dir).envs(env.iter().copied());
    c
}

/// Writes `path`: a gzipped `strace -f -tt -T -y` log of `n` php-fpm
/// requests on 4 workers, each an accept, one stat and a close (120 bytes
/// of text a call).
pub fn many_requests_gz(path: &Path, n: usize) {
    use std::fmt::Write as _;
    use std::io::Write as _;
    let f = std::fs::File::create(path).unwrap();
    let mut z =
        flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::fast());
    let mut t_us = 1_795_229_198_000_000i64;
    let mut line = String::new();
    for i in 0..n {
        let pid = 500 + i % 4;
        line.clear();
        for call in [
            "accept(9<socket:[1]>, {sa_family=AF_INET, sin_port=htons(40652), sin_addr=inet_addr(\"127.0.0.1\")}, [112 => 16]) = 4<socket:[2]> <0.000019>",
            "newfstatat(AT_FDCWD, \"/srv/www/index.php\", {st_mode=S_IFREG|0644, st_size=209, ...}, 0) = 0 <0.000011>",
            "close(4<socket:[2]>) = 0 <0.000005>",
        ] {
            writeln!(
                line,
                "{pid} {}.{:06} {call}",
                t_us / 1_000_000,
                t_us % 1_000_000
            )
            .unwrap();
            t_us += 60;
        }
        z.write_all(line.as_bytes()).unwrap();
    }
    z.finish().unwrap().flush().unwrap();
}
