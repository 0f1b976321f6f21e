//! The global allocator: a linked-list heap over the memory the platform hands it (a
//! VM's free RAM, a process's static arena), with a high-water mark of the bytes in use.

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

/// Hands `len` bytes at `start` to the global allocator. Call once.
///
/// # Safety
/// The bytes must be mapped, writable memory used by nothing else for the kernel's
/// lifetime.
pub unsafe fn init(start: *mut u8, len: u64) {
    // SAFETY: the caller guarantees the range is mapped, writable and exclusively ours.
    unsafe { ALLOCATOR.heap.lock().init(start, len as usize) };
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
