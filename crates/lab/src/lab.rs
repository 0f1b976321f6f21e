//! The emulator's sans-IO face: [`Lab`] takes IPv4 and IPv6 packets from vantage points
//! and hands back the packets the network sends them, each due at the time it would
//! arrive.
//!
//! Call order (as the engine's): `handle_packet(now, port, bytes)` for every packet a
//! vantage point sends; `poll_transmit(now, buf)` until `None` for everything due;
//! sleep until `poll_timeout()` or the next packet; `handle_timeout(now)` after waking.
//!
//! A packet is walked through the whole network as soon as it is handed in (routers have
//! no queues, so nothing it meets depends on later packets); what comes back is held
//! until the sum of the one-way delays it crossed has passed. Rate limiters are token
//! buckets evaluated at the (virtual) time each packet reaches the router.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use vtnt_record::Instant;

use crate::net::routing::RouteCache;
use crate::net::{Net, RouterId};
use crate::topology::{Change, ChangeError, Topology};
use crate::truth::{self, Truth};
use crate::vantage::{vantage_points, Port, VantagePoint};

mod family;
mod forward;

/// Counters of what the lab did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Packets handed in by vantage points.
    pub received: u64,
    /// Packets handed back to vantage points.
    pub sent: u64,
    /// Packets that were neither IPv4 nor IPv6 or were cut short.
    pub malformed: u64,
    /// ICMP messages a rate limit suppressed.
    pub rate_limited: u64,
    /// Packets dropped for having no route, a silent destination, a loop or a dead end.
    pub dropped: u64,
    /// Packets larger than the buffer given to `poll_transmit`.
    pub too_big: u64,
}

pub(crate) struct Out {
    pub t: u64,
    pub seq: u64,
    pub port: u16,
    pub buf: Vec<u8>,
}
impl PartialEq for Out {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Out {}
impl PartialOrd for Out {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Out {
    /// Reversed: the earliest packet is the greatest, on top of the max-heap.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

/// A token bucket in micro-tokens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    tokens: u64,
    last: u64,
}

impl Bucket {
    fn full(rate: u32) -> Bucket {
        Bucket {
            tokens: u64::from(rate) * 1_000_000,
            last: 0,
        }
    }
    /// Takes one token at time `t` (µs) if there is one; `rate` per second, burst `rate`.
    pub fn take(&mut self, t: u64, rate: u32) -> bool {
        if rate == 0 {
            return true;
        }
        let cap = u64::from(rate) * 1_000_000;
        let dt = t.saturating_sub(self.last);
        self.tokens = self
            .tokens
            .saturating_add(dt.saturating_mul(u64::from(rate)))
            .min(cap);
        self.last = self.last.max(t);
        if self.tokens >= 1_000_000 {
            self.tokens -= 1_000_000;
            true
        } else {
            false
        }
    }
}

/// The emulated network.
pub struct Lab {
    pub(crate) topo: Topology,
    pub(crate) buckets: Vec<Bucket>,
    pub(crate) ipid: Vec<u16>,
    pub(crate) host_ipid: Vec<u16>,
    pub(crate) out: BinaryHeap<Out>,
    pub(crate) seq: u64,
    pub(crate) pool: Vec<Vec<u8>>,
    pub(crate) stats: Stats,
    pub(crate) work: Vec<forward::Walk>,
    pub(crate) routes: RouteCache,
}

impl Lab {
    /// A lab running `topology`, every router's rate limiter full.
    pub fn new(topology: Topology) -> Lab {
        let n = &topology.net;
        Lab {
            buckets: n
                .routers
                .iter()
                .map(|r| Bucket::full(r.icmp_rate))
                .collect(),
            ipid: (0..n.routers.len())
                .map(|i| (i as u16).wrapping_mul(7919))
                .collect(),
            host_ipid: (0..n.hosts.len())
                .map(|i| (i as u16).wrapping_mul(104_729u32 as u16))
                .collect(),
            out: BinaryHeap::new(),
            seq: 0,
            pool: Vec::new(),
            stats: Stats::default(),
            work: Vec::new(),
            routes: RouteCache::default(),
            topo: topology,
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }
    pub(crate) fn net(&self) -> &Net {
        &self.topo.net
    }

    /// The vantage points, port by port.
    pub fn vantage_points(&self) -> Vec<VantagePoint> {
        vantage_points(&self.topo)
    }

    /// Hands the lab an IPv4 or IPv6 packet sent by the vantage point at `port` at time
    /// `now`. Anything that is not a well-formed IPv4 or IPv6 packet is counted and
    /// dropped.
    pub fn handle_packet(&mut self, now: Instant, port: Port, packet: &[u8]) {
        self.stats.received += 1;
        self.inject(now.as_micros(), port, packet);
    }

    /// The next packet due at `now` for a vantage point: copied into `buf`, returns the
    /// port and length. Packets larger than `buf` are dropped (counted in `too_big`);
    /// give at least 1500 bytes.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<(Port, usize)> {
        loop {
            if self.out.peek()?.t > now.as_micros() {
                return None;
            }
            let o = self.out.pop()?;
            let n = o.buf.len();
            let ok = buf.len() >= n;
            if ok {
                buf[..n].copy_from_slice(&o.buf);
            }
            self.recycle(o.buf);
            if ok {
                self.stats.sent += 1;
                return Some((Port(o.port), n));
            }
            self.stats.too_big += 1;
        }
    }

    /// When the next packet falls due, if any is in flight.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.out.peek().map(|o| Instant::from_micros(o.t))
    }

    /// Wakes the lab at `now`. Nothing in the lab runs on timers of its own (packets are
    /// walked when handed in), so this only exists to keep the engines' call order.
    pub fn handle_timeout(&mut self, _now: Instant) {}

    /// Every packet still in flight, in arrival order, whatever its due time: for tests
    /// that do not keep a clock.
    pub fn drain(&mut self) -> Vec<(Instant, Port, Vec<u8>)> {
        let mut v = Vec::with_capacity(self.out.len());
        while let Some(o) = self.out.pop() {
            self.stats.sent += 1;
            v.push((Instant::from_micros(o.t), Port(o.port), o.buf));
        }
        v
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Applies `change` between two packets ([`Topology::apply`]): packets handed in
    /// from now on meet the changed network; those already walked arrive as they were
    /// due. Refused changes leave the lab as it was.
    pub fn apply(&mut self, change: &Change) -> Result<(), ChangeError> {
        self.topo = self.topo.apply(change)?;
        self.routes = RouteCache::default();
        Ok(())
    }

    /// The ground truth of the running topology.
    pub fn truth(&self) -> Truth {
        truth::truth(&self.topo)
    }

    pub(crate) fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b
    }
    pub(crate) fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < 256 {
            self.pool.push(b);
        }
    }
    pub(crate) fn emit(&mut self, t: u64, port: u16, buf: Vec<u8>) {
        self.seq += 1;
        self.out.push(Out {
            t,
            seq: self.seq,
            port,
            buf,
        });
    }
    pub(crate) fn next_ipid(&mut self, r: RouterId) -> u16 {
        let x = &mut self.ipid[r as usize];
        *x = x.wrapping_add(1);
        *x
    }
}
