//! The NF on real packets against iptables: the same generated rule set loaded with
//! `iptables-restore` into a router namespace's FORWARD chain and into the NF (a
//! [`Nf`] on the two veths of a [`Bump`]'s middle namespace, a bridge between a sender
//! and a receiver), the same trace sent through both from raw sockets, and the packets that
//! reach each receiver (by IP ID) compared one by one. Stateless, then with the usual
//! `ESTABLISHED` accept on top. Every packet stays in the namespaces the test makes.

use std::collections::BTreeSet;
use std::io::Read;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use vtnt_fw::gen::{self, Family, Header, RuleSpec, TraceSpec};
use vtnt_fw::BridgeStats;
use vtnt_fw::{parse, print, Config, Firewall};
use vtnt_fw_linux::Nf;
use vtnt_netns::{Bump, NetNs};

#[path = "../../fw/tests/wire/mod.rs"]
mod wire;
use wire::{datagram, path, restore, send_from};

fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
    nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

fn mac(ns: &NetNs, dev: &str) -> String {
    let out = ns.ip(&["-o", "link", "show", dev]).unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut words = text.split_whitespace();
    words.find(|w| *w == "link/ether").unwrap();
    words.next().unwrap().to_string()
}

/// `from` reaches `addr` (on `to`'s `to_dev`) by `dev` without asking ARP first, so
/// that no packet waits in (or falls out of) a queue while an address is resolved.
fn neigh(from: &NetNs, dev: &str, addr: &str, to: &NetNs, to_dev: &str) {
    let m = mac(to, to_dev);
    from.ip(&[
        "neigh",
        "replace",
        addr,
        "lladdr",
        &m,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
    .unwrap();
}

/// Collects (IP ID, source) of every IPv4 frame seen in `ns` until `stop`.
fn capture(ns: &NetNs, stop: Arc<AtomicBool>) -> JoinHandle<Vec<(u16, Ipv4Addr)>> {
    let name = ns.name().to_string();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        enter(&name);
        let s = Socket::new(
            Domain::PACKET,
            Type::RAW,
            Some(Protocol::from(i32::from(0x0800u16.to_be()))),
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        s.set_recv_buffer_size(4 << 20).unwrap();
        tx.send(()).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = (&s).read(&mut buf) {
                if n >= 34 {
                    let id = u16::from_be_bytes([buf[18], buf[19]]);
                    seen.push((id, Ipv4Addr::new(buf[26], buf[27], buf[28], buf[29])));
                }
            }
        }
        seen
    });
    rx.recv().unwrap();
    h
}

/// Which of `trace` (IP ID: index + 1) arrived, from what a capture saw.
fn arrived(trace: &[Header], seen: Vec<(u16, Ipv4Addr)>) -> BTreeSet<usize> {
    seen.into_iter()
        .filter_map(|(id, src)| {
            let i = usize::from(id).checked_sub(1)?;
            (trace.get(i)?.src == src).then_some(i)
        })
        .collect()
}

/// Sends `trace` from `sender`, captured in `receiver`: the indices that arrived.
fn through(sender: &NetNs, receiver: &NetNs, trace: &[Header]) -> BTreeSet<usize> {
    let stop = Arc::new(AtomicBool::new(false));
    let cap = capture(receiver, stop.clone());
    let packets = (trace.iter().enumerate())
        .map(|(i, h)| datagram(h, i as u16 + 1))
        .collect();
    send_from(sender, packets);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    arrived(trace, cap.join().unwrap())
}

/// Runs the NF in `ns` on a0 and b0 with `rules` (iptables-save text) until `stop`.
fn start_nf(ns: &NetNs, rules: &str, stop: Arc<AtomicBool>) -> JoinHandle<BridgeStats> {
    let rules = parse::iptables_save("rules.v4", rules).unwrap();
    let fw = Firewall::new(&rules, Config::default()).unwrap();
    let name = ns.name().to_string();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        enter(&name);
        let mut nf = Nf::open(fw, "a0", "b0").unwrap();
        tx.send(()).unwrap();
        nf.run(&stop).unwrap();
        nf.counters()
    });
    rx.recv().unwrap();
    h
}

#[test]
fn the_nf_passes_exactly_what_iptables_passes() {
    vtnt_testkit::require_root!("ip", "iptables-restore", "ethtool");
    let ipt = path();
    neigh(&ipt.sender, "s0", "100.64.1.2", &ipt.router, "w0");
    neigh(&ipt.router, "l0", "100.64.2.2", &ipt.receiver, "r0");
    let br = Bump::build("fwnf", "100.64.3").unwrap();
    neigh(&br.sender, "s0", "100.64.3.2", &br.receiver, "r0");
    for (stateful, seed) in [(false, 11), (true, 12)] {
        let spec = RuleSpec {
            family: Family::Fw,
            stateful,
            ..RuleSpec::new(500, seed)
        };
        let rules = gen::rules(&spec);
        let text = print::iptables_save(&rules).unwrap();
        restore(&ipt.router, &text);
        let stop = Arc::new(AtomicBool::new(false));
        let nf = start_nf(&br.nf, &text, stop.clone());
        let trace = gen::trace(
            &rules,
            &TraceSpec {
                packets: 2000,
                seed,
                locality: 0.05,
            },
        );
        let by_iptables = through(&ipt.sender, &ipt.receiver, &trace);
        let by_nf = through(&br.sender, &br.receiver, &trace);
        stop.store(true, Ordering::Relaxed);
        let c = nf.join().unwrap();
        eprintln!(
            "stateful {stateful}: {} packets, iptables passed {}, the NF {}; NF counters {c:?}",
            trace.len(),
            by_iptables.len(),
            by_nf.len()
        );
        assert!(
            by_iptables.len() > 200 && by_iptables.len() < trace.len() - 200,
            "stateful {stateful}: a trace that iptables mostly passes or mostly drops tells little"
        );
        let only_ipt: Vec<_> = by_iptables.difference(&by_nf).take(5).collect();
        let only_nf: Vec<_> = by_nf.difference(&by_iptables).take(5).collect();
        assert!(
            only_ipt.is_empty() && only_nf.is_empty(),
            "stateful {stateful}: iptables alone passed {only_ipt:?} ({:?}), the NF alone {only_nf:?} ({:?})",
            only_ipt.first().map(|&&i| trace[i]),
            only_nf.first().map(|&&i| trace[i]),
        );
        assert!(
            c.received[0] >= trace.len() as u64,
            "the NF read {} frames from the sender's side, fewer than the {} sent",
            c.received[0],
            trace.len()
        );
    }
}
