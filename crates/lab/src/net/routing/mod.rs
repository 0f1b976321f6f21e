//! Routing computed by the emulator, on demand: shortest-path distances between any two
//! routers ([`Dist`], directed, so `cost` and `cost-back` may differ; no all-pairs
//! table), from which a router's equal-cost next hops towards a prefix (per-flow ECMP
//! picks one) follow when a packet needs them, or the one a static route names; and
//! which LSP an ingress LER pushes a prefix onto (and where cut): of an `ecmp` LSP, each
//! equal-cost path the flows are spread over. Nothing is stored per router and prefix,
//! so memory and set-up stay linear in routers and links for sparse topologies
//! (`docs/lab.md`, "Limits").

mod dist;
#[cfg(test)]
mod reference;

pub(crate) use dist::{Dist, INF};

use crate::net::{IfaceId, Lsp, Net, Peer, Pop, PrefixKind, RouterId};

/// What an ingress does with a prefix: push `lsp`, cut at path index `f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Push {
    pub lsp: u16,
    pub f: u8,
}

/// A static route: `router` sends traffic for prefix `prefix` out of `out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Static {
    pub router: RouterId,
    pub prefix: u32,
    pub out: IfaceId,
}

/// The forwarding state of the whole network: distances, static routes, and the LSPs
/// each router is the ingress of.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    dist: Dist,
    /// Sorted by (router, prefix).
    statics: Vec<Static>,
    /// `groups[group_start[r] .. group_start[r + 1]]`: the LSPs router `r` is the ingress
    /// of, each as the range of [`Net::lsps`] its paths take (several for an `ecmp`
    /// one), in the order of `Net::lsps`.
    group_start: Vec<u32>,
    groups: Vec<(u32, u32)>,
}

impl Tables {
    pub fn new(dist: Dist, routers: usize, lsps: &[Lsp], mut statics: Vec<Static>) -> Tables {
        statics.sort_unstable_by_key(|s| (s.router, s.prefix));
        // an `ecmp` LSP's equal-cost paths lie next to each other: one LSP, its branches
        let mut by_ingress: Vec<(RouterId, (u32, u32))> = Vec::new();
        let mut at = 0;
        for group in lsps.chunk_by(|a, b| a.name == b.name) {
            let end = at + group.len();
            by_ingress.push((group[0].path[0], (at as u32, end as u32)));
            at = end;
        }
        by_ingress.sort_by_key(|g| g.0); // stable: each ingress's LSPs keep their order
        let mut group_start = vec![0u32; routers + 1];
        for &(r, _) in &by_ingress {
            group_start[r as usize + 1] += 1;
        }
        for r in 0..routers {
            group_start[r + 1] += group_start[r];
        }
        Tables {
            dist,
            statics,
            group_start,
            groups: by_ingress.into_iter().map(|g| g.1).collect(),
        }
    }

    /// The interface a static route of `r` sends prefix `p` out of.
    fn fixed(&self, r: RouterId, p: u32) -> Option<IfaceId> {
        let i = self
            .statics
            .binary_search_by_key(&(r, p), |s| (s.router, s.prefix))
            .ok()?;
        Some(self.statics[i].out)
    }

    /// The LSPs router `r` is the ingress of, as ranges of `Net::lsps`.
    fn groups(&self, r: RouterId) -> &[(u32, u32)] {
        let r = r as usize;
        match (self.group_start.get(r), self.group_start.get(r + 1)) {
            (Some(&a), Some(&b)) => &self.groups[a as usize..b as usize],
            _ => &[],
        }
    }
}

impl Net {
    /// Equal-cost next-hop interfaces of `r` towards prefix `p`, in the order of its
    /// links (none when connected or unreachable; the static route's when it has one).
    pub fn next_hops(&self, r: RouterId, p: u32) -> impl Iterator<Item = IfaceId> + Clone + '_ {
        let tables = &self.tables;
        let fixed = tables.fixed(r, p);
        let info = &self.prefixes[p as usize];
        let want = if fixed.is_some() || info.attached.contains(&r) {
            INF
        } else {
            tables.dist.to_prefix(r, info)
        };
        let links: &[IfaceId] = if want == INF {
            &[]
        } else {
            &self.routers[r as usize].links
        };
        fixed
            .into_iter()
            .chain(links.iter().copied().filter(move |&o| {
                let i = &self.ifaces[o as usize];
                match i.peer {
                    Peer::Router { router: v, .. } => {
                        u64::from(i.cost).saturating_add(tables.dist.to_prefix(v, info)) == want
                    }
                    _ => false,
                }
            }))
    }

    /// The LSPs `r` may push packets to prefix `p` onto: one, the equal-cost paths of an
    /// `ecmp` LSP, or none.
    pub fn pushes(&self, r: RouterId, p: u32) -> Vec<Push> {
        let groups = self.tables.groups(r);
        let info = &self.prefixes[p as usize];
        if groups.is_empty() || info.attached.contains(&r) || self.tables.fixed(r, p).is_some() {
            return Vec::new();
        }
        let dist = &self.tables.dist;
        let lsps = &self.lsps;
        let mut best: Vec<Push> = Vec::new();
        for &(base, end) in groups {
            let group = &lsps[base as usize..end as usize];
            // each branch's cut for the prefix, how far it is, and whether it is label
            // switched there
            let mut cands: Vec<(Push, u64, bool)> = Vec::new();
            for (k, lsp) in group.iter().enumerate() {
                let egress_at = lsp.egress_index();
                let e = lsp.path[egress_at];
                let internal = lsp
                    .path
                    .iter()
                    .skip(1)
                    .position(|r| info.attached.contains(r));
                // a host LAN on the egress is a customer prefix reached over the LSP (its
                // BGP next hop is the egress), whether or not the IGP's are labelled
                let egress_lan = matches!(info.kind, PrefixKind::HostLan { .. })
                    && internal == Some(egress_at - 1)
                    && lsp.egress_lans_labelled;
                let (f, labelled) = match internal {
                    Some(j) => (j + 1, lsp.internal_labelled || egress_lan),
                    None => {
                        let via = dist.get(r, e).saturating_add(dist.to_prefix(e, info));
                        if via == INF || via != dist.to_prefix(r, info) {
                            continue;
                        }
                        (egress_at, true)
                    }
                };
                let min_f = if lsp.pop == Pop::Php { 2 } else { 1 };
                let cand = Push {
                    lsp: (base as usize + k) as u16,
                    f: f as u8,
                };
                cands.push((cand, dist.get(r, lsp.path[f]), labelled && f >= min_f));
            }
            // LDP follows the shortest paths to the prefix: the branches cut nearest
            // (none when the prefix is not label switched there), each route once
            // (branches alike up to the cut are one)
            let Some(near) = cands.iter().map(|c| c.1).min() else {
                continue;
            };
            let mut alts: Vec<Push> = Vec::new();
            for (c, d, labelled) in cands {
                let route = |x: &Push| &lsps[usize::from(x.lsp)].out[..usize::from(x.f)];
                if d == near && labelled && !alts.iter().any(|a| route(a) == route(&c)) {
                    alts.push(c);
                }
            }
            if alts.is_empty() {
                continue;
            }
            // of several LSPs, the one cut farthest
            let better = match best.first() {
                None => true,
                Some(old) => {
                    let old_lsp = &lsps[usize::from(old.lsp)];
                    near > dist.get(r, old_lsp.path[usize::from(old.f)])
                }
            };
            if better {
                best = alts;
            }
        }
        best
    }
}

/// What a router does with a packet of one flow to one prefix that is not its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Push it onto an LSP.
    Push(Push),
    /// Send it out of an interface.
    Out(IfaceId),
    /// No route.
    Drop,
}

/// Slots of a [`RouteCache`].
const CACHE_SLOTS: usize = 4096;

/// The routes a [`crate::Lab`] looked up lately, by router and prefix (direct-mapped, a
/// fixed size whatever the topology's): probes to one destination meet the same routers
/// again and again, and a hit skips the distance look-ups.
#[derive(Debug, Default)]
pub(crate) struct RouteCache {
    slots: Vec<Option<Cached>>,
}

#[derive(Debug)]
struct Cached {
    r: RouterId,
    p: u32,
    pushes: Vec<Push>,
    hops: Vec<IfaceId>,
}

impl RouteCache {
    /// What `r` does with flow `flow` to prefix `p` (not connected to `r`): push it onto
    /// an LSP (of an `ecmp` LSP's paths, the one the flow hashes to at `r`, as IP ECMP
    /// picks), else send it to the next hop the flow hashes to.
    pub fn step(&mut self, net: &Net, r: RouterId, p: u32, flow: u64) -> Step {
        if self.slots.is_empty() {
            self.slots.resize_with(CACHE_SLOTS, || None);
        }
        let key = (u64::from(r) << 32 | u64::from(p)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = &mut self.slots[(key >> 52) as usize % CACHE_SLOTS];
        let c = match slot {
            Some(c) if (c.r, c.p) == (r, p) => c,
            _ => slot.insert(Cached {
                r,
                p,
                pushes: net.pushes(r, p),
                hops: net.next_hops(r, p).collect(),
            }),
        };
        if let Some(&push) = c.pushes.get(ecmp_index(flow, r, c.pushes.len())) {
            Step::Push(push)
        } else if let Some(&o) = c.hops.get(ecmp_index(flow, r, c.hops.len())) {
            Step::Out(o)
        } else {
            Step::Drop
        }
    }
}

/// Which of `n` equal-cost choices router `r` makes for a flow (0 when `n` is 0): IP
/// ECMP's next hop, an ingress's path of an `ecmp` LSP.
pub(crate) fn ecmp_index(flow: u64, r: RouterId, n: usize) -> usize {
    (mix(flow ^ u64::from(r).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % n.max(1) as u64) as usize
}

pub(crate) use vtnt_rng::fmix64 as mix;
