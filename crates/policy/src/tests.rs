use alloc::string::ToString;
use alloc::vec::Vec;

use super::*;

fn a(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
fn prefixes_parse_and_clear_host_bits() {
    let p: Prefix = "10.1.2.3/8".parse().unwrap();
    assert_eq!(p.to_string(), "10.0.0.0/8");
    assert_eq!(
        "1.2.3.4".parse::<Prefix>().unwrap().to_string(),
        "1.2.3.4/32"
    );
    assert_eq!("0.0.0.0/0".parse::<Prefix>().unwrap().bits(), 0);
    for bad in [
        "",
        "1.2.3",
        "1.2.3.4/33",
        "1.2.3.4/",
        "1.2.3.4/-1",
        "x/8",
        "300.1.2.3",
        "::1",
    ] {
        assert!(bad.parse::<Prefix>().is_err(), "{bad}");
    }
}

#[test]
fn sets_fold_nested_entries_and_find_by_binary_search() {
    let s = PrefixSet::parse(
        "# opt-out\n10.0.0.0/8\n10.1.0.0/16 # nested\n\n192.168.1.7\n0.0.0.0/32\n",
    )
    .unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(s.find(a("10.200.0.1")).unwrap().to_string(), "10.0.0.0/8");
    assert_eq!(s.find(a("192.168.1.7")).unwrap().bits(), 32);
    assert!(s.find(a("192.168.1.8")).is_none());
    assert!(s.find(a("11.0.0.0")).is_none());
    assert!(s.find(a("0.0.0.0")).is_some());
    assert!(s.find(a("255.255.255.255")).is_none());
    let all = PrefixSet::parse("0.0.0.0/0").unwrap();
    assert!(all.find(a("255.255.255.255")).is_some());
}

#[test]
fn set_errors_name_the_line() {
    let e = PrefixSet::parse("10.0.0.0/8\n\nnonsense\n").unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.to_string().contains("line 3"), "{e}");
}

#[test]
fn a_million_entries_stay_fast() {
    let s: PrefixSet = (0..1_000_000u32)
        .map(|i| Prefix::new(Ipv4Addr::from(i << 8), 24).unwrap())
        .collect();
    assert_eq!(s.len(), 1_000_000);
    assert!(s.find(Ipv4Addr::from((123_456u32 << 8) | 7)).is_some());
    assert!(s.find(Ipv4Addr::from(2_000_000u32 << 8)).is_none());
}

#[test]
fn targets_lab_public_and_excluded() {
    let mut p = Policy::default();
    assert!(p.check_target("127.0.0.1".parse().unwrap(), 1000).is_ok());
    assert!(p
        .check_target("203.0.113.9".parse().unwrap(), 500_000)
        .is_ok());
    assert!(p.check_target("100.127.0.1".parse().unwrap(), 20).is_ok());
    assert_eq!(
        p.check_target("8.8.8.8".parse().unwrap(), 20),
        Err(Refusal::Public(a("8.8.8.8")))
    );
    assert_eq!(
        p.check_target("100.128.0.1".parse().unwrap(), 20),
        Err(Refusal::Public(a("100.128.0.1")))
    );
    for bad in ["0.0.0.0", "224.0.0.1", "255.255.255.255", "240.0.0.1"] {
        assert!(
            matches!(
                p.check_target(bad.parse().unwrap(), 20),
                Err(Refusal::NotUnicast(..))
            ),
            "{bad}"
        );
    }
    p.allow_public = true;
    assert!(p.check_target("8.8.8.8".parse().unwrap(), 1000).is_ok());
    assert!(matches!(
        p.check_target("8.8.8.8".parse().unwrap(), 1001),
        Err(Refusal::PublicRate { .. })
    ));
    p.exclude.insert("8.8.0.0/16".parse().unwrap());
    p.exclude.insert("203.0.113.64/26".parse().unwrap());
    assert!(matches!(
        p.check_target("8.8.8.8".parse().unwrap(), 20),
        Err(Refusal::Excluded { .. })
    ));
    assert!(matches!(
        p.check_target("203.0.113.70".parse().unwrap(), 20),
        Err(Refusal::Excluded { .. })
    ));
    assert!(p.check_target("203.0.113.9".parse().unwrap(), 20).is_ok());
}

#[test]
fn lab_addresses_fail_closed_where_no_route_leads_into_a_lab() {
    let mut routed = LabRoutes::new();
    routed.add("203.0.113.0/24".parse().unwrap(), true);
    routed.add("203.0.113.128/25".parse().unwrap(), false);
    let p = Policy {
        lab: LabAccess::Routed(routed),
        ..Policy::default()
    };
    assert!(p.check_target("203.0.113.9".parse().unwrap(), 20).is_ok());
    assert!(
        p.check_target("203.0.113.200".parse().unwrap(), 20)
            .is_err(),
        "more specific wins"
    );
    assert_eq!(
        p.check_target("100.64.0.1".parse().unwrap(), 20),
        Err(Refusal::LabNotRouted(a("100.64.0.1")))
    );
    // loopback needs no route
    assert!(p.check_target("127.0.0.1".parse().unwrap(), 20).is_ok());
    let none = Policy {
        lab: LabAccess::Routed(LabRoutes::new()),
        allow_public: true,
        ..Policy::default()
    };
    // consent to public probing does not open the lab ranges
    assert!(matches!(
        none.check_target("198.51.100.1".parse().unwrap(), 20),
        Err(Refusal::LabNotRouted(_))
    ));
}

#[test]
fn rates_and_sources() {
    assert!(check_rate(0).is_err());
    assert!(check_rate(MAX_PPS_LAB).is_ok());
    assert!(check_rate(MAX_PPS_LAB + 1).is_err());
    let own: Vec<Ipv4Addr> = [a("192.0.2.1"), a("127.0.0.1")].into();
    assert!(check_source(a("192.0.2.1"), &own).is_ok());
    assert_eq!(
        check_source(a("8.8.8.8"), &own),
        Err(Refusal::Spoofed(a("8.8.8.8")))
    );
    let own6: [core::net::Ipv6Addr; 1] = ["2001:db8:64::a00:2".parse().unwrap()];
    assert!(v6::check_source6(own6[0], &own6).is_ok());
    let other: core::net::Ipv6Addr = "2001:db8:64::a00:3".parse().unwrap();
    let refused = v6::check_source6(other, &own6);
    assert_eq!(refused, Err(Refusal::V6(other, v6::Why6::Spoofed)));
    assert_eq!(
        refused.unwrap_err().to_string(),
        "source 2001:db8:64::a00:3 is not an address of this prober: vTNT does not spoof"
    );
}

#[test]
fn prefix_intersections() {
    let lab: Prefix = "100.64.0.0/10".parse().unwrap();
    let route: Prefix = "100.64.3.0/24".parse().unwrap();
    assert_eq!(lab.intersection(&route), Some(route));
    assert_eq!(route.intersection(&lab), Some(route));
    assert_eq!(lab.intersection(&"10.0.0.0/8".parse().unwrap()), None);
}

#[test]
fn equal_routes_fail_closed() {
    let mut r = LabRoutes::new();
    r.add("100.64.0.0/10".parse().unwrap(), true);
    r.add("100.64.0.0/10".parse().unwrap(), false);
    assert!(!r.reaches(a("100.64.1.1")));
    r.add("0.0.0.0/0".parse().unwrap(), true);
    r.add("100.64.1.0/24".parse().unwrap(), true);
    assert!(r.reaches(a("100.64.1.1")));
    assert!(!r.reaches(a("100.64.2.1")));
    assert!(r.reaches(a("8.8.8.8")));
}

#[test]
fn insert_folds_like_collect() {
    let list = [
        "10.1.0.0/16",
        "10.0.0.0/8",
        "10.2.3.4",
        "192.0.2.0/25",
        "192.0.2.128/25",
        "0.0.0.0/32",
        "10.200.0.0/16",
    ];
    let mut one = PrefixSet::new();
    for p in list {
        one.insert(p.parse().unwrap());
    }
    let all: PrefixSet = list.iter().map(|p| p.parse().unwrap()).collect();
    assert_eq!(one, all);
    assert_eq!(one.len(), 4);
}

#[test]
fn what_is_not_unicast_is_named() {
    let p = Policy {
        links: Vec::from([
            "192.0.2.0/24".parse().unwrap(),
            "10.0.0.0/31".parse().unwrap(),
            "10.0.0.9/32".parse().unwrap(),
        ]),
        ..Policy::default()
    };
    let what = |s: &str| match p.check_target(s.parse().unwrap(), 20) {
        Err(Refusal::NotUnicast(_, w)) => Some(w),
        _ => None,
    };
    let link: Prefix = "192.0.2.0/24".parse().unwrap();
    for (addr, want) in [
        ("0.0.0.0", Some(Special::Unspecified)),
        ("0.1.2.3", Some(Special::ThisNetwork)),
        ("224.0.0.1", Some(Special::Multicast)),
        ("239.255.255.255", Some(Special::Multicast)),
        ("255.255.255.255", Some(Special::Broadcast)),
        ("240.0.0.1", Some(Special::Reserved)),
        ("192.0.2.255", Some(Special::LinkBroadcast(link))),
        ("192.0.2.0", Some(Special::LinkNetwork(link))),
        ("192.0.2.1", None),
        // a /31 and a /32 have no network or broadcast address (RFC 3021)
        ("10.0.0.0", None),
        ("10.0.0.1", None),
        ("10.0.0.9", None),
        // outside every link: a directed broadcast the prober cannot know of
        ("203.0.113.255", None),
    ] {
        assert_eq!(what(addr), want, "{addr}");
    }
    let e = p
        .check_target("192.0.2.255".parse().unwrap(), 20)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "192.0.2.255 is the broadcast address of 192.0.2.0/24, a prefix of this prober's \
         links: only unicast addresses are probed"
    );
    // without links, the same address is an ordinary lab address
    assert!(Policy::default()
        .check_target("192.0.2.255".parse().unwrap(), 20)
        .is_ok());
}

/// IPv6 (the `ipv6` feature, on for these tests): the documentation prefix, ULA and `::1`
/// without consent; the rest public; what is not unicast refused; the texts name why.
#[test]
fn ipv6_targets_follow_the_same_rules() {
    use core::net::Ipv6Addr;
    let six = |s: &str| -> IpAddr { s.parse().unwrap() };
    let text = |r: Result<(), Refusal>| r.unwrap_err().to_string();
    let mut p = Policy::default();
    for ok in [
        "::1",
        "2001:db8::1",
        "2001:db8:ffff::9",
        "fd12:3456::1",
        "fc00::5",
    ] {
        assert_eq!(p.check_target(six(ok), 20), Ok(()), "{ok}");
    }
    assert_eq!(
        text(p.check_target(six("2001:4860:4860::8888"), 20)),
        "2001:4860:4860::8888 is outside ::1 and the lab's IPv6 ranges (2001:db8::/32, fc00::/7); pass --allow-public to probe it"
    );
    assert_eq!(
        p.check_target(six("2001:db9::1"), 20),
        Err(Refusal::V6(
            "2001:db9::1".parse().unwrap(),
            v6::Why6::Public
        ))
    );
    for (bad, why) in [
        ("::", "the unspecified address"),
        ("ff02::1", "a multicast address (ff00::/8)"),
        ("fe80::1", "link-local (fe80::/10), which no route leads to"),
        (
            "::ffff:192.0.2.1",
            "IPv4-mapped (::ffff:0:0/96): give the IPv4 address itself",
        ),
    ] {
        assert_eq!(
            text(p.check_target(six(bad), 20)),
            alloc::format!("{bad} is {why}: only unicast addresses are probed")
        );
    }
    p.allow_public = true;
    assert_eq!(p.check_target(six("2001:4860::1"), 1000), Ok(()));
    assert_eq!(
        text(p.check_target(six("2001:4860::1"), 1001)),
        "2001:4860::1 is public: public targets are probed at 1000 pps at most, not 1001"
    );
    assert!(
        p.check_target(six("ff02::1"), 20).is_err(),
        "consent or not"
    );
    // Fail closed: only what a route other than a default route leads to is a lab.
    let mut routes = LabRoutes::new();
    let lab = v6::Prefix6::new("2001:db8:1::5".parse().unwrap(), 48).unwrap();
    assert_eq!(lab.to_string(), "2001:db8:1::/48");
    routes.add6(lab, true);
    routes.add6(v6::Prefix6::new(Ipv6Addr::UNSPECIFIED, 0).unwrap(), false);
    p.allow_public = false;
    p.lab = LabAccess::Routed(routes);
    assert_eq!(p.check_target(six("2001:db8:1::9"), 20), Ok(()));
    assert_eq!(
        text(p.check_target(six("2001:db8:2::9"), 20)),
        "2001:db8:2::9 is a lab address but no lab is reachable here (no route other than a default route leads there)"
    );
    assert_eq!(p.check_target(six("::1"), 20), Ok(()));
    assert!(v6::LAB_NETS6[0].overlaps(&lab) && !v6::LAB_NETS6[1].overlaps(&lab));
    assert_eq!(v6::Prefix6::new(Ipv6Addr::LOCALHOST, 129), None);
}

#[test]
fn the_lab_twin_rule_maps_both_ways() {
    let a: Ipv4Addr = "192.0.2.10".parse().unwrap();
    let six: core::net::Ipv6Addr = "2001:db8:64::c000:20a".parse().unwrap();
    assert_eq!(crate::lab_twin(a), six);
    assert_eq!(crate::lab_twin_v4(six), Some(a));
    assert_eq!(
        crate::lab_twin_v4("2001:db8:65::c000:20a".parse().unwrap()),
        None
    );
}
