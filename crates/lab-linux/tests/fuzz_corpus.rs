//! Every file of the `dhcp_handle` seed corpus runs through the same function as the
//! fuzz target (`crates/lab-linux/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

#[test]
fn dhcp_handle_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/dhcp_handle");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory") {
        body::dhcp_handle(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 3, "dhcp_handle: {n} seed files");
}
