//! The single-threaded loop that runs a [`Prober`] on [`RawSockets`]: each wake-up hands
//! the prober the transmit stamps and the replies that came in, the time, then sends what
//! it asks to send.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;

use crate::{Clock, Error, Prober, RawSockets};

/// Probes sent with one system call at most.
const BATCH: usize = 64;

/// A wait shorter than this (microseconds) sleeps through arriving replies instead of
/// waking for each one: they carry kernel receive timestamps, so reading them at the end
/// of the wait changes no RTT, and the prober could not send before then anyway. At
/// 10,000 pps this halves the prober's CPU; longer waits still wake on the first reply,
/// so a lone trace moves on as soon as its hop answers.
const COALESCE_US: u64 = 1_000;

/// Counters of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopStats {
    pub sent: u64,
    pub received: u64,
    /// Times the kernel had no room for a probe and the loop waited.
    pub send_stalls: u64,
    /// Transmit timestamps handed to the prober ([`RawSockets::recv_tx_stamps`]).
    pub tx_stamps: u64,
    /// [`run_until`] was told to stop before the prober was idle.
    pub interrupted: bool,
    /// Probes the kernel refused to send (no route, ...), handed back to the prober.
    pub send_errors: u64,
    /// The errno of the first of them.
    pub first_send_error: Option<i32>,
}

/// Runs `prober` until it is idle, passing each finished measurement to `output`.
pub fn run<P: Prober>(
    prober: &mut P,
    sockets: &mut RawSockets,
    clock: &Clock,
    output: impl FnMut(P::Output) -> std::io::Result<()>,
) -> Result<LoopStats, Error> {
    run_until(prober, sockets, clock, &AtomicBool::new(false), output)
}

/// [`run`], but stops early once `stop` is set (by a signal handler, say): the
/// measurements already finished reach `output`, unfinished ones are dropped, and the
/// stats say `interrupted`. The flag is read before each send and after each wait; a
/// signal interrupts the wait (`ppoll` returns `EINTR`), and no wait is longer than 1 s.
pub fn run_until<P: Prober>(
    prober: &mut P,
    sockets: &mut RawSockets,
    clock: &Clock,
    stop: &AtomicBool,
    output: impl FnMut(P::Output) -> std::io::Result<()>,
) -> Result<LoopStats, Error> {
    run_watched(prober, sockets, clock, stop, output, |_| {})
}

/// [`run_until`], showing `watch` the counters so far after every wake-up (at least
/// once a second: no wait is longer), for a progress display.
pub fn run_watched<P: Prober>(
    prober: &mut P,
    sockets: &mut RawSockets,
    clock: &Clock,
    stop: &AtomicBool,
    mut output: impl FnMut(P::Output) -> std::io::Result<()>,
    mut watch: impl FnMut(&LoopStats),
) -> Result<LoopStats, Error> {
    let mut stats = LoopStats::default();
    // Probes are gathered into a batch and leave with one sendmmsg; what the kernel had no
    // room for stays at the front of the batch for the next round.
    let mut batch: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; 2048]).collect();
    let mut lens: Vec<usize> = Vec::with_capacity(BATCH);
    let mut rx = vec![0u8; 65536];
    loop {
        if stop.load(Ordering::Relaxed) {
            deliver(prober, &mut output)?;
            stats.interrupted = true;
            return Ok(stats);
        }
        let now = clock.now();
        prober.handle_timeout(now);
        let mut stalled = false;
        loop {
            while lens.len() < BATCH {
                match prober.poll_transmit(now, &mut batch[lens.len()]) {
                    Some(len) => lens.push(len),
                    None => break,
                }
            }
            if lens.is_empty() {
                break;
            }
            let pkts: Vec<&[u8]> = lens.iter().zip(&batch).map(|(l, b)| &b[..*l]).collect();
            let mut refused = 0;
            let sent = sockets.send_batch(&pkts, |pkt, errno| {
                refused += 1;
                stats.first_send_error.get_or_insert(errno as i32);
                prober.handle_send_error(now, pkt, errno as i32);
            })?;
            stats.send_errors += refused;
            stats.sent += sent as u64 - refused;
            let full = lens.len() == BATCH;
            lens.drain(..sent);
            batch.rotate_left(sent);
            if !lens.is_empty() {
                stats.send_stalls += 1;
                stalled = true;
                break;
            }
            if !full {
                break;
            }
        }
        deliver(prober, &mut output)?;
        if prober.is_idle() && lens.is_empty() {
            return Ok(stats);
        }
        let now = clock.now();
        let wait_us = if stalled {
            50
        } else {
            prober
                .poll_timeout()
                .map(|t| t.as_micros().saturating_sub(now.as_micros()))
                .unwrap_or(1_000_000)
                .min(1_000_000)
        };
        let mut fds: Vec<PollFd> = sockets
            .receivers()
            .into_iter()
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        if wait_us > 0 {
            let ts = TimeSpec::from_duration(std::time::Duration::from_micros(wait_us));
            let watched = if wait_us < COALESCE_US {
                &mut fds[..0]
            } else {
                &mut fds[..]
            };
            match nix::poll::ppoll(watched, Some(ts), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(source) => {
                    return Err(Error::Socket {
                        what: "ppoll",
                        source,
                    })
                }
            }
        }
        // Transmit stamps first, so a reply finds its probe's real transmit time.
        stats.tx_stamps += sockets.recv_tx_stamps(clock, |at, probe| {
            prober.handle_transmitted(at, probe);
        })? as u64;
        stats.received +=
            sockets.recv_all(clock, &mut rx, |ts, pkt| prober.handle_packet(ts, pkt))? as u64;
        watch(&stats);
    }
}

/// Passes every finished measurement to `output`.
fn deliver<P: Prober>(
    prober: &mut P,
    output: &mut impl FnMut(P::Output) -> std::io::Result<()>,
) -> Result<(), Error> {
    while let Some(out) = prober.poll_output() {
        output(out)?;
    }
    Ok(())
}
