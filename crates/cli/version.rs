//! The build's version string, for build scripts: the package version and the commit the
//! program is compiled from, `0.1.0 (commit 1a2b3c4d)`, set as the compile-time variable
//! `VTNT_VERSION` (`env!("VTNT_VERSION")`), and the commit alone as `VTNT_COMMIT`. The commit is `$VTNT_BUILD_COMMIT` when set
//! (a build from a source archive says which commit it is), else git's short hash of
//! HEAD with `-dirty` when tracked files differ from it, else `unknown` (no git, or not a
//! checkout). The `vtnt` command's build script and the unikernel's include this file,
//! so that both name their build the same way.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Prints the `cargo:` lines: `VTNT_VERSION`, `VTNT_COMMIT`, and what makes cargo run the script again
/// (a commit, a change of the index or of any source file of the workspace).
pub fn emit() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../..");
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    println!("cargo:rerun-if-env-changed=VTNT_BUILD_COMMIT");
    for p in ["crates", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let commit = match std::env::var("VTNT_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => from_git(&root).unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=VTNT_COMMIT={commit}");
    println!("cargo:rustc-env=VTNT_VERSION={version} (commit {commit})");
}

/// HEAD's short hash, `-dirty` when tracked files differ from it; `None` without git or
/// outside a checkout. Also asks cargo to rerun when HEAD, its branch or the index move.
fn from_git(root: &Path) -> Option<String> {
    let hash = git(root, &["rev-parse", "--short", "HEAD"])?;
    let mut watch = vec!["HEAD".to_string(), "index".into(), "packed-refs".into()];
    watch.extend(git(root, &["symbolic-ref", "-q", "HEAD"]));
    for name in watch {
        if let Some(p) = git(root, &["rev-parse", "--git-path", &name]) {
            let p = root.join(PathBuf::from(p));
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    // --no-optional-locks: a status that rewrote the index would start the next build
    // over again
    let status = git(
        root,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    )?;
    Some(if status.is_empty() {
        hash
    } else {
        format!("{hash}-dirty")
    })
}

/// What `git -C root ARGS` prints (trimmed), if it runs and succeeds.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
