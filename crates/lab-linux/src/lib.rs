//! Linux fronts for the lab and the machinery behind `vtnt lab`.
//!
//! - [`daemon`]: `vtnt lab serve`, the emulator on a real clock behind a TUN device in
//!   a network namespace and a UDP socket speaking Ethernet frames with QEMU VMs;
//! - [`changes`]: `vtnt lab change`, the daemon's control socket and the changes log;
//! - [`bgp`]: `vtnt lab up --bgp`, the lab's BGP speaker (BIRD) and the vantage point's
//!   border router, the lab announcing the destinations it reaches after every change;
//! - [`control`]: `up` (re-exec of `vtnt lab serve` detached, wait until the lab
//!   answers), `down`, `status`, `exec`, the running topology, the VM attach contract;
//! - [`vm`]: ARP, neighbour discovery and frame handling of the VM front (pure logic);
//! - [`dhcp`]: the VM front's DHCPv4 server (pure logic);
//! - [`ndp`]: the VM front's IPv6 neighbour discovery (pure logic);
//! - [`state`]: the state directory `/run/vtnt/lab/<name>/` and its files;
//! - [`bench`]: packets per second of the core and through the TUN;
//! - `netns`, [`sys`]: iproute2 and the few raw kernel calls (TUN ioctl, setns, setsid,
//!   raw sockets), the only `unsafe` code, each block with its SAFETY comment;
//!   [`open_tap`] (an existing TAP device in a namespace) serves `vtnt-runtimes`' spt
//!   guests too, the stop signals, `poll` and raw sockets `vtnt-forward-linux`'s front.
//!
//! The front onto a real network (`vtnt lab serve-front`) is `vtnt-forward-linux`, beside
//! the forwarder it drives; it reuses [`vm::VmFront`] and the [`state`] files from here,
//! and [`control::front_up`] starts it like a lab.
//!
//! Lab addresses exist only inside the namespace the lab creates: the TUN, its address
//! and its routes are all made there; the VM front listens on 127.0.0.1 only.

pub mod bench;
pub mod bgp;
pub mod changes;
pub mod control;
pub mod daemon;
pub mod dhcp;
pub mod dhcp6;
pub mod ndp;
mod netns;
pub mod state;
pub mod sys;
pub mod vm;

pub use changes::{change, ChangeRecord};
pub use control::{
    bgp_state, down, exec, front_up, lab_state, running_topology, status, up, vm_info,
    FrontSettings, FrontUpOptions, Status, UpOptions,
};
pub use daemon::{serve, ServeOptions};
pub use state::{LabState, VmInfo};
pub use sys::open_tap;

/// The lab's name (its namespace and state directory) when none is given.
pub const DEFAULT_NAME: &str = "vtnt-lab";

/// What went wrong; the message says what and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Topology(#[from] vtnt_lab::TopologyError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Msg(String),
}

impl Error {
    pub fn msg(m: impl Into<String>) -> Error {
        Error::Msg(m.into())
    }
}
