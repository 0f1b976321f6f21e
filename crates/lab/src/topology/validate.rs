//! From a topology definition to the resolved network: names resolved, addresses parsed
//! and checked (lab ranges only, no overlap, no duplicate), LSP paths found (each
//! equal-cost one of an `ecmp` LSP) or checked, labels allocated, routing tables built.
//! The first problem found is returned, naming the file, line and object.

use std::collections::HashMap;
use std::net::Ipv4Addr;

/// Most equal-cost paths an `ecmp` LSP follows.
const MAX_ECMP_PATHS: usize = 8;

use super::file::{LspDef, Spans, TopologyDef};
use super::{line_of, TopologyError};
use crate::addr::{in_lab_ranges, AddrLen, Prefix};
use crate::limits::{self, MAX_LSPS};
use crate::net::routing::{Dist, Static, Tables, INF};
use crate::net::{
    Host, Iface, IfaceId, Lsp, Net, Over, Peer, Pop, PrefixInfo, PrefixKind, Router, RouterId,
    TunnelClass, Vp,
};

/// Where each object is in the file's text, found only when an error needs it: the
/// spans of 100,000 objects would cost a second parse of the whole file (as much time
/// and memory as the first) for nothing when the topology is valid.
#[derive(Debug, Default)]
pub(crate) struct Lines<'a> {
    /// The file's text (none for generated topologies: every line is 0).
    text: Option<&'a str>,
}

impl<'a> Lines<'a> {
    pub fn of(text: &'a str) -> Lines<'a> {
        Lines { text: Some(text) }
    }

    /// The line of the `[[...]]` header of object `idx` of `kind` (0 when unknown).
    fn line(&self, kind: &str, idx: usize) -> usize {
        let Some(text) = self.text else { return 0 };
        let Ok(s) = toml::from_str::<Spans>(text) else {
            return 0;
        };
        let list = match kind {
            "vantage-point" => s.vantage_points,
            "router" => s.routers,
            "link" => s.links,
            "host" => s.hosts,
            "route" => s.routes,
            _ => s.lsps,
        };
        list.get(idx)
            .map_or(0, |t| line_of(text, header(text, t.span().start)))
    }
}

/// Where the `[[...]]` header an object's span starts at or after begins.
fn header(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    if text[at..].starts_with("[[") {
        return at;
    }
    text[..at].rfind("[[").unwrap_or(at)
}

struct Ctx<'a> {
    file: &'a str,
    lines: &'a Lines<'a>,
}

impl Ctx<'_> {
    fn err(&self, kind: &str, idx: usize, name: &str, message: String) -> TopologyError {
        TopologyError::Invalid {
            file: self.file.to_string(),
            line: self.lines.line(kind, idx),
            object: format!("[[{kind}]] {name}"),
            message,
        }
    }
}

/// Adds router `r`'s interface `gw` towards a vantage point's or host's LAN and
/// returns it.
fn lan_gateway(
    ifaces: &mut Vec<Iface>,
    routers: &mut [Router],
    r: RouterId,
    gw: Ipv4Addr,
    peer: Peer,
    delay_us: u64,
) -> IfaceId {
    let id = ifaces.len() as IfaceId;
    ifaces.push(Iface {
        router: r,
        addr: gw,
        prefix: 0,
        peer,
        delay_us,
        cost: 0,
    });
    routers[r as usize].ifaces.push(id);
    id
}

fn us(ms: f64) -> Option<u64> {
    (ms.is_finite() && (0.0..=60_000.0).contains(&ms)).then(|| (ms * 1000.0).round() as u64)
}

/// Why `name` cannot name an object, if it cannot: it must be non-empty and print as
/// itself (no control character such as a newline or a terminal escape, no
/// bidirectional-text control), so that `lab check` and `lab truth` show what it says.
fn bad_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("empty name".into());
    }
    let bidi = |c: char| matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let c = name.chars().find(|&c| c.is_control() || bidi(c))?;
    Some(format!(
        "the name holds {c:?}, a control character: a name must print as itself"
    ))
}

fn addr(s: &str) -> Result<Ipv4Addr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not an IPv4 address"))
}

/// Resolves a definition into the network.
/// `vm_lan`: a prefix routed to the first vantage point as well (its VMs' LAN, outside
/// the lab ranges if the caller likes), whose host 1 the router answers for.
pub(crate) fn resolve(
    def: &TopologyDef,
    file: &str,
    lines: &Lines,
    vm_lan: Option<Prefix>,
) -> Result<Net, TopologyError> {
    let cx = Ctx { file, lines };
    let top = |message: String| TopologyError::Invalid {
        file: file.to_string(),
        line: 1,
        object: "topology".into(),
        message,
    };
    if let Some(why) = bad_name(&def.name) {
        return Err(top(why));
    }
    if def.vantage_points.is_empty() {
        return Err(top(
            "no [[vantage-point]]: probes need somewhere to come from".into(),
        ));
    }
    let too_large = |limit| TopologyError::TooLarge {
        file: file.to_string(),
        limit,
    };
    super::check_counts(def).map_err(too_large)?;

    let mut routers = Vec::new();
    let mut ifaces: Vec<Iface> = Vec::new();
    let mut prefixes: Vec<(PrefixInfo, &str, usize, String)> = Vec::new();
    let mut by_name: HashMap<&str, RouterId> = HashMap::new();
    let mut names: HashMap<&str, &str> = HashMap::new();

    for (i, r) in def.routers.iter().enumerate() {
        let obj = format!("{:?}", r.name);
        if let Some(why) = bad_name(&r.name) {
            return Err(cx.err("router", i, &obj, why));
        }
        if let Some(kind) = names.insert(&r.name, "router") {
            return Err(cx.err("router", i, &obj, format!("name already used by a {kind}")));
        }
        by_name.insert(&r.name, i as RouterId);
        let signature = match r.signature {
            Some([0, _] | [_, 0]) => {
                return Err(cx.err(
                    "router",
                    i,
                    &obj,
                    "a signature's initial TTLs are 1..=255".into(),
                ))
            }
            Some([te, er]) => (te, er),
            None => r.vendor.signature(),
        };
        routers.push(Router {
            name: r.name.clone(),
            vendor: r.vendor,
            signature,
            reply_from: r.reply_from,
            silent: r.silent,
            icmp_rate: r.icmp_rate,
            ipv4_only: r.ipv4_only,
            ifaces: Vec::new(),
            links: Vec::new(),
        });
        if let Some(lo) = &r.loopback {
            let a = addr(lo).map_err(|m| cx.err("router", i, &obj, m))?;
            let id = ifaces.len() as IfaceId;
            ifaces.push(Iface {
                router: i as RouterId,
                addr: a,
                prefix: 0,
                peer: Peer::Loopback,
                delay_us: 0,
                cost: 0,
            });
            routers[i].ifaces.push(id);
            let p = Prefix::containing(a, 32);
            let info = PrefixInfo {
                prefix: p,
                kind: PrefixKind::Loopback { iface: id },
                attached: vec![i as RouterId],
            };
            prefixes.push((info, "router", i, obj));
        }
    }
    let router = |kind: &str, i: usize, obj: &str, n: &str| {
        by_name
            .get(n)
            .copied()
            .ok_or_else(|| cx.err(kind, i, obj, format!("router {n:?} is not defined")))
    };

    for (i, l) in def.links.iter().enumerate() {
        let obj = format!("{}-{}", l.a.escape_debug(), l.b.escape_debug());
        let e = |m: String| cx.err("link", i, &obj, m);
        let a = router("link", i, &obj, &l.a)?;
        let b = router("link", i, &obj, &l.b)?;
        if a == b {
            return Err(e("a link joins two different routers".into()));
        }
        let p: Prefix = l
            .prefix
            .parse()
            .map_err(|x: crate::addr::BadPrefix| e(x.to_string()))?;
        let (da, db) = match p.len() {
            30 => (p.nth(1), p.nth(2)),
            31 => (p.nth(0), p.nth(1)),
            n => {
                return Err(e(format!(
                    "prefix {p}: a point-to-point link is a /30 or /31, not /{n}"
                )))
            }
        };
        let pick = |s: &Option<String>, d: Option<Ipv4Addr>| -> Result<Ipv4Addr, TopologyError> {
            let x = match s {
                Some(s) => addr(s).map_err(e)?,
                None => d.unwrap_or(Ipv4Addr::UNSPECIFIED),
            };
            let usable = p.len() == 31 || (x != p.network() && Some(x) != p.nth(3));
            if !p.contains(x) || !usable {
                return Err(e(format!("address {x} is not a usable address of {p}")));
            }
            Ok(x)
        };
        let (xa, xb) = (pick(&l.a_address, da)?, pick(&l.b_address, db)?);
        if xa == xb {
            return Err(e(format!("both ends have address {xa}")));
        }
        let d_ab = us(l.delay_ms).ok_or_else(|| e("delay-ms must be 0..60000".into()))?;
        let d_ba = us(l.delay_back_ms.unwrap_or(l.delay_ms))
            .ok_or_else(|| e("delay-back-ms must be 0..60000".into()))?;
        let (c_ab, c_ba) = (l.cost, l.cost_back.unwrap_or(l.cost));
        if c_ab == 0 || c_ba == 0 || c_ab > 1_000_000 || c_ba > 1_000_000 {
            return Err(e("costs must be 1..1000000".into()));
        }
        let (ia, ib) = (ifaces.len() as IfaceId, ifaces.len() as IfaceId + 1);
        let pid = prefixes.len() as u32;
        for (r, x, peer_r, peer_i, d, c) in [(a, xa, b, ib, d_ab, c_ab), (b, xb, a, ia, d_ba, c_ba)]
        {
            routers[r as usize].ifaces.push(ifaces.len() as IfaceId);
            routers[r as usize].links.push(ifaces.len() as IfaceId);
            ifaces.push(Iface {
                router: r,
                addr: x,
                prefix: pid,
                peer: Peer::Router {
                    router: peer_r,
                    iface: peer_i,
                    link: i as u32,
                },
                delay_us: d,
                cost: c,
            });
        }
        let info = PrefixInfo {
            prefix: p,
            kind: PrefixKind::Link { ifaces: [ia, ib] },
            attached: vec![a, b],
        };
        prefixes.push((info, "link", i, obj));
    }

    // A LAN on one router: vantage points and hosts.
    let lan = |kind: &'static str, i: usize, obj: &str, address: &str, gateway: &str| {
        let e = |m: String| cx.err(kind, i, obj, m);
        let al: AddrLen = address
            .parse()
            .map_err(|x: crate::addr::BadPrefix| e(x.to_string()))?;
        let gw = addr(gateway).map_err(e)?;
        let p = al.prefix();
        if p.len() > 30 {
            return Err(e(format!("prefix {p}: a LAN needs at least a /30")));
        }
        for (what, x) in [("address", al.addr), ("gateway", gw)] {
            if !p.contains(x) || x == p.network() || u32::from(x) == p.last() {
                return Err(e(format!("{what} {x} is not a usable address of {p}")));
            }
        }
        if gw == al.addr {
            return Err(e(format!("address and gateway are both {gw}")));
        }
        Ok((al.addr, gw, p))
    };

    let mut vps = Vec::new();
    for (i, v) in def.vantage_points.iter().enumerate() {
        let obj = format!("{:?}", v.name);
        let e = |m: String| cx.err("vantage-point", i, &obj, m);
        if let Some(why) = bad_name(&v.name) {
            return Err(e(why));
        }
        if let Some(kind) = names.insert(&v.name, "vantage point") {
            return Err(e(format!("name already used by a {kind}")));
        }
        let r = router("vantage-point", i, &obj, &v.router)?;
        let (a, gw, p) = lan("vantage-point", i, &obj, &v.address, &v.gateway)?;
        let delay_us = us(v.delay_ms).ok_or_else(|| e("delay-ms must be 0..60000".into()))?;
        let gw_iface = lan_gateway(
            &mut ifaces,
            &mut routers,
            r,
            gw,
            Peer::Vp(i as u32),
            delay_us,
        );
        let info = PrefixInfo {
            prefix: p,
            kind: PrefixKind::VpLan {
                vp: i as u32,
                iface: gw_iface,
                gateway: gw,
            },
            attached: vec![r],
        };
        prefixes.push((info, "vantage-point", i, obj.clone()));
        let vm_lan = match vm_lan.filter(|_| i == 0) {
            Some(lan) => {
                let gw = lan
                    .nth(1)
                    .filter(|_| lan.len() <= 30)
                    .ok_or_else(|| e(format!("VM LAN {lan}: a LAN needs at least a /30")))?;
                let info = PrefixInfo {
                    prefix: lan,
                    kind: PrefixKind::VpLan {
                        vp: 0,
                        iface: gw_iface,
                        gateway: gw,
                    },
                    attached: vec![r],
                };
                prefixes.push((info, "vantage-point", i, format!("{obj} (VM LAN)")));
                Some((lan, gw))
            }
            None => None,
        };
        vps.push(Vp {
            name: v.name.clone(),
            addr: a,
            prefix: p,
            router: r,
            gw_iface,
            delay_us,
            vm_lan,
        });
    }

    let mut hosts = Vec::new();
    for (i, h) in def.hosts.iter().enumerate() {
        let obj = format!("{:?}", h.name);
        let e = |m: String| cx.err("host", i, &obj, m);
        if let Some(why) = bad_name(&h.name) {
            return Err(e(why));
        }
        if let Some(kind) = names.insert(&h.name, "host") {
            return Err(e(format!("name already used by a {kind}")));
        }
        let r = router("host", i, &obj, &h.router)?;
        let (a, gw, p) = lan("host", i, &obj, &h.address, &h.gateway)?;
        let delay_us = us(h.delay_ms).ok_or_else(|| e("delay-ms must be 0..60000".into()))?;
        if h.ttl == 0 {
            return Err(e("ttl must be 1..255".into()));
        }
        let gw_iface = lan_gateway(
            &mut ifaces,
            &mut routers,
            r,
            gw,
            Peer::Host(i as u32),
            delay_us,
        );
        let info = PrefixInfo {
            prefix: p,
            kind: PrefixKind::HostLan {
                host: i as u32,
                iface: gw_iface,
            },
            attached: vec![r],
        };
        prefixes.push((info, "host", i, obj));
        hosts.push(Host {
            name: h.name.clone(),
            addr: a,
            router: r,
            gw_iface,
            delay_us,
            ttl: h.ttl,
            tcp_open: h.tcp_open.clone(),
            silent: h.silent,
        });
    }

    // Prefixes: lab ranges only (the VM LAN may lie anywhere), no overlap; then index
    // them in address order.
    for (info, kind, i, obj) in &prefixes {
        if !in_lab_ranges(info.prefix) && vm_lan != Some(info.prefix) {
            return Err(cx.err(kind, *i, obj, format!(
                "{} is outside the lab ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 100.64.0.0/10)",
                info.prefix
            )));
        }
    }
    let mut order: Vec<usize> = (0..prefixes.len()).collect();
    order.sort_by_key(|&k| (prefixes[k].0.prefix.first(), prefixes[k].0.prefix.last()));
    for w in order.windows(2) {
        let (x, y) = (&prefixes[w[0]], &prefixes[w[1]]);
        if x.0.prefix.overlaps(y.0.prefix) {
            return Err(cx.err(
                y.1,
                y.2,
                &y.3,
                format!(
                    "{} overlaps {} of [[{}]] {}",
                    y.0.prefix, x.0.prefix, x.1, x.3
                ),
            ));
        }
    }
    let mut new_index = vec![0u32; prefixes.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new as u32;
    }
    for (k, (info, ..)) in prefixes.iter().enumerate() {
        let ids: Vec<IfaceId> = match info.kind {
            PrefixKind::Link { ifaces } => ifaces.to_vec(),
            PrefixKind::Loopback { iface }
            | PrefixKind::HostLan { iface, .. }
            | PrefixKind::VpLan { iface, .. } => vec![iface],
        };
        for id in ids {
            ifaces[id as usize].prefix = new_index[k];
        }
    }
    let mut sorted: Vec<Option<PrefixInfo>> = prefixes.into_iter().map(|p| Some(p.0)).collect();
    let prefixes: Vec<PrefixInfo> = order.iter().filter_map(|&k| sorted[k].take()).collect();

    let dist = Dist::compute(&routers, &ifaces).map_err(too_large)?;
    let mut lsps = Vec::new();
    let mut next_label: Vec<u32> = routers.iter().map(|r| r.vendor.label_base()).collect();
    let mut lsp_names: HashMap<&str, usize> = HashMap::new();
    let mut first = Vec::with_capacity(def.lsps.len());
    for (i, l) in def.lsps.iter().enumerate() {
        if let Some(why) = bad_name(&l.name) {
            return Err(cx.err("lsp", i, &format!("{:?}", l.name), why));
        }
        if lsp_names.insert(l.name.as_str(), i).is_some() {
            return Err(cx.err(
                "lsp",
                i,
                &format!("{:?}", l.name),
                "name already used by another LSP".into(),
            ));
        }
        // an `ecmp` LSP: one Lsp per equal-cost path
        first.push(lsps.len());
        for branch in 0..if l.ecmp { MAX_ECMP_PATHS } else { 1 } {
            let Some(x) = lsp(
                &cx,
                i,
                l,
                branch,
                &by_name,
                &routers,
                &ifaces,
                &dist,
                &mut next_label,
            )?
            else {
                break;
            };
            lsps.push(x);
        }
        limits::check(
            "LSPs (each equal-cost path of an ecmp one counted)",
            lsps.len(),
            MAX_LSPS,
        )
        .map_err(too_large)?;
    }
    // each 6PE egress's label for IPv6, after every label above (RFC 4798: the egress
    // advertises it in labelled IPv6 unicast; one per router here, as a per-VRF label)
    let mut label6: HashMap<RouterId, u32> = HashMap::new();
    for x in lsps
        .iter_mut()
        .filter(|x| x.pe6.is_some() && x.vpn.is_none())
    {
        let e = x.path[x.path.len() - 1];
        let next = &mut next_label[e as usize];
        let label = *label6.entry(e).or_insert_with(|| {
            *next += 1;
            (*next - 1) & 0xf_ffff
        });
        x.pe6 = Some(label);
    }
    for (i, l) in def.lsps.iter().enumerate() {
        if let Some(name) = &l.over {
            let o = over(&def.lsps, &lsp_names, &lsps, &first, i, name)
                .map_err(|m| cx.err("lsp", i, &format!("{:?}", l.name), m))?;
            lsps[first[i]].over = Some(o);
        }
    }
    let mut statics: Vec<Static> = Vec::new();
    let mut routed = std::collections::HashSet::new();
    for (i, s) in def.routes.iter().enumerate() {
        let obj = format!("{} {}", s.router.escape_debug(), s.prefix.escape_debug());
        let e = |m: String| cx.err("route", i, &obj, m);
        let r = router("route", i, &obj, &s.router)?;
        let via = router("route", i, &obj, &s.via)?;
        let p: Prefix = s
            .prefix
            .parse()
            .map_err(|x: crate::addr::BadPrefix| e(x.to_string()))?;
        let prefix = prefixes
            .binary_search_by_key(&(p.first(), p.last()), |x| {
                (x.prefix.first(), x.prefix.last())
            })
            .map_err(|_| {
                e(format!(
                    "{p} is not a prefix of the topology (a link, a LAN or a loopback)"
                ))
            })? as u32;
        if prefixes[prefix as usize].attached.contains(&r) {
            return Err(e(format!("{p} is connected to \"{}\"", s.router)));
        }
        let out = link_between(&routers, &ifaces, r, via)
            .ok_or_else(|| e(format!("no link from \"{}\" to \"{}\"", s.router, s.via)))?;
        if !routed.insert((r, prefix)) {
            return Err(e(format!("a second route for {p} on \"{}\"", s.router)));
        }
        statics.push(Static {
            router: r,
            prefix,
            out,
        });
    }
    let tables = Tables::new(dist, routers.len(), &lsps, statics);
    Ok(Net {
        routers,
        ifaces,
        prefixes,
        hosts,
        vps,
        lsps,
        tables,
    })
}

/// The cheapest link interface of `a` towards its neighbour `b`.
fn link_between(routers: &[Router], ifaces: &[Iface], a: RouterId, b: RouterId) -> Option<IfaceId> {
    routers[a as usize]
        .links
        .iter()
        .copied()
        .filter(|&o| matches!(ifaces[o as usize].peer, Peer::Router { router, .. } if router == b))
        .min_by_key(|&o| ifaces[o as usize].cost)
}

/// The class an LSP's settings make, or why the combination is not supported.
pub(crate) fn class_of(l: &LspDef) -> Result<TunnelClass, String> {
    if l.non_null_uhp && l.pop != Pop::Uhp {
        return Err("non-null-uhp needs pop = \"uhp\"".into());
    }
    if l.egress_forwards_ttl1 && (l.pop != Pop::Uhp || l.ttl_propagate) {
        return Err("egress-forwards-ttl1 needs pop = \"uhp\" and ttl-propagate = false".into());
    }
    Ok(
        match (l.ttl_propagate, l.pop, l.rfc4950, l.egress_forwards_ttl1) {
            (true, _, true, _) => TunnelClass::Explicit,
            (true, _, false, _) => TunnelClass::Implicit,
            // the egress receives the service label and quotes it, LSE-TTL 255 - LSRs,
            // when the probe expires there: what an opaque tunnel shows
            (false, Pop::Php, true, _) if l.vpn_label => TunnelClass::Opaque,
            (false, Pop::Php, _, _) => TunnelClass::InvisiblePhp,
            (false, Pop::Uhp, _, true) => TunnelClass::InvisibleUhp,
            (false, Pop::Uhp, true, false) => TunnelClass::Opaque,
            (false, Pop::Uhp, false, false) => {
                return Err(
                    "no-propagate UHP without RFC 4950 and with a decrementing egress is not \
                        a TNT class: set rfc4950 = true (opaque), egress-forwards-ttl1 = true \
                        (invisible UHP) or pop = \"php\" (invisible PHP)"
                        .into(),
                )
            }
        },
    )
}

/// The LSP `l` resolved, along its equal-cost path number `branch` when it is `ecmp`
/// (0 otherwise); `None` when it has no such path.
#[allow(clippy::too_many_arguments)]
fn lsp(
    cx: &Ctx<'_>,
    i: usize,
    l: &LspDef,
    branch: usize,
    by_name: &HashMap<&str, RouterId>,
    routers: &[Router],
    ifaces: &[Iface],
    dist: &Dist,
    next_label: &mut [u32],
) -> Result<Option<Lsp>, TopologyError> {
    let obj = format!("{:?}", l.name);
    let e = |m: String| cx.err("lsp", i, &obj, m);
    let find = |n: &str| {
        by_name
            .get(n)
            .copied()
            .ok_or_else(|| e(format!("router {n:?} is not defined")))
    };
    let (ing, egr) = (find(&l.ingress)?, find(&l.egress)?);
    if ing == egr {
        return Err(e("ingress and egress are the same router".into()));
    }
    let class = class_of(l).map_err(e)?;
    let (path, out) = match &l.path {
        None => {
            if dist.get(ing, egr) == INF {
                return Err(e(format!(
                    "egress \"{}\" is unreachable from ingress \"{}\"",
                    l.egress, l.ingress
                )));
            }
            let paths = dist.paths(routers, ifaces, ing, egr, branch + 1);
            match paths.into_iter().nth(branch) {
                Some(p) => p,
                None if branch == 0 => return Err(e("no path from ingress to egress".into())),
                None => return Ok(None),
            }
        }
        Some(_) if l.ecmp => {
            return Err(e(
                "ecmp follows the IGP's equal-cost paths: it cannot have a path".into(),
            ))
        }
        Some(names) => {
            let path: Vec<RouterId> = names.iter().map(|n| find(n)).collect::<Result<_, _>>()?;
            if path.first() != Some(&ing) || path.last() != Some(&egr) {
                return Err(e(
                    "path must start at the ingress and end at the egress".into()
                ));
            }
            let mut out = Vec::new();
            for w in path.windows(2) {
                let o = link_between(routers, ifaces, w[0], w[1]).ok_or_else(|| {
                    e(format!(
                        "no link from \"{}\" to \"{}\"",
                        routers[w[0] as usize].name, routers[w[1] as usize].name
                    ))
                })?;
                out.push(o);
            }
            (path, out)
        }
    };
    let mut seen = path.clone();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(e("path visits a router twice".into()));
    }
    if path.len() < 3 {
        return Err(e("an LSP needs at least one LSR between its LERs".into()));
    }
    if path.len() > 200 {
        return Err(e("an LSP of more than 200 routers".into()));
    }
    let n = path.len();
    // each LSR (and the egress) allocates one label per cut of the LSP at it or past it
    // (explicit null excepted), in turn
    let explicit_null = l.pop == Pop::Uhp && !l.non_null_uhp;
    let mut label_base = vec![0u32; n];
    for k in 1..n {
        let r = path[k] as usize;
        label_base[k] = next_label[r];
        next_label[r] = next_label[r].wrapping_add((n - k) as u32 - u32::from(explicit_null));
    }
    let vpn = l.vpn_label.then(|| {
        let e = path[n - 1] as usize;
        next_label[e] += 1;
        (next_label[e] - 1) & 0xf_ffff
    });
    // a 6PE core: its egress's 6PE label (one per egress router, set once every LSP has
    // its labels, so the others' stay what they were)
    let six_pe = path.iter().any(|&r| routers[r as usize].ipv4_only);
    let class6 = if six_pe {
        class_of(&LspDef {
            vpn_label: true,
            ..l.clone()
        })
        .map_err(e)?
    } else {
        class
    };
    Ok(Some(Lsp {
        name: l.name.clone(),
        branch: branch as u8,
        path,
        out,
        propagate: l.ttl_propagate,
        pop: l.pop,
        rfc4950: l.rfc4950,
        internal_labelled: l.internal_labelled,
        egress_lans_labelled: l.egress_lans_labelled,
        icmp_tunnelling: l.icmp_tunnelling,
        egress_forwards_ttl1: l.egress_forwards_ttl1,
        class,
        label_base,
        explicit_null,
        vpn,
        // (the VPN label stands for it; else set below, once every LSP has its labels)
        pe6: six_pe.then_some(vpn.unwrap_or(0)),
        class6,
        over: None,
    }))
}

/// Where LSP `i` rides the LSP named `name` (`over`): that LSP's routers must be
/// consecutive LSRs of `i`'s path, and the two must agree on how TTLs and labels show.
/// `first[k]`: the index in `lsps` of definition `k`'s (first) path; `names`: each
/// definition's index by name.
fn over(
    defs: &[LspDef],
    names: &HashMap<&str, usize>,
    lsps: &[Lsp],
    first: &[usize],
    i: usize,
    name: &str,
) -> Result<Over, String> {
    let j = *names
        .get(name)
        .ok_or_else(|| format!("over: no LSP is named \"{name}\""))?;
    if j == i {
        return Err("over: an LSP cannot ride itself".into());
    }
    if defs[j].over.is_some() {
        return Err(format!(
            "over: \"{name}\" rides another LSP itself (one level of stacking is modelled)"
        ));
    }
    if defs[i].ecmp || defs[j].ecmp {
        return Err(format!(
            "over: \"{name}\" or this LSP is ecmp; riding is modelled along one path only"
        ));
    }
    let (inner, outer) = (&lsps[first[i]], &lsps[first[j]]);
    let at = inner
        .path
        .windows(outer.path.len())
        .position(|w| w == outer.path.as_slice())
        .ok_or_else(|| {
            format!(
                "over: the routers of \"{name}\" are not consecutive routers of this LSP's path"
            )
        })?;
    if at == 0 || at + outer.egress_index() >= inner.egress_index() {
        return Err(format!(
            "over: \"{name}\" must start and end at LSRs of this LSP, strictly between its \
             ingress and egress"
        ));
    }
    if outer.propagate != inner.propagate || outer.rfc4950 != inner.rfc4950 {
        return Err(format!(
            "over: \"{name}\" must have this LSP's ttl-propagate and rfc4950 (a stack whose \
             labels disagree on them is not modelled)"
        ));
    }
    if outer.egress_forwards_ttl1 {
        return Err(format!(
            "over: \"{name}\" has egress-forwards-ttl1, which is not modelled under a stack"
        ));
    }
    Ok(Over {
        lsp: first[j] as u16,
        at: at as u8,
    })
}
