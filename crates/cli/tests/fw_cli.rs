//! `vtnt fw`: a generated set checked, traced and measured through the command line;
//! bad rule files refused with file:line:col and a non-zero exit; output files written
//! whole or not at all; a file past `--max-bytes` refused before it is compiled.

use std::path::Path;
use std::process::{Command, Output};

fn vtnt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .args(args)
        .output()
        .expect("running vtnt")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn dir() -> tempdir::Dir {
    tempdir::Dir::new()
}

/// A directory of the test's own, removed at the end.
mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            let p = std::env::temp_dir().join(format!(
                "vtnt-fw-cli-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn a_generated_set_checks_traces_and_classifies() {
    let d = dir();
    let rules = d.0.join("fw.rules");
    let r = rules.to_str().unwrap();
    let o = vtnt(&[
        "fw",
        "gen",
        "--rules",
        "500",
        "--seed",
        "4",
        "--stateful",
        "--family",
        "acl",
        "-o",
        r,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let saved = std::fs::read_to_string(&rules).unwrap();
    assert_eq!(
        saved
            .lines()
            .filter(|l| l.starts_with("-A FORWARD"))
            .count(),
        500
    );
    // the same seed, the same set
    let again = vtnt(&[
        "fw",
        "gen",
        "--rules",
        "500",
        "--seed",
        "4",
        "--stateful",
        "--family",
        "acl",
    ]);
    assert_eq!(text(&again.stdout), saved);

    let o = vtnt(&["fw", "check", r, "--tables"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains("iptables-save, 500 rules in 3 chains"),
        "{out}"
    );
    assert!(
        out.contains("chain FORWARD (hook forward, policy DROP): 500 rules"),
        "{out}"
    );
    assert!(
        out.contains("2 connection states decided before the tables"),
        "{out}"
    );
    assert!(out.contains("bytes compiled"), "{out}");

    let nft = d.0.join("fw.nft");
    let o = vtnt(&[
        "fw",
        "gen",
        "--rules",
        "500",
        "--seed",
        "4",
        "--stateful",
        "--family",
        "acl",
        "--format",
        "nft",
        "-o",
        nft.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let o = vtnt(&["fw", "check", nft.to_str().unwrap()]);
    assert!(
        text(&o.stdout).contains("nft, 500 rules in 3 chains"),
        "{}",
        text(&o.stdout)
    );

    let o = vtnt(&["fw", "trace", r, "--packets", "50", "--seed", "2"]);
    let lines: Vec<String> = text(&o.stdout).lines().map(String::from).collect();
    assert_eq!(lines.len(), 50);
    assert_eq!(lines[0].split('\t').count(), 6, "{}", lines[0]);

    let o = vtnt(&["fw", "classify", r, "--packets", "2000", "--verify", "2000"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.lines()
            .any(|l| l.starts_with("| 500 | ") && l.ends_with("| 2000 |")),
        "{out}"
    );
}

#[test]
fn bad_rule_files_are_refused_with_their_place() {
    let d = dir();
    let bad = d.0.join("bad.rules");
    std::fs::write(
        &bad,
        "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p tcp -m recent --set -j DROP\nCOMMIT\n",
    )
    .unwrap();
    let o = vtnt(&["fw", "check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let want = format!(
        "vtnt: error: {}:3:22: match `-m recent` is not supported\n",
        bad.display()
    );
    assert_eq!(text(&o.stderr), want);
    assert!(o.stdout.is_empty());

    // too large for the memory given: refused, nothing compiled
    let big = d.0.join("big.rules");
    assert!(
        vtnt(&["fw", "gen", "--rules", "20000", "-o", big.to_str().unwrap()])
            .status
            .success()
    );
    let o = vtnt(&[
        "fw",
        "check",
        big.to_str().unwrap(),
        "--max-bytes",
        "200000",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("the rules need more than the 200000 bytes of memory allowed"),
        "{}",
        text(&o.stderr)
    );

    // a trace of a bad file writes nothing
    let out = d.0.join("trace.txt");
    let o = vtnt(&[
        "fw",
        "trace",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
    let missing = vtnt(&["fw", "check", "/nonexistent/rules"]);
    assert!(
        text(&missing.stderr).contains("reading /nonexistent/rules"),
        "{}",
        text(&missing.stderr)
    );
    // gen refuses to write through a directory
    let o = vtnt(&["fw", "gen", "--rules", "3", "-o", d.0.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(Path::new(&d.0).is_dir());
}
