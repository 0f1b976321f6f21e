//! What the host's routes say about the lab's ranges: which lab prefixes really lead into a
//! lab here ([`lab_access`]), and this host's own addresses ([`own_addresses`]), for the
//! probing policy. Fails closed: a lab-range address is reachable only through a route other
//! than the default route, out of an interface that carries no default route (a real uplink
//! may use RFC 5737 or carrier-grade NAT space; the lab never sits behind one), or when it
//! is one of this host's own addresses. Also the prefixes of this host's links
//! ([`own_links`]: their network and broadcast addresses are not targets), the source
//! address the kernel gives each destination ([`RouteSources`]), and the MTU of the
//! interface towards a destination ([`interface_mtu`]), where path MTU discovery starts.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vtnt_engine::policy::{LabRoutes, Prefix, LAB_NETS};
use vtnt_engine::{LabAccess, NoSource, SourceLookup};

/// One IPv4 route of the main table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    iface: String,
    prefix: Prefix,
}

/// Parses `/proc/net/route` (hex, little-endian addresses); malformed lines are skipped.
fn parse_routes(text: &str) -> Vec<Route> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::from_be);
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (iface, dst, mask) = (f.first()?, hex(f.get(1)?)?, hex(f.get(7)?)?);
            let len = mask.count_ones() as u8;
            // only contiguous masks are prefixes
            (mask.leading_ones() == mask.count_ones()).then_some(())?;
            Some(Route {
                iface: iface.to_string(),
                prefix: Prefix::new(Ipv4Addr::from(dst), len)?,
            })
        })
        .collect()
}

/// What `routes` and the `own` addresses say about where lab addresses lead. Only routes
/// that touch a lab range matter; each leads into a lab unless it is a default route or
/// leaves through an interface that carries one.
fn lab_routes(routes: &[Route], own: &[Ipv4Addr]) -> LabRoutes {
    let uplinks: Vec<&str> = routes
        .iter()
        .filter(|r| r.prefix.bits() == 0)
        .map(|r| r.iface.as_str())
        .collect();
    let mut table = LabRoutes::new();
    for r in routes {
        if LAB_NETS.iter().any(|n| n.intersection(&r.prefix).is_some()) {
            let uplink = r.prefix.bits() == 0 || uplinks.contains(&r.iface.as_str());
            table.add(r.prefix, !uplink);
        }
    }
    for a in own {
        if let Some(p) = Prefix::new(*a, 32) {
            table.add(p, true);
        }
    }
    table
}

/// This host's IPv4 addresses (every interface, up or not).
pub fn own_addresses() -> std::io::Result<Vec<Ipv4Addr>> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)?;
    Ok(addrs
        .filter_map(|i| i.address?.as_sockaddr_in().map(|s| s.ip()))
        .collect())
}

/// The prefixes of this host's links: every interface address with its netmask (every
/// interface, up or not), for [`vtnt_engine::Policy::links`].
pub fn own_links() -> std::io::Result<Vec<Prefix>> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)?;
    Ok(addrs
        .filter_map(|i| {
            let a = u32::from(i.address?.as_sockaddr_in()?.ip());
            let mask = u32::from(i.netmask?.as_sockaddr_in()?.ip());
            (mask.leading_ones() == mask.count_ones()).then_some(())?;
            Prefix::new(Ipv4Addr::from(a & mask), mask.count_ones() as u8)
        })
        .collect())
}

/// The source address the kernel gives each destination: the route's own, as for a
/// socket connected there. Each destination is asked once (a UDP socket connected to it,
/// so no packet leaves) and remembered. Either family.
#[derive(Debug, Default)]
pub struct RouteSources {
    known: HashMap<IpAddr, Result<IpAddr, NoSource>>,
}

impl RouteSources {
    pub fn new() -> RouteSources {
        RouteSources::default()
    }

    /// The source of probes to `dst` (of the same family), or why there is none (no
    /// route; a broadcast route, which a socket may not connect to).
    pub fn source(&mut self, dst: IpAddr) -> Result<IpAddr, NoSource> {
        *self
            .known
            .entry(dst)
            .or_insert_with(|| route_source_ip(dst))
    }

    /// The lookup an engine takes ([`vtnt_engine::Engine::set_source_lookup`]).
    pub fn into_lookup(mut self) -> SourceLookup {
        Box::new(move |dst| self.source(dst))
    }
}

/// The local IPv4 address this namespace's routes pick to reach `dst`
/// ([`route_source_ip`]).
pub fn route_source(dst: Ipv4Addr) -> Result<Ipv4Addr, NoSource> {
    match route_source_ip(IpAddr::V4(dst))? {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(_) => Err(NoSource("the kernel's route lookup failed")),
    }
}

/// The local address this namespace's routes pick to reach `dst`, asked of the kernel
/// (a UDP socket connected to it; nothing is sent), or why there is none. One lookup each
/// call (a fresh socket: a connected socket keeps its first source address for the next
/// connect); [`RouteSources`] remembers them.
pub fn route_source_ip(dst: IpAddr) -> Result<IpAddr, NoSource> {
    let failed = NoSource("the kernel's route lookup failed");
    let any = match dst {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let sock = std::net::UdpSocket::bind((any, 0)).map_err(|_| failed)?;
    if let Err(e) = sock.connect((dst, 33434)) {
        return Err(match e.raw_os_error() {
            Some(nix::libc::EACCES) => NoSource("the kernel routes it as a broadcast address"),
            Some(nix::libc::ENETUNREACH | nix::libc::EHOSTUNREACH) => NoSource("no route to it"),
            Some(nix::libc::EINVAL) => NoSource("the kernel takes it for no destination"),
            _ => failed,
        });
    }
    match sock.local_addr().map(|a| a.ip()) {
        Ok(a) if !a.is_unspecified() && a.is_ipv4() == dst.is_ipv4() => Ok(a),
        _ => Err(failed),
    }
}

/// Which lab addresses lead into a lab from this network namespace, from
/// `/proc/net/route` and `own`, the host's addresses ([`own_addresses`]), and for IPv6
/// from `/proc/net/ipv6_route` and the host's IPv6 addresses ([`crate::route6`]).
pub fn lab_access(own: &[Ipv4Addr]) -> std::io::Result<LabAccess> {
    let routes = parse_routes(&std::fs::read_to_string("/proc/net/route")?);
    let mut table = lab_routes(&routes, own);
    crate::route6::lab_routes6(&mut table)?;
    Ok(LabAccess::Routed(table))
}

/// The MTU of the interface the route to `dst` leaves through, where path MTU
/// discovery (`-M`) starts, as scamper's starts from the interface it sends on. (Not
/// the route's `IP_MTU`: that drops to a path MTU the kernel learnt from an earlier
/// "fragmentation needed" or packet too big.) The interface is the one holding the
/// source address a UDP socket connected to `dst` gets (no packet leaves), of either
/// family; its MTU is read from sysfs, which must be this network namespace's (its
/// interface index is checked).
pub fn interface_mtu(dst: std::net::IpAddr) -> std::io::Result<u16> {
    use nix::sys::socket::{self, SockFlag, SockType, SockaddrLike, SockaddrStorage};
    use std::os::fd::AsRawFd;
    let to = SockaddrStorage::from(std::net::SocketAddr::new(dst, 33435));
    let family = to
        .family()
        .ok_or_else(|| std::io::Error::other("no family"))?;
    let fd = socket::socket(family, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)?;
    socket::connect(fd.as_raw_fd(), &to)?;
    let ip = |a: &SockaddrStorage| -> Option<std::net::IpAddr> {
        a.as_sockaddr_in()
            .map(|s| s.ip().into())
            .or_else(|| a.as_sockaddr_in6().map(|s| s.ip().into()))
    };
    let src = ip(&socket::getsockname::<SockaddrStorage>(fd.as_raw_fd())?)
        .ok_or_else(|| std::io::Error::other("the socket has no address"))?;
    let name = nix::ifaddrs::getifaddrs()?
        .find(|i| i.address.as_ref().and_then(ip) == Some(src))
        .map(|i| i.interface_name)
        .ok_or_else(|| std::io::Error::other(format!("no interface holds {src}")))?;
    let sys = |what: &str| -> std::io::Result<u32> {
        let path = format!("/sys/class/net/{name}/{what}");
        let text = std::fs::read_to_string(&path)?;
        text.trim()
            .parse()
            .map_err(|_| std::io::Error::other(format!("{path}: not a number")))
    };
    if sys("ifindex")? != nix::net::if_::if_nametoindex(name.as_str())? {
        return Err(std::io::Error::other(format!(
            "/sys/class/net/{name} is another network namespace's"
        )));
    }
    let mtu = sys("mtu")?;
    u16::try_from(mtu).map_err(|_| std::io::Error::other(format!("{name}: MTU {mtu} out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n";

    fn table(lines: &[(&str, &str, &str)]) -> Vec<Route> {
        let mut t = HEADER.to_string();
        for (iface, dst, mask) in lines {
            let h = |s: &str| {
                format!(
                    "{:08X}",
                    u32::from(s.parse::<Ipv4Addr>().unwrap()).swap_bytes()
                )
            };
            t += &format!(
                "{iface}\t{}\t00000000\t0001\t0\t0\t0\t{}\t0\t0\t0\n",
                h(dst),
                h(mask)
            );
        }
        parse_routes(&t)
    }

    fn reachable(t: &LabRoutes, a: &str) -> bool {
        t.reaches(a.parse().unwrap())
    }

    #[test]
    fn the_kernel_names_loopbacks_source_and_refuses_broadcast() {
        let mut s = RouteSources::new();
        assert_eq!(
            s.source(Ipv4Addr::new(127, 0, 0, 9).into()),
            Ok(Ipv4Addr::LOCALHOST.into())
        );
        assert_eq!(
            s.source(Ipv6Addr::LOCALHOST.into()),
            Ok(Ipv6Addr::LOCALHOST.into())
        );
        assert_eq!(
            s.source(Ipv4Addr::BROADCAST.into()),
            Err(NoSource("the kernel routes it as a broadcast address"))
        );
        let links = own_links().unwrap();
        assert!(links.contains(&"127.0.0.0/8".parse().unwrap()), "{links:?}");
    }

    #[test]
    fn parses_the_kernels_table() {
        let r = parse_routes(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
             eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
             garbage\n",
        );
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].prefix.to_string(), "192.0.2.0/24");
        assert_eq!(r[0].prefix.bits(), 0);
    }

    #[test]
    fn a_host_whose_uplink_uses_a_lab_range_reaches_no_lab() {
        // this very machine: eth0 is 192.0.2.0/24 and carries the default route
        let r = table(&[
            ("eth0", "0.0.0.0", "0.0.0.0"),
            ("eth0", "192.0.2.0", "255.255.255.0"),
        ]);
        let set = lab_routes(&r, &["192.0.2.5".parse().unwrap()]);
        assert!(!reachable(&set, "192.0.2.1"));
        assert!(!reachable(&set, "203.0.113.9"));
        assert!(!reachable(&set, "100.64.0.1"));
        assert!(reachable(&set, "192.0.2.5"), "own address");
    }

    #[test]
    fn carrier_grade_nat_behind_the_default_route_is_not_a_lab() {
        let r = table(&[
            ("wan", "0.0.0.0", "0.0.0.0"),
            ("wan", "100.64.0.0", "255.192.0.0"),
        ]);
        assert!(!reachable(&lab_routes(&r, &[]), "100.100.0.1"));
    }

    #[test]
    fn the_labs_namespace_reaches_its_routed_ranges_only() {
        let r = table(&[
            ("vtnt0", "192.0.2.0", "255.255.255.0"),
            ("vtnt0", "203.0.113.0", "255.255.255.0"),
            ("vtnt0", "100.64.0.0", "255.192.0.0"),
        ]);
        let set = lab_routes(&r, &[]);
        assert!(reachable(&set, "203.0.113.50"));
        assert!(reachable(&set, "100.127.255.1"));
        assert!(!reachable(&set, "198.51.100.1"), "no route there");
    }

    #[test]
    fn a_more_specific_route_out_of_an_uplink_wins_over_a_lab_route() {
        let r = table(&[
            ("uplink", "0.0.0.0", "0.0.0.0"),
            ("lab", "100.64.0.0", "255.192.0.0"),
            ("uplink", "100.64.7.0", "255.255.255.0"),
        ]);
        let set = lab_routes(&r, &[]);
        assert!(reachable(&set, "100.64.8.1"));
        assert!(!reachable(&set, "100.64.7.1"));
    }
}
