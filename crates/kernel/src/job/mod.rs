//! Jobs and the run loop.
//!
//! A job is anything with the sans-IO prober shape ([`Prober`]): it is handed the time and
//! received packets, and hands back packets to send, its next deadline and events. The
//! generic [`run_loop`] drives one over a [`Nic`]; plugging in `vtnt-engine` is an
//! `impl Prober for Engine` plus a line in [`run`].
//!
//! Jobs (the words after `--`):
//! - *(none)* or `boot`: boot, print timings, exit 0 (no network needed);
//! - `ping [-c COUNT] [-i INTERVAL_MS] [-W WAIT_MS] [-t TTL] [-s SIZE] TARGET`: the
//!   built-in ICMP echo job.

pub mod ping;

use crate::bootinfo::BootInfo;
use crate::cmdline::Cmdline;
use crate::exit::{self, Status};
use crate::net::{self, Ipv4Config, Mac, Nic, SendError};
use crate::time::{self, Instant};
use crate::{fail, println};
use core::fmt;
use core::net::Ipv4Addr;
use vtnt_record::Duration;

/// How long ARP may take for the first next hop before we give up.
pub const ARP_TIMEOUT: Duration = Duration::from_secs(3);

/// The sans-IO prober interface (quinn-proto's shape, as `vtnt-engine` has it).
pub trait Prober {
    /// What the prober reports (printed as one JSON line each).
    type Event: fmt::Display;
    /// A received IPv4 packet addressed to us.
    fn handle_packet(&mut self, now: Instant, packet: &[u8]);
    /// The next IPv4 packet to send, written to `buf`; its length.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    /// When [`Prober::handle_timeout`] should next be called.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Called at or after the instant [`Prober::poll_timeout`] gave.
    fn handle_timeout(&mut self, now: Instant);
    /// The next event.
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// Whether the job has finished (all events polled).
    fn is_done(&self) -> bool;
}

/// Drives `prober` over `nic` until it is done or `deadline` passes (`Err(Watchdog)`).
/// Packets the NIC cannot take yet (transmit backpressure, ARP pending) are held and
/// retried; the prober is not asked for more until they are gone.
pub fn run_loop<P: Prober>(
    prober: &mut P,
    nic: &mut Nic,
    deadline: Option<Instant>,
    mut emit: impl FnMut(P::Event),
) -> Result<(), Status> {
    let mut buf = [0u8; net::MTU];
    let mut held: Option<usize> = None;
    loop {
        let now = time::now();
        if deadline.is_some_and(|d| now >= d) {
            return Err(Status::Watchdog);
        }
        nic.poll_recv(&mut |t, pkt| prober.handle_packet(t, pkt));
        loop {
            let len = match held.take() {
                Some(len) => len,
                None => match prober.poll_transmit(now, &mut buf) {
                    Some(len) => len.min(buf.len()),
                    None => break,
                },
            };
            match nic.send_ipv4(now, &buf[..len]) {
                Ok(()) => {}
                Err(SendError::Busy) | Err(SendError::Unresolved(_)) => {
                    held = Some(len);
                    break;
                }
                Err(SendError::Invalid) => {
                    println!("vtnt: warning: prober made an unsendable packet")
                }
            }
        }
        if prober.poll_timeout().is_some_and(|t| time::now() >= t) {
            prober.handle_timeout(time::now());
        }
        while let Some(ev) = prober.poll_event() {
            emit(ev);
        }
        if prober.is_done() && held.is_none() {
            return Ok(());
        }
        core::hint::spin_loop();
    }
}

/// Runs the job named on the command line and powers off.
pub fn run(cmdline: &Cmdline, _info: &impl BootInfo) -> ! {
    let deadline =
        (cmdline.watchdog_s > 0).then(|| Instant::ZERO + Duration::from_secs(cmdline.watchdog_s));
    let words = cmdline.job();
    match words.first().copied() {
        None | Some("boot") => {
            println!(
                "{{\"type\":\"ready\",\"ready_us\":{}}}",
                time::now().as_micros()
            );
            exit::finish(Status::Ok)
        }
        Some("ping") => {
            let args = match ping::Args::parse(&words[1..]) {
                Ok(a) => a,
                Err(e) => fail!(Status::BadCmdline, "ping: {e}"),
            };
            let mut nic = bring_up(cmdline, deadline);
            let src = nic.config().addr;
            resolve_first_hop(&mut nic, args.target, deadline);
            let ready = time::now();
            let mut job = ping::Ping::new(args, src, ready);
            let result = run_loop(&mut job, &mut nic, deadline, |ev| println!("{ev}"));
            let first = nic.stats.first_tx.map_or(0, |t| t.as_micros());
            println!(
                "{{\"type\":\"timing\",\"ready_us\":{},\"first_probe_us\":{},\"tx\":{},\"rx\":{},\"heap_used\":{}}}",
                ready.as_micros(),
                first,
                nic.stats.tx_packets,
                nic.stats.rx_packets,
                crate::heap::usage().0
            );
            match result {
                Err(s) => fail!(
                    s,
                    "watchdog: job not finished after {} s",
                    cmdline.watchdog_s
                ),
                Ok(()) if job.received() > 0 => exit::finish(Status::Ok),
                Ok(()) => fail!(Status::JobFailed, "ping: no reply from {}", job.target()),
            }
        }
        Some(j @ ("trace" | "tnt" | "tracelb")) => {
            fail!(
                Status::BadCmdline,
                "job `{j}` needs vtnt-engine, which this kernel does not include yet"
            )
        }
        Some(j) => fail!(
            Status::BadCmdline,
            "unknown job `{j}` (supported: boot, ping)"
        ),
    }
}

/// Finds the NIC and brings it up with the command line's address.
fn bring_up(cmdline: &Cmdline, _deadline: Option<Instant>) -> Nic {
    let Some((addr, prefix)) = cmdline.ip else {
        fail!(
            Status::BadCmdline,
            "the job needs the network: give ip=ADDR/LEN (and gw=ADDR)"
        );
    };
    let cfg = Ipv4Config {
        addr,
        prefix,
        gateway: cmdline.gw,
    };
    let (transport, location) = match net::find_net(cmdline) {
        Ok(t) => t,
        Err(e) => fail!(Status::NoNic, "{e}"),
    };
    let nic = match Nic::new(transport, cfg) {
        Ok(n) => n,
        Err(e) => fail!(Status::NoNic, "{location}: {e}"),
    };
    println!(
        "{{\"type\":\"nic\",\"device\":\"{}\",\"mac\":\"{}\",\"ip\":\"{}/{}\",\"gw\":\"{}\",\"up_us\":{}}}",
        location,
        Mac(nic.mac()),
        addr,
        prefix,
        cmdline.gw.unwrap_or(Ipv4Addr::UNSPECIFIED),
        time::now().as_micros()
    );
    nic
}

/// Resolves the next hop towards `target` by ARP, or fails with `NoArp`.
fn resolve_first_hop(nic: &mut Nic, target: Ipv4Addr, deadline: Option<Instant>) {
    let Some(hop) = nic.config().next_hop(target) else {
        fail!(
            Status::BadCmdline,
            "{target} is off-link and no gw= was given"
        );
    };
    let give_up = time::now() + ARP_TIMEOUT;
    loop {
        let now = time::now();
        if nic.resolve(now, hop) {
            break;
        }
        if now >= give_up {
            fail!(
                Status::NoArp,
                "no ARP reply from {hop} within {} s",
                ARP_TIMEOUT.as_secs()
            );
        }
        if deadline.is_some_and(|d| now >= d) {
            fail!(Status::Watchdog, "watchdog: still resolving {hop}");
        }
        nic.poll_recv(&mut |_, _| {});
        core::hint::spin_loop();
    }
    let mac = nic.arp_lookup(hop).map(Mac);
    if let Some(mac) = mac {
        println!(
            "{{\"type\":\"arp\",\"ip\":\"{hop}\",\"mac\":\"{mac}\",\"at_us\":{}}}",
            time::now().as_micros()
        );
    }
}
