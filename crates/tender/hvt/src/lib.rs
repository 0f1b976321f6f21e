//! `vtnt-monitor`: vTNT's own microVM monitor on `/dev/kvm`, in Solo5 hvt's model: one
//! unikernel, one vCPU, a handful of port-I/O hypercalls, no emulated hardware. The
//! interface it serves (memory layout, [`vtnt_abi::hvt::BootInfo`], the hypercall ports and
//! their argument structures) is defined once, in `vtnt_abi::hvt`.
//!
//! [`run`] loads the image's ELF segments, builds the page tables and boot information,
//! enters the guest in 64-bit ring 3 (native speed under PVM; see [`vtnt_abi::hvt`]), and serves
//! its hypercalls until it exits, faults, or outlives [`Config::timeout`]. The
//! `vtnt-monitor` binary wraps it, one process per VM, and maps the [`Ended`] outcome to
//! its exit status ([`Ended::exit_code`]):
//!
//! | status | meaning |
//! |---|---|
//! | 0..=255 | the guest's own status, from its `EXIT` hypercall |
//! | [`EXIT_TIMED_OUT`] (124) | the guest did not exit within the timeout |
//! | [`EXIT_MONITOR_ERROR`] (125) | the monitor could not run it ([`Error`]: bad image, no KVM, ...) |
//! | [`EXIT_GUEST_FAULT`] (126) | the guest faulted (an exception, `hlt`, a bad hypercall) |
//!
//! (A guest exiting with 124..=126 itself is indistinguishable; the kernel's documented
//! statuses stay below.)
//!
//! Every exit to the monitor costs about 30 us under PVM, so the hypercalls move whole
//! console lines and batches of frames, and waiting is one `POLL` call the monitor serves
//! with `ppoll`.

use nix::sys::resource::{getrusage, UsageWho};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use kvm_ioctls::{VcpuExit, VcpuFd};
use vtnt_abi::hvt::{
    port, BootInfo, Exit, Module, NetRead, NetWrite, Poll, Puts, BOOT_INFO, CMDLINE, CMDLINE_MAX,
    FRAME_MAX, MAGIC, MEM_MAX, MEM_MIN,
};

mod boot;
mod elf;
mod jail;
mod kvm;
mod memory;
mod net;
pub mod watchdog;

use memory::{GuestMemory, PAGE};
use net::Backend;
use watchdog::Watchdog;

/// Exit status of the `vtnt-monitor` process when the guest outlived its timeout.
pub const EXIT_TIMED_OUT: u8 = 124;
/// Exit status when the monitor could not run the guest (an [`Error`]).
pub const EXIT_MONITOR_ERROR: u8 = 125;
/// Exit status when the guest faulted ([`Ended::Fault`]).
pub const EXIT_GUEST_FAULT: u8 = 126;

/// The MAC address a guest gets unless told otherwise (QEMU's first).
pub const DEFAULT_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
/// The second network's MAC address unless told otherwise (QEMU's second).
pub const DEFAULT_MAC2: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x57];

/// What to run, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The unikernel's ELF image (x86_64 executable with the vTNT entry note). Its pages
    /// are mapped into the guest copy-on-write, so it must not be rewritten in place
    /// while the guest runs (replace it by renaming a new file over it).
    pub image: PathBuf,
    /// The command line the guest reads (at most [`CMDLINE_MAX`] bytes, no NUL).
    pub cmdline: String,
    /// Guest memory in MiB: even, from [`MEM_MIN`] to [`MEM_MAX`].
    pub mem_mib: u64,
    /// The guest's NIC (network 0), if it has one.
    pub net: Option<Net>,
    /// The NIC's MAC address (in [`BootInfo`]).
    pub mac: [u8; 6],
    /// A second NIC (network 1: a network function's other side), only with a first.
    pub net2: Option<Net>,
    /// The second NIC's MAC address.
    pub mac2: [u8; 6],
    /// Files loaded as boot modules, in order.
    pub modules: Vec<PathBuf>,
    /// How long the guest may run before the monitor stops it.
    pub timeout: Duration,
    /// Confine the process once the VM is set up: root dropped for `nobody`, then its
    /// seccomp filter (`jail`). The
    /// `vtnt-monitor` binary does (unless `--no-seccomp`); callers that run a VM inside a
    /// process of their own (tests) leave it off, since it covers every thread.
    pub seccomp: bool,
}

impl Config {
    /// The defaults: 16 MiB, no network, [`DEFAULT_MAC`] and [`DEFAULT_MAC2`], no modules,
    /// a 60 s timeout and an empty command line.
    pub fn new(image: impl Into<PathBuf>) -> Config {
        Config {
            image: image.into(),
            cmdline: String::new(),
            mem_mib: 16,
            net: None,
            mac: DEFAULT_MAC,
            net2: None,
            mac2: DEFAULT_MAC2,
            modules: Vec::new(),
            timeout: Duration::from_secs(60),
            seccomp: false,
        }
    }
}

/// The guest's network backend: each carries raw Ethernet frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net {
    /// A UDP socket bound to `local` and connected to `remote`, one frame per datagram.
    Udp {
        local: SocketAddr,
        remote: SocketAddr,
    },
    /// An existing TAP device (opened without packet information).
    Tap { ifname: String },
}

impl FromStr for Net {
    type Err = String;

    /// Parses `udp=LOCALIP:PORT,REMOTEIP:PORT` or `tap=IFNAME`.
    fn from_str(s: &str) -> Result<Net, String> {
        let usage = "expected udp=LOCALIP:PORT,REMOTEIP:PORT or tap=IFNAME";
        if let Some(addrs) = s.strip_prefix("udp=") {
            let (local, remote) = addrs.split_once(',').ok_or_else(|| usage.to_string())?;
            let addr = |a: &str| {
                a.parse::<SocketAddr>()
                    .map_err(|_| format!("{a:?} is not an IP:PORT address"))
            };
            Ok(Net::Udp {
                local: addr(local)?,
                remote: addr(remote)?,
            })
        } else if let Some(ifname) = s.strip_prefix("tap=") {
            if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
                return Err("the interface name must be 1 to 15 bytes".into());
            }
            Ok(Net::Tap {
                ifname: ifname.into(),
            })
        } else {
            Err(usage.into())
        }
    }
}

/// Parses a MAC address written as six hex pairs separated by colons.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next().unwrap_or("");
        if p.len() != 2 {
            return Err(format!("{s:?} is not a MAC address like 52:54:00:12:34:56"));
        }
        *b = u8::from_str_radix(p, 16)
            .map_err(|_| format!("{s:?} is not a MAC address like 52:54:00:12:34:56"))?;
    }
    if parts.next().is_some() {
        return Err(format!("{s:?} is not a MAC address like 52:54:00:12:34:56"));
    }
    Ok(mac)
}

/// How a guest's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The guest called `EXIT` with this status.
    Exit(u8),
    /// The guest faulted: what happened, `at rip 0x.. (rsp 0x..)`.
    Fault(String),
    /// The guest was still running at the timeout.
    TimedOut,
}

impl Ended {
    /// The monitor process's exit status for this outcome.
    pub fn exit_code(&self) -> u8 {
        match self {
            Ended::Exit(s) => *s,
            Ended::Fault(_) => EXIT_GUEST_FAULT,
            Ended::TimedOut => EXIT_TIMED_OUT,
        }
    }
}

/// A run's outcome and where its time went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub ended: Ended,
    pub stats: Stats,
}

/// Where a run's time went (measured by the monitor) and how often the guest exited.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Opening `/dev/kvm` (and checking its API version).
    pub open_kvm: Duration,
    /// `KVM_CREATE_VM`.
    pub create_vm: Duration,
    /// Mapping guest memory and registering it.
    pub memory: Duration,
    /// Reading and checking the image, then writing it, the page tables, the boot
    /// information and the modules into guest memory.
    pub load: Duration,
    /// Creating the vCPU and setting its CPUID and registers.
    pub vcpu: Duration,
    /// Opening the network backend.
    pub net: Duration,
    /// From the first `KVM_RUN` to the end.
    pub boot_to_exit: Duration,
    /// From the first `KVM_RUN` to the guest's first frame (`NET_WRITE`), and the exits
    /// until then: with the gateway's MAC handed over, that frame is the first probe.
    pub first_frame: Option<Duration>,
    pub exits_to_first_frame: u64,
    /// Returns from `KVM_RUN` (each one an exit to the monitor).
    pub exits: u64,
    /// Hypercalls by port.
    pub exits_by_port: PortCounts,
}

/// Hypercalls counted by port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    pub puts: u64,
    pub net_write: u64,
    pub net_read: u64,
    pub poll: u64,
    pub exit: u64,
}

impl Stats {
    /// The one JSON line `--stats` prints (times in microseconds).
    pub fn to_json(&self) -> String {
        let us = |d: Duration| d.as_micros();
        let p = &self.exits_by_port;
        let (maxrss_kib, cpu) = own_usage();
        format!(
            concat!(
                r#"{{"type":"monitor","open_kvm_us":{},"create_vm_us":{},"memory_us":{},"#,
                r#""load_us":{},"vcpu_us":{},"net_us":{},"boot_to_exit_us":{},"exits":{},"#,
                r#""exits_by_port":{{"puts":{},"net_write":{},"net_read":{},"poll":{},"exit":{}}},"#,
                r#""first_frame_us":{},"exits_to_first_frame":{},"maxrss_kib":{},"cpu_us":{}}}"#
            ),
            us(self.open_kvm),
            us(self.create_vm),
            us(self.memory),
            us(self.load),
            us(self.vcpu),
            us(self.net),
            us(self.boot_to_exit),
            self.exits,
            p.puts,
            p.net_write,
            p.net_read,
            p.poll,
            p.exit,
            self.first_frame
                .map_or_else(|| "null".to_string(), |d| d.as_micros().to_string()),
            self.exits_to_first_frame,
            maxrss_kib,
            us(cpu),
        )
    }
}

/// This process's peak resident set (KiB) and CPU time (user + system) so far, from
/// `getrusage`: exact where sampling `/proc` from outside misses a VM that lives a few
/// milliseconds.
fn own_usage() -> (u64, Duration) {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec().max(0) as u64)
                    + Duration::from_micros(t.tv_usec().max(0) as u64)
            };
            (
                u.max_rss().max(0) as u64,
                tv(u.user_time()) + tv(u.system_time()),
            )
        }
        Err(_) => (0, Duration::ZERO),
    }
}

/// Why the monitor could not run a guest (exit status [`EXIT_MONITOR_ERROR`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid (memory size, command line, timeout).
    Config(String),
    /// The image or a module cannot be read or loaded.
    Image(String),
    /// KVM is missing, refuses access, or failed.
    Kvm(String),
    /// The network backend cannot be opened.
    Net(String),
    /// The monitor's own I/O failed (e.g. writing the guest's console).
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) | Error::Image(m) | Error::Kvm(m) | Error::Net(m) | Error::Io(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for Error {}

/// Runs the guest `cfg` describes, its console on standard output.
pub fn run(cfg: &Config) -> Result<Outcome, Error> {
    run_with(cfg, &mut io::stdout())
}

/// Runs the guest `cfg` describes, its console (`PUTS`) written to `console` and flushed
/// at each line's end.
pub fn run_with(cfg: &Config, console: &mut dyn Write) -> Result<Outcome, Error> {
    let mut stats = Stats::default();

    // Everything that can be checked without KVM first: bad input fails fast, the same
    // on every host.
    let t = Instant::now();
    let mem_size = check(cfg)?;
    let img_name = cfg.image.display();
    let (file, bytes) = std::fs::File::open(&cfg.image)
        .and_then(|mut f| {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            Ok((f, bytes))
        })
        .map_err(|e| Error::Image(format!("cannot read the image {img_name}: {e}")))?;
    let image =
        elf::parse(&bytes, mem_size).map_err(|e| Error::Image(format!("{img_name}: {e}")))?;
    let mut lens = Vec::with_capacity(cfg.modules.len());
    for m in &cfg.modules {
        let meta = std::fs::metadata(m)
            .map_err(|e| Error::Image(format!("cannot read the module {}: {e}", m.display())))?;
        lens.push(meta.len());
    }
    let placement = boot::place_modules(image.end(), &lens, mem_size).ok_or_else(|| {
        Error::Image(format!(
            "the modules ({} bytes) do not fit above the image in {} MiB of guest memory (use --mem-mib)",
            lens.iter().sum::<u64>(),
            cfg.mem_mib
        ))
    })?;
    stats.load = t.elapsed();

    // The network too: a port in use is reported before any KVM work.
    let t = Instant::now();
    let nets = cfg
        .net
        .iter()
        .chain(&cfg.net2)
        .map(|n| Backend::open(n).map(NetPort::new))
        .collect::<Result<Vec<_>, Error>>()?;
    stats.net = t.elapsed();

    let t = Instant::now();
    let kvm_fd = kvm::open()?;
    stats.open_kvm = t.elapsed();

    let t = Instant::now();
    let vm = kvm::create_vm(&kvm_fd)?;
    stats.create_vm = t.elapsed();

    let t = Instant::now();
    let mut mem = GuestMemory::new(mem_size as usize).map_err(|e| {
        Error::Kvm(format!(
            "cannot map {} MiB of guest memory: {e}",
            cfg.mem_mib
        ))
    })?;
    kvm::register_memory(&vm, &mem)?;
    stats.memory = t.elapsed();

    let t = Instant::now();
    let (vcpu, tsc_hz) = kvm::create_vcpu(&kvm_fd, &vm)?;
    stats.vcpu = t.elapsed();

    let t = Instant::now();
    let img = ImageFile {
        file: &file,
        bytes: &bytes,
    };
    let cr3 = load(cfg, &img, &image, &lens, &placement, tsc_hz, &mut mem)?;
    stats.load += t.elapsed();

    let t = Instant::now();
    kvm::enter(&vcpu, cr3, image.entry, BOOT_INFO)?;
    stats.vcpu += t.elapsed();
    drop((bytes, file));

    let watchdog = Watchdog::start(cfg.timeout)
        .map_err(|e| Error::Io(format!("cannot start the watchdog: {e}")))?;
    if cfg.seccomp {
        jail::drop_privileges().map_err(|e| Error::Io(format!("cannot drop root: {e}")))?;
        jail::install()
            .map_err(|e| Error::Io(format!("cannot install the seccomp filter: {e}")))?;
    }
    let mut machine = Machine {
        vcpu,
        mem,
        nets,
        console,
        stats,
        boot: Instant::now(),
    };
    let t = machine.boot;
    let ended = machine.run(&watchdog);
    machine.stats.boot_to_exit = t.elapsed();
    drop(watchdog);
    let stats = machine.stats;
    // The vCPU and VM close before the memory is unmapped (fields drop in order).
    drop(machine.vcpu);
    drop(vm);
    Ok(Outcome {
        ended: ended?,
        stats,
    })
}

/// Checks what `cfg` holds that needs no file; returns the memory size in bytes.
fn check(cfg: &Config) -> Result<u64, Error> {
    let (min, max) = (MEM_MIN >> 20, MEM_MAX >> 20);
    if cfg.mem_mib < min || cfg.mem_mib > max || cfg.mem_mib & 1 != 0 {
        return Err(Error::Config(format!(
            "--mem-mib {}: guest memory must be an even number of MiB from {min} to {max}",
            cfg.mem_mib
        )));
    }
    if cfg.cmdline.len() as u64 > CMDLINE_MAX {
        return Err(Error::Config(format!(
            "the command line is {} bytes long, more than the {CMDLINE_MAX} the guest can be given",
            cfg.cmdline.len()
        )));
    }
    if cfg.cmdline.contains('\0') {
        return Err(Error::Config("the command line contains a NUL byte".into()));
    }
    if cfg.net2.is_some() && cfg.net.is_none() {
        return Err(Error::Config(
            "a second network needs a first (--net before --net)".into(),
        ));
    }
    if cfg.timeout.is_zero() {
        return Err(Error::Config("the timeout must be more than zero".into()));
    }
    Ok(cfg.mem_mib << 20)
}

/// The image file, open, and its bytes as parsed.
struct ImageFile<'a> {
    file: &'a std::fs::File,
    bytes: &'a [u8],
}

/// The whole pages of segment `s`'s file bytes that can be mapped from the image file
/// rather than copied: those whose file offset and address agree modulo the page size,
/// and which no page of another segment shares.
fn mappable(s: &elf::Segment, all: &[elf::Segment]) -> Option<std::ops::Range<u64>> {
    let (offset, filesz) = (s.file.start as u64, s.file.len() as u64);
    if offset % PAGE != s.paddr % PAGE {
        return None;
    }
    // parse() checked that paddr + memsz (>= filesz) fits in guest memory.
    let start = boot::align_up(s.paddr, PAGE)?;
    let end = (s.paddr + filesz) & !(PAGE - 1);
    let shared = all.iter().filter(|o| !std::ptr::eq(*o, s)).any(|o| {
        let first = o.paddr & !(PAGE - 1);
        boot::align_up(o.paddr + o.memsz, PAGE).is_none_or(|last| first < end && start < last)
    });
    (start < end && !shared).then_some(start..end)
}

/// Writes the image (its whole pages mapped from the file where they can be:
/// [`GuestMemory::map_file`]), the page tables, the command line, the modules and the
/// boot information into guest memory; returns the page tables' root (for CR3).
fn load(
    cfg: &Config,
    img: &ImageFile<'_>,
    image: &elf::Image,
    lens: &[u64],
    placement: &boot::Placement,
    tsc_hz: u64,
    mem: &mut GuestMemory,
) -> Result<u64, Error> {
    // parse() and place_modules() checked every range against this memory size, so the
    // writes below cannot fall outside; a failure would be a monitor bug, reported as such.
    let bug = |what: &str| {
        Error::Image(format!(
            "internal error: {what} does not fit in guest memory"
        ))
    };
    for s in &image.segments {
        let data = &img.bytes[s.file.clone()];
        let mut copy = [(s.paddr, data), (s.paddr, &data[..0])];
        if let Some(pages) = mappable(s, &image.segments) {
            let (from, to) = (
                (pages.start - s.paddr) as usize,
                (pages.end - s.paddr) as usize,
            );
            let offset = s.file.start as u64 + from as u64;
            let mapped = mem
                .map_file(pages.start, pages.end - pages.start, img.file, offset)
                .map_err(|e| {
                    Error::Image(format!("cannot map the image into guest memory: {e}"))
                })?;
            if mapped {
                copy = [(s.paddr, &data[..from]), (pages.end, &data[to..])];
            }
        }
        for (at, part) in copy {
            mem.write(at, part).ok_or_else(|| bug("a segment"))?;
        }
        // The rest (.bss) must read as zeroes. Guest memory starts zeroed, so this writes
        // only where another segment put bytes: the pages stay untouched, and cost no
        // host memory until the guest uses them (most of a 100 KiB .bss is a stack).
        mem.clear(s.paddr + data.len() as u64, s.memsz - data.len() as u64)
            .ok_or_else(|| bug("a segment"))?;
    }
    let cr3 = boot::write_page_tables(mem).ok_or_else(|| bug("the page tables"))?;
    mem.write(CMDLINE, cfg.cmdline.as_bytes())
        .ok_or_else(|| bug("the command line"))?;
    // Modules are read straight into guest memory: a long target list is not held twice.
    let mut table = Vec::with_capacity(cfg.modules.len());
    for ((path, &addr), &len) in cfg.modules.iter().zip(&placement.addrs).zip(lens) {
        let fail =
            |e: io::Error| Error::Image(format!("cannot read the module {}: {e}", path.display()));
        let dst = mem.slice_mut(addr, len).ok_or_else(|| bug("a module"))?;
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(dst))
            .map_err(fail)?;
        table.push(Module { addr, len });
    }
    for (i, m) in table.iter().enumerate() {
        mem.write_obj(placement.table + (i * size_of::<Module>()) as u64, m)
            .ok_or_else(|| bug("the module table"))?;
    }
    let (mut mac, mut mac2) = ([0u8; 8], [0u8; 8]);
    mac[..6].copy_from_slice(&cfg.mac);
    mac2[..6].copy_from_slice(&cfg.mac2);
    let info = BootInfo {
        magic: MAGIC,
        mem_size: mem.size(),
        cmdline: CMDLINE,
        cmdline_len: cfg.cmdline.len() as u64,
        tsc_hz,
        mac,
        net: u64::from(cfg.net.is_some()) + u64::from(cfg.net2.is_some()),
        modules: placement.table,
        modules_count: table.len() as u64,
        used_end: placement.used_end,
        mac2,
    };
    mem.write_obj(BOOT_INFO, &info)
        .ok_or_else(|| bug("the boot information"))?;
    Ok(cr3)
}

/// Why the run loop stopped, before it is turned into an [`Ended`] or an [`Error`].
enum Stop {
    Exit(u8),
    /// A guest fault, described without the registers (added by the loop).
    Fault(String),
    Error(Error),
}

/// One of the guest's networks: its backend and a frame that did not fit a NET_READ.
struct NetPort {
    backend: Backend,
    /// Receive buffer: one frame, plus a byte to detect frames longer than FRAME_MAX.
    rx: Vec<u8>,
    /// The length of a frame in `rx` that did not fit the guest's last NET_READ.
    held: Option<usize>,
}

impl NetPort {
    fn new(backend: Backend) -> NetPort {
        NetPort {
            backend,
            rx: vec![0; FRAME_MAX + 1],
            held: None,
        }
    }
}

/// A booted guest and what serving it needs.
struct Machine<'a> {
    vcpu: VcpuFd,
    mem: GuestMemory,
    /// The guest's networks, by index (0, then 1).
    nets: Vec<NetPort>,
    console: &'a mut dyn Write,
    stats: Stats,
    /// When the vCPU first ran.
    boot: Instant,
}

impl Machine<'_> {
    /// Runs the vCPU until the guest exits, faults or times out.
    fn run(&mut self, watchdog: &Watchdog) -> Result<Ended, Error> {
        loop {
            if watchdog.expired() {
                return Ok(Ended::TimedOut);
            }
            let stop = match self.vcpu.run() {
                Ok(VcpuExit::IoOut(port, data)) => {
                    let arg = match <[u8; 4]>::try_from(data) {
                        Ok(b) => Some(u64::from(u32::from_le_bytes(b))),
                        Err(_) => None,
                    };
                    let len = data.len();
                    self.stats.exits += 1;
                    match arg {
                        Some(arg) => self.hypercall(port, arg, watchdog),
                        None => Err(Stop::Fault(format!(
                            "an out of {len} bytes to port 0x{port:x} (hypercalls are 4-byte `out dx, eax`)"
                        ))),
                    }
                }
                Ok(exit) => {
                    let what = describe(&exit);
                    self.stats.exits += 1;
                    Err(Stop::Fault(what))
                }
                Err(e) if matches!(e.errno(), libc::EINTR | libc::EAGAIN) => {
                    self.stats.exits += 1;
                    Ok(())
                }
                Err(e) => Err(Stop::Error(Error::Kvm(format!("KVM_RUN failed: {e}")))),
            };
            match stop {
                Ok(()) => {}
                Err(Stop::Exit(s)) => return Ok(Ended::Exit(s)),
                Err(Stop::Fault(what)) => return Ok(Ended::Fault(self.at(&what))),
                Err(Stop::Error(e)) => return Err(e),
            }
        }
    }

    /// `what` with the guest's instruction and stack pointers.
    fn at(&self, what: &str) -> String {
        match self.vcpu.get_regs() {
            Ok(r) => format!("{what} at rip 0x{:x} (rsp 0x{:x})", r.rip, r.rsp),
            Err(e) => format!("{what} (the registers cannot be read: {e})"),
        }
    }

    /// Serves the hypercall on `port` whose arguments are at `arg`.
    fn hypercall(&mut self, port: u16, arg: u64, watchdog: &Watchdog) -> Result<(), Stop> {
        let counts = &mut self.stats.exits_by_port;
        match port {
            port::PUTS => {
                counts.puts += 1;
                let p: Puts = self.args("PUTS", arg)?;
                let bytes = self.mem.slice(p.data, p.len).ok_or_else(|| {
                    Stop::Fault(format!(
                        "PUTS of {} bytes at 0x{:x}, outside guest memory",
                        p.len, p.data
                    ))
                })?;
                let write = |c: &mut dyn Write| {
                    c.write_all(bytes)?;
                    if bytes.last() == Some(&b'\n') {
                        c.flush()?;
                    }
                    Ok::<(), io::Error>(())
                };
                write(self.console).map_err(|e| {
                    Stop::Error(Error::Io(format!("cannot write the guest's console: {e}")))
                })
            }
            port::NET_WRITE => {
                counts.net_write += 1;
                if self.stats.first_frame.is_none() {
                    self.stats.first_frame = Some(self.boot.elapsed());
                    self.stats.exits_to_first_frame = self.stats.exits;
                }
                let mut w: NetWrite = self.args("NET_WRITE", arg)?;
                if w.len > FRAME_MAX as u64 {
                    return Err(Stop::Fault(format!(
                        "NET_WRITE of a {}-byte frame (at most {FRAME_MAX})",
                        w.len
                    )));
                }
                let frame = self.mem.slice(w.data, w.len).ok_or_else(|| {
                    Stop::Fault(format!(
                        "NET_WRITE of {} bytes at 0x{:x}, outside guest memory",
                        w.len, w.data
                    ))
                })?;
                let sent = usize::try_from(w.net)
                    .ok()
                    .and_then(|i| self.nets.get_mut(i))
                    .is_some_and(|n| n.backend.send(frame));
                w.ret = u64::from(!sent);
                self.reply(arg, &w)
            }
            port::NET_READ => {
                counts.net_read += 1;
                let mut r: NetRead = self.args("NET_READ", arg)?;
                let (len, frames, more) = self.net_read(r.net, r.data, r.cap)?;
                (r.len, r.frames, r.more) = (len, frames, more);
                self.reply(arg, &r)
            }
            port::POLL => {
                counts.poll += 1;
                let mut p: Poll = self.args("POLL", arg)?;
                let wait = Duration::from_nanos(p.timeout_ns).min(watchdog.remaining());
                // bit i: network i has a frame (one held back counts without a wait)
                let held = self.nets.iter().enumerate();
                let held = held.fold(0, |r, (i, n)| r | u64::from(n.held.is_some()) << i);
                p.ready = if held != 0 {
                    held
                } else {
                    let fds: Vec<_> = self.nets.iter().map(|n| n.backend.fd()).collect();
                    net::wait_readable(&fds, wait)
                };
                self.reply(arg, &p)
            }
            port::EXIT => {
                counts.exit += 1;
                let e: Exit = self.args("EXIT", arg)?;
                let _ = self.console.flush();
                match u8::try_from(e.status) {
                    Ok(s) => Err(Stop::Exit(s)),
                    Err(_) => Err(Stop::Fault(format!(
                        "EXIT with status {} (statuses are 0 to 255)",
                        e.status
                    ))),
                }
            }
            _ => Err(Stop::Fault(format!(
                "an out to port 0x{port:x}, which is no hypercall"
            ))),
        }
    }

    /// Reads a hypercall's argument structure.
    fn args<T: memory::Pod>(&self, call: &str, arg: u64) -> Result<T, Stop> {
        self.mem.read_obj(arg).ok_or_else(|| {
            Stop::Fault(format!(
                "{call} with its arguments at 0x{arg:x}, outside guest memory"
            ))
        })
    }

    /// Writes a hypercall's results back (the range was read just before).
    fn reply<T: memory::Pod>(&mut self, arg: u64, obj: &T) -> Result<(), Stop> {
        self.mem
            .write_obj(arg, obj)
            .ok_or_else(|| Stop::Fault(format!("a hypercall's arguments at 0x{arg:x} moved")))
    }

    /// Fills the guest's `[data, data + cap)` with frames waiting on network `index`;
    /// returns (bytes written, frames, 1 if a frame is still waiting).
    fn net_read(&mut self, index: u64, data: u64, cap: u64) -> Result<(u64, u64, u64), Stop> {
        let buf = self.mem.slice_mut(data, cap).ok_or_else(|| {
            Stop::Fault(format!(
                "NET_READ into {cap} bytes at 0x{data:x}, outside guest memory"
            ))
        })?;
        let Some(net) = usize::try_from(index)
            .ok()
            .and_then(|i| self.nets.get_mut(i))
        else {
            return Ok((0, 0, 0));
        };
        let (mut at, mut frames) = (0usize, 0u64);
        loop {
            let n = match net.held.take() {
                Some(n) => n,
                None => match net.backend.recv(&mut net.rx) {
                    Some(n) => n,
                    None => return Ok((at as u64, frames, 0)),
                },
            };
            if n > FRAME_MAX {
                // Longer than any Ethernet frame the guest takes: dropped.
                continue;
            }
            match vtnt_abi::hvt::put_frame(buf, at, &net.rx[..n]) {
                Some(end) => {
                    at = end;
                    frames += 1;
                }
                None => {
                    net.held = Some(n);
                    return Ok((at as u64, frames, 1));
                }
            }
        }
    }
}

/// A non-hypercall exit, as a guest fault.
fn describe(exit: &VcpuExit<'_>) -> String {
    match exit {
        VcpuExit::Hlt => "hlt".into(),
        VcpuExit::Shutdown => "shutdown (a CPU exception with no handler)".into(),
        VcpuExit::FailEntry(reason, _) => {
            format!("VM entry failed (hardware reason 0x{reason:x})")
        }
        VcpuExit::InternalError => {
            "KVM internal error (an instruction KVM could not emulate)".into()
        }
        VcpuExit::IoIn(port, data) => format!("an in of {} bytes from port 0x{port:x}", data.len()),
        VcpuExit::MmioRead(addr, _) => {
            format!("a read of 0x{addr:x}, outside guest memory")
        }
        VcpuExit::MmioWrite(addr, _) => {
            format!("a write to 0x{addr:x}, outside guest memory")
        }
        other => format!("unexpected KVM exit {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(paddr: u64, offset: usize, filesz: usize, memsz: u64) -> elf::Segment {
        elf::Segment {
            paddr,
            file: offset..offset + filesz,
            memsz,
        }
    }

    #[test]
    fn whole_pages_of_a_segment_map_unless_another_shares_them() {
        let one = |s: &elf::Segment| mappable(s, std::slice::from_ref(s));
        // The kernel's layout: file offset 0 at 1 MiB, .bss after the file bytes.
        assert_eq!(
            one(&seg(0x10_0000, 0, 0x4_0d88, 0x5_c190)),
            Some(0x10_0000..0x14_0000)
        );
        // Not starting on a page: the whole pages inside; none at all; offsets that do
        // not agree with addresses modulo the page size.
        assert_eq!(
            one(&seg(0x10_0800, 0x800, 0x2000, 0x2000)),
            Some(0x10_1000..0x10_2000)
        );
        assert_eq!(one(&seg(0x10_0000, 0, 0xfff, 0x1000)), None);
        assert_eq!(one(&seg(0x10_0000, 0x800, 0x4000, 0x4000)), None);
        // Two segments that share a page map the pages they do not share; segments that
        // overlap map nothing.
        let a = seg(0x10_0000, 0, 0x3000, 0x3800);
        let b = seg(0x10_3800, 0x3800, 0x2800, 0x2800);
        let both = [a.clone(), b.clone()];
        assert_eq!(mappable(&both[0], &both), Some(0x10_0000..0x10_3000));
        assert_eq!(mappable(&both[1], &both), Some(0x10_4000..0x10_6000));
        let c = seg(0x10_1000, 0x1000, 0x1000, 0x1000);
        let overlapping = [a, c];
        assert_eq!(mappable(&overlapping[0], &overlapping), None);
        assert_eq!(mappable(&overlapping[1], &overlapping), None);
    }
}
