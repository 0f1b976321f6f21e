//! Transmit timestamps (`Engine::handle_transmitted`): a probe's transmit time is when it
//! left, reported by the driver before or after the reply, or the hand-over time when the
//! driver reports nothing; reports that cannot be the probe's change nothing.

mod support;

use std::net::IpAddr;
use std::time::Duration;

use support::drive::run;
use support::topo::{chain, DST, SRC};
use support::wire::Wire;
use vtnt_engine::{
    Config, Engine, Event, Instant, Measurement, PingOptions, Prober, Record, TraceOptions,
    PROBE_ID_LEN,
};

const T0: Instant = Instant::from_millis(5_000_000);
/// How long the driver held the probe back (a full send queue).
const STALL: Duration = Duration::from_millis(50);
/// A ping's round trip to the host at the end of `chain(2)`.
const PING_RTT: Duration = Duration::from_millis(6);
/// A TTL-1 probe's round trip to the first router.
const HOP1_RTT: Duration = Duration::from_millis(2);

/// A ping of one probe, and a trace of two hops: the first probe and its reply are the
/// ones looked at.
fn jobs() -> [(Measurement, Duration); 2] {
    let mut ping = PingOptions::new(IpAddr::V4(DST));
    ping.count = 1;
    let mut trace = TraceOptions::new(IpAddr::V4(DST));
    trace.max_ttl = 2;
    [
        (Measurement::Ping(ping), PING_RTT),
        (Measurement::Trace(trace), HOP1_RTT),
    ]
}

/// The probe's `(tx, rtt)` in the record.
fn tx_rtt(r: &Record) -> (Instant, Duration) {
    match r {
        Record::Ping(p) => (p.responses[0].tx, p.responses[0].rtt),
        Record::Trace(t) => (t.hops[0].tx, t.hops[0].rtt),
    }
}

/// Hands one probe out at [`T0`], sends it `STALL` later, and runs `report` (given the
/// engine, the probe and when it left) `before` or after the reply is handed in, then
/// runs the measurement to its end. Returns the record and the engine.
fn one_probe(
    job: Measurement,
    before: bool,
    report: impl FnOnce(&mut Engine, &[u8], Instant),
) -> (Record, Engine) {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    let mut wire = Wire::new(chain(2));
    e.start(T0, job).unwrap();
    let mut buf = [0u8; 1500];
    let tx = e.poll_transmit(T0, &mut buf).unwrap();
    let probe = buf[..tx.len].to_vec();
    let left = T0 + STALL;
    wire.send(left, &probe);
    let mut report = Some(report);
    if before {
        (report.take().unwrap())(&mut e, &probe, left);
    }
    let at = wire.next_arrival().unwrap();
    for (t, pkt) in wire.arrivals(at) {
        e.handle_packet(t, &pkt);
    }
    if let Some(r) = report {
        r(&mut e, &probe, left);
    }
    let mut out = run(&mut e, &mut wire, at);
    assert_eq!(out.len(), 1);
    (out.pop().unwrap().2, e)
}

#[test]
fn a_stalled_probe_is_dated_when_it_left() {
    for (job, rtt) in jobs() {
        let (r, e) = one_probe(job, true, |e, p, left| e.handle_transmitted(left, p));
        assert_eq!(tx_rtt(&r), (T0 + STALL, rtt), "{r:?}");
        assert_eq!(e.stats().tx_stamps, 1);
    }
}

#[test]
fn without_a_report_the_hand_over_time_stays() {
    for (job, rtt) in jobs() {
        let (r, e) = one_probe(job, true, |_, _, _| {});
        assert_eq!(tx_rtt(&r), (T0, STALL + rtt), "{r:?}");
        assert_eq!(e.stats().tx_stamps, 0);
    }
}

#[test]
fn a_report_after_the_reply_redates_the_recorded_reply() {
    for (job, rtt) in jobs() {
        let (r, e) = one_probe(job, false, |e, p, left| {
            // Only the bytes that name the probe, as a driver keeps them.
            e.handle_transmitted(left, &p[..p.len().min(PROBE_ID_LEN)])
        });
        assert_eq!(tx_rtt(&r), (T0 + STALL, rtt), "{r:?}");
        assert_eq!(e.stats().tx_stamps, 1);
    }
}

#[test]
fn reports_that_cannot_be_the_probes_change_nothing() {
    for (job, rtt) in jobs() {
        // Before the hand-over; after the reply arrived; not a probe of ours; unparsable.
        let (r, e) = one_probe(job, false, |e, p, left| {
            e.handle_transmitted(T0 - Duration::from_micros(1), p);
            e.handle_transmitted(left + rtt + Duration::from_micros(1), p);
            let mut other = p.to_vec();
            other[19] ^= 1;
            e.handle_transmitted(left, &other);
            e.handle_transmitted(left, &p[..10]);
        });
        assert_eq!(tx_rtt(&r), (T0, STALL + rtt), "{r:?}");
        assert_eq!(e.stats().tx_stamps, 0);
    }
}

#[test]
fn the_latest_fitting_report_wins_and_an_older_one_is_stale() {
    for (job, rtt) in jobs() {
        let (r, e) = one_probe(job, true, |e, p, left| {
            e.handle_transmitted(T0 + Duration::from_millis(10), p);
            e.handle_transmitted(left, p);
            e.handle_transmitted(T0 + Duration::from_millis(20), p);
        });
        assert_eq!(tx_rtt(&r), (T0 + STALL, rtt), "{r:?}");
        assert_eq!(e.stats().tx_stamps, 2);
    }
}

/// A report that comes long after the probe left, when the engine's clock is far ahead
/// and the probe already timed out: it is taken, changes no deadline, and the late reply
/// is timed from it.
#[test]
fn a_late_report_dates_the_probe_and_moves_no_deadline() {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    let mut wire = Wire::new(chain(2));
    let mut opts = TraceOptions::new(IpAddr::V4(DST));
    opts.max_ttl = 1;
    opts.attempts = 2;
    opts.wait = Duration::from_secs(1);
    e.start(T0, Measurement::Trace(opts)).unwrap();
    let mut buf = [0u8; 1500];
    let tx = e.poll_transmit(T0, &mut buf).unwrap();
    let first = buf[..tx.len].to_vec();
    let left = T0 + Duration::from_millis(300);
    // The reply is slow: 1.5 s, past the first attempt's wait.
    wire.send(left, &first);
    let arrival = left + Duration::from_millis(1500);
    // The first attempt times out (from its hand-over time) and the second leaves.
    let t1 = T0 + Duration::from_secs(1);
    assert_eq!(e.poll_timeout(), Some(t1));
    let tx = e.poll_transmit(t1, &mut buf).unwrap();
    let second = buf[..tx.len].to_vec();
    let deadline = e.poll_timeout();
    assert_eq!(deadline, Some(t1 + Duration::from_secs(1)));
    e.handle_transmitted(left, &first);
    e.handle_transmitted(t1, &second);
    assert_eq!(e.poll_timeout(), deadline, "a stamp moves no deadline");
    assert_eq!(e.stats().tx_stamps, 2);
    for (_, pkt) in wire.arrivals(wire.next_arrival().unwrap()) {
        e.handle_packet(arrival, &pkt);
    }
    let Some(Event::Finished {
        record: Record::Trace(t),
        ..
    }) = e.poll_event()
    else {
        panic!("not finished")
    };
    let h = &t.hops[0];
    assert_eq!(
        (h.probe_id, h.tx, h.rtt),
        (1, left, arrival.saturating_since(left))
    );
}

#[test]
fn a_report_after_the_measurement_ended_is_ignored() {
    for (job, rtt) in jobs() {
        let mut kept = Vec::new();
        let (r, mut e) = one_probe(job, true, |_, p, _| kept = p.to_vec());
        let before = e.stats();
        e.handle_transmitted(T0 + STALL, &kept);
        assert_eq!(e.stats(), before);
        assert_eq!(tx_rtt(&r), (T0, STALL + rtt));
        assert!(e.is_idle());
    }
}

/// The driver-facing trait carries the report through.
#[test]
fn the_prober_trait_reports_transmit_times() {
    fn report<P: Prober>(p: &mut P, at: Instant, probe: &[u8]) {
        p.handle_transmitted(at, probe);
    }
    let (r, _) = one_probe(jobs()[0].0.clone(), true, |e, p, left| report(e, left, p));
    assert_eq!(tx_rtt(&r), (T0 + STALL, PING_RTT));
}
