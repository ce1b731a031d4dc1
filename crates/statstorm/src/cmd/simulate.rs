//! `statstorm simulate` (being built; see the issue tracker).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("'simulate' is not built yet")
}
