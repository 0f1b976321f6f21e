//! What the `handle_packet` fuzz target does with one input, shared with the corpus test
//! (`crates/engine/tests/garbage.rs`) so every corpus file also runs under `cargo test`.
//!
//! The engine is built deterministically (fixed seed and clock) with a trace and a ping
//! of each method in flight, so that inputs derived from real replies (the seed corpus)
//! reach deep into matching. Input framing: if the first byte is even, the rest is one
//! packet; if odd, the rest is a sequence of `[u16 length][bytes]` packets.
//!
//! With `ipv6-probe` (on in the fuzz crate by default) the source lookup answers per
//! address family and the engine also runs traces and pings over IPv6 (icmp-paris,
//! udp-paris, tcp and tcp-ack traces; ICMP echo, tcp and udp-dport pings) toward
//! [`DST6`], so the same bytes are also parsed as ICMPv6 replies and TCP over IPv6.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use vtnt_engine::{Config, Engine, Instant, Measurement, Method, PingOptions, TraceOptions};

pub const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
#[cfg(feature = "ipv6-probe")]
pub const SRC6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
#[cfg(feature = "ipv6-probe")]
pub const DST6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 2);
pub const T0: Instant = Instant::from_millis(1_000_000);

/// The engine every input is fed to, with its first probes sent (returned).
pub fn engine() -> (Engine, Vec<Vec<u8>>) {
    let config = Config {
        pps: vtnt_engine::policy::MAX_PPS_LAB,
        burst: 1_000,
        seed: 1,
        max_active: 16,
        ..Config::new(SRC)
    };
    let mut e = Engine::new(config).expect("config");
    for m in [Method::IcmpParis, Method::UdpParis, Method::Tcp] {
        let mut t = TraceOptions::new(IpAddr::V4(DST)).with_method(m);
        t.wait = Duration::from_millis(100);
        e.start(T0, Measurement::Trace(t)).expect("trace");
        let p = PingOptions::new(IpAddr::V4(DST)).with_method(m);
        e.start(T0, Measurement::Ping(p)).expect("ping");
    }
    #[cfg(feature = "ipv6-probe")]
    start_ipv6(&mut e);
    let mut buf = [0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    let mut probes = Vec::new();
    while let Some(tx) = e.poll_transmit(T0, &mut buf) {
        probes.push(buf[..tx.len].to_vec());
    }
    (e, probes)
}

/// Gives the engine a source per address family and starts what it runs over IPv6.
#[cfg(feature = "ipv6-probe")]
fn start_ipv6(e: &mut Engine) {
    e.set_source_lookup(Box::new(|dst: IpAddr| {
        Ok(match dst {
            IpAddr::V4(_) => IpAddr::V4(SRC),
            IpAddr::V6(_) => IpAddr::V6(SRC6),
        })
    }));
    for m in [
        Method::IcmpParis,
        Method::UdpParis,
        Method::Tcp,
        Method::TcpAck,
    ] {
        let mut t = TraceOptions::new(IpAddr::V6(DST6)).with_method(m);
        t.wait = Duration::from_millis(100);
        e.start(T0, Measurement::Trace(t)).expect("IPv6 trace");
    }
    for m in [Method::IcmpParis, Method::Tcp, Method::UdpDport] {
        let p = PingOptions::new(IpAddr::V6(DST6)).with_method(m);
        e.start(T0, Measurement::Ping(p)).expect("IPv6 ping");
    }
}

/// Splits an input into packets.
pub fn packets(data: &[u8]) -> Vec<&[u8]> {
    let Some((&mode, mut rest)) = data.split_first() else {
        return vec![];
    };
    if mode % 2 == 0 {
        return vec![rest];
    }
    let mut out = Vec::new();
    while rest.len() >= 2 {
        let n = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let body = &rest[2..];
        let n = n.min(body.len());
        out.push(&body[..n]);
        rest = &body[n..];
    }
    out
}

/// Feeds the input's packets, driving the engine between them; checks invariants.
pub fn handle_packet(data: &[u8]) {
    let (mut e, _) = engine();
    let mut buf = [0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    let mut now = T0;
    for (i, p) in packets(data).into_iter().enumerate() {
        now = now + Duration::from_millis(7 * i as u64);
        let before = e.stats();
        e.handle_packet(now, p);
        let after = e.stats();
        assert_eq!(
            after.replies + after.unmatched,
            before.replies + before.unmatched + 1
        );
        e.handle_timeout(now);
        while let Some(tx) = e.poll_transmit(now, &mut buf) {
            assert!(tx.len <= buf.len());
        }
        while e.poll_event().is_some() {}
        if let Some(t) = e.poll_timeout() {
            assert!(
                t > now,
                "a deadline at or before now after everything was handled"
            );
        }
    }
}
