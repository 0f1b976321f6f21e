//! Kernel transmit timestamps end to end, in network namespaces of the test's own: every
//! probe is stamped when it leaves, never before the prober handed it out; RTTs come from
//! those stamps, agree with scamper's ping on the same path, and leave out the time a
//! probe waited in a queue. Needs root and scamper; skipped through vtnt-testkit
//! otherwise.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use common::run_in;
use vtnt_engine::{Instant, PingOptions};
use vtnt_netns::{Chain, NetNs};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// scamper's ping RTTs (milliseconds) from `ns` to `dst`.
fn scamper_ping(ns: &NetNs, dst: &str, count: u16) -> Vec<f64> {
    let out = ns
        .exec(
            "scamper",
            &["-c", &format!("ping -c {count} -i 0.02"), "-i", dst],
        )
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1)?.split(' ').next()?.parse().ok())
        .collect()
}

fn ping(dst: &str, count: u16) -> PingOptions {
    let mut o = PingOptions::new(dst.parse::<IpAddr>().unwrap());
    o.count = count;
    o.interval = Duration::from_millis(20);
    o.timeout = Duration::from_millis(500);
    o
}

#[test]
fn every_probe_is_stamped_after_its_hand_over_and_rtts_agree_with_ping() {
    vtnt_testkit::require_root!("scamper");
    let chain = Chain::build("vtx", 1).unwrap();
    let target = chain.target();
    let r = run_in(chain.vantage(), vec![ping(&target, 20)], true);
    assert_eq!(r.stats.sent, 20);
    assert_eq!(r.stats.tx_stamps, 20, "every probe stamped: {:?}", r.stats);
    assert_eq!(r.tx_stamps, 20, "and every stamp taken by the engine");
    let to: Ipv4Addr = target.parse().unwrap();
    for &common::Stamped {
        handed,
        at,
        ref probe,
    } in &r.stamps
    {
        assert_eq!(probe[16..20], to.octets(), "a probe to the target");
        assert!(
            handed <= at,
            "stamped {at:?} before its hand-over {handed:?}"
        );
        assert!(
            at.saturating_since(handed) < Duration::from_millis(100),
            "{handed:?} {at:?}"
        );
    }
    assert_eq!(r.replies.len(), 20);
    let stamped: Vec<Instant> = r.stamps.iter().map(|s| s.at).collect();
    for &vtnt_engine::PingReply { tx, rtt, .. } in &r.replies {
        assert!(stamped.contains(&tx), "reply timed from its probe's stamp");
        assert!(
            rtt > Duration::ZERO && rtt < Duration::from_millis(100),
            "{rtt:?}"
        );
    }
    let ours = median(
        r.replies
            .iter()
            .map(|r| r.rtt.as_secs_f64() * 1e3)
            .collect(),
    );
    let theirs = median(scamper_ping(chain.vantage(), &target, 20));
    eprintln!("median RTT: vtnt {ours:.3} ms, scamper ping {theirs:.3} ms");
    // Both time the same veth path (tens of microseconds); scamper's transmit time is read
    // before its send call, ours when the packet left, so ours is not the longer one
    // beyond scheduling noise on a busy host.
    assert!(ours <= theirs + 2.0, "vtnt {ours} ms, scamper {theirs} ms");
}

/// IPv6 probes are stamped by their own send socket, which numbers its packets apart
/// from the IPv4 one's: pings over both families at once, each probe stamped when it
/// left and each reply timed from its own probe's stamp.
#[test]
fn ipv6_probes_are_stamped_beside_ipv4_ones() {
    vtnt_testkit::require_root!();
    let chain = Chain::build("vt6", 1).unwrap();
    // the chain's one router between two IPv6 /64s of the documentation prefix
    let [vantage, router, target] = &chain.nodes[..] else {
        unreachable!("one router")
    };
    let ip6 = |ns: &vtnt_netns::NetNs, args: &str| {
        let args: Vec<&str> = args.split(' ').collect();
        let out = ns.ip(&[&["-6"], &args[..]].concat()).unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    ip6(vantage, "addr add 2001:db8:77:1::1/64 dev east nodad");
    ip6(router, "addr add 2001:db8:77:1::2/64 dev west nodad");
    ip6(router, "addr add 2001:db8:77:2::1/64 dev east nodad");
    ip6(target, "addr add 2001:db8:77:2::2/64 dev west nodad");
    ip6(vantage, "route add 2001:db8:77::/48 via 2001:db8:77:1::2");
    ip6(target, "route add 2001:db8:77::/48 via 2001:db8:77:2::1");
    router.sysctl("net.ipv6.conf.all.forwarding", "1").unwrap();
    // neighbour discovery waits for the links' link-local addresses to pass DAD (a second)
    for ns in &chain.nodes {
        let settled = (0..50).any(|_| {
            let out = ns.ip(&["-6", "addr", "show", "tentative"]).unwrap();
            out.stdout.is_empty() || {
                std::thread::sleep(Duration::from_millis(100));
                false
            }
        });
        assert!(settled, "{}: addresses still tentative", ns.name());
    }
    let to6: Ipv6Addr = "2001:db8:77:2::2".parse().unwrap();
    let target4 = chain.target();
    let r = run_in(
        vantage,
        vec![ping(&to6.to_string(), 10), ping(&target4, 10)],
        true,
    );
    assert_eq!(r.stats.sent, 20, "{:?}", r.stats);
    assert_eq!(r.stats.tx_stamps, 20, "every probe stamped: {:?}", r.stats);
    assert_eq!(r.tx_stamps, 20, "and every stamp taken by the engine");
    let v6 = r.stamps.iter().filter(|s| s.probe[0] >> 4 == 6);
    for s in v6.clone() {
        assert_eq!(s.probe[24..40], to6.octets(), "an IPv6 probe to the target");
        assert!(s.handed <= s.at, "stamped {:?} before {:?}", s.at, s.handed);
    }
    assert_eq!(v6.count(), 10);
    assert_eq!(r.replies.len(), 20);
    let stamped: Vec<Instant> = r.stamps.iter().map(|s| s.at).collect();
    for reply in &r.replies {
        assert!(
            stamped.contains(&reply.tx),
            "reply timed from its probe's stamp"
        );
    }
}

/// Probes that wait in a slow queue on the way out (a token bucket at 200 kbit/s: one
/// 84-byte probe every 3.4 ms) are stamped when they leave it; the RTTs stay those of the
/// path. Without stamps they include the wait. One probe in the middle of the batch is
/// refused by netfilter (EPERM), which the kernel counts among the stamped sends: the
/// stamps after it must still go to their own probes.
#[test]
fn a_probe_held_in_a_queue_is_stamped_when_it_leaves() {
    vtnt_testkit::require_root!("scamper", "iptables");
    let chain = Chain::build("vtq", 1).unwrap();
    let target = chain.target();
    let vantage = chain.vantage();
    vantage
        .exec(
            "tc",
            &[
                "qdisc", "add", "dev", "east", "root", "tbf", "rate", "200kbit", "burst", "200",
                "latency", "1s",
            ],
        )
        .map(|o| assert!(o.status.success(), "{o:?}"))
        .unwrap();
    // The router's own address: reachable, but this namespace's netfilter drops it.
    let dropped = Chain::right(0);
    let out = vantage
        .exec("iptables", &["-A", "OUTPUT", "-d", &dropped, "-j", "DROP"])
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let jobs = |with_drop: bool| {
        (0..20)
            .map(|i| {
                let to = if with_drop && i == 10 {
                    &dropped
                } else {
                    &target
                };
                ping(to, 1)
            })
            .collect::<Vec<_>>()
    };
    let with = run_in(vantage, jobs(true), true);
    assert_eq!(with.stats.send_errors, 1, "{:?}", with.stats);
    assert_eq!(with.stats.sent, 19);
    assert_eq!(with.stats.tx_stamps, 19, "{:?}", with.stats);
    assert_eq!(with.tx_stamps, 19, "every stamp fits its probe");
    let waited = with
        .stamps
        .iter()
        .map(|s| s.at.saturating_since(s.handed))
        .max()
        .unwrap();
    assert!(
        waited >= Duration::from_millis(30),
        "queued up to {waited:?}"
    );
    let worst = with.replies.iter().map(|r| r.rtt).max().unwrap();
    assert_eq!(with.replies.len(), 19);
    assert!(
        worst < Duration::from_millis(3),
        "RTTs from stamps, worst {worst:?}"
    );

    let without = run_in(vantage, jobs(false), false);
    assert_eq!(without.stats.tx_stamps, 0);
    let worst = without.replies.iter().map(|r| r.rtt).max().unwrap();
    assert!(
        worst >= Duration::from_millis(30),
        "RTTs from hand-over, worst {worst:?}"
    );
}
