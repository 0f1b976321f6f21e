//! Host-side stamps paired exactly, on real namespaces of the test's own: a chain
//! `runtime — host — target` stands for a container (the vantage namespace) behind its
//! veth, the host's end of that veth (`west` of the middle namespace, where the capture
//! runs) and a target. vTNT's engine pings the target from the runtime with ICMP echo,
//! Paris UDP and classic UDP probes (not TCP: its pings reuse one identity, ports and
//! sequence number, so `vtnt-mace` rightly calls all but the first reply ambiguous); every probe the host saw leave must be paired with its own reply (by
//! identity, checked against the bytes), none misattributed, and the correction's network
//! share must be exactly the difference of the capture's two stamps. The only timing
//! checks are sanity: the host's round trip lies inside the runtime's. Needs root.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use vtnt_engine::{Method, PingOptions};
use vtnt_linux::host_stamps::{Background, Side};
use vtnt_mace::{correct, key, Correction, Dir, Fate, ToolProbe};
use vtnt_netns::{Chain, NetNs};

/// The runtime's records of `jobs` run from `ns`: each probe's key and the RTT it
/// measured (a ping reply names its probe by its transmit stamp and IP id), in the order
/// the probes left.
fn runtime_records(ns: &NetNs, jobs: Vec<PingOptions>) -> Vec<ToolProbe> {
    let run = common::run_in(ns, jobs, true);
    assert_eq!(run.stats.sent, run.stamps.len() as u64, "{:?}", run.stats);
    assert_eq!(
        run.tx_stamps,
        run.stamps.len() as u64,
        "every probe stamped"
    );
    assert!(run.stamps.iter().all(|s| s.handed <= s.at));
    let rtts: HashMap<_, _> = run
        .replies
        .iter()
        .map(|r| ((r.tx, r.probe_ipid), r.rtt))
        .collect();
    run.stamps
        .iter()
        .map(|s| ToolProbe {
            key: key::probe(&s.probe).expect("the engine sends probes").key,
            rtt_ns: rtts
                .get(&(s.at, u16::from_be_bytes([s.probe[4], s.probe[5]])))
                .map(|d| d.as_nanos() as u64),
        })
        .collect()
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
    let capture = Background::start(&host_ns, "west", Side::HostEnd).unwrap();
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
    let taken = capture.finish().unwrap();
    assert_eq!(taken.drops, 0, "the capture lost nothing");
    let frames = &taken.frames;
    let pairing = taken.pair();

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

/// A capture on a device that never goes quiet (a background load, as `vtnt bench rtt`
/// runs one) still finishes when told, with what it took: its reads go at most one lap
/// of the ring before looking at the stop flag (once, a read looped while packets kept
/// coming, and a loaded run never ended).
#[test]
fn a_capture_finishes_while_traffic_still_flows() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    vtnt_testkit::require_root!();
    let chain = Chain::build("vhl", 1).unwrap();
    let host_ns = PathBuf::from("/run/netns").join(chain.nodes[1].name());
    let capture = Background::start(&host_ns, "west", Side::HostEnd).unwrap();
    let vantage = PathBuf::from("/run/netns").join(chain.vantage().name());
    let target: IpAddr = chain.target().parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let load = std::thread::spawn(move || {
        let ns = std::fs::File::open(&vantage).unwrap();
        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let socket = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        let mut sent = 0u64;
        while !stopped.load(Ordering::Acquire) {
            // 100 datagrams a millisecond or so: never quiet for the ring's 5 ms blocks
            for _ in 0..100 {
                let _ = socket.send_to(&[0x5a; 200], (target, 9));
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(300));
    let taken = capture.finish().unwrap();
    stop.store(true, Ordering::Release);
    let sent = load.join().unwrap();
    assert!(
        sent > 0 && !taken.frames.is_empty(),
        "{sent} sent, nothing taken"
    );
}
