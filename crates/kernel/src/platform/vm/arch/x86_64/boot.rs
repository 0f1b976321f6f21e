//! The boot path, from the first instruction to Rust.
//!
//! A PVH loader (QEMU `-kernel` on microvm/q35/pc, Firecracker >= 1.12, Cloud Hypervisor)
//! finds the Xen ELF note below (type 18, `XEN_ELFNOTE_PHYS32_ENTRY`) and enters
//! `pvh_start32` in 32-bit protected mode with paging off and `ebx` holding the physical
//! address of `hvm_start_info`. The entry code:
//!
//! 1. reads the TSC (the very first instruction, for "time from first instruction"),
//! 2. maps the first 2 MiB (kernel, `.bss`, stack) with three early page-table entries,
//! 3. enables PAE + long mode + paging, loads a 64-bit GDT, far-returns into 64-bit code,
//! 4. zeroes the parts of `.bss` that must start zeroed (loaders need not): the final
//!    PML4 and PDPT and the statics, not the stack or the page directories, which are
//!    written whole: the first 4 GiB identity-mapped with 2 MiB pages (the top GiB,
//!    where MMIO lives, uncached); switches to them,
//! 5. sets up a stack and calls [`crate::platform::vm::rust_start`] with the start-info address.
//!
//! `vtnt-monitor` instead enters `hvt_start64`, named by a note of our own (see
//! `vtnt_abi::hvt`): 64-bit mode, privilege level 3, its page tables; the entry reads the TSC,
//! takes the boot stack and calls [`crate::platform::vm::rust_start_hvt`].
//!
//! Few instructions, because on some hosts each one is emulated: KVM on PVM (no VMX/SVM)
//! emulates the guest one instruction at a time, at 1-2 us each, until it can switch the
//! vCPU to PVM mode, and the PVM host measured here never switched our guest (see
//! `vtnt_unikernel::accel`). The former `.bss` zeroing byte by byte (94 KiB with `rep stosb`)
//! and the 2,048-entry fill in 32-bit mode took about 50 ms there.

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

    // The vTNT note (`vtnt_abi::hvt::NOTE_NAME`, type `NOTE_ENTRY64`): the 64-bit entry point
    // `vtnt-monitor` enters at privilege level 3.
    ".pushsection .note.vtnt, \"a\"",
    ".balign 4",
    ".long 5",
    ".long 8",
    ".long 1",
    ".asciz \"vTNT\"",
    ".balign 4",
    ".quad hvt_start64",
    ".popsection",

    // Page tables: the early ones (the first 2 MiB, for the switch to 64-bit mode) and
    // the final ones (one PML4, one PDPT, four page directories), then the stack; the
    // other statics follow it.
    ".pushsection .bss.pagetables, \"aw\", @nobits",
    ".balign 4096",
    "early_pml4: .skip 4096",
    "early_pdpt: .skip 4096",
    "early_pd: .skip 4096",
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
    // Early tables: the first 2 MiB only (kernel, .bss, stack). Both dwords of the three
    // entries used are written; the other entries are never walked.
    "mov dword ptr [early_pml4], offset early_pdpt + 3",
    "mov dword ptr [early_pml4 + 4], 0",
    "mov dword ptr [early_pdpt], offset early_pd + 3",
    "mov dword ptr [early_pdpt + 4], 0",
    "mov dword ptr [early_pd], 0x83",
    "mov dword ptr [early_pd + 4], 0",
    // Long mode: PAE, CR3, EFER.LME, then paging.
    "mov eax, cr4",
    "or eax, 0x20",
    "mov cr4, eax",
    "mov eax, offset early_pml4",
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
    "cld",
    // Zero what must start zeroed (loaders need not): the final PML4 and PDPT (only
    // their first entries are written below) and the statics after the stack. The page
    // directories are written whole, the stack needs no zeroing.
    "lea rdi, [rip + boot_pml4]",
    "mov ecx, 1024",
    "rep stosq",
    "lea rdi, [rip + boot_stack_top]",
    "lea rcx, [rip + __bss_end]",
    "sub rcx, rdi",
    "shr rcx, 3",
    "rep stosq",
    // PML4[0] -> PDPT, PDPT[0..4] -> four page directories of 2 MiB pages
    // identity-mapping 4 GiB, the fourth GiB (MMIO) uncached.
    "lea rax, [rip + boot_pdpt + 3]",
    "mov qword ptr [rip + boot_pml4], rax",
    "lea rax, [rip + boot_pd + 3]",
    "lea rdi, [rip + boot_pdpt]",
    "mov edx, 4096",
    "mov ecx, 4",
    "vtnt_fill_pdpt:",
    "stosq",
    "add rax, rdx",
    "loop vtnt_fill_pdpt",
    "lea rdi, [rip + boot_pd]",
    "mov eax, 0x83",
    "mov edx, 0x200000",
    "mov ecx, 1536",
    "vtnt_fill_pd:",
    "stosq",
    "add rax, rdx",
    "loop vtnt_fill_pd",
    "or eax, 0x18",
    "mov ecx, 512",
    "vtnt_fill_pd_uc:",
    "stosq",
    "add rax, rdx",
    "loop vtnt_fill_pd_uc",
    "lea rax, [rip + boot_pml4]",
    "mov cr3, rax",
    "mov dword ptr [rip + {boot_tsc}], esi",
    "mov dword ptr [rip + {boot_tsc} + 4], ebp",
    "lea rsp, [rip + boot_stack_top]",
    "mov edi, ebx",
    "call {rust_start}",
    "vtnt_halt:",
    "cli",
    "hlt",
    "jmp vtnt_halt",

    // `vtnt-monitor`'s entry: already in 64-bit mode at privilege level 3 on the
    // monitor's identity-mapped page tables, `.bss` zeroed, `rdi` = boot info. Only the
    // TSC and our own stack are left to set up.
    ".global hvt_start64",
    "hvt_start64:",
    "rdtsc",
    "mov dword ptr [rip + {boot_tsc}], eax",
    "mov dword ptr [rip + {boot_tsc} + 4], edx",
    "lea rsp, [rip + boot_stack_top]",
    "call {rust_start_hvt}",
    "ud2",
    ".popsection",

    stack_size = const STACK_SIZE,
    boot_tsc = sym BOOT_TSC,
    rust_start = sym crate::platform::vm::rust_start,
    rust_start_hvt = sym crate::platform::vm::rust_start_hvt,
);
