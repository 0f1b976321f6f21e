//! What an installed `vtnt` needs at run time besides itself, and where it finds it.
//!
//! The runtimes need files that only a build produces: the static (musl) `vtnt` that
//! process, container and VM images carry, `vtnt-monitor`, and the unikernel's images
//! (the job for a VM and for an spt process, the stream endpoint for both). `cargo xtask
//! dist` (or the Debian package) installs them in one directory, `lib/vtnt`, with a
//! manifest, [`MANIFEST`], that pins each file's SHA-256 and size and names the vtnt
//! version and commit that built them. At run time [`find`] looks for a file in the
//! [`SearchPath`] (`VTNT_LIB_DIR` alone when it is set; else the configuration's
//! `lib-dir`, `<the executable's directory>/../lib/vtnt`, `/usr/local/lib/vtnt`,
//! `/usr/lib/vtnt`) and checks it
//! against the manifest beside it and as an ELF file for this machine before anyone boots,
//! executes or ships it. Nothing here builds anything: a missing file is one line that
//! says where it was looked for and how to get it ([`Error::Missing`]).
//!
//! ```no_run
//! let image = vtnt_artifacts::find(vtnt_artifacts::Artifact::JobVm)?;
//! println!("{} ({} bytes, sha256 {})", image.path.display(), image.pin.size, image.pin.sha256);
//! # Ok::<(), vtnt_artifacts::Error>(())
//! ```

pub mod elf;
pub mod manifest;
mod search;

pub use manifest::{Manifest, Pin};
pub use search::{configure_lib_dir, SearchPath, LIB_DIR_ENV, SYSTEM_DIRS};

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The manifest's file name, in the artifacts' directory.
pub const MANIFEST: &str = "artifacts.toml";

/// The version of vtnt this is, which the manifest must name.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The files a `lib/vtnt` holds besides its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Artifact {
    /// `vtnt` linked statically against musl, without the fleet: the binary that the
    /// native, runc, Docker and VM images carry.
    StaticVtnt,
    /// `vtnt-monitor`, the microVM monitor (static, musl).
    Monitor,
    /// The unikernel's job image for a VM (PVH; `vtnt-monitor`, QEMU, Firecracker).
    JobVm,
    /// The unikernel's job image as a static Linux process (the spt runtime).
    JobSpt,
    /// The unikernel's stream endpoint for a VM (`vtnt bench net`).
    StreamVm,
    /// The unikernel's stream endpoint as an spt process (`vtnt bench net`).
    StreamSpt,
    /// The unikernel's firewall network function as an spt process (`vtnt fw run
    /// --runtime spt`).
    NfSpt,
    /// The unikernel's firewall network function for a VM (`vtnt fw run --runtime
    /// microvm`, under QEMU).
    NfVm,
}

impl Artifact {
    pub const ALL: [Artifact; 8] = [
        Artifact::StaticVtnt,
        Artifact::Monitor,
        Artifact::JobVm,
        Artifact::JobSpt,
        Artifact::StreamVm,
        Artifact::StreamSpt,
        Artifact::NfSpt,
        Artifact::NfVm,
    ];

    /// Its file name in `lib/vtnt`.
    pub fn file_name(self) -> &'static str {
        match self {
            Artifact::StaticVtnt => "vtnt-static",
            Artifact::Monitor => "vtnt-monitor",
            Artifact::JobVm => "vtnt-unikernel.elf",
            Artifact::JobSpt => "vtnt-spt.elf",
            Artifact::StreamVm => "vtnt-stream.elf",
            Artifact::StreamSpt => "vtnt-stream-spt.elf",
            Artifact::NfSpt => "vtnt-fw-spt.elf",
            Artifact::NfVm => "vtnt-fw.elf",
        }
    }

    /// What it is, in a few words.
    pub fn what(self) -> &'static str {
        match self {
            Artifact::StaticVtnt => "the static vtnt that runtime images carry",
            Artifact::Monitor => "the microVM monitor",
            Artifact::JobVm => "the unikernel's job image for a VM",
            Artifact::JobSpt => "the unikernel's job image as an spt process",
            Artifact::StreamVm => "the unikernel's stream endpoint for a VM",
            Artifact::StreamSpt => "the unikernel's stream endpoint as an spt process",
            Artifact::NfSpt => "the unikernel's firewall network function as an spt process",
            Artifact::NfVm => "the unikernel's firewall network function for a VM",
        }
    }

    /// Whether the file is executed (mode 0755 when installed) rather than booted.
    pub fn executable(self) -> bool {
        matches!(
            self,
            Artifact::StaticVtnt
                | Artifact::Monitor
                | Artifact::JobSpt
                | Artifact::StreamSpt
                | Artifact::NfSpt
        )
    }
}

/// An artifact found and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    /// What the manifest pins it to (it matched).
    pub pin: Pin,
}

/// Why an artifact cannot be used. Each is one line naming the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// missing {file} (looked in {}); install the vtnt package, or run `cargo xtask dist` in a checkout
    #[error("missing {file} (looked in {}); install the vtnt package, or run `cargo xtask dist` in a checkout", join(.looked_in))]
    Missing {
        file: String,
        looked_in: Vec<PathBuf>,
    },
    /// The file is there but no manifest beside it pins it.
    #[error("{} is not pinned: {} {why}; reinstall the vtnt package, or run `cargo xtask dist` in a checkout", .path.display(), .manifest.display())]
    Unpinned {
        path: PathBuf,
        manifest: PathBuf,
        why: String,
    },
    /// The file is not what the manifest (or the ELF format) says it must be.
    #[error("{} is refused: {why}; reinstall the vtnt package, or run `cargo xtask dist` in a checkout", .path.display())]
    Corrupt { path: PathBuf, why: String },
    /// The manifest cannot be read or is not one.
    #[error("{}: {why}", .path.display())]
    Manifest { path: PathBuf, why: String },
}

fn join(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Finds `artifact` in the standard [`SearchPath`] and checks it ([`SearchPath::find`]);
/// a file already checked by this process is checked again only if its size or
/// modification time changed.
pub fn find(artifact: Artifact) -> Result<Found, Error> {
    type Seen = Vec<(PathBuf, Option<std::time::SystemTime>, Found)>;
    static SEEN: Mutex<Seen> = Mutex::new(Vec::new());
    let search = SearchPath::standard();
    let path = search.locate(artifact)?;
    let stamp = stamp(&path);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, f)) = seen
        .iter()
        .find(|(p, s, f)| *p == path && *s == stamp && Some(f.pin.size) == size(&path))
    {
        return Ok(f.clone());
    }
    let found = check(artifact, &path)?;
    seen.retain(|(p, _, _)| *p != path);
    seen.push((path, stamp, found.clone()));
    Ok(found)
}

fn stamp(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn size(p: &Path) -> Option<u64> {
    std::fs::metadata(p).map(|m| m.len()).ok()
}

/// Checks the file `path` (found as `artifact`) against the manifest in its directory.
pub fn check(artifact: Artifact, path: &Path) -> Result<Found, Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let manifest_path = dir.join(MANIFEST);
    let unpinned = |why: String| Error::Unpinned {
        path: path.to_path_buf(),
        manifest: manifest_path.clone(),
        why,
    };
    let manifest = match Manifest::read(&manifest_path) {
        Ok(m) => m,
        Err(Error::Manifest { why, .. }) if !manifest_path.exists() => {
            return Err(unpinned(format!("is missing ({why})")))
        }
        Err(e) => return Err(e),
    };
    if manifest.version != VERSION {
        return Err(unpinned(format!(
            "is vtnt {}'s, this is vtnt {VERSION}",
            manifest.version
        )));
    }
    let pin = manifest
        .files
        .get(artifact.file_name())
        .ok_or_else(|| unpinned(format!("has no entry for {}", artifact.file_name())))?;
    pin.verify(path)?;
    Ok(Found {
        path: path.to_path_buf(),
        pin: pin.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A directory holding `vtnt-unikernel.elf` (a tiny ELF) and a manifest pinning it.
    struct Lib(PathBuf);

    impl Lib {
        fn new(tag: &str) -> Lib {
            let d = std::env::temp_dir().join(format!("vtnt-lib-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            let image = d.join(Artifact::JobVm.file_name());
            std::fs::write(&image, elf::tests::tiny(62, 4096)).unwrap();
            let mut files = BTreeMap::new();
            files.insert(
                Artifact::JobVm.file_name().to_string(),
                Pin::of(&image).unwrap(),
            );
            let m = Manifest {
                version: VERSION.into(),
                commit: "test".into(),
                files,
            };
            std::fs::write(d.join(MANIFEST), m.to_toml()).unwrap();
            Lib(d)
        }

        fn image(&self) -> PathBuf {
            self.0.join(Artifact::JobVm.file_name())
        }

        fn refusal(&self) -> String {
            let s = SearchPath::with_dirs(vec![self.0.clone()]);
            s.find(Artifact::JobVm).unwrap_err().to_string()
        }
    }

    impl Drop for Lib {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_pinned_file_is_found() {
        let lib = Lib::new("ok");
        let s = SearchPath::with_dirs(vec![PathBuf::from("/nonexistent"), lib.0.clone()]);
        let f = s.find(Artifact::JobVm).unwrap();
        assert_eq!(f.path, lib.image());
        assert_eq!(f.pin.size, 4096);
    }

    #[test]
    fn a_truncated_image_is_refused_by_name() {
        let lib = Lib::new("trunc");
        let bytes = std::fs::read(lib.image()).unwrap();
        std::fs::write(lib.image(), &bytes[..1000]).unwrap();
        assert_eq!(
            lib.refusal(),
            format!(
                "{} is refused: truncated: segment 0's bytes end at byte 4096, past the file's \
                 1000; reinstall the vtnt package, or run `cargo xtask dist` in a checkout",
                lib.image().display()
            )
        );
    }

    #[test]
    fn an_image_for_another_architecture_is_refused_by_name() {
        let lib = Lib::new("arch");
        std::fs::write(lib.image(), elf::tests::tiny(183, 4096)).unwrap();
        let e = lib.refusal();
        assert!(
            e.starts_with(&format!(
                "{} is refused: built for aarch64, not x86_64;",
                lib.image().display()
            )),
            "{e}"
        );
        std::fs::write(lib.image(), vec![0u8; 4096]).unwrap();
        assert!(lib.refusal().contains("is refused: not an ELF file;"));
    }

    #[test]
    fn an_altered_image_is_refused_by_its_hash() {
        let lib = Lib::new("hash");
        let mut bytes = std::fs::read(lib.image()).unwrap();
        bytes[4000] ^= 1;
        std::fs::write(lib.image(), &bytes).unwrap();
        let e = lib.refusal();
        assert!(
            e.starts_with(&format!("{} is refused: sha256 ", lib.image().display()))
                && e.contains("where the manifest pins"),
            "{e}"
        );
    }

    #[test]
    fn a_file_without_its_manifest_or_entry_is_unpinned() {
        let lib = Lib::new("unpinned");
        let manifest = lib.0.join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(&manifest, text.replace(VERSION, "0.0.0-other")).unwrap();
        assert!(lib
            .refusal()
            .contains(&format!("is vtnt 0.0.0-other's, this is vtnt {VERSION}")));
        std::fs::write(&manifest, text.replace("vtnt-unikernel.elf", "other.elf")).unwrap();
        assert!(lib
            .refusal()
            .contains("has no entry for vtnt-unikernel.elf"));
        std::fs::remove_file(&manifest).unwrap();
        assert!(lib.refusal().starts_with(&format!(
            "{} is not pinned: {} is missing",
            lib.image().display(),
            manifest.display()
        )));
    }
}
