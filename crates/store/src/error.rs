//! The store's errors: each says what failed and where (the file and its byte offset or
//! line for an import, the table for a query, the line of a prefix-to-AS file, the
//! stream for a feed).

use std::path::PathBuf;

/// Where in a file a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// A byte offset (warts; of the decompressed stream for a `.gz` file).
    Byte(u64),
    /// A line, from 1 (JSON, prefix-to-AS files).
    Line(usize),
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Position::Byte(b) => write!(f, "byte {b}"),
            Position::Line(l) => write!(f, "line {l}"),
        }
    }
}

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused something (`what`: the step, e.g. `opening /var/lib/vtnt/results.sqlite`).
    #[error("{what}: {source}")]
    Sql {
        what: String,
        #[source]
        source: rusqlite::Error,
    },
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file holds something it must not; nothing of it was stored.
    #[error("{}, {at}: {why}", path.display())]
    Corrupt {
        path: PathBuf,
        at: Position,
        why: String,
    },
    /// The database was written by a newer vTNT (its schema version is unknown here).
    #[error("{path}: schema version {found}, newer than this vtnt's {known}: use a newer vtnt")]
    NewerSchema {
        path: String,
        found: i64,
        known: i64,
    },
    /// A request that cannot be answered as asked (a bad filter, an unknown table or run).
    #[error("{0}")]
    Invalid(String),
    /// The fleet's broker failed a feed ([`crate::feed`]): unreachable, refusing, or a
    /// stream that could not be read (naming it).
    #[cfg(feature = "fleet")]
    #[error(transparent)]
    Fleet(#[from] vtnt_fleet::Error),
}

impl StoreError {
    /// Wraps a SQLite error with the step it happened in.
    pub(crate) fn sql(what: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> StoreError {
        let what = what.into();
        move |source| StoreError::Sql { what, source }
    }
}

/// The store's results.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
