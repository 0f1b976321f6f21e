//! MPLS label stack entries (RFC 3032): 20-bit label, 3-bit traffic class, bottom-of-stack
//! bit, 8-bit TTL, in one big-endian 32-bit word.

/// One label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Lse(pub u32);

impl Lse {
    /// Length of one entry on the wire.
    pub const LEN: usize = 4;

    /// Builds an entry; `label` is truncated to 20 bits and `tc` to 3.
    pub const fn new(label: u32, tc: u8, bottom: bool, ttl: u8) -> Lse {
        Lse(((label & 0xf_ffff) << 12)
            | (((tc & 7) as u32) << 9)
            | ((bottom as u32) << 8)
            | ttl as u32)
    }
    pub const fn label(self) -> u32 {
        self.0 >> 12
    }
    pub const fn tc(self) -> u8 {
        ((self.0 >> 9) & 7) as u8
    }
    pub const fn bottom(self) -> bool {
        (self.0 >> 8) & 1 == 1
    }
    pub const fn ttl(self) -> u8 {
        (self.0 & 0xff) as u8
    }
    /// Reads an entry from the first four bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<Lse> {
        crate::be32(b, 0).map(Lse)
    }
    /// Writes the entry into the first four bytes of `b`.
    pub fn emit(self, b: &mut [u8]) -> crate::Result<()> {
        b.get_mut(..4)
            .ok_or(crate::Error::Truncated)?
            .copy_from_slice(&self.0.to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        // label 25316 (0x062e4), tc 0, S=1, ttl 1 -> 0x062e4101
        let lse = Lse::new(25316, 0, true, 1);
        assert_eq!(lse.0, 0x062e_4101);
        assert_eq!(
            (lse.label(), lse.tc(), lse.bottom(), lse.ttl()),
            (25316, 0, true, 1)
        );
        let mut b = [0xa5u8; 4];
        lse.emit(&mut b).unwrap();
        assert_eq!(b, [0x06, 0x2e, 0x41, 0x01]);
        assert_eq!(Lse::parse(&b), Some(lse));
        assert_eq!(Lse::parse(&b[..3]), None);
        assert_eq!(lse.emit(&mut [0u8; 3]), Err(crate::Error::Truncated));
    }

    #[test]
    fn oversized_fields_truncate() {
        let lse = Lse::new(0xff_ffff, 0xff, false, 255);
        assert_eq!(lse.label(), 0xf_ffff);
        assert_eq!(lse.tc(), 7);
        assert!(!lse.bottom());
        assert_eq!(lse.ttl(), 255);
    }
}
