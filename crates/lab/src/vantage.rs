//! Vantage points: where probes enter the lab and replies leave it, numbered as the
//! topology file lists them.

use crate::topology::Topology;

/// Which vantage point a packet comes from or goes to: the index of its
/// `[[vantage-point]]` in the topology file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Port(pub u16);

/// A vantage point as the fronts need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VantagePoint {
    pub port: Port,
    pub name: String,
    /// The vantage point's own address.
    pub addr: core::net::Ipv4Addr,
    /// Its LAN prefix: every address in it except the gateway reaches this port.
    pub prefix: crate::addr::Prefix,
    /// The router's address on the LAN.
    pub gateway: core::net::Ipv4Addr,
    /// Name of the router the LAN hangs off.
    pub router: String,
    /// The VM LAN routed here too ([`Topology::with_vm_lan`]) and the router's address on
    /// it (its host 1).
    pub vm_lan: Option<(crate::addr::Prefix, core::net::Ipv4Addr)>,
}

impl VantagePoint {
    /// The vantage point's IPv6 address ([`crate::addr::to_v6`] of its IPv4 one).
    pub fn addr6(&self) -> core::net::Ipv6Addr {
        crate::addr::to_v6(self.addr)
    }
}

/// The vantage points of a topology, port by port.
pub fn vantage_points(topo: &Topology) -> Vec<VantagePoint> {
    let n = &topo.net;
    n.vps
        .iter()
        .enumerate()
        .map(|(i, v)| VantagePoint {
            port: Port(i as u16),
            name: v.name.clone(),
            addr: v.addr,
            prefix: v.prefix,
            gateway: n.ifaces[v.gw_iface as usize].addr,
            router: n.routers[v.router as usize].name.clone(),
            vm_lan: v.vm_lan,
        })
        .collect()
}
