//! What a traceroute from a vantage point can observe of each forward tunnel, found by
//! emulating the probes in-process on a copy of the network (rate limits off, silent
//! routers still silent): the initial trace, the fingerprint pings, and the revelation
//! traces (DPR, BRPR, buddy). The truth's observability fields come from here, so they
//! cannot disagree with the packets.
//!
//! Numbers use the lab's own physics: the return length of a reply is the answering
//! router's true initial TTL minus the reply TTL plus one (TNT has to guess the initial
//! TTL; the lab knows it).

use core::net::Ipv4Addr;
use std::collections::BTreeMap;

use serde::Serialize;
use vtnt_record::Instant;

use crate::lab::{Lab, Port};
use crate::net::{Owner, Peer, Revelation, RouterId, TunnelClass};
use crate::topology::{Pop, Topology};
use crate::tracer::{Answer, Tracer};
use crate::truth::Tunnel;

/// TNT's default trigger thresholds, as the truth applies them.
pub const FRPLA_THRESHOLD: i16 = 3;
pub const RTLA_THRESHOLD: i16 = 1;
pub const UTURN_THRESHOLD: i16 = 3;

/// Paris flows tried when the first one's path does not cross a tunnel (ECMP).
const FLOWS: [u16; 8] = [
    0x4242, 0x1357, 0x2468, 0x9abc, 0x0f0f, 0x7777, 0xbeef, 0x5a5a,
];

/// ICMP time exceeded.
const TIME_EXCEEDED: u8 = 11;

/// What a traceroute shows at the first hop after the ingress of a tunnel that hides
/// LSRs (opaque, invisible), and which of TNT's trigger conditions that holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signals {
    /// Probe TTL at which the ingress answers.
    pub ingress_ttl: u8,
    /// The first hop after the ingress: the egress (PHP, opaque) or the router after the
    /// missing egress (invisible UHP); its address, router and probe TTL.
    pub hop: Ipv4Addr,
    pub hop_router: String,
    pub hop_ttl: u8,
    /// FRPLA at that hop: return length of its time exceeded minus the probe TTL
    /// (hidden forward hops minus hidden return hops).
    pub frpla: i16,
    /// FRPLA at the ingress (hidden hops inherited from earlier tunnels).
    pub frpla_ingress: i16,
    /// RTLA at that hop: return length of its time exceeded minus that of its echo reply,
    /// only for a `<255,64>` router (0 otherwise).
    pub rtla: i16,
    /// The hop answers at two consecutive probe TTLs.
    pub dup_ip: bool,
    /// The hop quotes a label whose LSE-TTL is neither <= 1 nor 255.
    pub mttl: bool,
    /// TNT trigger conditions that hold at the default thresholds, in TNT's order:
    /// `mttl`, `dup-ip`, `rtla` (>= 1), `frpla` (`frpla - max(0, frpla_ingress) >= 3`).
    pub triggers: Vec<&'static str>,
    /// The next distinct hops, at most two (TNT's walk-back reach), while they belong to
    /// no other forward tunnel: return-path asymmetry a tunnel leaves may only show a
    /// hop or two later (e.g. in the time exceeded of a router whose replies cross the
    /// tunnel's return LSP), and TNT walks an FRPLA/RTLA trigger that reveals nothing
    /// back towards the ingress.
    pub later: Vec<LaterHop>,
    /// Distinct ECMP paths across the tunnel seen by eight Paris flows, and on how many
    /// of them a trigger condition holds (the fields above are from the first path).
    pub paths: u8,
    pub paths_firing: u8,
}

/// FRPLA and RTLA at a hop after the first one past the ingress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaterHop {
    pub hop: Ipv4Addr,
    pub router: String,
    pub probe_ttl: u8,
    pub frpla: i16,
    pub rtla: i16,
    /// `rtla` (>= 1), `frpla` (`frpla - max(0, FRPLA of the hop before) >= 3`).
    pub triggers: Vec<&'static str>,
}

impl Signals {
    /// A trigger condition holds at the first hop after the ingress or at a later one.
    pub fn fires(&self) -> bool {
        !self.triggers.is_empty() || self.later.iter().any(|h| !h.triggers.is_empty())
    }
}

/// The observability of one forward tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Observed {
    pub detectable: bool,
    pub signals: Option<Signals>,
    pub revealable_by: Option<Revelation>,
}

/// One traced path: Paris flow, answers by probe TTL, the routers that sent them.
type Variant = (u16, Vec<Option<Answer>>, Vec<Option<RouterId>>);

/// A probing session on a private copy of the network.
pub(crate) struct Observer {
    lab: Lab,
    port: Port,
    src: Ipv4Addr,
    now: Instant,
    traces: BTreeMap<(Ipv4Addr, u16), Vec<Option<Answer>>>,
    pings: BTreeMap<Ipv4Addr, Option<u8>>,
    names: BTreeMap<String, RouterId>,
}

impl Observer {
    /// An observer probing from vantage point `vp` of `topo`.
    pub fn new(topo: &Topology, vp: usize) -> Option<Observer> {
        let mut t = topo.clone();
        for r in &mut t.net.routers {
            r.icmp_rate = 0;
        }
        let src = t.net.vps.get(vp)?.addr;
        let names = t
            .net
            .routers
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i as RouterId))
            .collect();
        Some(Observer {
            lab: Lab::new(t),
            port: Port(vp as u16),
            src,
            now: Instant::ZERO,
            traces: BTreeMap::new(),
            pings: BTreeMap::new(),
            names,
        })
    }

    fn tracer(&mut self, flow: u16) -> Tracer<'_> {
        let mut t = Tracer::new(&mut self.lab);
        t.port = self.port;
        t.src = self.src;
        t.now = self.now;
        t.flow = flow;
        t
    }

    fn trace(&mut self, dst: Ipv4Addr, flow: u16) -> Vec<Option<Answer>> {
        if let Some(t) = self.traces.get(&(dst, flow)) {
            return t.clone();
        }
        let mut t = self.tracer(flow);
        let hops = t.trace(dst, 64);
        self.now = t.now;
        self.traces.insert((dst, flow), hops.clone());
        hops
    }

    /// Reply TTL of an echo reply from `addr`.
    fn er(&mut self, addr: Ipv4Addr) -> Option<u8> {
        if let Some(&r) = self.pings.get(&addr) {
            return r;
        }
        let mut t = self.tracer(FLOWS[0]);
        let a = t.ping(addr);
        self.now = t.now;
        let r = a.filter(|a| a.icmp_type == 0).map(|a| a.reply_ttl);
        self.pings.insert(addr, r);
        r
    }

    fn router_of(&self, addr: Ipv4Addr) -> Option<RouterId> {
        let net = &self.lab.topology().net;
        match net.owner(addr)? {
            Owner::Iface(i) => Some(net.ifaces[i as usize].router),
            _ => None,
        }
    }

    fn id(&self, name: &str) -> Option<RouterId> {
        self.names.get(name).copied()
    }

    fn vendor_ttls(&self, r: RouterId) -> (u8, u8) {
        self.lab.topology().net.routers[r as usize]
            .vendor
            .signature()
    }

    /// Return length of an answer from router `r` (true initial TTL), by reply kind.
    fn ret_te(&self, r: RouterId, reply_ttl: u8) -> i16 {
        i16::from(self.vendor_ttls(r).0) - i16::from(reply_ttl) + 1
    }
    fn ret_er(&self, r: RouterId, reply_ttl: u8) -> i16 {
        i16::from(self.vendor_ttls(r).1) - i16::from(reply_ttl) + 1
    }

    /// Observes every forward tunnel of the path to `dst`.
    /// `ecmp`: the forward path has equal-cost variants (several Paris flows are traced).
    pub fn observe(&mut self, dst: Ipv4Addr, tunnels: &[Tunnel], ecmp: bool) -> Vec<Observed> {
        (0..tunnels.len())
            .map(|i| {
                let others: Vec<RouterId> = tunnels
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| k != i)
                    .flat_map(|(_, t)| t.lsr_routers.iter().chain([&t.egress_router]))
                    .filter_map(|n| self.id(n))
                    .collect();
                self.observe_one(dst, &tunnels[i], &others, ecmp)
            })
            .collect()
    }

    fn observe_one(
        &mut self,
        dst: Ipv4Addr,
        t: &Tunnel,
        others: &[RouterId],
        ecmp: bool,
    ) -> Observed {
        let mut o = Observed::default();
        if !t.class.hides_lsrs() || t.lsrs.is_empty() {
            o.revealable_by = Some(Revelation::NotNeeded);
        }
        let lsrs: Vec<RouterId> = t.lsr_routers.iter().filter_map(|n| self.id(n)).collect();
        let (Some(ingress), Some(egress)) = (self.id(&t.ingress_router), self.id(&t.egress_router))
        else {
            return o;
        };
        // The LSRs of visible tunnels and the ingress of hiding ones must be on the trace.
        let via = match t.class {
            TunnelClass::Explicit | TunnelClass::Implicit => {
                lsrs.first().copied().unwrap_or(egress)
            }
            _ => ingress,
        };
        // Every distinct path a Paris flow takes across the tunnel (ECMP), the first one
        // first; a tunnel is detectable when it shows on all of them.
        let flows: &[u16] = if ecmp { &FLOWS } else { &FLOWS[..1] };
        let mut variants: Vec<Variant> = Vec::new();
        for &flow in flows {
            let trace = self.trace(dst, flow);
            let routers: Vec<Option<RouterId>> = trace
                .iter()
                .map(|a| a.as_ref().and_then(|a| self.router_of(a.from)))
                .collect();
            if routers.contains(&Some(via)) && variants.iter().all(|v| v.2 != routers) {
                variants.push((flow, trace, routers));
            }
        }
        let Some(first_flow) = variants.first().map(|v| v.0) else {
            return o;
        };
        let mut all = true;
        let mut first: Option<Signals> = None;
        let (mut paths, mut firing) = (0u8, 0u8);
        for (_, trace, routers) in &variants {
            let shows = match t.class {
                TunnelClass::Explicit => trace.iter().zip(routers).any(|(a, r)| {
                    let in_tunnel = r.is_some_and(|r| r == egress || lsrs.contains(&r));
                    let explicit_label = a
                        .as_ref()
                        .and_then(|a| a.labels.first())
                        .is_some_and(|&(_, ttl)| ttl <= 1 || ttl == 255);
                    in_tunnel && explicit_label
                }),
                TunnelClass::Implicit => self.implicit_detectable(trace, routers, &lsrs),
                _ => {
                    let signals = routers
                        .iter()
                        .position(|r| *r == Some(ingress))
                        .and_then(|at| self.signals(trace, routers, at, others));
                    let fires = signals.as_ref().is_some_and(Signals::fires);
                    paths += 1;
                    firing += u8::from(fires);
                    if first.is_none() {
                        first = signals;
                    }
                    fires
                }
            };
            all &= shows;
        }
        o.detectable = all;
        if let Some(mut signals) = first {
            signals.paths = paths;
            signals.paths_firing = firing;
            if !lsrs.is_empty() {
                o.revealable_by =
                    Some(self.revealable(t, first_flow, ingress, egress, &lsrs, &signals));
            }
            o.signals = Some(signals);
        }
        o
    }

    /// An implicit tunnel shows when one of its LSRs quotes an IP-TTL above 1 (not 255)
    /// without labels, or when a run of consecutive LSRs with non-zero u-turns (return
    /// length of the time exceeded minus that of the echo reply) sums to at least 3 in
    /// absolute value; LSRs with a `<255,x != 255>` signature are left out of runs, as
    /// their u-turn cannot be told from RTLA.
    fn implicit_detectable(
        &mut self,
        trace: &[Option<Answer>],
        routers: &[Option<RouterId>],
        lsrs: &[RouterId],
    ) -> bool {
        let qttl = trace.iter().zip(routers).any(|(a, r)| {
            r.is_some_and(|r| lsrs.contains(&r))
                && a.as_ref().is_some_and(|a| {
                    a.icmp_type == TIME_EXCEEDED
                        && a.labels.is_empty()
                        && a.q_ttl.is_some_and(|q| q > 1 && q != 255)
                })
        });
        if qttl {
            return true;
        }
        let mut sum = 0i16;
        for (a, r) in trace.iter().zip(routers) {
            let u = match (a, r) {
                (Some(a), Some(r)) if lsrs.contains(r) && a.icmp_type == TIME_EXCEEDED => {
                    let (te_ittl, er_ittl) = self.vendor_ttls(*r);
                    match self.er(a.from) {
                        Some(er) if !(te_ittl == 255 && er_ittl != 255) => {
                            self.ret_te(*r, a.reply_ttl) - self.ret_er(*r, er)
                        }
                        _ => 0,
                    }
                }
                _ => 0,
            };
            if u == 0 {
                sum = 0;
            } else {
                sum += u.abs();
                if sum >= UTURN_THRESHOLD {
                    return true;
                }
            }
        }
        false
    }

    /// The signals at the hop after the ingress (trace slot `at`).
    fn signals(
        &mut self,
        trace: &[Option<Answer>],
        routers: &[Option<RouterId>],
        at: usize,
        others: &[RouterId],
    ) -> Option<Signals> {
        let ing = trace.get(at)?.as_ref()?;
        let hop = trace.get(at + 1)?.as_ref()?;
        let hop_router = routers.get(at + 1).copied().flatten()?;
        let ing_router = routers.get(at).copied().flatten()?;
        let te = hop.icmp_type == TIME_EXCEEDED;
        let frpla = if te {
            self.ret_te(hop_router, hop.reply_ttl) - i16::from(hop.probe_ttl)
        } else {
            0
        };
        let frpla_ingress = if ing.icmp_type == TIME_EXCEEDED {
            self.ret_te(ing_router, ing.reply_ttl) - i16::from(ing.probe_ttl)
        } else {
            0
        };
        let (te_ittl, er_ittl) = self.vendor_ttls(hop_router);
        let rtla = match self.er(hop.from) {
            Some(er) if te && te_ittl == 255 && er_ittl != 255 => {
                self.ret_te(hop_router, hop.reply_ttl) - self.ret_er(hop_router, er)
            }
            _ => 0,
        };
        let dup_ip = te
            && trace
                .get(at + 2)
                .and_then(Option::as_ref)
                .is_some_and(|n| n.from == hop.from && n.icmp_type == TIME_EXCEEDED);
        let mttl = te
            && hop
                .labels
                .first()
                .is_some_and(|&(_, ttl)| ttl > 1 && ttl != 255);
        let mut triggers = Vec::new();
        if mttl {
            triggers.push("mttl");
        }
        if dup_ip {
            triggers.push("dup-ip");
        }
        if rtla >= RTLA_THRESHOLD {
            triggers.push("rtla");
        }
        if te && frpla - frpla_ingress.max(0) >= FRPLA_THRESHOLD {
            triggers.push("frpla");
        }
        let mut later = Vec::new();
        let (mut prev_frpla, mut prev_addr) = (frpla, hop.from);
        for (a, r) in trace.iter().zip(routers).skip(at + 2) {
            let (Some(a), Some(r)) = (a, *r) else { break };
            if a.from == prev_addr {
                continue;
            }
            if a.icmp_type != TIME_EXCEEDED || others.contains(&r) || later.len() == 2 {
                break;
            }
            let f = self.ret_te(r, a.reply_ttl) - i16::from(a.probe_ttl);
            let (te_ittl, er_ittl) = self.vendor_ttls(r);
            let rt = match self.er(a.from) {
                Some(er) if te_ittl == 255 && er_ittl != 255 => {
                    self.ret_te(r, a.reply_ttl) - self.ret_er(r, er)
                }
                _ => 0,
            };
            let mut tr = Vec::new();
            if rt >= RTLA_THRESHOLD {
                tr.push("rtla");
            }
            if f - prev_frpla.max(0) >= FRPLA_THRESHOLD {
                tr.push("frpla");
            }
            later.push(LaterHop {
                hop: a.from,
                router: self.lab.topology().net.router_name(r).to_string(),
                probe_ttl: a.probe_ttl,
                frpla: f,
                rtla: rt,
                triggers: tr,
            });
            (prev_frpla, prev_addr) = (f, a.from);
        }
        let net = &self.lab.topology().net;
        Some(Signals {
            ingress_ttl: ing.probe_ttl,
            hop: hop.from,
            hop_router: net.router_name(hop_router).to_string(),
            hop_ttl: hop.probe_ttl,
            frpla,
            frpla_ingress,
            rtla,
            dup_ip,
            mttl,
            triggers,
            later,
            paths: 1,
            paths_firing: 0,
        })
    }

    /// Routers a trace towards `target` shows strictly between the ingress and the
    /// target's router, consecutive repeats collapsed; `None` when the target did not
    /// answer last, the ingress is missing, or a slot in between did not answer.
    fn between(
        &mut self,
        target: Ipv4Addr,
        flow: u16,
        ingress: RouterId,
        end: RouterId,
    ) -> Option<Vec<(RouterId, Ipv4Addr)>> {
        let trace = self.trace(target, flow);
        if trace.last()?.as_ref()?.from != target {
            return None;
        }
        let routers: Vec<Option<RouterId>> = trace
            .iter()
            .map(|a| a.as_ref().and_then(|a| self.router_of(a.from)))
            .collect();
        let s = routers.iter().position(|r| *r == Some(ingress))?;
        let e = (s + 1..routers.len()).find(|&i| routers[i] == Some(end))?;
        let mut out: Vec<(RouterId, Ipv4Addr)> = Vec::new();
        for i in s + 1..e {
            let r = routers[i]?;
            let a = trace[i].as_ref()?.from;
            if out.last().is_none_or(|&(p, _)| p != r) {
                out.push((r, a));
            }
        }
        Some(out)
    }

    /// Which revelation shows every hidden LSR, in order, from what the trace showed:
    /// PHP and opaque tunnels: a trace to the egress showing them all (DPR), or one
    /// more LSR per trace, each trace going to the LSR revealed last (BRPR); invisible
    /// UHP: a trace to the egress's own address on the link to the hop seen twice
    /// (buddy), else a trace to that hop showing the LSRs and the egress (DPR).
    fn revealable(
        &mut self,
        t: &Tunnel,
        flow: u16,
        ingress: RouterId,
        egress: RouterId,
        lsrs: &[RouterId],
        s: &Signals,
    ) -> Revelation {
        let ids = |v: &[(RouterId, Ipv4Addr)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
        if t.class == TunnelClass::InvisibleUhp
            || (t.pop == Pop::Uhp && s.hop_router != t.egress_router)
        {
            let Some(next) = self.id(&s.hop_router) else {
                return Revelation::None;
            };
            if let Some(buddy) = self.iface_towards(egress, next, s.hop) {
                if self
                    .between(buddy, flow, ingress, egress)
                    .is_some_and(|v| ids(&v) == lsrs)
                {
                    return Revelation::Buddy;
                }
            }
            let mut want = lsrs.to_vec();
            want.push(egress);
            if self
                .between(s.hop, flow, ingress, next)
                .is_some_and(|v| ids(&v) == want)
            {
                return Revelation::Dpr;
            }
            return Revelation::None;
        }
        // The hop seen is the egress.
        let mut revealed: Vec<RouterId> = Vec::new();
        let (mut target, mut end) = (s.hop, egress);
        for step in 0..=lsrs.len() {
            let Some(new) = self.between(target, flow, ingress, end) else {
                break;
            };
            let n = ids(&new);
            if n.is_empty() || !lsrs[..lsrs.len() - revealed.len()].ends_with(&n) {
                break;
            }
            revealed.splice(0..0, n.iter().copied());
            if revealed == lsrs {
                return if step == 0 {
                    Revelation::Dpr
                } else {
                    Revelation::Brpr
                };
            }
            (end, target) = new[0];
        }
        Revelation::None
    }

    /// The address of router `r` on its link to router `peer` whose `peer` side is `addr`.
    fn iface_towards(&self, r: RouterId, peer: RouterId, addr: Ipv4Addr) -> Option<Ipv4Addr> {
        let net = &self.lab.topology().net;
        net.routers[r as usize].links.iter().find_map(|&i| {
            let iface = &net.ifaces[i as usize];
            match iface.peer {
                Peer::Router {
                    router, iface: pi, ..
                } if router == peer && net.ifaces[pi as usize].addr == addr => Some(iface.addr),
                _ => None,
            }
        })
    }
}
