//! The vocabulary of MPLS tunnels shared by the lab's ground truth (`vtnt-lab`) and TNT's
//! inference (`vtnt-tnt`): one [`TunnelClass`] and one [`initial_ttl`], so truth and
//! inference cannot drift apart.

/// The four classes of the TNT taxonomy, invisible split into PHP and UHP: what a
/// traceroute crossing the tunnel shows.
///
/// With the `serde` feature it serializes as its kebab-case [`TunnelClass::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum TunnelClass {
    /// ttl-propagate and RFC 4950: every LSR visible, with labels.
    Explicit,
    /// ttl-propagate without RFC 4950: LSRs visible, no labels, rising quoted TTL.
    Implicit,
    /// no-propagate, UHP, RFC 4950: only the egress visible, labelled, LSE-TTL != 1.
    Opaque,
    /// Invisible, penultimate-hop popping: LERs look adjacent (FRPLA / RTLA triggers).
    InvisiblePhp,
    /// Invisible, ultimate-hop popping with an egress forwarding TTL-1 packets: egress
    /// missing, next hop twice (duplicate IP trigger).
    InvisibleUhp,
}

impl TunnelClass {
    /// Every class, in table order.
    pub const ALL: [TunnelClass; 5] = [
        TunnelClass::Explicit,
        TunnelClass::Implicit,
        TunnelClass::Opaque,
        TunnelClass::InvisiblePhp,
        TunnelClass::InvisibleUhp,
    ];
    /// kebab-case name (JSON value).
    pub const fn name(self) -> &'static str {
        match self {
            TunnelClass::Explicit => "explicit",
            TunnelClass::Implicit => "implicit",
            TunnelClass::Opaque => "opaque",
            TunnelClass::InvisiblePhp => "invisible-php",
            TunnelClass::InvisibleUhp => "invisible-uhp",
        }
    }
    /// `sc_tnt`'s three-letter tag in its text dump.
    pub const fn tag(self) -> &'static str {
        match self {
            TunnelClass::Explicit => "EXP",
            TunnelClass::Implicit => "IMP",
            TunnelClass::Opaque => "OPA",
            TunnelClass::InvisiblePhp | TunnelClass::InvisibleUhp => "INV",
        }
    }
    /// True for the two invisible classes.
    pub const fn is_invisible(self) -> bool {
        matches!(self, TunnelClass::InvisiblePhp | TunnelClass::InvisibleUhp)
    }
    /// Whether a plain traceroute misses some of the LSP's routers (opaque, invisible).
    pub const fn hides_lsrs(self) -> bool {
        matches!(
            self,
            TunnelClass::Opaque | TunnelClass::InvisiblePhp | TunnelClass::InvisibleUhp
        )
    }
}

/// Initial TTL a router most likely used, inferred from a received reply TTL the way
/// `sc_tnt` does: 255 if `r > 128`, 128 if `r > 64`, 64 if `r > 32`, else 32.
///
/// ```
/// use vtnt_record::initial_ttl;
/// assert_eq!(initial_ttl(250), 255);
/// assert_eq!(initial_ttl(128), 128);
/// assert_eq!(initial_ttl(60), 64);
/// assert_eq!(initial_ttl(32), 32);
/// ```
pub const fn initial_ttl(reply_ttl: u8) -> u8 {
    if reply_ttl > 128 {
        255
    } else if reply_ttl > 64 {
        128
    } else if reply_ttl > 32 {
        64
    } else {
        32
    }
}

#[cfg(test)]
mod tests {
    use super::{initial_ttl, TunnelClass};

    #[test]
    fn names_and_flags() {
        let names: [&str; 5] = TunnelClass::ALL.map(TunnelClass::name);
        assert_eq!(
            names,
            [
                "explicit",
                "implicit",
                "opaque",
                "invisible-php",
                "invisible-uhp"
            ]
        );
        assert!(TunnelClass::InvisibleUhp.is_invisible());
        assert!(!TunnelClass::Opaque.is_invisible());
        assert!(TunnelClass::Opaque.hides_lsrs());
        assert!(!TunnelClass::Implicit.hides_lsrs());
        assert_eq!(TunnelClass::InvisiblePhp.tag(), "INV");
    }

    #[test]
    fn initial_ttl_boundaries() {
        for (r, ittl) in [
            (255, 255),
            (129, 255),
            (128, 128),
            (65, 128),
            (64, 64),
            (33, 64),
            (32, 32),
            (1, 32),
            (0, 32),
        ] {
            assert_eq!(initial_ttl(r), ittl, "{r}");
        }
    }
}
