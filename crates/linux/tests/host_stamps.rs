//! Host-side stamps paired exactly, on real namespaces of the test's own: a chain
//! `runtime — host — target` stands for a container (the vantage namespace) behind its
//! veth, the host's end of that veth (`west` of the middle namespace, where the capture
//! runs) and a target. vTNT's engine pings the target from the runtime with ICMP echo,
//! Paris UDP and classic UDP probes (not TCP: its pings reuse one identity, ports and
//! sequence number, so `vtnt-mace` rightly calls all but the first reply ambiguous); every probe the host saw leave must be paired with its own reply (by
//! identity, checked against the bytes), none misattributed, and the correction's network
//! share must be exactly the difference of the capture's two stamps. The only timing
//! checks are sanity: the host's round trip lies inside the runtime's. Needs root.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use vtnt_engine::{
    Config, Engine, Event, Instant, Measurement, Method, PingOptions, Prober, Record, PROBE_ID_LEN,
};
use vtnt_linux::host_stamps::HostStamps;
use vtnt_linux::{Clock, RawSockets};
use vtnt_mace::{correct, key, Correction, Dir, Fate, ToolProbe};
use vtnt_netns::{Chain, NetNs};

/// The engine, remembering the key of every probe the kernel said left, by its stamp and
/// IP id (what a ping record's reply names its probe by).
struct Recorder {
    engine: Engine,
    /// The key of each probe handed out, by its first bytes (what a transmit stamp names).
    handed: HashMap<[u8; PROBE_ID_LEN], vtnt_mace::Key>,
    sent: Vec<(Instant, u16, vtnt_mace::Key)>,
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
        let ipid = u16::from_be_bytes([probe[4], probe[5]]);
        let k = self.handed[&id(probe)];
        self.sent.push((at, ipid, k));
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
        let k = key::probe(&buf[..len])
            .expect("the engine sends probes")
            .key;
        self.handed.insert(id(&buf[..len]), k);
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

/// The runtime's records of `jobs` run from `ns`: each probe's key and the RTT it
/// measured, in the order the probes left.
fn runtime_records(ns: &NetNs, jobs: Vec<PingOptions>) -> Vec<ToolProbe> {
    let name = ns.name().to_string();
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let mut p = Recorder {
            engine: Engine::new(Config::new(Chain::left(0).parse().unwrap())).unwrap(),
            handed: HashMap::new(),
            sent: Vec::new(),
        };
        let clock = Clock::new();
        let mut sockets = RawSockets::open_with(true).unwrap();
        for j in jobs {
            p.engine.start(clock.now(), Measurement::Ping(j)).unwrap();
        }
        let mut rtts = HashMap::new();
        vtnt_linux::run(
            &mut p,
            &mut sockets,
            &clock,
            |Event::Finished { record, .. }| {
                if let Record::Ping(ping) = record {
                    for r in &ping.responses {
                        rtts.insert((r.tx, r.probe_ipid), r.rtt);
                    }
                }
                Ok(())
            },
        )
        .unwrap();
        p.sent
            .iter()
            .map(|&(at, ipid, key)| ToolProbe {
                key,
                rtt_ns: rtts.get(&(at, ipid)).map(|d| d.as_nanos() as u64),
            })
            .collect()
    })
    .join()
    .unwrap()
}

fn ping(dst: IpAddr, method: Method, count: u16) -> PingOptions {
    let mut o = PingOptions::new(dst);
    o.method = method;
    o.count = count;
    o.interval = Duration::from_millis(10);
    o.timeout = Duration::from_millis(500);
    o
}

#[test]
fn every_probe_and_reply_on_the_host_side_is_paired_and_the_correction_is_their_difference() {
    vtnt_testkit::require_root!();
    let chain = Chain::build("vhs", 1).unwrap();
    let host_ns = PathBuf::from("/run/netns").join(chain.nodes[1].name());
    let mut capture = HostStamps::open_in(&host_ns, "west").unwrap();
    let target: IpAddr = chain.target().parse().unwrap();
    let per_method = 10;
    let records = runtime_records(
        chain.vantage(),
        vec![
            ping(target, Method::IcmpParis, per_method),
            ping(target, Method::UdpParis, per_method),
            ping(target, Method::UdpDport, per_method),
        ],
    );
    let n = 3 * per_method as usize;
    assert_eq!(records.len(), n, "every probe left the runtime");
    assert!(
        records.iter().all(|r| r.rtt_ns.is_some()),
        "the runtime saw every reply: {records:?}"
    );
    capture.collect(Duration::from_millis(50)).unwrap();
    assert_eq!(capture.drops(), 0, "the capture lost nothing");
    let frames = capture.frames();
    let pairing = capture.pair();

    // Exactly the runtime's probes left, each answered once, by its own reply.
    assert_eq!(pairing.probes.len(), n, "{:?}", pairing.fates);
    let paired = pairing
        .fates
        .iter()
        .filter(|f| matches!(f, Fate::Paired(_)));
    assert_eq!(paired.count(), n, "{:?}", pairing.fates);
    for (i, fate) in pairing.fates.iter().enumerate() {
        let v4 = frames[i].packet[0] >> 4 == 4;
        match *fate {
            // The namespaces' own IPv6 chatter (router and multicast listener messages).
            Fate::NotAProbe | Fate::Unmatched if !v4 => {}
            Fate::Probe(_) => assert!(v4 && frames[i].dir == Dir::Out),
            Fate::Paired(p) => {
                assert!(v4 && frames[i].dir == Dir::In);
                let probe = pairing.probes[p].probe;
                let answer = key::reply(&frames[i].packet).unwrap();
                assert!(answer.fits(&probe), "reply {i} does not answer probe {p}");
                let others = pairing
                    .probes
                    .iter()
                    .enumerate()
                    .filter(|(q, s)| *q != p && answer.fits(&s.probe));
                assert_eq!(others.count(), 0, "reply {i} fits another probe too");
            }
            other => panic!("event {i}: {other:?}"),
        }
    }
    let mut keys: Vec<_> = pairing.probes.iter().map(|s| s.probe.key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "every probe its own identity");

    // The correction: the network's share is the capture's difference, to the ns; the
    // runtime's RTT is the one it measured; the host's round trip lies inside it.
    let corrections = correct(&pairing, &records);
    let mut sums = [0i64; 3];
    for (r, c) in records.iter().zip(&corrections) {
        let host = pairing
            .probes
            .iter()
            .find(|s| s.probe.key == r.key)
            .unwrap();
        let (reply_at, reply_event) = host.reply.unwrap();
        assert_eq!(frames[host.event].stamp_ns, host.sent_ns);
        assert_eq!(frames[reply_event].stamp_ns, reply_at);
        let Correction::Corrected {
            raw_ns,
            wire_ns,
            overhead_ns,
        } = *c
        else {
            panic!("{:?} not corrected: {c:?}", r.key);
        };
        assert_eq!(Some(raw_ns), r.rtt_ns);
        assert_eq!(wire_ns, reply_at - host.sent_ns);
        assert_eq!(overhead_ns, raw_ns as i64 - wire_ns as i64);
        for (sum, v) in sums
            .iter_mut()
            .zip([raw_ns as i64, wire_ns as i64, overhead_ns])
        {
            *sum += v / n as i64;
        }
        assert!(wire_ns > 0, "{c:?}");
        // The runtime's stamps are microseconds on a clock mapped from the kernel's: a
        // millisecond of slack for a clock step on a busy host, no more.
        assert!(
            overhead_ns > -1_000_000,
            "the host's round trip outlasts the runtime's: {c:?}"
        );
        assert!(raw_ns < 1_000_000_000, "{c:?}");
    }
    eprintln!(
        "mean over {n} probes: runtime RTT {} ns, host-side RTT {} ns, overhead {} ns",
        sums[0], sums[1], sums[2]
    );
}
