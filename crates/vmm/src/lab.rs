//! Attaching a guest to a running `vtnt lab`: the lab daemon publishes its VM front in
//! `/run/vtnt/lab/<name>/vm.json` (`vtnt_lab_linux::VmInfo`): a UDP endpoint on
//! 127.0.0.1 that speaks raw Ethernet, and pre-computed slots (guest address, gateway,
//! MAC, QEMU `-netdev dgram` string with a local port per slot). We take the first slot
//! that no other VM holds, so several VMs can share one lab: holding is an exclusive
//! `flock` on `slot-<index>.lock` in the lab's state directory, kept by the returned
//! [`SlotLock`] until the VM is gone (testing the port by binding it was racy: two VMs
//! started together could both find it free), and the port must still bind.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;

use crate::Error;

/// One VM slot of the lab's VM front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Guest address with prefix length (`192.0.2.10/24`).
    pub address: String,
    pub gateway: String,
    /// The gateway's MAC (the lab's VM front answers for it): the guest needs no ARP.
    pub gateway_mac: String,
    pub mac: String,
    /// QEMU `-netdev` value (`dgram,id=...`).
    pub netdev: String,
    /// The netdev's `id=`.
    pub id: String,
    /// The same UDP ends for a VMM that takes them as addresses (`vtnt-monitor`): the
    /// guest's local end and the lab's VM front.
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// A slot held for one VM: released when dropped.
#[derive(Debug)]
pub struct SlotLock {
    _held: Flock<File>,
}

/// Holds slot `index` of the lab whose state directory is `dir`, if no one else does.
fn hold(dir: &Path, index: u32) -> Option<SlotLock> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("slot-{index}.lock")))
        .ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .ok()
        .map(|held| SlotLock { _held: held })
}

/// The first slot of lab `name` that no other VM holds, held until the lock is dropped.
pub fn free_slot(name: &str) -> Result<(Slot, SlotLock), Error> {
    let info = vtnt_lab_linux::vm_info(name).map_err(|e| Error::Setup {
        command: format!("reading lab `{name}`'s vm.json"),
        stderr: e.to_string(),
    })?;
    let dir = vtnt_lab_linux::state::state_dir(name);
    for g in info.guests {
        let Some(lock) = hold(&dir, g.index) else {
            continue;
        };
        if UdpSocket::bind(("127.0.0.1", g.local_port)).is_err() {
            continue;
        }
        let id = g
            .netdev
            .split(',')
            .find_map(|kv| kv.strip_prefix("id="))
            .unwrap_or("vtnt0")
            .to_string();
        let remote: SocketAddr = info.endpoint.parse().map_err(|_| Error::Setup {
            command: format!("reading lab `{name}`'s vm.json"),
            stderr: format!("bad VM front endpoint `{}`", info.endpoint),
        })?;
        return Ok((
            Slot {
                local: SocketAddr::from((Ipv4Addr::LOCALHOST, g.local_port)),
                remote,
                gateway_mac: info.gateway_mac.clone(),
                address: g.address,
                gateway: g.gateway,
                mac: g.mac,
                netdev: g.netdev,
                id,
            },
            lock,
        ));
    }
    Err(Error::Setup {
        command: format!("attaching to lab `{name}`"),
        stderr: "every VM slot of the lab is in use".into(),
    })
}
