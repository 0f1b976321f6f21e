//! What can go wrong while building, deploying and running a job's instance, as values a
//! caller can match on: a file or system call, a host program that is missing or failed,
//! a network that does not fit the runtime, a lab that cannot host a guest, an image that
//! could not be fetched or is not the one pinned, an instance that outlived its timeout,
//! and the errors of the crates this one drives (`vtnt-measure`, `vtnt-lab-linux`,
//! `vtnt-artifacts`, `vtnt-tender-spt`) passed through as they are (a `vtnt-job` error
//! never reaches here: a job is parsed before it is run). Their texts are the
//! ones users have always read; binaries report them through `anyhow`.

use std::time::Duration;

/// An error a caller-supplied part returns (an image fetcher, [`crate::FetchImage`]): any
/// error that can cross threads, its chain kept.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of `vtnt-runtimes`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or system call failed: what was being done (naming its path), and the
    /// operating system's error.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A host program the runtime needs is not installed.
    #[error("`{program}` not found: install Debian package `{package}` (scripts/setup.sh does)")]
    MissingTool { program: String, package: String },
    /// A host program ran and failed: the command, its exit status and its stderr's tail.
    #[error("{command} failed ({status}): {stderr_tail}")]
    Command {
        command: String,
        status: std::process::ExitStatus,
        stderr_tail: String,
    },
    /// The network (`--net`) does not fit the runtime, or its TAP device or namespace is
    /// not usable: a sentence naming the flag and why.
    #[error("{0}")]
    Network(String),
    /// The lab cannot host this guest (no room in its prefix, no LAN, no slot): a
    /// sentence naming the lab.
    #[error("{0}")]
    Lab(String),
    /// An image, or what an image server or a runtime engine holds, is not what the
    /// runtime needs: a sentence saying which and why.
    #[error("{0}")]
    Image(String),
    /// The image could not be fetched (from an image server or a caller's store); the
    /// fetcher's error is the source.
    #[error("fetching the {runtime} image")]
    Fetch {
        runtime: &'static str,
        #[source]
        source: BoxError,
    },
    /// The image as fetched is not the one this host's `artifacts.toml` pins.
    #[error("the {runtime} image as fetched differs from what this host's artifacts.toml pins")]
    Pinned {
        runtime: &'static str,
        #[source]
        source: vtnt_artifacts::Error,
    },
    /// An image server's answer that is not the image: the URL and what was wrong.
    #[error("GET {url}: {why}")]
    Download { url: String, why: String },
    /// An instance (or a helper the runtime waits for) outlived its timeout.
    #[error("{what} did not finish within {:.0} s", .timeout.as_secs_f64())]
    TimedOut { what: String, timeout: Duration },
    /// A scope (`enter_scope`, `scope::clean`) that cannot be entered or cleaned: a
    /// sentence naming it.
    #[error("{0}")]
    Scope(String),
    /// Another failure of the runtime itself (a thread that panicked, an engine that runs
    /// elsewhere, an instance waited for twice): a sentence saying what.
    #[error("{0}")]
    Runtime(String),
    /// What was being done when an error of this crate happened (building an image,
    /// starting a front, ...), the error as its source.
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
    /// The spt tender could not set up its guest.
    #[error(transparent)]
    Spt(#[from] vtnt_tender_spt::Error),
    /// Measuring or supervising a process failed.
    #[error(transparent)]
    Measure(#[from] vtnt_measure::Error),
    /// Lab control (state, front, TAP) failed.
    #[error(transparent)]
    LabControl(#[from] vtnt_lab_linux::Error),
    /// An installed artifact is missing or not the one pinned.
    #[error(transparent)]
    Artifacts(#[from] vtnt_artifacts::Error),
}

/// `vtnt-runtimes`' results.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Whether this is an instance (or a child the runtime supervised) that outlived its
    /// timeout: what `vtnt bench deploy` and the tests retry once.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self.root(),
            Error::TimedOut { .. } | Error::Measure(vtnt_measure::Error::TimedOut(_))
        )
    }

    /// The installed artifact's error beneath every [`Error::Context`], if that is what
    /// failed (a chain walk does not see it: [`Error::Artifacts`] is transparent).
    pub fn artifact(&self) -> Option<&vtnt_artifacts::Error> {
        match self.root() {
            Error::Artifacts(a) => Some(a),
            _ => None,
        }
    }

    /// The error beneath every [`Error::Context`]: what a caller matches on.
    pub fn root(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.root(),
            e => e,
        }
    }
}

/// Whether `e`, or an error in its chain, is a timeout: this crate's
/// ([`Error::is_timeout`]; its `vtnt-measure` errors pass through unseen by a chain walk)
/// or `vtnt-measure`'s [`vtnt_measure::proc::TimedOut`].
pub fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(|e| {
        e.downcast_ref::<Error>().is_some_and(Error::is_timeout) || vtnt_measure::proc::timed_out(e)
    })
}

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

/// This crate's (or a crate it wraps) error inside [`Error::Context`], with what was being
/// done.
pub(crate) trait Context<T> {
    fn during(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn during(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what(),
            source: Box::new(e.into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vtnt-measure's timeout passes through transparently, so a walk of the chain (what
    /// `vtnt_measure::proc::retry_once_on_timeout` does) does not see it; `timed_out` does,
    /// under any context.
    #[test]
    fn a_timeout_is_seen_under_context() {
        let measured = vtnt_measure::Error::TimedOut(vtnt_measure::proc::TimedOut {
            what: "docker container x".into(),
            timeout: Duration::from_secs(1),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        });
        let e = Error::Context {
            what: "container state: exited".into(),
            source: Box::new(measured.into()),
        };
        assert!(e.is_timeout());
        assert!(!vtnt_measure::proc::timed_out(&e));
        let e = anyhow::Error::new(e);
        assert!(timed_out(e.as_ref()));
        assert_eq!(
            format!("{e:#}"),
            "container state: exited: docker container x did not finish within 1 s; \
             stdout tail: ; stderr tail: "
        );
        let other = Error::Network("--net host: the vm runtime has a NIC of its own".into());
        assert!(!other.is_timeout() && !timed_out(&other));
        let microvm = Error::TimedOut {
            what: "the vTNT microVM".into(),
            timeout: Duration::from_secs(600),
        };
        assert_eq!(
            microvm.to_string(),
            "the vTNT microVM did not finish within 600 s"
        );
        assert!(microvm.is_timeout());
    }
}
