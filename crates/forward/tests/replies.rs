//! Instances that use the same identities towards the same destination get distinct
//! public identities, keep one per flow (and Paris ICMP the checksum it pinned), and each receives
//! exactly its own replies, byte for byte what the network would have sent it had it
//! probed from its own address: time exceeded with and without MPLS extensions, echo
//! replies, port unreachable, TCP RST, UDP answers. Packets are built by `vtnt-wire` and
//! read back by `vtnt_wire::reply::parse`; cases are drawn from a printed seed
//! (`VTNT_FORWARD_SEED` replays one).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

mod support;

use support::{probe, replies, Method};
use vtnt_forward::{Config, Forwarder, InstanceId};
use vtnt_record::Instant;
use vtnt_testkit::Rng;
use vtnt_wire::build::{self, Ip};
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{checksum, proto};

const PUBLIC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const T0: Instant = Instant::from_millis(1_000_000);

/// The identity (ICMP ident, UDP/TCP source port) and transport checksum of a probe.
fn identity(probe: &[u8]) -> (u16, u16) {
    match reply::parse(probe).unwrap().body {
        Body::Echo {
            ident, checksum, ..
        } => (ident, checksum),
        Body::Udp {
            sport, checksum, ..
        } => (sport, checksum),
        Body::Tcp { sport, .. } => (sport, u16::from_be_bytes([probe[36], probe[37]])),
        other => panic!("not a probe: {other:?}"),
    }
}

/// Every checksum of a packet holds (IP header; ICMP, UDP or TCP).
fn checksums_hold(p: &[u8]) {
    assert_eq!(checksum::sum(&p[..20]), 0xffff, "IP header checksum");
    let seg = &p[20..];
    let pseudo = |protocol| {
        let a = |at: usize| Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]);
        checksum::pseudo_v4(a(12), a(16), protocol, seg.len() as u16)
    };
    let total = match p[9] {
        proto::ICMP => checksum::sum(seg),
        protocol => checksum::add(checksum::sum(seg), pseudo(protocol)),
    };
    assert_eq!(total, 0xffff, "transport checksum of protocol {}", p[9]);
}

/// One instance flow of a case.
#[derive(Debug, Clone, Copy)]
struct Flow {
    instance: InstanceId,
    addr: Ipv4Addr,
    method: Method,
    dst: Ipv4Addr,
    id: u16,
}

#[test]
fn shared_identities_stay_apart_and_every_reply_reaches_its_own_instance() {
    let seed = vtnt_testkit::seed("VTNT_FORWARD_SEED", || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut rng = Rng::new(seed);
    let methods = [
        Method::IcmpParis,
        Method::IcmpPlain,
        Method::Udp,
        Method::Tcp,
    ];
    let dsts = [Ipv4Addr::new(203, 0, 113, 7), Ipv4Addr::new(203, 0, 113, 9)];
    let (mut replies_total, mut conflicts) = (0u64, 0u64);
    for case in 0..40 {
        let mut fw = Forwarder::new(Config {
            pps: 500_000,
            burst: 100_000,
            ..Config::new(PUBLIC)
        })
        .unwrap();
        // 2..=12 instances, several on one private address, all on two identities.
        let n = 2 + rng.below(11);
        let mut flows: Vec<Flow> = Vec::new();
        let mut seen = BTreeSet::new();
        for _ in 0..n {
            let addr = Ipv4Addr::new(10, 0, 0, 2 + rng.below(3) as u8);
            let instance = fw.add_instance(addr);
            for _ in 0..1 + rng.below(3) {
                let method = methods[rng.below(methods.len())];
                let dst = dsts[rng.below(dsts.len())];
                let id = [0x8001, 0x8002][rng.below(2)];
                if seen.insert((instance, method.proto(), dst, id)) {
                    flows.push(Flow {
                        instance,
                        addr,
                        method,
                        dst,
                        id,
                    });
                }
            }
        }
        // Probes of every flow at TTLs 1..=5, interleaved at random.
        let mut order: Vec<(usize, u8)> = (0..flows.len())
            .flat_map(|f| (1..=5u8).map(move |ttl| (f, ttl)))
            .collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut public: BTreeMap<usize, (u16, u16)> = BTreeMap::new();
        let mut sent = Vec::new();
        let mut out = [0u8; 1500];
        for (k, &(f, ttl)) in order.iter().enumerate() {
            let fl = flows[f];
            let original = probe(fl.method, fl.addr, fl.dst, fl.id, ttl, k as u16 + 1);
            let len = fw
                .handle_instance_packet(T0, fl.instance, &original, &mut out)
                .unwrap_or_else(|e| panic!("case {case}: {e}"));
            let rewritten = out[..len].to_vec();
            checksums_hold(&rewritten);
            // Only the source, the identity and the checksums over them moved (an echo
            // keeps its checksum, which ECMP routers hash: its first payload word moves).
            assert_eq!(len, original.len());
            let same = |at: usize| original[at] == rewritten[at];
            let csum = 20
                + [8, 6, 16][[proto::ICMP, proto::UDP, proto::TCP]
                    .iter()
                    .position(|&p| p == fl.method.proto())
                    .unwrap()];
            let id_at = if fl.method.proto() == proto::ICMP {
                24
            } else {
                20
            };
            for at in 0..len {
                let moves = (10..16).contains(&at)
                    || (id_at..id_at + 2).contains(&at)
                    || (csum..csum + 2).contains(&at);
                assert!(moves || same(at), "case {case}: byte {at} changed");
            }
            assert_eq!(&rewritten[12..16], &PUBLIC.octets());
            let (pid, sum) = identity(&rewritten);
            let first = *public.entry(f).or_insert((pid, sum));
            assert_eq!(first.0, pid, "case {case}: one public identity per flow");
            if fl.method == Method::IcmpParis {
                assert_eq!(first.1, sum, "case {case}: one Paris checksum per flow");
                assert_eq!(sum, identity(&original).1, "case {case}: the pinned one");
            }
            sent.push((f, original, rewritten));
        }
        // Flows sharing protocol and destination have distinct public identities.
        let mut owners = BTreeMap::new();
        for (&f, &(pid, _)) in &public {
            let fl = flows[f];
            let key = (fl.method.proto(), fl.dst, pid);
            assert!(
                owners.insert(key, f).is_none(),
                "case {case}: {key:?} twice"
            );
        }
        conflicts += fw.stats().rewrites;
        // Every reply, shuffled, comes out to its own instance as if sent to it directly.
        let mut upstream = Vec::new();
        for (f, original, rewritten) in &sent {
            let ipid = rng.next_u64() as u16;
            let direct = replies(original, ipid);
            let via = replies(rewritten, ipid);
            for (d, v) in direct.into_iter().zip(via) {
                upstream.push((*f, d, v));
            }
        }
        for i in (1..upstream.len()).rev() {
            upstream.swap(i, rng.below(i + 1));
        }
        for (f, direct, via) in &upstream {
            let (to, len) = fw
                .handle_upstream_packet(T0, via, &mut out)
                .unwrap_or_else(|| panic!("case {case}: reply unmatched"));
            assert_eq!(to, flows[*f].instance, "case {case}: misdelivered");
            assert_eq!(
                &out[..len],
                &direct[..],
                "case {case}: {:?}",
                flows[*f].method
            );
            let r = reply::parse(&out[..len]).unwrap();
            if let Body::IcmpError { ext: Some(ext), .. } = r.body {
                assert_eq!(ext.mpls_stack().count(), 2, "labels survive");
            }
        }
        replies_total += upstream.len() as u64;
        // A reply to an identity nobody holds is dropped and counted.
        let stray = replies(&probe(Method::Tcp, PUBLIC, dsts[0], 0x1234, 3, 1), 1);
        for r in &stray {
            assert_eq!(fw.handle_upstream_packet(T0, r, &mut out), None);
        }
        // A redirect quoting a real probe is not a traceroute's business: dropped.
        let mut redirect = vec![0u8; 128];
        let ip = Ip {
            src: support::ROUTER,
            dst: PUBLIC,
            ttl: 250,
            tos: 0,
            ipid: 1,
        };
        let e = build::IcmpError {
            icmp_type: 5,
            code: 1,
            original: &sent[0].2,
            quote_len: 28,
            mpls: &[],
        };
        let n = build::icmp_error(&mut redirect, &ip, &e).unwrap();
        assert_eq!(
            fw.handle_upstream_packet(T0, &redirect[..n], &mut out),
            None
        );
        let s = fw.stats();
        assert_eq!(s.delivered, upstream.len() as u64);
        assert_eq!(s.unmatched, stray.len() as u64 + 1);
        assert_eq!(s.forwarded, sent.len() as u64);
        assert_eq!(s.mappings, flows.len());
    }
    println!(
        "{replies_total} replies delivered byte-exact, {conflicts} identity conflicts resolved"
    );
    assert!(conflicts > 40, "the cases force conflicts");
}
