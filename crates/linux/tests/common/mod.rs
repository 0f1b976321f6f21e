//! The engine run with the Linux driver from a namespace of the test's own, recording
//! each probe's bytes, when it was handed out and when the kernel said it left
//! (`tx_stamps.rs`, `host_stamps.rs`).

use std::collections::HashMap;
use std::os::fd::AsFd;

use vtnt_engine::{
    Config, Engine, Event, Instant, Measurement, PingOptions, PingReply, Prober, Record,
    PROBE_ID_LEN,
};
use vtnt_linux::{Clock, LoopStats, RawSockets};
use vtnt_netns::{Chain, NetNs};

/// One probe the kernel stamped.
pub struct Stamped {
    /// When the engine handed it out.
    pub handed: Instant,
    /// When the kernel said it left.
    pub at: Instant,
    /// Its bytes.
    pub probe: Vec<u8>,
}

/// The engine, recording when each probe was handed out and when the kernel said it left.
struct Recorder {
    engine: Engine,
    handed: HashMap<[u8; PROBE_ID_LEN], (Instant, Vec<u8>)>,
    stamps: Vec<Stamped>,
}

/// The probe's first bytes as the driver keeps them (zero-padded when shorter).
fn id(probe: &[u8]) -> [u8; PROBE_ID_LEN] {
    let mut id = [0u8; PROBE_ID_LEN];
    let n = probe.len().min(PROBE_ID_LEN);
    id[..n].copy_from_slice(&probe[..n]);
    id
}

impl Prober for Recorder {
    type Output = Event;
    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        self.engine.handle_packet(now, packet)
    }
    fn handle_transmitted(&mut self, at: Instant, probe: &[u8]) {
        let (handed, bytes) = self.handed[&id(probe)].clone();
        self.stamps.push(Stamped {
            handed,
            at,
            probe: bytes,
        });
        self.engine.handle_transmitted(at, probe)
    }
    fn handle_send_error(&mut self, now: Instant, probe: &[u8], errno: i32) {
        self.engine.handle_send_error(now, probe, errno)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let len = self.engine.poll_transmit(now, buf)?.len;
        self.handed
            .insert(id(&buf[..len]), (now, buf[..len].to_vec()));
        Some(len)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }
    fn poll_output(&mut self) -> Option<Event> {
        self.engine.poll_event()
    }
    fn is_idle(&self) -> bool {
        self.engine.is_idle()
    }
}

/// What one run gave.
pub struct Run {
    pub stats: LoopStats,
    /// Transmit stamps the engine took.
    pub tx_stamps: u64,
    /// Every stamped probe, in the order the stamps came.
    pub stamps: Vec<Stamped>,
    /// Every ping reply.
    pub replies: Vec<PingReply>,
}

/// Runs `jobs` from `ns` with the Linux driver, transmit stamps on or off.
pub fn run_in(ns: &NetNs, jobs: Vec<PingOptions>, tx_stamps: bool) -> Run {
    let name = ns.name().to_string();
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let mut config = Config::new(Chain::left(0).parse().unwrap());
        config.pps = 10_000;
        config.burst = 64;
        let mut engine = Engine::new(config).unwrap();
        // IPv6 jobs' source from the namespace's routes, as the command's
        engine.set_source_lookup(vtnt_linux::RouteSources::new().into_lookup());
        let mut p = Recorder {
            engine,
            handed: HashMap::new(),
            stamps: Vec::new(),
        };
        let clock = Clock::new();
        let mut sockets = RawSockets::open_with(tx_stamps).unwrap();
        assert_eq!(
            sockets.tx_stamps(),
            tx_stamps,
            "this kernel gives transmit stamps"
        );
        for j in jobs {
            p.engine.start(clock.now(), Measurement::Ping(j)).unwrap();
        }
        let mut replies = Vec::new();
        let stats = vtnt_linux::run(
            &mut p,
            &mut sockets,
            &clock,
            |Event::Finished { record, .. }| {
                if let Record::Ping(ping) = record {
                    replies.extend(ping.responses.iter().cloned());
                }
                Ok(())
            },
        )
        .unwrap();
        Run {
            stats,
            tx_stamps: p.engine.stats().tx_stamps,
            stamps: p.stamps,
            replies,
        }
    })
    .join()
    .unwrap()
}
