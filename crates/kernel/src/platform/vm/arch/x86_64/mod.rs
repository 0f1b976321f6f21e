//! x86_64 specifics: the PVH boot path (`boot`), port I/O and CPU instructions (`io`),
//! powering the VM off with a status (`power`), and what idling with `hlt` needs: the
//! IDT (`interrupts`) and the local APIC timer (`apic`).

pub mod apic;
pub mod boot;
pub mod interrupts;
pub mod io;
pub mod power;
