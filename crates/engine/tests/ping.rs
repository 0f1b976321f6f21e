//! Ping against the lab: the three methods, timing, duplicates, reordering and
//! TTL-limited pings.

mod support;

use std::net::IpAddr;
use std::time::Duration;

use support::drive::run;
use support::topo::{chain, path, DST, SRC};
use support::wire::Wire;
use vtnt_engine::{Config, Engine, Instant, Measurement, Method, Ping, PingOptions, Record};
use vtnt_lab::TopologyDef;
use vtnt_wire::{icmp_type, proto, tcp_flags};

const T0: Instant = Instant::from_millis(5_000_000);

/// Two routers and the host, TCP port 443 open.
fn topology() -> TopologyDef {
    let mut def = chain(2);
    def.hosts[0].tcp_open = vec![443];
    def
}

fn ping_with(o: PingOptions, tweak: impl FnOnce(&mut Wire)) -> (Ping, Instant, Engine) {
    let mut e = Engine::new(Config {
        pps: 100,
        ..Config::new(SRC)
    })
    .unwrap();
    let mut wire = Wire::new(topology());
    tweak(&mut wire);
    e.start(T0, Measurement::Ping(o)).unwrap();
    let mut out = run(&mut e, &mut wire, T0);
    assert_eq!(out.len(), 1);
    let (_, at, Record::Ping(p)) = out.pop().unwrap() else {
        panic!("not a ping")
    };
    (p, at, e)
}

fn opts(m: Method) -> PingOptions {
    PingOptions::new(IpAddr::V4(DST)).with_method(m)
}

#[test]
fn icmp_ping_four_probes_a_second_apart() {
    let (p, finished, _) = ping_with(opts(Method::IcmpParis), |_| {});
    assert_eq!((p.ping_sent, p.probe_size, p.ttl), (4, 84, 64));
    assert_eq!(p.responses.len(), 4);
    for (i, r) in p.responses.iter().enumerate() {
        assert_eq!(r.seq, i as u16);
        assert_eq!(r.from, IpAddr::V4(DST));
        assert_eq!(r.tx, T0 + Duration::from_secs(i as u64));
        assert_eq!(r.rtt, Duration::from_millis(6));
        assert_eq!(
            (r.icmp, r.tcp_flags, r.reply_proto),
            (Some((icmp_type::ECHO_REPLY, 0)), None, proto::ICMP)
        );
        // Consecutive IP IDs from the engine's tag.
        let first = p.responses[0].probe_ipid;
        assert_eq!(
            (r.reply_ttl, r.reply_size, r.probe_ipid),
            (62, 84, first + i as u16)
        );
    }
    // finished one timeout after the last probe
    assert_eq!(finished, T0 + Duration::from_secs(3) + p.timeout);
    assert_eq!(p.start, T0);
}

#[test]
fn udp_ping_gets_port_unreachables() {
    let (p, _, _) = ping_with(opts(Method::UdpParis), |_| {});
    assert_eq!(p.responses.len(), 4);
    assert!(p
        .responses
        .iter()
        .all(|r| r.icmp == Some((icmp_type::DEST_UNREACH, 3))));
    assert_eq!(p.dport, 33435);
}

#[test]
fn tcp_ping_gets_rst_or_syn_ack() {
    let (p, _, _) = ping_with(opts(Method::Tcp), |_| {});
    assert_eq!(p.probe_size, 40);
    assert_eq!(p.responses.len(), 4);
    assert!(p
        .responses
        .iter()
        .all(|r| r.tcp_flags == Some(tcp_flags::RST | tcp_flags::ACK)));
    assert!(p
        .responses
        .iter()
        .all(|r| r.reply_proto == proto::TCP && r.icmp.is_none()));
    let mut o = opts(Method::Tcp);
    o.dport = Some(443);
    o.probe_size = 60;
    let (p, _, _) = ping_with(o, |_| {});
    assert_eq!(p.responses.len(), 4);
    assert!(p
        .responses
        .iter()
        .all(|r| r.tcp_flags == Some(tcp_flags::SYN | tcp_flags::ACK)));
}

/// tcp-ack: RSTs numbered by the acknowledgment number they bring back, or, with `-A`,
/// taken for the last probe; udp-dport: one port per probe; an ICMP ping's `-d`: the
/// first sequence number. Every probe is answered and matched either way.
#[test]
fn tcp_ack_udp_dport_and_first_seq_pings_match_every_reply() {
    let answered = |o: PingOptions| ping_with(o, |_| {}).0;
    let seqs = |p: &Ping| p.responses.iter().map(|r| r.seq).collect::<Vec<_>>();
    let p = answered(opts(Method::TcpAck));
    assert_eq!(seqs(&p), [0, 1, 2, 3]);
    assert!(p
        .responses
        .iter()
        .all(|r| r.tcp_flags == Some(tcp_flags::RST)));
    assert_eq!(p.tcp_ack, p.tcp_seq, "the first probe's, which numbers it");
    let mut o = opts(Method::TcpAck);
    o.tcp_ack = Some(12345);
    let p = answered(o);
    assert_eq!((seqs(&p), p.tcp_ack), (vec![0, 1, 2, 3], 12345));

    let mut o = opts(Method::UdpDport);
    o.dport = Some(4000);
    let p = answered(o);
    assert_eq!((seqs(&p), p.dport), (vec![0, 1, 2, 3], 4000));
    assert!(p.responses.iter().all(|r| r.icmp == Some((3, 3))));

    let mut o = opts(Method::IcmpParis);
    o.dport = Some(65534);
    let p = answered(o);
    assert_eq!((seqs(&p), p.dport), (vec![0, 1, 2, 3], 65534));
}

#[test]
fn duplicates_are_recorded_like_scamper() {
    for m in [Method::IcmpParis, Method::UdpParis, Method::Tcp] {
        let (p, _, e) = ping_with(opts(m), |w| w.duplicate = true);
        assert_eq!(p.responses.len(), 8, "{m:?}");
        let seqs: Vec<u16> = p.responses.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(e.stats().replies, 8);
    }
}

#[test]
fn reordered_replies_keep_their_sequence_numbers() {
    let mut o = opts(Method::IcmpParis);
    o.count = 3;
    o.timeout = Duration::from_secs(2);
    let (p, _, _) = ping_with(o, |w| {
        w.shaper = Some(Box::new(|v| {
            Some(if v.number == 1 {
                Duration::from_millis(1500)
            } else {
                Duration::ZERO
            })
        }))
    });
    let got: Vec<(u16, Duration)> = p.responses.iter().map(|r| (r.seq, r.rtt)).collect();
    assert_eq!(
        got,
        vec![
            (1, Duration::from_millis(6)),
            (0, Duration::from_millis(1506)),
            (2, Duration::from_millis(6)),
        ]
    );
}

#[test]
fn replies_after_the_timeout_are_not_recorded() {
    let mut o = opts(Method::UdpParis);
    o.count = 2;
    let (p, _, _) = ping_with(o, |w| {
        w.shaper = Some(Box::new(|v| {
            Some(if v.number == 2 {
                Duration::from_secs(3)
            } else {
                Duration::ZERO
            })
        }))
    });
    assert_eq!(p.responses.len(), 1);
    assert_eq!(p.ping_sent, 2);
}

#[test]
fn ttl_limited_ping_records_time_exceeded() {
    let mut o = opts(Method::IcmpParis);
    o.ttl = 2;
    o.count = 2;
    let (p, _, _) = ping_with(o, |_| {});
    assert_eq!(p.responses.len(), 2);
    let second = path(&Wire::new(topology()).truth(), DST)[1];
    for r in &p.responses {
        assert_eq!(r.from, second);
        assert_eq!(r.icmp, Some((icmp_type::TIME_EXCEEDED, 0)));
        assert_eq!(r.rtt, Duration::from_millis(4));
    }
}

#[test]
fn lost_replies_are_just_missing() {
    let mut o = opts(Method::Tcp);
    o.count = 5;
    o.interval = Duration::from_millis(10);
    let (p, _, _) = ping_with(o, |w| {
        w.shaper = Some(Box::new(|v| (v.number % 2 == 1).then_some(Duration::ZERO)))
    });
    assert_eq!(p.ping_sent, 5);
    let seqs: Vec<u16> = p.responses.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![0, 2, 4]);
}
