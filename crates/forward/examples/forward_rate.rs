//! What forwarding costs: nanoseconds per probe out and its reply back, and how many
//! concurrent mappings the table holds, on one core.
//!
//! `cargo run --release -p vtnt-forward --example forward_rate [max mappings]`
//!
//! For tables of 1,000 up to `max mappings` (default 1,000,000) live mappings: 1,000
//! instances, every flow a Paris ICMP, UDP or TCP probe, instances sharing protocol and
//! identity in groups of four (so three in four new flows conflict and take another). The
//! table is filled (timed: new flows per second), then 65,536 flows drawn from it send a
//! probe and get a time exceeded with an MPLS label stack back, round after round (timed:
//! outbound, inbound). Packets are built outside the timed sections; the virtual clock
//! moves 2 us per probe, the forwarder's 500,000 pps budget, so none is dropped. RSS
//! growth per mapping is read from /proc/self/statm (from 100,000 mappings on: smaller
//! tables fit in memory an earlier table freed).

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant as Wall};

use support::Method;
use vtnt_forward::{Config, Forwarder, InstanceId};
use vtnt_record::Instant;

#[path = "../tests/support/mod.rs"]
mod support;

const PUBLIC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const INSTANCES: u32 = 1000;
const SAMPLE: usize = 65_536;
const ROUNDS: usize = 8;
const STEP: Duration = Duration::from_micros(2);

/// Probe of flow `i` from its instance's address.
fn probe(i: u32, src: Ipv4Addr) -> Vec<u8> {
    let dst = Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + i / INSTANCES);
    let method = [Method::IcmpParis, Method::Udp, Method::Tcp][((i / 4) % 3) as usize];
    support::probe(
        method,
        src,
        dst,
        0x8000 + ((i % INSTANCES) / 4) as u16,
        4,
        4,
    )
}

/// A time exceeded with two labels quoting `sent` (as it left the forwarder).
fn time_exceeded(sent: &[u8]) -> Vec<u8> {
    support::replies(sent, 1).swap_remove(2)
}

/// Sends probe `k` of `probes` from the instance of flow `flows[k]`, each `STEP` after
/// the last; returns the time spent in the forwarder.
fn send(
    fw: &mut Forwarder,
    ids: &[InstanceId],
    flows: &[u32],
    probes: &[Vec<u8>],
    now: &mut Instant,
) -> Duration {
    let mut out = [0u8; 1500];
    let t = Wall::now();
    for (&i, p) in flows.iter().zip(probes) {
        *now = *now + STEP;
        black_box(fw.handle_instance_packet(*now, ids[(i % INSTANCES) as usize], p, &mut out))
            .expect("forwarded");
    }
    t.elapsed()
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn ns(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

fn run(mappings: u32) {
    let rss0 = rss_bytes();
    let mut fw = Forwarder::new(Config {
        pps: vtnt_policy::MAX_PPS_LAB,
        burst: 1000,
        max_mappings: mappings as usize,
        ..Config::new(PUBLIC)
    })
    .unwrap();
    let addr = |k: u32| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + k);
    let ids: Vec<InstanceId> = (0..INSTANCES).map(|k| fw.add_instance(addr(k))).collect();
    let mut out = [0u8; 1500];
    let mut now = Instant::from_millis(1000);

    // Fill the table, a probe per flow, built in batches outside the clock.
    let mut fill = Duration::ZERO;
    for chunk in (0..mappings).collect::<Vec<_>>().chunks(65_536) {
        let probes: Vec<Vec<u8>> = chunk
            .iter()
            .map(|&i| probe(i, addr(i % INSTANCES)))
            .collect();
        fill += send(&mut fw, &ids, chunk, &probes, &mut now);
    }
    let s = fw.stats();
    assert_eq!(s.mappings, mappings as usize);
    let rss = rss_bytes().saturating_sub(rss0) as f64 / f64::from(mappings);
    let rss = if mappings >= 100_000 {
        format!("{rss:.0}")
    } else {
        "-".into()
    };

    // A sample of flows, their probes and the replies to them as they left.
    let sample: Vec<u32> = (0..SAMPLE as u64)
        .map(|k| ((k * 0x9e37_79b9) % u64::from(mappings)) as u32)
        .collect();
    let probes: Vec<Vec<u8>> = sample
        .iter()
        .map(|&i| probe(i, addr(i % INSTANCES)))
        .collect();
    let replies: Vec<Vec<u8>> = sample
        .iter()
        .zip(&probes)
        .map(|(&i, p)| {
            now = now + STEP;
            let n = fw
                .handle_instance_packet(now, ids[(i % INSTANCES) as usize], p, &mut out)
                .unwrap();
            time_exceeded(&out[..n])
        })
        .collect();
    let (mut outbound, mut inbound) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        outbound += send(&mut fw, &ids, &sample, &probes, &mut now);

        let t = Wall::now();
        for r in &replies {
            black_box(fw.handle_upstream_packet(now, r, &mut out)).expect("delivered");
        }
        inbound += t.elapsed();
    }
    let n = SAMPLE * ROUNDS;
    let s = fw.stats();
    assert_eq!((s.dropped_rate, s.unmatched), (0, 0));
    println!(
        "| {mappings:>9} | {:>6.0} | {:>5.0} | {:>5.0} | {:>5.0} | {:>5.1} | {rss:>6} | {:>7} |",
        ns(fill, mappings as usize),
        ns(outbound, n),
        ns(inbound, n),
        ns(outbound + inbound, n),
        1e3 / ns(outbound + inbound, n),
        s.rewrites,
    );
}

fn main() {
    let max: u32 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("max mappings"));
    println!("| mappings | new flow ns | out ns | in ns | pair ns | M pairs/s | RSS B/mapping | conflicts |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut m = 1000;
    while m <= max {
        run(m);
        m *= 10;
    }
}
