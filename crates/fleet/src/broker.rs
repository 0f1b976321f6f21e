//! `vtnt fleet up|down`: the embedded broker, Debian's `nats-server` with JetStream on,
//! listening on 127.0.0.1, its store, pid, log and URL under
//! `/run/vtnt/fleet/<name>/`. `up` returns once the server accepts connections; `down`
//! stops it (SIGTERM, then SIGKILL after 5 s) and removes the directory.

use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The fleet every command uses when given no `--nats` URL.
pub const DEFAULT_NAME: &str = "default";
/// The default client port (NATS's own).
pub const DEFAULT_PORT: u16 = 4222;
/// The program, from Debian's package `nats-server`.
pub const NATS_SERVER: &str = "nats-server";
/// How long `up` waits for the server to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the fleets' state lives.
pub fn state_root() -> PathBuf {
    PathBuf::from("/run/vtnt/fleet")
}

/// One broker's directory.
pub fn state_dir(name: &str) -> PathBuf {
    state_root().join(name)
}

/// A running broker.
#[derive(Debug, Clone)]
pub struct Broker {
    pub name: String,
    pub url: String,
    pub pid: i32,
    pub dir: PathBuf,
}

/// Starts the broker `name` on 127.0.0.1:`port`, daemonised, and waits until it accepts
/// connections.
pub fn up(name: &str, port: u16) -> anyhow::Result<Broker> {
    crate::check_token("--name", name)?;
    let dir = state_dir(name);
    if let Some(pid) = read_pid(&dir) {
        if alive(pid) {
            bail!(
                "fleet `{name}` is already up (pid {pid}, {}); `vtnt fleet down --name {name}` first",
                std::fs::read_to_string(dir.join("url")).unwrap_or_default().trim()
            );
        }
    }
    let Some(server) = vtnt_runtimes::paths::which(NATS_SERVER) else {
        bail!("`{NATS_SERVER}` is not installed (Debian package nats-server)");
    };
    let store = dir.join("store");
    std::fs::create_dir_all(&store).with_context(|| format!("creating {}", store.display()))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
        bail!("127.0.0.1:{port} is taken by another program; choose --port");
    }
    let log = dir.join("log");
    let mut child = Command::new(&server)
        .arg("--jetstream")
        .arg("--store_dir")
        .arg(&store)
        .args(["--addr", "127.0.0.1", "--port", &port.to_string()])
        .arg("--pid")
        .arg(dir.join("pid"))
        .arg("--log")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // its own session: it outlives this command and its terminal
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", server.display()))?;
    let url = format!("nats://127.0.0.1:{port}");
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait()? {
            bail!("nats-server exited ({st}): {}", tail(&log));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            break;
        }
        if t0.elapsed() > READY_TIMEOUT {
            let _ = child.kill();
            bail!(
                "nats-server did not listen on {addr} within {READY_TIMEOUT:?}: {}",
                tail(&log)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(dir.join("url"), format!("{url}\n"))?;
    let pid = i32::try_from(child.id()).context("pid")?;
    Ok(Broker {
        name: name.to_string(),
        url,
        pid,
        dir,
    })
}

/// Stops the broker `name` and removes its state (store included).
pub fn down(name: &str) -> anyhow::Result<()> {
    crate::check_token("--name", name)?;
    let dir = state_dir(name);
    if !dir.exists() {
        bail!("no fleet `{name}` ({} does not exist)", dir.display());
    }
    if let Some(pid) = read_pid(&dir) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        let t0 = Instant::now();
        while alive(pid) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
}

/// The URL of the running broker `name`, if it runs.
pub fn url(name: &str) -> Option<String> {
    let dir = state_dir(name);
    read_pid(&dir).filter(|p| alive(*p))?;
    Some(
        std::fs::read_to_string(dir.join("url"))
            .ok()?
            .trim()
            .to_string(),
    )
}

fn read_pid(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The last lines of the server's log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}
