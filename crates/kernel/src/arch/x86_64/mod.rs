//! x86_64 specifics: the PVH boot path (`boot`), port I/O and CPU instructions (`io`),
//! and powering the VM off with a status (`power`).

pub mod boot;
pub mod io;
pub mod power;
