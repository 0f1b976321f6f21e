//! IPv6 in the engine (`ipv6-probe`): an ICMP echo ping to an IPv6 destination builds
//! ICMPv6 echo requests (hop limit, ident, sequence, tag), takes ICMPv6 echo replies and
//! errors that quote its probes, and records them as scamper does (reply protocol 58);
//! what is not built over IPv6 yet (traces, other methods, `-R`) is refused by name.
#![cfg(feature = "ipv6-probe")]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use vtnt_engine::{
    Config, Engine, Event, Instant, Measurement, MeasurementError, Method, NoSource, PingOptions,
    Record, TraceOptions, MAX_PROBE_SIZE,
};
use vtnt_wire::build::{Echo, IcmpError};
use vtnt_wire::ipv6::{self, Ip6, HEADER_LEN};
use vtnt_wire::{build6, icmp6_type, proto};

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
/// record.
fn run(e: &mut Engine, mut answer: impl FnMut(&[u8]) -> Vec<Vec<u8>>) -> vtnt_engine::Ping {
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
            let Record::Ping(p) = record else {
                panic!("a ping's record")
            };
            return p;
        }
        now = e.poll_timeout().expect("a running ping has a deadline");
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
        let ip = Ip6 {
            src: ROUTER,
            dst: SRC,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        };
        let error = |icmp_type, original: &[u8]| {
            let mut out = vec![0u8; 1500];
            let err = IcmpError {
                icmp_type,
                code: 0,
                original,
                quote_len: original.len(),
                mpls: &[],
            };
            let n = build6::icmp6_error(&mut out, &ip, &err).unwrap();
            out[..n].to_vec()
        };
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

#[test]
fn what_is_not_built_over_ipv6_is_refused_by_name() {
    let want = "IPv6 destinations are probed by ICMP echo pings only (no traces, other \
                methods or -R yet)";
    let mut udp = PingOptions::new(IpAddr::V6(DST));
    udp.set_method(Method::UdpParis);
    let mut rr = PingOptions::new(IpAddr::V6(DST));
    rr.record_route = true;
    let refused = [
        Measurement::Trace(TraceOptions::new(IpAddr::V6(DST))),
        Measurement::Ping(udp),
        Measurement::Ping(rr),
    ];
    for m in refused {
        let mut e = engine();
        let err = e.start(Instant::ZERO, m).unwrap_err();
        assert_eq!(err, MeasurementError::Ipv6Unsupported);
        assert_eq!(err.to_string(), want);
    }
    // a source of the other family is no source
    let mut e = Engine::new(Config::new(Ipv4Addr::new(192, 0, 2, 1))).unwrap();
    let err = e.start(Instant::ZERO, ping(1, 64)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no source address for 2001:db8:3::2: the source address is of the other family"
    );
}
