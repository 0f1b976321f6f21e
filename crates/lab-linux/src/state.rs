//! Where a running lab keeps its state: `/run/vtnt/lab/<name>/` (override the root with
//! `VTNT_LAB_RUN_DIR`), holding
//!
//! | file | what |
//! |---|---|
//! | `pid` | the daemon's process id |
//! | `topology.toml` | the topology it runs (a copy) |
//! | `state.json` | [`LabState`]: namespace, TUN, vantage point, VM port |
//! | `vm.json` | [`VmInfo`]: how VMs attach (the front's port, its LANs, the slots' rule) |
//! | `stats.json` | the emulator's counters, rewritten every second |
//! | `control` | the socket `vtnt lab change` sends changes to ([`crate::changes`]) |
//! | `changes.jsonl` | the changes applied, one JSON record a line ([`crate::changes`]) |
//! | `ready` | exists once the daemon serves packets |
//! | `log` | the daemon's stdout and stderr |

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vtnt_lab::addr::Prefix;
/// A guest's IPv6 address is the twin of its IPv4 one, in the lab's IPv6 range (the VM
/// front's dual-stack convention, docs/lab.md "Attaching VMs").
pub use vtnt_lab::addr::{to_v6, LAB6_PREFIX};

use crate::Error;

/// Name of the TUN device inside the namespace.
pub const TUN_NAME: &str = "vtnt0";
/// MAC address the lab's gateway answers ARP with on the VM front.
pub const GATEWAY_MAC: [u8; 6] = [0x02, 0x76, 0x74, 0x6e, 0x74, 0x01];
/// How many static VM slots a front has (a lab's and `vtnt lab front`'s alike): far more
/// guests than a host runs at once, so that density runs end at a limit of the runtime's,
/// not of the front's.
pub const VM_SLOTS: u32 = 16000;
/// How many addresses a front's DHCP pool has.
pub const DHCP_POOL: u32 = 8000;
/// First host number of the static slots on each LAN of a front.
pub const VM_FIRST_HOST: u32 = 10;
/// Slots a lab keeps on its vantage point LAN (hosts `.10` to `.129` of a /24, fewer when
/// the prefix ends first), as labs always had; the others are on its VM LAN.
pub const LAN_SLOTS: u32 = 120;
/// First host number of a lab's DHCP pool on its vantage point LAN (past its slots).
pub const DHCP_FIRST_HOST: u32 = VM_FIRST_HOST + LAN_SLOTS;
/// Leases a lab keeps on its vantage point LAN (`.130` to `.229` of a /24).
pub const LAN_POOL: u32 = 100;
/// The default VM LAN of a lab (`vtnt lab up --vm-prefix`): outside the lab ranges, so no
/// valid topology can overlap it, and apart from `vtnt lab front`'s LAN.
pub const VM_PREFIX: &str = "10.253.0.0/16";
/// Host number, on the last LAN of a front, of the first full VM the runtimes number
/// (`VmInfo::first_guest`): past every slot and lease.
pub const FIRST_GUEST: u32 = VM_FIRST_HOST + VM_SLOTS + DHCP_POOL;

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

/// What a front's `state.json` says in place of a lab's topology name (`vtnt lab front`,
/// `vtnt-forward-linux`): runtimes count its daemon as part of the network they run on.
pub const FRONT_TOPOLOGY: &str = "front";

/// Writes `v` to `path` as JSON, whole or not at all (a temporary file renamed over it).
pub fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), Error> {
    let tmp = path.with_extension("tmp");
    fs::write(
        &tmp,
        serde_json::to_string_pretty(v).map_err(|e| Error::msg(e.to_string()))? + "\n",
    )?;
    fs::rename(&tmp, path)?;
    Ok(())
}

/// A daemon that serves: `state.json`, `vm.json` and `pid` into `dir`, then `ready`, which
/// `up` waits for (so the others are whole when it appears).
pub fn publish(dir: &Path, state: &LabState, vm: &VmInfo) -> Result<(), Error> {
    write_json(&dir.join("state.json"), state)?;
    write_json(&dir.join("vm.json"), vm)?;
    fs::write(dir.join("pid"), format!("{}\n", state.pid))?;
    fs::write(dir.join("ready"), "")?;
    Ok(())
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
    /// The vantage point's IPv6 twin inside the namespace, with prefix length
    /// (`2001:db8:64::c000:202/120`); absent where the lab has no IPv6 (started by a vtnt
    /// before the TUN front was dual stack, or on a host without IPv6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vp_address6: Option<String>,
    /// IPv6 routes added into the TUN (the twins of `routes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes6: Vec<String>,
}

/// One VM attachment slot, computed from `vm.json` by [`VmInfo::slot`].
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

/// One LAN of a VM front as the front runs it (`vm.json` has it as [`LanInfo`]): slots
/// `first_slot..first_slot + slots` at hosts `VM_FIRST_HOST..`, then its DHCP `pool`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lan {
    pub prefix: Prefix,
    /// The guests' gateway, on-link: the lab's router (proxy ARP answers for it).
    pub gateway: Ipv4Addr,
    pub first_slot: u32,
    pub slots: u32,
    pub pool: Vec<Ipv4Addr>,
}

impl Lan {
    /// `prefix` behind `gateway` with up to `slots` slots from slot `first_slot` on and up
    /// to `pool` leases from host `pool_first` on, as many as the prefix holds (never its
    /// broadcast address; never a `reserved` one in the pool).
    pub fn new(
        prefix: Prefix,
        gateway: Ipv4Addr,
        reserved: &[Ipv4Addr],
        (first_slot, slots): (u32, u32),
        (pool_first, pool): (u32, u32),
    ) -> Lan {
        let usable = |h: u32| prefix.nth(h).filter(|a| u32::from(*a) != prefix.last());
        let fit = (0..slots)
            .take_while(|k| usable(VM_FIRST_HOST + k).is_some())
            .count() as u32;
        let pool = (pool_first..pool_first.saturating_add(pool))
            .map_while(usable)
            .filter(|a| !reserved.contains(a) && *a != gateway)
            .collect();
        Lan {
            prefix,
            gateway,
            first_slot,
            slots: fit,
            pool,
        }
    }

    /// A lab's LANs: the vantage point LAN (`vp`, its address never leased) keeps its
    /// [`LAN_SLOTS`] slots and [`LAN_POOL`] leases as far as it holds them; the VM LAN
    /// `vm_lan` (gateway: its host 1) holds the rest of [`VM_SLOTS`] and [`DHCP_POOL`], the
    /// leases from host `VM_FIRST_HOST + VM_SLOTS` on, whatever the vantage prefix is.
    pub fn lab(vp: &vtnt_lab::VantagePoint, vm_lan: Prefix) -> Vec<Lan> {
        let reserved = [vp.gateway, vp.addr];
        let lan = Lan::new(
            vp.prefix,
            vp.gateway,
            &reserved,
            (0, LAN_SLOTS),
            (DHCP_FIRST_HOST, LAN_POOL),
        );
        let vm = Lan::front(
            vm_lan,
            (lan.slots, VM_SLOTS - lan.slots),
            DHCP_POOL - lan.pool.len() as u32,
        );
        vec![lan, vm]
    }

    /// A LAN of its own (gateway: host 1) with `slots` from slot `.0` and `pool` leases
    /// past host `VM_FIRST_HOST + VM_SLOTS`: `vtnt lab front`'s, a lab's VM LAN.
    pub fn front(prefix: Prefix, slots: (u32, u32), pool: u32) -> Lan {
        let gateway = prefix.nth(1).unwrap_or(prefix.network());
        Lan::new(
            prefix,
            gateway,
            &[],
            slots,
            (VM_FIRST_HOST + VM_SLOTS, pool),
        )
    }
}

/// A LAN of `vm.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanInfo {
    /// `192.0.2.0/24`.
    pub prefix: String,
    /// The guests' gateway on it (`gw=` of their command lines, the DHCP router).
    pub gateway: String,
    /// Its slots: `first_slot..first_slot + slots`, slot `first_slot + k` at host
    /// `VM_FIRST_HOST + k` (`.10 + k`).
    pub first_slot: u32,
    pub slots: u32,
    /// Its DHCP addresses, `FIRST-LAST` (the broadcast and reserved addresses skipped),
    /// empty when it has none.
    pub dhcp_range: String,
    pub dhcp_leases: u32,
}

/// `vm.json`: the VM attach contract, compact: the slots are computed ([`VmInfo::slot`])
/// from the LANs, so thousands of them cost every reader a few hundred bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmInfo {
    /// The daemon's UDP endpoint: `127.0.0.1:<port>`; one Ethernet frame per datagram.
    pub endpoint: String,
    pub port: u16,
    /// The vantage point LAN and its gateway: the first hop of every guest's trace (a
    /// front: its own LAN).
    pub prefix: String,
    pub gateway: String,
    pub gateway_mac: String,
    /// The LANs guests join, in slot order (a lab: its vantage point LAN, then its VM
    /// LAN; a front: one). Any other free address of a LAN outside its DHCP pool works too
    /// (learned from the guest's ARP and IPv4 source addresses).
    pub lans: Vec<LanInfo>,
    /// How many slots there are, `0..slots`.
    pub slots: u32,
    /// Slot `i`'s local UDP port is `first_port + i` (past the front's port, or below it
    /// when the range would pass 65535).
    pub first_port: u16,
    /// Host number of the first full VM the runtimes number on the last LAN (past its
    /// slots and pool).
    pub first_guest: u32,
}

pub fn mac_string(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The local port of slot 0 for `slots` slots beside the front's `port`: the ports after
/// it, or the ones below it when those would pass 65535.
pub fn first_port(port: u16, slots: u32) -> u16 {
    if u32::from(port) + slots <= u32::from(u16::MAX) {
        port + 1
    } else {
        u16::try_from(u32::from(port).saturating_sub(slots)).unwrap_or(1)
    }
}

impl VmInfo {
    /// The attach contract of a front on UDP `port` whose guests' first hop is `gateway`
    /// of `prefix`, with `lans`.
    pub fn new(prefix: Prefix, gateway: Ipv4Addr, port: u16, lans: &[Lan]) -> VmInfo {
        let slots = lans.iter().map(|l| l.slots).sum();
        VmInfo {
            endpoint: format!("127.0.0.1:{port}"),
            port,
            prefix: prefix.to_string(),
            gateway: gateway.to_string(),
            gateway_mac: mac_string(&GATEWAY_MAC),
            lans: lans
                .iter()
                .map(|l| LanInfo {
                    prefix: l.prefix.to_string(),
                    gateway: l.gateway.to_string(),
                    first_slot: l.first_slot,
                    slots: l.slots,
                    dhcp_range: match (l.pool.first(), l.pool.last()) {
                        (Some(a), Some(b)) => format!("{a}-{b}"),
                        _ => String::new(),
                    },
                    dhcp_leases: l.pool.len() as u32,
                })
                .collect(),
            slots,
            first_port: first_port(port, slots),
            first_guest: FIRST_GUEST,
        }
    }

    /// The LAN full VMs are numbered on (from host [`VmInfo::first_guest`]): the last one.
    pub fn guest_lan(&self) -> Option<&LanInfo> {
        self.lans.last()
    }

    /// Slot `i` (None past the last): its address (host `VM_FIRST_HOST + k` of its LAN),
    /// gateway, MAC (`52:54:00:76:74+hi:lo` of `VM_FIRST_HOST + i`: unique per slot, and a
    /// lab's first slots keep the MACs of their host numbers), local port and the strings
    /// QEMU and the unikernel take.
    pub fn slot(&self, i: u32) -> Option<GuestSlot> {
        let lan = self
            .lans
            .iter()
            .find(|l| i >= l.first_slot && i - l.first_slot < l.slots)?;
        let prefix: Prefix = lan.prefix.parse().ok()?;
        let addr = prefix.nth(VM_FIRST_HOST + i - lan.first_slot)?;
        let (port, gateway) = (self.port, &lan.gateway);
        let local_port = u16::try_from(u32::from(self.first_port) + i).ok()?;
        let [_, _, hi, lo] = (VM_FIRST_HOST + i).to_be_bytes();
        let mac = mac_string(&[0x52, 0x54, 0x00, 0x76, 0x74 + hi, lo]);
        Some(GuestSlot {
            index: i,
            address: format!("{addr}/{}", prefix.len()),
            gateway: gateway.clone(),
            netdev: format!(
                "dgram,id=vtnt{i},local.type=inet,local.host=127.0.0.1,local.port={local_port},remote.type=inet,remote.host=127.0.0.1,remote.port={port}"
            ),
            netdev_socket: format!(
                "socket,id=vtnt{i},udp=127.0.0.1:{port},localaddr=127.0.0.1:{local_port}"
            ),
            device: format!("virtio-net-pci,netdev=vtnt{i},mac={mac}"),
            cmdline: format!("ip={addr}/{} gw={gateway}", prefix.len()),
            mac,
            local_port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn vp(addr: &str, gateway: &str) -> vtnt_lab::VantagePoint {
        let a: vtnt_lab::addr::AddrLen = addr.parse().unwrap();
        vtnt_lab::VantagePoint {
            port: vtnt_lab::Port(0),
            name: "vp".into(),
            addr: a.addr,
            prefix: a.prefix(),
            gateway: gateway.parse().unwrap(),
            router: "gw".into(),
            vm_lan: None,
        }
    }

    fn lab(addr: &str, gateway: &str, port: u16) -> (Vec<Lan>, VmInfo) {
        let v = vp(addr, gateway);
        let lans = Lan::lab(&v, VM_PREFIX.parse().unwrap());
        let info = VmInfo::new(v.prefix, v.gateway, port, &lans);
        (lans, info)
    }

    /// Every slot has its own address, MAC and port, on a LAN whose gateway is on-link.
    fn check_slots(info: &VmInfo) -> Vec<GuestSlot> {
        let slots: Vec<GuestSlot> = (0..info.slots).map(|i| info.slot(i).unwrap()).collect();
        assert_eq!(info.slot(info.slots), None);
        for key in [
            |g: &GuestSlot| g.address.clone(),
            |g: &GuestSlot| g.mac.clone(),
            |g: &GuestSlot| g.local_port.to_string(),
        ] {
            let v: HashSet<String> = slots.iter().map(key).collect();
            assert_eq!(v.len(), slots.len(), "duplicates");
        }
        for g in &slots {
            let a: vtnt_lab::addr::AddrLen = g.address.parse().unwrap();
            assert!(a.prefix().contains(g.gateway.parse().unwrap()), "{g:?}");
            assert_ne!(a.addr, g.gateway.parse::<Ipv4Addr>().unwrap());
            assert_ne!(g.local_port, info.port);
        }
        slots
    }

    #[test]
    fn a_lab_has_thousands_of_slots_whatever_its_vantage_prefix() {
        let (lans, info) = lab("192.0.2.2/24", "192.0.2.1", 40000);
        let slots = check_slots(&info);
        assert_eq!(slots.len() as u32, VM_SLOTS);
        // the first 120 as labs always had them
        let g = &slots[0];
        assert_eq!(
            (g.address.as_str(), g.mac.as_str(), g.local_port),
            ("192.0.2.10/24", "52:54:00:76:74:0a", 40001)
        );
        assert_eq!(g.cmdline, "ip=192.0.2.10/24 gw=192.0.2.1");
        assert_eq!(slots[119].address, "192.0.2.129/24");
        // then the VM LAN, its host 1 the gateway
        let g = &slots[120];
        assert_eq!(g.cmdline, "ip=10.253.0.10/16 gw=10.253.0.1");
        let g = &slots[4999];
        assert_eq!(
            (g.address.as_str(), g.mac.as_str(), g.local_port),
            ("10.253.19.25/16", "52:54:00:76:87:91", 45000)
        );
        assert!(g.netdev.contains("local.port=45000") && g.netdev.contains("remote.port=40000"));
        // and the pool: 100 on the vantage LAN, the rest past the VM LAN's slots
        assert_eq!(lans[0].pool.len(), 100);
        assert_eq!(lans[0].pool[0], Ipv4Addr::new(192, 0, 2, 130));
        assert_eq!(lans[1].pool.len(), 7900);
        assert_eq!(lans[1].pool[0], Ipv4Addr::new(10, 253, 62, 138));
        assert_eq!(info.lans[1].dhcp_range, "10.253.62.138-10.253.93.101");
        let hosts: HashSet<Ipv4Addr> = lans.iter().flat_map(|l| l.pool.clone()).collect();
        assert_eq!(hosts.len() as u32, DHCP_POOL);
        for g in &slots {
            let a: vtnt_lab::addr::AddrLen = g.address.parse().unwrap();
            assert!(!hosts.contains(&a.addr), "a slot in the pool: {g:?}");
        }
        assert_eq!(info.first_guest, 24010);
        assert_eq!(info.guest_lan().unwrap().prefix, VM_PREFIX);

        // small vantage prefixes keep what fits, the VM LAN takes the rest
        for (addr, on_lan) in [("192.0.2.66/26", 53), ("192.0.2.2/29", 0)] {
            let (lans, info) = lab(
                addr,
                &addr.replace(".66/26", ".65").replace(".2/29", ".1"),
                50000,
            );
            assert_eq!(check_slots(&info).len() as u32, VM_SLOTS, "{addr}");
            assert_eq!(lans[0].slots, on_lan, "{addr}");
            assert!(lans[0].pool.is_empty(), "{addr}");
            assert_eq!(lans[1].pool.len() as u32, DHCP_POOL, "{addr}");
        }
    }

    #[test]
    fn slot_ports_stay_below_65536() {
        assert_eq!(first_port(40000, VM_SLOTS), 40001);
        assert_eq!(first_port(65500, VM_SLOTS), 65500 - VM_SLOTS as u16);
        let (_, info) = lab("192.0.2.2/24", "192.0.2.1", 65500);
        let slots = check_slots(&info);
        assert_eq!(slots.len() as u32, VM_SLOTS);
        assert_eq!(slots[VM_SLOTS as usize - 1].local_port, 65499);
    }

    #[test]
    fn a_front_lan_holds_every_slot_and_the_pool() {
        // any /16 apart from the lab's VM LAN (a front's own is its business)
        let p: Prefix = "10.254.0.0/16".parse().unwrap();
        let lan = Lan::front(p, (0, VM_SLOTS), DHCP_POOL);
        assert_eq!((lan.slots, lan.pool.len() as u32), (VM_SLOTS, DHCP_POOL));
        let info = VmInfo::new(p, lan.gateway, 40000, &[lan]);
        let slots = check_slots(&info);
        assert_eq!(slots[0].cmdline, "ip=10.254.0.10/16 gw=10.254.0.1");
        // the contract is small whatever the number of slots
        assert!(serde_json::to_string(&info).unwrap().len() < 1000);
    }
}
