//! The crate's one hash: the multiply-fold step of foldhash/wyhash (the high and low
//! halves of a 128-bit product XORed), so every input bit reaches both the bucket (low)
//! and the tag (high) bits hashbrown uses. Keys of the classifier's tables come from the
//! rule file and connection-tracking keys are only inserted for packets the rules
//! accepted, so a fixed seed gives an outsider no cheap way to crowd one bucket.

use core::hash::{BuildHasherDefault, Hasher};

#[inline]
pub(crate) fn fold(x: u64, y: u64) -> u64 {
    let p = u128::from(x) * u128::from(y);
    (p as u64) ^ (p >> 64) as u64
}

/// Two words into a hash.
#[inline]
pub(crate) fn hash2(a: u64, b: u64) -> u64 {
    fold(
        fold(a ^ 0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344) ^ b,
        0xa409_3822_299f_31d0,
    )
}

/// [`fold`] as a `Hasher` for hashbrown maps keyed by a few integers.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fold(u64);

impl Hasher for Fold {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = fold(self.0 ^ v, 0x9e37_79b9_7f4a_7c15);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v.into());
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(v.into());
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v.into());
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type BuildFold = BuildHasherDefault<Fold>;
