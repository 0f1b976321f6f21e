//! Guest memory: one anonymous mapping of the host, registered with KVM as guest-physical
//! addresses `[0, size)`, and the only place that turns guest addresses into host
//! memory. Every access is bounds-checked (a guest's hypercall hands us addresses we must
//! not trust) and answers `None` when the range is not inside guest memory.
//!
//! The mapping is `MAP_PRIVATE | MAP_NORESERVE`: pages cost host memory only once the
//! monitor or the guest touches them, which keeps a 16 MiB guest that uses 300 KiB at a
//! few hundred KiB of resident memory. The image's whole pages are mapped over it from
//! the image file ([`GuestMemory::map_file`], copy-on-write), so every guest booted from
//! one file shares its code in the page cache and owns only the pages it writes.
//!
//! Aliasing: the guest writes this memory while it runs. The monitor has one vCPU and runs
//! it on the thread that owns this value, so while any slice handed out here is alive the
//! vCPU is stopped in userspace (inside an exit), and nothing else writes the memory.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

use vtnt_abi::hvt::{BootInfo, Exit, Module, NetRead, NetWrite, Poll, Puts};

/// The host's page size (x86_64).
pub(crate) const PAGE: u64 = 4096;

/// Plain data that can be copied to and from guest memory as bytes.
///
/// # Safety
/// Implementors are `#[repr(C)]` (or primitive) with no padding bytes, and every bit
/// pattern is a valid value: so reading one from arbitrary guest bytes is sound, and
/// viewing one as bytes exposes no uninitialised padding.
pub(crate) unsafe trait Pod: Copy {}

// SAFETY: a u64 has no padding and every bit pattern is valid.
unsafe impl Pod for u64 {}
// SAFETY: `vtnt_abi::hvt`'s structures are #[repr(C)] and made only of u64 fields (BootInfo also
// of one [u8; 8] at an 8-aligned offset), so they have no padding and accept any bits.
unsafe impl Pod for BootInfo {}
// SAFETY: as above.
unsafe impl Pod for Module {}
// SAFETY: as above.
unsafe impl Pod for Puts {}
// SAFETY: as above.
unsafe impl Pod for NetWrite {}
// SAFETY: as above.
unsafe impl Pod for NetRead {}
// SAFETY: as above.
unsafe impl Pod for Poll {}
// SAFETY: as above.
unsafe impl Pod for Exit {}

/// The guest's memory, unmapped on drop.
pub(crate) struct GuestMemory {
    base: NonNull<u8>,
    size: usize,
}

impl GuestMemory {
    /// Maps `size` bytes of zeroed anonymous memory.
    pub fn new(size: usize) -> io::Result<GuestMemory> {
        // SAFETY: an anonymous mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(GuestMemory { base, size })
    }

    /// Bytes of guest memory.
    pub fn size(&self) -> u64 {
        self.size as u64
    }

    /// The host address of guest-physical address 0 (for KVM's memory slot).
    pub fn host_addr(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    /// The offset of `[gpa, gpa + len)` in the mapping, if the range lies inside it.
    fn offset(&self, gpa: u64, len: u64) -> Option<usize> {
        let end = gpa.checked_add(len)?;
        (end <= self.size as u64).then_some(gpa as usize)
    }

    /// The guest bytes `[gpa, gpa + len)`.
    pub fn slice(&self, gpa: u64, len: u64) -> Option<&[u8]> {
        let off = self.offset(gpa, len)?;
        // SAFETY: the range lies inside the live mapping (checked above), which is
        // readable; the vCPU is stopped while the borrow lives (see the module docs).
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len as usize) })
    }

    /// The guest bytes `[gpa, gpa + len)`, to write.
    pub fn slice_mut(&mut self, gpa: u64, len: u64) -> Option<&mut [u8]> {
        let off = self.offset(gpa, len)?;
        // SAFETY: as in `slice`; `&mut self` makes this the only slice of the mapping.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len as usize) })
    }

    /// Maps `len` bytes of `file` from `offset` at `gpa` (all three multiples of [`PAGE`],
    /// the range inside guest memory), private and writable: the pages are the file's page
    /// cache, shared with every process that maps the file, until the guest or the monitor
    /// writes one, which then becomes a private copy. The file must not change while the
    /// guest runs: a page not yet copied would show the change (and past a truncation, the
    /// monitor reading it would die of SIGBUS).
    ///
    /// `Ok(false)`: nothing was mapped, and the caller writes the bytes instead; when the
    /// arguments are not page-aligned or lie outside, nothing changed; when the file
    /// cannot be mapped (a pipe, a file system without `mmap`), the range is fresh zeroed
    /// memory again. `Err`: not even that could be restored, and this guest memory must
    /// not be used.
    pub fn map_file(&mut self, gpa: u64, len: u64, file: &File, offset: u64) -> io::Result<bool> {
        let aligned = [gpa, len, offset].iter().all(|n| n % PAGE == 0);
        let (Some(off), Ok(file_off), true) = (
            self.offset(gpa, len),
            libc::off_t::try_from(offset),
            aligned && len > 0,
        ) else {
            return Ok(false);
        };
        // SAFETY: `off + len` lies inside the mapping (checked by `offset`), so `at` does.
        let at = unsafe { self.base.as_ptr().add(off) }.cast::<libc::c_void>();
        // SAFETY: MAP_FIXED replaces pages of this value's own mapping only (the range was
        // checked above), and no slice of it is alive (`&mut self`); the new pages are
        // readable and writable like those they replace, and `drop` unmaps them with the
        // rest. `file` is an open descriptor, borrowed for the call (the mapping keeps its
        // own reference).
        let addr = unsafe {
            libc::mmap(
                at,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                file.as_raw_fd(),
                file_off,
            )
        };
        if addr != libc::MAP_FAILED {
            return Ok(true);
        }
        // A MAP_FIXED that failed may have unmapped the range already: make it fresh
        // anonymous memory again.
        // SAFETY: as above, with anonymous memory (what `new` mapped there).
        let again = unsafe {
            libc::mmap(
                at,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if again == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(false)
    }

    /// Makes `[gpa, gpa + len)` read as zeroes, writing only the pages that hold a
    /// nonzero byte: a page nobody has touched reads as the kernel's shared zero page, and
    /// stays free of host memory until the guest itself writes it.
    pub fn clear(&mut self, gpa: u64, len: u64) -> Option<()> {
        let bytes = self.slice_mut(gpa, len)?;
        // The first chunk ends at a page boundary, the others are whole pages.
        let head = (PAGE - gpa % PAGE) as usize;
        let (first, rest) = bytes.split_at_mut(head.min(bytes.len()));
        for chunk in std::iter::once(first).chain(rest.chunks_mut(PAGE as usize)) {
            if chunk.iter().any(|&b| b != 0) {
                chunk.fill(0);
            }
        }
        Some(())
    }

    /// Copies `bytes` to `gpa`.
    pub fn write(&mut self, gpa: u64, bytes: &[u8]) -> Option<()> {
        self.slice_mut(gpa, bytes.len() as u64)?
            .copy_from_slice(bytes);
        Some(())
    }

    /// Reads a `T` from `gpa` (any alignment).
    pub fn read_obj<T: Pod>(&self, gpa: u64) -> Option<T> {
        let bytes = self.slice(gpa, size_of::<T>() as u64)?;
        // SAFETY: `bytes` holds size_of::<T>() readable bytes, and `T: Pod` accepts any
        // bit pattern; read_unaligned needs no alignment.
        Some(unsafe { bytes.as_ptr().cast::<T>().read_unaligned() })
    }

    /// Writes `obj` to `gpa` as its bytes.
    pub fn write_obj<T: Pod>(&mut self, gpa: u64, obj: &T) -> Option<()> {
        // SAFETY: `obj` is a live `T` of size_of::<T>() bytes, all initialised because
        // `T: Pod` has no padding.
        let bytes = unsafe {
            std::slice::from_raw_parts(std::ptr::from_ref(obj).cast::<u8>(), size_of::<T>())
        };
        self.write(gpa, bytes)
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this size and is unmapped once, after
        // every borrow of it ended. (The VM's fds close first; were KVM still to hold the
        // slot, it would only find the pages gone, which is no hazard to this process.)
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_outside_memory_are_refused() {
        let mut m = GuestMemory::new(2 << 20).unwrap();
        assert!(m.write(0x1000, b"abc").is_some());
        assert_eq!(m.slice(0x1000, 3), Some(&b"abc"[..]));
        assert!(m.slice((2 << 20) - 2, 3).is_none());
        assert!(m.slice(u64::MAX, 2).is_none());
        assert!(m.slice(2 << 20, 0).is_some());
        assert!(m.read_obj::<BootInfo>((2 << 20) - 79).is_none());
        let p = Puts { data: 7, len: 9 };
        m.write_obj(0x2001, &p).unwrap();
        let q: Puts = m.read_obj(0x2001).unwrap();
        assert_eq!((q.data, q.len), (7, 9));
        assert_eq!(m.read_obj::<u64>(0x2009), Some(9));
    }

    #[test]
    fn a_file_is_mapped_copy_on_write() {
        let path = std::env::temp_dir().join(format!("vtnt-monitor-map-{}", std::process::id()));
        // Pages of 1s, 2s and 3s.
        let content: Vec<u8> = (0..3 * PAGE).map(|i| (i / PAGE + 1) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = File::open(&path).unwrap();
        let mut m = GuestMemory::new(2 << 20).unwrap();
        assert!(m.map_file(0x10_0000, 2 * PAGE, &file, PAGE).unwrap());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{:x}-", m.host_addr() + 0x10_0000);
        let name = path.to_str().unwrap();
        assert!(
            maps.lines()
                .any(|l| l.starts_with(&start) && l.ends_with(name)),
            "{maps}"
        );
        assert_eq!(m.slice(0x0f_ffff, 2).unwrap(), [0, 2]);
        assert_eq!(m.slice(0x10_0fff, 2).unwrap(), [2, 3]);
        assert_eq!(m.slice(0x10_1fff, 2).unwrap(), [3, 0]);
        // A write copies the page: the file does not change.
        m.write(0x10_0000, &[9]).unwrap();
        assert_eq!(m.slice(0x10_0000, 2).unwrap(), [9, 2]);
        assert_eq!(std::fs::read(&path).unwrap(), content);
        std::fs::remove_file(&path).unwrap();
        // Not page-aligned, outside memory or empty: nothing is mapped.
        assert!(!m.map_file(0x10_0800, PAGE, &file, 0).unwrap());
        assert!(!m.map_file(0x10_0000, PAGE, &file, 0x800).unwrap());
        assert!(!m.map_file(0x1f_f000, 2 * PAGE, &file, 0).unwrap());
        assert!(!m.map_file(0x10_0000, 0, &file, 0).unwrap());
        assert_eq!(m.slice(0x10_0000, 2).unwrap(), [9, 2]);
        // A pipe cannot be mapped: the range is fresh memory again, and usable.
        let (reader, _writer) = std::io::pipe().unwrap();
        let pipe = File::from(std::os::fd::OwnedFd::from(reader));
        assert!(!m.map_file(0x10_0000, PAGE, &pipe, 0).unwrap());
        assert_eq!(m.slice(0x10_0fff, 2).unwrap(), [0, 3]);
        m.write(0x10_0000, &[7]).unwrap();
        assert_eq!(m.slice(0x10_0000, 1).unwrap(), [7]);
    }

    #[test]
    fn clear_zeroes_exactly_its_range() {
        let mut m = GuestMemory::new(2 << 20).unwrap();
        m.write(0x2ff0, &[0xaa; 0x1020]).unwrap();
        m.clear(0x2ff8, 0x1010).unwrap();
        assert_eq!(m.slice(0x2ff0, 8).unwrap(), [0xaa; 8]);
        assert!(m.slice(0x2ff8, 0x1010).unwrap().iter().all(|&b| b == 0));
        assert_eq!(m.slice(0x4008, 8).unwrap(), [0xaa; 8]);
        // Untouched memory, a range inside one page, an empty range, the very end.
        m.clear(0x10_0000, 0x10_0000).unwrap();
        m.clear(0x2ff1, 2).unwrap();
        assert_eq!(m.slice(0x2ff0, 4).unwrap(), [0xaa, 0, 0, 0xaa]);
        m.clear(0x5000, 0).unwrap();
        m.clear((2 << 20) - 1, 1).unwrap();
        assert!(m.clear((2 << 20) - 1, 2).is_none());
    }
}
