//! Debug aid: runs TNT on one lab topology and prints, per destination, the truth (path
//! and tunnels) next to TNT's text dump.
//!
//! `cargo run -p vtnt-bench --example tnt_lab_dump -- [reference|<generate seed>] [dst name]`

use std::net::IpAddr;

use vtnt_bench::run_tnt;
use vtnt_lab::{generate, GenOptions, Lab, Topology};
use vtnt_tnt::{dump, TntConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let topo = match args.first().map(String::as_str) {
        None | Some("reference") => Topology::reference(),
        Some(s) => generate(s.parse().expect("seed"), &GenOptions::default()),
    };
    let only = args.get(1).cloned();
    let mut lab = Lab::new(topo);
    let truth = lab.truth();
    let targets: Vec<IpAddr> = truth
        .destinations
        .iter()
        .filter(|d| only.as_deref().is_none_or(|n| n == d.name))
        .map(|d| IpAddr::V4(d.dst))
        .collect();
    let run = run_tnt(&mut lab, &targets, TntConfig::default(), 7).expect("runs");
    for d in &truth.destinations {
        let Some(r) = run.results.iter().find(|r| r.target == IpAddr::V4(d.dst)) else {
            continue;
        };
        println!("=== {} {}", d.name, d.dst);
        let fwd: Vec<String> = d
            .forward
            .iter()
            .map(|h| format!("{}({})", h.router, h.addr))
            .collect();
        println!("truth forward: {}", fwd.join(" "));
        let ret: Vec<String> = d.return_path.iter().map(|h| h.router.clone()).collect();
        println!("truth return: {}", ret.join(" "));
        for t in &d.tunnels {
            println!(
                "truth tunnel {:?} {}({}) -> {}({}) lsrs {:?} {:?} {:?} whole={}",
                t.class,
                t.ingress_router,
                t.ingress,
                t.egress_router,
                t.egress,
                t.lsr_routers,
                t.pop,
                t.revelation,
                t.whole
            );
        }
        for t in &d.return_tunnels {
            println!(
                "truth return tunnel {:?} {} -> {} lsrs {:?}",
                t.class, t.ingress_router, t.egress_router, t.lsr_routers
            );
        }
        print!("{}", dump(r));
    }
    for r in &truth.routers {
        if args.len() > 2 {
            println!(
                "router {} {} {:?} {:?}",
                r.name, r.vendor, r.signature, r.addresses
            );
        }
    }
}
