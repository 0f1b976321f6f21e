//! Debian's scamper, unchanged, run through `vtnt lab exec` against the reference
//! topology: what it records for each tunnel class must match the lab's ground truth;
//! over IPv6 (the lab's twins, through the same TUN), `vtnt trace` records what scamper
//! records. Skipped (with the reason printed) unless root with scamper installed.

mod lab_common;
mod records_common;

use lab_common::{destination, hop, hop_addrs, label, strs, ttl_of, Lab, VTNT};
use records_common::{json_lines, normalised, of_type};
use serde_json::Value;
use vtnt_lab::addr::to_v6;

#[test]
fn scamper_explicit_tunnel_labels_along_every_lsr() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("expl", None);
    let truth = lab.truth();
    let d = destination(&truth, "explicit");
    let t = lab.trace(d["dst"].as_str().unwrap());
    assert_eq!(t["stop_reason"], "COMPLETED");
    let tun = &d["tunnels"][0];
    assert_eq!(tun["class"], "explicit");
    let lsrs = strs(&tun["lsrs"]);
    assert!(!lsrs.is_empty());
    let addrs = hop_addrs(&t);
    for (i, lsr) in lsrs.iter().enumerate() {
        let ttl = ttl_of(&t, lsr).unwrap_or_else(|| panic!("LSR {lsr} not in {addrs:?}"));
        let h = hop(&t, ttl);
        let l = label(h).unwrap_or_else(|| panic!("no labels at {lsr}: {h}"));
        assert_eq!(l["mpls_ttl"], 1, "LSE-TTL 1 at {lsr}");
        assert_eq!(h["icmp_q_ttl"], (i + 1) as u64, "quoted TTL rises");
    }
    // the ingress and egress precede and follow the LSRs directly
    let ing = ttl_of(&t, tun["ingress"].as_str().unwrap()).unwrap();
    let eg = ttl_of(&t, tun["egress"].as_str().unwrap()).unwrap();
    assert_eq!(eg - ing, lsrs.len() as u64 + 1);
    assert!(
        label(hop(&t, eg)).is_none(),
        "PHP: the egress gets plain IP"
    );
}

#[test]
fn scamper_implicit_tunnel_quoted_ttl_rises_without_labels() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("impl", None);
    let truth = lab.truth();
    let d = destination(&truth, "implicit");
    let t = lab.trace(d["dst"].as_str().unwrap());
    let tun = &d["tunnels"][0];
    assert_eq!(tun["class"], "implicit");
    let q: Vec<u64> = strs(&tun["lsrs"])
        .iter()
        .map(|a| {
            let h = hop(
                &t,
                ttl_of(&t, a).unwrap_or_else(|| panic!("LSR {a} missing")),
            );
            assert!(
                h.get("icmpext").is_none(),
                "no RFC 4950 in an implicit tunnel"
            );
            h["icmp_q_ttl"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(q, (1..=q.len() as u64).collect::<Vec<_>>());
    assert!(q.iter().any(|&x| x > 1), "qTTL > 1 and rising: {q:?}");
}

#[test]
fn scamper_invisible_php_lers_adjacent_lsrs_missing() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("php", None);
    let truth = lab.truth();
    for name in ["invisible-php-dpr", "invisible-php-brpr"] {
        let d = destination(&truth, name);
        let t = lab.trace(d["dst"].as_str().unwrap());
        let tun = &d["tunnels"][0];
        assert_eq!(tun["class"], "invisible-php");
        let addrs = hop_addrs(&t);
        for lsr in strs(&tun["lsrs"]) {
            assert!(
                !addrs.contains(&lsr),
                "{name}: hidden LSR {lsr} shows in {addrs:?}"
            );
        }
        let ing = ttl_of(&t, tun["ingress"].as_str().unwrap()).unwrap();
        let eg = ttl_of(&t, tun["egress"].as_str().unwrap()).unwrap();
        assert_eq!(eg, ing + 1, "{name}: LERs adjacent in {addrs:?}");
        // FRPLA at the egress: (255 - reply_ttl + 1) - probe_ttl >= 3 hidden hops' worth
        let h = hop(&t, eg);
        let frpla = 255 - h["reply_ttl"].as_i64().unwrap() + 1 - eg as i64;
        assert!(frpla >= 3, "{name}: FRPLA {frpla}");
    }
    // DPR: a trace to the egress of the DPR tunnel shows every LSR at once.
    let d = destination(&truth, "invisible-php-dpr");
    assert_eq!(d["tunnels"][0]["revelation"], "dpr");
    let t = lab.trace(d["tunnels"][0]["egress"].as_str().unwrap());
    let addrs = hop_addrs(&t);
    for lsr in strs(&d["tunnels"][0]["lsrs"]) {
        assert!(addrs.contains(&lsr), "DPR: {lsr} not in {addrs:?}");
    }
    // BRPR: a trace to the egress of the BRPR tunnel shows exactly one more LSR (the last).
    let d = destination(&truth, "invisible-php-brpr");
    assert_eq!(d["tunnels"][0]["revelation"], "brpr");
    let lsrs = strs(&d["tunnels"][0]["lsrs"]);
    let t = lab.trace(d["tunnels"][0]["egress"].as_str().unwrap());
    let addrs = hop_addrs(&t);
    let shown: Vec<&String> = lsrs.iter().filter(|l| addrs.contains(l)).collect();
    assert_eq!(shown, [lsrs.last().unwrap()], "BRPR step in {addrs:?}");
}

#[test]
fn scamper_invisible_uhp_duplicates_the_next_hop() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("uhp", None);
    let truth = lab.truth();
    let d = destination(&truth, "invisible-uhp");
    let tun = &d["tunnels"][0];
    assert_eq!(tun["class"], "invisible-uhp");
    let t = lab.trace(d["dst"].as_str().unwrap());
    let addrs = hop_addrs(&t);
    let egress = tun["egress"].as_str().unwrap();
    assert!(
        !addrs.iter().any(|a| a == egress),
        "egress {egress} shows in {addrs:?}"
    );
    for lsr in strs(&tun["lsrs"]) {
        assert!(!addrs.contains(&lsr));
    }
    // the router after the egress on the truth path answers twice in a row
    let fwd = d["forward"].as_array().unwrap();
    let at = fwd.iter().position(|h| h["addr"] == egress).unwrap();
    let next = fwd[at + 1]["addr"].as_str().unwrap();
    let ttl = ttl_of(&t, next).unwrap();
    assert_eq!(hop(&t, ttl + 1)["addr"], next, "duplicate IP in {addrs:?}");
    let ing = ttl_of(&t, tun["ingress"].as_str().unwrap()).unwrap();
    assert_eq!(ttl, ing + 1);
}

#[test]
fn scamper_opaque_tunnel_lone_labelled_egress() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("opq", None);
    let truth = lab.truth();
    let d = destination(&truth, "opaque");
    let tun = &d["tunnels"][0];
    assert_eq!(tun["class"], "opaque");
    let t = lab.trace(d["dst"].as_str().unwrap());
    let addrs = hop_addrs(&t);
    for lsr in strs(&tun["lsrs"]) {
        assert!(!addrs.contains(&lsr), "LSR {lsr} visible in {addrs:?}");
    }
    let eg = ttl_of(&t, tun["egress"].as_str().unwrap()).unwrap();
    assert_eq!(
        eg,
        ttl_of(&t, tun["ingress"].as_str().unwrap()).unwrap() + 1
    );
    let l = label(hop(&t, eg)).expect("the egress is labelled");
    let lse_ttl = l["mpls_ttl"].as_u64().unwrap();
    assert!(lse_ttl != 1 && lse_ttl != 255, "opaque LSE-TTL {lse_ttl}");
    // LSE-TTL = 255 - number of LSRs
    assert_eq!(lse_ttl, 255 - strs(&tun["lsrs"]).len() as u64);
}

#[test]
fn scamper_ping_reply_ttls_give_vendor_signatures() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("sig", None);
    let truth = lab.truth();
    // One router per signature, pinged at its address on the first branch that has it;
    // echo reply iTTL must match the truth's signature.
    let mut checked = std::collections::BTreeSet::new();
    for r in truth["routers"].as_array().unwrap() {
        let sig = (
            r["signature"][0].as_u64().unwrap(),
            r["signature"][1].as_u64().unwrap(),
        );
        if checked.contains(&sig) {
            continue;
        }
        let addr = r["addresses"][0].as_str().unwrap();
        let objs = lab.scamper("ping -c 2", addr);
        let ping = objs.iter().find(|o| o["type"] == "ping").unwrap();
        let rttl = ping["responses"][0]["reply_ttl"].as_u64().expect("a reply");
        let ittl = match rttl {
            129.. => 255,
            65..=128 => 128,
            33..=64 => 64,
            _ => 32,
        };
        assert_eq!(ittl, sig.1, "{}: echo reply TTL {rttl}", r["name"]);
        checked.insert(sig);
    }
    assert_eq!(checked.len(), 4, "{checked:?}");
}

#[test]
fn traceroute_e_shows_the_labels() {
    vtnt_testkit::require_root!("traceroute");
    let lab = Lab::up("tre", None);
    let truth = lab.truth();
    let d = destination(&truth, "explicit");
    let out = lab.exec(&[
        "traceroute",
        "-e",
        "-n",
        "-q",
        "1",
        "-w",
        "1",
        d["dst"].as_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let labelled: Vec<&str> = text.lines().filter(|l| l.contains("<MPLS:L=")).collect();
    assert_eq!(
        labelled.len(),
        strs(&d["tunnels"][0]["lsrs"]).len(),
        "{text}"
    );
    assert!(labelled.iter().all(|l| l.contains("T=1")), "{text}");
}

/// The IPv6 twin of a lab address in a JSON string.
fn twin(v: &Value) -> String {
    to_v6(v.as_str().expect("an address").parse().expect("IPv4")).to_string()
}

/// An IPv4 trace's RFC 4950 extensions as an IPv6 trace quotes them: the bottom label
/// IPv4 explicit null (0) is IPv6 explicit null (2) there (RFC 3032 section 2.1).
fn explicit_null_as_ipv6(ext: &Value) -> Value {
    let mut ext = ext.clone();
    for o in ext.as_array_mut().into_iter().flatten() {
        for l in o["mpls_labels"].as_array_mut().into_iter().flatten() {
            if l["mpls_label"] == 0 && l["mpls_s"] == 1 {
                l["mpls_label"] = 2.into();
            }
        }
    }
    ext
}

/// IPv6 through the running lab's TUN, for every tunnel class of the reference topology:
/// `vtnt trace` and Debian scamper record the same trace of the destination's IPv6 twin
/// (times, RTTs and checksums aside), and it crosses the truth's tunnel as the IPv4 trace
/// does: each hop the twin of the IPv4 hop, with the same quoted TTL and labels,
/// ICMPv6's types for ICMP's.
#[test]
fn ipv6_traces_through_the_lab_match_scamper_and_ipv4_per_tunnel_class() {
    vtnt_testkit::require_root!("scamper");
    let lab = Lab::up("six", None);
    let truth = lab.truth();
    let mut classes = Vec::new();
    for d in truth["destinations"].as_array().expect("destinations") {
        let Some(tunnel) = d["tunnels"].as_array().and_then(|t| t.first()) else {
            continue;
        };
        let (dst4, dst6) = (d["dst"].as_str().unwrap(), twin(&d["dst"]));
        let out = lab.exec(&[
            VTNT,
            "trace",
            "-P",
            "icmp-paris",
            "-q",
            "1",
            "-w",
            "1",
            &dst6,
        ]);
        let ours = json_lines(&out, "vtnt trace");
        let ours = of_type(&ours, "trace");
        assert_eq!(ours.len(), 1, "{dst6}: one trace");
        let theirs = lab.trace(&dst6);
        assert_eq!(
            normalised(ours[0]),
            normalised(&theirs),
            "{dst6} ({}): vtnt and scamper differ",
            tunnel["class"]
        );
        let four = lab.trace(dst4);
        let hops = |t: &Value| t["hops"].as_array().cloned().unwrap_or_default();
        let (h4, h6) = (hops(&four), hops(&theirs));
        assert_eq!(
            h4.len(),
            h6.len(),
            "{dst6}: hops of IPv4 {h4:?}\nIPv6 {h6:?}"
        );
        for (a, b) in h4.iter().zip(&h6) {
            assert_eq!(
                twin(&a["addr"]),
                b["addr"],
                "{dst6}: hop {}",
                a["probe_ttl"]
            );
            // (not the reply TTL: every vendor profile answers ICMPv6 with hop limit 64,
            // the lab's stated assumption, docs/lab.md)
            for k in ["probe_ttl", "icmp_q_ttl"] {
                assert_eq!(a[k], b[k], "{dst6}: {k} at hop {}", a["probe_ttl"]);
            }
            assert_eq!(
                explicit_null_as_ipv6(&a["icmpext"]),
                b["icmpext"],
                "{dst6}: labels at hop {}",
                a["probe_ttl"]
            );
            let six = match a["icmp_type"].as_u64() {
                Some(11) => 3,
                Some(0) => 129,
                t => panic!("{dst4}: ICMP type {t:?} at hop {}", a["probe_ttl"]),
            };
            assert_eq!(b["icmp_type"], six, "{dst6}: ICMPv6 type");
        }
        // the truth's LSRs that the IPv4 trace shows, the IPv6 trace shows as twins
        for lsr in strs(&tunnel["lsrs"]) {
            if ttl_of(&four, &lsr).is_some() {
                let six = to_v6(lsr.parse().unwrap()).to_string();
                assert!(ttl_of(&theirs, &six).is_some(), "{dst6}: LSR {six} missing");
            }
        }
        classes.push(tunnel["class"].as_str().unwrap().to_string());
    }
    classes.sort();
    classes.dedup();
    assert_eq!(
        classes,
        [
            "explicit",
            "implicit",
            "invisible-php",
            "invisible-uhp",
            "opaque"
        ],
        "every tunnel class crossed"
    );
}
