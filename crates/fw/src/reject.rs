//! The packet a REJECT sends back: an ICMP destination unreachable quoting the
//! rejected packet (as much of it as fits 576 bytes, as Linux's `icmp_send`), or a TCP
//! reset from the rejected segment's destination (as Linux's `nf_send_reset`: the
//! segment's ACK number as sequence, or an ACK of what it carried). No reply goes to an
//! ICMP error, a reset, a fragment other than the first, or a source that is not a
//! unicast address; the packet is then only dropped.

use core::net::Ipv4Addr;

use vtnt_wire::build::{self, IcmpError, Ip, Tcp};

use crate::packet::Headers;
use crate::rule::RejectWith;

/// Bytes of the rejected packet an ICMP error quotes at most (576 - 20 - 8).
pub const QUOTE_MAX: usize = 548;

/// Writes the reply to `packet` (read as `h`) into `out` and returns its length, or
/// `None` when none is due or `out` is too short. `from`: the source of an ICMP error
/// (the firewall's address on the interface the packet came in by; the packet's own
/// destination when the firewall has none there).
pub fn reply(
    with: RejectWith,
    h: &Headers,
    packet: &[u8],
    from: Option<Ipv4Addr>,
    out: &mut [u8],
) -> Option<usize> {
    let src = h.src;
    if h.fragment
        || src.is_unspecified()
        || src.is_broadcast()
        || src.is_multicast()
        || src.is_loopback()
        || h.dst.is_broadcast()
        || h.dst.is_multicast()
    {
        return None;
    }
    let ip = |src, dst| Ip {
        src,
        dst,
        ttl: 64,
        tos: 0,
        ipid: 0,
    };
    match with.icmp_code() {
        Some(code) => {
            if h.proto == 1 && matches!(h.icmp_type(), 3 | 4 | 5 | 11 | 12) {
                return None;
            }
            let e = IcmpError {
                icmp_type: 3,
                code,
                original: packet.get(..h.len)?,
                quote_len: QUOTE_MAX,
                mpls: &[],
            };
            build::icmp_error(out, &ip(from.unwrap_or(h.dst), src), &e).ok()
        }
        None => {
            if h.proto != 6 || h.tcp_flags & 0x04 != 0 {
                return None;
            }
            let t = match h.tcp_flags & 0x10 != 0 {
                true => Tcp {
                    sport: h.dport,
                    dport: h.sport,
                    seq: h.tcp_ack,
                    ack: 0,
                    flags: 0x04,
                    window: 0,
                },
                false => {
                    let syn_fin =
                        u32::from(h.tcp_flags & 0x02 != 0) + u32::from(h.tcp_flags & 0x01 != 0);
                    Tcp {
                        sport: h.dport,
                        dport: h.sport,
                        seq: 0,
                        ack: h.tcp_seq.wrapping_add(h.tcp_payload as u32 + syn_fin),
                        flags: 0x14,
                        window: 0,
                    }
                }
            };
            build::tcp(out, &ip(h.dst, src), &t).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtnt_wire::reply::{self as rx, Body};

    const IP: Ip = Ip {
        src: Ipv4Addr::new(192, 0, 2, 1),
        dst: Ipv4Addr::new(198, 51, 100, 2),
        ttl: 64,
        tos: 0,
        ipid: 9,
    };

    #[test]
    fn a_syn_gets_a_reset_acking_it() {
        let mut b = [0u8; 64];
        let syn = Tcp {
            sport: 40000,
            dport: 22,
            seq: 100,
            ack: 0,
            flags: 0x02,
            window: 8,
        };
        let n = build::tcp(&mut b, &IP, &syn).unwrap();
        let h = Headers::parse(&b[..n]).unwrap();
        let mut out = [0u8; 128];
        let m = reply(RejectWith::TcpReset, &h, &b[..n], None, &mut out).unwrap();
        let r = rx::parse(&out[..m]).unwrap();
        assert_eq!((r.src, r.dst), (IP.dst.into(), IP.src.into()));
        let Body::Tcp {
            sport,
            dport,
            seq,
            ack,
            flags,
        } = r.body
        else {
            panic!("{r:?}")
        };
        assert_eq!((sport, dport, seq, ack, flags), (22, 40000, 0, 101, 0x14));
        // a reset is not answered
        let rst = Tcp { flags: 0x04, ..syn };
        let n = build::tcp(&mut b, &IP, &rst).unwrap();
        let h = Headers::parse(&b[..n]).unwrap();
        assert_eq!(
            reply(RejectWith::TcpReset, &h, &b[..n], None, &mut out),
            None
        );
    }

    #[test]
    fn a_datagram_gets_an_unreachable_quoting_it() {
        let mut b = [0u8; 64];
        let u = build::Udp {
            sport: 5000,
            dport: 53,
            payload: &[7; 10],
            checksum: None,
        };
        let n = build::udp(&mut b, &IP, &u).unwrap();
        let h = Headers::parse(&b[..n]).unwrap();
        let mut out = [0u8; 128];
        let from = Some(Ipv4Addr::new(203, 0, 113, 1));
        let m = reply(RejectWith::PortUnreachable, &h, &b[..n], from, &mut out).unwrap();
        let r = rx::parse(&out[..m]).unwrap();
        assert_eq!(r.src, Ipv4Addr::new(203, 0, 113, 1));
        let Body::IcmpError {
            icmp_type,
            code,
            quote,
            ..
        } = r.body
        else {
            panic!("{r:?}")
        };
        assert_eq!((icmp_type, code), (3, 3));
        assert_eq!(quote.dst, IP.dst);
        assert_eq!(m, 20 + 8 + n);
        // an ICMP error is not answered with another
        let h2 = Headers::parse(&out[..m]).unwrap();
        assert_eq!(
            reply(
                RejectWith::PortUnreachable,
                &h2,
                &out[..m],
                None,
                &mut [0; 128]
            ),
            None
        );
    }
}
