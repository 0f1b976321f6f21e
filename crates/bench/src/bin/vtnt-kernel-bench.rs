//! `vtnt-kernel-bench`: the unikernel's figures against its budgets, as `name: value`
//! lines and a markdown table (for docs/benchmarks.md).
//!
//! Every figure is taken on each platform side by side: `vtnt-monitor` (where
//! `/dev/kvm` works), QEMU microvm under `vtnt_unikernel::accel`'s choice, and with
//! `--qemu-kvm` QEMU under this host's KVM too where that choice is TCG (PVM hosts).
//!
//! - stripped image size (budget: `vtnt_unikernel::image::IMAGE_BUDGET`);
//! - boot job: guest time first instruction -> ready (TSC, printed by the guest), host
//!   spawn -> exit, the VMM's peak RSS and host CPU (median of `--runs`, default 5); also
//!   QEMU's q35 and pc machines;
//! - a TNT job (2 lab destinations) in a microVM on a `vtnt lab` (root): guest time
//!   first instruction -> first probe, host spawn -> first probe and -> exit, the VMM's
//!   peak RSS, guest heap high-water mark;
//! - the smallest guest RAM (whole MiB, binary search over `-m`) in which that TNT job
//!   completes (goal 4 MiB); without root, the boot job's;
//! - host CPU time (user + system of the QEMU process, all threads) on microvm of the
//!   boot job, of `ping -c 3 -i 1` to the lab gateway and of a 10 s hold (`ping -c 1`
//!   then `hold=10s`; an image without `hold` gets `ping -c 2 -i 10`, i.e. 10 s of
//!   waiting, instead), median of `--runs`: what a guest costs its host while it waits.
//!
//! It boots the installed job image (`lib/vtnt/vtnt-unikernel.elf`, which `cargo xtask
//! dist` lays out: run that first after a change to the kernel); `--image FILE` boots
//! that image instead (e.g. an older build, for before/after figures).
//!
//! `--breakdown` prints instead where the boot's time and exits go, step by step
//! (`vtnt_unikernel::breakdown`): the boot job, and with a lab the TNT job up to its first
//! probe; times are medians of `--runs` untraced runs, exit counts come from one run
//! traced with `perf` (KVM tracepoints) and the guest's step marks.
//!
//! The lab: `--lab NAME` uses a running one; otherwise one is started (and stopped) with
//! the `vtnt` binary given by `--vtnt PATH` or found beside this executable. The accelerator is `vtnt_unikernel::accel`'s choice (KVM of this host's
//! kind where our image boots under it, else TCG; `VTNT_ACCEL=tcg|kvm` overrides); every
//! figure says which (KVM, PVM-KVM or TCG).

use std::path::PathBuf;
use std::time::Duration;

use vtnt_abi::record::ExitRecord;
use vtnt_unikernel::breakdown::{self, Counts, Timing};
use vtnt_unikernel::image;
use vtnt_unikernel::launch::{run_job, JobNet, RunOutcome, RunSpec, Vmm};
use vtnt_unikernel::monitor::{self, MonitorConfig};
use vtnt_unikernel::qemu::{self, Accel, Machine, VmConfig};
use vtnt_unikernel::{netns, GuestStatus, Outcome};

const TNT_JOB: &str = "vtnt-job=1 kind=tnt targets=203.0.113.26,203.0.113.42";

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("vtnt-kernel-bench: {msg}");
    std::process::exit(1)
}

/// The unikernel's figures against its budgets (see the module docs).
#[derive(clap::Parser)]
#[command(name = "vtnt-kernel-bench")]
struct Args {
    /// Repetitions per figure (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=1000))]
    runs: u16,
    /// Use this running `vtnt lab` instead of starting one.
    #[arg(long, conflicts_with = "vtnt")]
    lab: Option<String>,
    /// The `vtnt` binary that starts the lab (default: the one beside this executable).
    #[arg(long)]
    vtnt: Option<PathBuf>,
    /// Boot this image instead of the installed one.
    #[arg(long)]
    image: Option<PathBuf>,
    /// Print the step-by-step breakdown (times and exit counts) instead of the budgets.
    #[arg(long)]
    breakdown: bool,
    /// Also measure QEMU under this host's KVM where QEMU's default is TCG (PVM hosts).
    #[arg(long)]
    qemu_kvm: bool,
}

/// A lab we started, stopped on drop.
struct OwnLab(String);

impl Drop for OwnLab {
    fn drop(&mut self) {
        let _ = vtnt_lab_linux::down(&self.0);
    }
}

fn find_vtnt(given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| {
        let beside = std::env::current_exe().ok()?.with_file_name("vtnt");
        Some(beside).filter(|p| p.is_file())
    })
}

/// A boot image and its size.
struct Img {
    path: PathBuf,
    size: u64,
}

fn heap_peak(o: &RunOutcome) -> Option<u64> {
    let line = o
        .diagnostics
        .iter()
        .find(|l| l.starts_with("{\"type\":\"timing\""))?;
    vtnt_unikernel::outcome::json_u64(line, "heap_peak")
}

fn main() {
    let a = <Args as clap::Parser>::parse();
    if vtnt_unikernel::which(qemu::QEMU).is_none() {
        die(format!("{} is not installed", qemu::QEMU));
    }
    let path = match &a.image {
        Some(p) => p.clone(),
        None => image::job().unwrap_or_else(|e| die(e)),
    };
    let size = std::fs::metadata(&path)
        .unwrap_or_else(|e| die(format!("{}: {e}", path.display())))
        .len();
    let img = Img { path, size };
    let used = vtnt_unikernel::qemu::resolve(&img.path);
    let accel = if used.is_kvm() {
        Accel::Kvm
    } else {
        Accel::Tcg
    };
    let acc = used.name();
    let mut table: Vec<(String, String, String)> = Vec::new();
    println!("accel: {acc}");
    let entry = breakdown::elf_entry(&img.path).unwrap_or(0);
    // A light trace's wrapper and data file (no wrapper where perf cannot trace).
    let light = || {
        let data = std::env::temp_dir().join(format!("vtnt-light-{}.perf", std::process::id()));
        let w = if breakdown::unavailable().is_none() {
            breakdown::light_wrapper(&data, entry)
        } else {
            Vec::new()
        };
        (w, data)
    };
    if a.breakdown {
        let boot = |wrapper: Vec<String>, marks: bool| {
            let mut c = VmConfig::new(
                img.path.clone(),
                Machine::Microvm,
                if marks { "marks -- boot" } else { "-- boot" },
            );
            c.accel = accel;
            c.wrapper = wrapper;
            qemu::run(&c)
                .ok()
                .filter(|o| o.status == GuestStatus::Exited(0))
        };
        let times: Vec<Timing> = (0..a.runs)
            .filter_map(|_| {
                let t = Timing::from_outcome(&boot(Vec::new(), false)?, "ready", "ready_us")?;
                let (w, data) = light();
                let marks = boot(w, false).and_then(|_| host_marks(&data));
                let _ = std::fs::remove_file(&data);
                Some(t.with_host(marks))
            })
            .collect();
        let counts = traced(used, |w| boot(w, true).map(|_| ()));
        println!(
            "\n### Boot job, microvm ({acc}), median of {}\n\n{}",
            times.len(),
            breakdown::table(&Timing::median(&times), counts.as_deref(), "ready")
        );
    }
    println!(
        "image_size: {} bytes ({:.1} KiB, {})",
        img.size,
        img.size as f64 / 1024.0,
        img.path.display()
    );
    table.push((
        "stripped image size".into(),
        format!("{:.1} KiB ({} bytes)", img.size as f64 / 1024.0, img.size),
        format!(
            "<= {} KiB: {}",
            image::IMAGE_BUDGET / 1024,
            if img.size <= image::IMAGE_BUDGET {
                "met"
            } else {
                "MISSED"
            }
        ),
    ));

    let platforms = platforms(&img.path, a.qemu_kvm);
    if !a.breakdown {
        for p in &platforms {
            let runs: Vec<Outcome> = (0..a.runs)
                .filter_map(|_| boot_once(p, &img.path))
                .collect();
            if runs.len() < a.runs as usize {
                println!(
                    "boot ({}): {} of {} runs failed",
                    p.label,
                    a.runs as usize - runs.len(),
                    a.runs
                );
            }
            let r = median(
                runs.iter()
                    .map(|o| o.json_u64("ready", "ready_us").unwrap_or(0))
                    .collect(),
            );
            let w = median(runs.iter().map(|o| o.wall.as_micros() as u64).collect());
            let m = median(runs.iter().map(|o| o.peak_rss_kib.unwrap_or(0)).collect());
            let c = median(
                runs.iter()
                    .map(|o| o.cpu.map_or(0, |d| d.as_millis() as u64))
                    .collect(),
            );
            println!("boot ({}): guest first-instruction->ready {r} us; host spawn->exit {w} us; VMM peak RSS {m} KiB; host CPU {c} ms", p.label);
            table.push((
                format!("boot job, {}: guest first instruction -> ready", p.label),
                format!("{r} us"),
                String::new(),
            ));
            table.push((
                format!(
                    "boot job, {}: host spawn -> exit / VMM peak RSS / host CPU",
                    p.label
                ),
                format!(
                    "{:.1} ms / {:.1} MiB / {} ms",
                    w as f64 / 1000.0,
                    m as f64 / 1024.0,
                    c
                ),
                String::new(),
            ));
        }
        // The other machine types exist under QEMU only.
        for machine in [Machine::Q35, Machine::Pc] {
            let (mut ready, mut wall) = (Vec::new(), Vec::new());
            for _ in 0..a.runs {
                let mut c = VmConfig::new(img.path.clone(), machine, "-- boot");
                c.accel = accel;
                match qemu::run(&c) {
                    Ok(o) if o.status == GuestStatus::Exited(0) => {
                        ready.push(o.json_u64("ready", "ready_us").unwrap_or(0));
                        wall.push(o.wall.as_micros() as u64);
                    }
                    other => println!("{}: boot failed: {other:?}", machine.name()),
                }
            }
            let (r, w) = (median(ready), median(wall));
            println!(
                "boot_{}: guest first-instruction->ready {r} us ({acc}); host spawn->exit {w} us",
                machine.name()
            );
            table.push((
                format!("boot job, QEMU {} ({acc}): guest first instruction -> ready / host spawn -> exit", machine.name()),
                format!("{r} us / {:.1} ms", w as f64 / 1000.0),
                String::new(),
            ));
        }
    }

    let lab_name;
    let _own;
    if let Some(l) = &a.lab {
        lab_name = l.clone();
        _own = None;
    } else if netns::is_root() {
        let Some(exe) = find_vtnt(a.vtnt.clone()) else {
            die("no vtnt binary for the lab: build it (cargo build -p vtnt) or give --vtnt PATH / --lab NAME");
        };
        lab_name = format!("vtnt-kb-{}", std::process::id());
        let up = vtnt_lab_linux::UpOptions {
            name: lab_name.clone(),
            topology: None,
            vm_port: 0,
            vm_prefix: None,
            exe,
            exe_args: Vec::new(),
            timeout: Duration::from_secs(20),
            bgp: false,
        };
        vtnt_lab_linux::up(&up).unwrap_or_else(|e| die(format!("lab up: {e}")));
        _own = Some(OwnLab(lab_name.clone()));
    } else {
        println!("tnt: skipped (needs root for the lab's namespace, or --lab NAME)");
        if !a.breakdown {
            print_table(&table);
        }
        return;
    }
    if a.breakdown {
        let tnt = |wrapper: Vec<String>, marks: bool| {
            let mut r = RunSpec::new(
                vtnt_jobspec::decode(TNT_JOB).expect("spec"),
                JobNet::Lab {
                    name: lab_name.clone(),
                },
            );
            r.vmm = Vmm::Qemu;
            r.accel = accel;
            r.timeout = Duration::from_secs(60);
            r.image = Some(img.path.clone());
            r.marks = marks;
            r.wrapper = wrapper;
            run_job(&r)
                .ok()
                .filter(|o| o.status == GuestStatus::Exited(0))
        };
        let times: Vec<Timing> = (0..a.runs)
            .filter_map(|_| {
                let o = tnt(Vec::new(), false)?;
                let (w, data) = light();
                let marks = tnt(w, false).and_then(|_| host_marks(&data));
                let _ = std::fs::remove_file(&data);
                let exit = ExitRecord::last(o.diagnostics.iter().map(String::as_str)).ok()?;
                let t = Timing {
                    spawn_to_line_us: o.timings.spawn_to_first_probe?.as_micros() as u64,
                    host_us: None,
                    line_guest_us: o.timings.guest_first_probe_us?,
                    steps_us: exit.steps_us.to_vec(),
                };
                Some(t.with_host(marks))
            })
            .collect();
        let counts = traced(used, |w| tnt(w, true).map(|_| ()));
        println!(
            "\n### TNT job (2 lab targets), microvm ({acc}), up to the first probe, median of {}\n\n{}",
            times.len(),
            breakdown::table(&Timing::median(&times), counts.as_deref(), "first probe")
        );
        if platforms.iter().any(|p| p.vmm == Vmm::Monitor) {
            monitor_breakdown(&a, &img.path, &lab_name);
        }
        return;
    }
    // Host CPU time of a waiting guest.
    for p in &platforms {
        lab_figures(p, &a, &img.path, &lab_name, &mut table);
    }
    print_table(&table);
}

/// Where the TNT job's time goes under `vtnt-monitor`, from spawn to the first probe: the
/// monitor's set-up phases (its `--stats` line), the guest's boot steps (its exit line's
/// `steps_us`) and the exits to the monitor until the first frame; medians of `--runs`.
fn monitor_breakdown(a: &Args, img: &std::path::Path, lab_name: &str) {
    const HOST: [(&str, &str); 6] = [
        ("open_kvm_us", "open /dev/kvm"),
        ("create_vm_us", "KVM_CREATE_VM"),
        (
            "memory_us",
            "guest memory (mmap, KVM_SET_USER_MEMORY_REGION)",
        ),
        ("load_us", "image, page tables, boot information"),
        ("vcpu_us", "vCPU (create, CPUID, registers)"),
        ("net_us", "NIC (the lab's UDP socket)"),
    ];
    let runs: Vec<RunOutcome> = (0..a.runs)
        .filter_map(|_| {
            let mut r = RunSpec::new(
                vtnt_jobspec::decode(TNT_JOB).expect("spec"),
                JobNet::Lab {
                    name: lab_name.to_string(),
                },
            );
            r.vmm = Vmm::Monitor;
            r.timeout = Duration::from_secs(60);
            r.image = Some(img.to_path_buf());
            run_job(&r)
                .ok()
                .filter(|o| o.status == GuestStatus::Exited(0))
        })
        .collect();
    let stat = |key: &str| -> u64 {
        median(
            runs.iter()
                .filter_map(|o| {
                    let line = monitor::stats_line(&o.vmm_stderr)?;
                    vtnt_unikernel::outcome::json_u64(line, key)
                })
                .collect(),
        )
    };
    let steps: Vec<Vec<u64>> = runs
        .iter()
        .filter_map(|o| {
            let exit = ExitRecord::last(o.diagnostics.iter().map(String::as_str)).ok()?;
            Some(exit.steps_us.to_vec())
        })
        .collect();
    let step = |i: usize| median(steps.iter().filter_map(|s| s.get(i).copied()).collect());
    let spawn = median(
        runs.iter()
            .filter_map(|o| Some(o.timings.spawn_to_first_probe?.as_micros() as u64))
            .collect(),
    );
    let kvm = vtnt_unikernel::accel::kvm_kind().map_or("KVM", |k| k.name());
    println!(
        "\n### TNT job (2 lab targets), vtnt-monitor ({kvm}), up to the first probe, median of {}\n",
        runs.len()
    );
    println!("| step | time |\n|---|---|");
    let mut host_total = 0;
    for (key, what) in HOST {
        let v = stat(key);
        host_total += v;
        println!("| monitor: {what} | {v} us |");
    }
    println!("| monitor set-up, total (before the guest's first instruction) | {host_total} us |");
    // The guest's steps (`vtnt_abi::steps::Step`) as they are on the monitor's platform.
    const MONITOR_STEPS: [&str; 9] = [
        "entry (already in 64-bit mode) -> Rust",
        "banner (buffered, no exit)",
        "clock (TSC frequency from the monitor)",
        "idle set-up (none: waiting is a hypercall)",
        "command line, heap, boot line",
        "NIC found (nothing to probe)",
        "NIC buffers",
        "first hop's MAC (handed over: no ARP)",
        "first probe sent",
    ];
    let mut prev = 0;
    for (i, name) in MONITOR_STEPS.iter().enumerate() {
        let t = step(i);
        if t > 0 {
            println!("| guest: {name} | {} us |", t.saturating_sub(prev));
            prev = t;
        }
    }
    println!("| guest: first instruction -> first probe | {prev} us |");
    println!(
        "| monitor: first KVM_RUN -> first frame (the first probe) | {} us, {} exits |",
        stat("first_frame_us"),
        stat("exits_to_first_frame")
    );
    println!("| host: spawn -> first-probe line (console lines leave at the guest's first wait) | {spawn} us |");
}

/// One way to run the unikernel, measured side by side with the others.
struct Platform {
    vmm: Vmm,
    accel: Accel,
    /// `vtnt-monitor, PVM-KVM`, `QEMU microvm, TCG`, ...
    label: String,
    is_kvm: bool,
}

/// The monitor where it is usable, QEMU microvm under `vtnt_unikernel::accel`'s choice, and
/// with `qemu_kvm` also QEMU under this host's KVM when that choice was TCG.
fn platforms(img: &std::path::Path, qemu_kvm: bool) -> Vec<Platform> {
    let mut v = Vec::new();
    let kvm = vtnt_unikernel::accel::kvm_kind();
    if let (true, Some(k)) = (monitor::usable(), kvm) {
        v.push(Platform {
            vmm: Vmm::Monitor,
            accel: Accel::Auto,
            label: format!("vtnt-monitor, {}", k.name()),
            is_kvm: true,
        });
    }
    let used = vtnt_unikernel::qemu::resolve(img);
    v.push(Platform {
        vmm: Vmm::Qemu,
        accel: if used.is_kvm() {
            Accel::Kvm
        } else {
            Accel::Tcg
        },
        label: format!("QEMU microvm, {}", used.name()),
        is_kvm: used.is_kvm(),
    });
    if let (true, false, Some(k)) = (qemu_kvm, used.is_kvm(), kvm) {
        v.push(Platform {
            vmm: Vmm::Qemu,
            accel: Accel::Kvm,
            label: format!("QEMU microvm, {}", k.name()),
            is_kvm: true,
        });
    }
    v
}

/// The boot job once on `p`, if it succeeded.
fn boot_once(p: &Platform, img: &std::path::Path) -> Option<Outcome> {
    let out = match p.vmm {
        Vmm::Monitor => monitor::run(&MonitorConfig::new(img.to_path_buf(), "-- boot")),
        _ => {
            let mut c = VmConfig::new(img.to_path_buf(), Machine::Microvm, "-- boot");
            c.accel = p.accel;
            qemu::run(&c)
        }
    };
    out.ok().filter(|o| o.status == GuestStatus::Exited(0))
}

/// The lab jobs' figures on `p`: host CPU while pinging and holding, the TNT job's
/// times, RSS and heap, and the smallest RAM it completes in.
fn lab_figures(
    p: &Platform,
    a: &Args,
    img: &std::path::Path,
    lab_name: &str,
    table: &mut Vec<(String, String, String)>,
) {
    let label = &p.label;
    let spec = |line: &str, mib: u32| -> RunSpec {
        let mut r = RunSpec::new(
            vtnt_jobspec::decode(line).expect("spec"),
            JobNet::Lab {
                name: lab_name.to_string(),
            },
        );
        r.vmm = p.vmm;
        r.accel = p.accel;
        r.memory_mib = mib;
        r.timeout = Duration::from_secs(60);
        r.image = Some(img.to_path_buf());
        r
    };
    let cpu_job = |line: &str| -> Option<(u64, u64)> {
        let gw = vtnt_unikernel::lab::free_slot(lab_name).ok()?.0.gateway;
        let o = run_job(&spec(&line.replace("GW", &gw), 16))
            .ok()
            .filter(|o| o.status == GuestStatus::Exited(0))?;
        Some((
            o.cpu?.as_millis() as u64,
            o.timings.total.as_millis() as u64,
        ))
    };
    let cpu_rows: [(&str, &str, Option<&str>); 2] = [
        (
            "ping -c 3 -i 1 to the lab gateway",
            "vtnt-job=1 kind=ping ping.count=3 targets=GW",
            None,
        ),
        (
            "10 s hold after ping -c 1",
            "vtnt-job=1 kind=ping ping.count=1 hold=10s targets=GW",
            Some("vtnt-job=1 kind=ping ping.count=2 ping.interval=10s targets=GW"),
        ),
    ];
    for (what, line, fallback) in cpu_rows {
        let (mut cpu, mut wall, mut used) = (Vec::new(), Vec::new(), line);
        for _ in 0..a.runs {
            let mut r = cpu_job(used);
            if r.is_none() && cpu.is_empty() {
                if let Some(f) = fallback {
                    used = f;
                    r = cpu_job(used);
                }
            }
            match r {
                Some((c, w)) => {
                    cpu.push(c);
                    wall.push(w);
                }
                None => println!("cpu: a `{what}` run failed"),
            }
        }
        let (c, w) = (median(cpu), median(wall));
        let note = if used == line {
            String::new()
        } else {
            "image has no hold: ping -c 2 -i 10 instead".to_string()
        };
        println!(
            "cpu_{}: {c} ms host CPU over {w} ms wall ({label}) {note}",
            what.replace(' ', "_")
        );
        table.push((
            format!("host CPU, {what}, {label}"),
            format!(
                "{:.2} s (wall {:.1} s)",
                c as f64 / 1000.0,
                w as f64 / 1000.0
            ),
            note,
        ));
    }

    let tnt = |mib: u32| -> Option<RunOutcome> {
        run_job(&spec(TNT_JOB, mib))
            .ok()
            .filter(|o| o.status == GuestStatus::Exited(0) && o.json_lines.len() == 4)
    };
    let (mut guest, mut host, mut total, mut rss, mut pss, mut heap) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for _ in 0..a.runs {
        match tnt(16) {
            Some(o) => {
                guest.push(o.timings.guest_first_probe_us.unwrap_or(0));
                host.push(
                    o.timings
                        .spawn_to_first_probe
                        .map_or(0, |d| d.as_micros() as u64),
                );
                total.push(o.timings.total.as_micros() as u64);
                rss.push(o.peak_rss_kib.unwrap_or(0));
                pss.push(o.peak_pss_kib.unwrap_or(0));
                heap.push(heap_peak(&o).unwrap_or(0));
            }
            None => println!("tnt: a run failed"),
        }
    }
    let n = guest.len();
    let (g, h, t, m, ps, hp) = (
        median(guest),
        median(host),
        median(total),
        median(rss),
        median(pss),
        median(heap),
    );
    println!("tnt ({label}): guest first-instruction->first probe {g} us (median of {n}); host spawn->first probe {h} us; spawn->exit {t} us; VMM peak RSS {m} KiB; VMM peak PSS {ps} KiB; guest heap peak {hp} bytes (16 MiB)");
    table.push((
        format!("TNT job, {label}: guest first instruction -> first probe"),
        format!("{g} us"),
        format!(
            "<= 1 ms on KVM{}",
            if p.is_kvm {
                if g <= 1000 {
                    ": met"
                } else {
                    ": MISSED"
                }
            } else {
                " (not measurable here: TCG)"
            }
        ),
    ));
    table.push((
        format!("TNT job, {label}: host spawn -> first probe / -> exit"),
        format!("{:.1} ms / {:.1} ms", h as f64 / 1000.0, t as f64 / 1000.0),
        format!(
            "spawn -> first probe <= 50 ms on KVM{}",
            if p.is_kvm {
                if h <= 50_000 {
                    ": met"
                } else {
                    ": MISSED"
                }
            } else {
                " (TCG)"
            }
        ),
    ));
    table.push((
        format!("TNT job, {label}: VMM peak RSS (16 MiB guest)"),
        format!("{:.1} MiB", m as f64 / 1024.0),
        "Firecracker <= 5 MiB per microVM (anchor)".into(),
    ));
    table.push((
        format!("TNT job, {label}: VMM peak PSS (sampled every 100 ms)"),
        format!("{:.1} MiB", ps as f64 / 1024.0),
        "issue 20: <= 5 MiB".into(),
    ));
    table.push((
        format!("TNT job, {label}: guest heap high-water mark"),
        format!("{:.0} KiB", hp as f64 / 1024.0),
        String::new(),
    ));

    let (mut lo, mut hi) = (1u32, 64u32);
    if tnt(hi).is_none() {
        println!("min_ram_tnt: more than {hi} MiB?");
    } else {
        while lo < hi {
            let mid = (lo + hi) / 2;
            if tnt(mid).is_some() {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        println!("min_ram_tnt: {hi} MiB ({label})");
        table.push((
            format!("smallest guest RAM in which the TNT job completes, {label}"),
            format!("{hi} MiB"),
            format!("goal 4 MiB: {}", if hi <= 4 { "met" } else { "MISSED" }),
        ));
    }
}

/// The host marks of a light trace's data file (removed afterwards).
fn host_marks(data: &std::path::Path) -> Option<breakdown::HostMarks> {
    let out = std::process::Command::new("perf")
        .args(["script", "-F", "time,event,trace", "-i"])
        .arg(data)
        .output()
        .ok()?;
    let _ = std::fs::remove_file(data);
    breakdown::HostMarks::parse(&String::from_utf8_lossy(&out.stdout))
}

/// Runs `run` once under `perf record` (given the wrapper) and counts the events per
/// step; `None` (with the reason printed) when that cannot be done here or under `accel`.
fn traced(
    accel: vtnt_unikernel::accel::Accelerator,
    run: impl FnOnce(Vec<String>) -> Option<()>,
) -> Option<Vec<Counts>> {
    if !accel.is_kvm() {
        println!("exit counts: none under TCG (no KVM exits to count)");
        return None;
    }
    if let Some(why) = breakdown::unavailable() {
        println!("exit counts: skipped: {why}");
        return None;
    }
    let data = std::env::temp_dir().join(format!("vtnt-breakdown-{}.perf", std::process::id()));
    let counted = run(breakdown::perf_wrapper(&data))
        .and_then(|()| breakdown::perf_script(&data).ok())
        .map(|s| breakdown::count(&s));
    let _ = std::fs::remove_file(&data);
    if counted.is_none() {
        println!("exit counts: the traced run failed");
    }
    counted
}

fn print_table(rows: &[(String, String, String)]) {
    println!();
    println!("| figure | value | budget / anchor |");
    println!("|---|---|---|");
    for (a, b, c) in rows {
        println!("| {a} | {b} | {c} |");
    }
}
