//! Ground truth: what the lab knows and a traceroute has to infer. For every destination
//! host, the router-level forward path from the first vantage point (every equal-cost
//! variant when ECMP splits it, an `ecmp` LSP's paths included), the return path, and
//! every LSP crossed with its class, ingress, egress and LSRs as the addresses a
//! traceroute would show (the interface each router receives the packet on), and which
//! revelation (DPR, BRPR) the LSP's configuration allows; plus each router's vendor
//! profile and TTL signature. What probing can observe of each tunnel is the oracle's
//! business ([`crate::oracle`]).
//!
//! The lab is dual stack ([`crate::addr`]): every address here has the IPv6 twin
//! [`crate::addr::to_v6`] gives; vantage points and routers list theirs (`addr6`,
//! `addresses6`) and the routers their IPv6 signature (`signature6`), and `vtnt lab
//! truth` prints the twins of destinations and tunnels beside them.
//!
//! The truth is that of the topology as changed at run time ([`Topology::apply`]): the
//! links down and the LSPs down (with why) are listed, an LSP's path is its current one,
//! and a destination no path reaches any more is marked `unreachable` (its `forward`
//! path then ends where the packets die).
//!
//! JSON shape (serde): `{"topology", "vantage_points":[...], "routers":[...],
//! "lsps":[...], "destinations":[{"dst", "name", "forward":[...], "return":[...],
//! "tunnels":[{"class", "ingress", "egress", "lsrs":[...], ...}], ...}]}`, and after
//! changes `"links_down":[{"a", "b", "prefix"}]`, `"lsps_down":[{"name", "reason"}]`,
//! `"unreachable": true` on a destination.

use core::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::addr::to_v6;
use crate::net::{IfaceId, Net, Owner, Peer, Pop, PrefixKind, Revelation, RouterId, TunnelClass};
use crate::topology::{LinkDown, LspDown, Topology};

/// The whole ground truth of a topology.
#[derive(Debug, Clone, Serialize)]
pub struct Truth {
    pub topology: String,
    pub vantage_points: Vec<VpTruth>,
    pub routers: Vec<RouterTruth>,
    /// LSPs up, each path as it is now.
    pub lsps: Vec<LspTruth>,
    pub destinations: Vec<Destination>,
    /// Links taken down at run time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links_down: Vec<LinkDown>,
    /// LSPs of the topology that are down after changes at run time, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lsps_down: Vec<LspDown>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VpTruth {
    pub name: String,
    pub addr: Ipv4Addr,
    /// Its IPv6 address ([`crate::addr::to_v6`] of `addr`).
    pub addr6: Ipv6Addr,
    pub prefix: String,
    pub gateway: Ipv4Addr,
    pub router: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RouterTruth {
    pub name: String,
    pub vendor: &'static str,
    /// `[iTTL of time exceeded, iTTL of echo reply]`.
    pub signature: [u8; 2],
    /// The initial hop limits of its ICMPv6 time exceeded and echo reply.
    pub signature6: [u8; 2],
    pub addresses: Vec<Ipv4Addr>,
    /// The IPv6 twins of `addresses` (none for an IPv4-only router).
    pub addresses6: Vec<Ipv6Addr>,
    pub silent: bool,
    pub icmp_rate: u32,
    /// IPv4 only (a 6PE core's LSR): its IPv6 answers come from the IPv4-mapped
    /// addresses of `addresses`.
    #[serde(skip_serializing_if = "core::ops::Not::not")]
    pub ipv4_only: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LspTruth {
    pub name: String,
    /// Which of the LSP's equal-cost paths this is (`ecmp`: one entry per path, named
    /// alike; 0 otherwise).
    pub branch: u8,
    pub class: TunnelClass,
    /// Through a 6PE core (an IPv4-only router on its path): its class over IPv6, whose
    /// packets carry the egress's 6PE label under the transport label (docs/lab.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class6: Option<TunnelClass>,
    pub ingress: String,
    pub egress: String,
    /// Router names, ingress to egress.
    pub path: Vec<String>,
    pub pop: Pop,
    pub ttl_propagate: bool,
    pub rfc4950: bool,
    pub internal_labelled: bool,
    pub icmp_tunnelling: bool,
    pub egress_forwards_ttl1: bool,
    pub revelation: Revelation,
    /// The LSP this one rides where it crosses its routers (LDP over RSVP-TE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
}

/// One router on a path and the address a traceroute sees for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hop {
    pub router: String,
    /// The address it answers a traceroute probe from: the interface the packet arrives
    /// on, or its router's `reply-from` choice.
    pub addr: Ipv4Addr,
}

/// An LSP as crossed by one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tunnel {
    pub lsp: String,
    /// Which of the LSP's equal-cost paths (`ecmp`; 0 otherwise): the tunnels of one
    /// destination with the same `lsp` are alternatives, each flow crossing one of them.
    pub branch: u8,
    pub class: TunnelClass,
    /// A whole LSP through a 6PE core: its class and revelation over IPv6 (the 6PE label
    /// under the transport label; no IPv6 to probe its LSRs with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class6: Option<TunnelClass>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revelation6: Option<Revelation>,
    pub ingress: Ipv4Addr,
    pub ingress_router: String,
    pub egress: Ipv4Addr,
    pub egress_router: String,
    /// LSRs strictly between ingress and egress, in order.
    pub lsrs: Vec<Ipv4Addr>,
    pub lsr_routers: Vec<String>,
    pub pop: Pop,
    /// Whether this is the whole LSP (`false`: cut short for an internal destination).
    pub whole: bool,
    /// Which technique reveals the hidden LSRs, from the LSP's configuration alone.
    pub revelation: Revelation,
}

#[derive(Debug, Clone, Serialize)]
pub struct Destination {
    pub dst: Ipv4Addr,
    pub name: String,
    /// Vantage point the paths start from.
    pub vantage_point: String,
    /// Routers from the vantage point's router to the destination's (first ECMP variant).
    pub forward: Vec<Hop>,
    /// Every distinct forward path when ECMP splits traffic (one entry otherwise).
    pub forward_paths: Vec<Vec<Hop>>,
    /// Routers from the destination back to the vantage point.
    #[serde(rename = "return")]
    pub return_path: Vec<Hop>,
    /// LSPs on the forward path(s).
    pub tunnels: Vec<Tunnel>,
    /// LSPs on the return path.
    pub return_tunnels: Vec<Tunnel>,
    /// No forward path reaches the destination (links down at run time, a loop).
    #[serde(skip_serializing_if = "core::ops::Not::not")]
    pub unreachable: bool,
}

/// One symbolic path: routers with their incoming interface, and the pushes met.
#[derive(Debug, Clone, Default)]
struct SymPath {
    hops: Vec<(RouterId, Option<IfaceId>)>,
    /// (lsp, f, index in `hops` of the ingress)
    pushes: Vec<(u16, u8, usize)>,
}

const MAX_PATHS: usize = 32;

/// Every forward path from router `r` (entered on `from`) to `dst`, ECMP expanded, at
/// most [`MAX_PATHS`] of them. With `once`, each router (and interface it is entered
/// on) is followed once, a path meeting one again ending there: not every path, but
/// every push on the way (those of the paths of several `ecmp` LSPs in a row, which
/// multiply, included).
fn sym_paths(
    net: &Net,
    r: RouterId,
    from: Option<IfaceId>,
    dst: Ipv4Addr,
    once: bool,
) -> Vec<SymPath> {
    let mut done = Vec::new();
    let mut followed = std::collections::BTreeSet::new();
    let mut stack = vec![(r, from, SymPath::default())];
    while let Some((r, from, mut path)) = stack.pop() {
        path.hops.push((r, from));
        if once && !followed.insert((r, from)) {
            done.push(path);
            continue;
        }
        if !once && done.len() >= MAX_PATHS {
            continue;
        }
        // A forwarding loop (static routes): the path as far as a TTL could follow it.
        if path.hops.len() > 256 {
            done.push(path);
            continue;
        }
        let Some(p) = net.prefix_of(dst) else {
            done.push(path);
            continue;
        };
        let owner = net.owner_in(p, dst);
        if matches!(owner, Some(Owner::Iface(i)) if net.ifaces[i as usize].router == r) {
            done.push(path);
            continue;
        }
        let info = &net.prefixes[p as usize];
        if info.attached.contains(&r) {
            if let (PrefixKind::Link { ifaces }, Some(Owner::Iface(peer))) = (info.kind, owner) {
                let mine = ifaces.into_iter().find(|&i| i != peer);
                if let Some(Peer::Router { router, iface, .. }) =
                    mine.map(|m| net.ifaces[m as usize].peer)
                {
                    stack.push((router, Some(iface), path));
                    continue;
                }
            }
            done.push(path);
            continue;
        }
        let pushes = net.pushes(r, p);
        if !pushes.is_empty() {
            // every path of an `ecmp` LSP, as ECMP
            for push in pushes.iter().rev() {
                let mut path = path.clone();
                let lsp = &net.lsps[usize::from(push.lsp)];
                path.pushes.push((push.lsp, push.f, path.hops.len() - 1));
                let f = usize::from(push.f);
                for k in 1..f {
                    path.hops.push((lsp.path[k], in_iface(net, lsp.out[k - 1])));
                }
                stack.push((lsp.path[f], in_iface(net, lsp.out[f - 1]), path));
            }
            continue;
        }
        let hops: Vec<IfaceId> = net.next_hops(r, p).collect();
        if hops.is_empty() {
            done.push(path);
            continue;
        }
        for &o in hops.iter().rev() {
            if let Peer::Router { router, iface, .. } = net.ifaces[o as usize].peer {
                stack.push((router, Some(iface), path.clone()));
            }
        }
    }
    done
}

/// The interface on the far side of `out`.
fn in_iface(net: &Net, out: IfaceId) -> Option<IfaceId> {
    match net.ifaces.get(out as usize)?.peer {
        Peer::Router { iface, .. } => Some(iface),
        _ => None,
    }
}

/// Router `r` entered on `from`, as a traceroute from `vp` sees it.
fn hop(net: &Net, vp: Ipv4Addr, (r, from): (RouterId, Option<IfaceId>)) -> Hop {
    let addr = net.reply_addr(r, from, vp);
    Hop {
        router: net.router_name(r).to_string(),
        addr,
    }
}

fn tunnels(net: &Net, vp: Ipv4Addr, path: &SymPath) -> Vec<Tunnel> {
    path.pushes
        .iter()
        .map(|&(l, f, at)| {
            let lsp = &net.lsps[usize::from(l)];
            let f = usize::from(f);
            let ing = hop(net, vp, path.hops[at]);
            let seen: Vec<Hop> = (1..=f)
                .map(|k| hop(net, vp, (lsp.path[k], in_iface(net, lsp.out[k - 1]))))
                .collect();
            let (lsrs, egress) = seen.split_at(f - 1);
            let six_pe = lsp.pe6.is_some() && f == lsp.egress_index();
            Tunnel {
                lsp: lsp.name.clone(),
                branch: lsp.branch,
                class: lsp.class,
                class6: six_pe.then_some(lsp.class6),
                revelation6: six_pe.then(|| lsp.revelation6()),
                ingress: ing.addr,
                ingress_router: ing.router,
                egress: egress[0].addr,
                egress_router: egress[0].router.clone(),
                lsrs: lsrs.iter().map(|h| h.addr).collect(),
                lsr_routers: lsrs.iter().map(|h| h.router.clone()).collect(),
                pop: lsp.pop,
                whole: f == lsp.egress_index(),
                revelation: lsp.revelation(),
            }
        })
        .collect()
}

/// The truth for one destination address seen from vantage point `vp`.
pub fn destination(topo: &Topology, vp: usize, dst: Ipv4Addr, name: &str) -> Option<Destination> {
    let net = &topo.net;
    let v = net.vps.get(vp)?;
    let fwd = sym_paths(net, v.router, Some(v.gw_iface), dst, false);
    let mut forward_paths: Vec<Vec<Hop>> = Vec::new();
    for p in &fwd {
        let hops: Vec<Hop> = p.hops.iter().map(|&h| hop(net, v.addr, h)).collect();
        if !forward_paths.contains(&hops) {
            forward_paths.push(hops);
        }
    }
    let mut tun: Vec<Tunnel> = Vec::new();
    for p in &sym_paths(net, v.router, Some(v.gw_iface), dst, true) {
        for t in tunnels(net, v.addr, p) {
            if !tun.contains(&t) {
                tun.push(t);
            }
        }
    }
    let (start, from) = match net.owner(dst)? {
        Owner::Host(h) => {
            let h = &net.hosts[h as usize];
            (h.router, Some(h.gw_iface))
        }
        Owner::Iface(i) => (net.ifaces[i as usize].router, None),
        Owner::Vp(_) => (v.router, Some(v.gw_iface)),
    };
    let unreachable = !fwd
        .iter()
        .any(|p| p.hops.last().map(|h| h.0) == Some(start));
    let back = sym_paths(net, start, from, v.addr, false);
    let first_back = back.first().cloned().unwrap_or_default();
    Some(Destination {
        dst,
        name: name.to_string(),
        vantage_point: v.name.clone(),
        forward: forward_paths.first().cloned().unwrap_or_default(),
        forward_paths,
        return_path: first_back
            .hops
            .iter()
            .map(|&h| hop(net, v.addr, h))
            .collect(),
        tunnels: tun,
        return_tunnels: tunnels(net, v.addr, &first_back),
        unreachable,
    })
}

/// The ground truth of a topology, destinations seen from its first vantage point.
pub fn truth(topo: &Topology) -> Truth {
    let net = &topo.net;
    let vantage_points = crate::vantage::vantage_points(topo)
        .into_iter()
        .map(|v| VpTruth {
            name: v.name,
            addr: v.addr,
            addr6: to_v6(v.addr),
            prefix: v.prefix.to_string(),
            gateway: v.gateway,
            router: v.router,
        })
        .collect();
    let routers = net
        .routers
        .iter()
        .map(|r| {
            let ((te, er), (te6, er6)) = (r.signature, r.vendor.signature6());
            let addresses: Vec<Ipv4Addr> = r
                .ifaces
                .iter()
                .map(|&i| net.ifaces[i as usize].addr)
                .collect();
            RouterTruth {
                name: r.name.clone(),
                vendor: r.vendor.name(),
                signature: [te, er],
                signature6: [te6, er6],
                addresses6: if r.ipv4_only {
                    Vec::new()
                } else {
                    addresses.iter().map(|&a| to_v6(a)).collect()
                },
                addresses,
                silent: r.silent,
                icmp_rate: r.icmp_rate,
                ipv4_only: r.ipv4_only,
            }
        })
        .collect();
    let lsps = net
        .lsps
        .iter()
        .map(|l| LspTruth {
            name: l.name.clone(),
            branch: l.branch,
            class: l.class,
            class6: l.pe6.map(|_| l.class6),
            ingress: net.router_name(l.path[0]).to_string(),
            egress: net.router_name(l.path[l.egress_index()]).to_string(),
            path: l
                .path
                .iter()
                .map(|&r| net.router_name(r).to_string())
                .collect(),
            pop: l.pop,
            ttl_propagate: l.propagate,
            rfc4950: l.rfc4950,
            internal_labelled: l.internal_labelled,
            icmp_tunnelling: l.icmp_tunnelling,
            egress_forwards_ttl1: l.egress_forwards_ttl1,
            revelation: l.revelation(),
            over: l.over.map(|o| net.lsps[usize::from(o.lsp)].name.clone()),
        })
        .collect();
    let destinations = net
        .hosts
        .iter()
        .filter_map(|h| destination(topo, 0, h.addr, &h.name))
        .collect();
    Truth {
        topology: topo.name().to_string(),
        vantage_points,
        routers,
        lsps,
        destinations,
        links_down: topo.links_down(),
        lsps_down: topo.lsps_down().to_vec(),
    }
}

impl Truth {
    /// The truth as IPv6 probes see it: each tunnel through a 6PE core with its class
    /// and revelation over IPv6 (`class6`, `revelation6`) in place of IPv4's.
    pub fn over_ipv6(&self) -> Truth {
        let mut t = self.clone();
        for x in t.destinations.iter_mut().flat_map(|d| d.tunnels.iter_mut()) {
            x.class = x.class6.unwrap_or(x.class);
            x.revelation = x.revelation6.unwrap_or(x.revelation);
        }
        for l in &mut t.lsps {
            l.class = l.class6.unwrap_or(l.class);
        }
        t
    }
    /// The destination entry for `dst`, if it is one of the hosts.
    pub fn destination(&self, dst: Ipv4Addr) -> Option<&Destination> {
        self.destinations.iter().find(|d| d.dst == dst)
    }
    /// The destination entry by host name.
    pub fn by_name(&self, name: &str) -> Option<&Destination> {
        self.destinations.iter().find(|d| d.name == name)
    }
}
