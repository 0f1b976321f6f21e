//! A remote site on this host, for `vtnt bench fleet`: a network namespace joined to the
//! host through a link with the site's round-trip time and a download bandwidth, so that
//! connections leaving from it ([`Site::relay`]) cross a path like the paper's (seed 000:
//! Belgium to France, Poland, Canada, Singapore, Australia).
//!
//! This kernel has no `netem` (nor modules to load one), so the delay is a userspace
//! delay line, on real packets: the host's end `fh<pid><i>` (198.18.i.1/30) is a veth
//! whose peer `fa…` carries no address; a second veth joins `fb…` to the site's
//! `fn…` (198.18.i.2/30) in its namespace. Two packet sockets on `fa` and `fb` pass every
//! frame across after half the round-trip time, each way, in order (GSO frames whole,
//! with their virtio-net headers, so offloads stay on). TCP sees the real round trip:
//! its handshake, slow start and window limits are those of the path. The download
//! bandwidth is `tbf` on the host's end (frames toward the site), which this kernel has.

use std::fs::File;
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::fcntl::{Flock, FlockArg};
use vtnt_netns::NetNs;

/// The largest frame a packet socket hands over with GSO: 64 KiB of payload, headers.
const FRAME_MAX: usize = 65_536 + 256;

/// A site: its namespace, its link's ends, its delay line; all removed on drop.
pub struct Site {
    pub netns: NetNs,
    /// The host's address on the link (where the site reaches the broker and images).
    pub host_ip: Ipv4Addr,
    /// The site's own address.
    pub site_ip: Ipv4Addr,
    links: [String; 2],
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The site number's lock: its addresses are fixed, one holder per host.
    _held: Flock<File>,
}

/// Where the sites' locks are.
const LOCKS: &str = "/run/vtnt/sites";

/// Holds site number `i` for this process, or says who has it.
fn hold(i: u8) -> anyhow::Result<Flock<File>> {
    std::fs::create_dir_all(LOCKS).with_context(|| format!("creating {LOCKS}"))?;
    let path = Path::new(LOCKS).join(format!("site-{i}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut held = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(f, _)| {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        drop(f);
        anyhow::anyhow!(
            "site {i} (198.18.{i}.0/30) is in use by process {} on this host: one \
             `vtnt bench fleet` at a time",
            holder.trim()
        )
    })?;
    held.set_len(0)?;
    std::io::Write::write_all(&mut *held, std::process::id().to_string().as_bytes())?;
    Ok(held)
}

impl Site {
    /// Site number `i` (0..64): a namespace named `name`, `rtt` round trip to the host,
    /// `download_bps` toward the site.
    pub fn up(i: u8, name: &str, rtt: Duration, download_bps: u64) -> anyhow::Result<Site> {
        anyhow::ensure!(i < 64, "at most 64 sites");
        let held = hold(i)?;
        let netns = NetNs::create(name)?;
        let pid = std::process::id();
        let [h, a, b, n] = ["h", "a", "b", "n"].map(|r| format!("f{r}{pid}{i}"));
        let host_ip = Ipv4Addr::new(198, 18, i, 1);
        let site_ip = Ipv4Addr::new(198, 18, i, 2);
        let ip = |args: &[&str]| vtnt_netns::ip(args).map(drop);
        let mut site = Site {
            netns,
            host_ip,
            site_ip,
            links: [h.clone(), b.clone()],
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            _held: held,
        };
        ip(&["link", "add", &h, "type", "veth", "peer", "name", &a])?;
        ip(&[
            "link", "add", &b, "type", "veth", "peer", "name", &n, "netns", name,
        ])?;
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &h])?;
        for dev in [&h, &a, &b] {
            // the delay line's ends carry no address and should say nothing themselves
            if dev != &h {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
            }
            ip(&["link", "set", dev, "up"])?;
        }
        site.netns
            .ip(&["addr", "add", &format!("{site_ip}/30"), "dev", &n])?;
        site.netns.ip(&["link", "set", &n, "up"])?;
        let rate = format!("{}kbit", download_bps / 1000);
        let out = std::process::Command::new("tc")
            .args(["qdisc", "add", "dev", &h, "root", "tbf", "rate", &rate])
            .args(["burst", "64kb", "latency", "2s"])
            .output()
            .context("running tc (iproute2)")?;
        if !out.status.success() {
            bail!(
                "tc qdisc add dev {h} root tbf rate {rate}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let one_way = rtt / 2;
        let (sa, sb) = (packet::socket(&a)?, packet::socket(&b)?);
        let (sa, sb) = (Arc::new(sa), Arc::new(sb));
        for (from, to) in [(sa.clone(), sb.clone()), (sb, sa)] {
            let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
            let stop = site.stop.clone();
            site.threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; FRAME_MAX];
                while !stop.load(Ordering::Relaxed) {
                    if let Some(n) = packet::recv(&from, &mut buf) {
                        if tx
                            .send((Instant::now() + one_way, buf[..n].to_vec()))
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }));
            site.threads.push(std::thread::spawn(move || {
                while let Ok((due, frame)) = rx.recv() {
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    packet::send(&to, &frame);
                }
            }));
        }
        Ok(site)
    }
}

impl Site {
    /// A relay from this host to `to` across the site's link: it listens on 127.0.0.1 of
    /// this namespace (the address it returns) and dials `to` from inside the site's
    /// namespace for each connection, so the connection's long leg crosses the link with
    /// its round trip and bandwidth. The relay stops with the site.
    pub fn relay(&self, to: SocketAddr) -> anyhow::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0").context("a relay's listener")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let netns = PathBuf::from("/run/netns").join(self.netns.name());
        let stop = self.stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((local, _)) => {
                        let netns = netns.clone();
                        std::thread::spawn(move || {
                            if let Ok(remote) = dial_from(&netns, to) {
                                splice(local, remote);
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(addr)
    }
}

/// Connects to `to` from namespace `netns` (this thread joins it).
fn dial_from(netns: &Path, to: SocketAddr) -> anyhow::Result<TcpStream> {
    let ns = std::fs::File::open(netns).with_context(|| format!("{}", netns.display()))?;
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).context("joining the site")?;
    let s = TcpStream::connect(to).with_context(|| format!("connecting to {to}"))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Copies both ways between `a` and `b` until either side closes.
fn splice(a: TcpStream, b: TcpStream) {
    let _ = a.set_nodelay(true);
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let one = std::thread::spawn(move || copy(a, b2));
    copy(b, a2);
    let _ = one.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for Site {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // each veth goes with either end; the namespace goes with `netns`
        for l in &self.links {
            let _ = vtnt_netns::ip(&["link", "del", l]);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The packet sockets of the delay line: the only `unsafe` here, libc calls on sockets
/// this module opens and owns.
mod packet {
    #![allow(unsafe_code)]

    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    use anyhow::{bail, Context};

    /// `SOL_PACKET` options (linux/if_packet.h).
    const PACKET_VNET_HDR: libc::c_int = 15;
    const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

    /// A packet socket on interface `dev` that passes GSO frames whole (with their
    /// virtio-net header), does not see what it sends itself, and wakes every 100 ms.
    pub fn socket(dev: &str) -> anyhow::Result<OwnedFd> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2); the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(proto)) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("a packet socket");
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let on: libc::c_int = 1;
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        let set = |level, name, value: *const libc::c_void, len: usize| {
            // SAFETY: `value` points at `len` readable bytes.
            let r = unsafe {
                libc::setsockopt(fd.as_raw_fd(), level, name, value, len as libc::socklen_t)
            };
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let int = (&on as *const libc::c_int).cast();
        let size = std::mem::size_of::<libc::c_int>();
        set(libc::SOL_PACKET, PACKET_VNET_HDR, int, size).context("PACKET_VNET_HDR")?;
        set(libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, int, size)
            .context("PACKET_IGNORE_OUTGOING")?;
        set(
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>(),
        )
        .context("SO_RCVTIMEO")?;
        let name = std::ffi::CString::new(dev)?;
        // SAFETY: `name` is a NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            bail!("no interface {dev}");
        }
        // SAFETY: an all-zero sockaddr_ll is valid; the fields that matter are set below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = index as i32;
        // SAFETY: `addr` is a sockaddr_ll of the length given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("binding a packet socket to {dev}"));
        }
        Ok(fd)
    }

    /// One frame into `buf`; `None` on a timeout or an error.
    pub fn recv(fd: &OwnedFd, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        usize::try_from(n).ok().filter(|n| *n > 0)
    }

    /// Sends one frame (lost on an error, as on a wire).
    pub fn send(fd: &OwnedFd, frame: &[u8]) {
        // SAFETY: `frame` is readable for its length.
        unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site's round trip is the one asked for, give or take a millisecond (a TCP
    /// handshake from the host to a listener in the site), and it carries a download at
    /// its bandwidth.
    #[test]
    fn a_site_has_its_round_trip_and_carries_tcp() {
        if let Some(why) = vtnt_testkit::missing_root_or(&["ip", "tc", "bash"]) {
            vtnt_testkit::skip_or_fail(vtnt_testkit::test_name!(), &why, None);
            return;
        }
        let name = vtnt_netns::unique_name("fsite");
        let site = Site::up(63, &name, Duration::from_millis(40), 100_000_000).unwrap();
        let ns = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        let (tx, rx) = mpsc::channel();
        let listener = std::thread::spawn(move || {
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let l = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
            tx.send(l.local_addr().unwrap().port()).unwrap();
            for _ in 0..5 {
                drop(l.accept().unwrap());
            }
        });
        let port = rx.recv().unwrap();
        let handshakes: Vec<Duration> = (0..5)
            .map(|_| {
                let t0 = Instant::now();
                drop(std::net::TcpStream::connect((site.site_ip, port)).unwrap());
                t0.elapsed()
            })
            .collect();
        listener.join().unwrap();
        let best = handshakes.iter().min().unwrap();
        assert!(
            (Duration::from_millis(40)..Duration::from_millis(43)).contains(best),
            "{handshakes:?}"
        );
        // 4 MiB from the host to the site: at 100 Mbit/s, at least 0.33 s
        let listener = std::net::TcpListener::bind((site.host_ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            use std::io::Write;
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&vec![7u8; 4 << 20]).unwrap();
        });
        let t0 = Instant::now();
        let out = site
            .netns
            .exec(
                "bash",
                &[
                    "-c",
                    &format!(
                        "exec 3<>/dev/tcp/{}/{port} && cat <&3 | wc -c",
                        site.host_ip
                    ),
                ],
            )
            .unwrap();
        let took = t0.elapsed();
        server.join().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            (4 << 20).to_string()
        );
        assert!(took >= Duration::from_millis(330), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        eprintln!("handshakes {handshakes:?}; 4 MiB in {took:?}");
        // its addresses are fixed: a second holder is refused, naming this process
        let err = Site::up(63, "vtntsitetwice", Duration::from_millis(1), 1_000_000)
            .err()
            .expect("site 63 twice");
        assert!(
            err.to_string()
                .contains(&format!("in use by process {}", std::process::id())),
            "{err}"
        );
        assert!(!std::path::Path::new("/run/netns/vtntsitetwice").exists());
    }
}
