//! [`crate::route::lab_access`] for IPv6: which of the lab's IPv6 ranges
//! ([`LAB_NETS6`]: 2001:db8::/32, fc00::/7) lead into a lab from here, by the same rule
//! as IPv4's, read from `/proc/net/ipv6_route`. Fails closed: a route leads into a lab
//! unless it is a default route or leaves through an interface that carries one; the
//! kernel's local routes (its own addresses) and reject routes are left out, and this
//! host's own IPv6 addresses are reachable (as /128s).

use std::net::Ipv6Addr;

use vtnt_engine::policy::v6::{Prefix6, LAB_NETS6};
use vtnt_engine::policy::LabRoutes;

/// Route flags of `/proc/net/ipv6_route` that put a route out of consideration.
const RTF_REJECT: u32 = 0x0200;
const RTF_LOCAL: u32 = 0x8000_0000;

/// One IPv6 route.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route6 {
    iface: String,
    prefix: Prefix6,
}

/// Parses `/proc/net/ipv6_route` (destination, its length, source, its length, next hop,
/// metric, reference count, use, flags, interface; hex); malformed lines, local and
/// reject routes are skipped.
fn parse_routes6(text: &str) -> Vec<Route6> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let dst = u128::from_str_radix(f.first()?, 16).ok()?;
            let len = u8::from_str_radix(f.get(1)?, 16).ok()?;
            let flags = u32::from_str_radix(f.get(8)?, 16).ok()?;
            if flags & (RTF_REJECT | RTF_LOCAL) != 0 {
                return None;
            }
            Some(Route6 {
                iface: f.get(9)?.to_string(),
                prefix: Prefix6::new(Ipv6Addr::from(dst), len)?,
            })
        })
        .collect()
}

/// Adds to `table` what `routes` and the `own` addresses say about the lab's IPv6 ranges.
fn add_lab_routes6(table: &mut LabRoutes, routes: &[Route6], own: &[Ipv6Addr]) {
    let uplinks: Vec<&str> = routes
        .iter()
        .filter(|r| r.prefix.bits() == 0)
        .map(|r| r.iface.as_str())
        .collect();
    for r in routes {
        if LAB_NETS6.iter().any(|n| n.overlaps(&r.prefix)) {
            let uplink = r.prefix.bits() == 0 || uplinks.contains(&r.iface.as_str());
            table.add6(r.prefix, !uplink);
        }
    }
    for a in own {
        if let Some(p) = Prefix6::new(*a, 128) {
            table.add6(p, true);
        }
    }
}

/// This host's IPv6 addresses (every interface, up or not).
fn own_addresses6() -> std::io::Result<Vec<Ipv6Addr>> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)?;
    Ok(addrs
        .filter_map(|i| i.address?.as_sockaddr_in6().map(|s| s.ip()))
        .collect())
}

/// Adds this namespace's IPv6 lab routes to `table`. A host without IPv6
/// (`/proc/net/ipv6_route` absent) adds none.
pub(crate) fn lab_routes6(table: &mut LabRoutes) -> std::io::Result<()> {
    let text = match std::fs::read_to_string("/proc/net/ipv6_route") {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    add_lab_routes6(table, &parse_routes6(&text), &own_addresses6()?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host's table when it was written: a ULA /64 on eth0 with the default route
    /// there, link-local, loopback and its own address (local routes).
    const HOST: &str = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000004 00000000 80200001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
";

    fn table(text: &str, own: &[&str]) -> LabRoutes {
        let own: Vec<Ipv6Addr> = own.iter().map(|a| a.parse().unwrap()).collect();
        let mut t = LabRoutes::new();
        add_lab_routes6(&mut t, &parse_routes6(text), &own);
        t
    }

    fn reaches(t: &LabRoutes, a: &str) -> bool {
        t.reaches6(a.parse().unwrap())
    }

    #[test]
    fn parses_the_kernels_table_without_local_and_reject_routes() {
        let r = parse_routes6(HOST);
        let shown: Vec<String> = r
            .iter()
            .map(|r| format!("{} {}", r.prefix, r.iface))
            .collect();
        assert_eq!(shown, ["fd00::/64 eth0", "fe80::/64 eth0", "::/0 eth0"]);
        assert!(parse_routes6("garbage\n0 zz\n").is_empty());
    }

    #[test]
    fn a_ula_behind_the_uplink_is_no_lab_but_the_hosts_own_address_is() {
        let t = table(HOST, &["fd00::2"]);
        assert!(!reaches(&t, "fd00::1"), "the host's real network");
        assert!(
            !reaches(&t, "2001:db8::1"),
            "only a default route leads there"
        );
        assert!(reaches(&t, "fd00::2"));
    }

    #[test]
    fn a_namespaces_routed_lab_ranges_are_reachable() {
        let ns = "\
20010db8000100000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     a0
20010db8000000000000000000000000 20 00000000000000000000000000000000 00 20010db8000100000000000000000002 00000400 00000001 00000000 00000003     a0
";
        let t = table(ns, &[]);
        assert!(reaches(&t, "2001:db8:1::2"));
        assert!(reaches(&t, "2001:db8:2::2"));
        assert!(!reaches(&t, "fd00::1"));
    }
}
