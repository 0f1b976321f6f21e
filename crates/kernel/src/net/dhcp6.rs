//! DHCPv6 (RFC 8415) as `ip6=auto` needs it (`net::autoconf`): the Solicit and Request
//! of a client with one IA_NA (its DUID-LL from the MAC, from the link-local address
//! port 546 to ff02::1:2 port 547) and reading the Advertise or Reply meant for it (UDP
//! checksum, transaction, client ID, server ID, the IA_NA's address or status code).
//! Written and read by hand over [`ndp::seal`] and [`ndp::payload`].

use super::ndp::{self, addr, payload, seal};
use core::net::Ipv6Addr;

const UDP: u8 = 17;
pub use vtnt_wire::dhcp6::{ADVERTISE, REPLY};
use vtnt_wire::dhcp6::{CLIENT_ID, DUID_MAX, ELAPSED, IA_ADDR, IA_NA, REQUEST, SERVER_ID, SOLICIT};

/// The Solicit we send, then the Request after an Advertise (the same with the server's
/// ID option after it): type, transaction, client ID (DUID-LL), elapsed time, one IA_NA
/// (IAID: the MAC's last four bytes) asking no address or times.
#[rustfmt::skip]
const SOLICIT_MSG: [u8; 40] = [
    SOLICIT, 0, 0, 0,
    0, CLIENT_ID as u8, 0, 10, 0, 3, 0, 1, 0, 0, 0, 0, 0, 0,
    0, ELAPSED as u8, 0, 2, 0, 0,
    0, IA_NA as u8, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

/// The client's message: the Solicit, then the Request.
pub struct Client {
    mac: [u8; 6],
    msg: [u8; 44 + DUID_MAX],
    len: usize,
}

impl Client {
    /// The Solicit of the client at `mac`.
    pub fn new(mac: [u8; 6]) -> Client {
        let mut msg = [0; 44 + DUID_MAX];
        msg[..40].copy_from_slice(&SOLICIT_MSG);
        msg[12..18].copy_from_slice(&mac);
        msg[28..32].copy_from_slice(&mac[2..]);
        Client { mac, msg, len: 40 }
    }

    /// Whether we are requesting (a server advertised).
    pub fn requesting(&self) -> bool {
        self.len > 40
    }

    /// Turns the Solicit into a Request to the server with DUID `server` (at most 130
    /// bytes: [`parse`] gives no longer one).
    pub fn request(&mut self, server: &[u8]) {
        let n = server.len().min(DUID_MAX);
        self.msg[0] = REQUEST;
        self.msg[40..44].copy_from_slice(&[0, SERVER_ID as u8, 0, n as u8]);
        self.msg[44..44 + n].copy_from_slice(&server[..n]);
        self.len = 44 + n;
    }

    /// Writes into `frame` (at least 256 bytes) our message, transaction `xid`,
    /// `elapsed` hundredths of a second into the exchange, from our link-local address
    /// to ff02::1:2; returns the frame's length.
    pub fn emit(&self, frame: &mut [u8], xid: u32, elapsed: u16) -> usize {
        let (udp, msg) = frame[54..].split_at_mut(8);
        msg[..self.len].copy_from_slice(&self.msg[..self.len]);
        msg[1..4].copy_from_slice(&xid.to_be_bytes()[1..]);
        msg[22..24].copy_from_slice(&elapsed.to_be_bytes());
        let len = 8 + self.len;
        udp[..6].copy_from_slice(&[2, 34, 2, 35, 0, len as u8]); // 546 -> 547
        let servers = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);
        let macs = (self.mac, [0x33, 0x33, 0, 1, 0, 2]);
        seal(
            frame,
            macs,
            (ndp::link_local(self.mac), servers),
            (UDP, 1),
            len,
            6,
        )
    }
}

/// An Advertise or Reply meant for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    /// [`ADVERTISE`] or [`REPLY`].
    pub kind: u8,
    /// The server's DUID.
    pub server: &'a [u8],
    /// The IA_NA's address with a non-zero valid lifetime, if any (none with a status
    /// such as NoAddrsAvail).
    pub addr: Option<Ipv6Addr>,
}

/// The DHCPv6 Advertise or Reply in IPv6 packet `ip` (its length the header's) if it is
/// one for the client at `mac` (UDP 547 to 546 with a right checksum, transaction `xid`,
/// our client ID, a server ID: RFC 8415 16.3 and 16.10) and well formed.
// not inlined into the receive closure: 80 bytes less image (2026-11-29)
#[inline(never)]
pub fn parse(ip: &[u8], mac: [u8; 6], xid: u32) -> Option<Reply<'_>> {
    let udp = payload(ip, UDP)?;
    let msg = udp.get(8..)?;
    if udp[..4] != [2, 35, 2, 34] || msg.get(1..4)? != &xid.to_be_bytes()[1..] {
        return None;
    }
    let mut reply = Reply {
        kind: msg[0],
        server: &[],
        addr: None,
    };
    let mut ours = false;
    for (code, body) in options(&msg[4..])? {
        match code {
            CLIENT_ID => ours = body.len() == 10 && body[..4] == [0, 3, 0, 1] && body[4..] == mac,
            SERVER_ID if body.len() <= DUID_MAX => reply.server = body,
            IA_NA if body.get(..4)? == &mac[2..] => {
                for (code, sub) in options(body.get(12..)?)? {
                    if code == IA_ADDR && sub.len() >= 24 && sub[20..24] != [0; 4] {
                        reply.addr = Some(addr(&sub[..16]));
                    }
                }
            }
            _ => {}
        }
    }
    let kind_ok = reply.kind == ADVERTISE || reply.kind == REPLY;
    (kind_ok && ours && !reply.server.is_empty()).then_some(reply)
}

/// The DHCPv6 options in `b` as (code, body), `None` if one runs past the end.
fn options(b: &[u8]) -> Option<Options<'_>> {
    let mut all = Options(b);
    while all.next().is_some() {}
    all.0.is_empty().then_some(Options(b))
}

/// DHCPv6 options, read one by one (stops at one that runs past the end).
struct Options<'a>(&'a [u8]);

impl<'a> Iterator for Options<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let [c0, c1, l0, l1, ..] = *self.0 else {
            return None;
        };
        let end = 4 + usize::from(u16::from_be_bytes([l0, l1]));
        let body = self.0.get(4..end)?;
        self.0 = &self.0[end..];
        Some((u16::from_be_bytes([c0, c1]), body))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const XID: u32 = 0x00ab_cdef;
    const SERVER: [u8; 10] = [0, 3, 0, 1, 2, 0, 0, 0, 0, 1];

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// A server's answer (`kind`, transaction `xid`) to the client at `client`: its
    /// client ID, `server` ID, an IA_NA with `ia` (address, valid lifetime) or a status,
    /// as an IPv6 packet from fe80::1 port 547 to the client's link-local port 546.
    fn answer(
        kind: u8,
        xid: u32,
        client: [u8; 6],
        server: &[u8],
        ia: Option<(&str, u32)>,
    ) -> Vec<u8> {
        let opt = |code: u16, body: &[u8]| {
            [
                &code.to_be_bytes()[..],
                &(body.len() as u16).to_be_bytes(),
                body,
            ]
            .concat()
        };
        let x = xid.to_be_bytes();
        let mut msg = vec![kind, x[1], x[2], x[3]];
        msg.extend(opt(SERVER_ID, server));
        msg.extend(opt(CLIENT_ID, &[&[0, 3, 0, 1][..], &client].concat()));
        let inner = match ia {
            Some((a, valid)) => {
                let body = [
                    &v6(a).octets()[..],
                    &valid.to_be_bytes(),
                    &valid.to_be_bytes(),
                ]
                .concat();
                opt(IA_ADDR, &body)
            }
            None => opt(13, &[0, 2, b'n', b'o']), // NoAddrsAvail
        };
        let ia_body = [&client[2..], &[0; 8][..], &inner].concat();
        msg.extend(opt(IA_NA, &ia_body));
        let len = 8 + msg.len();
        let mut f = vec![0u8; 54 + len];
        f[54..60].copy_from_slice(&[2, 35, 2, 34, 0, len as u8]);
        f[62..].copy_from_slice(&msg);
        let macs = ([2, 0, 0, 0, 0, 1], MAC);
        seal(
            &mut f,
            macs,
            (v6("fe80::1"), ndp::link_local(client)),
            (UDP, 64),
            len,
            6,
        );
        f[14..].to_vec()
    }

    /// A valid Advertise, a seed for the robustness replay in `ndp`'s tests.
    pub(crate) fn advertise_seed() -> Vec<u8> {
        answer(
            ADVERTISE,
            XID,
            MAC,
            &SERVER,
            Some(("2001:db8:64::c000:20a", 3600)),
        )
    }

    #[test]
    fn the_solicit_then_the_request_carry_what_rfc_8415_asks() {
        let mut c = Client::new(MAC);
        let mut f = [0u8; 256];
        let n = c.emit(&mut f, XID, 150);
        assert_eq!(f[..6], [0x33, 0x33, 0, 1, 0, 2]);
        let ip = &f[14..n];
        assert_eq!(addr(&ip[8..24]), v6("fe80::5054:ff:fe12:3456"));
        assert_eq!(addr(&ip[24..40]), v6("ff02::1:2"));
        let udp = payload(ip, UDP).expect("the UDP checksum is right");
        assert_eq!(udp[..4], [2, 34, 2, 35], "546 -> 547");
        #[rustfmt::skip]
        let solicit = [
            SOLICIT, 0xab, 0xcd, 0xef,
            0, 1, 0, 10, 0, 3, 0, 1, 0x52, 0x54, 0, 0x12, 0x34, 0x56, // DUID-LL
            0, 8, 0, 2, 0, 150, // elapsed time
            0, 3, 0, 12, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, // IA_NA
        ];
        assert_eq!(udp[8..], solicit);
        assert!(!c.requesting());
        c.request(&SERVER);
        assert!(c.requesting());
        let n = c.emit(&mut f, XID + 1, 0);
        let udp = payload(&f[14..n], UDP).unwrap();
        assert_eq!(udp[8..12], [REQUEST, 0xab, 0xcd, 0xf0]);
        assert_eq!(udp[12 + 36..], [&[0, 2, 0, 10][..], &SERVER].concat());
    }

    #[test]
    fn an_advertise_or_reply_for_us_gives_the_server_and_address() {
        let a = v6("2001:db8:64::c000:20a");
        let seed = advertise_seed();
        let got = parse(&seed, MAC, XID).unwrap();
        assert_eq!(
            (got.kind, got.server, got.addr),
            (ADVERTISE, &SERVER[..], Some(a))
        );
        let reply = answer(
            REPLY,
            XID,
            MAC,
            &SERVER,
            Some(("2001:db8:64::c000:20a", 3600)),
        );
        assert_eq!(parse(&reply, MAC, XID).unwrap().kind, REPLY);
        // NoAddrsAvail, a zero valid lifetime: no address
        let none = answer(ADVERTISE, XID, MAC, &SERVER, None);
        assert_eq!(parse(&none, MAC, XID).unwrap().addr, None);
        let dead = answer(REPLY, XID, MAC, &SERVER, Some(("2001:db8::1", 0)));
        assert_eq!(parse(&dead, MAC, XID).unwrap().addr, None);
    }

    #[test]
    fn answers_for_others_or_without_a_server_are_ignored() {
        let ok = Some(("2001:db8::1", 60));
        // another transaction, another client, no server ID, not an answer
        assert_eq!(
            parse(&answer(REPLY, XID + 1, MAC, &SERVER, ok), MAC, XID),
            None
        );
        assert_eq!(
            parse(&answer(REPLY, XID, [2; 6], &SERVER, ok), MAC, XID),
            None
        );
        assert_eq!(parse(&answer(REPLY, XID, MAC, &[], ok), MAC, XID), None);
        assert_eq!(
            parse(&answer(SOLICIT, XID, MAC, &SERVER, ok), MAC, XID),
            None
        );
    }
}
