//! What `bench_micro` measured ([`MicroReport`]: per row, the repetitions' values), and
//! the seeds' figures it is compared with ([`SEED_001`], [`EL_KABIR`]). A leaf: the
//! measurement fills it in, the report reads it.

/// One row of the tables: a runtime, and for the microVM which VMM and accelerator.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RowReport {
    /// As given to `--runtimes` (`native`, `microvm:qemu-tcg`).
    pub row: String,
    /// The runtime's name (its colour in the figures).
    pub runtime: String,
    /// The runtime's label in figures, with the VMM for a microVM row.
    pub label: String,
    /// What it ran on: the accelerator and VMM of a VM (`PVM-KVM (vtnt-monitor)`, `TCG
    /// (QEMU)`), `host kernel` for processes and containers; from the runs themselves.
    pub accel: String,
    /// Ran under TCG.
    pub emulated: bool,
    /// Why it was not measured (not installed, its image would not build).
    pub skipped: Option<String>,
    pub image_bytes: u64,
    pub image_note: String,
    /// What its "system call" was (`close(3)`, `hypercall`, `port-read`,
    /// `clock_gettime`).
    pub syscall: Option<String>,
    /// Per repetition: spawn to exit of the empty job, milliseconds.
    pub boot_ms: Vec<f64>,
    /// Per repetition, nanoseconds per iteration: fib(n), the "system call", the
    /// function call, one read of the clock.
    pub fib_ns: Vec<f64>,
    pub syscall_ns: Vec<f64>,
    pub funcall_ns: Vec<f64>,
    pub clock_ns: Vec<f64>,
    /// Per repetition of the loops: the most memory the instance's cgroup was charged
    /// (its processes', a container's, not the engine's), MiB.
    pub peak_mib: Vec<f64>,
    pub errors: Vec<String>,
}

impl RowReport {
    /// Whether anything was measured.
    pub fn measured(&self) -> bool {
        self.skipped.is_none() && !(self.boot_ms.is_empty() && self.fib_ns.is_empty())
    }
}

/// The whole report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MicroReport {
    pub provenance: vtnt_measure::provenance::Provenance,
    pub reps: u32,
    pub fib: u32,
    pub calls: u32,
    pub syscalls: u32,
    pub rows: Vec<RowReport>,
    /// Files written (micro.md, micro.json, figures).
    pub files: Vec<std::path::PathBuf>,
}

/// A value and its standard deviation, as the seeds print them.
pub type Sd = Option<(f64, f64)>;

/// Mean ± sd of `v`, `None` when empty.
pub fn stat(v: &[f64]) -> Sd {
    vtnt_stats::mean_sd(v)
}

/// One row of a seed's table, in the units of seed 001's Fig. 3 (boot + shutdown in ms,
/// CPU, system and function call in ns, the clock's gap in us, image in MiB, memory in
/// MiB); `None` where the seed has no figure.
#[derive(Debug, Clone, Copy)]
pub struct SeedRow {
    pub name: &'static str,
    pub boot_ms: Sd,
    pub fib_ns: Sd,
    pub syscall_ns: Sd,
    pub funcall_ns: Sd,
    pub clock_us: Sd,
    pub image_mib: Option<f64>,
    pub memory_mib: Option<f64>,
}

/// Seed 001 (Cheekhooree 2022, Figs. 3-5): 100 runs, loops of a million, C at `-O0`,
/// QEMU 4.2 with KVM on a Ryzen 7 5700U. Image sizes from Fig. 5 (the syscall program's,
/// Unikraft's unoptimised build).
pub const SEED_001: [SeedRow; 4] = [
    SeedRow {
        name: "Unikraft (seed 001)",
        boot_ms: Some((223.79, 5.47)),
        fib_ns: Some((116.21, 1.44)),
        syscall_ns: Some((20.09, 0.22)),
        funcall_ns: Some((1.41, 0.05)),
        clock_us: Some((0.24, 0.43)),
        image_mib: Some(0.46),
        memory_mib: None,
    },
    SeedRow {
        name: "Hermitux (seed 001)",
        boot_ms: Some((56.73, 3.51)),
        fib_ns: Some((115.71, 1.06)),
        syscall_ns: Some((1214.40, 26.82)),
        funcall_ns: Some((1.63, 0.05)),
        clock_us: Some((0.13, 0.34)),
        image_mib: Some(4.04),
        memory_mib: None,
    },
    SeedRow {
        name: "Nanos (seed 001)",
        boot_ms: Some((3489.65, 269.07)),
        fib_ns: Some((116.43, 1.67)),
        syscall_ns: Some((501.18, 2.03)),
        funcall_ns: Some((1.92, 0.73)),
        clock_us: Some((0.65, 0.50)),
        image_mib: Some(15.65),
        memory_mib: None,
    },
    SeedRow {
        name: "Docker (seed 001)",
        boot_ms: Some((39.56, 6.25)),
        fib_ns: Some((123.86, 3.05)),
        syscall_ns: Some((70.65, 2.65)),
        funcall_ns: Some((3.74, 1.28)),
        clock_us: Some((0.1, 0.30)),
        image_mib: Some(1370.0),
        memory_mib: None,
    },
];

/// El-Kabir's figures (seed 001's annex, Fig. 6): no CPU figure comparable to fib (his
/// was a sort), no clock gap; the VM's boot is 24 s (first) and 2.17 s (later boots).
pub const EL_KABIR: [SeedRow; 4] = [
    SeedRow {
        name: "Nanos (El-Kabir)",
        boot_ms: Some((305.0, 6.0)),
        fib_ns: None,
        syscall_ns: Some((536.963, 4.076)),
        funcall_ns: Some((3.965, 0.296)),
        clock_us: None,
        image_mib: Some(15.6),
        memory_mib: Some(114.0),
    },
    SeedRow {
        name: "Hermitux (El-Kabir)",
        boot_ms: Some((4.65, 0.5)),
        fib_ns: None,
        syscall_ns: Some((45.3, 0.8)),
        funcall_ns: Some((2.288, 0.13)),
        clock_us: None,
        image_mib: Some(3.1),
        memory_mib: Some(6.0),
    },
    SeedRow {
        name: "VM (El-Kabir)",
        boot_ms: Some((2170.0, 0.25)),
        fib_ns: None,
        syscall_ns: Some((66.848, 1.20)),
        funcall_ns: Some((3.08, 0.32)),
        clock_us: None,
        image_mib: Some(7800.0),
        memory_mib: Some(1518.0),
    },
    SeedRow {
        name: "Docker (El-Kabir)",
        boot_ms: Some((48.0, 1.9)),
        fib_ns: None,
        syscall_ns: Some((145.932, 2.28)),
        funcall_ns: Some((4.160, 0.27)),
        clock_us: None,
        image_mib: Some(217.0),
        memory_mib: Some(1.7),
    },
];
