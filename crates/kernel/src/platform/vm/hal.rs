//! The `virtio_drivers::Hal` for this kernel: DMA memory comes from the global heap
//! (page-aligned, zeroed); all memory is identity-mapped, so physical == virtual and
//! sharing a buffer with the device is just taking its address.

use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use core::ptr::NonNull;
use virtio_drivers::{BufferDirection, Hal, PhysAddr, PAGE_SIZE};

/// The kernel's virtio HAL (identity-mapped, heap-backed DMA).
pub struct KernelHal;

fn layout(pages: usize) -> Option<Layout> {
    Layout::from_size_align(pages.checked_mul(PAGE_SIZE)?, PAGE_SIZE).ok()
}

// SAFETY: DMA regions are fresh, zeroed, page-aligned heap allocations that nothing else
// uses until `dma_dealloc`; physical == virtual addresses (identity map), so the
// addresses we return are what the device must use; MMIO regions are identity-mapped
// (the boot page tables cover the first 4 GiB, where all our devices live).
unsafe impl Hal for KernelHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let Some(layout) = layout(pages) else {
            return (0, NonNull::dangling());
        };
        let ptr = if layout.size() == 0 {
            // A zero-page request gives a zero-size layout, which we refuse.
            core::ptr::null_mut()
        } else {
            // SAFETY: `layout` has a non-zero size (checked just above).
            unsafe { alloc_zeroed(layout) }
        };
        match NonNull::new(ptr) {
            Some(p) => (p.as_ptr() as PhysAddr, p),
            None => (0, NonNull::dangling()),
        }
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, vaddr: NonNull<u8>, pages: usize) -> i32 {
        let Some(layout) = layout(pages) else {
            return -1;
        };
        // SAFETY: the driver passes back exactly what `dma_alloc` returned for `pages`.
        unsafe { dealloc(vaddr.as_ptr(), layout) };
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        NonNull::new(paddr as *mut u8).expect("MMIO region at physical address 0")
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        buffer.as_ptr() as *mut u8 as PhysAddr
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}
