//! What the loader tells us: command line, memory map, modules, ACPI RSDP.
//!
//! [`BootInfo`] hides the boot protocol. Implementations: `crate::hvt::Boot` (our own
//! monitor) and [`Pvh`], which
//! reads Xen's `hvm_start_info` (magic 0x336ec578) as QEMU, Firecracker and Cloud
//! Hypervisor fill it. Everything it points to stays where the loader put it (identity
//! mapped); [`BootInfo::reserved`] lists those ranges so the heap avoids them.

use core::{ptr, slice};

/// `hvm_start_info.magic`.
pub const PVH_MAGIC: u32 = 0x336e_c578;

/// Upper bound on the command line we accept.
const MAX_CMDLINE: usize = 4096;
/// Upper bound on memory-map entries and modules we look at.
const MAX_MEMMAP: usize = 128;
const MAX_MODULES: usize = 16;

/// The kind of a memory-map range (E820 numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    Ram,
    Reserved,
    Acpi,
    Other(u32),
}

/// One memory-map range.
#[derive(Debug, Clone, Copy)]
pub struct MemRegion {
    pub start: u64,
    pub len: u64,
    pub kind: MemKind,
}

/// A boot module (e.g. QEMU `-initrd`, a Firecracker initrd): raw bytes, such as a long
/// target list.
#[derive(Debug, Clone, Copy)]
pub struct Module {
    pub bytes: &'static [u8],
}

/// A physical range `[start, end)` the kernel must not hand to the heap.
pub type Range = (u64, u64);

/// What any boot protocol gives the kernel.
pub trait BootInfo {
    /// The protocol's name, for the banner.
    fn protocol(&self) -> &'static str;
    /// The protocol's version, for the banner.
    fn version(&self) -> u32;
    /// The command line (without the terminating NUL).
    fn cmdline(&self) -> &'static [u8];
    /// The `i`-th memory-map entry.
    fn memory(&self, i: usize) -> Option<MemRegion>;
    /// The `i`-th boot module.
    fn module(&self, i: usize) -> Option<Module>;
    /// The ACPI RSDP physical address, if given.
    fn rsdp(&self) -> Option<u64>;
    /// The `i`-th range that holds boot data (start info, tables, command line, modules).
    fn reserved(&self, i: usize) -> Option<Range>;
}

#[repr(C)]
struct HvmStartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

#[repr(C)]
struct HvmModlistEntry {
    paddr: u64,
    size: u64,
    cmdline_paddr: u64,
    reserved: u64,
}

#[repr(C)]
struct HvmMemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

/// Boot information from a PVH loader.
pub struct Pvh {
    start_info: u64,
    version: u32,
    cmdline: &'static [u8],
    modlist: u64,
    nr_modules: usize,
    memmap: u64,
    memmap_entries: usize,
    rsdp: u64,
}

impl Pvh {
    /// Reads the start info at physical address `paddr`; `None` if the magic is wrong.
    ///
    /// # Safety
    /// `paddr` must be the `ebx` value a PVH loader entered us with (or any address whose
    /// 56 bytes are readable), and everything it points to must stay untouched for the
    /// life of the kernel (the heap avoids [`BootInfo::reserved`]); memory is identity
    /// mapped.
    pub unsafe fn new(paddr: u64) -> Option<Pvh> {
        if paddr == 0 {
            return None;
        }
        // SAFETY: the caller guarantees the structure is readable at `paddr`.
        let si = unsafe { ptr::read_unaligned(paddr as *const HvmStartInfo) };
        if si.magic != PVH_MAGIC {
            return None;
        }
        let cmdline = if si.cmdline_paddr == 0 {
            &[][..]
        } else {
            let p = si.cmdline_paddr as *const u8;
            let mut len = 0;
            // SAFETY: the loader put a NUL-terminated string there; we stop at the NUL or
            // at MAX_CMDLINE bytes, whichever comes first.
            while len < MAX_CMDLINE && unsafe { p.add(len).read() } != 0 {
                len += 1;
            }
            // SAFETY: the `len` bytes just read are the command line, which the loader
            // leaves in place and the heap never reuses.
            unsafe { slice::from_raw_parts(p, len) }
        };
        let (memmap, memmap_entries) = if si.version >= 1 {
            (
                si.memmap_paddr,
                (si.memmap_entries as usize).min(MAX_MEMMAP),
            )
        } else {
            (0, 0)
        };
        Some(Pvh {
            start_info: paddr,
            version: si.version,
            cmdline,
            modlist: si.modlist_paddr,
            nr_modules: (si.nr_modules as usize).min(MAX_MODULES),
            memmap,
            memmap_entries,
            rsdp: si.rsdp_paddr,
        })
    }

    fn modlist_entry(&self, i: usize) -> Option<HvmModlistEntry> {
        if i >= self.nr_modules || self.modlist == 0 {
            return None;
        }
        let p = (self.modlist as *const HvmModlistEntry).wrapping_add(i);
        // SAFETY: `i < nr_modules`, and the loader laid out that many entries at modlist.
        Some(unsafe { ptr::read_unaligned(p) })
    }
}

impl BootInfo for Pvh {
    fn protocol(&self) -> &'static str {
        "pvh"
    }

    /// The start-info structure version (1 has the memory map).
    fn version(&self) -> u32 {
        self.version
    }

    fn cmdline(&self) -> &'static [u8] {
        self.cmdline
    }

    fn memory(&self, i: usize) -> Option<MemRegion> {
        if i >= self.memmap_entries {
            return None;
        }
        let p = (self.memmap as *const HvmMemmapEntry).wrapping_add(i);
        // SAFETY: `i < memmap_entries`, and the loader laid out that many entries.
        let e = unsafe { ptr::read_unaligned(p) };
        let kind = match e.kind {
            1 => MemKind::Ram,
            2 => MemKind::Reserved,
            3 => MemKind::Acpi,
            n => MemKind::Other(n),
        };
        Some(MemRegion {
            start: e.addr,
            len: e.size,
            kind,
        })
    }

    fn module(&self, i: usize) -> Option<Module> {
        let e = self.modlist_entry(i)?;
        if e.paddr == 0 || e.size == 0 || e.size > usize::MAX as u64 {
            return None;
        }
        // SAFETY: the loader placed `size` bytes of module at `paddr`; the heap avoids
        // them (see `reserved`), so they stay valid and unaliased by mutable data.
        let bytes = unsafe { slice::from_raw_parts(e.paddr as *const u8, e.size as usize) };
        Some(Module { bytes })
    }

    fn rsdp(&self) -> Option<u64> {
        (self.rsdp != 0).then_some(self.rsdp)
    }

    fn reserved(&self, i: usize) -> Option<Range> {
        let span = |start: u64, len: u64| (start, start.saturating_add(len));
        match i {
            0 => Some(span(
                self.start_info,
                core::mem::size_of::<HvmStartInfo>() as u64,
            )),
            1 => Some(span(
                self.cmdline.as_ptr() as u64,
                self.cmdline.len() as u64 + 1,
            )),
            2 => Some(span(self.memmap, (self.memmap_entries * 24) as u64)),
            3 => Some(span(self.modlist, (self.nr_modules * 32) as u64)),
            i if i - 4 < self.nr_modules => {
                let e = self.modlist_entry(i - 4)?;
                Some(span(e.paddr, e.size))
            }
            _ => None,
        }
    }
}
