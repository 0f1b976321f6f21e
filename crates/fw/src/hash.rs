//! The crate's one hash: the multiply-fold step of foldhash/wyhash (the high and low
//! halves of a 128-bit product XORed), so every input bit reaches both the bucket (low)
//! and the tag (high) bits hashbrown uses. Keys of the classifier's tables come from the
//! rule file and connection-tracking keys are only inserted for packets the rules
//! accepted, so a fixed seed gives an outsider no cheap way to crowd one bucket.

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
