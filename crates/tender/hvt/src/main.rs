//! The `vtnt-monitor` command: runs one vTNT unikernel in a microVM on `/dev/kvm` (one
//! process per VM; vtnt-unikernel spawns it) and exits with the guest's status, or 124 (timed
//! out), 125 (the monitor could not run it) or 126 (the guest faulted). Errors are one
//! line on stderr starting `vtnt-monitor: error:`. See the library's docs.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use vtnt_abi::hvt::NETS_MAX;
use vtnt_monitor::{parse_mac, Config, Ended, Net, DEFAULT_MAC, DEFAULT_MAC2, EXIT_MONITOR_ERROR};

/// Run one vTNT unikernel image in a microVM on /dev/kvm.
#[derive(Debug, Parser)]
#[command(
    name = "vtnt-monitor",
    version,
    after_help = "Exit status: the guest's own (0-255, from its EXIT call); 124 when it did not exit \
                  within --timeout; 125 when the monitor could not run it; 126 when it faulted."
)]
struct Cli {
    /// Guest memory in MiB (even, at least 2).
    #[arg(long, value_name = "N", default_value_t = 16)]
    mem_mib: u64,
    /// The NIC: udp=LOCALIP:PORT,REMOTEIP:PORT (one Ethernet frame per datagram) or
    /// tap=IFNAME (an existing TAP device). Given twice: a second NIC (network 1, a
    /// network function's other side).
    #[arg(long, value_name = "udp=LOCAL,REMOTE|tap=IFNAME")]
    net: Vec<Net>,
    /// The NIC's MAC address (default 52:54:00:12:34:56); given twice: the second NIC's
    /// too (default 52:54:00:12:34:57).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    mac: Vec<[u8; 6]>,
    /// A file to load as a boot module (repeatable, in order).
    #[arg(long = "module", value_name = "FILE")]
    modules: Vec<PathBuf>,
    /// Stop the guest after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = parse_timeout)]
    timeout: u64,
    /// Print one JSON line of timings and exit counts on stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Do not confine the monitor: it keeps root and installs no seccomp filter (for
    /// debugging a refused system call: the filter kills the process with SIGSYS).
    #[arg(long)]
    no_seccomp: bool,
    /// The unikernel's ELF image.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// The guest's command line.
    #[arg(
        long,
        value_name = "CMDLINE",
        default_value = "",
        allow_hyphen_values = true
    )]
    cmdline: String,
}

/// A timeout: whole seconds, at least 1.
fn parse_timeout(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("the timeout must be at least 1 s".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("not a whole number of seconds".into()),
    }
}

/// Prints `vtnt-monitor: error: <msg>` on stderr.
fn error(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "vtnt-monitor: error: {msg}");
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            error(&one_line(&e.to_string()));
            return ExitCode::from(EXIT_MONITOR_ERROR);
        }
    };
    if let Err(e) = vtnt_monitor::watchdog::die_with_parent() {
        error(&format!("tying the VM to its supervisor: {e}"));
        return ExitCode::from(EXIT_MONITOR_ERROR);
    }
    if cli.net.len() as u64 > NETS_MAX || cli.mac.len() as u64 > NETS_MAX {
        error(&format!(
            "a VM has at most {NETS_MAX} networks: --net and --mac are given once or twice"
        ));
        return ExitCode::from(EXIT_MONITOR_ERROR);
    }
    let mut nets = cli.net.into_iter();
    let cfg = Config {
        image: cli.image,
        cmdline: cli.cmdline,
        mem_mib: cli.mem_mib,
        net: nets.next(),
        mac: cli.mac.first().copied().unwrap_or(DEFAULT_MAC),
        net2: nets.next(),
        mac2: cli.mac.get(1).copied().unwrap_or(DEFAULT_MAC2),
        modules: cli.modules,
        timeout: Duration::from_secs(cli.timeout),
        seccomp: !cli.no_seccomp,
    };
    match vtnt_monitor::run(&cfg) {
        Ok(out) => {
            match &out.ended {
                Ended::Exit(_) => {}
                Ended::Fault(what) => error(&format!("guest fault: {what}")),
                Ended::TimedOut => {
                    error(&format!("the guest did not exit within {} s", cli.timeout))
                }
            }
            if cli.stats {
                let _ = writeln!(std::io::stderr().lock(), "{}", out.stats.to_json());
            }
            let _ = std::io::stdout().flush();
            ExitCode::from(out.ended.exit_code())
        }
        Err(e) => {
            error(&e.to_string());
            ExitCode::from(EXIT_MONITOR_ERROR)
        }
    }
}

/// clap's error message as one line: its first paragraph without the `error: ` prefix
/// (the usage and help hints that follow are dropped), with a pointer to --help.
fn one_line(rendered: &str) -> String {
    let first: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let msg = first.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    format!("{msg} (see vtnt-monitor --help)")
}
