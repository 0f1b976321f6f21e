//! Bad options are refused at `start`, naming the option; bad configs at `new`.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use vtnt_engine::{
    Config, ConfigError, Engine, Instant, Measurement, MeasurementError, Method, PingOptions,
    TraceOptions,
};

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));

/// An option name and how to break it.
type Case<T> = (&'static str, fn(&mut T));

fn refused(job: Measurement) -> &'static str {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    match e.start(Instant::ZERO, job) {
        Err(MeasurementError::OutOfRange { option, range }) => {
            assert!(!range.is_empty());
            assert_eq!(e.queued() + e.active(), 0, "a refused job is not queued");
            option
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }
}

#[test]
fn trace_options_out_of_range_are_named() {
    let base = TraceOptions::new(DST);
    let cases: Vec<Case<TraceOptions>> = vec![
        ("attempts", |o| o.attempts = 0),
        ("attempts", |o| o.attempts = 21),
        ("first_ttl", |o| o.first_ttl = 0),
        ("max_ttl", |o| {
            o.first_ttl = 10;
            o.max_ttl = 9
        }),
        ("dport", |o| {
            o.method = Method::IcmpParis;
            o.dport = Some(0xffff)
        }),
        ("wait", |o| o.wait = Duration::ZERO),
        ("wait", |o| o.wait = Duration::from_micros(999)),
        ("wait", |o| o.wait = Duration::from_secs(61)),
        ("wait_probe", |o| o.wait_probe = Duration::from_millis(2001)),
        ("sport", |o| o.sport = Some(0)),
        ("dport", |o| o.dport = Some(0)),
        ("probe_size", |o| {
            o.method = Method::IcmpParis;
            o.probe_size = 31
        }),
        ("probe_size", |o| {
            o.method = Method::UdpParis;
            o.probe_size = 29
        }),
        ("probe_size", |o| o.probe_size = 1501),
        ("probe_size", |o| {
            o.method = Method::Tcp;
            o.probe_size = 39
        }),
        ("method", |o| o.method = Method::UdpDport),
        ("payload", |o| {
            o.method = Method::TcpAck;
            o.payload = vec![1, 2]
        }),
    ];
    for (name, f) in cases {
        let mut o = base.clone();
        f(&mut o);
        assert_eq!(refused(Measurement::Trace(o)), name);
    }
}

#[test]
fn ping_options_out_of_range_are_named() {
    let base = PingOptions::new(DST);
    let cases: Vec<Case<PingOptions>> = vec![
        ("count", |o| o.count = 0),
        ("interval", |o| o.interval = Duration::ZERO),
        ("ttl", |o| o.ttl = 0),
        ("timeout", |o| o.timeout = Duration::from_secs(3600)),
        ("sport", |o| o.sport = Some(0)),
        ("probe_size", |o| o.probe_size = 31),
        ("probe_size", |o| {
            o.method = Method::UdpParis;
            o.probe_size = 29
        }),
        ("probe_size", |o| {
            o.method = Method::Tcp;
            o.probe_size = 28
        }),
        ("tcp_ack", |o| o.tcp_ack = Some(5)),
        ("tcp_ack", |o| {
            o.method = Method::Tcp;
            o.tcp_ack = Some(5)
        }),
        ("tcp_ack", |o| {
            o.method = Method::TcpAck;
            o.tcp_ack = Some(0)
        }),
    ];
    for (name, f) in cases {
        let mut o = base.clone();
        f(&mut o);
        assert_eq!(refused(Measurement::Ping(o)), name);
    }
}

#[test]
fn limits_themselves_are_accepted() {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    let mut o = TraceOptions::new(DST);
    o.attempts = 20;
    o.first_ttl = 255;
    o.max_ttl = 255;
    o.gaplimit = 255;
    o.wait = Duration::from_millis(1);
    o.wait_probe = Duration::from_secs(2);
    o.probe_size = 32;
    o.loops = 0;
    e.start(Instant::ZERO, Measurement::Trace(o)).unwrap();
    let mut p = PingOptions::new(DST);
    p.count = u16::MAX;
    p.probe_size = 32;
    p.interval = Duration::from_secs(60);
    e.start(Instant::ZERO, Measurement::Ping(p)).unwrap();
}

#[test]
fn ipv6_is_refused() {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    let v6: IpAddr = "2001:db8::1".parse().unwrap();
    // IPv6 has no record-route option: refused in every build
    let mut rr = PingOptions::new(v6);
    rr.record_route = true;
    assert_eq!(
        e.start(Instant::ZERO, Measurement::Ping(rr)),
        Err(MeasurementError::Ipv6Unsupported)
    );
    // pings and traces of every method to IPv6 destinations, and path MTU discovery, are
    // built where `ipv6-probe` is on (the Linux driver's build, hence the workspace's),
    // not in the unikernel's
    let mut pmtud = TraceOptions::new(v6).with_method(Method::Tcp);
    (pmtud.pmtud, pmtud.if_mtu) = (true, 1500);
    for m in [
        Measurement::Ping(PingOptions::new(v6)),
        Measurement::Trace(TraceOptions::new(v6)),
        Measurement::Trace(TraceOptions::new(v6).with_method(Method::Tcp)),
        Measurement::Trace(pmtud),
    ] {
        let started = e.start(Instant::ZERO, m);
        if cfg!(feature = "ipv6-probe") {
            assert_ne!(started, Err(MeasurementError::Ipv6Unsupported));
        } else {
            assert_eq!(started, Err(MeasurementError::Ipv6Unsupported));
        }
    }
}

#[test]
fn errors_read_well() {
    let e = MeasurementError::OutOfRange {
        option: "attempts",
        range: "1..=20",
    };
    assert_eq!(
        e.to_string(),
        "option `attempts` out of range (allowed: 1..=20)"
    );
}

#[test]
fn bad_configs_are_refused() {
    let bad = |f: fn(&mut Config)| {
        let mut c = Config::new(SRC);
        f(&mut c);
        match Engine::new(c) {
            Err(ConfigError::OutOfRange { option, .. }) => option,
            Ok(_) => panic!("accepted"),
        }
    };
    assert_eq!(bad(|c| c.pps = 0), "pps");
    assert_eq!(bad(|c| c.pps = vtnt_engine::policy::MAX_PPS_LAB + 1), "pps");
    assert_eq!(bad(|c| c.burst = 0), "burst");
    assert_eq!(bad(|c| c.max_active = 0), "max_active");
    assert_eq!(bad(|c| c.max_active = 40_000), "max_active");
    let c = Config::new(SRC);
    assert_eq!((c.pps, c.burst), (20, 1));
}

/// The policy is the engine's, not only the CLI's: library callers, the unikernel and TNT's
/// revelation traces cannot start a job it refuses, and nothing is sent for it.
#[test]
fn the_engine_enforces_the_probing_policy() {
    use vtnt_engine::{LabAccess, Refusal};
    let start = |c: Config, dst: &str| {
        let mut e = Engine::new(c).unwrap();
        let r = e.start(
            Instant::from_millis(1),
            Measurement::Trace(TraceOptions::new(dst.parse().unwrap())),
        );
        let mut buf = [0u8; 1500];
        let sent = e.poll_transmit(Instant::from_millis(1), &mut buf).is_some();
        (r.map(|_| ()), sent)
    };
    let refused = |c: Config, dst: &str| match start(c, dst) {
        (Err(MeasurementError::Refused(r)), false) => r,
        other => panic!("{dst}: {other:?}"),
    };
    assert!(matches!(
        refused(Config::new(SRC), "8.8.8.8"),
        Refusal::Public(_)
    ));
    let mut public = Config::new(SRC);
    public.policy.allow_public = true;
    assert_eq!(start(public.clone(), "8.8.8.8"), (Ok(()), true));
    public.pps = 5_000;
    assert!(matches!(
        refused(public, "8.8.8.8"),
        Refusal::PublicRate { .. }
    ));
    let mut excl = Config::new(SRC);
    excl.policy
        .exclude
        .insert("203.0.113.0/25".parse().unwrap());
    assert!(matches!(
        refused(excl, "203.0.113.9"),
        Refusal::Excluded { .. }
    ));
    let mut unrouted = Config::new(SRC);
    unrouted.policy.lab = LabAccess::Routed(Default::default());
    assert!(matches!(
        refused(unrouted, "198.51.100.1"),
        Refusal::LabNotRouted(_)
    ));
    assert!(matches!(
        refused(Config::new(SRC), "224.0.0.1"),
        Refusal::NotUnicast(..)
    ));
}

/// With a driver's source lookup, each measurement leaves from its own destination's
/// source (loopback from 127.0.0.1, the lab from its address), whatever came first; a
/// destination without one is refused and changes nothing for the others.
#[test]
// `.into()` is a no-op where `ProbeAddr` is `Ipv4Addr` (without `ipv6-probe`)
#[allow(clippy::useless_conversion)]
fn each_destination_gets_its_own_source() {
    use vtnt_engine::{Event, NoSource, Record};
    let mut config = Config::new(Ipv4Addr::UNSPECIFIED);
    config.burst = 10;
    let mut e = Engine::new(config).unwrap();
    // `ProbeAddr` is IPv4's type, or `IpAddr` where the workspace turns on `ipv6-probe`
    e.set_source_lookup(Box::new(|dst: vtnt_engine::ProbeAddr| {
        let IpAddr::V4(dst) = IpAddr::from(dst) else {
            return Err(NoSource("no IPv6 source in this test"));
        };
        if dst.is_loopback() {
            Ok(Ipv4Addr::LOCALHOST.into())
        } else if dst.octets()[3] == 255 {
            Err(NoSource("the kernel routes it as a broadcast address"))
        } else {
            Ok(SRC.into())
        }
    }));
    let now = Instant::from_millis(1);
    let trace = |d: &str| {
        let mut o = TraceOptions::new(d.parse().unwrap());
        o.attempts = 1;
        o.gaplimit = 1;
        Measurement::Trace(o)
    };
    e.start(now, trace("127.0.0.1")).unwrap();
    let err = e.start(now, trace("203.0.113.255")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no source address for 203.0.113.255: the kernel routes it as a broadcast address"
    );
    e.start(now, trace("203.0.113.7")).unwrap();
    let mut buf = [0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    let mut sources = Vec::new();
    while let Some(tx) = e.poll_transmit(now, &mut buf) {
        let src = Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]);
        sources.push((tx.dst.to_string(), src.to_string()));
    }
    assert_eq!(
        sources,
        [
            ("127.0.0.1".to_string(), "127.0.0.1".to_string()),
            ("203.0.113.7".to_string(), SRC.to_string())
        ]
    );
    while !e.is_idle() {
        let t = e.poll_timeout().unwrap();
        e.handle_timeout(t);
        while let Some(Event::Finished { record, .. }) = e.poll_event() {
            let Record::Trace(t) = record else { panic!() };
            let want = if t.dst.is_loopback() {
                "127.0.0.1"
            } else {
                "192.0.2.1"
            };
            assert_eq!(t.src.to_string(), want, "{}", t.dst);
        }
    }
}
