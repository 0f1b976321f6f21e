//! `vtnt` outside its checkout (docs/install.md): a copy of the binary in a directory of
//! its own finds its run-time files only through the search path, says in one line which
//! file is missing and where it looked, exits non-zero, and refuses a corrupt image
//! (truncated, built for another architecture, altered) naming it. The corrupt images are
//! made from the installed ones (`cargo xtask dist`), so those tests need them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use vtnt_artifacts::{Artifact, MANIFEST, SYSTEM_DIRS};

/// A directory of a test's own, removed on drop, readable by all.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vtnt-installed-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("bin")).unwrap();
        std::fs::copy(env!("CARGO_BIN_EXE_vtnt"), d.join("bin/vtnt")).unwrap();
        Dir(d)
    }

    /// `bin/vtnt ARGS`, with `VTNT_LIB_DIR` set to `lib` or (None) unset, and a cache of
    /// its own.
    fn vtnt(&self, lib: Option<&Path>, args: &[&str]) -> Output {
        let mut c = Command::new(self.0.join("bin/vtnt"));
        c.args(args)
            .env("VTNT_CACHE_DIR", self.0.join("cache"))
            .env_remove("VTNT_LIB_DIR");
        if let Some(lib) = lib {
            c.env("VTNT_LIB_DIR", lib);
        }
        c.output().expect("running the copied vtnt")
    }

    /// `lib/vtnt` beside the copy, holding the installed files and manifest.
    fn with_installed_lib(&self) -> Option<PathBuf> {
        let found = vtnt_artifacts::find(Artifact::JobSpt)
            .map_err(|e| {
                vtnt_testkit::skip_or_fail(
                    "the corrupt-image tests",
                    &format!("{e} (they corrupt copies of the installed images)"),
                    None,
                )
            })
            .ok()?;
        let from = found.path.parent()?;
        let lib = self.0.join("lib/vtnt");
        std::fs::create_dir_all(&lib).unwrap();
        for name in [
            Artifact::JobSpt.file_name(),
            Artifact::JobVm.file_name(),
            MANIFEST,
        ] {
            std::fs::copy(from.join(name), lib.join(name)).unwrap();
        }
        Some(lib)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const HOW: &str = "install the vtnt package, or run `cargo xtask dist` in a checkout";

#[test]
fn a_missing_image_is_one_line_naming_it_and_where_it_was_looked_for() {
    let d = Dir::new("missing");
    // VTNT_LIB_DIR, when set, is the only place looked in
    let empty = d.0.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = d.vtnt(Some(&empty), &["image", "build", "microvm"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "vtnt: missing vtnt-unikernel.elf (looked in {}); {HOW}\n",
            empty.display()
        )
    );
    // what runs on this host alone needs none of it
    let out = d.vtnt(Some(&empty), &["lab", "generate", "--seed", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // unset: beside the executable, then the system's directories
    let installed = SYSTEM_DIRS
        .iter()
        .any(|s| Path::new(s).join(Artifact::JobSpt.file_name()).exists());
    let out = d.vtnt(None, &["image", "build", "spt"]);
    if installed {
        eprintln!("a system directory holds the spt image: only the line's form is checked");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "vtnt: missing vtnt-spt.elf (looked in {}, {}); {HOW}\n",
            d.0.join("lib/vtnt").display(),
            SYSTEM_DIRS.join(", ")
        )
    );
}

/// Builds the spt image from `lib`'s copy after `corrupt` changed it; the refusal.
fn refused(d: &Dir, lib: &Path, corrupt: impl FnOnce(&mut Vec<u8>)) -> String {
    let image = lib.join(Artifact::JobSpt.file_name());
    let mut bytes = std::fs::read(&image).unwrap();
    let whole = bytes.clone();
    corrupt(&mut bytes);
    std::fs::write(&image, &bytes).unwrap();
    let out = d.vtnt(None, &["image", "build", "spt"]);
    std::fs::write(&image, &whole).unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{} is refused: ", image.display())),
        "{err}"
    );
    err
}

#[test]
fn a_corrupt_image_is_refused_with_its_name() {
    let d = Dir::new("corrupt");
    let Some(lib) = d.with_installed_lib() else {
        return;
    };
    // intact, it is taken (from beside the executable: VTNT_LIB_DIR is unset)
    let out = d.vtnt(None, &["image", "build", "spt", "--print-path"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = refused(&d, &lib, |b| b.truncate(b.len() / 2));
    assert!(err.contains("is refused: truncated: "), "{err}");
    // e_machine 183: aarch64
    let err = refused(&d, &lib, |b| {
        b[18..20].copy_from_slice(&183u16.to_le_bytes())
    });
    assert!(
        err.contains("is refused: built for aarch64, not x86_64"),
        "{err}"
    );
    let err = refused(&d, &lib, |b| b[..4].copy_from_slice(b"#!/b"));
    assert!(err.contains("is refused: not an ELF file"), "{err}");
    let err = refused(&d, &lib, |b| {
        let mid = b.len() / 2;
        b[mid] ^= 0xff;
    });
    assert!(
        err.contains("is refused: sha256 ") && err.contains("where the manifest pins"),
        "{err}"
    );
    // a manifest of another version pins nothing
    let manifest = lib.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).unwrap();
    let other = text.replace(
        &format!("version = \"{}\"", vtnt_artifacts::VERSION),
        "version = \"0.0.0\"",
    );
    std::fs::write(&manifest, other).unwrap();
    let out = d.vtnt(None, &["image", "build", "spt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "is not pinned: {} is vtnt 0.0.0's, this is vtnt {}",
            manifest.display(),
            vtnt_artifacts::VERSION
        )),
        "{}",
        stderr(&out)
    );
}
