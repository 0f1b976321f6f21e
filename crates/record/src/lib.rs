//! Measurement records: what a finished traceroute or ping looks like, independent of
//! any output format. The engine produces them, `vtnt-formats` writes and reads them as
//! scamper JSON and warts, `vtnt-tnt` annotates them.
//!
//! `no_std + alloc`: the unikernel builds the same records. Times are [`Instant`]s in
//! microseconds on the clock the driver hands the engine (wall-clock based on Linux, so
//! `Instant::as_micros()` is microseconds since the UNIX epoch there).
#![no_std]
extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
pub use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
pub use core::time::Duration;

mod time;
mod tunnel;
pub use time::Instant;
pub use tunnel::{initial_ttl, TunnelClass};

/// One MPLS label stack entry as quoted by an RFC 4950 extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MplsLabel {
    /// 20-bit label value.
    pub label: u32,
    /// 3-bit traffic class (formerly EXP).
    pub exp: u8,
    /// Bottom-of-stack bit.
    pub bottom: bool,
    /// LSE-TTL.
    pub ttl: u8,
}

/// How a traceroute or ping probes. Names follow scamper's JSON `method` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// ICMP echo with a constant checksum (scamper `icmp-paris`, JSON `icmp-echo-paris`).
    IcmpParis,
    /// UDP with constant ports, the checksum identifying the probe (`udp-paris`).
    UdpParis,
    /// TCP SYN with constant ports (`tcp`; a ping's `tcp-syn`).
    Tcp,
    /// TCP ACK with constant ports (`tcp-ack`): answered by RSTs whose sequence number is
    /// the probe's acknowledgment number.
    TcpAck,
    /// UDP whose destination port counts up from `dport`, one per probe (a ping's
    /// `udp-dport`; for traces it would be classic traceroute, which is not run).
    UdpDport,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 5] = [
        Method::IcmpParis,
        Method::UdpParis,
        Method::Tcp,
        Method::TcpAck,
        Method::UdpDport,
    ];
    /// Every method's [`option_name`](Method::option_name), in [`ALL`](Method::ALL)'s order,
    /// for messages that list them (a test holds it to the table).
    pub const OPTION_NAMES: &'static str = "icmp-paris, udp-paris, tcp, tcp-ack, udp-dport";
    /// The option value scamper and `vtnt` accept after `-P`.
    pub const fn option_name(self) -> &'static str {
        match self {
            Method::IcmpParis => "icmp-paris",
            Method::UdpParis => "udp-paris",
            Method::Tcp => "tcp",
            Method::TcpAck => "tcp-ack",
            Method::UdpDport => "udp-dport",
        }
    }
    /// The `method` string of scamper's trace JSON.
    pub const fn trace_json_name(self) -> &'static str {
        match self {
            Method::IcmpParis => "icmp-echo-paris",
            Method::UdpParis => "udp-paris",
            Method::Tcp => "tcp",
            Method::TcpAck => "tcp-ack",
            // scamper's classic UDP traceroute varies the destination port
            Method::UdpDport => "udp",
        }
    }
    /// The `method` string of scamper's ping JSON.
    pub const fn ping_json_name(self) -> &'static str {
        match self {
            Method::IcmpParis => "icmp-echo",
            Method::UdpParis => "udp",
            Method::Tcp => "tcp-syn",
            Method::TcpAck => "tcp-ack",
            Method::UdpDport => "udp-dport",
        }
    }
    /// Whether the probes are TCP segments.
    pub const fn is_tcp(self) -> bool {
        matches!(self, Method::Tcp | Method::TcpAck)
    }
    /// Whether the probes are UDP datagrams.
    pub const fn is_udp(self) -> bool {
        matches!(self, Method::UdpParis | Method::UdpDport)
    }
    /// Parses a `-P` option value (scamper's spellings, plus the JSON names).
    pub fn from_option(s: &str) -> Option<Method> {
        match s {
            "icmp-paris" | "icmp-echo-paris" | "icmp" | "icmp-echo" => Some(Method::IcmpParis),
            "udp-paris" | "udp" => Some(Method::UdpParis),
            "tcp" | "tcp-syn" => Some(Method::Tcp),
            "tcp-ack" => Some(Method::TcpAck),
            "udp-dport" => Some(Method::UdpDport),
            _ => None,
        }
    }
}

/// Why a traceroute stopped; scamper's `stop_reason` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    None,
    Completed,
    Unreach,
    Icmp,
    Loop,
    GapLimit,
    Error,
    HopLimit,
    Gss,
    Halted,
}

impl StopReason {
    /// scamper's JSON spelling.
    pub const fn name(self) -> &'static str {
        match self {
            StopReason::None => "NONE",
            StopReason::Completed => "COMPLETED",
            StopReason::Unreach => "UNREACH",
            StopReason::Icmp => "ICMP",
            StopReason::Loop => "LOOP",
            StopReason::GapLimit => "GAPLIMIT",
            StopReason::Error => "ERROR",
            StopReason::HopLimit => "HOPLIMIT",
            StopReason::Gss => "GSS",
            StopReason::Halted => "HALTED",
        }
    }
    /// The numeric code warts stores (scamper's `SCAMPER_TRACE_STOP_*`).
    pub const fn code(self) -> u8 {
        self as u8
    }
    /// Inverse of [`StopReason::name`].
    pub fn from_name(s: &str) -> Option<StopReason> {
        Self::ALL.iter().copied().find(|r| r.name() == s)
    }
    /// Inverse of [`StopReason::code`].
    pub fn from_code(c: u8) -> Option<StopReason> {
        Self::ALL.get(c as usize).copied()
    }
    const ALL: [StopReason; 10] = [
        StopReason::None,
        StopReason::Completed,
        StopReason::Unreach,
        StopReason::Icmp,
        StopReason::Loop,
        StopReason::GapLimit,
        StopReason::Error,
        StopReason::HopLimit,
        StopReason::Gss,
        StopReason::Halted,
    ];
}

/// The ICMP error's view of the probe it quotes (scamper `icmp_q_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quoted {
    /// IP-TTL of the probe when the router that answered received it.
    pub ttl: u8,
    /// IP total length of the quoted probe.
    pub ip_len: u16,
    /// ToS byte of the quoted probe.
    pub tos: u8,
}

/// One reply to one traceroute probe (scamper's `hops[]` entries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// Address that replied.
    pub addr: IpAddr,
    /// TTL the probe was sent with.
    pub probe_ttl: u8,
    /// Attempt number at this TTL, from 1.
    pub probe_id: u8,
    /// IP length of the probe.
    pub probe_size: u16,
    /// When the probe left.
    pub tx: Instant,
    /// Round-trip time.
    pub rtt: Duration,
    /// IP-TTL of the reply as received.
    pub reply_ttl: u8,
    /// ToS of the reply.
    pub reply_tos: u8,
    /// IP ID of the reply.
    pub reply_ipid: u16,
    /// IP length of the reply.
    pub reply_size: u16,
    /// ICMP type and code of the reply (for TCP replies: absent).
    pub icmp: Option<(u8, u8)>,
    /// TCP flags when the reply is a TCP segment.
    pub tcp_flags: Option<u8>,
    /// What an ICMP error quotes of the probe.
    pub quoted: Option<Quoted>,
    /// RFC 4950 label stack, top entry first; empty when none.
    pub mpls: Vec<MplsLabel>,
    /// The address's reverse DNS name, when the trace looked names up ([`Trace::ptr`])
    /// and one came back in time (scamper's hop name: warts hop parameter 20, JSON
    /// `"name"`). Probers leave it `None`; the host's driver fills it in.
    pub name: Option<String>,
    /// Next-hop MTU of an ICMP "fragmentation needed" (type 3 code 4); 0 otherwise.
    pub nhmtu: u16,
}

/// A finished traceroute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub method: Method,
    /// Source port (UDP, TCP), or the ICMP echo ident of ICMP Paris probes (where
    /// scamper keeps it: warts stores it, its JSON does not show it).
    pub sport: u16,
    /// Destination port (UDP, TCP); 0 for ICMP.
    pub dport: u16,
    /// The constant ICMP checksum of ICMP Paris probes; 0 otherwise.
    pub icmp_sum: u16,
    pub userid: u32,
    pub start: Instant,
    pub stop_reason: StopReason,
    pub stop_data: u8,
    /// Probes per hop (scamper `-q`).
    pub attempts: u8,
    /// Maximum TTL probed (scamper `-m`; JSON `hoplimit`, 0 = default 255).
    pub hoplimit: u8,
    /// First TTL (scamper `-f`).
    pub firsthop: u8,
    /// Consecutive unresponsive hops before giving up (scamper `-g`).
    pub gaplimit: u8,
    /// Wait for a reply (scamper `-w`).
    pub wait: Duration,
    /// Minimum gap between probes of this trace (scamper `-W`).
    pub wait_probe: Duration,
    pub tos: u8,
    /// IP length of every probe.
    pub probe_size: u16,
    /// Probes sent.
    pub probe_count: u16,
    /// Highest TTL at which a reply (or the last probe) was seen; scamper `hop_count`.
    pub hop_count: u8,
    /// Every attempt of a hop was sent, answered or not (scamper `-Q`, warts flag
    /// `ALLATTEMPTS`).
    pub all_attempts: bool,
    /// A time exceeded from the destination did not complete the trace (scamper `-T`,
    /// warts flag `IGNORETTLDST`).
    pub ignore_ttl_dst: bool,
    /// Every reply, ordered by probe TTL then attempt.
    pub hops: Vec<Hop>,
    /// After the gap limit, TTL-255 probes asked whether the destination still answers
    /// (scamper `-G 2`, warts gap action "last-ditch"); the trace still stops with
    /// GAPLIMIT.
    pub last_ditch: bool,
    /// The replies to those probes (warts' last-ditch section; scamper's JSON shows
    /// neither).
    pub lastditch: Vec<Hop>,
    /// Hop names were looked up (scamper `-O ptr`, warts trace flag `PTR`; JSON does
    /// not show it): what was found is in each hop's `name`.
    pub ptr: bool,
    /// Consecutive hops probed at once (scamper `-N`, warts' `squeries`, written when
    /// above 1; JSON shows neither it nor `confidence`).
    pub squeries: u8,
    /// Confidence level each hop was probed to (scamper `-c`: 95 or 99; 0: off).
    pub confidence: u8,
    /// Path MTU discovery was asked for (scamper `-M`, warts flag `PMTUD`).
    pub pmtud: bool,
    /// What it found, when it ran (warts' PMTUD section; scamper's JSON shows nothing).
    pub pmtud_result: Option<Pmtud>,
}

/// Path MTU discovery after a trace (scamper's `scamper_trace_pmtud_t`, version 2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pmtud {
    /// MTU of the interface the probes left through.
    pub ifmtu: u16,
    /// The path MTU found; 0 when none was.
    pub pmtu: u16,
    /// MTU towards the first router when it is below the interface's (inferred when
    /// even the first hop stays silent); 0 otherwise.
    pub outmtu: u16,
    /// What was inferred, in order.
    pub notes: Vec<PmtudNote>,
    /// Every reply to a PMTUD probe, in the order they came.
    pub hops: Vec<Hop>,
}

/// One inference of a path MTU discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmtudNote {
    pub kind: PmtudNoteKind,
    /// The next-hop MTU it gives.
    pub nhmtu: u16,
    /// The reply it rests on: an index into [`Pmtud::hops`].
    pub hop: Option<u16>,
}

/// What a [`PmtudNote`] says (warts' note types 1..=3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmtudNoteKind {
    /// A router sent a "fragmentation needed" with a usable next-hop MTU.
    Ptb = 1,
    /// One without a usable next-hop MTU; the size was searched for.
    PtbBad = 2,
    /// Big probes vanished without one: the size was searched for, and the hop is the
    /// farthest that still answered them when TTL-limited.
    Silence = 3,
}

impl PmtudNoteKind {
    /// The kind of warts note type `t`.
    pub fn from_u8(t: u8) -> Option<PmtudNoteKind> {
        match t {
            1 => Some(PmtudNoteKind::Ptb),
            2 => Some(PmtudNoteKind::PtbBad),
            3 => Some(PmtudNoteKind::Silence),
            _ => None,
        }
    }
}

/// One reply to one ping probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingReply {
    pub from: IpAddr,
    /// Sequence number of the probe, from 0.
    pub seq: u16,
    pub tx: Instant,
    pub rtt: Duration,
    pub reply_size: u16,
    pub reply_ttl: u8,
    pub reply_tos: u8,
    /// IP protocol of the reply (1 ICMP, 6 TCP).
    pub reply_proto: u8,
    pub probe_ipid: u16,
    pub reply_ipid: u16,
    pub icmp: Option<(u8, u8)>,
    pub tcp_flags: Option<u8>,
    /// The addresses of the record route option the reply carried (scamper `RR`; pings
    /// with `-R`), empty when it carried none.
    pub rr: Vec<IpAddr>,
}

/// Bytes a ping's probes carry (scamper's `-p pattern` or `-B payload`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProbeData {
    /// Repeated through the payload (`-p`, at most 16 bytes).
    Pattern(Vec<u8>),
    /// The payload itself (`-B`); the probe size follows from it.
    Payload(Vec<u8>),
}

impl ProbeData {
    /// The bytes given.
    pub fn bytes(&self) -> &[u8] {
        match self {
            ProbeData::Pattern(b) | ProbeData::Payload(b) => b,
        }
    }
}

/// Bytes as lowercase hex, two digits each: how scamper prints probe data and how
/// `vtnt` and job lines give it.
pub fn to_hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    b.iter()
        .flat_map(|x| [DIGITS[usize::from(x >> 4)], DIGITS[usize::from(x & 15)]])
        .map(char::from)
        .collect()
}

/// Hex digits, two per byte (either case), back to bytes; `None` for anything else.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// A finished ping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub method: Method,
    pub sport: u16,
    pub dport: u16,
    pub userid: u32,
    pub start: Instant,
    /// Probes sent.
    pub ping_sent: u16,
    /// IP length of each probe.
    pub probe_size: u16,
    /// IP-TTL of each probe.
    pub ttl: u8,
    /// Interval between probes (scamper `-i`).
    pub wait: Duration,
    /// How long to wait for a reply after the last probe.
    pub timeout: Duration,
    /// TCP sequence number of the probes (TCP pings; 0 otherwise). scamper's `tcp_seq`.
    pub tcp_seq: u32,
    /// TCP acknowledgment number of the probes (TCP pings; 0 otherwise). scamper's `tcp_ack`.
    pub tcp_ack: u32,
    /// ToS byte of the probes (scamper `-z`).
    pub tos: u8,
    /// The constant ICMP checksum of the probes (scamper `-C`, flag `icmpsum`).
    pub icmp_sum: Option<u16>,
    /// Replies after which the ping stopped early (scamper `-o`; 0: all probes sent).
    pub reply_count: u16,
    /// What the probes carried (scamper `pattern` or `payload`).
    pub data: Option<ProbeData>,
    /// The probes carried a record route option (scamper `-R`, flag `v4rr`).
    pub record_route: bool,
    /// Replies in the order they arrived.
    pub responses: Vec<PingReply>,
}

/// A finished measurement of any kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Trace(Trace),
    Ping(Ping),
}

#[cfg(test)]
mod method_names {
    use super::Method;
    use alloc::vec::Vec;

    #[test]
    fn option_names_list_every_method() {
        let names: Vec<&str> = Method::ALL.iter().map(|m| m.option_name()).collect();
        assert_eq!(Method::OPTION_NAMES, names.join(", "));
    }
}
