//! Where a VM's heap goes: the largest free RAM range the memory map offers above 1 MiB
//! and below 4 GiB (the identity-mapped part), minus the kernel image and everything the
//! loader handed us (start info, command line, modules). A 4 MiB guest leaves about
//! 2.5 MiB of heap; the kernel needs well under 1 MiB of it.

use super::bootinfo::{BootInfo, MemKind, Range};

/// Smallest heap we accept.
pub const MIN_HEAP: u64 = 256 * 1024;

extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

/// The physical range of the loaded kernel (image + bss + stack).
pub fn kernel_range() -> Range {
    // Only the addresses of the linker-defined symbols are taken (no read: safe).
    (
        core::ptr::addr_of!(__kernel_start) as u64,
        core::ptr::addr_of!(__kernel_end) as u64,
    )
}

/// Picks the heap range from the memory map; `None` if nothing of [`MIN_HEAP`] is free.
pub fn choose(info: &dyn BootInfo) -> Option<Range> {
    let mut blocked = [(0u64, 0u64); 24];
    let mut n = 0;
    blocked[n] = kernel_range();
    n += 1;
    let mut i = 0;
    while let Some(r) = info.reserved(i) {
        if n < blocked.len() && r.1 > r.0 {
            blocked[n] = r;
            n += 1;
        }
        i += 1;
    }
    let blocked = &mut blocked[..n];
    // Insertion sort by start (at most 24 entries; a library sort is KiBs of code).
    for j in 1..blocked.len() {
        let mut k = j;
        while k > 0 && blocked[k - 1].0 > blocked[k].0 {
            blocked.swap(k - 1, k);
            k -= 1;
        }
    }

    let mut best: Option<Range> = None;
    let mut i = 0;
    while let Some(m) = info.memory(i) {
        i += 1;
        if m.kind != MemKind::Ram {
            continue;
        }
        let start = m.start.max(0x10_0000);
        let end = m.start.saturating_add(m.len).min(1 << 32);
        // Walk the gaps between blocked ranges inside [start, end).
        let mut cur = start;
        for &(bs, be) in blocked.iter().chain(core::iter::once(&(end, end))) {
            let gap_end = bs.min(end);
            if gap_end > cur && best.is_none_or(|b| gap_end - cur > b.1 - b.0) {
                best = Some((cur, gap_end));
            }
            cur = cur.max(be);
            if cur >= end {
                break;
            }
        }
    }
    let (s, e) = best?;
    // Page-align both ends.
    let s = (s + 0xfff) & !0xfff;
    let e = e & !0xfff;
    (e > s && e - s >= MIN_HEAP).then_some((s, e))
}
