//! The few kernel calls std does not wrap: opening a TUN or TAP device (TUNSETIFF), entering a
//! network namespace (setns), detaching a daemon (setsid), polling file descriptors and
//! catching SIGTERM/SIGINT. Every `unsafe` block says why it is sound.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Opens `/dev/net/tun` and attaches it to a new layer-3 TUN device `name` without
/// packet information headers, non-blocking.
pub fn open_tun(name: &str) -> io::Result<File> {
    open_dev(name, libc::IFF_TUN)
}

/// Opens the existing TAP device `name` (one Ethernet frame per read and write, no packet
/// information headers) in the network namespace `netns` (`None`: this one), from a
/// thread that enters it; the descriptor is non-blocking. For a guest that is a process
/// (spt), whose tender hands it the descriptor.
pub fn open_tap(netns: Option<&str>, name: &str) -> io::Result<File> {
    let (netns, name) = (netns.map(String::from), name.to_string());
    std::thread::spawn(move || {
        if let Some(ns) = &netns {
            enter_netns(ns)?;
        }
        let c_name = std::ffi::CString::new(name.as_str())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a device name"))?;
        // SAFETY: a live NUL-terminated string; the lookup is in this thread's namespace.
        if unsafe { libc::if_nametoindex(c_name.as_ptr()) } == 0 {
            // TUNSETIFF would create it (for root), leading nowhere
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no TAP device {name}"),
            ));
        }
        open_dev(&name, libc::IFF_TAP)
    })
    .join()
    .map_err(|_| io::Error::other("the thread opening the TAP device panicked"))?
}

/// `/dev/net/tun` attached to device `name` of kind `kind` (`IFF_TUN`, `IFF_TAP`).
fn open_dev(name: &str, kind: libc::c_int) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (kind | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`; `req` is a live, properly
    // aligned ifreq for the duration of the call and the fd is open.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::TUNSETIFF as _,
            &mut req as *mut libc::ifreq,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    set_nonblocking(file.as_raw_fd())?;
    Ok(file)
}

/// Sets O_NONBLOCK on a descriptor.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl F_GETFL/F_SETFL on an fd the caller owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Moves the calling thread into the network namespace `name` (`/run/netns/<name>`).
/// Sockets and devices opened afterwards by this thread live there.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let f = File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns on an open namespace fd; affects only the calling thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Starts a new session (detaches from the controlling terminal). For `pre_exec`.
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments and is async-signal-safe (allowed after fork).
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Makes SIGTERM, SIGINT and SIGHUP set the flag [`stop_requested`] reads.
pub fn catch_stop_signals() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Waits until one of `fds` is readable or `timeout_us` microseconds pass (ppoll, so
/// emulated delays are not rounded up to milliseconds); returns which are readable.
pub fn poll_readable(fds: &[RawFd], timeout_us: u64) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: (timeout_us / 1_000_000) as _,
        tv_nsec: ((timeout_us % 1_000_000) * 1000) as _,
    };
    // SAFETY: `p` is a live array of `p.len()` pollfd structs, `ts` a live timespec; a
    // null signal mask leaves the mask unchanged.
    let rc = unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter()
        .map(|x| x.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
        .collect())
}

/// Sets this thread's timer slack to 1 ns: the kernel may otherwise end a `ppoll` up to
/// 50 us late (the default slack), and every emulated delay would be that much longer.
pub fn precise_timers() -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether process `pid` exists (signal 0).
pub fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// Sends `sig` to process `pid`.
pub fn signal(pid: i32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill has no memory arguments.
    if unsafe { libc::kill(pid, sig) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A raw IPv4 socket of `protocol` (`IPPROTO_ICMP`, `IPPROTO_TCP`, `IPPROTO_RAW`),
/// non-blocking, with IP_HDRINCL: what it sends carries our own IP header; what it
/// receives (every packet of that protocol for this namespace) starts with one.
pub fn raw_socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) has no memory arguments; the returned fd is owned by us.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK,
            protocol,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let on: libc::c_int = 1;
    // SAFETY: IP_HDRINCL takes an int; pointer and length describe `on`.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_HDRINCL,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Sends a complete IPv4 packet (header included) on a raw socket to `dst`.
pub fn raw_send(fd: &OwnedFd, packet: &[u8], dst: std::net::Ipv4Addr) -> io::Result<usize> {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(dst).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: buffer pointer/length describe `packet`; sockaddr pointer/length describe
    // `sin`, alive for the call.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr() as *const libc::c_void,
            packet.len(),
            0,
            &sin as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Receives one packet from a raw socket (IPv4 header included).
pub fn raw_recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: pointer/length describe `buf`, writable for the call.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A raw IPv6 socket for sending complete IPv6 packets (`IPPROTO_RAW`: Linux takes the
/// header from the packet, hop limit, traffic class and flow label included), non-blocking.
pub fn raw6_send_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) has no memory arguments; the returned fd is owned by us.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET6,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK,
            libc::IPPROTO_RAW,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends a complete IPv6 packet (header included) on a [`raw6_send_socket`] to the
/// destination in its header.
pub fn raw6_send(fd: &OwnedFd, packet: &[u8]) -> io::Result<usize> {
    let dst: [u8; 16] = packet
        .get(24..40)
        .and_then(|d| d.try_into().ok())
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero sockaddr_in6 is valid; family and address are set below.
    let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_addr.s6_addr = dst;
    // SAFETY: buffer pointer/length describe `packet`; sockaddr pointer/length describe
    // `sin6`, alive for the call.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            packet.as_ptr() as *const libc::c_void,
            packet.len(),
            0,
            &sin6 as *const libc::sockaddr_in6 as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// An `AF_PACKET` socket receiving every IPv6 packet of this namespace's interfaces
/// whole, from its IPv6 header on (raw IPv6 sockets hand over the payload only, and a
/// rebuilt header would lose the traffic class and flow label), non-blocking.
pub fn packet6_socket() -> io::Result<OwnedFd> {
    let protocol = (libc::ETH_P_IPV6 as u16).to_be();
    // SAFETY: socket(2) has no memory arguments; the returned fd is owned by us.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK,
            libc::c_int::from(protocol),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Receives one IPv6 packet arriving at this namespace from a [`packet6_socket`] (those
/// it sends itself are skipped); `Err(WouldBlock)` when none waits.
pub fn packet6_recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: an all-zero sockaddr_ll is valid; recvfrom fills it.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: pointer/length describe `buf`, writable for the call; `sll` and `len`
        // are live and `len` holds the size of `sll`.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
                &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                &mut len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if sll.sll_pkttype != libc::PACKET_OUTGOING {
            return Ok(n as usize);
        }
    }
}
