//! Changes at run time (`Lab::apply`): a link down reroutes the IGP and the LSPs that
//! follow it, tears down the pinned ones, and leaves unreachable what has no path left;
//! an LSP reroute moves it; the truth says what packets meet, before and after; a link
//! down then up, an LSP down then up give back the original truth; bad changes are
//! refused with nothing changed.

use std::net::Ipv4Addr;
use std::path::Path;

use vtnt_lab::tracer::Tracer;
use vtnt_lab::truth::Destination;
use vtnt_lab::{Change, ChangeError, Lab, Topology};

fn reroute_case() -> Topology {
    Topology::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases/reroute.toml"),
    )
    .unwrap()
}

fn change(s: &str) -> Change {
    s.parse().unwrap()
}

fn json<T: serde::Serialize>(t: &T) -> serde_json::Value {
    serde_json::to_value(t).unwrap()
}

fn routers(d: &Destination) -> Vec<&str> {
    d.forward.iter().map(|h| h.router.as_str()).collect()
}

/// The addresses a Paris trace from the vantage point sees to `dst`, in TTL order.
fn traced(lab: &mut Lab, dst: Ipv4Addr) -> Vec<Option<Ipv4Addr>> {
    Tracer::new(lab)
        .trace(dst, 20)
        .into_iter()
        .map(|a| a.map(|a| a.from))
        .collect()
}

/// The truth's forward path as a trace shows it: each router's address, then the host.
fn expected(d: &Destination) -> Vec<Option<Ipv4Addr>> {
    d.forward
        .iter()
        .map(|h| Some(h.addr))
        .chain([Some(d.dst)])
        .collect()
}

#[test]
fn a_link_down_moves_an_igp_lsp_and_traces_follow_the_truth() {
    let mut lab = Lab::new(reroute_case());
    let before = lab.truth();
    let d = before.by_name("dst").unwrap();
    assert_eq!(routers(d), ["gw", "r1", "r2", "r3", "r4", "r8"]);
    assert_eq!(d.tunnels.len(), 1);
    assert_eq!(d.tunnels[0].lsr_routers, ["r2", "r3"]);
    assert_eq!(traced(&mut lab, d.dst), expected(d));

    lab.apply(&change("link-down r2 r3")).unwrap();
    let after = lab.truth();
    let d2 = after.by_name("dst").unwrap();
    assert_eq!(routers(d2), ["gw", "r1", "r5", "r6", "r7", "r4", "r8"]);
    assert_eq!(d2.tunnels[0].lsr_routers, ["r5", "r6", "r7"]);
    assert_eq!(after.lsps[0].path, ["r1", "r5", "r6", "r7", "r4"]);
    assert!(!d2.unreachable);
    assert!(after.lsps_down.is_empty());
    assert_eq!(after.links_down.len(), 1);
    assert_eq!(
        (
            after.links_down[0].a.as_str(),
            after.links_down[0].b.as_str()
        ),
        ("r2", "r3")
    );
    assert_eq!(traced(&mut lab, d2.dst), expected(d2));
    // the down link's addresses are gone with it: no echo reply from them
    let gone: Ipv4Addr = "100.64.0.9".parse().unwrap();
    let answer = Tracer::new(&mut lab).ping(gone);
    assert!(answer.as_ref().is_none_or(|a| a.from != gone), "{answer:?}");

    lab.apply(&change("link-up r3 r2")).unwrap();
    assert_eq!(json(&lab.truth()), json(&before));
    assert_eq!(traced(&mut lab, d.dst), expected(d));
}

#[test]
fn an_lsp_reroute_moves_it_and_lsp_up_brings_it_back() {
    let mut lab = Lab::new(reroute_case());
    let before = lab.truth();
    lab.apply(&change("lsp-reroute core r5,r6,r7")).unwrap();
    let t = lab.truth();
    let d = t.by_name("dst").unwrap();
    assert_eq!(t.lsps[0].path, ["r1", "r5", "r6", "r7", "r4"]);
    assert_eq!(d.tunnels[0].lsr_routers, ["r5", "r6", "r7"]);
    assert_eq!(routers(d), ["gw", "r1", "r5", "r6", "r7", "r4", "r8"]);
    assert_eq!(traced(&mut lab, d.dst), expected(d));
    // the same path written whole is the same change
    let mut whole = Lab::new(reroute_case());
    whole
        .apply(&change("lsp-reroute core r1,r5,r6,r7,r4"))
        .unwrap();
    assert_eq!(json(&whole.truth()), json(&t));

    lab.apply(&change("lsp-up core")).unwrap();
    assert_eq!(json(&lab.truth()), json(&before));
}

#[test]
fn a_pinned_lsp_goes_down_with_its_link_and_a_cut_branch_is_unreachable() {
    let mut lab = Lab::new(Topology::reference());
    let before = lab.truth();
    lab.apply(&change("link-down i3 i4")).unwrap();
    let t = lab.truth();
    assert_eq!(t.lsps_down.len(), 1);
    assert_eq!(t.lsps_down[0].name, "implicit");
    assert!(
        t.lsps_down[0]
            .reason
            .contains("explicit path crosses the down link i3-i4"),
        "{}",
        t.lsps_down[0].reason
    );
    assert!(t.lsps.iter().all(|l| l.name != "implicit"));
    let d = t.by_name("implicit").unwrap();
    assert!(d.unreachable);
    assert!(
        d.tunnels.is_empty(),
        "plain IP up to the cut: {:?}",
        d.tunnels
    );
    // the IGP has no route to the cut-off branch: packets die at the first router
    assert_eq!(routers(d), ["gw"]);
    assert!(json(&t)["destinations"][2]["unreachable"] == true);
    // and the trace meets no router past it
    let gw = Some(d.forward[0].addr);
    let hops = traced(&mut lab, d.dst);
    assert_eq!(hops[0], gw);
    assert!(hops.iter().all(|h| h.is_none() || *h == gw), "{hops:?}");
    // everything else is as it was
    for (x, y) in before.destinations.iter().zip(&t.destinations) {
        if x.name != "implicit" {
            assert_eq!(json(x), json(y), "{}", x.name);
        }
    }
    lab.apply(&change("link-up i3 i4")).unwrap();
    assert_eq!(json(&lab.truth()), json(&before));
}

#[test]
fn an_igp_lsp_without_a_path_left_is_down_until_the_link_is_back() {
    let mut lab = Lab::new(Topology::reference());
    lab.apply(&change("link-down e2 e3")).unwrap();
    let t = lab.truth();
    assert_eq!(t.lsps_down.len(), 1);
    assert_eq!(t.lsps_down[0].name, "explicit");
    assert!(
        t.lsps_down[0].reason.contains("unreachable"),
        "{:?}",
        t.lsps_down
    );
    assert!(t.by_name("explicit").unwrap().unreachable);
    // an LSP taken down by hand as well: both listed, each with its reason
    lab.apply(&change("lsp-down opaque")).unwrap();
    let t = lab.truth();
    let names: Vec<&str> = t.lsps_down.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["explicit", "opaque"]);
    assert_eq!(t.lsps_down[1].reason, "taken down (lsp-down)");
    // without its LSP the opaque destination is reached by plain IP
    let d = t.by_name("opaque").unwrap();
    assert!(!d.unreachable && d.tunnels.is_empty());
    assert_eq!(routers(d), ["gw", "o1", "o2", "o3", "o4", "o5"]);
}

#[test]
fn bad_changes_are_refused_and_change_nothing() {
    let mut lab = Lab::new(reroute_case());
    lab.apply(&change("link-down r2 r3")).unwrap();
    let before = json(&lab.truth());
    let cases = [
        ("link-down r2 r99", "no router is named \"r99\""),
        ("link-down r1 r4", "no link joins \"r1\" and \"r4\""),
        ("link-down r3 r2", "the link r3-r2 is already down"),
        ("link-up r1 r2", "the link r1-r2 is already up"),
        ("lsp-down nope", "no LSP is named \"nope\""),
        ("lsp-up core", "LSP \"core\" is up as defined already"),
        ("lsp-reroute core r2,r6", "no link joins \"r2\" and \"r6\""),
        (
            "lsp-reroute core r2,r3",
            "LSP \"core\" cannot take that path: the link r2-r3 is down",
        ),
        (
            "lsp-reroute core r5,r6,r5,r6,r7",
            "path visits a router twice",
        ),
    ];
    for (text, message) in cases {
        let e = lab.apply(&change(text)).unwrap_err();
        assert!(e.to_string().contains(message), "{text}: {e}");
        assert_eq!(json(&lab.truth()), before, "{text} changed the lab");
    }
    assert!(matches!(
        lab.apply(&change("link-down r2 r99")),
        Err(ChangeError::UnknownRouter(_))
    ));
    // a reroute with no LSR left between its ends is no LSP
    let mut direct = Lab::new(Topology::reference());
    let e = direct
        .apply(&change("lsp-reroute explicit e1,e2"))
        .unwrap_err();
    assert!(matches!(e, ChangeError::NoSuchLink(..)), "{e}");
}

/// Every case topology and the reference.
fn topologies() -> Vec<Topology> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut v = vec![Topology::reference()];
    v.extend(files.iter().map(|f| Topology::load(f).unwrap()));
    v
}

#[test]
fn a_link_down_then_up_gives_back_the_original_truth() {
    let opts = vtnt_lab::GenOptions::default();
    let generated = (1..=4).map(|seed| vtnt_lab::generate(seed, &opts));
    for topo in topologies().into_iter().chain(generated) {
        let original = json(&vtnt_lab::truth::truth(&topo));
        for l in &topo.def().links {
            let down = topo
                .apply(&change(&format!("link-down {} {}", l.a, l.b)))
                .unwrap_or_else(|e| panic!("{}: {e}", topo.name()));
            assert_eq!(down.links_down().len(), 1);
            let up = down
                .apply(&change(&format!("link-up {} {}", l.a, l.b)))
                .unwrap();
            assert_eq!(
                json(&vtnt_lab::truth::truth(&up)),
                original,
                "{}: link {}-{}",
                topo.name(),
                l.a,
                l.b
            );
        }
        for l in &topo.def().lsps {
            let down = topo
                .apply(&change(&format!("lsp-down {}", l.name)))
                .unwrap();
            assert!(down.lsps_down().iter().any(|d| d.name == l.name));
            let up = down.apply(&change(&format!("lsp-up {}", l.name))).unwrap();
            assert_eq!(json(&vtnt_lab::truth::truth(&up)), original);
        }
    }
}

#[test]
fn an_lsp_riding_one_taken_down_rides_nothing() {
    let topo = Topology::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases/ldp-over-te.toml"),
    )
    .unwrap();
    let t = vtnt_lab::truth::truth(&topo);
    assert!(t.lsps.iter().any(|l| l.over.as_deref() == Some("te")));
    let down = topo.apply(&change("lsp-down te")).unwrap();
    let t = vtnt_lab::truth::truth(&down);
    let ldp = t.lsps.iter().find(|l| l.name == "ldp").unwrap();
    assert_eq!(ldp.over, None);
    assert_eq!(down.lsps_down().len(), 1);
}

/// A random change to `topo`: a link down or up, an LSP down or up, or an LSP rerouted
/// along a random walk from its ingress (which may not reach its egress: refused then).
fn random_change(rng: &mut vtnt_rng::Rng, topo: &Topology) -> Change {
    let def = topo.def();
    let link = rng.pick(&def.links).unwrap();
    let (a, b) = (link.a.clone(), link.b.clone());
    let Some(lsp) = rng.pick(&def.lsps) else {
        return Change::LinkDown { a, b };
    };
    let name = lsp.name.clone();
    match rng.below(5) {
        0 => Change::LinkDown { a, b },
        1 => Change::LinkUp { a, b },
        2 => Change::LspDown { lsp: name },
        3 => Change::LspUp { lsp: name },
        _ => {
            let mut path = vec![lsp.ingress.clone()];
            while path.len() < 8 && path.last() != Some(&lsp.egress) {
                let here = path.last().unwrap().clone();
                let next: Vec<&String> = def
                    .links
                    .iter()
                    .filter_map(|l| match (l.a == here, l.b == here) {
                        (true, _) => Some(&l.b),
                        (_, true) => Some(&l.a),
                        _ => None,
                    })
                    .collect();
                path.push((*rng.pick(&next).unwrap()).clone());
            }
            Change::LspReroute { lsp: name, path }
        }
    }
}

#[test]
fn random_changes_keep_the_truth_consistent_and_undo_to_the_original() {
    let opts = vtnt_lab::GenOptions::default();
    let mut topos = topologies();
    topos.extend((5..=6).map(|seed| vtnt_lab::generate(seed, &opts)));
    let mut rng = vtnt_rng::Rng::new(42);
    for topo in topos {
        let original = json(&vtnt_lab::truth::truth(&topo));
        let mut now = topo.clone();
        for _ in 0..25 {
            let c = random_change(&mut rng, &topo);
            let before = json(&vtnt_lab::truth::truth(&now));
            match now.apply(&c) {
                Ok(next) => now = next,
                Err(_) => {
                    assert_eq!(json(&vtnt_lab::truth::truth(&now)), before, "{c}");
                    continue;
                }
            }
            // every LSP up runs over links that are up
            let t = vtnt_lab::truth::truth(&now);
            let down: Vec<(String, String)> = t
                .links_down
                .iter()
                .flat_map(|l| [(l.a.clone(), l.b.clone()), (l.b.clone(), l.a.clone())])
                .collect();
            for l in &t.lsps {
                for w in l.path.windows(2) {
                    let up = topo.def().links.iter().any(|k| {
                        ((k.a == w[0] && k.b == w[1]) || (k.a == w[1] && k.b == w[0]))
                            && !down.contains(&(k.a.clone(), k.b.clone()))
                    });
                    assert!(
                        up,
                        "{}: after {c}: LSP {} over {}-{}",
                        topo.name(),
                        l.name,
                        w[0],
                        w[1]
                    );
                }
                assert!(t.lsps_down.iter().all(|d| d.name != l.name));
            }
        }
        // undo everything: the original truth
        for l in now.links_down() {
            now = now
                .apply(&change(&format!("link-up {} {}", l.a, l.b)))
                .unwrap();
        }
        for l in &topo.def().lsps {
            if let Ok(next) = now.apply(&change(&format!("lsp-up {}", l.name))) {
                now = next;
            }
        }
        assert_eq!(
            json(&vtnt_lab::truth::truth(&now)),
            original,
            "{}",
            topo.name()
        );
    }
}
