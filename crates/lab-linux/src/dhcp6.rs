//! The VM front's DHCPv6 server (RFC 8415), pure logic and stateless: a guest's address
//! is the twin of the IPv4 address the front knows for its MAC and endpoint (a slot's or
//! a DHCPv4 lease's, [`crate::vm::VmFront`]), so an answer is computed from the message
//! alone and nothing is kept per client. Solicit gets an Advertise, Request, Renew and
//! Rebind a Reply, each with one IA_NA holding the twin (or the status NoAddrsAvail when
//! the front knows no IPv4 address for the guest); Confirm a Reply saying Success or
//! NotOnLink; Release and Decline a Reply saying Success; Information-request a Reply
//! with the server ID. Every message gets at most one answer, of bounded size, to the
//! guest that sent it (one frame in, at most one out: a guest cannot make the front send
//! more than it sends). What is not for the front (a wrong UDP checksum, another
//! server's ID, no client ID, a message a server does not take) gets none.

use std::net::Ipv6Addr;

use smoltcp::wire::{IpProtocol, Ipv6Packet, UdpPacket};

use crate::ndp::gateway_link_local;
use crate::state::GATEWAY_MAC;

const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
/// DHCPv6's numbers (`vtnt_wire::dhcp6`, shared with the unikernel's client).
pub use vtnt_wire::dhcp6::{
    ADVERTISE, CLIENT_PORT, CONFIRM, DECLINE, INFORMATION_REQUEST, NOT_ON_LINK, NO_ADDRS_AVAIL,
    REBIND, RELEASE, RENEW, REPLY, REQUEST, SERVER_PORT, SOLICIT, SUCCESS,
};
use vtnt_wire::dhcp6::{CLIENT_ID, DUID_MAX, IA_ADDR, IA_NA, SERVER_ID, STATUS};
/// The address's preferred and valid lifetimes, and T1/T2 (half, four fifths).
const PREFERRED_SECS: u32 = 1800;
const VALID_SECS: u32 = 3600;

/// The server's DUID: DUID-LL (type 3, Ethernet) of the gateway's MAC.
pub fn server_duid() -> [u8; 10] {
    let m = GATEWAY_MAC;
    [0, 3, 0, 1, m[0], m[1], m[2], m[3], m[4], m[5]]
}

/// Whether IPv6 packet `ip` is UDP to the DHCPv6 server port (a message for the front's
/// server, whatever its content).
pub fn is_dhcp6(ip: &[u8]) -> bool {
    ip.len() >= IPV6_LEN + UDP_LEN
        && ip[6] == u8::from(IpProtocol::Udp)
        && u16::from_be_bytes([ip[42], ip[43]]) == SERVER_PORT
}

/// The options in `b` as (code, body); `None` if one runs past the end.
fn options(mut b: &[u8]) -> Option<Vec<(u16, &[u8])>> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let head = b.get(..4)?;
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        v.push((u16::from_be_bytes([head[0], head[1]]), b.get(4..4 + len)?));
        b = &b[4 + len..];
    }
    Some(v)
}

fn option(out: &mut Vec<u8>, code: u16, body: &[u8]) {
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
}

fn status(code: u16) -> Vec<u8> {
    let mut s = Vec::new();
    option(&mut s, STATUS, &code.to_be_bytes());
    s
}

/// The answer frame to the DHCPv6 message in IPv6 packet `ip` from a guest at `mac`,
/// whose address is `twin` when the front knows one; `None` when it gets none.
pub fn answer(ip: &[u8], mac: [u8; 6], twin: Option<Ipv6Addr>) -> Option<Vec<u8>> {
    let packet = Ipv6Packet::new_checked(ip).ok()?;
    let (src, dst) = (packet.src_addr(), packet.dst_addr());
    if packet.next_header() != IpProtocol::Udp || !src.is_unicast_link_local() {
        return None;
    }
    let udp = UdpPacket::new_checked(packet.payload()).ok()?;
    if udp.dst_port() != SERVER_PORT
        || udp.src_port() != CLIENT_PORT
        || !udp.verify_checksum(&src.into(), &dst.into())
    {
        return None;
    }
    let msg = udp.payload();
    let (kind, xid) = (*msg.first()?, msg.get(1..4)?);
    let mut client = None;
    let mut server = None;
    let mut ia = None;
    let mut ia_addrs = Vec::new();
    for (code, body) in options(&msg[4..])? {
        match code {
            CLIENT_ID if (1..=DUID_MAX).contains(&body.len()) => client = Some(body),
            SERVER_ID => server = Some(body),
            IA_NA if body.len() >= 12 && ia.is_none() => {
                ia = Some(&body[..4]);
                for (code, sub) in options(&body[12..])? {
                    if code == IA_ADDR && sub.len() >= 24 {
                        ia_addrs.push(Ipv6Addr::from(<[u8; 16]>::try_from(&sub[..16]).ok()?));
                    }
                }
            }
            _ => {}
        }
    }
    let ours = server_duid();
    // RFC 8415 16: which messages carry a server ID (ours), which carry none
    let server_ok = match kind {
        REQUEST | RENEW | RELEASE | DECLINE => server == Some(&ours[..]),
        SOLICIT | REBIND | CONFIRM => server.is_none(),
        INFORMATION_REQUEST => server.is_none_or(|s| s == ours),
        _ => return None,
    };
    if !server_ok || (client.is_none() && kind != INFORMATION_REQUEST) {
        return None;
    }
    let mut out = vec![if kind == SOLICIT { ADVERTISE } else { REPLY }];
    out.extend_from_slice(xid);
    if let Some(c) = client {
        option(&mut out, CLIENT_ID, c);
    }
    option(&mut out, SERVER_ID, &ours);
    match (kind, ia) {
        (SOLICIT | REQUEST | RENEW | REBIND, Some(iaid)) => {
            let mut body = iaid.to_vec();
            match twin {
                Some(a) => {
                    body.extend_from_slice(&(PREFERRED_SECS / 2).to_be_bytes());
                    body.extend_from_slice(&(PREFERRED_SECS * 4 / 5).to_be_bytes());
                    let mut addr = a.octets().to_vec();
                    addr.extend_from_slice(&PREFERRED_SECS.to_be_bytes());
                    addr.extend_from_slice(&VALID_SECS.to_be_bytes());
                    option(&mut body, IA_ADDR, &addr);
                }
                None => {
                    body.extend_from_slice(&[0; 8]);
                    body.extend_from_slice(&status(NO_ADDRS_AVAIL));
                }
            }
            option(&mut out, IA_NA, &body);
        }
        (SOLICIT | REQUEST | RENEW | REBIND, None) => {
            out.extend_from_slice(&status(NO_ADDRS_AVAIL))
        }
        (CONFIRM, _) => {
            let on_link = !ia_addrs.is_empty() && ia_addrs.iter().all(|a| Some(*a) == twin);
            out.extend_from_slice(&status(if on_link { SUCCESS } else { NOT_ON_LINK }));
        }
        (RELEASE | DECLINE, _) => out.extend_from_slice(&status(SUCCESS)),
        _ => {}
    }
    Some(frame(src, mac, &out))
}

/// The frame carrying DHCPv6 message `msg` from the gateway's link-local address (port
/// 547) to the guest at `dst` (port 546, at `mac`).
fn frame(dst: Ipv6Addr, mac: [u8; 6], msg: &[u8]) -> Vec<u8> {
    let mut f = mac.to_vec();
    f.extend_from_slice(&GATEWAY_MAC);
    f.extend_from_slice(&0x86ddu16.to_be_bytes());
    let ports = (SERVER_PORT, CLIENT_PORT);
    f.extend_from_slice(&udp_packet((gateway_link_local(), dst), ports, 255, msg));
    f
}

/// The IPv6 packet carrying `msg` in UDP between `ips` and `ports`, hop limit `hop`,
/// its checksum set.
pub(crate) fn udp_packet(
    (src, dst): (Ipv6Addr, Ipv6Addr),
    (sport, dport): (u16, u16),
    hop: u8,
    msg: &[u8],
) -> Vec<u8> {
    let udp_len = UDP_LEN + msg.len();
    let mut p = vec![0u8; IPV6_LEN + udp_len];
    let mut ip = Ipv6Packet::new_unchecked(&mut p[..]);
    ip.set_version(6);
    ip.set_payload_len(udp_len as u16);
    ip.set_next_header(IpProtocol::Udp);
    ip.set_hop_limit(hop);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
    udp.set_src_port(sport);
    udp.set_dst_port(dport);
    udp.set_len(udp_len as u16);
    udp.payload_mut().copy_from_slice(msg);
    udp.fill_checksum(&src.into(), &dst.into());
    p
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A client's DHCPv6 message (`kind`, transaction 0x123456) from `fe80::10` (at
    /// `mac`, its DUID-LL the client ID) to ff02::1:2: with `server`'s ID, and an IA_NA
    /// (IAID 7) holding `addr` when given (else empty) unless `ia` is false.
    pub(crate) fn client(
        kind: u8,
        mac: [u8; 6],
        server: Option<&[u8]>,
        ia: bool,
        addr: Option<Ipv6Addr>,
    ) -> Vec<u8> {
        let mut msg = vec![kind, 0x12, 0x34, 0x56];
        option(&mut msg, CLIENT_ID, &[&[0, 3, 0, 1][..], &mac].concat());
        if let Some(s) = server {
            option(&mut msg, SERVER_ID, s);
        }
        if ia {
            let mut body = vec![0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0];
            if let Some(a) = addr {
                option(&mut body, IA_ADDR, &[&a.octets()[..], &[0; 8]].concat());
            }
            option(&mut msg, IA_NA, &body);
        }
        let ips = ("fe80::10".parse().unwrap(), "ff02::1:2".parse().unwrap());
        udp_packet(ips, (CLIENT_PORT, SERVER_PORT), 1, &msg)
    }

    /// Options read back: (code, body).
    pub(crate) type Options = Vec<(u16, Vec<u8>)>;

    /// An answer frame read back: (to MAC, to address, type, transaction, top-level
    /// options), its UDP checksum checked.
    pub(crate) fn read(f: &[u8]) -> ([u8; 6], Ipv6Addr, u8, Vec<u8>, Options) {
        assert_eq!(&f[6..12], &GATEWAY_MAC);
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.src_addr(), gateway_link_local());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum(&ip.src_addr().into(), &ip.dst_addr().into()));
        assert_eq!((udp.src_port(), udp.dst_port()), (SERVER_PORT, CLIENT_PORT));
        let m = udp.payload();
        let opts = options(&m[4..])
            .unwrap()
            .into_iter()
            .map(|(c, b)| (c, b.to_vec()))
            .collect();
        (
            f[..6].try_into().unwrap(),
            ip.dst_addr(),
            m[0],
            m[1..4].to_vec(),
            opts,
        )
    }

    /// The IA_NA's address, or its status code, in `opts`.
    pub(crate) fn ia(opts: &[(u16, Vec<u8>)]) -> Result<Ipv6Addr, u16> {
        let (_, body) = opts.iter().find(|(c, _)| *c == IA_NA).ok_or(u16::MAX)?;
        for (code, sub) in options(&body[12..]).unwrap() {
            match code {
                IA_ADDR => return Ok(Ipv6Addr::from(<[u8; 16]>::try_from(&sub[..16]).unwrap())),
                STATUS => return Err(u16::from_be_bytes([sub[0], sub[1]])),
                _ => {}
            }
        }
        Err(u16::MAX)
    }

    fn top_status(opts: &[(u16, Vec<u8>)]) -> Option<u16> {
        opts.iter()
            .find(|(c, _)| *c == STATUS)
            .map(|(_, b)| u16::from_be_bytes([b[0], b[1]]))
    }

    #[test]
    fn each_message_gets_the_answer_rfc_8415_gives_it() {
        let m = [2, 0, 0, 0, 0, 10];
        let twin: Ipv6Addr = "2001:db8:64::c000:20a".parse().unwrap();
        let sid = server_duid();
        let ask = |kind, server: Option<&[u8]>, ia, addr| {
            answer(&client(kind, m, server, ia, addr), m, Some(twin))
        };
        let (to_mac, to, kind, xid, opts) = read(&ask(SOLICIT, None, true, None).unwrap());
        assert_eq!(
            (to_mac, to, kind, xid),
            (
                m,
                "fe80::10".parse().unwrap(),
                ADVERTISE,
                vec![0x12, 0x34, 0x56]
            )
        );
        assert!(opts.contains(&(CLIENT_ID, [&[0, 3, 0, 1][..], &m].concat())));
        assert!(opts.contains(&(SERVER_ID, sid.to_vec())));
        assert_eq!(ia(&opts), Ok(twin));
        for kind in [REQUEST, RENEW] {
            let (.., k, _, opts) = read(&ask(kind, Some(&sid), true, None).unwrap());
            assert_eq!((k, ia(&opts)), (REPLY, Ok(twin)));
        }
        let (.., opts) = read(&ask(REBIND, None, true, Some(twin)).unwrap());
        assert_eq!(ia(&opts), Ok(twin));
        let (.., opts) = read(&ask(CONFIRM, None, true, Some(twin)).unwrap());
        assert_eq!(top_status(&opts), Some(SUCCESS));
        let (.., opts) =
            read(&ask(CONFIRM, None, true, Some("2001:db8::1".parse().unwrap())).unwrap());
        assert_eq!(top_status(&opts), Some(NOT_ON_LINK));
        for kind in [RELEASE, DECLINE] {
            let (.., opts) = read(&ask(kind, Some(&sid), true, Some(twin)).unwrap());
            assert_eq!(top_status(&opts), Some(SUCCESS));
        }
        let (.., k, _, opts) = read(&ask(INFORMATION_REQUEST, None, false, None).unwrap());
        assert_eq!((k, ia(&opts)), (REPLY, Err(u16::MAX)));
        // no IA_NA asked: NoAddrsAvail at the top; no address known: in the IA_NA
        let (.., opts) = read(&ask(SOLICIT, None, false, None).unwrap());
        assert_eq!(top_status(&opts), Some(NO_ADDRS_AVAIL));
        let (.., opts) = read(&answer(&client(SOLICIT, m, None, true, None), m, None).unwrap());
        assert_eq!(ia(&opts), Err(NO_ADDRS_AVAIL));
        // not for us: a Request without our ID or with another's, a Solicit with one,
        // a server's message, a corrupted checksum
        assert_eq!(ask(REQUEST, None, true, None), None);
        assert_eq!(
            ask(REQUEST, Some(&[0, 3, 0, 1, 9, 9, 9, 9, 9, 9]), true, None),
            None
        );
        assert_eq!(ask(SOLICIT, Some(&sid), true, None), None);
        assert_eq!(ask(REPLY, None, true, None), None);
        let mut p = client(SOLICIT, m, None, true, None);
        *p.last_mut().unwrap() ^= 1;
        assert_eq!(answer(&p, m, Some(twin)), None);
    }
}
