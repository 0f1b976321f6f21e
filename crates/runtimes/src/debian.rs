//! Debian root filesystems made by debootstrap, built once and cached under
//! `<cache>/debian/` (downloaded packages under `<cache>/debs`, shared by both):
//!
//! - [`minbase`]: `--variant=minbase`, the base of the paper-like Docker image (the
//!   official `debian` image is a minbase debootstrap too);
//! - [`vm_rootfs`]: minbase plus `systemd-sysv`, `udev`, `kmod`, `iproute2`,
//!   `linux-image-amd64` (whose post-install makes the initrd inside the rootfs; the
//!   kernel is never installed on the host), and `iptables` and `nftables` (the kernel
//!   baselines of `vtnt bench fw` in the VM), the guest of the full-VM runtime.
//!
//! A rootfs is rebuilt when the packages asked for it change: its stamp records them.
//!
//! Suite: the host's `VERSION_CODENAME` (default bookworm); mirror:
//! `VTNT_DEBIAN_MIRROR` or `http://deb.debian.org/debian`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Context, Error, IoContext, Result};

use crate::paths;

/// Packages added to minbase for the VM.
pub const VM_PACKAGES: &str = "systemd-sysv,udev,kmod,iproute2,linux-image-amd64,iptables,nftables";

fn suite() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VERSION_CODENAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "bookworm".into())
}

fn mirror() -> String {
    std::env::var("VTNT_DEBIAN_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".into())
}

/// The cached minbase rootfs (built on first use).
pub fn minbase(rebuild: bool) -> Result<PathBuf> {
    bootstrap("minbase", None, rebuild)
}

/// The cached VM rootfs with systemd and the Debian kernel (built on first use).
pub fn vm_rootfs(rebuild: bool) -> Result<PathBuf> {
    bootstrap("vm-rootfs", Some(VM_PACKAGES), rebuild)
}

fn bootstrap(name: &str, include: Option<&str>, rebuild: bool) -> Result<PathBuf> {
    // one debootstrap at a time: they share the package cache
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let base = paths::cache_dir().join("debian");
    let dir = base.join(name);
    let stamp = base.join(format!("{name}.done"));
    // what the rootfs was made of: another package list is another rootfs
    let recipe = format!("include={}\n", include.unwrap_or(""));
    let built = std::fs::read_to_string(&stamp).is_ok_and(|s| s == recipe);
    if built && dir.is_dir() && !rebuild {
        return Ok(dir);
    }
    let debootstrap = paths::need("debootstrap", "debootstrap")?;
    let debs = paths::cache_dir().join("debs");
    std::fs::create_dir_all(&debs).doing(|| format!("creating {}", debs.display()))?;
    let _ = std::fs::remove_file(&stamp);
    let tmp = base.join(format!("{name}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&base).doing(|| format!("creating {}", base.display()))?;
    let suite = suite();
    tracing::info!(
        suite = %suite,
        image = name,
        dir = %dir.display(),
        "debootstrap: building a Debian root, once (it is cached)"
    );
    let mut cmd = Command::new(debootstrap);
    cmd.arg("--variant=minbase")
        .arg(format!("--cache-dir={}", debs.display()));
    if let Some(inc) = include {
        cmd.arg(format!("--include={inc}"));
    }
    cmd.arg(&suite).arg(&tmp).arg(mirror());
    let res = paths::run_cmd(&mut cmd).during(|| {
        format!(
            "debootstrap of the {name} rootfs (is {} reachable?)",
            mirror()
        )
    });
    if let Err(e) = res {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    // Leave no downloaded package lists or caches in the image.
    for d in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        clear_files(&tmp.join(d));
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir)
        .doing(|| format!("moving {} to {}", tmp.display(), dir.display()))?;
    std::fs::write(&stamp, recipe).doing(|| format!("writing {}", stamp.display()))?;
    Ok(dir)
}

fn clear_files(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A copy of a cached rootfs tree at `dst` that costs no data blocks: its files are hard
/// links to the cache (`cp -al`; a plain `cp -a` when the two are on different file
/// systems). Nothing may write into the copy in place, or the cache changes with it: add
/// or change files with [`put_file`], which unlinks first.
pub fn link_tree(src: &Path, dst: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dst);
    if paths::run_cmd(Command::new("cp").arg("-al").arg(src).arg(dst)).is_err() {
        let _ = std::fs::remove_dir_all(dst);
        paths::run_cmd(Command::new("cp").arg("-a").arg(src).arg(dst))?;
    }
    Ok(())
}

/// Writes `bytes` to `path` in a tree made by [`link_tree`] as a new file (a previous file
/// of that name is unlinked, never truncated), with permission bits `mode`.
pub fn put_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).doing(|| format!("creating {}", d.display()))?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).doing(|| format!("replacing {}", path.display())),
    }
    std::fs::write(path, bytes).doing(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .doing(|| format!("chmod {mode:o} {}", path.display()))?;
    Ok(())
}

/// Copies this host's `program` into the tree `root` at the same path, with the shared
/// libraries it loads ([`add_libraries`]). Files go in through [`put_file`].
pub fn add_program(program: &Path, root: &Path) -> Result<()> {
    let to = root.join(program.strip_prefix("/").unwrap_or(program));
    let bytes = std::fs::read(program).doing(|| format!("reading {}", program.display()))?;
    put_file(&to, &bytes, 0o755)?;
    add_libraries(program, root)
}

/// Copies the shared libraries `program` loads (`ldd`, this host's) that the tree `root`
/// lacks into it, each at its path (a Debian rootfs of the host's suite keeps its own
/// libc; an empty tree gets them all). Files go in through [`put_file`].
pub fn add_libraries(program: &Path, root: &Path) -> Result<()> {
    let ldd = paths::run_cmd(Command::new("ldd").arg(program))?;
    let libs = ldd
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from);
    for f in libs {
        let to = root.join(f.strip_prefix("/").unwrap_or(&f));
        // (a Debian tree's /lib is a link to usr/lib: a library there exists too)
        if to.exists() {
            continue;
        }
        let bytes = std::fs::read(&f).doing(|| format!("reading {}", f.display()))?;
        put_file(&to, &bytes, 0o755)?;
    }
    Ok(())
}

/// Apparent size of a directory tree in bytes (`du -sb`).
pub fn tree_bytes(dir: &Path) -> Result<u64> {
    let out = paths::run_cmd(Command::new("du").arg("-sb").arg(dir))?;
    out.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::Runtime(format!("du -sb {}: unexpected output", dir.display())))
}
