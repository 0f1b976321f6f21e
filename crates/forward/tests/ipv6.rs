//! IPv6 through the forwarder, as IPv4 in `replies.rs` and `policy.rs`: probes (ICMPv6
//! echo, Paris and plain, UDP, TCP SYN; hop limits 1-5) leave from the public IPv6
//! address with hop limit, traffic class, flow label, an echo's checksum (its first
//! payload word moves instead) and the rest kept and every checksum valid; each reply (time exceeded quoting 48 bytes, the whole probe, 128 bytes with
//! labels, 48 padded to 128 with labels; packet too big; port unreachable; echo reply,
//! UDP answer, RST) reaches its own instance byte for byte as the network would have
//! sent it directly, conflicts included; what may not leave never does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod support;

use support::Method;
use vtnt_forward::{Config, Forwarder, InstanceId, Refused};
use vtnt_policy::v6::Why6;
use vtnt_policy::Refusal;
use vtnt_record::Instant;
use vtnt_wire::{checksum, ipv6, proto, reply6};

const PUBLIC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const PUBLIC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 2);
/// The VMs' twins of 10.254.0.10 and 10.254.0.11.
const VM_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x64, 0, 0, 0, 0x0afe, 0x000a);
const VM_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x64, 0, 0, 0, 0x0afe, 0x000b);
const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x2, 0, 0, 0, 0, 7);
const T0: Instant = Instant::from_millis(1_000_000);
const METHODS: [Method; 4] = [
    Method::IcmpParis,
    Method::IcmpPlain,
    Method::Udp,
    Method::Tcp,
];

fn forwarder(config: Config) -> Forwarder {
    Forwarder::new(config).unwrap()
}

fn config() -> Config {
    Config {
        public6: Some(PUBLIC6),
        ..Config::new(PUBLIC)
    }
}

/// Whether the upper-layer checksum of the IPv6 packet `p` (no extension headers) holds.
fn checksum_ok(p: &[u8]) -> bool {
    let h = ipv6::header(p).unwrap();
    let payload = &p[40..];
    let pseudo = checksum::pseudo_v6(h.src, h.dst, h.protocol, payload.len() as u32);
    if h.protocol == proto::UDP && payload[6..8] == [0, 0] {
        return true;
    }
    checksum::add(pseudo, checksum::sum(payload)) == 0xffff
}

#[test]
fn probes_leave_from_the_public_address_with_the_rest_kept() {
    let mut fw = forwarder(config());
    let vm = fw.add_instance(VM_A);
    let mut out = [0u8; 1500];
    for m in METHODS {
        let mut paris_sums = std::collections::BTreeSet::new();
        for hl in 1..=5u8 {
            let p = support::probe6(m, VM_A, DST, 0x8001, hl, u16::from(hl));
            let n = fw.handle_instance_packet(T0, vm, &p, &mut out).unwrap();
            let sent = &out[..n];
            assert_eq!(n, p.len());
            let (h, hp) = (ipv6::header(sent).unwrap(), ipv6::header(&p).unwrap());
            assert_eq!(h.src, PUBLIC6);
            assert_eq!(
                (h.dst, h.hop_limit, h.traffic_class, h.flow_label),
                (hp.dst, hp.hop_limit, hp.traffic_class, support::FLOW_LABEL)
            );
            assert!(checksum_ok(sent), "{m:?}: checksum");
            // Only the source and the checksum moved (an echo's first payload word, where
            // Paris pins the checksum, which ECMP routers hash): the identity was free.
            let moved = if m.proto() == proto::UDP {
                46
            } else if m.proto() == proto::TCP {
                56
            } else {
                assert_eq!(sent[42..44], p[42..44], "{m:?}: the checksum it pinned");
                48
            };
            for (i, (a, b)) in p.iter().zip(sent).enumerate() {
                assert!(
                    a == b || (8..24).contains(&i) || i == moved || i == moved + 1,
                    "{m:?} byte {i}"
                );
            }
            if m == Method::IcmpParis {
                paris_sums.insert([sent[42], sent[43]]);
            }
        }
        assert!(
            m != Method::IcmpParis || paris_sums.len() == 1,
            "one checksum per Paris flow"
        );
    }
    // Paris and plain ICMP on one ident are one flow
    assert_eq!((fw.stats().forwarded, fw.stats().mappings), (20, 3));
}

#[test]
fn replies_reach_their_own_instance_byte_for_byte() {
    let mut fw = forwarder(config());
    // Two instances on one address and a third on another, all on one identity: a
    // conflict per protocol; a dual-stack instance speaks IPv4 too.
    let vms: Vec<(InstanceId, Ipv6Addr)> = [VM_A, VM_A, VM_B]
        .into_iter()
        .map(|a| (fw.add_instance(a), a))
        .collect();
    assert!(fw.add_address(vms[2].0, Ipv4Addr::new(10, 254, 0, 11)));
    let mut out = [0u8; 1500];
    let mut back = [0u8; 1500];
    let mut delivered = 0;
    for m in METHODS {
        for &(vm, addr) in &vms {
            for hl in 1..=3u8 {
                let p = support::probe6(m, addr, DST, 0x8001, hl, u16::from(hl));
                let n = fw.handle_instance_packet(T0, vm, &p, &mut out).unwrap();
                let direct = support::replies6(&p);
                let via = support::replies6(&out[..n]);
                assert_eq!(direct.len(), via.len());
                for (want, r) in direct.iter().zip(&via) {
                    let (to, len) = fw
                        .handle_upstream_packet(T0, r, &mut back)
                        .unwrap_or_else(|| panic!("{m:?}: unmatched {r:02x?}"));
                    assert_eq!(to, vm);
                    assert_eq!(&back[..len], &want[..], "{m:?} hop limit {hl}");
                    delivered += 1;
                }
            }
        }
    }
    // the IPv4 side of the dual-stack instance
    let p = support::probe(
        Method::Udp,
        Ipv4Addr::new(10, 254, 0, 11),
        Ipv4Addr::new(203, 0, 113, 7),
        7,
        1,
        1,
    );
    let n = fw
        .handle_instance_packet(T0, vms[2].0, &p, &mut out)
        .unwrap();
    let r = &support::replies(&out[..n], 1)[0];
    assert_eq!(
        fw.handle_upstream_packet(T0, r, &mut back).map(|x| x.0),
        Some(vms[2].0)
    );
    let s = fw.stats();
    assert_eq!((s.delivered, s.unmatched), (delivered + 1, 0));
    // the second and third instances moved in each protocol (Paris and plain ICMP are one
    // flow of an instance: one ident)
    assert_eq!(s.rewrites, 6);
}

#[test]
fn stray_replies_and_other_errors_are_dropped() {
    let mut fw = forwarder(config());
    let vm = fw.add_instance(VM_A);
    let mut out = [0u8; 1500];
    let p = support::probe6(Method::Udp, VM_A, DST, 0x8001, 2, 1);
    let n = fw.handle_instance_packet(T0, vm, &p, &mut out).unwrap();
    let sent = out[..n].to_vec();
    let mut back = [0u8; 1500];
    // to another address, quoting another source, a parameter problem, another port
    let mut to_other = support::replies6(&sent)[0].clone();
    to_other[39] ^= 1;
    let mut other_src = sent.clone();
    other_src[23] ^= 1;
    let quoting_other = support::replies6(&other_src)[0].clone();
    let mut param = support::replies6(&sent)[1].clone();
    param[40] = vtnt_wire::icmp6_type::PARAM_PROBLEM;
    let mut other_port = sent.clone();
    other_port[41] ^= 1;
    let stray_answer = support::replies6(&other_port).pop().unwrap();
    for r in [&to_other, &quoting_other, &param, &stray_answer] {
        assert_eq!(fw.handle_upstream_packet(T0, r, &mut back), None);
    }
    assert_eq!(fw.stats().unmatched, 4);
}

#[test]
fn what_may_not_leave_never_does() {
    let mut fw = forwarder(Config {
        burst: 3,
        ..config()
    });
    let vm = fw.add_instance(VM_A);
    fw.add_address(vm, Ipv4Addr::new(10, 254, 0, 10));
    let mut out = [0u8; 1500];
    let probe = |src, dst| support::probe6(Method::IcmpPlain, src, dst, 1, 5, 1);
    let public: Ipv6Addr = "2600::1".parse().unwrap();
    let cases = [
        (
            probe(VM_B, DST),
            Refused::Policy(Refusal::V6(VM_B, Why6::Spoofed)),
        ),
        (
            probe(VM_A, public),
            Refused::Policy(Refusal::V6(public, Why6::Public)),
        ),
        (
            probe(VM_A, "ff02::1".parse().unwrap()),
            Refused::Policy(Refusal::V6(
                "ff02::1".parse().unwrap(),
                Why6::NotUnicast(vtnt_policy::v6::Special6::Multicast),
            )),
        ),
    ];
    for (p, why) in &cases {
        out.fill(0);
        assert_eq!(
            fw.handle_instance_packet(T0, vm, p, &mut out),
            Err(why.clone())
        );
        assert!(out.iter().all(|&b| b == 0), "nothing written");
    }
    // an extension header (hop-by-hop) or an echo reply is no probe
    let mut hbh = probe(VM_A, DST);
    hbh[6] = 0;
    hbh.splice(40..40, [proto::ICMPV6, 0, 1, 4, 0, 0, 0, 0]);
    hbh[5] += 8;
    let mut reply = probe(VM_A, DST);
    reply[40] = vtnt_wire::icmp6_type::ECHO_REPLY;
    for p in [&hbh, &reply] {
        assert_eq!(
            fw.handle_instance_packet(T0, vm, p, &mut out),
            Err(Refused::NotAProbe)
        );
    }
    let s = fw.stats();
    assert_eq!(
        (
            s.refused.spoofed,
            s.refused.public,
            s.refused.not_unicast,
            s.invalid
        ),
        (1, 1, 1, 2)
    );
    assert_eq!((s.forwarded, s.mappings), (0, 0));
    // One budget for both families: a burst of 3 is spent by IPv4 and IPv6 together.
    let v4 = support::probe(
        Method::IcmpPlain,
        Ipv4Addr::new(10, 254, 0, 10),
        Ipv4Addr::new(203, 0, 113, 7),
        1,
        5,
        1,
    );
    assert!(fw.handle_instance_packet(T0, vm, &v4, &mut out).is_ok());
    assert!(fw
        .handle_instance_packet(T0, vm, &probe(VM_A, DST), &mut out)
        .is_ok());
    assert!(fw.handle_instance_packet(T0, vm, &v4, &mut out).is_ok());
    assert_eq!(
        fw.handle_instance_packet(T0, vm, &probe(VM_A, DST), &mut out),
        Err(Refused::Rate)
    );
    assert_eq!(fw.stats().dropped_rate, 1);
    // Without a public IPv6 address, IPv6 is refused and IPv4 still leaves.
    let mut v4only = forwarder(Config::new(PUBLIC));
    let vm = v4only.add_instance(VM_A);
    assert_eq!(
        v4only.handle_instance_packet(T0, vm, &probe(VM_A, DST), &mut out),
        Err(Refused::NoPublic6)
    );
    let reply = support::replies6(&probe(VM_A, DST)).pop().unwrap();
    assert_eq!(v4only.handle_upstream_packet(T0, &reply, &mut out), None);
    let _ = (IpAddr::V6(VM_A), reply6::parse(&reply).unwrap());
}
