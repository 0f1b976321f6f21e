//! What the lab's fuzz targets do with one input, shared with the corpus test
//! (`crates/lab/tests/fuzz_corpus.rs`) so every corpus file also runs under `cargo test`.

#![allow(dead_code)]

use std::sync::OnceLock;

use vtnt_lab::{Instant, Lab, Port, Topology};

/// The reference topology, parsed once.
fn reference() -> Topology {
    static TOPOLOGY: OnceLock<Topology> = OnceLock::new();
    TOPOLOGY.get_or_init(Topology::reference).clone()
}

/// `lab_packet`: the first byte picks the port the packet arrives on, the rest is the
/// packet, fed to the reference lab; everything it sends in answer is drained into
/// buffers of every size the input suggests. Nothing may panic, and no answer may claim
/// more bytes than its buffer holds.
pub fn lab_packet(data: &[u8]) {
    let Some((&port, packet)) = data.split_first() else {
        return;
    };
    let mut lab = Lab::new(reference());
    lab.handle_packet(Instant::from_micros(1), Port(u16::from(port % 4)), packet);
    let mut buf = [0u8; 1600];
    let small = 20 + usize::from(port) % 64;
    let mut turn = 0usize;
    loop {
        let cap = if turn.is_multiple_of(2) {
            buf.len()
        } else {
            small
        };
        let Some((_, len)) = lab.poll_transmit(Instant::from_micros(u64::MAX / 2), &mut buf[..cap])
        else {
            break;
        };
        assert!(len <= cap, "answer of {len} bytes in a buffer of {cap}");
        turn += 1;
    }
}

/// `topology_parse`: any text as a topology file. A file that validates must start a
/// lab and give its ground truth; one that does not gets an error naming the file.
pub fn topology_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Topology::parse(text, "fuzz.toml") {
        Ok(topology) => {
            let lab = Lab::new(topology);
            let _ = lab.truth();
        }
        Err(e) => assert!(
            e.to_string().contains("fuzz.toml"),
            "error without the file: {e}"
        ),
    }
}

/// `lab_change`: any text as changes to the reference lab, one a line (the first eight):
/// each either reads back as written and applies, or is refused with the lab as it was;
/// the truth of whatever the changes leave, and probes through it, never panic.
pub fn lab_change(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lab = Lab::new(reference());
    for line in text.lines().take(8) {
        let Ok(change) = line.parse::<vtnt_lab::Change>() else {
            continue;
        };
        assert_eq!(
            change.to_string().parse::<vtnt_lab::Change>().ok(),
            Some(change.clone())
        );
        let before = lab.topology().lsps_down().to_vec();
        if lab.apply(&change).is_err() {
            assert_eq!(
                lab.topology().lsps_down(),
                &before[..],
                "a refused change changed the lab"
            );
        }
    }
    let truth = lab.truth();
    let mut tracer = vtnt_lab::tracer::Tracer::new(&mut lab);
    for d in &truth.destinations {
        let _ = tracer.probe(d.dst, 8);
    }
}
