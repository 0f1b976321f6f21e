//! TNT over IPv6 (issue 38) through the in-process dual-stack lab: on the reference, every
//! case topology of `topologies/cases/` and generated topologies, TNT run to each
//! destination's IPv6 twin is held to the truth (tunnels compared by router: an IPv6
//! answer comes from the twin of the IPv4 one) and beside its IPv4 run. What may differ
//! is the evidence: every vendor answers ICMPv6 with hop limit 64 (docs/lab.md),
//! so the return-path signature trigger (RTLA) never fires over IPv6 and another trigger
//! has to find the tunnel. Destinations behind ECMP are left out: over IPv6 the lab
//! hashes the flow label too, so the two families may take different (valid) paths.

use std::net::IpAddr;
use std::path::Path;

use vtnt_bench::run_tnt;
use vtnt_lab::addr::{from_v6, to_v6};
use vtnt_lab::{Lab, Topology, Truth};
use vtnt_tnt::{TntConfig, TntResult, TunnelClass};

/// The reference topology and every case topology.
fn topologies() -> Vec<(String, Topology)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut v = vec![("reference".to_string(), Topology::reference())];
    // the reference with 6PE cores (RFC 4798) under every class but implicit: over IPv6
    // the invisible PHP ones with RFC 4950 are opaque (their egress quotes the 6PE label)
    let six_pe = [
        "explicit",
        "opaque",
        "invisible-php-dpr",
        "invisible-php-brpr",
        "invisible-uhp",
    ];
    let six_pe = Topology::reference().with_6pe_cores(&six_pe).unwrap();
    v.push(("reference with 6PE cores".to_string(), six_pe));
    v.extend(files.iter().map(|f| {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        (name, Topology::load(f).unwrap())
    }));
    // and generated ones, every lab feature in the mix (the accuracy benchmark's first
    // seed)
    v.extend((0..GENERATED).map(|i| {
        let seed = vtnt_bench::accuracy::topology_seed(1, i);
        let opts = vtnt_lab::generate::GenOptions::default();
        (
            format!("generated {seed}"),
            vtnt_lab::generate::generate(seed, &opts),
        )
    }));
    v
}

/// Generated topologies in the comparison.
const GENERATED: usize = 10;

/// The router (or host) that owns `a`, of either family.
fn owner(truth: &Truth, a: Option<IpAddr>) -> String {
    let v4 = match a {
        Some(IpAddr::V4(a)) => a,
        // (a twin, or the IPv4-mapped address a 6PE core's LSR answers from)
        Some(IpAddr::V6(a)) => match from_v6(a).or_else(|| a.to_ipv4_mapped()) {
            Some(a) => a,
            None => return format!("outside the lab: {a}"),
        },
        None => return "?".into(),
    };
    truth
        .routers
        .iter()
        .find(|r| r.addresses.contains(&v4))
        .map_or_else(|| format!("host {v4}"), |r| r.name.clone())
}

/// A tunnel by routers: class, ingress, egress, LSRs in order (`?` for an unknown one).
type Named = (TunnelClass, String, String, Vec<String>);

/// Each tunnel of `r` by routers.
fn named(truth: &Truth, r: &TntResult) -> Vec<Named> {
    r.tunnels
        .iter()
        .map(|t| {
            let lsrs = t.lsrs.iter().map(|&l| owner(truth, l)).collect();
            (
                t.class,
                owner(truth, t.ingress),
                owner(truth, t.egress),
                lsrs,
            )
        })
        .collect()
}

/// The truth's tunnels on `d`'s path, named as [`named`] names a result's, with their
/// class over IPv6 when `ipv6` (a 6PE core's may differ).
fn truth_named(d: &vtnt_lab::truth::Destination, ipv6: bool) -> Vec<Named> {
    d.tunnels
        .iter()
        .map(|t| {
            let class = match ipv6 {
                true => t.class6.unwrap_or(t.class),
                false => t.class,
            };
            (
                class,
                t.ingress_router.clone(),
                t.egress_router.clone(),
                t.lsr_routers.clone(),
            )
        })
        .collect()
}

/// Whether `found` is a truth tunnel of `truth` told right or partly: the same class and
/// ends, its LSRs among the truth's in order (a revelation may miss some, never invent).
fn held(found: &Named, truth: &[Named]) -> bool {
    truth.iter().any(|t| {
        let mut lsrs = t.3.iter();
        (t.0, &t.1, &t.2) == (found.0, &found.1, &found.2)
            && found.3.iter().all(|l| lsrs.any(|x| x == l))
    })
}

/// TNT to the IPv6 twins of every single-path destination: no tunnel the truth lacks, no
/// LSR it lacks, every class found, and at least the tunnels the IPv4 run tells right
/// (measured here: 178 truth tunnels right over IPv6, 169 over IPv4, each against its
/// family's truth), and a 6PE core's invisible PHP tunnel read opaque over IPv6, as the
/// truth over IPv6 has it.
#[test]
fn tnt_over_ipv6_is_held_to_the_truth_and_finds_what_ipv4_finds() {
    let (mut classes, mut compared) = (Vec::new(), 0);
    let (mut right4, mut right6, mut six_pe_opaque) = (0, 0, 0);
    for (name, topo) in topologies() {
        let truth = Lab::new(topo.clone()).truth();
        for d in truth
            .destinations
            .iter()
            .filter(|d| d.forward_paths.len() == 1)
        {
            let run = |dst: IpAddr| {
                let lab = &mut Lab::new(topo.clone());
                let mut out = run_tnt(lab, &[dst], TntConfig::default(), 7).unwrap();
                out.results.remove(0)
            };
            let (r4, r6) = (run(IpAddr::V4(d.dst)), run(IpAddr::V6(to_v6(d.dst))));
            let what = format!("{name}: {}", d.name);
            assert!(r6.error.is_none(), "{what}: {:?}", r6.error);
            let (t4, t) = (truth_named(d, false), truth_named(d, true));
            let (n4, n6) = (named(&truth, &r4), named(&truth, &r6));
            for found in &n6 {
                assert!(
                    held(found, &t),
                    "{what}: {found:?} is not in the truth {t:?}"
                );
            }
            six_pe_opaque += usize::from(
                name.contains("6PE")
                    && d.tunnels
                        .iter()
                        .any(|x| x.class6 != Some(x.class) && x.class6.is_some())
                    && n6.iter().any(|x| x.0 == TunnelClass::Opaque),
            );
            right4 += n4.iter().filter(|x| t4.contains(x)).count();
            right6 += n6.iter().filter(|x| t.contains(x)).count();
            compared += 1;
            classes.extend(r6.tunnels.iter().map(|t| t.class));
        }
    }
    eprintln!(
        "{compared} destinations: truth tunnels told right over IPv4 {right4}, IPv6 {right6}"
    );
    assert!(compared >= 100, "only {compared} destinations compared");
    assert!(
        six_pe_opaque > 0,
        "no 6PE invisible PHP tunnel read opaque over IPv6"
    );
    assert!(right6 >= right4, "IPv6 {right6} right, IPv4 {right4}");
    for c in [
        TunnelClass::Explicit,
        TunnelClass::Implicit,
        TunnelClass::Opaque,
        TunnelClass::InvisiblePhp,
        TunnelClass::InvisibleUhp,
    ] {
        assert!(classes.contains(&c), "no {c:?} tunnel found over IPv6");
    }
}
