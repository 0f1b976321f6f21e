//! A trace header made a datagram (our own headers, for raw sockets): what the tests that
//! compare verdicts with iptables' and `vtnt bench fw` send through a firewall. TCP
//! segments carry ACK, UDP and ICMP four bytes of payload, other protocols an IPv4
//! header and four bytes; the IP ID is the caller's (to tell packets apart).

use alloc::vec;
use alloc::vec::Vec;

use vtnt_wire::build::{self, Echo, IcmpError, Ip, Tcp, Udp};

use super::Header;

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
