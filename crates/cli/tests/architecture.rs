//! The import graph ARCHITECTURE.md draws (its `imports` block) is the workspace's: every
//! crate's workspace dependencies per `cargo metadata`, no arrow more, none fewer; and no
//! crate's modules import each other in a circle (`architecture/modules.rs`); and each word of
//! the glossary names types only in the crates it gives the word (`architecture/glossary.rs`);
//! and only the edge's crates have `anyhow` in their dependencies (`architecture/errors.rs`).

#[path = "architecture/errors.rs"]
mod errors;
#[path = "architecture/glossary.rs"]
mod glossary;
#[path = "architecture/modules.rs"]
mod modules;
#[path = "architecture/source.rs"]
mod source;

use std::collections::BTreeMap;
use std::path::Path;

/// Every crate's directory: `crates/NAME`, and `crates/GROUP/NAME` in a folder that
/// groups crates (`crates/tender/`), sorted.
fn crate_dirs() -> Vec<std::path::PathBuf> {
    let list = |d: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(d)
            .expect("a crates folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let mut dirs = Vec::new();
    for d in list(&root().join("crates")) {
        if d.join("Cargo.toml").is_file() {
            dirs.push(d);
        } else {
            dirs.extend(
                list(&d)
                    .into_iter()
                    .filter(|p| p.join("Cargo.toml").is_file()),
            );
        }
    }
    dirs.sort();
    dirs
}

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

#[test]
fn no_crate_has_a_module_circle() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        let name = dir
            .strip_prefix(root().join("crates"))
            .ok()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        for circle in modules::circles(&dir) {
            found.push(format!(
                "crates/{name}: modules {:?} of {} import each other in a circle:\n    {}",
                circle.modules,
                circle.parent,
                circle.edges.join("\n    ")
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn anyhow_only_at_the_edge() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        let manifest = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("a crate's Cargo.toml");
        if let Some((package, line)) = errors::anyhow_outside_edge(&text) {
            found.push(format!(
                "{}:{line}: {package} depends on anyhow; a library crate's errors are typed \
                 (thiserror), anyhow is only for {:?} (ARCHITECTURE.md, Errors)",
                manifest.strip_prefix(root()).unwrap_or(&manifest).display(),
                errors::EDGE
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Types named after a glossary word outside its owners that other branches of issue 37
/// rename or move: (package, type). The lead empties this list after merging them; an
/// entry that no longer matches a type fails.
const ALLOWED_STRAYS: &[(&str, &str)] = &[];

#[test]
fn glossary_words_name_types_only_in_their_crates() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let entries = glossary::parse(&doc);
    let mut crates = BTreeMap::new();
    for dir in crate_dirs() {
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|n| n.strip_suffix('"'))
            .expect("a package name")
            .to_string();
        crates.insert(name, glossary::types(&dir.join("src")));
    }
    for e in &entries {
        for owner in &e.owners {
            assert!(
                crates.contains_key(owner),
                "the glossary gives `{}` to {owner}, which is no crate",
                e.word
            );
        }
    }
    let mut wrong = glossary::strays(&entries, &crates, ALLOWED_STRAYS);
    for (krate, name) in ALLOWED_STRAYS {
        if !crates
            .get(*krate)
            .into_iter()
            .flatten()
            .any(|t| t.0 == *name)
        {
            wrong.push(format!(
                "ALLOWED_STRAYS ({krate}, {name}) matches no type: remove it"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
