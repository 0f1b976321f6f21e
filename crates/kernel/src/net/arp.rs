//! A tiny neighbour cache for the one Ethernet segment the unikernel lives on, IPv4's
//! (ARP) and IPv6's (neighbour discovery) alike: a few entries, no expiry (jobs are
//! short), and a rate limit on the requests or solicitations we send per address.

use core::net::IpAddr;
use smoltcp::wire::EthernetAddress;
use vtnt_record::{Duration, Instant};

const ENTRIES: usize = 8;
/// Minimum gap between two requests for the same address.
pub const RETRY: Duration = Duration::from_millis(200);

/// Resolved and pending addresses.
#[derive(Default)]
pub struct Cache {
    resolved: [Option<(IpAddr, EthernetAddress)>; ENTRIES],
    next: usize,
    asked: [Option<(IpAddr, Instant)>; ENTRIES],
}

impl Cache {
    /// The hardware address of `ip`, if known.
    pub fn lookup(&self, ip: IpAddr) -> Option<EthernetAddress> {
        self.resolved
            .iter()
            .flatten()
            .find(|(a, _)| *a == ip)
            .map(|&(_, m)| m)
    }

    /// Records `ip` at `mac` (replacing an older entry for `ip`, else round-robin).
    pub fn insert(&mut self, ip: IpAddr, mac: EthernetAddress) {
        if !mac.is_unicast() {
            return;
        }
        if let Some(e) = self.resolved.iter_mut().flatten().find(|(a, _)| *a == ip) {
            e.1 = mac;
            return;
        }
        self.resolved[self.next] = Some((ip, mac));
        self.next = (self.next + 1) % ENTRIES;
        for a in self.asked.iter_mut() {
            if a.is_some_and(|(x, _)| x == ip) {
                *a = None;
            }
        }
    }

    /// Whether a request for `ip` may go out now (and if so, notes that it did).
    pub fn may_ask(&mut self, ip: IpAddr, now: Instant) -> bool {
        if let Some(slot) = self.asked.iter_mut().flatten().find(|(a, _)| *a == ip) {
            if now.saturating_since(slot.1) < RETRY {
                return false;
            }
            slot.1 = now;
            return true;
        }
        let slot = self
            .asked
            .iter_mut()
            .min_by_key(|s| s.map_or(Instant::ZERO, |(_, t)| t))
            .expect("ENTRIES > 0");
        *slot = Some((ip, now));
        true
    }
}
