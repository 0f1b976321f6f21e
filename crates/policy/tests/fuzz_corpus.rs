//! Every file of the `prefix_list` seed corpus runs through the same function as the fuzz
//! target (`crates/policy/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

#[test]
fn prefix_list_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/prefix_list");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory") {
        body::prefix_list(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 3, "prefix_list: {n} seed files");
}
