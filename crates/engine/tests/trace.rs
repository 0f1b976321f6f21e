//! Traceroute semantics against the lab: hops, RTTs, timeouts and attempts, every stop
//! reason, forwarding loops versus invisible UHP duplicates, MPLS labels, reordered and
//! duplicated replies, and Paris flow constancy for all three methods.

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use support::drive::run;
use support::topo::{chain, lsp, path, DST, SRC};
use support::wire::Wire;
use vtnt_engine::{
    Config, Engine, Instant, Measurement, Method, MplsLabel, Record, StopReason, Trace,
    TraceOptions,
};
use vtnt_lab::{LspDef, Pop, RouteDef, TopologyDef};
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{checksum, icmp_type, tcp_flags};

const T0: Instant = Instant::from_millis(1_000_000);

fn engine() -> Engine {
    Engine::new(Config {
        pps: 1000,
        ..Config::new(SRC)
    })
    .unwrap()
}

fn opts(method: Method) -> TraceOptions {
    let mut o = TraceOptions::new(IpAddr::V4(DST)).with_method(method);
    o.wait = Duration::from_secs(1);
    o
}

/// Runs one trace over the lab running `def`; returns it with the wire (for the probes
/// sent).
fn trace_with(
    o: TraceOptions,
    def: TopologyDef,
    tweak: impl FnOnce(&mut Wire),
) -> (Trace, Wire, Engine) {
    let mut e = engine();
    let mut wire = Wire::new(def);
    tweak(&mut wire);
    e.start(T0, Measurement::Trace(o)).unwrap();
    let mut out = run(&mut e, &mut wire, T0);
    assert_eq!(out.len(), 1);
    let Record::Trace(t) = out.pop().unwrap().2 else {
        panic!("not a trace")
    };
    (t, wire, e)
}

fn trace(o: TraceOptions, def: TopologyDef) -> Trace {
    trace_with(o, def, |_| {}).0
}

/// The routers' addresses a traceroute to [`DST`] meets, TTL 1 first, from the truth.
fn routers(def: &TopologyDef) -> Vec<IpAddr> {
    path(&Wire::new(def.clone()).truth(), DST)
}

/// A chain of `n` routers whose links (the vantage point's too) take 10 ms each way.
fn slow_chain(n: u8) -> TopologyDef {
    let mut def = chain(n);
    def.vantage_points[0].delay_ms = 10.0;
    for l in &mut def.links {
        l.delay_ms = 10.0;
    }
    def
}

const fn dst() -> IpAddr {
    IpAddr::V4(DST)
}

fn addrs(t: &Trace) -> Vec<(u8, u8, IpAddr)> {
    t.hops
        .iter()
        .map(|h| (h.probe_ttl, h.probe_id, h.addr))
        .collect()
}

#[test]
fn icmp_trace_records_hops_rtts_and_reply_fields() {
    let r = routers(&chain(3));
    let t = trace(opts(Method::IcmpParis), chain(3));
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!((t.hop_count, t.probe_count, t.firsthop), (4, 4, 1));
    assert_eq!(
        addrs(&t),
        vec![(1, 1, r[0]), (2, 1, r[1]), (3, 1, r[2]), (4, 1, dst())]
    );
    for (i, h) in t.hops.iter().enumerate() {
        assert_eq!(h.rtt, Duration::from_millis(2 * (i as u64 + 1)), "hop {i}");
        assert_eq!(h.probe_size, 44);
    }
    let te = &t.hops[1];
    assert_eq!(te.icmp, Some((icmp_type::TIME_EXCEEDED, 0)));
    // The lab quotes up to 128 bytes: the whole 44-byte probe.
    assert_eq!((te.reply_ttl, te.reply_size), (254, 20 + 8 + 44));
    let q = te.quoted.unwrap();
    assert_eq!((q.ttl, q.ip_len, q.tos), (1, 44, 0));
    assert!(te.mpls.is_empty());
    let last = &t.hops[3];
    assert_eq!(last.icmp, Some((icmp_type::ECHO_REPLY, 0)));
    assert_eq!((last.reply_ttl, last.quoted), (61, None));
    assert_eq!(t.start, T0);
    assert_eq!(t.hops[0].tx, T0);
    assert!(t.icmp_sum != 0);
    assert!(t.sport >= 0x8000, "the echo ident of the probes");
    assert_eq!((t.dport, t.hoplimit), (0, 0));
}

#[test]
fn udp_trace_completes_on_port_unreachable() {
    let t = trace(opts(Method::UdpParis), chain(2));
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!(t.hops.len(), 3);
    assert_eq!(t.hops[2].addr, IpAddr::V4(DST));
    assert_eq!(t.hops[2].icmp, Some((icmp_type::DEST_UNREACH, 3)));
    assert_eq!(t.hops[2].quoted.unwrap().ttl, 1);
    assert_eq!(t.dport, 33435);
    assert!(t.sport >= 0x8000);
    assert_eq!(t.icmp_sum, 0);
}

#[test]
fn tcp_trace_completes_on_rst_and_on_syn_ack() {
    let t = trace(opts(Method::Tcp), chain(2));
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!(t.probe_size, 40);
    let last = t.hops.last().unwrap();
    assert_eq!((last.addr, last.icmp), (IpAddr::V4(DST), None));
    assert_eq!(last.tcp_flags, Some(tcp_flags::RST | tcp_flags::ACK));
    assert_eq!(t.dport, 33435);

    // 44-byte SYNs carry 4 bytes of data, which the RST acknowledges too.
    let mut o = opts(Method::Tcp);
    o.probe_size = 44;
    let t = trace(o, chain(2));
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!(t.hops.len(), 3);

    let mut def = chain(2);
    def.hosts[0].tcp_open = vec![443];
    let mut o = opts(Method::Tcp);
    o.dport = Some(443);
    let t = trace(o, def);
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!(t.hops[2].tcp_flags, Some(tcp_flags::SYN | tcp_flags::ACK));
    assert_eq!(t.dport, 443);
}

#[test]
fn tcp_ack_trace_completes_on_rst() {
    let (t, wire, _) = trace_with(opts(Method::TcpAck), chain(2), |_| {});
    assert_eq!(
        (t.stop_reason, t.method),
        (StopReason::Completed, Method::TcpAck)
    );
    assert_eq!(addrs(&t).len(), 3);
    let last = t.hops.last().unwrap();
    assert_eq!((last.addr, last.tcp_flags), (dst(), Some(tcp_flags::RST)));
    assert!(wire.sent.iter().all(|(_, p)| p[33] == tcp_flags::ACK));
}

/// `-G 2`: after the gap limit, TTL-255 probes; a reply ends the trace (still GAPLIMIT)
/// and is kept apart; without one every attempt goes out, `wait` apart.
#[test]
fn last_ditch_probes_follow_the_gap_limit() {
    let mut def = chain(2);
    def.routers.iter_mut().for_each(|r| r.silent = true);
    let mut o = opts(Method::UdpParis);
    (o.gaplimit, o.attempts, o.last_ditch) = (2, 1, true);
    let t = trace(o.clone(), def.clone());
    assert_eq!(t.stop_reason, StopReason::GapLimit);
    assert_eq!((t.hop_count, t.probe_count, t.hops.len()), (2, 3, 0));
    let ld: Vec<_> = t
        .lastditch
        .iter()
        .map(|h| (h.probe_ttl, h.probe_id, h.addr))
        .collect();
    assert_eq!(ld, [(255, 1, dst())]);
    assert!(t.last_ditch);

    def.hosts[0].silent = true;
    o.attempts = 2;
    let (t, wire, _) = trace_with(o, def, |_| {});
    assert_eq!(t.stop_reason, StopReason::GapLimit);
    assert_eq!((t.probe_count, t.lastditch.len()), (6, 0));
    let at: Vec<u64> = wire
        .sent
        .iter()
        .filter(|(_, p)| p[8] == 255)
        .map(|(at, _)| at.as_micros())
        .collect();
    assert_eq!(at.len(), 2);
    assert_eq!(at[1] - at[0], 1_000_000);
}

#[test]
fn silent_hop_gets_every_attempt_wait_apart() {
    let mut def = chain(4);
    def.routers[1].silent = true;
    let mut o = opts(Method::UdpParis);
    o.attempts = 3;
    let (t, wire, _) = trace_with(o, def, |_| {});
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!(t.probe_count, 1 + 3 + 3);
    assert_eq!(t.hop_count, 5);
    assert!(t.hops.iter().all(|h| h.probe_ttl != 2));
    let ttl2: Vec<Instant> = wire
        .sent
        .iter()
        .filter(|(_, p)| p[8] == 2)
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(ttl2.len(), 3);
    assert_eq!(ttl2[1].as_micros() - ttl2[0].as_micros(), 1_000_000);
    assert_eq!(ttl2[2].as_micros() - ttl2[1].as_micros(), 1_000_000);
    // the next TTL leaves as soon as the last attempt timed out
    let ttl3 = wire.sent.iter().find(|(_, p)| p[8] == 3).unwrap().0;
    assert_eq!(ttl3.as_micros() - ttl2[2].as_micros(), 1_000_000);
}

#[test]
fn gap_limit_stops_after_consecutive_silent_hops() {
    let mut def = chain(2);
    def.hosts[0].silent = true;
    let mut o = opts(Method::IcmpParis);
    o.gaplimit = 3;
    o.attempts = 1;
    let t = trace(o, def);
    assert_eq!(t.stop_reason, StopReason::GapLimit);
    assert_eq!((t.hop_count, t.probe_count, t.hops.len()), (5, 5, 2));
}

#[test]
fn gap_limit_counts_from_first_ttl() {
    let mut def = chain(1);
    def.routers[0].silent = true;
    def.hosts[0].silent = true;
    let mut o = opts(Method::IcmpParis);
    o.first_ttl = 4;
    o.gaplimit = 2;
    o.attempts = 1;
    let t = trace(o, def);
    assert_eq!(t.stop_reason, StopReason::GapLimit);
    assert_eq!((t.firsthop, t.hop_count, t.probe_count), (4, 5, 2));
}

/// A gap limit of 0 is none, as scamper's: silent hops go on to the hop limit.
#[test]
fn a_gap_limit_of_zero_is_no_limit() {
    let mut def = chain(2);
    def.hosts[0].silent = true;
    let mut o = opts(Method::IcmpParis);
    o.gaplimit = 0;
    o.attempts = 1;
    o.max_ttl = 12;
    let t = trace(o, def);
    assert_eq!(t.stop_reason, StopReason::HopLimit);
    assert_eq!((t.hop_count, t.hops.len()), (12, 2));
}

#[test]
fn hop_limit_stops_at_max_ttl() {
    let mut o = opts(Method::UdpParis);
    o.max_ttl = 4;
    let t = trace(o, chain(10));
    assert_eq!(t.stop_reason, StopReason::HopLimit);
    assert_eq!((t.hop_count, t.hoplimit, t.hops.len()), (4, 4, 4));
    // also when the last hop is silent
    let mut def = chain(10);
    def.routers[3].silent = true;
    let mut o = opts(Method::UdpParis);
    o.max_ttl = 4;
    let t = trace(o, def);
    assert_eq!(t.stop_reason, StopReason::HopLimit);
    assert_eq!((t.hop_count, t.hops.len(), t.probe_count), (4, 3, 5));
}

/// `chain(4)` with a static route at r3 sending [`DST`]'s traffic back to r2, whose IGP
/// route leads to r3: a forwarding loop.
fn looping() -> TopologyDef {
    let mut def = chain(4);
    def.routes.push(RouteDef {
        router: "r3".into(),
        prefix: "203.0.113.0/24".into(),
        via: "r2".into(),
    });
    def
}

#[test]
fn loop_stops_when_an_address_returns_at_a_non_adjacent_ttl() {
    // r1, r2, r3, r2, r3, ...: r2 answers TTL 2 from its link to r1 and TTL 4 from its
    // link to r3, so the first address to return is r3's, at TTL 5 (seen at 3); the
    // second is r2's at TTL 6 (seen at 4).
    let p = routers(&looping());
    assert_ne!(p[3], p[1]);
    assert_eq!((p[4], p[5]), (p[2], p[3]));
    let t = trace(opts(Method::IcmpParis), looping());
    assert_eq!(t.stop_reason, StopReason::Loop);
    assert_eq!(t.hop_count, 5);
    assert_eq!(t.hops[4].addr, p[2]);

    let mut o = opts(Method::IcmpParis);
    o.loops = 2;
    let t = trace(o, looping());
    assert_eq!(t.stop_reason, StopReason::Loop);
    assert_eq!(t.hop_count, 6);

    let mut o = opts(Method::IcmpParis);
    o.loops = 0; // no loop detection: the trace goes round until the hop limit ends it
    o.attempts = 1;
    o.max_ttl = 12;
    let t = trace(o, looping());
    assert_eq!(t.stop_reason, StopReason::HopLimit);
    assert_eq!(t.hop_count, 12);
    let seen: Vec<IpAddr> = t.hops.iter().map(|h| h.addr).collect();
    assert_eq!(seen, p[..12]);
}

#[test]
fn same_address_at_consecutive_ttls_is_not_a_loop() {
    // An invisible UHP tunnel r2-r3-r4: the egress r4 forwards the probe that reaches it
    // with TTL 1, so r5 answers two TTLs in a row.
    let mut def = chain(6);
    def.lsps.push(LspDef {
        ttl_propagate: false,
        pop: Pop::Uhp,
        egress_forwards_ttl1: true,
        ..lsp("r2", "r4")
    });
    let truth = Wire::new(def.clone()).truth();
    let d = truth.destination(DST).unwrap();
    // r5, the hop after the egress, answers TTL 3 (the ingress r2 answers TTL 2) and 4.
    let names: Vec<&str> = d.forward.iter().map(|h| h.router.as_str()).collect();
    assert_eq!(names[1..5], ["r2", "r3", "r4", "r5"]);
    let twice = IpAddr::V4(d.forward[4].addr);
    // Six routers less the hidden LSR and egress, r5 twice, and the host.
    let hops = d.forward.len() as u8 - 2 + 1 + 1;
    for m in [Method::IcmpParis, Method::UdpParis, Method::Tcp] {
        let t = trace(opts(m), def.clone());
        assert_eq!(t.stop_reason, StopReason::Completed, "{m:?}");
        assert_eq!(t.hop_count, hops);
        assert_eq!(
            (t.hops[2].addr, t.hops[3].addr, t.hops[2].probe_ttl),
            (twice, twice, 3)
        );
    }
}

#[test]
fn destination_unreachable_from_a_router_stops_with_its_code() {
    // An address of the host's LAN nobody has: r3 answers host unreachable, from the
    // address it answered TTL 3 from.
    let r = routers(&chain(3));
    let mut o = opts(Method::UdpParis);
    o.dst = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9));
    let t = trace(o, chain(3));
    assert_eq!(t.stop_reason, StopReason::Unreach);
    assert_eq!(t.stop_data, 1);
    assert_eq!(t.hop_count, 4);
    assert_eq!(t.hops[3].addr, r[2]);
    assert_eq!(t.hops[3].icmp, Some((icmp_type::DEST_UNREACH, 1)));
}

#[test]
fn mpls_labels_and_quoted_fields_are_recorded() {
    // An explicit tunnel r1-r2-r3: its LSR r2 answers TTL 2 quoting its label (RFC 4950)
    // with the LSE-TTL the ingress copied from the probe's.
    let mut def = chain(4);
    def.lsps.push(lsp("r1", "r3"));
    let truth = Wire::new(def.clone()).truth();
    let lsrs = &truth.destination(DST).unwrap().tunnels[0].lsrs;
    let t = trace(opts(Method::IcmpParis), def);
    let h = &t.hops[1];
    assert_eq!(
        vec![h.addr],
        lsrs.iter().map(|&a| IpAddr::V4(a)).collect::<Vec<_>>()
    );
    let label = h.mpls.first().map_or(0, |l| l.label);
    assert!(label >= 16, "not a reserved label: {label}");
    assert_eq!(
        h.mpls,
        vec![MplsLabel {
            label,
            exp: 0,
            bottom: true,
            ttl: 1
        }]
    );
    // The quote padded to 128 bytes (RFC 4884), then the extension: header, object
    // header, one entry.
    assert_eq!(h.reply_size, 20 + 8 + 128 + 8 + 4);
    assert_eq!(h.quoted.unwrap().ip_len, 44);
    assert!(t.hops[0].mpls.is_empty());
}

#[test]
fn late_replies_are_matched_by_what_they_quote_not_by_order() {
    // 10 ms links: TTL 2 answers in 40 ms. The first TTL-2 probe (probe 2) is answered
    // after 160 ms, past the 100 ms wait, so attempt 2 (probe 3) leaves; its answer is
    // held for 240 ms. Attempt 1's late answer arrives first and ends the hop; attempt
    // 2's arrives while TTL 3 is probed and is recorded as a late reply.
    let def = slow_chain(4);
    let mut o = opts(Method::IcmpParis);
    o.wait = Duration::from_millis(100);
    let (t, _, _) = trace_with(o, def, |wire| {
        wire.shaper = Some(Box::new(|p| {
            Some(Duration::from_millis(match p.number {
                2 => 120,
                3 => 100,
                _ => 0,
            }))
        }))
    });
    assert_eq!(t.stop_reason, StopReason::Completed);
    let ttl2: Vec<_> = t.hops.iter().filter(|h| h.probe_ttl == 2).collect();
    assert_eq!(ttl2.len(), 2);
    assert_eq!(
        (ttl2[0].probe_id, ttl2[0].rtt),
        (1, Duration::from_millis(160))
    );
    assert_eq!(
        (ttl2[1].probe_id, ttl2[1].rtt),
        (2, Duration::from_millis(140))
    );
    assert_eq!(t.probe_count, 6);
    assert_eq!(t.hop_count, 5);
    // hops stay ordered by TTL then attempt
    let keys: Vec<_> = t.hops.iter().map(|h| (h.probe_ttl, h.probe_id)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn duplicated_replies_are_recorded_once() {
    for m in [Method::IcmpParis, Method::UdpParis, Method::Tcp] {
        let plain = trace(opts(m), chain(3));
        let (dup, mut wire, mut e) = trace_with(opts(m), chain(3), |w| w.duplicate = true);
        assert_eq!(addrs(&plain), addrs(&dup), "{m:?}");
        assert_eq!(plain.hops.len(), dup.hops.len());
        // The copy of the last reply arrives after the trace ended: unmatched.
        let later = Instant::from_millis(2_000_000);
        for (t, p) in wire.arrivals(later) {
            e.handle_packet(t, &p);
        }
        assert_eq!(e.stats().replies, 2 * 4 - 1);
        assert_eq!(e.stats().unmatched, 1);
    }
}

#[test]
fn wait_probe_spaces_the_probes_of_one_trace() {
    let mut o = opts(Method::UdpParis);
    o.wait_probe = Duration::from_millis(50);
    let (t, wire, _) = trace_with(o, chain(3), |_| {});
    assert_eq!(t.wait_probe, Duration::from_millis(50));
    for w in wire.sent.windows(2) {
        assert!(w[1].0.as_micros() - w[0].0.as_micros() >= 50_000);
    }
}

/// Every probe of a trace keeps the fields load balancers hash: for ICMP type, code,
/// checksum and ident; for UDP and TCP the ports. The probe number varies.
#[test]
fn paris_flow_fields_are_constant_for_every_probe() {
    let mut def = chain(6);
    def.routers[2].silent = true;
    def.routers[4].silent = true;
    for m in [Method::IcmpParis, Method::UdpParis, Method::Tcp] {
        let mut o = opts(m);
        o.attempts = 3;
        let (t, wire, _) = trace_with(o, def.clone(), |_| {});
        assert_eq!(t.stop_reason, StopReason::Completed);
        assert_eq!(wire.sent.len(), t.probe_count as usize);
        assert_eq!(wire.sent.len(), 1 + 1 + 3 + 1 + 3 + 1 + 1);
        let mut flows = std::collections::BTreeSet::new();
        let mut numbers = Vec::new();
        for (_, p) in &wire.sent {
            assert_eq!(checksum::sum(&p[..20]), 0xffff, "IP checksum");
            let r = reply::parse(p).unwrap();
            assert_eq!(r.len, 44.min(t.probe_size));
            match r.body {
                Body::Echo {
                    icmp_type,
                    ident,
                    seq,
                    checksum: c,
                    ..
                } => {
                    assert_eq!(checksum::sum(&p[20..]), 0xffff, "ICMP checksum");
                    flows.insert((icmp_type as u32, p[21] as u32, c as u32, ident as u32));
                    assert_eq!(c, t.icmp_sum);
                    assert_eq!(ident, t.sport, "the record keeps the echo ident");
                    numbers.push(seq as u32);
                }
                Body::Udp {
                    sport,
                    dport,
                    checksum: c,
                    ..
                } => {
                    flows.insert((sport as u32, dport as u32, 0, 0));
                    numbers.push(c as u32);
                }
                Body::Tcp {
                    sport,
                    dport,
                    seq,
                    flags,
                    ..
                } => {
                    assert_eq!(flags, tcp_flags::SYN);
                    // The engine's tag in the high 16 bits is constant too.
                    flows.insert((sport as u32, dport as u32, seq >> 16, 0));
                    numbers.push(seq & 0xffff);
                }
                other => panic!("unexpected probe {other:?}"),
            }
        }
        assert_eq!(flows.len(), 1, "{m:?}: one flow for all probes");
        assert_eq!(
            numbers,
            (1..=wire.sent.len() as u32).collect::<Vec<_>>(),
            "{m:?}"
        );
    }
}

#[test]
fn concurrent_traces_to_one_destination_keep_apart() {
    let mut e = engine();
    let mut def = chain(3);
    def.routers[1].silent = true;
    let hop = routers(&def);
    let mut wire = Wire::new(def);
    let mut ids = Vec::new();
    for m in [
        Method::IcmpParis,
        Method::IcmpParis,
        Method::UdpParis,
        Method::UdpParis,
        Method::Tcp,
        Method::Tcp,
    ] {
        let mut o = opts(m);
        o.userid = ids.len() as u32;
        ids.push(e.start(T0, Measurement::Trace(o)).unwrap());
    }
    let out = run(&mut e, &mut wire, T0);
    assert_eq!(out.len(), 6);
    let mut flows = std::collections::BTreeSet::new();
    for (id, _, r) in out {
        let Record::Trace(t) = r else { panic!() };
        assert_eq!(ids[t.userid as usize], id);
        assert_eq!(t.stop_reason, StopReason::Completed);
        assert_eq!(
            addrs(&t),
            vec![(1, 1, hop[0]), (3, 1, hop[2]), (4, 1, dst())]
        );
        flows.insert((t.sport, t.icmp_sum));
    }
    assert_eq!(flows.len(), 6);
    assert_eq!(e.stats().unmatched, 0);
}

#[test]
fn foreign_packets_are_counted_unmatched() {
    let (_, _, mut e) = trace_with(opts(Method::UdpParis), chain(1), |_| {});
    let before = e.stats();
    // A time exceeded quoting somebody else's UDP probe.
    let mut probe = [0u8; 64];
    let ip = vtnt_wire::build::Ip {
        src: SRC,
        dst: DST,
        ttl: 1,
        tos: 0,
        ipid: 1,
    };
    let n = vtnt_wire::build::udp(
        &mut probe,
        &ip,
        &vtnt_wire::build::Udp {
            sport: 1234,
            dport: 33435,
            payload: &[0; 16],
            checksum: Some(1),
        },
    )
    .unwrap();
    let rip = vtnt_wire::build::Ip {
        src: ip.dst,
        dst: SRC,
        ttl: 64,
        tos: 0,
        ipid: 9,
    };
    let mut b = [0u8; 200];
    let m = vtnt_wire::build::icmp_error(
        &mut b,
        &rip,
        &vtnt_wire::build::IcmpError {
            icmp_type: 11,
            code: 0,
            original: &probe[..n],
            quote_len: 28,
            mpls: &[],
        },
    )
    .unwrap();
    e.handle_packet(T0, &b[..m]);
    e.handle_packet(T0, &probe[..n]);
    e.handle_packet(T0, &[]);
    assert_eq!(e.stats().unmatched, before.unmatched + 3);
    assert_eq!(e.stats().replies, before.replies);
}

#[test]
fn a_buffer_too_small_for_the_probe_ends_the_trace_with_an_error() {
    let mut e = engine();
    let id = e
        .start(T0, Measurement::Trace(opts(Method::UdpParis)))
        .unwrap();
    let mut small = [0u8; 40];
    assert_eq!(e.poll_transmit(T0, &mut small), None);
    let Some(vtnt_engine::Event::Finished {
        id: got,
        record: Record::Trace(t),
    }) = e.poll_event()
    else {
        panic!("no record")
    };
    assert_eq!(
        (got, t.stop_reason, t.probe_count),
        (id, StopReason::Error, 0)
    );
    assert!(e.is_idle());
}

/// `-Q`: every attempt of every hop is sent and recorded, answered or not, and the trace
/// still completes at the destination; `--payload` sets the probes' bytes and size.
#[test]
fn all_attempts_sends_every_attempt_and_payload_sizes_the_probes() {
    let r = routers(&chain(3));
    let mut o = opts(Method::UdpParis).with_payload(vec![0xde, 0xad, 0xbe, 0xef, 1]);
    o.attempts = 3;
    o.all_attempts = true;
    let (t, wire, _) = trace_with(o, chain(3), |_| {});
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert!(t.all_attempts);
    assert_eq!(t.probe_count, 12, "three attempts at each of four TTLs");
    let want: Vec<(u8, u8, IpAddr)> = (1..=4u8)
        .flat_map(|ttl| {
            let a = r.get(usize::from(ttl) - 1).copied().unwrap_or(dst());
            (1..=3u8).map(move |id| (ttl, id, a))
        })
        .collect();
    assert_eq!(addrs(&t), want);
    assert_eq!(t.probe_size, 33);
    assert_eq!(wire.sent.len(), 12);
    for (_, p) in &wire.sent {
        assert_eq!(p.len(), 33);
        // UDP payload: two checksum-pinning bytes, then the rest of ours
        assert_eq!(&p[30..33], &[0xbe, 0xef, 1]);
    }
}

/// `-N 3` over 10 ms links: three TTLs leave at once and each reply lets one more go, so
/// when the destination answers TTL 4 the probes to TTLs 5 and 6 are still out; as in
/// scamper their replies are recorded too and `hop_count` is the highest TTL answered.
/// The hops up to the destination are those of the one-at-a-time trace.
#[test]
fn squeries_keep_several_ttls_in_flight() {
    let def = slow_chain(3);
    let mut o = opts(Method::UdpParis);
    o.attempts = 1;
    let serial = trace(o.clone(), def.clone());
    o.squeries = 3;
    let (t, wire, _) = trace_with(o, def, |_| {});
    assert_eq!(t.stop_reason, StopReason::Completed);
    assert_eq!((serial.hop_count, t.hop_count, t.probe_count), (4, 6, 6));
    assert_eq!(t.squeries, 3);
    assert_eq!(addrs(&t)[..4], addrs(&serial)[..]);
    assert!(t.hops[4..].iter().all(|h| h.addr == dst()), "{t:?}");
    // the first three probes left before any reply came back
    let first_reply = T0 + t.hops[0].rtt;
    assert!(wire.sent[..3].iter().all(|(at, _)| *at < first_reply));
}

/// `-N 2` with silent routers beyond the first: retries before new TTLs, and the gap
/// limit once nothing is in flight, after the same probes as one at a time.
#[test]
fn squeries_stop_at_the_gap_limit_like_one_at_a_time() {
    let mut def = chain(6);
    def.vantage_points[0].delay_ms = 10.0;
    let mut o = opts(Method::UdpParis);
    o.gaplimit = 3;
    let silence =
        |w: &mut Wire| w.shaper = Some(Box::new(|p| (p.ttl <= 1).then_some(Duration::ZERO)));
    let (serial, _, _) = trace_with(o.clone(), def.clone(), silence);
    o.squeries = 2;
    let (t, _, _) = trace_with(o, def, silence);
    assert_eq!(t.stop_reason, StopReason::GapLimit);
    assert_eq!(
        (t.hop_count, t.probe_count, addrs(&t)),
        (serial.hop_count, serial.probe_count, addrs(&serial))
    );
    assert_eq!((t.hop_count, t.probe_count), (4, 7));
}

/// `-c 95` and `-c 99`: every hop (one interface each) takes scamper's count for one
/// interface, 6 or 8 probes, whatever `-q` says, all answered.
#[test]
fn confidence_probes_each_hop_by_the_table() {
    for (level, per_hop) in [(95, 6), (99, 8)] {
        let mut o = opts(Method::IcmpParis);
        (o.attempts, o.confidence) = (1, level);
        let t = trace(o, chain(3));
        assert_eq!(t.stop_reason, StopReason::Completed);
        assert_eq!((t.hop_count, t.probe_count), (4, 4 * per_hop), "{level}");
        assert_eq!(t.hops.len(), usize::from(4 * per_hop));
        assert_eq!(t.confidence, level);
    }
}

/// `-M` runs only in a build with the `pmtud` feature (the Linux driver's) and where the
/// driver gave the interface's MTU; anything else is refused when the job starts, naming
/// the option, rather than traced without it.
#[test]
fn pmtud_needs_the_feature_and_the_interface_mtu() {
    let mut o = opts(Method::UdpParis);
    o.pmtud = true;
    let e = engine()
        .start(T0, Measurement::Trace(o.clone()))
        .unwrap_err();
    assert!(e.to_string().contains("pmtud"), "{e}");
    o.if_mtu = 1500;
    let started = engine().start(T0, Measurement::Trace(o));
    assert_eq!(started.is_ok(), cfg!(feature = "pmtud"), "{started:?}");
}

/// `halt` (the daemon's, scamper's): a trace probing ends now with stop reason HALTED and
/// the probes it sent; one still queued is dropped, never started.
#[test]
fn halt_ends_a_trace_with_what_it_sent() {
    let mut e = Engine::new(Config {
        pps: 1000,
        max_active: 1,
        ..Config::new(SRC)
    })
    .unwrap();
    e.start(T0, Measurement::Trace(opts(Method::IcmpParis)))
        .unwrap();
    e.start(T0, Measurement::Trace(opts(Method::UdpParis)))
        .unwrap();
    let mut buf = [0u8; 1500];
    assert!(e.poll_transmit(T0, &mut buf).is_some());
    e.halt(T0);
    let Some(vtnt_engine::Event::Finished {
        record: Record::Trace(t),
        ..
    }) = e.poll_event()
    else {
        panic!("no halted trace")
    };
    assert_eq!(t.stop_reason, StopReason::Halted);
    assert_eq!(t.probe_count, 1);
    assert!(e.poll_event().is_none(), "the queued trace never started");
    assert!(e.is_idle());
}
