//! `vtnt bench ...`: benchmarks that re-measure vTNT's claims. Each subcommand only parses
//! options and calls `vtnt-bench`; the table it prints is what docs/benchmarks.md quotes.
//!
//! - `tnt-accuracy`: TNT against the lab's ground truth (reference topology plus
//!   generated ones), scored strictly per class.
//!
//! - `probe-rate`: sustained probe rate and pacing error of the engine + Linux driver on a
//!   namespace topology, next to Debian's scamper in the same run, each from the tool's own
//!   records and at the wire (the router's receive stamps).
//!
//! - `soak`: large `vtnt trace` campaigns on the in-process lab under a virtual clock,
//!   again and again, counting the runs that never end.
//! - `store`: the results store at campaign scale: import time, database size, every
//!   question's time.
//!
//! - `deploy`: seed 000's evaluation (image size, memory with and without KSM, CPU,
//!   deploy + execution time, density under memory and CPU budgets) for every runtime.
//!
//! - `micro`: seed 001's micro-benchmarks (boot + shutdown, fib, a "system call", a
//!   function call, the clock's gap, image size, peak memory) for every runtime.
//! - `net`: seed 004's TCP/UDP stream throughput into every runtime's endpoint.
//! - `rtt`: seed 003's RTT correction: pings and traces through the lab from every runtime, raw and
//!   corrected, at background loads, against the configured delays and native.
//!
//! - `fleet`: seed 000's controller experiment (Figs. 10, 11) over five emulated sites.
//! - `fleet-scale`: the fleet's dispatch overhead with many agents (issue 17's scale
//!   run): event to job start, placement decisions, events per second.
//!
//! - `fw`: the firewall network function between namespaces (`vtnt_bench::fw_nf`),
//!   its figures drawn by `vtnt_evaluation::fw` (`--plot`, and `fw-plot` from a saved run).
//! - `fw-classify`: the firewall's classifier on generated sets of 0 to 1,000,000 rules:
//!   load time, bytes per rule, nanoseconds per classification (`vtnt_bench::fw`).
//!
//! Other benchmarks add their variant to [`BenchCommand`] and an arm
//! to [`run`].

use std::process::ExitCode;

use vtnt_bench::fw_host::NfPlace;
use vtnt_job::say;

/// The campaign `vtnt bench store` and `vtnt bench serve` build their store from.
#[cfg(feature = "store")]
#[derive(clap::Args, Debug)]
pub struct StoreCampaign {
    /// Targets of the campaign.
    #[arg(long, default_value_t = 100_000)]
    targets: usize,
    /// Destinations of the generated topology: one block of the campaign.
    #[arg(long, default_value_t = 64)]
    destinations: usize,
    /// The generated topology's seed (and the campaign's).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the campaign files, the prefix-to-AS file and the store go.
    #[arg(long, default_value = "vtnt-bench-store")]
    dir: std::path::PathBuf,
}

#[cfg(feature = "store")]
impl StoreCampaign {
    fn options(self) -> vtnt_bench::store::StoreBenchOptions {
        vtnt_bench::store::StoreBenchOptions {
            targets: self.targets,
            destinations: self.destinations,
            seed: self.seed,
            dir: self.dir,
        }
    }
}

/// A mode of `vtnt bench fw`'s rule sets.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FwMode {
    Stateless,
    Stateful,
}

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// TNT accuracy against the lab's ground truth, strict (class, ingress, egress and
    /// LSRs in order): recall per class against every tunnel and against the lab
    /// oracle's observable ones, precision, partial reports by reason, wrong LSRs, false
    /// tunnels, signatures, probe cost.
    TntAccuracy {
        /// Generated topologies to run besides the reference one.
        #[arg(long, default_value_t = 100)]
        topologies: usize,
        /// Base seed of the generated topologies (random, and printed, when absent).
        #[arg(long)]
        seed: Option<u64>,
        /// Print the report as JSON instead of a markdown table.
        #[arg(long, default_value_t = false)]
        json: bool,
        /// TNT's FRPLA threshold (as `vtnt tnt --frpla`).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i16).range(1..=64))]
        frpla: i16,
        /// No blind-spot candidates (as `vtnt tnt --no-blind-spots`).
        #[arg(long)]
        no_blind_spots: bool,
        /// Share of generated LSPs (two LSRs or more) with equal-cost paths inside; 0 gives
        /// the topologies of the generator before it had them.
        #[arg(long, default_value_t = vtnt_lab::GenOptions::default().lsp_ecmp)]
        lsp_ecmp: f64,
        /// A setting of the generated topologies, NAME=VALUE, as `vtnt lab generate
        /// --set` takes it (repeatable; `vtnt lab generate --settings` lists them).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// MPLS-free control topologies (the generated ones' settings without MPLS, with
        /// ECMP, asymmetric returns and ICMP rate limiting), where every tunnel is false.
        #[arg(long, default_value_t = 30)]
        control: usize,
        /// The family TNT probes: the destinations' IPv4 addresses, or their IPv6 twins
        /// (scored against the same truth; validated on the lab only, docs/tnt.md).
        #[arg(long, value_enum, default_value = "ipv4")]
        family: crate::lab::Family,
    },
    /// Seed 000's evaluation for every runtime (native, runc, docker, vm, microvm): image
    /// size, memory (+KSM), CPU, deploy + execution time, density under 1 GB and a CPU
    /// budget; writes report.md and fig*.png to --out. Needs root and a running lab.
    Deploy(vtnt_evaluation::BenchDeployArgs),
    /// Seed 001's micro-benchmarks for every runtime (and the microVM under each VMM and
    /// accelerator): boot + shutdown, CPU (fib), a "system call", a function call, the
    /// clock's gap, image size and peak memory, mean ± sd beside the seeds' rows; writes
    /// micro.md and micro_*.png to --out. Needs root and a running lab.
    Micro(vtnt_evaluation::BenchMicroArgs),
    /// Seed 004's TCP/UDP stream throughput (iperf3 as the driver) into an endpoint in
    /// each runtime (the unikernel's own, smoltcp), swept over socket buffer and message
    /// sizes, normalised to native in the same run, with the endpoint's CPU per gigabit;
    /// writes report.md, report.json and fig*.png to --out. Needs root and iperf3.
    Net(vtnt_evaluation::BenchNetArgs),
    /// Seed 003's RTT correction (docs/rtt-correction.md): the same ICMP echo pings and
    /// traces through a lab of its own from native and each runtime, corrected and not,
    /// at background loads (UDP through the lab's TUN and iperf3 on the loopback), the
    /// lab's daemon on a CPU of its own: first the noise floor (native against the
    /// configured delays and a lab-side kernel-stamped capture), then per runtime, kind
    /// and load the mean and p99 of (raw - native) and (corrected - native), native run
    /// just before, and the perturbation (correction on against off); a runtime not
    /// corrected says why. Needs root and iperf3, and runc or Docker for their rows.
    Rtt(vtnt_evaluation::BenchRttArgs),
    /// The firewall network function (`vtnt fw run`) between a sender and a receiver in
    /// namespaces, at each rule count, stateless and stateful: rule load time, RSS, the
    /// packet rate of a many-flow trace drawn from the rules, iperf3 TCP and UDP
    /// throughput of parallel streams, sockperf TCP and UDP request/response rates and
    /// round trips, hping3 SYN and ping latency, the TCP connection rate, repetitions
    /// with sd; natively, in containers, as the unikernel and in the Debian VM, beside
    /// iptables and nftables with sets in the NF namespace (and in the VM with vm). Needs
    /// root, iproute2, ethtool, iperf3, sockperf, hping3 and ping (and what each runtime
    /// needs: runc, docker.io, qemu-system-x86).
    Fw {
        /// Rule counts to measure.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,1,10,100,1000,10000,100000,1000000"
        )]
        rules: Vec<usize>,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Distinct flows (trace headers) replayed.
        #[arg(long, default_value_t = 20_000)]
        flows: usize,
        /// Where the NF runs, a row each: native (a process in the NF namespace), runc,
        /// docker, docker-scratch (the static vtnt in a container whose network is that
        /// namespace), spt, microvm (the unikernel's NF on TAP devices bridged to the
        /// namespace's veths), vm (the static vtnt in the Debian VM, its NICs on such
        /// TAPs; the kernel baselines then also run in that VM, its kernel the router),
        /// lxd (the static vtnt in an LXD container whose NICs are the veths; the kernel
        /// baselines then also run in an LXD container).
        #[arg(long, value_delimiter = ',', default_value = "native")]
        runtimes: Vec<NfPlace>,
        /// iperf3 TCP then UDP, sockperf TCP then UDP, hping3 beside ping, then the
        /// connection rate through each filter, this many seconds each (0: none).
        #[arg(long, default_value_t = 5)]
        seconds: u32,
        /// iperf3's parallel streams (`-P`, at most 128).
        #[arg(long, default_value_t = 16)]
        streams: u32,
        /// The modes to measure: stateless (every packet through the rules), stateful
        /// (connection tracking: a flow's first packet through them).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "stateless,stateful"
        )]
        modes: Vec<FwMode>,
        /// Leave out the iptables baseline (needs iptables-restore).
        #[arg(long)]
        no_iptables: bool,
        /// Leave out the nftables-with-sets baseline (needs nft).
        #[arg(long)]
        no_nftables: bool,
        /// Packets sent per repetition.
        #[arg(long, default_value_t = 200_000)]
        packets: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON rows instead of the table.
        #[arg(long)]
        json: bool,
        /// Also draw one SVG per metric measured (seed 002's Figs. 3-12: the metric
        /// against the rule count, a line per NF, runtime and mode) into this directory.
        #[arg(long, value_name = "DIR")]
        plot: Option<std::path::PathBuf>,
        /// The NF (`vtnt fw run` and its children) on the last CPU, the bench, its
        /// sender, receiver and drivers on the others (docs/fw.md: pinning).
        #[arg(long)]
        pin: bool,
    },
    /// Redraws `vtnt bench fw --plot`'s figures from a saved `vtnt bench fw --json` run.
    FwPlot {
        /// The saved run (`vtnt bench fw --json > FILE`).
        file: std::path::PathBuf,
        /// Where the SVGs go (made if absent; files of the same names are replaced).
        #[arg(long, value_name = "DIR")]
        out: std::path::PathBuf,
    },
    /// Several firewall NFs at once (seed 002's future work): for each instance count,
    /// that many sender — NF — receiver namespace triplets, the NFs (`vtnt fw run` in
    /// each runtime) started together on the same generated rules, then every sender's
    /// trace at the same time: the time until all forward, their summed RSS, PSS and CPU,
    /// the packets/s of all together. Needs root, iproute2 and ethtool (and what each
    /// runtime needs, as `vtnt bench fw`).
    FwScale {
        /// Instance counts to measure.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        instances: Vec<usize>,
        /// Rules every NF loads (`vtnt fw gen`'s fw family).
        #[arg(long, default_value_t = 10_000)]
        rules: usize,
        /// The stateful set (the state rule first) instead of the stateless one.
        #[arg(long)]
        stateful: bool,
        /// Where the NFs run, a row each per instance count (as `vtnt bench fw`).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "native,spt,microvm"
        )]
        runtimes: Vec<vtnt_runtimes::Runtime>,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Distinct flows (trace headers) each sender replays.
        #[arg(long, default_value_t = 20_000)]
        flows: usize,
        /// Packets each sender sends per repetition.
        #[arg(long, default_value_t = 100_000)]
        packets: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON rows instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// The firewall's classifier on generated rule sets (`vtnt fw gen`, with the state
    /// rule on top): load time (read from iptables-save text, compiled), bytes per rule,
    /// nanoseconds per classification of a trace drawn from the set, with and without
    /// locality, of random packets, of established connections through the whole network
    /// function, beside one table per tuple and rule-by-rule evaluation.
    FwClassify {
        /// Rule counts to measure.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,10,1000,100000,1000000"
        )]
        sizes: Vec<usize>,
        #[arg(long, value_enum, default_value_t = crate::fw::FamilyArg::Fw)]
        family: crate::fw::FamilyArg,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Packets per timed pass.
        #[arg(long, default_value_t = 1_000_000)]
        packets: usize,
        /// Compare this many verdicts per set with the rule-by-rule reference (sets of up
        /// to 100,000 rules).
        #[arg(long, default_value_t = 0)]
        verify: usize,
        /// Print the report as JSON instead of a markdown table.
        #[arg(long, default_value_t = false)]
        json: bool,
    },
    /// Large campaigns (`vtnt trace -P icmp-paris -q 1 -w 1` over the reference lab's
    /// destinations repeated) driven like the Linux driver against the in-process lab
    /// under a virtual clock, with lost replies and late receive times: counts the runs
    /// that never end and prints their seeds.
    Soak {
        /// Campaigns to run.
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Traces per campaign.
        #[arg(long, default_value_t = 100_000)]
        targets: usize,
        /// Probes per second (virtual).
        #[arg(long, default_value_t = 50_000)]
        pps: u32,
        /// Traces probing at once, as `vtnt trace --window`.
        #[arg(long, default_value_t = 1000)]
        window: usize,
        /// Virtual seconds after which a campaign still running did not end.
        #[arg(long, default_value_t = 600)]
        deadline_secs: u64,
        /// Largest lag of the driver's clock behind the replies it reads, microseconds.
        #[arg(long, default_value_t = 1000)]
        lag_us: u64,
        /// Share of replies lost on top of the lab's ICMP rate limits (0..=1).
        #[arg(long, default_value_t = 0.02)]
        loss: f64,
        /// Seed of the first run, run k uses seed + k (random, and printed, when absent).
        #[arg(long)]
        seed: Option<u64>,
        /// Print the report as JSON instead of a markdown table.
        #[arg(long, default_value_t = false)]
        json: bool,
        /// Soak the real `vtnt trace` binary against a real lab namespace (`vtnt lab up`,
        /// needs root) instead of the engine under a virtual clock; --deadline-secs is then
        /// wall-clock time per run (--window, --lag-us, --loss and --seed do not apply).
        #[arg(long, default_value_t = false)]
        lab: bool,
    },
    /// The results store at campaign scale: a TNT campaign over a generated topology (in
    /// process, virtual clock) grown to --targets targets (its destinations moved to fresh
    /// addresses, block after block), imported twice into a fresh store under --dir
    /// (kept): import time, records per second, database size, every question's time.
    #[cfg(feature = "store")]
    Store {
        #[command(flatten)]
        campaign: StoreCampaign,
        /// Print the report as JSON instead of markdown.
        #[arg(long, default_value_t = false)]
        json: bool,
    },
    /// `vtnt serve`'s pages at campaign scale: the store `vtnt bench store` builds (under
    /// --dir, kept), then every page loaded --repeats times from a server in this process:
    /// median and slowest time per page, the slowest page last.
    #[cfg(feature = "serve")]
    Serve {
        #[command(flatten)]
        campaign: StoreCampaign,
        /// Loads of each page.
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Print the report as JSON instead of markdown.
        #[arg(long, default_value_t = false)]
        json: bool,
    },
    /// Sustained probe rate and pacing error of the engine + Linux driver through a Linux
    /// router in namespaces, with scamper (at its 10,000 pps ceiling) in the same run; each
    /// from the tool's own records and at the wire (every probe as the router receives it:
    /// rate, error, the most probes in 1 ms, packets the capture lost). Needs root and
    /// scamper.
    ProbeRate {
        /// Rates to request, probes per second.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "10000,50000,100000,150000"
        )]
        rates: Vec<u32>,
        /// Seconds of probing per rate.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Also run vtnt at every rate without kernel transmit stamps (probes dated when
        /// the engine hands them out), to see what the stamps cost.
        #[arg(long, default_value_t = false)]
        without_tx_stamps: bool,
        /// Print JSON instead of a markdown table.
        #[arg(long, default_value_t = false)]
        json: bool,
    },
    /// Seed 000's controller experiment (Figs. 10, 11): five sites on this host, each a
    /// network namespace behind a link with the paper's round trip (France 10 ms, Poland
    /// 30, Canada 90, Singapore 170, Australia 280) and 100 Mbit/s of download, one agent
    /// in each; the paper's event list replayed per runtime in wait and discard mode.
    /// Needs root, nats-server and a running lab (docs/fleet.md).
    #[cfg(feature = "fleet")]
    Fleet {
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "microvm,docker,vm,native,runc,spt"
        )]
        runtimes: Vec<vtnt_runtimes::Runtime>,
        #[arg(long, value_delimiter = ',', default_value = "wait,discard")]
        modes: Vec<vtnt_fleet::Mode>,
        /// Repetitions (the paper: 30).
        #[arg(long, default_value_t = 1)]
        reps: usize,
        /// Events per replay (the paper: 60).
        #[arg(long, default_value_t = 60)]
        events: usize,
        /// Seconds between events (the paper: 1).
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// The lab the jobs probe (`vtnt lab up --name LAB`).
        #[arg(long, default_value = vtnt_runtimes::DEFAULT_LAB)]
        lab: String,
        /// The job, in `vtnt`'s words.
        #[arg(long, default_value = "tnt 203.0.113.10")]
        job: String,
        /// Seconds a replay waits for its jobs once its last event is placed.
        #[arg(long, default_value_t = 3600)]
        results_timeout: u64,
        /// Where the node and event files, events.jsonl and the figures go.
        #[arg(long, default_value = "bench-fleet")]
        out: std::path::PathBuf,
        /// Print JSON instead of markdown.
        #[arg(long, default_value_t = false)]
        json: bool,
    },
    /// The fleet with many agents: a broker of its own, N agent processes (native runtime,
    /// one slot each, over the paper's five locations) and a cheap job at a fixed event
    /// rate in wait and in discard mode; event to job start, placement decision and
    /// lateness (p50/p99), events per second. Needs root, nats-server and a running lab.
    #[cfg(feature = "fleet")]
    FleetScale {
        #[arg(long, default_value_t = 100)]
        agents: usize,
        /// Events per second.
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
        /// Seconds of events per mode.
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// The lab the jobs probe (`vtnt lab up --name LAB`).
        #[arg(long, default_value = vtnt_runtimes::DEFAULT_LAB)]
        lab: String,
        /// The job, in `vtnt`'s words.
        #[arg(long, default_value = "ping -c 1 192.0.2.1")]
        job: String,
        /// The capacity sweep's offered rates, events per second (events placed where
        /// no agent is).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "100,200,500,1000,2000,5000,10000"
        )]
        capacity_rates: Vec<f64>,
        /// Seconds of events per rate of the capacity sweep.
        #[arg(long, default_value_t = 2.0)]
        capacity_seconds: f64,
        /// The fleet-wide per-prefix rate limit of the etiquette phase, pps (the agents'
        /// jobs ask ten times it in all).
        #[arg(long, default_value_t = vtnt_fleet::rate::DEFAULT_PER_PREFIX)]
        edge_limit: u32,
        /// Where the node and event files and each event's result line (results-MODE.jsonl) go.
        #[arg(long, default_value = "bench-fleet-scale")]
        out: std::path::PathBuf,
        /// Print JSON instead of a markdown table.
        #[arg(long, default_value_t = false)]
        json: bool,
    },
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::TntAccuracy {
            topologies,
            seed,
            json,
            frpla,
            no_blind_spots,
            lsp_ecmp,
            set,
            control,
            family,
        } => tnt_accuracy(
            topologies,
            seed,
            json,
            frpla,
            !no_blind_spots,
            lsp_ecmp,
            &set,
            control,
            matches!(family, crate::lab::Family::Ipv6),
        ),
        BenchCommand::Fw {
            rules,
            reps,
            flows,
            runtimes,
            seconds,
            streams,
            modes,
            no_iptables,
            no_nftables,
            packets,
            seed,
            json,
            plot,
            pin,
        } => {
            // Ctrl-C ends the run at its next repetition, its namespaces and files removed
            vtnt_measure::stop::stop_on(crate::interrupt::catch()?);
            let dir = std::env::temp_dir().join(format!("vtnt-bench-fw-{}", std::process::id()));
            let vtnt = nf_binary(runtimes.iter().any(|r| r.static_vtnt()))?;
            let opts = vtnt_bench::fw_nf::NfOptions {
                sizes: rules,
                stateful: modes.iter().map(|m| *m == FwMode::Stateful).collect(),
                reps,
                flows,
                packets,
                seed,
                vtnt,
                runtimes,
                seconds,
                streams,
                dir: dir.clone(),
                iptables: !no_iptables,
                nftables: !no_nftables,
                pin,
                interrupted: vtnt_measure::stop::interrupted,
            };
            let rows = vtnt_bench::fw_nf::sweep(&opts, |r| {
                eprintln!(
                    "vtnt bench fw: {} at {} rules ({}) measured",
                    r.nf,
                    r.rules,
                    if r.stateful { "stateful" } else { "stateless" }
                )
            });
            let _ = std::fs::remove_dir_all(&dir);
            let rows = rows?;
            let value = serde_json::to_value(&rows)?;
            emit(json, value.clone(), vtnt_bench::fw_nf::table(&rows))?;
            if let Some(dir) = plot {
                let rows: Vec<vtnt_evaluation::fw::Row> = serde_json::from_value(value)
                    .map_err(|e| anyhow::anyhow!("the figures' rows: {e}"))?;
                fw_figures(&rows, &dir)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::FwPlot { file, out } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
            let rows = vtnt_evaluation::fw::parse(&text, &file.display().to_string())?;
            fw_figures(&rows, &out)?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::FwScale {
            instances,
            rules,
            stateful,
            runtimes,
            reps,
            flows,
            packets,
            seed,
            json,
        } => {
            vtnt_measure::stop::stop_on(crate::interrupt::catch()?);
            let dir =
                std::env::temp_dir().join(format!("vtnt-bench-fw-scale-{}", std::process::id()));
            let opts = vtnt_bench::fw_scale::ScaleOptions {
                instances,
                rules,
                stateful,
                reps,
                flows,
                packets,
                seed,
                vtnt: nf_binary(runtimes.iter().any(|&r| NfPlace::from(r).static_vtnt()))?,
                runtimes,
                dir: dir.clone(),
                interrupted: vtnt_measure::stop::interrupted,
            };
            let rows = vtnt_bench::fw_scale::run(&opts, |r| {
                eprintln!(
                    "vtnt bench fw-scale: {} NF(s) in {} measured",
                    r.instances, r.runtime
                )
            });
            let _ = std::fs::remove_dir_all(&dir);
            let rows = rows?;
            emit(
                json,
                serde_json::to_value(&rows)?,
                vtnt_bench::fw_scale::table(&rows),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::FwClassify {
            sizes,
            family,
            seed,
            packets,
            verify,
            json,
        } => {
            let opts = vtnt_bench::fw::ClassifyOptions {
                sizes,
                family: family.family(),
                seed,
                packets,
                verify,
            };
            eprintln!(
                "vtnt bench fw-classify: {:?} family, seed {seed}",
                opts.family
            );
            let rows = vtnt_bench::fw::sweep(&opts, |r| {
                eprintln!("vtnt bench fw-classify: {} rules measured", r.rules)
            })?;
            emit(
                json,
                serde_json::to_value(&rows)?,
                vtnt_bench::fw::table(&rows),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Soak {
            runs,
            targets,
            pps,
            window,
            deadline_secs,
            lag_us,
            loss,
            seed,
            json,
            lab,
        } => {
            vtnt_engine::policy::check_rate(pps).map_err(|e| anyhow::anyhow!("--pps: {e}"))?;
            anyhow::ensure!(
                (1..=32_768).contains(&window),
                "--window must lie in 1..=32768"
            );
            anyhow::ensure!(targets >= 1, "--targets must be at least 1");
            anyhow::ensure!((0.0..=1.0).contains(&loss), "--loss must lie in 0..=1");
            if lab {
                let opts = vtnt_bench::soak_lab::LabSoakOptions {
                    runs,
                    targets,
                    pps,
                    deadline_secs,
                    vtnt: std::env::current_exe()?,
                };
                let report = vtnt_bench::soak_lab::soak_lab(&opts)?;
                emit(json, serde_json::to_value(&report)?, report.to_markdown())?;
                return Ok(if report.failed() > 0 {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                });
            }
            let seed = seed.unwrap_or_else(random_seed);
            say!(
                "vtnt bench soak: seeds {seed}..={} ({runs} runs)",
                seed.wrapping_add((runs as u64).saturating_sub(1))
            );
            let opts = vtnt_bench::soak::SoakOptions {
                runs,
                targets,
                pps,
                window,
                deadline_secs,
                seed,
                lag_us,
                loss,
            };
            let report = vtnt_bench::soak::soak(&opts)
                .map_err(|e| anyhow::anyhow!("soak (seed {seed}): {e}"))?;
            emit(json, serde_json::to_value(&report)?, report.to_markdown())?;
            Ok(if report.stuck().next().is_some() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        #[cfg(feature = "store")]
        BenchCommand::Store { campaign, json } => {
            let report = vtnt_bench::store::store_bench(&campaign.options())?;
            emit(json, serde_json::to_value(&report)?, report.to_markdown())?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "serve")]
        BenchCommand::Serve {
            campaign,
            repeats,
            json,
        } => {
            let store = vtnt_bench::store::store_bench(&campaign.options())?;
            let tenant = vtnt_store::Tenant::new(vtnt_bench::store::TENANT)?;
            let pages =
                vtnt_web::bench::page_times(std::path::Path::new(&store.db), &tenant, repeats)?;
            let text = format!("{}\n{}", store.to_markdown(), pages.to_markdown());
            let value = serde_json::json!({ "store": store, "pages": pages });
            emit(json, value, text)?;
            Ok(ExitCode::SUCCESS)
        }
        // Ctrl-C ends the run at its next step, its instances removed and the KSM and
        // `favordynmods` settings restored
        BenchCommand::Deploy(args) => interruptible(
            || vtnt_evaluation::bench_deploy(&args),
            |r| (vtnt_evaluation::report::markdown(r), &r.files),
        ),
        // Ctrl-C ends the run at its next repetition, the instance it waits for stopped
        // and removed
        BenchCommand::Micro(args) => interruptible(
            || vtnt_evaluation::bench_micro(&args),
            |r| (vtnt_evaluation::micro::report::markdown(r), &r.files),
        ),
        // Ctrl-C ends the run at its next test, its endpoints and namespaces removed
        BenchCommand::Net(args) => interruptible(
            || vtnt_evaluation::bench_net(&args),
            |r| (vtnt_evaluation::net::report::markdown(r), &r.files),
        ),
        BenchCommand::Rtt(args) => {
            // Ctrl-C ends the run at its next runtime, its load stopped and its lab down
            vtnt_measure::stop::stop_on(crate::interrupt::catch()?);
            let report = vtnt_evaluation::bench_rtt(&args, &std::env::current_exe()?)?;
            let text = vtnt_evaluation::rtt::report::markdown(&report);
            emit(args.json, serde_json::to_value(&report)?, text)?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "fleet")]
        BenchCommand::Fleet {
            runtimes,
            modes,
            reps,
            events,
            interval,
            lab,
            job,
            results_timeout,
            out,
            json,
        } => {
            // Ctrl-C ends the run at its next step, its agents, broker and sites removed
            vtnt_measure::stop::stop_on(crate::interrupt::catch()?);
            let report = vtnt_evaluation::fleet::paper::run(
                &vtnt_evaluation::fleet::paper::PaperOptions {
                    runtimes,
                    modes,
                    reps,
                    events,
                    interval_s: interval,
                    lab,
                    job,
                    results_timeout: std::time::Duration::from_secs(results_timeout),
                    exe: std::env::current_exe()?,
                },
                &out,
            )?;
            emit(json, serde_json::to_value(&report)?, report.markdown())?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "fleet")]
        BenchCommand::FleetScale {
            agents,
            rate,
            seconds,
            lab,
            job,
            capacity_rates,
            capacity_seconds,
            edge_limit,
            out,
            json,
        } => {
            vtnt_measure::stop::stop_on(crate::interrupt::catch()?);
            let report = vtnt_evaluation::fleet::scale::run(
                &vtnt_evaluation::fleet::scale::ScaleOptions {
                    agents,
                    rate,
                    seconds,
                    lab,
                    job,
                    exe: std::env::current_exe()?,
                    capacity_rates,
                    capacity_seconds,
                    edge_limit,
                },
                &out,
            )?;
            emit(json, serde_json::to_value(&report)?, report.markdown())?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::ProbeRate {
            rates,
            seconds,
            without_tx_stamps,
            json,
        } => {
            anyhow::ensure!(
                rates.iter().all(|r| (1..=1_000_000).contains(r)),
                "--rates must lie in 1..=1000000"
            );
            anyhow::ensure!(
                (0.1..=60.0).contains(&seconds),
                "--seconds must lie in 0.1..=60"
            );
            let opts = vtnt_bench::probe_rate::RateOptions {
                rates,
                seconds,
                count: 10,
                without_tx_stamps,
            };
            let rows = vtnt_bench::probe_rate::probe_rate(&opts)?;
            emit(
                json,
                serde_json::to_value(&rows)?,
                vtnt_bench::probe_rate::to_markdown(&rows),
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs a benchmark that Ctrl-C ends at its next step (nothing left behind, no report
/// written), then prints its report's markdown and the files it wrote.
fn interruptible<R>(
    bench: impl FnOnce() -> anyhow::Result<R>,
    shown: impl FnOnce(&R) -> (String, &Vec<std::path::PathBuf>),
) -> anyhow::Result<ExitCode> {
    vtnt_measure::stop::stop_on(crate::interrupt::catch()?);
    let report = bench()?;
    let (markdown, files) = shown(&report);
    put!("{markdown}");
    for f in files {
        say!("wrote {}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[allow(clippy::too_many_arguments)]
fn tnt_accuracy(
    topologies: usize,
    seed: Option<u64>,
    json: bool,
    frpla: i16,
    blind_spots: bool,
    lsp_ecmp: f64,
    set: &[String],
    control: usize,
    ipv6: bool,
) -> anyhow::Result<ExitCode> {
    if !(0.0..=1.0).contains(&lsp_ecmp) {
        anyhow::bail!("--lsp-ecmp: a share, 0 to 1 (got {lsp_ecmp})");
    }
    // the dual-stack topologies have 6PE cores (IPv4 is scored on the generator's own)
    let mut generate = vtnt_lab::GenOptions {
        lsp_ecmp,
        six_pe_cores: if ipv6 {
            vtnt_lab::generate::DUAL_STACK_SIX_PE_CORES
        } else {
            0.0
        },
        ..Default::default()
    };
    for kv in set {
        generate
            .set_pair(kv)
            .map_err(|e| anyhow::anyhow!("--set: {e} (see vtnt lab generate --settings)"))?;
    }
    generate
        .check()
        .map_err(|e| anyhow::anyhow!("--set: generated topologies: {e}"))?;
    let seed = seed.unwrap_or_else(random_seed);
    say!("vtnt bench tnt-accuracy: seed {seed}, {topologies} generated topologies + reference, {control} MPLS-free control topologies");
    let mut opts = vtnt_bench::AccuracyOptions::new(topologies, seed);
    opts.tnt.classify.thresholds.frpla = frpla;
    opts.tnt.classify.blind_spots = blind_spots;
    opts.control = control;
    opts.ipv6 = ipv6;
    opts.control_generate = vtnt_bench::control_options(&generate);
    opts.generate = generate;
    let report = vtnt_bench::tnt_accuracy(&opts)
        .map_err(|e| anyhow::anyhow!("tnt-accuracy (seed {seed}): {e}"))?;
    emit(
        json,
        serde_json::from_str(&report.to_json())?,
        report.to_markdown(),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Draws `rows`' figures, all of them before any is written, into `dir` (made if
/// absent), each file written whole or not at all.
fn fw_figures(rows: &[vtnt_evaluation::fw::Row], dir: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Write;
    let figs = vtnt_evaluation::fw::svgs(rows)?;
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    for (name, svg) in figs {
        let path = dir.join(name);
        let (file, mut f) = crate::output::AtomicFile::create(&path)?;
        f.write_all(svg.as_bytes())
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        drop(f);
        file.commit()?;
        say!("vtnt bench fw: wrote {}", path.display());
    }
    Ok(())
}

/// Prints a benchmark's report with its provenance (machine, tools, commit, command):
/// JSON as `{"provenance": ..., "report": ...}`, markdown under a provenance list.
/// The `vtnt` that runs `vtnt bench fw`'s native NF: with a container row
/// (`containers`), the containers' static vtnt, so that every row runs the same binary;
/// else this one.
fn nf_binary(containers: bool) -> anyhow::Result<std::path::PathBuf> {
    match vtnt_runtimes::paths::static_vtnt() {
        Ok(p) if containers => Ok(p),
        _ => std::env::current_exe().map_err(|e| anyhow::anyhow!("finding the vtnt binary: {e}")),
    }
}

fn emit(json: bool, report: serde_json::Value, markdown: String) -> anyhow::Result<()> {
    let p = vtnt_measure::provenance::Provenance::now();
    if json {
        let v = serde_json::json!({ "provenance": p, "report": report });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        put!("Provenance:\n\n{}\n{markdown}", p.markdown());
    }
    Ok(())
}
