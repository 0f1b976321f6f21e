//! Rule files into a [`Ruleset`]: `iptables-save` output ([`iptables_save`]) and
//! `nft list ruleset` output ([`nft`]), the filter table's subset this engine evaluates.
//!
//! Every error names the file, line and column and what is wrong there: a construct
//! outside the subset (`match -m recent is not supported`), a malformed value, a chain
//! that is not declared. Nothing is skipped silently; only what cannot change a verdict
//! is passed over on purpose (counters, comments). A rule file whose model would take
//! more than the memory given fails at the line where it crossed the limit
//! ([`What::TooLarge`]), before the rest is read.

mod iptables;
mod nft;
mod values;

use alloc::string::{String, ToString};
use core::mem::size_of;

use crate::check::Invalid;
use crate::rule::{Rule, Ruleset};

pub(crate) use values::TCP_FLAGS;
pub use values::{icmp_type_name, service_port};

/// What went wrong at a place in a rule file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum What {
    #[error("match `-m {0}` is not supported")]
    Match(String),
    #[error("option `{0}` is not supported")]
    Option(String),
    #[error("target `{0}` is not supported")]
    Target(String),
    #[error("table `{0}` has rules, and only the filter table is supported")]
    Table(String),
    #[error("{0} is not supported")]
    Unsupported(String),
    #[error("expected {expected}, found {found}")]
    Expected {
        expected: &'static str,
        found: String,
    },
    #[error("bad {what} `{text}`")]
    Bad { what: &'static str, text: String },
    #[error("{0}")]
    Needs(String),
    #[error("`{0}` is given twice")]
    Twice(String),
    #[error("chain `{0}` is not declared")]
    UnknownChain(String),
    #[error("chain `{0}` is declared twice")]
    DuplicateChain(String),
    #[error("set `@{0}` is not defined above")]
    UnknownSet(String),
    #[error("a quote is not closed")]
    Quote,
    #[error("the table is not committed (no `COMMIT` after `*{0}`)")]
    NoCommit(String),
    #[error("the file is not UTF-8")]
    NotUtf8,
    #[error(transparent)]
    Invalid(Invalid),
    #[error("the rules need more than the {limit} bytes of memory allowed")]
    TooLarge { limit: usize },
}

/// An error in a rule file: `file:line:col: what`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{col}: {what}")]
pub struct ParseError {
    pub file: String,
    /// 1-based.
    pub line: u32,
    /// 1-based, in bytes.
    pub col: u32,
    pub what: What,
}

/// The syntax of a rule file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `iptables-save` output (what `iptables-restore` reads).
    IptablesSave,
    /// `nft list ruleset` output (what `nft -f` reads).
    Nft,
}

impl Format {
    /// The syntax of `text`: nft when its first statement is `table` or `flush`,
    /// iptables-save otherwise.
    pub fn detect(text: &str) -> Format {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        match first.and_then(|l| l.split_whitespace().next()) {
            Some("table" | "flush" | "add" | "define" | "include") => Format::Nft,
            _ => Format::IptablesSave,
        }
    }
}

/// Where a token is, for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    /// `bad WHAT `TEXT``: a malformed value here.
    pub fn bad(self, file: &str, what: &'static str, text: &str) -> ParseError {
        self.err(
            file,
            What::Bad {
                what,
                text: text.to_string(),
            },
        )
    }
    pub fn err(self, file: &str, what: What) -> ParseError {
        ParseError {
            file: file.to_string(),
            line: self.line,
            col: self.col,
            what,
        }
    }
}

/// Counts what the model takes as rules are added, against a limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    used: usize,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Budget {
        Budget { used: 0, limit }
    }
    /// Charges `bytes`; `Err` once past the limit.
    pub fn charge(&mut self, bytes: usize) -> Result<(), What> {
        self.used = self.used.saturating_add(bytes);
        match self.used > self.limit {
            true => Err(What::TooLarge { limit: self.limit }),
            false => Ok(()),
        }
    }
    pub fn rule(&mut self) -> Result<(), What> {
        self.charge(size_of::<Rule>())
    }
}

/// `bytes` as text, or an error at the first byte that is not UTF-8.
pub fn text<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, ParseError> {
    core::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        let col = good.iter().rev().take_while(|&&b| b != b'\n').count() as u32 + 1;
        Pos { line, col }.err(file, What::NotUtf8)
    })
}

/// Reads `text` (named `file` in errors) in `format`, the model held to `max_bytes`.
pub fn parse(
    file: &str,
    text: &str,
    format: Format,
    max_bytes: usize,
) -> Result<Ruleset, ParseError> {
    let mut budget = Budget::new(max_bytes);
    let rs = match format {
        Format::IptablesSave => iptables::parse(file, text, &mut budget)?,
        Format::Nft => nft::parse(file, text, &mut budget)?,
    };
    rs.check().map_err(|e| {
        Pos {
            line: e.line(),
            col: 1,
        }
        .err(file, What::Invalid(e))
    })?;
    Ok(rs)
}

/// `iptables-save` output, without a memory limit.
pub fn iptables_save(file: &str, text: &str) -> Result<Ruleset, ParseError> {
    parse(file, text, Format::IptablesSave, usize::MAX)
}

/// `nft list ruleset` output, without a memory limit.
pub fn nft(file: &str, text: &str) -> Result<Ruleset, ParseError> {
    parse(file, text, Format::Nft, usize::MAX)
}
