//! Architecture-specific code. vTNT's unikernel runs on x86_64 only; everything that
//! touches registers, ports, page tables or the boot protocol lives under `x86_64/`.

pub mod x86_64;
