//! Jobs and the run loop.
//!
//! The job after `--` is the canonical job spec of `vtnt-jobspec` (the CLI writes it from
//! `vtnt`'s own options), or `boot` / nothing (boot, print timings, exit 0). A micro job
//! runs seed 001's micro-benchmarks without the network ([`micro`]). Trace and
//! ping jobs run `vtnt_engine::Engine`, TNT jobs `vtnt_tnt::TntRunner`: exactly the code
//! the native CLI runs, driven through `vtnt_engine::Prober` by the generic [`run_loop`]
//! over the platform's [`Nic`], with the platform's clock shifted by the host's
//! `epoch_us=`.
//!
//! Waiting: when the prober has nothing to send and the NIC no packet, the loop waits
//! (`platform::wait_until`: `hlt` on the local APIC timer in a VM, the monitor's poll,
//! a process's `ppoll`) until the prober's next deadline, or at most [`POLL`] while probes
//! may still be answered and the platform's wait does not end when a frame arrives (see
//! [`run_loop`]). The NIC raises no interrupt: received packets are found, and
//! timestamped, by the next poll.
//! So a reply's receive time is late by up to `POLL` (200 us, plus the host's timer
//! slack) while probes are in flight, and by up to the prober's next deadline for a reply
//! that arrives later than its probe's wait (the engine treats those as late anyway).
//! A probe is dated when the NIC takes its frame, not when the prober handed it out.
//! After the results, the job's `hold` is spent waiting (waking for another round every
//! `every=`, each with its own watchdog, on the same engine rewound so that it probes
//! as the first round did), then the kernel exits.
//!
//! Results leave as scamper JSON lines (`cycle-start`, one `trace` / `ping` per record,
//! `cycle-stop`) printed by `vtnt-formats`' own line writer, the one the CLI uses, TNT's
//! annotations through the same `Annotate` hook. Everything else on the console is a
//! diagnostic: `{"type":"boot"|"dhcp"|"ip6"|"nic"|"arp"|"first-probe"|"timing"|"exit",...}` lines
//! and `vtnt: ...` messages.

use crate::cmdline::{Cmdline, Ip};
use crate::net::{self, autoconf, dhcp, Ipv4Config, Ipv6Config, Mac, Nic, SendError};
use crate::platform;
use crate::platform::console::println_str;
use crate::platform::finish;
use crate::{fail, println};
use alloc::string::String;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use vtnt_abi::exit::Status;
use vtnt_engine::{Engine, Event, Prober};
use vtnt_formats::{Annotate, Cycle, NoAnnotations, Record};
use vtnt_jobspec::{JobKind, JobSpec, Targets};
use vtnt_record::Duration;
use vtnt_record::Instant;
use vtnt_tnt::{Tnt, TntRunner};

mod micro;

/// How long ARP (or neighbour discovery) may take for the first next hop before we give up.
pub const ARP_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest halt while replies may be on their way: the bound on how late a received
/// packet is seen (and timestamped).
pub const POLL: Duration = Duration::from_micros(200);

/// The engine's clock: guest microseconds since the first instruction plus the host's
/// UNIX time at boot, so records carry wall-clock timestamps as on Linux.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch_us: u64,
}

impl Clock {
    /// The engine time of guest time `t`.
    pub fn at(self, t: Instant) -> Instant {
        Instant::from_micros(self.epoch_us.saturating_add(t.as_micros()))
    }

    /// The guest time of engine time `t`.
    pub fn guest(self, t: Instant) -> Instant {
        Instant::from_micros(t.as_micros().saturating_sub(self.epoch_us))
    }

    /// Now, on the engine's clock.
    pub fn now(self) -> Instant {
        self.at(platform::now())
    }
}

/// What the run loop measured.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoopStats {
    /// Guest time of the first probe handed to the NIC.
    pub first_probe: Option<Instant>,
    pub probes: u64,
    /// Probes that could never be sent (handed back to the prober), and the first one's
    /// errno.
    pub send_errors: u64,
    pub first_send_error: Option<SendError>,
}

/// Drives `prober` over `nic` until it is idle or `deadline` (guest time) passes
/// (`Err(Watchdog)`). Call order per turn, as `vtnt_engine::Prober` documents: received
/// packets, due deadline, transmit until `None`, outputs. A packet the NIC cannot take
/// yet (transmit backpressure, ARP pending) is held and retried; the prober is not asked
/// for more until it is gone. Each probe's transmit time is the moment the NIC took it
/// (`handle_transmitted` right after the send), so a held probe is not dated by the turn
/// that handed it out.
///
/// Between turns with nothing to do the CPU halts until the prober's next deadline, or
/// for at most [`POLL`] while replies may come: more probes were sent than packets
/// received, and the last one less than `flight` (the job's reply wait) ago.
pub fn run_loop<P: Prober>(
    prober: &mut P,
    nic: &mut Nic,
    clock: Clock,
    deadline: Option<Instant>,
    flight: Duration,
    emit: impl FnMut(P::Output),
) -> Result<LoopStats, Status> {
    drive(&mut Driver { prober, emit }, nic, clock, deadline, flight)
}

/// What the run loop needs of a prober, object-safe (outputs go to the job's `emit`
/// inside [`Driven::drain`]), so that one copy of the loop serves every kind of job: a
/// loop generic over the prober was one copy per kind, ~1.7 KiB of image each.
trait Driven {
    fn packet(&mut self, now: Instant, packet: &[u8]);
    fn send_error(&mut self, now: Instant, packet: &[u8], errno: i32);
    fn transmitted(&mut self, at: Instant, packet: &[u8]);
    fn timeout(&mut self, now: Instant);
    fn transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    fn next_timeout(&self) -> Option<Instant>;
    /// Hands every finished measurement to the job's `emit`.
    fn drain(&mut self);
    fn idle(&self) -> bool;
}

/// A prober and where its outputs go.
struct Driver<'a, P, E> {
    prober: &'a mut P,
    emit: E,
}

impl<P: Prober, E: FnMut(P::Output)> Driven for Driver<'_, P, E> {
    fn packet(&mut self, now: Instant, packet: &[u8]) {
        self.prober.handle_packet(now, packet)
    }
    fn send_error(&mut self, now: Instant, packet: &[u8], errno: i32) {
        self.prober.handle_send_error(now, packet, errno)
    }
    fn transmitted(&mut self, at: Instant, packet: &[u8]) {
        self.prober.handle_transmitted(at, packet)
    }
    fn timeout(&mut self, now: Instant) {
        self.prober.handle_timeout(now)
    }
    fn transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.prober.poll_transmit(now, buf)
    }
    fn next_timeout(&self) -> Option<Instant> {
        self.prober.poll_timeout()
    }
    fn drain(&mut self) {
        while let Some(out) = self.prober.poll_output() {
            (self.emit)(out);
        }
    }
    fn idle(&self) -> bool {
        self.prober.is_idle()
    }
}

/// [`run_loop`]'s one copy.
fn drive(
    prober: &mut dyn Driven,
    nic: &mut Nic,
    clock: Clock,
    deadline: Option<Instant>,
    flight: Duration,
) -> Result<LoopStats, Status> {
    let mut buf = [0u8; net::MTU];
    let mut held: Option<usize> = None;
    let mut stats = LoopStats::default();
    // Replies still expected (sent minus received, a heuristic) and the last send.
    let mut awaiting = 0u64;
    let mut last_tx = Instant::ZERO;
    loop {
        let rx = nic.poll_recv(&mut |t, pkt| prober.packet(clock.at(t), pkt));
        awaiting = awaiting.saturating_sub(rx as u64);
        let guest_now = platform::now();
        if deadline.is_some_and(|d| guest_now >= d) {
            return Err(Status::Watchdog);
        }
        let now = clock.at(guest_now);
        if prober.next_timeout().is_some_and(|t| now >= t) {
            prober.timeout(now);
        }
        loop {
            let len = match held.take() {
                Some(len) => len,
                None => match prober.transmit(now, &mut buf) {
                    Some(len) => len.min(buf.len()),
                    None => break,
                },
            };
            match nic.send_ip(platform::now(), &buf[..len]) {
                Ok(()) => {
                    // The NIC has the frame: the probe's transmit time, also for a
                    // probe held back and handed out turns ago.
                    last_tx = platform::now();
                    prober.transmitted(clock.at(last_tx), &buf[..len]);
                    stats.probes += 1;
                    awaiting += 1;
                    if stats.first_probe.is_none() {
                        crate::platform::steps::mark(crate::platform::steps::Step::FirstProbe);
                        stats.first_probe = Some(last_tx);
                        println!(
                            "{{\"type\":\"first-probe\",\"guest_us\":{}}}",
                            last_tx.as_micros()
                        );
                    }
                }
                Err(e) => match e.errno() {
                    None => {
                        held = Some(len);
                        break;
                    }
                    Some(errno) => {
                        stats.send_errors += 1;
                        stats.first_send_error.get_or_insert(e);
                        prober.send_error(now, &buf[..len], errno);
                    }
                },
            }
        }
        prober.drain();
        if prober.idle() && held.is_none() {
            return Ok(stats);
        }
        let guest_now = platform::now();
        let mut wake = prober.next_timeout().map(|t| clock.guest(t));
        let in_flight = awaiting > 0 && guest_now < last_tx + flight;
        // A wait that ends when a frame arrives needs no polling for replies.
        if held.is_some() || (in_flight && !platform::wakes_on_frames()) {
            wake = Some(wake.map_or(guest_now + POLL, |w| w.min(guest_now + POLL)));
        } else {
            awaiting = 0;
        }
        if let Some(d) = deadline {
            wake = Some(wake.map_or(d, |w| w.min(d)));
        }
        // Nothing at all to wait for would be a prober bug; poll now and then anyway.
        platform::wait_until(wake.unwrap_or(guest_now + Duration::from_secs(1)));
    }
}

/// How long a reply to the job's probes may take: the window in which [`run_loop`] polls
/// every [`POLL`].
fn flight(kind: &JobKind) -> Duration {
    let ping = |p: &vtnt_engine::PingOptions| p.interval.max(p.timeout);
    match kind {
        JobKind::Trace(t) => t.wait,
        JobKind::Ping(p) => ping(p),
        JobKind::Tnt(c) => c.trace.wait.max(ping(&c.ping)),
        JobKind::Micro(_) => Duration::ZERO,
    }
}

/// Says when the kernel was ready and powers off: the job `boot` (and an empty one).
pub fn ready() -> ! {
    println!(
        "{{\"type\":\"ready\",\"ready_us\":{}}}",
        platform::now().as_micros()
    );
    finish::finish(Status::Ok)
}

/// Runs the job named on the command line and powers off.
pub fn run(cmdline: &Cmdline) -> ! {
    let deadline = watchdog(cmdline);
    let words: Vec<&str> = cmdline.job_words().collect();
    if words.is_empty() || words == ["boot"] {
        ready()
    }
    let line = words.join(" ");
    let spec = match vtnt_jobspec::decode(&line) {
        Ok(s) => s,
        Err(e) => fail!(Status::BadCmdline, "{e}"),
    };
    if let JobKind::Micro(o) = &spec.kind {
        micro::run(o)
    }
    let targets = targets(&spec);
    if let (Some(v6), None, false) = (
        targets.iter().find(|t| t.is_ipv6()),
        cmdline.ip6,
        cmdline.ip6_auto,
    ) {
        fail!(
            Status::BadCmdline,
            "IPv6 target {v6}: the guest has no IPv6 address (give ip6=ADDR/LEN and gw6=ADDR, or ip6=auto)"
        );
    }
    let mut nic = bring_up(cmdline, deadline);
    resolve_first_hop(&mut nic, targets[0], deadline);
    crate::platform::steps::mark(crate::platform::steps::Step::Arp);
    let ready = platform::now();
    let clock = Clock {
        epoch_us: cmdline.epoch_us,
    };
    // The prober, kept for the next round (rewound): `run` never returns, so it is never
    // dropped (no drop glue in the image).
    let mut prober = new_prober(&spec, &nic);
    let (stats, done) = round(
        &spec,
        &mut prober,
        &targets,
        &mut nic,
        clock,
        cmdline,
        deadline,
    );
    println!(
        "{{\"type\":\"timing\",\"ready_us\":{},\"first_probe_us\":{},\"probes\":{},\"records\":{},\"tx\":{},\"rx\":{},\"heap_used\":{},\"heap_peak\":{}}}",
        ready.as_micros(),
        stats.first_probe.map_or(0, |t| t.as_micros()),
        stats.probes,
        done,
        nic.stats.tx_packets,
        nic.stats.rx_packets,
        crate::platform::heap::usage().0,
        crate::platform::heap::peak()
    );
    if spec.hold > Duration::ZERO {
        let until = platform::now() + spec.hold;
        println!(
            "{{\"type\":\"hold\",\"hold_us\":{},\"until_us\":{}}}",
            spec.hold.as_micros() as u64,
            until.as_micros()
        );
        // every `every=` while holding: another round, with its own watchdog
        let first = ready;
        for at in spec.repeats(platform::now().saturating_since(first)) {
            platform::sleep_until(first + at);
            let watchdog =
                deadline.map(|_| platform::now() + Duration::from_secs(cmdline.watchdog_s));
            prober.rewind();
            round(
                &spec,
                &mut prober,
                &targets,
                &mut nic,
                clock,
                cmdline,
                watchdog,
            );
        }
        platform::sleep_until(until);
    }
    finish::finish(Status::Ok)
}

/// The watchdog's deadline (guest time), if there is one.
fn watchdog(cmdline: &Cmdline) -> Option<Instant> {
    (cmdline.watchdog_s > 0).then(|| Instant::ZERO + Duration::from_secs(cmdline.watchdog_s))
}

/// The stream endpoint's image (feature `stream`): the NIC brought up as for a job, then
/// `net::stream` serves iperf3 tests until its count or the watchdog.
#[cfg(feature = "stream")]
pub fn run_stream(cmdline: &Cmdline) -> ! {
    let deadline = watchdog(cmdline);
    let nic = bring_up(cmdline, deadline);
    crate::net::stream::run(cmdline, nic, deadline)
}

/// One round of the job on `prober`: a cycle of records printed as they finish; fails
/// the job (and powers off) when the watchdog fires or no probe could be sent.
fn round(
    spec: &JobSpec,
    prober: &mut JobProber,
    targets: &[IpAddr],
    nic: &mut Nic,
    clock: Clock,
    cmdline: &Cmdline,
    deadline: Option<Instant>,
) -> (LoopStats, usize) {
    let mut cycle = Cycle {
        list_name: "default".into(),
        hostname: cmdline.hostname.map(String::from),
        start_time: clock.now().secs() as u32,
        // the image's own build (build.rs), which may not be the host's
        vtnt: Some(env!("VTNT_VERSION").into()),
        ..Cycle::default()
    };
    println_str(&vtnt_formats::cycle_start_line(&cycle));
    let flight = flight(&spec.kind);
    let (result, done) = match prober {
        JobProber::Probe(engine) => {
            let now = clock.now();
            let mut started = 0;
            for &dst in targets {
                let Some(job) = spec.kind.measurement(dst) else {
                    unreachable!()
                };
                // a refused target is skipped, as the CLI skips it
                match engine.start(now, job) {
                    Ok(_) => started += 1,
                    Err(e) => println!("vtnt: skipping {dst}: {e}"),
                }
            }
            if started == 0 {
                fail!(
                    Status::JobFailed,
                    "no target to probe: every one was refused"
                );
            }
            let mut done = 0usize;
            let r = run_loop(engine, nic, clock, deadline, flight, |ev| {
                let Event::Finished { record, .. } = ev;
                done += 1;
                print_record(&record, &NoAnnotations);
            });
            (r, done)
        }
        JobProber::Tnt(runner) => {
            for &dst in targets {
                runner.add_target(dst);
            }
            let mut done = 0usize;
            let r = run_loop(runner, nic, clock, deadline, flight, |res| {
                done += 1;
                match res.trace {
                    // the initial trace, then the pings and revelation traces, as the CLI
                    Some(_) => vtnt_formats::tnt_records(&res, print_record),
                    None => println!(
                        "vtnt: warning: tnt: {}: {}",
                        res.target,
                        res.error
                            .as_ref()
                            .map_or(String::from("no trace"), |e| alloc::format!("{e}"))
                    ),
                }
            });
            (r, done)
        }
    };
    let stats = match result {
        Ok(s) => s,
        Err(s) => fail!(
            s,
            "watchdog: job not finished after {} s",
            cmdline.watchdog_s
        ),
    };
    cycle.stop_time = clock.now().secs() as u32;
    println_str(&vtnt_formats::cycle_stop_line(&cycle));
    if let Some(e) = stats.first_send_error {
        println!(
            "vtnt: {} probes could not be sent: {}",
            stats.send_errors,
            match e {
                SendError::NoRoute => "no route (off-link, no gw= or gw6=)",
                _ => "invalid packet",
            }
        );
        if stats.probes == 0 {
            fail!(Status::JobFailed, "no probe could be sent");
        }
    }
    (stats, done)
}

/// What runs the rounds: the engine itself (traces, pings) or TNT's runner over it.
/// One per VM, made once and never moved: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum JobProber {
    Probe(Engine),
    Tnt(TntRunner),
}

impl JobProber {
    /// Ready for another round, probing as the first did: the engine rewound
    /// ([`Engine::rewind`]; TNT keeps the fingerprints it has).
    fn rewind(&mut self) {
        match self {
            JobProber::Probe(e) => e.rewind(),
            JobProber::Tnt(r) => r.rewind(),
        };
    }
}

/// The prober of `spec`'s job, probing from the NIC's addresses; the network and
/// broadcast addresses of its IPv4 LAN are refused as the host refuses its links'.
fn new_prober(spec: &JobSpec, nic: &Nic) -> JobProber {
    let src6 = nic.config6().map(|c| c.addr);
    let nic = nic.config();
    let mut config = match spec.engine.config(nic.addr) {
        Ok(c) => c,
        Err(e) => fail!(Status::BadCmdline, "{e}"),
    };
    config.policy.links.extend(vtnt_engine::policy::Prefix::new(
        Ipv4Addr::from(u32::from(nic.addr) & nic.mask()),
        nic.prefix,
    ));
    let mut engine = match Engine::new(config) {
        Ok(e) => e,
        Err(e) => fail!(Status::BadCmdline, "engine: {e}"),
    };
    // One interface, no loopback: every destination but loopback leaves from its address.
    let src = nic.addr;
    engine.set_source_lookup(alloc::boxed::Box::new(
        move |dst: vtnt_engine::ProbeAddr| match dst {
            _ if dst.is_loopback() => Err(vtnt_engine::NoSource(
                "the unikernel has no loopback interface",
            )),
            IpAddr::V4(_) => Ok(src.into()),
            IpAddr::V6(_) => src6.map(IpAddr::V6).ok_or(vtnt_engine::NoSource(
                "the guest has no IPv6 address (ip6=)",
            )),
        },
    ));
    match &spec.kind {
        JobKind::Trace(_) | JobKind::Ping(_) | JobKind::Micro(_) => JobProber::Probe(engine),
        JobKind::Tnt(config) => match Tnt::new(config.clone()) {
            Ok(t) => JobProber::Tnt(TntRunner::new(engine, t)),
            Err(e) => fail!(Status::BadCmdline, "tnt: {e}"),
        },
    }
}

/// Prints one record as the scamper JSON line the CLI prints.
fn print_record(record: &Record, ann: &dyn Annotate) {
    println_str(&vtnt_formats::record_line(record, ann, 0));
}

/// The spec's targets, from the spec or from boot module 0 (`targets=@module`).
fn targets(spec: &JobSpec) -> Vec<IpAddr> {
    let list = match &spec.targets {
        Targets::List(v) => v.clone(),
        Targets::Module => {
            let Some(m) = platform::module(0) else {
                fail!(
                    Status::BadCmdline,
                    "job spec says targets=@module but no boot module was given"
                );
            };
            let Ok(text) = core::str::from_utf8(m) else {
                fail!(Status::BadCmdline, "target module is not UTF-8");
            };
            match vtnt_jobspec::parse_target_list(text).and_then(|v| {
                spec.check_targets(&v)?;
                Ok(v)
            }) {
                Ok(v) => v,
                Err(e) => fail!(Status::BadCmdline, "{e}"),
            }
        }
    };
    if list.is_empty() {
        fail!(Status::BadCmdline, "the job has no target");
    }
    list
}

/// Finds the NIC and brings it up with the command line's address, or one leased by
/// DHCP (`ip=dhcp`, given up after [`dhcp::TIMEOUT`] or at the watchdog `deadline`).
fn bring_up(cmdline: &Cmdline, deadline: Option<Instant>) -> Nic {
    let Some(ip) = cmdline.ip else {
        fail!(
            Status::BadCmdline,
            "the job needs the network: give ip=ADDR/LEN (and gw=ADDR) or ip=dhcp"
        );
    };
    let (addr, prefix) = match ip {
        Ip::Static(addr, prefix) => (addr, prefix),
        Ip::Dhcp => (Ipv4Addr::UNSPECIFIED, 32),
    };
    let cfg = Ipv4Config {
        addr,
        prefix,
        gateway: cmdline.gw,
    };
    let mut nic = Nic::new(platform::open_net(cmdline.mac, cmdline.mmio()), cfg);
    if ip == Ip::Dhcp {
        let timeout = platform::now() + dhcp::TIMEOUT;
        let give_up = deadline.map_or(timeout, |d| d.min(timeout));
        let Some(lease) = dhcp::acquire(&mut nic, give_up) else {
            if give_up < timeout {
                fail!(Status::Watchdog, "watchdog: still waiting for a DHCP lease");
            }
            fail!(
                Status::NoDhcp,
                "no DHCP lease within {} s: no server answered",
                dhcp::TIMEOUT.as_secs()
            );
        };
        let c = lease.config;
        println!(
            "{{\"type\":\"dhcp\",\"ip\":\"{}/{}\",\"gw\":\"{}\",\"server\":\"{}\",\"at_us\":{}}}",
            c.addr,
            c.prefix,
            c.gateway.unwrap_or(Ipv4Addr::UNSPECIFIED),
            lease.server,
            platform::now().as_micros()
        );
        nic.set_config(Ipv4Config {
            gateway: cmdline.gw.or(c.gateway),
            ..c
        });
    }
    let c = *nic.config();
    if let (Some(gw), Some(mac)) = (c.gateway, cmdline.gwmac) {
        nic.add_neighbour(gw.into(), mac);
    }
    if let Some((addr, prefix)) = cmdline.ip6 {
        nic.set_config6(Ipv6Config {
            addr,
            prefix,
            gateway: cmdline.gw6,
            link_local: None,
        });
        if let (Some(gw6), Some(gw), Some(mac)) = (cmdline.gw6, c.gateway, cmdline.gwmac) {
            if gw6 == vtnt_policy::lab_twin(gw) {
                nic.add_neighbour(gw6.into(), mac);
            }
        }
    }
    if cmdline.ip6.is_none() && cmdline.ip6_auto {
        autoconfigure(&mut nic, deadline);
    }
    println!(
        "{{\"type\":\"nic\",\"device\":\"{}\",\"mac\":\"{}\",\"ip\":\"{}/{}\",\"gw\":\"{}\",\"up_us\":{}}}",
        nic.location(),
        Mac(nic.mac()),
        c.addr,
        c.prefix,
        c.gateway.unwrap_or(Ipv4Addr::UNSPECIFIED),
        platform::now().as_micros()
    );
    nic
}

/// Configures IPv6 from the link (`ip6=auto`, given up after [`autoconf::TIMEOUT`] or at
/// the watchdog `deadline`) and says how on the console.
fn autoconfigure(nic: &mut Nic, deadline: Option<Instant>) {
    let timeout = platform::now() + autoconf::TIMEOUT;
    let give_up = deadline.map_or(timeout, |d| d.min(timeout));
    match autoconf::acquire(nic, give_up) {
        Ok(c) => println!(
            "{{\"type\":\"ip6\",\"ip\":\"{}/{}\",\"gw\":\"{}\",\"how\":\"{}\",\"at_us\":{}}}",
            c.config.addr,
            c.config.prefix,
            c.config.gateway.unwrap_or(Ipv6Addr::UNSPECIFIED),
            c.how.name(),
            platform::now().as_micros()
        ),
        Err(_) if give_up < timeout => {
            fail!(
                Status::Watchdog,
                "watchdog: still configuring IPv6 (ip6=auto)"
            )
        }
        Err(m) => fail!(
            Status::NoDhcp,
            "ip6=auto: {} within {} s",
            m.name(),
            autoconf::TIMEOUT.as_secs()
        ),
    }
}

/// Resolves the next hop towards `target` by ARP or neighbour discovery, or fails with
/// `NoArp`.
fn resolve_first_hop(nic: &mut Nic, target: IpAddr, deadline: Option<Instant>) {
    let Some(hop) = nic.next_hop(target) else {
        fail!(
            Status::BadCmdline,
            "{target} is off-link and no gateway (gw= or gw6=) was given"
        );
    };
    let give_up = platform::now() + ARP_TIMEOUT;
    loop {
        let now = platform::now();
        if nic.resolve(now, hop) {
            break;
        }
        if now >= give_up {
            let answer = if hop.is_ipv6() {
                "neighbour advertisement"
            } else {
                "ARP reply"
            };
            fail!(
                Status::NoArp,
                "no {answer} from {hop} within {} s",
                ARP_TIMEOUT.as_secs()
            );
        }
        if deadline.is_some_and(|d| now >= d) {
            fail!(Status::Watchdog, "watchdog: still resolving {hop}");
        }
        nic.poll_recv(&mut |_, _| {});
        platform::wait_until((now + POLL).min(give_up));
    }
    if let Some(mac) = nic.arp_lookup(hop).map(Mac) {
        println!(
            "{{\"type\":\"arp\",\"ip\":\"{hop}\",\"mac\":\"{mac}\",\"at_us\":{}}}",
            platform::now().as_micros()
        );
    }
}
