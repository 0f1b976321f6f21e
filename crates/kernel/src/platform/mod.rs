//! The one interface between the job code and whatever runs the kernel.
//!
//! Everything above this module (the job and its run loop, the interface's ARP and DHCP,
//! Ethernet framing, the console's line buffer, the exit line) reaches its platform only
//! through what is declared here: frames in and out ([`Link`]), a monotonic clock
//! ([`now`]), waiting until a deadline or a frame ([`wait_until`]), writing to the console
//! ([`console_emit`]), boot modules ([`module`]), the exit ([`exit`]) and, for the micro
//! job, the cheapest call that leaves the guest ([`leave`]); a network function's second
//! network (`open_second_net`, feature `fw`). Two builds:
//!
//! - [`vm`] (default): a virtual machine. One image boots two ways: PVH + virtio-net under
//!   QEMU and Firecracker, and hypercalls under our own `vtnt-monitor` (`vm::hvt`).
//! - [`spt`] (feature `spt`): a Linux process, Solo5's "unikernels as processes": raw
//!   system calls on the descriptors its tender gave it, in a seccomp sandbox.
//!
//! Each implementation provides the same functions with the same signatures (the build
//! that picks it checks them); nothing else in the kernel names a platform.
//!
//! The layer is the kernel's bottom: it imports `vtnt-abi` and itself only. What every
//! platform needs before the job runs is here too: the console's lines ([`console`]),
//! the heap ([`heap`]), the boot steps' timestamps ([`steps`]), the exit record and the
//! error path ([`finish`]); the kernel above is entered through [`start`].

use alloc::boxed::Box;
use vtnt_record::Instant;

pub mod console;
pub mod finish;
pub mod heap;
pub mod steps;

#[cfg(feature = "spt")]
pub mod spt;
#[cfg(feature = "spt")]
use spt as imp;
#[cfg(not(feature = "spt"))]
pub mod vm;
#[cfg(not(feature = "spt"))]
use vm as imp;

#[cfg(feature = "fw")]
pub use imp::open_second_net;
pub use imp::{
    console_batches, console_emit, exit, leave, leave_name, mark_step, module, now, open_net,
    random_seed, ticks, ticks_to_instant, wait_until, wakes_on_frames,
};

extern "Rust" {
    /// The kernel above the platform (`main.rs`), entered once the platform's own boot
    /// is done; like Solo5's `solo5_app_main`, a symbol, so that this layer names
    /// nothing above it.
    fn vtnt_kernel_start(cmdline: &'static [u8]) -> !;
}

/// Enters the kernel with its command line (each platform's entry calls this last).
pub fn start(cmdline: &'static [u8]) -> ! {
    // SAFETY: `main.rs` defines the symbol with exactly this signature.
    unsafe { vtnt_kernel_start(cmdline) }
}

/// Prints the banner: the kernel, the platform's boot protocol and the command line.
pub fn banner(protocol: &str, version: u32, cmdline: &[u8]) {
    crate::println!(
        "vtnt-kernel {} booting ({} v{}, cmdline \"{}\")",
        env!("CARGO_PKG_VERSION"),
        protocol,
        version,
        console::JsonStr(core::str::from_utf8(cmdline).unwrap_or("<not utf-8>"))
    );
}

/// Why a frame could not be handed to the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// No room now (all buffers in flight, the socket's queue full): retry later.
    Busy,
    /// The link refused the frame for good.
    #[cfg_attr(feature = "spt", allow(dead_code))]
    Invalid,
}

/// A received frame, lent with its buffer: `buf[at.0..at.0 + at.1]`, received at `t`.
pub struct Received {
    pub at: (usize, usize),
    pub t: Instant,
    pub buf: Box<[u8]>,
}

/// A network link that carries Ethernet frames (virtio-net, the monitor's hypercalls, a
/// datagram socket). The interface (`crate::net::Nic`) does the rest.
pub trait Link {
    /// The link's MAC address.
    fn mac(&self) -> [u8; 6];
    /// A transmit buffer and where the frame starts in it (after a device header).
    fn tx_take(&mut self) -> Result<(Box<[u8]>, usize), LinkError>;
    /// Sends the first `len` bytes of `buf` (from [`Link::tx_take`]).
    fn tx_give(&mut self, buf: Box<[u8]>, len: usize) -> Result<(), LinkError>;
    /// The next received frame, if one is waiting.
    fn next_frame(&mut self) -> Option<Received>;
    /// Takes back the buffer [`Link::next_frame`] lent; false if it had to be dropped.
    fn frame_done(&mut self, buf: Box<[u8]>) -> bool;
    /// What the link is, for the console (`virtio-pci 00:02.0`, `monitor`, `fd 3`).
    fn location(&self) -> &dyn core::fmt::Display;
}

/// Waits until `until` (the job's `hold`).
pub fn sleep_until(until: Instant) {
    while now() < until {
        wait_until(until);
    }
}
