//! The VM front: Ethernet frames over UDP on 127.0.0.1, as QEMU's `-netdev dgram` /
//! `-netdev socket,udp=` send them. Two guests at once (plain UDP sockets speaking
//! Ethernet, exactly what QEMU puts on the wire), then a real QEMU whose iPXE firmware
//! sends DHCP frames through the netdev string `vm.json` gives. Then a front onto the
//! lab (`vtnt lab front`, the traceroute-aware NAT) with two guests probing over IPv6 as
//! a guest on the lab itself does, and a hostile one. Root needed.

mod lab_common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::time::Duration;

use lab_common::{vtnt, Lab};
use vtnt_lab::addr::to_v6;
use vtnt_wire::build::{icmp_echo, Echo, Ip, Tcp, Udp};
use vtnt_wire::build6::{icmp6_echo, tcp6, udp6};
use vtnt_wire::ipv6::Ip6;
use vtnt_wire::reply::{parse, Body};

fn vm_json(lab: &Lab) -> serde_json::Value {
    let out = vtnt(&["lab", "vm-netdev", "--name", &lab.name, "--json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn arp_request(mac: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&spa.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa.octets());
    f
}

/// What an IPv6 probe is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Icmp,
    Udp,
    Tcp,
}

struct Guest {
    sock: UdpSocket,
    mac: [u8; 6],
    addr: Ipv4Addr,
    gw_mac: [u8; 6],
}

impl Guest {
    fn attach(port: u16, addr: Ipv4Addr, last: u8) -> Guest {
        Guest::attach_via(port, addr, Ipv4Addr::new(192, 0, 2, 1), last)
    }

    /// A guest at `addr` asking for its gateway `gw` on the front at `port`.
    fn attach_via(port: u16, addr: Ipv4Addr, gw: Ipv4Addr, last: u8) -> Guest {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(("127.0.0.1", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mac = [0x52, 0x54, 0, 0x76, 0x74, last];
        sock.send(&arp_request(mac, addr, gw)).unwrap();
        let mut b = [0u8; 1600];
        let n = sock.recv(&mut b).unwrap();
        assert!(
            n >= 42 && b[12..14] == [8, 6] && b[20..22] == [0, 2],
            "ARP reply"
        );
        assert_eq!(&b[0..6], &mac);
        assert_eq!(&b[28..32], &gw.octets());
        let gw_mac = [b[22], b[23], b[24], b[25], b[26], b[27]];
        Guest {
            sock,
            mac,
            addr,
            gw_mac,
        }
    }

    /// Sends the IPv6 packet `p` from `src` (the guest's twin unless spoofing).
    fn send6(&self, p: &[u8]) {
        let mut f = Vec::from(self.gw_mac);
        f.extend_from_slice(&self.mac);
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(p);
        self.sock.send(&f).unwrap();
    }

    /// An IPv6 probe from `src` to `dst` with `hop_limit`: a Paris ICMPv6 echo request
    /// (ident 0x5151), a Paris UDP datagram or a TCP SYN (source port 0x5151), flow label
    /// 0x5eed6.
    fn probe6(src: Ipv6Addr, dst: Ipv6Addr, kind: Kind, hop_limit: u8, seq: u16) -> Vec<u8> {
        let ip = Ip6 {
            src,
            dst,
            hop_limit,
            traffic_class: 0,
            flow_label: 0x5_eed6,
        };
        let mut p = [0u8; 128];
        let n = match kind {
            Kind::Udp => udp6(
                &mut p,
                &ip,
                &Udp {
                    sport: 0x5151,
                    dport: 33435,
                    payload: &[0; 12],
                    checksum: Some(seq),
                },
            ),
            Kind::Tcp => tcp6(
                &mut p,
                &ip,
                &Tcp {
                    sport: 0x5151,
                    dport: 80,
                    seq: 0x5eed_0000 | u32::from(seq),
                    ack: 0,
                    flags: vtnt_wire::tcp_flags::SYN,
                    window: 5840,
                },
            ),
            Kind::Icmp => icmp6_echo(
                &mut p,
                &ip,
                &Echo {
                    icmp_type: vtnt_wire::icmp6_type::ECHO_REQUEST,
                    ident: 0x5151,
                    seq,
                    payload: &[0; 16],
                    checksum: Some(0x1111),
                },
            ),
        }
        .unwrap();
        p[..n].to_vec()
    }

    /// The next IPv6 packet that comes back to this guest, if one does within the read
    /// timeout.
    fn recv6(&self) -> Option<Vec<u8>> {
        let mut b = [0u8; 1600];
        let n = self.sock.recv(&mut b).ok()?;
        assert_eq!(&b[0..6], &self.mac, "addressed to this guest");
        assert_eq!(&b[12..14], &[0x86, 0xdd]);
        Some(b[14..n].to_vec())
    }

    /// Sends an echo request with `ttl`; returns the IPv4 packet that comes back.
    fn probe(&self, dst: Ipv4Addr, ttl: u8, seq: u16) -> Vec<u8> {
        let mut f = Vec::from(self.gw_mac);
        f.extend_from_slice(&self.mac);
        f.extend_from_slice(&[8, 0]);
        let mut p = [0u8; 64];
        let ip = Ip {
            src: self.addr,
            dst,
            ttl,
            tos: 0,
            ipid: seq,
        };
        let n = icmp_echo(
            &mut p,
            &ip,
            &Echo {
                icmp_type: 8,
                ident: 0x5151,
                seq,
                payload: &[0; 16],
                checksum: Some(0x1111),
            },
        )
        .unwrap();
        f.extend_from_slice(&p[..n]);
        self.sock.send(&f).unwrap();
        let mut b = [0u8; 1600];
        let n = self.sock.recv(&mut b).expect("an answer");
        assert_eq!(&b[0..6], &self.mac, "addressed to this guest");
        assert_eq!(&b[12..14], &[8, 0]);
        b[14..n].to_vec()
    }
}

/// Two guests on the lab's VM front at once, then guests behind a front onto the same lab
/// over IPv6 ([`guests_behind_a_front_probe_over_ipv6`]: one lab for both).
#[test]
fn two_vms_probe_the_lab_at_once() {
    vtnt_testkit::require_root!();
    let lab = Lab::up("vms", None);
    let v = vm_json(&lab);
    let port = v["port"].as_u64().unwrap() as u16;
    let a = Guest::attach(port, Ipv4Addr::new(192, 0, 2, 10), 10);
    let b = Guest::attach(port, Ipv4Addr::new(192, 0, 2, 11), 11);
    // TTL 3 towards the explicit tunnel: e2 answers with a label (LSE-TTL 1).
    for (g, seq) in [(&a, 1u16), (&b, 2), (&a, 3)] {
        let p = g.probe(Ipv4Addr::new(203, 0, 113, 10), 3, seq);
        let r = parse(&p).unwrap();
        assert_eq!(r.dst, std::net::IpAddr::V4(g.addr));
        assert_eq!(r.src.to_string(), "100.64.2.2");
        let Body::IcmpError {
            icmp_type: 11,
            ext: Some(ext),
            quote,
            ..
        } = r.body
        else {
            panic!("{r:?}")
        };
        assert_eq!(ext.mpls_stack().next().unwrap().ttl(), 1);
        assert!(
            matches!(quote.transport, vtnt_wire::reply::QuotedTransport::Icmp { seq: s, .. } if s == seq)
        );
    }
    // and the destination itself
    let p = b.probe(Ipv4Addr::new(203, 0, 113, 10), 64, 4);
    assert!(matches!(
        parse(&p).unwrap().body,
        Body::Echo {
            icmp_type: 0,
            seq: 4,
            ..
        }
    ));
    guests_behind_a_front_probe_over_ipv6(&lab, &a);
}

/// The IPv6 twin of `a` as the lab numbers it.
fn twin(a: [u8; 4]) -> Ipv6Addr {
    to_v6(Ipv4Addr::from(a))
}

/// What a router or host said, without the addresses that differ between a guest on the
/// lab and one behind a front: source, hop limit, ICMPv6 type and code, label stack,
/// quoted hop limit; the echo reply's sequence number; a TCP answer's ports, flags and
/// acknowledgement.
fn answer(p: &[u8]) -> (IpAddr, u8, String) {
    let r = vtnt_wire::reply6::parse(p).unwrap();
    let what = match r.body {
        Body::IcmpError {
            icmp_type,
            code,
            quote,
            ext,
            ..
        } => {
            let labels: Vec<u32> = ext
                .map(|e| e.mpls_stack().map(|l| l.label()).collect())
                .unwrap_or_default();
            format!(
                "{icmp_type}/{code} labels {labels:?} quoted hop limit {}",
                quote.ttl
            )
        }
        Body::Echo { icmp_type, seq, .. } => format!("{icmp_type} seq {seq}"),
        // a SYN-ACK's own sequence number is the host's choice per connection
        Body::Tcp {
            sport,
            dport,
            ack,
            flags,
            ..
        } => format!("TCP {sport} > {dport} ack {ack} flags {flags:#x}"),
        other => format!("{other:?}"),
    };
    (r.src, r.ttl, what)
}

/// The quoted probe of an ICMPv6 error `r`, as far as it is quoted, equals the probe
/// `p` the guest sent byte for byte, but for the hop limit the router saw.
fn quotes_exactly(r: &[u8], p: &[u8]) -> bool {
    let quoted = match r[44] {
        0 => r.len() - 48,
        words => usize::from(words) * 8,
    };
    let n = quoted.min(p.len());
    let (mut q, mut want) = (r[48..48 + n].to_vec(), p[..n].to_vec());
    q[7] = 0;
    want[7] = 0;
    q == want
}

fn state(name: &str) -> serde_json::Value {
    let t = std::fs::read_to_string(format!("/run/vtnt/lab/{name}/state.json")).unwrap();
    serde_json::from_str(&t).unwrap()
}

/// The front's counters once they count at least `probes` packets from guests.
fn front_stats(name: &str, frames: u64) -> serde_json::Value {
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        let Ok(t) = std::fs::read_to_string(format!("/run/vtnt/lab/{name}/stats.json")) else {
            continue;
        };
        let s: serde_json::Value = serde_json::from_str(&t).unwrap_or_default();
        if s["front"]["vm_frames_in"].as_u64().unwrap_or(0) >= frames {
            return s;
        }
    }
    panic!("the front's stats.json never counted {frames} frames");
}

/// Hop limits probed, from 1: past the explicit tunnel's destination.
const HOPS: u8 = 8;

/// A front onto `lab` (`vtnt lab front --upstream <lab>`): two guests on one identity (a
/// conflict the NAT resolves) trace an explicit tunnel's destination over IPv6, Paris
/// ICMPv6, Paris UDP and TCP SYN, hop limits 1-8 (the destination answers the last ones); every answer
/// equals the one a guest on the lab itself gets (router, hop limit, type, labels,
/// quoted hop limit), with the guest's own probe quoted byte for byte, and the truth's
/// tunnel routers and destination answer. A hostile guest's spoofed sources, public
/// target and flood are refused and counted, never forwarded. `direct` is the lab's
/// guest at 192.0.2.10.
fn guests_behind_a_front_probe_over_ipv6(lab: &Lab, direct: &Guest) {
    let dst = twin([203, 0, 113, 10]);
    let front = Lab {
        name: format!("{}f", lab.name),
    };
    let out = vtnt(&[
        "lab",
        "front",
        "--name",
        &front.name,
        "--upstream",
        &lab.name,
        "--pps",
        "2000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the front probes from the lab's vantage point's IPv6 address
    let vp6 = state(&lab.name)["vp_address6"]
        .as_str()
        .unwrap()
        .to_string();
    let public6 = state(&front.name)["vp_address6"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(public6.split('/').next(), vp6.split('/').next());
    let fport = vm_json(&front)["port"].as_u64().unwrap() as u16;
    let gw = Ipv4Addr::new(10, 254, 0, 1);
    let guests = [
        Guest::attach_via(fport, Ipv4Addr::new(10, 254, 0, 10), gw, 20),
        Guest::attach_via(fport, Ipv4Addr::new(10, 254, 0, 11), gw, 21),
    ];
    let mut frames = 2;
    let mut sources = Vec::new();
    for kind in [Kind::Icmp, Kind::Udp, Kind::Tcp] {
        for hl in 1..=HOPS {
            let seq = u16::from(hl);
            let own = twin([192, 0, 2, 10]);
            direct.send6(&Guest::probe6(own, dst, kind, hl, seq));
            let want = answer(&direct.recv6().expect("the lab answers its own guest"));
            for g in &guests {
                let p = Guest::probe6(twin(g.addr.octets()), dst, kind, hl, seq);
                g.send6(&p);
                frames += 1;
                let r = g.recv6().expect("an answer through the front");
                assert_eq!(&r[24..40], &p[8..24], "to the guest");
                assert_eq!(answer(&r), want, "{kind:?} hop limit {hl}");
                sources.push(answer(&r).0.to_string());
                if r[6] == vtnt_wire::proto::ICMPV6 && r[40] != vtnt_wire::icmp6_type::ECHO_REPLY {
                    assert!(quotes_exactly(&r, &p), "{kind:?} hop limit {hl}: {r:02x?}");
                }
            }
        }
    }
    // the truth: the explicit tunnel's ingress, LSRs and egress answer, then the
    // destination
    let truth = lab.truth();
    let d = truth["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dst"] == "203.0.113.10")
        .expect("the explicit tunnel's destination");
    for tun in d["tunnels"].as_array().unwrap() {
        let mut routers = vec![&tun["ingress"], &tun["egress"]];
        routers.extend(tun["lsrs"].as_array().unwrap());
        for r in routers {
            let a = to_v6(r.as_str().unwrap().parse().unwrap()).to_string();
            assert!(sources.contains(&a), "{a} not among {sources:?}");
        }
    }
    assert_eq!(sources.last(), Some(&dst.to_string()));
    let probes = 3 * 2 * u64::from(HOPS);
    let s = front_stats(&front.name, frames);
    let f = &s["forwarder"];
    assert_eq!(
        (f["forwarded"].as_u64(), f["delivered"].as_u64()),
        (Some(probes), Some(probes)),
        "{s}"
    );
    // the second guest's identity moved once per protocol
    assert_eq!(
        (f["unmatched"].as_u64(), f["rewrites"].as_u64()),
        (Some(0), Some(3)),
        "{s}"
    );
    assert_eq!(s["front"]["probes_out6"].as_u64(), Some(probes), "{s}");

    // A hostile guest: a source off the front's LAN, another guest's address, a public
    // target without consent; nothing leaves, nothing comes back.
    let h = &guests[0];
    let own = twin(h.addr.octets());
    h.sock
        .set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    for p in [
        Guest::probe6(twin([8, 8, 8, 8]), dst, Kind::Icmp, 64, 1),
        Guest::probe6(twin([10, 254, 0, 99]), dst, Kind::Icmp, 64, 1),
        Guest::probe6(own, "2600::1".parse().unwrap(), Kind::Icmp, 64, 1),
    ] {
        h.send6(&p);
        frames += 1;
        assert_eq!(h.recv6(), None, "answered: {p:02x?}");
    }
    // A flood far past the front's 2,000 pps (burst 20): dropped and counted, not queued
    // (200 frames: the front's socket buffer holds them all).
    let flood = 200;
    for k in 0..flood {
        h.send6(&Guest::probe6(own, dst, Kind::Udp, 1, k as u16 + 100));
    }
    frames += flood;
    let s = front_stats(&front.name, frames);
    let f = &s["forwarder"];
    let (sent, dropped) = (
        f["forwarded"].as_u64().unwrap(),
        f["dropped_rate"].as_u64().unwrap(),
    );
    assert_eq!(sent - probes + dropped, flood, "{s}");
    assert!(dropped > 0, "{s}");
    assert_eq!(s["front"]["spoofed"].as_u64(), Some(1), "{s}");
    assert_eq!(f["refused_spoofed"].as_u64(), Some(1), "{s}");
    assert_eq!(f["refused_policy"].as_u64(), Some(2), "{s}");
    assert_eq!(s["front"]["probes_out6"].as_u64(), Some(sent), "{s}");
}

#[test]
fn qemu_attaches_with_the_printed_netdev() {
    vtnt_testkit::require_root!("qemu-system-x86_64");
    let lab = Lab::up("qemu", None);
    let v = vm_json(&lab);
    let g = &v["slot"];
    let mut q = std::process::Command::new("qemu-system-x86_64")
        .args([
            "-nographic",
            "-nodefaults",
            "-m",
            "64",
            "-boot",
            "n",
            "-no-reboot",
        ])
        .args([
            "-netdev",
            g["netdev"].as_str().unwrap(),
            "-device",
            g["device"].as_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("qemu");
    // iPXE in the virtio-net option ROM broadcasts DHCP: frames reach the daemon.
    let stats = format!("/run/vtnt/lab/{}/stats.json", lab.name);
    let mut frames = 0;
    for _ in 0..60 {
        std::thread::sleep(Duration::from_millis(500));
        if let Ok(t) = std::fs::read_to_string(&stats) {
            let s: serde_json::Value = serde_json::from_str(&t).unwrap_or_default();
            frames = s["front"]["vm_frames_in"].as_u64().unwrap_or(0);
            if frames > 0 {
                break;
            }
        }
    }
    let _ = q.kill();
    let _ = q.wait();
    assert!(frames > 0, "no frame from QEMU reached the lab");
}
