//! What the command line says about itself, from its clap definitions: shell completions
//! (`vtnt completions SHELL`) and man pages for `vtnt` and every subcommand (the hidden
//! `vtnt man-pages DIR`, which `cargo xtask man` runs when it lays out an install).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Command, ValueEnum};

/// The shells completions are made for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell (bash: `source <(vtnt completions bash)`, or save it as
    /// /usr/share/bash-completion/completions/vtnt).
    shell: Shell,
}

#[derive(Args)]
pub struct ManPagesArgs {
    /// The directory to write vtnt.1, vtnt-trace.1, vtnt-lab-up.1, ... into (made when
    /// missing).
    dir: PathBuf,
}

/// Prints the completion script of `cmd` for the shell.
pub fn completions(a: CompletionsArgs, mut cmd: Command) -> anyhow::Result<ExitCode> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // made in memory first: clap_complete panics when its writer fails (a closed pipe)
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vtnt", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)
        .and_then(|()| out.flush())
        .context("writing the completion script")?;
    Ok(ExitCode::SUCCESS)
}

/// Writes a man page for `cmd` and for each of its subcommands, hidden ones aside.
pub fn man_pages(a: ManPagesArgs, cmd: Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    clap_mangen::generate_to(cmd, &a.dir)
        .with_context(|| format!("writing man pages into {}", a.dir.display()))?;
    Ok(ExitCode::SUCCESS)
}
