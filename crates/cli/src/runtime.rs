//! `vtnt image ...` and `vtnt run ...`: placeholder until the runtimes land.

use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum ImageCommand {
    /// Build the image of a runtime.
    Build,
}

#[derive(clap::Args)]
pub struct RunArgs {}

pub fn image(_cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("images are not built yet")
}

pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("runtimes are not built yet")
}
