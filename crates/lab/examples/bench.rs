//! Packets per second the emulator core handles on one core: Paris ICMP probes with TTLs
//! 1..12 to every reference destination, each answered and drained.
//! `cargo run --release -p vtnt-lab --example bench [PROBES]`

use std::time::Instant as Wall;

use vtnt_lab::{Instant, Lab, Port, Topology};
use vtnt_wire::build::{icmp_echo, Ip};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let mut lab = Lab::new(Topology::reference());
    let dsts: Vec<_> = lab.truth().destinations.iter().map(|d| d.dst).collect();
    let mut probes = Vec::new();
    for (i, &dst) in dsts.iter().enumerate() {
        for ttl in 1..=12u8 {
            let ip = Ip {
                src: "192.0.2.2".parse().unwrap(),
                dst,
                ttl,
                tos: 0,
                ipid: i as u16,
            };
            let mut b = vec![0u8; 64];
            let len = icmp_echo(
                &mut b,
                &ip,
                8,
                0x1234,
                u16::from(ttl),
                &[0; 16],
                Some(0x4242),
            )
            .unwrap();
            b.truncate(len);
            probes.push(b);
        }
    }
    let mut buf = [0u8; 1500];
    let (mut now, mut replies) = (0u64, 0u64);
    let start = Wall::now();
    for k in 0..n {
        now += 5;
        lab.handle_packet(
            Instant::from_micros(now),
            Port(0),
            &probes[k % probes.len()],
        );
        if k % 64 == 63 {
            while lab
                .poll_transmit(Instant::from_micros(now + 1_000_000), &mut buf)
                .is_some()
            {
                replies += 1;
            }
        }
    }
    while lab
        .poll_transmit(Instant::from_micros(u64::MAX / 2), &mut buf)
        .is_some()
    {
        replies += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "lab core: {n} probes, {replies} replies in {secs:.3} s: {:.0} packets/s (probes in)",
        n as f64 / secs
    );
}
