//! Our verdicts against iptables' own: a generated rule set loaded with
//! `iptables-restore` into the FORWARD chain of a router namespace between a sender and
//! a receiver namespace, a trace of packets drawn from the set sent through it from the
//! sender (raw IPv4, our own headers), and iptables' per-rule packet counters
//! (`iptables-save -c`) compared with how many of the same packets our classifier says
//! each rule decided. Every packet stays in the three namespaces: the router's only
//! route leads to the receiver, which forwards nothing.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::process::Stdio;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use vtnt_fw::gen::{self, Family, Header, RuleSpec, TraceSpec};
use vtnt_fw::{print, Classifier, CtState, Hook, IfId, Options, Packet};
use vtnt_netns::NetNs;
use vtnt_wire::build::{self, Echo, IcmpError, Ip, Tcp, Udp};

/// The three namespaces: sender (100.64.1.1) — router — receiver (100.64.2.2).
struct Path {
    sender: NetNs,
    router: NetNs,
    _receiver: NetNs,
}

fn path() -> Path {
    let tag = vtnt_netns::unique_name("fwipt");
    let sender = NetNs::create(&format!("{tag}-s")).unwrap();
    let router = NetNs::create(&format!("{tag}-r")).unwrap();
    let receiver = NetNs::create(&format!("{tag}-d")).unwrap();
    for key in [
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.default.rp_filter",
    ] {
        router.sysctl(key, "0").unwrap();
    }
    sender
        .link("s0", "100.64.1.1/30", &router, "w0", "100.64.1.2/30")
        .unwrap();
    router
        .link("l0", "100.64.2.1/30", &receiver, "r0", "100.64.2.2/30")
        .unwrap();
    for dev in ["w0", "l0"] {
        router
            .sysctl(&format!("net.ipv4.conf.{dev}.rp_filter"), "0")
            .unwrap();
    }
    router.sysctl("net.ipv4.ip_forward", "1").unwrap();
    sender
        .ip(&["route", "add", "default", "via", "100.64.1.2"])
        .unwrap();
    router
        .ip(&["route", "add", "default", "via", "100.64.2.2"])
        .unwrap();
    Path {
        sender,
        router,
        _receiver: receiver,
    }
}

/// The datagram of a trace header (TCP segments carry ACK).
fn datagram(h: &Header) -> Vec<u8> {
    let ip = Ip {
        src: h.src,
        dst: h.dst,
        ttl: 64,
        tos: 0,
        ipid: 1,
    };
    let mut b = vec![0u8; 128];
    let n = match h.proto {
        6 => {
            let t = Tcp {
                sport: h.sport,
                dport: h.dport,
                seq: 1,
                ack: 1,
                flags: 0x10,
                window: 64,
            };
            build::tcp(&mut b, &ip, &t).unwrap()
        }
        17 => {
            let u = Udp {
                sport: h.sport,
                dport: h.dport,
                payload: &[0; 4],
                checksum: None,
            };
            build::udp(&mut b, &ip, &u).unwrap()
        }
        1 if matches!(h.sport, 0 | 8) => {
            let e = Echo {
                icmp_type: h.sport as u8,
                ident: 1,
                seq: 1,
                payload: &[0; 4],
                checksum: None,
            };
            let n = build::icmp_echo(&mut b, &ip, &e).unwrap();
            b[21] = h.dport as u8; // the code, then the checksum again
            b[22..24].fill(0);
            let c = vtnt_wire::checksum::of(&b[20..n]);
            b[22..24].copy_from_slice(&c.to_be_bytes());
            n
        }
        1 => {
            let quoted = [
                0x45u8, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2,
                0, 8, 0, 0,
            ];
            let e = IcmpError {
                icmp_type: h.sport as u8,
                code: h.dport as u8,
                original: &quoted,
                quote_len: 28,
                mpls: &[],
            };
            build::icmp_error(&mut b, &ip, &e).unwrap()
        }
        p => {
            // another protocol: an IPv4 header and four bytes
            let mut d = vec![0x45, 0, 0, 24, 0, 1, 0, 0, 64, p, 0, 0];
            d.extend_from_slice(&h.src.octets());
            d.extend_from_slice(&h.dst.octets());
            let c = vtnt_wire::checksum::of(&d);
            d[10..12].copy_from_slice(&c.to_be_bytes());
            d.extend_from_slice(&[0; 4]);
            return d;
        }
    };
    b.truncate(n);
    b
}

/// Sends `packets` from inside `ns` on a raw IPPROTO_RAW socket (our headers as they are).
fn send_from(ns: &NetNs, packets: Vec<Vec<u8>>) {
    let name = ns.name().to_string();
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255))).unwrap();
        for (i, p) in packets.iter().enumerate() {
            let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
            s.send_to(p, &SockAddr::from(SocketAddrV4::new(dst, 0)))
                .unwrap();
            if i % 64 == 63 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    })
    .join()
    .unwrap();
}

/// `iptables-save -c`'s FORWARD counters: per rule, and the policy's.
fn counters(router: &NetNs) -> (Vec<u64>, u64) {
    let out = router
        .exec("iptables-save", &["-c", "-t", "filter"])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let packets = |s: &str| {
        s.trim_start_matches('[')
            .split(':')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let mut rules = Vec::new();
    let mut policy = 0;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix(":FORWARD ") {
            policy = packets(rest.split_whitespace().nth(1).unwrap());
        } else if l.starts_with('[') && l.contains(" -A FORWARD ") {
            rules.push(packets(l.split_whitespace().next().unwrap()));
        }
    }
    (rules, policy)
}

#[test]
fn iptables_counts_what_our_classifier_decides() {
    vtnt_testkit::require_root!("ip", "iptables-restore", "iptables-save");
    let p = path();
    for (family, seed) in [(Family::Fw, 1), (Family::Acl, 2), (Family::Ipc, 3)] {
        let spec = RuleSpec {
            family,
            ..RuleSpec::new(800, seed)
        };
        let rules = gen::rules(&spec);
        let text = print::iptables_save(&rules).unwrap();
        let mut restore = p
            .router
            .command("iptables-restore")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        restore
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = restore.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "iptables-restore: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // iptables prints our rules exactly as we wrote them
        let saved = String::from_utf8(
            p.router
                .exec("iptables-save", &["-t", "filter"])
                .unwrap()
                .stdout,
        )
        .unwrap();
        let ours: Vec<&str> = text.lines().filter(|l| l.starts_with("-A ")).collect();
        let theirs: Vec<&str> = saved.lines().filter(|l| l.starts_with("-A ")).collect();
        assert_eq!(
            theirs, ours,
            "{family:?}: iptables-save differs from what we wrote"
        );

        let mut trace = gen::trace(
            &rules,
            &TraceSpec {
                packets: 3000,
                seed,
                locality: 0.05,
            },
        );
        // and packets drawn from nothing, most of them for the policy
        let mut rng = vtnt_testkit::Rng::new(seed);
        let routable = |rng: &mut vtnt_testkit::Rng| loop {
            let a = Ipv4Addr::from(rng.next_u64() as u32);
            if !matches!(a.octets()[0], 0 | 100 | 127 | 169 | 224..=255) {
                return a;
            }
        };
        for _ in 0..500 {
            let proto = [6, 17, 1, 47][rng.below(4)];
            let (sport, dport) = match proto {
                1 => ([0, 3, 8, 11][rng.below(4)], rng.below(4) as u16),
                6 | 17 => (rng.next_u64() as u16, rng.next_u64() as u16),
                _ => (0, 0),
            };
            let (src, dst) = (routable(&mut rng), routable(&mut rng));
            trace.push(Header {
                src,
                dst,
                proto,
                sport,
                dport,
                rule: 0,
            });
        }
        let classifier = Classifier::compile(&rules, &Options::default()).unwrap();
        let fwd = rules.hook_chain(Hook::Forward).unwrap();
        let mut want = vec![0u64; rules.chain(fwd).rules.len()];
        let mut want_policy = 0;
        for h in &trace {
            let pk = Packet {
                src: h.src,
                dst: h.dst,
                proto: h.proto,
                sport: h.sport,
                dport: h.dport,
                tcp_flags: 0x10,
                fragment: false,
                in_if: IfId::NONE,
                out_if: IfId::NONE,
                state: CtState::New,
            };
            match classifier.classify(Hook::Forward, &pk).rule {
                Some(r) => want[r.index as usize] += 1,
                None => want_policy += 1,
            }
        }
        send_from(&p.sender, trace.iter().map(datagram).collect());
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (got, got_policy) = counters(&p.router);
        let sent = trace.len() as u64;
        assert_eq!(
            got.iter().sum::<u64>() + got_policy,
            sent,
            "{family:?}: iptables saw another number of packets"
        );
        let decided = want.iter().filter(|&&n| n > 0).count();
        eprintln!("{family:?}: {sent} packets, {decided} rules decided, policy {got_policy}");
        assert!(
            decided > 300 && got_policy > 100,
            "{family:?}: only {decided} rules and {got_policy} policy decisions"
        );
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g, w,
                "{family:?}: rule {i} `{}`: iptables {g}, ours {w}",
                ours[i]
            );
        }
        assert_eq!(got_policy, want_policy, "{family:?}: policy");
    }
}
