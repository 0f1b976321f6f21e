//! Where artifacts are looked for, in order (docs/install.md):
//!
//! 1. `VTNT_LIB_DIR`, when it is set and not empty: then it alone, so that a test or an
//!    operator who names a directory never gets a file from another;
//! 2. `<the running executable's directory>/../lib/vtnt` (`/usr/bin/vtnt` ->
//!    `/usr/lib/vtnt`, `~/.local/bin/vtnt` -> `~/.local/lib/vtnt`, a checkout's
//!    `target/release/vtnt` -> `target/lib/vtnt`, which `cargo xtask dist` links to its
//!    tree); an executable in a directory named `deps` (cargo's test binaries,
//!    `target/debug/deps/`) counts as in that directory's parent;
//! 3. `/usr/local/lib/vtnt`, then `/usr/lib/vtnt` (the Debian package's).
//!
//! `vtnt`'s configuration file may name one more directory (`[artifacts] lib-dir`:
//! [`configure_lib_dir`]), searched between 1 and 2.

use std::path::{Path, PathBuf};

use crate::{Artifact, Error};

/// The environment variable that names the one directory to look in.
pub const LIB_DIR_ENV: &str = "VTNT_LIB_DIR";

/// The system directories, in the order they are searched.
pub const SYSTEM_DIRS: [&str; 2] = ["/usr/local/lib/vtnt", "/usr/lib/vtnt"];

/// The directory of [`configure_lib_dir`], once set.
static CONFIGURED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `dir` the first directory of the [`SearchPath::standard`] of this process after
/// `VTNT_LIB_DIR` (`vtnt`'s configuration file: `[artifacts] lib-dir`); the first call
/// counts.
pub fn configure_lib_dir(dir: PathBuf) {
    let _ = CONFIGURED.set(dir);
}

/// Directories to look in, first first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    dirs: Vec<PathBuf>,
}

impl SearchPath {
    /// The standard order (this module's docs) for this process.
    pub fn standard() -> SearchPath {
        if let Some(d) = std::env::var_os(LIB_DIR_ENV).filter(|d| !d.is_empty()) {
            return SearchPath::with_dirs(vec![PathBuf::from(d)]);
        }
        let mut dirs: Vec<PathBuf> = CONFIGURED.get().cloned().into_iter().collect();
        dirs.extend(
            std::env::current_exe()
                .ok()
                .and_then(|exe| beside_executable(&exe)),
        );
        dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
        SearchPath::with_dirs(dirs)
    }

    /// Exactly `dirs`, in this order.
    pub fn with_dirs(dirs: Vec<PathBuf>) -> SearchPath {
        SearchPath { dirs }
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The first file named as `artifact` in the directories, unchecked.
    pub fn locate(&self, artifact: Artifact) -> Result<PathBuf, Error> {
        self.dirs
            .iter()
            .map(|d| d.join(artifact.file_name()))
            .find(|p| p.is_file())
            .ok_or_else(|| Error::Missing {
                file: artifact.file_name().into(),
                looked_in: self.dirs.clone(),
            })
    }

    /// The first file named as `artifact`, checked against the manifest beside it
    /// ([`crate::check`]).
    pub fn find(&self, artifact: Artifact) -> Result<crate::Found, Error> {
        crate::check(artifact, &self.locate(artifact)?)
    }
}

/// `<dir of exe>/../lib/vtnt`, a `deps` directory counting as its parent.
pub fn beside_executable(exe: &Path) -> Option<PathBuf> {
    let mut dir = exe.parent()?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent()?;
    }
    Some(dir.parent()?.join("lib").join("vtnt"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_a_sibling_of_the_executables_directory() {
        let at = |exe: &str| beside_executable(Path::new(exe)).map(|p| p.display().to_string());
        assert_eq!(at("/usr/bin/vtnt").as_deref(), Some("/usr/lib/vtnt"));
        assert_eq!(
            at("/home/u/.local/bin/vtnt").as_deref(),
            Some("/home/u/.local/lib/vtnt")
        );
        assert_eq!(
            at("/src/target/release/vtnt").as_deref(),
            Some("/src/target/lib/vtnt")
        );
        assert_eq!(
            at("/src/target/debug/deps/runtimes-1234").as_deref(),
            Some("/src/target/lib/vtnt")
        );
    }

    #[test]
    fn a_missing_file_names_itself_and_every_directory() {
        let empty =
            std::env::temp_dir().join(format!("vtnt-artifacts-none-{}", std::process::id()));
        let s = SearchPath::with_dirs(vec![empty.clone(), PathBuf::from("/nonexistent/lib/vtnt")]);
        let e = s.locate(Artifact::JobVm).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "missing vtnt-unikernel.elf (looked in {}, /nonexistent/lib/vtnt); install the \
                 vtnt package, or run `cargo xtask dist` in a checkout",
                empty.display()
            )
        );
    }
}
