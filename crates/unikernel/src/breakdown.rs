//! Where a unikernel boot spends its time and its exits, step by step, from QEMU's spawn
//! to the guest's first probe (or, for a boot-only job, its `ready` line).
//!
//! Three sources, joined by [`table`]:
//! - the host's side before the guest runs, from a lightly traced run ([`light_wrapper`]:
//!   QEMU's `exec`, its `KVM_CREATE_VM` and first `KVM_RUN` ioctls, and the emulation of
//!   the kernel's entry instruction, which PVM and real-mode firmware emulate): QEMU
//!   start-up, machine set-up, firmware ([`HostMarks`]);
//! - the guest's exit record (`vtnt_abi::record`): `steps_us`, guest time at the end of
//!   each boot step (`vtnt_abi::steps`), and the host's arrival time of the reference line;
//! - Linux's KVM tracepoints recorded by `perf` around QEMU ([`PERF_EVENTS`]), with the
//!   guest booted with the `marks` option: each step writes its number to port 0x80,
//!   which `kvm:kvm_pio` records among the other events, so [`count`] splits the VM's
//!   exits to QEMU (`kvm_userspace_exit`), port and MMIO accesses and instructions KVM
//!   emulated (`kvm_emulate_insn`) by step. Exits KVM handles without a tracepoint of
//!   its own under PVM (timer interrupts, halts, shadow page faults) are not counted.
//!
//! Tracing every event slows a run (about a microsecond an event), so times come from
//! lightly traced runs (a handful of events) and counts from a fully traced one.

use crate::Outcome;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The tracepoints counted.
pub const PERF_EVENTS: [&str; 5] = [
    "kvm:kvm_userspace_exit",
    "kvm:kvm_pio",
    "kvm:kvm_mmio",
    "kvm:kvm_emulate_insn",
    "kvm:kvm_msr",
];

use vtnt_abi::steps::Step;
pub use vtnt_abi::steps::MARK_PORT;

/// Where the kernel is loaded (its linker script keeps it below 2 MiB): emulated
/// instructions elsewhere are the firmware's.
const KERNEL: std::ops::Range<u64> = 0x10_0000..0x20_0000;

/// Event counts of one segment of the boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Exits to QEMU.
    pub vmm_exits: u64,
    /// Port I/O accesses (each an exit, to KVM or QEMU).
    pub pio: u64,
    /// MMIO accesses that reached KVM.
    pub mmio: u64,
    /// Instructions KVM emulated.
    pub emulated: u64,
    /// MSR accesses.
    pub msr: u64,
}

/// Counts split at the guest's step marks: `[0]` is the firmware (everything before the
/// kernel's first instruction), `[i]` the kernel's step `i` (up to mark `i`), and the
/// last entry everything after the last mark. The marks themselves are not counted.
pub fn count(perf_script: &str) -> Vec<Counts> {
    let mut segs = vec![Counts::default(), Counts::default()];
    let mut in_kernel = false;
    // A mark's own exit (the port write and QEMU's handling of it) is measurement, not
    // boot: neither is counted.
    let mut mark_exit = false;
    for line in perf_script.lines() {
        let Some((event, rest)) = line.trim().split_once(": ") else {
            continue;
        };
        let event = event.rsplit(' ').next().unwrap_or(event);
        if event == "kvm:kvm_emulate_insn" && !in_kernel {
            // `csbase:rip:bytes (mode)`
            let rip = rest
                .split(':')
                .nth(1)
                .and_then(|r| u64::from_str_radix(r, 16).ok());
            if rip.is_some_and(|r| KERNEL.contains(&r)) {
                in_kernel = true;
            }
        }
        let seg = segs.last_mut().expect("never empty");
        let seg = if in_kernel { seg } else { &mut segs[0] };
        match event {
            "kvm:kvm_userspace_exit" if mark_exit => mark_exit = false,
            "kvm:kvm_userspace_exit" => seg.vmm_exits += 1,
            "kvm:kvm_mmio" => seg.mmio += 1,
            "kvm:kvm_emulate_insn" => seg.emulated += 1,
            "kvm:kvm_msr" => seg.msr += 1,
            "kvm:kvm_pio" if in_kernel && is_mark(rest) => {
                segs.push(Counts::default());
                mark_exit = true;
            }
            "kvm:kvm_pio" => seg.pio += 1,
            _ => {}
        }
    }
    segs
}

/// Whether a `kvm_pio` trace is a write to [`MARK_PORT`].
fn is_mark(trace: &str) -> bool {
    trace.starts_with("pio_write at ") && {
        let port = trace["pio_write at ".len()..]
            .split(' ')
            .next()
            .and_then(|p| u16::from_str_radix(p.trim_start_matches("0x"), 16).ok());
        port == Some(MARK_PORT)
    }
}

/// The `perf record` prefix that traces a command into `out` (`perf` must be installed).
pub fn perf_wrapper(out: &Path) -> Vec<String> {
    let mut w: Vec<String> = ["perf", "record", "-q", "-m", "4096", "-o"]
        .map(String::from)
        .to_vec();
    w.push(out.display().to_string());
    for e in PERF_EVENTS {
        w.push("-e".into());
        w.push(e.into());
    }
    w.push("--".into());
    w
}

/// `perf script` of a recording, for [`count`].
pub fn perf_script(data: &Path) -> Result<String, crate::Error> {
    let out = Command::new("perf")
        .args(["script", "-F", "event,trace", "-i"])
        .arg(data)
        .output()
        .map_err(|source| crate::Error::Spawn {
            program: "perf".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(crate::Error::Setup {
            command: "perf script".into(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Why exit counts cannot be taken here, if they cannot: no `perf`, or no KVM
/// tracepoints (tracefs not mounted).
pub fn unavailable() -> Option<String> {
    if crate::which("perf").is_none() {
        return Some("perf is not installed (apt-get install linux-perf)".into());
    }
    let tracefs = [
        "/sys/kernel/tracing/events/kvm",
        "/sys/kernel/debug/tracing/events/kvm",
    ];
    if !tracefs.iter().any(|p| Path::new(p).is_dir()) {
        return Some(
            "no kvm tracepoints: mount tracefs (mount -t tracefs nodev /sys/kernel/tracing)".into(),
        );
    }
    None
}

/// The host-side boundaries before the guest's first instruction, in seconds of
/// `perf`'s clock, from a [`light_wrapper`] recording.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostMarks {
    /// QEMU's `exec`.
    pub exec: f64,
    /// Its `KVM_CREATE_VM`.
    pub create_vm: f64,
    /// Its first `KVM_RUN`.
    pub first_run: f64,
    /// KVM emulating the kernel's entry instruction.
    pub entry: f64,
}

impl HostMarks {
    /// From `perf script -F time,event,trace` of a [`light_wrapper`] recording.
    pub fn parse(script: &str) -> Option<HostMarks> {
        let (mut exec, mut create, mut run, mut entry) = (None, None, None, None);
        for line in script.lines() {
            let mut f = line.split_whitespace();
            let Some(t) = f
                .next()
                .and_then(|t| t.trim_end_matches(':').parse::<f64>().ok())
            else {
                continue;
            };
            let event = f.next().unwrap_or("");
            let rest: Vec<&str> = f.collect();
            match event {
                "sched:sched_process_exec:" => exec = exec.or(Some(t)),
                "syscalls:sys_enter_ioctl:" if rest.contains(&"0x0000ae01,") => {
                    create = create.or(Some(t))
                }
                "syscalls:sys_enter_ioctl:" if rest.contains(&"0x0000ae80,") => {
                    run = run.or(Some(t))
                }
                "kvm:kvm_emulate_insn:" => entry = entry.or(Some(t)),
                _ => {}
            }
        }
        Some(HostMarks {
            exec: exec?,
            create_vm: create?,
            first_run: run?,
            entry: entry?,
        })
    }
}

/// The `perf record` prefix of a lightly traced run into `out`: QEMU's `exec`, its
/// `KVM_CREATE_VM` and `KVM_RUN` ioctls, and KVM emulating the instruction at `entry`
/// (the kernel's ELF entry point; PVM emulates it, so does no other KVM: then there is
/// no entry mark).
pub fn light_wrapper(out: &Path, entry: u64) -> Vec<String> {
    let mut w: Vec<String> = ["perf", "record", "-q", "-o"].map(String::from).to_vec();
    w.push(out.display().to_string());
    w.extend(
        [
            "-e",
            "sched:sched_process_exec",
            "-e",
            "syscalls:sys_enter_ioctl",
            "--filter",
            "cmd == 0xae01 || cmd == 0xae80",
            "-e",
            "kvm:kvm_emulate_insn",
        ]
        .map(String::from),
    );
    w.push("--filter".into());
    w.push(format!("rip == {entry:#x}"));
    w.push("--".into());
    w
}

/// The ELF entry point of `image` (`e_entry`).
pub fn elf_entry(image: &Path) -> Option<u64> {
    let b = std::fs::read(image).ok()?;
    (b.get(..4)? == b"\x7fELF").then_some(())?;
    Some(u64::from_le_bytes(b.get(0x18..0x20)?.try_into().ok()?))
}

/// One boot as the guest and the host timed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timing {
    /// Host: QEMU's spawn -> arrival of the reference line (first probe, or exit).
    pub spawn_to_line_us: u64,
    /// Host, from a light trace: exec -> KVM_CREATE_VM, -> first KVM_RUN, -> the
    /// kernel's first instruction (microseconds; `None` untraced).
    pub host_us: Option<[u64; 3]>,
    /// Guest: first instruction -> the reference line.
    pub line_guest_us: u64,
    /// Guest: first instruction -> the end of each step (0: not reached).
    pub steps_us: Vec<u64>,
}

impl Timing {
    /// From a run's console: the reference line is the first line of type `ty` whose
    /// guest time is `key` (e.g. `first-probe` / `guest_us`); the exit record gives
    /// `steps_us`.
    pub fn from_outcome(out: &Outcome, ty: &str, key: &str) -> Option<Timing> {
        let pat = format!("\"type\":\"{ty}\"");
        let i = out.lines.iter().position(|l| l.contains(&pat))?;
        let exit = out.exit_record().ok()?;
        Some(Timing {
            spawn_to_line_us: out.line_times.get(i)?.as_micros() as u64,
            host_us: None,
            line_guest_us: crate::outcome::json_u64(&out.lines[i], key)?,
            steps_us: exit.steps_us.to_vec(),
        })
    }

    /// Adds the host boundaries of a light trace.
    pub fn with_host(mut self, m: Option<HostMarks>) -> Timing {
        let us = |a: f64, b: f64| ((b - a).max(0.0) * 1e6).round() as u64;
        self.host_us = m.map(|m| {
            [
                us(m.exec, m.create_vm),
                us(m.create_vm, m.first_run),
                us(m.first_run, m.entry),
            ]
        });
        self
    }

    /// The field-wise median of `runs`.
    pub fn median(runs: &[Timing]) -> Timing {
        let med = |f: &dyn Fn(&Timing) -> Option<u64>| {
            let mut v: Vec<u64> = runs.iter().filter_map(f).collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied()
        };
        let host: Vec<Option<u64>> = (0..3).map(|i| med(&|t| t.host_us.map(|h| h[i]))).collect();
        Timing {
            spawn_to_line_us: med(&|t| Some(t.spawn_to_line_us)).unwrap_or(0),
            host_us: match host[..] {
                [Some(a), Some(b), Some(c)] => Some([a, b, c]),
                _ => None,
            },
            line_guest_us: med(&|t| Some(t.line_guest_us)).unwrap_or(0),
            steps_us: (0..Step::ALL.len())
                .map(|i| med(&|t| t.steps_us.get(i).copied()).unwrap_or(0))
                .collect(),
        }
    }
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

/// The breakdown as a markdown table: QEMU start-up, VM creation -> first instruction,
/// then each guest step up to the reference line, with the counts of a traced run when
/// given (from [`count`]). `what` names the reference line (e.g. "first probe").
pub fn table(t: &Timing, counts: Option<&[Counts]>, what: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| step | time | exits to QEMU | port I/O | MMIO | emulated insns | MSR |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    let cells = |c: Option<&Counts>| match c {
        Some(c) => format!(
            "{} | {} | {} | {} | {}",
            c.vmm_exits, c.pio, c.mmio, c.emulated, c.msr
        ),
        None => "| | | |".into(),
    };
    let host = |i: usize| t.host_us.map_or("n/a".into(), |h| ms(h[i]));
    let _ = writeln!(
        s,
        "| QEMU start-up: exec -> KVM_CREATE_VM | {} | | | | | |",
        host(0)
    );
    let _ = writeln!(
        s,
        "| machine set-up: KVM_CREATE_VM -> first KVM_RUN | {} | | | | | |",
        host(1)
    );
    let _ = writeln!(
        s,
        "| firmware: first KVM_RUN -> kernel's first instruction | {} | {} |",
        host(2),
        cells(counts.and_then(|c| c.first()))
    );
    let mut prev = 0;
    let mut total = Counts::default();
    for (i, name) in Step::ALL.map(Step::describe).iter().enumerate() {
        let Some(&end) = t.steps_us.get(i).filter(|&&e| e > 0) else {
            continue;
        };
        let c = counts.and_then(|c| c.get(i + 1));
        if let Some(c) = c {
            total.vmm_exits += c.vmm_exits;
            total.pio += c.pio;
            total.mmio += c.mmio;
            total.emulated += c.emulated;
            total.msr += c.msr;
        }
        let _ = writeln!(
            s,
            "| {} {name} | {} | {} |",
            i + 1,
            ms(end.saturating_sub(prev)),
            cells(c)
        );
        prev = end;
    }
    let _ = writeln!(
        s,
        "| guest: first instruction -> {what} | {} | {} |",
        ms(t.line_guest_us),
        cells(counts.map(|_| &total))
    );
    let _ = writeln!(
        s,
        "| host: spawn -> {what} line | {} | | | | | |",
        ms(t.spawn_to_line_us)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_at_firmware_and_marks() {
        let script = "\
 kvm:kvm_emulate_insn: ffff0000:fff0:e9 8d ff (real)
 kvm:kvm_pio: pio_write at 0x510 size 2 count 1 val 0x19
 kvm:kvm_userspace_exit: reason KVM_EXIT_IO (2)
 kvm:kvm_emulate_insn: 0:1000b0:0f 31 (prot32)
 kvm:kvm_msr: msr_write c0000080 = 0x100
 kvm:kvm_pio: pio_write at 0x80 size 1 count 1 val 0x1
 kvm:kvm_userspace_exit: reason KVM_EXIT_IO (2)
 kvm:kvm_pio: pio_write at 0x3f8 size 1 count 1 val 0x76
 kvm:kvm_userspace_exit: reason KVM_EXIT_IO (2)
 kvm:kvm_pio: pio_write at 0x80 size 1 count 1 val 0x2
 kvm:kvm_mmio: mmio read len 4 gpa 0xfeb02e00 val 0x74726976
";
        let c = count(script);
        assert_eq!(c.len(), 4);
        assert_eq!(
            c[0],
            Counts {
                vmm_exits: 1,
                pio: 1,
                emulated: 1,
                ..Counts::default()
            }
        );
        assert_eq!((c[1].emulated, c[1].msr, c[1].pio), (1, 1, 0));
        assert_eq!((c[2].pio, c[2].vmm_exits), (1, 1));
        assert_eq!(c[3].mmio, 1);
        assert!(!is_mark("pio_write at 0x3f8 size 1 count 1 val 0x80"));
        assert!(is_mark("pio_write at 0x80 size 1 count 1 val 0x9"));
    }

    #[test]
    fn steps_and_table() {
        let script = "\
 2982.414574: sched:sched_process_exec: filename=/usr/bin/qemu-system-x86_64 pid=1 old_pid=1
 2982.433644: syscalls:sys_enter_ioctl: fd: 0x00000003, cmd: 0x0000ae01, arg: 0x00000000
 2982.448199: syscalls:sys_enter_ioctl: fd: 0x0000000b, cmd: 0x0000ae80, arg: 0x00000000
 2982.448347: syscalls:sys_enter_ioctl: fd: 0x0000000b, cmd: 0x0000ae80, arg: 0x00000000
 2982.461402:     kvm:kvm_emulate_insn: 0:1000b0:0f 31 (prot32)
";
        let t = Timing {
            spawn_to_line_us: 20_000,
            host_us: None,
            line_guest_us: 60,
            steps_us: vec![10, 20, 30, 40, 50, 0, 0, 0, 0],
        }
        .with_host(HostMarks::parse(script));
        assert_eq!(t.host_us, Some([19070, 14555, 13203]));
        let md = table(&t, None, "ready");
        assert!(
            md.contains("| QEMU start-up: exec -> KVM_CREATE_VM | 19.07 ms |"),
            "{md}"
        );
        assert!(
            md.contains("| 5 command line, heap, boot line | 0.01 ms |"),
            "{md}"
        );
        assert!(!md.contains("NIC found"), "{md}");
        assert_eq!(
            Timing::median(&[t.clone(), t.clone(), Timing::default()]),
            t
        );
    }
}
