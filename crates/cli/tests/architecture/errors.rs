//! The rule on errors (ARCHITECTURE.md, "Errors"): library crates return typed errors;
//! `anyhow` is only at the edges, the crates whose errors only reach a person ([`EDGE`]).
//! Reads a crate's `Cargo.toml` by its lines: `anyhow` under `[dependencies]` (or a
//! target's dependencies, or as `[dependencies.anyhow]`) outside the edge is a finding;
//! dev-dependencies (tests) and build-dependencies are free to use it.

/// The packages at the edge: the binaries (`vtnt`, whose `vtnt agent` is the fleet's
/// agent, and `xtask`) and the benchmark harnesses whose reports a person reads.
pub const EDGE: &[&str] = &["vtnt", "vtnt-xtask", "vtnt-bench", "vtnt-evaluation"];

/// The package's name and, if it is not at the edge and depends on `anyhow` for its
/// library or binaries, the manifest's line that says so.
pub fn anyhow_outside_edge(manifest: &str) -> Option<(String, usize)> {
    let mut package = None;
    let mut section = String::new();
    let mut found = None;
    for (i, line) in manifest.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.trim().to_string();
            if found.is_none() && is_dependencies(&section) && section.ends_with(".anyhow") {
                found = Some(i + 1);
            }
            continue;
        }
        let key = line.split(['=', '.', ' ']).next().unwrap_or_default();
        if section == "package" && key == "name" && package.is_none() {
            package = line
                .split_once('=')
                .map(|(_, v)| v.trim().trim_matches('"').to_string());
        }
        if found.is_none() && key == "anyhow" && is_dependencies(&section) {
            found = Some(i + 1);
        }
    }
    let package = package.unwrap_or_default();
    match found {
        Some(line) if !EDGE.contains(&package.as_str()) => Some((package, line)),
        _ => None,
    }
}

/// `[dependencies]`, `[dependencies.X]`, `[target.'cfg(..)'.dependencies]` (and `.X`).
fn is_dependencies(section: &str) -> bool {
    section == "dependencies"
        || section.starts_with("dependencies.")
        || (section.starts_with("target.")
            && (section.ends_with(".dependencies") || section.contains(".dependencies.")))
}

#[test]
fn anyhow_in_a_library_s_dependencies_is_found() {
    let lib = "[package]\nname = \"vtnt-lib\"\n\n[dependencies]\nserde = \"1\"\nanyhow = \"1\"\n";
    assert_eq!(anyhow_outside_edge(lib), Some(("vtnt-lib".into(), 6)));
    let workspace = "[package]\nname = \"vtnt-lib\"\n[dependencies]\nanyhow.workspace = true\n";
    assert_eq!(anyhow_outside_edge(workspace), Some(("vtnt-lib".into(), 4)));
    let table = "[package]\nname = \"vtnt-lib\"\n[dependencies.anyhow]\nversion = \"1\"\n";
    assert_eq!(anyhow_outside_edge(table), Some(("vtnt-lib".into(), 3)));
    let target =
        "[package]\nname = \"vtnt-lib\"\n[target.'cfg(unix)'.dependencies]\nanyhow = \"1\"\n";
    assert_eq!(anyhow_outside_edge(target), Some(("vtnt-lib".into(), 4)));
    let target_dev =
        "[package]\nname = \"vtnt-lib\"\n[target.'cfg(unix)'.dev-dependencies]\nanyhow = \"1\"\n";
    assert_eq!(anyhow_outside_edge(target_dev), None);
}

#[test]
fn anyhow_in_tests_or_at_the_edge_passes() {
    let tests = "[package]\nname = \"vtnt-lib\"\n[dependencies]\nserde = \"1\"\n\
                 [dev-dependencies]\nanyhow = \"1\"\n[build-dependencies]\nanyhow = \"1\"\n";
    assert_eq!(anyhow_outside_edge(tests), None);
    let bench = "[package]\nname = \"vtnt-bench\"\n[dependencies]\nanyhow = \"1\"\n";
    assert_eq!(anyhow_outside_edge(bench), None);
    let other =
        "[package]\nname = \"vtnt-lib\"\n[features]\nx = []\n[dependencies]\nanyhow-like = \"1\"\n";
    assert_eq!(anyhow_outside_edge(other), None);
}
