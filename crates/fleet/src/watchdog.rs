//! An agent's leftovers on its host: a job's processes, containers, cgroups and deploy
//! directories must not outlive the agent that ran it, however it ends. `vtnt agent`
//! puts its instances in a scope of its node (`agent-<node>`:
//! [`vtnt_runtimes::scope`]), and before it connects:
//!
//! - takes the node's lock on this host (a file lock on `<run>/agent-<node>.lock`), so
//!   one agent per node name runs here and nothing cleans a live agent's instances;
//! - removes what a dead predecessor of the same node left (when its watchdog died with
//!   it: `systemctl kill`, the OOM killer, a SIGKILL to both);
//! - forks a watchdog: a process in a session of its own, blocked reading a pipe whose
//!   write end only the agent holds (close-on-exec: no job inherits it). However the agent
//!   dies, the kernel closes that end; the watchdog reads EOF, removes the scope's
//!   leftovers and exits. It holds the node's lock too (the lock belongs to the open file,
//!   which the fork shares), so a new agent of the node starts once the cleaning is done.
//!
//! Why the cgroup each instance already runs in, emptied by a watchdog, rather than a
//! PID namespace per job or a parent-death signal: the cgroup holds every runtime's
//! processes, including containers that dockerd and containerd start (not the agent's
//! descendants) and runc's container (which outlives `runc run`); a parent-death signal
//! reaches a direct child only, and fires when the thread that spawned it ends; a PID
//! namespace holds neither the Docker engine's containers nor the state runc, Docker and
//! the deploy directories keep. cgroup v1 has no `cgroup.kill`, so the group is frozen,
//! its processes killed, then thawed (`vtnt_measure::cgroup::Cgroup::kill_all`).

#![allow(unsafe_code)]

use std::fs::File;
use std::io::Read;
use std::time::{Duration, Instant};

use crate::error::ResultExt;
use crate::Error;
use nix::unistd::ForkResult;

/// How long a new agent waits for the node's lock (a dead predecessor's watchdog
/// cleaning up: a Docker engine takes seconds to stop).
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// What an agent holds while it runs: the node's lock, the watchdog's pipe.
pub struct Guard {
    _lock: File,
    _watchdog: Option<std::io::PipeWriter>,
}

/// The scope of node `node`'s instances on this host.
pub fn scope(node: &str) -> String {
    format!("agent-{node}")
}

/// Locks node `node` on this host, removes what a predecessor left, enters the node's
/// scope and starts the watchdog (see the module's docs). Call it while this process has
/// one thread (before the agent's runtime starts): the watchdog is a fork.
pub fn start(node: &str) -> crate::Result<Guard> {
    let scope = scope(node);
    let lock = lock(node, &scope)?;
    let cleaned = vtnt_runtimes::scope::clean(&scope)
        .context(|| format!("removing what an earlier agent of node {node} left"))?;
    if !cleaned.is_empty() {
        tracing::info!(node, cleaned = %cleaned, "removed what an earlier agent of this node left");
    }
    vtnt_runtimes::paths::enter_scope(&scope)?;
    Ok(Guard {
        _lock: lock,
        _watchdog: watchdog(node, &scope)?,
    })
}

/// The node's lock, waited for up to [`LOCK_WAIT`].
fn lock(node: &str, scope: &str) -> crate::Result<File> {
    let dir = vtnt_runtimes::paths::run_base();
    std::fs::create_dir_all(&dir).io(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{scope}.lock"));
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .io(|| format!("opening {}", path.display()))?;
    let t0 = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if t0.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Invalid(format!(
                    "node `{node}` has an agent on this host already ({} stays locked); one agent per node name",
                    path.display()
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).io(|| format!("locking {}", path.display()))
            }
        }
    }
}

/// Forks the watchdog of scope `scope`; the pipe's write end, which this process keeps
/// until it ends. `None` (and a warning) when this process already runs threads, where a
/// fork could deadlock: the next agent of the node then cleans up instead.
fn watchdog(node: &str, scope: &str) -> crate::Result<Option<std::io::PipeWriter>> {
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    if threads != 1 {
        tracing::warn!(node, threads, "no watchdog (this process runs threads already): a new agent of this node cleans up after this one instead");
        return Ok(None);
    }
    let (mut eof, write) = std::io::pipe().io("the watchdog's pipe")?;
    // SAFETY: this process has one thread (checked above), so the child is a copy of a
    // consistent process and may run any code, as after a fork of a single-threaded one.
    match unsafe { nix::unistd::fork() }.io("forking the watchdog")? {
        ForkResult::Child => {
            drop(write);
            // out of the agent's session: a terminal's signals do not reach it
            let _ = nix::unistd::setsid();
            let mut b = [0u8; 64];
            loop {
                match eof.read(&mut b) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            match vtnt_runtimes::scope::clean(scope) {
                Ok(c) if !c.is_empty() => {
                    tracing::info!(node, cleaned = %c, "the watchdog removed what the dead agent left")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(node, error = %crate::error::chain(&e), "the watchdog failed to clean up")
                }
            }
            std::process::exit(0)
        }
        ForkResult::Parent { .. } => Ok(Some(write)),
    }
}
