//! Real packets for the tests that compare verdicts with iptables' own (this crate's
//! `iptables.rs`, and `vtnt-fw-linux`'s NF test, which includes this file): a router
//! namespace between a sender and a receiver, rules restored into it, and datagrams
//! (`vtnt_fw::gen::datagram`) sent from inside a namespace.

#![allow(dead_code)]

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::process::Stdio;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
pub use vtnt_fw::gen::datagram;
use vtnt_netns::NetNs;

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
