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
//! IPv6 packets take the same walk: their lab addresses stand for their IPv4 twins
//! (`family`), the hop limit for the IP-TTL, and answers are ICMPv6 (RFC 4443) built by
//! `family::Header` with the vendor's IPv6 hop limits ([`crate::Vendor::signature6`]).
//! An IPv4-only router (a 6PE core's LSR) switches labelled IPv6 packets but routes
//! none, has no IPv6 twin addresses, and answers an IPv6 packet it expires from its
//! IPv4-mapped address, always along the LSP to its egress (RFC 4798, RFC 3032 2.3.2);
//! the ingress of an LSP through one pushes the egress's 6PE label under the transport
//! label on IPv6 (`Lsp::pe6`), which PHP leaves for the egress to pop, as a VPN label.
//!
//! No function here panics on any input: packets are checked once on entry and every
//! later access is to bytes this module wrote or checked.

use core::net::Ipv4Addr;

use vtnt_wire::build::Tcp;
use vtnt_wire::mpls::Lse;
use vtnt_wire::reply::Body;
use vtnt_wire::{icmp_type, tcp_flags};

use super::family::{self, Header};
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
/// (`buf`: the packet, whose family picks the service label: see [`Lsp::service`].)
fn inner_stack(lsp: &Lsp, m: &Mpls, label: Option<u32>, buf: &[u8]) -> Vec<Lse> {
    let service = lsp.service(family::is_v6(buf));
    let label = if m.service_only {
        service
    } else {
        carried(lsp, m, label, buf)
    };
    let lse = Lse::new(label.unwrap_or(3), 0, m.service.is_none(), m.ttl);
    core::iter::once(lse)
        .chain(m.service.zip(service).map(|(t, v)| Lse::new(v, 0, true, t)))
        .collect()
}

/// The transport label `label` as packet `buf` carries it: UHP's explicit null is
/// IPv6's (label 2) on a bare IPv6 packet, IPv4's (0) otherwise, over a 6PE label too
/// (the transport LSP is an IPv4 one; RFC 4798 section 3).
fn carried(lsp: &Lsp, m: &Mpls, label: Option<u32>, buf: &[u8]) -> Option<u32> {
    if m.service.is_some() && lsp.pe6.is_some() {
        label
    } else {
        family::explicit_null(label, buf)
    }
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
        let Some(total) = family::total_len(packet) else {
            self.stats.malformed += 1;
            return;
        };
        let mut buf = self.buffer();
        buf.extend_from_slice(&packet[..total]);
        let flow = family::flow_hash(&buf);
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
                let stack = inner_stack(lsp, &m, label, &w.buf);
                let lse = stack[0];
                let (rfc4950, tunnelling, pop) = (lsp.rfc4950, lsp.icmp_tunnelling, lsp.pop);
                let out = lsp.out.get(usize::from(m.i)).copied();
                if !w.originated && m.ttl <= 1 {
                    let labels: &[Lse] = if rfc4950 { &stack } else { &[] };
                    let tunnelling = tunnelling || self.no_ipv6_for(r, &w.buf);
                    let tunnel = (tunnelling && m.i < m.f).then_some(m);
                    let src = self.net().reply_addr(r, w.from, family::src(&w.buf));
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
                                let t = family::ttl(&w.buf).min(ttl);
                                family::set_ttl(&mut w.buf, t);
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
                let t = family::ttl(&w.buf).min(m.ttl);
                family::set_ttl(&mut w.buf, t);
                w.mpls = None;
                popped = Some((m.lsp, lse));
            }

            // IP processing at router r: an IPv4-only router routes no IPv6
            if self.no_ipv6_for(r, &w.buf) {
                self.stats.dropped += 1;
                return self.recycle(w.buf);
            }
            let dst = family::dst(&w.buf);
            let net = self.net();
            // an IPv4-only router's addresses have no IPv6 twin: no route to them
            let owner = net.prefix_of(dst).map(|p| (p, net.owner_in(p, dst)));
            let twinless = |o: Option<Owner>| match o {
                Some(Owner::Iface(i)) => self.no_ipv6_for(net.ifaces[i as usize].router, &w.buf),
                _ => false,
            };
            let Some((p, owner)) = owner.filter(|&(_, o)| !twinless(o)) else {
                if !w.originated {
                    self.unreachable(r, &w, 0);
                }
                self.stats.dropped += 1;
                return self.recycle(w.buf);
            };
            if let Some(Owner::Iface(i)) = owner {
                if net.ifaces[i as usize].router == r {
                    if !w.originated {
                        self.respond(Responder::Router(r), w.t, &w.buf, dst);
                    }
                    return self.recycle(w.buf);
                }
            }
            if !w.originated {
                let t = family::ttl(&w.buf);
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
                        let src = self.net().reply_addr(r, w.from, family::src(&w.buf));
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
                    family::set_ttl(&mut w.buf, t - 1);
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
                let ip = family::ttl(&w.buf);
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
                    // a service label (VPN, or 6PE over IPv6) with the same TTL
                    service: (whole && lsp.service(family::is_v6(&w.buf)).is_some()).then_some(ttl),
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
                .chain(inner_stack(lsp, &m, label, &w.buf))
                .collect();
            let labels: &[Lse] = if te.rfc4950 { &stack } else { &[] };
            let tunnelling = lsp.icmp_tunnelling || self.no_ipv6_for(w.at, &w.buf);
            let tunnel = (tunnelling && m.i < m.f).then_some(m);
            let src = net.reply_addr(w.at, w.from, family::src(&w.buf));
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
        let src = self.net().reply_addr(r, w.from, family::src(&w.buf));
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

    /// Whether `buf` is an IPv6 packet and router `r` IPv4-only (a 6PE core's LSR).
    fn no_ipv6_for(&self, r: RouterId, buf: &[u8]) -> bool {
        family::is_v6(buf) && self.net().routers[r as usize].ipv4_only
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
        if family::is_icmp_error(orig) || !self.may_send(r, t) {
            return;
        }
        let router = &self.net().routers[r as usize];
        let ttls = (router.signature.0, router.vendor.signature6().0);
        let mapped = router.ipv4_only;
        let mut ip = Header::answering(orig, src, ttls, || self.next_ipid(r));
        if mapped {
            // RFC 4798 section 3: an IPv4-only LSR has no IPv6 address to answer from
            ip.answer_from_mapped(src);
        }
        let ttl = match &ip {
            Header::V4(ip) => ip.ttl,
            Header::V6(ip) => ip.hop_limit,
        };
        let mut buf = self.buffer();
        buf.resize(40 + 8 + QUOTE_LEN + 8 + 4 * labels.len(), 0);
        let Ok(n) = ip.error(&mut buf, (ty, code), orig, QUOTE_LEN, labels) else {
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
        let flow = family::flow_hash(&buf);
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
        let Ok(p) = family::parse(pkt) else { return };
        let (ittl_err, ittl_reply, router, tcp_open) = match who {
            Responder::Router(r) => {
                if !self.may_send(r, t) {
                    return;
                }
                let router = &self.net().routers[r as usize];
                let ((te, er), (te6, er6)) = (router.signature, router.vendor.signature6());
                ((te, te6), (er, er6), r, None)
            }
            Responder::Host(h) => {
                let host = &self.net().hosts[h as usize];
                if host.silent {
                    self.stats.dropped += 1;
                    return;
                }
                let ttl = (host.ttl, host.ttl);
                (ttl, ttl, host.router, Some(h))
            }
        };
        let mut ip = Header::answering(pkt, dst, ittl_reply, || match who {
            Responder::Router(r) => self.next_ipid(r),
            Responder::Host(h) => {
                let x = &mut self.host_ipid[h as usize];
                *x = x.wrapping_add(1);
                *x
            }
        });
        let mut buf = self.buffer();
        buf.resize(usize::from(p.len).max(20 + 8 + QUOTE_LEN + 8) + 40, 0);
        let n = match p.body {
            Body::Echo {
                icmp_type,
                ident,
                seq,
                payload,
                ..
            } if icmp_type == ip.echo_request() => ip.echo_reply(&mut buf, ident, seq, payload),
            Body::Udp { .. } => {
                ip.set_ttl(ittl_err);
                ip.error(&mut buf, (icmp_type::DEST_UNREACH, 3), pkt, QUOTE_LEN, &[])
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
                        ack: seq.wrapping_add(1).wrapping_add(family::tcp_data_len(pkt)),
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
                    Some(t) => ip.tcp(&mut buf, &t),
                    None => Err(vtnt_wire::Error::Malformed),
                }
            }
            _ => Err(vtnt_wire::Error::Malformed),
        };
        let Ok(n) = n else { return self.recycle(buf) };
        buf.truncate(n);
        let flow = family::flow_hash(&buf);
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
