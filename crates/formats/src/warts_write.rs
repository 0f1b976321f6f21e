//! The warts writer: list, cycle start/stop, trace (0x0006) and ping (0x0007) records in
//! the layout scamper 20211212 writes and reads (warts(5), scamper_trace_warts.c,
//! scamper_ping_warts.c). Addresses are embedded per object: defined on first use,
//! referenced by id after that.
//!
//! Only parameters scamper itself defines are written: vTNT's annotations go into a list
//! object of the record's own ([`crate::TntFields`]), never into trace flags or hop
//! attributes scamper may give another meaning (no trace flag 0x80, and hop attribute 20
//! is scamper's hop name, not TNT's old annotation).

use std::io::Write;

use vtnt_record::{Hop, Method, Ping, PingReply, Pmtud, Record, Trace};

use crate::error::{WartsError, WartsErrorKind};
use crate::json_fmt::{hop_icmp, icmp_ptb, icmp_quotes, micros_u32, ordered_replies, ping_flags};
use crate::json_line::{
    ping_timeout_secs, ping_wait_secs, reply_is_icmp, wait_probe_cs, wait_secs,
};
use crate::warts::*;
use crate::{Cycle, Item, TntFields, TNT_LIST};

/// Writes warts records to `W`.
#[derive(Debug)]
pub struct WartsWriter<W: Write> {
    out: W,
    written: u64,
    /// Named lists written so far: (name, human id, warts id).
    lists: Vec<(String, u32, u32)>,
    /// Lists written so far, annotation lists included (warts ids run from 1).
    lists_written: u32,
    /// The open cycle: (warts cycle id, warts list id).
    cycle: Option<(u32, u32)>,
    cycles_written: u32,
    /// Cycle starts and stops, traces and pings written (what a reader gives back).
    objects: u64,
}

impl<W: Write> WartsWriter<W> {
    /// A writer; nothing is written until the first object.
    pub fn new(out: W) -> WartsWriter<W> {
        WartsWriter {
            out,
            written: 0,
            lists: Vec::new(),
            lists_written: 0,
            cycle: None,
            cycles_written: 0,
            objects: 0,
        }
    }

    /// Writes a cycle start record (and, the first time a list is named, its list
    /// record). Records written until [`WartsWriter::cycle_stop`] belong to this cycle.
    pub fn cycle_start(&mut self, c: &Cycle) -> Result<(), WartsError> {
        let descr = c.vtnt.as_ref().map(|v| format!("{VTNT_DESCR}{v}"));
        let list = self.list_id(&c.list_name, c.list_id, descr.as_deref())?;
        self.cycles_written += 1;
        let id = self.cycles_written;
        let mut body = Vec::new();
        body.extend_from_slice(&id.to_be_bytes());
        body.extend_from_slice(&list.to_be_bytes());
        body.extend_from_slice(&c.id.to_be_bytes());
        body.extend_from_slice(&c.start_time.to_be_bytes());
        let mut p = Params::default();
        if c.stop_time != 0 {
            p.u32(1, c.stop_time);
        }
        if let Some(h) = &c.hostname {
            p.string(2, h);
        }
        self.finish_params(p, "cycle start", &mut body)?;
        self.emit(TYPE_CYCLE_START, &body)?;
        self.cycle = Some((id, list));
        self.objects += 1;
        Ok(())
    }

    /// Writes a cycle stop record for the open cycle (starting one from `c` first if
    /// none is open, so the stop refers to something).
    pub fn cycle_stop(&mut self, c: &Cycle) -> Result<(), WartsError> {
        if self.cycle.is_none() {
            self.cycle_start(&Cycle {
                stop_time: 0,
                ..c.clone()
            })?;
        }
        let (id, _) = self.cycle.take().unwrap_or((0, 0));
        let mut body = Vec::new();
        body.extend_from_slice(&id.to_be_bytes());
        body.extend_from_slice(&c.stop_time.to_be_bytes());
        body.push(0);
        self.emit(TYPE_CYCLE_STOP, &body)?;
        self.objects += 1;
        Ok(())
    }

    /// Writes a trace or ping record.
    pub fn write(&mut self, r: &Record) -> Result<(), WartsError> {
        let list = match self.cycle {
            Some((_, l)) => l,
            None => self.list_id("default", 0, None)?,
        };
        self.write_in(r, list)
    }

    /// Writes a trace or ping record with its annotations: first a [`TNT_LIST`] list
    /// whose description holds them, then the record in that list (and in the open
    /// cycle). Fails before writing anything when they exceed a list's 65,534 bytes.
    pub fn write_annotated(&mut self, r: &Record, f: &TntFields) -> Result<(), WartsError> {
        let list = self.new_list(TNT_LIST, 0, Some(&f.descr()))?;
        self.write_in(r, list)
    }

    /// Writes a trace or ping record in the warts list `list`.
    fn write_in(&mut self, r: &Record, list: u32) -> Result<(), WartsError> {
        let cycle = self.cycle.map_or(0, |(c, _)| c);
        let at = self.written;
        let (ty, body) = match r {
            Record::Trace(t) => (TYPE_TRACE, trace_body(t, list, cycle)),
            Record::Ping(p) => (TYPE_PING, ping_body(p, list, cycle)),
        };
        let body = body.map_err(|kind| WartsError::new(at, kind))?;
        self.emit(ty, &body)?;
        self.objects += 1;
        Ok(())
    }

    /// Writes any [`Item`].
    pub fn write_item(&mut self, item: &Item) -> Result<(), WartsError> {
        match item {
            Item::CycleStart(c) => self.cycle_start(c),
            Item::CycleStop(c) => self.cycle_stop(c),
            Item::Record(r) => self.write(r),
            Item::Annotated(r, f) => self.write_annotated(r, f),
        }
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.written
    }

    /// Objects written so far: cycle starts and stops (including the start
    /// [`WartsWriter::cycle_stop`] adds when no cycle is open), traces and pings.
    pub fn objects(&self) -> u64 {
        self.objects
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> Result<(), WartsError> {
        self.out
            .flush()
            .map_err(|e| WartsError::new(self.written, e.into()))
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn finish_params(
        &self,
        p: Params,
        what: &'static str,
        body: &mut Vec<u8>,
    ) -> Result<(), WartsError> {
        p.finish(what, body)
            .map_err(|k| WartsError::new(self.written, k))
    }

    /// The warts id of a list, writing its list record (with `descr`, else the name as
    /// scamper does) the first time.
    fn list_id(&mut self, name: &str, human: u32, descr: Option<&str>) -> Result<u32, WartsError> {
        if let Some((_, _, id)) = self.lists.iter().find(|(n, h, _)| n == name && *h == human) {
            return Ok(*id);
        }
        let id = self.new_list(name, human, descr)?;
        self.lists.push((name.to_string(), human, id));
        Ok(id)
    }

    /// Writes a list record (`descr`: its description, else the name) and returns its
    /// warts id.
    fn new_list(&mut self, name: &str, human: u32, descr: Option<&str>) -> Result<u32, WartsError> {
        let id = self.lists_written + 1;
        let mut body = Vec::new();
        body.extend_from_slice(&id.to_be_bytes());
        body.extend_from_slice(&human.to_be_bytes());
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        let mut p = Params::default();
        p.string(1, descr.unwrap_or(name));
        self.finish_params(p, "list", &mut body)?;
        self.emit(TYPE_LIST, &body)?;
        self.lists_written = id;
        Ok(id)
    }

    fn emit(&mut self, ty: u16, body: &[u8]) -> Result<(), WartsError> {
        let rec = record(ty, body).map_err(|k| WartsError::new(self.written, k))?;
        self.out
            .write_all(&rec)
            .map_err(|e| WartsError::new(self.written, e.into()))?;
        self.written += rec.len() as u64;
        Ok(())
    }
}

fn secs_u32(us: u64) -> u32 {
    u32::try_from(us / 1_000_000).unwrap_or(u32::MAX)
}

fn trace_body(t: &Trace, list: u32, cycle: u32) -> Result<Vec<u8>, WartsErrorKind> {
    let mut table = AddrTable::default();
    let mut p = Params::default();
    let ty = method_code(&TRACE_TYPES, t.method);
    let (mut flags, dport) = match t.method {
        Method::IcmpParis => (TRACE_FLAG_ICMPCSUMDP, t.icmp_sum),
        _ => (0, t.dport),
    };
    if t.all_attempts {
        flags |= TRACE_FLAG_ALLATTEMPTS;
    }
    if t.ignore_ttl_dst {
        flags |= TRACE_FLAG_IGNORETTLDST;
    }
    if t.pmtud {
        flags |= TRACE_FLAG_PMTUD;
    }
    p.u32(1, list);
    p.u32(2, cycle);
    p.timeval(5, secs_u32(t.start.as_micros()), t.start.subsec_micros());
    p.u8(6, t.stop_reason.code());
    p.u8(7, t.stop_data);
    let flags = u32::from(flags) | if t.ptr { TRACE_FLAG_PTR } else { 0 };
    if flags & 0xff != 0 {
        p.u8(8, (flags & 0xff) as u8);
    }
    p.u8(9, t.attempts);
    p.u8(10, t.hoplimit);
    p.u8(11, ty);
    p.u16(12, t.probe_size);
    p.u16(13, t.sport);
    p.u16(14, dport);
    p.u8(15, t.firsthop.max(1));
    p.u8(16, t.tos);
    p.u8(17, wait_secs(t));
    p.u8(18, 1); // loops: scamper's default
    p.u16(19, u16::from(t.hop_count));
    p.u8(20, t.gaplimit);
    p.u8(
        21,
        if t.last_ditch {
            GAP_LASTDITCH
        } else {
            GAP_STOP
        },
    );
    p.u8(22, 0); // loop action
    p.u16(23, t.probe_count);
    p.u8(24, wait_probe_cs(t));
    p.u8(25, t.confidence);
    p.addr(26, &mut table, &t.src);
    p.addr(27, &mut table, &t.dst);
    if t.userid != 0 {
        p.u32(28, t.userid);
    }
    if t.squeries > 1 {
        p.u8(31, t.squeries);
    }
    if flags > 0xff {
        p.u32(32, flags);
    }
    let mut body = Vec::new();
    p.finish("trace parameters", &mut body)?;
    let count = u16::try_from(t.hops.len()).map_err(|_| WartsErrorKind::Encode {
        what: "trace hops",
        why: format!("{} hops exceed 65535", t.hops.len()),
    })?;
    body.extend_from_slice(&count.to_be_bytes());
    for h in &t.hops {
        hop_params(t, h, &mut table)?.finish("hop parameters", &mut body)?;
    }
    if let Some(d) = &t.pmtud_result {
        pmtud(t, d, &mut table, &mut body)?;
    }
    if !t.lastditch.is_empty() {
        lastditch(t, &mut table, &mut body)?;
    }
    body.extend_from_slice(&0u16.to_be_bytes()); // end of optional trace data
    Ok(body)
}

/// scamper's PMTUD section (`warts_trace_pmtud_write`): the interface, path and
/// first-hop MTUs, the version and the note count as parameters, then the replies as
/// hops (their addresses in the trace's table), then every note (type, next-hop MTU,
/// the index of its hop).
fn pmtud(
    t: &Trace,
    d: &Pmtud,
    table: &mut AddrTable,
    body: &mut Vec<u8>,
) -> Result<(), WartsErrorKind> {
    let what = "trace PMTUD";
    let notes = u8::try_from(d.notes.len()).map_err(|_| WartsErrorKind::Encode {
        what,
        why: format!("{} notes exceed 255", d.notes.len()),
    })?;
    let mut p = Params::default();
    for (id, mtu) in [(1, d.ifmtu), (2, d.pmtu), (3, d.outmtu)] {
        if mtu != 0 {
            p.u16(id, mtu);
        }
    }
    p.u8(4, PMTUD_VERSION);
    if notes != 0 {
        p.u8(5, notes);
    }
    let mut section = Vec::new();
    p.finish("PMTUD parameters", &mut section)?;
    hop_list(t, &d.hops, table, what, &mut section)?;
    for n in &d.notes {
        let mut p = Params::default();
        p.u8(1, n.kind as u8);
        if n.nhmtu != 0 {
            p.u16(2, n.nhmtu);
        }
        if let Some(h) = n.hop {
            p.u16(3, h);
        }
        p.finish("PMTUD note parameters", &mut section)?;
    }
    attribute(ATTR_PMTUD, what, &section, body)
}

/// scamper's last-ditch section: a flag byte (none set), the reply count and the
/// replies as hops, their addresses in the trace's table.
fn lastditch(t: &Trace, table: &mut AddrTable, body: &mut Vec<u8>) -> Result<(), WartsErrorKind> {
    let what = "trace last-ditch replies";
    let mut section = vec![0u8];
    hop_list(t, &t.lastditch, table, what, &mut section)?;
    attribute(ATTR_LASTDITCH, what, &section, body)
}

/// A section's hop list: the count, then the hops.
fn hop_list(
    t: &Trace,
    hops: &[Hop],
    table: &mut AddrTable,
    what: &'static str,
    section: &mut Vec<u8>,
) -> Result<(), WartsErrorKind> {
    let count = u16::try_from(hops.len()).map_err(|_| WartsErrorKind::Encode {
        what,
        why: "over 65535 replies".into(),
    })?;
    section.extend_from_slice(&count.to_be_bytes());
    for h in hops {
        hop_params(t, h, table)?.finish("hop parameters", section)?;
    }
    Ok(())
}

/// Appends an optional trace section: its attribute header (type and 12-bit length),
/// then the section.
fn attribute(
    ty: u16,
    what: &'static str,
    section: &[u8],
    body: &mut Vec<u8>,
) -> Result<(), WartsErrorKind> {
    let len = u16::try_from(section.len())
        .ok()
        .filter(|&l| l <= ATTR_LEN_MAX)
        .ok_or_else(|| WartsErrorKind::Encode {
            what,
            why: format!("{} bytes exceed 4095", section.len()),
        })?;
    body.extend_from_slice(&(ty << 12 | len).to_be_bytes());
    body.extend_from_slice(section);
    Ok(())
}

fn hop_params(t: &Trace, h: &Hop, table: &mut AddrTable) -> Result<Params, WartsErrorKind> {
    if h.probe_ttl == 0 {
        return Err(WartsErrorKind::Encode {
            what: "hop probe_ttl",
            why: "0 (scamper rejects it)".into(),
        });
    }
    let icmp = hop_icmp(h);
    let mut flags = HOP_FLAG_SOCK_RX | HOP_FLAG_REPLY_TTL;
    if h.tcp_flags.is_some() {
        flags |= HOP_FLAG_TCP;
    } else if icmp.is_none() {
        flags |= HOP_FLAG_UDP;
    }
    let quotes = icmp_quotes(&h.addr, icmp);
    let mut p = Params::default();
    p.u8(2, h.probe_ttl);
    p.u8(3, h.reply_ttl);
    p.u8(4, flags);
    p.u8(5, h.probe_id.max(1) - 1);
    p.u32(6, micros_u32(h.rtt));
    if let Some((ty, code)) = icmp {
        p.bytes(7, &[ty, code]);
    }
    p.u16(8, h.probe_size);
    p.u16(9, h.reply_size);
    if h.reply_ipid != 0 {
        p.u16(10, h.reply_ipid);
    }
    p.u8(11, h.reply_tos);
    if icmp_ptb(&h.addr, icmp) {
        p.u16(12, h.nhmtu);
    }
    let q = h.quoted;
    if quotes {
        if let Some(q) = q {
            if q.ip_len != h.probe_size {
                p.u16(13, q.ip_len);
            }
            if q.ttl != 1 {
                p.u8(14, q.ttl);
            }
        }
    }
    if let Some(f) = h.tcp_flags {
        p.u8(15, f);
    }
    if quotes && h.addr.is_ipv4() {
        p.u8(16, q.map_or(0, |q| q.tos));
    }
    if !h.mpls.is_empty() {
        let dl = 4 * h.mpls.len();
        let mut ext = Vec::with_capacity(6 + dl);
        ext.extend_from_slice(&u16::try_from(4 + dl).unwrap_or(u16::MAX).to_be_bytes());
        ext.extend_from_slice(&u16::try_from(dl).unwrap_or(u16::MAX).to_be_bytes());
        ext.extend_from_slice(&[1, 1]); // class 1 (MPLS label stack), c-type 1
        for l in &h.mpls {
            let lse = (l.label & 0xf_ffff) << 12
                | u32::from(l.exp & 7) << 9
                | u32::from(l.bottom) << 8
                | u32::from(l.ttl);
            ext.extend_from_slice(&lse.to_be_bytes());
        }
        if h.mpls.len() > 16_000 {
            return Err(WartsErrorKind::Encode {
                what: "hop MPLS stack",
                why: "too many labels".into(),
            });
        }
        p.bytes(17, &ext);
    }
    p.addr(18, table, &h.addr);
    if h.tx.secs() as u32 != 0 {
        p.timeval(19, secs_u32(h.tx.as_micros()), h.tx.subsec_micros());
    }
    if let Some(name) = &h.name {
        if name.contains('\0') {
            return Err(WartsErrorKind::Encode {
                what: "hop name",
                why: "holds a NUL byte (warts strings end at one)".into(),
            });
        }
        p.string(HOP_NAME, name);
    }
    let _ = t;
    Ok(p)
}

fn ping_body(pg: &Ping, list: u32, cycle: u32) -> Result<Vec<u8>, WartsErrorKind> {
    if let Some(r) = pg.responses.iter().find(|r| r.seq >= pg.ping_sent) {
        return Err(WartsErrorKind::Encode {
            what: "ping reply",
            why: format!("seq {} is not below ping_sent {}", r.seq, pg.ping_sent),
        });
    }
    let mut table = AddrTable::default();
    let mut p = Params::default();
    let method = method_code(&PING_METHODS, pg.method);
    let replies = ordered_replies(pg);
    let wait = ping_wait_secs(pg);
    let timeout = ping_timeout_secs(pg);
    let data = pg.data.as_ref().map_or(&[][..], |d| d.bytes());
    let data_len = u16::try_from(data.len()).map_err(|_| WartsErrorKind::Encode {
        what: "ping data",
        why: format!("{} bytes exceed 65535", data.len()),
    })?;
    let flags = ping_flags(pg);
    p.u32(1, list);
    p.u32(2, cycle);
    p.timeval(5, secs_u32(pg.start.as_micros()), pg.start.subsec_micros());
    p.u8(6, PING_STOP_COMPLETED);
    p.u8(7, 0);
    if !data.is_empty() {
        p.u16(8, data_len);
        p.bytes(9, data);
    }
    p.u16(10, pg.ping_sent); // probe count
    p.u16(11, pg.probe_size);
    p.u8(12, wait);
    p.u8(13, pg.ttl);
    p.u16(14, pg.reply_count);
    p.u16(15, pg.ping_sent);
    if method != 0 {
        p.u8(16, method);
    }
    if pg.sport != 0 {
        p.u16(17, pg.sport);
    }
    if pg.dport != 0 {
        p.u16(18, pg.dport);
    }
    if pg.userid != 0 {
        p.u32(19, pg.userid);
    }
    p.addr(20, &mut table, &pg.src);
    p.addr(21, &mut table, &pg.dst);
    if flags != 0 {
        p.u8(22, flags);
    }
    if pg.tos != 0 {
        p.u8(23, pg.tos);
    }
    if let Some(c) = pg.icmp_sum.filter(|&c| c != 0) {
        p.u16(25, c);
    }
    if timeout != wait {
        p.u8(27, timeout);
    }
    if pg.wait.subsec_micros() != 0 {
        p.u32(28, pg.wait.subsec_micros());
    }
    if pg.tcp_ack != 0 {
        p.u32(29, pg.tcp_ack);
    }
    if pg.tcp_seq != 0 {
        p.u32(31, pg.tcp_seq);
    }
    let mut body = Vec::new();
    p.finish("ping parameters", &mut body)?;
    body.extend_from_slice(
        &u16::try_from(replies.len())
            .unwrap_or(u16::MAX)
            .to_be_bytes(),
    );
    for r in replies {
        reply_params(pg, r, &mut table).finish("ping reply parameters", &mut body)?;
    }
    Ok(body)
}

fn reply_params(pg: &Ping, r: &PingReply, table: &mut AddrTable) -> Params {
    let v4 = pg.dst.is_ipv4();
    let flags = REPLY_FLAG_REPLY_TTL
        | if v4 {
            REPLY_FLAG_REPLY_IPID | REPLY_FLAG_PROBE_IPID
        } else {
            0
        };
    let mut p = Params::default();
    p.u8(2, flags);
    p.u8(3, r.reply_ttl);
    p.u16(4, r.reply_size);
    if reply_is_icmp(r) {
        let (t, c) = r.icmp.unwrap_or((0, 0));
        p.bytes(5, &[t, c]);
    }
    p.u32(6, micros_u32(r.rtt));
    p.u16(7, r.seq);
    if v4 {
        p.u16(8, r.reply_ipid);
        p.u16(9, r.probe_ipid);
    }
    if pg.method != Method::IcmpParis {
        p.u8(10, r.reply_proto);
    }
    if r.reply_proto == 6 {
        p.u8(11, r.tcp_flags.unwrap_or(0));
    }
    p.addr(12, table, &r.from);
    if !r.rr.is_empty() {
        p.addrs(13, table, &r.rr);
    }
    if r.tx.secs() as u32 != 0 {
        p.timeval(16, secs_u32(r.tx.as_micros()), r.tx.subsec_micros());
    }
    p
}
