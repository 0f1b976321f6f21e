//! The warts reader: lists, cycle start/definition/stop, traces and pings from our files
//! and scamper's. Record types it does not know are skipped by their length.
//!
//! Errors carry the byte offset in the stream. A record whose body is bad (or valid but
//! not representable, e.g. a classic UDP trace) gives an error and reading goes on with
//! the next record; a broken header, bad magic or a truncated stream ends the iteration
//! after its error. Nothing here panics on any input (see the fuzz targets).

use std::collections::HashMap;
use std::io::Read;

use vtnt_record::{
    Duration, Hop, Instant, IpAddr, Method, MplsLabel, Ping, PingReply, Pmtud, PmtudNote,
    PmtudNoteKind, ProbeData, Quoted, Record, StopReason, Trace,
};

use crate::error::{WartsError, WartsErrorKind};
use crate::json_fmt::{icmp_quotes, PING_FLAG_ICMPSUM, PING_FLAG_PAYLOAD, PING_FLAG_V4RR};
use crate::warts::*;
use crate::{Cycle, Item, TntFields, TNT_LIST};

/// Largest record body the reader accepts (a guard against absurd lengths).
const MAX_RECORD: u32 = 64 << 20;

/// Reads warts records; an iterator of per-record results.
#[derive(Debug)]
pub struct WartsReader<R: Read> {
    input: R,
    offset: u64,
    done: bool,
    /// warts list id -> (human id, name, description).
    lists: HashMap<u32, (u32, String, Option<String>)>,
    /// warts cycle id -> cycle.
    cycles: HashMap<u32, Cycle>,
}

/// Reads every record of an in-memory warts file.
pub fn read_warts(bytes: &[u8]) -> Vec<Result<Item, WartsError>> {
    WartsReader::new(bytes).collect()
}

impl<R: Read> WartsReader<R> {
    /// Reads from `input` (wrap files in a `BufReader`).
    pub fn new(input: R) -> WartsReader<R> {
        WartsReader {
            input,
            offset: 0,
            done: false,
            lists: HashMap::new(),
            cycles: HashMap::new(),
        }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether reading has ended: at the end of the stream, or after an error that left
    /// no record boundary to go on from (then that error was the last item).
    pub fn ended(&self) -> bool {
        self.done
    }

    /// Reads exactly `buf.len()` bytes; `Ok(false)` on a clean end before the first byte.
    fn fill(&mut self, buf: &mut [u8], what: &'static str) -> Result<bool, WartsError> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => {
                    return Err(WartsError::new(
                        self.offset + got as u64,
                        WartsErrorKind::Truncated(what),
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(WartsError::new(self.offset + got as u64, e.into())),
            }
        }
        Ok(true)
    }

    /// Reads the next record; `Ok(None)` to skip it (unknown type, list, definition).
    fn next_record(&mut self) -> Result<Option<Option<Item>>, Failure> {
        let start = self.offset;
        let mut hdr = [0u8; 8];
        if !self
            .fill(&mut hdr, "record header")
            .map_err(Failure::Stream)?
        {
            return Ok(None);
        }
        let magic = u16::from_be_bytes([hdr[0], hdr[1]]);
        if magic != MAGIC {
            return Err(Failure::Stream(WartsError::new(
                start,
                WartsErrorKind::BadMagic(magic),
            )));
        }
        let ty = u16::from_be_bytes([hdr[2], hdr[3]]);
        let len = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
        if len > MAX_RECORD {
            let e = WartsError::invalid(start + 4, "record length", format!("{len} bytes"));
            return Err(Failure::Stream(e));
        }
        self.offset += 8;
        let mut body = Vec::new();
        let got = (&mut self.input)
            .take(u64::from(len))
            .read_to_end(&mut body);
        let got = got.map_err(|e| Failure::Stream(WartsError::new(self.offset, e.into())))?;
        if got < len as usize {
            let e = WartsError::new(
                self.offset + got as u64,
                WartsErrorKind::Truncated("record body"),
            );
            return Err(Failure::Stream(e));
        }
        let base = self.offset;
        self.offset += u64::from(len);
        let mut c = Cursor::new(&body, base);
        let item = self.body(ty, &mut c).map_err(Failure::Record)?;
        Ok(Some(item))
    }

    /// Decodes one record body of type `ty`; `None` for records that yield no item.
    fn body(&mut self, ty: u16, c: &mut Cursor) -> Result<Option<Item>, WartsError> {
        Ok(match ty {
            TYPE_LIST => {
                self.list(c)?;
                None
            }
            TYPE_CYCLE_START => Some(Item::CycleStart(self.cycle(c)?)),
            TYPE_CYCLE_DEF => {
                self.cycle(c)?;
                None
            }
            TYPE_CYCLE_STOP => Some(Item::CycleStop(self.cycle_stop(c)?)),
            TYPE_TRACE | TYPE_PING => {
                let at = c.offset();
                let list = list_of(c)?;
                let r = if ty == TYPE_TRACE {
                    Record::Trace(trace(c)?)
                } else {
                    Record::Ping(ping(c)?)
                };
                match self.lists.get(&list) {
                    Some((_, name, Some(descr))) if name == TNT_LIST => {
                        let hops = match &r {
                            Record::Trace(t) => t.hops.len(),
                            Record::Ping(_) => 0,
                        };
                        let f = TntFields::from_descr(descr, hops).map_err(|why| {
                            WartsError::invalid(at, "tnt annotations (list description)", why)
                        })?;
                        Some(Item::Annotated(r, f))
                    }
                    _ => Some(Item::Record(r)),
                }
            }
            _ => None,
        })
    }

    fn list(&mut self, c: &mut Cursor) -> Result<(), WartsError> {
        let warts_id = c.u32("list id")?;
        let human = c.u32("list human id")?;
        let name = c.string("list name")?;
        let f = c.flags("list flags")?;
        let descr = if f.has(1) {
            Some(c.string("list description")?)
        } else {
            None
        };
        if c.pos() > f.end {
            return Err(c.invalid("list parameters", "overrun their length"));
        }
        c.seek(f.end, "list parameters")?;
        self.lists.insert(warts_id, (human, name, descr));
        Ok(())
    }

    fn cycle(&mut self, c: &mut Cursor) -> Result<Cycle, WartsError> {
        let warts_id = c.u32("cycle id")?;
        let at = c.offset();
        let list = c.u32("cycle list id")?;
        let (list_id, list_name, vtnt) = self
            .lists
            .get(&list)
            .map(|(h, n, d)| (*h, n.clone(), vtnt_of(d.as_deref())))
            .ok_or_else(|| {
                WartsError::invalid(at, "cycle list id", format!("list {list} not defined"))
            })?;
        let id = c.u32("cycle human id")?;
        let start_time = c.u32("cycle start time")?;
        let f = c.flags("cycle flags")?;
        let mut cy = Cycle {
            list_name,
            list_id,
            id,
            hostname: None,
            start_time,
            stop_time: 0,
            vtnt,
        };
        if f.has(1) {
            cy.stop_time = c.u32("cycle stop time")?;
        }
        if f.has(2) {
            cy.hostname = Some(c.string("cycle hostname")?);
        }
        if c.pos() > f.end {
            return Err(c.invalid("cycle parameters", "overrun their length"));
        }
        self.cycles.insert(warts_id, cy.clone());
        Ok(cy)
    }

    fn cycle_stop(&mut self, c: &mut Cursor) -> Result<Cycle, WartsError> {
        let at = c.offset();
        let id = c.u32("cycle id")?;
        let stop = c.u32("cycle stop time")?;
        let f = c.flags("cycle stop flags")?;
        c.seek(f.end, "cycle stop parameters")?;
        let cy = self.cycles.get_mut(&id).ok_or_else(|| {
            WartsError::invalid(at, "cycle stop id", format!("cycle {id} not started"))
        })?;
        cy.stop_time = stop;
        Ok(cy.clone())
    }
}

impl<R: Read> Iterator for WartsReader<R> {
    type Item = Result<Item, WartsError>;
    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.next_record() {
                Ok(None) => self.done = true,
                Ok(Some(None)) => continue,
                Ok(Some(Some(item))) => return Some(Ok(item)),
                Err(Failure::Record(e)) => return Some(Err(e)),
                Err(Failure::Stream(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// Why reading a record failed: its body was bad (go on with the next record), or the
/// stream itself broke (stop).
enum Failure {
    Record(WartsError),
    Stream(WartsError),
}

/// The warts list id a trace or ping body names (its parameter 1; 0 without), leaving
/// the cursor where it was.
fn list_of(c: &Cursor) -> Result<u32, WartsError> {
    let mut peek = c.clone();
    let f = peek.flags("record flags")?;
    if f.has(1) {
        peek.u32("record list id")
    } else {
        Ok(0)
    }
}

/// Fails if the parameters read overran the announced parameter length, then moves to
/// their end (skipping parameters this reader does not know).
fn end_params(c: &mut Cursor, f: &Flags, what: &'static str) -> Result<(), WartsError> {
    if c.pos() > f.end {
        return Err(c.invalid(what, "overrun their announced length"));
    }
    c.seek(f.end, what)
}

fn trace(c: &mut Cursor) -> Result<Trace, WartsError> {
    let f = c.flags("trace flags")?;
    let mut table: Vec<Option<IpAddr>> = Vec::new();
    let (mut src, mut dst) = (None, None);
    let mut t = Trace {
        src: IpAddr::from([0, 0, 0, 0]),
        dst: IpAddr::from([0, 0, 0, 0]),
        method: Method::UdpParis,
        sport: 0,
        dport: 0,
        icmp_sum: 0,
        userid: 0,
        start: Instant::ZERO,
        stop_reason: StopReason::None,
        stop_data: 0,
        attempts: 0,
        hoplimit: 0,
        firsthop: 1,
        gaplimit: 0,
        wait: Duration::ZERO,
        wait_probe: Duration::ZERO,
        tos: 0,
        probe_size: 0,
        probe_count: 0,
        hop_count: 0,
        all_attempts: false,
        ignore_ttl_dst: false,
        hops: Vec::new(),
        last_ditch: false,
        lastditch: Vec::new(),
        ptr: false,
        squeries: 1,
        confidence: 0,
        pmtud: false,
        pmtud_result: None,
    };
    let (mut ty, mut flags8, mut flags32) = (0u8, 0u8, None);
    if f.has(3) || f.has(4) {
        return Err(c.err(WartsErrorKind::Unsupported {
            what: "trace addresses",
            why: "global address ids (deprecated warts address records)".into(),
        }));
    }
    let stop_at = c.offset();
    let mut stop = 0u8;
    for id in 1..=32u8 {
        if !f.has(id) {
            continue;
        }
        match id {
            1 | 2 => {
                c.u32("trace list/cycle id")?;
            }
            5 => t.start = Instant::from_micros(c.timeval("trace start")?),
            6 => stop = c.u8("trace stop reason")?,
            7 => t.stop_data = c.u8("trace stop data")?,
            8 => flags8 = c.u8("trace flags")?,
            9 => t.attempts = c.u8("trace attempts")?,
            10 => t.hoplimit = c.u8("trace hoplimit")?,
            11 => ty = c.u8("trace type")?,
            12 => t.probe_size = c.u16("trace probe size")?,
            13 => t.sport = c.u16("trace sport")?,
            14 => t.dport = c.u16("trace dport")?,
            15 => t.firsthop = c.u8("trace firsthop")?.max(1),
            16 => t.tos = c.u8("trace tos")?,
            17 => t.wait = Duration::from_secs(c.u8("trace wait")?.into()),
            21 => t.last_ditch = c.u8("trace gap action")? == GAP_LASTDITCH,
            25 => t.confidence = c.u8("trace confidence")?,
            31 => t.squeries = c.u8("trace squeries")?.max(1),
            18 | 22 => {
                c.u8("trace parameter")?;
            }
            19 => t.hop_count = u8::try_from(c.u16("trace hop count")?).unwrap_or(u8::MAX),
            20 => t.gaplimit = c.u8("trace gaplimit")?,
            23 => t.probe_count = c.u16("trace probe count")?,
            24 => t.wait_probe = Duration::from_millis(u64::from(c.u8("trace wait probe")?) * 10),
            26 => src = Some(c.addr(&mut table, "trace src")?),
            27 => dst = Some(c.addr(&mut table, "trace dst")?),
            28 => t.userid = c.u32("trace userid")?,
            29 => {
                c.u16("trace offset")?;
            }
            30 => {
                // router address: static form, not in the table
                let mut scratch = Vec::new();
                c.addr(&mut scratch, "trace rtr")?;
            }
            32 => flags32 = Some(c.u32("trace flags")?),
            _ => {}
        }
    }
    end_params(c, &f, "trace parameters")?;
    t.stop_reason = StopReason::from_code(stop)
        .ok_or_else(|| WartsError::invalid(stop_at, "trace stop reason", format!("code {stop}")))?;
    let flags = flags32.map_or(u32::from(flags8), |f| f);
    t.all_attempts = flags & u32::from(TRACE_FLAG_ALLATTEMPTS) != 0;
    t.ignore_ttl_dst = flags & u32::from(TRACE_FLAG_IGNORETTLDST) != 0;
    t.ptr = flags & TRACE_FLAG_PTR != 0;
    t.pmtud = flags & u32::from(TRACE_FLAG_PMTUD) != 0;
    t.method = match code_method(&TRACE_TYPES, ty) {
        // classic UDP traceroute is not one of vTNT's trace methods
        Some(m) if m != Method::UdpDport => m,
        _ => {
            let name = match ty {
                1 => "icmp-echo".to_string(),
                2 => "udp".to_string(),
                n => format!("type {n}"),
            };
            return Err(c.err(WartsErrorKind::Unsupported {
                what: "trace method",
                why: name,
            }));
        }
    };
    if t.method == Method::IcmpParis {
        if flags & u32::from(TRACE_FLAG_ICMPCSUMDP) != 0 {
            t.icmp_sum = t.dport;
        }
        t.dport = 0;
    }
    t.src = src.ok_or_else(|| c.invalid("trace src", "absent"))?;
    t.dst = dst.ok_or_else(|| c.invalid("trace dst", "absent"))?;
    let count = c.u16("trace hop count")?;
    for _ in 0..count {
        t.hops.push(hop(c, &mut table)?);
    }
    // Optional data (PMTUD, last-ditch, doubletree) until a zero header; PMTUD and the
    // last-ditch replies are read, doubletree skipped.
    loop {
        let hdr = c.u16("trace optional data header")?;
        if hdr == 0 {
            break;
        }
        let end = c.pos() + usize::from(hdr & ATTR_LEN_MAX);
        if hdr >> 12 == ATTR_PMTUD {
            t.pmtud_result = Some(pmtud(c, &mut table)?);
            if c.pos() > end {
                return Err(c.invalid("trace PMTUD", "overruns its section"));
            }
        } else if hdr >> 12 == ATTR_LASTDITCH {
            let f = c.flags("trace last-ditch flags")?;
            end_params(c, &f, "trace last-ditch flags")?;
            for _ in 0..c.u16("trace last-ditch reply count")? {
                t.lastditch.push(hop(c, &mut table)?);
            }
            if c.pos() > end {
                return Err(c.invalid("trace last-ditch replies", "overrun their section"));
            }
        }
        c.seek(end, "trace optional data")?;
    }
    Ok(t)
}

/// A trace's PMTUD section (scamper's `warts_trace_pmtud_read`): parameters, replies,
/// notes.
fn pmtud(c: &mut Cursor, table: &mut Vec<Option<IpAddr>>) -> Result<Pmtud, WartsError> {
    let f = c.flags("trace PMTUD flags")?;
    let mut d = Pmtud::default();
    let mut notes = 0u8;
    for id in 1..=5u8 {
        if !f.has(id) {
            continue;
        }
        match id {
            1 => d.ifmtu = c.u16("PMTUD interface mtu")?,
            2 => d.pmtu = c.u16("PMTUD path mtu")?,
            3 => d.outmtu = c.u16("PMTUD first-hop mtu")?,
            4 => {
                c.u8("PMTUD version")?;
            }
            _ => notes = c.u8("PMTUD note count")?,
        }
    }
    end_params(c, &f, "trace PMTUD parameters")?;
    for _ in 0..c.u16("PMTUD reply count")? {
        d.hops.push(hop(c, table)?);
    }
    for _ in 0..notes {
        let at = c.offset();
        let f = c.flags("PMTUD note flags")?;
        let (mut kind, mut nhmtu, mut hop) = (0u8, 0u16, None);
        for id in 1..=3u8 {
            if !f.has(id) {
                continue;
            }
            match id {
                1 => kind = c.u8("PMTUD note type")?,
                2 => nhmtu = c.u16("PMTUD note next-hop mtu")?,
                _ => hop = Some(c.u16("PMTUD note hop")?),
            }
        }
        end_params(c, &f, "PMTUD note parameters")?;
        let kind = PmtudNoteKind::from_u8(kind)
            .ok_or_else(|| WartsError::invalid(at, "PMTUD note type", format!("{kind}")))?;
        if hop.is_some_and(|h| usize::from(h) >= d.hops.len()) {
            return Err(WartsError::invalid(
                at,
                "PMTUD note hop",
                "past the replies",
            ));
        }
        d.notes.push(PmtudNote { kind, nhmtu, hop });
    }
    Ok(d)
}

fn hop(c: &mut Cursor, table: &mut Vec<Option<IpAddr>>) -> Result<Hop, WartsError> {
    let at = c.offset();
    let f = c.flags("hop flags")?;
    if f.has(1) {
        return Err(c.err(WartsErrorKind::Unsupported {
            what: "hop address",
            why: "global address id (deprecated warts address records)".into(),
        }));
    }
    let mut h = Hop {
        addr: IpAddr::from([0, 0, 0, 0]),
        probe_ttl: 0,
        probe_id: 1,
        probe_size: 0,
        tx: Instant::ZERO,
        rtt: Duration::ZERO,
        reply_ttl: 0,
        reply_tos: 0,
        reply_ipid: 0,
        reply_size: 0,
        icmp: None,
        tcp_flags: None,
        quoted: None,
        mpls: Vec::new(),
        name: None,
        nhmtu: 0,
    };
    let (mut flags, mut tc, mut tcp) = (0u8, (0u8, 0u8), 0u8);
    let (mut q_ipl, mut q_ttl, mut q_tos) = (None, None, 0u8);
    let mut addr = None;
    for id in 1..=20u8 {
        if !f.has(id) {
            continue;
        }
        match id {
            2 => h.probe_ttl = c.u8("hop probe ttl")?,
            3 => h.reply_ttl = c.u8("hop reply ttl")?,
            4 => flags = c.u8("hop flags")?,
            5 => h.probe_id = c.u8("hop probe id")?.wrapping_add(1),
            6 => h.rtt = Duration::from_micros(c.u32("hop rtt")?.into()),
            7 => tc = (c.u8("hop icmp type")?, c.u8("hop icmp code")?),
            8 => h.probe_size = c.u16("hop probe size")?,
            9 => h.reply_size = c.u16("hop reply size")?,
            10 => h.reply_ipid = c.u16("hop reply ipid")?,
            11 => h.reply_tos = c.u8("hop reply tos")?,
            12 => h.nhmtu = c.u16("hop next-hop mtu")?,
            13 => q_ipl = Some(c.u16("hop quoted length")?),
            14 => q_ttl = Some(c.u8("hop quoted ttl")?),
            15 => tcp = c.u8("hop tcp flags")?,
            16 => q_tos = c.u8("hop quoted tos")?,
            17 => h.mpls = icmpext(c)?,
            18 => addr = Some(c.addr(table, "hop address")?),
            19 => h.tx = Instant::from_micros(c.timeval("hop tx")?),
            HOP_NAME => h.name = Some(c.string("hop name")?),
            _ => {}
        }
    }
    end_params(c, &f, "hop parameters")?;
    h.addr = addr.ok_or_else(|| WartsError::invalid(at, "hop address", "absent"))?;
    if h.probe_ttl == 0 {
        return Err(WartsError::invalid(at, "hop probe ttl", "absent or 0"));
    }
    if flags & HOP_FLAG_TCP != 0 {
        h.tcp_flags = Some(tcp);
    } else if flags & HOP_FLAG_UDP == 0 {
        h.icmp = Some(tc);
        if icmp_quotes(&h.addr, h.icmp) {
            h.quoted = Some(Quoted {
                ttl: q_ttl.unwrap_or(1),
                ip_len: q_ipl.unwrap_or(h.probe_size),
                tos: q_tos,
            });
        }
    }
    Ok(h)
}

/// A set of ICMP extensions; returns the MPLS label stack entries (class 1, c-type 1).
fn icmpext(c: &mut Cursor) -> Result<Vec<MplsLabel>, WartsError> {
    let total = usize::from(c.u16("icmp extensions length")?);
    if total == 0 {
        return Err(c.invalid("icmp extensions length", "0"));
    }
    let end = c.pos() + total;
    if c.remaining() < total {
        return Err(c.err(WartsErrorKind::Truncated("icmp extensions")));
    }
    let mut labels = Vec::new();
    while end - c.pos() >= 4 {
        let dl = usize::from(c.u16("icmp extension length")?);
        let cn = c.u8("icmp extension class")?;
        let ct = c.u8("icmp extension type")?;
        if end - c.pos() < dl {
            return Err(c.invalid(
                "icmp extension",
                format!("{dl} bytes overrun the extensions"),
            ));
        }
        let data = c.take(dl, "icmp extension data")?;
        if cn == 1 && ct == 1 {
            for e in data.chunks_exact(4) {
                let v = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
                labels.push(MplsLabel {
                    label: v >> 12,
                    exp: ((v >> 9) & 7) as u8,
                    bottom: (v >> 8) & 1 == 1,
                    ttl: (v & 0xff) as u8,
                });
            }
        }
    }
    c.seek(end, "icmp extensions")?;
    Ok(labels)
}

fn ping(c: &mut Cursor) -> Result<Ping, WartsError> {
    let f = c.flags("ping flags")?;
    if f.has(3) || f.has(4) {
        return Err(c.err(WartsErrorKind::Unsupported {
            what: "ping addresses",
            why: "global address ids (deprecated warts address records)".into(),
        }));
    }
    let mut table: Vec<Option<IpAddr>> = Vec::new();
    let (mut src, mut dst) = (None, None);
    let (mut method, mut wait, mut wait_us, mut timeout) = (0u8, 0u8, 0u32, None);
    let mut p = Ping {
        src: IpAddr::from([0, 0, 0, 0]),
        dst: IpAddr::from([0, 0, 0, 0]),
        method: Method::IcmpParis,
        sport: 0,
        dport: 0,
        userid: 0,
        start: Instant::ZERO,
        ping_sent: 0,
        probe_size: 0,
        ttl: 0,
        wait: Duration::ZERO,
        timeout: Duration::ZERO,
        tcp_seq: 0,
        tcp_ack: 0,
        tos: 0,
        icmp_sum: None,
        reply_count: 0,
        data: None,
        record_route: false,
        responses: Vec::new(),
    };
    let (mut datalen, mut data, mut flags, mut icmp_sum) = (0u16, Vec::new(), 0u32, 0u16);
    for id in 1..=32u8 {
        if !f.has(id) {
            continue;
        }
        match id {
            1 | 2 => {
                c.u32("ping list/cycle id")?;
            }
            5 => p.start = Instant::from_micros(c.timeval("ping start")?),
            6 | 7 => {
                c.u8("ping stop reason/data")?;
            }
            8 => datalen = c.u16("ping data length")?,
            9 => data = c.take(usize::from(datalen), "ping data")?.to_vec(),
            10 => {
                c.u16("ping probe count")?;
            }
            11 => p.probe_size = c.u16("ping probe size")?,
            12 => wait = c.u8("ping wait")?,
            13 => p.ttl = c.u8("ping ttl")?,
            14 => p.reply_count = c.u16("ping reply count")?,
            15 => p.ping_sent = c.u16("ping sent")?,
            16 => method = c.u8("ping method")?,
            17 => p.sport = c.u16("ping sport")?,
            18 => p.dport = c.u16("ping dport")?,
            19 => p.userid = c.u32("ping userid")?,
            20 => src = Some(c.addr(&mut table, "ping src")?),
            21 => dst = Some(c.addr(&mut table, "ping dst")?),
            22 => flags |= u32::from(c.u8("ping flags")?),
            23 => p.tos = c.u8("ping tos")?,
            24 => {
                let n = c.u8("ping timestamp prespecified count")?;
                for _ in 0..n {
                    c.addr(&mut table, "ping timestamp address")?;
                }
            }
            25 => icmp_sum = c.u16("ping icmp sum")?,
            26 => {
                c.u16("ping reply pmtu")?;
            }
            27 => timeout = Some(c.u8("ping timeout")?),
            28 => wait_us = c.u32("ping wait us")?,
            29 => p.tcp_ack = c.u32("ping tcp ack")?,
            30 => flags = c.u32("ping flags")?,
            31 => p.tcp_seq = c.u32("ping tcp seq")?,
            32 => {
                let mut scratch = Vec::new();
                c.addr(&mut scratch, "ping rtr")?;
            }
            _ => {}
        }
    }
    end_params(c, &f, "ping parameters")?;
    p.record_route = flags & u32::from(PING_FLAG_V4RR) != 0;
    p.icmp_sum = (flags & u32::from(PING_FLAG_ICMPSUM) != 0 && icmp_sum != 0).then_some(icmp_sum);
    p.data = match (data.is_empty(), flags & u32::from(PING_FLAG_PAYLOAD) != 0) {
        (true, _) => None,
        (false, true) => Some(ProbeData::Payload(data)),
        (false, false) => Some(ProbeData::Pattern(data)),
    };
    p.method = match code_method(&PING_METHODS, method) {
        Some(m) => m,
        None => {
            return Err(c.err(WartsErrorKind::Unsupported {
                what: "ping method",
                why: format!("method {method}"),
            }))
        }
    };
    p.src = src.ok_or_else(|| c.invalid("ping src", "absent"))?;
    p.dst = dst.ok_or_else(|| c.invalid("ping dst", "absent"))?;
    p.wait = Duration::from_secs(wait.into()) + Duration::from_micros(wait_us.into());
    p.timeout = Duration::from_secs(timeout.unwrap_or(wait).into());
    let count = c.u16("ping reply count")?;
    for _ in 0..count {
        let at = c.offset();
        let r = reply(c, &mut table, p.dst.is_ipv4())?;
        if r.seq >= p.ping_sent {
            return Err(WartsError::invalid(
                at,
                "ping reply seq",
                format!("{} >= ping_sent {}", r.seq, p.ping_sent),
            ));
        }
        p.responses.push(r);
    }
    Ok(p)
}

fn reply(
    c: &mut Cursor,
    table: &mut Vec<Option<IpAddr>>,
    v4: bool,
) -> Result<PingReply, WartsError> {
    let at = c.offset();
    let f = c.flags("reply flags")?;
    if f.has(1) {
        return Err(c.err(WartsErrorKind::Unsupported {
            what: "reply address",
            why: "global address id (deprecated warts address records)".into(),
        }));
    }
    let mut r = PingReply {
        from: IpAddr::from([0, 0, 0, 0]),
        seq: 0,
        tx: Instant::ZERO,
        rtt: Duration::ZERO,
        reply_size: 0,
        reply_ttl: 0,
        reply_tos: 0,
        reply_proto: if v4 { 1 } else { 58 },
        probe_ipid: 0,
        reply_ipid: 0,
        icmp: None,
        tcp_flags: None,
        rr: Vec::new(),
    };
    let (mut tc, mut tcp, mut from) = ((0u8, 0u8), 0u8, None);
    for id in 1..=17u8 {
        if !f.has(id) {
            continue;
        }
        match id {
            2 => {
                c.u8("reply flags")?;
            }
            3 => r.reply_ttl = c.u8("reply ttl")?,
            4 => r.reply_size = c.u16("reply size")?,
            5 => tc = (c.u8("reply icmp type")?, c.u8("reply icmp code")?),
            6 => r.rtt = Duration::from_micros(c.u32("reply rtt")?.into()),
            7 => r.seq = c.u16("reply probe id")?,
            8 => r.reply_ipid = c.u16("reply ipid")?,
            9 => r.probe_ipid = c.u16("reply probe ipid")?,
            10 => r.reply_proto = c.u8("reply protocol")?,
            11 => tcp = c.u8("reply tcp flags")?,
            12 => from = Some(c.addr(table, "reply address")?),
            13 => {
                let n = c.u8("reply record route count")?;
                for _ in 0..n {
                    r.rr.push(c.addr(table, "reply record route address")?);
                }
            }
            14 => {
                let tsc = c.u8("reply timestamp count")?;
                let ipc = c.u8("reply timestamp address count")?;
                c.take(4 * usize::from(tsc), "reply timestamps")?;
                for _ in 0..ipc {
                    c.addr(table, "reply timestamp address")?;
                }
            }
            15 => {
                c.u32("reply ipid32")?;
            }
            16 => r.tx = Instant::from_micros(c.timeval("reply tx")?),
            17 => {
                c.take(12, "reply icmp timestamps")?;
            }
            _ => {}
        }
    }
    end_params(c, &f, "reply parameters")?;
    r.from = from.ok_or_else(|| WartsError::invalid(at, "reply address", "absent"))?;
    match r.reply_proto {
        1 | 58 => r.icmp = Some(tc),
        6 => r.tcp_flags = Some(tcp),
        _ => {}
    }
    Ok(r)
}
