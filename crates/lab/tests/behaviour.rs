//! Router and host behaviour outside the tunnel classes: per-flow ECMP (Paris keeps a
//! path, classic traceroute does not), asymmetric return paths, delays, rate limits,
//! silent routers, UDP and TCP answers, static routes and forwarding loops, the sans-IO
//! call order, and no panic on garbage.

use std::net::Ipv4Addr;

use vtnt_lab::tracer::Tracer;
use vtnt_lab::{Instant, Lab, Port, Topology};
use vtnt_wire::build::{tcp, udp, Ip, Tcp, Udp};
use vtnt_wire::reply::{parse, Body};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// r1 -> {r2 | r3} -> r4 -> host; r2-r4 costs 10 forward, 30 back (so replies return via
/// r3 only); r3 rate-limited to 2 ICMP/s, r5 silent behind r4.
const SMALL: &str = r#"
name = "small"
[[vantage-point]]
name = "vp"
address = "192.0.2.2/24"
gateway = "192.0.2.1"
router = "r1"
[[router]]
name = "r1"
vendor = "cisco"
[[router]]
name = "r2"
vendor = "juniper"
[[router]]
name = "r3"
vendor = "linux"
icmp-rate = 2
[[router]]
name = "r4"
vendor = "nokia"
[[router]]
name = "r5"
vendor = "cisco"
silent = true
[[link]]
a = "r1"
b = "r2"
prefix = "100.64.0.0/30"
cost-back = 30
[[link]]
a = "r1"
b = "r3"
prefix = "100.64.0.4/30"
delay-ms = 3.0
[[link]]
a = "r2"
b = "r4"
prefix = "100.64.0.8/30"
[[link]]
a = "r3"
b = "r4"
prefix = "100.64.0.12/30"
[[link]]
a = "r4"
b = "r5"
prefix = "100.64.0.16/30"
[[host]]
name = "h"
address = "198.51.100.2/30"
gateway = "198.51.100.1"
router = "r5"
tcp-open = [443]
"#;

fn small() -> Lab {
    Lab::new(Topology::parse(SMALL, "small.toml").unwrap())
}

#[test]
fn paris_flows_keep_their_path_and_flows_spread_over_ecmp() {
    let mut lab = small();
    let mut t = Tracer::new(&mut lab);
    let mut seen = std::collections::BTreeSet::new();
    for flow in 1..40u16 {
        t.flow = flow;
        let a = t.probe(ip("198.51.100.2"), 2);
        let Some(a) = a else { continue }; // r3 is rate limited
        seen.insert(a.from);
        // same flow, same path
        for _ in 0..3 {
            if let Some(b) = t.probe(ip("198.51.100.2"), 2) {
                assert_eq!(b.from, a.from, "flow {flow}");
            }
            t.now = t.now + std::time::Duration::from_secs(1);
        }
    }
    assert_eq!(
        seen,
        [ip("100.64.0.2"), ip("100.64.0.6")].into_iter().collect()
    );
    let truth = t.lab.truth();
    assert_eq!(truth.destinations[0].forward_paths.len(), 2);
}

#[test]
fn asymmetric_costs_make_the_return_path_differ() {
    let lab = small();
    let d = lab.truth().destinations[0].clone();
    // Return r4 -> r2 -> r1 costs 10 + 30 = 40, r4 -> r3 -> r1 20: replies come via r3.
    let back: Vec<&str> = d.return_path.iter().map(|h| h.router.as_str()).collect();
    assert_eq!(back, ["r5", "r4", "r3", "r1"]);
}

#[test]
fn delays_add_up_and_poll_timeout_says_when() {
    let mut lab = small();
    let mut b = [0u8; 64];
    let p = Ip {
        src: ip("192.0.2.2"),
        dst: ip("100.64.0.6"),
        ttl: 64,
        tos: 0,
        ipid: 1,
    };
    let n = vtnt_wire::build::icmp_echo(
        &mut b,
        &p,
        &vtnt_wire::build::Echo {
            icmp_type: 8,
            ident: 1,
            seq: 1,
            payload: &[0; 4],
            checksum: None,
        },
    )
    .unwrap();
    lab.handle_packet(Instant::from_millis(10), Port(0), &b[..n]);
    // 0.05 ms to r1, then r1 answers?  No: 100.64.0.6 is r3's side of r1-r3 (3 ms).
    // Echo request VP -> r1 -> r3: 0.05 + 3 ms; reply r3 -> r1 -> VP: 3 + 0.05 ms.
    let due = lab.poll_timeout().unwrap();
    assert_eq!(due, Instant::from_micros(10_000 + 6_100));
    let mut buf = [0u8; 1500];
    assert_eq!(
        lab.poll_transmit(Instant::from_micros(16_099), &mut buf),
        None
    );
    let (port, len) = lab.poll_transmit(due, &mut buf).unwrap();
    assert_eq!(port, Port(0));
    let r = parse(&buf[..len]).unwrap();
    assert!(matches!(r.body, Body::Echo { icmp_type: 0, .. }));
    assert_eq!(r.ttl, 63, "Linux r3 (64) forwarded by r1");
    assert_eq!(lab.poll_timeout(), None);
    lab.handle_timeout(due);
}

#[test]
fn rate_limit_and_silent_router() {
    let mut lab = small();
    let mut t = Tracer::new(&mut lab);
    // r3 answers 2 per second: ten echo requests in 10 ms get 2 replies.
    let got = (0..10)
        .filter(|_| t.ping(ip("100.64.0.6")).is_some())
        .count();
    assert_eq!(got, 2);
    t.now = t.now + std::time::Duration::from_secs(1);
    assert!(t.ping(ip("100.64.0.6")).is_some(), "bucket refilled");
    assert!(t.lab.stats().rate_limited >= 8);
    // r5 is silent: TTL 4 expires there, nothing comes back; the host still answers.
    let hops = t.trace(ip("198.51.100.2"), 10);
    assert!(hops[3].is_none());
    assert_eq!(
        hops.last().unwrap().as_ref().unwrap().from,
        ip("198.51.100.2")
    );
}

#[test]
fn hosts_answer_udp_and_tcp() {
    let mut lab = small();
    let src = ip("192.0.2.2");
    let dst = ip("198.51.100.2");
    let mut b = [0u8; 128];
    let mut out = [0u8; 1500];
    let pk = Ip {
        src,
        dst,
        ttl: 64,
        tos: 0,
        ipid: 7,
    };
    let n = udp(
        &mut b,
        &pk,
        &Udp {
            sport: 40000,
            dport: 33435,
            payload: &[0; 8],
            checksum: None,
        },
    )
    .unwrap();
    lab.handle_packet(Instant::ZERO, Port(0), &b[..n]);
    let (_, len) = lab
        .poll_transmit(Instant::from_millis(100), &mut out)
        .unwrap();
    let r = parse(&out[..len]).unwrap();
    assert_eq!(r.src, std::net::IpAddr::V4(dst));
    assert!(matches!(
        r.body,
        Body::IcmpError {
            icmp_type: 3,
            code: 3,
            ..
        }
    ));
    // SYNs with and without 4 bytes of data: a closed port's RST acknowledges the data
    // too (as Linux does), an open port's SYN-ACK only the SYN.
    for (port, data, want, ack) in [
        (443u16, 0usize, 0x12u8, 1001u32),
        (80, 0, 0x14, 1001),
        (443, 4, 0x12, 1001),
        (80, 4, 0x14, 1005),
    ] {
        let t = Tcp {
            sport: 40001,
            dport: port,
            seq: 1000,
            ack: 0,
            flags: 0x02,
            window: 1024,
        };
        let n = tcp(&mut b, &pk, &t).unwrap() + data;
        b[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        lab.handle_packet(Instant::ZERO, Port(0), &b[..n]);
        let (_, len) = lab
            .poll_transmit(Instant::from_millis(100), &mut out)
            .unwrap();
        let Body::Tcp {
            flags,
            ack: got,
            sport,
            ..
        } = parse(&out[..len]).unwrap().body
        else {
            panic!()
        };
        assert_eq!((flags, got, sport), (want, ack, port), "{data} bytes");
    }
    // A TTL-limited UDP probe gets a time exceeded quoting the UDP header.
    let pk = Ip { ttl: 1, ..pk };
    let n = udp(
        &mut b,
        &pk,
        &Udp {
            sport: 40000,
            dport: 33436,
            payload: &[0; 8],
            checksum: None,
        },
    )
    .unwrap();
    lab.handle_packet(Instant::ZERO, Port(0), &b[..n]);
    let (_, len) = lab
        .poll_transmit(Instant::from_millis(100), &mut out)
        .unwrap();
    assert!(matches!(
        parse(&out[..len]).unwrap().body,
        Body::IcmpError { icmp_type: 11, .. }
    ));
}

#[test]
fn unknown_destinations_get_unreachable() {
    let mut lab = small();
    let mut t = Tracer::new(&mut lab);
    // In a link prefix but nobody's address: r2 says host unreachable (code 1).
    let a = t.probe(ip("100.64.0.11"), 64).unwrap();
    assert_eq!((a.icmp_type, a.icmp_code), (3, 1));
    // No prefix at all: the gateway says net unreachable.
    let a = t.probe(ip("203.0.113.77"), 64).unwrap();
    assert_eq!((a.from, a.icmp_type, a.icmp_code), (ip("192.0.2.1"), 3, 0));
}

#[test]
fn garbage_never_panics() {
    let mut lab = Lab::new(Topology::reference());
    let mut x: u64 = 0x1234_5678;
    let mut buf = [0u8; 1500];
    let mut pkt = [0u8; 200];
    for i in 0..20_000u32 {
        for b in pkt.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let len = (x % 200) as usize;
        if i % 2 == 0 && len >= 20 {
            // make it look like IPv4 to reach deeper code
            pkt[0] = 0x45;
            pkt[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            pkt[12..16].copy_from_slice(&[192, 0, 2, 2]);
            pkt[16..20].copy_from_slice(&[203, 0, 113, (x >> 8) as u8 & 63]);
            pkt[9] = [1, 6, 17, 50][(x >> 16) as usize % 4];
        }
        lab.handle_packet(
            Instant::from_micros(u64::from(i)),
            Port((x >> 40) as u16 % 3),
            &pkt[..len],
        );
        while lab
            .poll_transmit(
                Instant::from_micros(u64::MAX / 2),
                &mut buf[..(x as usize % 1500)],
            )
            .is_some()
        {}
    }
    let s = lab.stats();
    assert_eq!(s.received, 20_000);
    assert!(s.malformed > 0);
}

/// r1 - r2 - r3 - r4 - host, r3's static route for the host's LAN pointing back at r2.
const LOOP: &str = r#"
name = "loop"
vantage-point = [{ name = "vp", address = "192.0.2.2/24", gateway = "192.0.2.1", router = "r1" }]
router = [
    { name = "r1", vendor = "cisco" },
    { name = "r2", vendor = "juniper" },
    { name = "r3", vendor = "linux" },
    { name = "r4", vendor = "cisco" },
]
link = [
    { a = "r1", b = "r2", prefix = "100.64.0.0/30" },
    { a = "r2", b = "r3", prefix = "100.64.0.4/30" },
    { a = "r3", b = "r4", prefix = "100.64.0.8/30" },
]
host = [{ name = "h", address = "198.51.100.2/30", gateway = "198.51.100.1", router = "r4" }]

[[route]]
router = "r3"
prefix = "198.51.100.0/30"
via = "r2"
"#;

#[test]
fn a_static_route_pointing_back_makes_a_forwarding_loop() {
    let mut lab = Lab::new(Topology::parse(LOOP, "loop.toml").unwrap());
    let truth = lab.truth();
    let mut t = Tracer::new(&mut lab);
    let hops: Vec<Ipv4Addr> = t
        .trace(ip("198.51.100.2"), 8)
        .into_iter()
        .map(|a| a.expect("every hop answers").from)
        .collect();
    // r2 and r3 hand the packet back and forth until its TTL runs out, each answering
    // from the interface the probe came in on: r2 first from the r1 link, then always
    // from the r3 link.
    let (r2_from_r1, r2_from_r3, r3) = (ip("100.64.0.2"), ip("100.64.0.5"), ip("100.64.0.6"));
    assert_eq!(
        hops,
        [
            ip("192.0.2.1"),
            r2_from_r1,
            r3,
            r2_from_r3,
            r3,
            r2_from_r3,
            r3,
            r2_from_r3
        ]
    );
    // The truth follows the same tables: the loop, cut where no TTL reaches.
    let forward: Vec<Ipv4Addr> = truth.destinations[0]
        .forward
        .iter()
        .map(|h| h.addr)
        .collect();
    assert_eq!(forward[..8], hops[..]);
    assert_eq!(forward.len(), 257);
    assert_eq!(
        t.lab.stats().dropped,
        0,
        "every probe expired and was answered"
    );
}

#[test]
fn a_static_route_wins_over_an_lsp() {
    // Without the route, r1 pushes the host's traffic onto the LSP r1-r2-r3; with a route
    // at r1 pointing at r2 (the IGP's choice too), it goes as plain IP.
    let plain = LOOP.split("[[route]]").next().unwrap();
    let lsp = "[[lsp]]\nname = \"x\"\ningress = \"r1\"\negress = \"r3\"\n";
    let route = "[[route]]\nrouter = \"r1\"\nprefix = \"198.51.100.0/30\"\nvia = \"r2\"\n";
    let tunnels = |text: &str| {
        let lab = Lab::new(Topology::parse(text, "t.toml").unwrap());
        lab.truth().destinations[0].tunnels.len()
    };
    assert_eq!(tunnels(&format!("{plain}{lsp}")), 1);
    assert_eq!(tunnels(&format!("{plain}{lsp}{route}")), 0);
}
