//! The Linux driver: where a sans-IO prober meets real packets.
//!
//! [`RawSockets`] sends the prober's complete IPv4 packets through an `IPPROTO_RAW` socket
//! that has the kernel stamp each one as the device driver takes it (`SO_TIMESTAMPING`,
//! see [`RawSockets::recv_tx_stamps`]), and receives ICMP and TCP through raw sockets with kernel receive
//! timestamps (`SO_TIMESTAMPNS`), so RTTs include neither this process's scheduling
//! delay nor time a probe spent in a full send queue. Every time the prober sees is on
//! one monotonic [`Clock`], kernel stamps included.
//! [`run`] is the single-threaded event loop: it hands the prober the time, the transmit
//! stamps and every received packet, sends what it asks to send, and sleeps (with
//! `ppoll`, microsecond resolution) until the prober's next deadline or the next packet;
//! [`run_until`] also stops when a flag is set (the CLI sets it on SIGINT and SIGTERM).
//!
//! The prober is anything implementing [`Prober`] (vtnt-engine's driver-facing trait): the
//! plain engine or TNT's runner.
//!
//! [`capture`] is an AF_PACKET receive ring with kernel stamps (the benchmarks' wire
//! capture); [`host_stamps`] runs one on the host's end of a runtime's veth and pairs
//! its probes and replies for RTT correction (`vtnt-mace`).

// `capture` maps an AF_PACKET receive ring and makes the socket calls nix lacks, each
// `unsafe` block with its SAFETY note; the rest of the crate has no unsafe code.
#[allow(unsafe_code)]
pub mod capture;
mod clock;
mod event_loop;
mod host;
pub mod host_stamps;
mod route;
mod route6;
mod sockets;
mod sockets6;
mod tx_stamps;

pub use clock::{Clock, KernelStamps};
pub use event_loop::{run, run_until, run_watched, LoopStats};
pub use host::is_root;
pub use route::{
    interface_mtu, lab_access, own_addresses, own_links, route_source, route_source_ip,
    RouteSources,
};
pub use sockets::{RawSockets, Sent};
pub use vtnt_engine::Prober;
pub use vtnt_record::Instant;

/// What can go wrong driving a prober on Linux.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Raw sockets need root or the CAP_NET_RAW capability.
    #[error("raw sockets need root or CAP_NET_RAW (opening a raw {what} socket: {source})")]
    Privilege {
        what: &'static str,
        source: nix::Error,
    },
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Socket {
        what: &'static str,
        source: nix::Error,
    },
    /// The output callback failed.
    #[error("writing results: {0}")]
    Output(#[from] std::io::Error),
}
