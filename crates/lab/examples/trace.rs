//! Prints a traceroute (one Paris ICMP probe per TTL) to every destination of a topology,
//! as the lab answers it: `cargo run -p vtnt-lab --example trace [TOPOLOGY.toml]`.

use vtnt_lab::tracer::Tracer;
use vtnt_lab::{Lab, Topology};

fn main() {
    let topo = match std::env::args().nth(1) {
        Some(p) => match Topology::load(p.as_ref()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
        None => Topology::reference(),
    };
    let mut lab = Lab::new(topo);
    let truth = lab.truth();
    let mut t = Tracer::new(&mut lab);
    for d in &truth.destinations {
        println!("== {} {}", d.name, d.dst);
        for (i, h) in t.trace(d.dst, 30).iter().enumerate() {
            match h {
                None => println!("{:2}  *", i + 1),
                Some(a) => println!(
                    "{:2}  {:15} rttl {:3} qttl {:>4} {:?} rtt {:.3} ms",
                    i + 1,
                    a.from.to_string(),
                    a.reply_ttl,
                    a.q_ttl.map_or("-".into(), |q| q.to_string()),
                    a.labels,
                    a.rtt_us as f64 / 1000.0
                ),
            }
        }
    }
}
