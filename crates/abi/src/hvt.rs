//! hvt: the interface between the vTNT unikernel and `vtnt-monitor`, our own microVM monitor
//! (Solo5 hvt's model: a monitor made for one unikernel, a few hypercalls, no emulated
//! hardware). Data only (`#[repr(C)]` structures and constants).
//!
//! # Boot
//! The image is the kernel's ELF. The monitor loads its `PT_LOAD` segments at their
//! physical addresses (zeroing what the file does not hold), writes a [`BootInfo`] at
//! [`BOOT_INFO`], the command line at [`CMDLINE`], page tables identity-mapping guest
//! memory with 2 MiB user pages at [`PAGE_TABLES`], boot modules above the image, and
//! enters the 64-bit entry point that the ELF note ([`NOTE_NAME`], [`NOTE_ENTRY64`])
//! names, with `rdi` = [`BOOT_INFO`], in 64-bit mode at **privilege level 3**, asking for
//! `IOPL` = 3 (so that `out` reaches the monitor under hardware KVM; PVM accepts the value
//! but runs the guest with the host's user flags, IOPL 0 and interrupts enabled, and
//! traps `out` to the monitor all the same). The guest relies on neither flag: it never
//! enables interrupts it would have to handle, and the monitor injects none.
//!
//! Why ring 3: under KVM on PVM (pagetable-based virtualisation, no VMX/SVM) a guest's
//! ring-0 code is emulated an instruction at a time (about 1 us each) unless it speaks
//! PVM's paravirtual protocol, while ring-3 code runs natively; under hardware KVM ring 3
//! costs nothing. The kernel therefore never needs a privileged instruction on this
//! platform: no interrupts (waiting is a hypercall), no MSRs (the TSC frequency is in
//! [`BootInfo`]), no page-table changes. A CPU exception has no handler and ends the VM
//! (the monitor reports it as a guest fault).
//!
//! # Hypercalls
//! `out dx, eax` with `dx` = one of the [`port`] numbers and `eax` = the guest-physical
//! address of that call's argument structure (below 4 GiB, naturally aligned). The
//! monitor performs the call, writes the results into the same structure, and resumes
//! the guest: one exit per call. Under PVM each exit costs tens of microseconds, so the
//! calls move whole lines and batches of frames.

/// Guest-physical address of the [`BootInfo`] structure (also passed in `rdi`).
pub const BOOT_INFO: u64 = 0x1000;
/// Guest-physical address of the command line (NUL-free bytes, length in [`BootInfo`]).
pub const CMDLINE: u64 = 0x2000;
/// Longest command line (it must fit below [`PAGE_TABLES`]).
pub const CMDLINE_MAX: u64 = PAGE_TABLES - CMDLINE;
/// Guest-physical address of the page tables the monitor builds (PML4, PDPT, then one
/// page directory per GiB of guest memory).
pub const PAGE_TABLES: u64 = 0x4000;
/// Where the image's segments may start: everything below belongs to the monitor's
/// structures above.
pub const IMAGE_MIN: u64 = 0x10_0000;
/// The smallest guest memory the monitor accepts.
pub const MEM_MIN: u64 = 2 << 20;
/// The largest guest memory (the page tables cover one PDPT: 512 GiB; we stop far lower).
pub const MEM_MAX: u64 = 4 << 30;

/// `BootInfo::magic`: "vTNThvt2" little-endian (2: two networks, each frame call naming
/// one; a guest or monitor of the one-network interface, "vTNThvt1", is refused).
pub const MAGIC: u64 = u64::from_le_bytes(*b"vTNThvt2");

/// How many networks the monitor can give a VM (a network function's two sides).
pub const NETS_MAX: u64 = 2;

/// The ELF note naming the 64-bit entry point: name (with its NUL), type, and an 8-byte
/// little-endian descriptor holding the entry's address.
pub const NOTE_NAME: &[u8] = b"vTNT\0";
/// The note type of the 64-bit ring-3 entry point.
pub const NOTE_ENTRY64: u32 = 1;

/// Code and stack segment selectors the vCPU starts with: the ring-3 64-bit code and
/// data selectors of the Linux GDT, which PVM requires of ring-3 guest code (it runs on
/// the host's own user segments); any value works under hardware KVM.
pub const USER_CS: u16 = 0x33;
/// See [`USER_CS`].
pub const USER_DS: u16 = 0x2b;

/// What the monitor tells the guest at boot.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootInfo {
    /// [`MAGIC`].
    pub magic: u64,
    /// Bytes of guest memory, mapped from address 0.
    pub mem_size: u64,
    /// Guest-physical address and length of the command line.
    pub cmdline: u64,
    pub cmdline_len: u64,
    /// The TSC frequency in Hz (from KVM), for the guest's clock.
    pub tsc_hz: u64,
    /// The first network's MAC address (first 6 bytes), and how many networks there are
    /// (0 to [`NETS_MAX`]; `mac2` is the second's).
    pub mac: [u8; 8],
    pub net: u64,
    /// Guest-physical address of `modules_count` [`Module`] entries.
    pub modules: u64,
    pub modules_count: u64,
    /// End of what the monitor placed in guest memory above the image (modules): the
    /// heap may start here.
    pub used_end: u64,
    /// The second network's MAC address (first 6 bytes), when `net` = 2.
    pub mac2: [u8; 8],
}

/// One boot module (e.g. a long target list), as the PVH module list holds it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Module {
    pub addr: u64,
    pub len: u64,
}

/// Hypercall port numbers.
pub mod port {
    /// Write one console line ([`super::Puts`]).
    pub const PUTS: u16 = 0x500;
    /// Send one Ethernet frame ([`super::NetWrite`]).
    pub const NET_WRITE: u16 = 0x501;
    /// Receive the frames waiting, as many as fit ([`super::NetRead`]).
    pub const NET_READ: u16 = 0x502;
    /// Wait until a frame can be read or a timeout passes ([`super::Poll`]).
    pub const POLL: u16 = 0x503;
    /// End the VM with a status ([`super::Exit`]).
    pub const EXIT: u16 = 0x504;
}

/// [`port::PUTS`]: `len` bytes at `data` go to the monitor's standard output as they are.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Puts {
    pub data: u64,
    pub len: u64,
}

/// [`port::NET_WRITE`]: send the frame of `len` bytes at `data` on network `net` (0 or
/// 1, set by the guest). `ret` = 0 when it left, 1 when the monitor could not send it
/// (the guest may retry; always 1 on a network the monitor did not give).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct NetWrite {
    pub data: u64,
    pub len: u64,
    pub ret: u64,
    pub net: u64,
}

/// [`port::NET_READ`]: the monitor fills the `cap` bytes at `data` with the frames it has
/// (each as a 2-byte little-endian length, then the frame, then a pad byte if the length
/// is odd), stopping before one that would not fit; `len` = bytes written, `frames` = how
/// many, `more` = 1 if frames are still waiting. `net` (set by the guest: 0 or 1) names
/// the network read; one the monitor did not give has no frames.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct NetRead {
    pub data: u64,
    pub cap: u64,
    pub len: u64,
    pub frames: u64,
    pub more: u64,
    pub net: u64,
}

/// The largest frame the monitor passes (Ethernet header + 1500 bytes of payload).
pub const FRAME_MAX: usize = 1514;

/// [`port::POLL`]: return when a frame is waiting on any network or after `timeout_ns`;
/// `ready` has bit `i` set if a frame is waiting on network `i` (so 1 with one network).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Poll {
    pub timeout_ns: u64,
    pub ready: u64,
}

/// [`port::EXIT`]: the VM ends; the monitor exits with `status` (a [`crate::exit::Status`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Exit {
    pub status: u64,
}

/// The frame of a [`NetRead`] buffer (the `len` bytes the monitor wrote) that starts at
/// offset `at`: where its bytes are, and where the next frame starts; `None` at the end
/// or where the buffer is cut short.
pub fn frame_at(buf: &[u8], at: usize) -> Option<(core::ops::Range<usize>, usize)> {
    let hdr = buf.get(at..at.checked_add(2)?)?;
    let n = u16::from_le_bytes([hdr[0], hdr[1]]) as usize;
    let bytes = at + 2..at + 2 + n;
    buf.get(bytes.clone())?;
    Some((bytes, at + 2 + n + (n & 1)))
}

/// Walks a [`NetRead`] buffer: yields each frame in the `len` bytes the monitor wrote.
pub fn frames(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0usize;
    core::iter::from_fn(move || {
        let (bytes, next) = frame_at(buf, at)?;
        at = next;
        buf.get(bytes)
    })
}

/// Appends `frame` to a [`NetRead`] buffer at `at`; returns the new end, or `None` if it
/// does not fit (or is longer than [`FRAME_MAX`]).
pub fn put_frame(buf: &mut [u8], at: usize, frame: &[u8]) -> Option<usize> {
    if frame.len() > FRAME_MAX {
        return None;
    }
    let end = at + 2 + frame.len() + (frame.len() & 1);
    let dst = buf.get_mut(at..end)?;
    dst[..2].copy_from_slice(&(frame.len() as u16).to_le_bytes());
    dst[2..2 + frame.len()].copy_from_slice(frame);
    Some(end)
}

#[cfg(test)]
mod tests {

    use super::*;
    use std::vec::Vec;

    #[test]
    fn frames_round_trip_with_odd_lengths() {
        let mut buf = [0u8; 64];
        let a = [1u8, 2, 3];
        let b = [9u8; 10];
        let end = put_frame(&mut buf, 0, &a).unwrap();
        let end = put_frame(&mut buf, end, &b).unwrap();
        assert_eq!(end, 2 + 3 + 1 + 2 + 10);
        let got: Vec<&[u8]> = frames(&buf[..end]).collect();
        assert_eq!(got, [&a[..], &b[..]]);
        // One that does not fit is refused, not truncated.
        assert_eq!(put_frame(&mut buf, end, &[0u8; 60]), None);
    }

    #[test]
    fn truncated_buffers_end_the_walk() {
        let mut buf = [0u8; 16];
        let end = put_frame(&mut buf, 0, &[7u8; 8]).unwrap();
        assert_eq!(frames(&buf[..end - 1]).count(), 0);
        assert_eq!(frames(&[0xff, 0xff, 1]).count(), 0);
    }

    #[test]
    fn layout_is_what_both_sides_assume() {
        assert_eq!(core::mem::size_of::<BootInfo>(), 88);
        assert_eq!(core::mem::size_of::<NetWrite>(), 32);
        assert_eq!(core::mem::size_of::<NetRead>(), 48);
        const { assert!(CMDLINE + CMDLINE_MAX <= PAGE_TABLES) };
        const { assert!(PAGE_TABLES + (2 + (MEM_MAX >> 30)) * 4096 <= IMAGE_MIN) };
    }
}
