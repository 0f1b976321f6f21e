//! The three rule-set families and their distributions: the published shapes of
//! ClassBench's seed files (acl1-5, fw1-5, ipc1-2) rounded into small tables. These
//! tables are the documentation of what `vtnt fw gen` draws (docs/fw.md repeats them);
//! changing one changes every generated set, so figures name the build.

use crate::rule::{Action, PortRange, RejectWith};

/// A value and its weight.
pub(crate) type Weighted<T> = (f64, T);

/// A port class (ClassBench's WC, HI, LO, AR, EM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ports {
    Wc,
    Hi,
    Lo,
    Ar,
    Em,
}

/// Which shape of rule set to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Access control lists: specific destinations, mostly TCP to one port.
    Acl,
    /// Firewalls: many wildcards, every protocol and port class.
    Fw,
    /// IP chains: specific source and destination networks both ways.
    Ipc,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Acl => "acl",
            Family::Fw => "fw",
            Family::Ipc => "ipc",
        }
    }

    /// Protocol mix (`None`: any protocol).
    pub(crate) fn protocols(self) -> &'static [Weighted<Option<u8>>] {
        match self {
            Family::Acl => &[
                (0.84, Some(6)),
                (0.05, Some(17)),
                (0.03, Some(1)),
                (0.08, None),
            ],
            Family::Fw => &[
                (0.55, Some(6)),
                (0.25, Some(17)),
                (0.05, Some(1)),
                (0.15, None),
            ],
            Family::Ipc => &[
                (0.55, Some(6)),
                (0.30, Some(17)),
                (0.05, Some(1)),
                (0.10, None),
            ],
        }
    }

    /// (source, destination) port classes of TCP and UDP rules.
    pub(crate) fn port_pairs(self) -> &'static [Weighted<(Ports, Ports)>] {
        use Ports::*;
        match self {
            Family::Acl => &[
                (0.22, (Wc, Wc)),
                (0.13, (Wc, Ar)),
                (0.60, (Wc, Em)),
                (0.05, (Wc, Hi)),
            ],
            Family::Fw => &[
                (0.30, (Wc, Wc)),
                (0.28, (Wc, Em)),
                (0.05, (Em, Wc)),
                (0.08, (Wc, Hi)),
                (0.05, (Hi, Wc)),
                (0.10, (Wc, Ar)),
                (0.07, (Hi, Em)),
                (0.04, (Em, Hi)),
                (0.03, (Wc, Lo)),
            ],
            Family::Ipc => &[
                (0.20, (Wc, Wc)),
                (0.40, (Wc, Em)),
                (0.10, (Em, Wc)),
                (0.05, (Wc, Lo)),
                (0.05, (Hi, Hi)),
                (0.10, (Wc, Ar)),
                (0.05, (Em, Em)),
                (0.05, (Ar, Ar)),
            ],
        }
    }

    /// (source, destination) prefix lengths.
    pub(crate) fn prefix_pairs(self) -> &'static [Weighted<(u8, u8)>] {
        match self {
            Family::Acl => &[
                (0.10, (0, 32)),
                (0.25, (32, 32)),
                (0.10, (24, 32)),
                (0.05, (16, 32)),
                (0.10, (32, 24)),
                (0.08, (24, 24)),
                (0.07, (0, 24)),
                (0.03, (8, 32)),
                (0.05, (32, 16)),
                (0.05, (16, 24)),
                (0.04, (0, 16)),
                (0.04, (28, 32)),
                (0.04, (32, 28)),
            ],
            Family::Fw => &[
                (0.08, (0, 0)),
                (0.20, (0, 32)),
                (0.15, (32, 0)),
                (0.15, (32, 32)),
                (0.05, (24, 0)),
                (0.08, (0, 24)),
                (0.06, (24, 24)),
                (0.03, (16, 0)),
                (0.04, (0, 16)),
                (0.06, (24, 32)),
                (0.05, (32, 24)),
                (0.02, (8, 8)),
                (0.03, (16, 16)),
            ],
            Family::Ipc => &[
                (0.20, (32, 32)),
                (0.15, (24, 24)),
                (0.12, (24, 32)),
                (0.12, (32, 24)),
                (0.06, (16, 16)),
                (0.08, (0, 32)),
                (0.06, (32, 0)),
                (0.03, (0, 0)),
                (0.05, (16, 24)),
                (0.05, (24, 16)),
                (0.04, (8, 24)),
                (0.04, (28, 28)),
            ],
        }
    }

    /// Arbitrary ranges (AR): the ranges real sets use.
    pub(crate) fn ranges(self) -> &'static [Weighted<PortRange>] {
        const R: &[Weighted<PortRange>] = &[
            (0.20, PortRange { lo: 20, hi: 21 }),
            (0.15, PortRange { lo: 137, hi: 139 }),
            (0.15, PortRange { lo: 6000, hi: 6063 }),
            (0.10, PortRange { lo: 1024, hi: 5000 }),
            (0.10, PortRange { lo: 8000, hi: 8100 }),
            (
                0.10,
                PortRange {
                    lo: 33434,
                    hi: 33534,
                },
            ),
            (
                0.10,
                PortRange {
                    lo: 49152,
                    hi: 65535,
                },
            ),
            (0.05, PortRange { lo: 5060, hi: 5061 }),
            (0.05, PortRange { lo: 1645, hi: 1646 }),
        ];
        R
    }

    /// ACCEPT, DROP, REJECT.
    pub(crate) fn actions(self) -> &'static [Weighted<Action>] {
        const REJECT: Action = Action::Reject(RejectWith::PortUnreachable);
        match self {
            Family::Acl => &[(0.70, Action::Accept), (0.30, Action::Drop)],
            Family::Fw => &[(0.60, Action::Accept), (0.35, Action::Drop), (0.05, REJECT)],
            Family::Ipc => &[(0.50, Action::Accept), (0.50, Action::Drop)],
        }
    }
}

/// Exact ports (EM), by use; `None`: a random port above 1023.
pub(crate) const EXACT_PORTS: &[Weighted<Option<u16>>] = &[
    (0.25, Some(80)),
    (0.20, Some(443)),
    (0.08, Some(22)),
    (0.05, Some(25)),
    (0.08, Some(53)),
    (0.03, Some(21)),
    (0.02, Some(23)),
    (0.03, Some(110)),
    (0.02, Some(143)),
    (0.02, Some(3306)),
    (0.05, Some(8080)),
    (0.03, Some(123)),
    (0.02, Some(161)),
    (0.03, Some(445)),
    (0.03, Some(3389)),
    (0.06, None),
];

/// ICMP types of ICMP rules: echo request, echo reply, unreachable, time exceeded.
pub(crate) const ICMP_TYPES: &[Weighted<u8>] = &[(0.5, 8), (0.2, 0), (0.15, 3), (0.15, 11)];
