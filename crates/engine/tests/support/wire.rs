//! The vantage point's access link to the lab: what the engine sends goes into a
//! [`vtnt_lab::Lab`] (port 0) and what the lab sends back comes out, due when the lab
//! says. On this link, and only here, the tests impair traffic: a shaper holds a probe
//! back (reordering) or loses it, and every reply may be duplicated. The network itself,
//! its routers, hosts, tunnels and delays, is the lab's.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use vtnt_engine::Instant;
use vtnt_lab::{Lab, Port, Topology, TopologyDef, Truth};
use vtnt_wire::reply;

/// What the shaper sees of each probe.
#[derive(Debug, Clone, Copy)]
pub struct ProbeView {
    pub dst: Ipv4Addr,
    pub ttl: u8,
    /// How many probes went to `dst` so far, this one included: the probe number of a
    /// lone measurement.
    pub number: u16,
}

/// Extra delay for a probe on its way into the lab, or `None` to lose it.
type Shaper = Box<dyn FnMut(&ProbeView) -> Option<Duration>>;

/// How much later a duplicated reply's copy arrives.
const COPY_AFTER: Duration = Duration::from_micros(100);

pub struct Wire {
    lab: Lab,
    /// Every reply is delivered twice (the copy [`COPY_AFTER`] later).
    pub duplicate: bool,
    pub shaper: Option<Shaper>,
    /// Every probe the engine sent, with its send time.
    pub sent: Vec<(Instant, Vec<u8>)>,
    /// How many probes went to each IPv4 destination (bytes 16..20), for the shaper.
    sent_to: HashMap<[u8; 4], u16>,
    in_flight: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    seq: u64,
}

impl Wire {
    /// The lab running `def` (which must be valid) behind an unimpaired link.
    pub fn new(def: TopologyDef) -> Wire {
        Wire::of(Topology::from_def(def).expect("a valid topology"))
    }

    /// The lab running `topo` behind an unimpaired link.
    pub fn of(topo: Topology) -> Wire {
        Wire {
            lab: Lab::new(topo),
            duplicate: false,
            shaper: None,
            sent: Vec::new(),
            sent_to: HashMap::new(),
            in_flight: BinaryHeap::new(),
            seq: 0,
        }
    }

    pub fn truth(&self) -> Truth {
        self.lab.truth()
    }

    /// The engine sends `probe` at `now`.
    pub fn send(&mut self, now: Instant, probe: &[u8]) {
        self.sent.push((now, probe.to_vec()));
        let number = match probe.get(16..20).and_then(|d| <[u8; 4]>::try_from(d).ok()) {
            Some(d) => {
                let n = self.sent_to.entry(d).or_default();
                *n = n.saturating_add(1);
                *n
            }
            None => 0,
        };
        let extra = match (self.shaper.as_mut(), reply::parse(probe)) {
            (Some(shape), Ok(p)) => {
                let IpAddr::V4(dst) = p.dst else { return };
                let view = ProbeView {
                    dst,
                    ttl: p.ttl,
                    number,
                };
                match shape(&view) {
                    Some(d) => d,
                    None => return,
                }
            }
            _ => Duration::ZERO,
        };
        self.lab.handle_packet(now + extra, Port(0), probe);
        // The lab walks a packet when it is handed in: everything it answers is known
        // now, each with the time it arrives.
        for (at, _, pkt) in self.lab.drain() {
            if self.duplicate {
                self.deliver(at + COPY_AFTER, pkt.clone());
            }
            self.deliver(at, pkt);
        }
    }

    fn deliver(&mut self, at: Instant, pkt: Vec<u8>) {
        self.seq += 1;
        self.in_flight.push(Reverse((at, self.seq, pkt)));
    }

    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Packets due by `now`, in arrival order.
    pub fn arrivals(&mut self, now: Instant) -> Vec<(Instant, Vec<u8>)> {
        let mut out = Vec::new();
        while self.next_arrival().is_some_and(|t| t <= now) {
            let Some(Reverse((t, _, p))) = self.in_flight.pop() else {
                break;
            };
            out.push((t, p));
        }
        out
    }
}
