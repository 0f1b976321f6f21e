//! vtnt-kernel: the vTNT unikernel.
//!
//! An x86_64 kernel that runs exactly one job (a trace, ping or TNT campaign, given as a
//! `vtnt-jobspec` line) with the sans-IO `vtnt-engine` / `vtnt-tnt`, prints its results
//! as scamper JSON lines on its console (the lines the native `vtnt` prints), and ends
//! with a documented status (see `vtnt_abi::exit::Status`).
//!
//! Everything here but [`platform`] is the job's code and knows no platform: [`job`] (the
//! run loop), [`net`] (Ethernet, ARP, DHCP over a platform `Link`), [`cmdline`]. The
//! platform layer is the bottom: it imports `vtnt-abi` and itself only (its console lines,
//! heap, boot steps and exit path are its own modules) and enters the kernel through the
//! `vtnt_kernel_start` symbol. The platforms: a virtual machine
//! (`platform::vm`: PVH + virtio-net under QEMU and Firecracker, or `vtnt-monitor`'s
//! hypercalls; the default build) and a Linux process (`platform::spt`, feature `spt`:
//! raw system calls in a seccomp sandbox, started by `vtnt run --runtime spt`). Each
//! platform's entry point sets up its console, clock and heap, then calls [`start`].
//!
//! With the feature `stream` the image is the stream endpoint instead (`net::stream`, an
//! iperf3 server for `vtnt bench net`) on the same platforms and NIC bring-up; with `fw`
//! it is the firewall network function ([`nf`], seed 002) between two networks.
//!
//! Built for any other target (e.g. by a host `cargo test --workspace`), the crate is a
//! stub binary plus the host-testable parts (the command-line parser, kvmclock's
//! arithmetic, neighbour discovery's frames).
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg_attr(not(target_os = "none"), allow(dead_code))]
mod cmdline;
/// DHCPv6's frames, tested on the host (in the image it is `net::dhcp6`).
#[cfg(not(target_os = "none"))]
#[allow(dead_code)]
#[path = "net/dhcp6.rs"]
mod dhcp6;
#[cfg(target_os = "none")]
#[cfg_attr(any(feature = "stream", feature = "fw"), allow(dead_code))]
mod job;
/// Neighbour discovery's frames, tested on the host (in the image it is `net::ndp`).
#[cfg(not(target_os = "none"))]
#[allow(dead_code)]
#[path = "net/ndp.rs"]
mod ndp;
#[cfg(target_os = "none")]
mod net;
#[cfg(all(target_os = "none", feature = "fw"))]
mod nf;
#[cfg(target_os = "none")]
mod platform;
/// kvmclock's arithmetic, tested on the host (in the image it is `platform::vm::pvclock`).
#[cfg(not(target_os = "none"))]
#[allow(dead_code)]
#[path = "platform/vm/pvclock.rs"]
mod pvclock;

#[cfg(target_os = "none")]
use vtnt_abi::exit::Status;

/// Host stub: the kernel only runs on `x86_64-unknown-none`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("vtnt-kernel is a unikernel: build it with --target x86_64-unknown-none");
    std::process::exit(2);
}

/// After the platform's own boot (console, clock, heap): parses the command line and
/// runs the job. The platform calls it by this symbol (`platform::start`), as Solo5's
/// bindings call `solo5_app_main`: the platform layer names nothing above it.
#[cfg(target_os = "none")]
#[no_mangle]
fn vtnt_kernel_start(cmdline: &'static [u8]) -> ! {
    let cmdline = match cmdline::Cmdline::parse(cmdline) {
        Ok(c) => c,
        Err(e) => fail!(Status::BadCmdline, "command line: {e}"),
    };
    if let Some(word) = cmdline.unknown {
        println!("vtnt: warning: ignoring unknown option `{word}`");
    }
    // every image answers `-- boot`, the check that a VMM boots it on a new host's KVM
    // (the job image in `job::run`)
    #[cfg(any(feature = "stream", feature = "fw"))]
    if cmdline.job_words().eq(["boot"]) {
        job::ready()
    }
    #[cfg(feature = "stream")]
    job::run_stream(&cmdline);
    #[cfg(feature = "fw")]
    nf::run(&cmdline);
    #[cfg(not(any(feature = "stream", feature = "fw")))]
    job::run(&cmdline)
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
    platform::finish::finish(Status::Panic)
}
