//! What can go wrong while making a job, as values a caller can match on: words that do
//! not parse, an option given where it may not be, an option (or a file it names) the job
//! cannot take, no target left, the host's network or a file that cannot be read. Their
//! texts are the ones users have always read; binaries report them through `anyhow`.

/// An error of `vtnt-job`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The words are not a job (clap's message: what is wrong, or the help asked for).
    #[error("job: {0}")]
    Words(String),
    /// An option given where it may not be (`--store` in a runtime's job, a daemon's
    /// run-wide options): the flag as the user typed it.
    #[error("{flag} is not accepted here")]
    NotAccepted { flag: String },
    /// An option, or a file it names, that the job cannot take; the text names the flag
    /// (or the file) and why.
    #[error("{0}")]
    Invalid(String),
    /// Every target was refused or could not be resolved, or none was given.
    #[error("no target to probe (give TARGET arguments or --targets FILE)")]
    NoTarget,
    /// A file or this host's network could not be read: what was being done (naming its
    /// path), and the operating system's error.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// `vtnt-job`'s results.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An [`Error::Invalid`] with this text.
    pub(crate) fn invalid(text: impl Into<String>) -> Error {
        Error::Invalid(text.into())
    }

    /// An [`Error::Io`]: `source` while `what` was being done.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}
