//! A real lab (namespace, TUN, daemon) whose VM front holds guests far past its vantage
//! LAN: a guest on slot 1500 (a plain UDP socket speaking Ethernet frames, as QEMU and
//! the unikernel processes do) ARPs its on-link gateway on the VM LAN, pings the lab's
//! gateway and traces a destination with the same hops as the vantage point's own trace;
//! then 250 DHCP clients take leases and the 250th, on the VM LAN, probes with TTL 1 and
//! hears the lab's gateway.
//!
//! The test binary is also the daemon: `control::up` runs `<exe> lab serve ...`, which
//! `main` hands to `vtnt_lab_linux::serve`.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    DhcpMessageType, DhcpPacket, DhcpRepr, EthernetAddress, IpProtocol, Ipv4Packet, Ipv4Repr,
    UdpPacket, UdpRepr, DHCP_CLIENT_PORT, DHCP_SERVER_PORT,
};
use vtnt_lab::tracer::Tracer;
use vtnt_lab::{Lab, Topology};
use vtnt_lab_linux::state::{GuestSlot, GATEWAY_MAC};
use vtnt_lab_linux::{control, ServeOptions, UpOptions};
use vtnt_wire::build::{icmp_echo, Echo, Ip};
use vtnt_wire::reply::{parse, Body};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1..3) == Some(&["lab".to_string(), "serve".to_string()][..]) {
        return serve(&args[3..]);
    }
    if args.iter().any(|a| a == "--list") {
        println!("a_guest_past_slot_1000_and_a_lease_past_200_reach_the_lab: test");
        return;
    }
    a_guest_past_slot_1000_and_a_lease_past_200_reach_the_lab();
    println!("test a_guest_past_slot_1000_and_a_lease_past_200_reach_the_lab ... ok");
}

/// `lab serve --name N --state-dir D --vm-port P --source S --vm-prefix X TOPOLOGY`.
fn serve(a: &[String]) {
    let opt = |k: &str| {
        let i = a.iter().position(|x| x == k).expect(k);
        a[i + 1].clone()
    };
    let o = ServeOptions {
        name: opt("--name"),
        state_dir: opt("--state-dir").into(),
        topology: a.last().expect("topology").into(),
        source: opt("--source"),
        vm_port: opt("--vm-port").parse().unwrap(),
        vm_prefix: opt("--vm-prefix").parse().unwrap(),
        bgp: a.iter().any(|x| x == "--bgp"),
    };
    if let Err(e) = vtnt_lab_linux::serve(&o) {
        eprintln!("lab serve: {e}");
        std::process::exit(1);
    }
}

/// A lab taken down on drop.
struct Running(String);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = control::down(&self.0);
    }
}

/// One guest: a UDP socket on its slot's port, its MAC and address.
struct Guest {
    sock: UdpSocket,
    mac: [u8; 6],
    addr: Ipv4Addr,
}

fn mac_of(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

impl Guest {
    fn new(local_port: u16, front: SocketAddr, mac: [u8; 6], addr: Ipv4Addr) -> Guest {
        let sock = UdpSocket::bind(("127.0.0.1", local_port)).expect("slot port");
        sock.connect(front).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        Guest { sock, mac, addr }
    }

    fn send(&self, dst: [u8; 6], ethertype: u16, payload: &[u8]) {
        let mut f = dst.to_vec();
        f.extend_from_slice(&self.mac);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        self.sock.send(&f).unwrap();
    }

    /// The next frame for us of `ethertype`: its payload.
    fn recv(&self, ethertype: u16) -> Vec<u8> {
        let mut buf = [0u8; 2048];
        loop {
            let n = self.sock.recv(&mut buf).expect("an answer from the front");
            if buf[12..14] == ethertype.to_be_bytes() {
                return buf[14..n].to_vec();
            }
        }
    }

    /// ARP for `who`: the MAC the front answers with.
    fn arp(&self, who: Ipv4Addr) -> [u8; 6] {
        let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
        a.extend_from_slice(&self.mac);
        a.extend_from_slice(&self.addr.octets());
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&who.octets());
        self.send([0xff; 6], 0x0806, &a);
        let r = self.recv(0x0806);
        assert_eq!((&r[6..8], &r[14..18]), (&[0, 2][..], &who.octets()[..]));
        r[8..14].try_into().unwrap()
    }

    /// An echo request to `dst` with `ttl`: who answers, and with what ICMP type.
    fn ping(&self, dst: Ipv4Addr, ttl: u8, seq: u16) -> (Ipv4Addr, u8) {
        let mut b = [0u8; 64];
        let ip = Ip {
            src: self.addr,
            dst,
            ttl,
            tos: 0,
            ipid: seq,
        };
        let e = Echo {
            icmp_type: 8,
            ident: 0x7674,
            seq,
            payload: &[0; 8],
            checksum: Some(0x4242),
        };
        let n = icmp_echo(&mut b, &ip, &e).unwrap();
        self.send(GATEWAY_MAC, 0x0800, &b[..n]);
        let p = self.recv(0x0800);
        let r = parse(&p).expect("an IPv4 answer");
        assert_eq!(r.dst, std::net::IpAddr::V4(self.addr));
        let t = match r.body {
            Body::IcmpError { icmp_type, .. } | Body::Echo { icmp_type, .. } => icmp_type,
            _ => panic!("not ICMP"),
        };
        let std::net::IpAddr::V4(src) = r.src else {
            panic!()
        };
        (src, t)
    }

    /// One DHCP message from this client, as an Ethernet broadcast.
    fn dhcp(&self, kind: DhcpMessageType, requested: Option<Ipv4Addr>, server: Option<Ipv4Addr>) {
        let repr = DhcpRepr {
            message_type: kind,
            transaction_id: u32::from_be_bytes(self.mac[2..6].try_into().unwrap()),
            secs: 0,
            client_hardware_address: EthernetAddress(self.mac),
            client_ip: Ipv4Addr::UNSPECIFIED,
            your_ip: Ipv4Addr::UNSPECIFIED,
            server_ip: Ipv4Addr::UNSPECIFIED,
            router: None,
            subnet_mask: None,
            relay_agent_ip: Ipv4Addr::UNSPECIFIED,
            broadcast: false,
            requested_ip: requested,
            client_identifier: None,
            server_identifier: server,
            parameter_request_list: Some(&[1, 3]),
            dns_servers: None,
            max_size: None,
            lease_duration: None,
            renew_duration: None,
            rebind_duration: None,
            additional_options: &[],
        };
        let n = repr.buffer_len();
        let mut p = vec![0u8; 28 + n];
        let (src, dst) = (Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST);
        let c = ChecksumCapabilities::default();
        let mut ip = Ipv4Packet::new_unchecked(&mut p[..]);
        Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Udp,
            payload_len: 8 + n,
            hop_limit: 64,
        }
        .emit(&mut ip, &c);
        UdpRepr {
            src_port: DHCP_CLIENT_PORT,
            dst_port: DHCP_SERVER_PORT,
        }
        .emit(
            &mut UdpPacket::new_unchecked(ip.payload_mut()),
            &src.into(),
            &dst.into(),
            n,
            |b| repr.emit(&mut DhcpPacket::new_unchecked(b)).unwrap(),
            &c,
        );
        self.send([0xff; 6], 0x0800, &p);
    }

    /// The server's answer: type, address, router, server identifier, mask.
    fn dhcp_answer(
        &self,
    ) -> (
        DhcpMessageType,
        Ipv4Addr,
        Option<Ipv4Addr>,
        Option<Ipv4Addr>,
    ) {
        let p = self.recv(0x0800);
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        let d = DhcpPacket::new_checked(udp.payload()).unwrap();
        let r = DhcpRepr::parse(&d).unwrap();
        (r.message_type, r.your_ip, r.router, r.server_identifier)
    }

    /// DISCOVER, REQUEST: the address leased and its router.
    fn lease(&mut self) -> (Ipv4Addr, Ipv4Addr) {
        self.dhcp(DhcpMessageType::Discover, None, None);
        let (kind, offered, _, server) = self.dhcp_answer();
        assert_eq!(kind, DhcpMessageType::Offer);
        self.dhcp(DhcpMessageType::Request, Some(offered), server);
        let (kind, addr, router, _) = self.dhcp_answer();
        assert_eq!((kind, addr), (DhcpMessageType::Ack, offered));
        self.addr = addr;
        (addr, router.expect("a router"))
    }
}

fn a_guest_past_slot_1000_and_a_lease_past_200_reach_the_lab() {
    vtnt_testkit::require_root!("ip");
    let name = format!("vtf-{}", std::process::id());
    control::up(&UpOptions {
        name: name.clone(),
        topology: None,
        vm_port: 0,
        vm_prefix: None,
        exe: std::env::current_exe().unwrap(),
        exe_args: Vec::new(),
        timeout: Duration::from_secs(20),
        bgp: false,
    })
    .expect("lab up");
    let _lab = Running(name.clone());
    let info = vtnt_lab_linux::vm_info(&name).unwrap();
    assert!(info.slots >= 4000, "{} slots", info.slots);
    let front: SocketAddr = info.endpoint.parse().unwrap();

    // Slot 1500: on the VM LAN, its gateway on-link and answered by proxy ARP.
    let slot: GuestSlot = info.slot(1500).unwrap();
    assert!(slot.address.starts_with("10.253."), "{slot:?}");
    let addr: vtnt_lab::addr::AddrLen = slot.address.parse().unwrap();
    let gw: Ipv4Addr = slot.gateway.parse().unwrap();
    assert!(addr.prefix().contains(gw));
    let g = Guest::new(slot.local_port, front, mac_of(&slot.mac), addr.addr);
    assert_eq!(g.arp(gw), GATEWAY_MAC);
    // The lab's gateway answers a ping; the VM LAN's gateway is the same router.
    let lab_gw: Ipv4Addr = info.gateway.parse().unwrap();
    assert_eq!(g.ping(lab_gw, 64, 1), (lab_gw, 0));
    assert_eq!(g.ping(gw, 64, 2), (gw, 0));
    // TTL 1: the lab's gateway, as for the vantage point; the whole trace is the
    // vantage point's (the emulator traced in-process from 192.0.2.2).
    assert_eq!(g.ping("203.0.113.10".parse().unwrap(), 1, 3), (lab_gw, 11));
    let dst: Ipv4Addr = "203.0.113.10".parse().unwrap();
    let mut lab = Lab::new(Topology::reference());
    let native: Vec<Ipv4Addr> = Tracer::new(&mut lab)
        .trace(dst, 30)
        .iter()
        .map(|h| h.as_ref().expect("an answer").from)
        .collect();
    let guest: Vec<Ipv4Addr> = (1..=native.len() as u8)
        .map(|ttl| g.ping(dst, ttl, 100 + u16::from(ttl)).0)
        .collect();
    assert_eq!(guest, native);

    // 250 DHCP clients: the first 100 on the vantage LAN, then the VM LAN.
    let mut leased = Vec::new();
    let mut last = None;
    for i in 0..250u32 {
        let mut m = [0x52, 0x54, 0, 0x44, 0, 0];
        m[4..6].copy_from_slice(&(i as u16).to_be_bytes());
        let mut c = Guest::new(0, front, m, Ipv4Addr::UNSPECIFIED);
        leased.push(c.lease());
        last = Some(c);
    }
    assert_eq!(leased[0], ("192.0.2.130".parse().unwrap(), lab_gw));
    let (addr, router) = leased[249];
    assert_eq!((addr, router), ("10.253.63.31".parse().unwrap(), gw));
    let c = last.unwrap();
    assert_eq!(c.arp(router), GATEWAY_MAC);
    assert_eq!(c.ping(dst, 1, 1), (lab_gw, 11));
}
