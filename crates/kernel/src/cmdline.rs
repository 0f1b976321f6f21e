//! The kernel command line: platform options before `--`, the job after it.
//!
//! ```text
//! console=ttyS0 ip=192.0.2.10/24 gw=192.0.2.1 watchdog=60 epoch_us=1795312150000000 -- vtnt-job=1 kind=ping targets=192.0.2.1
//! ```
//!
//! Options: `ip=ADDR/LEN` or `ip=dhcp` (address, prefix and gateway leased by DHCPv4),
//! `gw=ADDR` (with `ip=dhcp`, it replaces the leased router), `gwmac=MAC` (the gateway's
//! MAC when the host knows it, e.g. a lab's: the guest then sends no ARP request for it;
//! also `gw6=`'s when that is `gw=`'s lab twin), `ip6=ADDR/LEN` and `gw6=ADDR` (a static
//! IPv6 address, its on-link prefix and router, for IPv6 targets) or `ip6=auto` (address
//! and router from the link: router discovery, then SLAAC or DHCPv6, `net::autoconf`;
//! a static `ip6=` wins),
//! `mac=MAC` (the interface's own MAC where no device has one: a process's socket),
//! `watchdog=SECONDS` (default 60, 0 = off),
//! `epoch_us=MICROSECONDS` (the host's UNIX time at boot: records then carry real
//! timestamps; default 0), `hostname=NAME` (the `hostname` of the `cycle-start` line),
//! `virtio_mmio.device=SIZE@BASE:IRQ` (Linux syntax, as Firecracker and QEMU microvm pass
//! it; repeatable), `marks` (boot steps marked on port 0x80 for a tracing host; read by
//! `steps` before parsing). Unknown options are reported and ignored (VMMs add their own);
//! malformed values of known options are errors. The job after `--` is the canonical
//! job spec of `vtnt-jobspec` (or `boot`), kept as one string. QEMU microvm appends its
//! `virtio_mmio.device=` options at the very end, after the job, so those are picked out
//! of the job's words too ([`Cmdline::job_words`] skips them).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Most virtio-mmio devices taken from the command line.
pub const MAX_MMIO: usize = 8;

/// Where the interface's address comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ip {
    /// `ip=ADDR/LEN`: this address and prefix length.
    Static(Ipv4Addr, u8),
    /// `ip=dhcp`: leased from a DHCPv4 server.
    Dhcp,
}

/// The parsed command line.
#[derive(Debug, Clone)]
pub struct Cmdline<'a> {
    /// Our address and prefix length, or DHCP.
    pub ip: Option<Ip>,
    /// The default gateway.
    pub gw: Option<Ipv4Addr>,
    /// Our IPv6 address and on-link prefix length (`ip6=`).
    pub ip6: Option<(Ipv6Addr, u8)>,
    /// The IPv6 router (`gw6=`).
    pub gw6: Option<Ipv6Addr>,
    /// `ip6=auto`: IPv6 from the link (router discovery, SLAAC or DHCPv6).
    pub ip6_auto: bool,
    /// The gateway's MAC address when the host knows it (`gwmac=`): no ARP at boot.
    pub gwmac: Option<[u8; 6]>,
    /// Our own MAC address (`mac=`), where the platform's link has none.
    pub mac: Option<[u8; 6]>,
    /// Watchdog deadline in seconds after boot (0 = none).
    pub watchdog_s: u64,
    /// virtio-mmio devices announced on the command line: (base, size).
    pub mmio: [(u64, u64); MAX_MMIO],
    pub mmio_count: usize,
    /// The host's UNIX time in microseconds when the guest booted (0: unknown).
    pub epoch_us: u64,
    /// The host name for the `cycle-start` line.
    pub hostname: Option<&'a str>,
    /// Everything after `--` (including any `virtio_mmio.device=` words the VMM appended).
    pub job: &'a str,
    /// The first unknown option, if any (reported as a warning).
    pub unknown: Option<&'a str>,
}

/// What is wrong with a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error<'a> {
    /// The command line is not UTF-8.
    NotUtf8,
    /// `option` has a malformed value.
    BadValue {
        option: &'a str,
        reason: &'static str,
    },
    /// Too many virtio-mmio devices.
    TooManyMmio,
}

impl fmt::Display for Error<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotUtf8 => f.write_str("command line is not UTF-8"),
            Error::BadValue { option, reason } => write!(f, "bad option `{option}`: {reason}"),
            Error::TooManyMmio => write!(f, "more than {MAX_MMIO} virtio_mmio.device options"),
        }
    }
}

impl<'a> Cmdline<'a> {
    /// The job's words (without the `virtio_mmio.device=` words VMMs append).
    pub fn job_words(&self) -> impl Iterator<Item = &'a str> {
        self.job
            .split_ascii_whitespace()
            .filter(|w| !w.starts_with("virtio_mmio.device="))
    }

    /// The virtio-mmio devices from the command line.
    #[cfg_attr(feature = "spt", allow(dead_code))]
    pub fn mmio(&self) -> &[(u64, u64)] {
        &self.mmio[..self.mmio_count]
    }

    /// Parses a raw command line.
    pub fn parse(raw: &'a [u8]) -> Result<Cmdline<'a>, Error<'a>> {
        let s = core::str::from_utf8(raw).map_err(|_| Error::NotUtf8)?;
        let mut c = Cmdline {
            ip: None,
            gw: None,
            ip6: None,
            gw6: None,
            ip6_auto: false,
            gwmac: None,
            mac: None,
            watchdog_s: 60,
            mmio: [(0, 0); MAX_MMIO],
            mmio_count: 0,
            epoch_us: 0,
            hostname: None,
            job: "",
            unknown: None,
        };
        let mut in_job = false;
        for word in s.split_ascii_whitespace() {
            if word.starts_with("virtio_mmio.device=") {
                c.option(word)?;
            } else if in_job {
                continue;
            } else if word == "--" {
                in_job = true;
                // `word` is a subslice of `s`: the job is the rest of the line after it
                // (`get`, not indexing: a slice that could panic keeps core's slice-error
                // formatting, ~6 KiB, in the image).
                let at = word.as_ptr() as usize - s.as_ptr() as usize + word.len();
                c.job = s.get(at..).unwrap_or("").trim();
            } else {
                c.option(word)?;
            }
        }
        Ok(c)
    }

    fn option(&mut self, word: &'a str) -> Result<(), Error<'a>> {
        let (key, value) = word.split_once('=').unwrap_or((word, ""));
        let bad = |reason| Error::BadValue {
            option: word,
            reason,
        };
        match key {
            "ip" => {
                if value == "dhcp" {
                    self.ip = Some(Ip::Dhcp);
                    return Ok(());
                }
                if let (IpAddr::V4(addr), len) = parse_prefix(value, 32).map_err(bad)? {
                    self.ip = Some(Ip::Static(addr, len));
                }
            }
            "gw" => {
                self.gw = Some(value.parse().map_err(|_| bad("not an IPv4 address"))?);
            }
            "ip6" if value == "auto" => self.ip6_auto = true,
            "ip6" => {
                if let (IpAddr::V6(addr), len) = parse_prefix(value, 128).map_err(bad)? {
                    if addr.is_unspecified() || addr.is_multicast() {
                        return Err(bad("not a unicast IPv6 address"));
                    }
                    self.ip6 = Some((addr, len));
                }
            }
            "gw6" => {
                self.gw6 = Some(value.parse().map_err(|_| bad("not an IPv6 address"))?);
            }
            "gwmac" => {
                self.gwmac = Some(parse_mac(value).ok_or(bad("expected a MAC address"))?);
            }
            "mac" => {
                self.mac = Some(parse_mac(value).ok_or(bad("expected a MAC address"))?);
            }
            "watchdog" => {
                self.watchdog_s = value.parse().map_err(|_| bad("expected whole seconds"))?;
            }
            "epoch_us" => {
                self.epoch_us = value
                    .parse()
                    .map_err(|_| bad("expected whole microseconds"))?;
            }
            "hostname" => {
                if value.is_empty() || value.contains(['"', '\\']) {
                    return Err(bad("expected a name without quotes or backslashes"));
                }
                self.hostname = Some(value);
            }
            "virtio_mmio.device" => {
                let dev = parse_mmio(value).ok_or(bad("expected SIZE@BASE:IRQ"))?;
                if self.mmio_count == MAX_MMIO {
                    return Err(Error::TooManyMmio);
                }
                self.mmio[self.mmio_count] = dev;
                self.mmio_count += 1;
            }
            // Options VMMs and users commonly pass for Linux guests: accepted silently.
            "console" | "earlyprintk" | "reboot" | "panic" | "pci" | "acpi" | "nomodule"
            | "quiet" | "noapic" | "i8042.noaux" | "i8042.nomux" | "i8042.dumbkbd"
            | "8250.nr_uarts" | "tsc" | "root" | "rw" | "ro" | "marks" => {}
            _ => {
                if self.unknown.is_none() {
                    self.unknown = Some(word);
                }
            }
        }
        Ok(())
    }
}

/// Parses `ADDR/LEN` of the family whose prefixes are `max` bits long (32: IPv4, 128:
/// IPv6), the length 1..=`max`.
fn parse_prefix(value: &str, max: u8) -> Result<(IpAddr, u8), &'static str> {
    let (addr, len) = value.split_once('/').ok_or("expected ADDR/LEN")?;
    let len: u8 = len.parse().map_err(|_| "prefix length is not a number")?;
    match addr.parse::<IpAddr>() {
        Ok(a) if a.is_ipv4() == (max == 32) => match len {
            1.. if len <= max => Ok((a, len)),
            _ => Err("prefix length out of range (1..=32 for IPv4, 1..=128 for IPv6)"),
        },
        _ if max == 32 => Err("not an IPv4 address"),
        _ => Err("not an IPv6 address"),
    }
}

/// Parses `02:00:5e:10:00:01` (six hexadecimal bytes, `:`-separated).
fn parse_mac(v: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = v.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Parses `SIZE@BASE:IRQ[:ID]` with SIZE like `512`, `4K`, `0x200`; BASE hex or decimal.
fn parse_mmio(v: &str) -> Option<(u64, u64)> {
    let (size, rest) = v.split_once('@')?;
    let base = rest.split(':').next()?;
    let (num, mult) = match size.as_bytes().last()? {
        b'K' | b'k' => (&size[..size.len() - 1], 1024),
        b'M' | b'm' => (&size[..size.len() - 1], 1024 * 1024),
        _ => (size, 1),
    };
    let size = parse_u64(num)?.checked_mul(mult)?;
    let base = parse_u64(base)?;
    (size >= 0x100 && base != 0).then_some((base, size))
}

/// Parses a decimal or `0x` hexadecimal number.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_job() {
        let c = Cmdline::parse(
            b"console=ttyS0 ip=192.0.2.10/24 gw=192.0.2.1 watchdog=5 epoch_us=17 hostname=h1 -- vtnt-job=1 kind=ping  targets=192.0.2.1 ",
        )
        .unwrap();
        assert_eq!(c.epoch_us, 17);
        assert_eq!(c.hostname, Some("h1"));
        assert_eq!(c.job, "vtnt-job=1 kind=ping  targets=192.0.2.1");
        assert_eq!(c.ip, Some(Ip::Static(Ipv4Addr::new(192, 0, 2, 10), 24)));
        assert_eq!(c.gw, Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(c.watchdog_s, 5);
        assert_eq!((c.ip6, c.gw6), (None, None));
        let words: Vec<&str> = c.job_words().collect();
        assert_eq!(words, ["vtnt-job=1", "kind=ping", "targets=192.0.2.1"]);
        assert!(c.unknown.is_none());
    }

    #[test]
    fn ip6_and_gw6_are_a_static_ipv6_side() {
        let c = Cmdline::parse(
            b"ip=192.0.2.10/24 gw=192.0.2.1 ip6=2001:db8:64::c000:20a/120 gw6=2001:db8:64::c000:201 -- boot",
        )
        .unwrap();
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert_eq!(c.ip6, Some((v6("2001:db8:64::192.0.2.10"), 120)));
        assert_eq!(c.gw6, Some(v6("2001:db8:64::192.0.2.1")));
        assert!(c.unknown.is_none() && !c.ip6_auto);
        let c = Cmdline::parse(b"ip=dhcp ip6=auto -- boot").unwrap();
        assert!(c.ip6_auto && c.ip6.is_none() && c.unknown.is_none());
    }

    #[test]
    fn ip_dhcp_asks_for_a_lease() {
        let c = Cmdline::parse(b"ip=dhcp -- boot").unwrap();
        assert_eq!(c.ip, Some(Ip::Dhcp));
        assert_eq!(c.gw, None);
    }

    #[test]
    fn mmio_devices_after_the_job_are_options() {
        let c = Cmdline::parse(
            b"-- boot virtio_mmio.device=4K@0xc0001000:5 virtio_mmio.device=512@0xfeb02e00:12",
        )
        .unwrap();
        assert_eq!(c.job_words().collect::<Vec<_>>(), ["boot"]);
        assert_eq!(c.mmio(), [(0xc000_1000, 4096), (0xfeb0_2e00, 512)]);
    }

    #[test]
    fn malformed_values_are_errors_unknown_options_are_not() {
        assert!(matches!(
            Cmdline::parse(b"ip=banana"),
            Err(Error::BadValue {
                option: "ip=banana",
                ..
            })
        ));
        assert!(Cmdline::parse(b"ip=192.0.2.10/33").is_err());
        assert!(Cmdline::parse(b"gw=1.2.3").is_err());
        let c = Cmdline::parse(b"gwmac=02:76:74:6e:74:01 mac=52:54:00:76:74:0a").unwrap();
        assert_eq!(c.gwmac, Some([2, 0x76, 0x74, 0x6e, 0x74, 1]));
        assert_eq!(c.mac, Some([0x52, 0x54, 0, 0x76, 0x74, 0x0a]));
        assert!(Cmdline::parse(b"mac=52:54").is_err());
        for bad in [
            "gwmac=02:76:74:6e:74",
            "gwmac=02:76:74:6e:74:01:02",
            "gwmac=0x:1:2:3:4:5",
            "gwmac=",
            "gwmac=002:1:2:3:4:5",
        ] {
            assert!(Cmdline::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        for bad in [
            "ip6=2001:db8::a",
            "ip6=2001:db8::a/129",
            "ip6=2001:db8::a/0",
            "ip6=192.0.2.1/24",
            "ip6=ff02::1/64",
            "ip6=::/64",
            "gw6=192.0.2.1",
            "gw6=",
        ] {
            assert!(Cmdline::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(Cmdline::parse(b"watchdog=soon").is_err());
        assert!(Cmdline::parse(b"epoch_us=now").is_err());
        assert!(Cmdline::parse(b"hostname=").is_err());
        assert!(Cmdline::parse(b"virtio_mmio.device=@").is_err());
        assert!(Cmdline::parse(&[0xff, 0xfe]).is_err());
        assert!(Cmdline::parse(b"ip=DHCP").is_err());
        let c = Cmdline::parse(b"frobnicate=1 -- boot").unwrap();
        assert_eq!(c.unknown, Some("frobnicate=1"));
        assert_eq!(c.watchdog_s, 60);
    }
}
