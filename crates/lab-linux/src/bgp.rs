//! The lab's BGP speaker (`vtnt lab up --bgp`, docs/lab.md "BGP"): Debian's BIRD 2, run
//! by the lab daemon in a namespace of its own (`<lab>.bgp`, AS [`LAB_AS`]), with one
//! eBGP session over a veth to a second BIRD that stands for the vantage point's border
//! router (`<lab>.bgp-vp`, AS [`VANTAGE_AS`]). A lab's name has no `.`, so these are
//! never another lab's namespace. The lab's BIRD announces the LAN prefix of
//! every destination the running topology reaches; after each applied change the daemon
//! calls [`Speakers::sync`], which rewrites its static routes and reconfigures it, so a
//! destination cut off is withdrawn and comes back when the change is undone.
//!
//! What the vantage router learned is read on its control socket (`bgp-vp.ctl` in the
//! state directory, named in `bgp.json`); `vtnt-fleet`'s `bgp` module turns it into
//! route changes. Neither BIRD touches a kernel routing table (no `kernel` protocol): the
//! lab's packets are routed by the emulator alone. IPv4 only.

use std::collections::BTreeSet;
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as Wall};

use serde::{Deserialize, Serialize};
use vtnt_lab::addr::Prefix;
use vtnt_lab::Topology;

use crate::{netns, sys, Error};

/// The lab's AS: one for the whole lab, the origin of every prefix it announces.
pub const LAB_AS: u32 = 64500;
/// The vantage point's AS (its border router's).
pub const VANTAGE_AS: u32 = 64501;
/// The lab speaker's end of the veth (a /30 inside the two BGP namespaces only).
pub const LAB_ADDR: Ipv4Addr = Ipv4Addr::new(169, 254, 179, 1);
/// The vantage router's end.
pub const VANTAGE_ADDR: Ipv4Addr = Ipv4Addr::new(169, 254, 179, 2);
/// The veth's name in both namespaces.
const VETH: &str = "bgp0";
/// `bgp.json` in the state directory: what [`Speakers`] runs.
pub const BGP_STATE: &str = "bgp.json";
/// How long a BIRD may take to open its control socket.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// One of the two BIRDs: its role names its files in the state directory
/// (`bgp-<role>.conf|.ctl|.pid|.log`) and its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Lab,
    Vantage,
}

impl Role {
    const BOTH: [Role; 2] = [Role::Lab, Role::Vantage];

    fn tag(self) -> &'static str {
        match self {
            Role::Lab => "lab",
            Role::Vantage => "vp",
        }
    }

    fn netns(self, lab: &str) -> String {
        match self {
            Role::Lab => format!("{lab}.bgp"),
            Role::Vantage => format!("{lab}.bgp-vp"),
        }
    }

    fn file(self, dir: &Path, ext: &str) -> PathBuf {
        dir.join(format!("bgp-{}.{ext}", self.tag()))
    }
}

/// `bgp.json`: the speakers' namespaces, sessions, control sockets and what the lab
/// announces now (rewritten after every change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BgpState {
    pub lab_as: u32,
    pub vantage_as: u32,
    pub lab_netns: String,
    pub vantage_netns: String,
    pub lab_address: Ipv4Addr,
    pub vantage_address: Ipv4Addr,
    /// The lab BIRD's control socket (`birdc -s`).
    pub lab_socket: PathBuf,
    /// The vantage router's control socket: what it learned.
    pub vantage_socket: PathBuf,
    /// The prefixes announced, sorted.
    pub announced: Vec<String>,
}

/// The LAN prefixes of the destinations the topology reaches now, sorted, each once
/// (hosts sharing a LAN share its prefix; a LAN is announced while one of its hosts is
/// reachable).
pub fn reachable_prefixes(topo: &Topology) -> Vec<Prefix> {
    let truth = vtnt_lab::truth::truth(topo);
    let reached: BTreeSet<&str> = truth
        .destinations
        .iter()
        .filter(|d| !d.unreachable)
        .map(|d| d.name.as_str())
        .collect();
    let set: BTreeSet<(u32, u8)> = topo
        .def()
        .hosts
        .iter()
        .filter(|h| reached.contains(h.name.as_str()))
        .filter_map(|h| {
            let (addr, len) = h.address.split_once('/')?;
            let p = Prefix::containing(addr.parse().ok()?, len.parse().ok()?);
            Some((p.first(), p.len()))
        })
        .collect();
    set.into_iter()
        .filter_map(|(net, len)| Prefix::new(Ipv4Addr::from(net), len))
        .collect()
}

/// The lab BIRD's configuration: `prefixes` as static routes, exported to the vantage
/// router.
pub fn lab_config(prefixes: &[Prefix]) -> String {
    let routes: String = prefixes
        .iter()
        .map(|p| format!("  route {p} blackhole;\n"))
        .collect();
    format!(
        "# Written by the vtnt lab daemon (docs/lab.md, \"BGP\"): the lab's speaker.\n\
         log stderr all;\n\
         router id {LAB_ADDR};\n\
         protocol device {{ }}\n\
         # the destinations the running topology reaches\n\
         protocol static destinations {{\n  ipv4;\n{routes}}}\n\
         protocol bgp vantage {{\n  local {LAB_ADDR} as {LAB_AS};\n  neighbor {VANTAGE_ADDR} as {VANTAGE_AS};\n{TIMERS}  ipv4 {{ import none; export all; }};\n}}\n"
    )
}

/// The vantage router's configuration: everything learned kept, nothing sent.
pub fn vantage_config() -> String {
    format!(
        "# Written by the vtnt lab daemon (docs/lab.md, \"BGP\"): the vantage point's border router.\n\
         log stderr all;\n\
         router id {VANTAGE_ADDR};\n\
         protocol device {{ }}\n\
         protocol bgp lab {{\n  local {VANTAGE_ADDR} as {VANTAGE_AS};\n  neighbor {LAB_ADDR} as {LAB_AS};\n{TIMERS}  ipv4 {{ import all; export none; }};\n}}\n"
    )
}

/// Short connect timers: the session comes up within about a second of the lab.
const TIMERS: &str = "  connect delay time 1;\n  connect retry time 1;\n  error wait time 1, 4;\n";

/// The two BIRDs of a lab, children of its daemon, stopped (and their namespaces
/// removed) on drop.
pub struct Speakers {
    lab: String,
    dir: PathBuf,
    children: Vec<(Role, Child)>,
    state: BgpState,
    /// The last [`Speakers::sync`] failed: [`Speakers::tend`] tries again.
    pending: bool,
}

impl Speakers {
    /// Makes the namespaces and the veth, writes the configurations (the lab announcing
    /// what `topo` reaches), starts both BIRDs and waits for their control sockets.
    pub fn start(lab: &str, dir: &Path, topo: &Topology) -> Result<Speakers, Error> {
        check_bird()?;
        remove(lab, dir);
        let state = BgpState {
            lab_as: LAB_AS,
            vantage_as: VANTAGE_AS,
            lab_netns: Role::Lab.netns(lab),
            vantage_netns: Role::Vantage.netns(lab),
            lab_address: LAB_ADDR,
            vantage_address: VANTAGE_ADDR,
            lab_socket: Role::Lab.file(dir, "ctl"),
            vantage_socket: Role::Vantage.file(dir, "ctl"),
            announced: Vec::new(),
        };
        let mut s = Speakers {
            lab: lab.to_string(),
            dir: dir.to_path_buf(),
            children: Vec::new(),
            state,
            pending: false,
        };
        s.wire()?;
        let prefixes = reachable_prefixes(topo);
        fs::write(Role::Lab.file(dir, "conf"), lab_config(&prefixes))?;
        fs::write(Role::Vantage.file(dir, "conf"), vantage_config())?;
        for role in Role::BOTH {
            let child = s.spawn(role)?;
            s.children.push((role, child));
        }
        s.state.announced = prefixes.iter().map(|p| p.to_string()).collect();
        crate::state::write_json(&dir.join(BGP_STATE), &s.state)?;
        tracing::info!(lab, announced = s.state.announced.len(), "BGP speakers up");
        Ok(s)
    }

    /// The two namespaces, the veth between them, its addresses.
    fn wire(&self) -> Result<(), Error> {
        let (l, v) = (Role::Lab.netns(&self.lab), Role::Vantage.netns(&self.lab));
        for ns in [&l, &v] {
            netns::add(ns)?;
            netns::ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        netns::ip(&[
            "-n", &l, "link", "add", VETH, "type", "veth", "peer", "name", VETH, "netns", &v,
        ])?;
        for (ns, addr) in [(&l, LAB_ADDR), (&v, VANTAGE_ADDR)] {
            netns::ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", VETH])?;
            netns::ip(&["-n", ns, "link", "set", VETH, "up"])?;
        }
        Ok(())
    }

    /// Starts `role`'s BIRD in the foreground in its namespace, its log in the state
    /// directory, and waits until its control socket is there.
    fn spawn(&self, role: Role) -> Result<Child, Error> {
        let sock = role.file(&self.dir, "ctl");
        let _ = fs::remove_file(&sock);
        let log = fs::File::create(role.file(&self.dir, "log"))?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &role.netns(&self.lab), "bird", "-f", "-c"])
            .arg(role.file(&self.dir, "conf"))
            .arg("-s")
            .arg(&sock)
            .arg("-P")
            .arg(role.file(&self.dir, "pid"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| Error::msg(format!("starting BIRD (ip netns exec ... bird): {e}")))?;
        let deadline = Wall::now() + START_TIMEOUT;
        while !sock.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                let log = fs::read_to_string(role.file(&self.dir, "log")).unwrap_or_default();
                return Err(Error::msg(format!(
                    "the lab's {} BIRD exited ({status}):\n{}",
                    role.tag(),
                    log.trim()
                )));
            }
            if Wall::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::msg(format!(
                    "the lab's {} BIRD opened no control socket within {START_TIMEOUT:?}",
                    role.tag()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(child)
    }

    /// What the speakers run (`bgp.json`).
    pub fn state(&self) -> &BgpState {
        &self.state
    }

    /// Announces what `topo` reaches now: when that differs from what is announced,
    /// rewrites the lab BIRD's configuration, has it reload (`birdc configure`: the
    /// routes gone are withdrawn, the new ones announced) and rewrites `bgp.json`.
    pub fn sync(&mut self, topo: &Topology) -> Result<(), Error> {
        let prefixes = reachable_prefixes(topo);
        let announced: Vec<String> = prefixes.iter().map(|p| p.to_string()).collect();
        if announced == self.state.announced {
            self.pending = false;
            return Ok(());
        }
        self.pending = true;
        let conf = Role::Lab.file(&self.dir, "conf");
        let tmp = conf.with_extension("conf.new");
        fs::write(&tmp, lab_config(&prefixes))?;
        fs::rename(&tmp, &conf)?;
        let out = Command::new("birdc")
            .arg("-s")
            .arg(&self.state.lab_socket)
            .arg("configure")
            .output()
            .map_err(|e| Error::msg(format!("running birdc: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !text.contains("Reconfigured") {
            return Err(Error::msg(format!(
                "the lab's BIRD refused its new configuration {}: {}",
                conf.display(),
                text.trim()
            )));
        }
        tracing::info!(lab = %self.lab, announced = ?announced, "BGP announcements changed");
        self.state.announced = announced;
        self.pending = false;
        crate::state::write_json(&self.dir.join(BGP_STATE), &self.state)
    }

    /// Restarts a BIRD that exited (its configuration is the current one), then syncs
    /// again if the last [`Speakers::sync`] failed; the first error is returned after
    /// trying all.
    pub fn tend(&mut self, topo: &Topology) -> Result<(), Error> {
        let mut first = Ok(());
        for i in 0..self.children.len() {
            let role = self.children[i].0;
            if let Ok(Some(status)) = self.children[i].1.try_wait() {
                tracing::warn!(lab = %self.lab, bird = role.tag(), %status, "BIRD exited; restarting it");
                match self.spawn(role) {
                    Ok(c) => self.children[i].1 = c,
                    Err(e) if first.is_ok() => first = Err(e),
                    Err(_) => {}
                }
            }
        }
        if self.pending {
            if let Err(e) = self.sync(topo) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Drop for Speakers {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = sys::signal(c.id() as i32, libc::SIGTERM);
        }
        let deadline = Wall::now() + Duration::from_secs(2);
        for (_, c) in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Wall::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        remove(&self.lab, &self.dir);
    }
}

/// Fails with what to install when BIRD is missing.
fn check_bird() -> Result<(), Error> {
    for tool in ["bird", "birdc"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Err(Error::msg(format!(
                "`{tool}` was not found: `vtnt lab up --bgp` runs Debian's BIRD 2 (apt-get install bird2)"
            )));
        }
    }
    Ok(())
}

/// Stops whatever BIRD of lab `lab` is left (by the pid files in `dir`, when the pid is
/// a `bird`) and removes the BGP namespaces: for `vtnt lab down` after a daemon that
/// could not clean up, and before a start.
pub fn remove(lab: &str, dir: &Path) {
    for role in Role::BOTH {
        let pid = fs::read_to_string(role.file(dir, "pid"))
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        if let Some(pid) = pid.filter(|&p| is_bird(p)) {
            let _ = sys::signal(pid, libc::SIGTERM);
            let deadline = Wall::now() + Duration::from_secs(2);
            while sys::alive(pid) && is_bird(pid) && Wall::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if is_bird(pid) {
                let _ = sys::signal(pid, libc::SIGKILL);
            }
        }
        let _ = fs::remove_file(role.file(dir, "pid"));
        let _ = netns::delete(&role.netns(lab));
    }
}

/// Whether `pid` runs `bird` (and is not a zombie).
fn is_bird(pid: i32) -> bool {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    comm.trim() == "bird" && !zombie
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> Topology {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/cases/bgp.toml");
        Topology::load(&p).unwrap()
    }

    #[test]
    fn a_destination_cut_off_is_no_longer_announced_and_comes_back() {
        let topo = case();
        let all: Vec<String> = reachable_prefixes(&topo)
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(all, ["198.51.100.0/29", "203.0.113.0/29"]);
        let cut = topo.apply(&"link-down r1 r2".parse().unwrap()).unwrap();
        let left: Vec<String> = reachable_prefixes(&cut)
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(left, ["198.51.100.0/29"]);
        let back = cut.apply(&"link-up r1 r2".parse().unwrap()).unwrap();
        assert_eq!(reachable_prefixes(&back), reachable_prefixes(&topo));
    }

    #[test]
    fn the_configurations_name_both_ends_and_every_prefix() {
        let p = Prefix::new(Ipv4Addr::new(203, 0, 113, 0), 29).unwrap();
        let c = lab_config(&[p]);
        assert!(c.contains("route 203.0.113.0/29 blackhole;"), "{c}");
        assert!(c.contains("local 169.254.179.1 as 64500;"), "{c}");
        assert!(c.contains("neighbor 169.254.179.2 as 64501;"), "{c}");
        assert!(lab_config(&[]).contains("protocol static destinations {\n  ipv4;\n}"));
        let v = vantage_config();
        assert!(v.contains("import all; export none;"), "{v}");
        assert!(!v.contains("kernel") && !c.contains("kernel"));
    }
}
