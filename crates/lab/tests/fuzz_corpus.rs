//! Every file of the lab's fuzz seed corpora runs through the same function as its fuzz
//! target (`crates/lab/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

fn dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn run(target: &str, f: fn(&[u8])) {
    let mut n = 0;
    for entry in std::fs::read_dir(dir(target)).expect("corpus directory") {
        f(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 3, "{target}: {n} seed files");
}

#[test]
fn lab_packet_corpus() {
    run("lab_packet", body::lab_packet);
}

#[test]
fn topology_parse_corpus() {
    run("topology_parse", body::topology_parse);
}

#[test]
fn lab_change_corpus() {
    run("lab_change", body::lab_change);
}

/// Rewrites the `lab_packet` seeds: ICMP, UDP and TCP probes, over IPv4 and IPv6, from
/// the reference topology's vantage point towards each tunnel class's destination, at
/// TTLs that expire inside the tunnels (and one that reaches the plain destination).
#[test]
#[ignore]
fn write_seed_corpus() {
    use std::net::Ipv4Addr;
    use vtnt_lab::addr::to_v6;
    use vtnt_wire::build::{self, Echo, Ip, Tcp, Udp};
    use vtnt_wire::build6;
    use vtnt_wire::ipv6::Ip6;

    let dir = dir("lab_packet");
    const SYN: Tcp = Tcp {
        sport: 0x8001,
        dport: 80,
        seq: 1,
        ack: 0,
        flags: 0x02,
        window: 1024,
    };
    const UDP: Udp = Udp {
        sport: 0x8001,
        dport: 33435,
        payload: &[0; 12],
        checksum: None,
    };
    let echo = |icmp_type| Echo {
        icmp_type,
        ident: 0x8001,
        seq: 1,
        payload: &[0; 12],
        checksum: None,
    };
    for (name, last, ttl) in [
        ("explicit", 10, 3),
        ("implicit", 18, 4),
        ("opaque", 26, 5),
        ("invisible_php", 34, 3),
        ("invisible_uhp", 50, 4),
        ("plain", 2, 64),
    ] {
        let ip = Ip {
            src: Ipv4Addr::new(192, 0, 2, 2),
            dst: Ipv4Addr::new(203, 0, 113, last),
            ttl,
            tos: 0,
            ipid: 7,
        };
        // the same probes over IPv6, between the lab IPv6 twins of both addresses
        let ip6 = Ip6 {
            src: to_v6(ip.src),
            dst: to_v6(ip.dst),
            hop_limit: ttl,
            traffic_class: 0,
            flow_label: 0x8001,
        };
        for kind in ["icmp", "udp", "tcp", "icmp6", "udp6", "tcp6"] {
            // the first byte is the port: 0, the vantage point
            let mut seed = vec![0u8; 129];
            let b = &mut seed[1..];
            let n = match kind {
                "icmp" => build::icmp_echo(b, &ip, &echo(8)),
                "udp" => build::udp(b, &ip, &UDP),
                "tcp" => build::tcp(b, &ip, &SYN),
                "icmp6" => build6::icmp6_echo(b, &ip6, &echo(128)),
                "udp6" => build6::udp6(b, &ip6, &UDP),
                _ => build6::tcp6(b, &ip6, &SYN),
            }
            .unwrap();
            seed.truncate(1 + n);
            std::fs::write(dir.join(format!("{kind}_{name}")), seed).unwrap();
        }
    }
}
