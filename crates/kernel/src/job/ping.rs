//! The built-in ping job: ICMP echo requests crafted here (own IP header, TTL, ID and
//! checksums), replies matched by identifier and sequence, one JSON line per reply,
//! timeout or ICMP error, then a summary. It exists to prove the network path end to end
//! until `vtnt-engine` takes over; it already has the engine's sans-IO shape.

use super::Prober;
use crate::time::Instant;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::net::Ipv4Addr;
use vtnt_record::Duration;

/// ICMP identifier of our echo requests.
const IDENT: u16 = 0x7674; // "vt"

/// Parsed `ping` arguments.
#[derive(Debug, Clone, Copy)]
pub struct Args {
    pub count: u16,
    pub interval: Duration,
    pub wait: Duration,
    pub ttl: u8,
    pub size: u16,
    pub target: Ipv4Addr,
}

impl Args {
    /// Parses `[-c COUNT] [-i INTERVAL_MS] [-W WAIT_MS] [-t TTL] [-s SIZE] TARGET`.
    pub fn parse(words: &[&str]) -> Result<Args, &'static str> {
        let mut a = Args {
            count: 3,
            interval: Duration::from_millis(200),
            wait: Duration::from_secs(1),
            ttl: 64,
            size: 56,
            target: Ipv4Addr::UNSPECIFIED,
        };
        let mut target = None;
        let mut it = words.iter();
        while let Some(&w) = it.next() {
            let mut num = |max: u64| -> Result<u64, &'static str> {
                let v = it.next().ok_or("option needs a value")?;
                let v: u64 = v.parse().map_err(|_| "option value is not a number")?;
                if v > max {
                    Err("option value out of range")
                } else {
                    Ok(v)
                }
            };
            match w {
                "-c" => a.count = num(1000)? as u16,
                "-i" => a.interval = Duration::from_millis(num(60_000)?),
                "-W" => a.wait = Duration::from_millis(num(60_000)?),
                "-t" => a.ttl = num(255)? as u8,
                "-s" => a.size = num(1472)? as u16,
                t if !t.starts_with('-') && target.is_none() => {
                    target = Some(t.parse().map_err(|_| "target is not an IPv4 address")?)
                }
                _ => return Err("unknown option or extra word"),
            }
        }
        a.target = target.ok_or("no target given")?;
        if a.count == 0 || a.ttl == 0 {
            return Err("count and TTL must be at least 1");
        }
        Ok(a)
    }
}

/// What the ping job reports.
#[derive(Debug, Clone, Copy)]
pub enum Event {
    Reply {
        from: Ipv4Addr,
        seq: u16,
        rtt_us: u64,
        reply_ttl: u8,
        size: usize,
    },
    IcmpError {
        from: Ipv4Addr,
        seq: u16,
        icmp_type: u8,
        icmp_code: u8,
        rtt_us: u64,
    },
    Timeout {
        seq: u16,
    },
    Summary {
        target: Ipv4Addr,
        sent: u16,
        received: u16,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Event::Reply { from, seq, rtt_us, reply_ttl, size } => write!(
                f,
                "{{\"type\":\"ping-reply\",\"from\":\"{from}\",\"seq\":{seq},\"rtt_us\":{rtt_us},\"reply_ttl\":{reply_ttl},\"size\":{size}}}"
            ),
            Event::IcmpError { from, seq, icmp_type, icmp_code, rtt_us } => write!(
                f,
                "{{\"type\":\"ping-icmp-error\",\"from\":\"{from}\",\"seq\":{seq},\"icmp_type\":{icmp_type},\"icmp_code\":{icmp_code},\"rtt_us\":{rtt_us}}}"
            ),
            Event::Timeout { seq } => write!(f, "{{\"type\":\"ping-timeout\",\"seq\":{seq}}}"),
            Event::Summary { target, sent, received } => write!(
                f,
                "{{\"type\":\"ping-summary\",\"target\":\"{target}\",\"sent\":{sent},\"received\":{received}}}"
            ),
        }
    }
}

/// The ping state machine.
pub struct Ping {
    args: Args,
    src: Ipv4Addr,
    next_seq: u16,
    next_send: Instant,
    /// Outstanding probes: (seq, sent at).
    outstanding: Vec<(u16, Instant)>,
    received: u16,
    events: VecDeque<Event>,
    summarised: bool,
}

impl Ping {
    pub fn new(args: Args, src: Ipv4Addr, now: Instant) -> Ping {
        Ping {
            args,
            src,
            next_seq: 0,
            next_send: now,
            outstanding: Vec::new(),
            received: 0,
            events: VecDeque::new(),
            summarised: false,
        }
    }

    pub fn received(&self) -> u16 {
        self.received
    }

    pub fn target(&self) -> Ipv4Addr {
        self.args.target
    }

    fn take_outstanding(&mut self, seq: u16) -> Option<Instant> {
        let i = self.outstanding.iter().position(|&(s, _)| s == seq)?;
        Some(self.outstanding.swap_remove(i).1)
    }

    fn maybe_summarise(&mut self) {
        if !self.summarised && self.next_seq == self.args.count && self.outstanding.is_empty() {
            self.summarised = true;
            self.events.push_back(Event::Summary {
                target: self.args.target,
                sent: self.next_seq,
                received: self.received,
            });
        }
    }
}

/// The Internet checksum of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u32) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Prober for Ping {
    type Event = Event;

    fn handle_packet(&mut self, now: Instant, p: &[u8]) {
        let ihl = (p[0] & 0x0f) as usize * 4;
        if p.len() < ihl + 8 || p[9] != 1 {
            return;
        }
        let from = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
        let icmp = &p[ihl..];
        match icmp[0] {
            0 => {
                let ident = u16::from_be_bytes([icmp[4], icmp[5]]);
                let seq = u16::from_be_bytes([icmp[6], icmp[7]]);
                if ident != IDENT || from != self.args.target {
                    return;
                }
                if let Some(sent) = self.take_outstanding(seq) {
                    self.received += 1;
                    self.events.push_back(Event::Reply {
                        from,
                        seq,
                        rtt_us: now.saturating_since(sent).as_micros() as u64,
                        reply_ttl: p[8],
                        size: icmp.len(),
                    });
                }
            }
            3 | 11 | 12 => {
                // An ICMP error quoting our echo request: inner IP header + 8 bytes.
                let inner = &icmp[8..];
                if inner.len() < 20 {
                    return;
                }
                let iihl = (inner[0] & 0x0f) as usize * 4;
                if inner.len() < iihl + 8 || inner[9] != 1 || inner[iihl] != 8 {
                    return;
                }
                let ident = u16::from_be_bytes([inner[iihl + 4], inner[iihl + 5]]);
                let seq = u16::from_be_bytes([inner[iihl + 6], inner[iihl + 7]]);
                if ident != IDENT {
                    return;
                }
                if let Some(sent) = self.take_outstanding(seq) {
                    self.events.push_back(Event::IcmpError {
                        from,
                        seq,
                        icmp_type: icmp[0],
                        icmp_code: icmp[1],
                        rtt_us: now.saturating_since(sent).as_micros() as u64,
                    });
                }
            }
            _ => {}
        }
        self.maybe_summarise();
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.next_seq >= self.args.count || now < self.next_send {
            return None;
        }
        let icmp_len = 8 + self.args.size as usize;
        let total = 20 + icmp_len;
        if buf.len() < total {
            return None;
        }
        let seq = self.next_seq;
        let b = &mut buf[..total];
        b.fill(0);
        b[0] = 0x45;
        b[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        b[4..6].copy_from_slice(&(0x1000u16.wrapping_add(seq)).to_be_bytes());
        b[6] = 0x40; // DF
        b[8] = self.args.ttl;
        b[9] = 1;
        b[12..16].copy_from_slice(&self.src.octets());
        b[16..20].copy_from_slice(&self.args.target.octets());
        let c = checksum(&b[..20]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        let icmp = &mut b[20..];
        icmp[0] = 8;
        icmp[4..6].copy_from_slice(&IDENT.to_be_bytes());
        icmp[6..8].copy_from_slice(&seq.to_be_bytes());
        for (i, x) in icmp[8..].iter_mut().enumerate() {
            *x = i as u8;
        }
        let c = checksum(icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        self.outstanding.push((seq, now));
        self.next_seq += 1;
        self.next_send = now + self.args.interval;
        Some(total)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let expiry = self
            .outstanding
            .iter()
            .map(|&(_, t)| t + self.args.wait)
            .min();
        let send = (self.next_seq < self.args.count).then_some(self.next_send);
        match (expiry, send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        let wait = self.args.wait;
        let mut i = 0;
        while i < self.outstanding.len() {
            let (seq, sent) = self.outstanding[i];
            if now >= sent + wait {
                self.outstanding.swap_remove(i);
                self.events.push_back(Event::Timeout { seq });
            } else {
                i += 1;
            }
        }
        self.maybe_summarise();
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn is_done(&self) -> bool {
        self.summarised && self.events.is_empty()
    }
}
