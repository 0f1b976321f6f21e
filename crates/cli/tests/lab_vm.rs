//! The VM front: Ethernet frames over UDP on 127.0.0.1, as QEMU's `-netdev dgram` /
//! `-netdev socket,udp=` send them. Two guests at once (plain UDP sockets speaking
//! Ethernet, exactly what QEMU puts on the wire), then a real QEMU whose iPXE firmware
//! sends DHCP frames through the netdev string `vm.json` gives. Root needed.

mod lab_common;

use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

use lab_common::{vtnt, Lab};
use vtnt_wire::build::{icmp_echo, Echo, Ip};
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

struct Guest {
    sock: UdpSocket,
    mac: [u8; 6],
    addr: Ipv4Addr,
    gw_mac: [u8; 6],
}

impl Guest {
    fn attach(port: u16, addr: Ipv4Addr, last: u8) -> Guest {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(("127.0.0.1", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mac = [0x52, 0x54, 0, 0x76, 0x74, last];
        sock.send(&arp_request(mac, addr, Ipv4Addr::new(192, 0, 2, 1)))
            .unwrap();
        let mut b = [0u8; 1600];
        let n = sock.recv(&mut b).unwrap();
        assert!(
            n >= 42 && b[12..14] == [8, 6] && b[20..22] == [0, 2],
            "ARP reply"
        );
        assert_eq!(&b[0..6], &mac);
        assert_eq!(&b[28..32], &[192, 0, 2, 1]);
        let gw_mac = [b[22], b[23], b[24], b[25], b[26], b[27]];
        Guest {
            sock,
            mac,
            addr,
            gw_mac,
        }
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
