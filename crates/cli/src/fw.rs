//! `vtnt fw ...`: the firewall's rule files. `check` reads and compiles one and says
//! what it became (an error names file:line:column), `gen` draws a benchmark rule set
//! (`vtnt_fw::gen`), `trace` draws packet headers that hit a rule file's rules, and
//! `classify` measures the classifier on a rule file (`vtnt_bench::fw`), and `run` is
//! the network function itself between two interfaces (`vtnt_fw_linux`). The work is in
//! `vtnt-fw`, `vtnt-fw-linux` and `vtnt-bench`; this module parses options and prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use vtnt_fw::gen::{self, Family, RuleSpec, TraceSpec};
use vtnt_fw::parse::{self, Format};
use vtnt_fw::{print, Action, Classifier, Hook, Options, Ruleset};
use vtnt_unikernel::launch::Vmm;

use crate::output::AtomicFile;

#[derive(clap::Subcommand)]
pub enum FwCommand {
    /// Read and compile a rule file (iptables-save or nft list ruleset output): rules,
    /// chains, what they compiled to, memory, load time; an error names file:line:col.
    Check(CheckArgs),
    /// Draw a benchmark rule set (ClassBench-style, docs/fw.md) as iptables-save or nft.
    Gen(GenArgs),
    /// Draw packet headers that hit a rule file's FORWARD rules (ClassBench's trace
    /// format: source, destination, ports, protocol, rule).
    Trace(TraceArgs),
    /// Measure the classifier on a rule file: load time, bytes per rule, nanoseconds
    /// per classification (`vtnt bench fw-classify` does it for generated sets).
    Classify(ClassifyArgs),
    /// Run the firewall between two interfaces (a filtering bridge): IPv4 classified at
    /// FORWARD, ARP passed, anything else dropped; until a signal. Natively over
    /// AF_PACKET, or as the unikernel (`--runtime spt`) on two TAP devices.
    Run(RunArgs),
}

/// The form the network function runs in: this process, or the unikernel.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NfForm {
    /// This process, over AF_PACKET sockets on any two interfaces.
    Native,
    /// The unikernel as a sandboxed process (`lib/vtnt/vtnt-fw-spt.elf`), on two TAP
    /// devices.
    Spt,
    /// The unikernel as a microVM (`lib/vtnt/vtnt-fw.elf`) under vtnt-monitor or QEMU
    /// (`--vmm`), on two TAP devices.
    Microvm,
}

/// A rule file's syntax.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntaxArg {
    /// From the first statement (`table` or `flush`: nft).
    Auto,
    Iptables,
    Nft,
}

/// A generator family.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyArg {
    /// Firewalls: many wildcards, every protocol and port class.
    Fw,
    /// Access lists: specific destinations, TCP to one port.
    Acl,
    /// IP chains: specific networks both ways.
    Ipc,
}

impl FamilyArg {
    pub fn family(self) -> Family {
        match self {
            FamilyArg::Fw => Family::Fw,
            FamilyArg::Acl => Family::Acl,
            FamilyArg::Ipc => Family::Ipc,
        }
    }
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The rule file.
    pub file: PathBuf,
    /// Its syntax.
    #[arg(long, value_enum, default_value_t = SyntaxArg::Auto)]
    pub format: SyntaxArg,
    /// Refuse a rule file that needs more memory than this, read or compiled (bytes;
    /// default: no limit).
    #[arg(long)]
    pub max_bytes: Option<usize>,
    /// Also list each chain's hash tables (their tuples and buckets).
    #[arg(long)]
    pub tables: bool,
}

#[derive(clap::Args)]
pub struct GenArgs {
    /// Rules in the FORWARD chain.
    #[arg(long)]
    pub rules: usize,
    /// The seed: the same seed gives the same set on every machine.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = FamilyArg::Fw)]
    pub family: FamilyArg,
    /// Output syntax.
    #[arg(long, value_enum, default_value_t = SyntaxArg::Iptables)]
    pub format: SyntaxArg,
    /// The first rule accepts RELATED and ESTABLISHED packets (most firewalls' first).
    #[arg(long)]
    pub stateful: bool,
    /// FORWARD's policy.
    #[arg(long, value_parser = ["accept", "drop"], default_value = "drop")]
    pub policy: String,
    /// Output file (default: stdout).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// The rule file.
    pub file: PathBuf,
    /// Headers to draw.
    #[arg(long, default_value_t = 10_000)]
    pub packets: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Locality of reference: Pareto scale b of a header's repetitions (0: none; 1: long
    /// bursts).
    #[arg(long, default_value_t = 0.0)]
    pub locality: f64,
    /// Output file (default: stdout).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct ClassifyArgs {
    /// The rule file.
    pub file: PathBuf,
    /// Packets per timed pass.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: usize,
    /// Compare this many verdicts with the rule-by-rule reference (sets up to 100,000 rules).
    #[arg(long, default_value_t = 0)]
    pub verify: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The rule file, loaded and compiled whole before the first packet.
    #[arg(long)]
    pub rules: PathBuf,
    /// Its syntax.
    #[arg(long, value_enum, default_value_t = SyntaxArg::Auto)]
    pub format: SyntaxArg,
    /// Refuse a rule file that needs more memory than this, read or compiled (bytes;
    /// default: no limit).
    #[arg(long)]
    pub max_bytes: Option<usize>,
    /// Connections tracked at most (the oldest is evicted for a new one).
    #[arg(long, default_value_t = 65_536, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_conns: u32,
    /// Where the NF runs: natively, or as the unikernel (the interfaces are then TAP
    /// devices, which it takes whole).
    #[arg(long, value_enum, default_value_t = NfForm::Native)]
    pub runtime: NfForm,
    /// microvm only: the VMM, auto (vtnt-monitor where /dev/kvm works, else QEMU), vtnt,
    /// qemu.
    #[arg(long, default_value = "auto")]
    pub vmm: String,
    /// One side's interface.
    pub if_in: String,
    /// The other side's.
    pub if_out: String,
}

/// Reads a rule file, naming the file, line and column of what is wrong.
fn read(path: &Path, syntax: SyntaxArg, max_bytes: usize) -> anyhow::Result<(Ruleset, Format)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let name = path.display().to_string();
    let text = parse::text(&name, &bytes)?;
    let format = match syntax {
        SyntaxArg::Auto => Format::detect(text),
        SyntaxArg::Iptables => Format::IptablesSave,
        SyntaxArg::Nft => Format::Nft,
    };
    Ok((parse::parse(&name, text, format, max_bytes)?, format))
}

/// `vtnt fw run --runtime spt|microvm`: the unikernel's NF on two TAP devices, its
/// console's lines on stderr as they come, until a signal (which kills it).
fn run_nf_guest(a: &RunArgs) -> anyhow::Result<ExitCode> {
    if a.if_in == a.if_out {
        anyhow::bail!(
            "the NF needs two different interfaces, got {} twice",
            a.if_in
        );
    }
    let taps = [a.if_in.as_str(), a.if_out.as_str()];
    // as the process NF says it; a VMM would make a TAP that is not there (QEMU) or end
    // without a word (the monitor)
    for t in taps {
        if nix::net::if_::if_nametoindex(t).is_err() {
            anyhow::bail!("interface {t} does not exist in this network namespace");
        }
    }
    let vmm = match Vmm::from_name(&a.vmm) {
        Some(Vmm::Firecracker) | None => {
            anyhow::bail!("--vmm: unknown VMM `{}` (auto, vtnt, qemu)", a.vmm)
        }
        Some(_) if a.runtime != NfForm::Microvm && a.vmm != "auto" => {
            anyhow::bail!("--vmm: only the microvm runtime has a VMM")
        }
        Some(v) => v,
    };
    let stop = crate::interrupt::catch()?;
    let mut nf = if a.runtime == NfForm::Spt {
        let image = vtnt_artifacts::find(vtnt_artifacts::Artifact::NfSpt)?.path;
        let rules = std::fs::File::open(&a.rules)
            .with_context(|| format!("opening {}", a.rules.display()))?;
        vtnt_runtimes::spt::start_nf(&image, taps, rules, a.max_conns)?
    } else {
        let image = vtnt_artifacts::find(vtnt_artifacts::Artifact::NfVm)?.path;
        let (nf, vmm, accel) =
            vtnt_runtimes::microvm::start_nf(&image, taps, &a.rules, a.max_conns, vmm)?;
        eprintln!(
            "vtnt fw run: the microVM runs under {} ({})",
            vtnt_runtimes::microvm::vmm_label(vmm),
            accel.name()
        );
        nf
    };
    let mut seen = 0;
    // the guest says what it counted each second it changed; the last is printed at the
    // end as a process NF prints its own
    let mut counted = None;
    let status = loop {
        let new = nf.stdout_lines_from(seen);
        seen += new.len();
        for line in String::from_utf8_lossy(&new).lines() {
            match guest_counters(line) {
                Some(c) => counted = Some(c),
                None => eprintln!("vtnt fw run: {line}"),
            }
        }
        if let Some(st) = nf.try_status() {
            break Some(st);
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    match status {
        // the guest never ends by itself but on an error, which it printed
        Some(st) if a.runtime == NfForm::Spt => {
            let (code, why) = vtnt_runtimes::spt::outcome(st);
            anyhow::bail!(
                "the NF guest ended (status {}){}",
                code.map_or("none".into(), |c| c.to_string()),
                why.map_or(String::new(), |w| format!(": {w}"))
            )
        }
        // the VMM says why on its stderr (a TAP it could not open, ...)
        Some(st) => {
            let err = String::from_utf8_lossy(&nf.stderr_lines_from(0)).into_owned();
            anyhow::bail!(
                "the NF's VMM ended ({st}): {}",
                vtnt_measure::proc::tail(&err, 400)
            )
        }
        None => {
            // dropped while running: its process group is killed
            drop(nf);
            let (c, f) = counted.unwrap_or_default();
            eprintln!(
                "{} (as of the guest's last report)",
                counters_line(&c, &f, taps)
            );
            Ok(crate::interrupt::exit_code().unwrap_or(ExitCode::SUCCESS))
        }
    }
}

/// The line `vtnt fw run` ends with: what the NF on `names` counted, in every form.
fn counters_line(c: &vtnt_fw::BridgeStats, f: &vtnt_fw::FirewallStats, names: [&str; 2]) -> String {
    format!(
        "vtnt fw run: frames in {} from {}, {} from {}; forwarded {} (ARP {}); accepted {}, dropped {}, rejected {}, malformed {}; other ethertypes dropped {}, bad frames {}, send errors {}; connections {} live, {} created, {} evicted",
        c.received[0],
        names[0],
        c.received[1],
        names[1],
        c.forwarded,
        c.arp,
        f.accepted,
        f.dropped,
        f.rejected,
        f.malformed,
        c.other,
        c.malformed,
        c.send_errors,
        f.conntrack.live,
        f.conntrack.created,
        f.conntrack.evicted
    )
}

/// The counters of a guest NF's `{"type":"nf-counters",...}` console line.
fn guest_counters(line: &str) -> Option<(vtnt_fw::BridgeStats, vtnt_fw::FirewallStats)> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v["type"] != "nf-counters" {
        return None;
    }
    let n = |k: &str| v[k].as_u64();
    let c = vtnt_fw::BridgeStats {
        received: [v["received"][0].as_u64()?, v["received"][1].as_u64()?],
        forwarded: n("forwarded")?,
        arp: n("arp")?,
        other: n("other")?,
        malformed: n("malformed")?,
        send_errors: n("send_errors")?,
    };
    let mut f = vtnt_fw::FirewallStats {
        accepted: n("accepted")?,
        dropped: n("dropped")?,
        rejected: n("rejected")?,
        malformed: n("ip_malformed")?,
        ..Default::default()
    };
    f.conntrack.live = usize::try_from(n("conns_live")?).ok()?;
    f.conntrack.created = n("conns_created")?;
    f.conntrack.evicted = n("conns_evicted")?;
    Some((c, f))
}

/// Writes `text` to `output` (whole or not at all) or stdout.
fn write_out(output: Option<&Path>, text: &str) -> anyhow::Result<()> {
    match output {
        Some(p) => {
            let (file, mut w) = AtomicFile::create(p)?;
            w.write_all(text.as_bytes())
                .and_then(|()| w.sync_all())
                .with_context(|| format!("writing {}", p.display()))?;
            file.commit()
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("writing to stdout")
        }
    }
}

pub fn run(cmd: FwCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FwCommand::Check(a) => check(a),
        FwCommand::Gen(a) => {
            let spec = RuleSpec {
                family: a.family.family(),
                stateful: a.stateful,
                policy: if a.policy == "accept" {
                    Action::Accept
                } else {
                    Action::Drop
                },
                ..RuleSpec::new(a.rules, a.seed)
            };
            let rules = gen::rules(&spec);
            let text = match a.format {
                SyntaxArg::Nft => print::nft(&rules)?,
                _ => print::iptables_save(&rules)?,
            };
            write_out(a.output.as_deref(), &text)?;
            Ok(ExitCode::SUCCESS)
        }
        FwCommand::Trace(a) => {
            let (rules, _) = read(&a.file, SyntaxArg::Auto, usize::MAX)?;
            let spec = TraceSpec {
                packets: a.packets,
                seed: a.seed,
                locality: a.locality,
            };
            let mut text = String::new();
            for h in gen::trace(&rules, &spec) {
                text.push_str(&h.to_string());
                text.push('\n');
            }
            write_out(a.output.as_deref(), &text)?;
            Ok(ExitCode::SUCCESS)
        }
        FwCommand::Run(a) => run_nf(a),
        FwCommand::Classify(a) => {
            let text = std::fs::read_to_string(&a.file)
                .with_context(|| format!("reading {}", a.file.display()))?;
            let opts = vtnt_bench::fw::ClassifyOptions {
                sizes: Vec::new(),
                family: Family::Fw,
                seed: a.seed,
                packets: a.packets,
                verify: a.verify,
            };
            let row = vtnt_bench::fw::measure_text(&text, &opts)
                .with_context(|| format!("measuring {}", a.file.display()))?;
            put!("{}", vtnt_bench::fw::table(&[row]));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn check(a: CheckArgs) -> anyhow::Result<ExitCode> {
    let max = a.max_bytes.unwrap_or(usize::MAX);
    let t = Instant::now();
    let (rules, format) = read(&a.file, a.format, max)?;
    let read_time = t.elapsed();
    let t = Instant::now();
    let opts = Options {
        max_bytes: max,
        ..Options::default()
    };
    let c = Classifier::compile(&rules, &opts)
        .with_context(|| format!("compiling {}", a.file.display()))?;
    let compile_time = t.elapsed();
    let s = c.stats();
    let syntax = match format {
        Format::IptablesSave => "iptables-save",
        Format::Nft => "nft",
    };
    out!(
        "{}: {syntax}, {} rules in {} chains",
        a.file.display(),
        s.rules,
        rules.chains.len()
    );
    for (i, ch) in rules.chains.iter().enumerate() {
        let how = match ch.hook {
            Some(h) => {
                let policy = if ch.policy == Action::Drop {
                    "DROP"
                } else {
                    "ACCEPT"
                };
                format!(" (hook {}, policy {policy})", h.chain_name().to_lowercase())
            }
            None => String::new(),
        };
        out!("  chain {}{how}: {} rules", ch.name, ch.rules.len());
        if a.tables {
            for (t, buckets) in c.tables(vtnt_fw::ChainId(i as u32)) {
                let proto = if t[2] == 1 { "proto" } else { "any" };
                out!(
                    "    table /{} /{} {proto} ports /{} /{}: {buckets} buckets",
                    t[0],
                    t[1],
                    t[3],
                    t[4]
                );
            }
        }
    }
    out!(
        "compiled: {} entries in {} hash tables (largest bucket {}); {} connection states decided before the tables in FORWARD",
        s.entries, s.tables, s.largest_bucket, s.forward_shortcuts
    );
    let per_rule = s.bytes.checked_div(s.rules).unwrap_or(0);
    out!(
        "memory: {} bytes compiled ({per_rule} per rule); {} bytes as read",
        s.bytes,
        rules.heap_bytes()
    );
    out!(
        "loaded in {:.1} ms (read {:.1} ms, compiled {:.1} ms)",
        (read_time + compile_time).as_secs_f64() * 1e3,
        read_time.as_secs_f64() * 1e3,
        compile_time.as_secs_f64() * 1e3
    );
    if rules.hook_chain(Hook::Forward).is_none() {
        out!("note: no FORWARD chain: forwarded packets are accepted");
    }
    Ok(ExitCode::SUCCESS)
}

fn run_nf(a: RunArgs) -> anyhow::Result<ExitCode> {
    let max = a.max_bytes.unwrap_or(usize::MAX);
    let t = Instant::now();
    let (rules, _) = read(&a.rules, a.format, max)?;
    if a.runtime != NfForm::Native {
        // read here for its errors (file:line:col); the guest reads and compiles its own
        drop(rules);
        return run_nf_guest(&a);
    }
    let config = vtnt_fw::Config {
        conntrack: vtnt_fw::CtConfig {
            max: a.max_conns as usize,
            ..Default::default()
        },
        compile: Options {
            max_bytes: max,
            ..Options::default()
        },
    };
    let fw = vtnt_fw::Firewall::new(&rules, config)
        .with_context(|| format!("compiling {}", a.rules.display()))?;
    // the model as read is not needed once compiled: its memory goes back before the
    // first packet (about as much again as the compiled rules)
    drop(rules);
    let s = fw.classifier().stats();
    let loaded = t.elapsed();
    let stop = crate::interrupt::catch()?;
    let mut nf = vtnt_fw_linux::Nf::open(fw, &a.if_in, &a.if_out)?;
    eprintln!(
        "vtnt fw run: {} rules from {} loaded in {:.1} ms ({} bytes compiled); forwarding between {} and {}",
        s.rules,
        a.rules.display(),
        loaded.as_secs_f64() * 1e3,
        s.bytes,
        a.if_in,
        a.if_out
    );
    let result = nf.run(stop);
    let names = [a.if_in.as_str(), a.if_out.as_str()];
    eprintln!(
        "{}",
        counters_line(&nf.counters(), &nf.firewall_stats(), names)
    );
    result?;
    Ok(crate::interrupt::exit_code().unwrap_or(ExitCode::SUCCESS))
}
