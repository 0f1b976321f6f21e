//! Many measurements under one budget: 10,000 concurrent traces paced on the virtual
//! clock, round-robin fairness, and the FIFO queue behind `max_active`.

mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use support::drive::run;
use support::topo::{chain, more_hosts, SRC};
use support::wire::Wire;
use vtnt_engine::{
    Config, Engine, Instant, Measurement, Method, PingOptions, Record, StopReason, TraceOptions,
};
use vtnt_lab::TopologyDef;

const T0: Instant = Instant::from_millis(1_700_000_000_000);

/// `chain(routers)` with `n` more hosts on its last router: the lab and the hosts'
/// addresses.
fn lab(mut def: TopologyDef, n: u32) -> (Wire, Vec<Ipv4Addr>) {
    let targets = more_hosts(&mut def, n);
    (Wire::new(def), targets)
}

#[test]
fn ten_thousand_traces_at_a_fixed_rate() {
    const N: u32 = 10_000;
    const PPS: u32 = 2_000;
    let mut e = Engine::new(Config {
        pps: PPS,
        burst: 1,
        seed: 42,
        max_active: N as usize,
        ..Config::new(SRC)
    })
    .unwrap();
    let mut def = chain(3);
    def.routers[1].silent = true; // one timeout per trace, to mix deadlines into the pacing
    let (mut wire, target) = lab(def, N);
    for i in 0..N {
        let mut o = TraceOptions::new(IpAddr::V4(target[i as usize]));
        o.method = [Method::IcmpParis, Method::UdpParis, Method::Tcp][i as usize % 3];
        o.probe_size = if o.method == Method::Tcp { 40 } else { 44 };
        o.wait = Duration::from_secs(1);
        o.userid = i;
        e.start(T0, Measurement::Trace(o)).unwrap();
    }
    assert_eq!((e.active(), e.queued()), (N as usize, 0));
    let out = run(&mut e, &mut wire, T0);
    assert_eq!(out.len(), N as usize);
    for (_, _, r) in &out {
        let Record::Trace(t) = r else { panic!() };
        assert_eq!(t.stop_reason, StopReason::Completed, "trace {}", t.userid);
        assert_eq!(t.dst, IpAddr::V4(target[t.userid as usize]));
        let ttls: Vec<u8> = t.hops.iter().map(|h| h.probe_ttl).collect();
        assert_eq!(ttls, vec![1, 3, 4], "trace {}", t.userid);
        assert_eq!(t.probe_count, 5);
    }
    let stats = e.stats();
    assert_eq!(stats.probes_sent, 5 * N as u64);
    assert_eq!(stats.replies, 3 * N as u64);
    assert_eq!(stats.unmatched, 0);

    // Pacing, on the virtual clock: probe k leaves at t0 + k/pps.
    let times: Vec<u64> = wire.sent.iter().map(|(t, _)| t.as_micros()).collect();
    let t0 = times[0];
    let mut max_dev = 0u64;
    for (k, &t) in times.iter().enumerate() {
        let ideal = t0 + (k as u64 * 1_000_000).div_ceil(PPS as u64);
        max_dev = max_dev.max(t.abs_diff(ideal));
    }
    let span = (times[times.len() - 1] - t0) as f64 / 1e6;
    let rate = (times.len() - 1) as f64 / span;
    let err = (rate - PPS as f64).abs() / PPS as f64;
    println!("{} probes in {span:.3} s virtual: {rate:.2} pps (error {:.4}%), max deviation from schedule {max_dev} us", times.len(), err * 100.0);
    assert!(err <= 0.01, "rate error {err}");
    assert!(
        max_dev <= 1_000_000 / PPS as u64,
        "max deviation {max_dev} us"
    );
}

#[test]
fn probes_are_shared_round_robin() {
    // Three long traces with nobody answering (the hosts and the only router are
    // silent): each gets every third probe.
    let mut e = Engine::new(Config {
        pps: 100,
        ..Config::new(SRC)
    })
    .unwrap();
    let mut def = chain(1);
    def.routers[0].silent = true;
    let target = more_hosts(&mut def, 3);
    for h in &mut def.hosts {
        h.silent = true;
    }
    let mut wire = Wire::new(def);
    for &t in &target {
        let mut o = TraceOptions::new(IpAddr::V4(t));
        o.wait = Duration::from_millis(1);
        o.attempts = 4;
        o.gaplimit = 3;
        e.start(T0, Measurement::Trace(o)).unwrap();
    }
    run(&mut e, &mut wire, T0);
    let dsts: Vec<Ipv4Addr> = wire
        .sent
        .iter()
        .map(|(_, p)| Ipv4Addr::new(p[16], p[17], p[18], p[19]))
        .collect();
    assert_eq!(dsts.len(), 36);
    for (k, d) in dsts.iter().enumerate() {
        assert_eq!(*d, target[k % 3], "probe {k}");
    }
}

#[test]
fn jobs_beyond_max_active_wait_in_fifo_order() {
    let mut e = Engine::new(Config {
        pps: 1000,
        max_active: 2,
        ..Config::new(SRC)
    })
    .unwrap();
    let (mut wire, target) = lab(chain(1), 5);
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut o = PingOptions::new(IpAddr::V4(target[i as usize]));
        o.count = 2;
        o.interval = Duration::from_millis(100);
        o.timeout = Duration::from_millis(50 + 10 * (5 - i as u64));
        ids.push(e.start(T0, Measurement::Ping(o)).unwrap());
    }
    assert_eq!((e.active(), e.queued()), (2, 3));
    let out = run(&mut e, &mut wire, T0);
    let starts: BTreeMap<u64, Instant> = out
        .iter()
        .map(|(id, _, r)| {
            let Record::Ping(p) = r else { panic!() };
            assert_eq!(p.responses.len(), 2);
            (id.0, p.start)
        })
        .collect();
    let order: Vec<Instant> = ids.iter().map(|id| starts[&id.0]).collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    assert_eq!(order[0], T0);
    assert_eq!(order[1], T0);
    assert!(order[2] > T0);
    // never more than two at once: every start is after some earlier finish
    let finishes: Vec<Instant> = out.iter().map(|(_, at, _)| *at).collect();
    for (k, s) in order.iter().enumerate().skip(2) {
        assert!(
            finishes.iter().filter(|f| *f <= s).count() >= k - 1,
            "job {k} started early"
        );
    }
}

#[test]
fn explicit_ports_to_one_destination_never_collide() {
    let mut e = Engine::new(Config {
        pps: 1000,
        ..Config::new(SRC)
    })
    .unwrap();
    let (mut wire, target) = lab(chain(2), 3);
    for _ in 0..3 {
        let mut o = TraceOptions::new(IpAddr::V4(target[1]));
        o.sport = Some(40000);
        e.start(T0, Measurement::Trace(o)).unwrap();
    }
    // Same port, other destination: runs at once.
    let mut o = TraceOptions::new(IpAddr::V4(target[2]));
    o.sport = Some(40000);
    e.start(T0, Measurement::Trace(o)).unwrap();
    assert_eq!((e.active(), e.queued()), (2, 2));
    let out = run(&mut e, &mut wire, T0);
    assert_eq!(out.len(), 4);
    for (_, _, r) in out {
        let Record::Trace(t) = r else { panic!() };
        assert_eq!(
            (t.stop_reason, t.sport, t.hops.len()),
            (StopReason::Completed, 40000, 3)
        );
    }
}

#[test]
fn poll_timeout_reports_the_pacer_when_probes_wait_for_budget() {
    let mut e = Engine::new(Config {
        pps: 10,
        ..Config::new(SRC)
    })
    .unwrap();
    // No network: nothing is answered before the deadlines looked at.
    let target = [Ipv4Addr::new(100, 64, 0, 1), Ipv4Addr::new(100, 64, 0, 2)];
    for t in target {
        e.start(T0, Measurement::Trace(TraceOptions::new(IpAddr::V4(t))))
            .unwrap();
    }
    let mut buf = [0u8; 1500];
    assert!(e.poll_transmit(T0, &mut buf).is_some());
    assert_eq!(e.poll_transmit(T0, &mut buf), None, "budget spent");
    assert_eq!(e.poll_timeout(), Some(T0 + Duration::from_millis(100)));
    let later = T0 + Duration::from_millis(100);
    let tx = e.poll_transmit(later, &mut buf).unwrap();
    assert_eq!(tx.dst, IpAddr::V4(target[1]));
    // Nothing due now: the next deadline is the first probe's 5 s wait.
    assert_eq!(e.poll_timeout(), Some(T0 + Duration::from_secs(5)));
}
