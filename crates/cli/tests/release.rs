//! What a released `vtnt` says about itself: `--version` names the commit it was built
//! from, a man page for every subcommand (the hidden `vtnt man-pages DIR`) that `man`
//! renders without a warning, and shell completions that the shell accepts. No root.

use std::path::Path;
use std::process::{Command, Output};

fn vtnt(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .args(args)
        .output()
        .expect("run vtnt");
    assert!(
        out.status.success(),
        "vtnt {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

/// What git says of this checkout as the build script asks it: the short hash of HEAD,
/// `-dirty` when a tracked file differs; `unknown` without git.
fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(hash) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let status = git(&[
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
    ]);
    match status.as_deref() {
        Some("") => hash,
        _ => format!("{hash}-dirty"),
    }
}

#[test]
fn version_names_the_commit() {
    let want = format!("{} (commit {})", env!("CARGO_PKG_VERSION"), commit());
    if std::env::var_os("VTNT_BUILD_COMMIT").is_none() {
        assert_eq!(stdout(&vtnt(&["--version"])), format!("vtnt {want}\n"));
    }
    let line = stdout(&vtnt(&["-V"]));
    assert!(
        line.starts_with(&format!("vtnt {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    assert_eq!(
        stdout(&vtnt(&["trace", "-V"])),
        line.replacen("vtnt", "vtnt-trace", 1)
    );
}

/// The subcommands `vtnt PATH... --help` lists (`help` aside).
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let help = stdout(&vtnt(&args));
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The page names of every subcommand under `path`, depth first.
fn pages(path: &[&str], into: &mut Vec<String>) {
    into.push(format!("{}.1", path.join("-")));
    for sub in subcommands(&path[1..]) {
        let mut p = path.to_vec();
        p.push(&sub);
        pages(&p, into);
    }
}

#[test]
fn every_subcommand_has_a_man_page_that_man_renders() {
    let dir = std::env::temp_dir().join(format!("vtnt-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    vtnt(&["man-pages", dir.to_str().unwrap()]);
    let mut want = Vec::new();
    pages(&["vtnt"], &mut want);
    want.sort();
    let mut got: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    got.sort();
    assert_eq!(
        got, want,
        "one page per subcommand, the hidden man-pages aside"
    );
    assert!(
        got.contains(&"vtnt-lab-up.1".to_string()) && got.len() > 30,
        "{got:?}"
    );

    vtnt_testkit::require_tools!("man");
    for page in &got {
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(dir.join(page))
            .env("MANWIDTH", "80")
            .output()
            .expect("run man");
        let text = String::from_utf8_lossy(&out.stdout);
        let stem = page.trim_end_matches(".1");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "man -l {page}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("NAME") && text.contains(stem),
            "{page}:\n{text}"
        );
    }
    let trace = String::from_utf8_lossy(
        &Command::new("man")
            .arg("-l")
            .arg(dir.join("vtnt-trace.1"))
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(
        trace.contains("--pps") && trace.contains("icmp-paris"),
        "{trace}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn completions_are_scripts_the_shells_accept() {
    let dir = std::env::temp_dir().join(format!("vtnt-completions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (shell, hint) in [
        ("bash", "_vtnt()"),
        ("zsh", "#compdef vtnt"),
        ("fish", "complete -c vtnt"),
    ] {
        let script = stdout(&vtnt(&["completions", shell]));
        assert!(script.contains(hint), "{shell}: {script}");
        std::fs::write(dir.join(shell), script).unwrap();
    }
    vtnt_testkit::require_tools!("bash");
    let bash = dir.join("bash");
    let ok = Command::new("bash").arg("-n").arg(&bash).status().unwrap();
    assert!(ok.success(), "bash -n {}", bash.display());
    // sourced, it registers a completion for vtnt
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {}; complete -p vtnt", bash.display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("-F _vtnt vtnt"), "{said}");
    std::fs::remove_dir_all(Path::new(&dir)).unwrap();
}
