//! Build script: links the kernel with `linker.ld` (load address, PVH note segment and
//! layout `ASSERT`s) as a position-dependent executable, or, with the `spt` feature, as a
//! static Linux executable at 0x400000; only for bare-metal targets, so that
//! `cargo check` on the host still works. Also stamps the build (`VTNT_VERSION`) as the
//! `vtnt` command's build script does, with the same code.

#[path = "../cli/version.rs"]
mod version;

fn main() {
    version::emit();
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=linker.ld");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_SPT");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "none" && std::env::var_os("CARGO_FEATURE_SPT").is_some() {
        // A static executable Linux loads at a fixed address: no PIE, so no relocation
        // to apply at run time (there is no loader to apply it).
        println!("cargo:rustc-link-arg-bins=--no-pie");
        println!("cargo:rustc-link-arg-bins=-static");
        println!("cargo:rustc-link-arg-bins=--image-base=0x400000");
        println!("cargo:rustc-link-arg-bins=-znoexecstack");
        println!("cargo:rustc-link-arg-bins=--gc-sections");
        println!("cargo:rustc-link-arg-bins=--icf=all");
    } else if os == "none" {
        println!("cargo:rustc-link-arg-bins=-T{dir}/linker.ld");
        // The 32-bit PVH entry uses absolute addresses: link at a fixed address, not PIE.
        println!("cargo:rustc-link-arg-bins=--no-pie");
        println!("cargo:rustc-link-arg-bins=-znoexecstack");
        println!("cargo:rustc-link-arg-bins=--gc-sections");
        // Fold identical functions (monomorphisations that compile to the same code; Rust
        // functions are `unnamed_addr`, so their addresses are not significant).
        println!("cargo:rustc-link-arg-bins=--icf=all");
    }
}
