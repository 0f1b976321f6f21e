//! One interface of the network function: an AF_PACKET socket bound to it, promiscuous,
//! non-blocking, that neither sees its own sends (`PACKET_IGNORE_OUTGOING`) nor frames of
//! other interfaces (bound before it listens to any protocol); frames in and out many per
//! system call (`recvmmsg`, `sendmmsg`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::Error;

/// Receive buffer asked of the kernel per socket: forced with `CAP_NET_ADMIN`, else
/// capped at `net.core.rmem_max` (a container given only `CAP_NET_RAW`).
const RCVBUF: libc::c_int = 4 << 20;

#[derive(Debug)]
pub struct Port {
    pub name: String,
    fd: OwnedFd,
}

fn last(what: &'static str, name: &str) -> Error {
    Error::Socket {
        what,
        interface: name.into(),
        source: io::Error::last_os_error(),
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: &T) -> libc::c_int {
    // SAFETY: `v` points to a live `T` of the length passed.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

impl Port {
    /// Opens `name` in the calling thread's network namespace.
    pub fn open(name: &str) -> Result<Port, Error> {
        let missing = || Error::NoInterface(name.into());
        let c = CString::new(name).map_err(|_| missing())?;
        // SAFETY: `c` is a NUL-terminated string that outlives the call.
        let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if index == 0 {
            return Err(missing());
        }
        // Protocol 0: the socket hears nothing until bound to the interface below.
        // SAFETY: socket(2) takes no pointers; the descriptor is owned from here on.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(last("socket(AF_PACKET)", name));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        if setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
        ) < 0
        {
            return Err(last("PACKET_IGNORE_OUTGOING", name));
        }
        // Best effort: a smaller buffer only drops more under bursts. Without
        // CAP_NET_ADMIN the forced size is refused, and the default (rmem_default,
        // ~200 KiB) would overflow under a burst: ask what rmem_max allows.
        if setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &RCVBUF,
        ) < 0
        {
            setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF);
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = index as i32;
        // SAFETY: `sll` is a sockaddr_ll of the length passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(last("bind", name));
        }
        let mreq = libc::packet_mreq {
            mr_ifindex: index as i32,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        if setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
        ) < 0
        {
            return Err(last("PACKET_MR_PROMISC", name));
        }
        Ok(Port {
            name: name.into(),
            fd,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives up to `lens.len()` waiting frames with one `recvmmsg`, frame `i` into
    /// the `i`th `frame`-byte piece of `bufs`: how many, each one's length in `lens`
    /// (one more than `frame` for a frame that did not fit: the caller drops it); 0
    /// when none is waiting.
    pub fn recv_many(
        &self,
        bufs: &mut [u8],
        frame: usize,
        lens: &mut [usize],
    ) -> io::Result<usize> {
        let mut iov: Vec<libc::iovec> = bufs
            .chunks_exact_mut(frame)
            .take(lens.len())
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let mut msgs = headers(&mut iov);
        // SAFETY: every header points to one iovec of `iov`, each a writable piece of
        // `bufs`; all outlive the call, and the count passed is the headers'.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        for (len, m) in lens.iter_mut().zip(&msgs[..n as usize]) {
            *len = if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                frame + 1
            } else {
                m.msg_len as usize
            };
        }
        Ok(n as usize)
    }

    /// Sends whole Ethernet frames out of the interface, as many per `sendmmsg` as the
    /// kernel takes: how many it refused (a full queue, an interface gone down).
    pub fn send_many(&self, frames: &[&[u8]]) -> usize {
        let mut iov: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr().cast_mut().cast(),
                iov_len: f.len(),
            })
            .collect();
        let mut msgs = headers(&mut iov);
        let (mut at, mut refused) = (0, 0);
        while at < msgs.len() {
            let rest = &mut msgs[at..];
            // SAFETY: every header points to one iovec of `iov` over a frame of
            // `frames`, which the kernel only reads; all outlive the call. A bound
            // packet socket needs no address.
            let n = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    rest.as_mut_ptr(),
                    rest.len() as libc::c_uint,
                    libc::MSG_DONTWAIT as _,
                )
            };
            if n > 0 {
                at += n as usize;
            } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            } else {
                // the kernel refused the first frame left: count it, go on with the next
                (at, refused) = (at + 1, refused + 1);
            }
        }
        refused
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; which are readable.
pub fn poll(fds: [RawFd; 2], timeout_ms: i32) -> io::Result<[bool; 2]> {
    let mut p = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: `p` is an array of two pollfd, the count passed.
    let n = unsafe { libc::poll(p.as_mut_ptr(), 2, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok([false; 2])
        } else {
            Err(e)
        };
    }
    Ok(p.map(|x| x.revents & (libc::POLLIN | libc::POLLERR) != 0))
}
/// One `mmsghdr` for each iovec of `iov` (for `recvmmsg` and `sendmmsg`), each pointing
/// to its own; `iov` must outlive the headers' use.
fn headers(iov: &mut [libc::iovec]) -> Vec<libc::mmsghdr> {
    iov.iter_mut()
        .map(|v| {
            // SAFETY: mmsghdr is plain data; all-zero is a valid value.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect()
}
