//! `cargo xtask deny`: the licence, advisory, source and ban checks of the whole
//! dependency tree, by cargo-deny with `deny.toml`; it fails on a licence `deny.toml`
//! does not allow and on a RustSec advisory against a crate in the tree (unless
//! `deny.toml` ignores it, with a reason).
//!
//! RustSec's advisory database is a git repository on GitHub, which these machines do
//! not reach, and no package registry ships it. So the check reads a local snapshot, a
//! git repository of the database with a `main` branch: git's `url.<base>.insteadOf`
//! sends cargo-deny's own clone and fetch of the database's address there. Without a
//! snapshot the advisories are skipped, saying so, and the other checks still run.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// The database address in `deny.toml` that git is redirected from.
const DB_URL: &str = "https://github.com/rustsec/advisory-db";

/// The snapshot the checks read when neither `--advisory-db` nor `$VTNT_ADVISORY_DB`
/// names one, relative to the workspace root: beside the checkout, in `shared/`.
const DEFAULT_DB: &str = "../shared/advisory-db";

/// Runs cargo-deny in the workspace at `root` with `config`, its advisories from the
/// snapshot `db` (see [`find_db`]; `None`: advisories skipped). Prints cargo-deny's
/// findings; fails when it does.
pub fn check(root: &Path, config: &Path, db: Option<&Path>) -> anyhow::Result<()> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .args(["deny", "--locked", "--config"])
        .arg(config)
        .arg("check");
    match db {
        Some(db) => {
            let (commit, date) = snapshot(db)?;
            eprintln!(
                "xtask deny: advisories from {} (main {commit}, {date})",
                db.display()
            );
            let db = db
                .canonicalize()
                .with_context(|| format!("{}", db.display()))?;
            cmd.env("GIT_CONFIG_COUNT", "1")
                .env(
                    "GIT_CONFIG_KEY_0",
                    format!("url.file://{}.insteadOf", db.display()),
                )
                .env("GIT_CONFIG_VALUE_0", DB_URL);
        }
        None => {
            eprintln!(
                "xtask deny: advisories SKIPPED (allowed: no RustSec advisory database: \
                 pass --advisory-db DIR or set VTNT_ADVISORY_DB, or put one at \
                 {DEFAULT_DB}; docs/release.md)"
            );
            cmd.args(["bans", "licenses", "sources"]);
        }
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {cmd:?} (is cargo-deny installed?)"))?;
    // findings on stderr, the summary line (`advisories ok, bans ok, ...`) on stdout
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("cargo deny failed ({}):\n{}", out.status, text.trim_end());
    }
    eprint!("{text}");
    Ok(())
}

/// The snapshot to read: `given` (`--advisory-db`), else `$VTNT_ADVISORY_DB`, else
/// [`DEFAULT_DB`] when it exists; `None` when there is none.
pub fn find_db(root: &Path, given: Option<PathBuf>) -> Option<PathBuf> {
    given
        .or_else(|| std::env::var_os("VTNT_ADVISORY_DB").map(PathBuf::from))
        .or_else(|| Some(root.join(DEFAULT_DB)).filter(|p| p.exists()))
}

/// The snapshot's `main` commit and its date; an error says why `db` is not one.
fn snapshot(db: &Path) -> anyhow::Result<(String, String)> {
    let out = Command::new("git")
        .arg("-C")
        .arg(db)
        .args(["log", "-1", "--format=%h %cs", "main", "--"])
        .output()
        .context("running git")?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim().split_once(' ') {
        Some((c, d)) if out.status.success() => Ok((c.to_string(), d.to_string())),
        _ => bail!(
            "{}: not a git repository of RustSec's advisory database with a main branch ({})",
            db.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    /// An advisory against every version of `package`, as RustSec writes them.
    fn advisory(package: &str) -> String {
        format!(
            "```toml\n[advisory]\nid = \"RUSTSEC-2099-0001\"\npackage = \"{package}\"\n\
             date = \"2099-01-01\"\n\n[versions]\npatched = []\n```\n\n\
             # A made-up advisory\n\nvTNT's test that the check fails on an advisory.\n"
        )
    }

    /// A scratch directory with a copy of deny.toml whose database clone goes there
    /// (not into target/, where the real check keeps its own), edited by `edit`.
    fn scratch(name: &str, edit: impl Fn(&str) -> String) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("vtnt-deny-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let root = crate::cargo::workspace();
        let config = std::fs::read_to_string(root.join("deny.toml")).unwrap();
        let ours = config.replace(
            "db-path = \"target/advisory-dbs\"",
            &format!("db-path = \"{}/dbs\"", dir.display()),
        );
        assert_ne!(ours, config, "deny.toml sets db-path on a line of its own");
        let path = dir.join("deny.toml");
        std::fs::write(&path, edit(&ours)).unwrap();
        (dir, path)
    }

    #[test]
    fn an_advisory_against_a_crate_in_the_tree_fails_the_check() {
        vtnt_testkit::require_tools!("cargo-deny", "git");
        let root = crate::cargo::workspace();
        let (dir, config) = scratch("advisory", str::to_string);
        // a git repository holding one made-up advisory against libc, which the tree has
        let db = dir.join("advisory-db");
        let file = db.join("crates/libc/RUSTSEC-2099-0001.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, advisory("libc")).unwrap();
        git(&db, &["init", "-q", "-b", "main"]);
        git(&db, &["add", "-A"]);
        git(&db, &["commit", "-q", "-m", "one advisory"]);
        let msg = format!("{:#}", check(&root, &config, Some(&db)).unwrap_err());
        assert!(msg.contains("RUSTSEC-2099-0001"), "{msg}");
        assert!(msg.contains("advisories FAILED"), "{msg}");
        // the same check passes once the advisory is against a crate the tree lacks
        std::fs::write(&file, advisory("vtnt-no-such-crate")).unwrap();
        git(&db, &["commit", "-q", "-am", "an advisory elsewhere"]);
        check(&root, &config, Some(&db)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_licence_deny_toml_does_not_allow_fails_the_check() {
        vtnt_testkit::require_tools!("cargo-deny");
        let root = crate::cargo::workspace();
        // deny.toml without MIT: every crate that is MIT only is then refused
        let (dir, config) = scratch("licence", |c| c.replace("    \"MIT\",\n", ""));
        let msg = format!("{:#}", check(&root, &config, None).unwrap_err());
        assert!(
            msg.contains("licenses FAILED") && msg.contains("MIT"),
            "{msg}"
        );
        check(&root, &root.join("deny.toml"), None).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_snapshot_that_is_not_a_database_is_named() {
        let (dir, _) = scratch("notdb", str::to_string);
        let msg = format!("{:#}", snapshot(&dir).unwrap_err());
        assert!(
            msg.contains("not a git repository of RustSec's advisory database"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
