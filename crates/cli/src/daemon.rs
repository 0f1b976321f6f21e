//! `vtnt daemon`: scamper's control socket (`scamper -P PORT` / `-U PATH`), so that
//! scamper's drivers (Debian's `sc_attach`, scripts written for scamper) run `trace`,
//! `ping` and `tnt` on this host. The protocol is `vtnt-daemon`'s [`Session`]; this is
//! its driver over std threads: an accept loop, a thread per client (with one reading
//! its socket), a thread per command.
//!
//! Every command is parsed and checked as `vtnt trace|ping|tnt` would check it
//! (`vtnt-job`), with the daemon's run-wide options (`-p`, `--window`, `--allow-public`,
//! `--exclude`, `--seed`) in place of the command's own, which a command may not set.
//! Each runs its own prober on its own sockets (concurrent runs on one host keep apart
//! through their seeds' tags), all of them under one probe-rate budget
//! ([`budget::Budget`]) and at most `--window` at once.
//!
//! SIGINT or SIGTERM: the daemon stops accepting, cuts the running commands (their
//! finished records still go out), ends every attached session with its cycle stop,
//! closes the connections and removes the unix-domain socket.

mod budget;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use vtnt_daemon::{Session, SessionInfo};
use vtnt_engine::Event;
use vtnt_formats::{NoAnnotations, Record};
use vtnt_job::{Common, Job, JobKind, OutputOption, Vantage};
use vtnt_tnt::TntResult;

use crate::names::Names;
use crate::{interrupt, output, probe, tnt};
use budget::{Budget, Budgeted};

#[derive(clap::Args, Debug)]
pub struct DaemonArgs {
    /// Listen for clients on this TCP port (scamper's -P), on 127.0.0.1 unless --listen.
    #[arg(short = 'P', long = "port")]
    pub port: Option<u16>,
    /// The address the TCP port listens on. Anyone who reaches it can make this host
    /// probe (within its policy): a warning is printed for anything but loopback.
    #[arg(long, default_value = "127.0.0.1", requires = "port")]
    pub listen: IpAddr,
    /// Listen on this unix-domain socket (scamper's -U), created mode 0600 and removed
    /// when the daemon stops. A stale socket there is replaced; anything else is not.
    #[arg(short = 'U', long = "unix", value_name = "PATH")]
    pub unix: Option<PathBuf>,
    /// Probes per second for all commands together (scamper's -p). At most 500000;
    /// public targets are probed only by a daemon of at most 1000.
    #[arg(short = 'p', long = "pps", default_value_t = 20)]
    pub pps: u32,
    /// Commands running at once (scamper's window); the rest wait their turn, and a
    /// client is asked for more (`MORE`) only while it has fewer outstanding.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub window: u32,
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

/// The options of `vtnt trace|ping|tnt` that are the daemon's, or would read or write
/// the daemon's files: a command that gives one is refused.
const DAEMON_OWNS: [&str; 9] = [
    "pps",
    "window",
    "allow_public",
    "exclude",
    "seed",
    "output",
    "targets_file",
    "from",
    "quiet",
];

/// How often threads look at the stop flags.
const TICK: Duration = Duration::from_millis(100);
/// A client that takes no bytes for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What every client thread shares.
struct Shared {
    args: DaemonArgs,
    budget: Budget,
    slots: Slots,
    clock: vtnt_linux::Clock,
    /// Commands accepted so far (the seed offset of the next).
    commands: AtomicU64,
}

pub fn run(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    if args.port.is_none() && args.unix.is_none() {
        bail!("give -P PORT or -U PATH (or both): where clients connect");
    }
    vtnt_engine::policy::check_rate(args.pps).map_err(|_| {
        anyhow::anyhow!(
            "-p/--pps {} is out of range (1..=500000; 1000 at most with public targets)",
            args.pps
        )
    })?;
    vtnt_job::exclusion_list(&args.exclude)?;
    // fail now, not at the first command, without the privilege to probe
    drop(vtnt_linux::RawSockets::open()?);
    let tcp = match args.port {
        Some(port) => Some(listen_tcp(args.listen, port)?),
        None => None,
    };
    let unix = match &args.unix {
        Some(path) => Some(UnixSocket::bind(path)?),
        None => None,
    };
    let stop = interrupt::catch()?;
    let shared = Arc::new(Shared {
        budget: Budget::new(args.pps),
        slots: Slots::new(args.window),
        clock: vtnt_linux::Clock::new(),
        commands: AtomicU64::new(0),
        args,
    });
    if let Some(l) = &tcp {
        eprintln!("vtnt: daemon listening on {}", l.local_addr()?);
    }
    if let Some(u) = &unix {
        eprintln!("vtnt: daemon listening on {}", u.path.display());
    }
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    let mut unix_clients = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let mut fds = Vec::new();
        if let Some(l) = &tcp {
            fds.push(nix::poll::PollFd::new(
                l.as_fd(),
                nix::poll::PollFlags::POLLIN,
            ));
        }
        if let Some(u) = &unix {
            fds.push(nix::poll::PollFd::new(
                u.listener.as_fd(),
                nix::poll::PollFlags::POLLIN,
            ));
        }
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u16)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => bail!("waiting for clients: {e}"),
        }
        if let Some(l) = &tcp {
            match l.accept() {
                Ok((s, peer)) => {
                    let name = peer.to_string();
                    clients.push(spawn_client(Conn::Tcp(s), name, &shared)?);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => eprintln!("vtnt: accepting a TCP client: {e}"),
            }
        }
        if let Some(u) = &unix {
            match u.listener.accept() {
                Ok((s, _)) => {
                    let name = format!("{}:{unix_clients}", u.path.display());
                    unix_clients += 1;
                    clients.push(spawn_client(Conn::Unix(s), name, &shared)?);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => eprintln!("vtnt: accepting a unix-domain client: {e}"),
            }
        }
        clients.retain(|c| !c.is_finished());
    }
    eprintln!("vtnt: stopping: ending {} client sessions", clients.len());
    for c in clients {
        let _ = c.join();
    }
    drop(unix);
    Ok(ExitCode::SUCCESS)
}

fn listen_tcp(addr: IpAddr, port: u16) -> anyhow::Result<TcpListener> {
    let at = SocketAddr::new(addr, port);
    let l = TcpListener::bind(at).with_context(|| format!("-P {port}: listening on {at}"))?;
    l.set_nonblocking(true)?;
    if !addr.is_loopback() {
        eprintln!(
            "vtnt: warning: the control socket listens on {at}: whoever reaches it can make \
             this host probe (within its policy)"
        );
    }
    Ok(l)
}

/// The unix-domain listener; its file is removed when this is dropped.
struct UnixSocket {
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

/// A client's connection.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    fn try_clone(&self) -> std::io::Result<Conn> {
        Ok(match self {
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
        })
    }
    fn prepare(&self) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => {
                s.set_nonblocking(false)?;
                s.set_write_timeout(Some(WRITE_TIMEOUT))
            }
            Conn::Unix(s) => {
                s.set_nonblocking(false)?;
                s.set_write_timeout(Some(WRITE_TIMEOUT))
            }
        }
    }
    fn shutdown(&self) {
        let _ = match self {
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(b),
            Conn::Unix(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(b),
            Conn::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

/// What a client's thread waits for.
enum ClientEvent {
    Input(Vec<u8>),
    /// The client closed its side (or reading failed).
    Closed,
    /// A command ended, with what it measured.
    Ended(Vec<Outcome>),
}

/// One result of a command.
enum Outcome {
    Record(Record),
    Tnt(Box<TntResult>),
}

fn spawn_client(conn: Conn, name: String, shared: &Arc<Shared>) -> anyhow::Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name(format!("client {name}"))
        .spawn(move || {
            if let Err(e) = client(conn, &name, &shared) {
                eprintln!("vtnt: client {name}: {e:#}");
            }
        })
        .context("starting a client thread")
}

/// One client's conversation, until its session ends, it leaves, or the daemon stops.
fn client(mut conn: Conn, name: &str, shared: &Arc<Shared>) -> anyhow::Result<()> {
    conn.prepare()?;
    let (tx, rx) = mpsc::channel();
    let mut reader = conn.try_clone()?;
    let reader_tx = tx.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = reader_tx.send(ClientEvent::Closed);
                    return;
                }
                Ok(n) => {
                    if reader_tx
                        .send(ClientEvent::Input(buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let mut session = Session::new(SessionInfo {
        list_name: name.to_string(),
        hostname: output::hostname(),
        start_time: output::unix_now(),
        pps: shared.args.pps,
        window: shared.args.window,
    });
    let cancel = Arc::new(AtomicBool::new(false));
    let mut running = 0u32;
    let mut gone = false;
    loop {
        match rx.recv_timeout(TICK) {
            Ok(ClientEvent::Input(bytes)) => {
                session.receive(&bytes);
                while let Some(words) = session.next_command() {
                    match command(&words, shared) {
                        Ok(job) => {
                            let id = session.accept();
                            running += 1;
                            spawn_command(job, format!("{name} id-{id}"), shared, &cancel, &tx)?;
                        }
                        Err(e) => session.refuse(&format!("{e:#}")),
                    }
                }
            }
            Ok(ClientEvent::Closed) => {
                if running > 0 {
                    eprintln!("vtnt: client {name} left: cutting its {running} running commands");
                }
                gone = true;
            }
            Ok(ClientEvent::Ended(outcomes)) => {
                running -= 1;
                for o in outcomes {
                    match o {
                        Outcome::Record(r) => session.result(&r, &NoAnnotations),
                        Outcome::Tnt(r) => match &r.trace {
                            Some(_) => vtnt_formats::tnt_records(&r, |record, ann| {
                                session.result(record, ann)
                            }),
                            None => eprintln!(
                                "vtnt: client {name}: tnt {}: {}",
                                r.target,
                                r.error.as_ref().map(|e| e.to_string()).unwrap_or_default()
                            ),
                        },
                    }
                }
                session.finished();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => gone = true,
        }
        if gone || interrupt::stopped() {
            // cut what runs; its finished records still come back
            cancel.store(true, Ordering::SeqCst);
            if running == 0 {
                session.end();
            }
        }
        let out = session.take_output();
        if !gone && !out.is_empty() && conn.write_all(&out).is_err() {
            gone = true;
            continue;
        }
        if running == 0 && (session.is_closed() || gone) {
            break;
        }
    }
    conn.shutdown();
    Ok(())
}

/// Parses and checks a command as `vtnt trace|ping|tnt` would, with the daemon's
/// run-wide options.
fn command(words: &[String], shared: &Shared) -> anyhow::Result<Job> {
    let parsed = vtnt_job::parse_args(words, &DAEMON_OWNS)?;
    let c = parsed.common();
    if c.output_options.iter().any(|o| *o != OutputOption::Ptr) {
        bail!("-O/--format: a client chooses the format when it attaches; a command takes only `-O ptr`");
    }
    if c.targets.len() != 1 {
        bail!("give one target (a command measures one address, as scamper's do)");
    }
    let a = &shared.args;
    let n = shared.commands.load(Ordering::SeqCst);
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
    shared.commands.fetch_add(1, Ordering::SeqCst);
    job.context("no target to probe")
}

fn spawn_command(
    job: Job,
    name: String,
    shared: &Arc<Shared>,
    cancel: &Arc<AtomicBool>,
    tx: &Sender<ClientEvent>,
) -> anyhow::Result<()> {
    let (shared, cancel, tx) = (Arc::clone(shared), Arc::clone(cancel), tx.clone());
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let outcomes = match shared.slots.take(&cancel) {
                Some(_slot) => measure(&job, &shared, &cancel).unwrap_or_else(|e| {
                    eprintln!("vtnt: {name}: {e:#}");
                    Vec::new()
                }),
                None => Vec::new(),
            };
            let _ = tx.send(ClientEvent::Ended(outcomes));
        })
        .context("starting a command thread")?;
    Ok(())
}

/// Runs one command on its own sockets under the daemon's budget.
fn measure(job: &Job, shared: &Shared, cancel: &AtomicBool) -> anyhow::Result<Vec<Outcome>> {
    let mut sockets = vtnt_linux::RawSockets::open()?;
    let clock = &shared.clock;
    let mut out = Vec::new();
    let stats = match job.spec.kind {
        JobKind::Tnt(_) => {
            let (runner, _, _) = tnt::runner(job, tnt::ReadBack::default(), false)?;
            let mut p = Budgeted::new(runner, &shared.budget);
            vtnt_linux::run_until(&mut p, &mut sockets, clock, cancel, |r| {
                out.push(Outcome::Tnt(Box::new(r)));
                Ok(())
            })
        }
        _ => {
            let engine = probe::engine(job, clock.now())?;
            let mut p = Budgeted::new(engine, &shared.budget);
            let mut names = job.names.then(Names::start);
            let stats = vtnt_linux::run_until(&mut p, &mut sockets, clock, cancel, |ev| {
                let Event::Finished { record, .. } = ev;
                match &mut names {
                    None => out.push(Outcome::Record(record)),
                    Some(n) => n.hold(record),
                }
                Ok(())
            });
            if let Some(n) = names {
                let cut = cancel.load(Ordering::SeqCst);
                out.extend(n.rest(!cut).into_iter().map(Outcome::Record));
            }
            stats
        }
    }
    .context("probing")?;
    probe::check_sent(&stats)?;
    Ok(out)
}

/// The window: commands measuring at once.
struct Slots {
    free: Mutex<u32>,
    freed: Condvar,
}

/// A slot taken; given back when dropped.
struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(n: u32) -> Slots {
        Slots {
            free: Mutex::new(n),
            freed: Condvar::new(),
        }
    }

    /// Waits for a free slot; `None` once `cancel` is set.
    fn take(&self, cancel: &AtomicBool) -> Option<Slot<'_>> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if cancel.load(Ordering::SeqCst) {
                return None;
            }
            if *free > 0 {
                *free -= 1;
                return Some(Slot(self));
            }
            free = self
                .freed
                .wait_timeout(free, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}
