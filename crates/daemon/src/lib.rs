//! scamper's control socket (`scamper -P`/`-U`), both generations of its protocol, as
//! state machines with no I/O: a driver hands a [`Session`] the bytes a client sent, takes
//! the commands it finds ([`Session::next_command`]), says whether each was accepted,
//! when it starts and ends, hands it the records of finished tasks, and writes back
//! whatever [`Session::take_output`] gives. [`Turns`] shares what clients have in common
//! (the probe rate, the window) among them. `vtnt daemon` (crates/cli) is that driver.
//!
//! What the protocol is, as scamper speaks it (read from its source, scamper_control.c
//! and scamper_source_control.c of 20211212 and of 20260420, and libscamperctrl.c, the
//! client library of 20260420's Python module): a client starts in an interactive mode
//! (`attach`, `get version`, `get pps`, `get window`, `help`, `exit`; anything else `ERR
//! unhandled command 'x'`). `attach [format warts|json] [priority N] ...` ([`Attach`])
//! answers `OK` and `MORE`, then streams the cycle's header objects; from then on every
//! line is a measurement command, answered `OK id-N` or `ERR command not accepted: ...`,
//! with `MORE` each time none of the client's commands waits to start any more; `halt N`
//! stops a task (`OK halted N`). Every result is `DATA <length>` followed by that many
//! bytes: a warts object uuencoded ([`uuencode`]) or one scamper-JSON line; since
//! 20230224 the block that ends a task says whose it is, `DATA <length> id-N`
//! ([`Protocol`]). `done` is answered `OK`; the session ends, with the cycle stop, once
//! the outstanding results are out.
//!
//! Imports: `vtnt-formats` (warts and scamper JSON of each object).

mod attach;
mod encode;
mod session;
mod turns;
pub mod uuencode;
mod words;

pub use attach::Attach;
pub use encode::Format;
pub use session::{Command, Protocol, Session, SessionInfo, JOB_COMMANDS, MAX_LINE};
pub use turns::Turns;
pub use words::split_words;
