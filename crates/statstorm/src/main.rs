//! The `statstorm` command line: a thin layer over the library crates.
//! Each subcommand lives in `cmd/<name>.rs`.

use clap::{Parser, Subcommand};

/// `eprintln!` that ignores a stderr closed early (`2>&1 | head -1`): a
/// message nobody can read is no reason to panic (`eprintln!` does, and
/// the exit code became 101 instead of the command's own).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cmd;
mod progress;

/// Find, explain, predict and fix metadata-syscall storms of PHP on network storage.
#[derive(Parser)]
#[command(name = "statstorm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read strace logs and show the metadata storm in them.
    Analyze(cmd::analyze::Args),
    /// Predict the syscalls (and RPCs) a trace would make under another php.ini / mount.
    // (boxed: the largest set of flags by far)
    Predict(Box<cmd::predict::Args>),
    /// Simulate workers, RPC slots and the server: latency, stalls, 502s.
    Simulate(cmd::simulate::Args),
    /// Say what makes the storm, what to change, what it will do and risk.
    Diagnose(Box<cmd::diagnose::Args>),
    /// Diagnose the built-in case (seed 000) and write its HTML report.
    Demo(cmd::demo::Args),
    /// Record PHP's file syscalls live with eBPF (strace-compatible capture).
    Record(cmd::record::Args),
    /// Serve the storm as Prometheus metrics (in-kernel counts, NFS RPCs).
    Exporter(cmd::exporter::Args),
    /// Replay a capture through the real Linux NFS client in a qemu guest; kernel vs model.
    Lab(cmd::lab::Args),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Predict(a) => cmd::predict::run(*a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Diagnose(a) => cmd::diagnose::run(*a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Exporter(a) => cmd::exporter::run(a),
        Command::Lab(a) => cmd::lab::run(a),
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            errln!("statstorm: error: {}", message(&e));
            std::process::exit(2);
        }
    }
}

/// The error and its causes, `: `-separated, each cause left out when the
/// message so far already ends with it (an input error quotes the I/O
/// error it wraps, which is also its source).
fn message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if msg.is_empty() {
            msg = c;
        } else if !msg.ends_with(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::message;
    use anyhow::Context;

    #[test]
    fn causes_quoted_already_are_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let open = statstorm_trace::input::Error::Open {
            path: "/x.strace".into(),
            source: io,
        };
        let e = Err::<(), _>(open)
            .context("reading the reference capture /x.strace")
            .unwrap_err();
        assert_eq!(
            message(&e),
            "reading the reference capture /x.strace: /x.strace: No such file or directory"
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(message(&e), "outer: inner");
    }
}
