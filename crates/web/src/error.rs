//! What can go wrong serving the store (`vtnt serve`, `vtnt bench serve`), as values a
//! caller can match on: a configuration or flag that is not usable, a key that cannot
//! sign, a file or socket call, a page that did not answer 200 (the benchmark), the
//! server's own machinery, and the store's and the fleet's errors passed through as they
//! are. The texts are the ones users have always read; binaries report them through
//! `anyhow`.

/// A result of `vtnt-web`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of `vtnt-web`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag or configuration that is not usable (`--listen`, `--public`, `--reports`,
    /// `--ttl`, the store's path): a sentence naming it and why.
    #[error("{0}")]
    Invalid(String),
    /// A key that cannot make or sign a token: a sentence naming its file.
    #[error("{0}")]
    Key(String),
    /// A file or socket call failed: what was being done (naming its path or address),
    /// the operating system's error.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A page that answered other than 200 (`vtnt bench serve`): its path and status.
    #[error("{path}: HTTP {status}")]
    Http { path: String, status: u16 },
    /// The server's own machinery failed (its runtime's connection limit): what.
    #[error("{0}")]
    Server(String),
    /// An error of the store.
    #[error(transparent)]
    Store(#[from] vtnt_store::StoreError),
    /// An error of the fleet (following a tenant's results, reading a key).
    #[error(transparent)]
    Fleet(#[from] vtnt_fleet::Error),
}

/// A file or socket call's error, naming what was being done.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
