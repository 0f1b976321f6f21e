//! Packets per second: the emulator core in-process (one core, no I/O) and a running
//! lab through its TUN (a raw socket in the namespace sends Paris ICMP probes with TTLs
//! 1..12 to every destination, keeping a window of probes in flight, and counts answers).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant as Wall};

use vtnt_lab::{Instant, Lab, Port, Topology};
use vtnt_wire::build::{icmp_echo, Echo, Ip};

use crate::{sys, Error};

/// One benchmark's outcome.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct BenchResult {
    pub probes: u64,
    pub replies: u64,
    pub secs: f64,
}

impl BenchResult {
    /// Probes handled per second.
    pub fn pps(&self) -> f64 {
        if self.secs > 0.0 {
            self.probes as f64 / self.secs
        } else {
            0.0
        }
    }
}

fn probes(src: Ipv4Addr, dsts: &[Ipv4Addr]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (i, &dst) in dsts.iter().enumerate() {
        for ttl in 1..=12u8 {
            let ip = Ip {
                src,
                dst,
                ttl,
                tos: 0,
                ipid: i as u16,
            };
            let mut b = vec![0u8; 64];
            if let Ok(n) = icmp_echo(
                &mut b,
                &ip,
                &Echo {
                    icmp_type: 8,
                    ident: 0x7674,
                    seq: u16::from(ttl),
                    payload: &[0; 16],
                    checksum: Some(0x4242),
                },
            ) {
                b.truncate(n);
                v.push(b);
            }
        }
    }
    v
}

/// The core on `topo`, `n` probes handed in 5 µs apart (virtual time).
pub fn core(topo: Topology, n: u64) -> BenchResult {
    let mut lab = Lab::new(topo);
    let src = lab
        .vantage_points()
        .first()
        .map_or(Ipv4Addr::UNSPECIFIED, |v| v.addr);
    let dsts: Vec<Ipv4Addr> = lab.truth().destinations.iter().map(|d| d.dst).collect();
    let ps = probes(src, &dsts);
    let mut buf = [0u8; 1500];
    let (mut now, mut replies) = (0u64, 0u64);
    let start = Wall::now();
    for k in 0..n {
        now += 5;
        lab.handle_packet(
            Instant::from_micros(now),
            Port(0),
            &ps[k as usize % ps.len().max(1)],
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
    BenchResult {
        probes: n,
        replies,
        secs: start.elapsed().as_secs_f64(),
    }
}

/// Through the TUN of running lab `name` for `secs` seconds, `window` probes in flight.
pub fn tun(name: &str, topo: &Topology, secs: f64, window: u64) -> Result<BenchResult, Error> {
    let lab = Lab::new(topo.clone());
    let src = lab
        .vantage_points()
        .first()
        .map_or(Ipv4Addr::UNSPECIFIED, |v| v.addr);
    let dsts: Vec<Ipv4Addr> = lab.truth().destinations.iter().map(|d| d.dst).collect();
    let ps = probes(src, &dsts);
    let name = name.to_string();
    let h = std::thread::spawn(move || -> Result<BenchResult, Error> {
        sys::enter_netns(&name)?;
        let fd = sys::raw_socket(libc::IPPROTO_ICMP)?;
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let mut buf = [0u8; 2048];
        let (mut sent, mut got) = (0u64, 0u64);
        let start = Wall::now();
        let until = start + Duration::from_secs_f64(secs);
        let mut last_progress = Wall::now();
        while Wall::now() < until {
            while sent - got < window {
                let p = &ps[sent as usize % ps.len()];
                let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
                if sys::raw_send(&fd, p, dst).is_err() {
                    break;
                }
                sent += 1;
            }
            let _ = sys::poll_readable(&[raw], 5_000)?;
            while sys::raw_recv(&fd, &mut buf).is_ok() {
                got += 1;
                last_progress = Wall::now();
            }
            // Probes the lab does not answer (none should be lost) would stall the window.
            if last_progress.elapsed() > Duration::from_millis(50) {
                got = sent;
                last_progress = Wall::now();
            }
        }
        Ok(BenchResult {
            probes: sent,
            replies: got.min(sent),
            secs: start.elapsed().as_secs_f64(),
        })
    });
    h.join()
        .map_err(|_| Error::msg("benchmark thread panicked"))?
}
