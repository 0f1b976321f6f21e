//! Attaching a guest to a running `vtnt lab`: the lab daemon publishes its VM front in
//! `/run/vtnt/lab/<name>/vm.json` (`vtnt_lab_linux::VmInfo`): a UDP endpoint on
//! 127.0.0.1 that speaks raw Ethernet, and the rule its slots follow (guest address,
//! gateway, MAC, QEMU `-netdev dgram` string with a local port per slot; thousands of
//! them, computed one at a time). We take the first slot that no other VM holds, so
//! several VMs can share one lab: holding is an exclusive open-file-description lock on
//! byte `<index>` of `slots.lock` in the lab's state directory, kept by the returned
//! [`SlotLock`] until the VM is gone (testing the port by binding it was racy: two VMs
//! started together could both find it free), and the port must still bind. One
//! `fcntl` per slot tried: claiming the last slot takes milliseconds.
//!
//! A process opens `slots.lock` once for all the slots it holds ([`OPEN`]) and keeps
//! which bytes are its own: a descriptor per slot would make every close of one (each
//! child's `execve` closes its copies) walk every lock on the file, a cost that grows
//! with the square of the guests a process supervises (a density trial spent 300 ms of
//! system time per start at 6,700 guests).

use nix::fcntl::{fcntl, FcntlArg};
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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

/// A lock file as this process has it open: the open, and the bytes it holds.
#[derive(Debug)]
struct Open {
    file: Arc<File>,
    held: HashSet<u32>,
}

/// This process's opens of lock files, by path and inode (a lab restarted at the same
/// path has a new file), each while it holds a slot in it.
static OPEN: Mutex<Option<HashMap<(PathBuf, u64), Open>>> = Mutex::new(None);

/// A slot held for one VM: released when dropped.
#[derive(Debug)]
pub struct SlotLock {
    key: (PathBuf, u64),
    file: Arc<File>,
    index: u32,
}

impl Drop for SlotLock {
    fn drop(&mut self) {
        let _ = fcntl(
            &*self.file,
            FcntlArg::F_OFD_SETLK(&byte_lock(nix::libc::F_UNLCK, self.index)),
        );
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = open.as_mut() {
            if let Some(o) = map.get_mut(&self.key) {
                o.held.remove(&self.index);
                if o.held.is_empty() {
                    map.remove(&self.key);
                }
            }
        }
    }
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
    let opening = |e: std::io::Error| Error::Setup {
        command: format!("opening {}", path.display()),
        stderr: e.to_string(),
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(opening)?;
    let key = (path.clone(), file.metadata().map_err(opening)?.ino());
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let o = open
        .get_or_insert_with(HashMap::new)
        .entry(key.clone())
        .or_insert_with(|| Open {
            file: Arc::new(file),
            held: HashSet::new(),
        });
    for i in 0..info.slots {
        // a byte this process holds is taken; one another process holds, too
        if o.held.contains(&i) || !hold(&o.file, i) {
            continue;
        }
        let file = &o.file;
        let g = info.slot(i);
        let Some(g) = g.filter(|g| UdpSocket::bind(("127.0.0.1", g.local_port)).is_ok()) else {
            let _ = fcntl(
                &**file,
                FcntlArg::F_OFD_SETLK(&byte_lock(nix::libc::F_UNLCK, i)),
            );
            continue;
        };
        o.held.insert(i);
        let lock = SlotLock {
            key,
            file: file.clone(),
            index: i,
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
            lock,
        ));
    }
    if o.held.is_empty() {
        if let Some(m) = open.as_mut() {
            m.remove(&key);
        }
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
        let (first, first_held) = free_slot(name).unwrap();
        assert_eq!(first.address, "10.254.0.10/16");
        // the same process holding two slots holds two different ones, on one descriptor
        let (second, second_held) = free_slot(name).unwrap();
        assert_eq!(second.address, "10.254.0.11/16");
        assert!(Arc::ptr_eq(&first_held.file, &second_held.file));
        drop(first_held);
        let (again, _) = free_slot(name).unwrap();
        assert_eq!(again.address, "10.254.0.10/16");
        drop(held);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
