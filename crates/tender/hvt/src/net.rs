//! The guest's NICs (one, or two for a network function), each as raw Ethernet frames on
//! a non-blocking file descriptor: a connected UDP socket carrying one frame per datagram
//! (what the lab's VM front and QEMU's `-netdev dgram` speak), or an existing TAP device.
//! Also the monitor's one wait, `ppoll` on their descriptors with a sub-millisecond
//! timeout.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use crate::{Error, Net};

/// An open network backend.
pub(crate) enum Backend {
    Udp(UdpSocket),
    Tap(File),
}

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags (a short), padded to
/// the kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl Backend {
    /// Opens what `net` names.
    pub fn open(net: &Net) -> Result<Backend, Error> {
        match net {
            Net::Udp { local, remote } => {
                let fail = |what: &str, e: io::Error| {
                    Error::Net(format!("udp={local},{remote}: cannot {what}: {e}"))
                };
                let sock = UdpSocket::bind(local).map_err(|e| fail("bind", e))?;
                sock.connect(remote).map_err(|e| fail("connect", e))?;
                sock.set_nonblocking(true)
                    .map_err(|e| fail("make the socket non-blocking", e))?;
                Ok(Backend::Udp(sock))
            }
            Net::Tap { ifname } => open_tap(ifname).map(Backend::Tap),
        }
    }

    /// The descriptor to wait on.
    pub fn fd(&self) -> RawFd {
        match self {
            Backend::Udp(s) => s.as_raw_fd(),
            Backend::Tap(f) => f.as_raw_fd(),
        }
    }

    /// Sends one frame; `false` if it could not leave now (full queue, no peer).
    pub fn send(&mut self, frame: &[u8]) -> bool {
        let sent = match self {
            Backend::Udp(s) => s.send(frame),
            Backend::Tap(f) => f.write(frame),
        };
        matches!(sent, Ok(n) if n == frame.len())
    }

    /// Receives one frame into `buf`; `None` when nothing is waiting. A frame longer than
    /// `buf` comes back truncated with its length capped at `buf.len()`.
    pub fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        // A connected UDP socket reports an earlier ICMP "port unreachable" once, as
        // ECONNREFUSED, and EINTR may interrupt either: both are worth another try, a few
        // times at most.
        for _ in 0..4 {
            let got = match self {
                Backend::Udp(s) => s.recv(buf),
                Backend::Tap(f) => f.read(buf),
            };
            match got {
                Ok(n) => return Some(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return None,
            }
        }
        None
    }
}

/// Attaches to the existing TAP device `ifname`.
fn open_tap(ifname: &str) -> Result<File, Error> {
    let fail = |what: String| Error::Net(format!("tap={ifname}: {what}"));
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(fail(format!(
            "not an interface name (1 to {} bytes)",
            libc::IFNAMSIZ - 1
        )));
    }
    // TUNSETIFF would create a missing device (for root), which then leads nowhere: a
    // misspelt name must be an error instead.
    if !std::path::Path::new("/sys/class/net").join(ifname).exists() {
        return Err(fail(
            "no such network interface (create it first: ip tuntap add dev IFNAME mode tap)".into(),
        ));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| fail(format!("cannot open /dev/net/tun: {e}")))?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name);
    // SAFETY: TUNSETIFF reads (and may write back) one `struct ifreq`; `req` is a live,
    // exclusively borrowed value with that layout and size, and the fd is open.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReq) };
    if r < 0 {
        return Err(fail(format!(
            "cannot attach to the TAP device (TUNSETIFF): {}",
            io::Error::last_os_error()
        )));
    }
    Ok(file)
}

/// Waits up to `timeout` for any of `fds` to become readable (or report an error); with
/// none, just sleeps. Returns which are ready, bit `i` for `fds[i]` (at most 64). A signal
/// (the watchdog's) ends the wait early.
pub(crate) fn wait_readable(fds: &[RawFd], timeout: Duration) -> u64 {
    let ts = libc::timespec {
        // `as _`: time_t is deprecated as a name on musl, and 32 or 64 bits wide.
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .take(64)
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` holds `pfds.len()` live pollfds (none: the kernel only sleeps) and
    // `ts` is a live timespec; a null signal mask keeps the thread's own.
    let n = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n <= 0 {
        return 0;
    }
    let ready = pfds.iter().enumerate();
    ready.fold(0, |r, (i, p)| r | u64::from(p.revents != 0) << i)
}
