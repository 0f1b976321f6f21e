//! Debian's scamper, unchanged, run through `vtnt lab exec` against the reference
//! topology: what it records for each tunnel class must match the lab's ground truth.
//! Skipped (with the reason printed) unless root with scamper installed.

mod daemon_common;
mod lab_common;
mod records_common;

use std::io::{Read, Write};

use lab_common::{destination, hop, hop_addrs, label, strs, ttl_of, Lab};
use records_common::{json_lines, normalised, of_type};
use serde_json::Value;

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

/// The lab's IPv6 twin of an IPv4 address of the truth (`2001:db8:64::a.b.c.d`).
fn twin(v4: &str) -> String {
    vtnt_lab::addr::to_v6(v4.parse().expect("an IPv4 address")).to_string()
}

/// IPv6 through the running lab's TUN front to the reference's destination of each tunnel
/// class: vTNT's ICMP-Paris trace equals Debian scamper's record by record once times,
/// RTTs and drawn identifiers are taken out, and both see what the truth says of each
/// class at the routers' IPv6 twins (explicit and implicit LSRs on the path, opaque and
/// invisible ones hidden, the ingress visible, the egress too but behind UHP); pings to a
/// destination's and a router's twin equal scamper's; `vtnt daemon` in the lab takes the
/// IPv6 trace and ping from a raw control-protocol client and records what the command
/// line records. One lab, some 12 s.
#[test]
fn ipv6_traces_through_the_lab_match_scamper_per_class() {
    vtnt_testkit::require_root!("scamper");
    // the reference with 6PE cores (RFC 4798) under four of its classes: their LSRs
    // IPv4 only, answering from IPv4-mapped addresses with two labels, the 6PE label
    // under the transport one (docs/lab.md)
    let six_pe = ["explicit", "opaque", "invisible-php-dpr", "invisible-uhp"];
    let topo = vtnt_lab::Topology::reference()
        .with_6pe_cores(&six_pe)
        .expect("6PE cores");
    let dir = daemon_common::Scratch::new("vtnt-lab-6pe");
    let file = dir.path("6pe.toml");
    std::fs::write(&file, topo.to_toml()).unwrap();
    let lab = Lab::up("v6", file.to_str());
    let truth = lab.truth();
    let v4only: Vec<String> = truth["routers"]
        .as_array()
        .expect("routers")
        .iter()
        .filter(|r| r["ipv4_only"] == true)
        .flat_map(|r| strs(&r["addresses"]))
        .collect();
    assert!(!v4only.is_empty());
    // the address a router answers IPv6 from: its twin, or IPv4-mapped in a 6PE core
    let answers_from = |v4: &str| match v4only.iter().any(|a| a == v4) {
        true => v4
            .parse::<std::net::Ipv4Addr>()
            .unwrap()
            .to_ipv6_mapped()
            .to_string(),
        false => twin(v4),
    };
    // The tunnel classes' destinations: the plain one sits behind ECMP, where the flow
    // labels (vTNT's per flow, scamper's its own) hash onto different paths.
    let dsts: Vec<&Value> = truth["destinations"]
        .as_array()
        .expect("destinations")
        .iter()
        .filter(|d| d["tunnels"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    let targets: Vec<String> = dsts
        .iter()
        .map(|d| twin(d["dst"].as_str().unwrap()))
        .collect();
    let mut args = vec![lab_common::VTNT];
    args.extend("trace -P icmp-paris -q 1 -w 1 --pps 100".split(' '));
    args.extend(targets.iter().map(String::as_str));
    let ours = json_lines(&lab.exec(&args), "vtnt");
    let ours = of_type(&ours, "trace");
    assert_eq!(ours.len(), targets.len());
    let mut classes = std::collections::BTreeSet::new();
    let mut saw_6pe = false;
    for (d, dst) in dsts.iter().zip(&targets) {
        let v = ours
            .iter()
            .find(|t| t["dst"] == dst.as_str())
            .unwrap_or_else(|| panic!("no trace to {dst}"));
        let s = lab.trace(dst);
        let (v, s) = (normalised(v), normalised(&s));
        assert_eq!(v, s, "{dst}\n ours:    {v}\n scamper: {s}");
        assert_eq!(v["stop_reason"], "COMPLETED", "{dst}");
        let addrs = hop_addrs(&v);
        for tun in d["tunnels"].as_array().expect("tunnels") {
            let class = tun["class"].as_str().unwrap();
            classes.insert(class.to_string());
            // UHP hides the egress too (its next hop answers twice instead)
            for (end, shown) in [("ingress", true), ("egress", class != "invisible-uhp")] {
                let a = twin(tun[end].as_str().unwrap());
                assert_eq!(addrs.contains(&a), shown, "{class} {end} {a} in {addrs:?}");
            }
            let visible = matches!(class, "explicit" | "implicit");
            for lsr in strs(&tun["lsrs"]) {
                let a = answers_from(&lsr);
                assert_eq!(addrs.contains(&a), visible, "{class} LSR {a} in {addrs:?}");
                if class == "explicit" {
                    let h = hop(&v, ttl_of(&v, &a).unwrap());
                    assert!(label(h).is_some(), "explicit LSR {a} without labels: {h}");
                    // in a 6PE core: the transport label over the 6PE label (S=1)
                    let stack = h["icmpext"][0]["mpls_labels"].as_array().unwrap();
                    let six = v4only.contains(&lsr);
                    assert_eq!(stack.len(), if six { 2 } else { 1 }, "{a}: {h}");
                    assert_eq!(stack.last().unwrap()["mpls_s"], 1, "{a}: {h}");
                    saw_6pe |= six;
                }
            }
        }
    }
    let want = [
        "explicit",
        "implicit",
        "invisible-php",
        "invisible-uhp",
        "opaque",
    ];
    assert_eq!(classes.into_iter().collect::<Vec<_>>(), want);
    assert!(saw_6pe, "no two-label stack from a 6PE core");

    // ping: a destination's and a router's twin answer both tools alike
    let router = twin(truth["routers"][0]["addresses"][0].as_str().unwrap());
    for dst in [&targets[0], &router] {
        let ours = json_lines(
            &lab.exec(&[lab_common::VTNT, "ping", "-c", "2", "-i", "0.2", dst]),
            "vtnt",
        );
        let theirs = lab.scamper("ping -c 2 -i 0.2", dst);
        let (v, s) = (of_type(&ours, "ping"), of_type(&theirs, "ping"));
        assert_eq!((v.len(), s.len()), (1, 1), "one ping each to {dst}");
        let (v, s) = (normalised(v[0]), normalised(s[0]));
        assert_eq!(v, s, "ping {dst}\n ours:    {v}\n scamper: {s}");
        assert_eq!(v["statistics"]["replies"], 2, "{dst}: {v}");
    }

    // `vtnt daemon` in the lab takes the same IPv6 commands over scamper's control
    // protocol, spoken raw on its unix socket: the same records as the command line's
    let dir = daemon_common::Scratch::new("vtnt-lab-daemon6");
    let sock = dir.path("ctl.sock");
    let mut cmd = std::process::Command::new(lab_common::VTNT);
    cmd.args(["lab", "exec", "--name", &lab.name, "--", lab_common::VTNT])
        .args(["daemon", "-U", sock.to_str().unwrap(), "-p", "100"]);
    let daemon = daemon_common::Daemon::spawn(cmd, || sock.exists());
    let (t, p) = ("trace -P icmp-paris -q 1 -w 1", "ping -c 2 -i 0.2");
    let dst = &targets[0];
    let mut c = std::os::unix::net::UnixStream::connect(&sock).expect("the daemon's socket");
    write!(c, "attach format json\n{t} {dst}\n{p} {dst}\ndone\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    let objs = daemon_common::data_json(&text);
    for (kind, cmd) in [("trace", t), ("ping", p)] {
        let d = of_type(&objs, kind);
        assert_eq!(d.len(), 1, "one {kind} from the daemon: {text}");
        let mut args = vec![lab_common::VTNT];
        args.extend(cmd.split(' '));
        args.push(dst);
        let cli = json_lines(&lab.exec(&args), "vtnt");
        let (d, cli) = (normalised(d[0]), normalised(of_type(&cli, kind)[0]));
        assert_eq!(d, cli, "daemon {kind} {dst}\n daemon: {d}\n cli:    {cli}");
    }
    let stopped = daemon.stop();
    assert!(stopped.status.success(), "{stopped:?}");
}
