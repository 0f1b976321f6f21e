//! Every file of the `iptables_parse` and `nft_parse` seed corpora runs through the same
//! function as the fuzz targets (`crates/fw/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

use vtnt_fw::parse::Format;

fn corpus(target: &str, format: Format) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory") {
        body::rule_file(&std::fs::read(entry.unwrap().path()).unwrap(), format);
        n += 1;
    }
    assert!(n >= 4, "{target}: {n} seed files");
}

#[test]
fn iptables_parse_corpus() {
    corpus("iptables_parse", Format::IptablesSave);
}

#[test]
fn nft_parse_corpus() {
    corpus("nft_parse", Format::Nft);
}
