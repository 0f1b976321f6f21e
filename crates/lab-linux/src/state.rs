//! Where a running lab keeps its state: `/run/vtnt/lab/<name>/` (override the root with
//! `VTNT_LAB_RUN_DIR`), holding
//!
//! | file | what |
//! |---|---|
//! | `pid` | the daemon's process id |
//! | `topology.toml` | the topology it runs (a copy) |
//! | `state.json` | [`LabState`]: namespace, TUN, vantage point, VM port |
//! | `vm.json` | [`VmInfo`]: how QEMU VMs attach (netdev strings, guest addresses) |
//! | `stats.json` | the emulator's counters, rewritten every second |
//! | `ready` | exists once the daemon serves packets |
//! | `log` | the daemon's stdout and stderr |

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Name of the TUN device inside the namespace.
pub const TUN_NAME: &str = "vtnt0";
/// MAC address the lab's gateway answers ARP with on the VM front.
pub const GATEWAY_MAC: [u8; 6] = [0x02, 0x76, 0x74, 0x6e, 0x74, 0x01];
/// How many VM slots a lab's `vm.json` describes (its vantage LAN is a /24; a front,
/// `crate::front`, has thousands).
pub const VM_SLOTS: u32 = 120;
/// First host number of VM guest addresses inside the vantage point's prefix.
pub const VM_FIRST_HOST: u32 = 10;
/// First host number of a lab's DHCP pool inside the vantage point's prefix (past the
/// static slots `VM_FIRST_HOST..VM_FIRST_HOST + VM_SLOTS`).
pub const DHCP_FIRST_HOST: u32 = VM_FIRST_HOST + VM_SLOTS;
/// How many addresses the DHCP pool has (fewer when the prefix ends first).
pub const DHCP_POOL: u32 = 100;

/// The root of every lab's state directory.
pub fn run_root() -> PathBuf {
    std::env::var_os("VTNT_LAB_RUN_DIR")
        .map_or_else(|| PathBuf::from("/run/vtnt/lab"), PathBuf::from)
}

/// The state directory of lab `name`.
pub fn state_dir(name: &str) -> PathBuf {
    run_root().join(name)
}

/// Lab names become namespace and directory names: letters, digits, `-`, `_`, at most 32.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad lab name `{name}`: use 1-32 letters, digits, `-` or `_`"
        ))
    }
}

/// `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub name: String,
    /// Network namespace (same as the name).
    pub netns: String,
    pub pid: i32,
    /// Name inside the topology file.
    pub topology: String,
    /// Where the topology came from (a path, or `reference`).
    pub topology_source: String,
    pub tun: String,
    /// The vantage point's address inside the namespace, with prefix length.
    pub vp_address: String,
    pub gateway: String,
    /// UDP port on 127.0.0.1 the VM front listens on.
    pub vm_port: u16,
    /// Routes added into the TUN.
    pub routes: Vec<String>,
}

/// One VM attachment slot of `vm.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuestSlot {
    pub index: u32,
    /// Guest address with prefix length, `192.0.2.10/24`.
    pub address: String,
    pub gateway: String,
    pub mac: String,
    /// UDP port on 127.0.0.1 the guest's QEMU binds.
    pub local_port: u16,
    /// `-netdev` value for QEMU >= 7.2 (`dgram`).
    pub netdev: String,
    /// `-netdev` value for older QEMU (`socket,udp=`).
    pub netdev_socket: String,
    /// `-device` value.
    pub device: String,
    /// What the unikernel's command line takes: `ip=<addr>/<len> gw=<gw>`.
    pub cmdline: String,
}

/// `vm.json`: the VM attach contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmInfo {
    /// The daemon's UDP endpoint: `127.0.0.1:<port>`; one Ethernet frame per datagram.
    pub endpoint: String,
    pub port: u16,
    /// The vantage point LAN VMs join.
    pub prefix: String,
    pub gateway: String,
    pub gateway_mac: String,
    /// Pre-computed slots; any other free address of the prefix outside the DHCP pool
    /// works too (learned from the guest's ARP and IPv4 source addresses).
    pub guests: Vec<GuestSlot>,
    /// The addresses the front leases by DHCP (`ip=dhcp`): `FIRST-LAST`, empty when the
    /// prefix is too small for a pool.
    #[serde(default)]
    pub dhcp_range: String,
}

pub fn mac_string(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl VmInfo {
    /// The attach parameters for the vantage point LAN `prefix` (gateway `gateway`), the
    /// daemon's UDP `port`, its DHCP `pool` and `slots` static guest slots.
    pub fn new(
        prefix: vtnt_lab::addr::Prefix,
        gateway: std::net::Ipv4Addr,
        port: u16,
        pool: &[std::net::Ipv4Addr],
        slots: u32,
    ) -> VmInfo {
        let guests = (0..slots)
            .filter_map(|i| {
                let host = VM_FIRST_HOST + i;
                let addr = prefix.nth(host).filter(|a| u32::from(*a) != prefix.last())?;
                let local_port = port.checked_add(u16::try_from(1 + i).ok()?)?;
                let [_, _, hi, lo] = host.to_be_bytes();
                let mac = mac_string(&[0x52, 0x54, 0x00, 0x76, 0x74 + hi, lo]);
                Some(GuestSlot {
                    index: i,
                    address: format!("{addr}/{}", prefix.len()),
                    gateway: gateway.to_string(),
                    netdev: format!(
                        "dgram,id=vtnt{i},local.type=inet,local.host=127.0.0.1,local.port={local_port},remote.type=inet,remote.host=127.0.0.1,remote.port={port}"
                    ),
                    netdev_socket: format!("socket,id=vtnt{i},udp=127.0.0.1:{port},localaddr=127.0.0.1:{local_port}"),
                    device: format!("virtio-net-pci,netdev=vtnt{i},mac={mac}"),
                    cmdline: format!("ip={addr}/{} gw={gateway}", prefix.len()),
                    mac,
                    local_port,
                })
            })
            .collect();
        VmInfo {
            endpoint: format!("127.0.0.1:{port}"),
            port,
            prefix: prefix.to_string(),
            gateway: gateway.to_string(),
            gateway_mac: mac_string(&GATEWAY_MAC),
            guests,
            dhcp_range: match (pool.first(), pool.last()) {
                (Some(a), Some(b)) => format!("{a}-{b}"),
                _ => String::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_have_their_own_address_mac_and_port() {
        let check = |prefix: &str, slots: u32, port: u16, want: usize| {
            let p: vtnt_lab::addr::Prefix = prefix.parse().unwrap();
            let info = VmInfo::new(p, p.nth(1).unwrap(), port, &[], slots);
            assert_eq!(info.guests.len(), want, "{prefix}");
            for key in [
                |g: &GuestSlot| g.address.clone(),
                |g: &GuestSlot| g.mac.clone(),
                |g: &GuestSlot| g.local_port.to_string(),
            ] {
                let mut v: Vec<String> = info.guests.iter().map(key).collect();
                v.sort();
                v.dedup();
                assert_eq!(v.len(), want, "{prefix}: duplicates");
            }
        };
        // a lab's /24: the 120 slots, the same MACs as ever (52:54:00:76:74:<host>)
        check("192.0.2.0/24", VM_SLOTS, 40000, 120);
        let p: vtnt_lab::addr::Prefix = "192.0.2.0/24".parse().unwrap();
        let g = &VmInfo::new(p, p.nth(1).unwrap(), 40000, &[], VM_SLOTS).guests[0];
        assert_eq!(
            (g.address.as_str(), g.mac.as_str()),
            ("192.0.2.10/24", "52:54:00:76:74:0a")
        );
        // a front's LAN holds thousands
        check(
            crate::front::FRONT_PREFIX,
            crate::front::FRONT_SLOTS,
            40000,
            4000,
        );
        // slots stop where the prefix or the port range ends
        check("192.0.2.0/26", VM_SLOTS, 40000, 53);
        check("192.0.2.0/24", VM_SLOTS, 65500, 35);
    }
}
