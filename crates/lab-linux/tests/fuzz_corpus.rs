//! Every file of the seed corpora runs through the same function as its fuzz target
//! (`crates/lab-linux/fuzz`).

#[path = "../fuzz/body.rs"]
mod body;

use std::path::PathBuf;

/// Runs `f` on every file of `target`'s corpus; there are at least `min`.
fn replay(target: &str, min: usize, f: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory") {
        f(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= min, "{target}: {n} seed files");
}

#[test]
fn dhcp_handle_corpus() {
    replay("dhcp_handle", 3, body::dhcp_handle);
}

#[test]
fn vm_frames_corpus() {
    replay("vm_frames", 4, body::vm_frames);
}
