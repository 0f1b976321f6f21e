//! Reads the unikernel's ELF image: which bytes go where in guest memory, and the 64-bit
//! entry point that the vTNT note ([`vtnt_abi::hvt::NOTE_NAME`], [`vtnt_abi::hvt::NOTE_ENTRY64`])
//! names.
//!
//! The image comes from a file the monitor is handed, so nothing in it is trusted: every
//! offset and size is checked against the file and against guest memory with checked
//! arithmetic, and any inconsistency is an error message, never a panic (a seeded
//! mutation test below feeds it thousands of broken images).

use std::ops::Range;

use vtnt_abi::hvt::{IMAGE_MIN, NOTE_ENTRY64, NOTE_NAME};

/// `e_ident[EI_CLASS]` of a 64-bit ELF file.
const ELFCLASS64: u8 = 2;
/// `e_ident[EI_DATA]` of a little-endian ELF file.
const ELFDATA2LSB: u8 = 1;
/// `e_type` of an executable.
const ET_EXEC: u16 = 2;
/// `e_machine` of x86_64.
const EM_X86_64: u16 = 62;
/// Program header types.
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
/// Section header type of notes.
const SHT_NOTE: u32 = 7;
/// Sizes of the ELF64 header, a program header and a section header.
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;

/// What the loader needs of a valid image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    /// The 64-bit entry point (guest-physical = virtual: memory is identity-mapped).
    pub entry: u64,
    /// The `PT_LOAD` segments, in file order.
    pub segments: Vec<Segment>,
}

/// One `PT_LOAD` segment: `file` bytes of the image go to `paddr`, and the rest of its
/// `memsz` bytes are zeroed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    pub paddr: u64,
    pub file: Range<usize>,
    pub memsz: u64,
}

impl Image {
    /// The first guest-physical address above every segment.
    pub fn end(&self) -> u64 {
        // parse() checked that paddr + memsz does not overflow.
        self.segments
            .iter()
            .map(|s| s.paddr + s.memsz)
            .max()
            .unwrap_or(IMAGE_MIN)
    }
}

/// Little-endian readers that return `None` past the end of `bytes`.
fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut v = [0u8; 8];
    v.copy_from_slice(b);
    Some(u64::from_le_bytes(v))
}

/// The byte range `[off, off + len)` of a file of `file_len` bytes, if it lies inside.
fn file_range(off: u64, len: u64, file_len: usize) -> Option<Range<usize>> {
    let start = usize::try_from(off).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (end <= file_len).then_some(start..end)
}

/// Parses `bytes` as an image for a guest of `mem_size` bytes. The error is a sentence
/// about the image (the caller names the file).
pub(crate) fn parse(bytes: &[u8], mem_size: u64) -> Result<Image, String> {
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    if bytes.len() < EHDR_SIZE {
        return Err(format!(
            "not an x86_64 ELF executable (the ELF header is truncated: {} bytes)",
            bytes.len()
        ));
    }
    let class = bytes[4];
    let data = bytes[5];
    // The header is 64 bytes long, so these reads cannot fail.
    let e_type = u16_at(bytes, 16).unwrap_or(0);
    let machine = u16_at(bytes, 18).unwrap_or(0);
    if class != ELFCLASS64 || data != ELFDATA2LSB || e_type != ET_EXEC || machine != EM_X86_64 {
        return Err(format!(
            "not an x86_64 ELF executable (class {class}, data {data}, type {e_type}, machine {machine})"
        ));
    }
    let phoff = u64_at(bytes, 32).unwrap_or(0);
    let phentsize = usize::from(u16_at(bytes, 54).unwrap_or(0));
    let phnum = usize::from(u16_at(bytes, 56).unwrap_or(0));
    if phnum == 0 {
        return Err("the ELF file has no program headers".into());
    }
    if phentsize < PHDR_SIZE {
        return Err(format!(
            "bad ELF program header size {phentsize} (expected at least {PHDR_SIZE})"
        ));
    }
    let table = file_range(phoff, (phentsize * phnum) as u64, bytes.len())
        .ok_or("the ELF program headers lie outside the file")?;
    let mut segments = Vec::new();
    let mut entry = None;
    for i in 0..phnum {
        let ph = &bytes[table.start + i * phentsize..][..PHDR_SIZE];
        let p_type = u32_at(ph, 0).unwrap_or(0);
        let offset = u64_at(ph, 8).unwrap_or(0);
        let paddr = u64_at(ph, 24).unwrap_or(0);
        let filesz = u64_at(ph, 32).unwrap_or(0);
        let memsz = u64_at(ph, 40).unwrap_or(0);
        let align = u64_at(ph, 48).unwrap_or(0);
        match p_type {
            PT_LOAD if memsz > 0 => segments.push(segment(
                paddr,
                offset,
                filesz,
                memsz,
                bytes.len(),
                mem_size,
            )?),
            PT_NOTE if entry.is_none() => {
                let range = file_range(offset, filesz, bytes.len()).ok_or_else(|| {
                    format!("a note segment ({filesz} bytes at offset 0x{offset:x}) lies outside the file")
                })?;
                entry = find_entry(&bytes[range], align)?;
            }
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err("the ELF file has no loadable segment".into());
    }
    if entry.is_none() {
        entry = entry_from_sections(bytes)?;
    }
    let entry = entry.ok_or(
        "no vTNT 64-bit entry note (an image built before the monitor existed, or not vtnt-kernel)",
    )?;
    if !segments
        .iter()
        .any(|s| (s.paddr..s.paddr + s.memsz).contains(&entry))
    {
        return Err(format!(
            "the vTNT entry point 0x{entry:x} lies outside the loaded segments"
        ));
    }
    Ok(Image { entry, segments })
}

/// Checks one `PT_LOAD` header against the file and guest memory.
fn segment(
    paddr: u64,
    offset: u64,
    filesz: u64,
    memsz: u64,
    file_len: usize,
    mem_size: u64,
) -> Result<Segment, String> {
    if filesz > memsz {
        return Err(format!(
            "segment at 0x{paddr:x} holds more file bytes ({filesz}) than memory bytes ({memsz})"
        ));
    }
    let file = file_range(offset, filesz, file_len).ok_or_else(|| {
        format!(
            "segment at 0x{paddr:x} ({filesz} bytes at offset 0x{offset:x}) lies outside the file"
        )
    })?;
    if paddr < IMAGE_MIN {
        return Err(format!(
            "segment at 0x{paddr:x} lies below 0x{IMAGE_MIN:x}, where the monitor's own structures are"
        ));
    }
    if paddr.checked_add(memsz).is_none_or(|end| end > mem_size) {
        return Err(format!(
            "segment at 0x{paddr:x} of {memsz} bytes does not fit in {} MiB of guest memory (use --mem-mib)",
            mem_size >> 20
        ));
    }
    Ok(Segment { paddr, file, memsz })
}

/// Looks through the notes in `notes` (aligned to `align`: 8 if the header says so, else
/// the usual 4) for the vTNT entry note.
fn find_entry(notes: &[u8], align: u64) -> Result<Option<u64>, String> {
    let align = if align == 8 { 8 } else { 4 };
    let pad = |n: usize| n.checked_add(align - 1).map(|n| n & !(align - 1));
    let mut at = 0usize;
    while let (Some(namesz), Some(descsz), Some(n_type)) = (
        u32_at(notes, at),
        u32_at(notes, at + 4),
        u32_at(notes, at + 8),
    ) {
        // A note that runs past the end ends the walk: there is nothing more to read.
        let Some(name_end) = (at + 12).checked_add(namesz as usize) else {
            break;
        };
        let Some(desc_at) = pad(name_end) else { break };
        let Some(desc_end) = desc_at.checked_add(descsz as usize) else {
            break;
        };
        let (Some(name), Some(desc)) = (notes.get(at + 12..name_end), notes.get(desc_at..desc_end))
        else {
            break;
        };
        if name == NOTE_NAME && n_type == NOTE_ENTRY64 {
            return match u64_at(desc, 0) {
                Some(entry) if desc.len() == 8 => Ok(Some(entry)),
                _ => Err(format!(
                    "the vTNT entry note's descriptor is {} bytes, not 8",
                    desc.len()
                )),
            };
        }
        match pad(desc_end) {
            Some(next) if next > at => at = next,
            _ => break,
        }
    }
    Ok(None)
}

/// Looks for the entry note in `SHT_NOTE` sections, for images whose notes are not in a
/// `PT_NOTE` segment. A section table that does not fit the file is ignored (the image
/// then simply has no note).
fn entry_from_sections(bytes: &[u8]) -> Result<Option<u64>, String> {
    let shoff = u64_at(bytes, 40).unwrap_or(0);
    let shentsize = usize::from(u16_at(bytes, 58).unwrap_or(0));
    let shnum = usize::from(u16_at(bytes, 60).unwrap_or(0));
    if shoff == 0 || shnum == 0 || shentsize < SHDR_SIZE {
        return Ok(None);
    }
    let Some(table) = file_range(shoff, (shentsize * shnum) as u64, bytes.len()) else {
        return Ok(None);
    };
    for i in 0..shnum {
        let sh = &bytes[table.start + i * shentsize..][..SHDR_SIZE];
        if u32_at(sh, 4) != Some(SHT_NOTE) {
            continue;
        }
        let offset = u64_at(sh, 24).unwrap_or(0);
        let size = u64_at(sh, 32).unwrap_or(0);
        let align = u64_at(sh, 48).unwrap_or(0);
        if let Some(range) = file_range(offset, size, bytes.len()) {
            if let Some(entry) = find_entry(&bytes[range], align)? {
                return Ok(Some(entry));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal valid image: ELF header, a PT_LOAD of the whole file at 0x100000 with
    /// 4 KiB of memory, and a PT_NOTE holding the entry note (entry 0x100100).
    pub(crate) fn image() -> Vec<u8> {
        let mut f = vec![0u8; 0x120];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = ELFCLASS64;
        f[5] = ELFDATA2LSB;
        f[6] = 1;
        f[16..18].copy_from_slice(&ET_EXEC.to_le_bytes());
        f[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[52..54].copy_from_slice(&64u16.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&2u16.to_le_bytes());
        let len = f.len() as u64;
        let ph = |f: &mut Vec<u8>, at: usize, t: u32, off: u64, addr: u64, fs: u64, ms: u64| {
            f[at..at + 4].copy_from_slice(&t.to_le_bytes());
            f[at + 8..at + 16].copy_from_slice(&off.to_le_bytes());
            f[at + 16..at + 24].copy_from_slice(&addr.to_le_bytes());
            f[at + 24..at + 32].copy_from_slice(&addr.to_le_bytes());
            f[at + 32..at + 40].copy_from_slice(&fs.to_le_bytes());
            f[at + 40..at + 48].copy_from_slice(&ms.to_le_bytes());
            f[at + 48..at + 56].copy_from_slice(&4u64.to_le_bytes());
        };
        ph(&mut f, 64, PT_LOAD, 0, 0x10_0000, len, 0x1000);
        ph(&mut f, 120, PT_NOTE, 0xb0, 0x10_00b0, 28, 28);
        f[0xb0..0xb4].copy_from_slice(&5u32.to_le_bytes());
        f[0xb4..0xb8].copy_from_slice(&8u32.to_le_bytes());
        f[0xb8..0xbc].copy_from_slice(&NOTE_ENTRY64.to_le_bytes());
        f[0xbc..0xc1].copy_from_slice(NOTE_NAME);
        f[0xc4..0xcc].copy_from_slice(&0x10_0100u64.to_le_bytes());
        f
    }

    const MEM: u64 = 16 << 20;

    #[test]
    fn a_valid_image_parses() {
        let img = parse(&image(), MEM).unwrap();
        assert_eq!(img.entry, 0x10_0100);
        assert_eq!(
            img.segments,
            [Segment {
                paddr: 0x10_0000,
                file: 0..0x120,
                memsz: 0x1000
            }]
        );
        assert_eq!(img.end(), 0x10_1000);
    }

    #[test]
    fn bad_images_say_what_is_wrong() {
        let err = |f: &[u8]| parse(f, MEM).unwrap_err();
        assert_eq!(err(b""), "not an ELF file");
        assert_eq!(err(b"#!/bin/sh\necho hi\n"), "not an ELF file");
        assert!(err(&image()[..40]).contains("truncated"));
        let mut f = image();
        f[18] = 3; // EM_386
        assert!(
            err(&f).starts_with("not an x86_64 ELF executable"),
            "{}",
            err(&f)
        );
        let mut f = image();
        f[0xbc] = b'X'; // the note's name
        assert!(err(&f).starts_with("no vTNT 64-bit entry note"));
        let mut f = image();
        f[0xc4..0xcc].copy_from_slice(&0x20_0000u64.to_le_bytes());
        assert!(
            err(&f).contains("outside the loaded segments"),
            "{}",
            err(&f)
        );
        let mut f = image();
        f[64 + 40..64 + 48].copy_from_slice(&(3u64 << 20).to_le_bytes());
        assert_eq!(
            parse(&f, 2 << 20).unwrap_err(),
            "segment at 0x100000 of 3145728 bytes does not fit in 2 MiB of guest memory (use --mem-mib)"
        );
        let mut f = image();
        f[64 + 24..64 + 32].copy_from_slice(&0x8000u64.to_le_bytes());
        assert!(err(&f).contains("lies below 0x100000"), "{}", err(&f));
        let mut f = image();
        f[64 + 8..64 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&f).contains("lies outside the file"), "{}", err(&f));
        let mut f = image();
        f[64 + 40..64 + 48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&f).contains("does not fit"), "{}", err(&f));
    }

    #[test]
    fn the_note_may_sit_in_a_section_only() {
        let mut f = image();
        // Turn the PT_NOTE into a PT_NULL and describe the note with a section table.
        f[120..124].copy_from_slice(&0u32.to_le_bytes());
        assert!(parse(&f, MEM).is_err());
        let shoff = f.len() as u64;
        let mut sh = vec![0u8; 2 * 64];
        sh[64 + 4..64 + 8].copy_from_slice(&SHT_NOTE.to_le_bytes());
        sh[64 + 24..64 + 32].copy_from_slice(&0xb0u64.to_le_bytes());
        sh[64 + 32..64 + 40].copy_from_slice(&28u64.to_le_bytes());
        sh[64 + 48..64 + 56].copy_from_slice(&4u64.to_le_bytes());
        f.extend_from_slice(&sh);
        f[40..48].copy_from_slice(&shoff.to_le_bytes());
        f[58..60].copy_from_slice(&64u16.to_le_bytes());
        f[60..62].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(parse(&f, MEM).unwrap().entry, 0x10_0100);
    }

    /// Thousands of seeded mutations of a valid image (bytes flipped, header fields set
    /// to extremes, the file cut short): the parser answers each with an image or an
    /// error, and a parsed image always lies inside the file and guest memory.
    #[test]
    fn mutated_images_never_panic() {
        let seed = vtnt_testkit::seed("VTNT_MONITOR_ELF_SEED", || 0x5eed_e1f0);
        let mut rng = vtnt_testkit::Rng::new(seed);
        let base = image();
        let extremes = [
            0u64,
            1,
            0x7f,
            0x100,
            0xffff,
            0x10_0000,
            u64::MAX,
            u64::MAX - 7,
        ];
        let (mut ok, mut bad) = (0, 0);
        for _ in 0..5000 {
            let mut f = base.clone();
            for _ in 0..1 + rng.below(4) {
                match rng.below(4) {
                    0 => {
                        let i = rng.below(f.len());
                        f[i] = rng.next_u64() as u8;
                    }
                    1 => {
                        // An 8-byte field somewhere in the headers and note.
                        let hi = f.len().min(0xcc);
                        if hi >= 8 {
                            let i = rng.below(hi - 7);
                            let v = extremes[rng.below(extremes.len())];
                            f[i..i + 8].copy_from_slice(&v.to_le_bytes());
                        }
                    }
                    2 => {
                        let n = rng.below(f.len());
                        f.truncate(n);
                    }
                    _ => {
                        let n = rng.below(64);
                        f.extend(rng.bytes(n));
                    }
                }
                if f.is_empty() {
                    break;
                }
            }
            let mem = [2u64 << 20, MEM][rng.below(2)];
            match parse(&f, mem) {
                Ok(img) => {
                    ok += 1;
                    for s in &img.segments {
                        assert!(s.file.end <= f.len());
                        assert!(s.paddr >= IMAGE_MIN && s.paddr + s.memsz <= mem);
                        assert!((s.file.len() as u64) <= s.memsz);
                    }
                    assert!(img.end() <= mem);
                }
                Err(e) => {
                    bad += 1;
                    assert!(!e.is_empty());
                }
            }
        }
        assert!(ok > 0 && bad > 0, "ok {ok}, bad {bad}");
    }
}
