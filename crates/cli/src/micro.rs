//! A micro job (`vtnt job` with `kind=micro`) in this process: seed 001's
//! micro-benchmarks (`vtnt_micro`, the loops the unikernel runs too) over Linux, as the
//! seed took them: the clock is the real-time clock through the vDSO (what
//! `gettimeofday` reads), the "system call" is `close` of a descriptor that is not open
//! (the seed's `close(3)`: the lowest free descriptor, 3 in a fresh process).

use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use vtnt_jobspec::micro::{self, Options};

/// This process as the loops see it.
struct Linux {
    /// A descriptor number that is not open.
    closed: i32,
    name: &'static str,
}

impl micro::Platform for Linux {
    fn now_ns(&mut self) -> u64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }
    fn leave(&mut self) {
        // EBADF, every time: nothing opens descriptors while the loops run
        let _ = nix::unistd::close(self.closed);
    }
    fn leave_name(&self) -> &'static str {
        self.name
    }
}

/// Runs the loops of `o` and prints their result line.
pub fn run(o: &Options) -> anyhow::Result<ExitCode> {
    // the lowest free descriptor: a pipe's first end, closed again
    let closed = std::io::pipe()
        .context("micro job: a pipe to find a free descriptor")
        .map(|(r, _w)| r.as_raw_fd())?;
    let name = match closed {
        3 => "close(3)",
        n => Box::leak(format!("close({n})").into_boxed_str()),
    };
    out!("{}", micro::run(o, &mut Linux { closed, name }));
    Ok(ExitCode::SUCCESS)
}
