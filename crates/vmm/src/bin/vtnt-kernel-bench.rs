//! `vtnt-kernel-bench`: the unikernel's figures, printed as `name: value` lines.
//!
//! - stripped image size;
//! - guest time from first instruction to ready (TSC-based, printed by the guest) and
//!   host wall time per boot, on microvm, q35 and pc (median of `--runs`, default 5);
//! - QEMU's peak RSS (VmHWM);
//! - for the ping job over TAP in a private namespace (root only): time to ready (NIC up
//!   and gateway resolved) and to the first probe;
//! - the smallest guest RAM (whole MiB, binary search over `-m`) in which the ping job
//!   (root) or the boot job (otherwise) completes.
//!
//! The accelerator is TCG unless `VTNT_ACCEL=kvm`: this is what the figures say.

use std::time::Duration;
use vtnt_vmm::image::{self, BuildOptions};
use vtnt_vmm::netns::{self, NetNs};
use vtnt_vmm::qemu::{self, Accel, Machine, NetBackend, VmConfig};
use vtnt_vmm::{GuestStatus, Outcome};

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn main() {
    let mut runs = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(runs)
                    .max(1)
            }
            _ => {
                eprintln!("usage: vtnt-kernel-bench [--runs N]");
                std::process::exit(2);
            }
        }
    }
    if vtnt_vmm::on_path(qemu::QEMU).is_none() {
        eprintln!("vtnt-kernel-bench: {} is not installed", qemu::QEMU);
        std::process::exit(1);
    }
    let img = image::build(&BuildOptions::default()).unwrap_or_else(|e| {
        eprintln!("vtnt-kernel-bench: {e}");
        std::process::exit(1)
    });
    let accel = match std::env::var("VTNT_ACCEL").as_deref() {
        Ok("kvm") => Accel::Kvm,
        _ => Accel::Tcg,
    };
    let accel_name = if accel == Accel::Kvm { "kvm" } else { "tcg" };
    println!("accel: {accel_name}");
    println!(
        "image_size: {} bytes ({:.1} KiB, {}; unstripped {} bytes)",
        img.size,
        img.size as f64 / 1024.0,
        if img.stripped {
            "stripped"
        } else {
            "not stripped"
        },
        img.unstripped_size
    );

    let base = |machine: Machine, cmdline: &str| {
        let mut c = VmConfig::new(img.path.clone(), machine, cmdline);
        c.accel = accel;
        c.timeout = Duration::from_secs(60);
        c
    };

    for machine in Machine::ALL {
        let (mut ready, mut wall, mut rss) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            match qemu::run(&base(machine, "-- boot")) {
                Ok(o) if o.status == GuestStatus::Exited(0) => {
                    ready.push(o.json_u64("ready", "ready_us").unwrap_or(0));
                    wall.push(o.wall.as_micros() as u64);
                    rss.push(o.peak_rss_kib.unwrap_or(0));
                }
                other => println!("{}: boot failed: {other:?}", machine.name()),
            }
        }
        println!(
            "boot_{m}: guest first-instruction->ready {} us ({accel_name}, median of {}); host spawn->exit {} us; qemu peak RSS {} KiB",
            median(ready),
            wall.len(),
            median(wall),
            median(rss),
            m = machine.name()
        );
    }

    let ns = if netns::is_root() {
        let ns = NetNs::create(&netns::unique_name("vtnt-kb")).expect("ip netns add");
        ns.add_tap("vtap0", "192.0.2.1/24").expect("tap");
        Some(ns)
    } else {
        println!("ping: skipped (needs root for a network namespace)");
        None
    };
    let ping_cfg = |machine: Machine, ns: &NetNs, mib: u32| {
        let mut c = base(
            machine,
            "ip=192.0.2.10/24 gw=192.0.2.1 -- ping -c 1 192.0.2.1",
        );
        c.net = Some(NetBackend::Tap {
            ifname: "vtap0".into(),
        });
        c.netns = Some(ns.name().to_string());
        c.memory_mib = mib;
        c.timeout = Duration::from_secs(20);
        c
    };
    if let Some(ns) = &ns {
        for machine in Machine::ALL {
            let (mut ready, mut first, mut rss) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..runs {
                if let Ok(o) = qemu::run(&ping_cfg(machine, ns, 16)) {
                    if o.status == GuestStatus::Exited(0) {
                        ready.push(o.json_u64("timing", "ready_us").unwrap_or(0));
                        first.push(o.json_u64("timing", "first_probe_us").unwrap_or(0));
                        rss.push(o.peak_rss_kib.unwrap_or(0));
                    }
                }
            }
            println!(
                "ping_{m}: guest first-instruction->ready (NIC up, gateway ARP-resolved) {} us, ->first probe {} us ({accel_name}, median of {}); qemu peak RSS {} KiB (-m 16)",
                median(ready),
                median(first),
                rss.len(),
                median(rss),
                m = machine.name()
            );
        }
    }

    for machine in Machine::ALL {
        let ok = |mib: u32| -> bool {
            let out: Option<Outcome> = match &ns {
                Some(ns) => qemu::run(&ping_cfg(machine, ns, mib)).ok(),
                None => {
                    let mut c = base(machine, "-- boot");
                    c.memory_mib = mib;
                    c.timeout = Duration::from_secs(20);
                    qemu::run(&c).ok()
                }
            };
            out.is_some_and(|o| o.status == GuestStatus::Exited(0))
        };
        // Smallest passing MiB in [1, 64], assuming monotonicity.
        let (mut lo, mut hi) = (1u32, 64u32);
        if !ok(hi) {
            println!("min_ram_{}: more than {hi} MiB?", machine.name());
            continue;
        }
        while lo < hi {
            let mid = (lo + hi) / 2;
            if ok(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        println!(
            "min_ram_{}: {hi} MiB ({} job completes)",
            machine.name(),
            if ns.is_some() { "ping" } else { "boot" }
        );
    }
}
