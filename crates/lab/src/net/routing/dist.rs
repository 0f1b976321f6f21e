//! Shortest-path distances between routers without an all-pairs table.
//!
//! The routers' biconnected components ("blocks": a link alone, a diamond, a ring, a
//! mesh) hang together at cut routers in a forest. A shortest path crosses the blocks
//! between its two ends in forest order, through the cut routers that join them, and
//! stays inside each block (leaving one means coming back through the same router,
//! which no shortest path does: costs are positive). So a distance is a sum of distances
//! inside blocks: each block keeps a full table of its own (k² entries for k routers,
//! one Dijkstra per router of it), each router its distance up to its component's root
//! and down from it along the forest, and a query finds where two routers' chains of
//! blocks meet (binary lifting, O(log depth)). Set-up is linear in routers and links
//! plus the sum of k² over the blocks, which [`MAX_MESH_WORK`] bounds; costs are
//! directed (`cost` and `cost-back` may differ), each direction its own table entry.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::limits::{TooLarge, MAX_MESH_WORK};
use crate::net::{Iface, IfaceId, Peer, PrefixInfo, Router, RouterId};

/// Unreachable distance.
pub(crate) const INF: u64 = u64::MAX;

/// No block, no router: the top of the forest.
const NONE: u32 = u32::MAX;

/// A biconnected component.
#[derive(Debug, Clone)]
struct Block {
    /// The cut router (or component root) it hangs from: its local index 0. Every other
    /// router of the block has it as its home block.
    top: RouterId,
    /// Routers in it, `top` included.
    size: u32,
    /// Where its `size * size` table starts in [`Dist::table`].
    at: usize,
}

/// Distances between routers: `get(s, t)`.
#[derive(Debug, Clone)]
pub(crate) struct Dist {
    /// Per router: the block it belongs to other than as a top (`NONE` for a
    /// component's root), its index in that block, and its component (the root's id).
    home: Vec<u32>,
    loc: Vec<u32>,
    comp: Vec<RouterId>,
    /// Per router: distance up the forest to its component's root, and down from it.
    up: Vec<u64>,
    down: Vec<u64>,
    blocks: Vec<Block>,
    /// Per block: its depth in the forest (0: hangs from a root).
    depth: Vec<u32>,
    /// `lift[j][b]`: the block 2^j levels above block `b` (`NONE` past the top).
    lift: Vec<Vec<u32>>,
    /// Every block's table: `table[at + i * size + j]`, local index `i` to `j`.
    table: Vec<u32>,
}

impl Dist {
    /// Fails when the blocks' tables would pass [`MAX_MESH_WORK`] (checked before any
    /// is built).
    pub fn compute(routers: &[Router], ifaces: &[Iface]) -> Result<Dist, TooLarge> {
        let n = routers.len();
        let (edges, tops, comp) = biconnected(routers, ifaces);
        // routers of each block: its top, then the other ends of its links
        let mut home = vec![NONE; n];
        let mut loc = vec![0u32; n];
        let mut members: Vec<Vec<RouterId>> = Vec::with_capacity(tops.len());
        for (b, (links, &top)) in edges.iter().zip(&tops).enumerate() {
            let mut m = vec![top];
            for &o in links {
                for r in ends(ifaces, o) {
                    if r != top && home[r as usize] == NONE {
                        home[r as usize] = b as u32;
                        loc[r as usize] = m.len() as u32;
                        m.push(r);
                    }
                }
            }
            members.push(m);
        }
        let work: u64 = members.iter().map(|m| (m.len() as u64).pow(2)).sum();
        if work > MAX_MESH_WORK {
            let largest = members.iter().map(Vec::len).max().unwrap_or(0);
            return Err(TooLarge {
                what: format!(
                    "distance-table entries for the topology's meshes (the routers of each \
                     biconnected part squared, summed; the largest part has {largest} routers)"
                ),
                value: work,
                limit: MAX_MESH_WORK,
            });
        }
        let mut blocks = Vec::with_capacity(members.len());
        let mut table = Vec::with_capacity(work as usize);
        let mut scratch = Scratch::default();
        for (m, links) in members.iter().zip(&edges) {
            blocks.push(Block {
                top: m[0],
                size: m.len() as u32,
                at: table.len(),
            });
            scratch.block_table(ifaces, m, links, &loc, &mut table);
        }
        // blocks come out children first: parents are set up before their children in
        // reverse order
        let parent = |b: usize| home[blocks[b].top as usize];
        let mut depth = vec![0u32; blocks.len()];
        let (mut up, mut down) = (vec![0u64; n], vec![0u64; n]);
        for b in (0..blocks.len()).rev() {
            let p = parent(b);
            depth[b] = if p == NONE { 0 } else { depth[p as usize] + 1 };
            let blk = &blocks[b];
            for &r in &members[b][1..] {
                let i = loc[r as usize] as usize;
                let k = blk.size as usize;
                let (t, r) = (blk.top as usize, r as usize);
                up[r] = up[t] + u64::from(table[blk.at + i * k]);
                down[r] = down[t] + u64::from(table[blk.at + i]);
            }
        }
        let levels =
            (u32::BITS - depth.iter().max().copied().unwrap_or(0).leading_zeros()) as usize;
        let mut lift: Vec<Vec<u32>> = vec![(0..blocks.len()).map(parent).collect()];
        for j in 1..levels.max(1) {
            let prev = &lift[j - 1];
            let next = prev
                .iter()
                .map(|&b| if b == NONE { NONE } else { prev[b as usize] })
                .collect();
            lift.push(next);
        }
        Ok(Dist {
            home,
            loc,
            comp,
            up,
            down,
            blocks,
            depth,
            lift,
            table,
        })
    }

    /// The directed shortest distance from `s` to `t` ([`INF`] when unreachable).
    pub fn get(&self, s: RouterId, t: RouterId) -> u64 {
        let (su, tu) = (s as usize, t as usize);
        if s == t {
            return 0;
        }
        if self.comp[su] != self.comp[tu] {
            return INF;
        }
        let (bs, bt) = (self.home[su], self.home[tu]);
        if bs == NONE || bt == NONE {
            // one of them is the root: everything else hangs below it
            return self.up[su] + self.down[tu];
        }
        let Some(l) = self.meet(bs, bt) else {
            // different blocks hanging from the root: the path crosses it
            return self.up[su] + self.down[tu];
        };
        // where each end's chain enters block `l`
        let entry = |r: RouterId, b: u32| {
            if b == l {
                r
            } else {
                let below = self.ancestor(b, self.depth[b as usize] - self.depth[l as usize] - 1);
                self.blocks[below as usize].top
            }
        };
        let (x, y) = (entry(s, bs), entry(t, bt));
        self.up[su] - self.up[x as usize] + self.in_block(l, x, y) + self.down[tu]
            - self.down[y as usize]
    }

    /// Distance from `s` to the closest router `p` is attached to.
    pub fn to_prefix(&self, s: RouterId, p: &PrefixInfo) -> u64 {
        p.attached
            .iter()
            .map(|&a| self.get(s, a))
            .min()
            .unwrap_or(INF)
    }

    /// Distance inside block `b` between two of its routers.
    fn in_block(&self, b: u32, x: RouterId, y: RouterId) -> u64 {
        let blk = &self.blocks[b as usize];
        let local = |r: RouterId| {
            if r == blk.top {
                0
            } else {
                self.loc[r as usize] as usize
            }
        };
        let k = blk.size as usize;
        u64::from(self.table[blk.at + local(x) * k + local(y)])
    }

    /// The block `k` levels above block `b`.
    fn ancestor(&self, mut b: u32, k: u32) -> u32 {
        for (j, row) in self.lift.iter().enumerate() {
            if b == NONE {
                break;
            }
            if k >> j & 1 == 1 {
                b = row[b as usize];
            }
        }
        b
    }

    /// The deepest block both `a` and `b` lie below (or are), if they share one.
    fn meet(&self, a: u32, b: u32) -> Option<u32> {
        let (da, db) = (self.depth[a as usize], self.depth[b as usize]);
        let (mut a, mut b) = if da >= db {
            (self.ancestor(a, da - db), b)
        } else {
            (a, self.ancestor(b, db - da))
        };
        if a == b {
            return Some(a);
        }
        for row in self.lift.iter().rev() {
            let (pa, pb) = (row[a as usize], row[b as usize]);
            if pa != pb {
                (a, b) = (pa, pb);
            }
        }
        let p = self.lift[0][a as usize];
        (p != NONE).then_some(p)
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
                            if u64::from(i.cost).saturating_add(self.get(v, t))
                                == self.get(u, t) =>
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

/// The two routers the link out of interface `o` joins.
fn ends(ifaces: &[Iface], o: IfaceId) -> [RouterId; 2] {
    let i = &ifaces[o as usize];
    match i.peer {
        Peer::Router { router, .. } => [i.router, router],
        _ => [i.router, i.router],
    }
}

/// The blocks of the router graph (Hopcroft and Tarjan, without recursion: a chain of
/// 100,000 routers is a DFS that deep), children before parents: each as its links (by
/// one interface of each), its top router, and each router's component (its DFS root).
fn biconnected(
    routers: &[Router],
    ifaces: &[Iface],
) -> (Vec<Vec<IfaceId>>, Vec<RouterId>, Vec<RouterId>) {
    const UNSEEN: u32 = u32::MAX;
    let n = routers.len();
    let (mut disc, mut low) = (vec![UNSEEN; n], vec![0u32; n]);
    let mut comp = vec![0 as RouterId; n];
    let (mut blocks, mut tops) = (Vec::new(), Vec::new());
    let mut edges: Vec<(u32, IfaceId)> = Vec::new();
    // (router, the link it was reached over, the next of its links to look at)
    let mut frames: Vec<(RouterId, u32, usize)> = Vec::new();
    let mut clock = 0u32;
    for root in 0..n {
        if disc[root] != UNSEEN {
            continue;
        }
        disc[root] = clock;
        low[root] = clock;
        clock += 1;
        comp[root] = root as RouterId;
        frames.push((root as RouterId, NONE, 0));
        while let Some(&mut (u, via, ref mut next)) = frames.last_mut() {
            let uu = u as usize;
            if let Some(&o) = routers[uu].links.get(*next) {
                *next += 1;
                let Peer::Router {
                    router: v, link, ..
                } = ifaces[o as usize].peer
                else {
                    continue;
                };
                if link == via {
                    continue;
                }
                let vu = v as usize;
                if disc[vu] == UNSEEN {
                    edges.push((link, o));
                    disc[vu] = clock;
                    low[vu] = clock;
                    clock += 1;
                    comp[vu] = root as RouterId;
                    frames.push((v, link, 0));
                } else if disc[vu] < disc[uu] {
                    edges.push((link, o));
                    low[uu] = low[uu].min(disc[vu]);
                }
                continue;
            }
            frames.pop();
            let Some(&(p, ..)) = frames.last() else {
                continue;
            };
            let pu = p as usize;
            low[pu] = low[pu].min(low[uu]);
            if low[uu] >= disc[pu] {
                let mut block = Vec::new();
                while let Some((link, o)) = edges.pop() {
                    block.push(o);
                    if link == via {
                        break;
                    }
                }
                blocks.push(block);
                tops.push(p);
            }
        }
    }
    (blocks, tops, comp)
}

/// Buffers reused from block to block.
#[derive(Default)]
struct Scratch {
    /// Arcs by local source: `start[i] .. start[i + 1]` index `arcs` (to, cost).
    start: Vec<u32>,
    arcs: Vec<(u32, u32)>,
    heap: BinaryHeap<Reverse<(u32, u32)>>,
}

impl Scratch {
    /// Appends the table of the block of routers `m` (top first) and links `links` to
    /// `table`: one Dijkstra from each of its routers, inside the block.
    fn block_table(
        &mut self,
        ifaces: &[Iface],
        m: &[RouterId],
        links: &[IfaceId],
        loc: &[u32],
        table: &mut Vec<u32>,
    ) {
        let k = m.len();
        let local = |r: RouterId| {
            if r == m[0] {
                0
            } else {
                loc[r as usize]
            }
        };
        // both directions of every link, grouped by source (counting sort)
        let mut arcs: Vec<(u32, u32, u32)> = Vec::with_capacity(2 * links.len());
        for &o in links {
            let i = &ifaces[o as usize];
            if let Peer::Router { router, iface, .. } = i.peer {
                let back = &ifaces[iface as usize];
                let (a, b) = (local(i.router), local(router));
                arcs.push((a, b, i.cost));
                arcs.push((b, a, back.cost));
            }
        }
        self.start.clear();
        self.start.resize(k + 1, 0);
        for &(a, ..) in &arcs {
            self.start[a as usize + 1] += 1;
        }
        for i in 0..k {
            self.start[i + 1] += self.start[i];
        }
        self.arcs.clear();
        self.arcs.resize(arcs.len(), (0, 0));
        let mut fill = self.start.clone();
        for &(a, b, c) in &arcs {
            self.arcs[fill[a as usize] as usize] = (b, c);
            fill[a as usize] += 1;
        }
        for s in 0..k {
            let at = table.len();
            table.resize(at + k, u32::MAX);
            let row = &mut table[at..];
            row[s] = 0;
            self.heap.push(Reverse((0, s as u32)));
            while let Some(Reverse((du, u))) = self.heap.pop() {
                if du > row[u as usize] {
                    continue;
                }
                let (a, b) = (self.start[u as usize], self.start[u as usize + 1]);
                for &(v, c) in &self.arcs[a as usize..b as usize] {
                    let nd = du.saturating_add(c);
                    if nd < row[v as usize] {
                        row[v as usize] = nd;
                        self.heap.push(Reverse((nd, v)));
                    }
                }
            }
        }
    }
}
