//! Which network an instance probes ([`Network`], `vtnt run --net`), and the checks that
//! refuse a network before anything starts (an interface that does not exist, is down or
//! is no TAP; a network a runtime cannot reach; IPv6 targets where the runtime or the
//! network offers no IPv6, [`Network::check_job`]).
//!
//! - `lab[:NAME]`: a running `vtnt lab`: processes and containers join its namespace,
//!   VMs its VM front (the default: the demo's network).
//! - `host`: this host's own network namespace, routes and addresses: the static binary
//!   as a process, runc and Docker containers share it.
//! - `tap:IFACE,ip=ADDR/LEN,gw=GATEWAY[,ip6=ADDR6/LEN6,gw6=GATEWAY6][,netns=NAME]`: an
//!   existing TAP device, up, on a segment where GATEWAY routes (in namespace NAME, where
//!   the VMM then runs); the VM's or unikernel's NIC attaches to it with address ADDR
//!   (and ADDR6, set statically, for IPv6 jobs of the runtimes that have IPv6).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::str::FromStr;

use crate::error::{Context, Error, IoContext, Result};

use crate::guest::Lab;
use crate::Runtime;

/// Where an instance's probes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// A running lab, by name.
    Lab(String),
    /// This host's own network namespace.
    Host,
    /// An existing TAP device for a VM's NIC.
    Tap(Tap),
}

/// A TAP device and the guest's place behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tap {
    pub ifname: String,
    /// The guest's address.
    pub addr: Ipv4Addr,
    /// Its prefix length.
    pub len: u8,
    /// The router the guest sends everything to.
    pub gateway: Ipv4Addr,
    /// The guest's IPv6 address, prefix length and router, if it has IPv6.
    pub ipv6: Option<Tap6>,
    /// The network namespace the device is in (the VMM runs there); `None`: this one.
    pub netns: Option<String>,
}

/// A TAP guest's static IPv6 side (`ip6=`, `gw6=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tap6 {
    pub addr: Ipv6Addr,
    pub len: u8,
    pub gateway: Ipv6Addr,
}

impl Tap {
    /// `ADDR/LEN`.
    pub fn guest(&self) -> String {
        format!("{}/{}", self.addr, self.len)
    }

    /// The IPv6 side as the unikernel's command line takes it (`ip6=ADDR6/LEN6`,
    /// `gw6=GATEWAY6`), if the guest has one.
    pub fn guest6(&self) -> Option<(String, String)> {
        self.ipv6
            .map(|v6| (format!("{}/{}", v6.addr, v6.len), v6.gateway.to_string()))
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::Lab(n) => write!(f, "lab:{n}"),
            Network::Host => f.write_str("host"),
            Network::Tap(t) => {
                write!(f, "tap:{},ip={},gw={}", t.ifname, t.guest(), t.gateway)?;
                if let Some(v6) = &t.ipv6 {
                    write!(f, ",ip6={}/{},gw6={}", v6.addr, v6.len, v6.gateway)?;
                }
                match &t.netns {
                    Some(ns) => write!(f, ",netns={ns}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Network, String> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        match (kind, rest) {
            ("lab", "") => Ok(Network::Lab(crate::DEFAULT_LAB.to_string())),
            ("lab", name) => Ok(Network::Lab(name.to_string())),
            ("host", "") => Ok(Network::Host),
            ("tap", spec) => parse_tap(spec).map(Network::Tap),
            _ => Err(format!(
                "`{s}`: a network is lab[:NAME], host or tap:IFACE,ip=ADDR/LEN,gw=GATEWAY"
            )),
        }
    }
}

fn parse_tap(spec: &str) -> std::result::Result<Tap, String> {
    let mut parts = spec.split(',');
    let ifname = parts.next().unwrap_or_default().to_string();
    if ifname.is_empty() || ifname.len() > 15 || ifname.contains('/') {
        return Err(format!("tap:{spec}: `{ifname}` is not an interface name"));
    }
    let (mut ip, mut gw, mut ip6, mut gw6, mut netns) = (None, None, None, None, None);
    for p in parts {
        match p.split_once('=') {
            Some(("ip", v)) => ip = Some(v),
            Some(("gw", v)) => gw = Some(v),
            Some(("ip6", v)) => ip6 = Some(v),
            Some(("gw6", v)) => gw6 = Some(v),
            Some(("netns", v)) if !v.is_empty() && !v.contains('/') => netns = Some(v.to_string()),
            _ => {
                return Err(format!(
                    "tap:{spec}: unknown setting `{p}` (ip=ADDR/LEN, gw=GATEWAY, \
                     ip6=ADDR6/LEN6, gw6=GATEWAY6, netns=NAME)"
                ))
            }
        }
    }
    let ipv6 = match (ip6, gw6) {
        (None, None) => None,
        (Some(ip6), Some(gw6)) => Some(parse_tap6(spec, ip6, gw6)?),
        _ => return Err(format!("tap:{spec}: ip6= and gw6= go together")),
    };
    let ip = ip.ok_or_else(|| format!("tap:{spec}: the guest needs ip=ADDR/LEN"))?;
    let gw = gw.ok_or_else(|| format!("tap:{spec}: the guest needs gw=GATEWAY"))?;
    let (addr, len) = ip
        .split_once('/')
        .ok_or_else(|| format!("tap:{spec}: ip={ip} needs a prefix length (ADDR/LEN)"))?;
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("tap:{spec}: `{addr}` is not an IPv4 address"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| (8..=30).contains(l))
        .ok_or_else(|| format!("tap:{spec}: prefix length `{len}` is not 8..=30"))?;
    let gateway: Ipv4Addr = gw
        .parse()
        .map_err(|_| format!("tap:{spec}: `{gw}` is not an IPv4 address"))?;
    let mask = u32::MAX << (32 - u32::from(len));
    if u32::from(addr) & mask != u32::from(gateway) & mask || addr == gateway {
        return Err(format!(
            "tap:{spec}: gateway {gateway} is not another address of {addr}/{len}"
        ));
    }
    Ok(Tap {
        ifname,
        addr,
        len,
        gateway,
        ipv6,
        netns,
    })
}

/// `ip6=ADDR6/LEN6`, `gw6=GATEWAY6`: unicast, global-scope addresses (a link-local
/// router would do for Linux, not for the route check), the router on the guest's prefix.
fn parse_tap6(spec: &str, ip6: &str, gw6: &str) -> std::result::Result<Tap6, String> {
    let (addr, len) = ip6
        .split_once('/')
        .ok_or_else(|| format!("tap:{spec}: ip6={ip6} needs a prefix length (ADDR6/LEN6)"))?;
    let unicast = |a: &str| {
        a.parse::<Ipv6Addr>()
            .ok()
            .filter(|a| !a.is_multicast() && !a.is_unspecified() && !a.is_loopback())
            .filter(|a| a.segments()[0] & 0xffc0 != 0xfe80)
            .ok_or_else(|| format!("tap:{spec}: `{a}` is not a global IPv6 unicast address"))
    };
    let (addr, gateway) = (unicast(addr)?, unicast(gw6)?);
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| (16..=126).contains(l))
        .ok_or_else(|| format!("tap:{spec}: IPv6 prefix length `{len}` is not 16..=126"))?;
    let mask = u128::MAX << (128 - u32::from(len));
    if u128::from(addr) & mask != u128::from(gateway) & mask || addr == gateway {
        return Err(format!(
            "tap:{spec}: gateway {gateway} is not another address of {addr}/{len}"
        ));
    }
    Ok(Tap6 { addr, len, gateway })
}

impl Network {
    /// Fails, naming the problem, unless `runtime` can probe this network from here: the
    /// lab is up, the TAP device exists, is a TAP and is up, and the runtime reaches this
    /// kind of network at all.
    pub fn check(&self, runtime: Runtime) -> Result<()> {
        match self {
            Network::Lab(_) => Ok(()),
            Network::Host if runtime.has_nic() => Err(Error::Network(format!(
                "--net host: the {} runtime has a NIC of its own; attach it with \
                 tap:IFACE,ip=ADDR/LEN,gw=GATEWAY",
                runtime.name()
            ))),
            Network::Host => Ok(()),
            Network::Tap(_) if !runtime.has_nic() => Err(Error::Network(format!(
                "--net tap: the {} runtime has no NIC of its own; use --net host",
                runtime.name()
            ))),
            Network::Tap(t) => check_tap(t),
        }
    }
}

impl Network {
    /// Fails before anything starts, naming what is missing, when `job` has IPv6 targets
    /// and this network offers the guest no IPv6 (every runtime probes IPv6 where it
    /// has it): the one place that says which networks offer IPv6 (lift one here when it
    /// gains it).
    pub fn check_job(&self, job: &vtnt_job::JobSpec) -> Result<()> {
        let Some(v6) = crate::runtime::ipv6_target(job) else {
            return Ok(());
        };
        match self {
            Network::Host => Ok(()),
            Network::Tap(t) if t.ipv6.is_some() => Ok(()),
            Network::Tap(t) => Err(Error::Network(format!(
                "IPv6 target {v6}: --net tap:{} gives the guest no IPv6 address (add \
                 ip6=ADDR6/LEN6,gw6=GATEWAY6)",
                t.ifname
            ))),
            Network::Lab(name) => {
                let state = vtnt_lab_linux::lab_state(name)?;
                match state.vp_address6 {
                    Some(_) => Ok(()),
                    None if state.topology == vtnt_lab_linux::state::FRONT_TOPOLOGY => {
                        Err(Error::Network(format!(
                            "IPv6 target {v6}: front `{name}` has no public IPv6 address (its \
                             upstream has none routed: give one with `vtnt lab front --public6`)"
                        )))
                    }
                    None => Err(Error::Network(format!(
                        "IPv6 target {v6}: lab `{name}` has no IPv6 (started by an older vtnt \
                         or on a kernel without IPv6: `vtnt lab down --name {name}`, then \
                         `vtnt lab up` again)"
                    ))),
                }
            }
        }
    }
}

/// `ip [-n NETNS] ARGS` with JSON output.
fn ip_json(netns: Option<&str>, args: &[&str]) -> Result<serde_json::Value> {
    let mut cmd = std::process::Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let out = cmd
        .arg("-j")
        .args(args)
        .output()
        .doing(|| "running ip (iproute2)".into())?;
    if !out.status.success() {
        return Err(Error::Network(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    serde_json::from_slice(&out.stdout).doing(|| "reading ip's JSON".into())
}

/// The TAP device exists (in its namespace), is a TAP (not TUN) and is up, and the
/// guest's address is not one the namespace already has.
fn check_tap(t: &Tap) -> Result<()> {
    let ifname = &t.ifname;
    let ns = t.netns.as_deref();
    let where_ = ns.map_or("this network namespace".to_string(), |n| {
        format!("namespace {n}")
    });
    if let Some(n) = ns {
        if !Path::new("/run/netns").join(n).exists() {
            return Err(Error::Network(format!(
                "--net tap:{ifname}: no such network namespace `{n}`"
            )));
        }
    }
    let link = ip_json(ns, &["-d", "link", "show", "dev", ifname]).map_err(|_| {
        Error::Network(format!(
            "--net tap:{ifname}: no interface `{ifname}` in {where_}"
        ))
    })?;
    let link = &link[0];
    let info = &link["linkinfo"];
    if info["info_kind"] != "tun" {
        return Err(Error::Network(format!(
            "--net tap:{ifname}: `{ifname}` is not a TUN/TAP device"
        )));
    }
    if info["info_data"]["type"] != "tap" {
        return Err(Error::Network(format!(
            "--net tap:{ifname}: `{ifname}` is a TUN device (layer 3); a NIC needs a TAP"
        )));
    }
    let up = link["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == "UP"));
    if !up {
        return Err(Error::Network(format!(
            "--net tap:{ifname}: `{ifname}` is down (ip link set {ifname} up)"
        )));
    }
    // an address the namespace already has would answer for the guest
    let addrs = ip_json(ns, &["-4", "addr", "show"])?;
    let taken = addrs
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().into_iter().flatten())
        .any(|a| a["local"] == t.addr.to_string());
    if taken {
        return Err(Error::Network(format!(
            "--net tap:{ifname}: {} is already an address of {where_}; give the guest its own",
            t.addr
        )));
    }
    Ok(())
}

/// A network opened for instances: the lab's state read, the TAP checked.
#[derive(Debug, Clone)]
pub enum Attached {
    Lab(Lab),
    Host,
    Tap(Tap),
}

impl Network {
    /// Opens the network for `runtime`'s instances ([`Network::check`] first).
    pub fn attach(&self, runtime: Runtime) -> Result<Attached> {
        self.check(runtime)?;
        Ok(match self {
            Network::Lab(name) => Attached::Lab(Lab::open(name)?),
            Network::Host => Attached::Host,
            Network::Tap(t) => Attached::Tap(t.clone()),
        })
    }

    /// The address this network's probes leave from, where it knows it: a lab's vantage
    /// point (every runtime's probes leave the lab from it, the VMs' through its front's
    /// NAT), a TAP guest's own address; `None` on the host's network (behind a NAT the
    /// route's source is not what the world sees: the agent is told, `--public-address`).
    pub fn vantage_address(&self) -> Result<Option<std::net::IpAddr>> {
        Ok(match self {
            Network::Lab(name) => {
                let state = vtnt_lab_linux::lab_state(name)?;
                let addr = state.vp_address.split('/').next().unwrap_or_default();
                Some(addr.parse().map_err(|_| {
                    Error::Network(format!(
                        "lab `{name}`: vantage address `{}` is not an address",
                        state.vp_address
                    ))
                })?)
            }
            Network::Tap(t) => Some(t.addr.into()),
            Network::Host => None,
        })
    }

    /// The named network namespace whose Docker engine serves this network's containers
    /// (`None`: this host's own).
    pub fn netns(&self) -> Option<&str> {
        match self {
            Network::Lab(name) => Some(name),
            Network::Host | Network::Tap(_) => None,
        }
    }
}

impl Attached {
    /// The network namespace processes and containers join (`None`: stay in this one).
    pub fn netns_path(&self) -> Option<&Path> {
        match self {
            Attached::Lab(lab) => Some(&lab.netns_path),
            Attached::Host | Attached::Tap(_) => None,
        }
    }
}

/// A front (`vtnt lab front`) whose upstream is a lab's namespace, up for as long as
/// this lives: VMs behind it (`Network::Lab(front.name)`) probe the lab from its vantage
/// address through the traceroute-aware NAT, thousands of them on the front's LAN where
/// the lab's own /24 numbers 120.
pub struct Front {
    pub name: String,
}

impl Front {
    /// Starts a front of a name unique to this process over lab `lab`, `pps` probes per
    /// second for all its VMs.
    pub fn up(lab: &str, pps: u32) -> Result<Front> {
        let name = crate::paths::unique("front");
        let o = vtnt_lab_linux::FrontUpOptions {
            name: name.clone(),
            front: vtnt_lab_linux::FrontSettings {
                upstream: Some(vtnt_lab_linux::lab_state(lab)?.netns),
                public: None,
                public6: None,
                pps,
                allow_public: false,
                vm_port: 0,
            },
            exe: crate::paths::static_vtnt()?,
            exe_args: Vec::new(),
            timeout: std::time::Duration::from_secs(10),
        };
        vtnt_lab_linux::front_up(&o).during(|| format!("starting front `{name}`"))?;
        Ok(Front { name })
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = vtnt_lab_linux::down(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_parse_and_print() {
        for s in [
            "lab:vtnt-lab",
            "lab:other",
            "host",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,netns=lab",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fd77::3/64,gw6=fd77::1,netns=lab",
        ] {
            assert_eq!(s.parse::<Network>().unwrap().to_string(), s);
        }
        assert_eq!(
            "lab".parse::<Network>().unwrap(),
            Network::Lab(crate::DEFAULT_LAB.into())
        );
        for bad in [
            "",
            "hots",
            "host:x",
            "tap:",
            "tap:vtap0",
            "tap:vtap0,ip=10.9.0.2,gw=10.9.0.1",
            "tap:vtap0,ip=10.9.0.2/24",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.8.0.1",
            "tap:vtap0,ip=10.9.0.1/24,gw=10.9.0.1",
            "tap:vtap0,ip=10.9.0.2/33,gw=10.9.0.1",
            "tap:a/b,ip=10.9.0.2/24,gw=10.9.0.1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,mtu=9000",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fd77::3/64",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,gw6=fd77::1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fd77::3,gw6=fd77::1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fd77::3/64,gw6=fd78::1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fd77::1/64,gw6=fd77::1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fd77::3/128,gw6=fd77::1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=fe80::3/64,gw6=fe80::1",
            "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1,ip6=10.9.0.3/24,gw6=10.9.0.1",
        ] {
            assert!(bad.parse::<Network>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_networks_vantage_address_is_its_guests_or_its_labs_or_none() {
        let tap: Network = "tap:vtap0,ip=10.9.0.2/24,gw=10.9.0.1".parse().unwrap();
        assert_eq!(
            tap.vantage_address().unwrap(),
            Some("10.9.0.2".parse().unwrap())
        );
        assert_eq!(Network::Host.vantage_address().unwrap(), None);
        // a lab that is not running: an error naming it (the agent then sends no source)
        let e = Network::Lab("vtnt-nosuch-lab".into())
            .vantage_address()
            .unwrap_err()
            .to_string();
        assert!(e.contains("vtnt-nosuch-lab"), "{e}");
    }

    #[test]
    fn runtimes_refuse_networks_they_cannot_reach() {
        let tap: Network = "tap:vtnt-nosuch0,ip=10.9.0.2/24,gw=10.9.0.1"
            .parse()
            .unwrap();
        assert!(Network::Host.check(Runtime::Microvm).is_err());
        assert!(Network::Host.check(Runtime::Runc).is_ok());
        assert!(tap.check(Runtime::Docker).is_err());
        let e = tap.check(Runtime::Microvm).unwrap_err().to_string();
        assert!(e.contains("no interface"), "{e}");
        let lo: Network = "tap:lo,ip=10.9.0.2/24,gw=10.9.0.1".parse().unwrap();
        let e = lo.check(Runtime::Vm).unwrap_err().to_string();
        assert!(e.contains("not a TUN/TAP"), "{e}");
    }
}
