//! The per-hop numbers TNT reasons with, as pure functions: initial-TTL inference (vtnt-record's,
//! shared with the lab), the `<te, er>` TTL signature and the vendor it points to, FRPLA, RTLA
//! and u-turn, and the trigger thresholds (TNT's defaults, range-checked).
//!
//! Conventions (from `sc_tnt`, see `shared/notes/tnt.md`):
//! - `te` is the reply TTL of a time-exceeded message (from the trace), `er` the reply
//!   TTL of an echo reply (from the fingerprint ping).
//! - The initial TTL of a reply TTL `r` is 255 if `r > 128`, 128 if `r > 64`, 64 if
//!   `r > 32`, else 32.
//! - The return-path length of a reply is `iTTL - r + 1`.

use core::fmt;

pub use vtnt_record::initial_ttl;

/// Hops a reply travelled back, counting the router that sent it: `iTTL - r + 1`.
pub const fn return_length(reply_ttl: u8) -> i16 {
    initial_ttl(reply_ttl) as i16 - reply_ttl as i16 + 1
}

/// Forward/Return Path Length Asymmetry: return length of the time-exceeded minus the
/// probe TTL. Large values betray hidden (invisible tunnel) hops on the forward path.
pub const fn frpla(probe_ttl: u8, te: u8) -> i16 {
    return_length(te) - probe_ttl as i16
}

/// Return Tunnel Length Analysis: return length of the time-exceeded minus that of the
/// echo reply, only for `<255, x>` routers with `x != 255` (JunOS-like); 0 otherwise.
pub const fn rtla(te: u8, er: u8) -> i16 {
    if initial_ttl(te) != 255 || initial_ttl(er) == 255 {
        return 0;
    }
    return_length(te) - return_length(er)
}

/// u-turn: return length of the time-exceeded minus that of the echo reply, for any
/// signature. An LSR that tunnels its time-exceeded to the end of the LSP first shows a
/// positive u-turn shrinking along the tunnel.
pub const fn uturn(te: u8, er: u8) -> i16 {
    return_length(te) - return_length(er)
}

/// The `<iTTL time-exceeded, iTTL echo-reply>` pair of a router; either side is `None`
/// when the router never answered that kind of probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Signature {
    /// Initial TTL of its time-exceeded messages.
    pub te: Option<u8>,
    /// Initial TTL of its echo replies.
    pub er: Option<u8>,
}

impl Signature {
    /// The signature of a router seen with reply TTLs `te` and `er`.
    pub fn from_reply_ttls(te: Option<u8>, er: Option<u8>) -> Signature {
        Signature {
            te: te.map(initial_ttl),
            er: er.map(initial_ttl),
        }
    }
    /// The vendor family the signature points to.
    pub fn vendor(self) -> Vendor {
        match (self.te, self.er) {
            (Some(255), Some(255)) => Vendor::Cisco,
            (Some(255), Some(64)) => Vendor::Juniper,
            (Some(64), Some(64)) => Vendor::Linux,
            (Some(128), Some(128)) => Vendor::JunosE,
            (None, None) => Vendor::Unresponsive,
            // One half only (a destination answers the trace with an echo reply, not a
            // time exceeded; a router drops pings): not enough to tell.
            _ => Vendor::Unknown,
        }
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<")?;
        match self.te {
            Some(v) => write!(f, "{v}")?,
            None => f.write_str("*")?,
        }
        f.write_str(",")?;
        match self.er {
            Some(v) => write!(f, "{v}")?,
            None => f.write_str("*")?,
        }
        f.write_str(">")
    }
}

/// The router family a `<te, er>` signature points to (TNT's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Vendor {
    /// `<255,255>`: Cisco, Huawei, H3C.
    Cisco,
    /// `<255,64>`: Juniper JunOS.
    Juniper,
    /// `<64,64>`: Linux, MikroTik, Nokia, Brocade, Alcatel.
    Linux,
    /// `<128,128>`: Juniper JunOSe.
    JunosE,
    /// A signature outside the table, or with only one of its two halves.
    Unknown,
    /// Neither a time exceeded nor an echo reply was seen: no signature at all.
    Unresponsive,
}

impl Vendor {
    /// Short name used in the text dump and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Vendor::Cisco => "cisco",
            Vendor::Juniper => "juniper",
            Vendor::Linux => "linux",
            Vendor::JunosE => "junos-e",
            Vendor::Unknown => "unknown",
            Vendor::Unresponsive => "unresponsive",
        }
    }
}

/// Trigger thresholds (TNT's `-f`, `-r` options and the u-turn run sum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// FRPLA value from which an invisible tunnel is suspected (3, range 1..=64).
    pub frpla: i16,
    /// RTLA value from which an invisible tunnel is suspected (1, range 1..=64).
    pub rtla: i16,
    /// Absolute u-turn sum of a run from which it marks an implicit tunnel (3, 1..=64).
    pub uturn: i16,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            frpla: 3,
            rtla: 1,
            uturn: 3,
        }
    }
}

/// A configuration value outside its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigError {
    /// The option that is wrong.
    pub option: &'static str,
    /// Its accepted range.
    pub range: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "option `{}` out of range (accepted: {})",
            self.option, self.range
        )
    }
}

impl Thresholds {
    /// Checks every threshold against its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = |v: i16, option| {
            if (1..=64).contains(&v) {
                Ok(())
            } else {
                Err(ConfigError {
                    option,
                    range: "1..=64",
                })
            }
        };
        check(self.frpla, "frpla")?;
        check(self.rtla, "rtla")?;
        check(self.uturn, "uturn")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frpla_counts_hidden_forward_hops() {
        // Probe TTL 4, time-exceeded back over 7 hops: 3 hops hidden on the way out.
        assert_eq!(frpla(4, 255 - 6), 3);
        assert_eq!(frpla(4, 252), 0);
        assert_eq!(frpla(10, 252), -6);
    }

    #[test]
    fn rtla_only_for_junos_like_signatures() {
        // JunOS egress: te from 255 over 9 hops, er from 64 over 5 hops.
        assert_eq!(rtla(247, 60), 4);
        // <255,255>: no RTLA.
        assert_eq!(rtla(247, 251), 0);
        // <64,64>: no RTLA.
        assert_eq!(rtla(60, 60), 0);
        // u-turn compares the same lengths for any signature.
        assert_eq!(uturn(247, 251), 4);
        assert_eq!(uturn(60, 62), 2);
        assert_eq!(uturn(62, 60), -2);
        assert_eq!(uturn(247, 60), rtla(247, 60));
    }

    #[test]
    fn signatures_and_vendors() {
        let s = |te, er| Signature::from_reply_ttls(te, er);
        assert_eq!(s(Some(250), Some(250)).vendor(), Vendor::Cisco);
        assert_eq!(s(Some(250), Some(60)).vendor(), Vendor::Juniper);
        assert_eq!(s(Some(60), Some(60)).vendor(), Vendor::Linux);
        assert_eq!(s(Some(120), Some(120)).vendor(), Vendor::JunosE);
        assert_eq!(s(Some(60), Some(250)).vendor(), Vendor::Unknown);
        assert_eq!(s(Some(250), None).vendor(), Vendor::Unknown);
        assert_eq!(s(None, Some(60)).vendor(), Vendor::Unknown);
        assert_eq!(s(None, None).vendor(), Vendor::Unresponsive);
        assert_eq!(alloc::format!("{}", s(Some(250), Some(60))), "<255,64>");
        assert_eq!(alloc::format!("{}", s(Some(250), None)), "<255,*>");
    }

    #[test]
    fn thresholds_are_range_checked() {
        assert_eq!(Thresholds::default().validate(), Ok(()));
        let t = Thresholds {
            frpla: 0,
            ..Thresholds::default()
        };
        assert_eq!(t.validate().unwrap_err().option, "frpla");
        let t = Thresholds {
            rtla: 65,
            ..Thresholds::default()
        };
        assert_eq!(t.validate().unwrap_err().option, "rtla");
        let t = Thresholds {
            uturn: -1,
            ..Thresholds::default()
        };
        assert_eq!(t.validate().unwrap_err().option, "uturn");
    }
}
