//! Probes the driver could not send (`Engine::handle_send_error`): a trace stops with
//! ERROR and the errno as stop data (scamper's `trace_handleerror`), a ping ends, and
//! neither counts the unsent probe.

use std::net::{IpAddr, Ipv4Addr};

use vtnt_engine::{
    Config, Engine, Event, Instant, Measurement, Method, PingOptions, Record, StopReason,
    TraceOptions,
};

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 7);
const T0: Instant = Instant::from_millis(5_000_000);
const ENETUNREACH: i32 = 101;

/// Starts `job`, fails its first probe with ENETUNREACH and returns the record.
fn first_probe_refused(job: Measurement) -> (Record, Engine) {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    e.start(T0, job).unwrap();
    let mut buf = [0u8; 1500];
    let tx = e.poll_transmit(T0, &mut buf).unwrap();
    e.handle_send_error(T0, &buf[..tx.len], ENETUNREACH);
    assert!(
        e.poll_transmit(T0, &mut buf).is_none(),
        "nothing more to send"
    );
    let Some(Event::Finished { record, .. }) = e.poll_event() else {
        panic!("the measurement did not end");
    };
    assert!(e.is_idle());
    assert_eq!(e.stats().send_errors, 1);
    (record, e)
}

#[test]
fn an_unsent_trace_probe_stops_the_trace_with_error_and_errno() {
    for m in [Method::IcmpParis, Method::UdpParis, Method::Tcp] {
        let opts = TraceOptions::new(IpAddr::V4(DST)).with_method(m);
        let (Record::Trace(t), _) = first_probe_refused(Measurement::Trace(opts)) else {
            panic!("not a trace")
        };
        assert_eq!(t.stop_reason, StopReason::Error, "{m:?}");
        assert_eq!(t.stop_data, ENETUNREACH as u8, "{m:?}");
        assert_eq!(t.probe_count, 0, "{m:?}: the probe never left");
        assert!(t.hops.is_empty());
    }
}

#[test]
fn an_unsent_ping_probe_ends_the_ping_uncounted() {
    let (Record::Ping(p), _) =
        first_probe_refused(Measurement::Ping(PingOptions::new(IpAddr::V4(DST))))
    else {
        panic!("not a ping")
    };
    assert_eq!(p.ping_sent, 0);
    assert!(p.responses.is_empty());
}

#[test]
fn a_packet_that_is_no_probe_of_ours_changes_nothing() {
    let mut e = Engine::new(Config::new(SRC)).unwrap();
    e.start(T0, Measurement::Ping(PingOptions::new(IpAddr::V4(DST))))
        .unwrap();
    let mut buf = [0u8; 1500];
    let tx = e.poll_transmit(T0, &mut buf).unwrap();
    e.handle_send_error(T0, &[0x45, 0, 0], ENETUNREACH);
    // Another destination: no measurement of ours.
    let mut other = buf[..tx.len].to_vec();
    other[19] ^= 1;
    e.handle_send_error(T0, &other, ENETUNREACH);
    assert_eq!(e.active(), 1);
    assert!(e.poll_event().is_none());
}
