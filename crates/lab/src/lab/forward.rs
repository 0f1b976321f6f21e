//! How a packet crosses the network: IP forwarding with TTL checks, per-flow ECMP (next
//! hops, and an `ecmp` LSP's paths at its ingress), label push / swap / pop with the
//! LSE-TTL rules of MPLS, and the replies routers and hosts originate (time exceeded
//! with RFC 4950 labels, unreachables, echo replies, TCP).
//!
//! TTL rules, as in `shared/notes/tnt.md`:
//! - an IP router checks the TTL (expires when <= 1) and decrements it;
//! - an ingress LER does that, then pushes LSE-TTL := IP-TTL (ttl-propagate) or 255;
//!   on packets it originated itself, its vendor decides (Cisco propagates, Juniper 255);
//! - an LSR checks and decrements only the LSE-TTL; expiring, it quotes the IP packet as
//!   it arrived (so the quoted TTL is the one the ingress left) plus, with RFC 4950, the
//!   label stack as received; with ICMP tunnelling its reply goes on along the LSP;
//! - PHP: the penultimate LSR decrements the LSE-TTL, pops and sets
//!   IP-TTL := min(IP-TTL, LSE-TTL); it does not touch the IP-TTL otherwise;
//! - UHP: the egress expires a packet arriving with LSE-TTL <= 1 (quoting it with its
//!   label); otherwise it pops with IP-TTL := min(IP-TTL, LSE-TTL) and acts as an IP
//!   router (TTL check and decrement: one hop, not two), except that with
//!   `egress-forwards-ttl1` it forwards a packet left with IP-TTL 1 without decrementing.
//!
//! No function here panics on any input: packets are checked once on entry and every
//! later access is to bytes this module wrote or checked.

use core::net::Ipv4Addr;

use vtnt_wire::build::{self, Ip, Tcp};
use vtnt_wire::mpls::Lse;
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{icmp_type, proto, tcp_flags};

use crate::lab::Lab;
use crate::net::routing::{mix, Step};
use crate::net::{IfaceId, Lsp, Owner, Peer, Pop, PrefixKind, RouterId};
use crate::profile::LocalPush;
use crate::vantage::Port;

/// How many bytes of the offending packet an ICMP error quotes.
const QUOTE_LEN: usize = 128;
/// Routers a walk may cross before it is dropped (loops).
const MAX_STEPS: u16 = 1024;

/// A label stack entry in flight: which LSP, cut where, at which path index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mpls {
    pub lsp: u16,
    pub f: u8,
    pub i: u8,
    pub ttl: u8,
    /// The LSE-TTL of a service (VPN) label under the transport label, if the LSP
    /// carries one.
    pub service: Option<u8>,
    /// The transport label is gone (popped by the penultimate hop): the service label
    /// alone is left, `ttl` is its LSE-TTL.
    pub service_only: bool,
    /// The LSE-TTL of the outer LSP's label on top, while the packet rides the LSP this
    /// one is `over` (LDP over RSVP-TE).
    pub outer: Option<u8>,
}

/// What became of a packet at a router of the outer LSP it rides.
enum Ride {
    /// Sent on to the next router.
    Forwarded,
    /// Expired or dropped.
    Gone,
    /// The outer label popped here (UHP): the inner label is looked at next.
    Popped(Mpls),
}

/// The stack a router receives under any outer label: the transport label (`label`, or
/// the service label alone once the transport is popped) and a service label under it.
fn inner_stack(lsp: &Lsp, m: &Mpls, label: Option<u32>) -> Vec<Lse> {
    let label = if m.service_only { lsp.vpn } else { label };
    let lse = Lse::new(label.unwrap_or(3), 0, m.service.is_none(), m.ttl);
    core::iter::once(lse)
        .chain(m.service.zip(lsp.vpn).map(|(t, v)| Lse::new(v, 0, true, t)))
        .collect()
}

/// A packet being walked through the network.
pub(crate) struct Walk {
    /// When it reaches `at`, µs.
    pub t: u64,
    pub at: RouterId,
    /// The interface it arrived on (`None`: originated at `at`).
    pub from: Option<IfaceId>,
    pub buf: Vec<u8>,
    pub mpls: Option<Mpls>,
    /// Originated by `at`: no TTL check or decrement there.
    pub originated: bool,
    pub flow: u64,
    pub steps: u16,
}

/// The per-flow hash ECMP uses: addresses, protocol and the first four transport bytes
/// (ports, or ICMP type, code and checksum: what Paris traceroute keeps constant).
pub(crate) fn flow_hash(b: &[u8]) -> u64 {
    let ihl = usize::from(b.first().map_or(5, |v| v & 0x0f)) * 4;
    let word = |at: usize| -> u64 {
        b.get(at..at + 4).map_or(0, |w| {
            u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        })
    };
    let proto = u64::from(b.get(9).copied().unwrap_or(0));
    let mut h = word(12) ^ (word(16) << 32) ^ proto.rotate_left(17);
    h = mix(h ^ word(ihl).rotate_left(29));
    h
}

fn ip_ttl(b: &[u8]) -> u8 {
    b.get(8).copied().unwrap_or(0)
}

/// Rewrites the IP-TTL, updating the header checksum incrementally (RFC 1624).
fn set_ip_ttl(b: &mut [u8], ttl: u8) {
    if b.len() < 20 {
        return;
    }
    let old = u16::from_be_bytes([b[8], b[9]]);
    b[8] = ttl;
    let new = u16::from_be_bytes([b[8], b[9]]);
    let hc = u16::from_be_bytes([b[10], b[11]]);
    let mut s = u32::from(!hc) + u32::from(!old) + u32::from(new);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    b[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

fn addr_at(b: &[u8], at: usize) -> Ipv4Addr {
    match b.get(at..at + 4) {
        Some(w) => Ipv4Addr::new(w[0], w[1], w[2], w[3]),
        None => Ipv4Addr::UNSPECIFIED,
    }
}

/// Whether a packet is an ICMP error (never answered with another error, RFC 1812).
fn is_icmp_error(b: &[u8]) -> bool {
    let ihl = usize::from(b.first().map_or(5, |v| v & 0x0f)) * 4;
    b.get(9) == Some(&proto::ICMP) && matches!(b.get(ihl), Some(3 | 4 | 5 | 11 | 12))
}

/// Bytes of data a TCP segment carries past its header (0 when cut short).
fn tcp_data_len(b: &[u8]) -> u32 {
    let ihl = usize::from(b.first().map_or(5, |v| v & 0x0f)) * 4;
    let total = b
        .get(2..4)
        .map_or(0, |w| usize::from(u16::from_be_bytes([w[0], w[1]])));
    let doff = b.get(ihl + 12).map_or(20, |v| usize::from(v >> 4) * 4);
    total.saturating_sub(ihl + doff) as u32
}

/// Who answers a packet addressed to it.
#[derive(Clone, Copy)]
enum Responder {
    Router(RouterId),
    Host(u32),
}

impl Lab {
    /// Walks a packet from vantage point `port`.
    pub(crate) fn inject(&mut self, now: u64, port: Port, packet: &[u8]) {
        let Some(vp) = self.net().vps.get(usize::from(port.0)) else {
            self.stats.dropped += 1;
            return;
        };
        let (router, gw, delay) = (vp.router, vp.gw_iface, vp.delay_us);
        let ok = packet.len() >= 20
            && packet[0] >> 4 == 4
            && usize::from(packet[0] & 0x0f) * 4 >= 20
            && usize::from(u16::from_be_bytes([packet[2], packet[3]])) <= packet.len()
            && usize::from(u16::from_be_bytes([packet[2], packet[3]]))
                >= usize::from(packet[0] & 0x0f) * 4;
        if !ok {
            self.stats.malformed += 1;
            return;
        }
        let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
        let mut buf = self.buffer();
        buf.extend_from_slice(&packet[..total]);
        let flow = flow_hash(&buf);
        self.run(Walk {
            t: now + delay,
            at: router,
            from: Some(gw),
            buf,
            mpls: None,
            originated: false,
            flow,
            steps: 0,
        });
    }

    fn run(&mut self, w: Walk) {
        self.work.push(w);
        while let Some(w) = self.work.pop() {
            self.walk(w);
        }
    }

    /// Moves `w` out of interface `o` to the router on the other side.
    fn cross(&self, w: &mut Walk, o: IfaceId) -> bool {
        let i = &self.net().ifaces[o as usize];
        match i.peer {
            Peer::Router { router, iface, .. } => {
                w.t += i.delay_us;
                w.at = router;
                w.from = Some(iface);
                w.originated = false;
                true
            }
            _ => false,
        }
    }

    fn walk(&mut self, mut w: Walk) {
        loop {
            w.steps += 1;
            if w.steps > MAX_STEPS {
                self.stats.dropped += 1;
                return self.recycle(w.buf);
            }
            let r = w.at;
            let mut popped: Option<(u16, Lse)> = None;
            if let Some(mut m) = w.mpls {
                if let Some(ot) = m.outer {
                    match self.ride(&mut w, m, ot) {
                        Ride::Forwarded => continue,
                        Ride::Gone => return self.recycle(w.buf),
                        Ride::Popped(inner) => m = inner,
                    }
                }
                let net = self.net();
                let Some(lsp) = net.lsps.get(usize::from(m.lsp)) else {
                    return self.recycle(w.buf);
                };
                let label = lsp.label(usize::from(m.f), usize::from(m.i));
                // the stack as received: the top label, and a service label under it
                let stack = inner_stack(lsp, &m, label);
                let lse = stack[0];
                let (rfc4950, tunnelling, pop) = (lsp.rfc4950, lsp.icmp_tunnelling, lsp.pop);
                let out = lsp.out.get(usize::from(m.i)).copied();
                if !w.originated && m.ttl <= 1 {
                    let labels: &[Lse] = if rfc4950 { &stack } else { &[] };
                    let tunnel = (tunnelling && m.i < m.f).then_some(m);
                    let src = self.net().reply_addr(r, w.from, addr_at(&w.buf, 12));
                    self.icmp_error(
                        r,
                        src,
                        w.t,
                        &w.buf,
                        icmp_type::TIME_EXCEEDED,
                        0,
                        labels,
                        tunnel,
                    );
                    return self.recycle(w.buf);
                }
                let ttl = if w.originated { m.ttl } else { m.ttl - 1 };
                if m.i < m.f {
                    let Some(o) = out else {
                        return self.recycle(w.buf);
                    };
                    if pop == Pop::Php && m.i + 1 == m.f {
                        match m.service {
                            // the service label takes the popped label's TTL
                            Some(s) => {
                                w.mpls = Some(Mpls {
                                    i: m.i + 1,
                                    ttl: ttl.min(s),
                                    service: None,
                                    service_only: true,
                                    ..m
                                })
                            }
                            None => {
                                let t = ip_ttl(&w.buf).min(ttl);
                                set_ip_ttl(&mut w.buf, t);
                                w.mpls = None;
                            }
                        }
                    } else {
                        // the head of an outer LSP this one rides pushes its label on top,
                        // when the packet goes on past that LSP's egress
                        let outer =
                            lsp.over.and_then(|ov| {
                                let te = net.lsps.get(usize::from(ov.lsp))?;
                                let tail = usize::from(ov.at) + te.egress_index();
                                (ov.at == m.i && tail < usize::from(m.f))
                                    .then_some(if te.propagate { ttl } else { 255 })
                            });
                        w.mpls = Some(Mpls {
                            i: m.i + 1,
                            ttl,
                            outer,
                            ..m
                        });
                    }
                    if !self.cross(&mut w, o) {
                        return self.recycle(w.buf);
                    }
                    continue;
                }
                // UHP egress: pop with IP-TTL := min(IP-TTL, LSE-TTL as received), then act
                // as an IP router (which checks and decrements the IP-TTL: the egress
                // counts as one hop, not two).
                let t = ip_ttl(&w.buf).min(m.ttl);
                set_ip_ttl(&mut w.buf, t);
                w.mpls = None;
                popped = Some((m.lsp, lse));
            }

            // IP processing at router r.
            let dst = addr_at(&w.buf, 16);
            let net = self.net();
            let Some(p) = net.prefix_of(dst) else {
                if !w.originated {
                    self.unreachable(r, &w, 0);
                }
                self.stats.dropped += 1;
                return self.recycle(w.buf);
            };
            let owner = net.owner_in(p, dst);
            if let Some(Owner::Iface(i)) = owner {
                if net.ifaces[i as usize].router == r {
                    if !w.originated {
                        self.respond(Responder::Router(r), w.t, &w.buf, dst);
                    }
                    return self.recycle(w.buf);
                }
            }
            if !w.originated {
                let t = ip_ttl(&w.buf);
                if t <= 1 {
                    let forward_anyway = popped.is_some_and(|(l, _)| {
                        net.lsps
                            .get(usize::from(l))
                            .is_some_and(|l| l.egress_forwards_ttl1)
                    });
                    if !forward_anyway {
                        let label = popped.and_then(|(l, lse)| {
                            net.lsps
                                .get(usize::from(l))
                                .filter(|l| l.rfc4950)
                                .map(|_| lse)
                        });
                        let labels: Vec<Lse> = label.into_iter().collect();
                        let src = self.net().reply_addr(r, w.from, addr_at(&w.buf, 12));
                        self.icmp_error(
                            r,
                            src,
                            w.t,
                            &w.buf,
                            icmp_type::TIME_EXCEEDED,
                            0,
                            &labels,
                            None,
                        );
                        return self.recycle(w.buf);
                    }
                } else {
                    set_ip_ttl(&mut w.buf, t - 1);
                }
            }
            let net = self.net();
            let info = &net.prefixes[p as usize];
            if info.attached.contains(&r) {
                match (info.kind, owner) {
                    (PrefixKind::Link { ifaces }, Some(Owner::Iface(peer))) => {
                        let mine = ifaces.into_iter().find(|&i| i != peer);
                        if let Some(o) = mine.filter(|&o| net.ifaces[o as usize].router == r) {
                            if self.cross(&mut w, o) {
                                continue;
                            }
                        }
                    }
                    (PrefixKind::HostLan { host, iface }, Some(Owner::Host(_))) => {
                        let t = w.t + net.ifaces[iface as usize].delay_us;
                        self.respond(Responder::Host(host), t, &w.buf, dst);
                        return self.recycle(w.buf);
                    }
                    (PrefixKind::VpLan { vp, iface, .. }, Some(Owner::Vp(_))) => {
                        let t = w.t + net.ifaces[iface as usize].delay_us;
                        self.emit(t, vp as u16, w.buf);
                        return;
                    }
                    _ => {}
                }
                self.unreachable(r, &w, 1);
                self.stats.dropped += 1;
                return self.recycle(w.buf);
            }
            let step = self.routes.step(&self.topo.net, r, p, w.flow);
            let net = self.net();
            if let Step::Push(push) = step {
                let lsp = &net.lsps[usize::from(push.lsp)];
                let ip = ip_ttl(&w.buf);
                let propagate = if w.originated {
                    match net.routers[r as usize].vendor.local_push() {
                        LocalPush::Propagate => true,
                        LocalPush::Fixed255 => false,
                        LocalPush::FollowLsp => lsp.propagate,
                    }
                } else {
                    lsp.propagate
                };
                let ttl = if propagate { ip } else { 255 };
                let Some(&o) = lsp.out.first() else {
                    return self.recycle(w.buf);
                };
                let whole = usize::from(push.f) == lsp.egress_index();
                w.mpls = Some(Mpls {
                    lsp: push.lsp,
                    f: push.f,
                    i: 1,
                    ttl,
                    service: (whole && lsp.vpn.is_some()).then_some(ttl),
                    service_only: false,
                    outer: None,
                });
                if self.cross(&mut w, o) {
                    continue;
                }
                return self.recycle(w.buf);
            }
            let Step::Out(o) = step else {
                if !w.originated {
                    self.unreachable(r, &w, 0);
                }
                self.stats.dropped += 1;
                return self.recycle(w.buf);
            };
            if !self.cross(&mut w, o) {
                return self.recycle(w.buf);
            }
        }
    }

    /// Packet `w` carrying `m` under an outer label of LSE-TTL `ot` at a router of the
    /// outer LSP (LDP over RSVP-TE): the router looks at the outer label only, with the
    /// TTL rules of any LSP (expire, swap, PHP or UHP pop); a pop leaves the inner
    /// LSE-TTL the smaller of both when the outer LSP propagates TTLs.
    fn ride(&mut self, w: &mut Walk, m: Mpls, ot: u8) -> Ride {
        let net = self.net();
        let Some(lsp) = net.lsps.get(usize::from(m.lsp)) else {
            return Ride::Gone;
        };
        let Some((ov, te)) = lsp
            .over
            .and_then(|ov| Some((ov, net.lsps.get(usize::from(ov.lsp))?)))
        else {
            return Ride::Gone;
        };
        let last = te.egress_index();
        let Some(k) = usize::from(m.i).checked_sub(usize::from(ov.at)) else {
            return Ride::Gone;
        };
        let Some(top) = te.label(last, k) else {
            return Ride::Gone;
        };
        let inner = |ttl: u8| Mpls {
            ttl: if te.propagate { m.ttl.min(ttl) } else { m.ttl },
            outer: None,
            ..m
        };
        if !w.originated && ot <= 1 {
            let label = lsp.label(usize::from(m.f), usize::from(ov.at) + last);
            let stack: Vec<Lse> = core::iter::once(Lse::new(top, 0, false, ot))
                .chain(inner_stack(lsp, &m, label))
                .collect();
            let labels: &[Lse] = if te.rfc4950 { &stack } else { &[] };
            let tunnel = (lsp.icmp_tunnelling && m.i < m.f).then_some(m);
            let src = net.reply_addr(w.at, w.from, addr_at(&w.buf, 12));
            let (r, t) = (w.at, w.t);
            self.icmp_error(
                r,
                src,
                t,
                &w.buf,
                icmp_type::TIME_EXCEEDED,
                0,
                labels,
                tunnel,
            );
            return Ride::Gone;
        }
        if k >= last {
            return Ride::Popped(inner(ot));
        }
        let ot = if w.originated { ot } else { ot - 1 };
        let next = if te.pop == Pop::Php && k + 1 == last {
            inner(ot)
        } else {
            Mpls {
                outer: Some(ot),
                ..m
            }
        };
        let Some(&o) = lsp.out.get(usize::from(m.i)) else {
            return Ride::Gone;
        };
        w.mpls = Some(Mpls { i: m.i + 1, ..next });
        if self.cross(w, o) {
            Ride::Forwarded
        } else {
            Ride::Gone
        }
    }

    fn unreachable(&mut self, r: RouterId, w: &Walk, code: u8) {
        let src = self.net().reply_addr(r, w.from, addr_at(&w.buf, 12));
        self.icmp_error(
            r,
            src,
            w.t,
            &w.buf,
            icmp_type::DEST_UNREACH,
            code,
            &[],
            None,
        );
    }

    /// Whether router `r` may send an ICMP message at `t` (silence, rate limit).
    fn may_send(&mut self, r: RouterId, t: u64) -> bool {
        let router = &self.net().routers[r as usize];
        if router.silent {
            return false;
        }
        let rate = router.icmp_rate;
        if self.buckets[r as usize].take(t, rate) {
            true
        } else {
            self.stats.rate_limited += 1;
            false
        }
    }

    /// Router `r` sends an ICMP error about `orig` from `src`; with `tunnel`, along the
    /// LSP first.
    #[allow(clippy::too_many_arguments)]
    fn icmp_error(
        &mut self,
        r: RouterId,
        src: Ipv4Addr,
        t: u64,
        orig: &[u8],
        ty: u8,
        code: u8,
        labels: &[Lse],
        tunnel: Option<Mpls>,
    ) {
        if is_icmp_error(orig) || !self.may_send(r, t) {
            return;
        }
        let ttl = self.net().routers[r as usize].signature.0;
        let ip = Ip {
            src,
            dst: addr_at(orig, 12),
            ttl,
            tos: 0,
            ipid: self.next_ipid(r),
        };
        let mut buf = self.buffer();
        buf.resize(20 + 8 + QUOTE_LEN + 8 + 4 * labels.len(), 0);
        let Ok(n) = build::icmp_error(
            &mut buf,
            &ip,
            &build::IcmpError {
                icmp_type: ty,
                code,
                original: orig,
                quote_len: QUOTE_LEN,
                mpls: labels,
            },
        ) else {
            return self.recycle(buf);
        };
        buf.truncate(n);
        let mpls = tunnel.and_then(|m| {
            let lsp = self.net().lsps.get(usize::from(m.lsp))?;
            // the error rides on with the stack it came with, each LSE-TTL set afresh
            let fresh = if lsp.propagate { ttl } else { 255 };
            Some(Mpls {
                ttl: fresh,
                service: m.service.map(|_| fresh),
                outer: m.outer.map(|_| fresh),
                ..m
            })
        });
        let flow = flow_hash(&buf);
        self.work.push(Walk {
            t,
            at: r,
            from: None,
            buf,
            mpls,
            originated: true,
            flow,
            steps: 0,
        });
    }

    /// A router or host answers a packet addressed to it (`dst`).
    fn respond(&mut self, who: Responder, t: u64, pkt: &[u8], dst: Ipv4Addr) {
        let Ok(p) = reply::parse(pkt) else { return };
        let core::net::IpAddr::V4(src) = p.src else {
            return;
        };
        let (ittl_err, ittl_reply, router, tcp_open) = match who {
            Responder::Router(r) => {
                if !self.may_send(r, t) {
                    return;
                }
                let (te, er) = self.net().routers[r as usize].signature;
                (te, er, r, None)
            }
            Responder::Host(h) => {
                let host = &self.net().hosts[h as usize];
                if host.silent {
                    self.stats.dropped += 1;
                    return;
                }
                (host.ttl, host.ttl, host.router, Some(h))
            }
        };
        let ipid = match who {
            Responder::Router(r) => self.next_ipid(r),
            Responder::Host(h) => {
                let x = &mut self.host_ipid[h as usize];
                *x = x.wrapping_add(1);
                *x
            }
        };
        let mut ip = Ip {
            src: dst,
            dst: src,
            ttl: ittl_reply,
            tos: 0,
            ipid,
        };
        let mut buf = self.buffer();
        buf.resize(usize::from(p.len).max(20 + 8 + QUOTE_LEN + 8) + 40, 0);
        let n = match p.body {
            Body::Echo {
                icmp_type: icmp_type::ECHO_REQUEST,
                ident,
                seq,
                payload,
                ..
            } => build::icmp_echo(
                &mut buf,
                &ip,
                &build::Echo {
                    icmp_type: icmp_type::ECHO_REPLY,
                    ident,
                    seq,
                    payload,
                    checksum: None,
                },
            ),
            Body::Udp { .. } => {
                ip.ttl = ittl_err;
                build::icmp_error(
                    &mut buf,
                    &ip,
                    &build::IcmpError {
                        icmp_type: icmp_type::DEST_UNREACH,
                        code: 3,
                        original: pkt,
                        quote_len: QUOTE_LEN,
                        mpls: &[],
                    },
                )
            }
            Body::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
            } => {
                let open = tcp_open
                    .is_some_and(|h| self.net().hosts[h as usize].tcp_open.contains(&dport));
                let syn = flags & tcp_flags::SYN != 0 && flags & tcp_flags::ACK == 0;
                let t = if flags & tcp_flags::RST != 0 {
                    None
                } else if syn && open {
                    let isn = (mix(u64::from(seq) ^ u64::from(sport)) as u32) | 1;
                    Some(Tcp {
                        sport: dport,
                        dport: sport,
                        seq: isn,
                        ack: seq.wrapping_add(1),
                        flags: tcp_flags::SYN | tcp_flags::ACK,
                        window: 65535,
                    })
                } else if syn {
                    // RFC 793 (and Linux): ACK = SEG.SEQ + SEG.LEN, the SYN and any data
                    // it carried.
                    Some(Tcp {
                        sport: dport,
                        dport: sport,
                        seq: 0,
                        ack: seq.wrapping_add(1).wrapping_add(tcp_data_len(pkt)),
                        flags: tcp_flags::RST | tcp_flags::ACK,
                        window: 0,
                    })
                } else {
                    Some(Tcp {
                        sport: dport,
                        dport: sport,
                        seq: ack,
                        ack: 0,
                        flags: tcp_flags::RST,
                        window: 0,
                    })
                };
                match t {
                    Some(t) => build::tcp(&mut buf, &ip, &t),
                    None => Err(vtnt_wire::Error::Malformed),
                }
            }
            _ => Err(vtnt_wire::Error::Malformed),
        };
        let Ok(n) = n else { return self.recycle(buf) };
        buf.truncate(n);
        let flow = flow_hash(&buf);
        let w = match who {
            Responder::Router(r) => Walk {
                t,
                at: r,
                from: None,
                buf,
                mpls: None,
                originated: true,
                flow,
                steps: 0,
            },
            Responder::Host(h) => {
                let host = &self.net().hosts[h as usize];
                let t = t + host.delay_us;
                Walk {
                    t,
                    at: router,
                    from: Some(host.gw_iface),
                    buf,
                    mpls: None,
                    originated: false,
                    flow,
                    steps: 0,
                }
            }
        };
        self.work.push(w);
    }
}
