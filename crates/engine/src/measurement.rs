//! What a measurement asks for: the options of a trace or a ping, with scamper's defaults
//! and limits, and the checks [`crate::Engine::start`] applies before queueing a measurement.

use core::fmt;
use core::net::IpAddr;

use alloc::vec::Vec;

use vtnt_record::{Duration, Method, ProbeData};

/// Largest probe the engine builds (IP total length); a driver's transmit buffer must
/// hold this many bytes.
pub const MAX_PROBE_SIZE: u16 = 1500;

/// Options of one traceroute (scamper's `trace` letters in brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    pub dst: IpAddr,
    /// `-P`: probe method.
    pub method: Method,
    /// `-f`: first TTL (1).
    pub first_ttl: u8,
    /// `-m`: maximum TTL (255, as scamper; the gap limit usually stops earlier).
    pub max_ttl: u8,
    /// `-q`: probes per hop (2).
    pub attempts: u8,
    /// `-w`: how long to wait for a reply (5 s).
    pub wait: Duration,
    /// `-W`: minimum gap between two probes of this trace (0).
    pub wait_probe: Duration,
    /// `-g`: consecutive unresponsive hops before stopping (5).
    pub gaplimit: u8,
    /// `-l`: how many times an address may repeat before the trace stops with LOOP (1).
    pub loops: u8,
    /// `-s`: source port (UDP, TCP); chosen by the engine when `None`.
    pub sport: Option<u16>,
    /// `-d`: destination port (33435 when `None`, UDP and TCP alike); an icmp-paris
    /// trace's ICMP checksum.
    pub dport: Option<u16>,
    /// IP length of each probe (44, as scamper's default). At least 30 for UDP (headers
    /// and the two payload bytes that pin the checksum), 32 for ICMP (two more for the
    /// engine's tag), 40 for TCP; TCP probes longer than 40 bytes carry zero payload. At
    /// most [`MAX_PROBE_SIZE`].
    pub probe_size: u16,
    /// `-t`: IP ToS byte (0).
    pub tos: u8,
    /// Caller's tag, copied into the record's `userid`.
    pub userid: u32,
    /// `-Q`: send every attempt of a hop even once one is answered (false).
    pub all_attempts: bool,
    /// `-T`: a time exceeded from the destination does not complete the trace (false).
    pub ignore_ttl_dst: bool,
    /// `-G 2`: once the gap limit is reached, `attempts` probes with TTL 255 ask whether
    /// the destination answers at all (false: `-G 1`, stop at once). The trace stops
    /// with GAPLIMIT either way.
    pub last_ditch: bool,
    /// `-p`: the probes' payload (UDP and ICMP; empty: zeros). Its first two bytes pin
    /// the checksum, as scamper's; an ICMP probe's next two carry the engine's tag. The
    /// probe size is 28 + its length ([`TraceOptions::with_payload`]).
    pub payload: Vec<u8>,
    /// `-N`: consecutive hops probed at once (1: one probe outstanding). More than 1 is
    /// scamper's parallel mode (see the `trace` module), at most `gaplimit`.
    pub squeries: u8,
    /// `-c`: probe each hop until this sure (95 or 99 %) of having seen every interface
    /// answering at it (0: off, `attempts` probes per hop). Not with `all_attempts`.
    pub confidence: u8,
    /// `-M`: once the trace has stopped on an answer (COMPLETED, UNREACH), path MTU
    /// discovery with TTL-255 don't-fragment probes from `if_mtu` bytes down (UDP
    /// only, from TTL 1; see the `pmtud` module).
    pub pmtud: bool,
    /// MTU of the interface towards `dst`, which the driver fills in for `pmtud`
    /// (0: unknown, and `pmtud` is refused). 68..=[`MAX_PROBE_SIZE`].
    pub if_mtu: u16,
}

impl TraceOptions {
    /// scamper's defaults for a trace to `dst`.
    pub fn new(dst: IpAddr) -> TraceOptions {
        TraceOptions {
            dst,
            method: Method::UdpParis,
            first_ttl: 1,
            max_ttl: 255,
            attempts: 2,
            wait: Duration::from_secs(5),
            wait_probe: Duration::ZERO,
            gaplimit: 5,
            loops: 1,
            sport: None,
            dport: None,
            probe_size: trace_size(Method::UdpParis, dst),
            tos: 0,
            userid: 0,
            all_attempts: false,
            ignore_ttl_dst: false,
            last_ditch: false,
            payload: Vec::new(),
            squeries: 1,
            confidence: 0,
            pmtud: false,
            if_mtu: 0,
        }
    }

    /// Sets the method and scamper's default probe size for it ([`trace_size`]).
    pub fn with_method(mut self, method: Method) -> TraceOptions {
        self.set_method(method);
        self
    }

    /// [`TraceOptions::with_method`] in place.
    pub fn set_method(&mut self, method: Method) {
        self.method = method;
        self.probe_size = trace_size(method, self.dst);
    }

    /// These options toward `dst`: the probe size keeps its payload, so it grows by
    /// IPv6's 20 extra header bytes from an IPv4 destination to an IPv6 one (and shrinks
    /// back); a template made for one family serves both (TNT's traces).
    pub fn set_dst(&mut self, dst: IpAddr) {
        self.probe_size = (self.probe_size + ipv6_extra(dst)).saturating_sub(ipv6_extra(self.dst));
        self.dst = dst;
    }

    /// Sets the payload (`-p`) and the probe size it makes ([`TraceOptions::default_size`]).
    pub fn with_payload(mut self, payload: Vec<u8>) -> TraceOptions {
        self.payload = payload;
        if !self.payload.is_empty() {
            self.probe_size = self.default_size();
        }
        self
    }

    /// scamper's probe size for the method, payload and destination: 28 bytes of headers
    /// (48 to an IPv6 destination) and the payload, or [`trace_size`] without one.
    pub fn default_size(&self) -> u16 {
        if self.payload.is_empty() {
            return trace_size(self.method, self.dst);
        }
        let headers = 28 + usize::from(ipv6_extra(self.dst));
        u16::try_from(headers + self.payload.len()).unwrap_or(u16::MAX)
    }

    /// Checks every option against its range (the engine calls this in `start`).
    pub fn validate(&self) -> Result<(), MeasurementError> {
        // over IPv6: every method, -M too (folded away without `ipv6-probe`)
        if self.dst.is_ipv6() && !cfg!(feature = "ipv6-probe") {
            return Err(MeasurementError::Ipv6Unsupported);
        }
        let extra = ipv6_extra(self.dst);
        check(
            "method",
            "not udp-dport (a ping's)",
            self.method != Method::UdpDport,
        )?;
        check("attempts", "1..=20", (1..=20).contains(&self.attempts))?;
        check("first_ttl", "1..=255", self.first_ttl >= 1)?;
        check("max_ttl", "first_ttl..=255", self.max_ttl >= self.first_ttl)?;
        check(
            "wait",
            "1ms..=60s",
            (MIN_WAIT..=MAX_WAIT).contains(&self.wait),
        )?;
        check("wait_probe", "0..=2s", self.wait_probe <= MAX_WAIT_PROBE)?;
        check(
            "squeries",
            "1..=255, at most the gap limit (-N, -g)",
            self.squeries >= 1 && (self.squeries == 1 || self.squeries <= self.gaplimit),
        )?;
        check(
            "confidence",
            "0, 95 or 99 (-c), and not with all attempts (-Q)",
            matches!(self.confidence, 0 | 95 | 99) && !(self.confidence != 0 && self.all_attempts),
        )?;
        // an ICMP-Paris trace takes `dport` for its ICMP checksum, which cannot be 0xffff
        check(
            "dport",
            "1..=65534 (the ICMP checksum of an icmp-paris trace)",
            !(self.method == Method::IcmpParis && self.dport == Some(0xffff)),
        )?;
        check_ports(self.sport, self.dport)?;
        check(
            "payload",
            "none for tcp",
            self.payload.is_empty() || !self.method.is_tcp(),
        )?;
        check_size(self.method, self.probe_size.saturating_sub(extra))?;
        // (over IPv4 `check_size` said so already)
        check(
            "probe_size",
            "at most 1500",
            extra == 0 || self.probe_size <= MAX_PROBE_SIZE,
        )?;
        check(
            "payload",
            "at most the probe's payload",
            payload_room(self.method, self.probe_size.saturating_sub(extra), false)
                >= self.payload.len(),
        )?;
        if self.pmtud {
            check(
                "pmtud",
                "udp-paris only, from first_ttl 1 (as scamper's -M), one hop at a time (-N 1)",
                self.method == Method::UdpParis && self.first_ttl == 1 && self.squeries == 1,
            )?;
            // (0 until a driver fills it in: `Engine::start` refuses that)
            check(
                "if_mtu",
                "probe_size..=1500 for pmtud (larger probes are not built)",
                self.if_mtu == 0
                    || (self.probe_size.max(crate::pmtud::MIN_MTU)..=MAX_PROBE_SIZE)
                        .contains(&self.if_mtu),
            )?;
        }
        Ok(())
    }
}

/// Options of one ping (scamper's `ping` letters in brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingOptions {
    pub dst: IpAddr,
    /// `-P`: probe method (ICMP echo, UDP, UDP to a port counting up, TCP SYN, TCP ACK).
    pub method: Method,
    /// `-c`: probes to send (4).
    pub count: u16,
    /// `-i`: interval between probes (1 s).
    pub interval: Duration,
    /// `-m`: IP-TTL of the probes (64).
    pub ttl: u8,
    /// How long to wait for replies after the last probe (1 s; scamper's `-W`).
    pub timeout: Duration,
    pub sport: Option<u16>,
    /// `-d`: the destination port of UDP and TCP probes (udp-dport: the first one), the
    /// sequence number of the first ICMP echo request.
    pub dport: Option<u16>,
    /// IP length of each probe (84, as scamper's default ICMP ping); the least is as for
    /// traces, 40 more with `record_route`.
    pub probe_size: u16,
    pub userid: u32,
    /// `-z`: IP ToS byte of the probes (0).
    pub tos: u8,
    /// `-C`: the ICMP checksum of every probe (ICMP echo only; two payload bytes pin it).
    pub icmp_sum: Option<u16>,
    /// `-o`: replies after which the ping stops (0: send every probe).
    pub reply_count: u16,
    /// `-p` or `-B`: what the probes carry (after the two checksum bytes with
    /// `icmp_sum`); an ICMP probe's payload bytes 2 and 3 carry the engine's tag.
    pub data: Option<ProbeData>,
    /// `-R`: the probes carry a record route option (40 bytes of the probe size).
    pub record_route: bool,
    /// `-A`: the acknowledgment number of every tcp-ack probe (by default each probe's
    /// own, which numbers it). With it, a RST is taken for the last probe sent.
    pub tcp_ack: Option<u32>,
}

impl PingOptions {
    /// scamper's defaults for a ping to `dst`.
    pub fn new(dst: IpAddr) -> PingOptions {
        PingOptions {
            dst,
            method: Method::IcmpParis,
            count: 4,
            interval: Duration::from_secs(1),
            ttl: 64,
            timeout: Duration::from_secs(1),
            sport: None,
            dport: None,
            probe_size: 84 + ipv6_extra(dst),
            userid: 0,
            tos: 0,
            icmp_sum: None,
            reply_count: 0,
            data: None,
            record_route: false,
            tcp_ack: None,
        }
    }

    /// Sets the method and scamper's default probe size for it (84 for ICMP echo, 40 for
    /// UDP and TCP).
    pub fn with_method(mut self, method: Method) -> PingOptions {
        self.set_method(method);
        self
    }

    /// [`PingOptions::with_method`] in place.
    pub fn set_method(&mut self, method: Method) {
        self.method = method;
        self.probe_size = self.default_size();
    }

    /// scamper's probe size for the method and the other options set: the headers (40
    /// more with `-R`, 2 more with `-C`), then a `-B` payload, or else 56 bytes for ICMP
    /// echo and 12 for UDP.
    pub fn default_size(&self) -> u16 {
        let headers = match self.method {
            Method::Tcp | Method::TcpAck => 40,
            Method::UdpParis | Method::UdpDport => 28,
            Method::IcmpParis => 28 + if self.icmp_sum.is_some() { 2 } else { 0 },
        } + if self.record_route { 40 } else { 0 };
        let headers = headers + usize::from(ipv6_extra(self.dst));
        let rest = match (&self.data, self.method) {
            (Some(ProbeData::Payload(b)), _) => b.len(),
            (_, Method::IcmpParis) => 56,
            (_, Method::UdpParis | Method::UdpDport) => 12,
            (_, Method::Tcp | Method::TcpAck) => 0,
        };
        u16::try_from(headers + rest).unwrap_or(u16::MAX)
    }

    /// Checks every option against its range (the engine calls this in `start`).
    pub fn validate(&self) -> Result<(), MeasurementError> {
        // over IPv6: every method, without -R: IPv6 has no record-route option (Debian's
        // scamper 20211212 crashes on `ping -R` to an IPv6 target); folded away without
        // `ipv6-probe`
        if self.dst.is_ipv6() && (!cfg!(feature = "ipv6-probe") || self.record_route) {
            return Err(MeasurementError::Ipv6Unsupported);
        }
        check("count", "1..=65535", self.count >= 1)?;
        check(
            "interval",
            "1ms..=60s",
            (MIN_WAIT..=MAX_WAIT).contains(&self.interval),
        )?;
        check("ttl", "1..=255", self.ttl >= 1)?;
        check(
            "timeout",
            "1ms..=60s",
            (MIN_WAIT..=MAX_WAIT).contains(&self.timeout),
        )?;
        check_ports(self.sport, self.dport)?;
        check(
            "icmp_sum",
            "1..=65534, icmp-echo only",
            match self.icmp_sum {
                None => true,
                Some(c) => self.method == Method::IcmpParis && c != 0 && c != 0xffff,
            },
        )?;
        check(
            "tcp_ack",
            "tcp-ack only, not 0",
            self.tcp_ack
                .is_none_or(|a| self.method == Method::TcpAck && a != 0),
        )?;
        let rr = if self.record_route { 40 } else { 0 };
        let extra = ipv6_extra(self.dst);
        check_size(self.method, self.probe_size.saturating_sub(rr + extra))?;
        check(
            "probe_size",
            "at most 1500",
            self.probe_size <= MAX_PROBE_SIZE,
        )?;
        let lead = if self.icmp_sum.is_some() { 2 } else { 0 };
        let room = payload_room(self.method, self.probe_size, self.record_route)
            .saturating_sub(usize::from(extra));
        check(
            "data",
            "a pattern of 1..=16 bytes, or a payload of 1..=1000 that fits the probe size",
            match &self.data {
                Some(ProbeData::Pattern(b)) => (1..=16).contains(&b.len()),
                Some(ProbeData::Payload(b)) => {
                    (1..=1000).contains(&b.len()) && lead + b.len() <= room
                }
                None => true,
            },
        )
    }
}

/// The bytes an IPv6 header takes beyond an IPv4 one in probes to `dst` (20 to IPv6
/// destinations, 0 to IPv4 ones and in builds without `ipv6-probe`).
pub(crate) fn ipv6_extra(dst: IpAddr) -> u16 {
    if cfg!(feature = "ipv6-probe") && dst.is_ipv6() {
        20
    } else {
        0
    }
}

/// scamper's default size of `method`'s trace probes to `dst`: 40 for TCP, else 44 (IPv4,
/// 16 bytes of payload) or 60 (IPv6, 12 bytes of payload).
fn trace_size(method: Method, dst: IpAddr) -> u16 {
    match (method.is_tcp(), ipv6_extra(dst)) {
        (true, extra) => 40 + extra,
        (false, 0) => 44,
        (false, _) => 60,
    }
}

/// Payload bytes of a probe of `size` (IP total length) with `method`.
pub(crate) fn payload_room(method: Method, size: u16, record_route: bool) -> usize {
    let headers = if method.is_tcp() { 40 } else { 28 } + if record_route { 40 } else { 0 };
    usize::from(size).saturating_sub(headers)
}

const MIN_WAIT: Duration = Duration::from_millis(1);
const MAX_WAIT: Duration = Duration::from_secs(60);
const MAX_WAIT_PROBE: Duration = Duration::from_secs(2);

fn check(option: &'static str, range: &'static str, ok: bool) -> Result<(), MeasurementError> {
    if ok {
        Ok(())
    } else {
        Err(MeasurementError::OutOfRange { option, range })
    }
}

fn check_ports(sport: Option<u16>, dport: Option<u16>) -> Result<(), MeasurementError> {
    check("sport", "1..=65535", sport != Some(0))?;
    check("dport", "1..=65535", dport != Some(0))
}

/// UDP probes need two payload bytes to steer their checksum; ICMP probes two for that
/// and two for the engine's tag (see the `probe` module).
fn check_size(method: Method, size: u16) -> Result<(), MeasurementError> {
    let (min, range) = match method {
        Method::Tcp | Method::TcpAck => (40, "40..=1500"),
        Method::UdpParis | Method::UdpDport => (30, "30..=1500"),
        Method::IcmpParis => (32, "32..=1500"),
    };
    check("probe_size", range, (min..=MAX_PROBE_SIZE).contains(&size))
}

/// A measurement to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measurement {
    Trace(TraceOptions),
    Ping(PingOptions),
}

impl Measurement {
    /// Checks the options of either kind.
    pub fn validate(&self) -> Result<(), MeasurementError> {
        match self {
            Measurement::Trace(t) => t.validate(),
            Measurement::Ping(p) => p.validate(),
        }
    }

    /// Where the probes go.
    pub fn dst(&self) -> IpAddr {
        match self {
            Measurement::Trace(t) => t.dst,
            Measurement::Ping(p) => p.dst,
        }
    }
}

/// Why the engine refused a measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasurementError {
    /// An option is out of its range; names the option and the range.
    OutOfRange {
        option: &'static str,
        range: &'static str,
    },
    /// IPv6 targets are not probed yet: without `ipv6-probe` the engine is IPv4 only (the
    /// wire and the policy read IPv6 already; docs/scamper.md); with it, IPv6
    /// destinations get traces of every method (`-M` too) and pings of every method
    /// without `-R` (IPv6 has no record-route option: that refusal is for good).
    Ipv6Unsupported,
    /// Every flow identifier is in use by a running measurement. Not returned at present:
    /// [`crate::Config`] caps `max_active` below the number of identifiers, and a measurement
    /// whose explicit port collides with a running measurement waits in the queue.
    TooManyActive,
    /// The probing policy refuses the destination ([`crate::Config::policy`]).
    Refused(vtnt_policy::Refusal),
    /// The driver's source lookup ([`crate::Engine::set_source_lookup`]) has no source
    /// address for the destination.
    NoSource(crate::flow::Addr, NoSource),
}

/// Why a driver has no source address for a destination: its words (`"no route to it"`,
/// `"the kernel routes it as a broadcast address"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSource(pub &'static str);

impl fmt::Display for MeasurementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeasurementError::OutOfRange { option, range } => {
                write!(f, "option `{option}` out of range (allowed: {range})")
            }
            MeasurementError::Ipv6Unsupported => f.write_str(if cfg!(feature = "ipv6-probe") {
                "IPv6 destinations are never pinged with -R (IPv6 has no record-route \
                 option)"
            } else {
                "IPv6 destinations are not probed yet: the engine is IPv4 only"
            }),
            MeasurementError::TooManyActive => f.write_str("every flow identifier is in use"),
            MeasurementError::Refused(r) => write!(f, "refused by the probing policy: {r}"),
            MeasurementError::NoSource(dst, why) => {
                write!(f, "no source address for {dst}: {}", why.0)
            }
        }
    }
}

impl core::error::Error for MeasurementError {}
