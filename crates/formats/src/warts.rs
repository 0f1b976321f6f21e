//! warts building blocks shared by the reader and the writer (warts(5)): record header,
//! flag bytes + parameter length + parameters, per-object address tables, strings,
//! timevals; and the numbers scamper assigns to record types, trace types, flags and
//! parameters.
//!
//! Flags: each flag byte holds 7 flags (low bits, flag 1 = bit 0 of byte 0) and a link
//! bit (0x80) that says another flag byte follows. If the first flag byte is 0, no
//! parameter length follows; otherwise a u16 gives the length of the parameters, which
//! are laid out in flag order.

use vtnt_record::{IpAddr, Method};

use crate::error::{WartsError, WartsErrorKind};

pub(crate) const MAGIC: u16 = 0x1205;
pub(crate) const TYPE_LIST: u16 = 0x0001;
pub(crate) const TYPE_CYCLE_START: u16 = 0x0002;
pub(crate) const TYPE_CYCLE_DEF: u16 = 0x0003;
pub(crate) const TYPE_CYCLE_STOP: u16 = 0x0004;
pub(crate) const TYPE_TRACE: u16 = 0x0006;
pub(crate) const TYPE_PING: u16 = 0x0007;

/// How the description of a cycle's list names the vTNT build that wrote it
/// ([`crate::Cycle::vtnt`]): `vtnt 0.1.0 (commit 1a2b3c4d)`.
pub(crate) const VTNT_DESCR: &str = "vtnt ";

/// The build a list description names, if it is one of ours ([`VTNT_DESCR`]).
pub(crate) fn vtnt_of(descr: Option<&str>) -> Option<String> {
    descr?.strip_prefix(VTNT_DESCR).map(String::from)
}

/// scamper trace types (`SCAMPER_TRACE_TYPE_*`) of the methods vTNT traces with (2,
/// `udp`, is classic traceroute: its destination port counts up).
pub(crate) const TRACE_TYPES: [(Method, u8); 5] = [
    (Method::UdpDport, 0x02),
    (Method::Tcp, 0x03),
    (Method::IcmpParis, 0x04),
    (Method::UdpParis, 0x05),
    (Method::TcpAck, 0x06),
];
/// Trace flags (`SCAMPER_TRACE_FLAG_*`): every attempt sent (`-Q`), a time exceeded from
/// the destination ignored (`-T`), the ICMP checksum stored where the destination port is.
pub(crate) const TRACE_FLAG_ALLATTEMPTS: u8 = 0x01;
pub(crate) const TRACE_FLAG_PMTUD: u8 = 0x02;
pub(crate) const TRACE_FLAG_IGNORETTLDST: u8 = 0x08;
pub(crate) const TRACE_FLAG_ICMPCSUMDP: u8 = 0x20;
/// Hop names were looked up (`-O ptr`): past the first byte, so it goes into the 32-bit
/// flags (parameter 32), which scamper writes only when a flag above 0xff is set.
pub(crate) const TRACE_FLAG_PTR: u32 = 0x100;
/// The hop parameter that holds a hop's name (a NUL-terminated string).
pub(crate) const HOP_NAME: u8 = 20;

/// Gap actions (`SCAMPER_TRACE_GAPACTION_*`): stop, or last-ditch TTL-255 probes.
pub(crate) const GAP_STOP: u8 = 1;
pub(crate) const GAP_LASTDITCH: u8 = 2;
/// A trace's optional sections: a 4-bit type and a 12-bit length, then the section;
/// type 1 holds path MTU discovery (`WARTS_TRACE_ATTR_PMTUD`), type 2 the last-ditch
/// replies (`WARTS_TRACE_ATTR_LASTDITCH`).
pub(crate) const ATTR_PMTUD: u16 = 1;
pub(crate) const ATTR_LASTDITCH: u16 = 2;
/// The PMTUD section's version (2: interface, path and first-hop MTUs, every reply).
pub(crate) const PMTUD_VERSION: u8 = 2;
pub(crate) const ATTR_LEN_MAX: u16 = 0x0fff;

/// Hop flags (`SCAMPER_TRACE_HOP_FLAG_*`).
pub(crate) const HOP_FLAG_SOCK_RX: u8 = 0x01;
pub(crate) const HOP_FLAG_REPLY_TTL: u8 = 0x10;
pub(crate) const HOP_FLAG_TCP: u8 = 0x20;
pub(crate) const HOP_FLAG_UDP: u8 = 0x40;

/// scamper ping methods (`SCAMPER_PING_METHOD_*`) vTNT pings with.
pub(crate) const PING_METHODS: [(Method, u8); 5] = [
    (Method::IcmpParis, 0),
    (Method::TcpAck, 1),
    (Method::UdpParis, 3),
    (Method::UdpDport, 4),
    (Method::Tcp, 6),
];

/// The code of `m` in a table of [`TRACE_TYPES`] or [`PING_METHODS`].
pub(crate) fn method_code(table: &[(Method, u8)], m: Method) -> u8 {
    table.iter().find(|(x, _)| *x == m).map_or(0, |(_, c)| *c)
}

/// The method of `code` in a table of [`TRACE_TYPES`] or [`PING_METHODS`].
pub(crate) fn code_method(table: &[(Method, u8)], code: u8) -> Option<Method> {
    table.iter().find(|(_, c)| *c == code).map(|(m, _)| *m)
}
/// Ping reply flags (`SCAMPER_PING_REPLY_FLAG_*`).
pub(crate) const REPLY_FLAG_REPLY_TTL: u8 = 0x01;
pub(crate) const REPLY_FLAG_REPLY_IPID: u8 = 0x02;
pub(crate) const REPLY_FLAG_PROBE_IPID: u8 = 0x04;
/// `SCAMPER_PING_STOP_COMPLETED`.
pub(crate) const PING_STOP_COMPLETED: u8 = 1;

/// Address types in embedded addresses.
const ADDR_IPV4: u8 = 1;
const ADDR_IPV6: u8 = 2;

/// Builds flag bytes and the parameter block of one warts object. Parameters must be
/// added in increasing flag order.
#[derive(Default)]
pub(crate) struct Params {
    flags: Vec<u8>,
    data: Vec<u8>,
    last: u8,
}

impl Params {
    fn set(&mut self, id: u8) {
        debug_assert!(id > self.last, "warts parameters out of order");
        self.last = id;
        let i = usize::from((id - 1) / 7);
        if self.flags.len() <= i {
            self.flags.resize(i + 1, 0);
        }
        self.flags[i] |= 1 << ((id - 1) % 7);
    }
    pub fn u8(&mut self, id: u8, v: u8) {
        self.set(id);
        self.data.push(v);
    }
    pub fn u16(&mut self, id: u8, v: u16) {
        self.set(id);
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u32(&mut self, id: u8, v: u32) {
        self.set(id);
        self.data.extend_from_slice(&v.to_be_bytes());
    }
    pub fn timeval(&mut self, id: u8, sec: u32, usec: u32) {
        self.set(id);
        self.data.extend_from_slice(&sec.to_be_bytes());
        self.data.extend_from_slice(&usec.to_be_bytes());
    }
    pub fn string(&mut self, id: u8, s: &str) {
        self.set(id);
        self.data.extend_from_slice(s.as_bytes());
        self.data.push(0);
    }
    pub fn bytes(&mut self, id: u8, b: &[u8]) {
        self.set(id);
        self.data.extend_from_slice(b);
    }
    pub fn addr(&mut self, id: u8, table: &mut AddrTable, a: &IpAddr) {
        self.set(id);
        table.encode(a, &mut self.data);
    }
    /// A count byte, then each address (a ping reply's record route).
    pub fn addrs(&mut self, id: u8, table: &mut AddrTable, list: &[IpAddr]) {
        self.set(id);
        self.data.push(u8::try_from(list.len()).unwrap_or(u8::MAX));
        for a in list.iter().take(usize::from(u8::MAX)) {
            table.encode(a, &mut self.data);
        }
    }
    /// Appends flags, parameter length and parameters to `out`.
    pub fn finish(self, what: &'static str, out: &mut Vec<u8>) -> Result<(), WartsErrorKind> {
        if self.flags.is_empty() {
            out.push(0);
            return Ok(());
        }
        let n = self.flags.len();
        for (i, f) in self.flags.iter().enumerate() {
            out.push(if i + 1 < n { f | 0x80 } else { *f });
        }
        let len = u16::try_from(self.data.len()).map_err(|_| WartsErrorKind::Encode {
            what,
            why: format!("{} bytes of parameters exceed 65535", self.data.len()),
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

/// The per-object address table: the first use of an address defines it (length, type,
/// bytes), later uses refer to it by id (0 then a u32 id, ids from 0 in definition order).
#[derive(Default)]
pub(crate) struct AddrTable {
    defined: Vec<IpAddr>,
}

impl AddrTable {
    fn encode(&mut self, a: &IpAddr, out: &mut Vec<u8>) {
        if let Some(id) = self.defined.iter().position(|d| d == a) {
            out.push(0);
            out.extend_from_slice(&(id as u32).to_be_bytes());
            return;
        }
        self.defined.push(*a);
        match a {
            IpAddr::V4(v4) => {
                out.extend_from_slice(&[4, ADDR_IPV4]);
                out.extend_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                out.extend_from_slice(&[16, ADDR_IPV6]);
                out.extend_from_slice(&v6.octets());
            }
        }
    }
}

/// Writes a record header and body.
pub(crate) fn record(ty: u16, body: &[u8]) -> Result<Vec<u8>, WartsErrorKind> {
    let len = u32::try_from(body.len()).map_err(|_| WartsErrorKind::Encode {
        what: "record",
        why: format!("{} bytes exceed the 32-bit record length", body.len()),
    })?;
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// A cursor over one record body that knows its offset in the stream.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
}

/// Which parameters a flag block announces, and where its parameters end.
pub(crate) struct Flags {
    bits: Vec<u8>,
    /// Position in the body just past the parameters.
    pub end: usize,
}

impl Flags {
    pub fn has(&self, id: u8) -> bool {
        let i = usize::from((id - 1) / 7);
        self.bits
            .get(i)
            .is_some_and(|b| b & (1 << ((id - 1) % 7)) != 0)
    }
    /// The highest flag set.
    #[cfg(test)]
    pub fn max(&self) -> u8 {
        (1..=u8::try_from(self.bits.len() * 7).unwrap_or(u8::MAX))
            .rev()
            .find(|&i| self.has(i))
            .unwrap_or(0)
    }
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], base: u64) -> Cursor<'a> {
        Cursor { data, pos: 0, base }
    }
    /// Stream offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    pub fn err(&self, kind: WartsErrorKind) -> WartsError {
        WartsError::new(self.offset(), kind)
    }
    pub fn invalid(&self, what: &'static str, why: impl Into<String>) -> WartsError {
        WartsError::invalid(self.offset(), what, why)
    }
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WartsError> {
        if self.remaining() < n {
            return Err(self.err(WartsErrorKind::Truncated(what)));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    /// Moves to `pos` (within the body).
    pub fn seek(&mut self, pos: usize, what: &'static str) -> Result<(), WartsError> {
        if pos > self.data.len() {
            return Err(self.err(WartsErrorKind::Truncated(what)));
        }
        self.pos = pos;
        Ok(())
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, WartsError> {
        Ok(self.take(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, WartsError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, WartsError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A timeval as microseconds since the epoch.
    pub fn timeval(&mut self, what: &'static str) -> Result<u64, WartsError> {
        let s = self.u32(what)?;
        let at = self.offset();
        let us = self.u32(what)?;
        if us >= 1_000_000 {
            return Err(WartsError::invalid(at, what, format!("{us} microseconds")));
        }
        Ok(u64::from(s) * 1_000_000 + u64::from(us))
    }
    /// A NUL-terminated string.
    pub fn string(&mut self, what: &'static str) -> Result<String, WartsError> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.err(WartsErrorKind::Truncated(what)))?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.pos += n + 1;
        Ok(s)
    }
    /// A flag block and, if any flag is set, the parameter length; checks that the
    /// parameters fit in the body.
    pub fn flags(&mut self, what: &'static str) -> Result<Flags, WartsError> {
        let mut bits = Vec::new();
        loop {
            let b = self.u8(what)?;
            bits.push(b & 0x7f);
            if b & 0x80 == 0 {
                break;
            }
        }
        if bits.first() == Some(&0) && bits.len() == 1 {
            return Ok(Flags {
                bits,
                end: self.pos,
            });
        }
        let len = usize::from(self.u16(what)?);
        if self.remaining() < len {
            return Err(self.err(WartsErrorKind::Truncated(what)));
        }
        Ok(Flags {
            bits,
            end: self.pos + len,
        })
    }
    /// An embedded address (defined or referenced) using the object's table. Non-IP
    /// address types are kept in the table but rejected when used.
    pub fn addr(
        &mut self,
        table: &mut Vec<Option<IpAddr>>,
        what: &'static str,
    ) -> Result<IpAddr, WartsError> {
        let at = self.offset();
        let len = self.u8(what)?;
        if len == 0 {
            let id = self.u32(what)?;
            return match table.get(id as usize) {
                Some(Some(a)) => Ok(*a),
                Some(None) => Err(WartsError::invalid(
                    at,
                    what,
                    format!("address id {id} is not IP"),
                )),
                None => Err(WartsError::invalid(
                    at,
                    what,
                    format!("address id {id} not defined"),
                )),
            };
        }
        let ty = self.u8(what)?;
        let b = self.take(usize::from(len), what)?;
        let a = match (ty, len) {
            (ADDR_IPV4, 4) => Some(IpAddr::from([b[0], b[1], b[2], b[3]])),
            (ADDR_IPV6, 16) => {
                let mut o = [0u8; 16];
                o.copy_from_slice(b);
                Some(IpAddr::from(o))
            }
            (ADDR_IPV4 | ADDR_IPV6, _) => {
                return Err(WartsError::invalid(
                    at,
                    what,
                    format!("address type {ty} with length {len}"),
                ))
            }
            _ => None,
        };
        table.push(a);
        a.ok_or_else(|| WartsError::invalid(at, what, format!("address type {ty} is not IP")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_fold_like_scamper() {
        // scamper's udp-paris trace on loopback: flags f3 fe ff 3f.
        let mut p = Params::default();
        for id in [
            1u8, 2, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
            27,
        ] {
            p.u8(id, 0);
        }
        let mut out = Vec::new();
        p.finish("test", &mut out).unwrap();
        assert_eq!(&out[..4], &[0xf3, 0xfe, 0xff, 0x3f]);
        let mut c = Cursor::new(&out, 0);
        let f = c.flags("test").unwrap();
        assert!(f.has(1) && !f.has(3) && f.has(27) && !f.has(28));
        assert_eq!(f.max(), 27);
        assert_eq!(f.end, out.len());
    }

    #[test]
    fn addresses_define_then_refer() {
        let mut t = AddrTable::default();
        let mut p = Params::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        p.addr(1, &mut t, &a);
        p.addr(2, &mut t, &a);
        let mut out = Vec::new();
        p.finish("test", &mut out).unwrap();
        assert_eq!(&out[3..], &[4, 1, 192, 0, 2, 1, 0, 0, 0, 0, 0]);
        let mut c = Cursor::new(&out[3..], 3);
        let mut table = Vec::new();
        assert_eq!(c.addr(&mut table, "a").unwrap(), a);
        assert_eq!(c.addr(&mut table, "a").unwrap(), a);
        let mut bad = Cursor::new(&[0, 0, 0, 0, 9], 100);
        let e = bad.addr(&mut table, "a").unwrap_err();
        assert_eq!(e.offset, 100);
    }
}
