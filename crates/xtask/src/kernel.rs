//! Building the unikernel: `cargo build -p vtnt-kernel --target x86_64-unknown-none
//! --profile kernel` (release with fat LTO and `opt-level = "z"`), each set of features in
//! a target directory of its own (`target/spt/`, `target/stream/`, ...) so that no build
//! overwrites another's image, then stripped. `cargo xtask dist` builds the images an
//! installed vtnt boots; tests build the variants it does not ship (the spt guest that
//! makes a forbidden call) through the same function.

use std::path::PathBuf;

use anyhow::Context;

use crate::cargo;

/// The kernel's target triple.
pub const TARGET: &str = "x86_64-unknown-none";
/// The kernel's package name.
pub const PACKAGE: &str = "vtnt-kernel";
/// The cargo profile of the image (defined in the workspace's Cargo.toml).
pub const PROFILE: &str = "kernel";

/// A built image.
#[derive(Debug, Clone)]
pub struct Image {
    /// The stripped image (what is booted and shipped).
    pub path: PathBuf,
    pub size: u64,
    /// The ELF cargo produced, and its size.
    pub unstripped: PathBuf,
    pub unstripped_size: u64,
}

/// Builds (if needed) the kernel with `features` (none: the VM's job image; `spt`: the
/// process platform; `stream`: the stream endpoint) and strips it.
pub fn build(features: &[&str]) -> anyhow::Result<Image> {
    let mut target_dir = cargo::target_dir();
    if !features.is_empty() {
        target_dir = target_dir.join(features.join("+"));
    }
    let mut cmd = cargo::command();
    cmd.args(["build", "-q", "-p", PACKAGE, "--target", TARGET])
        .args(["--profile", PROFILE]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    cmd.args(["--config", &remap_registry()])
        .env("CARGO_TARGET_DIR", &target_dir)
        // flags meant for the host build must not leak into the bare-metal one
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    cargo::run(&mut cmd).with_context(|| format!("building {PACKAGE} {features:?}"))?;
    let out = target_dir.join(TARGET).join(PROFILE);
    let unstripped = out.join(PACKAGE);
    let path = out.join(format!("{PACKAGE}.stripped"));
    // stripped beside it, then renamed into place: a test reading the image at the same
    // time never sees a half-written file
    let part = out.join(format!("{PACKAGE}.stripped-{}", std::process::id()));
    cargo::strip(&unstripped, &part)?;
    std::fs::rename(&part, &path).with_context(|| format!("renaming {}", part.display()))?;
    let size = |p: &PathBuf| {
        std::fs::metadata(p)
            .map(|m| m.len())
            .with_context(|| format!("{}", p.display()))
    };
    Ok(Image {
        size: size(&path)?,
        unstripped_size: size(&unstripped)?,
        path,
        unstripped,
    })
}

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
