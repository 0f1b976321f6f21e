//! The workspace's one seeded pseudo-random generator: SplitMix64 (Steele, Lea, Flood
//! 2014), small, fast and the same stream on every platform and release, which a crate's
//! generator need not be. The engine spreads its identifiers with it (seeded from its
//! config), the lab and the firewall generate topologies, rules and traces from a seed,
//! and tests draw their inputs from one printed seed (`vtnt-testkit`). Not for secrets.
//! `no_std`, no dependencies: it sits at the bottom of the crate graph.

#![no_std]

/// SplitMix64: a Weyl sequence through a finishing mix, [`stafford13`] by default.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    finish: fn(u64) -> u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng::with_finish(seed, stafford13)
    }

    /// The same sequence through another finishing mix: the lab draws its topologies
    /// through [`fmix64`], so that a seed stays the topology it has always been.
    pub fn with_finish(seed: u64, finish: fn(u64) -> u64) -> Rng {
        Rng {
            state: seed,
            finish,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        (self.finish)(self.state)
    }

    /// A number in `0..n` (`0` when `n == 0`); the modulo's bias is below 2^-40 for the
    /// `n` anyone draws from (< 2^24).
    pub fn below(&mut self, n: u64) -> u64 {
        match n {
            0 => 0,
            n => self.next_u64() % n,
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// One element of `v` (`None` when it is empty).
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        v.get(self.below(v.len() as u64) as usize)
    }

    /// Puts `v` in a random order (Fisher-Yates: every order as likely), the same for the
    /// same seed.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i as u64 + 1) as usize);
        }
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next_u64() as u8;
        }
    }
}

/// SplitMix64's own finishing mix (Stafford's variant 13).
pub fn stafford13(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// MurmurHash3's 64-bit finaliser: the lab's hash of flows and its generator's mix.
pub fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_stream_is_splitmix64() {
        // The reference values of SplitMix64 from seed 1234567 (Vigna's splitmix64.c).
        let mut r = Rng::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
    }

    #[test]
    fn a_shuffle_is_a_permutation_fixed_by_its_seed() {
        let mut a = [0u8, 1, 2, 3, 4, 5, 6, 7];
        Rng::new(9).shuffle(&mut a);
        let mut b = [0u8, 1, 2, 3, 4, 5, 6, 7];
        Rng::new(9).shuffle(&mut b);
        assert_eq!(a, b);
        assert_ne!(a, [0, 1, 2, 3, 4, 5, 6, 7]);
        let mut sorted = a;
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3, 4, 5, 6, 7]);
        let mut none: [u8; 0] = [];
        Rng::new(1).shuffle(&mut none);
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = Rng::new(7);
        assert_eq!(r.below(0), 0);
        for _ in 0..1000 {
            assert!(r.below(10) < 10);
            assert!((5..=9).contains(&r.range(5, 9)));
        }
        assert_eq!(r.pick::<u8>(&[]), None);
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }
}
