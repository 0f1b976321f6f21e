//! The import graph ARCHITECTURE.md draws (its `imports` block) is the workspace's: every
//! crate's workspace dependencies per `cargo metadata`, no arrow more, none fewer.

use std::collections::BTreeMap;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("the workspace root")
}

/// `crate -> a, b` lines into a map (`(none)`: no workspace dependency).
fn parse(block: &str) -> BTreeMap<String, Vec<String>> {
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, deps) = l
                .split_once(" -> ")
                .unwrap_or_else(|| panic!("bad line `{l}`"));
            let deps = match deps.trim() {
                "(none)" => Vec::new(),
                d => d.split(", ").map(String::from).collect(),
            };
            (name.trim().to_string(), deps)
        })
        .collect()
}

#[test]
fn architecture_md_draws_the_real_import_graph() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let start = doc.find("```imports\n").expect("an ```imports block") + "```imports\n".len();
    let len = doc[start..].find("```").expect("the block's end");
    let drawn = parse(&doc[start..start + len]);

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let real: BTreeMap<String, Vec<String>> = packages
        .iter()
        .map(|p| {
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| names.contains(n))
                .map(String::from)
                .collect();
            deps.sort();
            deps.dedup();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect();
    for (name, deps) in &real {
        assert_eq!(
            drawn.get(name),
            Some(deps),
            "ARCHITECTURE.md's imports of {name} differ from Cargo.toml's"
        );
    }
    for name in drawn.keys() {
        assert!(
            real.contains_key(name),
            "ARCHITECTURE.md draws {name}, which is no crate"
        );
    }
}
