//! Real packets for the tests that compare verdicts with iptables' own (this crate's
//! `iptables.rs`, and `vtnt-fw-linux`'s NF test, which includes this file): a router
//! namespace between a sender and a receiver, rules restored into it, a trace header
//! made a datagram, and datagrams sent from inside a namespace.

#![allow(dead_code)]

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::process::Stdio;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use vtnt_fw::gen::Header;
use vtnt_netns::NetNs;
use vtnt_wire::build::{self, Echo, IcmpError, Ip, Tcp, Udp};

/// The three namespaces: sender (100.64.1.1) — router — receiver (100.64.2.2).
pub struct Path {
    pub sender: NetNs,
    pub router: NetNs,
    pub receiver: NetNs,
}

pub fn path() -> Path {
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
        receiver,
    }
}

/// Loads iptables-save `text` into `router` with `iptables-restore`.
pub fn restore(router: &NetNs, text: &str) {
    let mut child = router
        .command("iptables-restore")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "iptables-restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The datagram of a trace header (TCP segments carry ACK), with IP ID `ipid`.
pub fn datagram(h: &Header, ipid: u16) -> Vec<u8> {
    let ip = Ip {
        src: h.src,
        dst: h.dst,
        ttl: 64,
        tos: 0,
        ipid,
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
pub fn send_from(ns: &NetNs, packets: Vec<Vec<u8>>) {
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
