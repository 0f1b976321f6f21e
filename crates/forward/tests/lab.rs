//! End to end without IO: engines, each an instance with its own private address (some
//! with equal seeds, so they pick the same identities), trace every destination of the
//! reference lab through one [`Forwarder`] under a virtual clock. Every trace must equal
//! the one the same engine records when it talks to the lab directly from the public
//! address (hops, addresses, ICMP types, quoted TTLs, MPLS labels), and no reply may be
//! lost or misdelivered: the lab's packets, the forwarder's deliveries and the engines'
//! matched replies are counted against each other.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use vtnt_engine::{
    Config as EngineConfig, Engine, Event, Measurement, Method, Record, Trace, TraceOptions,
};
use vtnt_forward::{Config, Forwarder, InstanceId};
use vtnt_lab::{Instant, Lab, Port, Topology, Truth};
use vtnt_wire::reply::{self, Body};

const T0: Instant = Instant::from_millis(1_000_000);
/// Probes per second of each engine.
const PPS: u32 = 100;

/// One instance: its engine's seed, method and private address.
struct Spec {
    seed: u64,
    method: Method,
    addr: Ipv4Addr,
}

fn specs() -> Vec<Spec> {
    let s = |seed, method, last| Spec {
        seed,
        method,
        addr: Ipv4Addr::new(10, 0, 0, last),
    };
    vec![
        // Equal seeds and methods: the same idents, ports and checksums for each target.
        s(1, Method::IcmpParis, 2),
        s(1, Method::IcmpParis, 2),
        s(1, Method::IcmpParis, 3),
        s(1, Method::UdpParis, 4),
        s(1, Method::UdpParis, 5),
        s(2, Method::Tcp, 6),
        s(2, Method::Tcp, 7),
        s(3, Method::IcmpParis, 8),
        s(3, Method::UdpParis, 9),
        s(4, Method::Tcp, 10),
    ]
}

fn engine(spec: &Spec, src: Ipv4Addr, truth: &Truth) -> Engine {
    let mut e = Engine::new(EngineConfig {
        pps: PPS,
        seed: spec.seed,
        ..EngineConfig::new(src)
    })
    .unwrap();
    for d in &truth.destinations {
        let mut o = TraceOptions::new(IpAddr::V4(d.dst)).with_method(spec.method);
        o.wait = Duration::from_secs(1);
        e.start(T0, Measurement::Trace(o)).unwrap();
    }
    e
}

fn traces(events: Vec<Event>) -> BTreeMap<IpAddr, Trace> {
    events
        .into_iter()
        .map(|Event::Finished { record, .. }| match record {
            Record::Trace(t) => (t.dst, t),
            other => panic!("not a trace: {other:?}"),
        })
        .collect()
}

/// What a traceroute shows of a trace, whoever sent it: per reply the TTL, attempt,
/// address, ICMP type and code, TCP flags, quoted TTL and length, label stack and reply
/// TTL; and why it stopped.
type Shown = (
    String,
    Vec<(
        u8,
        u8,
        IpAddr,
        Option<(u8, u8)>,
        Option<u8>,
        Option<(u8, u16)>,
        Vec<(u32, u8)>,
        u8,
    )>,
);

fn shown(t: &Trace) -> Shown {
    (
        t.stop_reason.name().to_string(),
        t.hops
            .iter()
            .map(|h| {
                (
                    h.probe_ttl,
                    h.probe_id,
                    h.addr,
                    h.icmp,
                    h.tcp_flags,
                    h.quoted.map(|q| (q.ttl, q.ip_len)),
                    h.mpls.iter().map(|l| (l.label, l.ttl)).collect(),
                    h.reply_ttl,
                )
            })
            .collect(),
    )
}

/// Runs one engine straight against its own lab from the public address.
fn direct(spec: &Spec, public: Ipv4Addr) -> (BTreeMap<IpAddr, Trace>, u64) {
    let mut lab = Lab::new(Topology::reference());
    let mut e = engine(spec, public, &lab.truth());
    let mut buf = vec![0u8; 1500];
    let mut events = Vec::new();
    let mut now = T0;
    loop {
        while let Some(tx) = e.poll_transmit(now, &mut buf) {
            lab.handle_packet(now, Port(0), &buf[..tx.len]);
        }
        events.extend(std::iter::from_fn(|| e.poll_event()));
        if e.is_idle() {
            break;
        }
        now = [e.poll_timeout(), lab.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        while let Some((_, n)) = lab.poll_transmit(now, &mut buf) {
            e.handle_packet(now, &buf[..n]);
        }
        e.handle_timeout(now);
    }
    assert_eq!(e.stats().unmatched, 0);
    (traces(events), e.stats().replies)
}

/// The identity (ICMP ident, UDP/TCP source port) of a probe.
fn identity(p: &[u8]) -> u16 {
    match reply::parse(p).unwrap().body {
        Body::Echo { ident, .. } => ident,
        Body::Udp { sport, .. } | Body::Tcp { sport, .. } => sport,
        other => panic!("not a probe: {other:?}"),
    }
}

#[test]
fn engines_behind_one_forwarder_trace_as_they_do_directly() {
    let mut lab = Lab::new(Topology::reference());
    let truth = lab.truth();
    let public = lab.vantage_points()[0].addr;
    let specs = specs();
    let n = specs.len() as u32;
    let mut fw = Forwarder::new(Config {
        pps: PPS * n,
        burst: 2 * n,
        ..Config::new(public)
    })
    .unwrap();
    let mut engines: Vec<(InstanceId, Engine)> = specs
        .iter()
        .map(|s| (fw.add_instance(s.addr), engine(s, s.addr, &truth)))
        .collect();
    let index: BTreeMap<InstanceId, usize> = engines
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (*id, i))
        .collect();
    // (instance, destination) -> whether its identity was moved
    let mut moved: BTreeMap<(usize, IpAddr), bool> = BTreeMap::new();
    let (mut buf, mut out) = (vec![0u8; 1500], vec![0u8; 1500]);
    let mut events: Vec<Vec<Event>> = engines.iter().map(|_| Vec::new()).collect();
    let (mut probes, mut from_lab) = (0u64, 0u64);
    let mut now = T0;
    loop {
        for (i, (id, e)) in engines.iter_mut().enumerate() {
            while let Some(tx) = e.poll_transmit(now, &mut buf) {
                let len = fw
                    .handle_instance_packet(now, *id, &buf[..tx.len], &mut out)
                    .unwrap_or_else(|r| panic!("instance {i}: {r}"));
                let m = identity(&buf[..tx.len]) != identity(&out[..len]);
                assert_eq!(
                    *moved.entry((i, tx.dst)).or_insert(m),
                    m,
                    "one identity per flow"
                );
                lab.handle_packet(now, Port(0), &out[..len]);
                probes += 1;
            }
            events[i].extend(std::iter::from_fn(|| e.poll_event()));
        }
        if engines.iter().all(|(_, e)| e.is_idle()) {
            break;
        }
        now = engines
            .iter()
            .map(|(_, e)| e.poll_timeout())
            .chain([lab.poll_timeout()])
            .flatten()
            .min()
            .expect("a deadline");
        while let Some((_, len)) = lab.poll_transmit(now, &mut buf) {
            from_lab += 1;
            let (to, n) = fw
                .handle_upstream_packet(now, &buf[..len], &mut out)
                .expect("every reply the lab sends belongs to an instance");
            engines[index[&to]].1.handle_packet(now, &out[..n]);
        }
        for (_, e) in &mut engines {
            e.handle_timeout(now);
        }
    }

    // Counted: nothing refused or dropped, every lab reply delivered, every delivered
    // reply matched by the engine it went to.
    let s = fw.stats();
    let matched: u64 = engines.iter().map(|(_, e)| e.stats().replies).sum();
    let foreign: u64 = engines.iter().map(|(_, e)| e.stats().unmatched).sum();
    assert_eq!(
        (s.forwarded, s.dropped_rate, s.table_full, s.invalid),
        (probes, 0, 0, 0)
    );
    assert_eq!((s.delivered, s.unmatched), (from_lab, 0));
    assert_eq!((matched, foreign), (from_lab, 0), "misdelivered replies");
    assert!(s.rewrites > 0, "equal seeds must conflict");
    let rewritten = moved.values().filter(|&&m| m).count();
    assert_eq!(s.rewrites, rewritten as u64);

    // Every trace is the direct one; a UDP or TCP flow whose port moved may take the
    // other branch of an ECMP diamond (the lab hashes ports, as routers do), and then
    // follows a path the truth lists. A Paris ICMP flow whose ident moved may not: the
    // lab hashes its checksum, which the forwarder keeps.
    let mut direct_replies = 0;
    let mut ecmp_moves = 0;
    for (i, spec) in specs.iter().enumerate() {
        let (want, replies) = direct(spec, public);
        direct_replies += replies;
        let got = traces(std::mem::take(&mut events[i]));
        assert_eq!(got.len(), truth.destinations.len());
        for (dst, t) in &got {
            assert_eq!(t.src, IpAddr::V4(spec.addr));
            let d = &want[dst];
            assert_eq!(
                (t.sport, t.icmp_sum),
                (d.sport, d.icmp_sum),
                "the engine's own flow"
            );
            if shown(t) == shown(d) {
                continue;
            }
            let IpAddr::V4(v4) = *dst else { unreachable!() };
            let paths = &truth.destination(v4).unwrap().forward_paths;
            assert!(
                moved[&(i, *dst)] && paths.len() > 1 && spec.method != Method::IcmpParis,
                "instance {i} to {dst}: {:#?} != {:#?}",
                shown(t),
                shown(d)
            );
            let seen: Vec<Ipv4Addr> = t
                .hops
                .iter()
                .filter_map(|h| match h.addr {
                    IpAddr::V4(a) if a != v4 => Some(a),
                    _ => None,
                })
                .collect();
            assert!(
                paths
                    .iter()
                    .any(|p| seen.iter().all(|a| p.iter().any(|h| h.addr == *a))),
                "instance {i} to {dst}: {seen:?} is on no path of the truth"
            );
            ecmp_moves += 1;
        }
    }
    assert_eq!(
        direct_replies, from_lab,
        "as many replies as direct runs get"
    );
    println!(
        "{} engines, {} traces, {probes} probes, {from_lab} replies delivered, 0 lost, 0 \
         misdelivered; {} identity conflicts, {ecmp_moves} moved flows on the other ECMP branch",
        specs.len(),
        specs.len() * truth.destinations.len(),
        s.rewrites
    );

    // Idle mappings go.
    assert_eq!(s.mappings, moved.len());
    let later = now + fw.config().mapping_idle;
    assert!(fw.poll_timeout().is_some_and(|t| t <= later));
    fw.handle_timeout(later);
    assert_eq!(
        (fw.stats().mappings, fw.stats().expired),
        (0, moved.len() as u64)
    );
    assert_eq!(fw.poll_timeout(), None);
}
