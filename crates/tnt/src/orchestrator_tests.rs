//! Orchestrator tests against a tiny scripted network (hand-made records per measurement).

use super::*;
use crate::classify::{Role, Trigger, TunnelClass};
use crate::reveal::{RevealMethod, RevealStatus};
use crate::testutil::*;
use alloc::string::String;
use alloc::vec;
use vtnt_record::Hop;

/// Scripted answers: traces by destination, echo-reply TTLs by address.
struct Net {
    traces: Vec<(&'static str, Vec<Hop>)>,
    er: Vec<(&'static str, u8)>,
    measurements: Vec<Measurement>,
}

impl Net {
    fn answer(&mut self, measurement: &Measurement) -> Record {
        self.measurements.push(measurement.clone());
        match measurement {
            Measurement::Trace(o) => {
                let hops = self
                    .traces
                    .iter()
                    .find(|(d, _)| ip(d) == o.dst)
                    .map(|(_, h)| {
                        h.iter()
                            .filter(|h| h.probe_ttl >= o.first_ttl)
                            .cloned()
                            .collect::<Vec<Hop>>()
                    })
                    .unwrap_or_default();
                let mut t = trace("0.0.0.0", &hops);
                t.dst = o.dst;
                Record::Trace(t)
            }
            Measurement::Ping(o) => {
                let ttls: Vec<u8> = self
                    .er
                    .iter()
                    .filter(|(a, _)| ip(a) == o.dst)
                    .map(|(_, t)| *t)
                    .collect();
                let mut p = ping("0.0.0.0", &ttls);
                p.dst = o.dst;
                for r in &mut p.responses {
                    r.from = o.dst;
                }
                Record::Ping(p)
            }
        }
    }
    fn run(&mut self, tnt: &mut Tnt) -> Vec<TntResult> {
        self.run_with(tnt, |_, _| {})
    }
    /// As `run`, with `edit` changing each record before TNT sees it.
    fn run_with(
        &mut self,
        tnt: &mut Tnt,
        mut edit: impl FnMut(&Measurement, &mut Record),
    ) -> Vec<TntResult> {
        let mut out = Vec::new();
        for _ in 0..1000 {
            let measurements: Vec<_> = core::iter::from_fn(|| tnt.poll_measurement()).collect();
            for (tag, measurement) in measurements {
                let mut rec = self.answer(&measurement);
                edit(&measurement, &mut rec);
                tnt.handle_record(tag, rec);
            }
            out.extend(core::iter::from_fn(|| tnt.poll_result()));
            if tnt.is_idle() {
                return out;
            }
        }
        panic!("campaign did not finish");
    }
}

fn hop(ttl: u8, addr: &str, ret: u8) -> Hop {
    te(ttl, addr, 255 - ret + 1, 1)
}

/// VP - A(1) - B(2, ingress) - [L1 L2 L3 hidden] - E(3, egress, FRPLA 3) - D(4).
fn php_net() -> Net {
    Net {
        traces: vec![
            (
                "10.0.9.1",
                vec![
                    hop(1, "10.0.0.1", 1),
                    hop(2, "10.0.0.2", 2),
                    hop(3, "10.0.0.5", 6),
                    echo(4, "10.0.9.1", 57),
                ],
            ),
            (
                "10.0.9.2",
                vec![
                    hop(1, "10.0.0.1", 1),
                    hop(2, "10.0.0.2", 2),
                    hop(3, "10.0.0.5", 6),
                    echo(4, "10.0.9.2", 57),
                ],
            ),
            // DPR: E's address is not label-switched, every LSR shows.
            (
                "10.0.0.5",
                vec![
                    hop(1, "10.0.0.1", 1),
                    hop(2, "10.0.0.2", 2),
                    hop(3, "10.0.1.1", 3),
                    hop(4, "10.0.1.2", 4),
                    hop(5, "10.0.1.3", 5),
                    echo(6, "10.0.0.5", 250),
                ],
            ),
        ],
        er: vec![
            ("10.0.0.1", 255),
            ("10.0.0.2", 254),
            ("10.0.0.5", 250),
            ("10.0.9.1", 60),
            ("10.0.1.1", 253),
            ("10.0.1.2", 252),
            ("10.0.1.3", 251),
        ],
        measurements: Vec::new(),
    }
}

#[test]
fn default_config_is_tnt() {
    let c = TntConfig::default();
    assert_eq!(c.trace.method, Method::IcmpParis);
    assert_eq!((c.trace.attempts, c.trace.gaplimit), (3, 5));
    assert_eq!(c.trace.wait, Duration::from_secs(1));
    assert_eq!(c.ping.count, 1);
    assert_eq!(c.validate(), Ok(()));
    let bad = TntConfig {
        max_brpr_steps: 0,
        ..TntConfig::default()
    };
    assert_eq!(Tnt::new(bad).unwrap_err().option, "max-brpr-steps");
}

#[test]
fn php_tunnel_revealed_by_dpr_and_cached() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    tnt.add_target(ip("10.0.9.2"));
    let results = net.run(&mut tnt);
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(r.tunnels.len(), 1, "{:#?}", r.tunnels);
        let t = &r.tunnels[0];
        assert_eq!(t.class, TunnelClass::InvisiblePhp);
        assert_eq!(t.trigger, Some(Trigger::Frpla));
        assert_eq!(
            (t.ingress, t.egress),
            (Some(ip("10.0.0.2")), Some(ip("10.0.0.5")))
        );
        assert_eq!(
            t.lsrs,
            vec![
                Some(ip("10.0.1.1")),
                Some(ip("10.0.1.2")),
                Some(ip("10.0.1.3"))
            ]
        );
        let rev = t.revelation.unwrap();
        assert_eq!(
            (rev.status, rev.method),
            (RevealStatus::Complete, Some(RevealMethod::Dpr))
        );
        // Path: A, B, H1..H3, E, D.
        let addrs: Vec<_> = r.path.iter().map(|e| e.addr.unwrap()).collect();
        assert_eq!(
            addrs,
            vec![
                ip("10.0.0.1"),
                ip("10.0.0.2"),
                ip("10.0.1.1"),
                ip("10.0.1.2"),
                ip("10.0.1.3"),
                ip("10.0.0.5"),
                r.target
            ]
        );
        assert!(r.path[2].revealed.is_some() && r.path[1].revealed.is_none());
        assert_eq!(r.path[3].annotation.mpls[0].role, Role::Lsr);
        assert_eq!(r.path[3].annotation.er, Some(252));
        assert_eq!(r.hops[1].mpls[0].role, Role::Ingress);
        assert_eq!(r.hops[2].mpls[0].role, Role::Egress);
        assert_eq!(r.hops[2].frpla, 3);
    }
    assert!(!results[0].tunnels[0].revelation.unwrap().cached);
    assert!(results[1].tunnels[0].revelation.unwrap().cached);
    // One revelation trace only, and every address pinged once.
    let traces = net
        .measurements
        .iter()
        .filter(|j| matches!(j, Measurement::Trace(_)))
        .count();
    assert_eq!(traces, 3);
    let mut pinged: Vec<IpAddr> = net
        .measurements
        .iter()
        .filter_map(|j| match j {
            Measurement::Ping(o) => Some(o.dst),
            _ => None,
        })
        .collect();
    let n = pinged.len();
    pinged.sort();
    pinged.dedup();
    assert_eq!(n, pinged.len());
    let s = tnt.summary();
    assert_eq!(
        (s.targets, s.targets_done, s.invisible_php, s.lsrs_revealed),
        (2, 2, 1, 3)
    );
    assert_eq!(s.revelation_cache_hits, 1);
    assert!(s.probes() > 0);
}

#[test]
fn revelation_trace_starts_two_hops_before_the_ingress() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    net.run(&mut tnt);
    let Measurement::Trace(o) = &net
        .measurements
        .iter()
        .filter(|j| matches!(j, Measurement::Trace(_)))
        .nth(1)
        .unwrap()
    else {
        unreachable!()
    };
    assert_eq!((o.dst, o.first_ttl), (ip("10.0.0.5"), 1));
}

#[test]
fn seed_trace_skips_the_initial_trace() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    let Record::Trace(seed) = net.answer(&Measurement::Trace(TraceOptions::new(ip("10.0.9.1"))))
    else {
        unreachable!()
    };
    net.measurements.clear();
    tnt.add_seed_trace(seed);
    let r = net.run(&mut tnt);
    assert_eq!(r[0].tunnels.len(), 1);
    assert!(net
        .measurements
        .iter()
        .all(|j| !matches!(j, Measurement::Trace(o) if o.dst == ip("10.0.9.1"))));
}

#[test]
fn unrevealed_trigger_is_not_a_tunnel() {
    let mut net = php_net();
    // The egress trace shows nothing between B and E.
    net.traces[2].1 = vec![
        hop(1, "10.0.0.1", 1),
        hop(2, "10.0.0.2", 2),
        echo(3, "10.0.0.5", 250),
    ];
    let mut tnt = Tnt::new(TntConfig {
        walk_back: 0,
        ..TntConfig::default()
    })
    .unwrap();
    tnt.add_target(ip("10.0.9.1"));
    let r = net.run(&mut tnt);
    assert!(r[0].tunnels.is_empty());
    assert_eq!(r[0].unrevealed.len(), 1);
    assert_eq!(
        r[0].unrevealed[0].status,
        Some(RevealStatus::Failed(
            crate::reveal::RevealFailure::NothingRevealed
        ))
    );
}

#[test]
fn revelation_whose_probes_could_not_be_sent_is_counted_apart() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig {
        walk_back: 0,
        ..TntConfig::default()
    })
    .unwrap();
    tnt.add_target(ip("10.0.9.1"));
    // Every revelation trace (towards the egress) fails to send: ENETUNREACH.
    let r = net.run_with(&mut tnt, |measurement, rec| match (measurement, rec) {
        (Measurement::Trace(o), Record::Trace(t)) if o.dst == ip("10.0.0.5") => {
            t.hops.clear();
            t.stop_reason = vtnt_record::StopReason::Error;
            t.stop_data = 101;
        }
        _ => {}
    });
    assert!(r[0].tunnels.is_empty());
    assert_eq!(
        r[0].unrevealed[0].status,
        Some(RevealStatus::Failed(
            crate::reveal::RevealFailure::SendError
        ))
    );
    let s = tnt.summary();
    assert_eq!((s.unrevealed, s.reveal_send_errors), (0, 1));
}

#[test]
fn reveal_off_reports_candidates_untested() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig {
        reveal: false,
        ..TntConfig::default()
    })
    .unwrap();
    tnt.add_target(ip("10.0.9.1"));
    let r = net.run(&mut tnt);
    assert_eq!(r[0].unrevealed[0].status, None);
    assert_eq!(
        net.measurements
            .iter()
            .filter(|j| matches!(j, Measurement::Trace(_)))
            .count(),
        1
    );
}

#[test]
fn refused_initial_trace_gives_an_error_result() {
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target("2001:db8::1".parse().unwrap());
    let (tag, _) = tnt.poll_measurement().unwrap();
    tnt.handle_measurement_error(tag, MeasurementError::Ipv6Unsupported);
    let r = tnt.poll_result().unwrap();
    assert_eq!(
        r.error,
        Some(TntError::Measurement(MeasurementError::Ipv6Unsupported))
    );
    assert!(tnt.is_idle());
}

#[test]
fn a_ping_record_for_the_initial_trace_says_it_is_not_a_trace() {
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    let (tag, measurement) = tnt.poll_measurement().unwrap();
    assert!(matches!(measurement, Measurement::Trace(_)));
    tnt.handle_record(tag, Record::Ping(ping("10.0.9.1", &[64])));
    let r = tnt.poll_result().unwrap();
    assert_eq!(r.error, Some(TntError::NotATrace));
    assert!(tnt.is_idle());
}

#[test]
fn every_invisible_tunnel_of_a_path_is_revealed() {
    // Two PHP tunnels: B -[L1 L2 L3]- E, then F -[M1 M2 M3]- G.
    let mut net = Net {
        traces: vec![
            (
                "10.0.9.1",
                vec![
                    hop(1, "10.0.0.2", 1),
                    hop(2, "10.0.0.5", 5),
                    hop(3, "10.0.0.6", 6),
                    hop(4, "10.0.0.7", 10),
                    echo(5, "10.0.9.1", 54),
                ],
            ),
            (
                "10.0.0.5",
                vec![
                    hop(1, "10.0.0.2", 1),
                    hop(2, "10.0.1.1", 2),
                    hop(3, "10.0.1.2", 3),
                    hop(4, "10.0.1.3", 4),
                    echo(5, "10.0.0.5", 251),
                ],
            ),
            (
                "10.0.0.7",
                vec![
                    hop(3, "10.0.0.6", 6),
                    hop(4, "10.0.2.1", 7),
                    hop(5, "10.0.2.2", 8),
                    hop(6, "10.0.2.3", 9),
                    echo(7, "10.0.0.7", 246),
                ],
            ),
        ],
        er: vec![("10.0.0.5", 251), ("10.0.0.6", 250), ("10.0.0.7", 246)],
        measurements: Vec::new(),
    };
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    let r = net.run(&mut tnt);
    let lsrs: Vec<usize> = r[0].tunnels.iter().map(|t| t.lsrs.len()).collect();
    assert_eq!(lsrs, vec![3, 3]);
    let text: String = crate::text::dump(&r[0]);
    assert!(text.contains("H1"), "{text}");
}

#[test]
fn walk_back_finds_a_tunnel_ending_before_the_trigger() {
    // B -[L1 L2 L3]- E(<64,64>, pushes its replies without propagation: no trigger);
    // F after E shows FRPLA 3 (its replies cross the hidden hops in IP).
    let mut net = Net {
        traces: vec![
            (
                "10.0.9.1",
                vec![
                    hop(1, "10.0.0.1", 1),
                    hop(2, "10.0.0.2", 2),
                    te(3, "10.0.0.5", 62, 1),
                    hop(4, "10.0.0.6", 7),
                    echo(5, "10.0.9.1", 57),
                ],
            ),
            // To F from B: E then F, nothing between E and F.
            (
                "10.0.0.6",
                vec![
                    hop(1, "10.0.0.1", 1),
                    hop(2, "10.0.0.2", 2),
                    te(3, "10.0.0.5", 62, 1),
                    echo(4, "10.0.0.6", 249),
                ],
            ),
            (
                "10.0.0.5",
                vec![
                    hop(1, "10.0.0.1", 1),
                    hop(2, "10.0.0.2", 2),
                    hop(3, "10.0.1.1", 3),
                    hop(4, "10.0.1.2", 4),
                    hop(5, "10.0.1.3", 5),
                    echo(6, "10.0.0.5", 62),
                ],
            ),
        ],
        er: vec![("10.0.0.5", 62), ("10.0.0.6", 249)],
        measurements: Vec::new(),
    };
    // (the blind-spot candidate would test B-E directly: off, to test the walk back)
    let mut config = TntConfig::default();
    config.classify.blind_spots = false;
    let mut tnt = Tnt::new(config.clone()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    let r = net.run(&mut tnt);
    assert_eq!(r[0].tunnels.len(), 1, "{}", crate::text::dump(&r[0]));
    let t = &r[0].tunnels[0];
    assert_eq!(
        (t.ingress, t.egress),
        (Some(ip("10.0.0.2")), Some(ip("10.0.0.5")))
    );
    assert_eq!(t.lsrs.len(), 3);
    assert_eq!(t.trigger, Some(Trigger::Frpla));
    assert_eq!(
        r[0].unrevealed.len(),
        1,
        "the trigger's own pair stays reported"
    );
    // sc_tnt's behaviour: no walk back.
    let mut tnt = Tnt::new(TntConfig {
        walk_back: 0,
        ..config
    })
    .unwrap();
    tnt.add_target(ip("10.0.9.1"));
    assert!(net.run(&mut tnt)[0].tunnels.is_empty());
}

#[test]
fn every_job_keeps_the_users_userid() {
    let mut net = php_net();
    let mut config = TntConfig::default();
    config.trace.userid = 4242;
    config.ping.userid = 4243;
    let mut tnt = Tnt::new(config).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    tnt.add_target(ip("10.0.9.2"));
    net.run(&mut tnt);
    assert!(net
        .measurements
        .iter()
        .any(|j| matches!(j, Measurement::Ping(_))));
    assert!(net.measurements.len() > 2, "revelation traces too");
    for j in &net.measurements {
        match j {
            Measurement::Trace(o) => assert_eq!(o.userid, 4242),
            Measurement::Ping(o) => assert_eq!(o.userid, 4243),
        }
    }
}

#[test]
fn every_ping_and_revelation_trace_comes_back_with_its_role() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    tnt.add_target(ip("10.0.9.2"));
    let r = net.run(&mut tnt);
    let measured: Vec<&RoleRecord> = r.iter().flat_map(|r| &r.measurements).collect();
    // every measurement but the two initial traces, once
    assert_eq!(measured.len(), net.measurements.len() - 2);
    let pings = |purpose| {
        measured
            .iter()
            .filter(|m| m.role == RecordRole::Ping { purpose })
            .count()
    };
    assert_eq!(pings(PingPurpose::Hop), 5, "A, B, E and the two targets");
    assert_eq!(pings(PingPurpose::Revealed), 3, "the three LSRs");
    let reveals: Vec<&RecordRole> = measured
        .iter()
        .map(|m| &m.role)
        .filter(|r| matches!(r, RecordRole::Reveal { .. }))
        .collect();
    assert_eq!(
        reveals,
        [&RecordRole::Reveal {
            anchor: ip("10.0.0.2"),
            egress: ip("10.0.0.5"),
            trigger: Trigger::Frpla,
            method: RevealMethod::Dpr,
            step: 1,
        }],
        "one DPR trace, cached for the second target"
    );
    // The target that asked first holds the shared measurements.
    assert!(r.iter().all(|r| !r.measurements.is_empty()));
}

#[test]
fn records_read_back_stand_in_for_measurements() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    let first = net.run(&mut tnt).remove(0);
    let sent = tnt.summary().probes();
    assert!(sent > 0);

    let mut again = Tnt::new(TntConfig::default()).unwrap();
    for m in &first.measurements {
        match (&m.role, &m.record) {
            (RecordRole::Ping { .. }, Record::Ping(p)) => again.add_ping(p),
            (RecordRole::Reveal { anchor, egress, .. }, Record::Trace(t)) => {
                again.add_revelation_trace(*anchor, *egress, t.clone())
            }
            _ => unreachable!(),
        }
    }
    again.add_seed_trace(first.trace.clone().unwrap());
    net.measurements.clear();
    let second = net.run(&mut again).remove(0);
    assert!(
        net.measurements.is_empty(),
        "probed again: {:?}",
        net.measurements
    );
    assert_eq!(again.summary().probes(), 0);
    assert_eq!(
        second, first,
        "the same result, records and probe count included"
    );
}

#[test]
fn a_campaign_stopped_early_gives_its_unfinished_targets_as_far_as_they_went() {
    let mut net = php_net();
    let mut tnt = Tnt::new(TntConfig::default()).unwrap();
    tnt.add_target(ip("10.0.9.1"));
    tnt.add_target(ip("10.0.9.2"));
    // the initial traces and pings are answered, the revelation trace never is
    for _ in 0..10 {
        let measurements: Vec<_> = core::iter::from_fn(|| tnt.poll_measurement()).collect();
        for (tag, measurement) in measurements {
            if matches!(&measurement, Measurement::Trace(o) if o.dst == ip("10.0.0.5")) {
                continue;
            }
            let rec = net.answer(&measurement);
            tnt.handle_record(tag, rec);
        }
    }
    // a third target still tracing: nothing of it has finished
    tnt.add_target(ip("10.0.9.3"));
    assert!(tnt.poll_result().is_none());
    let rs = tnt.take_unfinished();
    assert_eq!(rs.len(), 2);
    for r in &rs {
        assert!(r.incomplete);
        assert!(r.trace.is_some());
        assert_eq!(r.unrevealed.len(), 1, "{:?}", r.unrevealed);
        assert_eq!(r.unrevealed[0].status, Some(RevealStatus::Running));
    }
    let pings = |r: &TntResult| {
        r.measurements
            .iter()
            .filter(|m| matches!(m.role, RecordRole::Ping { .. }))
            .count()
    };
    // every hop address pinged once, with the first target that asked (the second
    // target's own address is its own)
    assert_eq!((pings(&rs[0]), pings(&rs[1])), (4, 1));
    assert!(
        tnt.take_unfinished().is_empty(),
        "each target is given once"
    );
    let text = crate::dump(&rs[0]);
    assert!(
        text.ends_with(
            "incomplete: the run stopped before this target's pings and revelations were over\n"
        ),
        "{text}"
    );
}
