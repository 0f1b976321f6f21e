//! Engine-only throughput: probes built and replies matched per second on one core.
//!
//! `cargo run --release -p vtnt-engine --example engine_rate [probes]`
//!
//! 1,000 traces run at once (ICMP, UDP and TCP Paris, 8 routers then the destination,
//! new traces started as old ones finish) on a virtual clock with a 1,000,000 pps budget.
//! Replies (time exceeded, echo reply, port unreachable, RST) are built by this program
//! outside the timed sections; only engine calls (`poll_transmit`, `handle_packet`,
//! `handle_timeout`, `poll_event`, `start`) are timed.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant as Wall};

use vtnt_engine::{Config, Engine, Event, Instant, Measurement, Method, TraceOptions};
use vtnt_wire::build::{self, Ip};
use vtnt_wire::reply::{self, Body};

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const HOPS: u8 = 8;
const ACTIVE: usize = 1000;
const BATCH: usize = 1024;

fn job(i: u32) -> Measurement {
    let dst = Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + (i % 1_000_000));
    let mut o = TraceOptions::new(IpAddr::V4(dst));
    o = o.with_method([Method::IcmpParis, Method::UdpParis, Method::Tcp][i as usize % 3]);
    o.wait = Duration::from_secs(1);
    Measurement::Trace(o)
}

/// The answer the network gives to `probe`.
fn answer(probe: &[u8], out: &mut Vec<u8>) {
    out.resize(256, 0);
    let p = reply::parse(probe).expect("own probe");
    let IpAddr::V4(dst) = p.dst else {
        unreachable!()
    };
    let n = if p.ttl <= HOPS {
        let r = Ip {
            src: Ipv4Addr::new(198, 51, 100, p.ttl),
            dst: SRC,
            ttl: 250,
            tos: 0,
            ipid: 1,
        };
        build::icmp_error(
            out,
            &r,
            &build::IcmpError {
                icmp_type: 11,
                code: 0,
                original: probe,
                quote_len: 28,
                mpls: &[],
            },
        )
        .unwrap()
    } else {
        let h = Ip {
            src: dst,
            dst: SRC,
            ttl: 56,
            tos: 0,
            ipid: 2,
        };
        match p.body {
            Body::Echo {
                ident,
                seq,
                payload,
                ..
            } => build::icmp_echo(
                out,
                &h,
                &build::Echo {
                    icmp_type: 0,
                    ident,
                    seq,
                    payload,
                    checksum: None,
                },
            )
            .unwrap(),
            Body::Udp { .. } => build::icmp_error(
                out,
                &h,
                &build::IcmpError {
                    icmp_type: 3,
                    code: 3,
                    original: probe,
                    quote_len: 28,
                    mpls: &[],
                },
            )
            .unwrap(),
            Body::Tcp {
                sport, dport, seq, ..
            } => {
                let t = build::Tcp {
                    sport: dport,
                    dport: sport,
                    seq: 0,
                    ack: seq + 1,
                    flags: 0x14,
                    window: 0,
                };
                build::tcp(out, &h, &t).unwrap()
            }
            _ => unreachable!(),
        }
    };
    out.truncate(n);
}

fn main() {
    let target: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let config = Config {
        pps: vtnt_engine::policy::MAX_PPS_LAB,
        burst: BATCH as u32,
        seed: 1,
        max_active: ACTIVE,
        ..Config::new(SRC)
    };
    let mut e = Engine::new(config).unwrap();
    let mut now = Instant::from_millis(1_700_000_000_000);
    let mut engine_time = Duration::ZERO;
    let mut next_job = 0u32;
    let mut finished = 0u64;
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    let mut probes: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(64)).collect();
    let mut replies: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(256)).collect();
    let wall = Wall::now();

    let t = Wall::now();
    while next_job < ACTIVE as u32 {
        e.start(now, job(next_job)).unwrap();
        next_job += 1;
    }
    engine_time += t.elapsed();

    while e.stats().probes_sent < target {
        // Send a batch (timed; copying each probe out is part of a driver's cost anyway).
        let t = Wall::now();
        let mut n = 0;
        while n < BATCH {
            let Some(tx) = e.poll_transmit(now, &mut buf) else {
                break;
            };
            probes[n].clear();
            probes[n].extend_from_slice(&buf[..tx.len]);
            n += 1;
        }
        engine_time += t.elapsed();

        // The network answers (not timed).
        for i in 0..n {
            answer(&probes[i], &mut replies[i]);
        }
        now = now + Duration::from_micros(BATCH as u64 + 10);

        // Replies in, finished traces out, new traces in (timed).
        let t = Wall::now();
        for r in &replies[..n] {
            e.handle_packet(now, r);
        }
        e.handle_timeout(now);
        while let Some(Event::Finished { .. }) = e.poll_event() {
            finished += 1;
            e.start(now, job(next_job)).unwrap();
            next_job += 1;
        }
        engine_time += t.elapsed();
        if n == 0 {
            now = e
                .poll_timeout()
                .unwrap_or(now)
                .max(now + Duration::from_micros(1));
        }
    }
    let s = e.stats();
    let secs = engine_time.as_secs_f64();
    println!(
        "engine_rate: {} probes, {} replies matched, {} unmatched, {finished} traces finished",
        s.probes_sent, s.replies, s.unmatched
    );
    println!(
        "engine_rate: engine time {secs:.3} s -> {:.0} probes/s ({:.0} ns per probe incl. its reply); wall {:.3} s incl. reply building",
        s.probes_sent as f64 / secs,
        secs * 1e9 / s.probes_sent as f64,
        wall.elapsed().as_secs_f64()
    );
}
