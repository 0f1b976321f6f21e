//! scamper's control socket (`scamper -P`/`-U`, version 20211212), as a state machine
//! with no I/O: a driver hands a [`Session`] the bytes a client sent, takes the job
//! commands it finds ([`Session::next_command`]) and says whether each was accepted,
//! hands it the records of finished jobs, and writes back whatever
//! [`Session::take_output`] gives. `vtnt daemon` (crates/cli) is that driver.
//!
//! What the protocol is, as scamper 20211212 speaks it (read from its source and checked
//! against the binary): a client starts in an interactive mode (`attach`, `get version`,
//! `get pps`, `get window`, `help`, `exit`; anything else `ERR unhandled command 'x'`).
//! `attach [format warts|json]` answers `OK` and `MORE`, then streams the cycle's header
//! objects; from then on every line is a measurement command, answered `OK id-N` (with
//! `MORE` while the client may send another) or `ERR ...`, and every result is
//! `DATA <length>` followed by that many bytes: a warts object uuencoded ([`uuencode`])
//! or one scamper-JSON line. `done` is answered `OK`; the session ends, with the cycle
//! stop, once the outstanding results are out.
//!
//! Imports: `vtnt-formats` (warts and scamper JSON of each object).

mod session;
pub mod uuencode;
mod words;

pub use session::{Format, Session, SessionInfo, JOB_COMMANDS, MAX_LINE, VERSION};
pub use words::split_words;
