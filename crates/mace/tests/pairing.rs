//! Pairing host-side stamps with probes, case by case and as a property: every probe and
//! reply paired, none misattributed, with losses, duplicates, reordering and reused
//! identities; and the correction's arithmetic and refusals.

mod common;

use common::{probe, reply, Kind};
use vtnt_mace::{correct, pair, Correction, Dir, Event, Fate, ToolProbe};

fn out(stamp_ns: u64, packet: &[u8]) -> Event<'_> {
    Event {
        dir: Dir::Out,
        stamp_ns,
        packet,
    }
}

fn inb(stamp_ns: u64, packet: &[u8]) -> Event<'_> {
    Event {
        dir: Dir::In,
        stamp_ns,
        packet,
    }
}

const KINDS: [Kind; 4] = [
    Kind::Icmp(3),
    Kind::Udp(0x4444),
    Kind::TcpSyn(1000),
    Kind::TcpAck(77),
];

#[test]
fn each_kind_pairs_with_its_direct_answer_and_with_a_quote() {
    for kind in KINDS {
        for from_router in [false, true] {
            let (p, r) = (probe(kind), reply(kind, from_router));
            let got = pair(&[out(100, &p), inb(350, &r)]);
            assert_eq!(
                got.fates,
                [Fate::Probe(0), Fate::Paired(0)],
                "{kind:?} router={from_router}"
            );
            assert_eq!(got.probes[0].wire_rtt_ns(), Some(250));
        }
    }
}

#[test]
fn another_probes_reply_is_not_taken() {
    for (a, b) in [
        (Kind::Icmp(1), Kind::Icmp(2)),
        (Kind::Udp(0x10), Kind::Udp(0x20)),
        (Kind::TcpSyn(10), Kind::TcpSyn(20)),
        (Kind::TcpAck(10), Kind::TcpAck(20)),
    ] {
        let (p, r) = (probe(a), reply(b, false));
        assert_eq!(
            pair(&[out(1, &p), inb(2, &r)]).fates,
            [Fate::Probe(0), Fate::Unmatched],
            "{a:?}"
        );
    }
}

#[test]
fn a_reply_before_its_probe_is_unmatched_and_events_are_sorted_by_stamp() {
    let (p, r) = (probe(Kind::Icmp(1)), reply(Kind::Icmp(1), false));
    assert_eq!(
        pair(&[out(10, &p), inb(5, &r)]).fates,
        [Fate::Probe(0), Fate::Unmatched]
    );
    // given in the wrong order, stamped in the right one
    assert_eq!(
        pair(&[inb(15, &r), out(10, &p)]).fates,
        [Fate::Paired(0), Fate::Probe(0)]
    );
}

#[test]
fn a_second_reply_is_a_duplicate_and_keeps_the_first_stamp() {
    let (p, r) = (probe(Kind::Udp(9)), reply(Kind::Udp(9), true));
    let got = pair(&[out(10, &p), inb(20, &r), inb(30, &r)]);
    assert_eq!(
        got.fates,
        [Fate::Probe(0), Fate::Paired(0), Fate::Duplicate]
    );
    assert_eq!(got.probes[0].reply, Some((20, 1)));
}

#[test]
fn a_reused_identity_in_flight_makes_its_replies_ambiguous() {
    let (p, r) = (probe(Kind::Icmp(4)), reply(Kind::Icmp(4), false));
    let got = pair(&[out(10, &p), out(20, &p), inb(30, &r), inb(40, &r)]);
    assert_eq!(got.fates[2..], [Fate::Ambiguous, Fate::Ambiguous]);
    assert!(got.probes.iter().all(|s| s.reply.is_none() && s.contested));
    // answered before the identity came back: the first is paired, the next one's
    // reply could be a late copy of the first's
    let got = pair(&[out(10, &p), inb(15, &r), out(20, &p), inb(30, &r)]);
    assert_eq!(
        got.fates,
        [
            Fate::Probe(0),
            Fate::Paired(0),
            Fate::Probe(1),
            Fate::Ambiguous
        ]
    );
}

#[test]
fn what_is_no_probe_or_no_reply_is_said_so() {
    let echo_reply = reply(Kind::Icmp(1), false);
    let junk = [0x45, 0, 0];
    let got = pair(&[
        out(1, &echo_reply),
        out(2, &junk),
        inb(3, &junk),
        inb(4, &probe(Kind::Icmp(1))),
    ]);
    assert_eq!(
        got.fates,
        [
            Fate::NotAProbe,
            Fate::NotAProbe,
            Fate::Unmatched,
            Fate::Unmatched
        ]
    );
    assert!(got.probes.is_empty());
}

#[test]
fn the_correction_is_the_runtime_rtt_less_the_host_round_trip() {
    let kinds = [
        Kind::Icmp(1),
        Kind::Icmp(2),
        Kind::Icmp(3),
        Kind::Icmp(4),
        Kind::Icmp(5),
    ];
    let p: Vec<_> = kinds.iter().map(|&k| probe(k)).collect();
    let r: Vec<_> = kinds.iter().map(|&k| reply(k, false)).collect();
    let events = [
        out(1_000, &p[0]),
        inb(1_400, &r[0]),
        out(2_000, &p[1]),
        out(3_000, &p[2]),
        out(4_000, &p[3]),
        out(4_500, &p[3]), // reused: its reply is ambiguous
        inb(4_900, &r[3]),
    ];
    let pairing = pair(&events);
    let key = |i: usize| vtnt_mace::key::probe(&p[i]).unwrap().key;
    let runtime = [
        ToolProbe {
            key: key(0),
            rtt_ns: Some(450),
        },
        ToolProbe {
            key: key(1),
            rtt_ns: Some(900),
        },
        ToolProbe {
            key: key(2),
            rtt_ns: None,
        },
        ToolProbe {
            key: key(3),
            rtt_ns: Some(990),
        },
        ToolProbe {
            key: key(4),
            rtt_ns: Some(10),
        },
    ];
    assert_eq!(
        correct(&pairing, &runtime),
        [
            Correction::Corrected {
                raw_ns: 450,
                wire_ns: 400,
                overhead_ns: 50
            },
            Correction::NoHostReply,
            Correction::NoReply,
            Correction::Ambiguous,
            Correction::NotSeenOnHost,
        ]
    );
}

/// One probe of the property test and what became of it on the wire.
struct Case {
    kind: Kind,
    sent: u64,
    /// The stamps of its replies (none: lost; more than one: duplicated).
    replies: Vec<u64>,
    from_router: bool,
}

fn cases(rng: &mut vtnt_testkit::Rng, n: usize) -> Vec<Case> {
    (0..n)
        .map(|i| {
            let id = i as u16 * 2 + 2; // distinct per kind, odd checksums stay distinct
            let kind = match rng.below(4) {
                0 => Kind::Icmp(id),
                1 => Kind::Udp(id),
                2 => Kind::TcpSyn(u32::from(id) << 8),
                _ => Kind::TcpAck(u32::from(id) << 8),
            };
            let sent = rng.below(1_000_000) as u64;
            let copies = [0, 1, 1, 1, 1, 2, 3][rng.below(7)];
            let replies = (0..copies)
                .map(|_| sent + 1 + rng.below(500_000) as u64)
                .collect();
            Case {
                kind,
                sent,
                replies,
                from_router: rng.below(2) == 0,
            }
        })
        .collect()
}

/// Each case's probe and replies as (direction, stamp, datagram, the case it belongs to).
fn packets(cases: &[Case]) -> Vec<(Dir, u64, Vec<u8>, usize)> {
    let mut packets = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        packets.push((Dir::Out, c.sent, probe(c.kind), i));
        for &at in &c.replies {
            packets.push((Dir::In, at, reply(c.kind, c.from_router), i));
        }
    }
    packets
}

fn events(packets: &[(Dir, u64, Vec<u8>, usize)]) -> Vec<Event<'_>> {
    packets
        .iter()
        .map(|(dir, stamp_ns, b, _)| Event {
            dir: *dir,
            stamp_ns: *stamp_ns,
            packet: b,
        })
        .collect()
}

#[test]
fn property_every_probe_and_reply_paired_none_misattributed() {
    let seed = vtnt_testkit::seed("VTNT_MACE_SEED", || 0x3ace);
    let mut rng = vtnt_testkit::Rng::new(seed);
    for round in 0..200 {
        let n = 1 + rng.below(60);
        let cases = cases(&mut rng, n);
        // (event, the probe it is or answers)
        let mut packets = packets(&cases);
        // the capture may hand them over in any order
        for i in (1..packets.len()).rev() {
            packets.swap(i, rng.below(i + 1));
        }
        let events = events(&packets);
        let got = pair(&events);
        assert_eq!(got.probes.len(), cases.len(), "round {round}");
        for (e, fate) in got.fates.iter().enumerate() {
            let truth = packets[e].3;
            let c = &cases[truth];
            match *fate {
                Fate::Probe(p) => assert_eq!(got.probes[p].event, e),
                Fate::Paired(p) => {
                    assert_eq!(
                        got.probes[p].event,
                        packets
                            .iter()
                            .position(|x| x.0 == Dir::Out && x.3 == truth)
                            .unwrap(),
                        "round {round}: misattributed"
                    );
                    assert_eq!(
                        Some(packets[e].1),
                        c.replies.iter().min().copied(),
                        "round {round}: not the first reply"
                    );
                }
                Fate::Duplicate => assert!(c.replies.len() > 1, "round {round}"),
                other => panic!("round {round}: event {e} of {:?} is {other:?}", c.kind),
            }
        }
        for s in &got.probes {
            let c = &cases[packets[s.event].3];
            assert_eq!(
                s.reply.map(|r| r.0),
                c.replies.iter().min().copied(),
                "round {round}: {:?}",
                c.kind
            );
            assert!(!s.contested);
        }
    }
}

#[test]
fn property_reused_identities_are_never_misattributed() {
    let seed = vtnt_testkit::seed("VTNT_MACE_SEED", || 0x3ace);
    let mut rng = vtnt_testkit::Rng::new(seed);
    for round in 0..200 {
        // few identities, so that many probes share one
        let n = 1 + rng.below(40);
        let mut cases = cases(&mut rng, n);
        for c in &mut cases {
            c.kind = match c.kind {
                Kind::Icmp(_) => Kind::Icmp(rng.below(3) as u16),
                Kind::Udp(_) => Kind::Udp(rng.below(3) as u16),
                Kind::TcpSyn(_) => Kind::TcpSyn(rng.below(3) as u32),
                Kind::TcpAck(_) => Kind::TcpAck(rng.below(3) as u32),
            };
        }
        let packets = packets(&cases);
        let events = events(&packets);
        let got = pair(&events);
        for (e, fate) in got.fates.iter().enumerate() {
            if let Fate::Paired(p) = *fate {
                assert_eq!(
                    packets[got.probes[p].event].3, packets[e].3,
                    "round {round}: misattributed"
                );
            }
        }
    }
}
