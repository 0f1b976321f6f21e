//! The micro job (`kind=micro`): seed 001's micro-benchmarks (`vtnt_micro`, the loops
//! every runtime runs) on this platform, without the network: the clock is the job's own
//! (`platform::now`), the "system call" the platform's cheapest exit
//! (`platform::leave`). One result line, then the exit.

use crate::platform;
use crate::platform::finish;
use vtnt_abi::exit::Status;
use vtnt_jobspec::micro::{self, Options};

/// The unikernel as the loops see it.
struct Here;

impl micro::Platform for Here {
    fn now_ns(&mut self) -> u64 {
        platform::now().as_micros() * 1000
    }
    fn leave(&mut self) {
        platform::leave()
    }
    fn leave_name(&self) -> &'static str {
        platform::leave_name()
    }
}

/// Runs the loops of `o`, prints their result line and exits.
pub fn run(o: &Options) -> ! {
    let totals = micro::run(o, &mut Here);
    crate::println!("{totals}");
    finish::finish(Status::Ok)
}
