//! `vtnt lab front`: a VM front onto a real network. VMs attach exactly as to a lab (the
//! same `vm.json` slots, ARP, DHCP: [`VmFront`]), on a private LAN of their own; their
//! probes leave through raw sockets in the upstream namespace (the host's, or a named
//! one) from its single address, rewritten by `vtnt-forward`'s traceroute-aware NAT,
//! which holds one probing policy and one rate budget for every VM behind it and hands
//! each reply (ICMP errors by the probe they quote) back to the VM that sent the probe.
//!
//! Containers and processes need no front (`--net host`); a front is how many VMs share
//! one address.
//!
//! This crate is the Linux driver of the sans-IO forwarder, as `vtnt-linux` is the
//! engine's: the VM front, the state files and the raw kernel calls are `vtnt-lab-linux`'s
//! (a front is started and stopped like a lab: `vtnt_lab_linux::front_up`, `down`).

use std::collections::HashMap;
use std::fs;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant as Wall};

use vtnt_forward::{Config, Forwarder, InstanceId};
use vtnt_lab::addr::Prefix;
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
    probes_out: u64,
    refused: u64,
    replies_in: u64,
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
    let mut config = Config::new(public);
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
        vp_address6: None,
        routes6: Vec::new(),
    };
    let mut vms = VmFront::new(&lans);
    let vm_info = VmInfo::new(prefix, gateway, vm_port, &lans);
    publish(state_dir, &state, &vm_info)?;
    tracing::info!(
        front = %name,
        vms = FRONT_PREFIX,
        vm_front = %format!("127.0.0.1:{vm_port}"),
        public = %public,
        "front serving"
    );

    let start = Wall::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as u64);
    let mut instances: HashMap<Ipv4Addr, InstanceId> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut frame = Vec::with_capacity(2048);
    let mut io = FrontStats::default();
    let mut last_stats = Wall::now();
    let fds = [udp.as_raw_fd(), icmp.as_raw_fd(), tcp.as_raw_fd()];
    while !sys::stop_requested() {
        let wait_us = fwd.poll_timeout().map_or(200_000, |t| {
            t.as_micros().saturating_sub(now().as_micros()).min(200_000)
        });
        let ready = sys::poll_readable(&fds, wait_us)?;
        if ready[0] {
            let (i, o) = vms.drain(&udp, &mut buf, |p| {
                // IPv4 only: the forwarder's NAT has no IPv6 yet
                if p.len() < 20 || p[0] >> 4 != 4 {
                    return;
                }
                let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
                let id = *instances
                    .entry(src)
                    .or_insert_with(|| fwd.add_instance(src));
                match fwd.handle_instance_packet(now(), id, p, &mut out) {
                    Ok(len) => {
                        let dst = Ipv4Addr::new(out[16], out[17], out[18], out[19]);
                        match sys::raw_send(&send, &out[..len], dst) {
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
        for (i, sock) in [(1, &icmp), (2, &tcp)] {
            if ready[i] {
                upstream_in(
                    sock,
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
            "refused_policy": r.spoofed + r.not_unicast + r.public + r.public_rate
                + r.excluded + r.lab_not_routed + r.other,
        },
    })
}

/// Replies read from one raw socket, handed to the VMs whose probes they answer.
#[allow(clippy::too_many_arguments)]
fn upstream_in(
    sock: &OwnedFd,
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
        let Ok(n) = sys::raw_recv(sock, buf) else {
            break;
        };
        if let Some((_, len)) = fwd.handle_upstream_packet(now, &buf[..n], out) {
            io.replies_in += 1;
            if let Some(peer) = vms.frame_for(&out[..len], frame) {
                io.vm_frames_out += 1;
                let _ = udp.send_to(frame, peer);
            }
        }
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
