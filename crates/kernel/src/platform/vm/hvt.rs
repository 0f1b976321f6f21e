//! The monitor platform: the kernel as a guest of `vtnt-monitor` (the interface is
//! `vtnt_abi::hvt`; read its docs first). Entered in 64-bit mode at privilege level 3 with
//! the monitor's [`vtnt_abi::hvt::BootInfo`]; every device is a hypercall (`out dx, eax` with
//! the address of the call's argument structure): console lines, Ethernet frames in
//! batches, waiting for a frame or a timeout, and the exit. No interrupt, MSR, APIC or
//! PCI is touched on this platform, so no instruction needs ring 0: under KVM on PVM the
//! whole kernel runs natively.
//!
//! [`active`] tells the VM platform's functions (`super`) which of the image's two boot
//! paths ran; the console, the clock, the link and the exit each ask it once per
//! operation. The console's lines
//! leave in batches, before each wait and at the exit: a guest that faults (no handler
//! here: the monitor reports the fault and its `rip`) loses the lines since its last wait.

use super::bootinfo::{self, MemKind, MemRegion, Module, Range};
use crate::platform::{Link, LinkError, Received};
use alloc::boxed::Box;
use core::arch::asm;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use vtnt_abi::hvt::{port, BootInfo as Info, NetRead, NetWrite, Poll, Puts};

/// The monitor's boot information, once [`Boot::new`] accepted it (null before: the PVH
/// platform).
static INFO: AtomicPtr<Info> = AtomicPtr::new(core::ptr::null_mut());

fn info() -> Option<&'static Info> {
    // SAFETY: non-null only once `Boot::new` validated the monitor's structure, which
    // stays mapped and unchanged for the kernel's lifetime.
    unsafe { INFO.load(Ordering::Relaxed).as_ref() }
}

/// Whether the kernel runs under `vtnt-monitor`.
pub fn active() -> bool {
    info().is_some()
}

/// Network `net`'s MAC address (0: the first, 1: the second), if the monitor gives the
/// guest that network.
pub fn mac(net: u64) -> Option<[u8; 6]> {
    let i = info()?;
    let m = if net == 0 { i.mac } else { i.mac2 };
    (i.net > net).then_some([m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// One hypercall on `port` with `arg`; the monitor reads and writes `*arg` before the
/// guest resumes.
fn call<T>(port: u16, arg: &mut T) {
    let addr = arg as *mut T as u64;
    debug_assert!(addr < 1 << 32);
    // SAFETY: `out` to a hypercall port only exits to the monitor, which accesses `*arg`
    // (a live, exclusively borrowed value in identity-mapped guest memory below 4 GiB:
    // the monitor maps at most `vtnt_abi::hvt::MEM_MAX`) and nothing else of ours. No
    // `nomem`: the compiler must treat `*arg` as read and written by this instruction.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") addr as u32, options(nostack, preserves_flags))
    };
}

/// Writes one console line (or piece of one).
pub fn puts(bytes: &[u8]) {
    let mut a = Puts {
        data: bytes.as_ptr() as u64,
        len: bytes.len() as u64,
    };
    call(port::PUTS, &mut a);
}

/// Ends the VM with `status`.
pub fn exit(status: u8) -> ! {
    crate::platform::console::flush();
    let mut a = vtnt_abi::hvt::Exit {
        status: status as u64,
    };
    call(port::EXIT, &mut a);
    // The monitor does not resume a guest after EXIT.
    loop {
        core::hint::spin_loop();
    }
}

/// Whether the last poll or read said frames are waiting, bit `i` for network `i`.
static FRAMES_WAIT: AtomicU64 = AtomicU64::new(0b11);
/// Guest time (us) of the last receive hypercall, by network.
static LAST_READ_US: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// How long frames may sit unread while the guest never waits (a send-bound loop).
const READ_AT_LEAST_EVERY_US: u64 = 1000;

/// Whether a receive hypercall on network `net` (0 or 1) may find frames: the last poll
/// or read said so, or none happened for [`READ_AT_LEAST_EVERY_US`]. Saves an exit per
/// run-loop turn.
pub fn frames_may_wait(net: u64) -> bool {
    FRAMES_WAIT.load(Ordering::Relaxed) & (1 << net) != 0
        || super::time::now().as_micros()
            >= LAST_READ_US[net as usize & 1].load(Ordering::Relaxed) + READ_AT_LEAST_EVERY_US
}

/// Waits until a frame can be read (on either network) or `timeout_ns` passes; true if a
/// frame is waiting.
pub fn poll(timeout_ns: u64) -> bool {
    // The console's lines go out before we wait (see `console::write_bytes`).
    crate::platform::console::flush();
    let mut a = Poll {
        timeout_ns,
        ready: 0,
    };
    call(port::POLL, &mut a);
    FRAMES_WAIT.fetch_or(a.ready, Ordering::Relaxed);
    a.ready != 0
}

/// Sends one Ethernet frame on network `net`; false if the monitor could not (the caller
/// may retry).
pub fn net_write(net: u64, frame: &[u8]) -> bool {
    let mut a = NetWrite {
        data: frame.as_ptr() as u64,
        len: frame.len() as u64,
        ret: 0,
        net,
    };
    call(port::NET_WRITE, &mut a);
    a.ret == 0
}

/// Fills `buf` with frames waiting on network `net` (walk them with
/// `vtnt_abi::hvt::frame_at`); returns the bytes written and whether more frames wait.
pub fn net_read(net: u64, buf: &mut [u8]) -> (usize, bool) {
    let mut a = NetRead {
        data: buf.as_mut_ptr() as u64,
        cap: buf.len() as u64,
        net,
        ..NetRead::default()
    };
    call(port::NET_READ, &mut a);
    let bit = 1 << net;
    if a.more != 0 {
        FRAMES_WAIT.fetch_or(bit, Ordering::Relaxed);
    } else {
        FRAMES_WAIT.fetch_and(!bit, Ordering::Relaxed);
    }
    LAST_READ_US[net as usize & 1].store(super::time::now().as_micros(), Ordering::Relaxed);
    ((a.len as usize).min(buf.len()), a.more != 0)
}

/// The monitor's boot information.
pub struct Boot {
    info: &'static Info,
}

impl Boot {
    /// Reads the boot information at `addr` and marks the platform active; `None` if the
    /// magic is wrong.
    ///
    /// # Safety
    /// `addr` must be the address the monitor entered us with (`rdi`).
    pub unsafe fn new(addr: u64) -> Option<Boot> {
        // SAFETY: the caller passes the monitor's boot-info address: an aligned, mapped
        // `BootInfo` that stays untouched for the kernel's lifetime.
        let info = unsafe { &*(addr as *const Info) };
        if info.magic != vtnt_abi::hvt::MAGIC {
            return None;
        }
        INFO.store(addr as *mut Info, Ordering::Relaxed);
        Some(Boot { info })
    }

    /// The TSC frequency the monitor read from KVM.
    pub fn tsc_hz(&self) -> Option<u64> {
        (self.info.tsc_hz != 0).then_some(self.info.tsc_hz)
    }
}

impl bootinfo::BootInfo for Boot {
    fn protocol(&self) -> &'static str {
        "hvt"
    }

    fn version(&self) -> u32 {
        // the interface's version, as in `vtnt_abi::hvt::MAGIC` ("vTNThvt2")
        2
    }

    fn cmdline(&self) -> &'static [u8] {
        let len = self.info.cmdline_len.min(vtnt_abi::hvt::CMDLINE_MAX) as usize;
        // SAFETY: the monitor wrote `cmdline_len` bytes at `cmdline` (checked against
        // CMDLINE_MAX on its side, clamped here) and never changes them.
        unsafe { core::slice::from_raw_parts(self.info.cmdline as *const u8, len) }
    }

    fn memory(&self, i: usize) -> Option<MemRegion> {
        (i == 0).then_some(MemRegion {
            start: 0,
            len: self.info.mem_size,
            kind: MemKind::Ram,
        })
    }

    fn module(&self, i: usize) -> Option<Module> {
        if i as u64 >= self.info.modules_count {
            return None;
        }
        // SAFETY: the monitor wrote `modules_count` entries at `modules`, each naming
        // bytes it placed in guest memory, and changes none of them afterwards.
        let m = unsafe { *(self.info.modules as *const vtnt_abi::hvt::Module).add(i) };
        // SAFETY: as above: `len` bytes at `addr` are the module, mapped and unchanging.
        let bytes = unsafe { core::slice::from_raw_parts(m.addr as *const u8, m.len as usize) };
        Some(Module { bytes })
    }

    fn rsdp(&self) -> Option<u64> {
        None
    }

    fn reserved(&self, i: usize) -> Option<Range> {
        match i {
            // The monitor's structures (boot info, command line, page tables).
            0 => Some((0, vtnt_abi::hvt::IMAGE_MIN)),
            // The image and what the monitor put above it (modules and their table).
            1 => Some((vtnt_abi::hvt::IMAGE_MIN, self.info.used_end)),
            _ => None,
        }
    }
}

/// Bytes of frames one receive hypercall may return at most (about 40 full-size frames).
const BATCH: usize = 64 * 1024;
/// The receive buffer's first size (two full-size frames), doubled up to [`BATCH`] each
/// time the monitor still held frames once it was full: a guest that receives little (an
/// idle one) keeps one page of host memory for it, not sixteen.
const BATCH_FIRST: usize = 4 * 1024;

/// The monitor's frame hypercalls on network `net` (0 or 1) as a [`Link`]: one buffer to
/// send from, one batch buffer of [`BATCH_FIRST`] to [`BATCH`] bytes to receive into
/// (`rx_len` bytes of frames received at `rx_t`, the next at `rx_at`; `rx_more`: the
/// monitor holds more).
pub struct MonitorLink {
    net: u64,
    mac: [u8; 6],
    tx: Box<[u8]>,
    rx: Box<[u8]>,
    rx_len: usize,
    rx_at: usize,
    rx_more: bool,
    rx_t: vtnt_record::Instant,
}

impl MonitorLink {
    /// The monitor's network `net` (0 or 1), with MAC address `mac`.
    pub fn new(net: u64, mac: [u8; 6]) -> MonitorLink {
        crate::platform::steps::mark(crate::platform::steps::Step::LinkUp);
        MonitorLink {
            net,
            mac,
            tx: alloc::vec![0u8; vtnt_abi::hvt::FRAME_MAX].into_boxed_slice(),
            rx: alloc::vec![0u8; BATCH_FIRST].into_boxed_slice(),
            rx_len: 0,
            rx_at: 0,
            rx_more: false,
            rx_t: vtnt_record::Instant::ZERO,
        }
    }
}

impl Link for MonitorLink {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn location(&self) -> &dyn core::fmt::Display {
        if self.net == 0 {
            &"monitor"
        } else {
            &"monitor network 1"
        }
    }

    fn tx_take(&mut self) -> Result<(Box<[u8]>, usize), LinkError> {
        Ok((core::mem::take(&mut self.tx), 0))
    }

    fn tx_give(&mut self, buf: Box<[u8]>, len: usize) -> Result<(), LinkError> {
        let sent = net_write(self.net, &buf[..len]);
        self.tx = buf;
        if sent {
            Ok(())
        } else {
            Err(LinkError::Busy)
        }
    }

    fn next_frame(&mut self) -> Option<Received> {
        if self.rx_at >= self.rx_len {
            if !self.rx_more && !frames_may_wait(self.net) {
                return None;
            }
            if self.rx_more && self.rx.len() < BATCH {
                self.rx = alloc::vec![0u8; self.rx.len() * 2].into_boxed_slice();
            }
            let (len, more) = net_read(self.net, &mut self.rx);
            (self.rx_len, self.rx_at, self.rx_more, self.rx_t) = (len, 0, more, super::time::now());
        }
        let Some((bytes, next)) = vtnt_abi::hvt::frame_at(&self.rx[..self.rx_len], self.rx_at)
        else {
            self.rx_at = self.rx_len;
            return None;
        };
        self.rx_at = next;
        Some(Received {
            at: (bytes.start, bytes.len()),
            t: self.rx_t,
            buf: core::mem::take(&mut self.rx),
        })
    }

    fn frame_done(&mut self, buf: Box<[u8]>) -> bool {
        self.rx = buf;
        true
    }
}
