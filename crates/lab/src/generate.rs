//! Seeded random topologies with a chosen mix of tunnel classes and vendors.
//!
//! Shape: a tree grown from the vantage point's router. Each destination gets a branch
//! from a random router already in the tree: zero to two plain routers (sometimes an
//! ECMP diamond, sometimes with asymmetric costs), then, drawn from the class mix, an
//! LSP (a new ingress, `lsrs` LSRs, an egress; sometimes with equal-cost paths inside,
//! a twin of an LSR or two routers in a row; sometimes with its return LSP), then one
//! plain router and the host. Branches hang only where the whole path stays within
//! `max_hops` routers (30 by default, as on the Internet: this also keeps every reply
//! TTL of a 64-iTTL router above 32, where TTL-based signatures stay unambiguous).
//! Implicit LSPs get at least `implicit_min_lsrs` LSRs (2: a lone implicit LSR quotes TTL
//! 1 and cannot be seen). The same seed and options always give the same topology (the
//! PRNG is `vtnt_rng`'s SplitMix64).

use crate::addr::Prefix;
use crate::limits::{self, TooLarge, MAX_LSPS, MAX_ROUTERS};
use crate::net::TunnelClass;
use crate::net::{Pop, ReplyFrom};
use crate::profile::Vendor;
use crate::topology::{
    HostDef, LinkDef, LspDef, RouterDef, Topology, TopologyDef, VantagePointDef,
};
use vtnt_rng::Rng;

/// Most destination hosts a generated topology has (one branch each): each branch makes
/// up to four LSPs (one with two equal-cost paths, and its return), and the lab takes
/// [`MAX_LSPS`]. Routers limit them further: [`GenOptions::max_destinations`].
pub const MAX_DESTINATIONS: usize = MAX_LSPS / 4;

/// Relative weights of what a branch carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassMix {
    pub none: u32,
    pub explicit: u32,
    pub implicit: u32,
    pub opaque: u32,
    pub invisible_php: u32,
    pub invisible_uhp: u32,
}

impl Default for ClassMix {
    /// Roughly the 2025 Ark shares of tunnels (explicit 79%, invisible PHP 15%, implicit
    /// 3%, invisible UHP 2%, opaque 0.5%), rounded up so every class shows in a few
    /// dozen branches, plus MPLS-free branches.
    fn default() -> ClassMix {
        ClassMix {
            none: 20,
            explicit: 50,
            implicit: 6,
            opaque: 4,
            invisible_php: 15,
            invisible_uhp: 5,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenOptions {
    /// Destination hosts, one branch each, at most [`GenOptions::max_destinations`]
    /// (more are not made; [`GenOptions::check`] refuses them).
    pub destinations: usize,
    pub mix: ClassMix,
    /// Vendors drawn uniformly for every router (empty: all).
    pub vendors: Vec<Vendor>,
    /// LSRs per LSP, inclusive range.
    pub lsrs: (usize, usize),
    /// Fewest LSRs of an implicit LSP (2; 1 allows single-LSR implicit tunnels, whose
    /// lone LSR quotes IP-TTL 1 and no label, like a plain router).
    pub implicit_min_lsrs: usize,
    /// Longest forward or return path, in routers from the vantage point's router to the
    /// destination's, both counted (30, as on the Internet; at least 8). Branches hang
    /// where they fit; an LSP too long for any place is shortened.
    pub max_hops: usize,
    /// Share of invisible PHP tunnels whose internal prefixes are labelled (BRPR only).
    pub brpr_share: f64,
    /// Chance an LSP gets its return LSP.
    pub return_lsp: f64,
    /// Chance a plain hop is an ECMP diamond.
    pub ecmp: f64,
    /// Chance a diamond's costs differ by direction (asymmetric return path).
    pub asymmetry: f64,
    /// Chance an explicit or implicit LSP tunnels its ICMP.
    pub icmp_tunnelling: f64,
    /// Chance a diamond's second branch is two routers long at the same cost: replies
    /// (and forward flows) of the routers behind it take paths of unequal length, which
    /// gives u-turns and FRPLA of a few hops on paths without MPLS. Also the chance an
    /// LSP's parallel branch (`lsp_ecmp`) is two routers, not a twin.
    pub unequal_ecmp: f64,
    /// Chance an LSP of two LSRs or more has equal-cost paths inside (`ecmp`, which LDP
    /// follows: flows to different destinations cross different LSRs): one of its LSRs
    /// gets a twin linked to the same neighbours at the same costs, or two routers in a
    /// row at the same total cost; its return LSP too. Such an LSP rides no TE LSP
    /// (`te_stacks`).
    pub lsp_ecmp: f64,
    /// Initial TTLs of the destination hosts, drawn uniformly (empty: 64).
    pub host_ttls: Vec<u8>,
    /// Chance a router's TTL signature is not its vendor's: half of them outside TNT's
    /// table (`<255,128>`, `<128,64>`, `<32,32>`), half another vendor family's, so that a
    /// fingerprint can be unknown or wrong.
    pub odd_signatures: f64,
    /// Chance a router sends its ICMP errors from the interface towards the source, not
    /// the one the packet came in on (`reply-from = "outgoing"`).
    pub reply_from_outgoing: f64,
    /// Chance a branch's host sits on the LSP's egress itself (its LAN label switched over
    /// the LSP: the tunnel ends at the destination's gateway), not one router further.
    pub host_at_egress: f64,
    /// Chance an LSP other than an implicit one carries a service (VPN) label under its
    /// transport label.
    pub vpn_labels: f64,
    /// Chance an LSP other than an implicit or `ecmp` one has a 6PE core (RFC 4798): its
    /// LSRs IPv4 only, so IPv6 crosses it under the egress's 6PE label, and a return LSP
    /// always. 0 (the default) draws nothing, so the topologies are those of a generator
    /// without the knob; `vtnt bench tnt-accuracy --family ipv6` takes
    /// [`DUAL_STACK_SIX_PE_CORES`].
    pub six_pe_cores: f64,
    /// Chance an LSP of at least three LSRs rides an RSVP-TE LSP over some of them (LDP
    /// over RSVP-TE, `over`): its LSRs there quote a stack of two labels, and the TE
    /// LSP's egress, quoting one again, is no egress of the tunnel.
    pub te_stacks: f64,
    /// Chance a branch gets the LSP its class mix draws (1; 0 makes MPLS-free topologies
    /// with the same shapes: the control set on which every tunnel reported is false).
    pub mpls: f64,
    /// Chance a router rate-limits its ICMP to [`RATE_LIMIT`] messages per second (burst
    /// as many), as routers on the Internet do: probes go unanswered under load.
    pub icmp_rate_limited: f64,
}

/// [`GenOptions::six_pe_cores`] of the accuracy benchmark's dual-stack topologies
/// (`--family ipv6`): a share like the VPN labels'.
pub const DUAL_STACK_SIX_PE_CORES: f64 = 0.2;

/// ICMP messages per second (and burst) of a rate-limiting router
/// ([`GenOptions::icmp_rate_limited`]).
pub const RATE_LIMIT: u32 = 10;

impl Default for GenOptions {
    fn default() -> GenOptions {
        GenOptions {
            destinations: 16,
            mix: ClassMix::default(),
            vendors: Vec::new(),
            lsrs: (1, 6),
            implicit_min_lsrs: 2,
            max_hops: 30,
            brpr_share: 0.5,
            return_lsp: 0.5,
            ecmp: 0.2,
            asymmetry: 0.3,
            icmp_tunnelling: 0.2,
            unequal_ecmp: 0.3,
            lsp_ecmp: 0.15,
            host_ttls: vec![64, 128, 255],
            odd_signatures: 0.05,
            reply_from_outgoing: 0.05,
            host_at_egress: 0.2,
            vpn_labels: 0.2,
            six_pe_cores: 0.0,
            te_stacks: 0.15,
            mpls: 1.0,
            icmp_rate_limited: 0.0,
        }
    }
}

/// The settings `vtnt lab generate --set NAME=VALUE` takes, with what each means (the
/// class mix and LSRs per LSP have flags of their own; destinations has both, since
/// `vtnt bench tnt-accuracy` has no flag for it).
pub const SETTINGS: [(&str, &str); 20] = [
    (
        "vendors",
        "vendors drawn for every router, comma-separated (all: every profile)",
    ),
    (
        "host-ttls",
        "initial TTLs of the destination hosts, drawn uniformly, comma-separated",
    ),
    (
        "implicit-min-lsrs",
        "fewest LSRs of an implicit LSP (1 allows ones no trace can see)",
    ),
    (
        "max-hops",
        "longest forward or return path in routers, 8 to 255",
    ),
    (
        "brpr-share",
        "share of invisible PHP tunnels whose internal prefixes are labelled",
    ),
    ("return-lsp", "chance an LSP gets its return LSP"),
    ("ecmp", "chance a plain hop is an ECMP diamond"),
    ("asymmetry", "chance a diamond's costs differ by direction"),
    (
        "icmp-tunnelling",
        "chance an explicit or implicit LSP tunnels its ICMP",
    ),
    (
        "unequal-ecmp",
        "chance a diamond's (or an LSP's) second branch is two routers long",
    ),
    (
        "lsp-ecmp",
        "chance an LSP of two LSRs or more has equal-cost paths inside",
    ),
    (
        "odd-signatures",
        "chance a router's TTL signature is not its vendor's",
    ),
    (
        "reply-from-outgoing",
        "chance a router answers from its interface towards the source",
    ),
    (
        "host-at-egress",
        "chance a branch's host sits on its LSP's egress",
    ),
    (
        "vpn-labels",
        "chance a non-implicit LSP carries a service label",
    ),
    (
        "six-pe-cores",
        "chance a non-implicit, non-ecmp LSP has a 6PE core (IPv4-only LSRs)",
    ),
    (
        "te-stacks",
        "chance an LSP of three LSRs or more rides an RSVP-TE LSP",
    ),
    (
        "mpls",
        "chance a branch gets the LSP its class mix draws (0: MPLS-free)",
    ),
    (
        "icmp-rate-limited",
        "chance a router rate-limits its ICMP to 10 per second",
    ),
    (
        "destinations",
        "destination hosts, one branch each, 1 to 15000, fewer with long LSPs (also --destinations)",
    ),
];

impl GenOptions {
    /// Sets one of [`SETTINGS`] from its text; the error names the setting and the values
    /// it takes.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let bad = |what: &str| format!("setting `{name}`: `{value}` is not {what}");
        let list = || value.split(',').map(str::trim).filter(|w| !w.is_empty());
        match name {
            "vendors" if value == "all" => self.vendors = Vec::new(),
            "vendors" => {
                let vendors: Vec<Vendor> = list()
                    .map(|w| Vendor::ALL.into_iter().find(|v| v.name() == w).ok_or(w))
                    .collect::<Result<_, _>>()
                    .map_err(|w| {
                        let names: Vec<&str> = Vendor::ALL.iter().map(|v| v.name()).collect();
                        bad(&format!(
                            "a list of vendors ({}; `{w}` is none)",
                            names.join(", ")
                        ))
                    })?;
                if vendors.is_empty() {
                    return Err(bad("a list of vendors"));
                }
                self.vendors = vendors;
            }
            "host-ttls" => {
                self.host_ttls = list()
                    .map(|w| w.parse::<u8>().ok().filter(|&t| t > 0))
                    .collect::<Option<_>>()
                    .filter(|v: &Vec<u8>| !v.is_empty())
                    .ok_or_else(|| bad("a list of TTLs from 1 to 255"))?;
            }
            _ => {
                if let Some((count, lo, hi)) = self.count(name) {
                    *count = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (lo..=hi).contains(n))
                        .ok_or_else(|| bad(&format!("a number from {lo} to {hi}")))?;
                    return Ok(());
                }
                let share = self.share(name).ok_or_else(|| {
                    let names: Vec<&str> = SETTINGS.iter().map(|s| s.0).collect();
                    format!(
                        "no generator setting `{name}` (settings: {})",
                        names.join(", ")
                    )
                })?;
                *share = value
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| bad("a share from 0 to 1"))?;
            }
        }
        Ok(())
    }

    /// [`GenOptions::set`] from `NAME=VALUE`.
    pub fn set_pair(&mut self, pair: &str) -> Result<(), String> {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}` is not NAME=VALUE"))?;
        self.set(name.trim(), value.trim())
    }

    /// The setting `name` of [`SETTINGS`] as [`GenOptions::set`] takes it.
    pub fn get(&self, name: &str) -> Option<String> {
        let join = |v: Vec<String>| v.join(",");
        Some(match name {
            "vendors" if self.vendors.is_empty() => "all".into(),
            "vendors" => join(self.vendors.iter().map(|v| v.name().to_string()).collect()),
            "host-ttls" => join(self.host_ttls.iter().map(u8::to_string).collect()),
            _ => {
                let mut o = self.clone();
                match o.count(name) {
                    Some((n, ..)) => n.to_string(),
                    None => o.share(name)?.to_string(),
                }
            }
        })
    }

    /// Routers one branch may make at most: two plain hops of an ECMP diamond with a
    /// detour (8), an LSP of the most LSRs with its ingress, egress and a detour inside
    /// (4 more), and the host's router.
    fn branch_routers(&self) -> usize {
        let (lo, hi) = self.lsr_range();
        let implicit = if self.mix.implicit > 0 {
            self.implicit_min_lsrs.max(lo)
        } else {
            0
        };
        13 + hi.max(implicit)
    }

    /// LSRs per LSP as the generator takes them.
    fn lsr_range(&self) -> (usize, usize) {
        let lo = self.lsrs.0.max(1);
        (lo, self.lsrs.1.clamp(lo, 60))
    }

    /// The most destinations these options may have: every branch at its largest stays
    /// within [`MAX_ROUTERS`], and at most [`MAX_DESTINATIONS`].
    pub fn max_destinations(&self) -> usize {
        (MAX_ROUTERS / self.branch_routers()).min(MAX_DESTINATIONS)
    }

    /// Whether the lab takes the largest topology these options may make (before anything
    /// is generated): the error names the limit and the value.
    pub fn check(&self) -> Result<(), TooLarge> {
        let d = self.destinations;
        limits::check("destinations", d, MAX_DESTINATIONS)?;
        let per = self.branch_routers();
        let (_, hi) = self.lsr_range();
        limits::check(
            &format!(
                "routers (the most {d} destinations may make: {per} each, with up to {hi} \
                 LSRs per LSP)"
            ),
            d.saturating_mul(per),
            MAX_ROUTERS,
        )
    }

    /// The count named `name`, with the least and most it takes.
    fn count(&mut self, name: &str) -> Option<(&mut usize, usize, usize)> {
        Some(match name {
            "implicit-min-lsrs" => (&mut self.implicit_min_lsrs, 1, 60),
            "max-hops" => (&mut self.max_hops, 8, 255),
            "destinations" => (&mut self.destinations, 1, MAX_DESTINATIONS),
            _ => return None,
        })
    }

    /// The share (a chance, 0 to 1) named `name`.
    fn share(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "brpr-share" => &mut self.brpr_share,
            "return-lsp" => &mut self.return_lsp,
            "ecmp" => &mut self.ecmp,
            "asymmetry" => &mut self.asymmetry,
            "icmp-tunnelling" => &mut self.icmp_tunnelling,
            "unequal-ecmp" => &mut self.unequal_ecmp,
            "lsp-ecmp" => &mut self.lsp_ecmp,
            "odd-signatures" => &mut self.odd_signatures,
            "reply-from-outgoing" => &mut self.reply_from_outgoing,
            "host-at-egress" => &mut self.host_at_egress,
            "vpn-labels" => &mut self.vpn_labels,
            "six-pe-cores" => &mut self.six_pe_cores,
            "te-stacks" => &mut self.te_stacks,
            "mpls" => &mut self.mpls,
            "icmp-rate-limited" => &mut self.icmp_rate_limited,
            _ => return None,
        })
    }
}

struct Builder {
    rng: Rng,
    def: TopologyDef,
    vendors: Vec<Vendor>,
    odd_signatures: f64,
    reply_from_outgoing: f64,
    icmp_rate_limited: f64,
    next_link: u32,
    next_host: u32,
}

impl Builder {
    fn router(&mut self) -> String {
        let name = format!("r{}", self.def.routers.len());
        let vendor = *self.rng.pick(&self.vendors).unwrap_or(&Vendor::Cisco);
        const OFF_TABLE: [[u8; 2]; 3] = [[255, 128], [128, 64], [32, 32]];
        const TABLE: [[u8; 2]; 4] = [[255, 255], [255, 64], [64, 64], [128, 128]];
        let signature = if self.rng.chance(self.odd_signatures) {
            let own = vendor.signature();
            let others: Vec<[u8; 2]> = if self.rng.chance(0.5) {
                OFF_TABLE.to_vec()
            } else {
                TABLE.into_iter().filter(|s| (s[0], s[1]) != own).collect()
            };
            self.rng.pick(&others).copied()
        } else {
            None
        };
        // (drawn only when asked for: the topologies of every seed stay as they were)
        let limited = self.icmp_rate_limited > 0.0 && self.rng.chance(self.icmp_rate_limited);
        self.def.routers.push(RouterDef {
            name: name.clone(),
            vendor,
            loopback: None,
            silent: false,
            icmp_rate: if limited { RATE_LIMIT } else { 0 },
            signature,
            reply_from: if self.rng.chance(self.reply_from_outgoing) {
                ReplyFrom::Outgoing
            } else {
                ReplyFrom::Incoming
            },
            ipv4_only: false,
        });
        name
    }
    fn link(&mut self, a: &str, b: &str, cost: u32, cost_back: Option<u32>) {
        let slash31 = self.rng.chance(0.3);
        let base = u32::from(core::net::Ipv4Addr::new(100, 64, 0, 0)) + self.next_link;
        self.next_link += 4;
        let prefix = Prefix::containing(base.into(), if slash31 { 31 } else { 30 });
        let delay = self.rng.range(1, 50) as f64 / 10.0;
        self.def.links.push(LinkDef {
            a: a.into(),
            b: b.into(),
            prefix: prefix.to_string(),
            a_address: None,
            b_address: None,
            delay_ms: delay,
            delay_back_ms: None,
            cost,
            cost_back,
        });
    }
    /// A plain hop from `u` to a new router (or an ECMP diamond to it); returns it and
    /// how many routers deeper it is (1, or 2 or 3 through a diamond).
    fn plain_hop(&mut self, u: &str, o: &GenOptions) -> (String, usize) {
        let v = self.router();
        if self.rng.chance(o.ecmp) {
            let (x, y) = (self.router(), self.router());
            let back = self.rng.chance(o.asymmetry).then_some(30);
            self.link(u, &x, 10, back);
            self.link(&x, &v, 10, back);
            if self.rng.chance(o.unequal_ecmp) {
                // u - y - y2 - v, as cheap as u - x - v
                let y2 = self.router();
                self.link(u, &y, 7, None);
                self.link(&y, &y2, 7, None);
                self.link(&y2, &v, 6, None);
                (v, 3)
            } else {
                self.link(u, &y, 10, None);
                self.link(&y, &v, 10, None);
                (v, 2)
            }
        } else {
            self.link(u, &v, 10, None);
            (v, 1)
        }
    }
    fn class(&mut self, m: &ClassMix) -> Option<TunnelClass> {
        let w = [
            m.none,
            m.explicit,
            m.implicit,
            m.opaque,
            m.invisible_php,
            m.invisible_uhp,
        ];
        let total: u64 = w.iter().map(|&x| u64::from(x)).sum();
        let mut k = self.rng.below(total.max(1));
        for (i, &x) in w.iter().enumerate() {
            if k < u64::from(x) {
                return if i == 0 {
                    None
                } else {
                    Some(TunnelClass::ALL[i - 1])
                };
            }
            k -= u64::from(x);
        }
        None
    }
    /// An LSP along `path`, or along the IGP's equal-cost paths from its first router to
    /// its last with `ecmp`.
    fn lsp(&mut self, class: TunnelClass, path: Vec<String>, ecmp: bool, o: &GenOptions) {
        let r = &mut self.rng;
        let (propagate, pop, rfc4950, forwards) = match class {
            TunnelClass::Explicit => (
                true,
                if r.chance(0.2) { Pop::Uhp } else { Pop::Php },
                true,
                false,
            ),
            TunnelClass::Implicit => (true, Pop::Php, false, false),
            TunnelClass::Opaque => (false, Pop::Uhp, true, false),
            TunnelClass::InvisiblePhp => (false, Pop::Php, r.chance(0.5), false),
            TunnelClass::InvisibleUhp => (false, Pop::Uhp, r.chance(0.5), true),
        };
        let internal_labelled = match class {
            TunnelClass::InvisiblePhp => r.chance(o.brpr_share),
            _ => r.chance(0.3),
        };
        let tunnelling = propagate && r.chance(o.icmp_tunnelling);
        // (not on implicit LSPs: their egress, expiring on the service label, quotes the
        // rising TTL of one more LSR, and no traceroute reading can tell it from one)
        let vpn = class != TunnelClass::Implicit && r.chance(o.vpn_labels);
        // (not on implicit LSPs either, for the same reason: the egress receives the 6PE
        // label; drawn only when asked for, so the topologies of every seed stay)
        let six_pe = class != TunnelClass::Implicit
            && !ecmp
            && o.six_pe_cores > 0.0
            && r.chance(o.six_pe_cores);
        let n = self.def.lsps.len();
        let mk = |name: String, path: Vec<String>| LspDef {
            name,
            ingress: path[0].clone(),
            egress: path[path.len() - 1].clone(),
            path: (!ecmp).then_some(path),
            ecmp,
            ttl_propagate: propagate,
            pop,
            rfc4950,
            internal_labelled,
            icmp_tunnelling: tunnelling,
            egress_forwards_ttl1: forwards,
            non_null_uhp: false,
            egress_lans_labelled: true,
            vpn_label: vpn,
            over: None,
        };
        // (a 6PE core carries IPv6 labelled both ways, or its answers die in it)
        let back = self.rng.chance(o.return_lsp);
        let back = back || six_pe;
        if six_pe {
            for lsr in &path[1..path.len() - 1] {
                // (routers are named r<index>)
                let k = lsr[1..].parse::<usize>().ok();
                if let Some(d) = k.and_then(|k| self.def.routers.get_mut(k)) {
                    d.ipv4_only = true;
                }
            }
        }
        let name = format!("lsp{n}-{}", class.name());
        let mut lsp = mk(name.clone(), path.clone());
        // an RSVP-TE LSP between two of its LSRs (at least one LSR of its own), carrying
        // it with the same TTL and RFC 4950 behaviour (not with paths inside: riding is
        // modelled along one path)
        let k = path.len();
        if !ecmp && k >= 5 && o.te_stacks > 0.0 && self.rng.chance(o.te_stacks) {
            let at = self.rng.range(1, k as u64 - 4) as usize;
            let tail = self.rng.range(at as u64 + 2, k as u64 - 2) as usize;
            let te_pop = if !propagate && !rfc4950 || self.rng.chance(0.7) {
                Pop::Php
            } else {
                Pop::Uhp
            };
            let te = LspDef {
                pop: te_pop,
                internal_labelled: false,
                icmp_tunnelling: false,
                egress_forwards_ttl1: false,
                vpn_label: false,
                ..mk(format!("{name}-te"), path[at..=tail].to_vec())
            };
            lsp.over = Some(te.name.clone());
            self.def.lsps.push(te);
        }
        self.def.lsps.push(lsp);
        if back {
            let mut rev = path;
            rev.reverse();
            self.def
                .lsps
                .push(mk(format!("lsp{n}-{}-back", class.name()), rev));
        }
    }
    fn host(&mut self, router: &str, o: &GenOptions) {
        let ttl = *self.rng.pick(&o.host_ttls).unwrap_or(&64);
        let i = self.next_host;
        self.next_host += 1;
        // the first 128 in the documentation ranges, the rest from the top of 100.64/10
        // down (links grow from its bottom up)
        let base = match i {
            0..64 => u32::from(core::net::Ipv4Addr::new(203, 0, 113, 0)) + i * 4,
            64..128 => u32::from(core::net::Ipv4Addr::new(198, 51, 100, 0)) + (i - 64) * 4,
            _ => u32::from(core::net::Ipv4Addr::new(100, 127, 255, 252)) - (i - 128) * 4,
        };
        let addr = core::net::Ipv4Addr::from(base + 2);
        let gw = core::net::Ipv4Addr::from(base + 1);
        self.def.hosts.push(HostDef {
            name: format!("h{i}"),
            address: format!("{addr}/30"),
            gateway: gw.to_string(),
            router: router.into(),
            delay_ms: 0.5,
            ttl,
            tcp_open: vec![80],
            silent: false,
        });
    }
}

/// Routers a branch may hang from, with their depth (routers from the vantage point's
/// router, both counted), in the order they were made; and how many of each depth every
/// run of [`CHUNK`] of them holds, so that the k-th of those no deeper than a limit is
/// found without scanning them all (which, once per branch, would be quadratic).
#[derive(Default)]
struct Places {
    all: Vec<(String, usize)>,
    chunks: Vec<[u32; 256]>,
}

/// Places per chunk of [`Places`].
const CHUNK: usize = 1024;

impl Places {
    fn push(&mut self, router: String, depth: usize) {
        if self.all.len().is_multiple_of(CHUNK) {
            self.chunks.push([0; 256]);
        }
        if let Some(c) = self.chunks.last_mut() {
            c[depth.min(255)] += 1;
        }
        self.all.push((router, depth));
    }
    /// Places no deeper than `deepest`.
    fn count(&self, deepest: usize) -> usize {
        self.chunks.iter().map(|c| in_chunk(c, deepest)).sum()
    }
    /// The index of the `k`-th (from 0) place no deeper than `deepest`, in order.
    fn nth(&self, deepest: usize, mut k: usize) -> usize {
        for (ci, c) in self.chunks.iter().enumerate() {
            let here = in_chunk(c, deepest);
            if k >= here {
                k -= here;
                continue;
            }
            let start = ci * CHUNK;
            let end = (start + CHUNK).min(self.all.len());
            if let Some(i) = (start..end).filter(|&i| self.all[i].1 <= deepest).nth(k) {
                return i;
            }
        }
        0
    }
}

/// Places of chunk `c` no deeper than `deepest`.
fn in_chunk(c: &[u32; 256], deepest: usize) -> usize {
    c[..=deepest.min(255)].iter().map(|&n| n as usize).sum()
}

/// A random topology; same `seed` and options, same topology.
pub fn generate(seed: u64, opts: &GenOptions) -> Topology {
    let vendors = if opts.vendors.is_empty() {
        Vendor::ALL.to_vec()
    } else {
        opts.vendors.clone()
    };
    let mut b = Builder {
        // (the seed offset and the mix every release has drawn topologies with)
        rng: Rng::with_finish(seed ^ 0x5851_f42d_4c95_7f2d, vtnt_rng::fmix64),
        def: TopologyDef {
            name: format!("generated-{seed}"),
            description: format!("vtnt lab generate --seed {seed}"),
            vantage_points: Vec::new(),
            routers: Vec::new(),
            links: Vec::new(),
            hosts: Vec::new(),
            lsps: Vec::new(),
            routes: Vec::new(),
        },
        vendors,
        odd_signatures: opts.odd_signatures,
        reply_from_outgoing: opts.reply_from_outgoing,
        icmp_rate_limited: opts.icmp_rate_limited,
        next_link: 0,
        next_host: 0,
    };
    let r0 = b.router();
    b.def.vantage_points.push(VantagePointDef {
        name: "vp".into(),
        address: "192.0.2.2/24".into(),
        gateway: "192.0.2.1".into(),
        router: r0.clone(),
        delay_ms: 0.05,
    });
    let (lo, hi) = opts.lsr_range();
    let max_hops = opts.max_hops.clamp(8, 255);
    // (router, routers from the vantage point's router to it, both counted)
    let mut attach = Places::default();
    attach.push(r0, 1);
    for _ in 0..opts.destinations.min(opts.max_destinations()) {
        // Plan the branch, then hang it where it fits under `max_hops`: plain hops count
        // three routers each (they may be diamonds); ttl-propagate LSPs count their LSRs
        // twice (an LSR's time exceeded may be tunnelled to the egress and back).
        let mut class = b.class(&opts.mix);
        if opts.mpls < 1.0 && !b.rng.chance(opts.mpls) {
            class = None;
        }
        let mut plain = b.rng.below(3) as usize;
        let mut lsrs = match class {
            Some(c) => {
                let n = b.rng.range(lo as u64, hi as u64) as usize;
                if c == TunnelClass::Implicit {
                    n.max(opts.implicit_min_lsrs.max(1))
                } else {
                    n
                }
            }
            None => 0,
        };
        let propagate = matches!(class, Some(TunnelClass::Explicit | TunnelClass::Implicit));
        // equal-cost paths inside the LSP: a twin of an LSR, or two routers in a row in
        // its place (one LSR more on that path)
        let mut inner = lsrs >= 2 && opts.lsp_ecmp > 0.0 && b.rng.chance(opts.lsp_ecmp);
        let detour = inner && b.rng.chance(opts.unequal_ecmp);
        let extra = usize::from(detour);
        let need = |plain: usize, lsrs: usize| {
            3 * plain
                + match class {
                    Some(_) => lsrs + extra + 2 + if propagate { lsrs + extra } else { 0 },
                    None => 0,
                }
                + 1
        };
        let deepest = max_hops.checked_sub(need(plain, lsrs));
        let fits = deepest.map_or(0, |d| attach.count(d));
        let at = match deepest.filter(|_| fits > 0) {
            Some(d) => attach.nth(d, b.rng.below(fits as u64) as usize),
            None => {
                plain = 0;
                let room = max_hops - 1 - 1 - 2 - extra;
                lsrs = lsrs.min(if propagate { room / 2 } else { room }).max(1);
                inner &= lsrs >= 2;
                0
            }
        };
        let (mut u, mut depth) = attach.all[at].clone();
        for _ in 0..plain {
            let (v, d) = b.plain_hop(&u, opts);
            u = v;
            depth += d;
        }
        if let Some(class) = class {
            let mut path = vec![b.router()];
            b.link(&u, &path[0], 10, None);
            for _ in 0..lsrs + 1 {
                let v = b.router();
                let last = path[path.len() - 1].clone();
                b.link(&last, &v, 10, None);
                path.push(v);
            }
            if inner {
                let k = b.rng.range(1, lsrs as u64) as usize;
                let (before, after) = (path[k - 1].clone(), path[k + 1].clone());
                if detour {
                    // before - y - y2 - after, as cheap as before - path[k] - after
                    let (y, y2) = (b.router(), b.router());
                    b.link(&before, &y, 7, None);
                    b.link(&y, &y2, 7, None);
                    b.link(&y2, &after, 6, None);
                } else {
                    let twin = b.router();
                    b.link(&before, &twin, 10, None);
                    b.link(&twin, &after, 10, None);
                }
            }
            depth += path.len() + usize::from(inner && detour);
            u = path[path.len() - 1].clone();
            b.lsp(class, path, inner, opts);
            if b.rng.chance(opts.host_at_egress) {
                b.host(&u, opts);
                attach.push(u, depth);
                continue;
            }
        }
        let v = b.router();
        b.link(&u, &v, 10, None);
        b.host(&v, opts);
        attach.push(v, depth + 1);
    }
    match Topology::from_def(b.def) {
        Ok(t) => t,
        Err(e) => unreachable!("the generator made an invalid topology: {e}"),
    }
}

/// [`generate`], as topology file text.
pub fn generate_toml(seed: u64, opts: &GenOptions) -> String {
    let t = generate(seed, opts);
    format!(
        "# Generated by `vtnt lab generate --seed {seed}`.\n{}",
        t.to_toml()
    )
}
