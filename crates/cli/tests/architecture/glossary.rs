//! One word per idea: the glossary in ARCHITECTURE.md (its ```glossary block: `word |
//! the crates that own it | what it means`) against the types of every crate's `src/`. A
//! struct, enum, trait, union or type alias whose name has the word as one of its
//! CamelCase parts (`Job`, `JobSpec`, `GuestJob` for "job") must be in a crate the
//! glossary gives the word.

use super::source::{tokens, Tok};
use std::collections::BTreeMap;
use std::path::Path;

/// A glossary word and the crates that own it.
pub struct Entry {
    pub word: String,
    pub owners: Vec<String>,
}

/// The ```glossary block's entries.
pub fn parse(doc: &str) -> Vec<Entry> {
    let start = doc.find("```glossary\n").expect("a ```glossary block") + "```glossary\n".len();
    let len = doc[start..].find("```").expect("the block's end");
    doc[start..start + len]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.split(" | ");
            let word = parts.next().expect("a word").trim().to_string();
            let owners = parts
                .next()
                .unwrap_or_else(|| panic!("glossary line `{l}` names no crate"))
                .split(", ")
                .map(|c| c.trim().to_string())
                .collect();
            Entry { word, owners }
        })
        .collect()
}

/// The types defined in `.rs` files under `dir`: (name, file, line).
pub fn types(dir: &Path) -> Vec<(String, String, usize)> {
    let mut files = vec![];
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension() == Some("rs".as_ref()) {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("a source file");
        let toks = tokens(&text);
        for w in toks.windows(2) {
            if let [(Tok::Ident(k), _), (Tok::Ident(name), line)] = w {
                if matches!(k.as_str(), "struct" | "enum" | "trait" | "type" | "union") {
                    let rel = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
                    out.push((name.clone(), rel, *line));
                }
            }
        }
    }
    out
}

/// Whether `name`'s CamelCase parts include `word` (one lower-case word).
pub fn named_after(name: &str, word: &str) -> bool {
    let mut parts = Vec::new();
    for (i, c) in name.char_indices() {
        if c.is_uppercase() || i == 0 {
            parts.push(String::new());
        }
        if let Some(p) = parts.last_mut() {
            p.extend(c.to_lowercase());
        }
    }
    parts.iter().any(|p| p == word)
}

/// The types of `crates` (package name -> its `src/` types) named after a glossary word
/// outside the word's owners, less `allowed` (crate, type): "crate: Type (file:line) is
/// named after `word`, owned by ...".
pub fn strays(
    glossary: &[Entry],
    crates: &BTreeMap<String, Vec<(String, String, usize)>>,
    allowed: &[(&str, &str)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (krate, types) in crates {
        for (name, file, line) in types {
            for e in glossary {
                if named_after(name, &e.word)
                    && !e.owners.contains(krate)
                    && !allowed.contains(&(krate.as_str(), name.as_str()))
                {
                    out.push(format!(
                        "{krate}: {name} (src/{file}:{line}) is named after `{}`, a word of {} \
                         (ARCHITECTURE.md, Glossary)",
                        e.word,
                        e.owners.join(", ")
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn a_type_named_after_a_word_outside_its_owners_is_found() {
    let glossary = parse(
        "x\n```glossary\njob | vtnt-job, vtnt-jobspec | the user's unit of work\nmeasurement | vtnt-engine | one trace or ping\n```\n",
    );
    let crates = BTreeMap::from([
        (
            "vtnt-engine".to_string(),
            vec![
                ("Measurement".into(), "measurement.rs".into(), 3),
                ("Job".into(), "job.rs".into(), 7),
                ("Jobber".into(), "job.rs".into(), 9),
            ],
        ),
        (
            "vtnt-jobspec".to_string(),
            vec![("JobSpec".into(), "lib.rs".into(), 1)],
        ),
        (
            "vtnt-tnt".to_string(),
            vec![("RunJobTag".into(), "lib.rs".into(), 2)],
        ),
    ]);
    assert_eq!(
        strays(&glossary, &crates, &[("vtnt-tnt", "RunJobTag")]),
        ["vtnt-engine: Job (src/job.rs:7) is named after `job`, a word of vtnt-job, vtnt-jobspec (ARCHITECTURE.md, Glossary)"]
    );
    assert_eq!(strays(&glossary, &crates, &[]).len(), 2);
    let dir = std::env::temp_dir().join(format!("vtnt-glossary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("lib.rs"),
        "// struct Comment;\npub struct Job;\nenum Kind { A }\ntrait Tender {}\ntype Image = u8;\nlet s = \"struct Str\";\n",
    )
    .expect("write");
    let found: Vec<String> = types(&dir)
        .into_iter()
        .map(|t| format!("{}@{}", t.0, t.2))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found, ["Job@2", "Kind@3", "Tender@4", "Image@5"]);
}
