//! The lab at 100,000 routers (issue 35): a generated topology that large is made,
//! written, read back and routed within generous bounds of time and of peak memory
//! (`VmHWM` of this test process, which runs this one test), whatever the build; its
//! truth covers every destination and traces reach them. Routing used to cost time and
//! memory in routers squared (an all-pairs table and a FIB per router and prefix:
//! 20,000 routers took 4.8 GB, 100,000 would take 40 GB). Release figures: docs/lab.md,
//! "Limits".

use std::time::{Duration, Instant};

use vtnt_lab::tracer::Tracer;
use vtnt_lab::{GenOptions, Lab, Topology};

/// This process's peak resident memory, bytes.
fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("a VmHWM line");
    kb * 1024
}

#[test]
fn a_generated_topology_of_100000_routers_loads_within_bounds() {
    let started = Instant::now();
    let o = GenOptions {
        destinations: 14_700,
        ..GenOptions::default()
    };
    o.check().expect("the lab takes it");
    let text = vtnt_lab::generate::generate_toml(1, &o);
    let made = started.elapsed();
    let read = Instant::now();
    let topo = Topology::parse(&text, "generated-100k.toml").expect("valid");
    let load = read.elapsed();
    drop(text);
    let routers = topo.def().routers.len();
    let peak = peak_memory();
    println!(
        "{routers} routers, {} links, {} hosts, {} LSPs: generated and written in {made:.1?}, \
         read in {load:.1?}, peak {} MiB",
        topo.def().links.len(),
        topo.def().hosts.len(),
        topo.def().lsps.len(),
        peak >> 20
    );
    assert!(routers >= 100_000, "{routers} routers");
    // release: ~2 s and ~0.7 GiB on a 2-core machine; a debug build on a busy host is
    // slower, never quadratic (20,000 routers took 50 s before)
    assert!(load < Duration::from_secs(90), "read in {load:?}");
    assert!(peak <= 2 << 30, "peak {} MiB", peak >> 20);

    // routed: the truth of every destination, and traces reaching a spread of them
    let truth = vtnt_lab::truth::truth(&topo);
    assert_eq!(truth.destinations.len(), 14_700);
    assert!(truth.destinations.iter().all(|d| !d.forward.is_empty()));
    let mut lab = Lab::new(topo);
    let mut tracer = Tracer::new(&mut lab);
    for d in truth.destinations.iter().step_by(490) {
        let hops = tracer.trace(d.dst, 64);
        let last = hops.last().and_then(Option::as_ref);
        assert_eq!(last.map(|a| a.from), Some(d.dst), "{}: {hops:?}", d.name);
    }
    println!("all in {:.1?}", started.elapsed());
}
