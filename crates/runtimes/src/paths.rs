//! Where things live and the few host facts every runtime needs: the image cache
//! (`/var/cache/vtnt`, override with `VTNT_CACHE_DIR`), the run directory
//! (`/run/vtnt/deploy`, sockets and runtime state), the work directory
//! (`/var/lib/vtnt/deploy`, builds and deployed images), programs on `PATH`, the static
//! `vtnt` binary (installed in `lib/vtnt` by `cargo xtask dist` or the package:
//! `vtnt-artifacts`), and sizes of files and trees.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext, Result};

/// The variable that names the image cache.
pub const CACHE_DIR_ENV: &str = "VTNT_CACHE_DIR";
/// The image cache when neither [`CACHE_DIR_ENV`] nor the configuration names one.
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/vtnt";

/// The cache of [`configure_cache_dir`], once set.
static CONFIGURED_CACHE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `dir` this process's image cache unless [`CACHE_DIR_ENV`] names one (`vtnt`'s
/// configuration file: `[artifacts] cache-dir`); the first call counts.
pub fn configure_cache_dir(dir: PathBuf) {
    let _ = CONFIGURED_CACHE.set(dir);
}

/// The image cache: [`CACHE_DIR_ENV`], else the configuration's, else
/// [`DEFAULT_CACHE_DIR`].
pub fn cache_dir() -> PathBuf {
    std::env::var_os(CACHE_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| CONFIGURED_CACHE.get().cloned())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR))
}

/// Built images the server offers: `<cache>/images`.
pub fn images_dir() -> Result<PathBuf> {
    let d = cache_dir().join("images");
    std::fs::create_dir_all(&d).doing(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// The scope this process's instances are in, once it has entered one ([`enter_scope`]).
static SCOPE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// From now on, everything this process's instances leave on the host is under scope
/// `name` (an agent's: `agent-<node>`): the run and work directories below are
/// `<dir>/<name>`, instance cgroups go under [`cgroup_parent`], containers carry the label
/// [`scope_label`]; `crate::scope::clean` removes it all. Once per process.
pub fn enter_scope(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(Error::Scope(format!(
            "scope `{name}`: letters, digits, `-` and `_` only"
        )));
    }
    SCOPE.set(name.to_string()).map_err(|_| {
        Error::Scope(format!(
            "this process is already in scope `{}`",
            scope().unwrap_or("")
        ))
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
pub fn run_dir() -> Result<PathBuf> {
    made(run_base())
}

/// Scratch space on disk for builds and deployed images (a VM box is hundreds of MB, too
/// much for the /run tmpfs): `/var/lib/vtnt/deploy`, override with `VTNT_DEPLOY_WORK_DIR`;
/// in a scope, the scope's directory below it.
pub fn work_dir() -> Result<PathBuf> {
    made(work_base())
}

/// `base` (the scope's directory below it, in a scope), created.
fn made(base: PathBuf) -> Result<PathBuf> {
    let d = match scope() {
        Some(s) => base.join(s),
        None => base,
    };
    std::fs::create_dir_all(&d).doing(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// A directory removed (recursively) on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory `<work_dir>/<prefix>-<pid>-<n>`.
    pub fn new(prefix: &str) -> Result<TempDir> {
        let p = work_dir()?.join(unique(prefix));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).doing(|| format!("creating {}", p.display()))?;
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

pub use vtnt_unikernel::netns::unique_name as unique;

pub use vtnt_unikernel::netns::which;

/// Like [`which`], failing with the Debian package that provides the program.
pub fn need(program: &str, package: &str) -> Result<PathBuf> {
    which(program).ok_or_else(|| Error::MissingTool {
        program: program.into(),
        package: package.into(),
    })
}

/// The static `vtnt` (musl, no fleet) that runtime images carry, as installed
/// (`vtnt-artifacts`: `lib/vtnt/vtnt-static`), checked against its manifest.
pub fn static_vtnt() -> Result<PathBuf> {
    Ok(vtnt_artifacts::find(vtnt_artifacts::Artifact::StaticVtnt)?.path)
}

/// Copies the installed `artifact` into the image cache as `name` (unless the cache
/// holds it already, byte for byte), and returns the copy and what the manifest pins.
pub fn stage(
    artifact: vtnt_artifacts::Artifact,
    name: &str,
) -> Result<(PathBuf, vtnt_artifacts::Pin)> {
    let found = vtnt_artifacts::find(artifact)?;
    let dst = images_dir()?.join(name);
    if found.pin.verify(&dst).is_err() {
        // a new file renamed over the old: an image server still sending the old one
        // (another run at the same time) keeps reading it whole
        let part = dst.with_extension(format!("part-{}", unique("copy")));
        std::fs::copy(&found.path, &part)
            .and_then(|_| std::fs::rename(&part, &dst))
            .doing(|| format!("copying {} to {}", found.path.display(), dst.display()))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&part);
            })?;
    }
    Ok((dst, found.pin))
}

/// Makes a downloaded `file` executable (mode 0755); returns its path.
pub fn make_executable(file: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
        .doing(|| format!("chmod {}", file.display()))?;
    Ok(file.to_path_buf())
}

/// Size of a file in bytes.
pub fn file_size(p: &Path) -> Result<u64> {
    Ok(std::fs::metadata(p)
        .doing(|| format!("stat {}", p.display()))?
        .len())
}

/// A built image in the cache and, beside it, the installed size (`<image>.size`, which
/// the compressed download no longer tells) and what it was built from
/// (`<image>.source`: the SHA-256 of the `vtnt` binary it carries).
pub struct CachedImage {
    pub path: PathBuf,
    size_file: PathBuf,
    source_file: PathBuf,
    /// What else it is built from ([`CachedImage::with_recipe`]), hashed.
    recipe: Option<u64>,
}

impl CachedImage {
    pub fn new(path: PathBuf) -> Self {
        let size_file = path.with_extension("size");
        let source_file = path.with_extension("source");
        CachedImage {
            path,
            size_file,
            source_file,
            recipe: None,
        }
    }

    /// The image is also built from `files` (scripts the runtime writes into it): a change
    /// in them makes it stale as another `vtnt` does.
    pub fn with_recipe(mut self, files: &[&[u8]]) -> Self {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        files.hash(&mut h);
        self.recipe = Some(h.finish());
        self
    }

    /// What it is keyed by: `bin`'s SHA-256, then the recipe's hash if it has one.
    fn source(&self, bin: &Path) -> Result<String> {
        let bin = source_of(bin)?;
        Ok(match self.recipe {
            Some(r) => format!("{bin} {r:016x}"),
            None => bin,
        })
    }

    /// Whether it must be built: asked to, missing, or built from another `vtnt` than
    /// `bin` or another recipe (by content, not by time: two installs of different versions share the cache,
    /// and a package's files keep the time they were built).
    pub fn stale(&self, rebuild: bool, bin: &Path) -> Result<bool> {
        if rebuild || !self.path.exists() || !self.size_file.exists() {
            return Ok(true);
        }
        let built_from = std::fs::read_to_string(&self.source_file).unwrap_or_default();
        Ok(built_from.trim() != self.source(bin)?)
    }

    /// Records, once the image is in place, its installed size and the `vtnt` binary `bin`
    /// it was built from.
    pub fn record(&self, bytes: u64, bin: &Path) -> Result<()> {
        std::fs::write(&self.size_file, bytes.to_string())
            .doing(|| format!("writing {}", self.size_file.display()))?;
        std::fs::write(&self.source_file, self.source(bin)?)
            .doing(|| format!("writing {}", self.source_file.display()))
    }

    /// The installed size recorded by [`CachedImage::record`].
    pub fn size(&self) -> Result<u64> {
        std::fs::read_to_string(&self.size_file)
            .doing(|| format!("reading {}", self.size_file.display()))?
            .trim()
            .parse()
            .map_err(|e| Error::Image(format!("parsing {}: {e}", self.size_file.display())))
    }
}

/// What an image built from the `vtnt` binary `bin` is keyed by: its SHA-256.
fn source_of(bin: &Path) -> Result<String> {
    Ok(vtnt_artifacts::Pin::of(bin)
        .doing(|| format!("hashing {}", bin.display()))?
        .sha256)
}

/// Bytes allocated on disk by a file (sparse files count what they use).
pub fn allocated(p: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(p)
        .doing(|| format!("stat {}", p.display()))?
        .blocks()
        * 512)
}

/// Runs a command to completion, failing with its stderr tail and what it was.
pub fn run_cmd(cmd: &mut Command) -> Result<String> {
    let desc = format!("{cmd:?}");
    let out = cmd.output().doing(|| format!("starting {desc}"))?;
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
        return Err(Error::Command {
            command: desc,
            status: out.status,
            stderr_tail: tail,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image built from one `vtnt` is stale for another, even one whose file is older
    /// (a second install, a package built earlier): the cache goes by content.
    #[test]
    fn an_image_is_stale_for_another_binary_whatever_its_time() {
        let dir = std::env::temp_dir().join(format!("vtnt-cache-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (bin, other) = (dir.join("vtnt-a"), dir.join("vtnt-b"));
        std::fs::write(&bin, b"one build").unwrap();
        std::fs::write(&other, b"another build").unwrap();
        let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        let f = std::fs::File::options().write(true).open(&other).unwrap();
        f.set_modified(long_ago).unwrap();
        let image = CachedImage::new(dir.join("image.tar"));
        assert!(image.stale(false, &bin).unwrap(), "not built yet");
        std::fs::write(&image.path, b"image").unwrap();
        assert!(
            image.stale(false, &bin).unwrap(),
            "built, but from no known binary"
        );
        image.record(5, &bin).unwrap();
        assert!(!image.stale(false, &bin).unwrap());
        assert!(image.stale(true, &bin).unwrap(), "asked to rebuild");
        assert!(image.stale(false, &other).unwrap(), "another, older binary");
        assert_eq!(image.size().unwrap(), 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
