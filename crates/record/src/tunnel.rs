//! The vocabulary of MPLS tunnels shared by the lab's ground truth (`vtnt-lab`) and TNT's
//! inference (`vtnt-tnt`): one [`TunnelClass`], so truth and inference cannot drift apart.

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

#[cfg(test)]
mod tests {
    use super::TunnelClass;

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
}
