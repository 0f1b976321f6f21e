//! Reading the configuration file: which file, whether it may be trusted, and its keys
//! with the line and column of each, checked against the table of keys ([`super::keys`]).
//!
//! A file is read only when it is a regular file owned by root or by the user running
//! vtnt and writable by nobody else (no `w` for group or others): every key changes what
//! vtnt probes, which key it sends a broker, or which programs it runs as root, so a file
//! someone else could have written is refused whole, not key by key. `allow-public` is
//! taken only from a file owned by root: a host's administrator may make it a
//! measurement host, but a user's own file is not consent, a run's `--allow-public` is.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::bail;
use toml::de::{DeTable, DeValue};

use super::keys::{self, Key};

/// The file read when neither `--config` nor `VTNT_CONFIG` names one; it may be missing.
pub const DEFAULT_PATH: &str = "/etc/vtnt/config.toml";
/// The largest file read.
const MAX_BYTES: u64 = 1 << 20;

/// A value, as text for the option's own parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    One(String),
    List(Vec<String>),
}

impl Value {
    pub fn items(&self) -> &[String] {
        match self {
            Value::One(v) => std::slice::from_ref(v),
            Value::List(v) => v,
        }
    }
}

/// Where in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub line: usize,
    pub column: usize,
}

/// One key the file sets.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: Key,
    pub value: Value,
    /// Where its value is.
    pub at: Place,
}

/// A configuration file, read and checked against the table.
#[derive(Debug, Clone)]
pub struct File {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
}

impl File {
    /// `PATH:LINE:COLUMN`, as compilers say it.
    pub fn at(&self, p: Place) -> String {
        format!("{}:{}:{}", self.path.display(), p.line, p.column)
    }
}

/// Reads `path`: `Ok(None)` when it does not exist and `named_by` is `None` (the default
/// file); every other problem is an error naming the file (and what named it: `--config`,
/// `VTNT_CONFIG`), and where in it.
pub fn read(path: &Path, named_by: Option<&str>, euid: u32) -> anyhow::Result<Option<File>> {
    let shown = match named_by {
        Some(how) => format!("{} ({how})", path.display()),
        None => path.display().to_string(),
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && named_by.is_none() => {
            return Ok(None)
        }
        Err(e) => bail!("configuration file {shown}: {e}"),
    };
    anyhow::ensure!(
        meta.is_file(),
        "configuration file {shown}: not a regular file"
    );
    // without blocking on a FIFO put there since
    let mut f = std::fs::File::options()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| anyhow::anyhow!("configuration file {shown}: {e}"))?;
    let meta = f.metadata()?;
    trusted(&shown, &meta, euid)?;
    let mut text = String::new();
    (&mut f)
        .take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| anyhow::anyhow!("configuration file {shown}: {e}"))?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_BYTES,
        "configuration file {shown}: larger than {MAX_BYTES} bytes"
    );
    let entries = parse(&text).map_err(|(at, why)| {
        let p = place(&text, at);
        anyhow::anyhow!("{}:{}:{}: {why}", path.display(), p.line, p.column)
    })?;
    let file = File {
        path: path.to_path_buf(),
        entries,
    };
    if meta.uid() != 0 {
        if let Some(e) = file
            .entries
            .iter()
            .find(|e| e.key.public() && e.value.items() == ["true"])
        {
            bail!(
                "{}: {} = true: only a file owned by root may turn on public probing (this one \
                 is uid {}'s); pass --allow-public to the run",
                file.at(e.at),
                e.key.path(),
                meta.uid()
            );
        }
    }
    Ok(Some(file))
}

/// Refuses a file that someone other than root or this user (`euid`) owns or may write.
fn trusted(shown: &str, meta: &std::fs::Metadata, euid: u32) -> anyhow::Result<()> {
    let (uid, mode) = (meta.uid(), meta.mode() & 0o7777);
    if uid != 0 && uid != euid {
        bail!(
            "configuration file {shown} is refused: it belongs to uid {uid}, neither root nor \
             this user (uid {euid})"
        );
    }
    if mode & 0o022 != 0 {
        bail!(
            "configuration file {shown} is refused: others may write it (mode {mode:04o}); \
             `chmod go-w` it"
        );
    }
    Ok(())
}

/// The keys of `text` in the order they come, or the byte offset of its first problem
/// and what it is.
fn parse(text: &str) -> Result<Vec<Entry>, (usize, String)> {
    let doc = DeTable::parse(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        (at, format!("not TOML: {}", e.message().trim_end()))
    })?;
    let sections = || {
        keys::SECTIONS
            .iter()
            .map(|(s, _)| *s)
            .collect::<Vec<_>>()
            .join(", ")
    };
    // (the parser's tables are sorted by name: each finding keeps its offset)
    let mut found: Vec<(usize, Result<Entry, String>)> = Vec::new();
    for (name, table) in doc.get_ref() {
        let section = name.get_ref().as_ref();
        let at = name.span().start;
        let DeValue::Table(t) = table.get_ref() else {
            let why = format!(
                "`{section}` is outside any section: every key belongs to one ({})",
                sections()
            );
            found.push((at, Err(why)));
            continue;
        };
        if !keys::SECTIONS.iter().any(|(s, _)| *s == section) {
            let why = format!("unknown section [{section}] (the sections: {})", sections());
            found.push((at, Err(why)));
            continue;
        }
        for (k, v) in t {
            let kname = k.get_ref().as_ref();
            let Some(key) = keys::find(section, kname) else {
                let known: Vec<&str> = keys::all()
                    .iter()
                    .filter(|k| k.section == section)
                    .map(|k| k.name)
                    .collect();
                let why = format!(
                    "unknown key `{kname}` in [{section}] (its keys: {})",
                    known.join(", ")
                );
                found.push((k.span().start, Err(why)));
                continue;
            };
            let at = v.span().start;
            let entry = value(&key, v.get_ref())
                .map(|value| Entry {
                    key,
                    value,
                    at: place(text, at),
                })
                .map_err(|why| format!("{}: {why}", key.path()));
            found.push((at, entry));
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found
        .into_iter()
        .map(|(at, r)| r.map_err(|why| (at, why)))
        .collect()
}

/// `v` as text for the option's parser (a number as its digits, a boolean as
/// `true`/`false`), or why it cannot be one.
fn value(key: &Key, v: &DeValue) -> Result<Value, String> {
    match (v, key.list) {
        (DeValue::Array(a), true) => a
            .iter()
            .map(|x| scalar(x.get_ref()))
            .collect::<Result<_, _>>()
            .map(Value::List),
        (DeValue::Array(_), false) => Err("one value, not a list".into()),
        (x, true) => Err(format!("a list ([\"...\", ...]), not a {}", x.type_str())),
        (x, false) => scalar(x).map(Value::One),
    }
}

fn scalar(v: &DeValue) -> Result<String, String> {
    match v {
        DeValue::String(s) => Ok(s.to_string()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .map(|n| n.to_string())
            .map_err(|e| format!("{e}")),
        DeValue::Float(f) => Ok(f.as_str().replace('_', "")),
        DeValue::Boolean(b) => Ok(b.to_string()),
        x => Err(format!(
            "a string, a number or a boolean, not a {}",
            x.type_str()
        )),
    }
}

/// The line and column (both from 1, the column in characters) of byte `at`.
fn place(text: &str, at: usize) -> Place {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Place {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        let (at, why) = parse(text).unwrap_err();
        let p = place(text, at);
        format!("{}:{}: {why}", p.line, p.column)
    }

    #[test]
    fn keys_come_with_their_place() {
        let text = "# a comment\n[probe]\npps = 50\nexclude = [\"/a\", \"/b\"]\n\n[agent]\nruntimes = [\"native\", \"spt\"]\nslots = 0x10\n[log]\nformat = \"json\"\n";
        let e = parse(text).unwrap();
        let got: Vec<(String, Value, usize, usize)> = e
            .iter()
            .map(|e| (e.key.path(), e.value.clone(), e.at.line, e.at.column))
            .collect();
        let one = |s: &str| Value::One(s.into());
        let list = |v: &[&str]| Value::List(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            got,
            [
                ("probe.pps".into(), one("50"), 3, 7),
                ("probe.exclude".into(), list(&["/a", "/b"]), 4, 11),
                ("agent.runtimes".into(), list(&["native", "spt"]), 7, 12),
                ("agent.slots".into(), one("16"), 8, 9),
                ("log.format".into(), one("json"), 10, 10),
            ]
        );
    }

    #[test]
    fn what_is_not_in_the_table_is_refused_where_it_is() {
        assert_eq!(
            err("[probe]\npps = 5\nppps = 5\n"),
            "3:1: unknown key `ppps` in [probe] (its keys: pps, window, allow-public, exclude)"
        );
        assert!(err("\n[probes]\n")
            .starts_with("2:2: unknown section [probes] (the sections: probe, daemon,"));
        assert!(err("pps = 5\n").starts_with("1:1: `pps` is outside any section"));
        assert_eq!(
            err("[probe]\npps = [1]\n"),
            "2:7: probe.pps: one value, not a list"
        );
        assert_eq!(
            err("[agent]\nruntimes = \"spt\"\n"),
            "2:12: agent.runtimes: a list ([\"...\", ...]), not a string"
        );
        assert_eq!(
            err("[probe]\npps = { a = 1 }\n"),
            "2:7: probe.pps: a string, a number or a boolean, not a table"
        );
        assert!(err("[probe]\npps = = 5\n").starts_with("2:7: not TOML: "));
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(place("é = 1\nab", 8), Place { line: 2, column: 2 });
        assert_eq!(place("ab", 99), Place { line: 1, column: 3 });
    }
}
