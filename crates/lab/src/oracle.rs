//! The oracle: what exhaustive probing from a vantage point can observe of each forward
//! tunnel of the truth, with none of TNT's rules or thresholds. It traces every
//! destination (by default every interface address and every host) with several Paris
//! flows through an in-process copy of the network (rate limits off, silent routers
//! still silent), maps each answer to the router that sent it, and records per tunnel
//! plain facts about the packets: its ingress and egress answered, a label was quoted,
//! its LSRs showed in order. docs/lab.md ("The oracle") defines each field.

use core::net::Ipv4Addr;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::lab::Lab;
use crate::net::{Net, Owner, RouterId};
use crate::topology::Topology;
use crate::tracer::Tracer;
use crate::truth::{Truth, Tunnel};
use crate::vantage::Port;

/// How the oracle probes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OracleOptions {
    /// Paris flows (ICMP checksums) traced per destination; more flows cover more
    /// equal-cost paths.
    pub flows: u16,
    /// Highest probe TTL of a trace (it stops earlier when the destination answers).
    pub max_ttl: u8,
    /// Destinations traced; `None`: every interface address and every host.
    pub targets: Option<Vec<Ipv4Addr>>,
}

impl Default for OracleOptions {
    /// Eight flows, TTLs up to 40 (generated paths have at most 30 routers), every
    /// address.
    fn default() -> OracleOptions {
        OracleOptions {
            flows: 8,
            max_ttl: 40,
            targets: None,
        }
    }
}

/// What the probing showed of one forward tunnel. A router is recognised by any of its
/// addresses; "a trace to the destination" is any flow's trace to the tunnel's
/// destination host (when the options include it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Observation {
    /// A trace to the destination got an answer from the ingress.
    pub ingress_seen: bool,
    /// A trace to the destination got an answer from the egress.
    pub egress_seen: bool,
    /// A trace to the destination got an answer from an LSR or the egress that quotes
    /// an MPLS label stack (RFC 4950).
    pub label_seen: bool,
    /// One trace, to any destination, shows the ingress, every LSR in order and the
    /// egress as consecutive answers (a router answering at consecutive TTLs counts
    /// once).
    pub lsrs_seen_in_order: bool,
    /// Every link of the tunnel (ingress to first LSR, ..., last LSR to egress) shows as
    /// two consecutive answers of some trace: the tunnel can be pieced together in
    /// order across traces (as BRPR does). Implied by `lsrs_seen_in_order`.
    pub links_seen: bool,
    /// `ingress_seen && links_seen`: probing locates the tunnel on the path to its
    /// destination and shows every router of it in order. Says nothing about whether
    /// its class can be told.
    pub observable: bool,
}

/// The oracle's observations of a truth's forward tunnels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Oracle {
    /// Destinations traced, traces run and probes sent.
    pub targets: usize,
    pub traces: usize,
    pub probes: u64,
    /// `tunnels[i][j]` observes `truth.destinations[i].tunnels[j]`.
    pub tunnels: Vec<Vec<Observation>>,
}

/// Probes `topo` from the vantage point of each of `truth`'s destinations and observes
/// their forward tunnels.
pub fn oracle(topo: &Topology, truth: &Truth, opts: &OracleOptions) -> Oracle {
    let net = &topo.net;
    let targets: Vec<Ipv4Addr> = match &opts.targets {
        Some(t) => t
            .iter()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        None => net
            .ifaces
            .iter()
            .map(|i| i.addr)
            .chain(net.hosts.iter().map(|h| h.addr))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    };
    let ids: BTreeMap<&str, RouterId> = net
        .routers
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i as RouterId))
        .collect();
    let mut sessions: BTreeMap<&str, Option<Probing>> = BTreeMap::new();
    let mut tunnels = Vec::with_capacity(truth.destinations.len());
    for d in &truth.destinations {
        let probing = sessions.entry(d.vantage_point.as_str()).or_insert_with(|| {
            let vp = net.vps.iter().position(|v| v.name == d.vantage_point)?;
            Some(Probing::run(topo, vp, &targets, opts))
        });
        tunnels.push(
            d.tunnels
                .iter()
                .map(|t| {
                    probing
                        .as_ref()
                        .map_or_else(Observation::default, |p| p.observe(d.dst, t, &ids))
                })
                .collect(),
        );
    }
    let ran = sessions.values().flatten();
    Oracle {
        targets: targets.len(),
        traces: ran.clone().map(|p| p.traces).sum(),
        probes: ran.map(|p| p.probes).sum(),
        tunnels,
    }
}

/// One answer: the router that sent it, and whether it quoted MPLS labels.
type Hop = Option<(RouterId, bool)>;

/// Everything the traces from one vantage point showed.
struct Probing {
    /// Per destination, per flow: the answers by probe TTL.
    to: BTreeMap<Ipv4Addr, Vec<Vec<Hop>>>,
    /// Maximal runs of consecutive answering routers, repeats collapsed: a set while
    /// probing, then a list.
    runs: BTreeSet<Vec<RouterId>>,
    ordered: Vec<Vec<RouterId>>,
    /// Where each router shows in `ordered`: run, position. A tunnel's ingress is looked
    /// up here, not searched for in every run (which, per tunnel, would be quadratic).
    at: BTreeMap<RouterId, Vec<(u32, u32)>>,
    /// Consecutive pairs of every run.
    links: BTreeSet<(RouterId, RouterId)>,
    traces: usize,
    probes: u64,
}

impl Probing {
    fn run(topo: &Topology, vp: usize, targets: &[Ipv4Addr], opts: &OracleOptions) -> Probing {
        let net = &topo.net;
        let mut quiet = topo.clone();
        for r in &mut quiet.net.routers {
            r.icmp_rate = 0;
        }
        let mut lab = Lab::new(quiet);
        let mut tracer = Tracer::new(&mut lab);
        tracer.port = Port(vp as u16);
        tracer.src = net.vps[vp].addr;
        let mut p = Probing {
            to: BTreeMap::new(),
            runs: BTreeSet::new(),
            ordered: Vec::new(),
            at: BTreeMap::new(),
            links: BTreeSet::new(),
            traces: 0,
            probes: 0,
        };
        for &dst in targets {
            let mut flows = Vec::with_capacity(usize::from(opts.flows));
            for k in 0..opts.flows {
                tracer.flow = flow(k);
                let hops: Vec<Hop> = tracer
                    .trace(dst, opts.max_ttl)
                    .into_iter()
                    .map(|a| {
                        let a = a?;
                        Some((router_of(net, a.from)?, !a.labels.is_empty()))
                    })
                    .collect();
                p.traces += 1;
                p.probes += hops.len() as u64;
                p.add_runs(&hops);
                flows.push(hops);
            }
            p.to.insert(dst, flows);
        }
        p.ordered = core::mem::take(&mut p.runs).into_iter().collect();
        for (i, run) in p.ordered.iter().enumerate() {
            for (j, &r) in run.iter().enumerate() {
                p.at.entry(r).or_default().push((i as u32, j as u32));
            }
        }
        p
    }

    fn add_runs(&mut self, hops: &[Hop]) {
        let mut run: Vec<RouterId> = Vec::new();
        for h in hops.iter().chain([&None]) {
            match h {
                Some((r, _)) if run.last() == Some(r) => {}
                Some((r, _)) => {
                    if let Some(&last) = run.last() {
                        self.links.insert((last, *r));
                    }
                    run.push(*r);
                }
                None if run.is_empty() => {}
                None => {
                    self.runs.insert(core::mem::take(&mut run));
                }
            }
        }
    }

    fn observe(&self, dst: Ipv4Addr, t: &Tunnel, ids: &BTreeMap<&str, RouterId>) -> Observation {
        let id = |n: &String| ids.get(n.as_str()).copied();
        let (Some(ingress), Some(egress)) = (id(&t.ingress_router), id(&t.egress_router)) else {
            return Observation::default();
        };
        let Some(lsrs) = t.lsr_routers.iter().map(id).collect::<Option<Vec<_>>>() else {
            return Observation::default();
        };
        let chain: Vec<RouterId> = [ingress]
            .into_iter()
            .chain(lsrs.iter().copied())
            .chain([egress])
            .collect();
        let answers = || self.to.get(&dst).into_iter().flatten().flatten().flatten();
        let ingress_seen = answers().any(|&(r, _)| r == ingress);
        let links_seen = chain.windows(2).all(|w| self.links.contains(&(w[0], w[1])));
        Observation {
            ingress_seen,
            egress_seen: answers().any(|&(r, _)| r == egress),
            label_seen: answers().any(|&(r, l)| l && (r == egress || lsrs.contains(&r))),
            lsrs_seen_in_order: self.at.get(&ingress).is_some_and(|at| {
                at.iter()
                    .any(|&(i, j)| self.ordered[i as usize][j as usize..].starts_with(&chain))
            }),
            links_seen,
            observable: ingress_seen && links_seen,
        }
    }
}

/// The ICMP checksum of Paris flow `k` (flow 0 is the tracer's default).
fn flow(k: u16) -> u16 {
    0x4242 ^ k.wrapping_mul(0x9e37)
}

fn router_of(net: &Net, addr: Ipv4Addr) -> Option<RouterId> {
    match net.owner(addr)? {
        Owner::Iface(i) => Some(net.ifaces[i as usize].router),
        _ => None,
    }
}
