//! The lab over IPv6 (issue 38): every router, link and host has the IPv6 twin of its
//! IPv4 address (`2001:db8:64::a.b.c.d`), IPv6 packets are forwarded and label switched
//! with IPv4's rules (hop limit for IP-TTL, the same LSE-TTL rules per vendor and LSP),
//! and routers and hosts answer in ICMPv6 (RFC 4443 numbers, RFC 4884 / RFC 4950 label
//! stacks, checksums over the pseudo-header).
//!
//! The traces compare hop by hop with IPv4 traces of the same destination on a fresh lab
//! of the same topology whose routers all have the IPv4 signature <64,64> (the initial
//! hop limit of every vendor profile over IPv6, docs/lab.md): IPv4 answers the other lab
//! tests check against the truth. The same routers answer at the same hops with the same
//! quoted TTLs, label stacks and reply TTLs (the min(IP-TTL, LSE-TTL) rule on the way
//! back depends on the initial TTL, which is why the twin needs the same one). The
//! tunnels of the truth are checked against the IPv6 traces directly too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use vtnt_lab::addr::{from_v6, to_v6};
use vtnt_lab::tracer::{Answer, Tracer};
use vtnt_lab::{Instant, Lab, Port, Revelation, Topology, TunnelClass, Vendor};
use vtnt_wire::build::{Tcp, Udp};
use vtnt_wire::ipv6::{self, Ip6, HEADER_LEN};
use vtnt_wire::reply::{Body, QuotedTransport};
use vtnt_wire::{build6, checksum, icmp6_type, icmp_type, proto, reply6, tcp_flags};

/// The reference topology and every case topology: name and text.
fn topologies() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut v = vec![(
        "reference".to_string(),
        vtnt_lab::REFERENCE_TOML.to_string(),
    )];
    v.extend(files.iter().map(|f| {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        (name, std::fs::read_to_string(f).unwrap())
    }));
    v
}

/// `text` with every router's vendor `vendor` (or as written) and, with `sig64`, the
/// IPv4 signature <64,64>.
fn edit(text: &str, vendor: Option<Vendor>, sig64: bool) -> Topology {
    let mut out = String::new();
    for line in text.lines() {
        let l = line.trim_start();
        if l.starts_with("signature") && sig64 {
            continue;
        }
        match vendor {
            Some(v) if l.starts_with("vendor") => {
                out.push_str(&format!("vendor = \"{}\"\n", v.name()));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
        if l == "[[router]]" && sig64 {
            out.push_str("signature = [64, 64]\n");
        }
    }
    Topology::parse(&out, "edited.toml").unwrap()
}

/// The IPv6 trace to every destination with one forward path (one flow of each family
/// may take different equal-cost paths) next to the IPv4 trace of its <64,64> twin;
/// the tunnel classes crossed.
fn compare(what: &str, text: &str, vendor: Option<Vendor>) -> Vec<TunnelClass> {
    let (topo, twin) = (edit(text, vendor, false), edit(text, vendor, true));
    let truth = Lab::new(topo.clone()).truth();
    let mut classes = Vec::new();
    // the case whose answers return over equal-cost paths (a flow hash each)
    let split_returns = what == "ecmp-returns";
    for d in truth
        .destinations
        .iter()
        .filter(|d| d.forward_paths.len() == 1)
    {
        let what = format!("{what}: {}", d.name);
        let answered = same_trace(
            &what,
            &trace(&twin, d.dst, false),
            &trace(&topo, d.dst, true),
            split_returns,
        );
        assert!(answered > 0, "{what}: nothing answered");
        classes.extend(d.tunnels.iter().map(|t| t.class));
    }
    classes
}

fn trace(topo: &Topology, dst: Ipv4Addr, ipv6: bool) -> Vec<Option<Answer>> {
    let mut lab = Lab::new(topo.clone());
    let mut t = Tracer::new(&mut lab);
    t.ipv6 = ipv6;
    t.trace(dst, 30)
}

/// What an IPv4 answer says in ICMPv6's numbers.
fn icmp6_of(a: &Answer) -> (u8, u8) {
    match (a.icmp_type, a.icmp_code) {
        (icmp_type::ECHO_REPLY, c) => (icmp6_type::ECHO_REPLY, c),
        (icmp_type::TIME_EXCEEDED, c) => (icmp6_type::TIME_EXCEEDED, c),
        (icmp_type::DEST_UNREACH, 0) => (icmp6_type::DEST_UNREACH, 0),
        (icmp_type::DEST_UNREACH, 1) => (icmp6_type::DEST_UNREACH, 3),
        (icmp_type::DEST_UNREACH, 3) => (icmp6_type::DEST_UNREACH, 4),
        other => panic!("no ICMPv6 twin for {other:?}"),
    }
}

/// Checks that the IPv6 trace `v6` is the IPv4 trace `v4` in IPv6's words; the number
/// of hops that answered.
/// With `split_returns` answers may come back on different equal-cost paths, so their
/// reply TTLs are not compared.
fn same_trace(
    what: &str,
    v4: &[Option<Answer>],
    v6: &[Option<Answer>],
    split_returns: bool,
) -> usize {
    assert_eq!(v4.len(), v6.len(), "{what}: trace lengths");
    let mut answered = 0;
    for (k, (a4, a6)) in v4.iter().zip(v6).enumerate() {
        let at = format!("{what}, hop {}", k + 1);
        let (Some(a4), Some(a6)) = (a4, a6) else {
            assert_eq!(a4.is_some(), a6.is_some(), "{at}: one family answered");
            continue;
        };
        answered += 1;
        assert_eq!(a6.from, a4.from, "{at}: who answers");
        assert_eq!((a6.icmp_type, a6.icmp_code), icmp6_of(a4), "{at}: what");
        assert_eq!(a6.q_ttl, a4.q_ttl, "{at}: quoted TTL");
        // IPv4 explicit null (0) is IPv6's (2) over IPv6
        let labels4: Vec<_> = a4
            .labels
            .iter()
            .map(|&(l, t)| (if l == 0 { 2 } else { l }, t))
            .collect();
        assert_eq!(a6.labels, labels4, "{at}: RFC 4950 labels");
        if !split_returns {
            assert_eq!(a6.reply_ttl, a4.reply_ttl, "{at}: reply TTL");
        }
    }
    answered
}

#[test]
fn ipv6_traces_show_what_ipv4_traces_show_on_every_topology() {
    let mut classes = Vec::new();
    for (name, text) in topologies() {
        let crossed = compare(&name, &text, None);
        // an MPLS-free topology (the ECMP case, the BGP speaker's) crosses none
        assert!(
            !crossed.is_empty() || name.starts_with("ecmp") || !text.contains("[[lsp]]"),
            "{name}: no tunnel crossed"
        );
        classes.extend(crossed);
    }
    for c in [
        TunnelClass::Explicit,
        TunnelClass::Implicit,
        TunnelClass::Opaque,
        TunnelClass::InvisiblePhp,
        TunnelClass::InvisibleUhp,
    ] {
        assert!(classes.contains(&c), "no {c:?} tunnel crossed");
    }
}

/// The truth's explicit and implicit tunnels show every LSR in order over IPv6, with
/// the label stack (RFC 4950 in ICMPv6) where the tunnel is explicit and none where it
/// is implicit; an opaque tunnel shows its egress with IPv6 explicit null (label 2),
/// whose LSE-TTL is not 1.
#[test]
fn ipv6_traces_show_the_tunnels_of_the_truth() {
    let topo = Topology::reference();
    let truth = Lab::new(topo.clone()).truth();
    let mut seen = 0;
    for d in &truth.destinations {
        let hops = trace(&topo, d.dst, true);
        let from: Vec<_> = hops.iter().map(|h| h.as_ref().map(|a| a.from)).collect();
        for t in d.tunnels.iter().filter(|t| t.whole) {
            let labelled = |a: Ipv4Addr| {
                let k = from.iter().position(|f| *f == Some(a)).unwrap_or_else(|| {
                    panic!("{}: {a} of tunnel {} not in the IPv6 trace", d.name, t.lsp)
                });
                hops[k].as_ref().unwrap().labels.clone()
            };
            match t.class {
                TunnelClass::Explicit | TunnelClass::Implicit => {
                    let at: Vec<_> = t
                        .lsrs
                        .iter()
                        .map(|&l| from.iter().position(|f| *f == Some(l)))
                        .collect();
                    assert!(at.iter().all(Option::is_some), "{}: {at:?}", d.name);
                    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}: order", d.name);
                    for &l in &t.lsrs {
                        let labels = labelled(l);
                        let explicit = t.class == TunnelClass::Explicit;
                        assert_eq!(!labels.is_empty(), explicit, "{}: {l}", d.name);
                    }
                }
                TunnelClass::Opaque => {
                    let labels = labelled(t.egress);
                    assert!(labels.first().is_some_and(|l| l.1 != 1), "{}", d.name);
                    // the penultimate LSR swapped to IPv6 explicit null (UHP)
                    assert_eq!(labels[0].0, 2, "{}", d.name);
                }
                _ => {}
            }
            seen += 1;
        }
    }
    assert!(seen >= 3, "only {seen} tunnels crossed");
}

/// Every router of the reference topology given one vendor profile at a time: the IPv6
/// traces still match the IPv4 ones of the <64,64> twin (whose TTL rules differ per
/// vendor: what it pushes on the packets it originates, its labels).
#[test]
fn every_vendor_profile_answers_over_ipv6() {
    for v in Vendor::ALL {
        assert_eq!(v.signature6(), (64, 64));
        compare(v.name(), vtnt_lab::REFERENCE_TOML, Some(v));
    }
}

const VP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

/// Sends `probe` from the vantage point of the reference topology; every answer.
fn answers(probe: &[u8]) -> Vec<Vec<u8>> {
    let mut lab = Lab::new(Topology::reference());
    lab.handle_packet(Instant::ZERO, Port(0), probe);
    lab.drain().into_iter().map(|(_, _, b)| b).collect()
}

/// `p`'s upper-layer checksum is right (the pseudo-header included).
fn checksum_ok(p: &[u8]) -> bool {
    let h = ipv6::header(p).unwrap();
    let m = &p[HEADER_LEN..];
    let pseudo = checksum::pseudo_v6(h.src, h.dst, h.protocol, m.len() as u32);
    !checksum::add(checksum::sum(m), pseudo) == 0
}

fn ip6(dst: Ipv4Addr, hop_limit: u8) -> Ip6 {
    Ip6 {
        src: to_v6(VP),
        dst: to_v6(dst),
        hop_limit,
        traffic_class: 0,
        flow_label: 0x12345,
    }
}

/// A UDP probe from the vantage point to `dst`'s twin with `hop_limit` and `payload`.
fn udp6(dst: Ipv4Addr, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; 200];
    let udp = Udp {
        sport: 40000,
        dport: 33435,
        payload,
        checksum: None,
    };
    let n = build6::udp6(&mut buf, &ip6(dst, hop_limit), &udp).unwrap();
    buf[..n].to_vec()
}

fn host(name: &str) -> Ipv4Addr {
    Lab::new(Topology::reference())
        .truth()
        .by_name(name)
        .unwrap()
        .dst
}

#[test]
fn hosts_answer_udp_with_port_unreachable_and_tcp_as_over_ipv4() {
    let dst = host("invisible-uhp");
    let mut buf = [0u8; 200];
    let got = answers(&udp6(dst, 64, &[7; 12]));
    assert_eq!(got.len(), 1);
    assert!(checksum_ok(&got[0]));
    let r = reply6::parse(&got[0]).unwrap();
    assert_eq!(r.src, IpAddr::V6(to_v6(dst)));
    assert_eq!(r.dst, IpAddr::V6(to_v6(VP)));
    let Body::IcmpError {
        icmp_type,
        code,
        quote,
        ..
    } = r.body
    else {
        panic!("{:?}", r.body)
    };
    assert_eq!((icmp_type, code), (icmp6_type::DEST_UNREACH, 4));
    assert!(matches!(
        quote.transport,
        QuotedTransport::Udp { dport: 33435, .. }
    ));

    for (port, want) in [
        (80, tcp_flags::SYN | tcp_flags::ACK),
        (22, tcp_flags::RST | tcp_flags::ACK),
    ] {
        let syn = Tcp {
            sport: 40001,
            dport: port,
            seq: 1000,
            ack: 0,
            flags: tcp_flags::SYN,
            window: 1024,
        };
        let n = build6::tcp6(&mut buf, &ip6(dst, 64), &syn).unwrap();
        let got = answers(&buf[..n]);
        assert_eq!(got.len(), 1, "port {port}");
        assert!(checksum_ok(&got[0]), "port {port}");
        let r = reply6::parse(&got[0]).unwrap();
        let Body::Tcp {
            flags, ack, sport, ..
        } = r.body
        else {
            panic!("{:?}", r.body)
        };
        assert_eq!((flags, ack, sport), (want, 1001, port));
        assert_eq!(ipv6::header(&got[0]).unwrap().protocol, proto::TCP);
    }
}

#[test]
fn routers_answer_echo_requests_and_time_exceeded_in_icmpv6_with_right_checksums() {
    let gw = Ipv4Addr::new(192, 0, 2, 1);
    let mut buf = [0u8; 200];
    let echo = vtnt_wire::build::Echo {
        icmp_type: icmp6_type::ECHO_REQUEST,
        ident: 7,
        seq: 9,
        payload: &[1, 2, 3, 4],
        checksum: None,
    };
    let n = build6::icmp6_echo(&mut buf, &ip6(gw, 64), &echo).unwrap();
    let got = answers(&buf[..n]);
    assert_eq!(got.len(), 1);
    assert!(checksum_ok(&got[0]));
    let r = reply6::parse(&got[0]).unwrap();
    assert_eq!((r.src, r.ttl), (IpAddr::V6(to_v6(gw)), 64));
    let Body::Echo {
        icmp_type,
        ident,
        seq,
        payload,
        ..
    } = r.body
    else {
        panic!("{:?}", r.body)
    };
    assert_eq!(
        (icmp_type, ident, seq, payload),
        (icmp6_type::ECHO_REPLY, 7, 9, &[1u8, 2, 3, 4][..])
    );

    // hop limit 3 towards `explicit`: e2, the first LSR, expires it with its label
    let dst = host("explicit");
    let n = build6::icmp6_echo(&mut buf, &ip6(dst, 3), &echo).unwrap();
    let got = answers(&buf[..n]);
    assert_eq!(got.len(), 1);
    assert!(checksum_ok(&got[0]));
    let r = reply6::parse(&got[0]).unwrap();
    let IpAddr::V6(from) = r.src else { panic!() };
    assert_eq!(from_v6(from), Some("100.64.2.2".parse().unwrap()));
    assert_eq!(r.ttl, 62, "64, less e1 and gw on the way back");
    let Body::IcmpError {
        icmp_type,
        code,
        quote,
        ext,
        ..
    } = r.body
    else {
        panic!("{:?}", r.body)
    };
    assert_eq!(
        (icmp_type, code, quote.ttl),
        (icmp6_type::TIME_EXCEEDED, 0, 1)
    );
    let labels: Vec<_> = ext.unwrap().mpls_stack().map(|l| l.ttl()).collect();
    assert_eq!(labels, [1]);
}

/// IPv6 addresses outside the lab's /96 lead nowhere: no route (ICMPv6 1/0) from the
/// gateway; a cut IPv6 packet is counted as malformed.
#[test]
fn ipv6_outside_the_lab_and_cut_packets_are_refused() {
    let mut buf = [0u8; 200];
    let echo = vtnt_wire::build::Echo {
        icmp_type: icmp6_type::ECHO_REQUEST,
        ident: 7,
        seq: 9,
        payload: &[],
        checksum: None,
    };
    let mut ip = ip6(VP, 64);
    ip.dst = Ipv6Addr::new(0x2001, 0xdb8, 0x65, 0, 0, 0, 0xc000, 0x201);
    let n = build6::icmp6_echo(&mut buf, &ip, &echo).unwrap();
    let got = answers(&buf[..n]);
    assert_eq!(got.len(), 1);
    let r = reply6::parse(&got[0]).unwrap();
    let Body::IcmpError {
        icmp_type, code, ..
    } = r.body
    else {
        panic!("{:?}", r.body)
    };
    assert_eq!((icmp_type, code), (icmp6_type::DEST_UNREACH, 0));

    let mut lab = Lab::new(Topology::reference());
    lab.handle_packet(Instant::ZERO, Port(0), &buf[..n - 1]);
    lab.handle_packet(Instant::ZERO, Port(0), &buf[..39]);
    assert_eq!(lab.stats().malformed, 2);
    assert!(lab.drain().is_empty());
}

/// The truth's IPv6 addresses are those IPv6 traces show: every answer of every trace of
/// the reference topology comes from an `addresses6` of the truth's routers or from the
/// destination's twin; the vantage point's `addr6` is its address's twin.
#[test]
fn the_truth_lists_the_ipv6_addresses_traces_show() {
    let topo = Topology::reference();
    let truth = Lab::new(topo.clone()).truth();
    assert_eq!(truth.vantage_points[0].addr6, to_v6(VP));
    let known: Vec<Ipv6Addr> = truth
        .routers
        .iter()
        .flat_map(|r| {
            assert_eq!(r.signature6, [64, 64], "{}", r.name);
            r.addresses6.iter().copied()
        })
        .collect();
    for d in &truth.destinations {
        for a in trace(&topo, d.dst, true).iter().flatten() {
            let from = to_v6(a.from);
            assert!(
                known.contains(&from) || a.from == d.dst,
                "{}: {from}",
                d.name
            );
        }
    }
}

/// `text` with the routers named in `names` IPv4 only (`ipv4-only = true`).
fn ipv4_only(text: &str, names: &[String]) -> String {
    let mut out = String::new();
    let mut in_router = false;
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        let l = line.trim();
        if l.starts_with("[[") {
            in_router = l == "[[router]]";
        }
        let named = |n: &String| l == format!("name = \"{n}\"");
        if in_router && names.iter().any(named) {
            out.push_str("ipv4-only = true\n");
        }
    }
    out
}

/// A 6PE core (RFC 4798): the reference's explicit tunnel with IPv4-only LSRs. Over IPv6
/// they still answer at their hops, with their labels, from the IPv4-mapped address of
/// the address they answer IPv4 from, their errors carried on to the egress first (RFC
/// 3032 section 2.3.2): they come back with a lower hop limit than the IPv4 answers,
/// which the LSRs route back themselves. Their IPv6 twins have no route, and the truth
/// lists no IPv6 address for them.
#[test]
fn a_6pe_core_answers_answer_from_mapped_addresses_along_the_lsp() {
    let plain = Lab::new(Topology::reference()).truth();
    let (d, t) = plain
        .destinations
        .iter()
        .find_map(|d| {
            let t = d.tunnels.iter().find(|t| t.lsp == "explicit" && t.whole)?;
            Some((d, t))
        })
        .expect("the explicit tunnel");
    let lsrs: Vec<String> = plain
        .routers
        .iter()
        .filter(|r| r.addresses.iter().any(|a| t.lsrs.contains(a)))
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(lsrs.len(), t.lsrs.len(), "{lsrs:?}");
    // a 6PE core carries IPv6 labelled both ways: the answers' way back is an LSP too
    let mut text = ipv4_only(vtnt_lab::REFERENCE_TOML, &lsrs);
    text.push_str("\n[[lsp]]\nname = \"explicit-back\"\ningress = \"e4\"\negress = \"e1\"\n");
    let topo = Topology::parse(&text, "6pe.toml").unwrap();
    let truth = Lab::new(topo.clone()).truth();
    for r in truth.routers.iter() {
        let core = lsrs.contains(&r.name);
        assert_eq!(
            (r.ipv4_only, r.addresses6.is_empty()),
            (core, core),
            "{}",
            r.name
        );
    }
    let v4 = trace(&edit(&text, None, true), d.dst, false);
    let v6 = trace(&topo, d.dst, true);
    let mut label6 = Vec::new();
    for &l in &t.lsrs {
        let k = v4
            .iter()
            .position(|h| h.as_ref().is_some_and(|a| a.from == l));
        let k = k.unwrap_or_else(|| panic!("{l} not in the IPv4 trace"));
        let (a4, a6) = (v4[k].as_ref().unwrap(), v6[k].as_ref().expect("answered"));
        assert_eq!((a6.from, a6.q_ttl), (l, a4.q_ttl), "hop {}", k + 1);
        // RFC 4798: the transport label over the egress's 6PE label (S=1), whose TTL is
        // the hop limit the ingress left (uniform; no LSR touches it)
        assert_eq!(
            a6.labels[..1],
            a4.labels[..],
            "hop {}: RFC 4950 labels",
            k + 1
        );
        assert_eq!(a6.labels.len(), 2, "hop {}: {:?}", k + 1, a6.labels);
        assert_eq!(Some(a6.labels[1].1), a6.q_ttl, "hop {}: 6PE LSE-TTL", k + 1);
        label6.push(a6.labels[1].0);
        assert!(
            a6.reply_ttl < a4.reply_ttl,
            "hop {}: carried to the egress first ({} vs {})",
            k + 1,
            a6.reply_ttl,
            a4.reply_ttl
        );
        // on the wire: the IPv4-mapped source
        let mut buf = [0u8; 200];
        let mut lab = Lab::new(topo.clone());
        lab.handle_packet(Instant::ZERO, Port(0), &udp6(d.dst, k as u8 + 1, &[0; 12]));
        let got = lab.drain();
        let r = reply6::parse(&got[0].2).unwrap();
        assert_eq!(r.src, IpAddr::V6(l.to_ipv6_mapped()), "hop {}", k + 1);
        assert!(checksum_ok(&got[0].2));
        // and its IPv6 twin is nowhere
        let echo = vtnt_wire::build::Echo {
            icmp_type: icmp6_type::ECHO_REQUEST,
            ident: 7,
            seq: 9,
            payload: &[],
            checksum: None,
        };
        let n = build6::icmp6_echo(&mut buf, &ip6(l, 64), &echo).unwrap();
        let mut lab = Lab::new(topo.clone());
        lab.handle_packet(Instant::ZERO, Port(0), &buf[..n]);
        let got = lab.drain();
        let r = reply6::parse(&got[0].2).unwrap();
        assert!(
            matches!(
                r.body,
                Body::IcmpError {
                    icmp_type: icmp6_type::DEST_UNREACH,
                    code: 0,
                    ..
                }
            ),
            "{l}'s twin: {:?}",
            r.body
        );
    }
    // one 6PE label, the egress's, which PHP leaves it to pop: where the probe expires
    // there it quotes that label alone (LSE-TTL 1, the hop limit the ingress left),
    // where over IPv4 it quotes nothing
    label6.dedup();
    assert_eq!(label6.len(), 1, "{label6:?}");
    let k = v4
        .iter()
        .position(|h| h.as_ref().is_some_and(|a| a.from == t.egress))
        .expect("the egress answers");
    let (a4, a6) = (v4[k].as_ref().unwrap(), v6[k].as_ref().unwrap());
    assert_eq!((a4.labels.len(), a4.q_ttl), (0, Some(1)));
    assert_eq!(a6.from, t.egress);
    assert_eq!(a6.labels, [(label6[0], 1)]);
    assert!(a6.q_ttl > Some(1), "{:?}", a6.q_ttl);
    let tt = truth.destinations.iter().flat_map(|d| &d.tunnels);
    let tt: Vec<_> = tt.filter(|x| x.lsp == "explicit" && x.whole).collect();
    assert!(!tt.is_empty());
    for x in tt {
        assert_eq!(
            (x.class6, x.revelation6),
            (Some(TunnelClass::Explicit), Some(Revelation::NotNeeded))
        );
    }
    // the rest of the path answers as it does with a dual-stack core
    let dual = text.replace("ipv4-only = true\n", "");
    let before = trace(&Topology::parse(&dual, "dual.toml").unwrap(), d.dst, true);
    for (k, (a, b)) in before.iter().zip(&v6).enumerate() {
        let (Some(a), Some(b)) = (a, b) else { continue };
        if !t.lsrs.contains(&a.from) && a.from != t.egress {
            assert_eq!(
                (a.from, a.reply_ttl),
                (b.from, b.reply_ttl),
                "hop {}",
                k + 1
            );
        }
    }
}

/// A 6PE core under an invisible PHP tunnel (no TTL propagation, RFC 4950): over IPv4
/// the egress quotes nothing, over IPv6 it receives and quotes the 6PE label the
/// penultimate hop left, LSE-TTL 255 minus the LSRs (RFC 3443 pipe: the ingress pushed
/// 255 on both labels), so the tunnel is opaque over IPv6, and the truth says so with
/// no revelation (its LSRs have no IPv6 to aim at).
#[test]
fn a_6pe_core_makes_an_invisible_php_tunnel_opaque_over_ipv6() {
    let topo = Topology::reference()
        .with_6pe_cores(&["invisible-php-dpr", "opaque"])
        .unwrap();
    assert!(Topology::reference().with_6pe_cores(&["nothing"]).is_err());
    let truth = Lab::new(topo.clone()).truth();
    let (d, t) = truth
        .destinations
        .iter()
        .find_map(|d| {
            let t = d.tunnels.iter().find(|t| t.lsp == "invisible-php-dpr")?;
            Some((d, t))
        })
        .expect("the tunnel");
    assert_eq!(t.class, TunnelClass::InvisiblePhp);
    assert_eq!(t.revelation, Revelation::Dpr);
    assert_eq!(
        (t.class6, t.revelation6),
        (Some(TunnelClass::Opaque), Some(Revelation::None))
    );
    let v4 = trace(&edit(&topo.to_toml(), None, true), d.dst, false);
    let v6 = trace(&topo, d.dst, true);
    let k = v4
        .iter()
        .position(|h| h.as_ref().is_some_and(|a| a.from == t.egress))
        .expect("the egress answers");
    assert_eq!(v4[k].as_ref().unwrap().labels, []);
    let a6 = v6[k].as_ref().expect("the egress answers over IPv6");
    assert_eq!(a6.from, t.egress);
    assert_eq!(a6.labels.len(), 1, "{:?}", a6.labels);
    assert_eq!(a6.labels[0].1, 255 - t.lsrs.len() as u8);
    // IPv4 is untouched: the same answers as on the reference
    let plain = trace(&edit(vtnt_lab::REFERENCE_TOML, None, true), d.dst, false);
    assert_eq!(plain, v4);
    // an opaque (UHP) 6PE core: the transport label its egress pops and quotes is
    // IPv4's explicit null (0), not IPv6's (2) as on a dual-stack core (the 6PE label
    // under it is popped too; the lab's UHP egress quotes the top label only)
    let t = truth
        .destinations
        .iter()
        .flat_map(|d| &d.tunnels)
        .find(|t| t.lsp == "opaque" && t.whole)
        .expect("the opaque tunnel");
    let d = truth.destinations.iter().find(|d| d.tunnels.contains(t));
    let dst = d.unwrap().dst;
    let egress_quote = |topo: &Topology| {
        let v6 = trace(topo, dst, true);
        let a = v6.into_iter().flatten().find(|a| a.from == t.egress);
        a.expect("the egress answers").labels
    };
    let dual = egress_quote(&Topology::reference());
    assert_eq!(dual.len(), 1);
    assert_eq!(dual[0].0, 2, "IPv6 explicit null on a dual-stack core");
    assert_eq!(egress_quote(&topo), [(0, dual[0].1)]);
    assert_eq!(t.class6, Some(TunnelClass::Opaque));
}
