//! `cargo xtask`: the developer and packaging tasks of a checkout (the cargo alias in
//! `.cargo/config.toml`). Everything an installed `vtnt` needs at run time is produced
//! here, once, so that no run-time code path ever invokes cargo.

use std::path::PathBuf;

use clap::Parser;
use vtnt_xtask::{deb, dist};

/// The tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "vTNT's developer and packaging tasks")]
enum Task {
    /// Build vtnt and everything it needs at run time (the static vtnt, vtnt-monitor, the
    /// unikernel's images) into an install tree with a manifest of SHA-256s
    /// (docs/install.md).
    Dist(DistArgs),
    /// Build the Debian package (target/dist/vtnt_<version>_amd64.deb) from the tree.
    Deb(DistArgs),
}

#[derive(Debug, clap::Args)]
struct DistArgs {
    /// The tree's root: bin/vtnt, lib/vtnt/ (default: target/dist, and target/lib
    /// then links to its lib).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The cargo profile of vtnt and the static binaries.
    #[arg(long, default_value = "release")]
    profile: String,
    /// Also install the tree into PREFIX/bin and PREFIX/lib/vtnt (e.g. ~/.local).
    #[arg(long)]
    prefix: Option<PathBuf>,
}

impl DistArgs {
    fn options(self) -> dist::Options {
        dist::Options {
            out: self.out,
            profile: self.profile,
            prefix: self.prefix,
        }
    }
}

fn main() -> anyhow::Result<()> {
    match Task::parse() {
        Task::Dist(a) => {
            let d = dist::build(&a.options())?;
            println!("{}", d.root.display());
        }
        Task::Deb(a) => {
            let d = dist::build(&a.options())?;
            let deb = deb::build(&d)?;
            println!("{}", deb.display());
        }
    }
    Ok(())
}
