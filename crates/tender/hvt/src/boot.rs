//! What the monitor lays out in guest memory before the guest's first instruction, at the
//! addresses `vtnt_abi::hvt` fixes: the page tables identity-mapping all of guest memory with
//! 2 MiB user pages, and where boot modules and their table go above the image.

use vtnt_abi::hvt::{Module, PAGE_TABLES};

use crate::memory::GuestMemory;

/// Page-table entry bits: present, writable, user (ring 3 runs the guest), and 2 MiB page.
const P: u64 = 1;
const RW: u64 = 1 << 1;
const US: u64 = 1 << 2;
const PS: u64 = 1 << 7;
const PAGE: u64 = 4096;
const GIB: u64 = 1 << 30;
const HUGE: u64 = 2 << 20;

/// `n` rounded up to a multiple of `to` (a power of two), or `None` on overflow.
pub(crate) fn align_up(n: u64, to: u64) -> Option<u64> {
    Some(n.checked_add(to - 1)? & !(to - 1))
}

/// Writes the PML4 at [`PAGE_TABLES`], the PDPT in the next page, and one page directory
/// per GiB after that, mapping every 2 MiB page of guest memory (whose size is a multiple
/// of 2 MiB) at its own address. Returns the PML4's address (for CR3).
pub(crate) fn write_page_tables(mem: &mut GuestMemory) -> Option<u64> {
    let pml4 = PAGE_TABLES;
    let pdpt = pml4 + PAGE;
    let size = mem.size();
    mem.write_obj(pml4, &(pdpt | P | RW | US))?;
    for gib in 0..size.div_ceil(GIB) {
        let pd = pdpt + PAGE + gib * PAGE;
        mem.write_obj(pdpt + gib * 8, &(pd | P | RW | US))?;
        let pages = ((size - gib * GIB) / HUGE).min(512);
        for i in 0..pages {
            mem.write_obj(pd + i * 8, &((gib * GIB + i * HUGE) | P | RW | US | PS))?;
        }
    }
    Some(pml4)
}

/// Where boot modules go: each page-aligned, in order, above the image; then their
/// [`Module`] table; `used_end` is the first free page after all of it (the image's end,
/// page-aligned, when there are no modules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The guest-physical address of each module.
    pub addrs: Vec<u64>,
    /// The address of the table (0 without modules).
    pub table: u64,
    pub used_end: u64,
}

/// Places modules of `lens` bytes above `image_end` in `mem_size` bytes of memory.
pub(crate) fn place_modules(image_end: u64, lens: &[u64], mem_size: u64) -> Option<Placement> {
    let mut at = align_up(image_end, PAGE)?;
    let mut addrs = Vec::with_capacity(lens.len());
    for &len in lens {
        addrs.push(at);
        at = align_up(at.checked_add(len)?, PAGE)?;
    }
    let table = if lens.is_empty() { 0 } else { at };
    let table_len = (lens.len() * size_of::<Module>()) as u64;
    let used_end = align_up(at.checked_add(table_len)?, PAGE)?;
    (used_end <= mem_size).then_some(Placement {
        addrs,
        table,
        used_end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tables_map_all_memory_with_user_pages() {
        let mut m = GuestMemory::new(6 << 20).unwrap();
        assert_eq!(write_page_tables(&mut m), Some(0x4000));
        assert_eq!(m.read_obj::<u64>(0x4000), Some(0x5007));
        assert_eq!(m.read_obj::<u64>(0x5000), Some(0x6007));
        assert_eq!(m.read_obj::<u64>(0x5008), Some(0));
        assert_eq!(m.read_obj::<u64>(0x6000), Some(0x87));
        assert_eq!(m.read_obj::<u64>(0x6010), Some(0x40_0087));
        assert_eq!(m.read_obj::<u64>(0x6018), Some(0));
    }

    #[test]
    fn page_tables_cover_several_gib() {
        // 1 GiB + 2 MiB: a second page directory with one entry. (MAP_NORESERVE: only the
        // page-table pages are touched.)
        let mut m = GuestMemory::new((1 << 30) + (2 << 20)).unwrap();
        write_page_tables(&mut m).unwrap();
        assert_eq!(m.read_obj::<u64>(0x5008), Some(0x7007));
        assert_eq!(m.read_obj::<u64>(0x6000 + 511 * 8), Some(0x3fe0_0087));
        assert_eq!(m.read_obj::<u64>(0x7000), Some(0x4000_0087));
        assert_eq!(m.read_obj::<u64>(0x7008), Some(0));
    }

    #[test]
    fn modules_are_page_aligned_above_the_image() {
        let p = place_modules(0x10_1234, &[10, 0x1000, 0], 16 << 20).unwrap();
        assert_eq!(p.addrs, [0x10_2000, 0x10_3000, 0x10_4000]);
        assert_eq!(p.table, 0x10_4000);
        assert_eq!(p.used_end, 0x10_5000);
        let none = place_modules(0x10_1234, &[], 16 << 20).unwrap();
        assert_eq!((none.table, none.used_end), (0, 0x10_2000));
        assert_eq!(place_modules(0x10_0000, &[2 << 20], 2 << 20), None);
        assert_eq!(place_modules(0x10_0000, &[u64::MAX], 2 << 20), None);
    }
}
