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

/// Runs `statstorm ARGS` in `dir`; fails the test on a signal or a panic.
pub fn run(dir: &Path, args: &[&str]) -> Run {
    run_cmd(
        Command::new(env!("CARGO_BIN_EXE_statstorm"))
            .current_dir(dir)
            .args(args),
    )
}

/// Runs `statstorm ARGS` in `dir` with its address space capped at
/// `mib` MiB (`prlimit --as`): a run that needs more fails its allocation
/// instead of taking the machine.
pub fn run_capped(dir: &Path, mib: u64, args: &[&str]) -> Run {
    let mut c = Command::new("prlimit");
    c.arg(format!("--as={}", mib << 20))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_statstorm"))
        .args(args)
        .current_dir(dir);
    run_cmd(&mut c)
}

fn run_cmd(c: &mut Command) -> Run {
    let out: Output = c.output().expect("running statstorm");
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
    let mut c = match mib {
        Some(mib) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--as={}", mib << 20))
                .arg("--")
                .arg(env!("CARGO_BIN_EXE_statstorm"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_statstorm")),
    };
    c.args(args).current_dir(dir).envs(env.iter().copied());
    if let Some(f) = stdin {
        c.stdin(f);
    }
    run_cmd(&mut c)
}
