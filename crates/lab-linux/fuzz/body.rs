//! What the fuzz targets (`dhcp_handle`, `vm_frames`) do with one input, shared with the
//! corpus test (`crates/lab-linux/tests/fuzz_corpus.rs`) so every corpus file also runs
//! under `cargo test`.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};

use vtnt_lab_linux::dhcp::DhcpServer;
use vtnt_lab_linux::state::{Lan, DHCP_FIRST_HOST, GATEWAY_MAC, LAN_POOL, LAN_SLOTS};
use vtnt_lab_linux::vm::{FrameAction, VmFront};

pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const VANTAGE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

/// `dhcp_handle`: the input is a conversation, IPv4 packets each framed as
/// `[u16 length][bytes]` (a short last frame is cut), handed in turn to one server whose
/// pool's second address is taken by another guest. Nothing may panic; an answer is a
/// whole Ethernet frame, and an address it binds is in the pool, not taken, and the one
/// the server says the client holds.
pub fn dhcp_handle(data: &[u8]) {
    let mut server = DhcpServer::new(&[Lan::new(
        "192.0.2.0/24".parse().unwrap(),
        GATEWAY,
        &[GATEWAY, VANTAGE],
        (0, LAN_SLOTS),
        (DHCP_FIRST_HOST, LAN_POOL),
    )]);
    let taken = server.pool()[1];
    let in_use = |a: Ipv4Addr, _mac: [u8; 6]| a == taken;
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let packet = &rest[2..(2 + len).min(rest.len())];
        rest = &rest[(2 + len).min(rest.len())..];
        let Some(answer) = server.handle(packet, in_use) else {
            continue;
        };
        assert!(
            answer.frame.len() >= 14 + 20 + 8 + 240,
            "short answer frame"
        );
        if let Some(bound) = answer.bound {
            assert!(server.pool().contains(&bound), "{bound} is not in the pool");
            assert_ne!(bound, taken, "bound an address in use");
            let mac: [u8; 6] = answer.frame[0..6].try_into().unwrap();
            if mac != [0xff; 6] {
                assert_eq!(server.lease(mac), Some(bound));
            }
        }
    }
}

/// `vm_frames`: the input is a conversation of Ethernet frames from guests, each framed
/// as `[u8 guest][u16 length][bytes]` (guest: the sender's UDP port, a short last frame
/// is cut), handed in turn to the VM front of the reference lab. Nothing may panic; an
/// answer is a whole frame from the gateway's MAC; a packet for the lab is IPv4 or IPv6,
/// and the lab's answer to it (addresses swapped) goes to a guest the front knows, or
/// nowhere; no gateway is ever taken for a guest.
pub fn vm_frames(data: &[u8]) {
    let vp = vtnt_lab::vantage_points(&vtnt_lab::Topology::reference()).remove(0);
    let lans = Lan::lab(&vp, vtnt_lab_linux::state::VM_PREFIX.parse().unwrap());
    let mut front = VmFront::new(&lans);
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 3 {
        let peer = SocketAddr::from(([127, 0, 0, 1], 5000 + u16::from(rest[0])));
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        let frame = &rest[3..(3 + len).min(rest.len())];
        rest = &rest[(3 + len).min(rest.len())..];
        match front.handle_frame(peer, frame) {
            FrameAction::Reply(r) => {
                assert!(r.len() >= 42, "short answer frame");
                assert_eq!(&r[6..12], &GATEWAY_MAC, "an answer not from the gateway");
            }
            FrameAction::Ip(p) => {
                let mut answer = p.to_vec();
                match p[0] >> 4 {
                    4 => answer[12..20].rotate_left(4),
                    6 => answer[8..40].rotate_left(16),
                    v => panic!("IP version {v} handed to the lab"),
                }
                if let Some(to) = front.frame_for(&answer, &mut out) {
                    assert!(front.guests().values().any(|g| g.peer == to));
                }
            }
            FrameAction::Ignore => {}
        }
        for l in &lans {
            assert!(
                !front.guests().contains_key(&l.gateway),
                "a gateway learnt as a guest"
            );
        }
    }
}
