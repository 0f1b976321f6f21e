//! The ELF check every artifact passes before anything runs it: a 64-bit little-endian
//! x86_64 executable (`ET_EXEC`, or `ET_DYN` for a static PIE) without a program
//! interpreter (every artifact is static), whose program headers and segments lie inside
//! the file. It reads only headers; it does not vouch for the code (the manifest's SHA-256
//! does), it tells a truncated or foreign file from ours with a reason a person can act on.

/// Why a file is not a static x86_64 ELF executable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    #[error("not an ELF file")]
    NotElf,
    #[error("a 32-bit ELF file, not a 64-bit one")]
    Not64Bit,
    #[error("a big-endian ELF file")]
    BigEndian,
    #[error("built for {0}, not x86_64")]
    Machine(String),
    #[error("not an executable (ELF type {0})")]
    NotExecutable(u16),
    #[error("not static: it asks for a program interpreter (PT_INTERP)")]
    Dynamic,
    #[error("truncated: {what} at byte {end}, past the file's {len}")]
    Truncated { what: String, end: u64, len: usize },
}

const EM_X86_64: u16 = 62;
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;

/// The name of an ELF machine number (the common ones; else the number).
fn machine_name(m: u16) -> String {
    match m {
        3 => "i386".into(),
        8 => "MIPS".into(),
        20 => "PowerPC".into(),
        21 => "PowerPC64".into(),
        22 => "s390".into(),
        40 => "ARM".into(),
        183 => "aarch64".into(),
        243 => "RISC-V".into(),
        258 => "LoongArch".into(),
        n => format!("machine {n}"),
    }
}

/// Checks `b`, a whole file (see the module docs).
pub fn check(b: &[u8]) -> Result<(), ElfError> {
    if b.len() < 4 || &b[..4] != b"\x7fELF" {
        return Err(ElfError::NotElf);
    }
    let truncated = |what: &str, end: u64| ElfError::Truncated {
        what: what.into(),
        end,
        len: b.len(),
    };
    if b.len() < 64 {
        return Err(truncated("its ELF header ends", 64));
    }
    if b[4] != 2 {
        return Err(ElfError::Not64Bit);
    }
    if b[5] != 1 {
        return Err(ElfError::BigEndian);
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let machine = u16_at(18);
    if machine != EM_X86_64 {
        return Err(ElfError::Machine(machine_name(machine)));
    }
    let kind = u16_at(16);
    if kind != 2 && kind != 3 {
        return Err(ElfError::NotExecutable(kind));
    }
    let phoff = u64_at(b, 32);
    let (phentsize, phnum) = (u64::from(u16_at(54)), u64::from(u16_at(56)));
    let table_end = phoff.saturating_add(phentsize.saturating_mul(phnum));
    if table_end > b.len() as u64 || (phnum > 0 && phentsize < 56) {
        return Err(truncated("its program headers end", table_end));
    }
    for i in 0..phnum {
        let o = (phoff + i * phentsize) as usize;
        let kind = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if kind == PT_INTERP {
            return Err(ElfError::Dynamic);
        }
        let end = u64_at(b, o + 8).saturating_add(u64_at(b, o + 32));
        if kind == PT_LOAD && end > b.len() as u64 {
            return Err(truncated(&format!("segment {i}'s bytes end"), end));
        }
    }
    Ok(())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal static x86_64 executable: header, one PT_LOAD over the whole file.
    pub(crate) fn tiny(machine: u16, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len.max(120)];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[16..18].copy_from_slice(&2u16.to_le_bytes());
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&PT_LOAD.to_le_bytes());
        b[96..104].copy_from_slice(&(len.max(120) as u64).to_le_bytes());
        b
    }

    #[test]
    fn ours_passes_and_every_foreign_kind_is_named() {
        assert_eq!(check(&tiny(EM_X86_64, 4096)), Ok(()));
        assert_eq!(
            check(&tiny(183, 4096)).unwrap_err().to_string(),
            "built for aarch64, not x86_64"
        );
        assert_eq!(check(b"#!/bin/sh\n"), Err(ElfError::NotElf));
        let mut dynamic = tiny(EM_X86_64, 4096);
        dynamic[64..68].copy_from_slice(&PT_INTERP.to_le_bytes());
        assert_eq!(check(&dynamic), Err(ElfError::Dynamic));
        let mut thirty_two = tiny(EM_X86_64, 4096);
        thirty_two[4] = 1;
        assert_eq!(check(&thirty_two), Err(ElfError::Not64Bit));
    }

    #[test]
    fn a_truncated_file_says_where_it_ends() {
        let whole = tiny(EM_X86_64, 4096);
        assert_eq!(
            check(&whole[..2000]).unwrap_err().to_string(),
            "truncated: segment 0's bytes end at byte 4096, past the file's 2000"
        );
        assert_eq!(
            check(&whole[..100]).unwrap_err().to_string(),
            "truncated: its program headers end at byte 120, past the file's 100"
        );
        assert_eq!(
            check(&whole[..10]).unwrap_err().to_string(),
            "truncated: its ELF header ends at byte 64, past the file's 10"
        );
    }
}
