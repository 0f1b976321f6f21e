//! The resolved network a validated topology describes: routers, interfaces, links,
//! prefixes, hosts, vantage points and LSPs, all by index, plus the routing tables
//! ([`routing::Tables`]). Built once by `Topology` validation, read by the
//! forwarding code and the ground truth.

use core::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::Prefix;
use crate::profile::Vendor;
pub(crate) mod routing;

use routing::Tables;

pub(crate) type RouterId = u32;
pub(crate) type IfaceId = u32;

#[derive(Debug, Clone)]
pub(crate) struct Router {
    pub name: String,
    pub vendor: Vendor,
    /// `<time exceeded, echo reply>` initial TTLs: the vendor's or the topology's own.
    pub signature: (u8, u8),
    pub reply_from: ReplyFrom,
    pub silent: bool,
    pub icmp_rate: u32,
    /// No IPv6 of its own (a 6PE core's LSR): see [`crate::RouterDef::ipv4_only`].
    pub ipv4_only: bool,
    /// All interfaces, loopback included.
    pub ifaces: Vec<IfaceId>,
    /// Interfaces on router-to-router links.
    pub links: Vec<IfaceId>,
}

/// What is on the other side of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// Another router over a point-to-point link.
    Router {
        router: RouterId,
        iface: IfaceId,
        link: u32,
    },
    Host(u32),
    Vp(u32),
    Loopback,
}

#[derive(Debug, Clone)]
pub(crate) struct Iface {
    pub router: RouterId,
    pub addr: Ipv4Addr,
    pub prefix: u32,
    pub peer: Peer,
    /// One-way delay out of this interface, microseconds.
    pub delay_us: u64,
    /// IGP cost out of this interface (links only).
    pub cost: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrefixKind {
    Link {
        ifaces: [IfaceId; 2],
    },
    Loopback {
        iface: IfaceId,
    },
    HostLan {
        host: u32,
        iface: IfaceId,
    },
    /// A vantage point's LAN (the topology's), or the VM LAN the fronts add to the first
    /// one ([`crate::Topology::with_vm_lan`]): the router answers for `gateway` (the LAN
    /// interface's address, or the VM LAN's host 1), every other address is the port's.
    VpLan {
        vp: u32,
        iface: IfaceId,
        gateway: Ipv4Addr,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct PrefixInfo {
    pub prefix: Prefix,
    pub kind: PrefixKind,
    /// Routers the prefix is connected to (one or two).
    pub attached: Vec<RouterId>,
}

#[derive(Debug, Clone)]
pub(crate) struct Host {
    pub name: String,
    pub addr: Ipv4Addr,
    pub router: RouterId,
    pub gw_iface: IfaceId,
    pub delay_us: u64,
    pub ttl: u8,
    pub tcp_open: Vec<u16>,
    pub silent: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Vp {
    pub name: String,
    pub addr: Ipv4Addr,
    pub prefix: Prefix,
    pub router: RouterId,
    pub gw_iface: IfaceId,
    pub delay_us: u64,
    /// The VM LAN routed to this vantage point too, with the router's address on it.
    pub vm_lan: Option<(Prefix, Ipv4Addr)>,
}

/// The TNT class of an LSP (shared with `vtnt-tnt` through `vtnt-record`).
pub use vtnt_record::TunnelClass;

/// Which TNT revelation technique shows the hidden LSRs of a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Revelation {
    /// Nothing is hidden.
    NotNeeded,
    /// A trace to the egress shows every LSR at once.
    Dpr,
    /// Traces to the egress, then to each newly revealed LSR, show one LSR each.
    Brpr,
    /// Neither works (internal prefixes are label switched and the LSP ends with UHP).
    None,
}

#[derive(Debug, Clone)]
pub(crate) struct Lsp {
    pub name: String,
    /// Which of the LSP's equal-cost paths this is (`ecmp`; 0 otherwise). Each path is
    /// an `Lsp` of its own, named alike, next to the others in [`Net::lsps`].
    pub branch: u8,
    /// Routers from ingress (index 0) to egress (last).
    pub path: Vec<RouterId>,
    /// `out[i]`: interface of `path[i]` towards `path[i + 1]`.
    pub out: Vec<IfaceId>,
    pub propagate: bool,
    pub pop: Pop,
    pub rfc4950: bool,
    pub internal_labelled: bool,
    pub egress_lans_labelled: bool,
    pub icmp_tunnelling: bool,
    pub egress_forwards_ttl1: bool,
    pub class: TunnelClass,
    /// `label_base[i]`: the first label `path[i]` allocated for this LSP; it allocates
    /// one per cut `f >= i` in turn (the cut at `path[f]` carries an internal FEC,
    /// `f = path.len() - 1` is the whole LSP), skipping `f = i` when that is explicit
    /// null. See [`Lsp::label`].
    pub label_base: Vec<u32>,
    /// UHP with IPv4 explicit null: the last router of every cut expects label 0.
    pub explicit_null: bool,
    /// The egress's service (VPN) label, pushed under the transport label on traffic
    /// that rides the whole LSP (`vpn-label`).
    pub vpn: Option<u32>,
    /// A 6PE core (an IPv4-only router on the path): the label the egress 6PE router
    /// gives IPv6 (RFC 4798 section 3), pushed under the transport label on IPv6 traffic
    /// that rides the whole LSP as `vpn` is on any (the `vpn` label itself when there is
    /// one, as 6VPE's label stands for it).
    pub pe6: Option<u32>,
    /// The class over IPv6: a 6PE core's shows the 6PE label (as `class` would with
    /// `vpn-label`); `class` otherwise.
    pub class6: TunnelClass,
    /// The LSP this one rides where it crosses that LSP's routers (`over`).
    pub over: Option<Over>,
}

/// Where an LSP rides another one (LDP over RSVP-TE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Over {
    /// The outer LSP.
    pub lsp: u16,
    /// The index in the inner LSP's path of the outer LSP's ingress (an LSR of the
    /// inner one; so is the outer egress).
    pub at: u8,
}

impl Lsp {
    /// The label router `path[i]` expects on this LSP cut at `path[f]`.
    /// (0 where unused: at the ingress, or past the cut; `None` off the path.)
    pub fn label(&self, f: usize, i: usize) -> Option<u32> {
        let n = self.path.len();
        if f >= n || i >= n {
            return None;
        }
        if i == 0 || i > f || (i == f && self.explicit_null) {
            return Some(0);
        }
        let k = (f - i) as u32 - u32::from(self.explicit_null);
        Some(self.label_base[i].wrapping_add(k) & 0xf_ffff)
    }
    /// The service label pushed under the transport label on traffic of the family
    /// `v6` that rides the whole LSP: the VPN label, or over IPv6 a 6PE core's label.
    pub fn service(&self, v6: bool) -> Option<u32> {
        if v6 {
            self.pe6.or(self.vpn)
        } else {
            self.vpn
        }
    }
    pub fn egress_index(&self) -> usize {
        self.path.len() - 1
    }
    pub fn revelation(&self) -> Revelation {
        if !self.class.hides_lsrs() || self.path.len() <= 2 {
            Revelation::NotNeeded
        } else if !self.internal_labelled {
            Revelation::Dpr
        } else if self.pop == Pop::Php {
            Revelation::Brpr
        } else {
            Revelation::None
        }
    }
    /// [`Lsp::revelation`] over IPv6: through a 6PE core neither DPR nor BRPR works (its
    /// LSRs have no IPv6 address to probe and route no unlabelled IPv6).
    pub fn revelation6(&self) -> Revelation {
        match self.pe6 {
            None => self.revelation(),
            Some(_) if !self.class6.hides_lsrs() || self.path.len() <= 2 => Revelation::NotNeeded,
            Some(_) => Revelation::None,
        }
    }
}

/// The whole resolved network.
#[derive(Debug, Clone)]
pub(crate) struct Net {
    pub routers: Vec<Router>,
    pub ifaces: Vec<Iface>,
    /// Sorted by first address; never overlapping.
    pub prefixes: Vec<PrefixInfo>,
    pub hosts: Vec<Host>,
    pub vps: Vec<Vp>,
    pub lsps: Vec<Lsp>,
    pub tables: Tables,
}

/// Who owns an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Iface(IfaceId),
    Host(u32),
    Vp(u32),
}

impl Net {
    /// The prefix containing `addr`.
    pub fn prefix_of(&self, addr: Ipv4Addr) -> Option<u32> {
        let a = u32::from(addr);
        let i = self.prefixes.partition_point(|p| p.prefix.first() <= a);
        let i = i.checked_sub(1)?;
        (self.prefixes[i].prefix.last() >= a).then_some(i as u32)
    }

    /// Who, if anyone, has `addr` (in prefix `p`).
    pub fn owner_in(&self, p: u32, addr: Ipv4Addr) -> Option<Owner> {
        match self.prefixes.get(p as usize)?.kind {
            PrefixKind::Link { ifaces } => ifaces
                .into_iter()
                .find(|i| self.ifaces[*i as usize].addr == addr)
                .map(Owner::Iface),
            PrefixKind::Loopback { iface } => Some(Owner::Iface(iface)),
            PrefixKind::HostLan { host, iface } => {
                if self.ifaces[iface as usize].addr == addr {
                    Some(Owner::Iface(iface))
                } else if self.hosts[host as usize].addr == addr {
                    Some(Owner::Host(host))
                } else {
                    None
                }
            }
            PrefixKind::VpLan { vp, iface, gateway } => {
                if gateway == addr {
                    Some(Owner::Iface(iface))
                } else {
                    Some(Owner::Vp(vp))
                }
            }
        }
    }

    pub fn owner(&self, addr: Ipv4Addr) -> Option<Owner> {
        self.owner_in(self.prefix_of(addr)?, addr)
    }

    /// The address router `r`'s ICMP error about a packet from `to` comes from, the
    /// packet having come in on `from` (see [`ReplyFrom`]); its first interface when none
    /// applies.
    pub fn reply_addr(&self, r: RouterId, from: Option<IfaceId>, to: Ipv4Addr) -> Ipv4Addr {
        let router = &self.routers[r as usize];
        let id = match router.reply_from {
            ReplyFrom::Incoming => from,
            ReplyFrom::Loopback => router
                .ifaces
                .iter()
                .copied()
                .find(|&i| self.ifaces[i as usize].peer == Peer::Loopback)
                .or(from),
            ReplyFrom::Outgoing => self.out_iface(r, to).or(from),
        };
        id.or_else(|| router.ifaces.first().copied())
            .map_or(Ipv4Addr::UNSPECIFIED, |i| self.ifaces[i as usize].addr)
    }

    /// The interface `r` sends a packet for `to` out of (the first ECMP next hop).
    fn out_iface(&self, r: RouterId, to: Ipv4Addr) -> Option<IfaceId> {
        let p = self.prefix_of(to)?;
        if self.prefixes[p as usize].attached.contains(&r) {
            return self.routers[r as usize]
                .ifaces
                .iter()
                .copied()
                .find(|&i| self.prefix_of(self.ifaces[i as usize].addr) == Some(p));
        }
        self.next_hops(r, p).next()
    }

    pub fn router_name(&self, r: RouterId) -> &str {
        &self.routers[r as usize].name
    }
}

/// Which of its addresses a router's ICMP errors come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplyFrom {
    /// The interface the packet came in on (RFC 1812's recommendation, the common case).
    #[default]
    Incoming,
    /// The interface the error leaves on, towards the packet's source.
    Outgoing,
    /// Its loopback (the incoming interface when it has none).
    Loopback,
}

impl ReplyFrom {
    pub(crate) fn is_incoming(&self) -> bool {
        *self == ReplyFrom::Incoming
    }
}

/// How an LSP's label is popped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pop {
    /// Penultimate hop popping: the last LSR pops, the egress gets plain IP.
    Php,
    /// Ultimate hop popping: the egress gets the label and pops it.
    Uhp,
}
