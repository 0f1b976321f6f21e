//! The sans-IO probing engine: traceroute (Paris ICMP, Paris UDP, TCP SYN) and ping, many
//! measurements at once under one packets-per-second budget, replies matched to probes by
//! what they quote.
//!
//! The engine never reads a clock, opens a socket or spawns a thread. A driver (Linux
//! raw sockets, the unikernel's virtio NIC, the lab's in-process network) runs it, in
//! this order:
//!
//! ```text
//! let mut engine = Engine::new(Config::new(src))?;
//! engine.start(now, measurement)?;                       // any number of times, at any time
//! loop {
//!     while let Some(tx) = engine.poll_transmit(now, &mut buf) { send(&buf[..tx.len]) }
//!     while let Some(ev) = engine.poll_event() { output(ev) }
//!     if engine.is_idle() { break }
//!     sleep until engine.poll_timeout() or a packet arrives; now = clock();
//!     for each transmit timestamp: engine.handle_transmitted(tx_time, probe);  // optional
//!     for each received IPv4 packet: engine.handle_packet(rx_time, packet);
//!     engine.handle_timeout(now);
//! }
//! ```
//!
//! The `now` given to `start`, `handle_timeout` and `poll_transmit` should not go
//! backwards. Receive and transmit times are the past times of events, on the same clock
//! and usually older than the last `now`: a packet's receive time (a kernel timestamp of
//! a packet read late) dates the reply, a probe's transmit time (when it actually left:
//! a kernel transmit timestamp, the moment a NIC took the frame) dates the probe, while
//! the engine keeps scheduling on the latest `now` it was given. A probe's RTT is its
//! reply's receive time minus its transmit time; a driver that reports no transmit time
//! leaves it at the `now` the probe was handed out at. `poll_transmit` handles due
//! deadlines itself, so a driver that only calls it and `handle_packet` still works;
//! `handle_timeout` is for wake-ups with nothing to send (a finished measurement's event
//! appears after it).
//! Buffers handed to `poll_transmit` should hold [`MAX_PROBE_SIZE`] bytes; a probe that
//! does not fit ends its measurement with `StopReason::Error`.
//!
//! ```
//! use vtnt_engine::{Config, Engine, Event, Instant, Measurement, Record, TraceOptions};
//! let src = "192.0.2.1".parse().unwrap();
//! let mut engine = Engine::new(Config::new(src)).unwrap();
//! let mut opts = TraceOptions::new("203.0.113.7".parse().unwrap());
//! opts.gaplimit = 1;
//! opts.attempts = 1;
//! let now = Instant::from_millis(1000);
//! let id = engine.start(now, Measurement::Trace(opts)).unwrap();
//! let mut buf = [0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
//! let tx = engine.poll_transmit(now, &mut buf).unwrap();
//! assert_eq!((tx.id, tx.len), (id, 44));
//! // Nobody answers: after the 5 s wait the gap limit of 1 ends the trace.
//! let later = engine.poll_timeout().unwrap();
//! engine.handle_timeout(later);
//! let Some(Event::Finished { record: Record::Trace(t), .. }) = engine.poll_event() else {
//!     panic!()
//! };
//! assert_eq!(t.stop_reason.name(), "GAPLIMIT");
//! assert!(engine.is_idle());
//! ```
#![no_std]
extern crate alloc;

mod config;
mod engine;
mod flow;
mod measurement;
mod pacer;
mod ping;
mod pmtud;
mod probe;
mod prober;
mod timers;
mod trace;

pub use config::{Config, ConfigError};
pub use engine::{Engine, Event, MeasurementId, SourceLookup, Stats, Stranded, Transmit};
pub use flow::Addr as ProbeAddr;
/// Whether this build probes IPv6 destinations (feature `ipv6-probe`): code that only
/// matters for them folds away where it is off (the unikernel's image).
pub const PROBES_IPV6: bool = cfg!(feature = "ipv6-probe");
pub use measurement::{
    Measurement, MeasurementError, NoSource, PingOptions, TraceOptions, MAX_PROBE_SIZE,
};
pub use probe::PROBE_ID_LEN;
pub use prober::Prober;
pub use vtnt_policy as policy;
pub use vtnt_policy::{LabAccess, Policy, Refusal};
pub use vtnt_record::{
    Duration, Hop, Instant, Method, MplsLabel, Ping, PingReply, ProbeData, Quoted, Record,
    StopReason, Trace,
};
