//! Two engines on one host (two `vtnt` processes) share every reply, as raw sockets
//! deliver each to every process: each must record only the replies to its own probes,
//! with their true RTTs, even when both picked the same ident or port for the same
//! destination. The instance tag the seed gives every probe tells them apart.

mod support;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use support::drive::run_shared;
use support::topo::{chain, DST, SRC};
use support::wire::Wire;
use vtnt_engine::{
    Config, Engine, Instant, Measurement, Method, PingOptions, Record, TraceOptions,
};
use vtnt_wire::reply::{self, Body};

const T0: Instant = Instant::from_millis(5_000_000);

fn engine(seed: u64) -> Engine {
    Engine::new(Config {
        seed,
        pps: 100,
        ..Config::new(SRC)
    })
    .unwrap()
}

/// The ident (ICMP) or source port and the IP ID of the first probe of `job` on a fresh
/// engine with `seed`.
fn first_probe(seed: u64, job: &Measurement) -> (u16, u16) {
    let mut e = engine(seed);
    e.start(T0, job.clone()).unwrap();
    let mut buf = [0u8; 1500];
    let tx = e.poll_transmit(T0, &mut buf).unwrap();
    let p = reply::parse(&buf[..tx.len]).unwrap();
    let id = match p.body {
        Body::Echo { ident, .. } => ident,
        Body::Udp { sport, .. } | Body::Tcp { sport, .. } => sport,
        other => panic!("not a probe: {other:?}"),
    };
    (id, p.ipid)
}

/// Two seeds whose engines give `job` the same ident or port but different tags: the
/// worst case for telling their replies apart.
fn colliding_seeds(job: &Measurement) -> (u64, u64) {
    let mut seen: BTreeMap<u16, (u64, u16)> = BTreeMap::new();
    for seed in 1..100_000 {
        let (id, ipid) = first_probe(seed, job);
        match seen.get(&id) {
            Some(&(other, other_ipid)) if other_ipid != ipid => return (other, seed),
            Some(_) => {}
            None => {
                seen.insert(id, (seed, ipid));
            }
        }
    }
    panic!("no two seeds share an ident");
}

/// Runs `job` on two engines (seeds `a`, `b`) over one network, the second starting
/// `later`, so that a reply taken by the wrong engine has a wrong RTT.
fn run_pair(job: &Measurement, (a, b): (u64, u64), later: Duration) -> [Record; 2] {
    let mut wire = Wire::new(chain(2));
    let (mut ea, mut eb) = (engine(a), engine(b));
    ea.start(T0, job.clone()).unwrap();
    eb.start(T0 + later, job.clone()).unwrap();
    let mut out = run_shared(&mut [(&mut ea, T0), (&mut eb, T0 + later)], &mut wire);
    let rb = out.pop().unwrap().pop().expect("second engine's record");
    let ra = out.pop().unwrap().pop().expect("first engine's record");
    for e in [&ea, &eb] {
        // Each engine saw the other's replies and matched none of them.
        assert!(e.stats().unmatched > 0);
    }
    [ra, rb]
}

fn methods() -> [Method; 3] {
    [Method::IcmpParis, Method::UdpParis, Method::Tcp]
}

#[test]
fn concurrent_pings_with_one_ident_each_see_only_their_replies() {
    for m in methods() {
        let mut o = PingOptions::new(IpAddr::V4(DST)).with_method(m);
        o.count = 3;
        let job = Measurement::Ping(o);
        let seeds = colliding_seeds(&job);
        assert_eq!(first_probe(seeds.0, &job).0, first_probe(seeds.1, &job).0);
        for r in run_pair(&job, seeds, Duration::from_millis(300)) {
            let Record::Ping(p) = r else { panic!() };
            assert_eq!(p.ping_sent, 3, "{m:?}");
            let got: Vec<(u16, Duration)> = p.responses.iter().map(|r| (r.seq, r.rtt)).collect();
            let rtt = Duration::from_millis(6);
            assert_eq!(got, vec![(0, rtt), (1, rtt), (2, rtt)], "{m:?}");
        }
    }
}

#[test]
fn concurrent_traces_with_one_flow_each_see_only_their_replies() {
    for m in methods() {
        let mut o = TraceOptions::new(IpAddr::V4(DST)).with_method(m);
        o.attempts = 1;
        let job = Measurement::Trace(o);
        let seeds = colliding_seeds(&job);
        for r in run_pair(&job, seeds, Duration::from_millis(1)) {
            let Record::Trace(t) = r else { panic!() };
            assert_eq!(t.stop_reason.name(), "COMPLETED", "{m:?}");
            let got: Vec<(u8, Duration)> = t.hops.iter().map(|h| (h.probe_ttl, h.rtt)).collect();
            let ms = Duration::from_millis;
            assert_eq!(got, vec![(1, ms(2)), (2, ms(4)), (3, ms(6))], "{m:?}");
        }
    }
}

/// A rewound engine (a held job's next round) probes exactly as it did the first time:
/// the same flow (ports, ICMP checksum) and the same hops.
#[test]
fn a_rewound_engine_probes_as_it_did() {
    let flow = |r: Record| match r {
        Record::Trace(t) => (
            t.sport,
            t.dport,
            t.icmp_sum,
            t.hops.iter().map(|h| h.addr).collect::<Vec<_>>(),
        ),
        other => panic!("not a trace: {other:?}"),
    };
    for m in methods() {
        let job = Measurement::Trace(TraceOptions::new(IpAddr::V4(DST)).with_method(m));
        let mut e = engine(7);
        let mut rounds = Vec::new();
        for at in [T0, T0 + Duration::from_secs(60)] {
            assert!(e.rewind(), "an idle engine rewinds");
            e.start(at, job.clone()).unwrap();
            assert!(!e.rewind(), "a busy engine does not");
            let mut out = run_shared(&mut [(&mut e, at)], &mut Wire::new(chain(2)));
            rounds.push(flow(out.pop().unwrap().pop().expect("a record")));
        }
        assert_eq!(rounds[0], rounds[1], "{m:?}");
        assert!(!rounds[0].3.is_empty(), "{m:?}: no hops");
    }
}
