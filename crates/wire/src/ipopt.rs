//! IPv4 options: the record route option (RFC 791, type 7) a probe carries for scamper's
//! `ping -R`, written into a built probe ([`insert_record_route`]) and read back from a
//! reply's header or an ICMP error's quote ([`record_route`]), the way scamper reads it
//! (`ipopt_parse` in scamper_icmp4.c: the addresses before the pointer).

use core::net::Ipv4Addr;

use crate::{checksum, Error, Result};

/// The record route option as scamper sends it: type 7, length 39, pointer 4, room for
/// nine addresses, one end-of-options byte; it fills the IPv4 header to its 60 bytes.
pub const RECORD_ROUTE_LEN: usize = 40;

/// Most addresses a record route option holds (in a 60-byte header).
pub const RECORD_ROUTE_MAX: usize = 9;

const RR: u8 = 7;
const EOL: u8 = 0;
const NOP: u8 = 1;

/// The addresses a record route option holds, in the order routers wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRoute {
    addrs: [Ipv4Addr; RECORD_ROUTE_MAX],
    len: u8,
}

impl RecordRoute {
    /// The recorded addresses.
    pub fn addrs(&self) -> &[Ipv4Addr] {
        &self.addrs[..usize::from(self.len)]
    }
}

/// The record route option among the IPv4 `options` (the header bytes after the first
/// 20), if one holds at least one address. Options past a malformed one are not read.
pub fn record_route(options: &[u8]) -> Option<RecordRoute> {
    let mut at = 0;
    while let Some(&kind) = options.get(at) {
        match kind {
            EOL => return None,
            NOP => at += 1,
            _ => {
                let len = usize::from(*options.get(at + 1)?);
                let opt = options.get(at..at + len).filter(|_| len >= 2)?;
                if kind == RR {
                    return recorded(opt);
                }
                at += len;
            }
        }
    }
    None
}

/// The addresses before the pointer of one record route option (`opt[0] == 7`).
fn recorded(opt: &[u8]) -> Option<RecordRoute> {
    let ptr = usize::from(*opt.get(2)?);
    if ptr < 4 || ptr % 4 != 0 {
        return None;
    }
    let count = (ptr / 4 - 1).min(RECORD_ROUTE_MAX);
    let mut rr = RecordRoute {
        addrs: [Ipv4Addr::UNSPECIFIED; RECORD_ROUTE_MAX],
        len: 0,
    };
    for (i, a) in opt.get(3..)?.chunks_exact(4).take(count).enumerate() {
        rr.addrs[i] = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
        rr.len += 1;
    }
    (rr.len > 0).then_some(rr)
}

/// Inserts an empty record route option into the option-less IPv4 datagram `buf[..len]`
/// (a probe from [`crate::build`]): the payload moves [`RECORD_ROUTE_LEN`] bytes on, the
/// header length, total length and header checksum are fixed. Transport checksums do
/// not cover IP options and stay valid. Returns the new length.
pub fn insert_record_route(buf: &mut [u8], len: usize) -> Result<usize> {
    const IP: usize = 20;
    if len < IP || buf.first() != Some(&0x45) {
        return Err(Error::Malformed);
    }
    let total = len + RECORD_ROUTE_LEN;
    let total16 = u16::try_from(total).map_err(|_| Error::Malformed)?;
    let p = buf.get_mut(..total).ok_or(Error::Truncated)?;
    p.copy_within(IP..len, IP + RECORD_ROUTE_LEN);
    let opt = &mut p[IP..IP + RECORD_ROUTE_LEN];
    opt.fill(0);
    opt[..3].copy_from_slice(&[RR, 39, 4]);
    p[0] = 0x40 | ((IP + RECORD_ROUTE_LEN) / 4) as u8;
    p[2..4].copy_from_slice(&total16.to_be_bytes());
    p[10..12].fill(0);
    let c = checksum::of(&p[..IP + RECORD_ROUTE_LEN]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr_with(ptr: u8, addrs: &[[u8; 4]]) -> [u8; RECORD_ROUTE_LEN] {
        let mut o = [0u8; RECORD_ROUTE_LEN];
        o[..3].copy_from_slice(&[RR, 39, ptr]);
        for (i, a) in addrs.iter().enumerate() {
            o[3 + 4 * i..7 + 4 * i].copy_from_slice(a);
        }
        o
    }

    #[test]
    fn addresses_before_the_pointer_are_read() {
        let o = rr_with(12, &[[10, 0, 0, 1], [10, 0, 1, 1], [10, 0, 2, 1]]);
        let rr = record_route(&o).unwrap();
        assert_eq!(
            rr.addrs(),
            &[Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1)]
        );
        // a full option: pointer past the end
        let full = rr_with(40, &[[1, 1, 1, 1]; 9]);
        assert_eq!(record_route(&full).unwrap().addrs().len(), 9);
        // after NOPs
        let mut nops = [NOP; 44];
        nops[4..].copy_from_slice(&o);
        assert_eq!(record_route(&nops).unwrap().addrs().len(), 2);
    }

    #[test]
    fn malformed_options_read_as_none_never_panic() {
        for bad in [
            &[][..],
            &[RR],
            &[RR, 39],
            &[RR, 1, 8],
            &[RR, 0],
            &[RR, 39, 4],    // no address recorded yet
            &[RR, 39, 5],    // pointer not on a boundary
            &[RR, 39, 3],    // pointer before the data
            &[RR, 7, 8, 10], // shorter than its length
            &[EOL, RR, 39, 8],
            &[68, 200, 5],
            &[NOP, NOP],
        ] {
            assert_eq!(record_route(bad), None, "{bad:?}");
        }
        // a pointer past the option's own length reads what is there
        let o = [RR, 7, 40, 1, 2, 3, 4];
        assert_eq!(
            record_route(&o).unwrap().addrs(),
            &[Ipv4Addr::new(1, 2, 3, 4)]
        );
    }

    #[test]
    fn the_option_goes_in_behind_the_header() {
        let mut b = [0u8; 100];
        let ip = crate::build::Ip {
            src: Ipv4Addr::new(192, 0, 2, 1),
            dst: Ipv4Addr::new(192, 0, 2, 9),
            ttl: 64,
            tos: 0,
            ipid: 7,
        };
        let e = crate::build::Echo {
            icmp_type: 8,
            ident: 1,
            seq: 2,
            payload: &[9; 8],
            checksum: None,
        };
        let n = crate::build::icmp_echo(&mut b, &ip, &e).unwrap();
        let m = insert_record_route(&mut b, n).unwrap();
        assert_eq!(m, n + RECORD_ROUTE_LEN);
        assert_eq!(checksum::sum(&b[..60]), 0xffff);
        let r = crate::reply::parse(&b[..m]).unwrap();
        assert_eq!(r.len as usize, m);
        assert!(matches!(r.body, crate::reply::Body::Echo { seq: 2, .. }));
        assert_eq!(r.rr, None, "nothing recorded yet");
        assert!(insert_record_route(&mut b, m).is_err(), "options already");
        assert!(insert_record_route(&mut b[..n + 10], n).is_err(), "no room");
    }
}
