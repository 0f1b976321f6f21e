//! Routing computed by the emulator: all-pairs shortest paths on the IGP costs
//! (Dijkstra from every router, directed, so `cost` and `cost-back` may differ), a FIB
//! per router holding every equal-cost next hop per prefix (per-flow ECMP picks one) or
//! the one a static route names, and the push table telling an ingress LER which LSP
//! (and where cut) a prefix enters: of an `ecmp` LSP, each equal-cost path the flows
//! are spread over.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::forward::ecmp_index;
use crate::net::{Iface, IfaceId, Lsp, Peer, PrefixInfo, PrefixKind, Router, RouterId};
use crate::topology::Pop;

/// Unreachable distance.
pub(crate) const INF: u32 = u32::MAX;

/// Distances between routers: `d[s * n + t]`.
#[derive(Debug, Clone)]
pub(crate) struct Dist {
    n: usize,
    d: Vec<u32>,
}

impl Dist {
    pub fn compute(routers: &[Router], ifaces: &[Iface]) -> Dist {
        let n = routers.len();
        let mut d = vec![INF; n * n];
        let mut heap = BinaryHeap::new();
        for s in 0..n {
            let row = &mut d[s * n..(s + 1) * n];
            row[s] = 0;
            heap.push(Reverse((0u32, s as RouterId)));
            while let Some(Reverse((du, u))) = heap.pop() {
                if du > row[u as usize] {
                    continue;
                }
                for &o in &routers[u as usize].links {
                    let i = &ifaces[o as usize];
                    if let Peer::Router { router: v, .. } = i.peer {
                        let nd = du.saturating_add(i.cost);
                        if nd < row[v as usize] {
                            row[v as usize] = nd;
                            heap.push(Reverse((nd, v)));
                        }
                    }
                }
            }
        }
        Dist { n, d }
    }
    pub fn get(&self, s: RouterId, t: RouterId) -> u32 {
        self.d[s as usize * self.n + t as usize]
    }
    /// Distance from `s` to the closest router `p` is attached to.
    pub fn to_prefix(&self, s: RouterId, p: &PrefixInfo) -> u32 {
        p.attached
            .iter()
            .map(|&a| self.get(s, a))
            .min()
            .unwrap_or(INF)
    }

    /// Up to `max` shortest paths `s -> t`, each as routers and the interfaces between
    /// them, in the order of their interfaces (the first takes the lowest interface index
    /// at every tie). Empty when `t` is unreachable.
    pub fn paths(
        &self,
        routers: &[Router],
        ifaces: &[Iface],
        s: RouterId,
        t: RouterId,
        max: usize,
    ) -> Vec<(Vec<RouterId>, Vec<IfaceId>)> {
        let mut done = Vec::new();
        if self.get(s, t) == INF {
            return done;
        }
        // every step keeps to a shortest path (costs are positive), so each partial path
        // on the stack ends at `t`
        let mut stack = vec![(vec![s], Vec::new())];
        while let Some((path, out)) = stack.pop() {
            if done.len() >= max {
                break;
            }
            let u = path[path.len() - 1];
            if u == t {
                done.push((path, out));
                continue;
            }
            if path.len() > routers.len() {
                continue;
            }
            let next: Vec<(IfaceId, RouterId)> = routers[u as usize]
                .links
                .iter()
                .filter_map(|&o| {
                    let i = &ifaces[o as usize];
                    match i.peer {
                        Peer::Router { router: v, .. }
                            if i.cost.saturating_add(self.get(v, t)) == self.get(u, t) =>
                        {
                            Some((o, v))
                        }
                        _ => None,
                    }
                })
                .collect();
            for (o, v) in next.into_iter().rev() {
                let (mut path, mut out) = (path.clone(), out.clone());
                path.push(v);
                out.push(o);
                stack.push((path, out));
            }
        }
        done
    }
}

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

/// The forwarding state of the whole network.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    n_prefixes: usize,
    /// `fib_start[r * P + p] .. fib_start[r * P + p + 1]` indexes `fib_hops`.
    fib_start: Vec<u32>,
    fib_hops: Vec<IfaceId>,
    /// Per router (ingress LERs only): per prefix, the LSP pushed (empty: none), or the
    /// equal-cost paths of an `ecmp` LSP the ingress chooses from per flow.
    push: Vec<Option<Vec<Vec<Push>>>>,
}

impl Tables {
    pub fn build(
        dist: Dist,
        routers: &[Router],
        ifaces: &[Iface],
        prefixes: &[PrefixInfo],
        lsps: &[Lsp],
        statics: &[Static],
    ) -> Tables {
        let np = prefixes.len();
        let fixed = |r: RouterId, p: usize| {
            statics
                .iter()
                .find(|s| (s.router, s.prefix as usize) == (r, p))
                .map(|s| s.out)
        };
        let mut fib_start = Vec::with_capacity(routers.len() * np + 1);
        let mut fib_hops = Vec::new();
        for (r, router) in routers.iter().enumerate() {
            let r = r as RouterId;
            for (pi, p) in prefixes.iter().enumerate() {
                fib_start.push(fib_hops.len() as u32);
                if let Some(o) = fixed(r, pi) {
                    fib_hops.push(o);
                    continue;
                }
                if p.attached.contains(&r) {
                    continue;
                }
                let want = dist.to_prefix(r, p);
                if want == INF {
                    continue;
                }
                for &o in &router.links {
                    let i = &ifaces[o as usize];
                    if let Peer::Router { router: v, .. } = i.peer {
                        if i.cost.saturating_add(dist.to_prefix(v, p)) == want {
                            fib_hops.push(o);
                        }
                    }
                }
            }
        }
        fib_start.push(fib_hops.len() as u32);

        let mut push: Vec<Option<Vec<Vec<Push>>>> = vec![None; routers.len()];
        let mut li = 0;
        // an `ecmp` LSP's equal-cost paths lie next to each other: one LSP, its branches
        for group in lsps.chunk_by(|a, b| a.name == b.name) {
            let base = li;
            li += group.len();
            let ing = group[0].path[0];
            let row = push[ing as usize].get_or_insert_with(|| vec![Vec::new(); np]);
            for (pi, p) in prefixes.iter().enumerate() {
                if p.attached.contains(&ing) || fixed(ing, pi).is_some() {
                    continue;
                }
                // each branch's cut for the prefix, how far it is, and whether it is
                // label switched there
                let mut cands: Vec<(Push, u32, bool)> = Vec::new();
                for (k, lsp) in group.iter().enumerate() {
                    let egress_at = lsp.egress_index();
                    let e = lsp.path[egress_at];
                    let internal = lsp.path.iter().skip(1).position(|r| p.attached.contains(r));
                    // a host LAN on the egress is a customer prefix reached over the LSP (its
                    // BGP next hop is the egress), whether or not the IGP's are labelled
                    let egress_lan = matches!(p.kind, PrefixKind::HostLan { .. })
                        && internal == Some(egress_at - 1)
                        && lsp.egress_lans_labelled;
                    let (f, labelled) = match internal {
                        Some(j) => (j + 1, lsp.internal_labelled || egress_lan),
                        None => {
                            let via = dist.get(ing, e).saturating_add(dist.to_prefix(e, p));
                            if via == INF || via != dist.to_prefix(ing, p) {
                                continue;
                            }
                            (egress_at, true)
                        }
                    };
                    let min_f = if lsp.pop == Pop::Php { 2 } else { 1 };
                    let cand = Push {
                        lsp: (base + k) as u16,
                        f: f as u8,
                    };
                    cands.push((cand, dist.get(ing, lsp.path[f]), labelled && f >= min_f));
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
                let better = match row[pi].first() {
                    None => true,
                    Some(old) => {
                        let old_lsp = &lsps[usize::from(old.lsp)];
                        near > dist.get(ing, old_lsp.path[usize::from(old.f)])
                    }
                };
                if better {
                    row[pi] = alts;
                }
            }
        }
        Tables {
            n_prefixes: np,
            fib_start,
            fib_hops,
            push,
        }
    }

    /// Equal-cost next-hop interfaces of `r` towards prefix `p` (empty when connected or
    /// unreachable).
    pub fn next_hops(&self, r: RouterId, p: u32) -> &[IfaceId] {
        let k = r as usize * self.n_prefixes + p as usize;
        match (self.fib_start.get(k), self.fib_start.get(k + 1)) {
            (Some(&a), Some(&b)) => &self.fib_hops[a as usize..b as usize],
            _ => &[],
        }
    }

    /// The LSPs `r` may push packets to prefix `p` onto: one, the equal-cost paths of an
    /// `ecmp` LSP, or none.
    pub fn pushes(&self, r: RouterId, p: u32) -> &[Push] {
        self.push
            .get(r as usize)
            .and_then(Option::as_ref)
            .and_then(|row| row.get(p as usize))
            .map_or(&[], Vec::as_slice)
    }

    /// The LSP `r` pushes a packet of flow `flow` to prefix `p` onto, if any: of an
    /// `ecmp` LSP's paths, the one the flow hashes to at `r` (as IP ECMP picks).
    pub fn push(&self, r: RouterId, p: u32, flow: u64) -> Option<Push> {
        let alts = self.pushes(r, p);
        alts.get(ecmp_index(flow, r, alts.len())).copied()
    }
}
