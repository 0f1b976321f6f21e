//! vtnt-kernel: the vTNT unikernel.
//!
//! A PVH-bootable x86_64 ELF that runs exactly one job (a trace, ping or TNT campaign,
//! given as a `vtnt-jobspec` line) with the sans-IO `vtnt-engine` / `vtnt-tnt` over
//! virtio-net, prints its results as scamper JSON lines on COM1 (the lines the native
//! `vtnt` prints), and powers off with a documented status (see [`exit::Status`]).
//!
//! Two platforms: a PVH boot ([`rust_start`]: QEMU, Firecracker; virtio-net, the local
//! APIC timer, port-I/O console) and our own monitor ([`rust_start_hvt`]: `vtnt-monitor`,
//! hypercalls only, privilege level 3; see [`hvt`]). Boot sequence ([`boot`], each step's
//! end recorded by [`steps`]): console -> boot info -> clock (TSC frequency measured, or
//! given by the monitor) -> idling (IDT and local APIC timer for `hlt`, or the monitor's
//! poll) -> command line -> heap (from the memory map) -> job. Jobs that need the network
//! then find a virtio-net device (MMIO or PCI), lease an address by DHCP when told
//! `ip=dhcp`, resolve the gateway by ARP, and enter the run loop in [`job`].
//!
//! Built for any other target (e.g. by a host `cargo test --workspace`), the crate is a
//! stub binary plus the host-testable parts (the command-line parser, kvmclock's
//! arithmetic).
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod arch;
#[cfg(target_os = "none")]
mod bootinfo;
#[cfg_attr(not(target_os = "none"), allow(dead_code))]
mod cmdline;
#[cfg(target_os = "none")]
mod console;
#[cfg(target_os = "none")]
mod exit;
#[cfg(target_os = "none")]
mod heap;
#[cfg(target_os = "none")]
mod hvt;
#[cfg(target_os = "none")]
mod job;
#[cfg(target_os = "none")]
mod net;
#[cfg_attr(not(target_os = "none"), allow(dead_code))]
mod pvclock;
#[cfg(target_os = "none")]
mod steps;
#[cfg(target_os = "none")]
mod time;

#[cfg(target_os = "none")]
use bootinfo::BootInfo;
#[cfg(target_os = "none")]
use exit::Status;

/// Host stub: the kernel only runs on `x86_64-unknown-none`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("vtnt-kernel is a unikernel: build it with --target x86_64-unknown-none");
    std::process::exit(2);
}

/// Rust entry point of a PVH boot (QEMU, Firecracker), called by the boot code in long
/// mode with the PVH start-info address.
#[cfg(target_os = "none")]
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
#[cfg(target_os = "none")]
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
#[cfg(target_os = "none")]
fn boot(info: &dyn BootInfo, long_mode_tsc: u64, monitor_tsc_hz: Option<Option<u64>>) -> ! {
    // Marks are port writes for a VMM traced from outside (QEMU under `perf`); the
    // monitor counts its own exits instead.
    if steps::wanted(info.cmdline()) && !hvt::active() {
        steps::enable_marks();
    }
    steps::mark_at(steps::Step::LongMode, long_mode_tsc);
    println!(
        "vtnt-kernel {} booting ({} v{}, cmdline \"{}\")",
        env!("CARGO_PKG_VERSION"),
        info.protocol(),
        info.version(),
        console::JsonStr(core::str::from_utf8(info.cmdline()).unwrap_or("<not utf-8>"))
    );
    steps::mark(steps::Step::Console);
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
    steps::mark(steps::Step::Clock);
    let idle = time::init_idle();
    steps::mark(steps::Step::Idle);
    let cmdline = match cmdline::Cmdline::parse(info.cmdline()) {
        Ok(c) => c,
        Err(e) => fail!(Status::BadCmdline, "command line: {e}"),
    };
    if let Some(word) = cmdline.unknown {
        println!("vtnt: warning: ignoring unknown option `{word}`");
    }
    let Some(heap_range) = heap::choose(info) else {
        fail!(
            Status::BootFailed,
            "no free RAM of {} KiB for the heap",
            heap::MIN_HEAP / 1024
        );
    };
    // SAFETY: `choose` returned RAM that is identity-mapped and used by nothing else.
    unsafe { heap::init(heap_range) };
    let (mut modules, mut module_bytes) = (0, 0);
    while let Some(m) = info.module(modules) {
        modules += 1;
        module_bytes += m.bytes.len();
    }
    println!(
        "{{\"type\":\"boot\",\"tsc_hz\":{},\"tsc_source\":\"{}\",\"idle\":\"{}\",\"heap_kib\":{},\"modules\":{},\"module_bytes\":{},\"acpi\":{},\"clock_start_us\":{},\"boot_us\":{}}}",
        hz,
        source.name(),
        idle,
        (heap_range.1 - heap_range.0) / 1024,
        modules,
        module_bytes,
        info.rsdp().is_some(),
        time::tsc_to_instant(clock_start_tsc).as_micros(),
        time::now().as_micros()
    );
    steps::mark(steps::Step::Heap);
    job::run(&cmdline, info)
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    // By default only where it panicked (`PanicInfo`'s Display without the message line):
    // reading the message at all keeps every panic site's argument formatting (Debug
    // impls, index and slice messages, ...) in the image, ~14 KiB of the size budget.
    // Build with `--features panic-messages` to print the message too.
    #[cfg(feature = "panic-messages")]
    println!("vtnt: error: panic: {}", info);
    #[cfg(not(feature = "panic-messages"))]
    match info.location() {
        Some(l) => println!(
            "vtnt: error: panic: panicked at {}:{}:{}: (message not kept in this build)",
            l.file(),
            l.line(),
            l.column()
        ),
        None => println!("vtnt: error: panic (message not kept in this build)"),
    }
    exit::finish(Status::Panic)
}
