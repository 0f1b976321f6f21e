//! Packets as an interface sees them: an AF_PACKET socket bound to one interface with
//! a TPACKET_V3 receive ring (the probe-rate and firewall benchmarks' wire capture, and
//! [`crate::host_stamps`]' capture of both directions on a runtime's host-side device). The kernel writes frames and their receive stamps into
//! memory shared with us, one block at a time, so no system call is made per packet and
//! a burst of 200,000 packets/s is absorbed by the ring (64 MiB, about 1.5 s of them at
//! that rate) rather than lost. Losses that do happen are the kernel's own count
//! ([`Ring::drops`]).
//!
//! The stamp is the kernel's software receive stamp: with timestamps switched on
//! (`SO_TIMESTAMPNS`, which this socket does), taken when the packet enters the
//! receiving stack (for a veth, inside the sender's transmit call), before any queue on
//! the receiving side. CLOCK_REALTIME, so only differences between stamps mean anything.

use std::ffi::CString;
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const BLOCK_SIZE: usize = 1 << 20;
const BLOCKS: usize = 64;
/// A frame slot's size for the kernel's bookkeeping (V3 packs frames tighter).
const FRAME_SIZE: usize = 2048;
/// How long the kernel fills a block before handing it over anyway, milliseconds.
const RETIRE_MS: u32 = 5;

/// One received frame.
pub struct Frame<'a> {
    /// The kernel's receive stamp, nanoseconds (CLOCK_REALTIME).
    pub stamp_ns: u64,
    /// Sent by this host rather than received (`sll_pkttype` PACKET_OUTGOING).
    pub outgoing: bool,
    /// The packet from its IP header on.
    pub packet: &'a [u8],
}

/// An AF_PACKET socket with its receive ring mapped; unmapped and closed on drop.
pub struct Ring {
    fd: OwnedFd,
    map: NonNull<u8>,
    /// The next block to read.
    next: usize,
}

impl Ring {
    /// The blocks of the ring: [`Ring::read`] hands over one at a time, so this many reads
    /// take in everything the ring holds.
    pub const BLOCKS: usize = BLOCKS;

    /// Opens a ring for the IPv4 packets arriving on `ifname` in the calling thread's
    /// network namespace.
    pub fn open(ifname: &str) -> io::Result<Ring> {
        Ring::open_with(ifname, false)
    }

    /// Opens a ring for the packets crossing `ifname` both ways (those this host sends
    /// out of it marked [`Frame::outgoing`]) when `outgoing`, else for the IPv4 packets
    /// arriving. The kernel shows outgoing packets only to sockets of every protocol, so
    /// the first ring holds ARP and IPv6 too: tell them by [`Frame::packet`]'s first byte.
    pub fn open_with(ifname: &str, outgoing: bool) -> io::Result<Ring> {
        let name = CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
        // SAFETY: `name` is a NUL-terminated string that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // Protocol 0: no packet is queued before bind() names the interface.
        // SAFETY: socket(2) takes plain integers.
        let raw =
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor socket(2) just returned, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        set(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V3 as libc::c_int,
        )?;
        // Cheaper than skipping outgoing frames ourselves; kernels before 4.20 lack it,
        // and the frames' packet type still tells.
        if !outgoing {
            let _ = set::<libc::c_int>(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1);
        }
        set::<libc::c_int>(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: BLOCKS as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (BLOCK_SIZE / FRAME_SIZE * BLOCKS) as u32,
            tp_retire_blk_tov: RETIRE_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, req)?;
        // SAFETY: a new shared mapping of the ring the kernel just set up for `fd`, of
        // exactly its size; no memory of ours is touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BLOCK_SIZE * BLOCKS,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = Ring {
            fd,
            map: NonNull::new(map.cast()).ok_or_else(io::Error::last_os_error)?,
            next: 0,
        };
        // SAFETY: sockaddr_ll is plain integers; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        let protocol = if outgoing {
            libc::ETH_P_ALL
        } else {
            libc::ETH_P_IP
        };
        sll.sll_protocol = (protocol as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: bind(2) reads `size_of::<sockaddr_ll>()` bytes of the live `sll`.
        let rc = unsafe {
            libc::bind(
                ring.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ring)
    }

    /// Hands every frame of the next full block to `each`, waiting up to `timeout` for
    /// one. Returns how many frames there were (0 when no block came).
    pub fn read(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(Frame<'_>),
    ) -> io::Result<usize> {
        let block = self.block(self.next);
        // SAFETY: the block's status word is a u32 at a fixed offset inside the mapping,
        // 4-aligned (blocks start on pages); the kernel and we access it atomically.
        let status = unsafe { &*block.as_ptr().add(STATUS).cast::<AtomicU32>() };
        if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: poll(2) reads and writes the one live `pfd`.
            if unsafe { libc::poll(&mut pfd, 1, ms) } < 0 {
                let e = io::Error::last_os_error();
                return if e.kind() == io::ErrorKind::Interrupted {
                    Ok(0)
                } else {
                    Err(e)
                };
            }
            if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return Ok(0);
            }
        }
        // SAFETY: the block is ours until its status goes back to TP_STATUS_KERNEL below:
        // the kernel does not write it meanwhile. The slice is not used after that.
        let bytes = unsafe { std::slice::from_raw_parts(block.as_ptr(), BLOCK_SIZE) };
        let frames = frames(bytes, &mut each);
        status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.next = (self.next + 1) % BLOCKS;
        frames
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed TPACKET_V3 block"))
    }

    /// Frames the kernel could not put into the ring (PACKET_STATISTICS `tp_drops`)
    /// since the last call (reading the counters resets them).
    pub fn drops(&self) -> io::Result<u64> {
        // SAFETY: plain integers; all-zero is a valid value.
        let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: getsockopt(2) writes at most `len` bytes into the live `st`.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.tp_drops as u64)
    }

    fn block(&self, i: usize) -> NonNull<u8> {
        // SAFETY: i < BLOCKS, so the offset stays inside the mapping.
        unsafe { self.map.add(i * BLOCK_SIZE) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `open` made; nothing borrows it any more.
        unsafe { libc::munmap(self.map.as_ptr().cast(), BLOCK_SIZE * BLOCKS) };
    }
}

/// Offsets of a block's status word, frame count and first frame.
const HDR: usize = offset_of!(libc::tpacket_block_desc, hdr);
const STATUS: usize = HDR + offset_of!(libc::tpacket_hdr_v1, block_status);
const NUM_PKTS: usize = HDR + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const FIRST: usize = HDR + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
/// Where the frame's sockaddr_ll follows its header.
const SLL: usize = size_of::<libc::tpacket3_hdr>().next_multiple_of(libc::TPACKET_ALIGNMENT);

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Walks the frames of one block (None when a header points outside it).
fn frames(block: &[u8], each: &mut impl FnMut(Frame<'_>)) -> Option<usize> {
    let n = u32_at(block, NUM_PKTS)? as usize;
    let mut off = u32_at(block, FIRST)? as usize;
    for i in 0..n {
        let field = |o: usize| off.checked_add(o);
        let sec = u32_at(block, field(offset_of!(libc::tpacket3_hdr, tp_sec))?)?;
        let nsec = u32_at(block, field(offset_of!(libc::tpacket3_hdr, tp_nsec))?)?;
        let snaplen = u32_at(block, field(offset_of!(libc::tpacket3_hdr, tp_snaplen))?)?;
        let net = u16_at(block, field(offset_of!(libc::tpacket3_hdr, tp_net))?)?;
        let pkttype = *block.get(field(SLL + offset_of!(libc::sockaddr_ll, sll_pkttype))?)?;
        let start = field(net as usize)?;
        each(Frame {
            stamp_ns: sec as u64 * 1_000_000_000 + nsec as u64,
            outgoing: pkttype == libc::PACKET_OUTGOING,
            packet: block.get(start..start.checked_add(snaplen as usize)?)?,
        });
        let next = u32_at(
            block,
            field(offset_of!(libc::tpacket3_hdr, tp_next_offset))?,
        )?;
        if next == 0 && i + 1 < n {
            return None;
        }
        off = field(next as usize)?;
    }
    Some(n)
}

/// setsockopt(2) with one value.
fn set<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: T) -> io::Result<()> {
    // SAFETY: setsockopt(2) reads `size_of::<T>()` bytes of the live `value`.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
