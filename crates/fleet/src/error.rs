//! What can go wrong in the fleet, as values a caller can match on: a flag, file or job
//! that is not usable, a key or credentials that cannot be used, the NATS server that
//! does not answer or refuses, a NATS operation that failed, an answer that timed out, a
//! message from the wire that does not parse, a broker (`nats-server`) that cannot be run,
//! a file or system call, and `vtnt-job`'s and `vtnt-runtimes`' errors passed through as
//! they are. The texts are the ones users have always read; binaries report them through
//! `anyhow`, whose `{:#}` prints the chain ("what: why").

use std::time::Duration;

/// Any error of a crate this one drives (async-nats's many error types), its chain kept.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A result of `vtnt-fleet`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of `vtnt-fleet`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag, input file or name that is not usable (a bad token, a line of a replay
    /// file, a job the fleet does not take): a sentence naming it and why.
    #[error("{0}")]
    Invalid(String),
    /// A job spec that `vtnt-job` refuses.
    #[error(transparent)]
    Job(#[from] vtnt_job::Error),
    /// A key, seed or credentials file that cannot be used: a sentence naming it.
    #[error("{0}")]
    Auth(String),
    /// The NATS server refused this user (an authorization or permissions violation), in
    /// its own words.
    #[error("{0}")]
    Refused(String),
    /// No node of the fleet can take the job (none in its location runs its runtime; a
    /// node that is not what a replay expects): a sentence naming them.
    #[error("{0}")]
    NoNode(String),
    /// A tenant's quota (concurrent jobs, probes per day) does not leave room for what
    /// was asked: a sentence naming the quota, its limit and the use
    /// (`crate::quota::exceeded`).
    #[error("{0}")]
    Quota(String),
    /// The NATS server at `url` did not answer a connection within `timeout`.
    #[error("no answer from {url} within {timeout:?}")]
    Unreachable { url: String, timeout: Duration },
    /// An answer (an agent's reply) that did not come in time: a sentence saying which.
    #[error("{0}")]
    TimedOut(String),
    /// A NATS or JetStream operation failed: what was being done (naming the subject,
    /// stream or server), the client's error as the source.
    #[error("{what}")]
    Nats {
        what: String,
        #[source]
        source: BoxError,
    },
    /// A NATS or JetStream operation failed, in the client's words alone (the command
    /// says which it was doing).
    #[error(transparent)]
    Client(BoxError),
    /// A message from the wire that does not parse (or one of ours that does not
    /// encode): what it was (naming its subject or job), serde's error as the source.
    #[error("{what}")]
    BadMessage {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// The broker (`nats-server`) is not installed, cannot start or has exited: a
    /// sentence saying which, with its log's tail.
    #[error("{0}")]
    Broker(String),
    /// A file or system call failed: what was being done (naming its path), the
    /// operating system's error.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A record could not be written as warts (a cycle's archive): which, why.
    #[error("{what}")]
    Warts {
        what: String,
        #[source]
        source: vtnt_formats::WartsError,
    },
    /// A thread or task of this process failed (it panicked): what it was doing, why.
    #[error("{what}")]
    Thread {
        what: String,
        #[source]
        source: BoxError,
    },
    /// The stop flag ([`vtnt_measure::stop`]) was raised.
    #[error("interrupted")]
    Interrupted,
    /// An error of the runtimes (preparing an image, running a job's instance).
    #[error(transparent)]
    Runtimes(#[from] vtnt_runtimes::Error),
    /// What was being done when an error of this crate happened, that error as the source.
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// The innermost error of this crate under any [`Error::Context`]: what a caller
    /// matches on.
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            e => e,
        }
    }

    /// The broker did not answer or failed an operation (a server of a cluster lost, a
    /// restart): the same step may work when tried again. A refusal, a bad input or a
    /// quota is not.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.root(),
            Error::Nats { .. } | Error::Client(_) | Error::TimedOut(_) | Error::Unreachable { .. }
        )
    }
}

/// An error and its sources, as `anyhow`'s `{:#}` prints them.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text = format!("{text}: {s}");
        next = s.source();
    }
    text
}

impl<K> From<async_nats::error::Error<K>> for Error
where
    async_nats::error::Error<K>: std::error::Error + Send + Sync + 'static,
    K: Clone + std::fmt::Debug + std::fmt::Display + PartialEq,
{
    fn from(e: async_nats::error::Error<K>) -> Error {
        Error::Client(Box::new(e))
    }
}

/// What was being done, for an error's context: a text, or a closure that makes it only
/// when there is an error.
pub(crate) trait What {
    fn what(self) -> String;
}

impl What for &str {
    fn what(self) -> String {
        self.to_string()
    }
}

impl<F: FnOnce() -> String> What for F {
    fn what(self) -> String {
        self()
    }
}

/// Wraps a failed result's error as what was being done ([`Error::Context`],
/// [`Error::Io`], [`Error::Nats`], [`Error::BadMessage`]).
pub(crate) trait ResultExt<T, E> {
    /// An error of this crate, in the context of `what`.
    fn context(self, what: impl What) -> Result<T>
    where
        E: Into<Error>;
    /// A file or system call's error.
    fn io(self, what: impl What) -> Result<T>
    where
        E: Into<std::io::Error>;
    /// A NATS client's error.
    fn nats(self, what: impl What) -> Result<T>
    where
        E: Into<BoxError>;
    /// A message's parse error.
    fn parse(self, what: impl What) -> Result<T>
    where
        E: Into<serde_json::Error>;
}

impl<T, E> ResultExt<T, E> for std::result::Result<T, E> {
    fn context(self, what: impl What) -> Result<T>
    where
        E: Into<Error>,
    {
        self.map_err(|e| Error::Context {
            what: what.what(),
            source: Box::new(e.into()),
        })
    }

    fn io(self, what: impl What) -> Result<T>
    where
        E: Into<std::io::Error>,
    {
        self.map_err(|e| Error::Io {
            what: what.what(),
            source: e.into(),
        })
    }

    fn nats(self, what: impl What) -> Result<T>
    where
        E: Into<BoxError>,
    {
        self.map_err(|e| Error::Nats {
            what: what.what(),
            source: e.into(),
        })
    }

    fn parse(self, what: impl What) -> Result<T>
    where
        E: Into<serde_json::Error>,
    {
        self.map_err(|e| Error::BadMessage {
            what: what.what(),
            source: e.into(),
        })
    }
}

/// Returns [`Error::Invalid`] (or another variant taking a sentence) unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $variant:ident, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::Error::$variant(format!($($fmt)+)));
        }
    };
}
pub(crate) use ensure;

/// Returns [`Error::Invalid`] (or another variant taking a sentence) at once.
macro_rules! bail {
    ($variant:ident, $($fmt:tt)+) => {
        return Err($crate::Error::$variant(format!($($fmt)+)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_keeps_the_variant_and_the_text() {
        let e = crate::check_token("node", "a.b")
            .context(|| "nodes.txt:3: NAME".to_string())
            .unwrap_err();
        assert!(matches!(e.root(), Error::Invalid(_)), "{e:?}");
        assert_eq!(
            chain(&e),
            "nodes.txt:3: NAME: node `a.b`: use 1 to 64 letters, digits, `-` or `_`"
        );
        let io: Result<()> = Err(std::io::Error::from(std::io::ErrorKind::NotFound))
            .io(|| "reading /nope".to_string());
        let e = io.unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
        assert!(chain(&e).starts_with("reading /nope: "), "{}", chain(&e));
    }

    #[test]
    fn only_the_brokers_failures_are_worth_trying_again() {
        let timed_out: Result<()> =
            Err(std::io::Error::from(std::io::ErrorKind::TimedOut)).nats("reading vtnt.rate.limit");
        let e = timed_out.context("admitting job j").unwrap_err();
        assert!(e.is_transient(), "{e:?}");
        assert!(Error::TimedOut("no answer".into()).is_transient());
        for e in [
            Error::Invalid("bad".into()),
            Error::Quota("over".into()),
            Error::Refused("permissions violation".into()),
        ] {
            assert!(!e.is_transient(), "{e:?}");
        }
    }
}
