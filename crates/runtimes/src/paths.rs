//! Where things live and the few host facts every runtime needs: the image cache
//! (`/var/cache/vtnt`, override with `VTNT_CACHE_DIR`), the run directory
//! (`/run/vtnt/deploy`, sockets and runtime state), the work directory
//! (`/var/lib/vtnt/deploy`, builds and deployed images), the workspace root, programs on `PATH`, the static `vtnt` binary
//! (built with `cargo build --release --target x86_64-unknown-linux-musl -p vtnt
//! --no-default-features`: no fleet), and
//! sizes of files and trees.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The image cache: `/var/cache/vtnt` unless `VTNT_CACHE_DIR` says otherwise.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("VTNT_CACHE_DIR")
        .map_or_else(|| PathBuf::from("/var/cache/vtnt"), PathBuf::from)
}

/// Built images the server offers: `<cache>/images`.
pub fn images_dir() -> anyhow::Result<PathBuf> {
    let d = cache_dir().join("images");
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// The scope this process's instances are in, once it has entered one ([`enter_scope`]).
static SCOPE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// From now on, everything this process's instances leave on the host is under scope
/// `name` (an agent's: `agent-<node>`): the run and work directories below are
/// `<dir>/<name>`, instance cgroups go under [`cgroup_parent`], containers carry the label
/// [`scope_label`]; `crate::scope::clean` removes it all. Once per process.
pub fn enter_scope(name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "scope `{name}`: letters, digits, `-` and `_` only"
    );
    SCOPE.set(name.to_string()).map_err(|_| {
        anyhow::anyhow!(
            "this process is already in scope `{}`",
            scope().unwrap_or("")
        )
    })
}

/// The scope this process entered, if any.
pub fn scope() -> Option<&'static str> {
    SCOPE.get().map(String::as_str)
}

/// The cgroup (relative path) instances go under: `vtnt`, or `vtnt/<scope>`.
pub fn cgroup_parent() -> String {
    scoped_cgroup(scope())
}

/// The cgroup of scope `name` (or of no scope).
pub fn scoped_cgroup(name: Option<&str>) -> String {
    match name {
        Some(s) => format!("vtnt/{s}"),
        None => "vtnt".into(),
    }
}

/// The Docker label that marks a scope's containers, `vtnt.scope=<scope>`.
pub fn scope_label(name: &str) -> String {
    format!("vtnt.scope={name}")
}

/// `/run/vtnt/deploy` (or `VTNT_DEPLOY_RUN_DIR`), whatever the scope.
pub fn run_base() -> PathBuf {
    std::env::var_os("VTNT_DEPLOY_RUN_DIR")
        .map_or_else(|| PathBuf::from("/run/vtnt/deploy"), PathBuf::from)
}

/// `/var/lib/vtnt/deploy` (or `VTNT_DEPLOY_WORK_DIR`), whatever the scope.
pub fn work_base() -> PathBuf {
    std::env::var_os("VTNT_DEPLOY_WORK_DIR")
        .map_or_else(|| PathBuf::from("/var/lib/vtnt/deploy"), PathBuf::from)
}

/// Per-run scratch space (bundles, fetched images, engine state): `/run/vtnt/deploy`,
/// override with `VTNT_DEPLOY_RUN_DIR`; in a scope, the scope's directory below it.
pub fn run_dir() -> anyhow::Result<PathBuf> {
    made(run_base())
}

/// Scratch space on disk for builds and deployed images (a VM box is hundreds of MB, too
/// much for the /run tmpfs): `/var/lib/vtnt/deploy`, override with `VTNT_DEPLOY_WORK_DIR`;
/// in a scope, the scope's directory below it.
pub fn work_dir() -> anyhow::Result<PathBuf> {
    made(work_base())
}

/// `base` (the scope's directory below it, in a scope), created.
fn made(base: PathBuf) -> anyhow::Result<PathBuf> {
    let d = match scope() {
        Some(s) => base.join(s),
        None => base,
    };
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// A directory removed (recursively) on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory `<work_dir>/<prefix>-<pid>-<n>`.
    pub fn new(prefix: &str) -> anyhow::Result<TempDir> {
        let p = work_dir()?.join(unique(prefix));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub use vtnt_vmm::netns::unique_name as unique;

pub use vtnt_vmm::netns::which;

/// Like [`which`], failing with the Debian package that provides the program.
pub fn need(program: &str, package: &str) -> anyhow::Result<PathBuf> {
    which(program).with_context(|| {
        format!("`{program}` not found: install Debian package `{package}` (scripts/setup.sh does)")
    })
}

/// The workspace root: the nearest directory above the current one (or above this
/// executable) whose Cargo.toml has a `[workspace]` table; `VTNT_WORKSPACE` overrides.
pub fn workspace_root() -> Option<PathBuf> {
    if let Some(w) = std::env::var_os("VTNT_WORKSPACE") {
        return Some(PathBuf::from(w));
    }
    let starts = [
        std::env::current_dir().ok(),
        std::env::current_exe().ok(),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    for start in starts.into_iter().flatten() {
        for dir in start.ancestors() {
            let toml = dir.join("Cargo.toml");
            if std::fs::read_to_string(&toml).is_ok_and(|s| s.contains("[workspace]"))
                && dir.join("crates/cli").is_dir()
            {
                return Some(dir.to_path_buf());
            }
        }
    }
    None
}

/// The musl target the static binary is built for.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// The static `vtnt` binary: `VTNT_STATIC_BIN` if set, else this executable when it is a
/// static `vtnt`, else built from the workspace (`cargo build --release --target
/// x86_64-unknown-linux-musl -p vtnt`, target dir from `CARGO_TARGET_DIR` or
/// `<workspace>/target`).
pub fn static_vtnt() -> anyhow::Result<PathBuf> {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(p) = BIN.get() {
        return Ok(p.clone());
    }
    let p = find_static_vtnt()?;
    Ok(BIN.get_or_init(|| p).clone())
}

fn find_static_vtnt() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("VTNT_STATIC_BIN") {
        let p = PathBuf::from(p);
        if !is_static_elf(&p)? {
            bail!("VTNT_STATIC_BIN={} is not a static executable", p.display());
        }
        return Ok(p);
    }
    let me = std::env::current_exe().context("locating this executable")?;
    if me.file_name().is_some_and(|n| n == "vtnt") && is_static_elf(&me)? {
        return Ok(me);
    }
    if let Some(ws) = workspace_root() {
        let target_dir =
            std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| ws.join("target"), PathBuf::from);
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        eprintln!("vtnt deploy: building the static vtnt binary and its microVM monitor (cargo build --release --target {MUSL_TARGET} -p vtnt -p vtnt-monitor --no-default-features)");
        let st = Command::new(&cargo)
            .current_dir(&ws)
            .env("CARGO_TARGET_DIR", &target_dir)
            .args([
                "build",
                "--release",
                "-q",
                "--target",
                MUSL_TARGET,
                "-p",
                "vtnt",
                "-p",
                "vtnt-monitor",
                // one job per image: no fleet (tokio, NATS, TLS) in it
                "--no-default-features",
            ])
            .status()
            .with_context(|| format!("running cargo in {}", ws.display()))?;
        if !st.success() {
            bail!("cargo build --release --target {MUSL_TARGET} -p vtnt failed ({st}); is the target installed (scripts/setup.sh)?");
        }
        let bin = target_dir.join(MUSL_TARGET).join("release/vtnt");
        if !is_static_elf(&bin)? {
            bail!("{} is not statically linked", bin.display());
        }
        return Ok(bin);
    }
    bail!("no static vtnt binary: run inside the vTNT workspace, or set VTNT_STATIC_BIN to a musl build")
}

/// Whether `path` is an ELF executable without a program interpreter (PT_INTERP).
pub fn is_static_elf(path: &Path) -> anyhow::Result<bool> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return Ok(false);
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[32..40].try_into().unwrap_or([0; 8])) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > b.len() {
            return Ok(false);
        }
        if u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) == 3 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Size of a file in bytes.
/// Makes a downloaded `file` executable (mode 0755); returns its path.
pub fn make_executable(file: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", file.display()))?;
    Ok(file.to_path_buf())
}

pub fn file_size(p: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(p)
        .with_context(|| format!("stat {}", p.display()))?
        .len())
}

/// A built image in the cache and, beside it in `<image>.size`, the size it has
/// installed (which the compressed download no longer tells).
pub struct CachedImage {
    pub path: PathBuf,
    size_file: PathBuf,
}

impl CachedImage {
    pub fn new(path: PathBuf) -> Self {
        let size_file = path.with_extension("size");
        CachedImage { path, size_file }
    }

    /// Whether it must be built: asked to, missing, or older than the `vtnt` binary
    /// `bin` it carries.
    pub fn stale(&self, rebuild: bool, bin: &Path) -> anyhow::Result<bool> {
        Ok(rebuild
            || !self.path.exists()
            || !self.size_file.exists()
            || std::fs::metadata(bin)?.modified().ok()
                > std::fs::metadata(&self.path)
                    .and_then(|m| m.modified())
                    .ok())
    }

    /// Records the installed size once the image is in place.
    pub fn set_size(&self, bytes: u64) -> anyhow::Result<()> {
        std::fs::write(&self.size_file, bytes.to_string())
            .with_context(|| format!("writing {}", self.size_file.display()))
    }

    /// The installed size recorded by [`CachedImage::set_size`].
    pub fn size(&self) -> anyhow::Result<u64> {
        std::fs::read_to_string(&self.size_file)
            .with_context(|| format!("reading {}", self.size_file.display()))?
            .trim()
            .parse()
            .with_context(|| format!("parsing {}", self.size_file.display()))
    }
}

/// Bytes allocated on disk by a file (sparse files count what they use).
pub fn allocated(p: &Path) -> anyhow::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(p)
        .with_context(|| format!("stat {}", p.display()))?
        .blocks()
        * 512)
}

/// Runs a command to completion, failing with its stderr tail and what it was.
pub fn run_cmd(cmd: &mut Command) -> anyhow::Result<String> {
    let desc = format!("{cmd:?}");
    let out = cmd.output().with_context(|| format!("starting {desc}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        bail!("{desc} failed ({}): {tail}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Copies `src` to `dst` unless `dst` already has the same size and mtime not older.
pub fn copy_if_newer(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let (s, d) = (
        std::fs::metadata(src).with_context(|| format!("stat {}", src.display()))?,
        std::fs::metadata(dst).ok(),
    );
    let fresh = d.is_some_and(|d| d.len() == s.len() && d.modified().ok() >= s.modified().ok());
    if !fresh {
        // a new file renamed over the old: an image server still sending the old one
        // (another run at the same time) keeps reading it whole
        let part = dst.with_extension(format!("part-{}", unique("copy")));
        std::fs::copy(src, &part)
            .and_then(|_| std::fs::rename(&part, dst))
            .with_context(|| format!("copying {} to {}", src.display(), dst.display()))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&part);
            })?;
    }
    Ok(())
}
