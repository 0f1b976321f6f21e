//! `cargo xtask deb`: the Debian package, `vtnt_<version>_amd64.deb`, from the install
//! tree ([`crate::dist`]) with `dpkg-deb` alone (no debhelper, no cargo-deb: the tree is
//! already what is installed, and the few maintainer scripts are files in `deb/`):
//!
//! ```text
//! /usr/bin/vtnt                                   file capability cap_net_raw+ep (postinst)
//! /usr/bin/vtnt-agent                             vtnt without `vtnt bench`, for the agent
//! /usr/lib/vtnt/...                               the tree's lib/vtnt, manifest included
//! /lib/systemd/system/vtnt-agent.service          `vtnt-agent agent $VTNT_AGENT_ARGS`, as root
//! /lib/systemd/system/vtnt-daemon.service         `vtnt daemon $VTNT_DAEMON_ARGS`, CAP_NET_RAW only
//! /etc/default/vtnt                               their arguments (a conffile)
//! /usr/share/doc/vtnt/copyright                   machine-readable; the licence is Debian's
//!                                                 /usr/share/common-licenses/Apache-2.0
//! /usr/share/doc/vtnt/THIRD-PARTY-NOTICES.gz      the tree's notices
//! /usr/share/doc/vtnt/{README.md,install.md}.gz
//! /usr/share/man/man1/vtnt*.1.gz                  the tree's man pages
//! /usr/share/bash-completion/completions/vtnt     the tree's completion scripts
//! /usr/share/zsh/vendor-completions/_vtnt
//! /usr/share/fish/vendor_completions.d/vtnt.fish
//! /usr/share/lintian/overrides/vtnt               what lintian flags on purpose, and why
//! ```
//!
//! Documentation and man pages are compressed with `gzip -9n`, as Debian policy asks
//! (12.1, 12.3).
//!
//! Depends: the shared libraries `vtnt` links (`libc6` at least the newest `GLIBC_`
//! version its symbols ask for) and `libcap2-bin` (`setcap`, for the postinst);
//! Recommends `iproute2` (the lab and runtimes); Suggests the runtimes' and peers' tools.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use crate::dist::Dist;
use crate::files::{self, mkdir, write};
use crate::share;

/// The package's name.
pub const PACKAGE: &str = "vtnt";
/// Its architecture (the tree is built for x86_64).
pub const ARCH: &str = "amd64";

/// What the package recommends: `vtnt lab` and the runtimes' networks use `ip`.
const RECOMMENDS: &str = "iproute2";
/// What it suggests: each runtime's or peer's own tool, installed where it is used
/// (QEMU where `/dev/kvm` does not work or for the full VM, runc and Docker for those
/// runtimes, nats-server on the fleet's broker, scamper as a peer, iperf3 for `vtnt bench
/// net`, debootstrap and qemu-utils for the VM and Docker images).
const SUGGESTS: &str = "qemu-system-x86, runc, docker.io, nats-server, scamper, iperf3, \
                        debootstrap, qemu-utils, e2fsprogs";

/// The maintainer scripts, units and files of `deb/`.
const FILES: [(&str, &str, u32); 8] = [
    ("DEBIAN/postinst", include_str!("../deb/postinst"), 0o755),
    ("DEBIAN/prerm", include_str!("../deb/prerm"), 0o755),
    ("DEBIAN/postrm", include_str!("../deb/postrm"), 0o755),
    (
        "lib/systemd/system/vtnt-agent.service",
        include_str!("../deb/vtnt-agent.service"),
        0o644,
    ),
    (
        "lib/systemd/system/vtnt-daemon.service",
        include_str!("../deb/vtnt-daemon.service"),
        0o644,
    ),
    ("etc/default/vtnt", include_str!("../deb/default"), 0o644),
    (
        "usr/share/doc/vtnt/copyright",
        include_str!("../deb/copyright"),
        0o644,
    ),
    (
        "usr/share/lintian/overrides/vtnt",
        include_str!("../deb/lintian-overrides"),
        0o644,
    ),
];

/// The package's file name for `version`.
pub fn file_name(version: &str) -> String {
    format!("{PACKAGE}_{version}_{ARCH}.deb")
}

/// Builds the package from `dist` next to it (`<dist root>/vtnt_<version>_amd64.deb`).
pub fn build(dist: &Dist) -> anyhow::Result<PathBuf> {
    let version = dist.manifest.version.clone();
    let stage = dist
        .root
        .with_file_name(format!("deb-stage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stage);
    let result = stage_and_build(dist, &stage, &version);
    let _ = std::fs::remove_dir_all(&stage);
    result
}

fn stage_and_build(dist: &Dist, stage: &Path, version: &str) -> anyhow::Result<PathBuf> {
    copy(&dist.bin(), &stage.join("usr/bin/vtnt"), 0o755)?;
    copy(&dist.agent(), &stage.join("usr/bin/vtnt-agent"), 0o755)?;
    for entry in std::fs::read_dir(dist.lib())? {
        let src = entry?.path();
        let name = src.file_name().unwrap_or_default();
        let mode = std::fs::metadata(&src)?.permissions();
        let mode = std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777;
        copy(&src, &stage.join("usr/lib/vtnt").join(name), mode)?;
    }
    let doc = stage.join("usr/share/doc/vtnt");
    let ws = crate::cargo::workspace();
    for file in ["README.md", "docs/install.md"] {
        let name = Path::new(file).file_name().unwrap_or_default();
        gzip(&ws.join(file), &doc.join(name))?;
    }
    for file in files::files(&dist.share())? {
        let src = dist.share().join(&file);
        let dst = stage.join("usr/share").join(&file);
        if file == share::LICENSE {
            // the copyright file names it (Debian's own copy of the text)
            continue;
        } else if file == share::NOTICES || file.starts_with(share::MAN1) {
            gzip(&src, &dst)?;
        } else {
            copy(&src, &dst, 0o644)?;
        }
    }
    for (path, text, mode) in FILES {
        let p = stage.join(path);
        mkdir(p.parent().unwrap_or(stage))?;
        write(&p, text)?;
        chmod(&p, mode)?;
    }
    write(&stage.join("DEBIAN/conffiles"), "/etc/default/vtnt\n")?;
    let md5sums = md5sums(stage)?;
    write(&stage.join("DEBIAN/md5sums"), &md5sums)?;
    let control = control(version, &depends(&dist.bin())?, installed_kib(stage)?);
    write(&stage.join("DEBIAN/control"), &control)?;
    let out = dist.root.join(file_name(version));
    crate::cargo::run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(stage)
            .arg(&out),
    )
    .context("building the package (dpkg-deb, Debian package dpkg)")?;
    Ok(out)
}

/// The control file.
fn control(version: &str, depends: &str, installed_kib: u64) -> String {
    format!(
        "Package: {PACKAGE}\n\
         Version: {version}\n\
         Architecture: {ARCH}\n\
         Maintainer: vTNT developers <vtnt@example.invalid>\n\
         Installed-Size: {installed_kib}\n\
         Depends: {depends}\n\
         Recommends: {RECOMMENDS}\n\
         Suggests: {SUGGESTS}\n\
         Section: net\n\
         Priority: optional\n\
         Homepage: https://example.invalid/vtnt\n\
         Description: traceroute that reveals MPLS tunnels (TNT), with its own unikernel\n \
         vTNT is TNT, the traceroute extension of scamper that reveals MPLS tunnels and\n \
         fingerprints routers, rebuilt around one probing engine that runs as a Linux\n \
         command, in a unikernel (as a microVM under its own monitor, or as a sandboxed\n \
         process), in runc, Docker and a full VM, with an emulated MPLS lab that has\n \
         ground truth and a NATS fleet of agents. It speaks scamper's formats and\n \
         options.\n \
         .\n \
         trace, ping, tnt and daemon run without root (the binary has CAP_NET_RAW).\n"
    )
}

/// `Depends`: the packages of the shared libraries `bin` needs (`libc6` with the newest
/// `GLIBC_` version its symbols ask for), and `libcap2-bin` for the postinst's `setcap`.
fn depends(bin: &Path) -> anyhow::Result<String> {
    let dynamic = readelf(bin, "--dynamic")?;
    let mut packages = BTreeSet::new();
    for line in dynamic.lines().filter(|l| l.contains("(NEEDED)")) {
        let Some(lib) = line.split('[').nth(1).and_then(|r| r.split(']').next()) else {
            continue;
        };
        packages.insert(package_of(lib)?);
    }
    let glibc = readelf(bin, "--dyn-syms")?
        .split("@GLIBC_")
        .skip(1)
        .filter_map(|rest| {
            let v: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let parts: Vec<u32> = v.split('.').filter_map(|p| p.parse().ok()).collect();
            (!parts.is_empty()).then_some(parts)
        })
        .max();
    let mut words: Vec<String> = packages
        .into_iter()
        .map(|p| match (&glibc, p.as_str()) {
            (Some(v), "libc6") => {
                let v: Vec<String> = v.iter().map(u32::to_string).collect();
                format!("libc6 (>= {})", v.join("."))
            }
            _ => p,
        })
        .collect();
    words.push("libcap2-bin".into());
    Ok(words.join(", "))
}

/// The Debian package that holds shared library `lib` on this (the building) host.
fn package_of(lib: &str) -> anyhow::Result<String> {
    for dir in ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"] {
        let out = Command::new("dpkg-query")
            .arg("-S")
            .arg(Path::new(dir).join(lib))
            .output()
            .context("dpkg-query")?;
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(pkg) = text.split([':', ',']).next() {
                return Ok(pkg.trim().to_string());
            }
        }
    }
    bail!("no Debian package holds {lib}, which vtnt links")
}

fn readelf(bin: &Path, what: &str) -> anyhow::Result<String> {
    let out = Command::new("readelf")
        .args([what, "--wide"])
        .arg(bin)
        .output()
        .context("readelf (Debian package binutils)")?;
    if !out.status.success() {
        bail!("readelf {what} {}: {}", bin.display(), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `DEBIAN/md5sums`: every file but `DEBIAN/`'s, by path relative to the root.
fn md5sums(stage: &Path) -> anyhow::Result<String> {
    let files: Vec<String> = files::files(stage)?
        .into_iter()
        .filter(|p| !p.starts_with("DEBIAN/"))
        .collect();
    let out = Command::new("md5sum")
        .current_dir(stage)
        .args(&files)
        .output()
        .context("md5sum")?;
    if !out.status.success() {
        bail!("md5sum: {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `Installed-Size`: the files' sizes in KiB, each rounded up.
fn installed_kib(stage: &Path) -> anyhow::Result<u64> {
    let mut kib = 0;
    for f in files::files(stage)? {
        if !f.starts_with("DEBIAN/") {
            kib += std::fs::metadata(stage.join(&f))?.len().div_ceil(1024);
        }
    }
    Ok(kib)
}

/// Writes `src` compressed (`gzip -9n`: no name, no time stamp) to `dst` + `.gz`.
fn gzip(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let out = Command::new("gzip")
        .args(["-9n", "-c"])
        .arg(src)
        .output()
        .context("gzip")?;
    if !out.status.success() {
        bail!("gzip {}: {}", src.display(), out.status);
    }
    let mut name = dst.as_os_str().to_owned();
    name.push(".gz");
    let dst = PathBuf::from(name);
    mkdir(dst.parent().unwrap_or(Path::new("/")))?;
    std::fs::write(&dst, out.stdout).with_context(|| format!("writing {}", dst.display()))?;
    chmod(&dst, 0o644)
}

fn copy(src: &Path, dst: &Path, mode: u32) -> anyhow::Result<()> {
    mkdir(dst.parent().unwrap_or(Path::new("/")))?;
    std::fs::copy(src, dst)
        .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    chmod(dst, mode)
}

fn chmod(p: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", p.display()))
}
