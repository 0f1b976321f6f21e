//! Drivers running engines against a [`Wire`] under a virtual clock: [`run`] (the plain
//! event loop), [`run_like_linux`] (the Linux driver's rounds and late receive times) and
//! [`run_shared`] (several engines on one host, every reply reaching each).

use std::time::Duration;

use vtnt_engine::{Engine, Event, Instant, MeasurementId, Record};

use super::wire::Wire;

/// Drivers check the engine's bookkeeping ([`Engine::check`]) every this many rounds: a
/// measurement lost by the scheduler stays lost, so it is caught a little later, while
/// checking every round would cost more than the simulation itself.
const CHECK_EVERY: u64 = 64;

/// One round's output at `now`: every probe the engine lets go onto the wire, every
/// finished record into `out`, and the bookkeeping checked every [`CHECK_EVERY`] rounds.
fn exchange(
    engine: &mut Engine,
    wire: &mut Wire,
    now: Instant,
    round: u64,
    buf: &mut [u8],
    out: &mut Vec<(MeasurementId, Instant, Record)>,
) {
    while let Some(tx) = engine.poll_transmit(now, buf) {
        // IPv4's total length, or IPv6's payload length after its 40-byte header
        let len = match buf[0] >> 4 {
            6 => 40 + u16::from_be_bytes([buf[4], buf[5]]),
            _ => u16::from_be_bytes([buf[2], buf[3]]),
        };
        assert_eq!(tx.len, len as usize);
        wire.send(now, &buf[..tx.len]);
    }
    while let Some(Event::Finished { id, record }) = engine.poll_event() {
        out.push((id, now, record));
    }
    if round.is_multiple_of(CHECK_EVERY) {
        engine.check().expect("engine bookkeeping");
    }
}

/// Runs the engine against the network from `start` until it is idle; returns the
/// finished records in completion order with their finishing time.
pub fn run(
    engine: &mut Engine,
    wire: &mut Wire,
    start: Instant,
) -> Vec<(MeasurementId, Instant, Record)> {
    let mut now = start;
    let mut out = Vec::new();
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    for round in 0..10_000_000u64 {
        exchange(engine, wire, now, round, &mut buf, &mut out);
        if engine.is_idle() {
            return out;
        }
        let next = [engine.poll_timeout(), wire.next_arrival()]
            .into_iter()
            .flatten()
            .min();
        let next = next.expect("engine busy but no deadline and nothing in flight");
        assert!(
            next > now,
            "deadline {next:?} not after now {now:?}: the driver would spin"
        );
        now = next;
        for (t, pkt) in wire.arrivals(now) {
            engine.handle_packet(t, &pkt);
        }
        engine.handle_timeout(now);
    }
    panic!("simulation did not finish");
}

/// Runs the engine as the Linux driver does (`vtnt_linux::run`): each round reads the clock,
/// handles timeouts, sends what the pacer allows, then sleeps until the engine's deadline
/// (at most 1 s; a sleep of 1 ms or more ends at the first arrival) and hands in every
/// packet that arrived, with its arrival time. The clock is read `latency` after the
/// packets were read, so a reply arriving in between is handed in after the engine has
/// seen a later `now`, as kernel receive timestamps are. Returns the records, or the
/// number of records when the engine is still busy at `give_up`.
pub fn run_like_linux(
    engine: &mut Engine,
    wire: &mut Wire,
    start: Instant,
    latency: Duration,
    give_up: Instant,
) -> Result<Vec<(MeasurementId, Instant, Record)>, usize> {
    let mut read_at = start;
    let mut out = Vec::new();
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    let mut round = 0u64;
    loop {
        round += 1;
        let now = read_at + latency;
        engine.handle_timeout(now);
        exchange(engine, wire, now, round, &mut buf, &mut out);
        if engine.is_idle() {
            return Ok(out);
        }
        if now > give_up {
            return Err(out.len());
        }
        let cap = now + Duration::from_secs(1);
        let mut wake = engine.poll_timeout().map_or(cap, |t| t.clamp(now, cap));
        if wake >= now + Duration::from_millis(1) {
            if let Some(a) = wire.next_arrival() {
                wake = wake.min(a.max(now));
            }
        }
        read_at = wake;
        for (t, pkt) in wire.arrivals(read_at) {
            engine.handle_packet(t, &pkt);
        }
    }
}

/// Runs several engines (each with its start time) on one network until all are idle,
/// as processes on one host: every reply reaches every engine, as raw sockets deliver
/// it. Returns each engine's records in completion order.
pub fn run_shared(engines: &mut [(&mut Engine, Instant)], wire: &mut Wire) -> Vec<Vec<Record>> {
    let mut now = engines.iter().map(|(_, t)| *t).min().expect("an engine");
    let mut out = vec![Vec::new(); engines.len()];
    let mut buf = vec![0u8; vtnt_engine::MAX_PROBE_SIZE as usize];
    for _ in 0..10_000_000u32 {
        for (e, _) in engines.iter_mut().filter(|(_, t)| *t <= now) {
            while let Some(tx) = e.poll_transmit(now, &mut buf) {
                wire.send(now, &buf[..tx.len]);
            }
        }
        for (i, (e, _)) in engines.iter_mut().enumerate() {
            while let Some(Event::Finished { record, .. }) = e.poll_event() {
                out[i].push(record);
            }
        }
        if engines.iter().all(|(e, _)| e.is_idle()) {
            return out;
        }
        let next = engines
            .iter()
            .map(|(e, t)| if *t > now { Some(*t) } else { e.poll_timeout() })
            .chain([wire.next_arrival()])
            .flatten()
            .min()
            .expect("engines busy but no deadline and nothing in flight");
        assert!(next > now, "deadline {next:?} not after now {now:?}");
        now = next;
        for (t, pkt) in wire.arrivals(now) {
            for (e, start) in engines.iter_mut().filter(|(_, s)| *s <= t) {
                e.handle_packet(t.max(*start), &pkt);
            }
        }
        for (e, _) in engines.iter_mut().filter(|(_, s)| *s <= now) {
            e.handle_timeout(now);
        }
    }
    panic!("simulation did not finish");
}
