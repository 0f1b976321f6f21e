//! `vtnt bench net` end to end at a small N: native (the baseline), runc, Docker, iperf3
//! in the full Debian VM (QEMU, TCG here) and the unikernel's endpoint under QEMU (TCG)
//! and vtnt-monitor and as an spt process, two points of each sweep, one second per test,
//! over IPv4 and, for the runtimes that have it, IPv6; the report, its figures and sane
//! values. A row whose VMM is not installed here
//! (Firecracker) is a line of the report's missing list, and the run goes on. Needs root,
//! iperf3 and cgroup v1; skipped through vtnt-testkit otherwise.

use vtnt_evaluation::net::{bench_net, BenchNetArgs, Family, Sweep};
use vtnt_evaluation::row::Row;
use vtnt_runtimes::Runtime;

fn row(s: &str) -> Row {
    s.parse().unwrap()
}

#[test]
fn small_net_report_is_complete() {
    vtnt_testkit::require_root!("iperf3", "ip", "qemu-system-x86_64", "runc", "dockerd");
    vtnt_testkit::require_cgroup_v1!(vtnt_measure::cgroup::available());
    let out = std::env::temp_dir().join(format!("vtnt-bench-net-{}", std::process::id()));
    let args = BenchNetArgs {
        runtimes: [
            "native",
            "runc",
            "docker",
            "microvm:qemu-tcg",
            "microvm:monitor",
            "microvm:firecracker",
            "vm",
            "spt",
        ]
        .map(row)
        .to_vec(),
        families: vec![Family::Ipv4, Family::Ipv6],
        reps: 1,
        tcp_buffers: vec![100, 20000],
        tcp_msgs: vec![16384],
        udp_msgs: vec![1000],
        seconds: 1,
        wait: 300,
        out: out.clone(),
    };
    let rep = bench_net(&args).expect("bench_net");
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    assert!(md.contains(&rep.provenance.commit) && json.contains("\"provenance\""));
    // a VMM not installed (or, installed, one that runs no cgroup wrapper): said, and the
    // run went on past it
    assert!(
        md.contains("## Missing") && md.contains("- microvm:firecracker: "),
        "{md}"
    );
    if vtnt_unikernel::firecracker::binary().is_none() {
        assert!(md.contains("`firecracker` is not installed"), "{md}");
    }
    // a microVM monitor that cannot run here is a line of the report, not a failure
    let monitor = vtnt_unikernel::monitor::usable();
    for rt in ["native", "runc", "docker", "microvm:qemu-tcg", "vm", "spt"]
        .map(row)
        .into_iter()
        .chain(monitor.then(|| row("microvm:monitor")))
    {
        // every runtime's endpoint is dual stack: both families measured, nothing missing
        assert!(
            !rep.missing.iter().any(|(r, _)| *r == rt),
            "{rt}: {:?}",
            rep.missing
        );
        for (sweep, family) in Sweep::ALL
            .into_iter()
            .flat_map(|s| [Family::Ipv4, Family::Ipv6].map(move |f| (s, f)))
        {
            let points: Vec<_> = rep
                .points
                .iter()
                .filter(|p| p.runtime == rt && p.sweep == sweep && p.family == family)
                .collect();
            assert!(!points.is_empty(), "{rt:?} {sweep:?} {family:?}: no point");
            for p in points {
                let (mbps, _) = p.mbps().unwrap_or_else(|| panic!("{p:?}"));
                // between a trickle and more than this host's memory bandwidth
                assert!(mbps > 0.5 && mbps < 200_000.0, "{p:?}");
                let ratio = rep.ratio(p).expect("a ratio to native");
                assert!(ratio > 0.0, "{p:?}");
                // an IPv6 point's ratio to its runtime's IPv4 point, none for IPv4's
                let v6 = rep.ipv6_over_ipv4(p);
                assert_eq!(v6.is_some_and(|r| r > 0.0), family == Family::Ipv6, "{p:?}");
                let cpu = p.cpu_per_gbit().expect("CPU per gigabit");
                assert!(cpu > 0.0 && cpu < 1000.0, "{p:?}: {cpu} s/Gbit");
                // every row says what it ran on
                assert_eq!(
                    p.accel.is_some(),
                    matches!(rt.runtime, Runtime::Microvm | Runtime::Vm)
                );
            }
        }
    }
    // Linux's floor: the seed's 100-byte buffer is Linux's minimum, doubled
    let floor = rep
        .points
        .iter()
        .filter(|p| p.runtime == row("native") && p.sweep == Sweep::TcpBuffer && p.value == 100)
        .collect::<Vec<_>>();
    assert_eq!(floor.len(), 2, "{floor:?}");
    for p in floor {
        assert_eq!(p.reps[0].sndbuf, Some(4608), "{p:?}");
    }
    assert!(md.contains("| microvm:qemu-tcg | IPv4 | TCG |"), "{md}");
    assert!(md.contains("| native | IPv6 | host kernel | 100 |"), "{md}");
    // the full VM's row names its accelerator: TCG where /dev/kvm cannot boot Linux
    let vm = format!("| vm | IPv4 | {} |", vtnt_runtimes::vm::accel().name());
    assert!(md.contains(&vm), "{md}");
    for f in [
        "fig1_tcp_buffer_throughput.png",
        "fig1_tcp_buffer_ratio.png",
        "fig3_udp_msg_throughput.png",
        "fig1_tcp_buffer_ipv6_throughput.png",
        "fig3_udp_msg_ipv6_over_ipv4.png",
    ] {
        let len = std::fs::metadata(out.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 1000, "{f}: {len} bytes");
    }
    let _ = std::fs::remove_dir_all(&out);
}
