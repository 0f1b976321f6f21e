//! What never leaves: targets the policy refuses (nothing is written to the output), more
//! than the one rate budget all instances share (measured per virtual second with 100
//! instances asking ten times the budget), new flows beyond the table's bound, and
//! packets that are not probes.

use std::net::Ipv4Addr;
use std::time::Duration;

mod support;

use support::Method;
use vtnt_forward::{Config, Forwarder, InstanceId, Refused};
use vtnt_policy::{LabAccess, LabRoutes, Policy, PrefixSet, Refusal};
use vtnt_record::Instant;
use vtnt_wire::tcp_flags;

const PUBLIC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const PRIVATE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const T0: Instant = Instant::from_millis(1_000_000);

/// An ICMP echo request from the instance (one of `vtnt-wire`'s probes).
fn probe(dst: Ipv4Addr, ident: u16) -> Vec<u8> {
    support::probe(Method::IcmpPlain, PRIVATE, dst, ident, 5, 1)
}

fn forwarder(config: Config) -> (Forwarder, InstanceId) {
    let mut fw = Forwarder::new(config).unwrap();
    let vm = fw.add_instance(PRIVATE);
    (fw, vm)
}

#[test]
fn refused_targets_never_leave() {
    let exclude = PrefixSet::parse("203.0.113.64/26\n").unwrap();
    let mut routes = LabRoutes::new();
    routes.add("203.0.113.0/24".parse().unwrap(), true);
    let policy = Policy {
        exclude,
        lab: LabAccess::Routed(routes),
        ..Policy::lab_only()
    };
    let (mut fw, vm) = forwarder(Config {
        policy: policy.clone(),
        ..Config::new(PUBLIC)
    });
    let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let cases = [
        (probe(ip("8.8.8.8"), 1), Refusal::Public(ip("8.8.8.8"))),
        (
            probe(ip("203.0.113.70"), 1),
            Refusal::Excluded {
                addr: ip("203.0.113.70"),
                prefix: "203.0.113.64/26".parse().unwrap(),
            },
        ),
        (
            probe(ip("224.0.0.1"), 1),
            Refusal::NotUnicast(ip("224.0.0.1"), vtnt_policy::Special::Multicast),
        ),
        (
            probe(ip("198.51.100.9"), 1),
            Refusal::LabNotRouted(ip("198.51.100.9")),
        ),
        (
            support::probe(
                Method::IcmpPlain,
                ip("10.0.0.3"),
                ip("203.0.113.7"),
                1,
                5,
                1,
            ),
            Refusal::Spoofed(ip("10.0.0.3")),
        ),
    ];
    for (packet, why) in &cases {
        let mut out = [0xa5u8; 1500];
        assert_eq!(
            fw.handle_instance_packet(T0, vm, packet, &mut out),
            Err(Refused::Policy(why.clone()))
        );
        assert!(out.iter().all(|&b| b == 0xa5), "{why}: nothing written");
    }
    let s = fw.stats();
    assert_eq!(
        (s.refused.public, s.refused.excluded, s.refused.not_unicast),
        (1, 1, 1)
    );
    assert_eq!((s.refused.lab_not_routed, s.refused.spoofed), (1, 1));
    assert_eq!(
        (s.forwarded, s.mappings),
        (0, 0),
        "no mapping for a refused probe"
    );
    let mut out = [0u8; 1500];
    assert!(fw
        .handle_instance_packet(T0, vm, &probe(ip("203.0.113.7"), 1), &mut out)
        .is_ok());

    // Public targets need consent, and then a forwarder rate the policy allows them.
    let public = Policy {
        allow_public: true,
        ..policy
    };
    let (mut fast, vm) = forwarder(Config {
        policy: public.clone(),
        pps: 5000,
        ..Config::new(PUBLIC)
    });
    assert_eq!(
        fast.handle_instance_packet(T0, vm, &probe(ip("8.8.8.8"), 1), &mut out),
        Err(Refused::Policy(Refusal::PublicRate {
            addr: ip("8.8.8.8"),
            pps: 5000
        }))
    );
    assert_eq!(fast.stats().refused.public_rate, 1);
    let (mut slow, vm) = forwarder(Config {
        policy: public,
        pps: 1000,
        ..Config::new(PUBLIC)
    });
    assert!(slow
        .handle_instance_packet(T0, vm, &probe(ip("8.8.8.8"), 1), &mut out)
        .is_ok());
    assert_eq!(
        Forwarder::new(Config {
            pps: 0,
            ..Config::new(PUBLIC)
        })
        .err(),
        Some(Refusal::Rate(0))
    );
}

#[test]
fn one_rate_budget_holds_for_the_sum_of_instances() {
    const PPS: u32 = 1000;
    const BURST: u32 = 10;
    const SECONDS: u64 = 10;
    let mut fw = Forwarder::new(Config {
        pps: PPS,
        burst: BURST,
        ..Config::new(PUBLIC)
    })
    .unwrap();
    // 100 instances at 100 pps each: ten times the budget, spread over each 10 ms.
    let vms: Vec<InstanceId> = (0..100).map(|_| fw.add_instance(PRIVATE)).collect();
    let mut per_second = vec![0u32; SECONDS as usize];
    let mut out = [0u8; 1500];
    let dst = Ipv4Addr::new(203, 0, 113, 7);
    for tick in 0..SECONDS * 100 {
        for (i, vm) in vms.iter().enumerate() {
            let at = T0 + Duration::from_micros(tick * 10_000 + i as u64 * 100);
            let p = probe(dst, 0x8000 + i as u16);
            match fw.handle_instance_packet(at, *vm, &p, &mut out) {
                Ok(_) => per_second[(tick / 100) as usize] += 1,
                Err(Refused::Rate) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
    println!("forwarded per virtual second: {per_second:?}");
    assert_eq!(per_second[0], PPS + BURST - 1, "the burst, then the rate");
    for (s, n) in per_second.iter().enumerate().skip(1) {
        assert!((PPS - 1..=PPS + 1).contains(n), "second {s}: {n}");
    }
    let s = fw.stats();
    assert_eq!(s.forwarded + s.dropped_rate, SECONDS * 100 * 100);
    assert!(s.dropped_rate >= 9 * s.forwarded - 1000);
}

#[test]
fn the_table_is_bounded_and_frees_idle_mappings() {
    let (mut fw, vm) = forwarder(Config {
        max_mappings: 3,
        mapping_idle: Duration::from_secs(30),
        ..Config::new(PUBLIC)
    });
    let dst = Ipv4Addr::new(203, 0, 113, 7);
    let mut out = [0u8; 1500];
    for ident in 1..=3 {
        fw.handle_instance_packet(T0, vm, &probe(dst, ident), &mut out)
            .unwrap();
    }
    assert_eq!(
        fw.handle_instance_packet(T0, vm, &probe(dst, 4), &mut out),
        Err(Refused::TableFull)
    );
    // Known flows still pass; an idle one expires and makes room.
    let t20 = T0 + Duration::from_secs(20);
    for ident in 2..=3 {
        fw.handle_instance_packet(t20, vm, &probe(dst, ident), &mut out)
            .unwrap();
    }
    assert_eq!(fw.poll_timeout(), Some(T0 + Duration::from_secs(30)));
    let t30 = T0 + Duration::from_secs(30);
    fw.handle_instance_packet(t30, vm, &probe(dst, 4), &mut out)
        .unwrap();
    let s = fw.stats();
    assert_eq!((s.table_full, s.expired, s.mappings), (1, 1, 3));
    assert!(fw.remove_instance(vm));
    assert_eq!(fw.stats().mappings, 0);
    assert_eq!(
        fw.handle_instance_packet(t30, vm, &probe(dst, 4), &mut out),
        Err(Refused::UnknownInstance(vm))
    );
}

#[test]
fn only_probes_leave() {
    let (mut fw, vm) = forwarder(Config::new(PUBLIC));
    let dst = Ipv4Addr::new(203, 0, 113, 7);
    // A SYN-ACK (what an instance's own TCP stack might send) and an echo reply: the
    // forwarder refuses them before it reads a checksum.
    let mut syn_ack = support::probe(Method::Tcp, PRIVATE, dst, 1, 5, 1);
    syn_ack[33] |= tcp_flags::ACK;
    let mut echo_reply = probe(dst, 1);
    echo_reply[20] = 0;
    let mut fragment = probe(dst, 1);
    fragment[6] = 0x20; // more fragments
    let not_probes = [syn_ack, echo_reply, fragment, vec![0x45; 10], vec![]];
    let mut out = [0u8; 1500];
    for p in &not_probes {
        assert_eq!(
            fw.handle_instance_packet(T0, vm, p, &mut out),
            Err(Refused::NotAProbe)
        );
    }
    assert_eq!(
        fw.handle_instance_packet(T0, vm, &probe(dst, 1), &mut out[..20]),
        Err(Refused::NoRoom)
    );
    assert_eq!(fw.stats().invalid, not_probes.len() as u64 + 1);
}
