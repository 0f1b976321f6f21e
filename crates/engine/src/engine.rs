//! The [`Engine`]: runs many traces and pings at once under one probe budget.
//!
//! Internals: each running measurement sits in a slot and wants, at any moment, one of
//! three things ([`Wake`]): to send a probe now (it is then in the FIFO `ready` queue,
//! which gives round-robin among measurements with a probe due), a call back at an
//! instant (its one timer in [`Timers`]: a reply deadline, a `wait_probe` gap or a ping
//! interval), or to be collected (its record becomes an [`Event`]). Replies find
//! their slot through the flow key map (see [`crate::flow`]). Wishes are read on the
//! engine's own clock, the latest time any call gave: a reply's older receive time dates
//! the reply but never makes a queued probe look not yet due (which once left it in
//! neither the queue nor the timers, and the engine never idle). [`Engine::check`]
//! verifies that every slot is in one of the two.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_record::{Method, Record, StopReason};
use vtnt_wire::reply;

use crate::config::{Config, ConfigError};
use crate::flow::{self, Addr, Flow, FlowKey, IdPool, MapKey, Vary};
use crate::pacer::Pacer;
use crate::ping::PingState;
use crate::probe;
use crate::timers::Timers;
use crate::trace::{Outcome, TraceState, Wake};
use crate::{Instant, Measurement, MeasurementError, NoSource};
use vtnt_rng::Rng;

/// The driver's source address for a destination: the one its route gives, as the kernel
/// would choose it ([`Engine::set_source_lookup`]).
pub type SourceLookup = Box<dyn FnMut(Addr) -> Result<Addr, NoSource> + Send>;

/// Where probes leave from: [`Config::src`], or the driver's lookup per destination.
#[derive(Default)]
struct Sources {
    lookup: Option<SourceLookup>,
}

impl core::fmt::Debug for Sources {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self.lookup {
            Some(_) => "Sources(per destination)",
            None => "Sources(config.src)",
        })
    }
}

/// Names one measurement from [`Engine::start`] to its [`Event::Finished`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MeasurementId(pub u64);

/// A probe to send: an IPv4 packet at `buf[..len]` of the buffer given to
/// [`Engine::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub len: usize,
    pub dst: IpAddr,
    /// The measurement that sent it.
    pub id: MeasurementId,
}

/// Something the engine reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A measurement is over; here is its record.
    Finished { id: MeasurementId, record: Record },
}

/// Counters since the engine was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Probes handed out by [`Engine::poll_transmit`].
    pub probes_sent: u64,
    /// Packets matched to a probe of a running measurement (duplicates included).
    pub replies: u64,
    /// Packets that matched nothing (unparsable, foreign, late after the end).
    pub unmatched: u64,
    /// Probes the driver could not send ([`Engine::handle_send_error`]).
    pub send_errors: u64,
    /// Transmit timestamps ([`Engine::handle_transmitted`]) that re-dated a probe.
    pub tx_stamps: u64,
}

#[derive(Debug)]
enum Active {
    Trace(TraceState),
    Ping(PingState),
}

impl Active {
    fn wake(&self, now: Instant) -> Wake {
        match self {
            Active::Trace(t) => t.wake(now),
            Active::Ping(p) => p.wake(now),
        }
    }
}

#[derive(Debug)]
struct Slot {
    id: MeasurementId,
    key: FlowKey,
    /// The key's id came from the pool (give it back at the end).
    pooled: bool,
    /// An entry for this slot is in `ready`.
    in_ready: bool,
    run: Active,
}

/// What [`Engine::check`] found wrong: a slot index and a description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stranded {
    pub slot: usize,
    pub what: &'static str,
}

impl core::fmt::Display for Stranded {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "engine slot {}: {}", self.slot, self.what)
    }
}

impl core::error::Error for Stranded {}

/// The sans-IO prober. See the crate documentation for the driver loop.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    pacer: Pacer,
    rng: Rng,
    pool: IdPool,
    /// Carried by every probe: see [`flow::instance_tag`].
    tag: u16,
    next_id: u64,
    /// Measurements waiting to start, each with its source address.
    queue: VecDeque<(MeasurementId, Measurement, Addr)>,
    sources: Sources,
    slots: Vec<Option<Slot>>,
    free_slots: Vec<usize>,
    active: usize,
    /// Each running measurement's slot, by its flow ([`FlowKey::map_key`]).
    keys: BTreeMap<MapKey, usize>,
    ready: VecDeque<usize>,
    /// Each slot's timer, by slot index.
    timers: Timers,
    events: VecDeque<Event>,
    stats: Stats,
    /// The latest time any call gave: the scheduling clock, which never goes backwards
    /// even when a driver hands in a receive time older than an earlier call's `now`.
    now: Instant,
}

impl Engine {
    /// An engine with nothing to do yet.
    pub fn new(config: Config) -> Result<Engine, ConfigError> {
        config.validate()?;
        let mut rng = Rng::new(config.seed);
        let pool = IdPool::new(&mut rng);
        let tag = flow::instance_tag(config.seed);
        Ok(Engine {
            pacer: Pacer::new(config.pps, config.burst),
            config,
            rng,
            pool,
            tag,
            next_id: 0,
            queue: VecDeque::new(),
            sources: Sources::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            active: 0,
            keys: BTreeMap::new(),
            ready: VecDeque::new(),
            timers: Timers::default(),
            events: VecDeque::new(),
            stats: Stats::default(),
            now: Instant::ZERO,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// From now on each measurement's source address is what `lookup` says for its
    /// destination (a driver's route lookup: the route's own source, as the kernel would
    /// choose it), not [`Config::src`]: one run may probe loopback from 127.0.0.1 and the
    /// lab from its vantage point's address. A destination `lookup` finds no source for
    /// is refused by [`Engine::start`] ([`MeasurementError::NoSource`]).
    pub fn set_source_lookup(&mut self, lookup: SourceLookup) {
        self.sources.lookup = Some(lookup);
    }

    /// The source address of probes to `dst`.
    fn source_for(&mut self, dst: IpAddr) -> Result<Addr, MeasurementError> {
        let dst = flow::probe_addr(dst).ok_or(MeasurementError::Ipv6Unsupported)?;
        let src = match &mut self.sources.lookup {
            Some(lookup) => lookup(dst).map_err(|why| MeasurementError::NoSource(dst, why))?,
            None => flow::from_v4(self.config.src),
        };
        #[cfg(feature = "ipv6-probe")]
        if src.is_ipv4() != dst.is_ipv4() {
            let why = NoSource("the source address is of the other family");
            return Err(MeasurementError::NoSource(dst, why));
        }
        Ok(src)
    }

    /// Back to the probe identities and pacing of a new engine of the same configuration,
    /// so that measurements started again probe exactly as they did the first time (a held measurement's
    /// next round) without building a new engine; buffers and statistics are kept. Only
    /// an idle engine rewinds: false, and nothing changed, while measurements run.
    pub fn rewind(&mut self) -> bool {
        if !self.is_idle() {
            return false;
        }
        let mut rng = Rng::new(self.config.seed);
        self.pool.reseed(&mut rng);
        self.rng = rng;
        self.next_id = 0;
        self.pacer = Pacer::new(self.config.pps, self.config.burst);
        true
    }

    /// Validates `measurement` and queues it; it starts probing at once if fewer than
    /// `max_active` measurements run, else when earlier measurements finish (FIFO).
    pub fn start(
        &mut self,
        now: Instant,
        measurement: Measurement,
    ) -> Result<MeasurementId, MeasurementError> {
        measurement.validate()?;
        if let Measurement::Trace(t) = &measurement {
            if t.pmtud && (t.if_mtu == 0 || cfg!(not(feature = "pmtud"))) {
                return Err(MeasurementError::OutOfRange {
                    option: "pmtud",
                    range:
                        "only where the driver gives the interface MTU (if_mtu; the Linux driver)",
                });
            }
        }
        self.config
            .policy
            .check_target(measurement.dst(), self.config.pps)
            .map_err(MeasurementError::Refused)?;
        let src = self.source_for(measurement.dst())?;
        let now = self.tick(now);
        let id = MeasurementId(self.next_id);
        self.next_id += 1;
        self.queue.push_back((id, measurement, src));
        self.activate(now);
        Ok(id)
    }

    /// Feeds one received IPv4 packet (starting at the IP header), received at `rx`.
    /// Never panics, whatever the bytes; packets that answer no probe are counted in
    /// [`Stats::unmatched`]. `rx` may be older than the `now` of earlier calls (a kernel
    /// receive timestamp of a packet read late): it only dates the reply.
    pub fn handle_packet(&mut self, rx: Instant, ipv4_packet: &[u8]) {
        let now = self.tick(rx);
        self.advance(now);
        match self.dispatch(rx, ipv4_packet) {
            Some(i) => {
                self.stats.replies += 1;
                self.reschedule(i, now);
                self.tidy_ready(now);
            }
            None => self.stats.unmatched += 1,
        }
    }

    /// Tells the engine that the driver could not send `probe` (a packet from
    /// [`Engine::poll_transmit`], or its first [`crate::PROBE_ID_LEN`] bytes) at `now`:
    /// the OS said `errno`. A trace stops with `StopReason::Error` (stop data: `errno`, as
    /// scamper), a ping ends; neither counts the probe as sent. Counted in
    /// [`Stats::send_errors`]; a packet that is not a probe of a running measurement is
    /// ignored.
    pub fn handle_send_error(&mut self, now: Instant, probe: &[u8], errno: i32) {
        let now = self.tick(now);
        self.advance(now);
        self.stats.send_errors += 1;
        let Some((i, number)) = self.sent_slot(probe) else {
            return;
        };
        let Some(slot) = self.slots[i].as_mut() else {
            return;
        };
        match &mut slot.run {
            Active::Trace(t) => t.unsent(number, errno),
            Active::Ping(p) => p.unsent(number, now),
        }
        self.reschedule(i, now);
        self.tidy_ready(now);
    }

    /// Tells the engine when `probe` (a packet from [`Engine::poll_transmit`], or its
    /// first [`crate::PROBE_ID_LEN`] bytes) actually left: `at`, the driver's transmit
    /// timestamp (the kernel's, or the moment the NIC took the frame). Without it a
    /// probe's transmit time is the `now` it was handed out at, which a driver that holds
    /// probes back (a full send queue) makes too early.
    ///
    /// The probe's transmit time becomes `at`, and the RTT of a reply already recorded
    /// for it becomes its arrival time minus `at`: a report may come before or after the
    /// reply. Like a receive time, `at` is the past time of an event, usually older than
    /// the latest `now`; it does not move the engine's clock and changes no schedule
    /// (reply deadlines, probe gaps and ping intervals run from the hand-over time).
    /// Ignored, and not counted in [`Stats::tx_stamps`]: a report for no probe of a
    /// running measurement (finished, never sent, not ours), and one that cannot be this
    /// probe's: earlier than its hand-over time or an earlier report (no probe leaves
    /// before it is handed out, so a stale stamp, or one of an earlier measurement's
    /// identical probe, re-dates nothing), or later than a reply to it.
    pub fn handle_transmitted(&mut self, at: Instant, probe: &[u8]) {
        let Some((i, number)) = self.sent_slot(probe) else {
            return;
        };
        let taken = match self.slots[i].as_mut().map(|s| &mut s.run) {
            Some(Active::Trace(t)) => t.transmitted(number, at),
            Some(Active::Ping(p)) => p.transmitted(number, at),
            None => false,
        };
        self.stats.tx_stamps += u64::from(taken);
    }

    /// The slot of the running measurement that sent `probe`, and the probe's number.
    fn sent_slot(&self, probe: &[u8]) -> Option<(usize, u16)> {
        let (key, number) = probe::sent_probe(probe, self.tag)?;
        let i = *self.keys.get(&key.map_key())?;
        // an ICMPv6 echo request carries its number in its sequence number, offset by
        // its flow (an IPv4 one's comes from its IP ID)
        #[cfg(feature = "ipv6-probe")]
        if key.proto == vtnt_wire::proto::ICMP && key.dst.is_ipv6() {
            let offset = match &self.slots.get(i)?.as_ref()?.run {
                Active::Trace(t) => t.flow().vary.seq_offset,
                Active::Ping(p) => p.flow().vary.seq_offset,
            };
            return Some((i, number.wrapping_sub(offset)));
        }
        Some((i, number))
    }

    /// Hands the packet received at `rx` to the measurement it answers; returns that slot.
    fn dispatch(&mut self, rx: Instant, packet: &[u8]) -> Option<usize> {
        let r = reply::parse(packet).ok()?;
        let i = *self.keys.get(&probe::flow_key(&r)?.map_key())?;
        let outcome = match &mut self.slots.get_mut(i)?.as_mut()?.run {
            Active::Trace(t) => t.on_reply(rx, &r),
            Active::Ping(p) => p.on_reply(rx, &r),
        };
        (outcome != Outcome::Unmatched).then_some(i)
    }
    /// Handles every deadline up to `now` (reply timeouts, probe gaps, ping ends).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.tick(now);
        self.advance(now);
        self.tidy_ready(now);
    }

    /// The next probe to send, written into `buf` (which should hold
    /// [`crate::MAX_PROBE_SIZE`] bytes), if one is due and the pacer allows it. Call
    /// until it returns `None`. Deadlines up to `now` are handled first.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let now = self.tick(now);
        self.advance(now);
        loop {
            let &i = self.ready.front()?;
            let due = self.slots[i]
                .as_ref()
                .is_some_and(|s| s.run.wake(now) == Wake::Send);
            if !due {
                self.unqueue_front(now);
                continue;
            }
            if !self.pacer.allows(now) {
                return None;
            }
            self.ready.pop_front();
            let Some(slot) = self.slots[i].as_mut() else {
                continue;
            };
            slot.in_ready = false;
            let built = match &mut slot.run {
                Active::Trace(t) => t.build(now, buf),
                Active::Ping(p) => p.build(now, buf),
            };
            let (id, dst) = (slot.id, slot.key.dst);
            match built {
                Ok(len) => {
                    self.pacer.consume(now);
                    self.stats.probes_sent += 1;
                    self.reschedule(i, now);
                    self.tidy_ready(now);
                    return Some(Transmit {
                        len,
                        dst: flow::ip(dst),
                        id,
                    });
                }
                Err(_) => {
                    // The buffer is too small for the probe: end with an error.
                    match &mut slot.run {
                        Active::Trace(t) => t.halt(StopReason::Error),
                        Active::Ping(p) => p.halt(StopReason::Error, now),
                    }
                    self.reschedule(i, now);
                }
            }
        }
    }

    /// When the engine next needs [`Engine::handle_timeout`] or
    /// [`Engine::poll_transmit`]: the earliest reply deadline or probe gap, or, when a
    /// probe is due, the pacer's next send time (possibly in the past: send now).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.timers.first();
        // With several probes waiting, wake when the pacer lets them all go at once (up to
        // its burst) rather than once per token: same rate, fewer wakeups.
        let send = (!self.ready.is_empty()).then(|| self.pacer.next_batch(self.ready.len()));
        match (timer, send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Stops every measurement now, as scamper's `halt` does: each one probing ends with
    /// what it has (a trace with stop reason HALTED) and is handed out by
    /// [`Engine::poll_event`]; those still queued are dropped, never started.
    pub fn halt(&mut self, now: Instant) {
        self.queue.clear();
        for i in 0..self.slots.len() {
            if let Some(slot) = self.slots[i].as_mut() {
                match &mut slot.run {
                    Active::Trace(t) => t.halt(StopReason::Halted),
                    Active::Ping(p) => p.halt(StopReason::Halted, now),
                }
                self.reschedule(i, now);
            }
        }
    }

    /// The next finished measurement, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Nothing running, nothing queued and every event collected.
    pub fn is_idle(&self) -> bool {
        self.active == 0 && self.queue.is_empty() && self.events.is_empty()
    }

    /// Measurements probing now.
    pub fn active(&self) -> usize {
        self.active
    }

    /// Measurements waiting for a free place.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Checks the scheduler's bookkeeping: every running measurement waits on a timer or
    /// in the send queue, and the queue and the timers name only running measurements,
    /// each once. A measurement in neither would never send, time out or finish, and the
    /// engine would never become idle. O(n log n) in running measurements; the simulated drivers of
    /// the tests and of `vtnt bench soak` call it every few rounds.
    pub fn check(&self) -> Result<(), Stranded> {
        let mut queued = alloc::vec![false; self.slots.len()];
        for &i in &self.ready {
            match (
                self.slots.get(i).and_then(Option::as_ref),
                queued.get_mut(i),
            ) {
                (Some(s), Some(q)) if s.in_ready && !*q => *q = true,
                _ => {
                    return Err(Stranded {
                        slot: i,
                        what: "a stale or repeated send-queue entry",
                    })
                }
            }
        }
        for (i, _) in self.timers.iter() {
            if self.slots.get(i).and_then(Option::as_ref).is_none() {
                return Err(Stranded {
                    slot: i,
                    what: "a timer of no running measurement",
                });
            }
        }
        if !self.timers.consistent() {
            return Err(Stranded {
                slot: self.slots.len(),
                what: "a timer missing from the timer heap",
            });
        }
        let mut running = 0;
        for (i, s) in self.slots.iter().enumerate() {
            let Some(s) = s else { continue };
            running += 1;
            if s.in_ready != queued[i] {
                return Err(Stranded {
                    slot: i,
                    what: "a slot marked queued but not in the queue",
                });
            }
            if self.timers.get(i).is_none() && !s.in_ready {
                return Err(Stranded {
                    slot: i,
                    what: "a running measurement with no timer and no probe queued",
                });
            }
        }
        if running != self.active {
            return Err(Stranded {
                slot: self.slots.len(),
                what: "a wrong count of running measurements",
            });
        }
        Ok(())
    }

    /// Fires every timer up to `now`.
    fn advance(&mut self, now: Instant) {
        while let Some(i) = self.timers.pop_due(now) {
            if let Some(slot) = self.slots[i].as_mut() {
                if let Active::Trace(t) = &mut slot.run {
                    t.on_timer(now);
                }
            }
            self.reschedule(i, now);
        }
    }

    /// Moves the time on to `now`, or keeps the latest time seen if `now` is older.
    fn tick(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    /// Drops entries at the front of `ready` that no longer want to send, so that
    /// `poll_timeout` only reports the pacer when a probe is really due.
    fn tidy_ready(&mut self, now: Instant) {
        while let Some(&i) = self.ready.front() {
            if self.slots[i]
                .as_ref()
                .is_some_and(|s| s.run.wake(now) == Wake::Send)
            {
                break;
            }
            self.unqueue_front(now);
        }
    }

    /// Takes the front entry off `ready`, its measurement not wanting to send at `now`,
    /// and puts that measurement where its wish says (a timer, or its end): a slot that
    /// left the queue without a timer would never be woken again.
    fn unqueue_front(&mut self, now: Instant) {
        let Some(i) = self.ready.pop_front() else {
            return;
        };
        if let Some(s) = self.slots[i].as_mut() {
            s.in_ready = false;
            self.reschedule(i, now);
        }
    }

    /// Puts slot `i` where its measurement's wish says.
    fn reschedule(&mut self, i: usize, now: Instant) {
        let Some(slot) = self.slots[i].as_mut() else {
            return;
        };
        match slot.run.wake(now) {
            Wake::Send => {
                self.timers.cancel(i);
                if !slot.in_ready {
                    slot.in_ready = true;
                    self.ready.push_back(i);
                }
            }
            Wake::At(t) => self.timers.set(i, t),
            Wake::Done => {
                self.timers.cancel(i);
                self.finish(i, now);
            }
        }
    }

    fn finish(&mut self, i: usize, now: Instant) {
        let Some(slot) = self.slots[i].take() else {
            return;
        };
        self.keys.remove(&slot.key.map_key());
        if slot.pooled {
            self.pool.free(slot.key.id);
        }
        self.active -= 1;
        // A stale `ready` entry for slot `i` must not be taken for a new occupant.
        if slot.in_ready {
            self.ready.retain(|&j| j != i);
        }
        self.free_slots.push(i);
        let record = match slot.run {
            Active::Trace(t) => Record::Trace(t.into_record()),
            Active::Ping(p) => Record::Ping(p.into_record()),
        };
        self.events.push_back(Event::Finished {
            id: slot.id,
            record,
        });
        self.activate(now);
    }

    /// Starts queued measurements while there is room; a measurement whose explicit port is in use by a
    /// running measurement to the same destination waits, the ones behind it do not.
    fn activate(&mut self, now: Instant) {
        let mut scan = 0;
        while self.active < self.config.max_active && scan < self.queue.len() {
            // an ICMP-Paris trace's `-d` is its checksum (random when not given), a
            // ping's checksum is its `-C`
            let (method, sport, dport, dst, sum) = match &self.queue[scan].1 {
                Measurement::Trace(t) if t.method == Method::IcmpParis => {
                    (t.method, t.sport, None, t.dst, Some(t.dport))
                }
                Measurement::Trace(t) => (t.method, t.sport, t.dport, t.dst, None),
                Measurement::Ping(p) => (p.method, p.sport, p.dport, p.dst, p.icmp_sum.map(Some)),
            };
            let Some(flow_and_pooled) = self.allocate(method, sport, dport, dst, sum) else {
                scan += 1;
                continue;
            };
            let Some((id, measurement, src)) = self.queue.remove(scan) else {
                break;
            };
            self.launch(now, id, measurement, src, flow_and_pooled);
        }
    }

    /// Picks the flow of a measurement, or `None` when its identifier is taken. `sum`: the ICMP
    /// checksum to pin (`Some(None)`: a random one).
    fn allocate(
        &mut self,
        method: Method,
        sport: Option<u16>,
        dport: Option<u16>,
        dst: IpAddr,
        sum: Option<Option<u16>>,
    ) -> Option<(Flow, bool)> {
        let dst = flow::probe_addr(dst)?;
        let proto = probe::protocol(method);
        let keys = &self.keys;
        let (id, pooled) = match (method, sport) {
            (_, Some(s)) if method != Method::IcmpParis => {
                let k = FlowKey { proto, id: s, dst };
                (!keys.contains_key(&k.map_key())).then_some((s, false))?
            }
            _ => {
                let taken = |v| keys.contains_key(&FlowKey { proto, id: v, dst }.map_key());
                (self.pool.alloc(taken)?, true)
            }
        };
        // scamper's default destination port, for UDP and TCP alike
        let dport = match method {
            Method::IcmpParis => 0,
            _ => dport.unwrap_or(33435),
        };
        let icmp_sum = match sum {
            Some(c) => c.unwrap_or_else(|| flow::checksum(&mut self.rng)),
            None => 0,
        };
        Some((
            Flow {
                key: FlowKey { proto, id, dst },
                dport,
                icmp_sum,
                tag: self.tag,
                // what the run's options make vary (`TraceState::new`, `PingState::new`)
                vary: Vary::default(),
            },
            pooled,
        ))
    }

    fn launch(
        &mut self,
        now: Instant,
        id: MeasurementId,
        measurement: Measurement,
        src: Addr,
        (flow, pooled): (Flow, bool),
    ) {
        let run = match measurement {
            Measurement::Trace(t) => Active::Trace(TraceState::new(now, src, t, flow)),
            Measurement::Ping(p) => Active::Ping(PingState::new(now, src, p, flow)),
        };
        let slot = Slot {
            id,
            key: flow.key,
            pooled,
            in_ready: false,
            run,
        };
        let i = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.keys.insert(flow.key.map_key(), i);
        self.active += 1;
        self.reschedule(i, now);
    }
}
