//! The global allocator: a linked-list heap over the largest free RAM range the memory
//! map offers above 1 MiB and below 4 GiB (the identity-mapped part), minus the kernel
//! image and everything the loader handed us (start info, command line, modules).
//!
//! A 4 MiB guest leaves about 2.5 MiB of heap; the kernel needs well under 1 MiB of it.

use crate::bootinfo::{BootInfo, MemKind, Range};
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use linked_list_allocator::LockedHeap;

/// The heap, with a high-water mark of the bytes in use.
struct Tracked {
    heap: LockedHeap,
    peak: AtomicUsize,
}

#[global_allocator]
static ALLOCATOR: Tracked = Tracked {
    heap: LockedHeap::empty(),
    peak: AtomicUsize::new(0),
};

// SAFETY: every call is forwarded unchanged to `LockedHeap`, a correct allocator; the
// wrapper only reads the used-byte count afterwards.
unsafe impl GlobalAlloc for Tracked {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        let p = unsafe { self.heap.alloc(layout) };
        let used = self.heap.lock().used();
        self.peak.fetch_max(used, Ordering::Relaxed);
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`: `ptr` and `layout` come from a matching `alloc`.
        unsafe { self.heap.dealloc(ptr, layout) }
    }
}

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

/// Hands `range` to the global allocator. Call once.
///
/// # Safety
/// `range` must be identity-mapped RAM used by nothing else for the kernel's lifetime.
pub unsafe fn init(range: Range) {
    // SAFETY: the caller guarantees the range is free RAM, mapped, and exclusively ours.
    unsafe {
        ALLOCATOR
            .heap
            .lock()
            .init(range.0 as *mut u8, (range.1 - range.0) as usize)
    };
}

/// Bytes of heap in use and free.
pub fn usage() -> (usize, usize) {
    let h = ALLOCATOR.heap.lock();
    (h.used(), h.free())
}

/// The most heap bytes ever in use at once.
pub fn peak() -> usize {
    ALLOCATOR.peak.load(Ordering::Relaxed)
}
