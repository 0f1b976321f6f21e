//! Errors of the readers, writers and converters. Each says what went wrong and where:
//! the byte offset in a warts stream, the line in a JSON stream.

use std::io;

/// A warts problem at a byte offset of the stream.
#[derive(Debug, thiserror::Error)]
#[error("warts, byte {offset}: {kind}")]
pub struct WartsError {
    /// Offset from the start of the stream of the byte where the problem was found (for
    /// truncation: where the missing bytes should have been).
    pub offset: u64,
    /// What is wrong.
    pub kind: WartsErrorKind,
}

/// What is wrong in a warts stream.
#[derive(Debug, thiserror::Error)]
pub enum WartsErrorKind {
    /// The stream could not be read or written.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// A record header does not start with the magic number 0x1205.
    #[error("bad magic {0:#06x} in record header (want 0x1205)")]
    BadMagic(u16),
    /// The stream ends inside a record or a field.
    #[error("truncated: {0} cut short")]
    Truncated(&'static str),
    /// A field has a value the format does not allow.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// The field.
        what: &'static str,
        /// Why it is invalid.
        why: String,
    },
    /// A valid record that vTNT's records cannot represent (e.g. a classic UDP trace).
    #[error("unsupported {what}: {why}")]
    Unsupported {
        /// The field.
        what: &'static str,
        /// What value was found.
        why: String,
    },
    /// A record cannot be written as warts (a value too large for its field).
    #[error("cannot encode {what}: {why}")]
    Encode {
        /// The field.
        what: &'static str,
        /// Why.
        why: String,
    },
}

impl WartsError {
    pub(crate) fn new(offset: u64, kind: WartsErrorKind) -> WartsError {
        WartsError { offset, kind }
    }
    pub(crate) fn invalid(offset: u64, what: &'static str, why: impl Into<String>) -> WartsError {
        WartsError::new(
            offset,
            WartsErrorKind::Invalid {
                what,
                why: why.into(),
            },
        )
    }
}

/// A problem with one line of scamper JSON.
#[derive(Debug, thiserror::Error)]
#[error("JSON line {line}: {kind}")]
pub struct JsonError {
    /// Line number, from 1 (0 for an error that concerns no line, such as writing).
    pub line: usize,
    /// What is wrong.
    pub kind: JsonErrorKind,
}

/// What is wrong with a JSON line.
#[derive(Debug, thiserror::Error)]
pub enum JsonErrorKind {
    /// The stream could not be read or written.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The line is not JSON, or not an object.
    #[error("syntax: {0}")]
    Syntax(String),
    /// The object's `type` is not one this reader knows.
    #[error("unknown object type {0:?}")]
    UnknownType(String),
    /// A field the object needs is absent.
    #[error("missing field {0:?}")]
    Missing(String),
    /// A field has the wrong JSON type or an out-of-range value.
    #[error("field {field:?}: {why}")]
    Bad {
        /// Path of the field, e.g. `hops[2].rtt`.
        field: String,
        /// Why.
        why: String,
    },
    /// A record that vTNT's records cannot represent (e.g. a classic UDP trace).
    #[error("unsupported {what}: {why}")]
    Unsupported {
        /// The field.
        what: &'static str,
        /// The value found.
        why: String,
    },
    /// A record the writer refuses (it would print something scamper never does).
    #[error("cannot write {what}: {why}")]
    Encode {
        /// The field.
        what: &'static str,
        /// Why.
        why: String,
    },
}

impl JsonError {
    pub(crate) fn new(line: usize, kind: JsonErrorKind) -> JsonError {
        JsonError { line, kind }
    }
}

/// A conversion failed (the output could not be written), or reading its input stopped
/// early ([`crate::ConvertReport::stopped`]); single bad records are skipped and listed in
/// [`crate::ConvertReport`] instead.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A file could not be opened or created.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The input's format could not be told from its name or first bytes.
    #[error("{0}: cannot tell the format (want a .warts or .json name, or warts magic)")]
    UnknownFormat(String),
    /// Reading or writing warts failed beyond the record level (I/O, truncation, bad
    /// magic).
    #[error(transparent)]
    Warts(#[from] WartsError),
    /// Reading or writing JSON failed at the I/O level.
    #[error(transparent)]
    Json(#[from] JsonError),
}
