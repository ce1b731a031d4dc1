//! The `statstorm` command line: a thin layer over the library crates.
//! Each subcommand lives in `cmd/<name>.rs`.

use clap::{Parser, Subcommand};

mod analyze;
mod cmd;
mod progress;
mod render;

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
    Predict(cmd::predict::Args),
    /// Simulate workers, RPC slots and the server: latency, stalls, 502s.
    Simulate(cmd::simulate::Args),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Predict(a) => cmd::predict::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
    };
    match code {
        Ok(c) => std::process::exit(c),
        Err(e) => {
            eprintln!("statstorm: error: {e:#}");
            std::process::exit(2);
        }
    }
}
