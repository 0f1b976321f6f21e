//! Build script: the version string `vtnt --version` prints and every record and report
//! carries (`version.rs`).

#[path = "version.rs"]
mod version;

fn main() {
    version::emit();
}
