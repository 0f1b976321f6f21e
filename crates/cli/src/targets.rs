//! Targets from the command line and from target files: parsing, name resolution, and the
//! safety rule that only loopback and the lab's ranges may be probed without
//! `--allow-public`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::path::Path;

/// Networks a target may be in without `--allow-public`: loopback and the lab's ranges
/// (RFC 5737 documentation prefixes and RFC 6598 shared space, never routed publicly).
pub const SAFE_NETS: [(Ipv4Addr, u8); 5] = [
    (Ipv4Addr::new(127, 0, 0, 0), 8),
    (Ipv4Addr::new(192, 0, 2, 0), 24),
    (Ipv4Addr::new(198, 51, 100, 0), 24),
    (Ipv4Addr::new(203, 0, 113, 0), 24),
    (Ipv4Addr::new(100, 64, 0, 0), 10),
];

/// Whether `addr` lies in loopback or a lab range.
pub fn is_safe(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => SAFE_NETS.iter().any(|(net, len)| {
            let mask = u32::MAX.checked_shl(32 - *len as u32).unwrap_or(0);
            u32::from(a) & mask == u32::from(*net) & mask
        }),
        IpAddr::V6(a) => a.is_loopback(),
    }
}

/// A target that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTarget {
    /// `FILE:LINE` for target files, `argument N` on the command line.
    pub place: String,
    pub text: String,
    pub reason: String,
}

impl fmt::Display for BadTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: target `{}`: {}", self.place, self.text, self.reason)
    }
}

fn resolve(text: &str, allow_public: bool) -> Result<IpAddr, String> {
    let addr = match text.parse::<IpAddr>() {
        Ok(a) => a,
        Err(_) => {
            if text.is_empty() || text.contains(char::is_whitespace) {
                return Err("not an address or host name".into());
            }
            let mut addrs = (text, 0)
                .to_socket_addrs()
                .map_err(|e| format!("cannot resolve host name ({e})"))?;
            addrs
                .find(|a| a.is_ipv4())
                .map(|a| a.ip())
                .ok_or_else(|| "host name has no IPv4 address".to_string())?
        }
    };
    if addr.is_ipv6() {
        return Err("IPv6 targets are not probed yet".into());
    }
    if addr.is_unspecified() || addr.is_multicast() || addr == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Err("not a unicast address".into());
    }
    if !allow_public && !is_safe(addr) {
        return Err(format!(
            "{addr} is outside loopback and the lab's ranges; pass --allow-public to probe it"
        ));
    }
    Ok(addr)
}

/// Resolves every target of the command line and of the target file. Good targets come
/// back in order; bad ones are listed with their place so the caller can report them and
/// probe the rest.
pub fn collect(
    args: &[String],
    file: Option<&Path>,
    allow_public: bool,
) -> anyhow::Result<(Vec<IpAddr>, Vec<BadTarget>)> {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let mut take = |place: String, text: &str| match resolve(text, allow_public) {
        Ok(a) => good.push(a),
        Err(reason) => bad.push(BadTarget {
            place,
            text: text.to_string(),
            reason,
        }),
    };
    for (i, a) in args.iter().enumerate() {
        take(format!("argument {}", i + 1), a);
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading target file {}: {e}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let t = line.split('#').next().unwrap_or("").trim();
            if !t.is_empty() {
                take(format!("{}:{}", path.display(), n + 1), t);
            }
        }
    }
    Ok((good, bad))
}

/// The local address the kernel would use to reach `dst`.
pub fn source_for(dst: IpAddr) -> anyhow::Result<Ipv4Addr> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
    sock.connect((dst, 33434))
        .map_err(|e| anyhow::anyhow!("no route to {dst}: {e}"))?;
    match sock.local_addr()?.ip() {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(_) => anyhow::bail!("no IPv4 source address for {dst}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ranges() {
        for a in [
            "127.0.0.1",
            "192.0.2.9",
            "198.51.100.1",
            "203.0.113.255",
            "100.127.0.1",
        ] {
            assert!(is_safe(a.parse().unwrap()), "{a}");
        }
        for a in ["1.1.1.1", "100.128.0.1", "192.0.3.1", "10.0.0.1"] {
            assert!(!is_safe(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn bad_lines_are_reported_with_their_line_and_the_rest_kept() {
        let dir = std::env::temp_dir().join(format!("vtnt-targets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("t.txt");
        std::fs::write(
            &f,
            "192.0.2.1\n\n# comment\nnot a host!\n8.8.8.8\n203.0.113.7 # x\n",
        )
        .unwrap();
        let (good, bad) = collect(&["198.51.100.3".into()], Some(&f), false).unwrap();
        assert_eq!(good.len(), 3);
        assert_eq!(bad.len(), 2);
        assert!(bad[0].place.ends_with("t.txt:4"), "{}", bad[0]);
        assert!(bad[1].reason.contains("--allow-public"), "{}", bad[1]);
        let (good, bad) = collect(&["8.8.8.8".into()], None, true).unwrap();
        assert_eq!((good.len(), bad.len()), (1, 0));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
