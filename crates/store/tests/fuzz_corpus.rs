//! Every file of the `pfx2as_parse` seed corpus runs through the same function as the
//! fuzz target (`crates/store/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

#[test]
fn pfx2as_parse_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/pfx2as_parse");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory") {
        body::pfx2as_parse(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 5, "pfx2as_parse: {n} seed files");
}
