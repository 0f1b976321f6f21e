//! What can go wrong while measuring, as values a caller can match on: a file or system
//! call that failed (with what was being done and its path), a host that lacks what a
//! measurement needs, a child that outlived its timeout, a run interrupted. Their texts
//! are the ones users have always read; callers that only report them wrap them with
//! `anyhow` at the binaries' edge.

use std::time::Duration;

/// An error of `vtnt-measure`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or system call failed: `what` was being done (naming its path), and the
    /// operating system's error (its `kind()`: `NotFound` for a missing program or file,
    /// `PermissionDenied` without root, ...).
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The host lacks what the measurement needs (cgroup v1 controllers, KSM, a cgroup2
    /// mount): a sentence that says what and where.
    #[error("{0}")]
    Unavailable(String),
    /// A child outlived its timeout and was killed.
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
    /// The run was interrupted ([`crate::stop`]); the child it killed, if any.
    #[error("interrupted{}", .killed.as_ref().map(|w| format!(": {w} killed")).unwrap_or_default())]
    Interrupted { killed: Option<String> },
}

/// `vtnt-measure`'s results.
pub type Result<T> = std::result::Result<T, Error>;

/// An I/O result's error as [`Error::Io`], with what was being done.
pub(crate) trait IoContext<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<std::io::Error>> IoContext<T> for std::result::Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Io {
            what: what(),
            source: e.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_the_ones_users_read() {
        let io = std::fs::read("/nonexistent/vtnt").doing(|| "reading /nonexistent/vtnt".into());
        let e = io.unwrap_err();
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
        assert_eq!(
            format!("{:#}", anyhow::Error::new(e)),
            "reading /nonexistent/vtnt: No such file or directory (os error 2)"
        );
        assert_eq!(
            Error::Interrupted { killed: None }.to_string(),
            "interrupted"
        );
        let killed = Error::Interrupted {
            killed: Some("vtnt job".into()),
        };
        assert_eq!(killed.to_string(), "interrupted: vtnt job killed");
    }
}

/// The error of [`crate::proc::Supervised::wait`] when the child outlived its timeout (it was killed).
#[derive(Debug, Clone)]
pub struct TimedOut {
    pub what: String,
    pub timeout: Duration,
    pub stdout_tail: String,
    pub stderr_tail: String,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} did not finish within {:.0} s; stdout tail: {}; stderr tail: {}",
            self.what,
            self.timeout.as_secs_f64(),
            self.stdout_tail,
            self.stderr_tail
        )
    }
}

impl std::error::Error for TimedOut {}
