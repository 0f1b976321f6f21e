//! What the `dhcp_handle` fuzz target does with one input, shared with the corpus test
//! (`crates/lab-linux/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.

#![allow(dead_code)]

use std::net::Ipv4Addr;

use vtnt_lab_linux::dhcp::DhcpServer;
use vtnt_lab_linux::state::{Lan, DHCP_FIRST_HOST, LAN_POOL, LAN_SLOTS};

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
