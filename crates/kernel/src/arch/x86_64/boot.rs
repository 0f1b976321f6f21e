//! The boot path, from the first instruction to Rust.
//!
//! A PVH loader (QEMU `-kernel` on microvm/q35/pc, Firecracker >= 1.12, Cloud Hypervisor)
//! finds the Xen ELF note below (type 18, `XEN_ELFNOTE_PHYS32_ENTRY`) and enters
//! `pvh_start32` in 32-bit protected mode with paging off and `ebx` holding the physical
//! address of `hvm_start_info`. The entry code:
//!
//! 1. reads the TSC (the very first instruction, for "time from first instruction"),
//! 2. zeroes `.bss` (loaders need not),
//! 3. identity-maps the first 4 GiB with 2 MiB pages (the top GiB, where MMIO lives,
//!    uncached),
//! 4. enables PAE + long mode + paging, loads a 64-bit GDT, far-returns into 64-bit code,
//! 5. sets up a stack and calls [`crate::rust_start`] with the start-info address.

use core::sync::atomic::{AtomicU64, Ordering};

/// The TSC value read by the first instruction of the kernel (written by the boot code).
#[no_mangle]
static BOOT_TSC: AtomicU64 = AtomicU64::new(0);

/// Size of the boot (and only) stack.
pub const STACK_SIZE: usize = 64 * 1024;

/// The TSC at the first instruction the kernel executed.
pub fn boot_tsc() -> u64 {
    BOOT_TSC.load(Ordering::Relaxed)
}

core::arch::global_asm!(
    // The PVH note: name "Xen", type 18, descriptor = 32-bit physical entry point.
    ".pushsection .note.pvh, \"a\"",
    ".balign 4",
    ".long 4",
    ".long 4",
    ".long 18",
    ".asciz \"Xen\"",
    ".balign 4",
    ".long pvh_start32",
    ".popsection",

    // Page tables (one PML4, one PDPT, four page directories) and the stack.
    ".pushsection .bss.pagetables, \"aw\", @nobits",
    ".balign 4096",
    "boot_pml4: .skip 4096",
    "boot_pdpt: .skip 4096",
    "boot_pd: .skip 4096 * 4",
    ".balign 16",
    "boot_stack: .skip {stack_size}",
    "boot_stack_top:",
    ".popsection",

    // A flat 64-bit GDT: null, code (0x08), data (0x10).
    ".pushsection .rodata.gdt64, \"a\"",
    ".balign 16",
    "gdt64:",
    ".quad 0",
    ".quad 0x00AF9A000000FFFF",
    ".quad 0x00CF92000000FFFF",
    "gdt64_end:",
    ".balign 4",
    ".word 0",
    "gdt64_ptr:",
    ".word gdt64_end - gdt64 - 1",
    ".quad gdt64",
    ".popsection",

    ".pushsection .text.boot, \"ax\"",
    ".code32",
    ".global pvh_start32",
    "pvh_start32:",
    "rdtsc",
    "mov esi, eax",
    "mov ebp, edx",
    "cld",
    // Zero .bss (page tables, stack, statics). ebx (start info), esi/ebp (TSC) survive.
    "mov edi, offset __bss_start",
    "mov ecx, offset __bss_end",
    "sub ecx, edi",
    "xor eax, eax",
    "rep stosb",
    "mov dword ptr [{boot_tsc}], esi",
    "mov dword ptr [{boot_tsc} + 4], ebp",
    // PML4[0] -> PDPT; PDPT[0..4] -> the four page directories.
    "mov eax, offset boot_pdpt",
    "or eax, 3",
    "mov dword ptr [boot_pml4], eax",
    "mov eax, offset boot_pd",
    "or eax, 3",
    "mov dword ptr [boot_pdpt], eax",
    "add eax, 4096",
    "mov dword ptr [boot_pdpt + 8], eax",
    "add eax, 4096",
    "mov dword ptr [boot_pdpt + 16], eax",
    "add eax, 4096",
    "mov dword ptr [boot_pdpt + 24], eax",
    // 2048 2-MiB pages: present | writable | huge.
    "mov edi, offset boot_pd",
    "mov eax, 0x83",
    "mov ecx, 2048",
    "vtnt_fill_pd:",
    "mov dword ptr [edi], eax",
    "add eax, 0x200000",
    "add edi, 8",
    "dec ecx",
    "jnz vtnt_fill_pd",
    // The fourth GiB holds MMIO (virtio-mmio, PCI BARs, LAPIC): cache-disable it.
    "mov edi, offset boot_pd + 1536 * 8",
    "mov ecx, 512",
    "vtnt_uc_pd:",
    "or dword ptr [edi], 0x18",
    "add edi, 8",
    "dec ecx",
    "jnz vtnt_uc_pd",
    // Long mode: PAE, CR3, EFER.LME, then paging.
    "mov eax, cr4",
    "or eax, 0x20",
    "mov cr4, eax",
    "mov eax, offset boot_pml4",
    "mov cr3, eax",
    "mov ecx, 0xC0000080",
    "rdmsr",
    "or eax, 0x100",
    "wrmsr",
    "lgdt [gdt64_ptr]",
    "mov eax, cr0",
    "or eax, 0x80000001",
    "mov cr0, eax",
    "mov esp, offset boot_stack_top",
    "mov eax, 0x08",
    "push eax",
    "mov eax, offset vtnt_long_entry",
    "push eax",
    "retf",

    ".code64",
    "vtnt_long_entry:",
    "mov ax, 0x10",
    "mov ds, ax",
    "mov es, ax",
    "mov ss, ax",
    "xor eax, eax",
    "mov fs, ax",
    "mov gs, ax",
    "mov rsp, offset boot_stack_top",
    "mov edi, ebx",
    "call {rust_start}",
    "vtnt_halt:",
    "cli",
    "hlt",
    "jmp vtnt_halt",
    ".popsection",

    stack_size = const STACK_SIZE,
    boot_tsc = sym BOOT_TSC,
    rust_start = sym crate::rust_start,
);
