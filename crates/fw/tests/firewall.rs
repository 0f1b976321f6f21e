//! The network function end to end: connection tracking in front of the rules (a
//! handshake through an ESTABLISHED accept, replies to dropped packets refused), REJECT
//! replies as bytes, rule replacement that is all or nothing, timeouts, bad bytes; the
//! bridge that every driver moves frames with.

use std::net::Ipv4Addr;

use vtnt_fw::{parse, Bridge, Config, CtState, Firewall, Hook, Options, Outcome};
use vtnt_record::Instant;
use vtnt_wire::build::{self, Ip, Tcp, Udp};
use vtnt_wire::reply::{self, Body};

const RULES: &str = "*filter
:FORWARD DROP [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -m conntrack --ctstate INVALID -j DROP
-A FORWARD -i wan -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -i lan -p udp -m udp --dport 53 -j ACCEPT
-A FORWARD -i wan -p tcp -m tcp --dport 23 -j REJECT --reject-with tcp-reset
-A FORWARD -i wan -p udp -j REJECT
COMMIT
";

const OUTSIDE: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);
const INSIDE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 20);
const WAN_ADDR: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);

fn ip(src: Ipv4Addr, dst: Ipv4Addr) -> Ip {
    Ip {
        src,
        dst,
        ttl: 64,
        tos: 0,
        ipid: 7,
    }
}

fn tcp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut b = vec![0u8; 40];
    let t = Tcp {
        sport,
        dport,
        seq: 1000,
        ack: 0,
        flags,
        window: 512,
    };
    let n = build::tcp(&mut b, &ip(src, dst), &t).unwrap();
    b.truncate(n);
    b
}

fn udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    let u = Udp {
        sport,
        dport,
        payload: b"query",
        checksum: None,
    };
    let n = build::udp(&mut b, &ip(src, dst), &u).unwrap();
    b.truncate(n);
    b
}

struct Nf {
    fw: Firewall,
    wan: vtnt_fw::IfId,
    lan: vtnt_fw::IfId,
    reply: [u8; 600],
}

impl Nf {
    fn new(config: Config) -> Nf {
        let rules = parse::iptables_save("rules.v4", RULES).unwrap();
        let mut fw = Firewall::new(&rules, config).unwrap();
        let wan = fw.add_interface("wan", Some(WAN_ADDR));
        let lan = fw.add_interface("lan", None);
        Nf {
            fw,
            wan,
            lan,
            reply: [0; 600],
        }
    }
    /// A packet from the outside (`inbound`) or the inside at `ms`.
    fn send(&mut self, ms: u64, inbound: bool, p: &[u8]) -> Outcome {
        let (i, o) = if inbound {
            (self.wan, self.lan)
        } else {
            (self.lan, self.wan)
        };
        self.fw.handle_packet(
            Instant::from_millis(ms),
            Hook::Forward,
            i,
            o,
            p,
            &mut self.reply,
        )
    }
}

#[test]
fn a_handshake_passes_through_the_state_rule_and_strays_do_not() {
    let mut nf = Nf::new(Config::default());
    assert_eq!(
        nf.fw.classifier().stats().forward_shortcuts,
        3,
        "ESTABLISHED, RELATED, INVALID"
    );
    assert_eq!(
        nf.send(0, true, &tcp(OUTSIDE, INSIDE, 40000, 22, 0x02)),
        Outcome::Accept
    );
    assert_eq!(
        nf.send(1, false, &tcp(INSIDE, OUTSIDE, 22, 40000, 0x12)),
        Outcome::Accept
    );
    assert_eq!(
        nf.send(2, true, &tcp(OUTSIDE, INSIDE, 40000, 22, 0x10)),
        Outcome::Accept
    );
    assert_eq!(
        nf.send(3, false, &tcp(INSIDE, OUTSIDE, 22, 40000, 0x18)),
        Outcome::Accept
    );
    // the inside may not open a connection to the outside's port 22
    assert_eq!(
        nf.send(4, false, &tcp(INSIDE, OUTSIDE, 40001, 22, 0x02)),
        Outcome::Drop
    );
    // a SYN/ACK nobody asked for is INVALID
    assert_eq!(
        nf.send(5, true, &tcp(OUTSIDE, INSIDE, 22, 40002, 0x12)),
        Outcome::Drop
    );
    // a dropped query leaves no connection: its answer is dropped as NEW
    assert_eq!(
        nf.send(6, true, &udp(OUTSIDE, INSIDE, 5353, 53)),
        Outcome::Reject(61)
    );
    assert_eq!(
        nf.send(7, false, &udp(INSIDE, OUTSIDE, 53, 5353)),
        Outcome::Drop
    );
    // an accepted query lets its answer in
    assert_eq!(
        nf.send(8, false, &udp(INSIDE, OUTSIDE, 5000, 53)),
        Outcome::Accept
    );
    assert_eq!(
        nf.send(9, true, &udp(OUTSIDE, INSIDE, 53, 5000)),
        Outcome::Accept
    );
    let s = nf.fw.stats();
    assert_eq!((s.accepted, s.dropped, s.rejected), (6, 3, 1));
    assert_eq!((s.conntrack.live, s.conntrack.created), (2, 2));
}

#[test]
fn rejects_answer_with_a_reset_or_an_unreachable() {
    let mut nf = Nf::new(Config::default());
    let syn = tcp(OUTSIDE, INSIDE, 40000, 23, 0x02);
    let Outcome::Reject(n) = nf.send(0, true, &syn) else {
        panic!()
    };
    let r = reply::parse(&nf.reply[..n]).unwrap();
    assert_eq!((r.src, r.dst), (INSIDE.into(), OUTSIDE.into()));
    assert!(
        matches!(
            r.body,
            Body::Tcp {
                sport: 23,
                dport: 40000,
                ack: 1001,
                flags: 0x14,
                ..
            }
        ),
        "{r:?}"
    );
    let q = udp(OUTSIDE, INSIDE, 1, 161);
    let Outcome::Reject(n) = nf.send(1, true, &q) else {
        panic!()
    };
    let r = reply::parse(&nf.reply[..n]).unwrap();
    assert_eq!((r.src, r.dst), (WAN_ADDR.into(), OUTSIDE.into()));
    let Body::IcmpError {
        icmp_type: 3,
        code: 3,
        quote,
        ..
    } = r.body
    else {
        panic!("{r:?}")
    };
    assert_eq!(quote.dst, INSIDE);
}

#[test]
fn new_rules_replace_the_old_entirely_or_not_at_all() {
    let mut nf = Nf::new(Config {
        compile: Options {
            max_bytes: 1 << 20,
            ..Options::default()
        },
        ..Config::default()
    });
    assert_eq!(
        nf.send(0, true, &tcp(OUTSIDE, INSIDE, 40000, 22, 0x02)),
        Outcome::Accept
    );
    // a million bytes do not hold 100,000 rules: refused, the old rules stay
    let big = vtnt_fw::gen::rules(&vtnt_fw::gen::RuleSpec::new(100_000, 3));
    let e = nf.fw.replace_rules(&big).unwrap_err();
    assert!(
        e.to_string()
            .contains("more than the 1048576 bytes allowed"),
        "{e}"
    );
    assert_eq!(
        nf.send(1, true, &tcp(OUTSIDE, INSIDE, 40001, 22, 0x02)),
        Outcome::Accept
    );
    // rules that close port 22 apply from the next packet; the open connection stays
    let closed = RULES.replace("--dport 22 -j ACCEPT", "--dport 22 -j DROP");
    nf.fw
        .replace_rules(&parse::iptables_save("r", &closed).unwrap())
        .unwrap();
    assert_eq!(
        nf.send(2, true, &tcp(OUTSIDE, INSIDE, 40002, 22, 0x02)),
        Outcome::Drop
    );
    assert_eq!(
        nf.send(3, false, &tcp(INSIDE, OUTSIDE, 22, 40000, 0x12)),
        Outcome::Accept
    );
    // interfaces keep their ids and addresses across the replacement
    let Outcome::Reject(n) = nf.send(4, true, &udp(OUTSIDE, INSIDE, 1, 161)) else {
        panic!()
    };
    assert_eq!(reply::parse(&nf.reply[..n]).unwrap().src, WAN_ADDR);
}

#[test]
fn connections_time_out_and_bad_bytes_are_dropped() {
    let mut nf = Nf::new(Config::default());
    assert_eq!(
        nf.send(0, false, &udp(INSIDE, OUTSIDE, 5000, 53)),
        Outcome::Accept
    );
    assert_eq!(nf.fw.poll_timeout(), Some(Instant::from_millis(30_000)));
    nf.fw.handle_timeout(Instant::from_millis(30_001));
    assert_eq!(nf.fw.stats().conntrack.live, 0);
    // the answer now comes too late: NEW, and rejected from the outside
    assert!(matches!(
        nf.send(30_002, true, &udp(OUTSIDE, INSIDE, 53, 5000)),
        Outcome::Reject(_)
    ));
    for bad in [&[][..], &[0x45; 10][..], &[0x60; 40][..]] {
        assert_eq!(nf.send(30_003, true, bad), Outcome::Drop);
    }
    assert_eq!(nf.fw.stats().malformed, 3);
    // the stateless classification takes the state as given
    let h = vtnt_fw::Headers::parse(&udp(OUTSIDE, INSIDE, 53, 5000)).unwrap();
    let p = vtnt_fw::Packet::new(&h, nf.wan, nf.lan, CtState::Established);
    assert_eq!(
        nf.fw.classifier().classify(Hook::Forward, &p).action,
        vtnt_fw::Action::Accept
    );
}

#[test]
fn a_batch_decides_as_one_packet_after_another() {
    // Inbound traffic with repeated connections (the second SYN of a flow finds the
    // first's entry), REJECTs with replies, drops and malformed bytes, in batches of
    // every size from 1 to 2 * BATCH + 1: outcomes, replies and counters as one by one.
    let mut packets = Vec::new();
    for i in 0..400u16 {
        packets.push(match i % 7 {
            0 | 1 => tcp(OUTSIDE, INSIDE, 40000 + i / 14, 22, 0x02),
            2 => tcp(OUTSIDE, INSIDE, 41000 + i, 23, 0x02),
            3 => udp(OUTSIDE, INSIDE, 5000 + i, 53),
            4 => tcp(OUTSIDE, INSIDE, 42000 + i, 80, 0x02),
            5 => vec![0x45, 0, 0, 99],
            _ => tcp(OUTSIDE, INSIDE, 40000 + i / 14, 22, 0x10),
        });
    }
    let mut one = Nf::new(Config::default());
    let mut want = Vec::new();
    for p in &packets {
        let o = one.send(5, true, p);
        let reply = match o {
            Outcome::Reject(n) => one.reply[..n].to_vec(),
            _ => Vec::new(),
        };
        want.push((o, reply));
    }
    let mut batched = Nf::new(Config::default());
    let (mut at, mut size) = (0, 1);
    while at < packets.len() {
        let end = (at + size).min(packets.len());
        let views: Vec<&[u8]> = packets[at..end].iter().map(Vec::as_slice).collect();
        let mut replies = vec![[0u8; 600]; views.len()];
        let mut outcomes = vec![Outcome::Drop; views.len()];
        batched.fw.handle_batch(
            Instant::from_millis(5),
            Hook::Forward,
            (batched.wan, batched.lan),
            &views,
            &mut replies,
            &mut outcomes,
        );
        for (k, (o, r)) in outcomes.iter().zip(&replies).enumerate() {
            let reply = match *o {
                Outcome::Reject(n) => r[..n].to_vec(),
                _ => Vec::new(),
            };
            assert_eq!((*o, reply), want[at + k], "packet {}", at + k);
        }
        (at, size) = (end, size % (2 * vtnt_fw::BATCH + 1) + 1);
    }
    assert_eq!(batched.fw.stats(), one.fw.stats());
    assert!(want.iter().any(|w| matches!(w.0, Outcome::Reject(_))));
}

/// `frame`'s Ethernet header from `src` to `dst` MAC with `ethertype`, then `payload`.
fn frame(dst: u8, src: u8, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![dst; 6];
    f.extend([src; 6]);
    f.extend(ethertype.to_be_bytes());
    f.extend(payload);
    f
}

#[test]
fn the_bridge_forwards_accepted_frames_and_arp_rejects_back_and_drops_the_rest() {
    let rules = parse::iptables_save("rules.v4", RULES).unwrap();
    let mut b = Bridge::new(
        Firewall::new(&rules, Config::default()).unwrap(),
        ["wan", "lan"],
    );
    let ssh = frame(2, 1, 0x0800, &tcp(OUTSIDE, INSIDE, 4000, 22, 0x02));
    let telnet = frame(2, 1, 0x0800, &tcp(OUTSIDE, INSIDE, 4001, 23, 0x02));
    let smtp = frame(2, 1, 0x0800, &tcp(OUTSIDE, INSIDE, 4002, 25, 0x02));
    let arp = frame(0xff, 1, 0x0806, &[0; 28]);
    let ipv6 = frame(2, 1, 0x86dd, &[0x60; 40]);
    let short = vec![0u8; 10];
    let frames: Vec<&[u8]> = vec![&ssh, &telnet, &smtp, &arp, &ipv6, &short];
    let sends = b.handle(Instant::from_millis(1), 0, &frames);
    // on by the other side, unchanged: the accepted SYN and the ARP, in their order
    assert_eq!(sends.on, vec![&ssh[..], &arp[..]]);
    // back by the side it came in: telnet's reset, from its destination MAC to its source
    assert_eq!(sends.back.len(), 1);
    let reset = sends.back[0];
    assert_eq!((&reset[..6], &reset[6..12]), (&[1u8; 6][..], &[2u8; 6][..]));
    assert_eq!(&reset[12..14], &[0x08, 0x00]);
    let r = reply::parse(&reset[14..]).unwrap();
    assert!(
        matches!(r.body, Body::Tcp { flags, .. } if flags & 0x04 != 0),
        "{r:?}"
    );
    let st = b.stats();
    assert_eq!((st.arp, st.other, st.malformed), (1, 1, 1));
    // the SYN-ACK of the accepted connection crosses back as established
    let syn_ack = frame(1, 2, 0x0800, &tcp(INSIDE, OUTSIDE, 22, 4000, 0x12));
    assert_eq!(
        b.handle(Instant::from_millis(2), 1, &[&syn_ack]).on.len(),
        1
    );

    // a driver forwards through the bridge, which counts what came in, what its links
    // took and what they refused: here side 0's link refuses one frame of each send
    let mut sent = Vec::new();
    b.forward(Instant::from_millis(3), 0, &frames, |to, f| {
        sent.push((to, f.len()));
        usize::from(to == 0 && !f.is_empty()) + usize::from(to == 1)
    });
    assert_eq!(sent, vec![(1, 2), (0, 1)]);
    let st = b.stats();
    assert_eq!(st.received, [6, 0]);
    // two went on, one of them refused; telnet's reset refused too
    assert_eq!((st.forwarded, st.send_errors), (1, 2));
    assert_eq!((st.arp, st.other, st.malformed), (2, 2, 2));
    b.oversize(1, 3);
    assert_eq!((b.stats().received, b.stats().malformed), ([6, 3], 5));
}
