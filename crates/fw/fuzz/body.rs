//! What the `iptables_parse` and `nft_parse` fuzz targets do with one input, shared with
//! the corpus test (`crates/fw/tests/fuzz_corpus.rs`) so every corpus file also runs
//! under `cargo test`.

#![allow(dead_code)]

use vtnt_fw::parse::{self, Format};
use vtnt_fw::{print, Classifier, CtState, Hook, IfId, Linear, Options, Packet, Ruleset};

/// The model may take a megabyte, the compiled rules sixteen.
const MODEL_BYTES: usize = 1 << 20;
const COMPILED_BYTES: usize = 16 << 20;

/// Any bytes as a rule file in `format`. Nothing may panic; an error names a line and
/// column inside the text; a ruleset that reads compiles (or is refused as too large)
/// and classifies as the rule-by-rule reference on a few packets; what prints in either
/// syntax reads back and classifies the same.
pub fn rule_file(data: &[u8], format: Format) {
    let Ok(text) = parse::text("fuzz", data) else {
        return;
    };
    let rs = match parse::parse("fuzz", text, format, MODEL_BYTES) {
        Ok(rs) => rs,
        Err(e) => {
            let lines = text.split('\n').count() as u32;
            assert!(
                e.line >= 1 && e.line <= lines.max(1),
                "{e}: line outside the text"
            );
            assert!(e.col >= 1, "{e}");
            return;
        }
    };
    let opts = Options {
        max_bytes: COMPILED_BYTES,
        ..Options::default()
    };
    let Ok(compiled) = Classifier::compile(&rs, &opts) else {
        return;
    };
    agree(&rs, &compiled, &rs);
    for printed in [print::iptables_save(&rs), print::nft(&rs)]
        .into_iter()
        .flatten()
    {
        let again = parse::parse("printed", &printed, Format::detect(&printed), usize::MAX)
            .unwrap_or_else(|e| panic!("{e}\n{printed}"));
        agree(&rs, &compiled, &again);
    }
}

/// Checks that `compiled` (of `rs`) and the reference reading of `other` agree.
fn agree(rs: &Ruleset, compiled: &Classifier, other: &Ruleset) {
    let reference = Linear::new(other);
    let addrs = [
        "10.0.0.1",
        "192.0.2.7",
        "0.0.0.0",
        "255.255.255.255",
        "10.1.2.3",
    ];
    for (i, (s, d)) in addrs.iter().zip(addrs.iter().rev()).enumerate() {
        for proto in [1, 6, 17, 47] {
            let p = Packet {
                src: s.parse().unwrap(),
                dst: d.parse().unwrap(),
                proto,
                sport: [0, 22, 80, 1024, 65535][i],
                dport: [53, 80, 3, 0, 443][i],
                tcp_flags: 0x12,
                fragment: false,
                in_if: IfId::NONE,
                out_if: IfId::NONE,
                state: CtState::ALL[i],
            };
            for h in Hook::ALL {
                let want = reference.classify(h, &p);
                let got = compiled.classify(h, &p);
                assert_eq!(got.action, want.action, "{p:?} at {h:?}: {rs:?}");
            }
        }
    }
}
