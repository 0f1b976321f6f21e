//! Large campaigns driven as the Linux driver drives them: many measurements to a few
//! destinations, lost replies, receive times that lag the engine's clock. Every one must
//! end.

mod support;

use std::net::IpAddr;
use std::time::Duration;

use support::drive::{run, run_like_linux};
use support::topo::{chain, more_hosts, SRC};
use support::wire::Wire;
use vtnt_engine::{Config, Engine, Instant, Measurement, Method, Record, TraceOptions};

const T0: Instant = Instant::from_millis(1_700_000_000_000);

/// `vtnt trace -P icmp-paris -q 1 -w 1 --pps 50000` over `n` targets cycling through
/// seven destinations, every `drop_every`-th reply lost; returns the number of records,
/// or `Err` with it when the engine was still busy an hour (virtual) later.
fn campaign(n: u32, drop_every: u64, latency_us: u64) -> Result<usize, usize> {
    let mut e = Engine::new(Config {
        pps: 50_000,
        burst: 50,
        seed: 1,
        max_active: 1000,
        ..Config::new(SRC)
    })
    .unwrap();
    let mut def = chain(4);
    let dsts = more_hosts(&mut def, 7);
    let mut wire = Wire::new(def);
    let mut k = 0u64;
    wire.shaper = Some(Box::new(move |_| {
        k += 1;
        (!k.is_multiple_of(drop_every)).then_some(Duration::ZERO)
    }));
    for i in 0..n {
        let dst = dsts[(i % 7) as usize];
        let mut o = TraceOptions::new(IpAddr::V4(dst)).with_method(Method::IcmpParis);
        o.attempts = 1;
        o.wait = Duration::from_secs(1);
        o.userid = i;
        e.start(T0, Measurement::Trace(o)).unwrap();
    }
    let out = run_like_linux(
        &mut e,
        &mut wire,
        T0,
        Duration::from_micros(latency_us),
        T0 + Duration::from_secs(3600),
    )?;
    for (_, _, r) in &out {
        assert!(matches!(r, Record::Trace(_)));
    }
    Ok(out.len())
}

/// The incident of issue 12 (finding 12) in small: a reply read late, dated before the
/// `now` at which a probe of another trace was queued behind the pacer, made the engine
/// drop that queued trace from the send queue without a timer. It never sent again, and
/// the engine never became idle.
#[test]
fn a_reply_read_late_does_not_strand_a_queued_probe() {
    let mut e = Engine::new(Config {
        pps: 10,
        ..Config::new(SRC)
    })
    .unwrap();
    let mut def = chain(1);
    let dsts = more_hosts(&mut def, 3);
    let mut wire = Wire::new(def);
    let trace = |k: usize| {
        let mut o = TraceOptions::new(IpAddr::V4(dsts[k])).with_method(Method::IcmpParis);
        o.attempts = 1;
        o.wait = Duration::from_secs(1);
        Measurement::Trace(o)
    };
    let mut buf = [0u8; 1500];
    e.start(T0, trace(0)).unwrap();
    let tx = e.poll_transmit(T0, &mut buf).unwrap();
    wire.send(T0, &buf[..tx.len]);
    // The first hop answers at T0 + 2 ms, but the driver reads it only later.
    let late = wire.arrivals(T0 + Duration::from_secs(1));
    assert_eq!(late.len(), 1);
    // Meanwhile, at t1, two traces start; the pacer lets one of them go.
    let t1 = T0 + Duration::from_millis(200);
    e.start(t1, trace(1)).unwrap();
    e.start(t1, trace(2)).unwrap();
    let tx = e.poll_transmit(t1, &mut buf).unwrap();
    wire.send(t1, &buf[..tx.len]);
    assert_eq!(
        e.poll_transmit(t1, &mut buf),
        None,
        "the third waits for the pacer"
    );
    // The late reply, dated T0 + 2 ms, arrives after the engine saw t1.
    let (rx, pkt) = &late[0];
    assert!(*rx < t1);
    e.handle_packet(*rx, pkt);
    e.check()
        .expect("every trace waits on a timer or in the send queue");
    let out = run(&mut e, &mut wire, t1);
    assert_eq!(out.len(), 3);
}

/// `vtnt trace -P icmp-paris -q 1 -w 1 --pps 50000` with the default window over many
/// targets, driven like the Linux driver with receive times `latency` behind the clock:
/// every trace ends, and the engine becomes idle.
#[test]
fn a_campaign_with_late_receive_times_ends() {
    for (latency_us, drop_every) in [(1, 13), (300, 5), (1000, 5), (1000, 13)] {
        assert_eq!(
            campaign(5_000, drop_every, latency_us),
            Ok(5_000),
            "receive times {latency_us} us late, one reply in {drop_every} lost"
        );
    }
}
