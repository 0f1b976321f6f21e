//! Tiny guests for the monitor's tests, built in the test: a hand-written ELF64 file
//! (header, one `PT_LOAD` at 0x100000, a `PT_NOTE` with the vTNT entry note) around a few
//! hand-assembled ring-3 instructions, so the tests need no cross toolchain and say
//! exactly what the guest does.
#![allow(dead_code)]

use std::path::PathBuf;

use vtnt_abi::hvt::{port, NOTE_ENTRY64, NOTE_NAME};

/// Where the image loads, and where in the file (= at that offset from it) the code and
/// the data start.
pub const LOAD: u64 = 0x10_0000;
const CODE_OFF: usize = 0x100;
const DATA_OFF: usize = 0x800;
/// Zeroed memory after the file's bytes, for buffers.
const BSS: u64 = 0x1_0000;

/// A guest under construction: code from [`LOAD`] + 0x100 (the entry), data from
/// [`LOAD`] + 0x800, zeroed scratch memory after the data.
pub struct Guest {
    code: Vec<u8>,
    data: Vec<u8>,
    bss: u64,
}

impl Default for Guest {
    fn default() -> Self {
        Self::new()
    }
}

impl Guest {
    pub fn new() -> Guest {
        Guest {
            code: Vec::new(),
            data: Vec::new(),
            bss: 0,
        }
    }

    /// The entry point.
    pub fn entry() -> u64 {
        LOAD + CODE_OFF as u64
    }

    /// The address of the next instruction.
    pub fn here(&self) -> u64 {
        Self::entry() + self.code.len() as u64
    }

    /// Appends `bytes` to the data (8-aligned); returns their address.
    pub fn data(&mut self, bytes: &[u8]) -> u64 {
        while self.data.len() & 7 != 0 {
            self.data.push(0);
        }
        let at = LOAD + (DATA_OFF + self.data.len()) as u64;
        self.data.extend_from_slice(bytes);
        at
    }

    /// Appends 64-bit words (a hypercall's argument structure); returns their address.
    pub fn words(&mut self, words: &[u64]) -> u64 {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.data(&bytes)
    }

    /// `len` bytes of zeroed scratch memory (after the file's bytes); returns the address.
    /// Call after all `data`.
    pub fn scratch(&mut self, len: u64) -> u64 {
        let file_end = LOAD + (DATA_OFF + self.data.len()) as u64;
        let at = file_end.next_multiple_of(16) + self.bss;
        self.bss += len.next_multiple_of(16);
        assert!(self.bss <= BSS - 16, "scratch memory exhausted");
        at
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.code.extend_from_slice(bytes);
        assert!(self.code.len() <= DATA_OFF - CODE_OFF, "code too long");
        self
    }

    /// `mov edx, port; mov eax, arg; out dx, eax`.
    pub fn call(&mut self, port: u16, arg: u64) -> &mut Self {
        let mut b = vec![0xba];
        b.extend_from_slice(&u32::from(port).to_le_bytes());
        b.push(0xb8);
        b.extend_from_slice(&u32::try_from(arg).unwrap().to_le_bytes());
        b.push(0xef);
        self.raw(&b)
    }

    /// PUTS of `text` (kept in the data).
    pub fn puts(&mut self, text: &[u8]) -> &mut Self {
        let s = self.data(text);
        let args = self.words(&[s, text.len() as u64]);
        self.call(port::PUTS, args)
    }

    /// EXIT with `status`.
    pub fn exit(&mut self, status: u64) -> &mut Self {
        let args = self.words(&[status]);
        self.call(port::EXIT, args)
    }

    /// An instruction with a 32-bit absolute memory operand: `prefix`, the address.
    fn abs(&mut self, prefix: &[u8], addr: u64, tail: &[u8]) -> &mut Self {
        let mut b = prefix.to_vec();
        b.extend_from_slice(&u32::try_from(addr).unwrap().to_le_bytes());
        b.extend_from_slice(tail);
        self.raw(&b)
    }

    /// `mov rax, [addr]`.
    pub fn load_rax(&mut self, addr: u64) -> &mut Self {
        self.abs(&[0x48, 0x8b, 0x04, 0x25], addr, &[])
    }

    /// `mov [addr], rax`.
    pub fn store_rax(&mut self, addr: u64) -> &mut Self {
        self.abs(&[0x48, 0x89, 0x04, 0x25], addr, &[])
    }

    /// `mov [addr], rdi`.
    pub fn store_rdi(&mut self, addr: u64) -> &mut Self {
        self.abs(&[0x48, 0x89, 0x3c, 0x25], addr, &[])
    }

    /// `mov [addr], rsp`.
    pub fn store_rsp(&mut self, addr: u64) -> &mut Self {
        self.abs(&[0x48, 0x89, 0x24, 0x25], addr, &[])
    }

    /// `mov rax, [rax]`.
    pub fn deref_rax(&mut self) -> &mut Self {
        self.raw(&[0x48, 0x8b, 0x00])
    }

    /// `add [addr], rax`.
    pub fn add_rax_to(&mut self, addr: u64) -> &mut Self {
        self.abs(&[0x48, 0x01, 0x04, 0x25], addr, &[])
    }

    /// `sub rax, imm32`.
    pub fn sub_rax(&mut self, imm: u32) -> &mut Self {
        let mut b = vec![0x48, 0x2d];
        b.extend_from_slice(&imm.to_le_bytes());
        self.raw(&b)
    }

    /// `cmp qword [addr], imm8`.
    pub fn cmp_imm8(&mut self, addr: u64, imm: i8) -> &mut Self {
        self.abs(&[0x48, 0x83, 0x3c, 0x25], addr, &[imm as u8])
    }

    /// `jb target` (unsigned below), with a 32-bit displacement.
    pub fn jb(&mut self, target: u64) -> &mut Self {
        let next = self.here() + 6;
        let rel = (target as i64 - next as i64) as i32;
        let mut b = vec![0x0f, 0x82];
        b.extend_from_slice(&rel.to_le_bytes());
        self.raw(&b)
    }

    /// `jmp $`: spin forever.
    pub fn spin(&mut self) -> &mut Self {
        self.raw(&[0xeb, 0xfe])
    }

    /// `hlt`.
    pub fn hlt(&mut self) -> &mut Self {
        self.raw(&[0xf4])
    }

    /// The ELF image.
    pub fn elf(&self) -> Vec<u8> {
        let mut f = vec![0u8; DATA_OFF];
        f.extend_from_slice(&self.data);
        f[CODE_OFF..CODE_OFF + self.code.len()].copy_from_slice(&self.code);
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // 64-bit
        f[5] = 1; // little-endian
        f[6] = 1; // version
        f[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        f[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[24..32].copy_from_slice(&Self::entry().to_le_bytes()); // e_entry (unused)
        f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        f[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        f[56..58].copy_from_slice(&2u16.to_le_bytes()); // e_phnum
        let len = f.len() as u64;
        let ph = |f: &mut Vec<u8>, at: usize, t: u32, off: u64, addr: u64, fs: u64, ms: u64| {
            f[at..at + 4].copy_from_slice(&t.to_le_bytes());
            f[at + 4..at + 8].copy_from_slice(&7u32.to_le_bytes()); // RWX
            f[at + 8..at + 16].copy_from_slice(&off.to_le_bytes());
            f[at + 16..at + 24].copy_from_slice(&addr.to_le_bytes());
            f[at + 24..at + 32].copy_from_slice(&addr.to_le_bytes());
            f[at + 32..at + 40].copy_from_slice(&fs.to_le_bytes());
            f[at + 40..at + 48].copy_from_slice(&ms.to_le_bytes());
            f[at + 48..at + 56].copy_from_slice(&4u64.to_le_bytes());
        };
        ph(&mut f, 64, 1, 0, LOAD, len, len + BSS); // PT_LOAD
        ph(&mut f, 120, 4, 0xb0, LOAD + 0xb0, 28, 28); // PT_NOTE
        f[0xb0..0xb4].copy_from_slice(&(NOTE_NAME.len() as u32).to_le_bytes());
        f[0xb4..0xb8].copy_from_slice(&8u32.to_le_bytes());
        f[0xb8..0xbc].copy_from_slice(&NOTE_ENTRY64.to_le_bytes());
        f[0xbc..0xbc + NOTE_NAME.len()].copy_from_slice(NOTE_NAME);
        f[0xc4..0xcc].copy_from_slice(&Self::entry().to_le_bytes());
        f
    }

    /// Writes the image to a file named after `name` in the tests' scratch directory.
    pub fn write(&self, name: &str) -> PathBuf {
        write_file(name, &self.elf())
    }
}

/// Writes `bytes` to `name` in the tests' scratch directory.
pub fn write_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("vtnt-monitor-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The monitor binary.
pub fn monitor() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_vtnt-monitor"))
}
