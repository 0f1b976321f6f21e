//! `vtnt lab ...`: the emulated MPLS Internet. Parses options and calls `vtnt-lab`
//! (topologies, truth, generator) and `vtnt-lab-linux` (namespace, TUN, VM front,
//! daemon). See docs/lab.md.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use vtnt_lab::addr::to_v6;
use vtnt_lab::generate::{generate_toml, ClassMix};
use vtnt_lab::{GenOptions, Topology};
use vtnt_lab_linux as linux;

use vtnt_lab_linux::DEFAULT_NAME;

/// An address family, as `vtnt lab truth --targets` takes it.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Family {
    Ipv4,
    Ipv6,
}

#[derive(clap::Subcommand)]
pub enum LabCommand {
    /// Start a lab in the background: a network namespace with a TUN device carrying the
    /// vantage point's address, routes for the lab ranges, and a VM front on 127.0.0.1.
    /// Returns once the lab answers.
    Up {
        /// Topology file [default: the shipped reference topology].
        topology: Option<PathBuf>,
        /// Lab name: namespace and state directory /run/vtnt/lab/<NAME>.
        #[arg(long, default_value = DEFAULT_NAME)]
        name: String,
        /// UDP port of the VM front on 127.0.0.1 (0 = any free port).
        #[arg(long, default_value_t = 0)]
        vm_port: u16,
        /// The VMs' own LAN, routed to the vantage point like its LAN: slots past the
        /// vantage LAN's 120 and most of the DHCP pool [default: 10.253.0.0/16].
        #[arg(long)]
        vm_prefix: Option<String>,
        /// Seconds to wait for the lab to answer.
        #[arg(long, default_value_t = 10)]
        timeout: u64,
        /// Also run the lab's BGP speaker (Debian's BIRD 2) and a BIRD for the vantage
        /// point's border router, the lab announcing the LAN of every destination it
        /// reaches, withdrawn while a change cuts it off (docs/lab.md, "BGP").
        #[arg(long)]
        bgp: bool,
    },
    /// Start a front onto a real network: VMs attach as to a lab (`vtnt run --runtime
    /// microvm --net lab:NAME`) and probe the upstream network through its one address,
    /// behind a traceroute-aware NAT (vtnt-forward) with one policy and one rate budget
    /// for all of them. Stop it with `vtnt lab down --name NAME`.
    Front {
        /// Front name: state directory /run/vtnt/lab/<NAME>.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        front: FrontArgs,
    },
    /// The front daemon (started by `front`).
    #[command(hide = true)]
    ServeFront {
        #[arg(long)]
        name: String,
        #[arg(long)]
        state_dir: PathBuf,
        #[command(flatten)]
        front: FrontArgs,
    },
    /// Stop a lab and remove its namespace and state.
    Down {
        #[arg(long, default_value = DEFAULT_NAME)]
        name: String,
    },
    /// Change the running lab (docs/lab.md, "Changes at run time"): `link-down A B`,
    /// `link-up A B`, `lsp-reroute NAME R1,R2,...`, `lsp-down NAME`, `lsp-up NAME`.
    /// Returns once the lab runs the changed network (or says why it refused); the
    /// change is logged in the lab's `changes.jsonl` and `vtnt lab truth --name` shows
    /// the new paths.
    Change {
        #[arg(long, default_value = DEFAULT_NAME)]
        name: String,
        /// Print the change's log record as JSON.
        #[arg(long)]
        json: bool,
        /// The change, e.g. `link-down e2 e3`.
        #[arg(required = true, num_args = 1.., value_name = "CHANGE")]
        change: Vec<String>,
    },
    /// Show running labs (or one).
    Status {
        /// Only this lab [default: all].
        #[arg(long)]
        name: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside the lab's namespace, in this process's place (as `ip netns
    /// exec` does): its exit status is the command's, and a signal to this process is a
    /// signal to the command.
    Exec {
        #[arg(long, default_value = DEFAULT_NAME)]
        name: String,
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<OsString>,
    },
    /// Print the ground truth: paths, tunnels and their classes, vendor signatures.
    Truth {
        /// A topology file [default: the running lab's, else the reference topology].
        topology: Option<PathBuf>,
        #[arg(long, default_value = DEFAULT_NAME)]
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print beside each tunnel what exhaustive probing can observe of it (the
        /// oracle of `vtnt bench tnt-accuracy`: 8 Paris flows to every address).
        #[arg(long, conflicts_with = "targets")]
        oracle: bool,
        /// Print only the destinations' addresses, one per line (a `--targets` file for
        /// `vtnt tnt` or `vtnt trace`): IPv4, or with `--targets=ipv6` their IPv6 twins.
        #[arg(
            long,
            value_name = "FAMILY",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "ipv4",
            conflicts_with = "json"
        )]
        targets: Option<Family>,
    },
    /// Write a random topology (same seed, same topology).
    Generate {
        #[arg(long, required_unless_present = "settings")]
        seed: Option<u64>,
        /// Output file [default: standard output].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Destination hosts, one branch each (1..=15000; about 8 routers each with the
        /// default settings, up to 13 + the most LSRs per LSP: the lab takes 250,000
        /// routers).
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=vtnt_lab::generate::MAX_DESTINATIONS as u64))]
        destinations: u64,
        /// Class mix as weights none,explicit,implicit,opaque,invisible-php,invisible-uhp.
        #[arg(long, default_value = "20,50,6,4,15,5")]
        mix: String,
        /// LSRs per LSP, MIN-MAX (1 to 60).
        #[arg(long, default_value = "1-6")]
        lsrs: String,
        /// A generator setting, NAME=VALUE (repeatable): shares of ECMP, TE stacks, odd
        /// signatures, service labels and the like, vendors, host TTLs, path length;
        /// `--settings` lists them.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Print every setting `--set` takes, its default and what it means, and exit.
        #[arg(long)]
        settings: bool,
    },
    /// Validate a topology file and say what it holds.
    Check { topology: PathBuf },
    /// Print how a QEMU VM attaches to the running lab (netdev, device, guest address).
    VmNetdev {
        #[arg(long, default_value = DEFAULT_NAME)]
        name: String,
        /// Which VM slot (each has its own guest address and local UDP port).
        #[arg(long, default_value_t = 0)]
        index: u32,
        /// Print vm.json, with the slot computed (`slot`).
        #[arg(long)]
        json: bool,
    },
    /// Packets per second: the core in-process, then through a TUN (needs root).
    Bench {
        /// Probes for the in-process run.
        #[arg(long, default_value_t = 2_000_000)]
        probes: u64,
        /// Seconds of the TUN run.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Probes in flight through the TUN.
        #[arg(long, default_value_t = 512)]
        window: u64,
        /// Skip the TUN run.
        #[arg(long)]
        no_tun: bool,
    },
    /// The lab daemon (started by `up`).
    #[command(hide = true)]
    Serve {
        #[arg(long)]
        name: String,
        #[arg(long)]
        state_dir: PathBuf,
        #[arg(long, default_value_t = 0)]
        vm_port: u16,
        #[arg(long, default_value = linux::state::VM_PREFIX)]
        vm_prefix: String,
        #[arg(long, default_value = "")]
        source: String,
        #[arg(long)]
        bgp: bool,
        topology: PathBuf,
    },
}

/// What a front is told, by the user and by `front` to its daemon.
#[derive(clap::Args, Clone)]
pub struct FrontArgs {
    /// The network namespace whose network the VMs probe [default: this host's].
    #[arg(long)]
    upstream: Option<String>,
    /// The address probes leave from [default: the upstream's route source].
    #[arg(long)]
    public: Option<std::net::Ipv4Addr>,
    /// The IPv6 address IPv6 probes leave from [default: the upstream's route source
    /// towards the lab's IPv6 range, else the Internet's; none: IPv6 refused].
    #[arg(long)]
    public6: Option<std::net::Ipv6Addr>,
    /// Probes per second for all VMs together.
    #[arg(long, default_value_t = 1000)]
    pps: u32,
    /// Public targets may be probed (needs the network owners' consent).
    #[arg(long)]
    allow_public: bool,
    /// UDP port of the VM front on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    vm_port: u16,
}

impl From<FrontArgs> for linux::FrontSettings {
    fn from(f: FrontArgs) -> linux::FrontSettings {
        linux::FrontSettings {
            upstream: f.upstream,
            public: f.public,
            public6: f.public6,
            pps: f.pps,
            allow_public: f.allow_public,
            vm_port: f.vm_port,
        }
    }
}

/// `--vm-prefix`: an IPv4 prefix without host bits.
fn parse_prefix(s: &str) -> anyhow::Result<vtnt_lab::addr::Prefix> {
    s.parse()
        .map_err(|e| anyhow::anyhow!("--vm-prefix {s}: {e}"))
}

fn need_root(what: &str) -> anyhow::Result<()> {
    if !vtnt_linux::is_root() {
        bail!("`vtnt lab {what}` needs root (network namespaces and TUN devices)");
    }
    Ok(())
}

/// `log`: how this command logs, and so how the daemons it starts do.
pub fn run(cmd: LabCommand, log: &crate::logs::LogArgs) -> anyhow::Result<ExitCode> {
    match cmd {
        LabCommand::Up {
            topology,
            name,
            vm_port,
            vm_prefix,
            timeout,
            bgp,
        } => {
            if let Some(p) = &topology {
                Topology::load(p)?; // a bad file fails here, before anything starts
            }
            need_root("up")?;
            let exe = std::env::current_exe().context("finding the vtnt binary")?;
            let vm_prefix = vm_prefix.as_deref().map(parse_prefix).transpose()?;
            let o = linux::UpOptions {
                name,
                topology,
                vm_port,
                vm_prefix,
                exe,
                exe_args: log.args(),
                timeout: std::time::Duration::from_secs(timeout),
                bgp,
            };
            let s = linux::up(&o)?;
            let vm = linux::vm_info(&s.name)?;
            out!(
                "lab `{}` up: topology `{}` ({})",
                s.name,
                s.topology,
                s.topology_source
            );
            out!(
                "  namespace {}: {} {} via gateway {}",
                s.netns,
                s.tun,
                s.vp_address,
                s.gateway
            );
            if let Some(a6) = &s.vp_address6 {
                out!("  IPv6:      {} {a6}", s.tun);
            }
            out!("  probe it:  vtnt lab exec --name {} -- scamper -c \"trace -P icmp-paris\" -i 203.0.113.10", s.name);
            out!(
                "  VMs:       {} (vtnt lab vm-netdev --name {})",
                vm.endpoint,
                s.name
            );
            if bgp {
                let b = linux::bgp_state(&s.name)?;
                out!(
                    "  BGP:       AS{} (namespace {}) announces {} prefixes to AS{} (namespace {}); what it learned: birdc -s {} show route",
                    b.lab_as,
                    b.lab_netns,
                    b.announced.len(),
                    b.vantage_as,
                    b.vantage_netns,
                    b.vantage_socket.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Front { name, front: f } => {
            need_root("front")?;
            vtnt_engine::policy::check_rate(f.pps)
                .map_err(|e| anyhow::anyhow!("--pps {}: {e}", f.pps))?;
            let o = linux::FrontUpOptions {
                name,
                front: f.into(),
                exe: std::env::current_exe().context("finding the vtnt binary")?,
                exe_args: log.args(),
                timeout: std::time::Duration::from_secs(10),
            };
            let s = linux::front_up(&o)?;
            let vm = linux::vm_info(&s.name)?;
            out!("front `{}` up: {}", s.name, s.topology_source);
            out!(
                "  VMs:  {} on {} (vtnt run --runtime microvm --net lab:{} -- ...)",
                vm.endpoint,
                vm.prefix,
                s.name
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::ServeFront {
            name,
            state_dir,
            front: f,
        } => {
            vtnt_forward_linux::serve_front(&vtnt_forward_linux::FrontOptions {
                name,
                state_dir,
                front: f.into(),
            })?;
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Down { name } => {
            need_root("down")?;
            if linux::down(&name)? {
                out!("lab `{name}` down");
            } else {
                out!("lab `{name}` was not running");
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Change { name, json, change } => {
            let change: vtnt_lab::Change = change.join(" ").parse()?;
            need_root("change")?;
            let r = linux::change(&name, &change)?;
            if json {
                out!("{}", serde_json::to_string(&r)?);
            } else {
                out!("lab `{name}`: change {} applied: {}", r.seq, r.change);
                if !r.lsps_down.is_empty() {
                    out!("LSPs down: {}", r.lsps_down.join(" "));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Status { name, json } => {
            let all = linux::status(name.as_deref())?;
            if json {
                out!("{}", serde_json::to_string_pretty(&all)?);
            } else if all.is_empty() {
                out!("no lab running");
            }
            if !json {
                for s in &all {
                    put!("{}: {}", s.name, s.state);
                    if let Some(pid) = s.pid {
                        put!(" (pid {pid})");
                    }
                    if let Some(l) = &s.lab {
                        put!(", topology `{}`, {}", l.topology, l.vp_address);
                        if let Some(a6) = &l.vp_address6 {
                            put!(" and {a6}");
                        }
                        put!(" on {}, VM front 127.0.0.1:{}", l.tun, l.vm_port);
                    }
                    if let Some(st) = &s.stats {
                        put!(
                            ", packets in {} out {}",
                            st["lab"]["received"],
                            st["lab"]["sent"]
                        );
                    }
                    out!();
                }
            }
            Ok(
                if name.is_some() && all.iter().all(|s| s.state != "running") {
                    ExitCode::from(3)
                } else {
                    ExitCode::SUCCESS
                },
            )
        }
        LabCommand::Exec { name, command } => {
            need_root("exec")?;
            Err(linux::exec(&name, &command).into())
        }
        LabCommand::Truth {
            topology,
            name,
            json,
            oracle,
            targets,
        } => {
            let topo = match topology {
                Some(p) => Topology::load(&p)?,
                None => linux::running_topology(&name).unwrap_or_else(|_| Topology::reference()),
            };
            let truth = vtnt_lab::truth::truth(&topo);
            if let Some(family) = targets {
                for d in &truth.destinations {
                    match family {
                        Family::Ipv4 => out!("{}", d.dst),
                        Family::Ipv6 => out!("{}", vtnt_lab::addr::to_v6(d.dst)),
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            let oracle = oracle
                .then(|| vtnt_lab::oracle(&topo, &truth, &vtnt_lab::OracleOptions::default()));
            match (json, &oracle) {
                (true, None) => out!("{}", serde_json::to_string_pretty(&truth)?),
                (true, Some(o)) => out!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({ "truth": truth, "oracle": o })
                    )?
                ),
                (false, _) => print_truth(&truth, oracle.as_ref()),
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Generate {
            seed,
            out,
            destinations,
            mix,
            lsrs,
            set,
            settings,
        } => {
            if settings {
                let o = GenOptions::default();
                for (name, what) in vtnt_lab::generate::SETTINGS {
                    let default = o.get(name).unwrap_or_default();
                    out!("{name:<20} {default:<12} {what}");
                }
                return Ok(ExitCode::SUCCESS);
            }
            let seed = seed.context("--seed is required")?;
            const MIX: &str = "--mix: six comma-separated weights (none,explicit,implicit,opaque,invisible-php,invisible-uhp), not all 0";
            let w: Vec<u32> = mix
                .split(',')
                .map(|s| s.trim().parse())
                .collect::<Result<_, _>>()
                .context(MIX)?;
            let [none, explicit, implicit, opaque, invisible_php, invisible_uhp] = w[..] else {
                bail!(MIX);
            };
            if w.iter().all(|&x| x == 0) {
                bail!(MIX);
            }
            let range = lsrs
                .split_once('-')
                .and_then(|(lo, hi)| Some((lo.trim().parse().ok()?, hi.trim().parse().ok()?)))
                .filter(|&(lo, hi): &(usize, usize)| 1 <= lo && lo <= hi && hi <= 60);
            let Some(lsrs) = range else {
                bail!("--lsrs `{lsrs}`: MIN-MAX, 1 <= MIN <= MAX <= 60");
            };
            let mut o = GenOptions {
                destinations: destinations as usize,
                mix: ClassMix {
                    none,
                    explicit,
                    implicit,
                    opaque,
                    invisible_php,
                    invisible_uhp,
                },
                lsrs,
                ..GenOptions::default()
            };
            for kv in &set {
                o.set_pair(kv)
                    .map_err(|e| anyhow::anyhow!("--set: {e} (see --settings)"))?;
            }
            o.check()
                .map_err(|e| anyhow::anyhow!("lab generate: {e}"))?;
            let text = generate_toml(seed, &o);
            match out {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => put!("{text}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Check { topology } => {
            let t = Topology::load(&topology)?;
            let d = t.def();
            out!(
                "{}: topology `{}` is valid: {} routers, {} links, {} hosts, {} LSPs, {} vantage points",
                topology.display(), t.name(), d.routers.len(), d.links.len(), d.hosts.len(), d.lsps.len(), d.vantage_points.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::VmNetdev { name, index, json } => {
            let vm = linux::vm_info(&name)?;
            let g = vm.slot(index).context("no such VM slot")?;
            if json {
                // vm.json with the slot computed
                let mut v = serde_json::to_value(&vm)?;
                v["slot"] = serde_json::to_value(&g)?;
                out!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(ExitCode::SUCCESS);
            }
            out!("-netdev {} -device {}", g.netdev, g.device);
            out!(
                "# guest: {}  (older QEMU: -netdev {})",
                g.cmdline,
                g.netdev_socket
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Bench {
            probes,
            seconds,
            window,
            no_tun,
        } => bench(probes, seconds, window, no_tun),
        LabCommand::Serve {
            name,
            state_dir,
            vm_port,
            vm_prefix,
            source,
            bgp,
            topology,
        } => {
            linux::serve(&linux::ServeOptions {
                name,
                state_dir,
                topology,
                source,
                vm_port,
                vm_prefix: parse_prefix(&vm_prefix)?,
                bgp,
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn bench(probes: u64, seconds: f64, window: u64, no_tun: bool) -> anyhow::Result<ExitCode> {
    let core = linux::bench::core(Topology::reference(), probes);
    out!(
        "lab core (in-process, reference topology): {:.0} packets/s ({} probes, {} replies, {:.3} s)",
        core.pps(), core.probes, core.replies, core.secs
    );
    if no_tun {
        return Ok(ExitCode::SUCCESS);
    }
    need_root("bench")?;
    // The reference topology without link delays: the TUN run measures the front, not the
    // emulated propagation delay.
    let mut def = Topology::reference().def().clone();
    for l in &mut def.links {
        l.delay_ms = 0.0;
        l.delay_back_ms = None;
    }
    for h in &mut def.hosts {
        h.delay_ms = 0.0;
    }
    let topo = Topology::from_def(def)?;
    let name = format!("vtnt-bench-{}", std::process::id());
    let file = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&file, topo.to_toml())?;
    let exe = std::env::current_exe()?;
    let o = linux::UpOptions {
        name: name.clone(),
        topology: Some(file.clone()),
        vm_port: 0,
        vm_prefix: None,
        exe,
        exe_args: Vec::new(),
        timeout: std::time::Duration::from_secs(10),
        bgp: false,
    };
    linux::up(&o)?;
    let r = linux::bench::tun(&name, &topo, seconds, window);
    let _ = linux::down(&name);
    let _ = std::fs::remove_file(&file);
    let r = r?;
    out!(
        "lab via TUN (raw socket in the namespace, {window} in flight): {:.0} packets/s ({} probes, {} replies, {:.3} s)",
        r.pps(), r.probes, r.replies, r.secs
    );
    Ok(ExitCode::SUCCESS)
}

/// The truth as text, IPv6 twins beside the IPv4 addresses (each tunnel's on a line of
/// its own, after its oracle observation when `oracle` is given).
fn print_truth(t: &vtnt_lab::Truth, oracle: Option<&vtnt_lab::Oracle>) {
    out!("topology `{}`", t.topology);
    if let Some(o) = oracle {
        out!(
            "oracle: {} destinations traced, {} traces, {} probes",
            o.targets,
            o.traces,
            o.probes
        );
    }
    for l in &t.links_down {
        out!("link down: {}-{} {}", l.a, l.b, l.prefix);
    }
    for l in &t.lsps_down {
        out!("LSP down: {}: {}", l.name, l.reason);
    }
    for (i, d) in t.destinations.iter().enumerate() {
        let path: Vec<String> = d.forward.iter().map(|h| h.router.clone()).collect();
        out!(
            "{} {} {}: {}{}{}",
            d.name,
            d.dst,
            to_v6(d.dst),
            path.join(" "),
            if d.unreachable { " (unreachable)" } else { "" },
            if d.forward_paths.len() > 1 {
                format!(" (+{} ECMP variants)", d.forward_paths.len() - 1)
            } else {
                String::new()
            }
        );
        for (j, tu) in d.tunnels.iter().enumerate() {
            let lsrs: Vec<String> = tu.lsrs.iter().map(|a| a.to_string()).collect();
            out!(
                "  {:13} {} {} -> {} {}  LSRs [{}]  revelation {:?}",
                tu.class.name(),
                tu.ingress_router,
                tu.ingress,
                tu.egress_router,
                tu.egress,
                lsrs.join(" "),
                tu.revelation
            );
            if let Some(ob) = oracle.and_then(|o| o.tunnels.get(i)?.get(j)) {
                out!("  {:13} {}", "", observation(ob));
            }
            let lsrs6: Vec<String> = tu.lsrs.iter().map(|&a| to_v6(a).to_string()).collect();
            out!(
                "  {:13} IPv6 {} -> {}  [{}]",
                "",
                to_v6(tu.ingress),
                to_v6(tu.egress),
                lsrs6.join(" ")
            );
        }
    }
    out!("routers:");
    for r in &t.routers {
        out!(
            "  {:6} {:9} <{},{}> IPv6 <{},{}>",
            r.name,
            r.vendor,
            r.signature[0],
            r.signature[1],
            r.signature6[0],
            r.signature6[1]
        );
    }
}

/// `oracle: observable (ingress egress label lsrs-in-order links)`, each fact named when
/// it holds, `-name` when not.
fn observation(o: &vtnt_lab::Observation) -> String {
    let facts = [
        ("ingress", o.ingress_seen),
        ("egress", o.egress_seen),
        ("label", o.label_seen),
        ("lsrs-in-order", o.lsrs_seen_in_order),
        ("links", o.links_seen),
    ];
    let seen: Vec<String> = facts
        .iter()
        .map(|(n, b)| if *b { n.to_string() } else { format!("-{n}") })
        .collect();
    let verdict = if o.observable {
        "observable"
    } else {
        "not observable"
    };
    format!("oracle: {verdict} ({})", seen.join(" "))
}
