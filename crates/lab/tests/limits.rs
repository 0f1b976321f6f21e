//! The largest topology the lab takes (`vtnt_lab::limits`, docs/lab.md "Limits"): past
//! each limit, a topology file, definition or generator request is refused with an error
//! naming the limit and the value, before the work it would cost; within them, a long
//! thin topology (a chain of 100,000 routers with triangles along it) loads and routes
//! packets as deep as a TTL reaches.

use std::net::Ipv4Addr;

use vtnt_lab::limits::{MAX_MESH_WORK, MAX_ROUTERS, MAX_TOPOLOGY_BYTES};
use vtnt_lab::tracer::Tracer;
use vtnt_lab::{
    GenOptions, HostDef, Lab, LinkDef, ReplyFrom, RouterDef, Topology, TopologyDef, TopologyError,
    VantagePointDef, Vendor,
};

fn router(i: usize) -> RouterDef {
    RouterDef {
        name: format!("r{i}"),
        vendor: Vendor::Cisco,
        loopback: None,
        silent: false,
        icmp_rate: 0,
        signature: None,
        reply_from: ReplyFrom::Incoming,
        ipv4_only: false,
    }
}

/// Link number `k` between routers `a` and `b`, a /30 of 100.64/10.
fn link(k: usize, a: &str, b: &str, cost: u32) -> LinkDef {
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + 4 * k as u32;
    LinkDef {
        a: a.into(),
        b: b.into(),
        prefix: format!("{}/30", Ipv4Addr::from(base)),
        a_address: None,
        b_address: None,
        delay_ms: 0.1,
        delay_back_ms: None,
        cost,
        cost_back: None,
    }
}

fn host(i: usize, router: &str) -> HostDef {
    HostDef {
        name: format!("h{i}"),
        address: format!("203.0.113.{}/30", 4 * i + 2),
        gateway: format!("203.0.113.{}", 4 * i + 1),
        router: router.into(),
        delay_ms: 0.5,
        ttl: 64,
        tcp_open: Vec::new(),
        silent: false,
    }
}

/// `n` routers, the vantage point on the first, no links.
fn routers(n: usize) -> TopologyDef {
    TopologyDef {
        name: format!("routers-{n}"),
        description: String::new(),
        vantage_points: vec![VantagePointDef {
            name: "vp".into(),
            address: "192.0.2.2/24".into(),
            gateway: "192.0.2.1".into(),
            router: "r0".into(),
            delay_ms: 0.05,
        }],
        routers: (0..n).map(router).collect(),
        links: Vec::new(),
        hosts: Vec::new(),
        lsps: Vec::new(),
        routes: Vec::new(),
    }
}

fn too_large(r: Result<Topology, TopologyError>) -> String {
    match r {
        Err(e @ TopologyError::TooLarge { .. }) => e.to_string(),
        Err(e) => panic!("refused, but not for its size: {e}"),
        Ok(t) => panic!("{} routers accepted", t.def().routers.len()),
    }
}

#[test]
fn more_routers_or_lsps_than_the_lab_takes_are_refused_by_count() {
    let e = too_large(Topology::from_def(routers(MAX_ROUTERS + 1)));
    assert_eq!(
        e,
        "<routers-300001>: 300001 routers is more than the lab takes (300000 at most; \
         docs/lab.md, \"Limits\")"
    );
    let mut def = routers(3);
    // (counted before anything is resolved: these name routers the topology lacks)
    let lsp = Topology::reference().def().lsps[0].clone();
    def.lsps = vec![lsp; 60_001];
    let e = too_large(Topology::from_def(def));
    assert!(
        e.contains("60001 LSPs is more than the lab takes (60000 at most"),
        "{e}"
    );
}

#[test]
fn a_mesh_too_large_for_its_distance_tables_is_refused() {
    // a ring of 4,097 routers is one biconnected part: 4,097² table entries
    let n = 4097;
    let mut def = routers(n);
    def.links = (0..n)
        .map(|i| link(i, &format!("r{i}"), &format!("r{}", (i + 1) % n), 10))
        .collect();
    let e = too_large(Topology::from_def(def));
    assert!(
        e.contains(&format!(
            "16785409 distance-table entries for the topology's meshes (the routers of each \
             biconnected part squared, summed; the largest part has 4097 routers) is more \
             than the lab takes ({MAX_MESH_WORK} at most"
        )),
        "{e}"
    );
}

#[test]
fn a_file_past_the_size_limit_is_refused_unread() {
    let path = std::env::temp_dir().join(format!("vtnt-huge-{}.toml", std::process::id()));
    let f = std::fs::File::create(&path).expect("temp file");
    // sparse: nothing is written, and nothing may be read
    f.set_len(MAX_TOPOLOGY_BYTES as u64 + 1).expect("set_len");
    let e = too_large(Topology::load(&path));
    let _ = std::fs::remove_file(&path);
    assert!(
        e.ends_with(&format!(
            ": {} bytes of topology is more than the lab takes ({MAX_TOPOLOGY_BYTES} at most; \
             docs/lab.md, \"Limits\")",
            MAX_TOPOLOGY_BYTES + 1
        )),
        "{e}"
    );
}

#[test]
fn a_generator_request_past_the_limits_is_refused_before_generating() {
    let o = GenOptions {
        destinations: 15_000,
        lsrs: (1, 60),
        ..GenOptions::default()
    };
    let e = o.check().unwrap_err().to_string();
    assert_eq!(
        e,
        "1095000 routers (the most 15000 destinations may make: 73 each, with up to 60 LSRs \
         per LSP) is more than the lab takes (300000 at most; docs/lab.md, \"Limits\")"
    );
    assert_eq!(o.max_destinations(), 4109);
    let o = GenOptions {
        destinations: 15_000,
        ..GenOptions::default()
    };
    assert_eq!(o.check(), Ok(()));
    let o = GenOptions {
        destinations: 15_001,
        ..GenOptions::default()
    };
    assert!(o
        .check()
        .unwrap_err()
        .to_string()
        .starts_with("15001 destinations is more than the lab takes (15000 at most"));
}

/// A chain of `n` routers, nine tenths of them in a row r0 - r1 - ..., the rest each
/// beside one of every ninth link of the row (a triangle, dearer than the link), hosts
/// at row routers 40 and the last.
fn chain(n: usize) -> TopologyDef {
    let side = n / 10;
    let length = n - side;
    let mut def = routers(n);
    for i in 1..length {
        def.links.push(link(
            def.links.len(),
            &format!("r{}", i - 1),
            &format!("r{i}"),
            10,
        ));
    }
    for s in 0..side {
        let (a, b, d) = (9 * s, 9 * s + 1, length + s);
        def.links
            .push(link(def.links.len(), &format!("r{a}"), &format!("r{d}"), 6));
        def.links
            .push(link(def.links.len(), &format!("r{d}"), &format!("r{b}"), 6));
    }
    def.hosts = vec![host(0, "r40"), host(1, &format!("r{}", length - 1))];
    def
}

#[test]
fn a_chain_of_100000_routers_loads_and_routes() {
    let topo = Topology::from_def(chain(100_000)).expect("valid");
    let near = vtnt_lab::truth::destination(&topo, 0, "203.0.113.2".parse().unwrap(), "h0")
        .expect("a destination");
    // r0 to r40, each link cheaper than the triangle beside it
    let names: Vec<String> = (0..=40).map(|i| format!("r{i}")).collect();
    let path: Vec<&String> = near.forward.iter().map(|h| &h.router).collect();
    assert_eq!(path, names.iter().collect::<Vec<_>>());
    let mut lab = Lab::new(topo);
    let mut t = Tracer::new(&mut lab);
    let hops = t.trace(near.dst, 64);
    assert_eq!(hops.len(), 42, "41 routers, then the host");
    assert!(hops.iter().all(Option::is_some));
    // 89,999 routers away: TTL 255 expires at the 255th router, r254, which answers
    // from its interface towards r253 (link 254, the /30's second address)
    let far = t
        .probe("203.0.113.6".parse().unwrap(), 255)
        .expect("an answer");
    assert_eq!(far.from, Ipv4Addr::new(100, 64, 3, 246));
    assert_eq!(far.icmp_type, 11);
}
