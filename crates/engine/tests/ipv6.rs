//! IPv6 in the engine (`ipv6-probe`): an ICMP echo ping to an IPv6 destination builds
//! ICMPv6 echo requests (hop limit, ident, sequence, tag), takes ICMPv6 echo replies and
//! errors that quote its probes, and records them as scamper does (reply protocol 58);
//! traces of every method go hop limit by hop limit with one flow (flow label, ports,
//! checksum) and stop on ICMPv6's numbers or the destination's TCP answer; pings of
//! every method are answered; path MTU discovery follows packets too big; `-R` (no
//! record route in IPv6) is refused by name. Through the in-process lab ([`support`]), an IPv6 trace to every destination
//! of every case topology records what the lab answers (the lab's own tracer is checked
//! against the truth): routers, RFC 4950 labels in ICMPv6, quoted and reply hop limits,
//! across every tunnel class.
#![cfg(feature = "ipv6-probe")]

mod support;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use vtnt_engine::{
    Config, Engine, Event, Instant, Measurement, MeasurementError, Method, NoSource, PingOptions,
    Record, StopReason, Trace, TraceOptions, MAX_PROBE_SIZE,
};
use vtnt_wire::build::{Echo, IcmpError, Tcp};
use vtnt_wire::ipv6::{self, Ip6, HEADER_LEN};
use vtnt_wire::{build6, checksum, icmp6_type, proto, tcp_flags};

const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 2);
const ROUTER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);

/// An engine whose lookup gives [`SRC`] for IPv6 destinations, none for IPv4 ones.
fn engine() -> Engine {
    let mut config = Config::new(Ipv4Addr::UNSPECIFIED);
    config.burst = 10;
    let mut e = Engine::new(config).unwrap();
    e.set_source_lookup(Box::new(|dst: IpAddr| match dst {
        IpAddr::V6(_) => Ok(IpAddr::V6(SRC)),
        IpAddr::V4(_) => Err(NoSource("no route to it")),
    }));
    e
}

fn ping(count: u16, ttl: u8) -> Measurement {
    let mut o = PingOptions::new(IpAddr::V6(DST));
    o.count = count;
    o.ttl = ttl;
    o.interval = Duration::from_millis(10);
    o.timeout = Duration::from_millis(100);
    Measurement::Ping(o)
}

/// Runs the engine to its end, answering each probe with the packets of `answer`; the
/// ping's record.
fn run(e: &mut Engine, answer: impl FnMut(&[u8]) -> Vec<Vec<u8>>) -> vtnt_engine::Ping {
    let Record::Ping(p) = run_any(e, answer) else {
        panic!("a ping's record")
    };
    p
}

/// [`run`] for any measurement; its record.
fn run_any(e: &mut Engine, mut answer: impl FnMut(&[u8]) -> Vec<Vec<u8>>) -> Record {
    let mut buf = [0u8; MAX_PROBE_SIZE as usize];
    let mut now = Instant::from_millis(1);
    loop {
        while let Some(tx) = e.poll_transmit(now, &mut buf) {
            assert_eq!(tx.dst, IpAddr::V6(DST));
            for reply in answer(&buf[..tx.len]) {
                e.handle_packet(now + Duration::from_millis(2), &reply);
            }
        }
        if let Some(Event::Finished { record, .. }) = e.poll_event() {
            return record;
        }
        now = e
            .poll_timeout()
            .expect("a running measurement has a deadline");
        e.handle_timeout(now);
    }
}

/// The destination's echo reply to `probe`: its ident, sequence and payload back.
fn echo_reply(probe: &[u8]) -> Vec<u8> {
    let m = &probe[HEADER_LEN..];
    let ip = Ip6 {
        src: DST,
        dst: SRC,
        hop_limit: 62,
        traffic_class: 0,
        flow_label: 0,
    };
    let e = Echo {
        icmp_type: icmp6_type::ECHO_REPLY,
        ident: u16::from_be_bytes([m[4], m[5]]),
        seq: u16::from_be_bytes([m[6], m[7]]),
        payload: &m[8..],
        checksum: None,
    };
    let mut out = vec![0u8; 1500];
    let n = build6::icmp6_echo(&mut out, &ip, &e).unwrap();
    out.truncate(n);
    out
}

/// `from`'s ICMPv6 error `(type, code)` quoting as much of `original` as fits in
/// IPv6's minimum MTU, as RFC 4443 asks (a packet too big's MTU: 1280).
fn icmp6_error(from: Ipv6Addr, (icmp_type, code): (u8, u8), original: &[u8]) -> Vec<u8> {
    let ip = Ip6 {
        src: from,
        dst: SRC,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut out = vec![0u8; 1500];
    let err = IcmpError {
        icmp_type,
        code,
        original,
        quote_len: original.len().min(1280 - HEADER_LEN - 8),
        mpls: &[],
    };
    let n = build6::icmp6_error(&mut out, &ip, &err).unwrap();
    if icmp_type == icmp6_type::PACKET_TOO_BIG {
        out[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&1280u32.to_be_bytes());
        fix_icmp6_checksum(&mut out[..n]);
    }
    out[..n].to_vec()
}

/// Recomputes the ICMPv6 checksum of the packet `p` after its bytes changed.
fn fix_icmp6_checksum(p: &mut [u8]) {
    let h = ipv6::header(p).unwrap();
    let m = &mut p[HEADER_LEN..];
    m[2..4].fill(0);
    let pseudo = vtnt_wire::checksum::pseudo_v6(h.src, h.dst, proto::ICMPV6, m.len() as u32);
    let c = !vtnt_wire::checksum::add(vtnt_wire::checksum::sum(m), pseudo);
    m[2..4].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn an_icmp_echo_ping_to_an_ipv6_destination_is_answered() {
    let mut e = engine();
    e.start(Instant::ZERO, ping(3, 64)).unwrap();
    let mut seqs = Vec::new();
    let p = run(&mut e, |probe| {
        let h = ipv6::header(probe).unwrap();
        assert_eq!((h.src, h.dst), (SRC, DST));
        assert_eq!((h.hop_limit, h.protocol), (64, proto::ICMPV6));
        assert_eq!(probe.len(), 104, "scamper's IPv6 ping size: 40 + 8 + 56");
        assert_eq!(probe[HEADER_LEN], icmp6_type::ECHO_REQUEST);
        seqs.push(u16::from_be_bytes([probe[46], probe[47]]));
        vec![echo_reply(probe)]
    });
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!((p.src, p.dst), (IpAddr::V6(SRC), IpAddr::V6(DST)));
    assert_eq!((p.probe_size, p.ping_sent), (104, 3));
    let got: Vec<_> = p
        .responses
        .iter()
        .map(|r| {
            (
                r.from,
                r.seq,
                r.reply_proto,
                r.icmp,
                r.reply_ttl,
                r.reply_size,
            )
        })
        .collect();
    let want: Vec<_> = (0..3)
        .map(|seq| {
            let icmp = Some((icmp6_type::ECHO_REPLY, 0));
            (IpAddr::V6(DST), seq, proto::ICMPV6, icmp, 62, 104)
        })
        .collect();
    assert_eq!(got, want);
}

/// A router's time exceeded quoting the probe is the probe's reply; one quoting an ident
/// the engine did not send, or one with IPv4's type number (11), is not.
#[test]
fn icmpv6_errors_quoting_a_probe_are_matched() {
    let mut e = engine();
    e.start(Instant::ZERO, ping(2, 1)).unwrap();
    let p = run(&mut e, |probe| {
        let error = |icmp_type, original: &[u8]| icmp6_error(ROUTER, (icmp_type, 0), original);
        // IPv4's time exceeded type (11) is no ICMPv6 error, and another ident no probe
        let mut other = probe.to_vec();
        other[HEADER_LEN + 4] ^= 0xff;
        vec![
            error(11, probe),
            error(icmp6_type::TIME_EXCEEDED, &other),
            error(icmp6_type::TIME_EXCEEDED, probe),
        ]
    });
    let got: Vec<_> = p
        .responses
        .iter()
        .map(|r| (r.from, r.seq, r.reply_proto, r.icmp))
        .collect();
    let te = Some((icmp6_type::TIME_EXCEEDED, 0));
    let want = [
        (IpAddr::V6(ROUTER), 0, proto::ICMPV6, te),
        (IpAddr::V6(ROUTER), 1, proto::ICMPV6, te),
    ];
    assert_eq!(got, want);
}

/// `-M` over IPv6: scamper's search with ICMPv6's numbers. The trace ends at the
/// destination's port unreachable; then a router answers the interface-sized probe
/// (1500 bytes, hop limit 255, no don't-fragment bit: IPv6 has none) with a packet too
/// big of MTU 1400, and the 1400-byte probe reaches the destination: path MTU 1400,
/// one PTB note resting on the router's reply.
#[cfg(feature = "pmtud")]
#[test]
fn path_mtu_discovery_follows_packet_too_big() {
    let mut e = engine();
    let mut o = TraceOptions::new(IpAddr::V6(DST)).with_method(Method::UdpParis);
    (o.pmtud, o.if_mtu, o.attempts) = (true, 1500, 1);
    e.start(Instant::ZERO, Measurement::Trace(o)).unwrap();
    let mut sent = Vec::new();
    let record = run_any(&mut e, |probe| {
        let (size, hop_limit) = (probe.len(), probe[7]);
        sent.push((size, hop_limit));
        let unreach = (icmp6_type::DEST_UNREACH, 4);
        let reply = match (size, hop_limit) {
            (_, 1) => icmp6_error(ROUTER, (icmp6_type::TIME_EXCEEDED, 0), probe),
            (1500, _) => {
                let mut ptb = icmp6_error(ROUTER, (icmp6_type::PACKET_TOO_BIG, 0), probe);
                ptb[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&1400u32.to_be_bytes());
                fix_icmp6_checksum(&mut ptb);
                ptb
            }
            _ => icmp6_error(DST, unreach, probe),
        };
        vec![reply]
    });
    let Record::Trace(t) = record else {
        panic!("a trace's record")
    };
    assert_eq!(sent, [(60, 1), (60, 2), (1500, 255), (1400, 255)]);
    assert_eq!(t.stop_reason, StopReason::Completed);
    let d = t.pmtud_result.expect("a PMTUD section");
    assert_eq!((d.ifmtu, d.pmtu, d.outmtu), (1500, 1400, 0));
    let hops: Vec<_> = d
        .hops
        .iter()
        .map(|h| (h.addr, h.probe_size, h.icmp, h.nhmtu))
        .collect();
    let ptb = Some((icmp6_type::PACKET_TOO_BIG, 0));
    let unreach = Some((icmp6_type::DEST_UNREACH, 4));
    assert_eq!(
        hops,
        [
            (IpAddr::V6(ROUTER), 1500, ptb, 1400),
            (IpAddr::V6(DST), 1400, unreach, 0)
        ]
    );
    let note = vtnt_record::PmtudNote {
        kind: vtnt_record::PmtudNoteKind::Ptb,
        nhmtu: 1400,
        hop: Some(0),
    };
    assert_eq!(d.notes, [note]);
}

#[test]
fn record_route_over_ipv6_is_refused_by_name() {
    let want = "IPv6 destinations are never pinged with -R (IPv6 has no record-route option)";
    let mut rr = PingOptions::new(IpAddr::V6(DST));
    rr.record_route = true;
    let err = engine()
        .start(Instant::ZERO, Measurement::Ping(rr))
        .unwrap_err();
    assert_eq!(err, MeasurementError::Ipv6Unsupported);
    assert_eq!(err.to_string(), want);
    // a source of the other family is no source
    let mut e = Engine::new(Config::new(Ipv4Addr::new(192, 0, 2, 1))).unwrap();
    let err = e.start(Instant::ZERO, ping(1, 64)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no source address for 2001:db8:3::2: the source address is of the other family"
    );
}

fn trace(method: Method) -> TraceOptions {
    let mut o = TraceOptions::new(IpAddr::V6(DST)).with_method(method);
    o.attempts = 1;
    o.wait = Duration::from_millis(100);
    o
}

/// Runs `o` to its end, answering a probe of hop limit `h` with `answer(h, probe)`;
/// the trace's record and every probe sent.
fn run_trace(
    o: TraceOptions,
    mut answer: impl FnMut(u8, &[u8]) -> Vec<Vec<u8>>,
) -> (vtnt_engine::Trace, Vec<Vec<u8>>) {
    let mut e = engine();
    e.start(Instant::ZERO, Measurement::Trace(o)).unwrap();
    let mut probes = Vec::new();
    let r = run_any(&mut e, |probe| {
        probes.push(probe.to_vec());
        answer(ipv6::header(probe).unwrap().hop_limit, probe)
    });
    let Record::Trace(t) = r else {
        panic!("a trace's record")
    };
    (t, probes)
}

/// What the trace recorded of a hop: address, hop limit, ICMPv6 type and code, the
/// quoted hop limit and length, the next-hop MTU.
type HopFacts = (IpAddr, u8, Option<(u8, u8)>, Option<(u8, u16)>, u16);

/// The [`HopFacts`] of every hop of `t`.
fn hops(t: &vtnt_engine::Trace) -> Vec<HopFacts> {
    t.hops
        .iter()
        .map(|h| {
            let q = h.quoted.as_ref().map(|q| (q.ttl, q.ip_len));
            (h.addr, h.probe_ttl, h.icmp, q, h.nhmtu)
        })
        .collect()
}

const ROUTER2: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);

/// An icmp-paris trace: ICMPv6 echo requests of scamper's IPv6 size (60) with hop limits
/// 1, 2, ..., one flow label and one checksum for all (Paris), a router's time exceeded
/// at hop 1 and the destination's echo reply at hop 2, which completes it.
#[test]
fn an_icmp_paris_trace_to_an_ipv6_destination_completes_on_the_echo_reply() {
    let (t, probes) = run_trace(trace(Method::IcmpParis), |h, probe| match h {
        1 => vec![icmp6_error(ROUTER, (icmp6_type::TIME_EXCEEDED, 0), probe)],
        _ => vec![echo_reply(probe)],
    });
    assert_eq!((t.stop_reason.name(), t.stop_data), ("COMPLETED", 0));
    assert_eq!((t.probe_size, t.probe_count, t.hop_count), (60, 2, 2));
    let te = Some((icmp6_type::TIME_EXCEEDED, 0));
    let er = Some((icmp6_type::ECHO_REPLY, 0));
    assert_eq!(
        hops(&t),
        [
            (IpAddr::V6(ROUTER), 1, te, Some((1, 60)), 0),
            (IpAddr::V6(DST), 2, er, None, 0)
        ]
    );
    let label = ipv6::header(&probes[0]).unwrap().flow_label;
    assert_ne!(label, 0, "a flow label of its own");
    for (i, p) in probes.iter().enumerate() {
        let h = ipv6::header(p).unwrap();
        assert_eq!(
            (h.hop_limit as usize, h.flow_label, p.len()),
            (i + 1, label, 60)
        );
        assert_eq!(
            (p[HEADER_LEN], &p[HEADER_LEN + 2..HEADER_LEN + 4]),
            (
                icmp6_type::ECHO_REQUEST,
                &probes[0][HEADER_LEN + 2..HEADER_LEN + 4]
            ),
            "one checksum"
        );
    }
    assert_eq!(
        t.icmp_sum,
        u16::from_be_bytes([probes[0][42], probes[0][43]])
    );
}

/// A udp-paris trace: UDP datagrams with constant ports (33435) and flow label, the
/// probe number in the checksum; a packet too big at hop 2 is recorded with its MTU and
/// stops nothing, the destination's port unreachable (ICMPv6 1/4) completes the trace.
#[test]
fn a_udp_paris_trace_to_an_ipv6_destination_completes_on_port_unreachable() {
    let (t, probes) = run_trace(trace(Method::UdpParis), |h, probe| {
        let (from, icmp) = match h {
            1 => (ROUTER, (icmp6_type::TIME_EXCEEDED, 0)),
            2 => (ROUTER2, (icmp6_type::PACKET_TOO_BIG, 0)),
            _ => (DST, (icmp6_type::DEST_UNREACH, 4)),
        };
        vec![icmp6_error(from, icmp, probe)]
    });
    assert_eq!((t.stop_reason.name(), t.stop_data), ("COMPLETED", 0));
    assert_eq!((t.probe_size, t.dport), (60, 33435));
    assert_eq!(
        hops(&t),
        [
            (IpAddr::V6(ROUTER), 1, Some((3, 0)), Some((1, 60)), 0),
            (IpAddr::V6(ROUTER2), 2, Some((2, 0)), Some((2, 60)), 1280),
            (IpAddr::V6(DST), 3, Some((1, 4)), Some((3, 60)), 0),
        ]
    );
    let label = ipv6::header(&probes[0]).unwrap().flow_label;
    assert_ne!(label, 0, "a flow label of its own");
    for (i, p) in probes.iter().enumerate() {
        let h = ipv6::header(p).unwrap();
        assert_eq!((h.protocol, h.flow_label, p.len()), (proto::UDP, label, 60));
        let u = &p[HEADER_LEN..];
        assert_eq!(
            &u[..4],
            &probes[0][HEADER_LEN..HEADER_LEN + 4],
            "one pair of ports"
        );
        assert_eq!(
            u16::from_be_bytes([u[6], u[7]]) as usize,
            i + 1,
            "numbered by checksum"
        );
    }
}

/// ICMPv6's numbers, not ICMP's: an address unreachable (1/3, which over IPv4 would be
/// a port unreachable) stops a udp-paris trace as UNREACH with its code; an ICMPv4
/// time exceeded's number (11) is no ICMPv6 error.
#[test]
fn an_ipv6_trace_stops_on_icmpv6_numbers() {
    let (t, _) = run_trace(trace(Method::UdpParis), |h, probe| match h {
        1 => vec![
            icmp6_error(ROUTER, (11, 0), probe),
            icmp6_error(ROUTER, (icmp6_type::TIME_EXCEEDED, 0), probe),
        ],
        _ => vec![icmp6_error(ROUTER2, (icmp6_type::DEST_UNREACH, 3), probe)],
    });
    assert_eq!((t.stop_reason.name(), t.stop_data), ("UNREACH", 3));
    assert_eq!(t.hops.len(), 2);
    // with a payload, as scamper's -p: 48 bytes of headers and the payload
    let o = TraceOptions::new(IpAddr::V6(DST)).with_payload(vec![1, 2]);
    assert_eq!(o.probe_size, 50);
}

/// The destination's TCP answer to the TCP `probe` (`flags`: SYN-ACK or RST): ports
/// swapped, acknowledging the probe's sequence number for a SYN, or (`flags` RST to an
/// ACK) with the probe's acknowledgment number as its sequence number.
fn tcp_answer(probe: &[u8], flags: u8) -> Vec<u8> {
    let t = &probe[HEADER_LEN..];
    let be32 = |at: usize| u32::from_be_bytes(t[at..at + 4].try_into().unwrap());
    let syn = t[13] & tcp_flags::SYN != 0;
    let (seq, ack) = if syn {
        (7, be32(4).wrapping_add(1))
    } else {
        (be32(8), 0)
    };
    let ip = Ip6 {
        src: DST,
        dst: SRC,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let tcp = Tcp {
        sport: u16::from_be_bytes([t[2], t[3]]),
        dport: u16::from_be_bytes([t[0], t[1]]),
        seq,
        ack,
        flags,
        window: 0,
    };
    let mut b = vec![0u8; 60];
    let n = build6::tcp6(&mut b, &ip, &tcp).unwrap();
    b.truncate(n);
    b
}

/// A tcp trace: SYNs of scamper's IPv6 size (60: no payload) from one source port to
/// the trace's port with one flow label, numbered by their sequence numbers; a router's time
/// exceeded quotes the TCP header at hop 1, the destination's SYN-ACK completes the
/// trace at hop 2. A tcp-ack trace sends ACKs and completes on the RST, which carries
/// the probe's acknowledgment number back.
#[test]
fn tcp_traces_to_an_ipv6_destination_complete_on_the_destinations_answer() {
    let te = Some((icmp6_type::TIME_EXCEEDED, 0));
    for (method, probe_flags, answer) in [
        (Method::Tcp, tcp_flags::SYN, tcp_flags::SYN | tcp_flags::ACK),
        (Method::TcpAck, tcp_flags::ACK, tcp_flags::RST),
    ] {
        let (t, probes) = run_trace(trace(method), |h, probe| match h {
            1 => vec![icmp6_error(ROUTER, (icmp6_type::TIME_EXCEEDED, 0), probe)],
            _ => vec![tcp_answer(probe, answer)],
        });
        assert_eq!((t.stop_reason.name(), t.probe_size), ("COMPLETED", 60));
        assert_eq!(
            hops(&t),
            [
                (IpAddr::V6(ROUTER), 1, te, Some((1, 60)), 0),
                (IpAddr::V6(DST), 2, None, None, 0)
            ],
            "{method:?}"
        );
        assert_eq!(t.hops[1].tcp_flags, Some(answer));
        let label = ipv6::header(&probes[0]).unwrap().flow_label;
        assert_ne!(label, 0, "a flow label of its own");
        for p in &probes {
            let h = ipv6::header(p).unwrap();
            assert_eq!((h.protocol, h.flow_label, p.len()), (proto::TCP, label, 60));
            let s = &p[HEADER_LEN..];
            assert_eq!(
                &s[..4],
                &probes[0][HEADER_LEN..HEADER_LEN + 4],
                "one pair of ports"
            );
            assert_eq!(
                (u16::from_be_bytes([s[2], s[3]]), s[13]),
                (t.dport, probe_flags)
            );
        }
        assert_ne!(
            probes[0][HEADER_LEN + 4..HEADER_LEN + 8],
            probes[1][HEADER_LEN + 4..HEADER_LEN + 8]
        );
    }
}

/// A tcp ping with a payload (`-s 70`: 10 bytes after the TCP header): every probe is
/// answered by the destination's RST, which may acknowledge the payload too; its
/// checksum covers the payload.
#[test]
fn a_tcp_ping_to_an_ipv6_destination_takes_the_rst() {
    let Measurement::Ping(mut o) = ping(2, 64) else {
        unreachable!()
    };
    o.set_method(Method::Tcp);
    o.probe_size = 70;
    let mut e = engine();
    e.start(Instant::ZERO, Measurement::Ping(o)).unwrap();
    let mut sent = Vec::new();
    let p = run(&mut e, |probe| {
        sent.push(probe.to_vec());
        let mut rst = tcp_answer(probe, tcp_flags::RST | tcp_flags::ACK);
        let ack = u32::from_be_bytes(rst[48..52].try_into().unwrap()) + 10;
        rst[48..52].copy_from_slice(&ack.to_be_bytes());
        let t = &mut rst[HEADER_LEN..];
        t[16..18].fill(0);
        let c = !checksum::add(
            checksum::sum(t),
            checksum::pseudo_v6(DST, SRC, proto::TCP, 20),
        );
        t[16..18].copy_from_slice(&c.to_be_bytes());
        vec![rst]
    });
    let got: Vec<_> = p
        .responses
        .iter()
        .map(|r| (r.seq, r.reply_proto, r.tcp_flags))
        .collect();
    let flags = Some(tcp_flags::RST | tcp_flags::ACK);
    assert_eq!(got, [(0, proto::TCP, flags), (1, proto::TCP, flags)]);
    for s in &sent {
        assert_eq!(s.len(), 70);
        let ip = ipv6::header(s).unwrap();
        let t = &s[HEADER_LEN..];
        let sum = checksum::add(
            checksum::sum(t),
            checksum::pseudo_v6(ip.src, ip.dst, proto::TCP, t.len() as u32),
        );
        assert_eq!(sum, 0xffff, "the checksum covers the payload");
    }
}

/// A udp-dport ping sends probe n to port `dport + n - 1`; the destination's port
/// unreachable quotes that port.
#[test]
fn a_udp_dport_ping_to_an_ipv6_destination_counts_its_port() {
    let Measurement::Ping(mut o) = ping(3, 64) else {
        unreachable!()
    };
    o.set_method(Method::UdpDport);
    let dport = 33500;
    o.dport = Some(dport);
    let mut e = engine();
    e.start(Instant::ZERO, Measurement::Ping(o)).unwrap();
    let mut ports = Vec::new();
    let p = run(&mut e, |probe| {
        ports.push(u16::from_be_bytes([
            probe[HEADER_LEN + 2],
            probe[HEADER_LEN + 3],
        ]));
        vec![icmp6_error(DST, (icmp6_type::DEST_UNREACH, 4), probe)]
    });
    assert_eq!(ports, [dport, dport + 1, dport + 2]);
    let got: Vec<_> = p.responses.iter().map(|r| (r.seq, r.icmp)).collect();
    let pu = Some((icmp6_type::DEST_UNREACH, 4));
    assert_eq!(got, [(0, pu), (1, pu), (2, pu)]);
}

/// The reference topology and every case topology (`topologies/cases/`): name and lab.
fn lab_topologies() -> Vec<(String, vtnt_lab::Topology)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut v = vec![("reference".to_string(), vtnt_lab::Topology::reference())];
    v.extend(files.iter().map(|f| {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        (name, vtnt_lab::Topology::load(f).unwrap())
    }));
    v
}

/// The engine's ICMP-Paris IPv6 trace to `dst` from the first vantage point of `topo`,
/// under a virtual clock.
fn lab_trace(topo: &vtnt_lab::Topology, src: Ipv6Addr, dst: Ipv6Addr) -> Trace {
    let mut e = Engine::new(Config::new(Ipv4Addr::UNSPECIFIED)).unwrap();
    e.set_source_lookup(Box::new(move |_| Ok(IpAddr::V6(src))));
    let mut o = TraceOptions::new(IpAddr::V6(dst)).with_method(Method::IcmpParis);
    o.wait = Duration::from_secs(1);
    let t0 = Instant::from_millis(1_000);
    e.start(t0, Measurement::Trace(o)).unwrap();
    let mut wire = support::wire::Wire::of(topo.clone());
    let mut out = support::drive::run(&mut e, &mut wire, t0);
    let Some((_, _, Record::Trace(t))) = out.pop() else {
        panic!("a trace's record")
    };
    t
}

#[test]
fn ipv6_traces_through_the_lab_record_every_tunnel_class_as_the_lab_answers() {
    use vtnt_lab::addr::to_v6;
    use vtnt_lab::tracer::Tracer;
    use vtnt_lab::{Lab, TunnelClass};
    let (mut classes, mut labelled) = (Vec::new(), 0);
    for (name, topo) in lab_topologies() {
        let truth = Lab::new(topo.clone()).truth();
        let src = truth.vantage_points[0].addr6;
        // the case whose answers return over equal-cost paths (a flow hash each)
        let split_returns = name == "ecmp-returns";
        for d in truth.destinations.iter().filter(|d| {
            d.vantage_point == truth.vantage_points[0].name && d.forward_paths.len() <= 1
        }) {
            let t = lab_trace(&topo, src, to_v6(d.dst));
            let mut lab = Lab::new(topo.clone());
            let mut tracer = Tracer::new(&mut lab);
            tracer.ipv6 = true;
            let want = tracer.trace(d.dst, 30);
            let what = format!("{name}, {}", d.name);
            assert_eq!(t.stop_reason, StopReason::Completed, "{what}");
            let got: Vec<_> = t.hops.iter().filter(|h| h.probe_id == 1).collect();
            let answered: Vec<_> = want.iter().flatten().collect();
            assert_eq!(got.len(), answered.len(), "{what}: hops answered");
            for (h, a) in got.iter().zip(&answered) {
                let at = format!("{what}, hop {}", a.probe_ttl);
                assert_eq!(h.probe_ttl, a.probe_ttl, "{at}");
                assert_eq!(h.addr, IpAddr::V6(to_v6(a.from)), "{at}: who answers");
                assert_eq!(h.icmp, Some((a.icmp_type, a.icmp_code)), "{at}: what");
                assert_eq!(h.quoted.map(|q| q.ttl), a.q_ttl, "{at}: quoted hop limit");
                let labels: Vec<_> = h.mpls.iter().map(|l| (l.label, l.ttl)).collect();
                assert_eq!(labels, a.labels, "{at}: RFC 4950 labels");
                labelled += usize::from(!labels.is_empty());
                if !split_returns {
                    assert_eq!(h.reply_ttl, a.reply_ttl, "{at}: reply hop limit");
                }
            }
            // every LSR of an explicit tunnel shows its labels; an implicit one's none
            for tun in d.tunnels.iter().filter(|t| t.whole) {
                classes.push(tun.class);
                for &l in &tun.lsrs {
                    let Some(h) = got.iter().find(|h| h.addr == IpAddr::V6(to_v6(l))) else {
                        continue;
                    };
                    match tun.class {
                        TunnelClass::Explicit => assert!(!h.mpls.is_empty(), "{what}: {l}"),
                        TunnelClass::Implicit => assert!(h.mpls.is_empty(), "{what}: {l}"),
                        _ => {}
                    }
                }
            }
        }
    }
    for c in TunnelClass::ALL {
        assert!(classes.contains(&c), "no {c:?} tunnel crossed");
    }
    assert!(labelled >= 10, "only {labelled} hops with labels");
}
