//! Unit tests of revelation-trace reading and of the DPR/BRPR/buddy state machine.

use super::*;
use crate::testutil::*;
use alloc::vec;

fn addrs(r: &Revelation) -> Vec<Option<IpAddr>> {
    r.lsr_addrs().collect()
}

#[test]
fn reading_a_revelation_trace() {
    let t = trace(
        "10.0.1.4",
        &[
            te(1, "10.0.0.2", 254, 1),
            te(2, "10.0.0.3", 253, 1),
            te(3, "10.0.1.1", 252, 1),
            te(4, "10.0.1.2", 251, 1),
            echo(5, "10.0.1.4", 251),
        ],
    );
    let r = read_revelation(&t, ip("10.0.0.3"), true, ip("10.0.1.4"));
    let TraceReading::Revealed(h) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        h.iter()
            .map(|h| h.as_ref().unwrap().addr)
            .collect::<Vec<_>>(),
        [ip("10.0.1.1"), ip("10.0.1.2")]
    );
    // Anchor before an unanswered ingress: one more hop is the ingress.
    let r = read_revelation(&t, ip("10.0.0.2"), false, ip("10.0.1.4"));
    let TraceReading::Revealed(h) = r else {
        panic!("{r:?}")
    };
    assert_eq!(h.len(), 2);
    assert_eq!(
        read_revelation(&t, ip("10.9.9.9"), true, ip("10.0.1.4")),
        TraceReading::Failed(RevealFailure::IngressNotFound)
    );
    assert_eq!(
        read_revelation(&t, ip("10.0.0.3"), true, ip("10.0.1.5")),
        TraceReading::Failed(RevealFailure::TargetNotReached)
    );
    assert_eq!(
        read_revelation(&t, ip("10.0.1.2"), true, ip("10.0.1.4")),
        TraceReading::Failed(RevealFailure::NothingRevealed)
    );
}

#[test]
fn repeated_target_ends_the_span() {
    // UHP: the router after the egress shows twice; it is the target.
    let t = trace(
        "10.0.2.1",
        &[
            te(1, "10.0.0.3", 254, 1),
            te(2, "10.0.2.1", 253, 1),
            te(3, "10.0.2.1", 252, 1),
        ],
    );
    assert_eq!(
        read_revelation(&t, ip("10.0.0.3"), true, ip("10.0.2.1")),
        TraceReading::Failed(RevealFailure::NothingRevealed)
    );
}

#[test]
fn dpr_reveals_everything_at_once() {
    let mut r = Revelation::new(
        Subject {
            anchor: ip("10.0.0.3"),
            anchor_is_ingress: true,
            egress: ip("10.0.1.9"),
            trigger: Trigger::Frpla,
            start_ttl: 1,
        },
        true,
        32,
    );
    let req = r.poll_trace().unwrap();
    assert_eq!(
        req,
        TraceRequest {
            dst: ip("10.0.1.9"),
            first_ttl: 1,
            method: RevealMethod::Dpr,
            step: 1,
            retry: false,
        }
    );
    assert_eq!(r.poll_trace(), None, "one trace at a time");
    let t = trace(
        "10.0.1.9",
        &[
            te(1, "10.0.0.3", 255, 1),
            te(2, "10.0.1.1", 254, 1),
            te(3, "10.0.1.2", 253, 1),
            te(4, "10.0.1.3", 252, 1),
            echo(5, "10.0.1.9", 251),
        ],
    );
    r.handle_trace(Some(&t));
    assert_eq!(r.status, RevealStatus::Complete);
    assert_eq!(
        addrs(&r),
        vec![
            Some(ip("10.0.1.1")),
            Some(ip("10.0.1.2")),
            Some(ip("10.0.1.3"))
        ]
    );
    assert!(r
        .lsrs
        .iter()
        .all(|l| l.method == RevealMethod::Dpr && l.step == 1));
    assert_eq!(r.poll_trace(), None);
    assert_eq!((r.traces, r.probes), (1, 5));
}

#[test]
fn brpr_walks_back_to_the_ingress() {
    let (ing, l1, l2, l3, egr) = ("10.0.0.3", "10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.9");
    let mut r = Revelation::new(
        Subject {
            anchor: ip(ing),
            anchor_is_ingress: true,
            egress: ip(egr),
            trigger: Trigger::Rtla,
            start_ttl: 2,
        },
        true,
        32,
    );
    // Step 1: to the egress, the penultimate hop shows.
    assert_eq!(r.poll_trace().unwrap().dst, ip(egr));
    r.handle_trace(Some(&trace(
        egr,
        &[te(2, ing, 254, 1), te(3, l3, 253, 1), echo(4, egr, 60)],
    )));
    assert_eq!(r.status, RevealStatus::Running);
    // Step 2: to l3, l2 shows.
    assert_eq!(
        r.poll_trace().unwrap(),
        TraceRequest {
            dst: ip(l3),
            first_ttl: 2,
            method: RevealMethod::Brpr,
            step: 2,
            retry: false,
        }
    );
    r.handle_trace(Some(&trace(
        l3,
        &[te(2, ing, 254, 1), te(3, l2, 253, 1), echo(4, l3, 60)],
    )));
    // Step 3: to l2, l1 shows.
    assert_eq!(r.poll_trace().unwrap().dst, ip(l2));
    r.handle_trace(Some(&trace(
        l2,
        &[te(2, ing, 254, 1), te(3, l1, 253, 1), echo(4, l2, 60)],
    )));
    // Step 4: to l1, nothing new: complete.
    assert_eq!(r.poll_trace().unwrap().dst, ip(l1));
    r.handle_trace(Some(&trace(l1, &[te(2, ing, 254, 1), echo(3, l1, 60)])));
    assert_eq!(r.status, RevealStatus::Complete);
    assert_eq!(addrs(&r), vec![Some(ip(l1)), Some(ip(l2)), Some(ip(l3))]);
    let steps: Vec<_> = r.lsrs.iter().map(|l| (l.method, l.step)).collect();
    assert_eq!(
        steps,
        vec![
            (RevealMethod::Brpr, 3),
            (RevealMethod::Brpr, 2),
            (RevealMethod::Brpr, 1)
        ]
    );
    assert_eq!(r.traces, 4);
}

#[test]
fn brpr_blocked_is_incomplete() {
    let (ing, l3, egr) = ("10.0.0.3", "10.0.1.3", "10.0.1.9");
    let mut r = Revelation::new(
        Subject {
            anchor: ip(ing),
            anchor_is_ingress: true,
            egress: ip(egr),
            trigger: Trigger::Frpla,
            start_ttl: 1,
        },
        true,
        32,
    );
    r.poll_trace();
    r.handle_trace(Some(&trace(
        egr,
        &[te(2, ing, 254, 1), te(3, l3, 253, 1), echo(4, egr, 60)],
    )));
    r.poll_trace();
    r.handle_trace(Some(&trace(l3, &[te(2, ing, 254, 1)])));
    assert_eq!(
        r.status,
        RevealStatus::Incomplete(RevealFailure::TargetNotReached)
    );
    assert_eq!(addrs(&r), vec![Some(ip(l3))]);
}

#[test]
fn brpr_step_limit() {
    let (ing, l3, egr) = ("10.0.0.3", "10.0.1.3", "10.0.1.9");
    let mut r = Revelation::new(
        Subject {
            anchor: ip(ing),
            anchor_is_ingress: true,
            egress: ip(egr),
            trigger: Trigger::Frpla,
            start_ttl: 1,
        },
        true,
        1,
    );
    r.poll_trace();
    r.handle_trace(Some(&trace(
        egr,
        &[te(2, ing, 254, 1), te(3, l3, 253, 1), echo(4, egr, 60)],
    )));
    assert_eq!(r.status, RevealStatus::Running);
    r.poll_trace();
    r.handle_trace(Some(&trace(
        l3,
        &[te(2, ing, 254, 1), te(3, "10.0.1.2", 1, 1), echo(4, l3, 1)],
    )));
    assert_eq!(r.status, RevealStatus::Incomplete(RevealFailure::StepLimit));
}

#[test]
fn nothing_revealed_fails() {
    let mut r = Revelation::new(
        Subject {
            anchor: ip("10.0.0.3"),
            anchor_is_ingress: true,
            egress: ip("10.0.0.4"),
            trigger: Trigger::Frpla,
            start_ttl: 1,
        },
        true,
        32,
    );
    r.poll_trace();
    r.handle_trace(Some(&trace(
        "10.0.0.4",
        &[te(1, "10.0.0.3", 254, 1), echo(2, "10.0.0.4", 60)],
    )));
    assert_eq!(
        r.status,
        RevealStatus::Failed(RevealFailure::NothingRevealed)
    );
    assert!(r.lsrs.is_empty());
    assert_eq!(r.poll_trace(), None);
}

#[test]
fn buddy_for_duplicate_ip() {
    assert_eq!(
        buddies(ip("10.0.2.1")),
        vec![ip("10.0.2.2"), ip("10.0.2.0")]
    );
    assert_eq!(
        buddies(ip("10.0.2.2")),
        vec![ip("10.0.2.1"), ip("10.0.2.3")]
    );
    assert_eq!(buddies(ip("10.0.2.4")), vec![ip("10.0.2.5")]);
    assert_eq!(buddies(ip("10.0.2.7")), vec![ip("10.0.2.6")]);

    let (ing, next) = ("10.0.0.3", "10.0.2.1");
    let mut r = Revelation::new(
        Subject {
            anchor: ip(ing),
            anchor_is_ingress: true,
            egress: ip(next),
            trigger: Trigger::DupIp,
            start_ttl: 1,
        },
        true,
        32,
    );
    // First buddy (/30) does not exist: target not reached; the /31 one is the egress.
    assert_eq!(r.poll_trace().unwrap().dst, ip("10.0.2.2"));
    r.handle_trace(Some(&trace("10.0.2.2", &[te(1, ing, 254, 1)])));
    assert_eq!(r.status, RevealStatus::Running);
    assert_eq!(r.poll_trace().unwrap().dst, ip("10.0.2.0"));
    r.handle_trace(Some(&trace(
        "10.0.2.0",
        &[
            te(1, ing, 254, 1),
            te(2, "10.0.1.1", 253, 1),
            echo(3, "10.0.2.0", 60),
        ],
    )));
    assert_eq!(r.status, RevealStatus::Complete);
    assert_eq!(r.revealed_egress, Some(ip("10.0.2.0")));
    assert_eq!(r.lsrs[0].method, RevealMethod::Buddy);
}

#[test]
fn engine_refusal_counts_as_target_not_reached() {
    let mut r = Revelation::new(
        Subject {
            anchor: ip("10.0.0.3"),
            anchor_is_ingress: true,
            egress: ip("10.0.0.4"),
            trigger: Trigger::Frpla,
            start_ttl: 1,
        },
        true,
        32,
    );
    r.poll_trace();
    r.handle_trace(None);
    assert_eq!(
        r.status,
        RevealStatus::Failed(RevealFailure::TargetNotReached)
    );
}
