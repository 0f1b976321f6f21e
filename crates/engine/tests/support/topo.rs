//! The topologies the engine's tests run on, as `vtnt-lab` definitions the tests adjust
//! before building the lab (silent routers, delays, LSPs, static routes, open ports).

use std::net::{IpAddr, Ipv4Addr};

use vtnt_lab::{
    HostDef, LinkDef, LspDef, Pop, RouterDef, TopologyDef, Truth, VantagePointDef, Vendor,
};

/// The vantage point's address: the engines' source.
pub const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The host at the end of [`chain`].
pub const DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);

/// The vantage point behind router `r1`, then routers `r1`..`rn` (Cisco: time exceeded
/// and echo replies start at TTL 255) on links 198.51.100.0/30, .4/30, ... and host
/// `dst` at [`DST`] on `rn`, no TCP port open. Every one-way delay is 1 ms: the vantage
/// point's LAN, each link, the host's LAN, so hop `i` answers in `2 i` ms.
pub fn chain(n: u8) -> TopologyDef {
    assert!((1..=64).contains(&n), "198.51.100.0/24 holds 64 links");
    let name = |i: u8| format!("r{i}");
    TopologyDef {
        name: format!("chain-{n}"),
        description: String::new(),
        vantage_points: vec![VantagePointDef {
            name: "vp".into(),
            address: format!("{SRC}/24"),
            gateway: "192.0.2.254".into(),
            router: name(1),
            delay_ms: 1.0,
        }],
        routers: (1..=n)
            .map(|i| RouterDef {
                name: name(i),
                vendor: Vendor::Cisco,
                loopback: None,
                silent: false,
                icmp_rate: 0,
                signature: None,
                reply_from: Default::default(),
                ipv4_only: false,
            })
            .collect(),
        links: (1..n)
            .map(|i| LinkDef {
                a: name(i),
                b: name(i + 1),
                prefix: format!("198.51.100.{}/30", 4 * (u32::from(i) - 1)),
                a_address: None,
                b_address: None,
                delay_ms: 1.0,
                delay_back_ms: None,
                cost: 10,
                cost_back: None,
            })
            .collect(),
        hosts: vec![host("dst", DST, "203.0.113.1/24", &name(n))],
        lsps: Vec::new(),
        routes: Vec::new(),
    }
}

/// An explicit LSP (the file's defaults: TTL propagated, PHP, RFC 4950) from `ingress` to
/// `egress` along the IGP path; tests change what makes their class.
pub fn lsp(ingress: &str, egress: &str) -> LspDef {
    LspDef {
        name: format!("{ingress}-{egress}"),
        ingress: ingress.into(),
        egress: egress.into(),
        path: None,
        ecmp: false,
        ttl_propagate: true,
        pop: Pop::Php,
        rfc4950: true,
        internal_labelled: false,
        icmp_tunnelling: false,
        egress_forwards_ttl1: false,
        non_null_uhp: false,
        egress_lans_labelled: true,
        vpn_label: false,
        over: None,
    }
}

/// A host at `addr` on a LAN of `router`; `gateway` is the router's address and the
/// LAN's length, `"a.b.c.d/len"`.
fn host(name: &str, addr: Ipv4Addr, gateway: &str, router: &str) -> HostDef {
    let (gw, len) = gateway.split_once('/').expect("gateway/len");
    HostDef {
        name: name.into(),
        address: format!("{addr}/{len}"),
        gateway: gw.into(),
        router: router.into(),
        delay_ms: 1.0,
        ttl: 64,
        tcp_open: Vec::new(),
        silent: false,
    }
}

/// Adds `n` hosts like [`chain`]'s to its last router, each on a /30 of its own in
/// 100.64.0.0/10; returns their addresses.
pub fn more_hosts(def: &mut TopologyDef, n: u32) -> Vec<Ipv4Addr> {
    let router = def.routers.last().expect("a router").name.clone();
    (0..n)
        .map(|i| {
            let lan = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + 4 * i;
            let addr = Ipv4Addr::from(lan + 2);
            let gateway = format!("{}/30", Ipv4Addr::from(lan + 1));
            def.hosts
                .push(host(&format!("h{i}"), addr, &gateway, &router));
            addr
        })
        .collect()
}

/// The addresses a traceroute to `dst` meets, TTL 1 first, from the truth.
pub fn path(truth: &Truth, dst: Ipv4Addr) -> Vec<IpAddr> {
    let d = truth.destination(dst).expect("a host of the topology");
    d.forward.iter().map(|h| IpAddr::V4(h.addr)).collect()
}
