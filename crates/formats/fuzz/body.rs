//! What the `warts_read` and `json_read` fuzz targets do with one input, shared with the
//! corpus test (`crates/formats/tests/robustness.rs`) so every corpus file also runs
//! under `cargo test`.

#![allow(dead_code)]

use vtnt_formats::{read_warts, JsonReader, JsonWriter, WartsWriter};

/// `warts_read`: any bytes as a warts file. Nothing may panic; whatever reads is written
/// again by both writers. Returns how many items read.
pub fn warts_read(data: &[u8]) -> usize {
    let mut json = JsonWriter::new(std::io::sink());
    let mut warts = WartsWriter::new(std::io::sink());
    let mut ok = 0;
    for item in read_warts(data).into_iter().flatten() {
        let _ = json.write_item(&item);
        let _ = warts.write_item(&item);
        ok += 1;
    }
    ok
}

/// `json_read`: any bytes as scamper JSON, the same way. Returns how many items read.
pub fn json_read(data: &[u8]) -> usize {
    let mut json = JsonWriter::new(std::io::sink());
    let mut warts = WartsWriter::new(std::io::sink());
    let mut ok = 0;
    for item in JsonReader::new(data).flatten() {
        let _ = json.write_item(&item);
        let _ = warts.write_item(&item);
        ok += 1;
    }
    ok
}
