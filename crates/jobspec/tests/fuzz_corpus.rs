//! Every file of the `job_decode` seed corpus runs through the same function as the
//! fuzz target (`crates/jobspec/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

#[test]
fn job_decode_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/job_decode");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory") {
        body::job_decode(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 3, "job_decode: {n} seed files");
}
