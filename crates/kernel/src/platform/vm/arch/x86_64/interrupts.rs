//! The minimal interrupt setup that lets the kernel idle with `hlt`.
//!
//! The kernel runs with interrupts disabled (`IF` = 0) everywhere except inside
//! [`halt`] (`sti; hlt; cli`), so no handler ever interrupts kernel code and nothing
//! needs a lock. The IDT holds:
//!
//! - vectors 0..=31 (CPU exceptions): stubs that report the exception (vector, `rip`,
//!   error code, `cr2` for page faults) and power off with `Status::Panic`;
//! - [`TIMER_VECTOR`]: the local APIC timer, whose handler only signals end-of-interrupt
//!   (its job is to end `hlt`);
//! - 0x20..=0x2f (the legacy PICs, remapped there and fully masked) and
//!   [`SPURIOUS_VECTOR`]: ignored (`iretq`, no EOI, as spurious interrupts require);
//! - every other vector not present: an unexpected interrupt raises #NP, reported as an
//!   exception.

use super::io::outb;
use core::arch::{asm, global_asm};

/// The local APIC timer's vector.
pub const TIMER_VECTOR: u8 = 0x40;
/// The local APIC's spurious-interrupt vector.
pub const SPURIOUS_VECTOR: u8 = 0xff;
/// Where the two 8259 PICs deliver (remapped away from the exception vectors).
const PIC_BASE: u8 = 0x20;

/// One 64-bit IDT gate (two quadwords).
#[repr(C, align(16))]
struct Idt([[u64; 2]; 256]);

/// The IDT. Written once by [`init`] (interrupts disabled, single core), then only read
/// by the CPU.
static mut IDT: Idt = Idt([[0; 2]; 256]);

/// The local APIC's MMIO base for the timer handler's EOI, or 0 in x2APIC mode (EOI by
/// MSR). Set by `apic::init` before interrupts are ever enabled.
#[no_mangle]
pub static mut VTNT_APIC_EOI_MMIO: u64 = 0;

extern "C" {
    /// The 32 exception stubs' addresses (below).
    static vtnt_exc_table: [u64; 32];
    fn vtnt_timer_isr();
    fn vtnt_ignore_isr();
}

global_asm!(
    ".pushsection .text.vtnt_isr, \"ax\"",
    // Exception stubs: push the vector, then the common path. The CPU already pushed
    // (ss, rsp, rflags, cs, rip) and, for some vectors, an error code.
    ".macro vtnt_exc n",
    "vtnt_exc_\\n:",
    "push \\n",
    "jmp vtnt_exc_common",
    ".endm",
    ".irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31",
    "vtnt_exc \\n",
    ".endr",
    "vtnt_exc_common:",
    "mov rdi, [rsp]",
    "lea rsi, [rsp + 8]",
    "and rsp, -16",
    "call {exception}",
    "ud2",
    // The timer: EOI (MMIO or x2APIC MSR), nothing else; `hlt` has ended.
    "vtnt_timer_isr:",
    "push rax",
    "push rcx",
    "push rdx",
    "mov rax, qword ptr [rip + VTNT_APIC_EOI_MMIO]",
    "test rax, rax",
    "jz 1f",
    "mov dword ptr [rax + 0xb0], 0",
    "jmp 2f",
    "1:",
    "mov ecx, 0x80b",
    "xor eax, eax",
    "xor edx, edx",
    "wrmsr",
    "2:",
    "pop rdx",
    "pop rcx",
    "pop rax",
    "iretq",
    // Spurious and (masked) legacy PIC interrupts: ignore.
    "vtnt_ignore_isr:",
    "iretq",
    ".popsection",
    ".pushsection .rodata.vtnt_exc_table, \"a\"",
    ".balign 8",
    "vtnt_exc_table:",
    ".irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31",
    ".quad vtnt_exc_\\n",
    ".endr",
    ".popsection",
    exception = sym exception,
);

/// An interrupt gate (type 0xE, DPL 0, present) to `handler` in the kernel code segment.
fn gate(handler: u64) -> [u64; 2] {
    let low = (handler & 0xffff) | (0x08 << 16) | (0x8e << 40) | ((handler >> 16) & 0xffff) << 48;
    [low, handler >> 32]
}

/// Fills and loads the IDT and remaps and masks the legacy PICs. Interrupts stay
/// disabled.
pub fn init() {
    let idt = &raw mut IDT;
    // SAFETY: single core with interrupts disabled, and the IDT is not loaded yet (or
    // only loaded with the same contents): nothing else reads or writes it now. The
    // stubs' table is emitted above and never written.
    unsafe {
        for (v, &stub) in vtnt_exc_table.iter().enumerate() {
            (*idt).0[v] = gate(stub);
        }
        for v in PIC_BASE..PIC_BASE + 16 {
            (*idt).0[v as usize] = gate(vtnt_ignore_isr as *const () as u64);
        }
        (*idt).0[SPURIOUS_VECTOR as usize] = gate(vtnt_ignore_isr as *const () as u64);
        (*idt).0[TIMER_VECTOR as usize] = gate(vtnt_timer_isr as *const () as u64);
    }
    #[repr(C, packed)]
    struct Idtr {
        limit: u16,
        base: u64,
    }
    let idtr = Idtr {
        limit: (core::mem::size_of::<Idt>() - 1) as u16,
        base: idt as u64,
    };
    // SAFETY: the IDT is a static, filled above with gates to handlers that exist; it
    // stays valid for the kernel's lifetime.
    unsafe { asm!("lidt [{}]", in(reg) &idtr, options(readonly, nostack, preserves_flags)) };
    // SAFETY: ports 0x20/0x21 and 0xa0/0xa1 are the 8259 PICs (ignored when absent).
    // ICW1..4 remap them to PIC_BASE..PIC_BASE+16 (so a stray IRQ can never look like a
    // CPU exception), then OCW1 masks every line: the kernel uses the local APIC only.
    unsafe {
        outb(0x20, 0x11);
        outb(0xa0, 0x11);
        outb(0x21, PIC_BASE);
        outb(0xa1, PIC_BASE + 8);
        outb(0x21, 4);
        outb(0xa1, 2);
        outb(0x21, 1);
        outb(0xa1, 1);
        outb(0x21, 0xff);
        outb(0xa1, 0xff);
    }
}

/// Enables interrupts, halts until one arrives, disables them again. `sti` delays
/// interrupt delivery until after the next instruction, so an interrupt that is already
/// pending (or becomes so) still ends this `hlt`: no wake-up can be lost between the
/// caller's last check and the halt.
pub fn halt() {
    // SAFETY: every vector that can fire is handled (IDT above); handlers preserve all
    // registers and return with `iretq`. The caller's state is untouched.
    unsafe { asm!("sti", "hlt", "cli", options(nomem, nostack)) };
}

/// Whether exception `vector` pushes an error code.
fn has_error_code(vector: u64) -> bool {
    matches!(vector, 8 | 10..=14 | 17 | 21 | 29 | 30)
}

/// The common exception path: report and power off.
extern "C" fn exception(vector: u64, frame: *const u64) -> ! {
    let ec = has_error_code(vector);
    // SAFETY: `frame` points at what the CPU pushed on this stack: [error code,] rip.
    let (code, rip) = unsafe {
        if ec {
            (*frame, *frame.add(1))
        } else {
            (0, *frame)
        }
    };
    let cr2: u64;
    // SAFETY: reading cr2 has no side effect (CPL 0).
    unsafe { asm!("mov {}, cr2", out(reg) cr2, options(nomem, nostack, preserves_flags)) };
    crate::fail!(
        vtnt_abi::exit::Status::Panic,
        "CPU exception {vector} at rip {rip:#x} (error code {code:#x}, cr2 {cr2:#x})"
    )
}
