//! The stream endpoint of each runtime, on a path from the client's namespace: an
//! `iperf3 -s` process in a namespace of its own behind a veth (native), the same in a
//! runc container or a Docker container whose network is that namespace (so the three
//! Linux runtimes share one path, dual stack: an IPv6 address beside the IPv4 one), `iperf3 -s` in the full Debian VM (its box carries
//! Debian's iperf3; `vtnt_runtimes::vm::start_iperf3`; dual stack too, its IPv6 address
//! set statically as a TAP job's) and the unikernel's own endpoint
//! (`vtnt-kernel` feature `stream`, booted through `vtnt_unikernel::launch::run_job` with the
//! row's VMM, or as an spt process with the TAP at its descriptor 3:
//! `vtnt_runtimes::spt::start_on_tap`) behind a TAP device in the client's namespace. Each endpoint runs in a
//! cgroup of its own (the VMM's process for the VMs), whose CPU time is what the endpoint
//! side costs; everything is removed on drop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use vtnt_measure::cgroup::Cgroup;
use vtnt_measure::proc::Supervised;
use vtnt_runtimes::net::{Attached, Tap, Tap6};
use vtnt_runtimes::{docker, paths, runc, vm, Runtime};
use vtnt_unikernel::launch::{JobNet, Payload, RunSpec};
use vtnt_unikernel::netns::NetNs;

use crate::row::Row;

/// The port every endpoint listens on (iperf3's default).
pub const PORT: u16 = 5201;

/// A running endpoint.
pub struct Endpoint {
    /// Where the client sends to.
    pub addr: Ipv4Addr,
    /// Where the client sends to over IPv6, if the endpoint has IPv6 ([`ipv6_of`]).
    pub addr6: Option<Ipv6Addr>,
    /// The accelerator it runs on (`None`: this host's kernel).
    pub accel: Option<String>,
    /// Its cgroup (CPU time).
    pub cgroup: Cgroup,
    kind: Kind,
    // dropped last: the namespace outlives what runs in it
    _ns: Option<NetNs>,
}

enum Kind {
    Process(Supervised),
    Runc {
        _child: Supervised,
        id: String,
        root: PathBuf,
        _dir: paths::TempDir,
    },
    Docker {
        _child: Supervised,
        name: String,
        client: docker::Client,
        tag: String,
        _engine: Box<docker::Engine>,
    },
    Guest {
        console: vtnt_unikernel::ConsoleTap,
        thread:
            Option<JoinHandle<Result<vtnt_unikernel::launch::RunOutcome, vtnt_unikernel::Error>>>,
    },
    Vm {
        qemu: Supervised,
        _dir: paths::TempDir,
    },
    /// The unikernel's endpoint as a process (spt).
    Spt(Supervised),
}

impl Endpoint {
    /// CPU seconds the endpoint has used so far.
    pub fn cpu_secs(&self) -> f64 {
        self.cgroup.cpu_secs()
    }

    /// Waits until the endpoint listens (at most `wait`); fails naming what it saw.
    pub fn ready(&mut self, client: &NetNs, wait: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + wait;
        loop {
            let up = match &mut self.kind {
                Kind::Guest { console, thread } => {
                    let lines = console.lock().map(|l| l.clone()).unwrap_or_default();
                    if thread.as_ref().is_some_and(JoinHandle::is_finished) {
                        let tail: Vec<&String> = lines.iter().rev().take(3).collect();
                        bail!("the guest ended before it listened: {tail:?}");
                    }
                    stream_ready(&lines)
                }
                Kind::Process(p) => {
                    running(p, "iperf3 -s")?;
                    self.listens(client)
                }
                Kind::Spt(p) => {
                    running(p, "the spt guest")?;
                    stream_ready(&console_lines(p))
                }
                Kind::Vm { qemu, .. } => {
                    running(qemu, "the VM")?;
                    self.listens(client)
                }
                _ => self.listens(client),
            };
            if up {
                return Ok(());
            }
            if Instant::now() > until {
                bail!(
                    "the endpoint at {}:{PORT} did not listen within {} s",
                    self.addr,
                    wait.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the client sees the endpoint listen at each of its addresses.
    fn listens(&self, client: &NetNs) -> bool {
        listens(client, IpAddr::V4(self.addr))
            && self.addr6.is_none_or(|a| listens(client, IpAddr::V6(a)))
    }

    /// The guest's console so far (the unikernel's endpoints), for the report.
    pub fn console(&self) -> Vec<String> {
        match &self.kind {
            Kind::Guest { console, .. } => console.lock().map(|l| l.clone()).unwrap_or_default(),
            Kind::Spt(p) => console_lines(p),
            _ => Vec::new(),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        match &mut self.kind {
            Kind::Runc { id, root, .. } => runc::destroy(id, root),
            Kind::Docker {
                name, client, tag, ..
            } => {
                client.remove(name);
                client.remove_image(tag);
            }
            Kind::Guest { thread, .. } => {
                self.cgroup.kill_all(Duration::from_secs(2));
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
            Kind::Process(_) | Kind::Vm { .. } | Kind::Spt(_) => {}
        }
        self.cgroup.kill_all(Duration::from_secs(2));
    }
}

/// Whether the unikernel's console says its endpoint listens.
fn stream_ready(console: &[String]) -> bool {
    console
        .iter()
        .any(|l| l.starts_with("{\"type\":\"stream-ready\""))
}

/// A process's console (its standard output) so far, as lines.
fn console_lines(p: &Supervised) -> Vec<String> {
    String::from_utf8_lossy(&p.stdout_lines_from(0))
        .lines()
        .map(String::from)
        .collect()
}

/// Fails, with the end of what it printed, if `p` has exited.
fn running(p: &mut Supervised, what: &str) -> anyhow::Result<()> {
    if p.try_status().is_some() {
        let out = String::from_utf8_lossy(&p.stdout_lines_from(0)).to_string();
        bail!(
            "{what} exited before it listened: {}",
            vtnt_measure::proc::tail(out.trim(), 400)
        )
    }
    Ok(())
}

/// Whether something in the client's namespace sees `addr` listen on [`PORT`] (a TCP
/// connect through bash's `/dev/tcp`, bounded by `timeout`).
fn listens(client: &NetNs, addr: IpAddr) -> bool {
    client
        .command("timeout")
        .args([
            "1",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{addr}/{PORT}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The IPv6 address of endpoint number `index` of a run, on `2001:db8:79:INDEX::/64` (a
/// documentation prefix; the client's end is `::1`).
pub fn ipv6_of(index: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0x79, u16::from(index), 0, 0, 0, 2)
}

/// Gives the client's end `ifname` of endpoint `index`'s link its IPv6 address, `::1` of
/// [`ipv6_of`]'s /64, usable at once (no duplicate address detection); returns it.
fn add_near6(client: &NetNs, ifname: &str, index: u8) -> anyhow::Result<Ipv6Addr> {
    let near6 = Ipv6Addr::new(0x2001, 0xdb8, 0x79, u16::from(index), 0, 0, 0, 1);
    let a = format!("{near6}/64");
    client.ip(&["-6", "addr", "add", &a, "dev", ifname, "nodad"])?;
    Ok(near6)
}

/// Row `row`'s endpoint, number `index` of the run (its addresses are
/// `10.79.INDEX.0/24`, and for the Linux runtimes' namespace [`ipv6_of`]'s too), reached
/// from `client`; `tests`: how many tests the unikernel
/// serves before it exits; `wait`: the longest boot.
pub fn start(
    row: Row,
    index: u8,
    client: &NetNs,
    tests: u64,
    wait: Duration,
) -> anyhow::Result<Endpoint> {
    let near = format!("10.79.{index}.1/24");
    let addr = Ipv4Addr::new(10, 79, index, 2);
    if let Some(why) = row.vmm_missing() {
        bail!("{why}");
    }
    let cgroup = Cgroup::create(&format!("vtnt/{}", paths::unique("net")))?;
    match row.runtime {
        Runtime::Native | Runtime::Runc | Runtime::Docker => {
            let ns = NetNs::create(&vtnt_unikernel::netns::unique_name("vnets"))?;
            let (a, b) = (format!("vnc{index}"), "eth0".to_string());
            client.link(&a, &near, &ns, &b, &format!("{addr}/24"))?;
            // no duplicate address detection: the addresses are usable at once
            let addr6 = ipv6_of(index);
            add_near6(client, &a, index)?;
            ns.ip(&[
                "-6",
                "addr",
                "add",
                &format!("{addr6}/64"),
                "dev",
                &b,
                "nodad",
            ])?;
            let iperf3 = paths::need("iperf3", "iperf3")?;
            let kind = match row.runtime {
                Runtime::Native => {
                    let mut cmd = cgroup.wrap("ip");
                    cmd.args(["netns", "exec", ns.name()]).arg(&iperf3).args([
                        "-s",
                        "-p",
                        &PORT.to_string(),
                    ]);
                    Kind::Process(Supervised::spawn(cmd, "iperf3 -s")?)
                }
                Runtime::Runc => {
                    let dir = paths::TempDir::new("net-runc")?;
                    let rootfs = rootfs(&iperf3, dir.path())?;
                    let netns = PathBuf::from("/run/netns").join(ns.name());
                    let args = server_args(&iperf3);
                    let (child, id, root) =
                        runc::run(&rootfs, dir.path(), &args, Some(&netns), &cgroup, None)?;
                    Kind::Runc {
                        _child: child,
                        id,
                        root,
                        _dir: dir,
                    }
                }
                _ => start_docker(&iperf3, &ns, &cgroup)?,
            };
            Ok(Endpoint {
                addr,
                addr6: Some(addr6),
                accel: None,
                cgroup,
                kind,
                _ns: Some(ns),
            })
        }
        Runtime::Vm => {
            let tap = add_tap(client, index)?;
            let addr6 = tap.ipv6.map(|v6| v6.addr);
            let net = Attached::Tap(tap);
            let dir = paths::TempDir::new("net-vm")?;
            let image = Runtime::Vm.build_image(&Default::default())?;
            let box_dir = vm::install(&image.path, dir.path())?;
            let qemu = vm::start_iperf3(&box_dir, &net, u32::from(index), PORT, &cgroup)?;
            Ok(Endpoint {
                addr,
                addr6,
                accel: Some(vm::accel().name().to_string()),
                cgroup,
                kind: Kind::Vm { qemu, _dir: dir },
                _ns: None,
            })
        }
        Runtime::Microvm => start_guest(row, &add_tap(client, index)?, cgroup, tests, wait),
        Runtime::DockerScratch => {
            bail!("not a row of bench net: the docker row's container already holds iperf3 alone")
        }
        Runtime::Spt => {
            let tap = add_tap(client, index)?;
            let image = vtnt_unikernel::image::stream(true)?;
            let guest = vtnt_runtimes::spt::start_on_tap(
                &image,
                &tap,
                stream_words(tests),
                &cgroup,
                guest_watchdog(wait, tests),
            )?;
            Ok(Endpoint {
                addr,
                addr6: tap.ipv6.map(|v6| v6.addr),
                accel: None,
                cgroup,
                kind: Kind::Spt(guest),
                _ns: None,
            })
        }
    }
}

/// A minimal rootfs holding `iperf3` and the shared libraries it loads (`ldd`), for the
/// containers.
fn rootfs(iperf3: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let root = dir.join("rootfs");
    for d in ["proc", "dev", "sys", "tmp", "etc"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    vtnt_runtimes::debian::add_program(iperf3, &root)?;
    Ok(root)
}

fn server_args(iperf3: &Path) -> Vec<String> {
    vec![
        format!("/{}", iperf3.strip_prefix("/").unwrap_or(iperf3).display()),
        "-s".into(),
        "-p".into(),
        PORT.to_string(),
    ]
}

fn start_docker(iperf3: &Path, ns: &NetNs, cgroup: &Cgroup) -> anyhow::Result<Kind> {
    let engine = docker::Engine::start(Some(ns.name()))?;
    let client = engine.client();
    let dir = paths::TempDir::new("net-docker")?;
    let root = rootfs(iperf3, dir.path())?;
    let tarball = dir.path().join("rootfs.tar");
    docker::tar_rootfs(&root, &tarball)?;
    let tag = format!("vtnt-net:{}", paths::unique("img"));
    paths::run_cmd(client.command().arg("import").arg(&tarball).arg(&tag))
        .context("docker import")?;
    let name = paths::unique("vtnt-net");
    let mut cmd = client.command();
    cmd.args(["run", "--rm", "--name", &name, "--network", "host"])
        .arg("--cgroup-parent")
        .arg(format!("/{}", cgroup.rel()))
        .arg(&tag)
        .args(server_args(iperf3));
    let child = Supervised::spawn(cmd, &format!("docker container {name}"))?;
    Ok(Kind::Docker {
        _child: child,
        name,
        client,
        tag,
        _engine: Box::new(engine),
    })
}

/// What the unikernel's endpoint is told: serve `tests` tests on [`PORT`], then exit.
fn stream_words(tests: u64) -> Payload {
    Payload::Words(format!("stream port={PORT} tests={tests}"))
}

/// The unikernel's watchdog, which ends it if the run does not: the boot, and every test
/// at most a minute.
fn guest_watchdog(wait: Duration, tests: u64) -> Duration {
    Duration::from_secs(wait.as_secs() + tests * 60)
}

/// A TAP device `vntINDEX` in the client's namespace at `10.79.INDEX.1/24` and
/// [`ipv6_of`]'s `::1`, the guest at `.2` and [`ipv6_of`] behind it (dual stack: the
/// guest sets its IPv6 address statically, as a TAP job's `ip6=`).
fn add_tap(client: &NetNs, index: u8) -> anyhow::Result<Tap> {
    let ifname = format!("vnt{index}");
    client.add_tap(&ifname, &format!("10.79.{index}.1/24"))?;
    let gateway = add_near6(client, &ifname, index)?;
    Ok(Tap {
        ifname,
        addr: Ipv4Addr::new(10, 79, index, 2),
        len: 24,
        gateway: Ipv4Addr::new(10, 79, index, 1),
        ipv6: Some(Tap6 {
            addr: ipv6_of(index),
            len: 64,
            gateway,
        }),
        netns: Some(client.name().to_string()),
    })
}

/// The unikernel's endpoint under the row's VMM, through the path every microVM job
/// takes (`vtnt_unikernel::launch::run_job`), with the endpoint's words instead of a job.
fn start_guest(
    row: Row,
    tap: &Tap,
    cgroup: Cgroup,
    tests: u64,
    wait: Duration,
) -> anyhow::Result<Endpoint> {
    let image = vtnt_unikernel::image::stream(false)?;
    let console: vtnt_unikernel::ConsoleTap = Arc::new(Mutex::new(Vec::new()));
    let mut run = RunSpec::with_payload(
        stream_words(tests),
        JobNet::Tap {
            ifname: tap.ifname.clone(),
            netns: tap.netns.clone(),
            guest: tap.guest(),
            gateway: tap.gateway.to_string(),
            ipv6: tap.guest6(),
        },
    );
    run.vmm = row.vmm;
    run.accel = row.accel;
    run.memory_mib = 64;
    run.timeout = guest_watchdog(wait, tests);
    run.wrapper = cgroup.wrapper();
    run.console = Some(console.clone());
    let accel = run.vmm.resolve(&run, &image).accelerator(&image, run.accel);
    run.image = Some(image);
    let thread = std::thread::spawn(move || vtnt_unikernel::launch::run_job(&run));
    Ok(Endpoint {
        addr: tap.addr,
        addr6: tap.ipv6.map(|v6| v6.addr),
        accel: Some(accel.name().to_string()),
        cgroup,
        kind: Kind::Guest {
            console,
            thread: Some(thread),
        },
        _ns: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint that never listens is given up after the bounded wait, and a test
    /// against it fails with iperf3's words within its connect timeout: both say what
    /// happened, neither hangs.
    #[test]
    fn an_endpoint_that_never_answers_is_bounded() {
        vtnt_testkit::require_root!("iperf3", "ip");
        vtnt_testkit::require_cgroup_v1!(vtnt_measure::cgroup::available());
        let client = NetNs::create(&vtnt_unikernel::netns::unique_name("vnetq")).unwrap();
        let ns = NetNs::create(&vtnt_unikernel::netns::unique_name("vnetr")).unwrap();
        client
            .link("vnq0", "10.79.250.1/24", &ns, "eth0", "10.79.250.2/24")
            .unwrap();
        let cgroup = Cgroup::create(&format!("vtnt/{}", paths::unique("net-test"))).unwrap();
        let mut silent = cgroup.wrap("sleep");
        silent.arg("60");
        let mut ep = Endpoint {
            addr: Ipv4Addr::new(10, 79, 250, 2),
            addr6: None,
            accel: None,
            cgroup,
            kind: Kind::Process(Supervised::spawn(silent, "sleep").unwrap()),
            _ns: Some(ns),
        };
        let t0 = Instant::now();
        let e = ep
            .ready(&client, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not listen within 1 s"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let t0 = Instant::now();
        let addr = IpAddr::V4(ep.addr);
        let e = super::super::test(&client, &ep, addr, super::super::Sweep::TcpMsg, 1024, 1)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("iperf3: unable to connect"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    }

    /// The unikernel's endpoint (as an spt process: no VM to boot) counts UDP datagrams
    /// longer than the MTU, which reach it as IPv4 fragments: at a pace the path carries
    /// without loss, nearly every datagram of 3,050 bytes (three fragments) and of 30,000
    /// bytes (21) is received whole.
    #[test]
    fn the_unikernels_endpoint_reads_datagrams_longer_than_the_mtu() {
        vtnt_testkit::require_root!("iperf3", "ip");
        vtnt_testkit::require_cgroup_v1!(vtnt_measure::cgroup::available());
        let client = NetNs::create(&vtnt_unikernel::netns::unique_name("vnetf")).unwrap();
        let wait = Duration::from_secs(120);
        let mut ep = start("spt".parse().unwrap(), 251, &client, 3, wait).unwrap();
        ep.ready(&client, wait).unwrap();
        for len in [3050, 30000] {
            let out = client
                .command("timeout")
                .args(["30", "iperf3", "-c", &ep.addr.to_string(), "-p"])
                .arg(PORT.to_string())
                .args(["-u", "-b", "20M", "-t", "1", "-J", "-l", &len.to_string()])
                .output()
                .unwrap();
            let j: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|_| panic!("{len}: {}", String::from_utf8_lossy(&out.stderr)));
            let sent = j["end"]["sum_sent"]["packets"].as_u64().unwrap_or(0);
            let got = j["end"]["sum_received"]["packets"].as_u64().unwrap_or(0);
            assert!(
                sent > 10 && got * 10 >= sent * 9,
                "{len} bytes: {got} of {sent} datagrams received: {j}"
            );
        }
    }
}
