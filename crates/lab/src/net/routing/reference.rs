//! The routing as it was first written, kept as the reference the on-demand routing is
//! checked against: all-pairs Dijkstra (an n × n table), a FIB per router and prefix,
//! a push table per ingress and prefix, and a label table per LSP and cut. On the
//! reference topology, generated ones and random meshes (ties, asymmetric costs,
//! parallel links, several components, static routes, `ecmp` LSPs), every distance,
//! next hop, push and label must be the same.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Push;
use crate::generate::{generate, GenOptions};
use crate::net::{IfaceId, Net, Peer, Pop, PrefixInfo, PrefixKind, ReplyFrom, RouterId};
use crate::profile::Vendor;
use crate::topology::{
    HostDef, LinkDef, LspDef, RouteDef, RouterDef, Topology, TopologyDef, VantagePointDef,
};
use vtnt_rng::Rng;

const INF: u32 = u32::MAX;

/// All-pairs distances: `d[s * n + t]`.
fn all_pairs(net: &Net) -> Vec<u32> {
    let n = net.routers.len();
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
            for &o in &net.routers[u as usize].links {
                let i = &net.ifaces[o as usize];
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
    d
}

struct Old<'a> {
    net: &'a Net,
    n: usize,
    d: Vec<u32>,
}

impl Old<'_> {
    fn get(&self, s: RouterId, t: RouterId) -> u32 {
        self.d[s as usize * self.n + t as usize]
    }
    fn to_prefix(&self, s: RouterId, p: &PrefixInfo) -> u32 {
        p.attached
            .iter()
            .map(|&a| self.get(s, a))
            .min()
            .unwrap_or(INF)
    }
    fn fixed(&self, r: RouterId, p: usize) -> Option<IfaceId> {
        self.net
            .tables
            .statics
            .iter()
            .find(|s| (s.router, s.prefix as usize) == (r, p))
            .map(|s| s.out)
    }

    fn next_hops(&self, r: RouterId, pi: usize) -> Vec<IfaceId> {
        let net = self.net;
        let p = &net.prefixes[pi];
        if let Some(o) = self.fixed(r, pi) {
            return vec![o];
        }
        if p.attached.contains(&r) {
            return Vec::new();
        }
        let want = self.to_prefix(r, p);
        if want == INF {
            return Vec::new();
        }
        let mut hops = Vec::new();
        for &o in &net.routers[r as usize].links {
            let i = &net.ifaces[o as usize];
            if let Peer::Router { router: v, .. } = i.peer {
                if i.cost.saturating_add(self.to_prefix(v, p)) == want {
                    hops.push(o);
                }
            }
        }
        hops
    }

    /// Per router, per prefix, the pushes, as the first code built them.
    fn push_table(&self) -> Vec<Option<Vec<Vec<Push>>>> {
        let net = self.net;
        let (lsps, np) = (&net.lsps, net.prefixes.len());
        let mut push: Vec<Option<Vec<Vec<Push>>>> = vec![None; net.routers.len()];
        let mut li = 0;
        for group in lsps.chunk_by(|a, b| a.name == b.name) {
            let base = li;
            li += group.len();
            let ing = group[0].path[0];
            let row = push[ing as usize].get_or_insert_with(|| vec![Vec::new(); np]);
            for (pi, p) in net.prefixes.iter().enumerate() {
                if p.attached.contains(&ing) || self.fixed(ing, pi).is_some() {
                    continue;
                }
                let mut cands: Vec<(Push, u32, bool)> = Vec::new();
                for (k, lsp) in group.iter().enumerate() {
                    let egress_at = lsp.egress_index();
                    let e = lsp.path[egress_at];
                    let internal = lsp.path.iter().skip(1).position(|r| p.attached.contains(r));
                    let egress_lan = matches!(p.kind, PrefixKind::HostLan { .. })
                        && internal == Some(egress_at - 1)
                        && lsp.egress_lans_labelled;
                    let (f, labelled) = match internal {
                        Some(j) => (j + 1, lsp.internal_labelled || egress_lan),
                        None => {
                            let via = self.get(ing, e).saturating_add(self.to_prefix(e, p));
                            if via == INF || via != self.to_prefix(ing, p) {
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
                    cands.push((cand, self.get(ing, lsp.path[f]), labelled && f >= min_f));
                }
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
                let better = match row[pi].first() {
                    None => true,
                    Some(old) => {
                        let old_lsp = &lsps[usize::from(old.lsp)];
                        near > self.get(ing, old_lsp.path[usize::from(old.f)])
                    }
                };
                if better {
                    row[pi] = alts;
                }
            }
        }
        push
    }
}

/// Every label of every LSP as the first code allocated them: a table per LSP and cut.
fn check_labels(net: &Net) {
    let mut next: Vec<u32> = net.routers.iter().map(|r| r.vendor.label_base()).collect();
    for lsp in &net.lsps {
        let n = lsp.path.len();
        let mut labels = vec![vec![0u32; n]; n];
        for (f, row) in labels.iter_mut().enumerate().skip(1) {
            for (k, slot) in row.iter_mut().enumerate().take(f + 1).skip(1) {
                if k == f && lsp.explicit_null {
                    *slot = 0;
                    continue;
                }
                let r = lsp.path[k] as usize;
                *slot = next[r] & 0xf_ffff;
                next[r] += 1;
            }
        }
        if let Some(vpn) = lsp.vpn {
            let e = lsp.path[n - 1] as usize;
            next[e] += 1;
            assert_eq!(vpn, (next[e] - 1) & 0xf_ffff, "{}: service label", lsp.name);
        }
        for f in 0..n + 2 {
            for i in 0..n + 2 {
                let old = labels.get(f).and_then(|v| v.get(i)).copied();
                assert_eq!(lsp.label(f, i), old, "{}: label({f}, {i})", lsp.name);
            }
        }
    }
}

/// Checks every distance, next hop, push and label of `t` against the first code.
fn same_as_reference(t: &Topology) {
    let net = &t.net;
    let old = Old {
        net,
        n: net.routers.len(),
        d: all_pairs(net),
    };
    let dist = &net.tables.dist;
    for s in 0..old.n as RouterId {
        for u in 0..old.n as RouterId {
            let want = match old.get(s, u) {
                INF => super::INF,
                d => u64::from(d),
            };
            assert_eq!(dist.get(s, u), want, "{}: distance {s} -> {u}", t.name());
        }
    }
    let pushes = old.push_table();
    for r in 0..old.n as RouterId {
        for p in 0..net.prefixes.len() {
            let hops: Vec<IfaceId> = net.next_hops(r, p as u32).collect();
            assert_eq!(
                hops,
                old.next_hops(r, p),
                "{}: next hops {r} -> prefix {p}",
                t.name()
            );
            let want = pushes[r as usize]
                .as_ref()
                .map_or(Vec::new(), |row| row[p].clone());
            assert_eq!(
                net.pushes(r, p as u32),
                want,
                "{}: pushes {r} -> prefix {p}",
                t.name()
            );
        }
    }
    check_labels(net);
}

/// A random mesh of `n` routers: links between random pairs (sometimes twice), costs
/// of 1 to 3 (many ties) that differ by direction now and then, sometimes a second
/// component; hosts; then `ecmp` LSPs along the IGP's paths and static routes.
fn mesh(seed: u64) -> Topology {
    let mut rng = Rng::with_finish(seed ^ 0x5851_f42d_4c95_7f2d, vtnt_rng::fmix64);
    let n = rng.range(2, 40) as usize;
    let name = |i: usize| format!("m{i}");
    let mut def = TopologyDef {
        name: format!("mesh-{seed}"),
        description: String::new(),
        vantage_points: vec![VantagePointDef {
            name: "vp".into(),
            address: "192.0.2.2/24".into(),
            gateway: "192.0.2.1".into(),
            router: name(0),
            delay_ms: 0.05,
        }],
        routers: (0..n)
            .map(|i| RouterDef {
                name: name(i),
                vendor: Vendor::ALL[i % Vendor::ALL.len()],
                loopback: rng
                    .chance(0.2)
                    .then(|| format!("100.127.{}.{}", i / 200, i % 200 + 1)),
                silent: false,
                icmp_rate: 0,
                signature: None,
                reply_from: ReplyFrom::Incoming,
                ipv4_only: false,
            })
            .collect(),
        links: Vec::new(),
        hosts: Vec::new(),
        lsps: Vec::new(),
        routes: Vec::new(),
    };
    // a spanning tree over all but maybe a second component, then chords
    let split = if rng.chance(0.2) {
        rng.range(1, n as u64) as usize
    } else {
        n
    };
    let mut pairs = Vec::new();
    for i in 1..n {
        let lo = if i < split { 0 } else { split };
        if i > lo {
            pairs.push((rng.range(lo as u64, i as u64 - 1) as usize, i));
        }
    }
    for _ in 0..rng.range(0, 2 * n as u64) {
        let (a, b) = (rng.below(n as u64) as usize, rng.below(n as u64) as usize);
        if a != b && (a < split) == (b < split) {
            pairs.push((a, b));
        }
    }
    for (k, &(a, b)) in pairs.iter().enumerate() {
        let cost = rng.range(1, 3) as u32;
        def.links.push(LinkDef {
            a: name(a),
            b: name(b),
            prefix: format!("100.64.{}.{}/30", k / 64, k % 64 * 4),
            a_address: None,
            b_address: None,
            delay_ms: 1.0,
            delay_back_ms: None,
            cost,
            cost_back: rng.chance(0.3).then(|| rng.range(1, 3) as u32),
        });
    }
    for h in 0..rng.range(1, 6) {
        def.hosts.push(HostDef {
            name: format!("h{h}"),
            address: format!("203.0.113.{}/30", h * 4 + 2),
            gateway: format!("203.0.113.{}", h * 4 + 1),
            router: name(rng.below(n as u64) as usize),
            delay_ms: 0.5,
            ttl: 64,
            tcp_open: Vec::new(),
            silent: false,
        });
    }
    let plain = Topology::from_def(def.clone()).expect("a valid mesh");
    let old = Old {
        net: &plain.net,
        n,
        d: all_pairs(&plain.net),
    };
    for k in 0..rng.range(0, 6) {
        let (a, b) = (
            rng.below(n as u64) as RouterId,
            rng.below(n as u64) as RouterId,
        );
        let ecmp = rng.chance(0.7);
        let net = &plain.net;
        let paths = (net.tables.dist).paths(&net.routers, &net.ifaces, a, b, 8);
        let paths = if ecmp {
            &paths[..]
        } else {
            &paths[..paths.len().min(1)]
        };
        if old.get(a, b) == INF || paths.iter().any(|p| p.0.len() < 3) {
            continue;
        }
        let (pop, propagate) = if rng.chance(0.5) {
            (Pop::Php, rng.chance(0.5))
        } else {
            (Pop::Uhp, true)
        };
        def.lsps.push(LspDef {
            name: format!("l{k}"),
            ingress: name(a as usize),
            egress: name(b as usize),
            path: None,
            ecmp,
            ttl_propagate: propagate,
            pop,
            rfc4950: true,
            internal_labelled: rng.chance(0.5),
            icmp_tunnelling: false,
            egress_forwards_ttl1: false,
            non_null_uhp: rng.chance(0.3) && pop == Pop::Uhp,
            egress_lans_labelled: rng.chance(0.8),
            vpn_label: rng.chance(0.3),
            over: None,
        });
    }
    for _ in 0..rng.range(0, 4) {
        let r = rng.below(n as u64) as usize;
        let p = &plain.net.prefixes[rng.below(plain.net.prefixes.len() as u64) as usize];
        let Some(&o) = rng.pick(&plain.net.routers[r].links) else {
            continue;
        };
        let Peer::Router { router: via, .. } = plain.net.ifaces[o as usize].peer else {
            continue;
        };
        let route = (name(r), p.prefix.to_string());
        let taken = def
            .routes
            .iter()
            .any(|x| (&x.router, &x.prefix) == (&route.0, &route.1));
        if p.attached.contains(&(r as RouterId)) || taken {
            continue;
        }
        def.routes.push(RouteDef {
            router: route.0,
            prefix: route.1,
            via: name(via as usize),
        });
    }
    Topology::from_def(def).expect("a valid mesh with LSPs and routes")
}

#[test]
fn the_reference_topology_routes_as_before() {
    same_as_reference(&Topology::reference());
}

#[test]
fn generated_topologies_route_as_before() {
    for seed in 0..12 {
        let mut o = GenOptions {
            destinations: 24,
            ..GenOptions::default()
        };
        if seed % 2 == 1 {
            for (k, v) in [("ecmp", "0.6"), ("asymmetry", "0.6"), ("lsp-ecmp", "0.6")] {
                o.set(k, v).expect("a setting");
            }
        }
        same_as_reference(&generate(seed, &o));
    }
}

#[test]
fn random_meshes_route_as_before() {
    for seed in 0..300 {
        same_as_reference(&mesh(seed));
    }
}
