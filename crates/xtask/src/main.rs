//! `cargo xtask`: the developer and packaging tasks of a checkout (the cargo alias in
//! `.cargo/config.toml`). Everything an installed `vtnt` needs at run time is produced
//! here, once, so that no run-time code path ever invokes cargo.

use clap::Parser;

/// The tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "vTNT's developer and packaging tasks")]
enum Task {}

fn main() -> anyhow::Result<()> {
    match Task::parse() {}
}
