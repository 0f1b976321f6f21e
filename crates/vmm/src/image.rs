//! Building the unikernel image: `cargo build -p vtnt-kernel --target x86_64-unknown-none
//! --profile kernel` in the workspace (honouring `CARGO_TARGET_DIR`; the `kernel` profile
//! is release with fat LTO and `opt-level = "z"`), then a stripped copy via
//! `objcopy --strip-all` (or `strip`) when either is installed. With
//! [`BuildOptions::spt`], the same kernel for the process platform (`--features spt`, in
//! the target directory's `spt/`, so that the two images never overwrite each other).

use crate::{which, Error};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel's target triple.
pub const TARGET: &str = "x86_64-unknown-none";
/// The kernel's package name.
pub const PACKAGE: &str = "vtnt-kernel";
/// The cargo profile of the image (defined in the workspace's Cargo.toml).
pub const PROFILE: &str = "kernel";

/// How to build.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Workspace root; default: found above this crate's manifest, then the current dir.
    pub workspace: Option<PathBuf>,
    /// Target directory; default: `CARGO_TARGET_DIR`, else `<workspace>/target`.
    pub target_dir: Option<PathBuf>,
    /// Build the process platform (a static Linux executable run by an spt tender)
    /// instead of the virtual machine's.
    pub spt: bool,
    /// More features of `vtnt-kernel` (test builds); each gets a target directory of its
    /// own.
    pub features: Vec<String>,
}

/// A built image.
#[derive(Debug, Clone)]
pub struct Image {
    /// The image to boot (stripped when a stripper was found).
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The unstripped ELF cargo produced, and its size.
    pub unstripped: PathBuf,
    pub unstripped_size: u64,
    /// Whether `path` is stripped.
    pub stripped: bool,
}

/// Finds the workspace root: the nearest ancestor of `from` whose `Cargo.toml` has a
/// `[workspace]` table.
pub fn workspace_root(from: &Path) -> Result<PathBuf, Error> {
    from.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml"))
                .is_ok_and(|s| s.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map(Path::to_path_buf)
        .ok_or_else(|| Error::NoWorkspace {
            from: from.to_path_buf(),
        })
}

fn default_workspace() -> Result<PathBuf, Error> {
    workspace_root(Path::new(env!("CARGO_MANIFEST_DIR")))
        .or_else(|_| workspace_root(&std::env::current_dir()?))
}

/// Builds (if needed) and strips the kernel image.
pub fn build(opts: &BuildOptions) -> Result<Image, Error> {
    let ws = match &opts.workspace {
        Some(w) => w.clone(),
        None => default_workspace()?,
    };
    let target_dir = opts
        .target_dir
        .clone()
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| ws.join("target"));
    let target_dir = if target_dir.is_relative() {
        ws.join(target_dir)
    } else {
        target_dir
    };
    let mut features = opts.features.clone();
    if opts.spt {
        features.insert(0, "spt".into());
    }
    let target_dir = match features.is_empty() {
        true => target_dir,
        false => target_dir.join(features.join("+")),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .current_dir(&ws)
        .args([
            "build",
            "-p",
            PACKAGE,
            "--target",
            TARGET,
            "--profile",
            PROFILE,
        ])
        .args(
            (!features.is_empty())
                .then(|| ["--features".to_string(), features.join(",")])
                .into_iter()
                .flatten(),
        )
        .args(["--config", &remap_registry()])
        .env("CARGO_TARGET_DIR", &target_dir)
        // Flags meant for the host build must not leak into the bare-metal one.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .map_err(|source| Error::Spawn {
            program: cargo.clone(),
            source,
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Error::Build {
            output: tail.join("\n"),
        });
    }
    let unstripped = target_dir.join(TARGET).join(PROFILE).join(PACKAGE);
    let unstripped_size = std::fs::metadata(&unstripped)?.len();
    let stripped_path = target_dir
        .join(TARGET)
        .join(PROFILE)
        .join(format!("{PACKAGE}.stripped"));
    // stripped beside it, then renamed into place: a run reading the image at the same
    // time (another build's caller) never sees a half-written file
    let part = stripped_path.with_extension(format!("part-{}", crate::netns::unique_name("s")));
    let stripped = strip(&unstripped, &part) && std::fs::rename(&part, &stripped_path).is_ok();
    let _ = std::fs::remove_file(&part);
    let path = if stripped {
        stripped_path
    } else {
        unstripped.clone()
    };
    let size = std::fs::metadata(&path)?.len();
    Ok(Image {
        path,
        size,
        unstripped,
        unstripped_size,
        stripped,
    })
}

/// Writes a stripped copy of `input` to `output`; false if no tool could.
pub fn strip(input: &Path, output: &Path) -> bool {
    let attempts: [(&str, &[&str]); 2] = [
        ("objcopy", &["--strip-all"]),
        ("strip", &["--strip-all", "-o"]),
    ];
    for (tool, args) in attempts {
        if which(tool).is_none() {
            continue;
        }
        let mut cmd = Command::new(tool);
        cmd.args(args);
        if tool == "objcopy" {
            cmd.arg(input).arg(output);
        } else {
            cmd.arg(output).arg(input);
        }
        if cmd.output().is_ok_and(|o| o.status.success()) {
            return true;
        }
    }
    false
}

/// The stripped image's budget, in bytes (docs/benchmarks.md, "Unikernel budgets"): 256
/// KiB until 2026-11-26, 272 KiB since scamper's trace and ping options, TNT's full
/// record and the micro-benchmark job grew the image past it (by 6.7 KiB, after 5.0 KiB
/// of trims). CI holds it (`the_stripped_image_fits_its_budget`).
pub const IMAGE_BUDGET: u64 = 272 * 1024;

/// `--config` for the bare-metal build: panic locations name their source files, and
/// under cargo's registry those paths carry the user's cargo home and the index's hash
/// (`/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/`: 24 files, 1.4 KiB of
/// image); remapped, they start at the crate (`smoltcp-0.14.0/src/...`), and the image is
/// the same whoever builds it. Joined to `.cargo/config.toml`'s flags, not replacing them.
fn remap_registry() -> String {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let flags: Vec<String> = home
        .and_then(|h| std::fs::read_dir(h.join("registry/src")).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.path().into_os_string().into_string().ok())
        // a path TOML would need to escape is left as it is
        .filter(|p| !p.contains(['"', '\\']))
        .map(|p| format!("\"--remap-path-prefix={p}/=\""))
        .collect();
    format!("target.{TARGET}.rustflags=[{}]", flags.join(","))
}
