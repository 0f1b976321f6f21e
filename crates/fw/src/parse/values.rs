//! Values both syntaxes share: addresses and prefixes, ports, protocol, ICMP type,
//! connection-state and REJECT names. Each returns the name of what it expected on
//! failure, for the caller's error.

use core::net::Ipv4Addr;

use crate::rule::{CtState, IcmpType, PortRange, Prefix, RejectWith};

/// `a.b.c.d`, `a.b.c.d/len` or `a.b.c.d/m.m.m.m` (a contiguous mask; iptables prints
/// a non-contiguous one, which no prefix can hold).
pub(crate) fn prefix(s: &str) -> Result<Prefix, &'static str> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: Ipv4Addr = addr.parse().map_err(|_| "address")?;
    let len = match len {
        None => 32,
        Some(l) if l.contains('.') => {
            let m = u32::from(l.parse::<Ipv4Addr>().map_err(|_| "netmask")?);
            if m.leading_ones() + m.trailing_zeros() != 32 {
                return Err("netmask (not contiguous)");
            }
            m.leading_ones() as u8
        }
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= 32)
            .ok_or("prefix length")?,
    };
    Prefix::new(addr, len).ok_or("prefix length")
}

/// A port number, or (nft prints them with `-S`) a well-known service name.
pub(crate) fn port(s: &str) -> Result<u16, &'static str> {
    s.parse::<u16>()
        .ok()
        .or_else(|| service_port(s))
        .ok_or("port")
}

/// The port of a service name nft may print (a short list of /etc/services).
pub fn service_port(name: &str) -> Option<u16> {
    const SERVICES: &[(&str, u16)] = &[
        ("ftp-data", 20),
        ("ftp", 21),
        ("ssh", 22),
        ("telnet", 23),
        ("smtp", 25),
        ("domain", 53),
        ("bootps", 67),
        ("bootpc", 68),
        ("tftp", 69),
        ("http", 80),
        ("kerberos", 88),
        ("pop3", 110),
        ("ntp", 123),
        ("imap2", 143),
        ("imap", 143),
        ("snmp", 161),
        ("ldap", 389),
        ("https", 443),
        ("submission", 587),
        ("imaps", 993),
        ("pop3s", 995),
        ("mysql", 3306),
        ("postgresql", 5432),
    ];
    SERVICES.iter().find(|(n, _)| *n == name).map(|&(_, p)| p)
}

/// iptables' `a`, `a:b`, `a:` (to 65535) or `:b` (from 0).
pub(crate) fn port_range_colon(s: &str) -> Result<PortRange, &'static str> {
    let r = match s.split_once(':') {
        None => PortRange::one(port(s)?),
        Some((a, b)) => PortRange {
            lo: if a.is_empty() { 0 } else { port(a)? },
            hi: if b.is_empty() { u16::MAX } else { port(b)? },
        },
    };
    match r.lo <= r.hi {
        true => Ok(r),
        false => Err("port range (first above last)"),
    }
}

/// nft's `a` or `a-b`.
pub(crate) fn port_range_dash(s: &str) -> Result<PortRange, &'static str> {
    let r = match s.split_once('-') {
        None => PortRange::one(port(s)?),
        Some((a, b)) => PortRange {
            lo: port(a)?,
            hi: port(b)?,
        },
    };
    match r.lo <= r.hi {
        true => Ok(r),
        false => Err("port range (first above last)"),
    }
}

/// A protocol name or number; `Ok(None)` for any (`all`, `0`).
pub(crate) fn protocol(s: &str) -> Result<Option<u8>, &'static str> {
    const NAMES: &[(&str, u8)] = &[
        ("icmp", 1),
        ("igmp", 2),
        ("tcp", 6),
        ("udp", 17),
        ("gre", 47),
        ("esp", 50),
        ("ah", 51),
        ("sctp", 132),
        ("udplite", 136),
    ];
    if s == "all" {
        return Ok(None);
    }
    let lower = s.to_ascii_lowercase();
    let n = match NAMES.iter().find(|(n, _)| *n == lower) {
        Some(&(_, n)) => n,
        None => s.parse::<u8>().map_err(|_| "protocol")?,
    };
    Ok((n != 0).then_some(n))
}

/// ICMP types and codes by iptables' names (`iptables -p icmp -h`), the code `None`
/// for a type-only name.
const ICMP_NAMES: &[(&str, u8, Option<u8>)] = &[
    ("echo-reply", 0, None),
    ("pong", 0, None),
    ("destination-unreachable", 3, None),
    ("network-unreachable", 3, Some(0)),
    ("host-unreachable", 3, Some(1)),
    ("protocol-unreachable", 3, Some(2)),
    ("port-unreachable", 3, Some(3)),
    ("fragmentation-needed", 3, Some(4)),
    ("source-route-failed", 3, Some(5)),
    ("network-unknown", 3, Some(6)),
    ("host-unknown", 3, Some(7)),
    ("network-prohibited", 3, Some(9)),
    ("host-prohibited", 3, Some(10)),
    ("TOS-network-unreachable", 3, Some(11)),
    ("TOS-host-unreachable", 3, Some(12)),
    ("communication-prohibited", 3, Some(13)),
    ("host-precedence-violation", 3, Some(14)),
    ("precedence-cutoff", 3, Some(15)),
    ("source-quench", 4, None),
    ("redirect", 5, None),
    ("network-redirect", 5, Some(0)),
    ("host-redirect", 5, Some(1)),
    ("TOS-network-redirect", 5, Some(2)),
    ("TOS-host-redirect", 5, Some(3)),
    ("echo-request", 8, None),
    ("ping", 8, None),
    ("router-advertisement", 9, None),
    ("router-solicitation", 10, None),
    ("time-exceeded", 11, None),
    ("ttl-exceeded", 11, None),
    ("ttl-zero-during-transit", 11, Some(0)),
    ("ttl-zero-during-reassembly", 11, Some(1)),
    ("parameter-problem", 12, None),
    ("ip-header-bad", 12, Some(0)),
    ("required-option-missing", 12, Some(1)),
    ("timestamp-request", 13, None),
    ("timestamp-reply", 14, None),
    ("info-request", 15, None),
    ("info-reply", 16, None),
    ("address-mask-request", 17, None),
    ("address-mask-reply", 18, None),
];

/// iptables' `--icmp-type`: a name, `type` or `type/code`; `Ok(None)` for `any`.
pub(crate) fn icmp_type(s: &str) -> Result<Option<IcmpType>, &'static str> {
    if s == "any" {
        return Ok(None);
    }
    if let Some(&(_, ty, code)) = ICMP_NAMES.iter().find(|(n, ..)| *n == s) {
        return Ok(Some(IcmpType { ty, code }));
    }
    let (t, c) = match s.split_once('/') {
        Some((t, c)) => (t, Some(c)),
        None => (s, None),
    };
    let ty = t.parse::<u8>().map_err(|_| "ICMP type")?;
    let code = c
        .map(|c| c.parse::<u8>().map_err(|_| "ICMP code"))
        .transpose()?;
    Ok(Some(IcmpType { ty, code }))
}

/// nft's name of an ICMP type (the type-only names), for printing.
pub fn icmp_type_name(ty: u8) -> Option<&'static str> {
    ICMP_NAMES
        .iter()
        .find(|&&(n, t, c)| t == ty && c.is_none() && n.contains('-'))
        .map(|&(n, ..)| n)
}

/// nft's `icmp type` value: a type-only name or a number.
pub(crate) fn nft_icmp_type(s: &str) -> Result<u8, &'static str> {
    match ICMP_NAMES.iter().find(|&&(n, _, c)| n == s && c.is_none()) {
        Some(&(_, t, _)) => Ok(t),
        None => s.parse::<u8>().map_err(|_| "ICMP type"),
    }
}

/// A connection state, in either case.
pub(crate) fn ct_state(s: &str) -> Result<CtState, &'static str> {
    let up = s.to_ascii_uppercase();
    CtState::ALL
        .into_iter()
        .find(|c| c.name() == up)
        .ok_or("connection state")
}

/// iptables' `--reject-with`.
pub(crate) fn reject_with(s: &str) -> Result<RejectWith, &'static str> {
    Ok(match s {
        "icmp-net-unreachable" | "net-unreach" => RejectWith::NetUnreachable,
        "icmp-host-unreachable" | "host-unreach" => RejectWith::HostUnreachable,
        "icmp-port-unreachable" | "port-unreach" => RejectWith::PortUnreachable,
        "icmp-proto-unreachable" | "proto-unreach" => RejectWith::ProtoUnreachable,
        "icmp-net-prohibited" | "net-prohib" => RejectWith::NetProhibited,
        "icmp-host-prohibited" | "host-prohib" => RejectWith::HostProhibited,
        "icmp-admin-prohibited" | "admin-prohib" => RejectWith::AdminProhibited,
        "tcp-reset" | "tcp-rst" => RejectWith::TcpReset,
        _ => return Err("REJECT type"),
    })
}

/// nft's ICMP code names after `reject with icmp [type]` (and `icmpx`'s).
pub(crate) fn nft_reject(s: &str) -> Result<RejectWith, &'static str> {
    Ok(match s {
        "net-unreachable" | "no-route" => RejectWith::NetUnreachable,
        "host-unreachable" => RejectWith::HostUnreachable,
        "port-unreachable" => RejectWith::PortUnreachable,
        "prot-unreachable" => RejectWith::ProtoUnreachable,
        "net-prohibited" => RejectWith::NetProhibited,
        "host-prohibited" => RejectWith::HostProhibited,
        "admin-prohibited" => RejectWith::AdminProhibited,
        _ => return Err("REJECT type"),
    })
}

/// TCP flag names (nft's; iptables' are the same in upper case).
pub(crate) const TCP_FLAGS: &[(&str, u8)] = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ecn", 0x40),
    ("cwr", 0x80),
];

/// A comma-separated list of flag names (`ALL`, `NONE` for iptables), either case.
pub(crate) fn tcp_flags(s: &str) -> Result<u8, &'static str> {
    match s {
        "ALL" => return Ok(0x3f),
        "NONE" => return Ok(0),
        _ => {}
    }
    if let Some(hex) = s.strip_prefix("0x") {
        return u8::from_str_radix(hex, 16).map_err(|_| "TCP flags");
    }
    s.split(',').try_fold(0u8, |acc, f| {
        let f = f.to_ascii_lowercase();
        TCP_FLAGS
            .iter()
            .find(|(n, _)| *n == f)
            .map(|&(_, b)| acc | b)
            .ok_or("TCP flag")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{string::ToString, vec, vec::Vec};

    #[test]
    fn prefixes() {
        assert_eq!(prefix("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(prefix("10.1.2.3").unwrap().len(), 32);
        assert_eq!(prefix("10.0.0.0/255.255.0.0").unwrap().len(), 16);
        assert_eq!(
            prefix("10.0.0.0/255.0.255.0"),
            Err("netmask (not contiguous)")
        );
        assert_eq!(prefix("10.0.0.0/33"), Err("prefix length"));
        assert_eq!(prefix("host.example"), Err("address"));
    }

    #[test]
    fn ports_and_names() {
        assert_eq!(
            port_range_colon("1024:").unwrap(),
            PortRange {
                lo: 1024,
                hi: 65535
            }
        );
        assert_eq!(
            port_range_colon(":1023").unwrap(),
            PortRange { lo: 0, hi: 1023 }
        );
        assert!(port_range_colon("9:3").is_err());
        assert_eq!(port_range_dash("ssh").unwrap(), PortRange::one(22));
        assert_eq!(protocol("TCP"), Ok(Some(6)));
        assert_eq!(protocol("all"), Ok(None));
        assert_eq!(
            icmp_type("3/3"),
            Ok(Some(IcmpType {
                ty: 3,
                code: Some(3)
            }))
        );
        assert_eq!(icmp_type("port-unreachable"), icmp_type("3/3"));
        assert_eq!(icmp_type_name(8), Some("echo-request"));
        assert_eq!(tcp_flags("SYN,RST,ACK,FIN"), Ok(0x17));
        assert_eq!(ct_state("established"), Ok(CtState::Established));
    }
}
