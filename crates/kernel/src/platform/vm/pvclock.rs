//! KVM's paravirtual clock (kvmclock) scale as a TSC frequency: the arithmetic of
//! `time`'s kvmclock source, kept apart so host tests can check it.

/// The TSC frequency kvmclock's scale stands for: nanoseconds = ((ticks << shift) * mul)
/// >> 32, so Hz = 10^9 * 2^32 / mul / 2^shift (Linux's `pvclock_tsc_khz`, in Hz).
pub fn tsc_hz(mul: u32, shift: i8) -> Option<u64> {
    if mul == 0 || !(-32..=32).contains(&shift) {
        return None;
    }
    let hz = (1_000_000_000u128 << 32) / mul as u128;
    let hz = if shift < 0 { hz << -shift } else { hz >> shift };
    u64::try_from(hz).ok().filter(|&hz| hz > 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::tsc_hz;

    #[test]
    fn pvclock_scale_gives_the_tsc_frequency() {
        // A 2.5 GHz TSC: 0.4 ns per tick = 0.8 * 2^-1, mul = 0.8 * 2^32 = 3435973836.8.
        let hz = tsc_hz(3_435_973_837, -1).unwrap();
        assert!(hz.abs_diff(2_500_000_000) < 10, "{hz}");
        // A 1 GHz TSC: 1 ns per tick = 0.5 * 2^1.
        let hz = tsc_hz(1 << 31, 1).unwrap();
        assert!(hz.abs_diff(1_000_000_000) < 10, "{hz}");
        assert_eq!(tsc_hz(0, 0), None);
        assert_eq!(tsc_hz(1, 40), None);
    }
}
