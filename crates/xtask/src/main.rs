//! `cargo xtask`: the developer and packaging tasks of a checkout (the cargo alias in
//! `.cargo/config.toml`). Everything an installed `vtnt` needs at run time is produced
//! here, once, so that no run-time code path ever invokes cargo.

use std::path::PathBuf;

use clap::Parser;
use vtnt_xtask::{cargo, deb, deny, dist, man, notices};

/// The tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "vTNT's developer and packaging tasks")]
enum Task {
    /// The third-party notice file: every crate compiled into vtnt, the static vtnt,
    /// vtnt-monitor and the unikernel images, with its licence texts (`dist` writes it
    /// into the tree too).
    Notices {
        /// Where to write it.
        #[arg(long, default_value = "THIRD-PARTY-NOTICES")]
        out: PathBuf,
    },
    /// The licence, advisory, source and ban checks of the dependency tree (cargo-deny,
    /// deny.toml), advisories from a local snapshot of RustSec's database.
    Deny {
        /// The snapshot: a git repository of RustSec's advisory-db with a main branch
        /// (default: $VTNT_ADVISORY_DB, else ../shared/advisory-db beside the checkout).
        #[arg(long)]
        advisory_db: Option<PathBuf>,
    },
    /// Man pages for vtnt and each of its subcommands, from its clap definitions (`dist`
    /// writes them into the tree too, from its own vtnt).
    Man {
        /// The directory to write them into.
        #[arg(long)]
        out: PathBuf,
        /// The vtnt binary to ask (default: build it, dev profile).
        #[arg(long)]
        vtnt: Option<PathBuf>,
    },
    /// Build vtnt and everything it needs at run time (the static vtnt, vtnt-monitor, the
    /// unikernel's images) into an install tree with a manifest of SHA-256s, with its
    /// licence, notices, man pages and shell completions (docs/install.md).
    Dist(DistArgs),
    /// Build the Debian package (target/dist/vtnt_<version>_amd64.deb) from the tree.
    Deb(DistArgs),
}

#[derive(Debug, clap::Args)]
struct DistArgs {
    /// The tree's root: bin/vtnt, lib/vtnt/, share/ (default: target/dist, and
    /// target/lib then links to its lib).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The cargo profile of vtnt and the static binaries.
    #[arg(long, default_value = "release")]
    profile: String,
    /// Also install the tree into PREFIX/bin, PREFIX/lib/vtnt and PREFIX/share (e.g.
    /// ~/.local).
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
        Task::Notices { out } => {
            let s = notices::write(&out)?;
            eprintln!(
                "xtask notices: {} crates, {} licence texts in {}",
                s.crates,
                s.texts,
                out.display()
            );
            if !s.without_files.is_empty() {
                eprintln!(
                    "xtask notices: no licence file in the package of {} (standard texts used)",
                    s.without_files.join(", ")
                );
            }
            Ok(())
        }
        Task::Deny { advisory_db } => {
            let root = cargo::workspace();
            let db = deny::find_db(&root, advisory_db);
            deny::check(&root, &root.join("deny.toml"), db.as_deref())
        }
        Task::Man { out, vtnt } => {
            let vtnt = match vtnt {
                Some(v) => v,
                None => man::build_vtnt()?,
            };
            let pages = man::write(&vtnt, &out)?;
            eprintln!("xtask man: {} pages in {}", pages.len(), out.display());
            Ok(())
        }
        Task::Dist(a) => {
            let d = dist::build(&a.options())?;
            println!("{}", d.root.display());
            Ok(())
        }
        Task::Deb(a) => {
            let d = dist::build(&a.options())?;
            let deb = deb::build(&d)?;
            println!("{}", deb.display());
            Ok(())
        }
    }
}
