//! What `vtnt lab up | down | status | exec | truth | vm-netdev` do: start the daemon
//! detached and wait until the lab answers, tear everything down, report, run commands
//! in the namespace. A lab that crashed or was killed leaves a state directory whose
//! daemon is gone and a namespace without the TUN: both are recognised and cleaned.

use std::ffi::OsString;
use std::fs;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant as Wall};

use vtnt_lab::{Topology, REFERENCE_TOML};

use crate::state::{check_name, state_dir, LabState, VmInfo};
use crate::{netns, sys, Error};

/// What `vtnt lab up` is told.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub name: String,
    /// Topology file; `None`: the shipped reference topology.
    pub topology: Option<PathBuf>,
    /// UDP port of the VM front on 127.0.0.1 (0: any free port).
    pub vm_port: u16,
    /// The VMs' own LAN past the vantage point LAN's slots (`None`:
    /// [`crate::state::VM_PREFIX`]); it may not overlap the topology.
    pub vm_prefix: Option<vtnt_lab::addr::Prefix>,
    /// The `vtnt` binary to run as `vtnt lab serve`.
    pub exe: PathBuf,
    /// Its options before `lab serve` (how it logs: `--log-format json`...).
    pub exe_args: Vec<String>,
    /// How long to wait for the lab to answer.
    pub timeout: Duration,
    /// Run the lab's BGP speakers ([`crate::bgp`]).
    pub bgp: bool,
}

/// The pid in a state directory, if its daemon still runs (and is a `vtnt lab serve`).
pub fn daemon_pid(dir: &Path) -> Option<i32> {
    let pid: i32 = fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    (sys::alive(pid) && cmdline.contains("lab") && cmdline.contains("serve")).then_some(pid)
}

/// Removes what a dead lab left behind; errors if the lab runs or the namespace is not
/// one of ours.
fn clean_stale(name: &str) -> Result<(), Error> {
    let dir = state_dir(name);
    if let Some(pid) = daemon_pid(&dir) {
        return Err(Error::msg(format!(
            "lab `{name}` is already running (pid {pid}); `vtnt lab down --name {name}` first"
        )));
    }
    if netns::exists(name) {
        // Ours if our state directory says so, or if it holds nothing but loopback
        // (the TUN disappears with its daemon).
        let only_lo = netns::links(name)
            .map(|l| l.iter().all(|n| n == "lo"))
            .unwrap_or(false);
        if !dir.exists() && !only_lo {
            return Err(Error::msg(format!(
                "network namespace `{name}` exists and is not a vtnt lab; pick another --name"
            )));
        }
        netns::delete(name)?;
    }
    crate::bgp::remove(name, &dir);
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// Starts a lab: validates the topology, creates the namespace, starts the daemon and
/// waits until the lab answers a probe from inside the namespace.
pub fn up(o: &UpOptions) -> Result<LabState, Error> {
    check_name(&o.name).map_err(Error::msg)?;
    let (text, source) = match &o.topology {
        Some(p) => {
            let t =
                fs::read_to_string(p).map_err(|e| Error::msg(format!("{}: {e}", p.display())))?;
            (t, p.display().to_string())
        }
        None => (REFERENCE_TOML.to_string(), "reference".to_string()),
    };
    let topo = Topology::parse(&text, &source)?;
    let vm_prefix = match o.vm_prefix {
        Some(p) => p,
        None => crate::state::VM_PREFIX
            .parse()
            .map_err(|e| Error::msg(format!("{}: {e:?}", crate::state::VM_PREFIX)))?,
    };
    // refused here rather than by the daemon: a VM LAN overlapping the topology
    let topo = topo.with_vm_lan(vm_prefix)?;
    clean_stale(&o.name)?;
    let dir = state_dir(&o.name);
    fs::create_dir_all(&dir)?;
    let result = start(o, &dir, (&text, &source), &topo, vm_prefix);
    if result.is_err() {
        let _ = down(&o.name);
    }
    result
}

fn start(
    o: &UpOptions,
    dir: &Path,
    (text, source): (&str, &str),
    topo: &Topology,
    vm_prefix: vtnt_lab::addr::Prefix,
) -> Result<LabState, Error> {
    let topo_path = dir.join("topology.toml");
    fs::write(&topo_path, text)?;
    netns::add(&o.name)?;
    let mut cmd = Command::new(&o.exe);
    cmd.args(&o.exe_args)
        .args(["lab", "serve", "--name", &o.name, "--state-dir"])
        .arg(dir)
        .args(["--vm-port", &o.vm_port.to_string(), "--source", source])
        .args(["--vm-prefix", &vm_prefix.to_string()])
        .args(o.bgp.then_some("--bgp"))
        .arg(&topo_path);
    let deadline = Wall::now() + o.timeout;
    let child = launch(cmd, dir, deadline, "lab")?;
    let state: LabState = read_json(&dir.join("state.json"))?;
    // Someone to answer a UDP probe with port unreachable: the gateway, else a host.
    let truth = vtnt_lab::truth::truth(topo);
    write_hosts(&o.name, &truth)?;
    let mut targets: Vec<Ipv4Addr> = Vec::new();
    let def = topo.def();
    let gw_router = &truth.vantage_points[0].router;
    if !def.routers.iter().any(|r| &r.name == gw_router && r.silent) {
        targets.push(truth.vantage_points[0].gateway);
    }
    targets.extend(
        def.hosts
            .iter()
            .filter(|h| !h.silent)
            .filter_map(|h| h.address.split('/').next()?.parse::<Ipv4Addr>().ok()),
    );
    if let Some(&target) = targets.first() {
        let left = deadline
            .saturating_duration_since(Wall::now())
            .max(Duration::from_secs(1));
        if !answers(&o.name, target, left)? {
            return Err(Error::msg(format!(
                "the lab does not answer from inside namespace {}",
                o.name
            )));
        }
    }
    // The child is detached (own session); not waiting on it is intended.
    drop(child);
    Ok(state)
}

/// What a front is told, from `vtnt lab front` to its daemon (`vtnt lab serve-front`,
/// `vtnt-forward-linux`).
#[derive(Debug, Clone)]
pub struct FrontSettings {
    /// The namespace whose network the VMs probe (`None`: this host's).
    pub upstream: Option<String>,
    /// The upstream's address the probes leave from (`None`: the one its routes choose
    /// towards the lab ranges, else towards the Internet).
    pub public: Option<Ipv4Addr>,
    /// The upstream's IPv6 address IPv6 probes leave from (`None`: the one its routes
    /// choose towards the lab's IPv6 range, else the Internet; none: IPv6 is refused).
    pub public6: Option<std::net::Ipv6Addr>,
    /// Probes per second for all VMs together.
    pub pps: u32,
    /// Public targets may be probed (the operator's consent).
    pub allow_public: bool,
    /// UDP port of the VM front on 127.0.0.1 (0: any free port).
    pub vm_port: u16,
}

/// What `vtnt lab front` is told.
#[derive(Debug, Clone)]
pub struct FrontUpOptions {
    pub name: String,
    pub front: FrontSettings,
    /// The `vtnt` binary to run as `vtnt lab serve-front`.
    pub exe: PathBuf,
    /// Its options before `lab serve-front` (how it logs).
    pub exe_args: Vec<String>,
    pub timeout: Duration,
}

/// Starts a front (`vtnt-forward-linux`): checks the upstream namespace, starts the daemon and
/// waits until it serves; on failure nothing is left behind.
pub fn front_up(o: &FrontUpOptions) -> Result<LabState, Error> {
    check_name(&o.name).map_err(Error::msg)?;
    if let Some(ns) = &o.front.upstream {
        if !netns::exists(ns) {
            return Err(Error::msg(format!(
                "--upstream {ns}: no such network namespace"
            )));
        }
    }
    clean_stale(&o.name)?;
    let dir = state_dir(&o.name);
    fs::create_dir_all(&dir)?;
    let result = start_front(o, &dir);
    if result.is_err() {
        let _ = down(&o.name);
    }
    result
}

fn start_front(up: &FrontUpOptions, dir: &Path) -> Result<LabState, Error> {
    let o = &up.front;
    let mut cmd = Command::new(&up.exe);
    cmd.args(&up.exe_args)
        .args(["lab", "serve-front", "--name", &up.name, "--state-dir"])
        .arg(dir)
        .args([
            "--vm-port",
            &o.vm_port.to_string(),
            "--pps",
            &o.pps.to_string(),
        ]);
    if let Some(ns) = &o.upstream {
        cmd.args(["--upstream", ns]);
    }
    if let Some(p) = o.public {
        cmd.args(["--public", &p.to_string()]);
    }
    if let Some(p) = o.public6 {
        cmd.args(["--public6", &p.to_string()]);
    }
    if o.allow_public {
        cmd.arg("--allow-public");
    }
    let child = launch(cmd, dir, Wall::now() + up.timeout, "front")?;
    // The child is detached (own session); not waiting on it is intended.
    drop(child);
    read_json(&dir.join("state.json"))
}

/// Starts a daemon (`cmd`) in a session of its own, its log in `dir/log`, and waits
/// until it has written `dir/ready` (or fails, or `deadline` passes).
fn launch(
    mut cmd: Command,
    dir: &Path,
    deadline: Wall,
    what: &str,
) -> Result<std::process::Child, Error> {
    let log = fs::File::create(dir.join("log"))?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: the closure only calls setsid(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(sys::setsid);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::msg(format!("starting {:?}: {e}", cmd.get_program())))?;
    fs::write(dir.join("pid"), format!("{}\n", child.id()))?;
    while !dir.join("ready").exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let log = fs::read_to_string(dir.join("log")).unwrap_or_default();
            return Err(Error::msg(format!(
                "the {what} daemon exited ({status}):\n{}",
                log.trim()
            )));
        }
        if Wall::now() > deadline {
            return Err(Error::msg(format!(
                "the {what} daemon did not become ready in time"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child)
}

/// Whether `target` answers a UDP probe with port unreachable, seen from inside
/// namespace `name` (a connected UDP socket turns the ICMP error into ECONNREFUSED).
pub fn answers(name: &str, target: Ipv4Addr, within: Duration) -> Result<bool, Error> {
    let name = name.to_string();
    let h = std::thread::spawn(move || -> std::io::Result<bool> {
        sys::enter_netns(&name)?;
        let s = UdpSocket::bind("0.0.0.0:0")?;
        s.connect((target, 33434))?;
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        let deadline = Wall::now() + within;
        let mut buf = [0u8; 64];
        while Wall::now() < deadline {
            let sent = s.send(b"vtnt lab up");
            if matches!(&sent, Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused) {
                return Ok(true);
            }
            match s.recv(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(true),
                _ => {}
            }
        }
        Ok(false)
    });
    h.join()
        .map_err(|_| Error::msg("probe thread panicked"))?
        .map_err(Error::from)
}

/// Stops lab `name` and removes its namespace and state. `Ok(false)`: nothing was there.
pub fn down(name: &str) -> Result<bool, Error> {
    check_name(name).map_err(Error::msg)?;
    let dir = state_dir(name);
    let mut found = false;
    if let Some(pid) = daemon_pid(&dir) {
        found = true;
        let _ = sys::signal(pid, libc::SIGTERM);
        let deadline = Wall::now() + Duration::from_secs(3);
        while sys::alive(pid) && Wall::now() < deadline {
            reap(pid);
            std::thread::sleep(Duration::from_millis(10));
        }
        if sys::alive(pid) {
            let _ = sys::signal(pid, libc::SIGKILL);
        }
    }
    if netns::exists(name)
        && (dir.exists()
            || netns::links(name)
                .map(|l| l.iter().all(|n| n == "lo"))
                .unwrap_or(false))
    {
        found = true;
        netns::delete(name)?;
    }
    // what a daemon killed before it could stop its BIRDs left
    crate::bgp::remove(name, &dir);
    if dir.exists() {
        found = true;
        fs::remove_dir_all(&dir)?;
    }
    remove_hosts(name);
    Ok(found)
}

/// `/etc/netns/NAME`, whose files `ip netns exec NAME` (hence `vtnt lab exec`) mounts over
/// `/etc`'s.
fn netns_etc(name: &str) -> PathBuf {
    Path::new("/etc/netns").join(name)
}

/// Names every router address of the lab in the `hosts` file its namespace sees
/// (`<router>.<lab>.lab`, and the destinations by their names), so that reverse look-ups
/// inside the lab (`vtnt lab exec -- vtnt trace -O ptr ...`, scamper's `-O ptr`) find the
/// ground truth's names. Removed by [`down`].
fn write_hosts(name: &str, truth: &vtnt_lab::truth::Truth) -> Result<(), Error> {
    let mut text = String::from("127.0.0.1 localhost\n");
    let label = |s: &str| {
        s.to_ascii_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    };
    for r in &truth.routers {
        for a in &r.addresses {
            text.push_str(&format!("{a} {}.{}.lab\n", label(&r.name), label(name)));
        }
    }
    for d in &truth.destinations {
        text.push_str(&format!(
            "{} {}.{}.lab\n",
            d.dst,
            label(&d.name),
            label(name)
        ));
    }
    let dir = netns_etc(name);
    fs::create_dir_all(&dir)?;
    fs::write(dir.join("hosts"), text)?;
    Ok(())
}

/// Removes what [`write_hosts`] wrote (and the directory, when nothing else is in it).
fn remove_hosts(name: &str) {
    let dir = netns_etc(name);
    let _ = fs::remove_file(dir.join("hosts"));
    let _ = fs::remove_dir(&dir);
}

/// Reaps `pid` if it is our zombie child (when `up` and `down` run in one process).
fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG on a pid; `status` is a live int.
    unsafe {
        libc::waitpid(pid, &mut status, libc::WNOHANG);
    }
}

/// One lab as `status` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    pub name: String,
    /// running | stale (daemon gone) | starting
    pub state: &'static str,
    pub pid: Option<i32>,
    pub lab: Option<LabState>,
    pub stats: Option<serde_json::Value>,
}

/// Status of lab `name`, or of every lab with state under the run directory.
pub fn status(name: Option<&str>) -> Result<Vec<Status>, Error> {
    let names: Vec<String> = match name {
        Some(n) => vec![n.to_string()],
        None => match fs::read_dir(crate::state::run_root()) {
            Ok(rd) => rd
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect(),
            Err(_) => Vec::new(),
        },
    };
    let mut out = Vec::new();
    for n in names {
        let dir = state_dir(&n);
        if !dir.exists() {
            continue;
        }
        let pid = daemon_pid(&dir);
        let lab: Option<LabState> = read_json(&dir.join("state.json")).ok();
        let state = match (pid, dir.join("ready").exists()) {
            (Some(_), true) => "running",
            (Some(_), false) => "starting",
            (None, _) => "stale",
        };
        let stats = read_json(&dir.join("stats.json")).ok();
        out.push(Status {
            name: n,
            state,
            pid,
            lab,
            stats,
        });
    }
    Ok(out)
}

/// Runs `cmd` inside lab `name`'s namespace in this process's place (`ip netns exec`,
/// which enters the namespace and runs `cmd` in its own place in turn), so that a signal
/// sent to this process reaches `cmd` itself and nothing is left running behind it; its
/// exit status is the caller's. Returns only when it could not be started.
pub fn exec(name: &str, cmd: &[OsString]) -> Error {
    if let Err(e) = check_name(name) {
        return Error::msg(e);
    }
    if !netns::exists(name) || daemon_pid(&state_dir(name)).is_none() {
        return Error::msg(format!(
            "lab `{name}` is not running (`vtnt lab up --name {name}`)"
        ));
    }
    let Some((prog, args)) = cmd.split_first() else {
        return Error::msg("no command given");
    };
    let e = Command::new("ip")
        .args(["netns", "exec", name])
        .arg(prog)
        .args(args)
        .exec();
    Error::msg(format!("running ip netns exec: {e}"))
}

/// The topology lab `name` runs: its file, changed as its changes log says.
pub fn running_topology(name: &str) -> Result<Topology, Error> {
    check_name(name).map_err(Error::msg)?;
    let dir = state_dir(name);
    let p = dir.join("topology.toml");
    if !p.exists() {
        return Err(Error::msg(format!("lab `{name}` is not running")));
    }
    let source = read_json::<LabState>(&dir.join("state.json"))
        .map_or_else(|_| p.display().to_string(), |s| s.topology_source);
    let text = fs::read_to_string(&p)?;
    let log_path = dir.join(crate::changes::CHANGES_LOG);
    let log = crate::changes::read_log(&log_path)?;
    crate::changes::replay(Topology::parse(&text, &source)?, &log, &log_path)
}

/// The state of running lab `name` (`state.json`).
pub fn lab_state(name: &str) -> Result<LabState, Error> {
    check_name(name).map_err(Error::msg)?;
    read_json(&state_dir(name).join("state.json")).map_err(|_| {
        Error::msg(format!(
            "lab `{name}` is not running (start it with `vtnt lab up --name {name}`)"
        ))
    })
}

/// What lab `name`'s BGP speakers run (`bgp.json`), if it was started with them.
pub fn bgp_state(name: &str) -> Result<crate::bgp::BgpState, Error> {
    check_name(name).map_err(Error::msg)?;
    read_json(&state_dir(name).join(crate::bgp::BGP_STATE)).map_err(|_| {
        Error::msg(format!(
            "lab `{name}` runs no BGP speaker (`vtnt lab up --bgp --name {name}`)"
        ))
    })
}

/// The VM attach parameters of lab `name`.
pub fn vm_info(name: &str) -> Result<VmInfo, Error> {
    check_name(name).map_err(Error::msg)?;
    read_json(&state_dir(name).join("vm.json"))
        .map_err(|_| Error::msg(format!("lab `{name}` is not running (no vm.json)")))
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> Result<T, Error> {
    let text = fs::read_to_string(p)?;
    serde_json::from_str(&text).map_err(|e| Error::msg(format!("{}: {e}", p.display())))
}
