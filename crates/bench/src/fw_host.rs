//! Where `vtnt bench fw` runs its network function (`vtnt fw run`): a process in the NF
//! namespace (native), or the static `vtnt` in a runc or a Docker container whose network
//! is that namespace, through `vtnt-runtimes`' own machinery (the runc bundle and
//! [`runc::run`]; a Docker engine started in the namespace, the scratch image, containers
//! with `--network host`), so the container sees the NF namespace's two veths as a
//! container started by `vtnt run --runtime runc|docker` sees the lab's network. The rule
//! file reaches the container as a user would give it one: copied into the runc bundle's
//! rootfs, bind-mounted read-only into the Docker container.
//!
//! The unikernel's NF (`vtnt fw run --runtime spt|microvm`) takes whole devices: for its
//! run, each veth is put on a Linux bridge with a TAP device the guest gets (as a VM's NIC
//! is plugged), and the bridges and TAPs go when it stops, so the kernel baselines find
//! the veths as they were. Its rows carry that bridge's cost; its memory is the guest's
//! process (the spt tender, or QEMU).
//!
//! The full VM (`--runtimes vm`) is `vtnt-runtimes`' Debian box booted by QEMU as the NF
//! ([`vm::start_nf`]: the box's own static `vtnt fw run`, the rule file its second disk),
//! its two NICs on TAPs bridged to the veths as the unikernel's; its memory and CPU are
//! QEMU's. The same box is the kernel baselines' VM ([`NfHost::start_router`]): Debian's
//! iptables or nftables in the guest, which routes between the two NICs.
//!
//! LXD (`--runtimes lxd`, [`crate::fw_lxd`]) is no runtime of `vtnt run`, so the rows'
//! hosts are a bench-level [`NfPlace`]: a [`Runtime`], or LXD. Its NF is the static
//! `vtnt` in a privileged LXD container of the bench's own daemon (started in the NF
//! namespace, gone with the [`NfHost`]) whose init is `vtnt fw run` with only `CAP_NET_RAW`
//! (as the Docker row's), and whose NICs are the NF namespace's two veths themselves
//! (LXD's physical NICs, given back when it stops): no bridge, as for the runc and Docker
//! rows. The rule file is bind-mounted read-only (a disk device); the load line is read
//! from the container's console; memory and CPU are its init's, the NF itself.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sched::CpuSet;
use vtnt_artifacts::Artifact;
use vtnt_measure::cgroup::Cgroup;
use vtnt_measure::proc::{kill_pid, Supervised};
use vtnt_runtimes::{docker, paths, runc, vm, BuildOptions, Driver, Runtime};

use crate::fw_lxd;

/// Where `vtnt bench fw` runs its NF: a runtime of `vtnt run`, or LXD (the bench's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NfPlace {
    Runtime(Runtime),
    Lxd,
}

impl NfPlace {
    /// The rows' `runtime`: the runtime's name, or "lxd".
    pub fn name(self) -> &'static str {
        match self {
            NfPlace::Runtime(rt) => rt.name(),
            NfPlace::Lxd => "lxd",
        }
    }

    /// Whether the NF runs the static `vtnt` from the installed tree (runc, Docker, LXD):
    /// then the native row runs it too, so that every row runs the same binary.
    pub fn static_vtnt(self) -> bool {
        match self {
            NfPlace::Runtime(rt) => {
                matches!(rt.entry().driver, Driver::Runc | Driver::Docker(_))
            }
            NfPlace::Lxd => true,
        }
    }
}

impl From<Runtime> for NfPlace {
    fn from(rt: Runtime) -> NfPlace {
        NfPlace::Runtime(rt)
    }
}

impl std::str::FromStr for NfPlace {
    type Err = String;
    /// A runtime's name (`vtnt run --runtime`'s), or `lxd`.
    fn from_str(s: &str) -> Result<NfPlace, String> {
        if s == "lxd" {
            return Ok(NfPlace::Lxd);
        }
        <Runtime as clap::ValueEnum>::from_str(s, false)
            .map(NfPlace::Runtime)
            .map_err(|_| {
                let names: Vec<&str> = Runtime::ALL.iter().map(|r| r.name()).collect();
                format!("{s:?} is none of {}, lxd", names.join(", "))
            })
    }
}

/// Where the rule file is inside a container.
const RULES_IN: &str = "/rules";

/// How long an NF may take to load its rules and open its interfaces.
const START_WAIT: Duration = Duration::from_secs(120);

/// The TAP devices the unikernel's NF (and the VM's) gets, and the bridges that join each
/// to its veth.
const TAPS: [&str; 2] = ["ta0", "tb0"];
const BRIDGES: [&str; 2] = ["fwa", "fwb"];
const VETHS: [&str; 2] = ["a0", "b0"];

/// The row's accelerator column: this host's kernel for a process or a container, the
/// microVM's accelerator and VMM, the Debian VM's accelerator.
pub fn accelerator(rt: impl Into<NfPlace>) -> &'static str {
    use vtnt_unikernel::accel::Accelerator as A;
    let rt = match rt.into() {
        NfPlace::Runtime(rt) => rt,
        NfPlace::Lxd => return "none (LXD container)",
    };
    match rt.entry().driver {
        Driver::Native => "none",
        Driver::Spt => "none (spt process)",
        Driver::Microvm => {
            vtnt_artifacts::find(Artifact::NfVm).map_or("unknown", |f| microvm_accelerator(&f.path))
        }
        Driver::Vm => match vm::accel() {
            A::Kvm => "KVM (QEMU, Debian VM)",
            A::PvmKvm => "PVM-KVM (QEMU, Debian VM)",
            A::Tcg => "TCG (QEMU, Debian VM)",
        },
        _ => "none (container)",
    }
}

/// The microVM row's accelerator and VMM: the NF runs under `vtnt fw run`'s default VMM
/// (`vtnt-monitor` where /dev/kvm works, else QEMU).
fn microvm_accelerator(image: &Path) -> &'static str {
    use vtnt_unikernel::accel::Accelerator as A;
    use vtnt_unikernel::launch::Vmm;
    let vmm = vtnt_unikernel::launch::default_vmm(image);
    let accel = vtnt_runtimes::microvm::accel(image, vmm, vtnt_unikernel::qemu::Accel::Auto);
    match (vmm, accel) {
        (Vmm::Monitor, A::Kvm) => "KVM (vtnt-monitor)",
        (Vmm::Monitor, A::PvmKvm) => "PVM-KVM (vtnt-monitor)",
        (_, A::Kvm) => "KVM (QEMU)",
        (_, A::PvmKvm) => "PVM-KVM (QEMU)",
        (_, A::Tcg) => "TCG (QEMU)",
    }
}

/// What `rt` needs here that is missing, if anything.
pub fn missing(rt: impl Into<NfPlace>) -> Option<String> {
    let need = |progs: &[(&str, &str)]| {
        progs
            .iter()
            .find(|(p, _)| paths::which(p).is_none())
            .map(|(p, pkg)| format!("`{p}` (Debian package {pkg})"))
    };
    let static_vtnt = || {
        paths::static_vtnt()
            .err()
            .map(|e| format!("the static vtnt ({e})"))
    };
    let image = |a: Artifact| {
        vtnt_artifacts::find(a)
            .err()
            .map(|e| format!("the NF's image ({e})"))
    };
    let cgroups = || {
        (!vtnt_measure::cgroup::available())
            .then(|| "cgroup v1 controllers (mounted under /sys/fs/cgroup)".to_string())
    };
    let rt = match rt.into() {
        NfPlace::Runtime(rt) => rt,
        NfPlace::Lxd => return fw_lxd::missing().or_else(static_vtnt),
    };
    match rt.entry().driver {
        Driver::Native => None,
        Driver::Runc => need(&[("runc", "runc"), ("tar", "tar")])
            .or_else(static_vtnt)
            .or_else(cgroups),
        Driver::Docker(_) => need(&[
            ("dockerd", "docker.io"),
            ("containerd", "containerd"),
            ("nsenter", "util-linux"),
            ("tar", "tar"),
        ])
        .or_else(static_vtnt)
        .or_else(cgroups),
        Driver::Spt => image(Artifact::NfSpt),
        Driver::Microvm => {
            need(&[("qemu-system-x86_64", "qemu-system-x86")]).or_else(|| image(Artifact::NfVm))
        }
        // QEMU, and what the box is made of when it is not cached yet (the static vtnt,
        // debootstrap's Debian, this host's ethtool for the NF's offloads)
        Driver::Vm => need(&[
            ("qemu-system-x86_64", "qemu-system-x86"),
            ("qemu-img", "qemu-utils"),
            ("mkfs.ext4", "e2fsprogs"),
            ("debootstrap", "debootstrap"),
            ("ethtool", "ethtool"),
        ])
        .or_else(static_vtnt),
    }
}

/// One runtime made ready in one NF namespace: its image unpacked or imported, its engine
/// started (Docker); removed on drop.
pub struct NfHost {
    runtime: NfPlace,
    netns: String,
    kind: HostKind,
}

enum HostKind {
    /// `ip netns exec NS vtnt ...`.
    Native { vtnt: PathBuf },
    /// `ip netns exec NS vtnt fw run --runtime FORM ... ta0 tb0`, the TAPs bridged.
    Guest { vtnt: PathBuf, form: &'static str },
    /// The Debian box unpacked in `dir`, booted on the bridged TAPs.
    Vm {
        box_dir: PathBuf,
        _dir: paths::TempDir,
    },
    Runc {
        rootfs: PathBuf,
        dir: paths::TempDir,
    },
    Docker {
        client: docker::Client,
        tag: String,
        // dropped after the image is removed (field order)
        _engine: Box<docker::Engine>,
    },
    /// The container [`LXD_NAME`] made once, started for each NF; the kernel
    /// baselines' [`LXD_KERNEL`] once made.
    Lxd {
        lxd: Box<fw_lxd::Lxd>,
        kernel_made: std::sync::atomic::AtomicBool,
    },
}

/// The LXD container's name, and its image's alias.
const LXD_NAME: &str = "vtnt-fw";

/// The LXD container of the kernel baselines (and its image's alias): an empty rootfs
/// whose `/usr` and `/etc` are this host's, bind-mounted read-only (Debian's
/// iptables-restore, nft, ip and sysctl, as the native baselines run them; `/bin`,
/// `/sbin`, `/lib` and `/lib64` link into `/usr` as on merged-/usr Debian), its init
/// `sleep infinity`, LXD's privileged capabilities (`CAP_NET_ADMIN` for netfilter).
const LXD_KERNEL: &str = "vtnt-fw-kernel";

impl NfHost {
    /// Makes `runtime` ready to run NFs in namespace `netns`; `vtnt` is the native
    /// row's binary (the unikernel's rows run this process's own). A runtime missing something is an error naming it.
    pub fn new(runtime: impl Into<NfPlace>, netns: &str, vtnt: &Path) -> anyhow::Result<NfHost> {
        let runtime = runtime.into();
        if let Some(what) = missing(runtime) {
            bail!(
                "vtnt bench fw --runtimes {}: missing {what}",
                runtime.name()
            );
        }
        let rt = match runtime {
            NfPlace::Runtime(rt) => rt,
            NfPlace::Lxd => {
                let lxd = fw_lxd::Lxd::start(netns)?;
                lxd.import(LXD_NAME, &[(&paths::static_vtnt()?, "/vtnt")], &[])?;
                let init = [
                    "/vtnt", "fw", "run", "--rules", RULES_IN, VETHS[0], VETHS[1],
                ];
                lxd.create(LXD_NAME, LXD_NAME, &init, Some(&["net_raw"]), &VETHS)?;
                return Ok(NfHost {
                    runtime,
                    netns: netns.to_string(),
                    kind: HostKind::Lxd {
                        lxd: Box::new(lxd),
                        kernel_made: std::sync::atomic::AtomicBool::new(false),
                    },
                });
            }
        };
        let kind = match rt.entry().driver {
            Driver::Runc => {
                let image = Runtime::Runc.build_image(&BuildOptions::default())?;
                let dir = paths::TempDir::new("fw-runc")?;
                let rootfs = runc::install(&image.path, dir.path())?;
                HostKind::Runc { rootfs, dir }
            }
            Driver::Docker(flavor) => {
                let engine = docker::Engine::start(Some(netns))?;
                let client = engine.client();
                let image = docker::build_image(&BuildOptions::default(), flavor)?;
                let tag = client.load(&image.path, flavor)?;
                HostKind::Docker {
                    client,
                    tag,
                    _engine: Box::new(engine),
                }
            }
            // the box `vtnt run --runtime vm` boots (built into the image cache if it is not
            // there), unpacked once for every row
            Driver::Vm => {
                let image = Runtime::Vm.build_image(&BuildOptions::default())?;
                let dir = paths::TempDir::new("fw-vm")?;
                let box_dir = vm::install(&image.path, dir.path())?;
                HostKind::Vm { box_dir, _dir: dir }
            }
            // this vtnt, which found the NF's images (the static one looks beside itself)
            Driver::Spt | Driver::Microvm => HostKind::Guest {
                vtnt: std::env::current_exe().context("finding the vtnt binary")?,
                form: runtime.name(),
            },
            _ => HostKind::Native {
                vtnt: vtnt.to_path_buf(),
            },
        };
        Ok(NfHost {
            runtime,
            netns: netns.to_string(),
            kind,
        })
    }

    pub fn runtime(&self) -> NfPlace {
        self.runtime
    }

    /// LXD's host: its kernel baselines' container (`vtnt-fw-kernel`) started (made on first
    /// use), holding the NF namespace's veths until it is dropped; other hosts: none.
    pub fn kernel_box(&self) -> anyhow::Result<Option<KernelBox>> {
        let HostKind::Lxd { lxd, kernel_made } = &self.kind else {
            return Ok(None);
        };
        let client = lxd.client();
        if !kernel_made.load(std::sync::atomic::Ordering::Relaxed) {
            let merged = [
                ("usr/bin", "/bin"),
                ("usr/sbin", "/sbin"),
                ("usr/lib", "/lib"),
                ("usr/lib64", "/lib64"),
            ];
            lxd.import(LXD_KERNEL, &[], &merged)?;
            let init = ["/usr/bin/sleep", "infinity"];
            lxd.create(LXD_KERNEL, LXD_KERNEL, &init, None, &VETHS)?;
            for dir in ["/usr", "/etc"] {
                client.bind(LXD_KERNEL, &dir[1..], Path::new(dir), dir)?;
            }
            kernel_made.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        (client.start(LXD_KERNEL)).inspect_err(|_| stop_lxd(&client, &self.netns, LXD_KERNEL))?;
        Ok(Some(KernelBox {
            client,
            netns: self.netns.clone(),
        }))
    }

    /// Starts `vtnt fw run --rules RULES a0 b0` and waits until it forwards (its first
    /// line on stderr, which says how long the rules took to load).
    pub fn start(&self, rules: &Path) -> anyhow::Result<RunningNf> {
        let words = |file: &str| -> Vec<String> {
            ["fw", "run", "--rules", file, VETHS[0], VETHS[1]]
                .map(String::from)
                .to_vec()
        };
        let in_netns = |vtnt: &Path, args: &[String]| {
            let mut cmd = std::process::Command::new("ip");
            cmd.args(["netns", "exec", &self.netns])
                .arg(vtnt)
                .args(args);
            cmd
        };
        let (child, cgroup, cleanup) = match &self.kind {
            HostKind::Native { vtnt } => {
                let cmd = in_netns(vtnt, &words(&rules.display().to_string()));
                let child = Supervised::spawn(cmd, "vtnt fw run")?;
                (Some(child), None, Cleanup::None)
            }
            HostKind::Guest { vtnt, form } => {
                // the bridges go with the NF, even when it does not start
                let cleanup = Cleanup::Taps {
                    netns: self.netns.clone(),
                    wrapped: true,
                };
                plug_taps(&self.netns)?;
                let mut args = vec!["fw".to_string(), "run".into(), "--runtime".into()];
                args.extend([form.to_string(), "--rules".into()]);
                args.push(rules.display().to_string());
                args.extend(TAPS.map(String::from));
                let child = Supervised::spawn(in_netns(vtnt, &args), "vtnt fw run")?;
                (Some(child), None, cleanup)
            }
            HostKind::Vm { box_dir, .. } => {
                let cleanup = Cleanup::Taps {
                    netns: self.netns.clone(),
                    wrapped: false,
                };
                plug_taps(&self.netns)?;
                let child = vm::start_nf(box_dir, TAPS, Some(&self.netns), rules, None)?;
                (Some(child), None, cleanup)
            }
            HostKind::Runc { rootfs, dir } => {
                let inside = rootfs.join(RULES_IN.trim_start_matches('/'));
                let _ = std::fs::remove_file(&inside);
                std::fs::hard_link(rules, &inside)
                    .or_else(|_| std::fs::copy(rules, &inside).map(|_| ()))
                    .with_context(|| format!("copying {} into the bundle", rules.display()))?;
                let cgroup = Cgroup::create(&format!("vtnt/{}", paths::unique("fw-runc")))?;
                let mut args = vec!["/vtnt".to_string()];
                args.extend(words(RULES_IN));
                let netns = PathBuf::from("/run/netns").join(&self.netns);
                let (child, id, root) =
                    runc::run(rootfs, dir.path(), &args, Some(&netns), &cgroup, None)?;
                (Some(child), Some(cgroup), Cleanup::Runc { id, root })
            }
            HostKind::Docker { client, tag, .. } => {
                let cgroup = Cgroup::create(&format!("vtnt/{}", paths::unique("fw-docker")))?;
                let name = paths::unique("vtnt-fw");
                let mut cmd = client.command();
                cmd.args(["run", "--rm", "--name", &name, "--network", "host"])
                    .args(["--cap-drop", "ALL", "--cap-add", "NET_RAW"])
                    .arg("--volume")
                    .arg(format!("{}:{RULES_IN}:ro", rules.display()))
                    .arg("--cgroup-parent")
                    .arg(format!("/{}", cgroup.rel()))
                    .arg(tag)
                    .args(words(RULES_IN));
                let child = Supervised::spawn(cmd, &format!("docker container {name}"))?;
                let cleanup = Cleanup::Docker {
                    client: client.clone(),
                    name,
                };
                (Some(child), Some(cgroup), cleanup)
            }
            HostKind::Lxd { lxd, .. } => {
                let client = lxd.client();
                client.bind(LXD_NAME, "rules", rules, RULES_IN)?;
                // stopped (its NICs given back) even when it did not start whole
                let netns = self.netns.clone();
                let pid = (client.start(LXD_NAME))
                    .inspect_err(|_| stop_lxd(&client, &netns, LXD_NAME))?;
                (None, None, Cleanup::Lxd { client, pid, netns })
            }
        };
        RunningNf::started(child, cgroup, cleanup)
    }

    /// In the full VM only: boots the box as a Linux router filtering with the kernel's
    /// `filter` loaded from `rules` (the kernel baselines in the VM, [`vm::start_router`]),
    /// on the bridged TAPs as the VM's NF, `ends` the (address, MAC) of the host behind
    /// veth A and of the one behind B; waits until the rules hold (the loader's time).
    pub fn start_router(
        &self,
        filter: vm::KernelFilter,
        rules: &Path,
        ends: [(Ipv4Addr, &str); 2],
    ) -> anyhow::Result<RunningNf> {
        let HostKind::Vm { box_dir, .. } = &self.kind else {
            bail!("only the Debian VM routes through its own kernel's filter");
        };
        let cleanup = Cleanup::Taps {
            netns: self.netns.clone(),
            wrapped: false,
        };
        plug_taps(&self.netns)?;
        let child = vm::start_router(box_dir, TAPS, Some(&self.netns), rules, filter, ends)?;
        RunningNf::started(Some(child), None, cleanup)
    }
}

impl Drop for NfHost {
    fn drop(&mut self) {
        if let HostKind::Docker { client, tag, .. } = &self.kind {
            client.remove_image(tag);
        }
    }
}

/// The kernel baselines' LXD container, running with the NF namespace's veths; stopped
/// on drop (the veths back and up in the namespace).
pub struct KernelBox {
    client: fw_lxd::Client,
    netns: String,
}

impl KernelBox {
    /// `program` to run in the container (`lxc exec`), unstarted.
    pub fn command(&self, program: &str) -> std::process::Command {
        self.client.exec(LXD_KERNEL, program)
    }
}

impl Drop for KernelBox {
    fn drop(&mut self) {
        stop_lxd(&self.client, &self.netns, LXD_KERNEL);
    }
}

/// Runs `ip -n NETNS ARGS` (`vtnt_netns::ip`, which fails with ip's own words).
fn ip(netns: &str, args: &str) -> anyhow::Result<()> {
    let mut all = vec!["-n", netns];
    all.extend(args.split_whitespace());
    vtnt_netns::ip(&all).with_context(|| format!("ip {args} in {netns}"))?;
    Ok(())
}

/// Puts each veth of `netns` on a bridge with a new TAP device, all up.
fn plug_taps(netns: &str) -> anyhow::Result<()> {
    for ((tap, bridge), veth) in TAPS.iter().zip(BRIDGES).zip(VETHS) {
        ip(netns, &format!("tuntap add dev {tap} mode tap"))?;
        ip(netns, &format!("link add {bridge} type bridge"))?;
        for dev in [*tap, veth] {
            ip(netns, &format!("link set {dev} master {bridge}"))?;
            ip(netns, &format!("link set {dev} up"))?;
        }
        ip(netns, &format!("link set {bridge} up"))?;
    }
    Ok(())
}

/// Takes the bridges and TAPs of [`plug_taps`] away (those there are); the veths stay.
fn unplug_taps(netns: &str) {
    for dev in BRIDGES.iter().chain(&TAPS) {
        let _ = ip(netns, &format!("link del {dev}"));
    }
}

/// Stops LXD container `name` and brings the veths it gives back to `netns` up again
/// (LXD returns them down): the next NF or baseline finds them as before.
fn stop_lxd(client: &fw_lxd::Client, netns: &str, name: &str) {
    client.stop(name);
    for veth in VETHS {
        let _ = ip(netns, &format!("link set {veth} up"));
    }
}

enum Cleanup {
    None,
    /// The guest's bridges and TAPs in this namespace; `wrapped`: the child is `vtnt fw
    /// run`, whose child is the guest's process (else the child is QEMU itself).
    Taps {
        netns: String,
        wrapped: bool,
    },
    Runc {
        id: String,
        root: PathBuf,
    },
    Docker {
        client: docker::Client,
        name: String,
    },
    /// The LXD container [`LXD_NAME`], whose init `pid` is the NF (no child of ours),
    /// holding the veths of `netns`.
    Lxd {
        client: fw_lxd::Client,
        pid: u32,
        netns: String,
    },
}

/// A started NF; stopped (SIGTERM) and its container removed on drop.
pub struct RunningNf {
    /// The NF's process, or what runs it (none: LXD's container, which the daemon runs).
    child: Option<Supervised>,
    /// The container's group (containers only).
    cgroup: Option<Cgroup>,
    cleanup: Cleanup,
    /// The rules' load time the NF reported (read and compiled).
    pub load_ms: f64,
}

impl RunningNf {
    /// The NF `child` just started, once its rules hold (else an error, and it is stopped).
    fn started(
        child: Option<Supervised>,
        cgroup: Option<Cgroup>,
        cleanup: Cleanup,
    ) -> anyhow::Result<RunningNf> {
        let mut nf = RunningNf {
            child,
            cgroup,
            cleanup,
            load_ms: f64::NAN,
        };
        nf.load_ms = nf.wait_loaded()?;
        Ok(nf)
    }

    /// Waits for `vtnt fw run`'s first line: "... loaded in X ms ..." (a process's, on
    /// stderr; the Debian VM's, on its console) or the unikernel's
    /// `{"type":"nf",...,"load_us":T,...}`; LXD's, on its container's console.
    fn wait_loaded(&mut self) -> anyhow::Result<f64> {
        let until = Instant::now() + START_WAIT;
        loop {
            // what it said so far, and whether it ended
            let (err, ended) = match (&mut self.child, &self.cleanup) {
                (Some(child), _) => {
                    let mut out = child.stderr_lines_from(0);
                    out.extend(child.stdout_lines_from(0));
                    let err = String::from_utf8_lossy(&out).into_owned();
                    (err, child.try_status().is_some())
                }
                (None, Cleanup::Lxd { client, pid, .. }) => {
                    let ended = !Path::new(&format!("/proc/{pid}")).exists();
                    (client.console(LXD_NAME), ended)
                }
                (None, _) => bail!("no NF process"),
            };
            if let Some(line) = err.lines().find(|l| l.contains(" loaded in ")) {
                return line
                    .split(" loaded in ")
                    .nth(1)
                    .and_then(|r| r.split(" ms").next())
                    .and_then(|v| v.parse().ok())
                    .with_context(|| format!("vtnt fw run said: {line}"));
            }
            if let Some(line) = err.lines().find(|l| l.contains(r#""type":"nf""#)) {
                let json = &line[line.find('{').unwrap_or(0)..];
                return serde_json::from_str::<serde_json::Value>(json)
                    .ok()
                    .and_then(|v| v["load_us"].as_f64())
                    .map(|us| us / 1e3)
                    .with_context(|| format!("vtnt fw run said: {line}"));
            }
            if ended || Instant::now() > until {
                bail!("vtnt fw run did not start: {}", err.trim());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Puts every thread of the NF on `cpus` (`vtnt fw run` and its descendants, or
    /// every process of its container's group, which are not our children: a Docker
    /// container's is containerd-shim's); returns `Cpus_allowed_list` of its own process
    /// ([`RunningNf::pid`]) as the kernel reads it afterwards. Threads it starts later
    /// inherit their creator's CPUs.
    pub fn pin(&self, cpus: &CpuSet) -> anyhow::Result<String> {
        let procs = match (&self.cgroup, &self.child) {
            (Some(cg), _) => cg.pids(),
            (None, Some(child)) => vtnt_measure::proc::tree(child.pid()),
            (None, None) => vtnt_measure::proc::tree(self.pid()?),
        };
        vtnt_measure::cpus::pin_tasks(procs, cpus).context("pinning the NF")?;
        let pid = self.pid()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading the NF's /proc/{pid}/status"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
            .context("no Cpus_allowed_list in the NF's status")
    }

    /// The NF's own process (in a container: the one named `vtnt` in its group; the
    /// unikernel's: the spt tender or QEMU that `vtnt fw run` started; the Debian VM's:
    /// QEMU; LXD's: its container's init).
    pub fn pid(&self) -> anyhow::Result<u32> {
        if let Cleanup::Lxd { pid, .. } = self.cleanup {
            return Ok(pid);
        }
        let child = self.child.as_ref().context("no NF process")?;
        if let Cleanup::Taps { wrapped: true, .. } = self.cleanup {
            let pid = child.pid();
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .with_context(|| format!("the children of vtnt fw run ({pid})"))?;
            return children
                .split_whitespace()
                .find_map(|c| c.parse().ok())
                .context("vtnt fw run started no guest");
        }
        let Some(cg) = &self.cgroup else {
            return Ok(child.pid());
        };
        cg.pids()
            .into_iter()
            .find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "vtnt")
            })
            .context("no vtnt process in the container's cgroup")
    }
}

impl Drop for RunningNf {
    fn drop(&mut self) {
        // the unikernel's `vtnt fw run` stops its guest itself; QEMU of the VM is the child
        let pid = match self.cleanup {
            Cleanup::Taps { .. } => self.child.as_ref().map(Supervised::pid),
            // LXD stops it (SIGKILL: the NF is its namespace's init)
            Cleanup::Lxd { .. } => None,
            _ => self.pid().ok(),
        };
        if let Some(pid) = pid {
            kill_pid(pid, libc::SIGTERM);
        }
        if let Some(child) = self.child.take() {
            let _ = child.wait(Duration::from_secs(30));
        }
        match &self.cleanup {
            Cleanup::None => {}
            Cleanup::Taps { netns, .. } => unplug_taps(netns),
            Cleanup::Runc { id, root } => runc::destroy(id, root),
            Cleanup::Docker { client, name } => client.remove(name),
            Cleanup::Lxd { client, netns, .. } => stop_lxd(client, netns, LXD_NAME),
        }
    }
}
