//! The stream endpoint (feature `stream`, its own image; `vtnt bench net`): an iperf3
//! server on smoltcp's TCP and UDP sockets over the [`Nic`], so that Debian's `iperf3`
//! client measures TCP and UDP stream throughput into the unikernel as it does into
//! Linux.
//!
//! It speaks the part of iperf3's protocol (3.x, the control connection's state bytes
//! and length-prefixed JSON) a client needs for one forward stream: the 37-byte cookie,
//! `PARAM_EXCHANGE` and the client's parameters, `CREATE_STREAMS` and one data stream
//! (a TCP connection that sends the cookie, or UDP's "6789"/"9876" handshake),
//! `TEST_START`, `TEST_RUNNING`, the client's `TEST_END`, `EXCHANGE_RESULTS` (the
//! client's results read and dropped, ours sent: bytes, packets, UDP loss and jitter),
//! then `DISPLAY_RESULTS` and a graceful close (the client's `IPERF_DONE` arrives on a
//! closing connection). Reverse, bidirectional and parallel
//! tests are refused with `ACCESS_DENIED`. The client's `-w` (socket buffer) does not
//! apply: the data socket's receive buffer is fixed at [`TCP_RX`] (window scaling on).
//! UDP datagrams longer than the MTU come as IPv4 fragments, which
//! `vtnt_wire::reassembly` puts back together before smoltcp sees them (smoltcp
//! reassembles IPv6's itself). With `ip6=` (and `gw6=`) the endpoint is dual stack:
//! smoltcp's interface holds the IPv6 address and answers neighbour discovery for it.
//!
//! Command line: the platform's options, then `-- stream [port=P] [tests=N]` (default
//! 5201, serve forever); after `N` tests (and their connections
//! closed, or [`LINGER`]) the kernel exits 0. Console lines:
//! `{"type":"stream-ready","port":P,...}` once it listens, and per test
//! `{"type":"stream-test","proto":"tcp"|"udp","bytes":B,"packets":P,"errors":E,
//! "jitter_us":J,"us":T,"ok":true|false}`.

use super::smol::{smol, Frames};
use super::{Nic, ETH_HDR};
use crate::cmdline::Cmdline;
use crate::platform::finish;
use crate::{fail, platform, println};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::{tcp, udp};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpEndpoint};
use vtnt_abi::exit::Status;
use vtnt_record::{Duration, Instant};
use vtnt_wire::reassembly::{Push, Reassembly};

/// The data socket's receive buffer (its window; smoltcp scales it).
pub const TCP_RX: usize = 256 * 1024;
/// The UDP socket's receive buffer, bytes and datagrams.
const UDP_RX: usize = 256 * 1024;
const UDP_SLOTS: usize = 256;
/// Datagrams in reassembly at once (a new one evicts the oldest: with fragments arriving
/// in order, that is one that lost a fragment), and how long one may take.
const REASSEMBLING: usize = 8;
const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(1);
/// iperf3's cookie: 36 characters and a NUL.
const COOKIE: usize = 37;
/// The longest halt between two looks at a NIC that raises no wake-up for frames.
const POLL: Duration = Duration::from_micros(200);
/// The longest halt where the platform wakes on frames.
const IDLE: Duration = Duration::from_millis(100);
/// How long the endpoint waits, after its last test, for its connections to close.
const LINGER: Duration = Duration::from_secs(3);
/// How long a test may stall (no byte on any of its sockets) before it is dropped.
const STALL: Duration = Duration::from_secs(30);

// iperf3's control states (signed bytes).
const TEST_START: u8 = 1;
const TEST_RUNNING: u8 = 2;
const TEST_END: u8 = 4;
const PARAM_EXCHANGE: u8 = 9;
const CREATE_STREAMS: u8 = 10;
const EXCHANGE_RESULTS: u8 = 13;
const DISPLAY_RESULTS: u8 = 14;
const ACCESS_DENIED: u8 = 0xff;
/// UDP's stream handshake, written by iperf3 as host-order (x86: little-endian) ints.
const UDP_CONNECT_MSG: u32 = 0x3637_3839;
const UDP_CONNECT_REPLY: u32 = 0x3938_3736;

/// The endpoint's options (after `--`).
struct Options {
    port: u16,
    tests: Option<u64>,
}

fn options(cmdline: &Cmdline) -> Options {
    let mut o = Options {
        port: 5201,
        tests: None,
    };
    let mut words = cmdline.job_words();
    if words.next() != Some("stream") {
        fail!(
            Status::BadCmdline,
            "this image is the stream endpoint: its job is `stream [port=P] [tests=N]`"
        );
    }
    for w in words {
        match w.split_once('=') {
            Some(("port", v)) => match v.parse() {
                Ok(p) if p > 0 => o.port = p,
                _ => fail!(Status::BadCmdline, "stream: port={v} is not 1..=65535"),
            },
            Some(("tests", v)) => match v.parse() {
                Ok(n) if n > 0 => o.tests = Some(n),
                _ => fail!(
                    Status::BadCmdline,
                    "stream: tests={v} is not a positive count"
                ),
            },
            _ => fail!(
                Status::BadCmdline,
                "stream: unknown option `{w}` (port=, tests=)"
            ),
        }
    }
    o
}

/// Where one test is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Cookie,
    Params,
    Stream,
    Running,
    ClientResults,
    Done,
}

/// One test's state.
struct Test {
    phase: Phase,
    udp: bool,
    counters64: bool,
    ctrl_in: Vec<u8>,
    stream_cookie: usize,
    bytes: u64,
    packets: u64,
    max_seq: u64,
    jitter: f64,
    last_transit: Option<f64>,
    started: Option<Instant>,
    ended: Option<Instant>,
    last_activity: Instant,
}

impl Test {
    fn new(now: Instant) -> Test {
        Test {
            phase: Phase::Cookie,
            udp: false,
            counters64: false,
            ctrl_in: Vec::new(),
            stream_cookie: 0,
            bytes: 0,
            packets: 0,
            max_seq: 0,
            jitter: 0.0,
            last_transit: None,
            started: None,
            ended: None,
            last_activity: now,
        }
    }

    fn seconds(&self) -> f64 {
        match (self.started, self.ended) {
            (Some(s), Some(e)) => e.saturating_since(s).as_micros() as f64 / 1e6,
            _ => 0.0,
        }
    }

    /// Our results as iperf3's client reads them.
    fn results(&self) -> String {
        let lost = self.max_seq.saturating_sub(self.packets);
        format!(
            "{{\"cpu_util_total\":0,\"cpu_util_user\":0,\"cpu_util_system\":0,\"sender_has_retransmits\":-1,\"streams\":[{{\"id\":1,\"bytes\":{},\"retransmits\":-1,\"jitter\":{},\"errors\":{},\"omitted_errors\":0,\"packets\":{},\"omitted_packets\":0,\"start_time\":0,\"end_time\":{}}}]}}",
            self.bytes,
            self.jitter,
            if self.udp { lost } else { 0 },
            self.packets,
            self.seconds()
        )
    }

    /// One UDP datagram of the stream: its sequence number and send time (iperf3's
    /// header: seconds, microseconds, then a 32- or 64-bit counter, network order).
    fn datagram(&mut self, now: Instant, d: &[u8]) {
        self.bytes += d.len() as u64;
        self.packets += 1;
        let be32 = |i: usize| {
            d.get(i..i + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let seq = if self.counters64 {
            be32(8)
                .zip(be32(12))
                .map(|(h, l)| (u64::from(h) << 32) | u64::from(l))
        } else {
            be32(8).map(u64::from)
        };
        if let Some(seq) = seq {
            self.max_seq = self.max_seq.max(seq);
        }
        if let (Some(s), Some(us)) = (be32(0), be32(4)) {
            let sent = f64::from(s) + f64::from(us) / 1e6;
            let transit = now.as_micros() as f64 / 1e6 - sent;
            if let Some(prev) = self.last_transit {
                let d = (transit - prev).abs();
                self.jitter += (d - self.jitter) / 16.0;
            }
            self.last_transit = Some(transit);
        }
    }
}

/// The value of `"key":` in iperf3's flat parameter JSON, as written.
fn json_value<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":");
    let rest = json[json.find(&pat)? + pat.len()..].trim_start();
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// A length-prefixed JSON message (4 bytes, network order) at the start of `buf`:
/// `Some((json, bytes used))` once complete.
fn framed(buf: &[u8]) -> Option<(&[u8], usize)> {
    let len = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    Some((buf.get(4..4 + len)?, 4 + len))
}

fn tcp_socket(rx: usize, tx: usize, port: u16) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; rx]),
        tcp::SocketBuffer::new(vec![0; tx]),
    );
    // The port is ours alone: listening cannot fail.
    let _ = s.listen(port);
    s
}

/// The sockets of one test: control and data listen on the port, UDP is bound to it.
struct Sockets {
    ctrl: SocketHandle,
    data: SocketHandle,
    udp: SocketHandle,
}

impl Sockets {
    fn open(set: &mut SocketSet<'static>, port: u16) -> Sockets {
        let ctrl = set.add(tcp_socket(4096, 4096, port));
        let mut d = tcp_socket(TCP_RX, 1024, port);
        // ACK at once: a sender with a small socket buffer (the seed's 100 bytes) would
        // otherwise wait out smoltcp's 10 ms delayed ACK for every buffer's worth
        d.set_ack_delay(None);
        let data = set.add(d);
        let mut u = udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; UDP_SLOTS], vec![0; UDP_RX]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 4], vec![0; 256]),
        );
        let _ = u.bind(port);
        let udp = set.add(u);
        Sockets { ctrl, data, udp }
    }

    /// Closes the TCP sockets gracefully and drops the UDP one; the TCP sockets are
    /// removed once closed ([`reap`]).
    fn retire(self, set: &mut SocketSet<'static>, closing: &mut Vec<(SocketHandle, Instant)>) {
        let now = platform::now();
        for h in [self.ctrl, self.data] {
            set.get_mut::<tcp::Socket>(h).close();
            closing.push((h, now));
        }
        set.remove(self.udp);
    }
}

/// Removes closed sockets (or those still closing after a while: aborted).
fn reap(set: &mut SocketSet<'static>, closing: &mut Vec<(SocketHandle, Instant)>) {
    let now = platform::now();
    closing.retain(|&(h, since)| {
        let s = set.get_mut::<tcp::Socket>(h);
        if s.state() == tcp::State::Closed || now.saturating_since(since) > Duration::from_secs(5) {
            s.abort();
            set.remove(h);
            false
        } else {
            true
        }
    });
}

/// A received frame as smoltcp is to see it: an IPv4 fragment is held until its datagram
/// is whole, which goes on in one frame (the last fragment's Ethernet header), above the
/// MTU (smoltcp bounds what it sends by the MTU, not what it receives).
fn whole(defrag: &mut Reassembly, frame: Vec<u8>, now: Instant) -> Option<Vec<u8>> {
    if frame.get(12..14) != Some(&[0x08, 0x00][..]) {
        return Some(frame);
    }
    match defrag.push(&frame[ETH_HDR..], now.as_micros()) {
        Push::Whole => Some(frame),
        Push::Held | Push::Dropped => None,
        Push::Done(ip) => {
            let mut f = frame[..ETH_HDR].to_vec();
            f.extend_from_slice(&ip);
            Some(f)
        }
    }
}

/// Runs the endpoint: brings the NIC up, serves tests until the count is reached (exit
/// 0) or the watchdog fires.
pub fn run(cmdline: &Cmdline, mut nic: Nic, deadline: Option<Instant>) -> ! {
    let o = options(cmdline);
    let cfg = *nic.config();
    let mut config = Config::new(HardwareAddress::Ethernet(nic.mac()));
    config.random_seed = platform::random_seed();
    let gateway = cfg.gateway;
    let mut dev = Frames::new(&mut nic);
    let mut iface = Interface::new(config, &mut dev, smol(platform::now()));
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::Ipv4(cfg.addr), cfg.prefix));
        if let Some((addr, len)) = cmdline.ip6 {
            let _ = a.push(IpCidr::new(IpAddress::Ipv6(addr), len));
        }
    });
    if let Some(gw) = gateway {
        let _ = iface.routes_mut().add_default_ipv4_route(gw);
    }
    if let Some(gw6) = cmdline.gw6 {
        let _ = iface.routes_mut().add_default_ipv6_route(gw6);
    }
    let mut set = SocketSet::new(Vec::new());
    let mut socks = Sockets::open(&mut set, o.port);
    let mut closing = Vec::new();
    let mut test = Test::new(platform::now());
    let mut served = 0u64;
    let mut leaving: Option<Instant> = None;
    println!(
        "{{\"type\":\"stream-ready\",\"port\":{},\"ip\":\"{}\",\"tcp_rx\":{},\"udp_rx\":{},\"us\":{}}}",
        o.port,
        cfg.addr,
        TCP_RX,
        UDP_RX,
        platform::now().as_micros()
    );
    let mut scratch = vec![0u8; 64 * 1024];
    let mut defrag = Reassembly::new(REASSEMBLING, REASSEMBLY_TIMEOUT.as_micros() as u64);
    loop {
        let now = platform::now();
        if deadline.is_some_and(|d| now >= d) {
            fail!(
                Status::Watchdog,
                "watchdog: {} stream tests served after {} s",
                served,
                cmdline.watchdog_s
            );
        }
        let got = dev.pull_with(|f| whole(&mut defrag, f, now));
        iface.poll(smol(now), &mut dev, &mut set);
        let moved = step(&mut test, &socks, &mut set, &mut scratch, now);
        let finished = test.phase == Phase::Done;
        let stalled =
            test.phase != Phase::Cookie && now.saturating_since(test.last_activity) > STALL;
        if finished || stalled {
            served += 1;
            println!(
                "{{\"type\":\"stream-test\",\"proto\":\"{}\",\"bytes\":{},\"packets\":{},\"errors\":{},\"jitter_us\":{},\"us\":{},\"ok\":{}}}",
                if test.udp { "udp" } else { "tcp" },
                test.bytes,
                test.packets,
                test.max_seq.saturating_sub(test.packets),
                (test.jitter * 1e6) as u64,
                (test.seconds() * 1e6) as u64,
                finished
            );
            socks.retire(&mut set, &mut closing);
            iface.poll(smol(now), &mut dev, &mut set);
            socks = Sockets::open(&mut set, o.port);
            test = Test::new(now);
            if o.tests.is_some_and(|n| served >= n) {
                leaving.get_or_insert(now + LINGER);
            }
        }
        reap(&mut set, &mut closing);
        // the last results may still be in flight (or due for a retransmission)
        if leaving.is_some_and(|t| closing.is_empty() || now >= t) {
            finish::finish(Status::Ok);
        }
        if got == 0 && !moved {
            let delay = iface
                .poll_delay(smol(now), &set)
                .map_or(IDLE, |d| Duration::from_micros(d.total_micros()));
            let cap = if platform::wakes_on_frames() {
                IDLE
            } else {
                POLL
            };
            platform::wait_until(now + delay.min(cap));
        }
    }
}

/// Sends one control state byte (best effort: the control buffer has room).
fn state(set: &mut SocketSet<'static>, ctrl: SocketHandle, s: u8) {
    let _ = set.get_mut::<tcp::Socket>(ctrl).send_slice(&[s]);
}

/// Advances `test` by what its sockets hold; true if anything moved.
fn step(
    test: &mut Test,
    socks: &Sockets,
    set: &mut SocketSet<'static>,
    scratch: &mut [u8],
    now: Instant,
) -> bool {
    let mut moved = false;
    // the control connection's bytes
    {
        let c = set.get_mut::<tcp::Socket>(socks.ctrl);
        while c.can_recv() {
            match c.recv_slice(scratch) {
                Ok(n) if n > 0 => {
                    test.ctrl_in.extend_from_slice(&scratch[..n]);
                    moved = true;
                }
                _ => break,
            }
        }
        if test.phase != Phase::Cookie && !c.is_active() {
            // the client went away mid-test
            test.phase = Phase::Done;
            return true;
        }
    }
    // the data: TCP bytes, UDP datagrams
    {
        let d = set.get_mut::<tcp::Socket>(socks.data);
        while d.can_recv() {
            match d.recv_slice(scratch) {
                Ok(n) if n > 0 => {
                    if test.stream_cookie < COOKIE {
                        let c = (COOKIE - test.stream_cookie).min(n);
                        test.stream_cookie += c;
                        if test.phase == Phase::Running {
                            test.bytes += (n - c) as u64;
                        }
                    } else if test.phase == Phase::Running {
                        test.bytes += n as u64;
                    }
                    moved = true;
                }
                _ => break,
            }
        }
    }
    let mut connect_from: Option<IpEndpoint> = None;
    {
        let u = set.get_mut::<udp::Socket>(socks.udp);
        while let Ok((d, meta)) = u.recv() {
            moved = true;
            if test.phase == Phase::Stream && d.len() == 4 {
                let v = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                if v == UDP_CONNECT_MSG {
                    connect_from = Some(meta.endpoint);
                }
            } else if test.phase == Phase::Running {
                test.datagram(now, d);
            }
        }
        if let Some(ep) = connect_from {
            let _ = u.send_slice(&UDP_CONNECT_REPLY.to_le_bytes(), ep);
        }
    }
    if moved {
        test.last_activity = now;
    }
    // the control protocol
    loop {
        let before = test.phase;
        match test.phase {
            Phase::Cookie if test.ctrl_in.len() >= COOKIE => {
                test.ctrl_in.drain(..COOKIE);
                state(set, socks.ctrl, PARAM_EXCHANGE);
                test.phase = Phase::Params;
            }
            Phase::Params => {
                let Some((json, used)) = framed(&test.ctrl_in) else {
                    break;
                };
                let json = core::str::from_utf8(json).unwrap_or("");
                let on = |k| json_value(json, k).is_some_and(|v| v == "true" || v == "1");
                let parallel = json_value(json, "parallel").map_or(1, |v| v.parse().unwrap_or(1));
                test.udp = on("udp");
                test.counters64 = on("udp_counters_64bit");
                let refused = on("reverse") || on("bidirectional") || parallel != 1;
                test.ctrl_in.drain(..used);
                if refused {
                    println!("vtnt: stream: refused a test (reverse, bidirectional or parallel)");
                    state(set, socks.ctrl, ACCESS_DENIED);
                    test.phase = Phase::Done;
                } else {
                    state(set, socks.ctrl, CREATE_STREAMS);
                    test.phase = Phase::Stream;
                }
            }
            Phase::Stream => {
                let ready = if test.udp {
                    connect_from.is_some()
                } else {
                    test.stream_cookie >= COOKIE
                };
                if !ready {
                    break;
                }
                state(set, socks.ctrl, TEST_START);
                state(set, socks.ctrl, TEST_RUNNING);
                test.started = Some(now);
                test.phase = Phase::Running;
            }
            Phase::Running => {
                let Some(&b) = test.ctrl_in.first() else {
                    break;
                };
                test.ctrl_in.remove(0);
                if b == TEST_END {
                    test.ended = Some(now);
                    state(set, socks.ctrl, EXCHANGE_RESULTS);
                    test.phase = Phase::ClientResults;
                }
            }
            Phase::ClientResults => {
                let Some((_, used)) = framed(&test.ctrl_in) else {
                    break;
                };
                test.ctrl_in.drain(..used);
                let ours = test.results();
                let c = set.get_mut::<tcp::Socket>(socks.ctrl);
                let _ = c.send_slice(&(ours.len() as u32).to_be_bytes());
                let _ = c.send_slice(ours.as_bytes());
                let _ = c.send_slice(&[DISPLAY_RESULTS]);
                test.phase = Phase::Done;
            }
            _ => break,
        }
        if test.phase == before {
            break;
        }
    }
    moved
}
