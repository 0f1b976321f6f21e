//! The Linux driver: where a sans-IO prober meets real packets.
//!
//! [`RawSockets`] sends the prober's complete IPv4 packets through an `IPPROTO_RAW` socket
//! and receives ICMP and TCP through raw sockets with kernel receive timestamps
//! (`SO_TIMESTAMPNS`), so RTTs do not include this process's scheduling delay.
//! [`run`] is the single-threaded event loop: it hands the prober the time and every
//! received packet, sends what it asks to send, and sleeps (with `ppoll`, microsecond
//! resolution) until the prober's next deadline or the next packet.
//!
//! The prober is anything implementing [`Prober`]: the plain engine or TNT.

mod clock;
mod event_loop;
mod sockets;

pub use clock::Clock;
pub use event_loop::{run, LoopStats};
pub use sockets::RawSockets;
pub use vtnt_record::Instant;

/// What the event loop needs from a prober (the engine's and TNT's driver-facing API).
pub trait Prober {
    /// What the prober hands out when a measurement finishes.
    type Output;
    /// A received IPv4 packet and the time it arrived.
    fn handle_packet(&mut self, now: Instant, packet: &[u8]);
    /// Lets the prober act on deadlines that have passed.
    fn handle_timeout(&mut self, now: Instant);
    /// Writes the next IPv4 packet to send into `buf` and returns its length.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    /// The next time the prober wants to be called, if any.
    fn poll_timeout(&self) -> Option<Instant>;
    /// A finished measurement.
    fn poll_output(&mut self) -> Option<Self::Output>;
    /// Nothing left to do.
    fn is_idle(&self) -> bool;
}

/// What can go wrong driving a prober on Linux.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Raw sockets need root or the CAP_NET_RAW capability.
    #[error("raw sockets need root or CAP_NET_RAW (opening a raw {what} socket: {source})")]
    Privilege { what: &'static str, source: nix::Error },
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Socket { what: &'static str, source: nix::Error },
    /// The output callback failed.
    #[error("writing results: {0}")]
    Output(#[from] std::io::Error),
}

impl Prober for vtnt_engine::Engine {
    type Output = vtnt_engine::Event;
    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        vtnt_engine::Engine::handle_packet(self, now, packet)
    }
    fn handle_timeout(&mut self, now: Instant) {
        vtnt_engine::Engine::handle_timeout(self, now)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        vtnt_engine::Engine::poll_transmit(self, now, buf).map(|t| t.len)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        vtnt_engine::Engine::poll_timeout(self)
    }
    fn poll_output(&mut self) -> Option<Self::Output> {
        vtnt_engine::Engine::poll_event(self)
    }
    fn is_idle(&self) -> bool {
        vtnt_engine::Engine::is_idle(self)
    }
}
