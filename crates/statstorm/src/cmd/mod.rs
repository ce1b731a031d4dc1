//! One module per subcommand. Each exposes `Args` (clap) and
//! `run(Args) -> anyhow::Result<i32>` returning the exit code.

pub mod analyze;
pub mod predict;
pub mod simulate;
