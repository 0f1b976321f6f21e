//! The vTNT unikernel's guest ABI: everything the guest and whatever runs it agree on,
//! in one `no_std` crate (Solo5's `include/hvt_abi.h` and `spt_abi.h` are the model), so
//! that neither side can drift from the other.
//!
//! - [`hvt`]: the guest under `vtnt-monitor` (a VM): boot information, memory layout and
//!   the port-I/O hypercalls.
//! - [`spt`]: the guest as a Linux process: its descriptors, the system calls it may make
//!   and the seccomp-BPF filter that holds it to them.
//! - [`exit`]: the documented exit statuses, on every platform.
//! - [`steps`]: the boot steps the guest times.
//! - [`record`]: the exit record, the guest's last console line: written by the kernel,
//!   parsed (typed, never by string search) by the host side.
//!
//! Used by `vtnt-kernel`, the two tenders (`vtnt-monitor` for hvt, `vtnt-tender-spt`) and
//! the host-side reader (`vtnt-unikernel`).
#![no_std]

#[cfg(test)]
extern crate std;

pub mod exit;
pub mod hvt;
pub mod record;
pub mod spt;
pub mod steps;
