//! What a traceroute sees through each tunnel class of the reference topology: reply
//! TTLs, quoted TTLs, labels, and the TNT triggers (FRPLA, RTLA, u-turn) computed with
//! `sc_tnt`'s formulas; and what the oracle observes of each tunnel. Every expected
//! number is derived by hand in the comments.
//!
//! Conventions: the vantage point (VP, 192.0.2.2) hangs off `gw`; probe TTL k expires
//! at the k-th router that decrements it. A router's reply loses one TTL per router that
//! forwards it back (the router that sends it does not decrement). Branch routers hang
//! off `gw`, so "hop 2" is always a branch's first router.

use std::net::Ipv4Addr;

use vtnt_lab::tracer::{Answer, Tracer};
use vtnt_lab::{Lab, Topology};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn reference() -> Lab {
    Lab::new(Topology::reference())
}

fn hop(hops: &[Option<Answer>], ttl: usize) -> &Answer {
    hops[ttl - 1]
        .as_ref()
        .unwrap_or_else(|| panic!("no answer at TTL {ttl}"))
}

fn addrs(hops: &[Option<Answer>]) -> Vec<String> {
    hops.iter()
        .map(|h| h.as_ref().map_or("*".into(), |a| a.from.to_string()))
        .collect()
}

/// FRPLA = (iTTL_te - rTTL_te + 1) - probe_ttl.
fn frpla(a: &Answer) -> i32 {
    a.return_len() - i32::from(a.probe_ttl)
}

/// RTLA / u-turn = (iTTL_te - rTTL_te + 1) - (iTTL_er - rTTL_er + 1).
fn rtla(te: &Answer, er: &Answer) -> i32 {
    te.return_len() - er.return_len()
}

#[test]
fn explicit_tunnel_shows_every_lsr_with_labels() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(ip("203.0.113.10"), 30);
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.6",
            "100.64.2.2",
            "100.64.2.6",
            "100.64.2.10",
            "100.64.2.14",
            "203.0.113.10"
        ]
    );
    // TTL 3: gw 3->2, e1 (ingress) 2->1 and pushes LSE-TTL := 1 (propagate); e2 gets
    // LSE-TTL 1 and expires: quotes IP-TTL 1 and the label with LSE-TTL 1 (RFC 4950).
    // e2 is Cisco (iTTL 255); the reply crosses e1 and gw: 255 - 2 = 253.
    let e2 = hop(&hops, 3);
    assert_eq!((e2.q_ttl, e2.reply_ttl, e2.labels.len()), (Some(1), 253, 1));
    assert_eq!(e2.labels[0].1, 1);
    // TTL 4: IP-TTL 2 after e1, LSE-TTL 2; e2 -> 1; e3 expires it. The IP header was not
    // touched inside the LSP: quoted TTL 2. e3 is H3C (255), three routers back: 252.
    let e3 = hop(&hops, 4);
    assert_eq!((e3.q_ttl, e3.reply_ttl, e3.labels[0].1), (Some(2), 252, 1));
    // TTL 5: e3 (PHP) pops with IP-TTL := min(3, LSE 1) = 1: e4 gets plain IP-TTL 1.
    let e4 = hop(&hops, 5);
    assert_eq!(
        (e4.q_ttl, e4.reply_ttl, e4.labels.is_empty()),
        (Some(1), 251, true)
    );
    // Nothing hidden: FRPLA 0 at the egress (return path 255-251+1 = 5 = probe TTL).
    assert_eq!(frpla(e4), 0);
    // e5 is Brocade (<64,64>): 64 - 5 routers back = 59.
    assert_eq!(hop(&hops, 6).reply_ttl, 59);
    // RTT: one-way 0.05 + 1 + 1 + 5 (e2-e3) = 7.05 ms to e3, twice.
    assert_eq!(e3.rtt_us, 14_100);
}

#[test]
fn implicit_tunnel_rising_quoted_ttl_and_uturns() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(ip("203.0.113.18"), 30);
    assert_eq!(
        addrs(&hops)[2..7],
        [
            "100.64.3.2",
            "100.64.3.6",
            "100.64.3.10",
            "100.64.3.14",
            "100.64.3.18"
        ]
    );
    // LSRs i2..i5 at TTL 3..6: the IP-TTL left by i1 is TTL-2 and the LSRs leave it
    // alone, so the quoted TTLs are 1, 2, 3, 4 and no labels (no RFC 4950).
    for (ttl, q) in [(3, 1), (4, 2), (5, 3), (6, 4)] {
        let a = hop(&hops, ttl);
        assert_eq!((a.q_ttl, a.labels.len()), (Some(q), 0), "TTL {ttl}");
    }
    // ICMP tunnelling: i2's time exceeded (iTTL 255, LSE-TTL 255 as the LSP propagates)
    // goes on to the end: i3 254, i4 253, i5 pops min(255, 252) = 252; i6 251 turns it
    // back by IP: i5 250, i4 249, i3 248, i2 247, i1 246, gw 245.
    let te: Vec<u8> = (3..=6).map(|k| hop(&hops, k).reply_ttl).collect();
    assert_eq!(te, [245, 246, 247, 248]);
    // All four replies travel to i6 and back: same RTT (VP-i6-VP = 2*(0.05+6) ms).
    assert!((3..=6).all(|k| hop(&hops, k).rtt_us == 12_100));
    // Echo replies (Juniper iTTL 64) from i2..i5 come straight back by IP:
    // i2: 64 - (i1, gw) = 62; i3: 61; i4: 60; i5: 59.
    // u-turn = (255-te+1) - (64-er+1): i2 (11-3)=8, i3 (10-4)=6, i4 4, i5 2.
    let mut uturns = Vec::new();
    for k in 3..=6 {
        let a = hop(&hops, k).clone();
        let er = t.ping(a.from).unwrap();
        assert_eq!(er.reply_ttl, 65 - k as u8);
        uturns.push(rtla(&a, &er));
    }
    assert_eq!(uturns, [8, 6, 4, 2]);
    assert!(
        uturns.iter().map(|u| u.abs()).sum::<i32>() >= 3,
        "TNT's u-turn trigger"
    );
}

#[test]
fn opaque_tunnel_shows_only_the_labelled_egress() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(ip("203.0.113.26"), 30);
    // o2 and o3 never show: the LSE-TTL starts at 255.
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.14",
            "100.64.4.10",
            "100.64.4.14",
            "203.0.113.26"
        ]
    );
    // TTL 3: o1 leaves IP-TTL 1, pushes LSE 255; o2 254, o3 253; o4 (UHP egress) receives
    // LSE 253, pops IP := min(1, 253) = 1 and expires it, quoting the received stack:
    // a label with LSE-TTL 253 (!= 1: opaque). Reply: 255 - (o3, o2, o1, gw) = 251.
    let o4 = hop(&hops, 3);
    assert_eq!((o4.q_ttl, o4.reply_ttl), (Some(1), 251));
    assert_eq!(o4.labels.len(), 1);
    assert_eq!(o4.labels[0].1, 253);
}

#[test]
fn invisible_php_frpla_and_rtla_trigger_on_juniper() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(ip("203.0.113.34"), 30);
    // p2..p4 hidden: p1 and p5 look adjacent.
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.18",
            "100.64.5.14",
            "100.64.5.18",
            "203.0.113.34"
        ]
    );
    // p5's time exceeded (Juniper: IP-TTL 255) enters the return LSP p5->p1 with
    // LSE-TTL 255; p4 254, p3 253, p2 (PHP) 252 and IP := min(255, 252) = 252; p1 251,
    // gw 250. Return length 255-250+1 = 6, probe TTL 3: FRPLA = 3 (>= 3 triggers).
    let p5 = hop(&hops, 3);
    assert_eq!((p5.reply_ttl, frpla(p5)), (250, 3));
    // Its echo reply starts at 64; min(64, 252) = 64 at the pop; p1 63, gw 62: length 3.
    // RTLA = 6 - 3 = 3 = the three hidden LSRs.
    let er = t.ping(p5.from).unwrap();
    assert_eq!((er.reply_ttl, rtla(p5, &er)), (62, 3));
}

#[test]
fn invisible_php_cisco_frpla_triggers_rtla_does_not() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(ip("203.0.113.42"), 30);
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.22",
            "100.64.6.14",
            "100.64.6.18",
            "203.0.113.42"
        ]
    );
    // b5 is Cisco: locally generated traffic propagates, LSE-TTL := IP-TTL = 255; b4 254,
    // b3 253, b2 pops min(252, 252); b1 251, gw 250: FRPLA = 6 - 3 = 3.
    let b5 = hop(&hops, 3);
    assert_eq!((b5.reply_ttl, frpla(b5)), (250, 3));
    // The echo reply also starts at 255 and propagates: 250 too. RTLA = 0 (and sc_tnt
    // applies RTLA only when iTTL_er != 255).
    let er = t.ping(b5.from).unwrap();
    assert_eq!((er.reply_ttl, er.ittl(), rtla(b5, &er)), (250, 255, 0));
}

#[test]
fn dpr_reveals_every_lsr_at_once() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    // Internal prefixes are not label switched: a trace to p5's incoming address is
    // routed by IP hop by hop and shows p2, p3, p4.
    let hops = t.trace(ip("100.64.5.14"), 30);
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.18",
            "100.64.5.2",
            "100.64.5.6",
            "100.64.5.10",
            "100.64.5.14"
        ]
    );
}

#[test]
fn brpr_reveals_one_lsr_per_trace() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    // Internal prefixes are label switched (LDP): 100.64.6.12/30 (b4-b5) is connected to
    // b4, so the LSP for it ends at b4, popped by b3: b4 shows, b2 and b3 stay hidden.
    let steps = [
        (
            "100.64.6.14",
            vec!["192.0.2.1", "100.64.0.22", "100.64.6.10", "100.64.6.14"],
        ),
        (
            "100.64.6.10",
            vec!["192.0.2.1", "100.64.0.22", "100.64.6.6", "100.64.6.10"],
        ),
        (
            "100.64.6.6",
            vec!["192.0.2.1", "100.64.0.22", "100.64.6.2", "100.64.6.6"],
        ),
        ("100.64.6.2", vec!["192.0.2.1", "100.64.0.22", "100.64.6.2"]),
    ];
    for (target, want) in steps {
        assert_eq!(addrs(&t.trace(ip(target), 30)), want, "trace to {target}");
    }
}

#[test]
fn invisible_uhp_shows_the_next_hop_twice() {
    let mut lab = reference();
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(ip("203.0.113.50"), 30);
    // TTL 3: u1 leaves IP-TTL 1 (LSE 255); u4 pops, min(1, 253) = 1, and forwards it
    // without decrementing: u5 expires it. TTL 4: u4 gets IP-TTL 2, decrements to 1: u5
    // again. u4 never shows.
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.26",
            "100.64.7.14",
            "100.64.7.14",
            "203.0.113.50"
        ]
    );
    // u5 is Nokia (64), reply through u4 u3 u2 u1 gw: 59, both times.
    assert_eq!((hop(&hops, 3).reply_ttl, hop(&hops, 4).reply_ttl), (59, 59));
    // Buddy of u5's address (the other end of the /30) is u4's: a trace to it is IP
    // routed (internal prefixes not labelled) and shows everything (DPR).
    let hops = t.trace(ip("100.64.7.13"), 30);
    assert_eq!(
        addrs(&hops),
        [
            "192.0.2.1",
            "100.64.0.26",
            "100.64.7.2",
            "100.64.7.6",
            "100.64.7.13"
        ]
    );
}

#[test]
fn vendor_signatures() {
    let mut lab = reference();
    let truth = lab.truth();
    let mut t = Tracer::new(&mut lab);
    // (router, an address of it on the forward path, destination behind it, probe TTL)
    let cases = [
        ("gw", "192.0.2.1", "203.0.113.2", 1, (255, 255)),
        ("a1", "100.64.0.2", "203.0.113.2", 2, (64, 64)),
        ("a4", "100.64.1.9", "203.0.113.2", 4, (128, 128)),
        ("e1", "100.64.0.6", "203.0.113.10", 2, (255, 255)),
        ("e5", "100.64.2.14", "203.0.113.10", 6, (64, 64)),
        ("i1", "100.64.0.10", "203.0.113.18", 2, (255, 64)),
        ("p1", "100.64.0.18", "203.0.113.34", 2, (255, 64)),
        ("u5", "100.64.7.14", "203.0.113.50", 3, (64, 64)),
    ];
    for (name, addr, dst, ttl, sig) in cases {
        let te = t.probe(ip(dst), ttl).unwrap();
        assert_eq!(te.from, ip(addr), "{name}");
        let er = t.ping(ip(addr)).unwrap();
        assert_eq!((te.ittl(), er.ittl()), sig, "{name}");
        let r = truth.routers.iter().find(|r| r.name == name).unwrap();
        assert_eq!((r.signature[0], r.signature[1]), sig);
    }
}

/// A router's own `signature` replaces its vendor's, in the packets and in the truth.
#[test]
fn a_router_signature_replaces_the_vendors() {
    let mut def = reference().topology().def().clone();
    for r in def.routers.iter_mut().filter(|r| r.name == "a1") {
        r.signature = Some([32, 128]);
    }
    let mut lab = Lab::new(vtnt_lab::Topology::from_def(def).unwrap());
    let truth = lab.truth();
    let mut t = Tracer::new(&mut lab);
    let te = t.probe(ip("203.0.113.2"), 2).unwrap();
    assert_eq!(te.from, ip("100.64.0.2"));
    let er = t.ping(ip("100.64.0.2")).unwrap();
    assert_eq!((te.ittl(), er.ittl()), (32, 128));
    let r = truth.routers.iter().find(|r| r.name == "a1").unwrap();
    assert_eq!((r.vendor, r.signature), ("mikrotik", [32, 128]));
}

/// The oracle on the reference tunnels, as the tests above show the packets: every
/// tunnel observable; labels from the explicit LSRs and the opaque egress only; every
/// hiding tunnel's LSRs in one trace (DPR, buddy) except BRPR's, pieced together link by
/// link; the UHP egress never answers a trace to the destination (its next hop answers
/// twice instead).
#[test]
fn reference_oracle_observations() {
    let topo = Topology::reference();
    let truth = vtnt_lab::truth::truth(&topo);
    let oracle = vtnt_lab::oracle(&topo, &truth, &vtnt_lab::OracleOptions::default());
    // Every interface and host, eight flows each.
    assert_eq!(oracle.traces, oracle.targets * 8);
    let seen = |name: &str| {
        let i = truth
            .destinations
            .iter()
            .position(|d| d.name == name)
            .unwrap();
        assert_eq!(oracle.tunnels[i].len(), 1, "{name}");
        let o = oracle.tunnels[i][0];
        assert!(
            o.observable && o.ingress_seen && o.links_seen,
            "{name}: {o:?}"
        );
        (o.egress_seen, o.label_seen, o.lsrs_seen_in_order)
    };
    assert_eq!(seen("explicit"), (true, true, true));
    assert_eq!(seen("implicit"), (true, false, true));
    assert_eq!(seen("opaque"), (true, true, true));
    assert_eq!(seen("invisible-php-dpr"), (true, false, true));
    assert_eq!(seen("invisible-php-brpr"), (true, false, false));
    assert_eq!(seen("invisible-uhp"), (false, false, true));
    let plain = truth
        .destinations
        .iter()
        .position(|d| d.name == "plain")
        .unwrap();
    assert!(oracle.tunnels[plain].is_empty());
}

/// `reply-from`: a router's time exceeded come from its loopback, or from the interface
/// towards the source; the truth's hop address follows.
#[test]
fn a_router_answers_from_where_reply_from_says() {
    use vtnt_lab::{ReplyFrom, Topology};
    let with = |topo: &Topology, name: &str, how: ReplyFrom| {
        let mut def = topo.def().clone();
        for r in def.routers.iter_mut().filter(|r| r.name == name) {
            r.reply_from = how;
        }
        Lab::new(Topology::from_def(def).unwrap())
    };
    // e1 (loopback 100.127.0.11) at TTL 2 towards the explicit branch
    let mut lab = with(reference().topology(), "e1", ReplyFrom::Loopback);
    let truth = lab.truth();
    let te = Tracer::new(&mut lab).probe(ip("203.0.113.10"), 2).unwrap();
    assert_eq!(te.from, ip("100.127.0.11"));
    let d = truth.by_name("explicit").unwrap();
    assert_eq!(d.forward[1].addr, ip("100.127.0.11"));
    // i in detour-at-ingress.toml: in from x (100.64.0.6), back out through d1
    // (100.64.0.9)
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../topologies/cases/detour-at-ingress.toml");
    let detour = Topology::load(&path).unwrap();
    let mut lab = with(&detour, "i", ReplyFrom::Incoming);
    assert_eq!(
        Tracer::new(&mut lab)
            .probe(ip("203.0.113.2"), 3)
            .unwrap()
            .from,
        ip("100.64.0.6")
    );
    let mut lab = with(&detour, "i", ReplyFrom::Outgoing);
    let truth = lab.truth();
    let te = Tracer::new(&mut lab).probe(ip("203.0.113.2"), 3).unwrap();
    assert_eq!(te.from, ip("100.64.0.9"));
    assert_eq!(
        truth.by_name("dst").unwrap().forward[2].addr,
        ip("100.64.0.9")
    );
}
