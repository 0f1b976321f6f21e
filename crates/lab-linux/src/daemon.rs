//! `vtnt lab serve`: the lab daemon. It binds the VM front's UDP socket on 127.0.0.1
//! (in the host's namespace), enters the lab namespace, creates the TUN device there with
//! the vantage point's address and routes for the lab ranges (IPv4 and their IPv6 twins,
//! the interface kept quiet: no DAD, router solicitations or autoconf), writes its state files,
//! then runs the emulator on a monotonic clock until SIGTERM: packets from the TUN and
//! from VMs (on the vantage point LAN, then on the lab's VM LAN, which the emulator routes
//! to the vantage point like its LAN) in (ARP and DHCP answered by the VM front itself), the lab's answers out to
//! whoever owns the destination address. Changes (`vtnt lab change`) come in on the
//! control socket of [`crate::changes`] and are applied between packets; with `--bgp` the
//! lab's BGP speakers ([`crate::bgp`]) are started before the lab is ready, told of every
//! applied change, restarted if they exit and stopped with the daemon.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant as Wall};

use vtnt_lab::addr::to_v6;
use vtnt_lab::{Instant, Lab, Port, Topology};

use crate::bgp::Speakers;
use crate::changes::Control;
use crate::state::{publish, write_json, LabState, Lan, VmInfo, TUN_NAME};
use crate::vm::VmFront;
use crate::{netns, sys, Error};

/// What `vtnt lab serve` is told.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub name: String,
    pub state_dir: PathBuf,
    /// The topology copy in the state directory.
    pub topology: PathBuf,
    /// Where the topology came from, for `status`.
    pub source: String,
    /// UDP port of the VM front on 127.0.0.1 (0: any free port).
    pub vm_port: u16,
    /// The VMs' own LAN, routed to the vantage point as its LAN is
    /// ([`crate::state::VM_PREFIX`] unless told).
    pub vm_prefix: vtnt_lab::addr::Prefix,
    /// Run the lab's BGP speaker and the vantage point's border router ([`crate::bgp`]).
    pub bgp: bool,
}

/// The lab ranges routed into the TUN, except what the vantage point LAN covers.
pub fn routes(vp_prefix: vtnt_lab::addr::Prefix) -> Vec<String> {
    vtnt_lab::addr::LAB_RANGES
        .iter()
        .filter(|r| !r.within(vp_prefix))
        .map(|r| r.to_string())
        .collect()
}

/// The IPv6 twins of [`routes`] (`2001:db8:64::c633:6400/120` for `198.51.100.0/24`).
pub fn routes6(vp_prefix: vtnt_lab::addr::Prefix) -> Vec<String> {
    vtnt_lab::addr::LAB_RANGES
        .iter()
        .filter(|r| !r.within(vp_prefix))
        .map(|r| format!("{}/{}", to_v6(r.network()), 96 + r.len()))
        .collect()
}

/// Where the namespace's per-interface IPv6 settings live; absent on a host without IPv6.
const IPV6_CONF: &str = "/proc/sys/net/ipv6/conf";

/// Keeps the TUN's IPv6 quiet before it comes up: no link-local address (so no MLD or
/// router solicitation from it), no duplicate address detection, no router
/// advertisements or autoconf. Run inside the lab namespace (its `/proc/sys/net`).
fn quiet_ipv6(dev: &str) -> Result<(), Error> {
    let dir = std::path::Path::new(IPV6_CONF).join(dev);
    for (key, value) in [
        ("disable_ipv6", "0"),
        ("addr_gen_mode", "1"),
        ("accept_dad", "0"),
        ("dad_transmits", "0"),
        ("accept_ra", "0"),
        ("autoconf", "0"),
        ("router_solicitations", "0"),
    ] {
        fs::write(dir.join(key), value)
            .map_err(|e| Error::msg(format!("{}/{key}: {e}", dir.display())))?;
    }
    Ok(())
}

/// Runs the daemon until a stop signal.
pub fn serve(o: &ServeOptions) -> Result<(), Error> {
    sys::catch_stop_signals();
    let topo = Topology::load(&o.topology)?.with_vm_lan(o.vm_prefix)?;
    let mut lab = Lab::new(topo);
    let vp = lab
        .vantage_points()
        .into_iter()
        .next()
        .ok_or_else(|| Error::msg("no vantage point"))?;

    let udp = UdpSocket::bind(("127.0.0.1", o.vm_port))
        .map_err(|e| Error::msg(format!("VM front: bind 127.0.0.1:{}: {e}", o.vm_port)))?;
    udp.set_nonblocking(true)?;
    let vm_port = udp.local_addr()?.port();
    // a filesystem socket: bound here, reachable from the host's namespace
    let mut control = Control::bind(&o.state_dir)?;

    sys::enter_netns(&o.name)
        .map_err(|e| Error::msg(format!("entering namespace {}: {e}", o.name)))?;
    let mut tun =
        sys::open_tun(TUN_NAME).map_err(|e| Error::msg(format!("creating TUN {TUN_NAME}: {e}")))?;
    let addr = format!("{}/{}", vp.addr, vp.prefix.len());
    netns::ip(&["-n", &o.name, "link", "set", "lo", "up"])?;
    netns::ip(&["-n", &o.name, "addr", "add", &addr, "dev", TUN_NAME])?;
    let vp6 = to_v6(vp.addr);
    let has_ipv6 = std::path::Path::new(IPV6_CONF).exists();
    let addr6 = has_ipv6.then(|| format!("{vp6}/{}", 96 + vp.prefix.len()));
    if let Some(a6) = &addr6 {
        quiet_ipv6(TUN_NAME)?;
        netns::ip(&["-n", &o.name, "addr", "add", a6, "dev", TUN_NAME, "nodad"])?;
    } else {
        tracing::warn!(lab = %o.name, "no IPv6 in this kernel: the TUN front is IPv4 only");
    }
    netns::ip(&["-n", &o.name, "link", "set", TUN_NAME, "up"])?;
    let routes = routes(vp.prefix);
    for r in &routes {
        netns::ip(&["-n", &o.name, "route", "add", r, "dev", TUN_NAME])?;
    }
    let routes6 = if has_ipv6 {
        routes6(vp.prefix)
    } else {
        Vec::new()
    };
    for r in &routes6 {
        netns::ip(&["-n", &o.name, "-6", "route", "add", r, "dev", TUN_NAME])?;
    }

    let state = LabState {
        name: o.name.clone(),
        netns: o.name.clone(),
        pid: std::process::id() as i32,
        topology: lab.topology().name().to_string(),
        topology_source: o.source.clone(),
        tun: TUN_NAME.into(),
        vp_address: addr,
        gateway: vp.gateway.to_string(),
        vm_port,
        routes,
        vp_address6: addr6,
        routes6,
    };
    let mut speakers = if o.bgp {
        Some(Speakers::start(&o.name, &o.state_dir, lab.topology())?)
    } else {
        None
    };
    let lans = Lan::lab(&vp, o.vm_prefix);
    let mut vms = VmFront::new(&lans);
    let vm_info = VmInfo::new(vp.prefix, vp.gateway, vm_port, &lans);
    publish(&o.state_dir, &state, &vm_info)?;
    tracing::info!(
        lab = %o.name,
        topology = %state.topology,
        tun = TUN_NAME,
        address = %state.vp_address,
        vm_front = %format!("127.0.0.1:{vm_port}"),
        "lab serving"
    );

    if let Err(e) = sys::precise_timers() {
        tracing::warn!(error = %e, "timer slack stays at the kernel's default: delays may run up to 50 us long");
    }
    let start = Wall::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as u64);
    let mut buf = vec![0u8; 65536];
    let mut frame = Vec::with_capacity(2048);
    let mut last_stats = Wall::now();
    let mut io = FrontStats::default();
    let fds = [tun.as_raw_fd(), udp.as_raw_fd(), control.fd()];
    while !sys::stop_requested() {
        let wait_us = lab.poll_timeout().map_or(500_000, |t| {
            t.as_micros().saturating_sub(now().as_micros()).min(500_000)
        });
        let ready = sys::poll_readable(&fds, wait_us)?;
        if ready[0] {
            for _ in 0..512 {
                match tun.read(&mut buf) {
                    Ok(n) if (n >= 20 && buf[0] >> 4 == 4) || (n >= 40 && buf[0] >> 4 == 6) => {
                        io.tun_in += 1;
                        lab.handle_packet(now(), Port(0), &buf[..n]);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        if ready[1] {
            let (i, o) = vms.drain(&udp, &mut buf, |_, p| lab.handle_packet(now(), Port(0), p));
            io.vm_frames_in += i;
            io.vm_frames_out += o;
        }
        if ready[2] && control.serve(&mut lab) {
            if let Some(s) = &mut speakers {
                if let Err(e) = s.sync(lab.topology()) {
                    tracing::error!(lab = %o.name, error = %e, "BGP announcements not updated");
                }
            }
        }
        let t = now();
        while let Some((_, n)) = lab.poll_transmit(t, &mut buf) {
            let to_vp = match buf[0] >> 4 {
                6 => buf[24..40] == vp6.octets(),
                _ => Ipv4Addr::new(buf[16], buf[17], buf[18], buf[19]) == vp.addr,
            };
            if to_vp {
                io.tun_out += 1;
                let _ = tun.write(&buf[..n]);
            } else if let Some(peer) = vms.frame_for(&buf[..n], &mut frame) {
                io.vm_frames_out += 1;
                let _ = udp.send_to(&frame, peer);
            }
        }
        if last_stats.elapsed() >= Duration::from_secs(1) {
            last_stats = Wall::now();
            if let Some(s) = &mut speakers {
                if let Err(e) = s.tend(lab.topology()) {
                    tracing::error!(lab = %o.name, error = %e, "the BGP speakers could not be tended");
                }
            }
            let guests: Vec<String> = vms.guests().keys().map(|a| a.to_string()).collect();
            let s = serde_json::json!({ "lab": lab.stats(), "front": io, "vm_guests": guests });
            let _ = write_json(&o.state_dir.join("stats.json"), &s);
        }
    }
    let _ = fs::remove_file(o.state_dir.join("ready"));
    drop(speakers);
    tracing::info!(lab = %o.name, "lab stopped");
    Ok(())
}

/// Packets through the fronts (`stats.json` field `front`).
#[derive(Debug, Default, serde::Serialize)]
struct FrontStats {
    tun_in: u64,
    tun_out: u64,
    vm_frames_in: u64,
    vm_frames_out: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_routes_are_the_twins_of_the_ipv4_ones() {
        let vp = vtnt_lab::addr::Prefix::new("192.0.2.0".parse().unwrap(), 24).unwrap();
        assert_eq!(
            routes(vp),
            ["198.51.100.0/24", "203.0.113.0/24", "100.64.0.0/10"]
        );
        assert_eq!(
            routes6(vp),
            [
                "2001:db8:64::c633:6400/120",
                "2001:db8:64::cb00:7100/120",
                "2001:db8:64::6440:0/106"
            ]
        );
    }
}
