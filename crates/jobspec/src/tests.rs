//! Round trips (every kind, defaults and every key changed) and errors that name the key.
#![allow(clippy::field_reassign_with_default)]

use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_engine::{Duration, Method, PingOptions, ProbeData, TraceOptions};
use vtnt_tnt::TntConfig;

use crate::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn unspecified() -> IpAddr {
    ip("0.0.0.0")
}

fn round_trip(spec: &JobSpec) -> alloc::string::String {
    let line = encode(spec);
    let back = decode(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(&back, spec, "{line}");
    assert_eq!(encode(&back), line, "canonical");
    line
}

#[test]
fn defaults_are_short() {
    let spec = JobSpec::new(
        JobKind::Trace(TraceOptions::new(unspecified())),
        vec![ip("192.0.2.9")],
    );
    assert_eq!(round_trip(&spec), "vtnt-job=1 kind=trace targets=192.0.2.9");
    let spec = JobSpec::new(
        JobKind::Ping(PingOptions {
            probe_size: crate::DEFAULT_SIZE,
            ..PingOptions::new(unspecified())
        }),
        vec![ip("192.0.2.9")],
    );
    assert_eq!(round_trip(&spec), "vtnt-job=1 kind=ping targets=192.0.2.9");
    let spec = JobSpec::new(
        JobKind::Tnt(TntConfig::default()),
        vec![ip("192.0.2.9"), ip("198.51.100.1")],
    );
    assert_eq!(
        round_trip(&spec),
        "vtnt-job=1 kind=tnt targets=192.0.2.9,198.51.100.1"
    );
}

#[test]
fn trace_like_the_cli_says_it() {
    // vtnt trace -P icmp-paris -q 1 -w 1 --seed 7 -p 100 198.51.100.1
    let mut t = TraceOptions::new(unspecified()).with_method(Method::IcmpParis);
    t.attempts = 1;
    t.wait = Duration::from_secs(1);
    let mut spec = JobSpec::new(JobKind::Trace(t), vec![ip("198.51.100.1")]);
    spec.engine.seed = 7;
    spec.engine.pps = 100;
    assert_eq!(
        round_trip(&spec),
        "vtnt-job=1 kind=trace trace.method=icmp-paris trace.attempts=1 trace.wait=1s pps=100 seed=7 targets=198.51.100.1"
    );
}

#[test]
fn every_key_changed_round_trips() {
    let mut t = TraceOptions::new(unspecified()).with_method(Method::Tcp);
    t.first_ttl = 2;
    t.max_ttl = 30;
    t.attempts = 3;
    t.wait = Duration::from_millis(1500);
    t.wait_probe = Duration::from_micros(250);
    t.gaplimit = 3;
    t.loops = 2;
    t.sport = Some(4000);
    t.dport = Some(443);
    t.probe_size = 60;
    t.tos = 8;
    t.userid = 42;
    let mut spec = JobSpec::new(
        JobKind::Trace(t.clone()),
        vec![ip("203.0.113.1"), ip("8.8.8.8")],
    );
    spec.engine = EngineSpec {
        pps: 500,
        burst: 4,
        seed: u64::MAX,
        window: 7,
        src: Some("192.0.2.10".parse().unwrap()),
        allow_public: true,
        exclude: [
            "10.0.0.0/8".parse().unwrap(),
            "192.0.2.128/25".parse().unwrap(),
        ]
        .into_iter()
        .collect(),
    };
    let line = round_trip(&spec);
    assert!(
        line.contains(" trace.wait=1500ms trace.wait-probe=250us "),
        "{line}"
    );

    let mut p = PingOptions::new(unspecified()).with_method(Method::UdpParis);
    p.count = 9;
    p.interval = Duration::from_millis(100);
    p.ttl = 3;
    p.timeout = Duration::from_secs(2);
    p.sport = Some(1);
    p.dport = Some(2);
    p.probe_size = 100;
    p.userid = 1;
    round_trip(&JobSpec::new(
        JobKind::Ping(p.clone()),
        vec![ip("192.0.2.1")],
    ));

    let mut c = TntConfig::default();
    c.trace = t;
    c.ping = p;
    c.classify.thresholds.frpla = 4;
    c.classify.thresholds.rtla = 2;
    c.classify.thresholds.uturn = 5;
    c.classify.brute_force = true;
    c.classify.frpla_relative = false;
    c.classify.uturn_shape = false;
    c.classify.egress_label = false;
    c.classify.blind_spots = false;
    c.reveal = false;
    c.buddy = false;
    c.max_brpr_steps = 10;
    c.walk_back = 0;
    c.walk_forward = 3;
    c.ingress_retries = 1;
    let line = round_trip(&JobSpec::new(JobKind::Tnt(c), vec![ip("192.0.2.1")]));
    assert!(line.contains(" tnt.walk-back=0 "), "{line}");
}

#[test]
fn scamper_option_keys_round_trip() {
    let mut t = TraceOptions::new(unspecified()).with_payload(vec![0xde, 0xad, 0xbe, 0xef]);
    t.all_attempts = true;
    t.ignore_ttl_dst = true;
    t.last_ditch = true;
    let line = round_trip(&JobSpec::new(JobKind::Trace(t), vec![ip("192.0.2.1")]));
    assert!(
        line.contains(" trace.probe-size=32 trace.all-attempts=true trace.ignore-ttl-dst=true trace.last-ditch=true trace.payload=deadbeef "),
        "{line}"
    );
    let mut t = TraceOptions::new(unspecified());
    (t.squeries, t.confidence) = (3, 99);
    let line = round_trip(&JobSpec::new(JobKind::Trace(t), vec![ip("192.0.2.1")]));
    assert!(
        line.contains(" trace.squeries=3 trace.confidence=99 "),
        "{line}"
    );
    for bad in [
        "trace.confidence=90",
        "trace.squeries=6",
        "trace.squeries=0",
        "trace.pmtud=true trace.squeries=2",
        "trace.pmtud=true trace.method=icmp-paris",
    ] {
        let line = alloc::format!("vtnt-job=1 kind=trace {bad} targets=192.0.2.1");
        let e = decode(&line).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{line}: {e}");
    }
    let mut p = PingOptions::new(unspecified());
    p.tos = 0x20;
    p.icmp_sum = Some(0x1234);
    p.reply_count = 2;
    p.data = Some(ProbeData::Pattern(vec![0xab, 0xcd]));
    p.record_route = true;
    p.probe_size = p.default_size();
    let line = round_trip(&JobSpec::new(
        JobKind::Ping(p.clone()),
        vec![ip("192.0.2.1")],
    ));
    assert!(
        line.contains(" ping.probe-size=126 ping.tos=32 ping.icmp-sum=4660 ping.reply-count=2 ping.pattern=abcd ping.record-route=true "),
        "{line}"
    );
    p.data = Some(ProbeData::Payload(vec![1, 2, 3]));
    p.probe_size = p.default_size();
    let line = round_trip(&JobSpec::new(JobKind::Ping(p), vec![ip("192.0.2.1")]));
    assert!(line.contains(" ping.probe-size=73 "), "{line}");
    assert!(line.contains(" ping.payload=010203 "), "{line}");
    let mut p = PingOptions::new(unspecified()).with_method(Method::TcpAck);
    p.probe_size = crate::DEFAULT_SIZE;
    p.tcp_ack = Some(12345);
    let line = round_trip(&JobSpec::new(JobKind::Ping(p), vec![ip("192.0.2.1")]));
    assert!(
        line.contains(" ping.method=tcp-ack ping.tcp-ack=12345 "),
        "{line}"
    );
    let mut p = PingOptions::new(unspecified()).with_method(Method::UdpDport);
    p.dport = Some(4000);
    let line = round_trip(&JobSpec::new(JobKind::Ping(p), vec![ip("192.0.2.1")]));
    assert!(
        line.contains(" ping.method=udp-dport ping.dport=4000 "),
        "{line}"
    );
    let t = TraceOptions::new(unspecified()).with_method(Method::TcpAck);
    let line = round_trip(&JobSpec::new(JobKind::Trace(t), vec![ip("192.0.2.1")]));
    assert!(line.contains(" trace.method=tcp-ack "), "{line}");
}

#[test]
fn method_resets_probe_size_unless_given() {
    let spec = decode("vtnt-job=1 kind=trace trace.method=tcp targets=192.0.2.1").unwrap();
    let JobKind::Trace(t) = &spec.kind else {
        panic!()
    };
    assert_eq!(t.probe_size, 40);
    let spec =
        decode("vtnt-job=1 kind=trace trace.probe-size=50 trace.method=tcp targets=192.0.2.1")
            .unwrap();
    let JobKind::Trace(t) = &spec.kind else {
        panic!()
    };
    assert_eq!(t.probe_size, 50, "key order does not matter");
}

#[test]
fn module_targets() {
    let targets: Vec<IpAddr> = (1..=40)
        .map(|i| ip(&alloc::format!("198.51.100.{i}")))
        .collect();
    let spec = JobSpec::new(JobKind::Tnt(TntConfig::default()), targets.clone());
    let (line, module) = encode_split(&spec, 16);
    assert_eq!(line, "vtnt-job=1 kind=tnt targets=@module");
    let module = module.unwrap();
    assert_eq!(decode(&line).unwrap().targets, Targets::Module);
    assert_eq!(parse_target_list(&module).unwrap(), targets);
    let (line, module) = encode_split(
        &JobSpec::new(JobKind::Tnt(TntConfig::default()), targets[..2].to_vec()),
        16,
    );
    assert!(module.is_none());
    assert!(line.ends_with("targets=198.51.100.1,198.51.100.2"));
    let e = parse_target_list("# header\n192.0.2.1\n\n192.0.2.x # bad\n").unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::BadTarget {
            line: 4,
            text: "192.0.2.x".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "target list line 4: `192.0.2.x` is not an IP address"
    );
}

fn error(line: &str) -> Error {
    decode(line).expect_err(line)
}

#[test]
fn errors_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("", "", "job spec must start with `vtnt-job=1`"),
        (
            "kind=trace targets=1.2.3.4",
            "",
            "job spec must start with `vtnt-job=1`",
        ),
        (
            "vtnt-job=2 kind=trace",
            "vtnt-job",
            "job spec version `2` is not supported (this build reads 1)",
        ),
        (
            "vtnt-job=1 targets=192.0.2.1",
            "kind",
            "job spec: key `kind` is missing",
        ),
        (
            "vtnt-job=1 kind=trace",
            "targets",
            "job spec: key `targets` is missing",
        ),
        (
            "vtnt-job=1 kind=dance targets=192.0.2.1",
            "kind",
            "job spec: key `kind`: `dance` is not a job kind (trace, ping, tnt, micro)",
        ),
        (
            "vtnt-job=1 kind=trace trace.wait=5 targets=192.0.2.1",
            "trace.wait",
            "job spec: key `trace.wait`: `5` is not a duration (e.g. 1s, 250ms, 40us)",
        ),
        (
            "vtnt-job=1 kind=trace trace.wait=90s targets=192.0.2.1",
            "trace.wait",
            "job spec: key `trace.wait`: out of range (allowed: 1ms..=60s)",
        ),
        (
            "vtnt-job=1 kind=trace trace.attempts=0 targets=192.0.2.1",
            "trace.attempts",
            "job spec: key `trace.attempts`: out of range (allowed: 1..=20)",
        ),
        (
            "vtnt-job=1 kind=ping ping.pattern=ab ping.payload=cd targets=192.0.2.1",
            "ping.payload",
            "job spec: key `ping.payload`: a ping carries a pattern or a payload, not both",
        ),
        (
            "vtnt-job=1 kind=ping ping.pattern=abc targets=192.0.2.1",
            "ping.pattern",
            "job spec: key `ping.pattern`: `abc` is not hex bytes (two digits a byte, 0-9 and a-f)",
        ),
        (
            "vtnt-job=1 kind=trace trace.payload=zz targets=192.0.2.1",
            "trace.payload",
            "job spec: key `trace.payload`: `zz` is not hex bytes (two digits a byte, 0-9 and a-f)",
        ),
        (
            "vtnt-job=1 kind=ping ping.icmp-sum=0 targets=192.0.2.1",
            "ping.icmp-sum",
            "job spec: key `ping.icmp-sum`: out of range (allowed: 1..=65534, icmp-echo only)",
        ),
        (
            "vtnt-job=1 kind=trace trace.method=tcp trace.payload=00 targets=192.0.2.1",
            "trace.payload",
            "job spec: key `trace.payload`: out of range (allowed: none for tcp)",
        ),
        (
            "vtnt-job=1 kind=trace trace.attempts=300 targets=192.0.2.1",
            "trace.attempts",
            "job spec: key `trace.attempts`: `300` is not a count (1..=20)",
        ),
        (
            "vtnt-job=1 kind=trace ping.count=3 targets=192.0.2.1",
            "ping.count",
            "job spec: unknown key `ping.count`",
        ),
        (
            "vtnt-job=1 kind=trace trace.colour=red targets=192.0.2.1",
            "trace.colour",
            "job spec: unknown key `trace.colour`",
        ),
        (
            "vtnt-job=1 kind=trace seed=1 seed=2 targets=192.0.2.1",
            "seed",
            "job spec: key `seed` given twice",
        ),
        (
            "vtnt-job=1 kind=trace banana targets=192.0.2.1",
            "banana",
            "job spec word `banana` is not key=value",
        ),
        (
            "vtnt-job=1 kind=trace targets=192.0.2.1,nope",
            "targets",
            "job spec: key `targets`: `nope` is not an IP address",
        ),
        (
            "vtnt-job=1 kind=trace targets=",
            "targets",
            "job spec: key `targets`: no target given",
        ),
        (
            "vtnt-job=1 kind=ping pps=0 targets=192.0.2.1",
            "pps",
            "job spec: key `pps`: out of range (allowed: 1..=500000)",
        ),
        (
            "vtnt-job=1 kind=ping window=0 targets=192.0.2.1",
            "window",
            "job spec: key `window`: out of range (allowed: 1..=32768)",
        ),
        (
            "vtnt-job=1 kind=ping src=::1 targets=192.0.2.1",
            "src",
            "job spec: key `src`: `::1` is not an IPv4 address",
        ),
        (
            "vtnt-job=1 kind=ping ping.method=smoke targets=192.0.2.1",
            "ping.method",
            "job spec: key `ping.method`: `smoke` is not a method (icmp-paris, udp-paris, tcp, tcp-ack, udp-dport)",
        ),
        (
            "vtnt-job=1 kind=ping ping.sport=0 targets=192.0.2.1",
            "ping.sport",
            "job spec: key `ping.sport`: port 0 is not allowed",
        ),
        (
            "vtnt-job=1 kind=tnt tnt.walk-back=9 targets=192.0.2.1",
            "tnt.walk-back",
            "job spec: key `tnt.walk-back`: out of range (allowed: 0..=8)",
        ),
        (
            "vtnt-job=1 kind=tnt tnt.frpla=0 targets=192.0.2.1",
            "tnt.frpla",
            "job spec: key `tnt.frpla`: out of range (allowed: 1..=64)",
        ),
        (
            "vtnt-job=1 kind=tnt tnt.reveal=yes targets=192.0.2.1",
            "tnt.reveal",
            "job spec: key `tnt.reveal`: `yes` is not true or false",
        ),
        (
            "vtnt-job=1 kind=ping tnt.reveal=true targets=192.0.2.1",
            "tnt.reveal",
            "job spec: unknown key `tnt.reveal`",
        ),
        (
            "vtnt-job=1 kind=ping hold=3601s targets=192.0.2.1",
            "hold",
            "job spec: key `hold`: out of range (allowed: 0s..=3600s)",
        ),
        (
            "vtnt-job=1 kind=ping hold=10 targets=192.0.2.1",
            "hold",
            "job spec: key `hold`: `10` is not a duration (e.g. 1s, 250ms, 40us)",
        ),
        (
            "vtnt-job=1 kind=trace trace.method=udp-dport targets=192.0.2.1",
            "trace.method",
            "job spec: key `trace.method`: out of range (allowed: not udp-dport (a ping's))",
        ),
        (
            "vtnt-job=1 kind=ping ping.tcp-ack=7 targets=192.0.2.1",
            "ping.tcp-ack",
            "job spec: key `ping.tcp-ack`: out of range (allowed: tcp-ack only, not 0)",
        ),
        (
            "vtnt-job=1 kind=ping ping.method=tcp-ack ping.tcp-ack=x targets=192.0.2.1",
            "ping.tcp-ack",
            "job spec: key `ping.tcp-ack`: `x` is not a 32-bit number",
        ),
        (
            "vtnt-job=1 kind=ping hold=1s hold=2s targets=192.0.2.1",
            "hold",
            "job spec: key `hold` given twice",
        ),
    ];
    for &(line, key, msg) in cases {
        let e = error(line);
        assert_eq!(e.key, key, "{line}");
        assert_eq!(e.to_string(), msg, "{line}");
    }
}

#[test]
fn whitespace_and_order_do_not_matter() {
    let a = decode("vtnt-job=1  targets=192.0.2.1\tseed=3 kind=ping\n").unwrap();
    let b = decode("vtnt-job=1 kind=ping seed=3 targets=192.0.2.1").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.engine.seed, 3);
    assert_eq!(a.target_list(), &[ip("192.0.2.1")]);
}

#[test]
fn hold_is_additive_and_defaults_to_zero() {
    let mut spec = JobSpec::new(
        JobKind::Trace(TraceOptions::new(unspecified())),
        vec![ip("192.0.2.9")],
    );
    assert_eq!(spec.hold, Duration::ZERO);
    spec.hold = Duration::from_secs(10);
    assert_eq!(
        round_trip(&spec),
        "vtnt-job=1 kind=trace hold=10s targets=192.0.2.9"
    );
    spec.hold = Duration::from_millis(1500);
    assert_eq!(
        round_trip(&spec),
        "vtnt-job=1 kind=trace hold=1500ms targets=192.0.2.9"
    );
    spec.hold = MAX_HOLD;
    assert_eq!(
        round_trip(&spec),
        "vtnt-job=1 kind=trace hold=3600s targets=192.0.2.9"
    );
    // Lines without the key (every line written before it existed) still read, held 0.
    assert_eq!(
        decode("vtnt-job=1 kind=ping targets=192.0.2.1")
            .unwrap()
            .hold,
        Duration::ZERO
    );
    assert_eq!(
        decode("vtnt-job=1 kind=ping hold=0s targets=192.0.2.1")
            .unwrap()
            .hold,
        Duration::ZERO
    );
    // A module split keeps the hold.
    let (line, _) = encode_split(
        &JobSpec {
            targets: Targets::List(vec![ip("192.0.2.1"); 3]),
            ..spec.clone()
        },
        1,
    );
    assert_eq!(line, "vtnt-job=1 kind=trace hold=3600s targets=@module");
}

/// The guest enforces the host's policy: a spec is refused where it is decoded.
#[test]
fn the_probing_policy_is_enforced_on_decoding() {
    let refused = |line: &str, key: &str| {
        let e = decode(line).unwrap_err();
        assert_eq!(e.key, key, "{line}: {e}");
        assert!(matches!(e.kind, ErrorKind::Refused(_)), "{line}: {e}");
        e.to_string()
    };
    let m = refused(
        "vtnt-job=1 kind=trace targets=203.0.113.1,8.8.8.8",
        "targets",
    );
    assert!(m.contains("8.8.8.8") && m.contains("--allow-public"), "{m}");
    // public IPv6: refused whether the policy knows IPv6 (its `ipv6` feature, on when the
    // workspace builds vtnt-linux beside this crate) or not (the unikernel's build)
    refused("vtnt-job=1 kind=ping targets=2001:4860::8888", "targets");
    refused(
        "vtnt-job=1 kind=trace exclude=203.0.113.0/28 targets=203.0.113.1",
        "targets",
    );
    refused(
        "vtnt-job=1 kind=trace pps=2000 allow-public=true targets=8.8.8.8",
        "targets",
    );
    assert!(decode("vtnt-job=1 kind=trace pps=1000 allow-public=true targets=8.8.8.8").is_ok());
    let e = decode("vtnt-job=1 kind=trace pps=600000 targets=203.0.113.1").unwrap_err();
    assert_eq!(e.key, "pps");
    let e = decode("vtnt-job=1 kind=trace exclude=10.0.0.0/33 targets=203.0.113.1").unwrap_err();
    assert_eq!(e.key, "exclude");
    // module lists are checked by the guest with the same rules
    let spec = decode("vtnt-job=1 kind=tnt targets=@module").unwrap();
    let list = parse_target_list("203.0.113.1\n9.9.9.9\n").unwrap();
    let e = spec.check_targets(&list).unwrap_err();
    assert!(e.to_string().contains("9.9.9.9"), "{e}");
    // the source must be the prober's own address
    let spec = decode("vtnt-job=1 kind=trace src=8.8.8.8 targets=203.0.113.1").unwrap();
    let own: Ipv4Addr = "192.0.2.10".parse().unwrap();
    let e = spec.engine.config(own).unwrap_err();
    assert_eq!(e.key, "src");
    assert!(e.to_string().contains("spoof"), "{e}");
    let spec = decode("vtnt-job=1 kind=trace src=192.0.2.10 targets=203.0.113.1").unwrap();
    assert_eq!(spec.engine.config(own).unwrap().src, own);
}

#[test]
fn every_repeats_within_the_hold() {
    let mut spec = JobSpec::new(
        JobKind::Ping(PingOptions {
            probe_size: crate::DEFAULT_SIZE,
            ..PingOptions::new(unspecified())
        }),
        vec![ip("192.0.2.9")],
    );
    assert_eq!(spec.repeats(Duration::from_secs(1)).count(), 0);
    spec.hold = Duration::from_secs(10);
    spec.every = Duration::from_secs(4);
    assert_eq!(
        round_trip(&spec),
        "vtnt-job=1 kind=ping hold=10s every=4s targets=192.0.2.9"
    );
    // the first round took 1 s, so the hold ends 11 s after its start
    let at: Vec<u64> = spec
        .repeats(Duration::from_secs(1))
        .map(|d| d.as_secs())
        .collect();
    assert_eq!(at, [4, 8]);
    for (line, why) in [
        (
            "vtnt-job=1 kind=ping hold=10s every=500ms targets=192.0.2.1",
            "job spec: key `every`: out of range (allowed: 0s, or 1s..=3600s)",
        ),
        (
            "vtnt-job=1 kind=ping hold=2s every=3s targets=192.0.2.1",
            "job spec: key `every`: 3s is longer than the hold (2s)",
        ),
        (
            "vtnt-job=1 kind=ping every=1s targets=192.0.2.1",
            "job spec: key `every`: 1s is longer than the hold (0s)",
        ),
    ] {
        assert_eq!(decode(line).unwrap_err().to_string(), why, "{line}");
    }
}

#[test]
fn micro_jobs_have_no_targets() {
    let spec = JobSpec::new(JobKind::Micro(micro::Options::default()), vec![]);
    assert_eq!(round_trip(&spec), "vtnt-job=1 kind=micro");
    let empty = JobSpec::new(JobKind::Micro(micro::Options::EMPTY), vec![]);
    assert_eq!(
        round_trip(&empty),
        "vtnt-job=1 kind=micro micro.fib=0 micro.calls=0 micro.syscalls=0"
    );
    assert_eq!(spec.kind.measurement(unspecified()), None);
    for (line, key, msg) in [
        (
            "vtnt-job=1 kind=micro targets=192.0.2.1",
            "targets",
            "job spec: unknown key `targets`",
        ),
        (
            "vtnt-job=1 kind=micro micro.fib=94",
            "micro.fib",
            "job spec: key `micro.fib`: out of range (allowed: 0..=93)",
        ),
        (
            "vtnt-job=1 kind=micro micro.syscalls=100000001",
            "micro.syscalls",
            "job spec: key `micro.syscalls`: out of range (allowed: 0..=100000000)",
        ),
        (
            "vtnt-job=1 kind=micro micro.calls=-1",
            "micro.calls",
            "job spec: key `micro.calls`: `-1` is not a count",
        ),
        (
            "vtnt-job=1 kind=trace micro.calls=1 targets=192.0.2.1",
            "micro.calls",
            "job spec: unknown key `micro.calls`",
        ),
    ] {
        let e = error(line);
        assert_eq!(
            (e.key.as_str(), e.to_string()),
            (key, msg.to_string()),
            "{line}"
        );
    }
}

#[test]
fn a_given_ping_size_is_sent_over_ipv6_too() {
    // scamper's -s is the whole packet's size for either family: `-s 84` (IPv4's default)
    // to an IPv6 target sends 84 bytes, not IPv6's default of 104
    let v6 = ip("2001:db8::1");
    for (line, want) in [
        ("ping.probe-size=84 ", 84),
        ("", 104),
        ("ping.probe-size=104 ", 104),
    ] {
        let spec = decode(&alloc::format!(
            "vtnt-job=1 kind=ping {line}targets=2001:db8::1"
        ))
        .unwrap();
        let Some(vtnt_engine::Measurement::Ping(p)) = spec.kind.measurement(v6) else {
            panic!()
        };
        assert_eq!(p.probe_size, want, "{line}");
        let back = decode(&encode(&spec)).unwrap();
        assert_eq!(back, spec, "{line}");
    }
}

#[test]
fn a_contact_string_rides_the_payloads_the_methods_allow_and_travels_in_the_line() {
    let contact = b"vtnt measurement; ops@example.org";
    // a trace's probes grow to hold it, as with scamper's -p
    let mut k = JobKind::Trace(TraceOptions::new(unspecified()));
    assert_eq!(k.carry_contact(contact), 1);
    let JobKind::Trace(t) = &k else { panic!() };
    assert_eq!(t.payload, contact.to_vec());
    assert_eq!(usize::from(t.probe_size), 28 + contact.len());
    // a ping keeps its size; TNT's trace and ping both take it
    let mut k = JobKind::Tnt(TntConfig::default());
    assert_eq!(k.carry_contact(contact), 2);
    let JobKind::Tnt(c) = &k else { panic!() };
    assert_eq!(c.ping.data, Some(ProbeData::Payload(contact.to_vec())));
    let spec = JobSpec::new(k, vec![ip("192.0.2.1")]);
    round_trip(&spec);
    // TCP carries none; a job's own payload stays; too big for the probe, or too long
    let mut tcp = TraceOptions::new(unspecified());
    tcp.method = Method::TcpAck;
    assert_eq!(JobKind::Trace(tcp).carry_contact(contact), 0);
    let mut own = PingOptions::new(unspecified());
    own.data = Some(ProbeData::Pattern(vec![0xab]));
    let mut k = JobKind::Ping(own.clone());
    assert_eq!(k.carry_contact(contact), 0);
    assert_eq!(k, JobKind::Ping(own));
    let mut small = PingOptions::new(unspecified());
    small.probe_size = 40;
    assert_eq!(JobKind::Ping(small).carry_contact(contact), 0);
    let long = [b'x'; MAX_CONTACT + 1];
    assert_eq!(
        JobKind::Trace(TraceOptions::new(unspecified())).carry_contact(&long),
        0
    );
}
