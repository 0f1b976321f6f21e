//! A bump in the wire: `sender (s0) — (a0) nf (b0) — (r0) receiver`, for a network
//! function that bridges its two interfaces (`vtnt fw run`). Sender and receiver share
//! one /24 (`.1` and `.2`), the NF's veths carry no address, and every checksum and
//! segmentation offload is off on all four ends (ethtool), so frames reach a user-space
//! bridge as they go on the wire: no 64 KiB super-frames, no checksums left to a NIC.

use crate::{unique_name, Error, NetNs};

/// The three namespaces, deleted on drop.
#[derive(Debug)]
pub struct Bump {
    pub sender: NetNs,
    pub nf: NetNs,
    pub receiver: NetNs,
}

impl Bump {
    /// Builds one with the sender at `<net>.1` and the receiver at `<net>.2` (`net`: the
    /// first three octets, e.g. `100.64.3`); the sender's default route leads to the
    /// receiver, so packets to any address cross the NF.
    pub fn build(prefix: &str, net: &str) -> Result<Bump, Error> {
        let tag = unique_name(prefix);
        let b = Bump {
            sender: NetNs::create(&format!("{tag}-s"))?,
            nf: NetNs::create(&format!("{tag}-n"))?,
            receiver: NetNs::create(&format!("{tag}-d"))?,
        };
        b.sender.veth("s0", &b.nf, "a0")?;
        b.nf.veth("b0", &b.receiver, "r0")?;
        b.sender
            .ip(&["addr", "add", &format!("{net}.1/24"), "dev", "s0"])?;
        b.receiver
            .ip(&["addr", "add", &format!("{net}.2/24"), "dev", "r0"])?;
        for (ns, dev) in [
            (&b.sender, "s0"),
            (&b.nf, "a0"),
            (&b.nf, "b0"),
            (&b.receiver, "r0"),
        ] {
            let args = [
                "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
            ];
            let out = ns.exec("ethtool", &args)?;
            if !out.status.success() {
                return Err(Error::Setup {
                    command: format!("ethtool {} in {}", args.join(" "), ns.name()),
                    stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                });
            }
        }
        b.sender
            .ip(&["route", "add", "default", "via", &format!("{net}.2")])?;
        Ok(b)
    }
}
