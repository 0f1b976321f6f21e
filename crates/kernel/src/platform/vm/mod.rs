//! The virtual-machine platform: one image that boots two ways.
//!
//! - PVH ([`rust_start`]: QEMU, Firecracker): virtio-net found on PCI or virtio-mmio
//!   ([`discover`], [`virtio`]), the TSC calibrated ([`time`]) and the local APIC timer for
//!   `hlt` ([`idle`]), QEMU's debug console or COM1 ([`console`]).
//! - Our own monitor ([`rust_start_hvt`]: `vtnt-monitor`, hypercalls only, privilege
//!   level 3; see [`hvt`]).
//!
//! Boot sequence (each step's end recorded by `platform::steps`): console -> boot info ->
//! clock (TSC frequency measured, or given by the monitor) -> idling (IDT and local APIC
//! timer, or the monitor's poll) -> heap (from the memory map, [`memory`]) -> the job
//! (`platform::start`). [`hvt::active`] tells the two apart wherever they differ.

pub mod arch;
pub mod bootinfo;
pub mod console;
pub mod discover;
pub mod hal;
pub mod hvt;
pub mod idle;
pub mod memory;
pub mod pvclock;
pub mod time;
pub mod virtio;

use crate::fail;
use crate::platform::Link;
use alloc::boxed::Box;
use bootinfo::BootInfo;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use vtnt_abi::exit::Status;
use vtnt_record::Instant;

pub use idle::{wait_until, wakes_on_frames};
pub use time::now;

/// Rust entry point of a PVH boot (QEMU, Firecracker), called by the boot code in long
/// mode with the PVH start-info address.
#[no_mangle]
pub extern "C" fn rust_start(start_info: u32) -> ! {
    let long_mode_tsc = arch::x86_64::io::rdtsc();
    console::init();
    // SAFETY: `start_info` is the `ebx` the PVH loader entered us with; the heap (not yet
    // set up) avoids everything it points to.
    let Some(info) = (unsafe { bootinfo::Pvh::new(start_info as u64) }) else {
        fail!(
            Status::BootFailed,
            "no PVH start info (bad magic at {start_info:#x})"
        );
    };
    boot(&info, long_mode_tsc, None)
}

/// Rust entry point under `vtnt-monitor` (see [`hvt`]), called at privilege level 3 with
/// the monitor's boot-information address.
#[no_mangle]
pub extern "C" fn rust_start_hvt(boot_info: u64) -> ! {
    let long_mode_tsc = arch::x86_64::io::rdtsc();
    // SAFETY: `boot_info` is the `rdi` the monitor entered us with.
    let Some(info) = (unsafe { hvt::Boot::new(boot_info) }) else {
        // Without the boot information we cannot know we are under the monitor: no
        // console. The monitor reports the exit status.
        hvt::exit(Status::BootFailed as u8)
    };
    boot(&info, long_mode_tsc, Some(info.tsc_hz()))
}

/// The boot sequence after the entry points (module docs); the TSC frequency is measured
/// unless the monitor gives it (`monitor_tsc_hz`: `Some` under the monitor).
fn boot(info: &dyn BootInfo, long_mode_tsc: u64, monitor_tsc_hz: Option<Option<u64>>) -> ! {
    // Marks are port writes for a VMM traced from outside (QEMU under `perf`); the
    // monitor counts its own exits instead.
    if marks_wanted(info.cmdline()) && !hvt::active() {
        MARKS.store(true, Ordering::Relaxed);
    }
    crate::platform::steps::mark_at(crate::platform::steps::Step::LongMode, long_mode_tsc);
    crate::platform::banner(info.protocol(), info.version(), info.cmdline());
    crate::platform::steps::mark(crate::platform::steps::Step::Console);
    let clock_start_tsc = arch::x86_64::io::rdtsc();
    let clock = match monitor_tsc_hz {
        Some(given) => given.map(|hz| time::use_frequency(hz, time::Source::Monitor)),
        None => time::calibrate(),
    };
    let Some((hz, source)) = clock else {
        fail!(
            Status::BootFailed,
            "no clock: TSC frequency unknown (no CPUID leaf, no PIT, none from a monitor)"
        );
    };
    crate::platform::steps::mark(crate::platform::steps::Step::Clock);
    let idle = idle::init();
    crate::platform::steps::mark(crate::platform::steps::Step::Idle);
    let Some(heap_range) = memory::choose(info) else {
        fail!(
            Status::BootFailed,
            "no free RAM of {} KiB for the heap",
            memory::MIN_HEAP / 1024
        );
    };
    // SAFETY: `choose` returned RAM that is identity-mapped and used by nothing else.
    unsafe { crate::platform::heap::init(heap_range.0 as *mut u8, heap_range.1 - heap_range.0) };
    let (mut modules, mut module_bytes) = (0, 0);
    while let Some(m) = info.module(modules) {
        if let Some((p, l)) = MODULES.get(modules) {
            p.store(m.bytes.as_ptr() as usize, Ordering::Relaxed);
            l.store(m.bytes.len(), Ordering::Relaxed);
        }
        modules += 1;
        module_bytes += m.bytes.len();
    }
    crate::println!(
        "{{\"type\":\"boot\",\"tsc_hz\":{},\"tsc_source\":\"{}\",\"idle\":\"{}\",\"heap_kib\":{},\"modules\":{},\"module_bytes\":{},\"acpi\":{},\"clock_start_us\":{},\"boot_us\":{}}}",
        hz,
        source.name(),
        idle,
        (heap_range.1 - heap_range.0) / 1024,
        modules,
        module_bytes,
        info.rsdp().is_some(),
        time::tsc_to_instant(clock_start_tsc).as_micros(),
        now().as_micros()
    );
    crate::platform::steps::mark(crate::platform::steps::Step::Heap);
    crate::platform::start(info.cmdline())
}

/// Boot modules the loader gave (address, length), the first few.
static MODULES: [(AtomicUsize, AtomicUsize); 4] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; 4];

/// The `i`-th boot module's bytes.
pub fn module(i: usize) -> Option<&'static [u8]> {
    let (p, l) = MODULES.get(i)?;
    let (p, l) = (p.load(Ordering::Relaxed), l.load(Ordering::Relaxed));
    // SAFETY: `boot` stored the address and length of a module the loader placed in
    // identity-mapped memory, which the heap avoids and nothing writes.
    (p != 0).then(|| unsafe { core::slice::from_raw_parts(p as *const u8, l) })
}

/// The network the VM was given: the monitor's frames, else the first virtio-net device
/// (on PCI, or at one of the command line's `mmio` windows). Without one, the job fails
/// with `NoNic`. (`mac=` is a process's: a VM's device knows its MAC.)
pub fn open_net(_mac: Option<[u8; 6]>, mmio: &[(u64, u64)]) -> Box<dyn Link> {
    if hvt::active() {
        let Some(mac) = hvt::mac(0) else {
            fail!(
                Status::NoNic,
                "the monitor gave this VM no network (vtnt-monitor --net)"
            );
        };
        return Box::new(hvt::MonitorLink::new(0, mac));
    }
    virtio_link(discover::find_net(mmio))
}

/// The link on the virtio-net device `found`.
fn virtio_link(found: Result<discover::Found, discover::FindError>) -> Box<dyn Link> {
    let (transport, location) = match found {
        Ok(t) => t,
        Err(e) => fail!(Status::NoNic, "{e}"),
    };
    match virtio::VirtioLink::new(transport, location) {
        Ok(link) => Box::new(link),
        Err(e) => fail!(
            Status::NoNic,
            "{location}: virtio-net initialisation failed: {e}"
        ),
    }
}

/// A network function's second network: the monitor's network 1, else the second
/// virtio-net device, found as [`open_net`] finds the first.
#[cfg(feature = "fw")]
pub fn open_second_net(_mac: [u8; 6], mmio: &[(u64, u64)]) -> Box<dyn Link> {
    if hvt::active() {
        let Some(mac) = hvt::mac(1) else {
            fail!(
                Status::NoNic,
                "the monitor gave this VM one network: a network function needs two (vtnt-monitor --net twice)"
            );
        };
        return Box::new(hvt::MonitorLink::new(1, mac));
    }
    virtio_link(discover::find_second_net(mmio))
}

/// Writes `bytes` to the console device now.
pub fn console_emit(bytes: &[u8]) {
    if hvt::active() {
        hvt::puts(bytes)
    } else {
        console::emit(bytes)
    }
}

/// Whether the console gathers several lines before it writes (the monitor's: one exit
/// for many lines).
pub fn console_batches() -> bool {
    hvt::active()
}

/// Ends the VM with `status` (the console already flushed).
pub fn exit(status: Status) -> ! {
    if hvt::active() {
        hvt::exit(status as u8)
    }
    arch::x86_64::power::exit(status as u8)
}

/// The micro job's "system call" (`vtnt_micro::Platform::leave`): the cheapest exit to
/// whatever runs the VM, with no effect: an empty console hypercall to the monitor, a
/// read of the debug console's port under QEMU.
pub fn leave() {
    if hvt::active() {
        hvt::puts(&[])
    } else {
        console::read_port()
    }
}

/// What [`leave`] is, for the micro job's result.
pub fn leave_name() -> &'static str {
    if hvt::active() {
        "hypercall"
    } else {
        "port-read"
    }
}

/// Whether the `marks` option asked for port marks (see `platform::steps`).
static MARKS: AtomicBool = AtomicBool::new(false);

/// Whether the raw command line has the `marks` option before its `--` (read before the
/// command line is parsed, so the first steps are marked too).
fn marks_wanted(cmdline: &[u8]) -> bool {
    cmdline
        .split(|&b| b == b' ')
        .take_while(|&w| w != b"--")
        .any(|w| w == b"marks")
}

/// Marks the end of boot step `n` on port 0x80 for a tracing host, if asked to.
pub fn mark_step(n: u8) {
    if MARKS.load(Ordering::Relaxed) {
        // SAFETY: port 0x80 is the POST-code port: no device of ours uses it, a write has
        // no effect beyond the VM exit the host traces.
        unsafe { arch::x86_64::io::outb(vtnt_abi::steps::MARK_PORT, n) };
    }
}

/// A cheap timestamp (the TSC), for the boot steps.
pub fn ticks() -> u64 {
    arch::x86_64::io::rdtsc()
}

/// A [`ticks`] value as guest time.
pub fn ticks_to_instant(t: u64) -> Instant {
    time::tsc_to_instant(t)
}

/// A seed for DHCP's transaction ids.
pub fn random_seed() -> u64 {
    arch::x86_64::io::rdtsc()
}
