//! A VM LAN routed to the first vantage point (`Topology::with_vm_lan`): guests on it see
//! exactly the vantage point's hops (the LAN's router first), the router answers for the
//! LAN's host 1 (the guests' on-link gateway), and a VM LAN must not overlap the topology.

use std::net::Ipv4Addr;

use vtnt_lab::tracer::{Answer, Tracer};
use vtnt_lab::{Lab, Topology};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn hops(lab: &mut Lab, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<Option<(Ipv4Addr, u8, u8)>> {
    let mut t = Tracer::new(lab);
    t.src = src;
    t.trace(dst, 30)
        .iter()
        .map(|h| {
            h.as_ref()
                .map(|a: &Answer| (a.from, a.reply_ttl, a.icmp_type))
        })
        .collect()
}

#[test]
fn guests_on_the_vm_lan_see_the_vantage_points_hops() {
    let lan = "10.253.0.0/16".parse().unwrap();
    let topo = Topology::reference().with_vm_lan(lan).unwrap();
    let vp = &vtnt_lab::vantage_points(&topo)[0];
    assert_eq!(vp.vm_lan, Some((lan, ip("10.253.0.1"))));
    let mut lab = Lab::new(topo);
    for dst in ["203.0.113.10", "192.0.2.1", "198.51.100.10"] {
        let native = hops(&mut lab, ip("192.0.2.2"), ip(dst));
        let guest = hops(&mut lab, ip("10.253.15.200"), ip(dst));
        assert_eq!(guest, native, "trace to {dst}");
        assert_eq!(native[0].unwrap().0, ip("192.0.2.1"), "the gateway first");
    }
    // The guests' gateway answers for itself; other VM LAN addresses are the port's.
    let mut t = Tracer::new(&mut lab);
    t.src = ip("10.253.0.10");
    let a = t
        .probe(ip("10.253.0.1"), 64)
        .expect("the VM LAN gateway answers");
    assert_eq!((a.from, a.icmp_type), (ip("10.253.0.1"), 0));
    // another guest: the request itself comes out of the vantage point's port
    let a = t
        .probe(ip("10.253.0.11"), 64)
        .expect("delivered to the port");
    assert_eq!((a.from, a.icmp_type), (ip("10.253.0.10"), 8));
}

#[test]
fn a_vm_lan_may_not_overlap_the_topology() {
    for bad in ["192.0.2.0/25", "100.64.0.0/16", "10.253.0.0/31"] {
        let e = Topology::reference()
            .with_vm_lan(bad.parse().unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("vp"), "{bad}: {e}");
    }
}
