//! `vtnt lab front`: a VM front onto a real network. VMs attach exactly as to a lab (the
//! same `vm.json` slots, ARP, DHCP: [`VmFront`]), on a private LAN of their own; their
//! probes leave through raw sockets in the upstream namespace (the host's, or a named
//! one) from its single address, rewritten by `vtnt-forward`'s traceroute-aware NAT,
//! which holds one probing policy and one rate budget for every VM behind it and hands
//! each reply (ICMP errors by the probe they quote) back to the VM that sent the probe.
//!
//! IPv6 too: a guest's IPv6 address is the twin (`2001:db8:64::a.b.c.d`) of its IPv4
//! one on the front's LAN; its IPv6 probes leave from the upstream's IPv6 address (its
//! route source towards the lab's IPv6 range or the Internet, or `--public6`) through a
//! raw IPv6 socket, and replies are read whole (traffic class and flow label included)
//! from an `AF_PACKET` socket. Without an upstream IPv6 address, IPv6 probes are refused.
//!
//! Containers and processes need no front (`--net host`); a front is how many VMs share
//! one address.
//!
//! This crate is the Linux driver of the sans-IO forwarder, as `vtnt-linux` is the
//! engine's: the VM front, the state files and the raw kernel calls are `vtnt-lab-linux`'s
//! (a front is started and stopped like a lab: `vtnt_lab_linux::front_up`, `down`).

use std::collections::HashMap;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant as Wall};

use vtnt_forward::{Config, Forwarder, InstanceId};
use vtnt_lab::addr::{from_v6, Prefix};
use vtnt_lab::Instant;

use vtnt_lab_linux::state::{
    publish, write_json, LabState, Lan, VmInfo, DHCP_POOL, FRONT_TOPOLOGY, VM_SLOTS,
};
use vtnt_lab_linux::vm::VmFront;
use vtnt_lab_linux::{sys, Error, FrontSettings};

/// The private LAN of the VMs behind a front: room for [`VM_SLOTS`] guests, the
/// [`DHCP_POOL`] after them and numbered full VMs past those; apart from a lab's default
/// VM LAN (`vtnt_lab_linux::state::VM_PREFIX`).
pub const FRONT_PREFIX: &str = "10.254.0.0/16";

/// What `vtnt lab serve-front` is told.
#[derive(Debug, Clone)]
pub struct FrontOptions {
    pub name: String,
    pub state_dir: PathBuf,
    pub front: FrontSettings,
}

/// What the front did (`stats.json`).
#[derive(Debug, Default, serde::Serialize)]
struct FrontStats {
    vm_frames_in: u64,
    vm_frames_out: u64,
    /// Probes sent, of both families; `probes_out6` of them IPv6.
    probes_out: u64,
    probes_out6: u64,
    /// Packets the forwarder refused (its counters say why).
    refused: u64,
    /// Packets from a source off the front's LAN (never handed to the forwarder; a source
    /// on it but not the guest's own is the forwarder's `refused_spoofed`).
    spoofed: u64,
    /// Replies handed to a VM, of both families; `replies_in6` of them IPv6.
    replies_in: u64,
    replies_in6: u64,
    send_errors: u64,
}

/// Runs the front until a stop signal.
pub fn serve_front(opts: &FrontOptions) -> Result<(), Error> {
    let (o, name, state_dir) = (&opts.front, &opts.name, &opts.state_dir);
    sys::catch_stop_signals();
    let prefix: Prefix = FRONT_PREFIX
        .parse()
        .map_err(|e| Error::msg(format!("{FRONT_PREFIX}: {e:?}")))?;
    let lans = [Lan::front(prefix, (0, VM_SLOTS), DHCP_POOL)];
    let gateway = lans[0].gateway;
    let udp = UdpSocket::bind(("127.0.0.1", o.vm_port))
        .map_err(|e| Error::msg(format!("VM front: bind 127.0.0.1:{}: {e}", o.vm_port)))?;
    udp.set_nonblocking(true)?;
    let vm_port = udp.local_addr()?.port();
    if let Some(ns) = &o.upstream {
        sys::enter_netns(ns).map_err(|e| Error::msg(format!("entering namespace {ns}: {e}")))?;
    }
    let public = match o.public {
        // only an address the upstream has: replies to any other never come back here
        Some(p) if UdpSocket::bind((p, 0)).is_err() => {
            return Err(Error::msg(format!(
                "--public {p}: not an address of the upstream network namespace"
            )))
        }
        Some(p) => p,
        None => vtnt_linux::route_source(Ipv4Addr::new(203, 0, 113, 1))
            .or_else(|_| vtnt_linux::route_source(Ipv4Addr::new(192, 0, 2, 1)))
            .map_err(|e| Error::msg(format!("no address to probe from upstream: {}", e.0)))?,
    };
    let public6 = match o.public6 {
        Some(p) if UdpSocket::bind((p, 0)).is_err() => {
            return Err(Error::msg(format!(
                "--public6 {p}: not an address of the upstream network namespace"
            )))
        }
        Some(p) => Some(p),
        // the lab's IPv6 range, else the Internet's; none: IPv6 probes are refused
        None => [
            LAB6_PROBE,
            Ipv6Addr::new(0x2001, 0x4860, 0, 0, 0, 0, 0, 0x8888),
        ]
        .into_iter()
        .find_map(|d| match vtnt_linux::route_source_ip(IpAddr::V6(d)) {
            Ok(IpAddr::V6(a)) if !a.is_unicast_link_local() => Some(a),
            _ => None,
        }),
    };
    let mut config = Config::new(public);
    config.public6 = public6;
    config.pps = o.pps;
    config.burst = (o.pps / 100).max(1);
    config.policy.allow_public = o.allow_public;
    let mut fwd = Forwarder::new(config).map_err(|e| Error::msg(format!("forwarder: {e}")))?;
    let send =
        sys::raw_socket(libc::IPPROTO_RAW).map_err(|e| Error::msg(format!("raw socket: {e}")))?;
    let icmp = sys::raw_socket(libc::IPPROTO_ICMP)
        .map_err(|e| Error::msg(format!("raw ICMP socket: {e}")))?;
    let tcp = sys::raw_socket(libc::IPPROTO_TCP)
        .map_err(|e| Error::msg(format!("raw TCP socket: {e}")))?;
    let v6 = match public6 {
        Some(_) => Some((
            sys::raw6_send_socket().map_err(|e| Error::msg(format!("raw IPv6 socket: {e}")))?,
            sys::packet6_socket()
                .map_err(|e| Error::msg(format!("AF_PACKET socket for IPv6: {e}")))?,
        )),
        None => None,
    };

    let state = LabState {
        name: name.clone(),
        netns: o.upstream.clone().unwrap_or_default(),
        pid: std::process::id() as i32,
        topology: FRONT_TOPOLOGY.into(),
        topology_source: format!(
            "upstream {} from {public}",
            o.upstream.as_deref().unwrap_or("(this host)")
        ),
        tun: String::new(),
        vp_address: format!("{public}/32"),
        gateway: gateway.to_string(),
        vm_port,
        routes: Vec::new(),
        vp_address6: public6.map(|p| format!("{p}/128")),
        routes6: Vec::new(),
    };
    let mut vms = VmFront::new(&lans).any_destination6();
    let vm_info = VmInfo::new(prefix, gateway, vm_port, &lans);
    publish(state_dir, &state, &vm_info)?;
    tracing::info!(
        front = %name,
        vms = FRONT_PREFIX,
        vm_front = %format!("127.0.0.1:{vm_port}"),
        public = %public,
        public6 = ?public6,
        "front serving"
    );

    let start = Wall::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as u64);
    // One instance per guest (its endpoint: its virtual NIC), bound to the address of
    // its first packet and that address's IPv6 twin; other sources are refused (spoofed).
    let mut instances: HashMap<SocketAddr, InstanceId> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut frame = Vec::with_capacity(2048);
    let mut io = FrontStats::default();
    let mut last_stats = Wall::now();
    let mut fds = vec![udp.as_raw_fd(), icmp.as_raw_fd(), tcp.as_raw_fd()];
    if let Some((_, recv6)) = &v6 {
        fds.push(recv6.as_raw_fd());
    }
    while !sys::stop_requested() {
        let wait_us = fwd.poll_timeout().map_or(200_000, |t| {
            t.as_micros().saturating_sub(now().as_micros()).min(200_000)
        });
        let ready = sys::poll_readable(&fds, wait_us)?;
        if ready[0] {
            let (i, o) = vms.drain(&udp, &mut buf, |peer, p| {
                let Some(guest) = guest_of(p).filter(|&g| prefix.contains(g) && g != gateway)
                else {
                    io.spoofed += 1;
                    return;
                };
                let id = *instances.entry(peer).or_insert_with(|| {
                    let id = fwd.add_instance(guest);
                    fwd.add_address(id, vtnt_lab::addr::to_v6(guest));
                    id
                });
                match fwd.handle_instance_packet(now(), id, p, &mut out) {
                    Ok(len) => {
                        let sent = match (&v6, out[0] >> 4) {
                            (Some((send6, _)), 6) => {
                                io.probes_out6 += 1;
                                sys::raw6_send(send6, &out[..len])
                            }
                            _ => {
                                let dst = Ipv4Addr::new(out[16], out[17], out[18], out[19]);
                                sys::raw_send(&send, &out[..len], dst)
                            }
                        };
                        match sent {
                            Ok(_) => io.probes_out += 1,
                            Err(_) => io.send_errors += 1,
                        }
                    }
                    Err(_) => io.refused += 1,
                }
            });
            io.vm_frames_in += i;
            io.vm_frames_out += o;
        }
        let recv6 = v6.as_ref().map(|(_, r)| r);
        for (i, sock, read) in [
            (1, Some(&icmp), sys::raw_recv as Recv),
            (2, Some(&tcp), sys::raw_recv),
            (3, recv6, sys::packet6_recv),
        ] {
            if let Some(sock) = sock.filter(|_| ready.get(i) == Some(&true)) {
                upstream_in(
                    sock,
                    read,
                    &mut fwd,
                    &vms,
                    &udp,
                    now(),
                    &mut buf,
                    &mut out,
                    &mut frame,
                    &mut io,
                );
            }
        }
        fwd.handle_timeout(now());
        if last_stats.elapsed() >= Duration::from_secs(1) {
            last_stats = Wall::now();
            let _ = write_json(&state_dir.join("stats.json"), &stats(&io, &fwd.stats()));
        }
    }
    let _ = write_json(&state_dir.join("stats.json"), &stats(&io, &fwd.stats()));
    let _ = fs::remove_file(state_dir.join("ready"));
    tracing::info!(front = %name, "front stopped");
    Ok(())
}

/// `stats.json`: the front's packets and the forwarder's counters.
fn stats(io: &FrontStats, s: &vtnt_forward::Stats) -> serde_json::Value {
    let r = &s.refused;
    serde_json::json!({
        "front": io,
        "forwarder": {
            "forwarded": s.forwarded, "delivered": s.delivered, "unmatched": s.unmatched,
            "rewrites": s.rewrites, "dropped_rate": s.dropped_rate, "table_full": s.table_full,
            "invalid": s.invalid, "expired": s.expired, "mappings": s.mappings,
            "refused_spoofed": r.spoofed,
            "refused_policy": r.spoofed + r.not_unicast + r.public + r.public_rate
                + r.excluded + r.lab_not_routed + r.other,
        },
    })
}

/// A destination of the lab's IPv6 range (the twin of 203.0.113.1), whose route source is
/// the upstream's address.
const LAB6_PROBE: Ipv6Addr = vtnt_lab::addr::to_v6(Ipv4Addr::new(203, 0, 113, 1));

/// Reads one packet from an upstream socket.
type Recv = fn(&OwnedFd, &mut [u8]) -> std::io::Result<usize>;

/// The IPv4 address of the guest that sent `p`: its IPv4 source, or the address whose
/// twin its IPv6 source is.
fn guest_of(p: &[u8]) -> Option<Ipv4Addr> {
    match p.first()? >> 4 {
        4 => Some(Ipv4Addr::new(*p.get(12)?, p[13], p[14], p[15])),
        6 => {
            let src: [u8; 16] = p.get(8..24)?.try_into().ok()?;
            from_v6(Ipv6Addr::from(src))
        }
        _ => None,
    }
}

/// Replies read from one upstream socket, handed to the VMs whose probes they answer.
#[allow(clippy::too_many_arguments)]
fn upstream_in(
    sock: &OwnedFd,
    read: Recv,
    fwd: &mut Forwarder,
    vms: &VmFront,
    udp: &UdpSocket,
    now: Instant,
    buf: &mut [u8],
    out: &mut [u8],
    frame: &mut Vec<u8>,
    io: &mut FrontStats,
) {
    for _ in 0..512 {
        let Ok(n) = read(sock, buf) else {
            break;
        };
        if buf[0] >> 4 == 6 && !answer6(&buf[..n]) {
            continue;
        }
        if let Some((_, len)) = fwd.handle_upstream_packet(now, &buf[..n], out) {
            io.replies_in += 1;
            io.replies_in6 += u64::from(out[0] >> 4 == 6);
            if let Some(peer) = vms.frame_for(&out[..len], frame) {
                io.vm_frames_out += 1;
                let _ = udp.send_to(frame, peer);
            }
        }
    }
}

/// Whether an IPv6 packet the `AF_PACKET` socket saw is one the IPv4 side's raw ICMP
/// and TCP sockets would have read: ICMPv6 errors and echo replies, TCP (neighbour
/// discovery and the rest never reach the forwarder, whose unmatched count stays the
/// count of replies to no probe).
fn answer6(p: &[u8]) -> bool {
    use vtnt_wire::icmp6_type as t;
    match (p.get(6), p.get(40)) {
        (Some(&vtnt_wire::proto::TCP), _) => true,
        (Some(&vtnt_wire::proto::ICMPV6), Some(&ty)) => matches!(
            ty,
            t::DEST_UNREACH | t::PACKET_TOO_BIG | t::TIME_EXCEEDED | t::ECHO_REPLY
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_lan_holds_every_slot_and_the_pool_apart_from_a_labs() {
        let p: Prefix = FRONT_PREFIX.parse().unwrap();
        let lan = Lan::front(p, (0, VM_SLOTS), DHCP_POOL);
        assert_eq!((lan.slots, lan.pool.len() as u32), (VM_SLOTS, DHCP_POOL));
        let lab: Prefix = vtnt_lab_linux::state::VM_PREFIX.parse().unwrap();
        assert!(!p.contains(lab.network()) && !lab.contains(p.network()));
    }
}
