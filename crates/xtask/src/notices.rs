//! `cargo xtask notices`: the third-party notice file shipped with `vtnt` and in its
//! package. It lists every crate compiled into each shipped program (the `vtnt` command,
//! the static `vtnt` and `vtnt-monitor` that runtime images carry, the unikernel images),
//! each with its version, licence expression and the text of the licence files in its
//! package, identical texts printed once. The crate sets are cargo's own answer
//! (`cargo tree -e normal` per program, target and features: no dev or build
//! dependencies); the files come from each crate's source in cargo's registry.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// One shipped program: how cargo builds it.
struct Program {
    /// The label a crate's entry names it by.
    label: &'static str,
    what: &'static str,
    package: &'static str,
    /// `None`: the host's triple.
    target: Option<&'static str>,
    /// Extra `cargo tree` arguments (features).
    features: &'static [&'static str],
}

/// Every program vTNT ships (runtime images carry the static pair; the unikernel has
/// three images).
const PROGRAMS: [Program; 6] = [
    Program {
        label: "vtnt",
        what: "the vtnt command (default features)",
        package: "vtnt",
        target: None,
        features: &[],
    },
    Program {
        label: "vtnt-static",
        what: "the static vtnt that runtime images carry (musl, --no-default-features)",
        package: "vtnt",
        target: Some("x86_64-unknown-linux-musl"),
        features: &["--no-default-features"],
    },
    Program {
        label: "vtnt-monitor",
        what: "the microVM monitor (musl)",
        package: "vtnt-monitor",
        target: Some("x86_64-unknown-linux-musl"),
        features: &["--no-default-features"],
    },
    Program {
        label: "kernel",
        what: "the unikernel image",
        package: "vtnt-kernel",
        target: Some("x86_64-unknown-none"),
        features: &[],
    },
    Program {
        label: "kernel-spt",
        what: "the unikernel as a process (feature spt)",
        package: "vtnt-kernel",
        target: Some("x86_64-unknown-none"),
        features: &["--features", "spt"],
    },
    Program {
        label: "kernel-stream",
        what: "the unikernel's stream endpoint (feature stream)",
        package: "vtnt-kernel",
        target: Some("x86_64-unknown-none"),
        features: &["--features", "stream"],
    },
];

/// A crate as `cargo metadata` describes it.
struct Crate {
    license: Option<String>,
    license_file: Option<PathBuf>,
    dir: PathBuf,
}

/// What [`write`] put in the file.
#[derive(Debug)]
pub struct Summary {
    /// Third-party crates listed.
    pub crates: usize,
    /// Distinct licence texts printed.
    pub texts: usize,
    /// Crates whose package has no licence file (their expression's standard texts are
    /// printed instead, where the toolchain has them).
    pub without_files: Vec<String>,
}

/// Writes the notice file to `path` (atomically: a temporary file renamed over it).
/// Runs `cargo tree` and `cargo metadata` (`--locked`) in this checkout.
pub fn write(path: &Path) -> anyhow::Result<Summary> {
    let root = workspace_root();
    let host = host_triple()?;
    let (crates, members, version) = metadata(&root)?;
    // (name, version) -> labels of the programs it is compiled into
    let mut used: BTreeMap<(String, String), BTreeSet<&str>> = BTreeMap::new();
    for p in &PROGRAMS {
        for key in tree(&root, p, &host)? {
            if !members.contains(&key.0) {
                used.entry(key).or_default().insert(p.label);
            }
        }
    }
    let standard = standard_texts();
    let mut texts = Texts::default();
    let mut entries = String::new();
    let mut index = String::new();
    let mut without_files = Vec::new();
    for ((name, ver), labels) in &used {
        let c = crates
            .get(&(name.clone(), ver.clone()))
            .with_context(|| format!("{name} {ver}: in cargo tree but not in cargo metadata"))?;
        let licence = c.license.as_deref().unwrap_or("(no licence expression)");
        let labels = labels.iter().copied().collect::<Vec<_>>().join(", ");
        let _ = writeln!(index, "  {name} {ver}: {licence} [{labels}]");
        let _ = writeln!(
            entries,
            "\n{name} {ver}\n  licence: {licence}\n  in: {labels}"
        );
        let files = licence_files(c)?;
        if files.is_empty() {
            without_files.push(format!("{name} {ver}"));
            let _ = writeln!(
                entries,
                "  the package has no licence file; standard texts:"
            );
            for id in spdx_ids(licence) {
                match standard.get(id.as_str()) {
                    Some(t) => {
                        let _ = writeln!(entries, "    {id}: text {}", texts.id(t, &id));
                    }
                    None => {
                        let _ = writeln!(entries, "    {id}: (no standard text to hand)");
                    }
                }
            }
        }
        for (file, text) in files {
            let first = format!("{name} {ver}: {file}");
            let _ = writeln!(entries, "  {file}: text {}", texts.id(&text, &first));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Third-party notices for vTNT {version}\n\n\
         vTNT itself is under the Apache License 2.0 (LICENSE). The programs it ships\n\
         contain the Rust crates below, each under its own licence. Generated by\n\
         `cargo xtask notices` from cargo's dependency graph (normal dependencies of each\n\
         program for its target and features; proc macros included, since what they\n\
         generate is compiled in) and from the licence files in each crate's package.\n\n\
         Programs:"
    );
    for p in &PROGRAMS {
        let target = p.target.unwrap_or(&host);
        let _ = writeln!(out, "  [{}] {}, {target}", p.label, p.what);
    }
    let _ = writeln!(
        out,
        "\nAlso compiled in, not crates: Rust's standard library (core, alloc, std;\n\
         MIT OR Apache-2.0, some parts under other permissive licences: the toolchain's\n\
         share/doc/rust/COPYRIGHT-library.html lists them) in every program, and musl's C\n\
         library (MIT; text {}) in the two musl programs.",
        texts.id(&musl_notice(&standard), "musl")
    );
    let _ = writeln!(out, "\nCrates ({}):\n{index}", used.len());
    let _ = writeln!(
        out,
        "Each crate's licence files (texts at the end):{entries}"
    );
    let _ = writeln!(out, "\nLicence texts ({}):", texts.list.len());
    for (i, (text, first)) in texts.list.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n======== text {} ({first}) ========\n{}",
            i + 1,
            text.trim_end()
        );
    }
    write_atomically(path, out.as_bytes())?;
    Ok(Summary {
        crates: used.len(),
        texts: texts.list.len(),
        without_files,
    })
}

/// Licence texts, each printed once: texts that differ only in white space (line
/// breaks, indentation) share a number.
#[derive(Default)]
struct Texts {
    /// (text as first seen, where it was first seen)
    list: Vec<(String, String)>,
    /// The words of each text in `list`, by which texts are compared.
    words: Vec<String>,
}

impl Texts {
    /// The number of `text`, adding it when new.
    fn id(&mut self, text: &str, name: &str) -> usize {
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        match self.words.iter().position(|w| *w == words) {
            Some(i) => i + 1,
            None => {
                self.words.push(words);
                self.list
                    .push((text.trim_matches('\n').to_string(), name.to_string()));
                self.list.len()
            }
        }
    }
}

/// The checkout this xtask was built from.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn host_triple() -> anyhow::Result<String> {
    let out = run(Command::new("rustc").arg("-vV"))?;
    out.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(String::from)
        .context("rustc -vV names no host triple")
}

/// Every package of the lock file by (name, version), the workspace's own crate names,
/// and the `vtnt` package's version.
type Metadata = (BTreeMap<(String, String), Crate>, BTreeSet<String>, String);

fn metadata(root: &Path) -> anyhow::Result<Metadata> {
    let text = run(Command::new("cargo").current_dir(root).args([
        "metadata",
        "--locked",
        "--format-version",
        "1",
        "--all-features",
    ]))?;
    let v: serde_json::Value = serde_json::from_str(&text).context("cargo metadata's JSON")?;
    let members: BTreeSet<&str> = v["workspace_members"]
        .as_array()
        .context("cargo metadata: no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut crates = BTreeMap::new();
    let mut names = BTreeSet::new();
    let mut version = String::from("(unknown version)");
    for p in v["packages"]
        .as_array()
        .context("cargo metadata: no packages")?
    {
        let field = |k: &str| p[k].as_str().map(String::from);
        let (Some(name), Some(ver), Some(id), Some(manifest)) = (
            field("name"),
            field("version"),
            field("id"),
            field("manifest_path"),
        ) else {
            bail!("cargo metadata: a package without name, version, id or manifest_path");
        };
        let dir = Path::new(&manifest)
            .parent()
            .context("manifest path without a directory")?
            .to_path_buf();
        if members.contains(id.as_str()) {
            if name == "vtnt" {
                version = ver.clone();
            }
            names.insert(name.clone());
        }
        crates.insert(
            (name, ver),
            Crate {
                license: field("license"),
                license_file: field("license_file").map(|f| dir.join(f)),
                dir,
            },
        );
    }
    Ok((crates, names, version))
}

/// The (name, version) of every crate in `p`'s normal dependency graph, itself included.
fn tree(root: &Path, p: &Program, host: &str) -> anyhow::Result<BTreeSet<(String, String)>> {
    let text = run(Command::new("cargo")
        .current_dir(root)
        .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
        .args(["-f", "{p}", "-p", p.package, "--target"])
        .arg(p.target.unwrap_or(host))
        .args(p.features))?;
    let mut set = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let (Some(name), Some(ver)) = (words.next(), words.next()) else {
            bail!("cargo tree printed an unexpected line: {line:?}");
        };
        let ver = ver
            .strip_prefix('v')
            .with_context(|| format!("cargo tree: no version in {line:?}"))?;
        set.insert((name.to_string(), ver.to_string()));
    }
    if set.is_empty() {
        bail!("cargo tree -p {} printed no crate", p.package);
    }
    Ok(set)
}

/// The licence, notice and copyright files at the top of a crate's package (and its
/// manifest's `license-file`), by name, with their text.
fn licence_files(c: &Crate) -> anyhow::Result<Vec<(String, String)>> {
    const STEMS: [&str; 6] = [
        "license",
        "licence",
        "copying",
        "notice",
        "copyright",
        "unlicense",
    ];
    let mut paths = BTreeSet::new();
    let dir = std::fs::read_dir(&c.dir).with_context(|| format!("reading {}", c.dir.display()))?;
    for e in dir {
        let e = e.with_context(|| format!("reading {}", c.dir.display()))?;
        let lower = e.file_name().to_string_lossy().to_lowercase();
        if STEMS.iter().any(|s| lower.starts_with(s)) && e.path().is_file() {
            paths.insert(e.path());
        }
    }
    paths.extend(c.license_file.clone());
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
            let name = p.strip_prefix(&c.dir).unwrap_or(&p).display().to_string();
            Ok((name, String::from_utf8_lossy(&text).into_owned()))
        })
        .collect()
}

/// The licence identifiers of an SPDX expression (`MIT OR Apache-2.0`, `MIT/Apache-2.0`).
fn spdx_ids(expr: &str) -> Vec<String> {
    expr.split(|c: char| c.is_whitespace() || "()/".contains(c))
        .filter(|w| !w.is_empty() && !["OR", "AND", "WITH"].contains(w))
        .map(String::from)
        .collect()
}

/// The standard licence texts the Rust toolchain installs (share/doc/rust/licenses,
/// `<SPDX id>.txt`), by identifier.
fn standard_texts() -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let Ok(sysroot) = run(Command::new("rustc").args(["--print", "sysroot"])) else {
        return map;
    };
    let dir = Path::new(sysroot.trim()).join("share/doc/rust/licenses");
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if let (Some(id), Ok(text)) = (
            path.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".txt")),
            std::fs::read_to_string(&path),
        ) {
            map.insert(id.to_string(), text);
        }
    }
    map
}

/// musl's copyright notice as Debian ships it with the musl the static programs link,
/// else the standard MIT text.
fn musl_notice(standard: &BTreeMap<String, String>) -> String {
    std::fs::read_to_string("/usr/share/doc/musl/copyright")
        .ok()
        .or_else(|| standard.get("MIT").cloned())
        .unwrap_or_else(|| "musl: MIT licence (https://musl.libc.org/)".into())
}

/// Runs a command and returns its stdout; a failure names the command and its stderr.
fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{cmd:?} printed non-UTF-8"))
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .context("the output path names no file")?
            .to_string_lossy()
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming onto {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spdx_expressions_name_their_licences() {
        assert_eq!(spdx_ids("MIT OR Apache-2.0"), ["MIT", "Apache-2.0"]);
        assert_eq!(spdx_ids("MIT/Apache-2.0"), ["MIT", "Apache-2.0"]);
        assert_eq!(
            spdx_ids("(MIT OR Apache-2.0) AND Unicode-3.0"),
            ["MIT", "Apache-2.0", "Unicode-3.0"]
        );
        assert_eq!(
            spdx_ids("Apache-2.0 WITH LLVM-exception"),
            ["Apache-2.0", "LLVM-exception"]
        );
    }

    #[test]
    fn notices_list_each_programs_crates_with_their_texts() {
        let dir = std::env::temp_dir().join(format!("vtnt-notices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("THIRD-PARTY-NOTICES");
        let summary = write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let index = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("  {name} ")))
                .unwrap_or_else(|| panic!("{name} not listed"))
                .to_string()
        };
        // the fleet's NATS client is in the default vtnt only; smoltcp in the images
        assert!(index("async-nats").ends_with("[vtnt]"));
        assert!(index("smoltcp").contains("kernel, kernel-spt, kernel-stream"));
        assert!(index("libc").contains("vtnt-monitor"));
        // build dependencies (ring's C compiler driver) and our own crates are not listed
        assert!(!text.contains("\n  cc ") && !text.contains("\n  vtnt-engine "));
        // every listed crate has an entry, with a text for each of its files
        assert_eq!(text.matches("\n  licence: ").count(), summary.crates);
        assert_eq!(text.matches("\n======== text ").count(), summary.texts);
        assert!(text.contains("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION"));
        assert!(text.contains("Permission is hereby granted, free of charge"));
    }

    #[test]
    fn identical_texts_are_numbered_once() {
        let mut t = Texts::default();
        assert_eq!(t.id("MIT\nline  \n", "a/LICENSE"), 1);
        assert_eq!(t.id("\n  MIT line\n\n", "b/LICENSE-MIT"), 1);
        assert_eq!(t.id("Apache", "c/LICENSE"), 2);
        assert_eq!(t.list.len(), 2);
        assert_eq!(t.list[0].1, "a/LICENSE");
    }
}
