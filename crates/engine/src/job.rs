//! What a measurement asks for: the options of a trace or a ping, with scamper's defaults
//! and limits, and the checks [`crate::Engine::start`] applies before queueing a job.

use core::fmt;
use core::net::IpAddr;

use vtnt_record::{Duration, Method};

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
    /// `-d`: destination port (UDP 33435, TCP 80 when `None`).
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
            probe_size: 44,
            tos: 0,
            userid: 0,
        }
    }

    /// Sets the method and scamper's default probe size for it (40 for TCP, 44 else).
    pub fn with_method(mut self, method: Method) -> TraceOptions {
        self.method = method;
        self.probe_size = if method == Method::Tcp { 40 } else { 44 };
        self
    }

    /// Checks every option against its range (the engine calls this in `start`).
    pub fn validate(&self) -> Result<(), JobError> {
        if self.dst.is_ipv6() {
            return Err(JobError::Ipv6Unsupported);
        }
        check("attempts", "1..=20", (1..=20).contains(&self.attempts))?;
        check("first_ttl", "1..=255", self.first_ttl >= 1)?;
        check("max_ttl", "first_ttl..=255", self.max_ttl >= self.first_ttl)?;
        check(
            "wait",
            "1ms..=60s",
            (MIN_WAIT..=MAX_WAIT).contains(&self.wait),
        )?;
        check("wait_probe", "0..=2s", self.wait_probe <= MAX_WAIT_PROBE)?;
        // an ICMP-Paris trace takes `dport` for its ICMP checksum, which cannot be 0xffff
        check(
            "dport",
            "1..=65534 (the ICMP checksum of an icmp-paris trace)",
            !(self.method == Method::IcmpParis && self.dport == Some(0xffff)),
        )?;
        check_ports(self.sport, self.dport)?;
        check_size(self.method, self.probe_size)
    }
}

/// Options of one ping (scamper's `ping` letters in brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingOptions {
    pub dst: IpAddr,
    /// `-P`: probe method (ICMP echo, UDP, TCP SYN).
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
    pub dport: Option<u16>,
    /// IP length of each probe (84, as scamper's default ICMP ping); the least is as for
    /// traces.
    pub probe_size: u16,
    pub userid: u32,
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
            probe_size: 84,
            userid: 0,
        }
    }

    /// Sets the method and scamper's default probe size for it (84 for ICMP echo, 40 for
    /// UDP and TCP).
    pub fn with_method(mut self, method: Method) -> PingOptions {
        self.method = method;
        self.probe_size = if method == Method::IcmpParis { 84 } else { 40 };
        self
    }

    /// Checks every option against its range (the engine calls this in `start`).
    pub fn validate(&self) -> Result<(), JobError> {
        if self.dst.is_ipv6() {
            return Err(JobError::Ipv6Unsupported);
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
        check_size(self.method, self.probe_size)
    }
}

const MIN_WAIT: Duration = Duration::from_millis(1);
const MAX_WAIT: Duration = Duration::from_secs(60);
const MAX_WAIT_PROBE: Duration = Duration::from_secs(2);

fn check(option: &'static str, range: &'static str, ok: bool) -> Result<(), JobError> {
    if ok {
        Ok(())
    } else {
        Err(JobError::OutOfRange { option, range })
    }
}

fn check_ports(sport: Option<u16>, dport: Option<u16>) -> Result<(), JobError> {
    check("sport", "1..=65535", sport != Some(0))?;
    check("dport", "1..=65535", dport != Some(0))
}

/// UDP probes need two payload bytes to steer their checksum; ICMP probes two for that
/// and two for the engine's tag (see the `probe` module).
fn check_size(method: Method, size: u16) -> Result<(), JobError> {
    let (min, range) = match method {
        Method::Tcp => (40, "40..=1500"),
        Method::UdpParis => (30, "30..=1500"),
        Method::IcmpParis => (32, "32..=1500"),
    };
    check("probe_size", range, (min..=MAX_PROBE_SIZE).contains(&size))
}

/// A measurement to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    Trace(TraceOptions),
    Ping(PingOptions),
}

impl Job {
    /// Checks the options of either kind.
    pub fn validate(&self) -> Result<(), JobError> {
        match self {
            Job::Trace(t) => t.validate(),
            Job::Ping(p) => p.validate(),
        }
    }

    /// Where the probes go.
    pub fn dst(&self) -> IpAddr {
        match self {
            Job::Trace(t) => t.dst,
            Job::Ping(p) => p.dst,
        }
    }
}

/// Why the engine refused a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    /// An option is out of its range; names the option and the range.
    OutOfRange {
        option: &'static str,
        range: &'static str,
    },
    /// IPv6 targets are not probed yet.
    Ipv6Unsupported,
    /// Every flow identifier is in use by a running measurement. Not returned at present:
    /// [`crate::Config`] caps `max_active` below the number of identifiers, and a job
    /// whose explicit port collides with a running measurement waits in the queue.
    TooManyActive,
    /// The probing policy refuses the destination ([`crate::Config::policy`]).
    Refused(vtnt_policy::Refusal),
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::OutOfRange { option, range } => {
                write!(f, "option `{option}` out of range (allowed: {range})")
            }
            JobError::Ipv6Unsupported => f.write_str("IPv6 destinations are not supported yet"),
            JobError::TooManyActive => f.write_str("every flow identifier is in use"),
            JobError::Refused(r) => write!(f, "refused by the probing policy: {r}"),
        }
    }
}

impl core::error::Error for JobError {}
