//! The options of `vtnt trace`, `vtnt ping` and `vtnt tnt` (scamper's letters where
//! scamper has them) as clap types, and what each makes of them: a trace or ping template
//! ([`TraceArgs::options`], [`PingArgs::options`]) or TNT's configuration
//! ([`TntArgs::config`]).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use vtnt_engine::{Method, PingOptions, ProbeData, TraceOptions};
use vtnt_tnt::{Thresholds, TntConfig};

/// Output format (`-O`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// scamper JSON, one object per line (what sc_warts2json prints).
    Json,
    /// scamper's binary warts.
    Warts,
    /// Human-readable, like scamper's text output.
    Text,
}

/// A value of `-O`: an output format, or scamper's trace option `ptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputOption {
    /// scamper JSON, one object per line (what sc_warts2json prints).
    Json,
    /// scamper's binary warts.
    Warts,
    /// Human-readable, like scamper's text output.
    Text,
    /// Traces: look up the reverse DNS name of every hop through this host's resolver
    /// (scamper's trace -O ptr).
    Ptr,
}

/// Options every probing command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Targets: addresses or host names.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Read targets from FILE, one per line (`#` starts a comment); bad lines are reported
    /// with their line number and the rest probed.
    #[arg(long = "targets", value_name = "FILE")]
    pub targets_file: Option<PathBuf>,
    /// Probes per second for the whole run (scamper's -p). At most 500000; public targets
    /// are probed only in runs of at most 1000.
    #[arg(short = 'p', long = "pps", default_value_t = 20)]
    pub pps: u32,
    /// Output format (json by default; the last one given counts) and, for a trace,
    /// `ptr`: hop names. May be repeated (`-O warts -O ptr`).
    #[arg(
        id = "format",
        short = 'O',
        long = "format",
        value_enum,
        value_name = "FORMAT"
    )]
    pub output_options: Vec<OutputOption>,
    /// Write results to FILE instead of stdout. FILE must be a regular file or not exist;
    /// it is replaced when the run ends (also on SIGINT or SIGTERM, with the records
    /// finished so far) and left untouched when the run fails.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Allow targets outside loopback and the lab's ranges. Probing other people's
    /// networks needs their consent.
    #[arg(long)]
    pub allow_public: bool,
    /// Never probe the prefixes listed in FILE (one per line, `#` comments), on top of
    /// /etc/vtnt/exclude.conf when it exists. May be repeated.
    #[arg(long = "exclude", value_name = "FILE")]
    pub exclude: Vec<PathBuf>,
    /// Source address of the probes: one of this host's addresses (default: the kernel's
    /// choice for the first target). vTNT does not spoof.
    #[arg(short = 'S', long = "src")]
    pub src: Option<Ipv4Addr>,
    /// Seed for probe identifiers (ICMP idents, source ports, Paris checksums and the tag
    /// every probe carries so that concurrent runs on one host never take each other's
    /// replies). Default: drawn from the process id and the time, so concurrent runs
    /// differ; give one to make a run reproducible (runs at the same time on one host
    /// need different seeds).
    #[arg(long)]
    pub seed: Option<u64>,
    /// No progress on stderr (by default a bar on a terminal, otherwise a status line
    /// every 10 s).
    #[arg(long)]
    pub quiet: bool,
    /// A number of the user's, stored in every record (scamper's `-U`).
    #[arg(short = 'U', long = "userid", default_value_t = 0)]
    pub userid: u32,
    /// Measurements running at once; the rest wait their turn.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub window: u32,
    /// Also file the results in the results store at PATH as they are written (by
    /// default in the default store: $VTNT_STORE, else /var/lib/vtnt/results.sqlite as
    /// root and $XDG_DATA_HOME/vtnt/results.sqlite otherwise; docs/store.md). A store
    /// that fails never costs the measurement: its output is written all the same.
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Do not file the results in any results store.
    #[arg(long, conflicts_with = "store")]
    pub no_store: bool,
}

impl Common {
    /// The output format `-O` gives.
    pub fn format(&self) -> Format {
        let format = |o: &OutputOption| match o {
            OutputOption::Json => Some(Format::Json),
            OutputOption::Warts => Some(Format::Warts),
            OutputOption::Text => Some(Format::Text),
            OutputOption::Ptr => None,
        };
        self.output_options
            .iter()
            .rev()
            .find_map(format)
            .unwrap_or(Format::Json)
    }

    /// `-O ptr`: look up hop names.
    pub fn ptr(&self) -> bool {
        self.output_options.contains(&OutputOption::Ptr)
    }
}

/// `-m`: a TTL of 1..=255, or 0 for scamper's default (255).
fn max_ttl(s: &str) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(0) => Ok(255),
        Ok(v) => Ok(v),
        Err(_) => Err(format!("`{s}` is not a TTL (0..=255; 0: the default, 255)")),
    }
}

pub fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(0.001..=3600.0).contains(&v) {
        return Err(format!("{v} s is out of range (0.001..=3600)"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// A ping's `-P`, in any case (as scamper takes it): icmp (icmp-echo), udp, udp-dport,
/// tcp (tcp-syn), tcp-ack.
pub fn method(s: &str) -> Result<Method, String> {
    Method::from_option(&s.to_ascii_lowercase())
        .ok_or_else(|| format!("unknown method `{s}` ({})", Method::OPTION_NAMES))
}

/// A trace's `-P`, in any case: icmp-paris, udp-paris, tcp, tcp-ack. Classic traceroute
/// (`icmp`, `udp`: a new flow for every probe) is refused, not run as its Paris variant.
pub fn trace_method(s: &str) -> Result<Method, String> {
    match s.to_ascii_lowercase().as_str() {
        "icmp" | "icmp-echo" | "udp" | "udp-dport" => Err(format!(
            "`{s}` is classic traceroute (a new flow for every probe), which vTNT does not \
             run: it traces one Paris flow (icmp-paris, udp-paris, tcp or tcp-ack)"
        )),
        _ => method(s),
    }
}

/// Bytes given in hex on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hex(pub Vec<u8>);

/// A trace's `--payload` (scamper's trace `-p`): hex bytes, at most a probe's worth.
fn trace_payload(s: &str) -> Result<Hex, String> {
    let max = usize::from(vtnt_engine::MAX_PROBE_SIZE) - 28;
    vtnt_jobspec::parse_hex(s, max).map(Hex)
}

/// A ping's `-B` (scamper's): 1 to 1000 hex bytes.
fn ping_payload(s: &str) -> Result<Hex, String> {
    match vtnt_jobspec::parse_hex(s, 1000)? {
        b if b.is_empty() => Err("an empty payload".into()),
        b => Ok(Hex(b)),
    }
}

/// A ping's `--pattern` (scamper's `-p`): 1 to 32 hex digits; an odd count reads as if
/// led by a 0, as scamper's does.
fn pattern(s: &str) -> Result<Hex, String> {
    let even = if !s.len().is_multiple_of(2) {
        format!("0{s}")
    } else {
        s.to_string()
    };
    match vtnt_jobspec::parse_hex(&even, 16)? {
        b if b.is_empty() => Err("an empty pattern".into()),
        b => Ok(Hex(b)),
    }
}

/// `vtnt trace`.
#[derive(clap::Args, Debug)]
pub struct TraceArgs {
    /// Probe method: icmp-paris, udp-paris, tcp (SYN) or tcp-ack.
    #[arg(short = 'P', long = "method", default_value = "udp-paris", value_parser = trace_method)]
    pub method: Method,
    /// First TTL.
    #[arg(short = 'f', long = "first-ttl", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub first: u8,
    /// Maximum TTL (0: the default, 255, as scamper's).
    #[arg(short = 'm', long = "max-ttl", default_value_t = 255, value_parser = max_ttl)]
    pub max: u8,
    /// Probes per hop.
    #[arg(short = 'q', long = "attempts", default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=20))]
    pub attempts: u8,
    /// Seconds to wait for a reply.
    #[arg(short = 'w', long = "wait", default_value = "5", value_parser = seconds)]
    pub wait: Duration,
    /// Unresponsive hops in a row before giving up (0: no limit, as scamper's).
    #[arg(short = 'g', long = "gap-limit", default_value_t = 5)]
    pub gaplimit: u8,
    /// Times an address may repeat (non-adjacently) before the trace stops with LOOP (0:
    /// no loop check, as scamper's).
    #[arg(short = 'l', long = "loops", default_value_t = 1)]
    pub loops: u8,
    /// Destination port (33435, scamper's, for UDP and TCP).
    #[arg(short = 'd', long = "dport")]
    pub dport: Option<u16>,
    /// Source port (default: chosen per trace).
    #[arg(short = 's', long = "sport")]
    pub sport: Option<u16>,
    /// Type of service byte of the probes.
    #[arg(short = 't', long = "tos", default_value_t = 0)]
    pub tos: u8,
    /// Least time between two probes of the trace, in tens of milliseconds as scamper's
    /// `-W` (0..=200).
    #[arg(short = 'W', long = "wait-probe", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=200))]
    pub wait_probe: u8,
    /// Send every attempt of a hop, even once one is answered (scamper's -Q).
    #[arg(short = 'Q', long = "all-attempts")]
    pub all_attempts: bool,
    /// A time exceeded from the destination does not end the trace (scamper's -T).
    #[arg(short = 'T', long = "ignore-ttl-dst")]
    pub ignore_ttl_dst: bool,
    /// At the gap limit (scamper's -G): 1 stops; 2 first sends up to -q probes with TTL
    /// 255 to see whether the destination answers at all (the trace still stops with
    /// GAPLIMIT; warts keeps the reply).
    #[arg(short = 'G', long = "gap-action", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub gap_action: u8,
    /// Payload of the UDP and ICMP probes in hex (scamper's trace -p; -p here is the
    /// run's rate). Its first two bytes pin the checksum, an ICMP probe's next two carry
    /// vTNT's tag; the probe size becomes 28 + its length (48 + over IPv6).
    #[arg(long = "payload", value_name = "HEX", value_parser = trace_payload)]
    pub payload: Option<Hex>,
    /// Consecutive hops probed at once (scamper's -N; 1..=255, at most -g). Above 1,
    /// hops answer out of order and replies past the destination are kept, as
    /// scamper's; -Q, -c and -G 2 then play no part.
    #[arg(short = 'N', long = "squeries", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub squeries: u8,
    /// Probe each hop until 95 or 99 % sure of having seen every interface answering at
    /// it (scamper's -c; the probes per hop come from scamper's table, not -q). Not with
    /// -Q.
    #[arg(short = 'c', long = "confidence", value_parser = confidence)]
    pub confidence: Option<u8>,
    /// Once the trace reaches the destination, path MTU discovery (scamper's -M):
    /// don't-fragment probes of the interface's MTU, shrunk at each "fragmentation
    /// needed", a size search where big probes vanish silently (warts keeps the result;
    /// udp-paris only).
    #[arg(short = 'M', long = "pmtud")]
    pub pmtud: bool,
    #[command(flatten)]
    pub common: Common,
}

/// scamper's `-c`: 95 or 99.
fn confidence(v: &str) -> Result<u8, String> {
    match v {
        "95" => Ok(95),
        "99" => Ok(99),
        _ => Err(format!("`{v}` is not 95 or 99")),
    }
}

impl TraceArgs {
    pub fn options(&self, dst: IpAddr) -> TraceOptions {
        let mut o = TraceOptions::new(dst).with_method(self.method);
        o.first_ttl = self.first;
        o.max_ttl = self.max;
        o.attempts = self.attempts;
        o.wait = self.wait;
        o.gaplimit = self.gaplimit;
        o.loops = self.loops;
        o.dport = self.dport;
        o.sport = self.sport;
        o.tos = self.tos;
        o.wait_probe = Duration::from_millis(10 * u64::from(self.wait_probe));
        o.userid = self.common.userid;
        o.all_attempts = self.all_attempts;
        o.ignore_ttl_dst = self.ignore_ttl_dst;
        o.last_ditch = self.gap_action == 2;
        o.squeries = self.squeries;
        o.confidence = self.confidence.unwrap_or(0);
        o.pmtud = self.pmtud;
        o.with_payload(self.payload.clone().map(|h| h.0).unwrap_or_default())
    }
}

/// `vtnt ping`.
#[derive(clap::Args, Debug)]
pub struct PingArgs {
    /// Probes to send.
    #[arg(short = 'c', long = "count", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub count: u16,
    /// Seconds between probes.
    #[arg(short = 'i', long = "interval", default_value = "1", value_parser = seconds)]
    pub interval: Duration,
    /// Probe method: icmp-paris (ICMP echo), udp-paris (UDP to a closed port), udp-dport
    /// (the destination port counting up from -d, one per probe), tcp (SYN) or tcp-ack.
    #[arg(short = 'P', long = "method", default_value = "icmp-paris", value_parser = method)]
    pub method: Method,
    /// IP-TTL of the probes.
    #[arg(short = 'm', long = "ttl", default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub ttl: u8,
    /// Seconds to wait for replies after the last probe.
    #[arg(short = 'W', long = "timeout", default_value = "1", value_parser = seconds)]
    pub timeout: Duration,
    /// IP length of each probe (scamper's: 84 for ICMP echo, 40 for UDP and TCP).
    #[arg(short = 's', long = "size")]
    pub size: Option<u16>,
    /// Destination port of UDP and TCP probes (33435; udp-dport: the first); the
    /// sequence number of the first ICMP echo request.
    #[arg(short = 'd', long = "dport")]
    pub dport: Option<u16>,
    /// Source port of UDP and TCP probes (default: chosen per ping).
    #[arg(short = 'F', long = "sport")]
    pub sport: Option<u16>,
    /// Type of service byte of the probes (scamper's -z).
    #[arg(short = 'z', long = "tos", default_value_t = 0)]
    pub tos: u8,
    /// The ICMP checksum of every echo request (scamper's -C; 1..=65534).
    #[arg(short = 'C', long = "icmp-sum")]
    pub icmp_sum: Option<u16>,
    /// Stop once this many probes are answered (scamper's -o; -o here is the output
    /// file). 0: send every probe.
    #[arg(long = "reply-count", default_value_t = 0)]
    pub reply_count: u16,
    /// Fill the probes with this pattern, 1 to 16 bytes in hex (scamper's -p; -p here is
    /// the run's rate). An ICMP probe's payload bytes 2 and 3 carry vTNT's tag.
    #[arg(long = "pattern", value_name = "HEX", value_parser = pattern, conflicts_with = "payload")]
    pub pattern: Option<Hex>,
    /// The probes' payload in hex, 1 to 1000 bytes (scamper's -B); the probe size follows
    /// from it. An ICMP probe's payload bytes 2 and 3 carry vTNT's tag.
    #[arg(short = 'B', long = "payload", value_name = "HEX", value_parser = ping_payload)]
    pub payload: Option<Hex>,
    /// Probes carry the IP record route option; replies show the addresses recorded
    /// (scamper's -R).
    #[arg(short = 'R', long = "record-route")]
    pub record_route: bool,
    /// The acknowledgment number of every tcp-ack probe (scamper's -A; default: each
    /// probe's own, which tells its reply from the others'). With it a reply is taken for
    /// the last probe sent.
    #[arg(short = 'A', long = "tcp-ack", value_parser = clap::value_parser!(u32).range(1..))]
    pub tcp_ack: Option<u32>,
    #[command(flatten)]
    pub common: Common,
}

impl PingArgs {
    pub fn options(&self, dst: IpAddr) -> PingOptions {
        let mut o = PingOptions::new(dst).with_method(self.method);
        o.count = self.count;
        o.interval = self.interval;
        o.ttl = self.ttl;
        o.timeout = self.timeout;
        o.dport = self.dport;
        o.sport = self.sport;
        o.userid = self.common.userid;
        o.tos = self.tos;
        o.icmp_sum = self.icmp_sum;
        o.reply_count = self.reply_count;
        o.data = match (&self.pattern, &self.payload) {
            (Some(p), _) => Some(ProbeData::Pattern(p.0.clone())),
            (None, Some(b)) => Some(ProbeData::Payload(b.0.clone())),
            (None, None) => None,
        };
        o.record_route = self.record_route;
        o.tcp_ack = self.tcp_ack;
        o.probe_size = self.size.unwrap_or_else(|| o.default_size());
        o
    }
}

/// `vtnt tnt`.
#[derive(clap::Args, Debug)]
pub struct TntArgs {
    /// Method of the initial and revelation traces: icmp-paris, udp-paris, tcp or tcp-ack.
    #[arg(short = 'P', long = "method", default_value = "icmp-paris", value_parser = trace_method)]
    pub method: Method,
    /// Probes per hop.
    #[arg(short = 'q', long = "attempts", default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=20))]
    pub attempts: u8,
    /// Seconds to wait for a reply.
    #[arg(short = 'w', long = "wait", default_value = "1", value_parser = seconds)]
    pub wait: Duration,
    /// Unresponsive hops in a row before a trace gives up (0: no limit).
    #[arg(short = 'g', long = "gap-limit", default_value_t = 5)]
    pub gaplimit: u8,
    /// Maximum TTL (0: the default, 255, as scamper's).
    #[arg(short = 'm', long = "max-ttl", default_value_t = 255, value_parser = max_ttl)]
    pub max: u8,
    /// Echo requests per hop address for its TTL signature.
    #[arg(long = "ping-count", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub ping_count: u16,
    /// FRPLA threshold of the invisible-tunnel trigger (TNT's -f).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i16).range(1..=64))]
    pub frpla: i16,
    /// RTLA threshold (TNT's -r).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i16).range(1..=64))]
    pub rtla: i16,
    /// Absolute u-turn sum that marks implicit tunnels.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i16).range(1..=64))]
    pub uturn: i16,
    /// Test every hop pair for a hidden tunnel, not only where a trigger fires (TNT's -b).
    #[arg(short = 'b', long)]
    pub brute_force: bool,
    /// Detect and classify only; send no revelation traces.
    #[arg(long)]
    pub no_reveal: bool,
    /// Do not try the buddy technique for duplicate-IP (UHP) candidates.
    #[arg(long)]
    pub no_buddy: bool,
    /// Trigger FRPLA on a hop's own value, not on its rise over its ingress's (docs/tnt.md,
    /// "Heuristics and their switches").
    #[arg(long)]
    pub no_frpla_relative: bool,
    /// Count any run of non-zero u-turns, not only runs shaped like an LSP's.
    #[arg(long)]
    pub no_uturn_shape: bool,
    /// Count a last labelled hop quoting explicit null or a shallower label stack as an
    /// LSR, not as the egress.
    #[arg(long)]
    pub no_egress_label: bool,
    /// Times a revelation trace that does not show the ingress is run again, on another
    /// flow (0: never).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=8))]
    pub ingress_retries: u8,
    /// Test no hop pair before a `<64,64>` or `<128,128>` router unless a trigger fires.
    #[arg(long)]
    pub no_blind_spots: bool,
    /// Hop pairs tested before an FRPLA/RTLA candidate that revealed nothing (0: none).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=8))]
    pub walk_back: u8,
    /// Hop pairs tested after an FRPLA candidate that revealed nothing (0: none).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=8))]
    pub walk_forward: u8,
    /// Longest BRPR walk, in steps.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub max_brpr_steps: u8,
    /// Start from these traces (scamper JSON or warts) instead of tracing again.
    #[arg(long = "from", value_name = "TRACES")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

impl TntArgs {
    /// TNT's configuration from the options.
    pub fn config(&self) -> TntConfig {
        let mut c = TntConfig::default();
        c.trace.method = self.method;
        c.trace.attempts = self.attempts;
        c.trace.wait = self.wait;
        c.trace.gaplimit = self.gaplimit;
        c.trace.max_ttl = self.max;
        c.ping.count = self.ping_count;
        c.trace.userid = self.common.userid;
        c.ping.userid = self.common.userid;
        c.classify.thresholds = Thresholds {
            frpla: self.frpla,
            rtla: self.rtla,
            uturn: self.uturn,
        };
        c.classify.brute_force = self.brute_force;
        c.classify.frpla_relative = !self.no_frpla_relative;
        c.classify.uturn_shape = !self.no_uturn_shape;
        c.classify.egress_label = !self.no_egress_label;
        c.classify.blind_spots = !self.no_blind_spots;
        c.reveal = !self.no_reveal;
        c.buddy = !self.no_buddy;
        c.walk_back = self.walk_back;
        c.walk_forward = self.walk_forward;
        c.ingress_retries = self.ingress_retries;
        c.max_brpr_steps = self.max_brpr_steps;
        c
    }
}
