//! [`Prober`]: the driver-facing shape shared by the engine and everything built on it
//! (TNT's runner), so one driver loop (Linux sockets, the unikernel's NIC, the lab's
//! in-process network) runs any of them.

use crate::{Engine, Event, Instant};

/// What a driver needs from a sans-IO prober. Call order per wake-up: `handle_transmitted`
/// for every transmit timestamp the driver has learnt, then `handle_packet` for every
/// received packet (stamps first, so a reply finds its probe's real transmit time),
/// `handle_timeout`, then `poll_transmit` until `None` (with `handle_send_error` for each
/// packet that could not be sent), then `poll_output` until `None`; sleep until
/// `poll_timeout` or the next packet; stop when `is_idle`. A driver that knows the
/// transmit time as soon as the packet is sent (the unikernel) reports it right then.
///
/// Time: the `now` of `handle_timeout`, `poll_transmit` and `handle_send_error` never
/// goes backwards. Receive and transmit timestamps are past times of events, on the
/// same clock as `now` but usually older than the latest `now`.
pub trait Prober {
    /// What the prober hands out when a measurement finishes.
    type Output;
    /// A received IPv4 packet and the time it arrived.
    fn handle_packet(&mut self, now: Instant, packet: &[u8]);
    /// `packet` (from `poll_transmit`, or its first [`crate::PROBE_ID_LEN`] bytes) left at
    /// `at`. A driver need not call it: a probe's transmit time is then the `now` it was
    /// handed out at. See [`Engine::handle_transmitted`].
    fn handle_transmitted(&mut self, at: Instant, packet: &[u8]);
    /// The driver could not send `packet` (from `poll_transmit`); the OS said `errno`.
    /// Call it in place of sending, before the next `poll_transmit`.
    fn handle_send_error(&mut self, now: Instant, packet: &[u8], errno: i32);
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

impl Prober for Engine {
    type Output = Event;
    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        Engine::handle_packet(self, now, packet)
    }
    fn handle_transmitted(&mut self, at: Instant, packet: &[u8]) {
        Engine::handle_transmitted(self, at, packet)
    }
    fn handle_send_error(&mut self, now: Instant, packet: &[u8], errno: i32) {
        Engine::handle_send_error(self, now, packet, errno)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Engine::handle_timeout(self, now)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        Engine::poll_transmit(self, now, buf).map(|t| t.len)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Engine::poll_timeout(self)
    }
    fn poll_output(&mut self) -> Option<Event> {
        Engine::poll_event(self)
    }
    fn is_idle(&self) -> bool {
        Engine::is_idle(self)
    }
}
