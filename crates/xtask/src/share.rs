//! The install tree's `share/`: what a release carries besides its programs
//! (docs/release.md), made from the checkout and the tree's own `bin/vtnt`, so that
//! nothing more is built and the pages and scripts describe exactly that binary:
//!
//! ```text
//! share/doc/vtnt/LICENSE                     the checkout's LICENSE
//! share/doc/vtnt/THIRD-PARTY-NOTICES         the crates of every program in the tree
//! share/man/man1/vtnt.1, vtnt-*.1            `bin/vtnt man-pages`, one per subcommand
//! share/bash-completion/completions/vtnt     `bin/vtnt completions bash`
//! share/zsh/vendor-completions/_vtnt         ... zsh
//! share/fish/vendor_completions.d/vtnt.fish  ... fish
//! ```

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::files::{self, mkdir};
use crate::{cargo, man, notices};

/// The licence and the notices, under `share/`.
pub const LICENSE: &str = "doc/vtnt/LICENSE";
pub const NOTICES: &str = "doc/vtnt/THIRD-PARTY-NOTICES";
/// The man pages' directory, under `share/`.
pub const MAN1: &str = "man/man1";
/// Each shell's completion script, under `share/` (where each shell's own packages put
/// theirs on Debian).
pub const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "bash-completion/completions/vtnt"),
    ("zsh", "zsh/vendor-completions/_vtnt"),
    ("fish", "fish/vendor_completions.d/vtnt.fish"),
];

/// What [`write`] made.
#[derive(Debug)]
pub struct Share {
    pub notices: notices::Summary,
    pub man_pages: usize,
}

/// Writes `share` (the module's docs) for the command `vtnt`.
pub fn write(vtnt: &Path, share: &Path) -> anyhow::Result<Share> {
    let doc = share.join("doc/vtnt");
    mkdir(&doc)?;
    let license = cargo::workspace().join("LICENSE");
    std::fs::copy(&license, share.join(LICENSE))
        .with_context(|| format!("copying {}", license.display()))?;
    let notices = notices::write(&share.join(NOTICES))?;
    let man_pages = man::write(vtnt, &share.join(MAN1))?.len();
    for (shell, path) in COMPLETIONS {
        let script = cargo::run(Command::new(vtnt).args(["completions", shell]))?;
        let path = share.join(path);
        mkdir(path.parent().unwrap_or(share))?;
        files::write(&path, &script)?;
    }
    Ok(Share { notices, man_pages })
}
