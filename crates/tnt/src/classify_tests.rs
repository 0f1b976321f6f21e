//! Unit tests of the classifier on hand-made paths.

use super::*;
use crate::path::Path;
use crate::testutil::*;
use alloc::collections::BTreeMap;
use alloc::vec;
use core::net::IpAddr;
use vtnt_record::{Hop, Trace};

/// A plain Cisco-like hop at `ttl` whose replies come back over `ret` hops.
fn plain(ttl: u8, addr: &str, ret: u8) -> Hop {
    te(ttl, addr, 255 - ret + 1, 1)
}

fn path_of(t: &Trace, er: &[(&str, u8)]) -> Path {
    let map: BTreeMap<IpAddr, u8> = er.iter().map(|&(a, t)| (ip(a), t)).collect();
    Path::from_trace(t, |a| map.get(&a).copied())
}

fn classify_default(t: &Trace, er: &[(&str, u8)]) -> Classification {
    classify(&path_of(t, er), &ClassifyOptions::default())
}

#[test]
fn mpls_free_path_has_nothing() {
    let t = trace(
        "10.0.0.5",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            plain(4, "10.0.0.4", 4),
            echo(5, "10.0.0.5", 60),
        ],
    );
    let er = [
        ("10.0.0.1", 255),
        ("10.0.0.2", 254),
        ("10.0.0.3", 253),
        ("10.0.0.4", 252),
    ];
    let c = classify_default(&t, &er);
    assert!(c.tunnels.is_empty());
    assert!(c.candidates.is_empty());
}

#[test]
fn explicit_tunnel_with_roles() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            lte(3, "10.0.0.3", 253, 1, 1),
            lte(4, "10.0.0.4", 252, 2, 1),
            plain(5, "10.0.0.5", 5),
            echo(6, "10.0.0.9", 59),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels.len(), 1);
    let tun = &c.tunnels[0];
    assert_eq!(tun.class, TunnelClass::Explicit);
    assert_eq!((tun.ingress, tun.egress), (Some(1), Some(4)));
    assert_eq!(tun.lsrs, vec![2, 3]);
    assert_eq!(c.roles(1).collect::<Vec<_>>(), vec![(0, Role::Ingress)]);
    assert_eq!(c.roles(3).collect::<Vec<_>>(), vec![(0, Role::Lsr)]);
    assert!(c.candidates.is_empty());
}

#[test]
fn explicit_tunnel_spans_an_unanswered_lsr() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            lte(2, "10.0.0.2", 254, 1, 1),
            lte(4, "10.0.0.4", 252, 3, 1),
            plain(5, "10.0.0.5", 5),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels.len(), 1);
    assert_eq!(c.tunnels[0].lsrs, vec![1, 3]);
    assert_eq!(c.tunnels[0].egress, Some(4));
}

#[test]
fn explicit_uhp_egress_answers_twice() {
    // The egress (TTL 4 and 5) first expires the label (LSE-TTL 1), then pops and
    // expires the IP-TTL, quoting the received label with LSE-TTL 2.
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            lte(3, "10.0.0.3", 253, 1, 1),
            lte(4, "10.0.0.4", 252, 2, 1),
            lte(5, "10.0.0.4", 252, 1, 2),
            plain(6, "10.0.0.6", 6),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels.len(), 1, "no opaque tunnel: {:?}", c.tunnels);
    let tun = &c.tunnels[0];
    assert_eq!(tun.class, TunnelClass::Explicit);
    assert_eq!(
        (tun.ingress, tun.egress, tun.egress_repeat),
        (Some(1), Some(4), Some(3))
    );
    assert_eq!(tun.lsrs, vec![2]);
    assert_eq!(c.roles(3).collect::<Vec<_>>(), vec![(0, Role::Egress)]);
    assert!(c.candidates.is_empty());
}

#[test]
fn labelled_lse_255_is_explicit() {
    let t = trace(
        "10.0.0.9",
        &[plain(1, "10.0.0.1", 1), lte(2, "10.0.0.2", 254, 1, 255)],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels[0].class, TunnelClass::Explicit);
}

#[test]
fn opaque_tunnel_and_mttl_candidate() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            lte(4, "10.0.0.4", 249, 1, 252),
            plain(5, "10.0.0.5", 8),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels.len(), 1);
    let tun = &c.tunnels[0];
    assert_eq!(tun.class, TunnelClass::Opaque);
    assert_eq!((tun.ingress, tun.egress), (Some(2), Some(3)));
    assert_eq!(tun.hidden_estimate, Some(3));
    assert_eq!(c.candidates.len(), 1);
    let cand = &c.candidates[0];
    assert_eq!(cand.trigger, Trigger::Mttl);
    assert_eq!((cand.anchor, cand.egress, cand.start_ttl), (2, 3, 1));
    assert_eq!(cand.opaque, Some(0));
}

#[test]
fn implicit_by_quoted_ttl() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            te(3, "10.0.0.3", 253, 1),
            te(4, "10.0.0.4", 252, 2),
            te(5, "10.0.0.5", 251, 3),
            plain(6, "10.0.0.6", 6),
            echo(7, "10.0.0.9", 58),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels.len(), 1);
    let tun = &c.tunnels[0];
    assert_eq!(
        (tun.class, tun.evidence),
        (TunnelClass::Implicit, Evidence::Qttl)
    );
    assert_eq!((tun.ingress, tun.egress), (Some(1), Some(5)));
    assert_eq!(tun.lsrs, vec![2, 3, 4]);
    assert!(c.candidates.is_empty());
}

#[test]
fn implicit_by_uturn_run() {
    // LSRs at TTL 3 and 4 tunnel their time-exceeded to the egress (TTL 5) and back.
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3 + 4),
            plain(4, "10.0.0.4", 4 + 2),
            plain(5, "10.0.0.5", 5),
        ],
    );
    let er = [
        ("10.0.0.1", 255),
        ("10.0.0.2", 254),
        ("10.0.0.3", 253),
        ("10.0.0.4", 252),
        ("10.0.0.5", 251),
    ];
    let c = classify_default(&t, &er);
    assert_eq!(c.tunnels.len(), 1);
    let tun = &c.tunnels[0];
    assert_eq!(
        (tun.class, tun.evidence),
        (TunnelClass::Implicit, Evidence::Uturn)
    );
    assert_eq!((tun.ingress, tun.egress), (Some(1), Some(4)));
    assert_eq!(tun.lsrs, vec![2, 3]);
}

#[test]
fn uturns_of_alternating_sign_are_no_tunnel() {
    // Replies of one router returning over ECMP branches 2 hops apart: u-turns -2, +2, +2.
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            plain(4, "10.0.0.4", 4 + 2),
            plain(5, "10.0.0.5", 5 + 2),
            plain(6, "10.0.0.6", 6),
        ],
    );
    let er = [
        ("10.0.0.1", 255),
        ("10.0.0.2", 254),
        ("10.0.0.3", 253 - 2),
        ("10.0.0.4", 252),
        ("10.0.0.5", 251),
        ("10.0.0.6", 250),
    ];
    let c = classify_default(&t, &er);
    assert!(c.tunnels.is_empty(), "{c:?}");
    // without the shape rule, their absolute sum (6) marks a tunnel
    let loose = ClassifyOptions {
        uturn_shape: false,
        ..ClassifyOptions::default()
    };
    let c = classify(&path_of(&t, &er), &loose);
    assert_eq!(c.tunnels.len(), 1, "{c:?}");
    assert_eq!(c.tunnels[0].lsrs, vec![2, 3, 4]);
}

#[test]
fn small_uturn_run_is_ignored() {
    let t = trace(
        "10.0.0.9",
        &[plain(1, "10.0.0.1", 1), plain(2, "10.0.0.2", 4)],
    );
    let er = [("10.0.0.1", 255), ("10.0.0.2", 254)];
    let c = classify_default(&t, &er);
    assert!(c.tunnels.is_empty());
}

#[test]
fn frpla_candidate() {
    // Three LSRs hidden between TTL 3 and TTL 4: the egress answers over 7 hops.
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            plain(4, "10.0.0.4", 7),
            plain(5, "10.0.0.5", 9),
        ],
    );
    let er = [("10.0.0.4", 249), ("10.0.0.5", 247)];
    let c = classify_default(&t, &er);
    assert!(c.tunnels.is_empty());
    // TTL 5 has FRPLA 4, only 1 more than its ingress (TTL 4): no second candidate.
    assert_eq!(c.candidates.len(), 1);
    assert_eq!(c.candidates[0].trigger, Trigger::Frpla);
    assert_eq!((c.candidates[0].anchor, c.candidates[0].egress), (2, 3));
    assert_eq!(c.candidates[0].start_ttl, 1);
    assert!(c.candidates[0].anchor_is_ingress);
}

#[test]
fn absolute_frpla_tests_every_later_hop() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 6),
            plain(3, "10.0.0.3", 7),
        ],
    );
    let o = ClassifyOptions {
        frpla_relative: false,
        ..ClassifyOptions::default()
    };
    assert_eq!(classify(&path_of(&t, &[]), &o).candidates.len(), 2);
    assert_eq!(
        classify(&path_of(&t, &[]), &ClassifyOptions::default())
            .candidates
            .len(),
        1
    );
}

#[test]
fn rtla_wins_over_frpla() {
    // JunOS egress: te from 255 over 7 hops (FRPLA 3), er from 64 over 4 hops (RTLA 3).
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            plain(4, "10.0.0.4", 7),
        ],
    );
    let c = classify_default(&t, &[("10.0.0.4", 61)]);
    assert_eq!(c.candidates.len(), 1);
    assert_eq!(c.candidates[0].trigger, Trigger::Rtla);
    assert!(c.tunnels.is_empty(), "RTLA is not a u-turn");
}

#[test]
fn rtla_threshold_is_configurable() {
    let t = trace(
        "10.0.0.9",
        &[plain(1, "10.0.0.1", 1), plain(2, "10.0.0.2", 3)],
    );
    let p = path_of(&t, &[("10.0.0.2", 63)]);
    let th = Thresholds {
        rtla: 2,
        ..Thresholds::default()
    };
    let o = ClassifyOptions {
        thresholds: th,
        ..ClassifyOptions::default()
    };
    assert!(classify(&p, &o).candidates.is_empty());
    assert_eq!(
        classify(&p, &ClassifyOptions::default()).candidates.len(),
        1
    );
}

#[test]
fn duplicate_ip_candidate() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            plain(4, "10.0.0.6", 4),
            plain(5, "10.0.0.6", 5),
            echo(6, "10.0.0.9", 59),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.candidates.len(), 1);
    let cand = &c.candidates[0];
    assert_eq!(cand.trigger, Trigger::DupIp);
    assert_eq!((cand.anchor, cand.egress), (2, 4));
    assert_eq!(cand.start_ttl, 1);
}

#[test]
fn unanswered_ingress_falls_back_to_the_hop_before() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(4, "10.0.0.4", 9),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.candidates.len(), 1);
    assert_eq!(
        (c.candidates[0].anchor, c.candidates[0].anchor_is_ingress),
        (1, false)
    );
}

#[test]
fn brute_force_tests_every_pair() {
    let t = trace(
        "10.0.0.5",
        &[
            plain(1, "10.0.0.1", 1),
            plain(2, "10.0.0.2", 2),
            plain(3, "10.0.0.3", 3),
            echo(4, "10.0.0.5", 61),
        ],
    );
    let o = ClassifyOptions {
        brute_force: true,
        ..ClassifyOptions::default()
    };
    let c = classify(&path_of(&t, &[]), &o);
    let pairs: Vec<_> = c
        .candidates
        .iter()
        .map(|c| (c.anchor, c.egress, c.trigger))
        .collect();
    assert_eq!(
        pairs,
        vec![(0, 1, Trigger::BruteForce), (1, 2, Trigger::BruteForce)]
    );
}

#[test]
fn ingress_inside_explicit_tunnel_is_no_candidate() {
    let t = trace(
        "10.0.0.9",
        &[
            plain(1, "10.0.0.1", 1),
            lte(2, "10.0.0.2", 254, 1, 1),
            plain(3, "10.0.0.3", 9),
        ],
    );
    let c = classify_default(&t, &[]);
    assert_eq!(c.tunnels.len(), 1);
    assert!(
        c.candidates.is_empty(),
        "egress of an explicit tunnel: {:?}",
        c.candidates
    );
}
