//! `vtnt fleet up|down`: the embedded broker, Debian's `nats-server` with JetStream on,
//! listening on 127.0.0.1 (or the address given), its configuration, store, pid, log,
//! URL and users' keys (`keys/agent.nk`, `keys/tenant-<name>.nk`, ...: [`crate::auth`])
//! under `/run/vtnt/fleet/<name>/`. Every client needs a key; with a certificate the
//! server speaks TLS only. `up` returns once the server accepts connections and the
//! fleet's streams exist (made by each account's setup user: [`make_streams`]); `down`
//! stops it (SIGTERM, then SIGKILL after 5 s) and removes the directory.
//!
//! In the foreground (`up --foreground`, a systemd service: [`serve`]) the server is this
//! process's child instead, its log lines relayed as this process's log events (target
//! `nats_server`, at the level each line gives); SIGTERM or SIGINT stops it and keeps its
//! state (keys, store) for the next start.

use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{bail, ensure, ResultExt};
use crate::Error;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The fleet every command uses when given no `--nats` URL.
pub const DEFAULT_NAME: &str = "default";
/// The default client port (NATS's own).
pub const DEFAULT_PORT: u16 = 4222;
/// The program, from Debian's package `nats-server`.
pub const NATS_SERVER: &str = "nats-server";
/// The tenant of commands given none.
pub const DEFAULT_TENANT: &str = "default";
/// A copy of the CA `up` was given, for local commands.
pub const TLS_CA_FILE: &str = "tls-ca.pem";
/// How long `up` waits for the server to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// The server's last log lines an error quotes.
const TAIL_LINES: usize = 5;
/// The longest log line of the server's relayed whole (the rest is cut).
const MAX_LOG_LINE: usize = 16 * 1024;

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

/// What `vtnt fleet up` starts.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub name: String,
    pub listen: IpAddr,
    pub port: u16,
    /// The tenants who may submit (each gets a key).
    pub tenants: Vec<String>,
    /// The server's certificate and key (PEM): TLS only.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The CA that signed the certificate, handed to local commands.
    pub tls_ca: Option<PathBuf>,
    /// Clients must also present a certificate signed by `tls_ca` (mutual TLS).
    pub tls_verify: bool,
}

impl UpOptions {
    /// On loopback, tenant `default`, no TLS.
    pub fn new(name: &str, port: u16) -> UpOptions {
        UpOptions {
            name: name.to_string(),
            listen: IpAddr::from([127, 0, 0, 1]),
            port,
            tenants: vec![DEFAULT_TENANT.to_string()],
            tls: None,
            tls_ca: None,
            tls_verify: false,
        }
    }
}

/// Starts the broker `o.name`, daemonised, and waits until it accepts connections.
pub fn up(o: &UpOptions) -> crate::Result<Broker> {
    launch(o, false).map(|(b, _)| b)
}

/// Runs the broker `o.name` in the foreground until `stop` is set (then stops the server
/// and keeps its state) or the server exits (an error unless it exited 0).
pub fn serve(o: &UpOptions, stop: &AtomicBool) -> crate::Result<()> {
    let (b, child) = launch(o, true)?;
    let Some((mut child, log)) = child else {
        bail!(Broker, "nats-server is not this process's child");
    };
    tracing::info!(name = %b.name, url = %b.url, pid = b.pid, dir = %b.dir.display(), "broker up");
    loop {
        if stop.load(Ordering::SeqCst) {
            tracing::info!(name = %b.name, pid = b.pid, "stopping the broker");
            self::stop(b.pid);
            let st = child.wait().io("waiting for nats-server")?;
            tracing::info!(name = %b.name, status = %st, "broker stopped");
            return Ok(());
        }
        if let Some(st) = child.try_wait().io("waiting for nats-server")? {
            if st.success() {
                tracing::info!(name = %b.name, "nats-server exited");
                return Ok(());
            }
            bail!(Broker, "nats-server exited ({st}): {}", log.tail());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`up`], or [`serve`]'s start (`foreground`: the server is this process's child, its
/// log relayed).
fn launch(o: &UpOptions, foreground: bool) -> crate::Result<(Broker, Option<(Child, Log)>)> {
    let (name, port) = (o.name.as_str(), o.port);
    crate::check_token("--name", name)?;
    ensure!(!o.tenants.is_empty(), Invalid, "--tenant: at least one");
    ensure!(
        o.tls.is_some() || o.tls_ca.is_none(),
        Invalid,
        "--tls-ca goes with --tls-cert and --tls-key"
    );
    ensure!(
        !o.tls_verify || o.tls_ca.is_some(),
        Invalid,
        "--tls-verify needs --tls-ca: the CA that signs the clients' certificates"
    );
    // what can be refused is, before anything is written
    for t in &o.tenants {
        crate::check_token("--tenant", t)?;
    }
    let files = o
        .tls
        .iter()
        .flat_map(|(c, k)| [("--tls-cert", c), ("--tls-key", k)]);
    for (what, f) in files.chain(o.tls_ca.iter().map(|c| ("--tls-ca", c))) {
        ensure!(f.is_file(), Invalid, "{what} {}: no such file", f.display());
    }
    let dir = state_dir(name);
    if let Some(pid) = read_pid(&dir) {
        if alive(pid) {
            bail!(
                Invalid,
                "fleet `{name}` is already up (pid {pid}, {}); `vtnt fleet down --name {name}` first",
                std::fs::read_to_string(dir.join("url")).unwrap_or_default().trim()
            );
        }
    }
    let Some(server) = vtnt_runtimes::paths::which(NATS_SERVER) else {
        bail!(
            Broker,
            "`{NATS_SERVER}` is not installed (Debian package nats-server)"
        );
    };
    let store = dir.join("store");
    std::fs::create_dir_all(&store).io(|| format!("creating {}", store.display()))?;
    let addr = SocketAddr::from((o.listen, port));
    // where this host reaches it
    let local = if o.listen.is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], port))
    } else {
        addr
    };
    if TcpStream::connect_timeout(&local, Duration::from_millis(200)).is_ok() {
        bail!(
            Invalid,
            "{local} is taken by another program; choose --port"
        );
    }
    let config = dir.join("nats.conf");
    if o.tls_verify {
        // every client must show a certificate, `up` has none: the streams are made first
        // by the same server on a loopback port of its own, without TLS
        let setup = dir.join("nats-setup.conf");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .io("finding a free port")?;
        std::fs::write(
            &setup,
            self::config(o, &dir, &store, port, false)?.to_string(),
        )
        .io(|| format!("writing {}", setup.display()))?;
        let (mut child, _) = start(&server, &setup, &dir, port, foreground)?;
        let made = make_streams(&dir, &format!("nats://{port}"), None, &o.tenants);
        stop(child.id() as i32);
        let _ = child.wait();
        made?;
    }
    std::fs::write(
        &config,
        self::config(o, &dir, &store, addr, true)?.to_string(),
    )
    .io(|| format!("writing {}", config.display()))?;
    let (mut child, log) = start(&server, &config, &dir, local, foreground)?;
    let scheme = if o.tls.is_some() { "tls" } else { "nats" };
    let url = format!("{scheme}://{local}");
    std::fs::write(dir.join("url"), format!("{url}\n"))
        .io(|| format!("writing {}", dir.join("url").display()))?;
    let pid = i32::try_from(child.id())
        .map_err(|e| Error::Broker(format!("nats-server's pid {}: {e}", child.id())))?;
    if !o.tls_verify {
        let ca = o.tls_ca.as_ref().map(|_| dir.join(TLS_CA_FILE));
        if let Err(e) = make_streams(&dir, &url, ca, &o.tenants) {
            stop(pid);
            let _ = child.try_wait();
            return Err(e);
        }
    }
    let b = Broker {
        name: name.to_string(),
        url,
        pid,
        dir,
    };
    Ok((b, foreground.then_some((child, log))))
}

/// The server's log: its file, or (in the foreground) its last lines as relayed.
#[derive(Clone)]
enum Log {
    File(PathBuf),
    Relayed(Arc<Mutex<VecDeque<String>>>),
}

impl Log {
    /// The last lines, for an error.
    fn tail(&self) -> String {
        match self {
            Log::File(f) => tail(f),
            Log::Relayed(lines) => {
                let lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                lines.iter().cloned().collect::<Vec<_>>().join(" | ")
            }
        }
    }
}

/// Relays the server's log lines from `from` as log events until it closes, keeping the
/// last [`TAIL_LINES`] for errors.
fn relay(from: impl std::io::Read + Send + 'static) -> Log {
    let kept = Arc::new(Mutex::new(VecDeque::new()));
    let lines = kept.clone();
    let _ = std::thread::Builder::new()
        .name("nats-server log".into())
        .spawn(move || {
            let mut from = std::io::BufReader::new(from);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match (&mut from)
                    .take(MAX_LOG_LINE as u64)
                    .read_until(b'\n', &mut buf)
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end();
                if line.is_empty() {
                    continue;
                }
                log_line(line);
                let mut kept = lines.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() == TAIL_LINES {
                    kept.pop_front();
                }
                kept.push_back(line.to_string());
            }
        });
    Log::Relayed(kept)
}

/// One of nats-server's log lines (`[PID] DATE TIME [INF] message`) as a log event at
/// its level, target `nats_server`.
fn log_line(line: &str) {
    const TAGS: [&str; 6] = ["[INF] ", "[WRN] ", "[ERR] ", "[FTL] ", "[DBG] ", "[TRC] "];
    let found = TAGS
        .iter()
        .filter_map(|t| line.find(t).map(|i| (i, *t)))
        .min();
    let (tag, message) = match found {
        Some((i, t)) => (t, &line[i + t.len()..]),
        None => ("", line),
    };
    match tag {
        "[WRN] " => tracing::warn!(target: "nats_server", "{message}"),
        "[ERR] " | "[FTL] " => tracing::error!(target: "nats_server", "{message}"),
        "[DBG] " => tracing::debug!(target: "nats_server", "{message}"),
        "[TRC] " => tracing::trace!(target: "nats_server", "{message}"),
        _ => tracing::info!(target: "nats_server", "{message}"),
    }
}

/// Starts nats-server with `config` (its pid file in `dir`), in a process group of its
/// own (daemonised, it outlives this command and its terminal), and waits until it
/// accepts connections on `local`. Its log goes to `dir/log`, or in the `foreground` to
/// this process's log events ([`relay`]).
fn start(
    server: &Path,
    config: &Path,
    dir: &Path,
    local: SocketAddr,
    foreground: bool,
) -> crate::Result<(Child, Log)> {
    let mut cmd = Command::new(server);
    cmd.arg("--config")
        .arg(config)
        .arg("--pid")
        .arg(dir.join("pid"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0);
    let file = dir.join("log");
    if foreground {
        cmd.stderr(Stdio::piped());
    } else {
        cmd.arg("--log").arg(&file).stderr(Stdio::null());
    }
    let mut child = cmd
        .spawn()
        .io(|| format!("starting {}", server.display()))?;
    let log = match child.stderr.take() {
        Some(err) => relay(err),
        None => Log::File(file),
    };
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().io("waiting for nats-server")? {
            // what it said before it exited
            std::thread::sleep(Duration::from_millis(50));
            bail!(Broker, "nats-server exited ({st}): {}", log.tail());
        }
        if TcpStream::connect_timeout(&local, Duration::from_millis(200)).is_ok() {
            return Ok((child, log));
        }
        if t0.elapsed() > READY_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                Broker,
                "nats-server did not listen on {local} within {READY_TIMEOUT:?}: {}",
                log.tail()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes the fleet's streams unless they exist, each as its account's setup user: in the
/// fleet's account the work queue, the nodes' heartbeats, the images' object store and
/// each tenant's target lists and quota; in each tenant's account its results stream. No other user
/// may create a stream ([`crate::auth`]).
fn make_streams(
    dir: &Path,
    url: &str,
    tls_ca: Option<PathBuf>,
    tenants: &[String],
) -> crate::Result<()> {
    let as_setup = |t: Option<&String>| {
        let role = crate::auth::Role::Setup(t.cloned());
        crate::Connect {
            nkey: Some(crate::auth::key_file(dir, &role)),
            tls_ca: tls_ca.clone(),
            ..crate::Connect::open(url, role)
        }
    };
    crate::block_on(async {
        let (_, fleet) = as_setup(None).fleet("vtnt fleet up").await?;
        fleet.jobs().await?;
        fleet.nodes().await?;
        crate::images::create(&fleet).await?;
        crate::optout::create(&fleet).await?;
        crate::rate::create(&fleet).await?;
        crate::progress::create(&fleet).await?;
        for t in tenants {
            fleet.data(t).await?;
            crate::quota::stream(&fleet, t).await?;
            let (_, own) = as_setup(Some(t)).fleet("vtnt fleet up").await?;
            own.results(t).await?;
            crate::measurement::stream(&own, t).await?;
            crate::campaign::stream(&own, t).await?;
        }
        Ok::<_, Error>(())
    })
    .context("making the fleet's streams")
}

/// nats-server's configuration (JSON is a subset of its format): listening on `listen`,
/// JetStream, the accounts of [`crate::auth::accounts`], TLS if given and `tls` (the CA copied for local commands; with
/// `tls_verify`, the server checks clients' certificates against it).
fn config(
    o: &UpOptions,
    dir: &Path,
    store: &Path,
    listen: SocketAddr,
    tls: bool,
) -> crate::Result<serde_json::Value> {
    let mut c = serde_json::json!({
        "listen": listen.to_string(),
        "jetstream": {"store_dir": store},
        "accounts": crate::auth::accounts(dir, &o.tenants, tenant_store(store, o.tenants.len()))?,
    });
    if !tls {
        return Ok(c);
    }
    if let Some((cert, key)) = &o.tls {
        c["tls"] = serde_json::json!({
            "cert_file": std::fs::canonicalize(cert).io(|| format!("--tls-cert {}", cert.display()))?,
            "key_file": std::fs::canonicalize(key).io(|| format!("--tls-key {}", key.display()))?,
            "timeout": 2,
        });
    }
    if let Some(ca) = &o.tls_ca {
        let copy = dir.join(TLS_CA_FILE);
        std::fs::copy(ca, &copy).io(|| format!("--tls-ca {}", ca.display()))?;
        if o.tls_verify {
            // every client shows a certificate this CA signed, or is refused at handshake
            c["tls"]["ca_file"] = serde_json::json!(copy);
            c["tls"]["verify"] = serde_json::json!(true);
        }
    }
    Ok(c)
}

/// What each tenant's account may store, from the room on the store's disk
/// ([`crate::auth::tenant_store_bytes`]).
fn tenant_store(store: &Path, tenants: usize) -> u64 {
    let free =
        nix::sys::statvfs::statvfs(store).map_or(0, |s| s.blocks_available() * s.fragment_size());
    crate::auth::tenant_store_bytes(free, tenants)
}

/// Stops the broker `name` and removes its state (store included).
pub fn down(name: &str) -> crate::Result<()> {
    crate::check_token("--name", name)?;
    let dir = state_dir(name);
    if !dir.exists() {
        bail!(
            Invalid,
            "no fleet `{name}` ({} does not exist)",
            dir.display()
        );
    }
    if let Some(pid) = read_pid(&dir) {
        stop(pid);
    }
    std::fs::remove_dir_all(&dir).io(|| format!("removing {}", dir.display()))
}

/// Stops the server `pid`: SIGTERM, then SIGKILL after 5 s.
fn stop(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    let t0 = Instant::now();
    while alive(pid) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
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
