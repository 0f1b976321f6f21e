//! Helpers shared by the integration tests: sample records that cover what the formats
//! must carry, runners for Debian's scamper tools, and a chain of network namespaces that
//! removes itself. (Tests skip through vtnt-testkit when scamper or root is missing.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use vtnt_formats::Cycle;
use vtnt_record::*;

/// A fresh scratch directory under the target dir.
pub fn scratch(name: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let d = base.join(format!("vtnt-formats-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Runs a scamper utility on a file; asserts exit 0 and no error text; returns stdout.
pub fn sc_tool(tool: &str, file: &Path) -> String {
    let out = Command::new(tool)
        .arg(file)
        .env("TZ", "UTC")
        .output()
        .expect("run scamper tool");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{tool} {} failed: {stderr}",
        file.display()
    );
    assert!(
        stderr.trim().is_empty(),
        "{tool} {} complained: {stderr}",
        file.display()
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Compares two JSON texts line by line; on a difference, names the fields that differ.
pub fn assert_same_lines(ours: &str, theirs: &str, what: &str) {
    let a: Vec<&str> = ours.lines().collect();
    let b: Vec<&str> = theirs.lines().collect();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x != y {
            let vx: serde_json::Value = serde_json::from_str(x).unwrap_or_default();
            let vy: serde_json::Value = serde_json::from_str(y).unwrap_or_default();
            panic!(
                "{what}: line {} differs\n ours:   {x}\n scamper:{y}\n fields: {}",
                i + 1,
                field_diff(&vx, &vy, "")
            );
        }
    }
    assert_eq!(
        a.len(),
        b.len(),
        "{what}: line counts differ\nours:\n{ours}\nscamper:\n{theirs}"
    );
}

fn field_diff(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> String {
    use serde_json::Value::{Array, Object};
    match (a, b) {
        (Object(x), Object(y)) => {
            let mut out = String::new();
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => out += &field_diff(u, v, &p),
                    (u, v) => out += &format!("{p}: {u:?} vs {v:?}; "),
                }
            }
            if out.is_empty() && a != b {
                out = format!("{path}: same values, different order or spacing; ");
            }
            out
        }
        (Array(x), Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .map(|(i, (u, v))| field_diff(u, v, &format!("{path}[{i}]")))
            .collect(),
        _ if a == b => String::new(),
        _ => format!("{path}: {a} vs {b}; "),
    }
}

pub fn cycle(start: u32, stop: u32) -> Cycle {
    Cycle {
        list_name: "default".into(),
        list_id: 0,
        id: 0,
        hostname: Some("vm".into()),
        start_time: start,
        stop_time: stop,
        vtnt: None,
    }
}

const T0: u64 = 1_795_312_150_000_000;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn te_hop(addr: &str, ttl: u8, id: u8, qttl: u8, mpls: Vec<MplsLabel>) -> Hop {
    Hop {
        addr: ip(addr),
        probe_ttl: ttl,
        probe_id: id,
        probe_size: 44,
        tx: Instant::from_micros(T0 + u64::from(ttl) * 50_000 + u64::from(id) * 7),
        rtt: Duration::from_micros(200 + u64::from(ttl) * 1_013),
        reply_ttl: 65 - ttl,
        reply_tos: 192,
        reply_ipid: 3000 + u16::from(ttl),
        reply_size: if mpls.is_empty() { 72 } else { 140 },
        icmp: Some((11, 0)),
        tcp_flags: None,
        quoted: Some(Quoted {
            ttl: qttl,
            ip_len: 44,
            tos: 0,
        }),
        mpls,
        name: None,
        nhmtu: 0,
    }
}

fn lse(label: u32, ttl: u8, bottom: bool) -> MplsLabel {
    MplsLabel {
        label,
        exp: 0,
        bottom,
        ttl,
    }
}

fn base_trace(method: Method, dst: &str) -> Trace {
    Trace {
        src: ip("192.0.2.1"),
        dst: ip(dst),
        method,
        sport: if method == Method::IcmpParis {
            0
        } else {
            42070
        },
        dport: if method == Method::IcmpParis {
            0
        } else {
            33435
        },
        icmp_sum: if method == Method::IcmpParis {
            42069
        } else {
            0
        },
        userid: 0,
        start: Instant::from_micros(T0 + 299_134),
        stop_reason: StopReason::Completed,
        stop_data: 0,
        attempts: 3,
        hoplimit: 0,
        firsthop: 1,
        gaplimit: 5,
        wait: Duration::from_secs(1),
        wait_probe: Duration::ZERO,
        tos: 0,
        probe_size: 44,
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
    }
}

/// Traces and pings covering methods, stop reasons, MPLS stacks, quotations, gaps,
/// several attempts per hop, TCP replies, IPv6, and ping statistics.
pub fn sample_records() -> Vec<Record> {
    let mut v = Vec::new();

    // ICMP paris through an explicit MPLS tunnel: 2-entry stacks, quoted TTL 2.
    let mut t = base_trace(Method::IcmpParis, "203.0.113.9");
    t.hops = vec![
        te_hop("192.0.2.2", 1, 1, 1, vec![]),
        te_hop(
            "198.51.100.2",
            2,
            1,
            1,
            vec![lse(25316, 1, false), lse(17, 1, true)],
        ),
        te_hop(
            "198.51.100.6",
            3,
            1,
            2,
            vec![lse(25317, 1, false), lse(18, 1, true)],
        ),
        te_hop(
            "198.51.100.6",
            3,
            2,
            2,
            vec![lse(25317, 1, false), lse(18, 1, true)],
        ),
    ];
    let mut last = te_hop("203.0.113.9", 5, 1, 1, vec![]);
    last.icmp = Some((0, 0));
    last.quoted = None;
    last.reply_tos = 0;
    last.reply_size = 44;
    last.reply_ipid = 0; // omitted in warts, printed as 0
    t.hops.push(last);
    // -O ptr: names where a PTR record answered (both attempts of a hop share it)
    t.ptr = true;
    t.hops[0].name = Some("r1.example.net".into());
    for h in &mut t.hops[2..4] {
        h.name = Some("ae-3.core-2.example.net".into());
    }
    t.hop_count = 5;
    t.probe_count = 9;
    t.userid = 7;
    v.push(Record::Trace(t));

    // UDP paris, gap at the end, opaque-looking label (LSE-TTL 250), quoted length/tos.
    let mut t = base_trace(Method::UdpParis, "203.0.113.99");
    let mut h = te_hop("192.0.2.2", 1, 1, 1, vec![lse(1000, 250, true)]);
    h.quoted = Some(Quoted {
        ttl: 1,
        ip_len: 60,
        tos: 4,
    });
    t.hops = vec![h];
    t.stop_reason = StopReason::GapLimit;
    t.hop_count = 6;
    t.probe_count = 16;
    t.wait_probe = Duration::from_millis(20);
    t.tos = 8;
    t.gaplimit = 5;
    v.push(Record::Trace(t));

    // TCP: RST from the destination.
    let mut t = base_trace(Method::Tcp, "203.0.113.2");
    t.probe_size = 40;
    let mut h1 = te_hop("192.0.2.2", 1, 1, 1, vec![]);
    h1.probe_size = 40;
    h1.quoted = Some(Quoted {
        ttl: 1,
        ip_len: 40,
        tos: 0,
    });
    let mut h2 = te_hop("203.0.113.2", 2, 1, 1, vec![]);
    h2.probe_size = 40;
    h2.icmp = None;
    h2.quoted = None;
    h2.tcp_flags = Some(20);
    h2.reply_size = 40;
    t.hops = vec![h1, h2];
    t.hop_count = 2;
    t.probe_count = 2;
    t.dport = 80;
    v.push(Record::Trace(t.clone()));

    // TCP ACK: a RST (no ACK bit) from the destination.
    t.method = Method::TcpAck;
    t.hops[1].tcp_flags = Some(4);
    v.push(Record::Trace(t));

    // One small trace per remaining stop reason.
    for (i, r) in [
        StopReason::None,
        StopReason::Unreach,
        StopReason::Icmp,
        StopReason::Loop,
        StopReason::Error,
        StopReason::HopLimit,
        StopReason::Gss,
        StopReason::Halted,
    ]
    .into_iter()
    .enumerate()
    {
        let mut t = base_trace(
            [Method::IcmpParis, Method::UdpParis][i % 2],
            "198.51.100.77",
        );
        t.stop_reason = r;
        let mut h = te_hop("192.0.2.2", 1, 1, 1, vec![]);
        if r == StopReason::Unreach {
            h.icmp = Some((3, 1));
            t.stop_data = 1;
        }
        t.hops = vec![h];
        t.hop_count = 1;
        t.probe_count = 1;
        t.hoplimit = if r == StopReason::HopLimit { 1 } else { 0 };
        v.push(Record::Trace(t));
    }

    // IPv6 ICMP paris: time exceeded (type 3), quoted but no ToS.
    let mut t = base_trace(Method::IcmpParis, "2001:db8::9");
    t.src = ip("2001:db8::1");
    let mut h = te_hop("2001:db8::2", 1, 1, 3, vec![lse(300, 1, true)]);
    h.icmp = Some((3, 0));
    h.reply_ipid = 0;
    t.hops = vec![h];
    t.hop_count = 1;
    t.probe_count = 1;
    t.stop_reason = StopReason::HopLimit;
    t.hoplimit = 1;
    v.push(Record::Trace(t));

    v.extend(sample_pings());
    v
}

fn reply(seq: u16, rtt_us: u64) -> PingReply {
    PingReply {
        from: ip("203.0.113.2"),
        seq,
        tx: Instant::from_micros(T0 + u64::from(seq) * 1_000_000 + 110),
        rtt: Duration::from_micros(rtt_us),
        reply_size: 84,
        reply_ttl: 62,
        reply_tos: 0,
        reply_proto: 1,
        probe_ipid: 100 + seq,
        reply_ipid: 200 + seq,
        icmp: Some((0, 0)),
        tcp_flags: None,
        rr: Vec::new(),
    }
}

/// A 40-byte TCP reply with `flags` to probe `seq`.
fn tcp_reply(seq: u16, rtt_us: u64, flags: u8) -> PingReply {
    let mut r = reply(seq, rtt_us);
    r.icmp = None;
    r.reply_proto = 6;
    r.tcp_flags = Some(flags);
    r.reply_size = 40;
    r.reply_ipid = 0;
    r
}

fn base_ping(method: Method) -> Ping {
    Ping {
        src: ip("192.0.2.1"),
        dst: ip("203.0.113.2"),
        method,
        sport: if method == Method::IcmpParis {
            0
        } else {
            42078
        },
        dport: if method == Method::IcmpParis {
            0
        } else {
            33435
        },
        userid: 0,
        start: Instant::from_micros(T0 + 32_489),
        ping_sent: 3,
        probe_size: 84,
        ttl: 64,
        wait: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        tcp_seq: 0,
        tcp_ack: 0,
        tos: 0,
        icmp_sum: None,
        reply_count: 0,
        data: None,
        record_route: false,
        responses: Vec::new(),
    }
}

/// Pings: all answered; one lost and one duplicated; none answered; UDP; TCP; a
/// sub-second interval with a longer timeout.
pub fn sample_pings() -> Vec<Record> {
    let mut v = Vec::new();
    let mut p = base_ping(Method::IcmpParis);
    p.responses = vec![reply(0, 47), reply(1, 52), reply(2, 53)];
    v.push(Record::Ping(p));

    let mut p = base_ping(Method::IcmpParis);
    p.responses = vec![reply(0, 261), reply(2, 88), reply(2, 95)];
    p.userid = 3;
    v.push(Record::Ping(p));

    let mut p = base_ping(Method::IcmpParis);
    p.ping_sent = 4;
    p.wait = Duration::from_millis(200);
    p.timeout = Duration::from_secs(2);
    v.push(Record::Ping(p));

    let mut p = base_ping(Method::UdpParis);
    p.probe_size = 40;
    p.responses = (0..3)
        .map(|s| {
            let mut r = reply(s, 200 + u64::from(s) * 10);
            r.icmp = Some((3, 3));
            r.reply_size = 68;
            r
        })
        .collect();
    v.push(Record::Ping(p));

    let mut p = base_ping(Method::Tcp);
    p.probe_size = 40;
    p.dport = 80;
    p.tcp_seq = 93_311_536;
    p.ping_sent = 2;
    p.responses = (0..2)
        .map(|s| tcp_reply(s, 5721 - u64::from(s) * 5000, 20))
        .collect();
    v.push(Record::Ping(p));

    // tcp-ack, -A: RSTs, the ACKs' sequence and acknowledgment numbers
    let mut p = base_ping(Method::TcpAck);
    p.probe_size = 40;
    p.tcp_seq = 93_311_536;
    p.tcp_ack = 12_345;
    p.ping_sent = 2;
    p.responses = (0..2)
        .map(|s| tcp_reply(s, 301 + u64::from(s), 4))
        .collect();
    v.push(Record::Ping(p));

    // udp-dport: port unreachables for ports 4000, 4001
    let mut p = base_ping(Method::UdpDport);
    p.probe_size = 40;
    p.dport = 4000;
    p.ping_sent = 2;
    p.responses = (0..2)
        .map(|s| {
            let mut r = reply(s, 90);
            r.icmp = Some((3, 3));
            r.reply_size = 68;
            r
        })
        .collect();
    v.push(Record::Ping(p));

    // scamper's -R -C -p: flags, icmp_csum, pattern, RR arrays
    let mut p = base_ping(Method::IcmpParis);
    p.probe_size = 126;
    p.icmp_sum = Some(4660);
    p.data = Some(ProbeData::Pattern(vec![0xab, 0xcd, 0x01]));
    p.record_route = true;
    p.responses = (0..2)
        .map(|s| {
            let mut r = reply(s, 60 + u64::from(s));
            r.reply_size = 124;
            r.rr = ["198.51.100.1", "203.0.113.2", "203.0.113.2", "198.51.100.2"]
                .iter()
                .map(|a| ip(a))
                .collect();
            r
        })
        .collect();
    v.push(Record::Ping(p));

    // scamper's -B: a payload, UDP
    let mut p = base_ping(Method::UdpParis);
    p.data = Some(ProbeData::Payload(vec![0xde, 0xad, 0xbe, 0xef, 0x00]));
    p.probe_size = 33;
    v.push(Record::Ping(p));
    v
}

/// Records with what scamper keeps in warts but its JSON does not show: a trace's `-Q`
/// and `-T` flags, `-G 2` and its last-ditch replies, `-N` and `-c`, a ping's `-z` ToS, `-o` reply count
/// and an ICMP ping's `-d`.
pub fn warts_only_samples() -> Vec<Record> {
    let mut v = Vec::new();
    // scamper's -Q -T -O ptr with no PTR record: two replies per hop (warts flags only;
    // PTR's in the 32-bit flags beside the others)
    let mut t = base_trace(Method::UdpParis, "203.0.113.9");
    t.attempts = 2;
    t.all_attempts = true;
    t.ignore_ttl_dst = true;
    t.ptr = true;
    t.hops = vec![
        te_hop("192.0.2.2", 1, 1, 1, vec![]),
        te_hop("192.0.2.2", 1, 2, 1, vec![]),
    ];
    t.hop_count = 1;
    t.probe_count = 2;
    t.stop_reason = StopReason::HopLimit;
    t.hoplimit = 1;
    v.push(Record::Trace(t));

    let mut p = base_ping(Method::IcmpParis);
    p.tos = 0x20;
    p.reply_count = 2;
    p.responses = vec![reply(0, 47), reply(1, 52)];
    v.push(Record::Ping(p));

    // an ICMP ping's -d: its first sequence number, in warts' destination port
    let mut p = base_ping(Method::IcmpParis);
    p.dport = 100;
    p.responses = vec![reply(0, 47)];
    v.push(Record::Ping(p));

    // -G 2: silent routers, then the destination answers a TTL-255 probe (warts'
    // last-ditch section; its address already in the table, then a new one)
    let mut t = base_trace(Method::UdpParis, "203.0.113.9");
    (t.gaplimit, t.attempts, t.hop_count, t.probe_count) = (2, 2, 2, 6);
    t.stop_reason = StopReason::GapLimit;
    t.last_ditch = true;
    let mut ld = te_hop("203.0.113.9", 3, 2, 253, vec![]);
    (ld.probe_ttl, ld.icmp) = (255, Some((3, 3)));
    t.lastditch = vec![ld.clone()];
    v.push(Record::Trace(t.clone()));
    ld.addr = ip("198.51.100.7");
    t.lastditch.push(ld);
    v.push(Record::Trace(t.clone()));
    // -G 2 and no answer: the gap action alone
    t.lastditch.clear();
    v.push(Record::Trace(t));

    // -N 3 -c 99: warts' squeries and confidence (JSON shows neither)
    let mut t = base_trace(Method::UdpParis, "203.0.113.9");
    (t.squeries, t.confidence) = (3, 99);
    v.push(Record::Trace(t));
    v
}

/// A chain of network namespaces: src -- r1 -- r2 -- dst, with lab addresses only
/// (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24), dual stack (2001:db8:1::/64,
/// 2001:db8:2::/64, 2001:db8:3::/64). Removed on drop, even on failure.
pub struct Lab {
    pub prefix: String,
}

impl Lab {
    pub const NODES: [&'static str; 4] = ["a", "r1", "r2", "d"];

    fn ip(args: &str) -> Result<(), String> {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("ip {args}"))
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ip {args}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    pub fn ns(&self, node: &str) -> String {
        format!("{}{}", self.prefix, node)
    }

    /// Builds the chain. Paths: 203.0.113.2 (reachable), .99 (black hole after r2),
    /// .88 (unreachable at r2), .77 (routing loop r1 <-> r2); over IPv6 2001:db8:3::2
    /// (reachable) and 2001:db8:3::88 (unreachable at r2).
    pub fn new() -> Result<Lab, String> {
        let lab = Lab {
            prefix: format!("vtf{}", std::process::id() % 100_000),
        };
        let p = &lab.prefix;
        for n in Self::NODES {
            Self::ip(&format!("netns add {p}{n}"))?;
            Self::ip(&format!("-n {p}{n} link set lo up"))?;
        }
        let links = [
            ("a", "a0", "r1", "r1a"),
            ("r1", "r1b", "r2", "r2a"),
            ("r2", "r2b", "d", "d0"),
        ];
        for (n1, i1, n2, i2) in links {
            Self::ip(&format!(
                "link add {p}{i1} netns {p}{n1} type veth peer name {p}{i2} netns {p}{n2}"
            ))?;
            Self::ip(&format!("-n {p}{n1} link set {p}{i1} up"))?;
            Self::ip(&format!("-n {p}{n2} link set {p}{i2} up"))?;
        }
        let cmds = [
            "a addr add 192.0.2.1/24 dev {p}a0",
            "r1 addr add 192.0.2.2/24 dev {p}r1a",
            "r1 addr add 198.51.100.1/24 dev {p}r1b",
            "r2 addr add 198.51.100.2/24 dev {p}r2a",
            "r2 addr add 203.0.113.1/24 dev {p}r2b",
            "d addr add 203.0.113.2/24 dev {p}d0",
            "a route add default via 192.0.2.2",
            "r1 route add 203.0.113.0/24 via 198.51.100.2",
            "r2 route add 192.0.2.0/24 via 198.51.100.1",
            "d route add default via 203.0.113.1",
            "r2 route add blackhole 203.0.113.99/32",
            "r2 route add unreachable 203.0.113.88/32",
            "r1 route add 203.0.113.77/32 via 198.51.100.2",
            "r2 route add 203.0.113.77/32 via 198.51.100.1",
            "a addr add 2001:db8:1::1/64 dev {p}a0 nodad",
            "r1 addr add 2001:db8:1::2/64 dev {p}r1a nodad",
            "r1 addr add 2001:db8:2::1/64 dev {p}r1b nodad",
            "r2 addr add 2001:db8:2::2/64 dev {p}r2a nodad",
            "r2 addr add 2001:db8:3::1/64 dev {p}r2b nodad",
            "d addr add 2001:db8:3::2/64 dev {p}d0 nodad",
            "a -6 route add default via 2001:db8:1::2",
            "r1 -6 route add 2001:db8:3::/64 via 2001:db8:2::2",
            "r2 -6 route add 2001:db8:1::/64 via 2001:db8:2::1",
            "d -6 route add default via 2001:db8:3::1",
            "r2 -6 route add unreachable 2001:db8:3::88/128",
        ];
        for c in cmds {
            let (node, rest) = c.split_once(' ').unwrap_or((c, ""));
            Self::ip(&format!("-n {p}{node} {}", rest.replace("{p}", p)))?;
        }
        for n in Self::NODES {
            let out = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &lab.ns(n),
                    "sysctl",
                    "-qw",
                    "net.ipv4.ip_forward=1",
                    "net.ipv4.icmp_ratelimit=0",
                    "net.ipv6.conf.all.forwarding=1",
                    "net.ipv6.icmp.ratelimit=0",
                ])
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "sysctl in {n}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(lab)
    }

    /// Makes r2 silent: its own ICMP has no route back (policy routing keeps forwarding).
    pub fn silence_r2(&self) -> Result<(), String> {
        let p = &self.prefix;
        Self::ip(&format!(
            "-n {p}r2 route add 192.0.2.0/24 via 198.51.100.1 table 100"
        ))?;
        Self::ip(&format!("-n {p}r2 rule add iif {p}r2b lookup 100"))?;
        Self::ip(&format!("-n {p}r2 route del 192.0.2.0/24"))
    }

    /// A scamper run inside the source namespace writing warts to `out`.
    pub fn scamper(&self, cmd: &str, dst: &str, out: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.ns("a"),
            "scamper",
            "-O",
            "warts",
            "-o",
        ])
        .arg(out)
        .args(["-c", cmd, "-i", dst]);
        c
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for n in Self::NODES {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(n)])
                .status();
        }
    }
}
