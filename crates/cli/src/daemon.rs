//! `vtnt daemon`: scamper's control socket (`scamper -P [ADDR:]PORT` / `-U PATH`), so
//! that scamper's drivers (Debian's `sc_attach`, libscamperctrl and its Python module,
//! scripts written for scamper) run `trace`, `ping` and `tnt` on this host. The protocol,
//! either generation (`--protocol`), is `vtnt-daemon`'s [`vtnt_daemon::Session`]; its
//! driver is one loop on one thread ([`serve`]), every command a sans-IO prober on the
//! daemon's one set of raw sockets.
//!
//! Every command is parsed and checked as `vtnt trace|ping|tnt` would check it
//! (`vtnt-job`), with the daemon's run-wide options (`-p`, `--window`, `--allow-public`,
//! `--exclude`, `--seed`) in place of the command's own, which a command may not set.
//! All commands probe under one probe-rate budget ([`budget::Budget`]) and at most
//! `--window` at once; clients take turns at both, weighted by their `attach priority`.
//! What one client can hold is bounded (`--max-clients`, `--client-queue`,
//! `--client-buffer`, `--stall-timeout`: [`client`]).
//!
//! SIGINT or SIGTERM: the daemon stops accepting, cuts the running commands (their
//! finished records still go out), ends every attached session with its cycle stop,
//! closes the connections and removes the unix-domain socket.

mod budget;
mod client;
mod serve;
mod task;

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use vtnt_job::{Common, Job, OutputOption, Vantage};

use crate::interrupt;

#[derive(clap::Args, Debug)]
pub struct DaemonArgs {
    /// Listen for clients on this TCP port (scamper's -P [ADDR:]PORT), on 127.0.0.1
    /// unless an address is given (here or with --listen). Anyone who reaches it can
    /// make this host probe (within its policy): a warning is printed for anything but
    /// loopback.
    #[arg(short = 'P', long = "port", value_name = "[ADDR:]PORT", value_parser = parse_listen)]
    pub port: Option<(Option<IpAddr>, u16)>,
    /// The address the TCP port listens on (the same as -P ADDR:PORT).
    #[arg(long, requires = "port")]
    pub listen: Option<IpAddr>,
    /// Listen on this unix-domain socket (scamper's -U), created mode 0600 and removed
    /// when the daemon stops. A stale socket there is replaced; anything else is not.
    #[arg(short = 'U', long = "unix", value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// The generation of scamper's control protocol to speak: `current` (scamper since
    /// 20230224: the DATA block that ends a task says whose, `DATA LEN id-N`, which
    /// libscamperctrl and scamper's Python module wait for) or `20211212` (Debian 12's
    /// scamper and its sc_attach, which refuse that tag). Nothing a client sends tells
    /// them apart.
    #[arg(long, value_enum, default_value = "current")]
    pub protocol: ProtocolArg,
    /// Probes per second for all commands together (scamper's -p). At most 500000;
    /// public targets are probed only by a daemon of at most 1000.
    #[arg(short = 'p', long = "pps", default_value_t = 20)]
    pub pps: u32,
    /// Commands probing at once, all clients together (scamper's window); the rest wait
    /// their turn, clients taking turns.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub window: u32,
    /// Commands one client may have probing at once. Default: the window less one place
    /// for each other client --max-clients allows (but at least half the window), so
    /// that a client that comes while another fills the window starts at once.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub client_window: Option<u32>,
    /// Clients connected at once; one more is answered `ERR too many clients` and closed.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_clients: u64,
    /// Commands one client may have waiting for the window (beyond those probing); one
    /// more is refused (`ERR command not accepted: ...`). scamper's drivers send the next
    /// command after `MORE`, which comes once none waits.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub client_queue: u32,
    /// Bytes of output one client may leave unread before it is slowed: nothing more is
    /// read from it and none of its waiting commands starts until it reads.
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    pub client_buffer: usize,
    /// Seconds a client may leave its output unread (none of it taken) before it is
    /// dropped, its commands cut.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS", value_parser = parse_stall)]
    pub stall_timeout: f64,
    /// Allow targets outside loopback and the lab's ranges. Probing other people's
    /// networks needs their consent.
    #[arg(long)]
    pub allow_public: bool,
    /// Never probe the prefixes listed in FILE (one per line, `#` comments), on top of
    /// /etc/vtnt/exclude.conf when it exists. May be repeated.
    #[arg(long = "exclude", value_name = "FILE")]
    pub exclude: Vec<PathBuf>,
    /// Seed of the first command's probe identifiers; the n-th command takes seed + n
    /// (concurrent commands need different seeds). Default: drawn per command.
    #[arg(long)]
    pub seed: Option<u64>,
}

impl DaemonArgs {
    /// `--client-window`, or its default.
    fn client_window(&self) -> u32 {
        let others = u32::try_from(self.max_clients - 1).unwrap_or(u32::MAX);
        self.client_window
            .unwrap_or(self.window - others.min(self.window / 2))
            .min(self.window)
    }
}

/// `--protocol`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolArg {
    Current,
    #[value(name = "20211212")]
    V20211212,
}

/// `-P [ADDR:]PORT`, as scamper takes it.
fn parse_listen(s: &str) -> Result<(Option<IpAddr>, u16), String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok((None, port));
    }
    s.parse::<SocketAddr>()
        .map(|a| (Some(a.ip()), a.port()))
        .map_err(|_| format!("`{s}` is neither a port nor ADDR:PORT (IPv6: [ADDR]:PORT)"))
}

fn parse_stall(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds from 0.1 to 86400"
        )),
    }
}

/// The options of `vtnt trace|ping|tnt` that are the daemon's, or would read or write
/// the daemon's files: a command that gives one is refused.
const DAEMON_OWNS: [&str; 11] = [
    "pps",
    "window",
    "allow_public",
    "exclude",
    "seed",
    "output",
    "targets_file",
    "from",
    "quiet",
    "store",
    "no_store",
];

pub fn run(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    if args.port.is_none() && args.unix.is_none() {
        bail!("give -P [ADDR:]PORT or -U PATH (or both): where clients connect");
    }
    vtnt_engine::policy::check_rate(args.pps).map_err(|_| {
        anyhow::anyhow!(
            "-p/--pps {} is out of range (1..=500000; 1000 at most with public targets)",
            args.pps
        )
    })?;
    vtnt_job::exclusion_list(&args.exclude)?;
    // fail now, not at the first command, without the privilege to probe
    let sockets = vtnt_linux::RawSockets::open()?;
    let tcp = match args.port {
        Some((addr, port)) => {
            let addr = match (addr, args.listen) {
                (Some(a), Some(b)) if a != b => {
                    bail!("-P {a}:{port} and --listen {b}: give the address once")
                }
                (a, b) => a.or(b).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            };
            Some(listen_tcp(addr, port)?)
        }
        None => None,
    };
    let unix = match &args.unix {
        Some(path) => Some(UnixSocket::bind(path)?),
        None => None,
    };
    let stop = interrupt::catch()?;
    if let Some(l) = &tcp {
        tracing::info!(address = %l.local_addr()?, "listening");
    }
    if let Some(u) = &unix {
        tracing::info!(socket = %u.path.display(), "listening");
    }
    serve::run(&args, serve::Listeners { tcp, unix }, sockets, stop)?;
    Ok(ExitCode::SUCCESS)
}

fn listen_tcp(addr: IpAddr, port: u16) -> anyhow::Result<TcpListener> {
    let at = SocketAddr::new(addr, port);
    let l = TcpListener::bind(at).with_context(|| format!("-P {port}: listening on {at}"))?;
    l.set_nonblocking(true)?;
    if !addr.is_loopback() {
        tracing::warn!(
            address = %at,
            "the control socket is not on loopback: whoever reaches it can make this host \
             probe (within its policy)"
        );
    }
    Ok(l)
}

/// The unix-domain listener; its file is removed when this is dropped.
pub struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl UnixSocket {
    /// Binds `path` with mode 0600. A socket already there is replaced when nobody
    /// answers on it; anything else there is refused, untouched.
    fn bind(path: &Path) -> anyhow::Result<UnixSocket> {
        let shown = path.display();
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if UnixStream::connect(path).is_ok() {
                    bail!("-U {shown}: a daemon is already listening there");
                }
                std::fs::remove_file(path)
                    .with_context(|| format!("-U {shown}: removing the stale socket"))?;
            }
            Ok(_) => bail!("-U {shown}: something that is not a socket is there; not replaced"),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => bail!("-U {shown}: {e}"),
        }
        // the socket is born 0600: no other user can connect between bind and chmod
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(path);
        nix::sys::stat::umask(old);
        let listener = bound.with_context(|| format!("-U {shown}: listening"))?;
        let me = UnixSocket {
            listener,
            path: path.to_path_buf(),
        };
        me.listener.set_nonblocking(true)?;
        Ok(me)
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Parses and checks a command as `vtnt trace|ping|tnt` would, with the daemon's
/// run-wide options; `n`: the commands accepted before it.
fn command(words: &[String], a: &DaemonArgs, n: u64) -> anyhow::Result<Job> {
    let parsed = vtnt_job::parse_args(words, &DAEMON_OWNS)?;
    let c = parsed.common();
    if c.output_options.iter().any(|o| *o != OutputOption::Ptr) {
        bail!("-O/--format: a client chooses the format when it attaches; a command takes only `-O ptr`");
    }
    if c.targets.len() != 1 {
        bail!("give one target (a command measures one address, as scamper's do)");
    }
    let common = Common {
        pps: a.pps,
        window: a.window,
        allow_public: a.allow_public,
        exclude: a.exclude.clone(),
        seed: a.seed.map(|s| s.wrapping_add(n)),
        quiet: true,
        ..c.clone()
    };
    let (job, bad) = vtnt_job::check_job(parsed.kind(), &common, Vantage::Host)?;
    if let Some(b) = bad.first() {
        bail!("target `{}`: {}", b.text, b.reason);
    }
    job.context("no target to probe")
}
