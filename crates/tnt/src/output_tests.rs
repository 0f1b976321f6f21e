//! Tests of result assembly, the text dump and (with `serde`) the JSON annotation shape.

use super::*;
use crate::classify::{classify, ClassifyOptions};
use crate::reveal::{Revelation, Subject};
use crate::testutil::*;
use alloc::vec;

/// A: VP - 10.0.0.1 - 10.0.0.2 (ingress) - [3 hidden] - 10.0.0.5 (egress, FRPLA 3) - dst.
fn sample() -> TntResult {
    let t = trace(
        "10.0.9.1",
        &[
            te(1, "10.0.0.1", 255, 1),
            te(2, "10.0.0.2", 254, 1),
            te(3, "10.0.0.5", 250, 1),
            echo(4, "10.0.9.1", 57),
        ],
    );
    let er = |a: IpAddr| if a == ip("10.0.0.5") { Some(250) } else { None };
    let path = Path::from_trace(&t, er);
    let class = classify(&path, &ClassifyOptions::default());
    assert_eq!(class.candidates.len(), 1);
    let c = &class.candidates[0];
    let mut rev = Revelation::new(
        Subject {
            anchor: ip("10.0.0.2"),
            anchor_is_ingress: true,
            egress: ip("10.0.0.5"),
            trigger: c.trigger,
            start_ttl: c.start_ttl,
        },
        true,
        32,
    );
    rev.poll_trace();
    rev.handle_trace(Some(&trace(
        "10.0.0.5",
        &[
            te(2, "10.0.0.2", 254, 1),
            te(3, "10.0.1.1", 253, 1),
            te(4, "10.0.1.2", 252, 1),
            te(5, "10.0.1.3", 251, 1),
            echo(6, "10.0.0.5", 250),
        ],
    )));
    let tested = [Tested {
        candidate: c,
        revelation: Some(&rev),
        cached: false,
    }];
    build_result(t, &path, &class, &tested, &er, 42)
}

#[test]
fn revealed_hops_are_spliced_after_the_ingress() {
    let r = sample();
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
            ip("10.0.9.1")
        ]
    );
    assert_eq!(r.hops.len(), 4, "one annotation per trace reply");
    assert_eq!(r.tunnels[0].class, TunnelClass::InvisiblePhp);
    assert_eq!(r.path[2].revealed.unwrap().method, RevealMethod::Dpr);
    assert_eq!(r.path[2].probe_ttl, None);
}

#[test]
fn text_dump_looks_like_sc_tnt() {
    let text = crate::text::dump(&sample());
    assert!(
        text.starts_with("trace [icmp-paris] from 192.0.2.1 to 10.0.9.1\n"),
        "{text}"
    );
    assert!(text.contains("  2 10.0.0.2 "), "{text}");
    assert!(text.contains("[MPLS,INV,ING,FRPLA]"), "{text}");
    assert!(text.contains(" H1 10.0.1.1 "), "{text}");
    assert!(text.contains("[MPLS,INV,LSR,FRPLA,DPR,step=1]"), "{text}");
    assert!(
        text.contains("rTTLs=<250,250> qttl=1 frpla=3 [MPLS,INV,EGR,FRPLA]"),
        "{text}"
    );
    assert!(
        text.contains("tunnel 0: invisible-php 10.0.0.2 -> 10.0.0.5 lsrs=3 revelation=complete")
    );
}

#[cfg(feature = "serde")]
#[test]
fn json_annotation_shape() {
    let r = sample();
    let hop = serde_json::to_value(&r.hops[2]).unwrap();
    assert_eq!(
        hop,
        serde_json::json!({
            "te": 250, "er": 250,
            "signature": {"te": 255, "er": 255},
            "vendor": "cisco",
            "qttl": 1, "uturn": 0, "frpla": 3, "rtla": 0,
            "mpls": [{"tunnel": 0, "class": "invisible-php", "role": "egress", "evidence": null,
                      "trigger": "frpla", "method": null, "step": null}]
        })
    );
    let t = serde_json::to_value(r.trace_annotation()).unwrap();
    assert_eq!(t["version"], 2);
    assert_eq!(t["role"], "initial");
    assert_eq!(t["probes"], 42);
    let tun = &t["tunnels"][0];
    assert_eq!(tun["class"], "invisible-php");
    assert_eq!(tun["ingress"], "10.0.0.2");
    assert_eq!(
        tun["lsrs"],
        serde_json::json!(["10.0.1.1", "10.0.1.2", "10.0.1.3"])
    );
    assert_eq!(tun["revelation"]["status"], "complete");
    assert_eq!(tun["revelation"]["method"], "dpr");
    let h1 = &t["path"][2];
    assert_eq!(h1["probe_ttl"], serde_json::Value::Null);
    assert_eq!(
        h1["revealed"],
        serde_json::json!({"tunnel": 0, "method": "dpr", "step": 1})
    );
    assert_eq!(h1["annotation"]["mpls"][0]["role"], "lsr");
}
