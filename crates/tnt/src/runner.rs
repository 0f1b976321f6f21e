//! [`TntRunner`]: a [`Tnt`] campaign on top of an [`Engine`], with the engine's driver
//! API, so the Linux driver, the unikernel and the lab's virtual-clock driver run TNT
//! exactly as they run plain measurements.
//!
//! Call order (the engine's, plus `poll_result`):
//!
//! ```text
//! runner.add_target(dst);                          // any number of times, at any time
//! loop {
//!     while let Some(tx) = runner.poll_transmit(now, &mut buf) { send(&buf[..tx.len]) }
//!     while let Some(r) = runner.poll_result() { output(r) }
//!     if runner.is_idle() { break }
//!     sleep until runner.poll_timeout() or a packet arrives; now = clock();
//!     for each transmit timestamp: runner.handle_transmitted(tx_time, probe);  // optional
//!     for each received IPv4 packet: runner.handle_packet(rx_time, packet);
//!     runner.handle_timeout(now);
//! }
//! ```
//!
//! Measurements TNT hands out are started on the engine at the next call that carries a `now`;
//! the engine queues what exceeds its `max_active` and paces probes to its pps budget.

use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_engine::{Engine, Event, Instant, Stats, Trace, Transmit};
use vtnt_record::Ping;

use crate::maps::Dense;
use crate::orchestrator::{MeasurementTag, Tnt};
use crate::output::{Summary, TntResult};

/// [`Tnt`] and the engine that runs its measurements.
#[derive(Debug)]
pub struct TntRunner {
    engine: Engine,
    tnt: Tnt,
    /// The tag of each engine measurement, by its id (handed out in order).
    ids: Dense<MeasurementTag>,
}

impl TntRunner {
    /// Couples a configured engine and campaign.
    pub fn new(engine: Engine, tnt: Tnt) -> TntRunner {
        TntRunner {
            engine,
            tnt,
            ids: Dense::new(),
        }
    }

    /// Adds a target; its trace starts at the next call that carries a `now`.
    /// Ready for another round of the same targets (a held measurement's next): the engine
    /// rewound ([`Engine::rewind`]), so traces take the flows they took before; what TNT
    /// has learnt is kept, so no address is fingerprinted twice. False while it runs.
    pub fn rewind(&mut self) -> bool {
        self.engine.rewind()
    }

    pub fn add_target(&mut self, dst: IpAddr) {
        self.tnt.add_target(dst);
    }

    /// Adds an existing trace as a target's initial trace.
    pub fn add_seed_trace(&mut self, trace: Trace) {
        self.tnt.add_seed_trace(trace);
    }

    /// Feeds an existing fingerprint ping ([`Tnt::add_ping`]).
    pub fn add_ping(&mut self, ping: &Ping) {
        self.tnt.add_ping(ping);
    }

    /// Feeds an existing revelation trace ([`Tnt::add_revelation_trace`]).
    pub fn add_revelation_trace(&mut self, anchor: IpAddr, egress: IpAddr, trace: Trace) {
        self.tnt.add_revelation_trace(anchor, egress, trace);
    }

    /// Feeds one received IPv4 packet.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.engine.handle_packet(now, packet);
        self.pump(now);
    }

    /// `probe` left at `at` (see [`Engine::handle_transmitted`]). It changes no
    /// schedule, so TNT has nothing to move.
    pub fn handle_transmitted(&mut self, at: Instant, probe: &[u8]) {
        self.engine.handle_transmitted(at, probe);
    }

    /// The driver could not send `probe` (see [`Engine::handle_send_error`]).
    pub fn handle_send_error(&mut self, now: Instant, probe: &[u8], errno: i32) {
        self.engine.handle_send_error(now, probe, errno);
        self.pump(now);
    }

    /// Handles every deadline up to `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        self.pump(now);
    }

    /// The next probe to send, written into `buf`; call until `None`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.pump(now);
        let tx = self.engine.poll_transmit(now, buf);
        if tx.is_none() {
            // A measurement may have ended on a deadline handled inside poll_transmit.
            self.pump(now);
        }
        tx
    }

    /// When to call [`TntRunner::handle_timeout`] or [`TntRunner::poll_transmit`] next;
    /// [`Instant::ZERO`] (in the past) when TNT has measurements the engine has not started yet.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.tnt.has_ready_jobs() {
            return Some(Instant::ZERO);
        }
        self.engine.poll_timeout()
    }

    /// The next finished target.
    #[must_use]
    pub fn poll_result(&mut self) -> Option<TntResult> {
        self.tnt.poll_result()
    }

    /// Nothing left to run and every result taken.
    pub fn is_idle(&self) -> bool {
        self.engine.is_idle() && self.tnt.is_idle()
    }

    /// The engine's counters.
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }

    /// For a campaign stopped early: the targets whose revelation had not ended, as far
    /// as they went ([`Tnt::take_unfinished`]).
    pub fn take_unfinished(&mut self) -> Vec<TntResult> {
        self.tnt.take_unfinished()
    }

    /// The campaign's counts.
    pub fn summary(&self) -> Summary {
        self.tnt.summary()
    }

    pub fn tnt(&self) -> &Tnt {
        &self.tnt
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Moves finished records to TNT and TNT's new measurements to the engine until both rest.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            while let Some(Event::Finished { id, record }) = self.engine.poll_event() {
                moved = true;
                if let Some(tag) = self.ids.remove(id.0) {
                    self.tnt.handle_record(tag, record);
                }
            }
            while let Some((tag, measurement)) = self.tnt.poll_measurement() {
                moved = true;
                match self.engine.start(now, measurement) {
                    Ok(id) => {
                        self.ids.insert(id.0, tag);
                    }
                    Err(e) => self.tnt.handle_measurement_error(tag, e),
                }
            }
            if !moved {
                return;
            }
        }
    }
}

impl vtnt_engine::Prober for TntRunner {
    type Output = TntResult;
    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        TntRunner::handle_packet(self, now, packet)
    }
    fn handle_transmitted(&mut self, at: Instant, packet: &[u8]) {
        TntRunner::handle_transmitted(self, at, packet)
    }
    fn handle_send_error(&mut self, now: Instant, packet: &[u8], errno: i32) {
        TntRunner::handle_send_error(self, now, packet, errno)
    }
    fn handle_timeout(&mut self, now: Instant) {
        TntRunner::handle_timeout(self, now)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        TntRunner::poll_transmit(self, now, buf).map(|t| t.len)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        TntRunner::poll_timeout(self)
    }
    fn poll_output(&mut self) -> Option<TntResult> {
        TntRunner::poll_result(self)
    }
    fn is_idle(&self) -> bool {
        TntRunner::is_idle(self)
    }
}
