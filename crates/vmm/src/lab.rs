//! Attaching a guest to a running `vtnt lab`: the lab daemon publishes its VM front in
//! `/run/vtnt/lab/<name>/vm.json` (`vtnt_lab_linux::VmInfo`): a UDP endpoint on
//! 127.0.0.1 that speaks raw Ethernet, and the rule its slots follow (guest address,
//! gateway, MAC, QEMU `-netdev dgram` string with a local port per slot; thousands of
//! them, computed one at a time). We take the first slot that no other VM holds, so
//! several VMs can share one lab: holding is an exclusive open-file-description lock on
//! byte `<index>` of `slots.lock` in the lab's state directory, kept by the returned
//! [`SlotLock`] until the VM is gone (testing the port by binding it was racy: two VMs
//! started together could both find it free), and the port must still bind. One open
//! and one `fcntl` per slot tried: claiming the last slot takes milliseconds.

use nix::fcntl::{fcntl, FcntlArg};
use std::fs::{File, OpenOptions};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};

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

/// A slot held for one VM: released when dropped (closing the file drops its locks).
#[derive(Debug)]
pub struct SlotLock {
    _held: File,
}

/// An OFD lock request on byte `index` (`F_WRLCK` to take it, `F_UNLCK` to give it back).
fn byte_lock(kind: i32, index: u32) -> nix::libc::flock {
    nix::libc::flock {
        l_type: kind as i16,
        l_whence: nix::libc::SEEK_SET as i16,
        l_start: i64::from(index),
        l_len: 1,
        l_pid: 0,
    }
}

/// Takes byte `index` of the lock file open as `file`, if no other open of it holds it.
fn hold(file: &File, index: u32) -> bool {
    fcntl(
        file,
        FcntlArg::F_OFD_SETLK(&byte_lock(nix::libc::F_WRLCK, index)),
    )
    .is_ok()
}

/// The first slot of lab `name` that no other VM holds, held until the lock is dropped.
pub fn free_slot(name: &str) -> Result<(Slot, SlotLock), Error> {
    let setup = |e: String| Error::Setup {
        command: format!("reading lab `{name}`'s vm.json"),
        stderr: e,
    };
    let info = vtnt_lab_linux::vm_info(name).map_err(|e| setup(e.to_string()))?;
    let remote: SocketAddr = info
        .endpoint
        .parse()
        .map_err(|_| setup(format!("bad VM front endpoint `{}`", info.endpoint)))?;
    let path = vtnt_lab_linux::state::state_dir(name).join("slots.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::Setup {
            command: format!("opening {}", path.display()),
            stderr: e.to_string(),
        })?;
    for i in 0..info.slots {
        if !hold(&file, i) {
            continue;
        }
        let g = info.slot(i);
        let Some(g) = g.filter(|g| UdpSocket::bind(("127.0.0.1", g.local_port)).is_ok()) else {
            let _ = fcntl(
                &file,
                FcntlArg::F_OFD_SETLK(&byte_lock(nix::libc::F_UNLCK, i)),
            );
            continue;
        };
        let id = g
            .netdev
            .split(',')
            .find_map(|kv| kv.strip_prefix("id="))
            .unwrap_or("vtnt0")
            .to_string();
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
            SlotLock { _held: file },
        ));
    }
    Err(Error::Setup {
        command: format!("attaching to lab `{name}`"),
        stderr: "every VM slot of the lab is in use".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use vtnt_lab_linux::state::{Lan, VmInfo, DHCP_POOL, VM_SLOTS};

    /// A lab state directory with a front's `vm.json` (no daemon: only the slots are
    /// read), its first 7999 slots held by another open of the lock file.
    #[test]
    fn claiming_the_last_slot_takes_milliseconds() {
        let root = std::env::temp_dir().join(format!("vtnt-slots-{}", std::process::id()));
        let name = "slots";
        // the only test of this binary touching VTNT_LAB_RUN_DIR
        std::env::set_var("VTNT_LAB_RUN_DIR", &root);
        let dir = vtnt_lab_linux::state::state_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        let lan = Lan::front("10.254.0.0/16".parse().unwrap(), (0, VM_SLOTS), DHCP_POOL);
        // a port whose slots' ports are free enough on a test host
        let port = 20000;
        let info = VmInfo::new(lan.prefix, lan.gateway, port, &[lan]);
        std::fs::write(dir.join("vm.json"), serde_json::to_string(&info).unwrap()).unwrap();
        let other = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("slots.lock"))
            .unwrap();
        let mut all = byte_lock(nix::libc::F_WRLCK, 0);
        all.l_len = i64::from(VM_SLOTS - 1);
        fcntl(&other, FcntlArg::F_OFD_SETLK(&all)).unwrap();

        let t = Instant::now();
        let (slot, held) = free_slot(name).unwrap();
        let took = t.elapsed();
        eprintln!("claiming slot {} took {took:?}", VM_SLOTS - 1);
        let last = info.slot(VM_SLOTS - 1).unwrap();
        assert_eq!(
            (slot.address.as_str(), slot.local.port()),
            (last.address.as_str(), last.local_port)
        );
        assert!(took.as_millis() < 500, "{took:?}");
        // every slot held now; the first comes back when its holder goes
        assert!(free_slot(name).is_err());
        drop(other);
        let (first, _) = free_slot(name).unwrap();
        assert_eq!(first.address, "10.254.0.10/16");
        drop(held);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
