//! `cargo xtask dist`: everything an installed vtnt needs, built once and laid out as it
//! is installed (docs/install.md):
//!
//! ```text
//! <out>/bin/vtnt                      the command (host build, default features)
//! <out>/bin/vtnt-agent                the command without `vtnt bench` (no plotting
//!                                     library), which the agent's unit runs
//! <out>/lib/vtnt/vtnt-static          vtnt for musl without the fleet (runtime images)
//! <out>/lib/vtnt/vtnt-monitor         the microVM monitor (musl, static)
//! <out>/lib/vtnt/vtnt-unikernel.elf   the unikernel's job, VM (PVH)
//! <out>/lib/vtnt/vtnt-spt.elf         the unikernel's job, spt process
//! <out>/lib/vtnt/vtnt-stream.elf      the stream endpoint, VM
//! <out>/lib/vtnt/vtnt-stream-spt.elf  the stream endpoint, spt process
//! <out>/lib/vtnt/vtnt-fw-spt.elf      the firewall network function, spt process
//! <out>/lib/vtnt/vtnt-fw.elf          the firewall network function, VM
//! <out>/lib/vtnt/artifacts.toml       each file's SHA-256 and size, version, commit
//! <out>/share/...                     licence, notices, man pages, completions
//! ```
//!
//! What is built and how is [`crate::programs`]; `share/` is [`crate::share`]. The
//! default `<out>` is `target/dist`, and `target/lib` is then made a link to its `lib`,
//! so that the checkout's `target/{debug,release}/vtnt` and the tests find the files by
//! the rule an installed vtnt uses (`<exe dir>/../lib/vtnt`). `--prefix DIR` copies the
//! tree into `DIR/bin`, `DIR/lib/vtnt` and `DIR/share` (`~/.local`, `/usr/local`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use vtnt_artifacts::{Artifact, Manifest, Pin, MANIFEST};

use crate::files::{files, mkdir, write};
use crate::programs::{self, Program};
use crate::{cargo, kernel, share};

/// What `cargo xtask dist` is asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the tree goes (default `target/dist`).
    pub out: Option<PathBuf>,
    /// The cargo profile of `vtnt` and the static binaries (the kernel's is `kernel`).
    pub profile: String,
    /// Also install the tree here (`bin/vtnt`, `bin/vtnt-agent`, `lib/vtnt/`, `share/`).
    pub prefix: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            out: None,
            profile: "release".into(),
            prefix: None,
        }
    }
}

/// A laid-out tree.
#[derive(Debug, Clone)]
pub struct Dist {
    pub root: PathBuf,
    pub manifest: Manifest,
}

impl Dist {
    pub fn bin(&self) -> PathBuf {
        self.root.join("bin/vtnt")
    }

    /// The agent's binary ([`Program::Agent`]).
    pub fn agent(&self) -> PathBuf {
        self.root.join(Program::Agent.path())
    }

    pub fn lib(&self) -> PathBuf {
        self.root.join("lib/vtnt")
    }

    pub fn share(&self) -> PathBuf {
        self.root.join("share")
    }
}

/// Builds everything and lays the tree out (the module's docs).
pub fn build(o: &Options) -> anyhow::Result<Dist> {
    let target = cargo::target_dir();
    let default_out = target.join("dist");
    let root = o.out.clone().unwrap_or_else(|| default_out.clone());
    let pdir = cargo::profile_dir(&o.profile);
    let (mut vtnt, mut agent) = (PathBuf::new(), PathBuf::new());
    let mut sources = Vec::new();
    for b in programs::builds() {
        let names: Vec<&str> = b.programs.iter().map(|(_, p)| p.file_name()).collect();
        eprintln!("xtask dist: {}", names.join(", "));
        let out = if b.is_kernel() {
            kernel::build(b.features)?.path
        } else {
            let built = cargo::run(
                cargo::command()
                    .args(["build", "-q", "--profile", &o.profile])
                    .args(b.args()),
            );
            if let Some(t) = b.target {
                built.with_context(|| {
                    format!("is the target installed (rustup target add {t}; scripts/setup.sh)?")
                })?;
            } else {
                built?;
            }
            b.target
                .map_or_else(|| target.clone(), |t| target.join(t))
                .join(pdir)
        };
        for (package, program) in &b.programs {
            let src = if b.is_kernel() {
                out.clone()
            } else {
                out.join(package)
            };
            match program {
                Program::Command => vtnt = src,
                // the same package as the command, whose build comes next and replaces
                // its binary: kept under its own name
                Program::Agent => {
                    agent = src.with_file_name(program.file_name());
                    std::fs::copy(&src, &agent).with_context(|| {
                        format!("keeping {} as {}", src.display(), agent.display())
                    })?;
                }
                Program::Lib(a) => sources.push((*a, src)),
            }
        }
    }
    let dist = lay_out(&root, &vtnt, &agent, &sources)?;
    if root == default_out {
        link(&target.join("lib"), Path::new("dist/lib"))?;
    }
    if let Some(prefix) = &o.prefix {
        install(&dist, prefix)?;
    }
    Ok(dist)
}

/// Writes the tree at `root` from the host `vtnt`, the agent's and the artifacts' built
/// files: into a new directory first, then swapped in, so that a reader sees the old tree
/// or the new one.
fn lay_out(
    root: &Path,
    vtnt: &Path,
    agent: &Path,
    sources: &[(Artifact, PathBuf)],
) -> anyhow::Result<Dist> {
    let new = sibling(root, "new");
    let _ = std::fs::remove_dir_all(&new);
    let lib = new.join("lib/vtnt");
    mkdir(&lib)?;
    mkdir(&new.join("bin"))?;
    install_file(vtnt, &new.join("bin/vtnt"), true, true)?;
    install_file(agent, &new.join(Program::Agent.path()), true, true)?;
    let mut files = std::collections::BTreeMap::new();
    for (a, src) in sources {
        let dst = lib.join(a.file_name());
        // the kernels are stripped already; the static binaries are stripped here
        let strip = programs::kernel_features(*a).is_none();
        install_file(src, &dst, a.executable(), strip)?;
        files.insert(
            a.file_name().to_string(),
            Pin::of(&dst).with_context(|| format!("hashing {}", dst.display()))?,
        );
    }
    let manifest = Manifest {
        version: vtnt_artifacts::VERSION.into(),
        commit: commit(),
        files,
    };
    write(&lib.join(MANIFEST), &manifest.to_toml())?;
    eprintln!("xtask dist: share/ (licence, notices, man pages, completions)");
    let made = share::write(&new.join("bin/vtnt"), &new.join("share"))?;
    eprintln!(
        "xtask dist: {} crates in the notices, {} man pages",
        made.notices.crates, made.man_pages
    );
    let old = sibling(root, "old");
    if root.exists() {
        std::fs::rename(root, &old).with_context(|| format!("moving {}", root.display()))?;
    }
    std::fs::rename(&new, root).with_context(|| format!("moving {}", new.display()))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(Dist {
        root: root.to_path_buf(),
        manifest,
    })
}

/// `<root>.<what>-<pid>` beside `root`.
fn sibling(root: &Path, what: &str) -> PathBuf {
    let name = root.file_name().unwrap_or_default().to_string_lossy();
    root.with_file_name(format!("{name}.{what}-{}", std::process::id()))
}

/// Copies `src` to `dst` (stripped if `strip`), mode 0755 if `exec`, else 0644.
fn install_file(src: &Path, dst: &Path, exec: bool, strip: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if strip {
        cargo::strip(src, dst)?;
    } else {
        std::fs::copy(src, dst)
            .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    }
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", dst.display()))
}

/// Copies the tree into `prefix` (`bin/vtnt`, `bin/vtnt-agent`, `lib/vtnt/` replaced whole, `share/`'s
/// files replaced one by one).
pub fn install(dist: &Dist, prefix: &Path) -> anyhow::Result<()> {
    let lib = prefix.join("lib/vtnt");
    mkdir(&prefix.join("bin"))?;
    let _ = std::fs::remove_dir_all(&lib);
    mkdir(&lib)?;
    for entry in std::fs::read_dir(dist.lib())? {
        let src = entry?.path();
        let name = src.file_name().unwrap_or_default();
        std::fs::copy(&src, lib.join(name))
            .with_context(|| format!("copying {} into {}", src.display(), lib.display()))?;
    }
    for f in files(&dist.share())? {
        let dst = prefix.join("share").join(&f);
        mkdir(dst.parent().unwrap_or(prefix))?;
        std::fs::copy(dist.share().join(&f), &dst)
            .with_context(|| format!("copying {f} to {}", dst.display()))?;
    }
    // a new file renamed over the old, which may be running
    for program in [Program::Agent, Program::Command] {
        let bin = prefix.join(program.path());
        let part = prefix.join(format!(
            "bin/.{}-{}",
            program.file_name(),
            std::process::id()
        ));
        std::fs::copy(dist.root.join(program.path()), &part)
            .with_context(|| format!("copying to {}", part.display()))?;
        std::fs::rename(&part, &bin).with_context(|| format!("installing {}", bin.display()))?;
    }
    let bin = prefix.join("bin/vtnt");
    eprintln!(
        "xtask dist: installed {}, {} and {}",
        bin.display(),
        lib.display(),
        prefix.join("share").display()
    );
    Ok(())
}

/// Makes `at` a symbolic link to `to`, replacing what was there.
fn link(at: &Path, to: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(at) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(at)?,
        Ok(_) => std::fs::remove_file(at)?,
        Err(_) => {}
    }
    std::os::unix::fs::symlink(to, at)
        .with_context(|| format!("linking {} to {}", at.display(), to.display()))
}

/// `git describe --always --dirty` of the checkout, or `unknown`.
fn commit() -> String {
    Command::new("git")
        .arg("-C")
        .arg(cargo::workspace())
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
