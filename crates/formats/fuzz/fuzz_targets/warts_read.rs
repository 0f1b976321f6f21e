//! Fuzz target: the warts reader must never panic, and whatever it reads must be
//! writable again by both writers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vtnt_formats::{read_warts, JsonWriter, WartsWriter};

fuzz_target!(|data: &[u8]| {
    let mut json = JsonWriter::new(std::io::sink());
    let mut warts = WartsWriter::new(std::io::sink());
    for item in read_warts(data).into_iter().flatten() {
        let _ = json.write_item(&item);
        let _ = warts.write_item(&item);
    }
});
