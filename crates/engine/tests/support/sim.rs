//! A small in-process network for engine tests, driven under a virtual clock.
//!
//! Each destination has a [`Path`]: a chain of [`Node`]s (routers, repeated addresses
//! allowed, which is how loops and UHP duplicates are drawn) and optionally a [`Host`]
//! at the end. A probe with TTL `t` expires at node `t` (time exceeded, with the node's
//! MPLS label stack as RFC 4950 extension, or silence), is refused by a node configured
//! with `unreach`, or reaches the host, which answers ICMP echo with an echo reply, UDP
//! with port unreachable and TCP SYN with RST (closed port) or SYN-ACK (open port).
//! Delays are one-way per link, so an answer from node `i` arrives after twice the sum of
//! the delays up to it. Switches duplicate replies and add per-probe delays (reordering)
//! or drop replies.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use vtnt_engine::{Engine, Event, Instant, MeasurementId, Record};
use vtnt_wire::build::{self, Ip};
use vtnt_wire::mpls::Lse;
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{icmp_type, tcp_flags};

/// One router on a path.
#[derive(Debug, Clone)]
pub struct Node {
    pub addr: Ipv4Addr,
    /// One-way delay of the link that reaches this node.
    pub delay: Duration,
    /// Sends nothing when a probe's TTL expires here.
    pub silent: bool,
    /// Label stack quoted in time-exceeded messages (empty: no extension).
    pub mpls: Vec<Lse>,
    /// Answers every probe that reaches it with destination unreachable (this code).
    pub unreach: Option<u8>,
    /// Initial TTL of the router's replies.
    pub init_ttl: u8,
}

impl Node {
    pub fn new(addr: Ipv4Addr) -> Node {
        Node {
            addr,
            delay: Duration::from_millis(1),
            silent: false,
            mpls: Vec::new(),
            unreach: None,
            init_ttl: 255,
        }
    }
    pub fn delay_ms(mut self, ms: u64) -> Node {
        self.delay = Duration::from_millis(ms);
        self
    }
    pub fn silent(mut self) -> Node {
        self.silent = true;
        self
    }
    pub fn labels(mut self, stack: &[Lse]) -> Node {
        self.mpls = stack.to_vec();
        self
    }
    pub fn unreach(mut self, code: u8) -> Node {
        self.unreach = Some(code);
        self
    }
}

/// The destination host.
#[derive(Debug, Clone)]
pub struct Host {
    pub delay: Duration,
    pub init_ttl: u8,
    /// TCP ports with a listener (SYN-ACK); others answer RST.
    pub open_tcp: Vec<u16>,
}

impl Default for Host {
    fn default() -> Host {
        Host {
            delay: Duration::from_millis(1),
            init_ttl: 64,
            open_tcp: Vec::new(),
        }
    }
}

/// The way to one destination.
#[derive(Debug, Clone, Default)]
pub struct Path {
    pub nodes: Vec<Node>,
    /// `None`: the destination never answers.
    pub host: Option<Host>,
}

/// What a reply-shaping switch sees of each probe.
#[derive(Debug, Clone, Copy)]
pub struct ProbeView {
    pub dst: Ipv4Addr,
    pub ttl: u8,
    /// How many probes went to `dst` so far, this one included: the probe number of a
    /// lone measurement.
    pub number: u16,
}

type Shaper = Box<dyn FnMut(&ProbeView) -> Option<Duration>>;

pub struct Sim {
    pub src: Ipv4Addr,
    paths: BTreeMap<Ipv4Addr, Path>,
    /// Used for destinations without their own path.
    pub default_path: Option<Path>,
    /// Every reply is delivered twice (the copy 100 us later).
    pub duplicate: bool,
    /// Extra delay for the reply to a probe, or `None` to drop it.
    pub shaper: Option<Shaper>,
    /// Every probe the engine sent, with its send time.
    pub sent: Vec<(Instant, Vec<u8>)>,
    in_flight: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    seq: u64,
    ipid: u16,
}

impl Sim {
    pub fn new(src: Ipv4Addr) -> Sim {
        Sim {
            src,
            paths: BTreeMap::new(),
            default_path: None,
            duplicate: false,
            shaper: None,
            sent: Vec::new(),
            in_flight: BinaryHeap::new(),
            seq: 0,
            ipid: 1,
        }
    }

    pub fn path(&mut self, dst: Ipv4Addr, path: Path) -> &mut Sim {
        self.paths.insert(dst, path);
        self
    }

    fn deliver(&mut self, at: Instant, pkt: Vec<u8>) {
        self.seq += 1;
        self.in_flight.push(Reverse((at, self.seq, pkt)));
    }

    /// Injects any packet (garbage, forged replies) for delivery at `at`.
    pub fn inject(&mut self, at: Instant, pkt: Vec<u8>) {
        self.deliver(at, pkt);
    }

    /// The engine sends `probe` at `now`.
    pub fn send(&mut self, now: Instant, probe: &[u8]) {
        self.sent.push((now, probe.to_vec()));
        let Ok(p) = reply::parse(probe) else { return };
        let IpAddr::V4(dst) = p.dst else { return };
        let Some(path) = self.paths.get(&dst).or(self.default_path.as_ref()).cloned() else {
            return;
        };
        let number = self
            .sent
            .iter()
            .filter(|(_, s)| s.get(16..20) == probe.get(16..20))
            .count();
        let view = ProbeView {
            dst,
            ttl: p.ttl,
            number: u16::try_from(number).unwrap_or(u16::MAX),
        };
        let extra = match self.shaper.as_mut() {
            Some(f) => match f(&view) {
                Some(d) => d,
                None => return,
            },
            None => Duration::ZERO,
        };
        let mut one_way = Duration::ZERO;
        let mut answer = None;
        for (i, node) in path.nodes.iter().enumerate() {
            one_way += node.delay;
            let back = i as u8;
            if p.ttl as usize == i + 1 {
                if !node.silent {
                    let mut quoted = probe.to_vec();
                    quoted[8] = 1;
                    let (q, stack) = if node.mpls.is_empty() {
                        (28, &[][..])
                    } else {
                        (128, &node.mpls[..])
                    };
                    let ip = self.ip(node.addr, node.init_ttl - back);
                    answer = Some(icmp_error(
                        &ip,
                        icmp_type::TIME_EXCEEDED,
                        0,
                        &quoted,
                        q,
                        stack,
                    ));
                }
                break;
            }
            if let Some(code) = node.unreach {
                let ip = self.ip(node.addr, node.init_ttl - back);
                answer = Some(icmp_error(
                    &ip,
                    icmp_type::DEST_UNREACH,
                    code,
                    probe,
                    28,
                    &[],
                ));
                break;
            }
        }
        if answer.is_none() && p.ttl as usize > path.nodes.len() {
            if let Some(host) = &path.host {
                one_way += host.delay;
                let ip = self.ip(dst, host.init_ttl - path.nodes.len() as u8);
                answer = host_answer(&ip, host, probe, p.ttl - path.nodes.len() as u8);
            }
        }
        if let Some(pkt) = answer {
            let at = now + one_way * 2 + extra;
            if self.duplicate {
                self.deliver(at + Duration::from_micros(100), pkt.clone());
            }
            self.deliver(at, pkt);
        }
    }

    fn ip(&mut self, src: Ipv4Addr, ttl: u8) -> Ip {
        self.ipid = self.ipid.wrapping_add(1);
        Ip {
            src,
            dst: self.src,
            ttl,
            tos: 0,
            ipid: self.ipid,
        }
    }

    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Packets due by `now`, in arrival order.
    pub fn arrivals(&mut self, now: Instant) -> Vec<(Instant, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(Reverse((t, _, _))) = self.in_flight.peek() {
            if *t > now {
                break;
            }
            let Reverse((t, _, p)) = self.in_flight.pop().unwrap();
            out.push((t, p));
        }
        out
    }
}

fn icmp_error(ip: &Ip, t: u8, code: u8, quoted: &[u8], q: usize, stack: &[Lse]) -> Vec<u8> {
    let mut b = vec![0u8; 1600];
    let n = build::icmp_error(
        &mut b,
        ip,
        &build::IcmpError {
            icmp_type: t,
            code,
            original: quoted,
            quote_len: q,
            mpls: stack,
        },
    )
    .expect("icmp error");
    b.truncate(n);
    b
}

fn host_answer(ip: &Ip, host: &Host, probe: &[u8], ttl_left: u8) -> Option<Vec<u8>> {
    let p = reply::parse(probe).ok()?;
    let mut b = vec![0u8; 1600];
    let n = match p.body {
        Body::Echo {
            icmp_type: icmp_type::ECHO_REQUEST,
            ident,
            seq,
            payload,
            ..
        } => build::icmp_echo(
            &mut b,
            ip,
            &build::Echo {
                icmp_type: icmp_type::ECHO_REPLY,
                ident,
                seq,
                payload,
                checksum: None,
            },
        )
        .ok()?,
        Body::Udp { .. } => {
            let mut quoted = probe.to_vec();
            quoted[8] = ttl_left;
            return Some(icmp_error(ip, icmp_type::DEST_UNREACH, 3, &quoted, 28, &[]));
        }
        Body::Tcp {
            sport,
            dport,
            seq,
            flags,
            ..
        } if flags & tcp_flags::SYN != 0 => {
            let data = u32::from(p.len) - 40;
            let t = if host.open_tcp.contains(&dport) {
                build::Tcp {
                    sport: dport,
                    dport: sport,
                    seq: 777,
                    ack: seq.wrapping_add(1),
                    flags: tcp_flags::SYN | tcp_flags::ACK,
                    window: 65535,
                }
            } else {
                // Linux acknowledges the SYN and any data it carried.
                build::Tcp {
                    sport: dport,
                    dport: sport,
                    seq: 0,
                    ack: seq.wrapping_add(1 + data),
                    flags: tcp_flags::RST | tcp_flags::ACK,
                    window: 0,
                }
            };
            build::tcp(&mut b, ip, &t).ok()?
        }
        _ => return None,
    };
    b.truncate(n);
    Some(b)
}

/// Drivers check the engine's bookkeeping ([`Engine::check`]) every this many rounds: a
/// measurement lost by the scheduler stays lost, so it is caught a little later, while
/// checking every round would cost more than the simulation itself.
const CHECK_EVERY: u64 = 64;

/// Runs the engine against the network from `start` until it is idle; returns the
/// finished records in completion order with their finishing time.
pub fn run(
    engine: &mut Engine,
    sim: &mut Sim,
    start: Instant,
) -> Vec<(MeasurementId, Instant, Record)> {
    let mut now = start;
    let mut out = Vec::new();
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    for round in 0..10_000_000u64 {
        while let Some(tx) = engine.poll_transmit(now, &mut buf) {
            assert_eq!(tx.len, u16::from_be_bytes([buf[2], buf[3]]) as usize);
            sim.send(now, &buf[..tx.len]);
        }
        while let Some(Event::Finished { id, record }) = engine.poll_event() {
            out.push((id, now, record));
        }
        if round.is_multiple_of(CHECK_EVERY) {
            engine.check().expect("engine bookkeeping");
        }
        if engine.is_idle() {
            return out;
        }
        let next = [engine.poll_timeout(), sim.next_arrival()]
            .into_iter()
            .flatten()
            .min();
        let next = next.expect("engine busy but no deadline and nothing in flight");
        assert!(
            next > now,
            "deadline {next:?} not after now {now:?}: the driver would spin"
        );
        now = next;
        for (t, pkt) in sim.arrivals(now) {
            engine.handle_packet(t, &pkt);
        }
        engine.handle_timeout(now);
    }
    panic!("simulation did not finish");
}

/// Runs the engine as the Linux driver does (`vtnt_linux::run`): each round reads the clock,
/// handles timeouts, sends what the pacer allows, then sleeps until the engine's deadline
/// (at most 1 s; a sleep of 1 ms or more ends at the first arrival) and hands in every
/// packet that arrived, with its arrival time. The clock is read `latency` after the
/// packets were read, so a reply arriving in between is handed in after the engine has
/// seen a later `now`, as kernel receive timestamps are. Returns the records, or the
/// number of records when the engine is still busy at `give_up`.
pub fn run_like_linux(
    engine: &mut Engine,
    sim: &mut Sim,
    start: Instant,
    latency: Duration,
    give_up: Instant,
) -> Result<Vec<(MeasurementId, Instant, Record)>, usize> {
    let mut read_at = start;
    let mut out = Vec::new();
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    let mut round = 0u64;
    loop {
        round += 1;
        let now = read_at + latency;
        engine.handle_timeout(now);
        while let Some(tx) = engine.poll_transmit(now, &mut buf) {
            sim.send(now, &buf[..tx.len]);
        }
        while let Some(Event::Finished { id, record }) = engine.poll_event() {
            out.push((id, now, record));
        }
        if round.is_multiple_of(CHECK_EVERY) {
            engine.check().expect("engine bookkeeping");
        }
        if engine.is_idle() {
            return Ok(out);
        }
        if now > give_up {
            return Err(out.len());
        }
        let cap = now + Duration::from_secs(1);
        let mut wake = engine.poll_timeout().map_or(cap, |t| t.clamp(now, cap));
        if wake >= now + Duration::from_millis(1) {
            if let Some(a) = sim.next_arrival() {
                wake = wake.min(a.max(now));
            }
        }
        read_at = wake;
        for (t, pkt) in sim.arrivals(read_at) {
            engine.handle_packet(t, &pkt);
        }
    }
}

/// Runs several engines (each with its start time) on one network until all are idle,
/// as processes on one host: every reply reaches every engine, as raw sockets deliver
/// it. Returns each engine's records in completion order.
pub fn run_shared(engines: &mut [(&mut Engine, Instant)], sim: &mut Sim) -> Vec<Vec<Record>> {
    let mut now = engines.iter().map(|(_, t)| *t).min().expect("an engine");
    let mut out = vec![Vec::new(); engines.len()];
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    for _ in 0..10_000_000u32 {
        for (e, _) in engines.iter_mut().filter(|(_, t)| *t <= now) {
            while let Some(tx) = e.poll_transmit(now, &mut buf) {
                sim.send(now, &buf[..tx.len]);
            }
        }
        for (i, (e, _)) in engines.iter_mut().enumerate() {
            while let Some(Event::Finished { record, .. }) = e.poll_event() {
                out[i].push(record);
            }
        }
        if engines.iter().all(|(e, _)| e.is_idle()) {
            return out;
        }
        let next = engines
            .iter()
            .map(|(e, t)| if *t > now { Some(*t) } else { e.poll_timeout() })
            .chain([sim.next_arrival()])
            .flatten()
            .min()
            .expect("engines busy but no deadline and nothing in flight");
        assert!(next > now, "deadline {next:?} not after now {now:?}");
        now = next;
        for (t, pkt) in sim.arrivals(now) {
            for (e, start) in engines.iter_mut().filter(|(_, s)| *s <= t) {
                e.handle_packet(t.max(*start), &pkt);
            }
        }
        for (e, _) in engines.iter_mut().filter(|(_, s)| *s <= now) {
            e.handle_timeout(now);
        }
    }
    panic!("simulation did not finish");
}

/// `a.b.c.d` shorthand.
pub fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A path through routers 198.51.100.1.. (`n` of them, 1 ms links) to a host.
pub fn chain(n: u8) -> Path {
    Path {
        nodes: (1..=n)
            .map(|i| Node::new(Ipv4Addr::new(198, 51, 100, i)))
            .collect(),
        host: Some(Host::default()),
    }
}
