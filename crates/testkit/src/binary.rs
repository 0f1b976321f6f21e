//! The `vtnt` command for the integration tests of a crate other than the cli's:
//! `env!("CARGO_BIN_EXE_vtnt")` exists only in the `vtnt` package's own tests, and a
//! library cannot depend on the binary that depends on it. [`vtnt_binary`] builds it
//! with the cargo that runs the tests, in their target directory and profile (a no-op
//! when it is up to date: under `cargo test --workspace` it is built already).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of a `vtnt` built from this checkout (default features), built on first use
/// in this test process; panics, with cargo's output, if it does not build.
pub fn vtnt_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build).clone()
}

fn build() -> PathBuf {
    // a test runs as <target>/<profile dir>/deps/<test>-<hash>
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary under <target>/<profile>/deps");
    let target = profile_dir.parent().expect("the target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile in {}", profile_dir.display()),
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&workspace)
        .args([
            "build",
            "-q",
            "-p",
            "vtnt",
            "--profile",
            profile,
            "--target-dir",
        ])
        .arg(target)
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "cargo build -p vtnt: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir.join("vtnt")
}
