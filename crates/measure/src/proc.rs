//! Processes: spawn in their own process group, read their output while they run, kill
//! the whole group on timeout or drop ([`Supervised`]); and what they cost, from `/proc`:
//! proportional set size (PSS, `smaps_rollup`), resident set size, CPU time.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::error::TimedOut;
use crate::error::{Error, IoContext, Result};

/// Sends `sig` to process group `pgid`.
pub fn kill_group(pgid: u32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) takes plain integers and has no memory effects; a negative pid
        // addresses the process group, which we created with process_group(0).
        unsafe {
            libc::kill(-(pgid as i32), sig);
        }
    }
}

/// Sends `sig` to one process.
pub fn kill_pid(pid: u32, sig: i32) {
    if pid > 1 {
        // SAFETY: as in kill_group; a positive pid addresses one process.
        unsafe {
            libc::kill(pid as i32, sig);
        }
    }
}

/// A child in its own process group, stdout and stderr captured by reader threads (what
/// it has written so far can be read while it runs), killed (whole group, SIGKILL) on
/// drop if still running.
pub struct Supervised {
    child: Proc,
    what: String,
    /// stdout and stderr as read so far.
    bufs: [Arc<Mutex<Vec<u8>>>; 2],
    /// One message per reader thread at its pipe's end.
    done: mpsc::Receiver<()>,
    /// How many of those messages were taken.
    closed: usize,
    started: Instant,
}

/// A supervised child's stdout as it arrives ([`Supervised::stdout_tap`]): readable from
/// any thread while the child runs; empty once [`Supervised::wait`] has collected it.
#[derive(Clone)]
pub struct OutputTap(Arc<Mutex<Vec<u8>>>);

impl OutputTap {
    /// The output from byte `from` on, up to its last complete line.
    pub fn lines_from(&self, from: usize) -> Vec<u8> {
        complete_lines(&self.0, from)
    }
}

/// `buf` from byte `from` on, up to its last complete line.
fn complete_lines(buf: &Mutex<Vec<u8>>, from: usize) -> Vec<u8> {
    let buf = buf.lock().unwrap_or_else(|e| e.into_inner());
    let tail = buf.get(from..).unwrap_or_default();
    tail.iter()
        .rposition(|&b| b == b'\n')
        .map_or_else(Vec::new, |i| tail[..=i].to_vec())
}

/// What a supervised child produced.
#[derive(Debug, Clone)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From the spawn to the exit, to within about 0.1 ms when the child's exit closes
    /// its pipes (its own, not handed to a process that outlives it), else 10 ms.
    pub elapsed: Duration,
}

/// Runs `f`, and once more if it failed with [`TimedOut`] (anywhere in the error's
/// chain, or as [`Error::TimedOut`]); `first` sees the first attempt's error. A second
/// failure is returned as is.
pub fn retry_once_on_timeout<T, E: AsRef<dyn std::error::Error + Send + Sync + 'static>>(
    f: impl FnMut() -> std::result::Result<T, E>,
    first: impl FnOnce(&E),
) -> std::result::Result<T, E> {
    retry_once_if(f, |e| timed_out(e.as_ref()), first)
}

/// Runs `f`, and once more if its error is one `retry` accepts (a caller whose errors
/// wrap [`TimedOut`] in a type of its own says so: `vtnt_runtimes::Error::is_timeout`);
/// `first` sees the first attempt's error. A second failure is returned as is.
pub fn retry_once_if<T, E>(
    mut f: impl FnMut() -> std::result::Result<T, E>,
    retry: impl FnOnce(&E) -> bool,
    first: impl FnOnce(&E),
) -> std::result::Result<T, E> {
    match f() {
        Err(e) if retry(&e) => {
            first(&e);
            f()
        }
        other => other,
    }
}

/// Whether `e`, or an error in its chain, is a [`TimedOut`].
pub fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        if e.is::<TimedOut>() || matches!(e.downcast_ref::<Error>(), Some(Error::TimedOut(_))) {
            return true;
        }
        at = e.source();
    }
    false
}

/// A supervised child: one `std` spawned, or one started by a raw `clone` (the spt
/// tender's, which must not copy this process's memory) that is reaped here.
enum Proc {
    Std(Child),
    Raw {
        pid: u32,
        status: Option<ExitStatus>,
    },
}

impl Proc {
    fn id(&self) -> u32 {
        match self {
            Proc::Std(c) => c.id(),
            Proc::Raw { pid, .. } => *pid,
        }
    }

    fn wait_raw(pid: u32, flags: i32) -> std::io::Result<Option<ExitStatus>> {
        use std::os::unix::process::ExitStatusExt;
        let mut st = 0;
        loop {
            // SAFETY: waitpid writes one int; `pid` is our own child, not yet reaped.
            let r = unsafe { libc::waitpid(pid as i32, &mut st, flags) };
            match r {
                0 => return Ok(None),
                r if r > 0 => return Ok(Some(ExitStatus::from_raw(st))),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self {
            Proc::Std(c) => c.try_wait(),
            Proc::Raw {
                status: Some(s), ..
            } => Ok(Some(*s)),
            Proc::Raw { pid, status } => {
                *status = Proc::wait_raw(*pid, libc::WNOHANG)?;
                Ok(*status)
            }
        }
    }

    fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Proc::Std(c) => c.wait(),
            Proc::Raw {
                status: Some(s), ..
            } => Ok(*s),
            Proc::Raw { pid, status } => {
                let s = Proc::wait_raw(*pid, 0)?.ok_or(std::io::ErrorKind::WouldBlock)?;
                *status = Some(s);
                Ok(s)
            }
        }
    }
}

impl Supervised {
    /// Spawns `cmd` (stdin null, stdout/stderr piped) in a new process group.
    pub fn spawn(cmd: Command, what: &str) -> Result<Supervised> {
        Supervised::spawn_with_input(cmd, what, None)
    }

    /// [`Supervised::spawn`], with `input` (a file: a job's target list) as its standard
    /// input.
    pub fn spawn_with_input(
        mut cmd: Command,
        what: &str,
        input: Option<std::fs::File>,
    ) -> Result<Supervised> {
        cmd.stdin(input.map_or_else(Stdio::null, Stdio::from))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .doing(|| format!("starting {what}: {}", brief(&cmd)))?;
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ];
        Ok(Supervised::with_readers(
            Proc::Std(child),
            pipes,
            what,
            started,
        ))
    }

    /// Supervises `pid`, a child of this process leading its own process group that the
    /// caller started (and will not wait for), whose standard output is `stdout` and
    /// which has no standard error.
    pub fn adopt(
        pid: u32,
        stdout: std::os::fd::OwnedFd,
        what: &str,
        started: Instant,
    ) -> Supervised {
        let out = Box::new(std::fs::File::from(stdout)) as Box<dyn Read + Send>;
        Supervised::with_readers(
            Proc::Raw { pid, status: None },
            [Some(out), None],
            what,
            started,
        )
    }

    /// Reader threads for the child's `pipes` (stdout, stderr), each reporting on `done`
    /// at its pipe's end (an absent pipe at once).
    fn with_readers(
        child: Proc,
        pipes: [Option<Box<dyn Read + Send>>; 2],
        what: &str,
        started: Instant,
    ) -> Supervised {
        let (tx, done) = mpsc::channel();
        let bufs: [Arc<Mutex<Vec<u8>>>; 2] = Default::default();
        for (pipe, buf) in pipes.into_iter().zip(&bufs) {
            let Some(mut p) = pipe else {
                let _ = tx.send(());
                continue;
            };
            let (tx, buf) = (tx.clone(), buf.clone());
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = p.read(&mut chunk) {
                    buf.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&chunk[..n]);
                }
                let _ = tx.send(());
            });
        }
        Supervised {
            child,
            what: what.to_string(),
            bufs,
            done,
            closed: 0,
            started,
        }
    }

    /// Stdout from byte `from` on, up to its last complete line (cheap to poll: only
    /// what is new is copied).
    pub fn stdout_lines_from(&self, from: usize) -> Vec<u8> {
        self.lines_from(0, from)
    }

    /// Its stdout as it arrives, for another thread to read while this one waits.
    pub fn stdout_tap(&self) -> OutputTap {
        OutputTap(self.bufs[0].clone())
    }

    /// Stderr from byte `from` on, up to its last complete line (a server's readiness
    /// line: `vtnt fw run` in a container).
    pub fn stderr_lines_from(&self, from: usize) -> Vec<u8> {
        self.lines_from(1, from)
    }

    fn lines_from(&self, pipe: usize, from: usize) -> Vec<u8> {
        complete_lines(&self.bufs[pipe], from)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether it has exited (without reaping output).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until it exits or `timeout` passes (then kills the group and fails), or the
    /// run is interrupted ([`crate::stop`]: the group is killed too). The wait ends soon
    /// after the exit: it wakes when a pipe closes (which an exit does), then polls every
    /// 0.1 ms, backing off to 10 ms, until the child can be reaped.
    pub fn wait(mut self, timeout: Duration) -> Result<Finished> {
        let deadline = self.started + timeout;
        let mut nap = Duration::from_millis(10);
        let status = loop {
            if let Some(st) = self
                .child
                .try_wait()
                .doing(|| format!("waiting for {}", self.what))?
            {
                break st;
            }
            if crate::stop::interrupted() {
                kill_group(self.child.id(), libc::SIGKILL);
                let _ = self.child.wait();
                return Err(Error::Interrupted {
                    killed: Some(self.what.clone()),
                });
            }
            if Instant::now() >= deadline {
                kill_group(self.child.id(), libc::SIGKILL);
                let _ = self.child.wait();
                let (o, e) = self.collect(Duration::from_secs(2));
                return Err(TimedOut {
                    what: self.what.clone(),
                    timeout,
                    stdout_tail: tail(&o, 800).to_string(),
                    stderr_tail: tail(&e, 800).to_string(),
                }
                .into());
            }
            let pipe_closed = match self.closed {
                2 => {
                    std::thread::sleep(nap);
                    false
                }
                _ => self.done.recv_timeout(nap).is_ok(),
            };
            if pipe_closed {
                self.closed += 1;
                nap = Duration::from_micros(100);
            } else {
                nap = (nap * 2).min(Duration::from_millis(10));
            }
        };
        let elapsed = self.started.elapsed();
        let (stdout, stderr) = self.collect(Duration::from_secs(10));
        Ok(Finished {
            status,
            stdout,
            stderr,
            elapsed,
        })
    }

    /// stdout and stderr, once both pipes are closed or `wait` has passed.
    fn collect(&mut self, wait: Duration) -> (String, String) {
        let deadline = Instant::now() + wait;
        while self.closed < 2 {
            if self
                .done
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_err()
            {
                break;
            }
            self.closed += 1;
        }
        let take = |b: &Arc<Mutex<Vec<u8>>>| {
            let bytes = std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()));
            String::from_utf8_lossy(&bytes).into_owned()
        };
        (take(&self.bufs[0]), take(&self.bufs[1]))
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_group(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The last `n` bytes of `s` (on a char boundary), for error messages.
pub fn tail(s: &str, n: usize) -> &str {
    let mut i = s.len().saturating_sub(n);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].trim()
}

/// PSS of a process in KiB (0 when it is gone).
pub fn pss_kib(pid: u32) -> u64 {
    rollup_field(pid, "Pss:")
}

/// RSS of a process in KiB (0 when it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    rollup_field(pid, "Rss:")
}

fn rollup_field(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Time a live process's threads have spent on a CPU, in nanoseconds (the scheduler's
/// own account, `/proc/PID/task/*/schedstat`): fine enough for runs of milliseconds,
/// where [`cpu_secs`] counts in clock ticks. Threads that ended are not in it; 0 when the
/// process is gone.
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// CPU time (user + system) a live process has used, in seconds.
pub fn cpu_secs(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // fields after the command (which may hold spaces) start after the last ')'
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime 15
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    ticks as f64 / clock_ticks()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Pids of processes whose executable name (`comm`) is `name`.
pub fn pids_named(name: &str) -> Vec<u32> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
            {
                v.push(pid);
            }
        }
    }
    v
}

/// `pid` and all its descendants that are alive now.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
                if let Some(pp) = s
                    .rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u32>().ok())
                {
                    parent_of.push((p, pp));
                }
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let cur = out[i];
        out.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == cur)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}
/// `cmd` as an error shows it: the program and its words, cut at [`BRIEF_CHARS`]
/// (a job's line may be long; an error that repeats it helps nobody).
fn brief(cmd: &Command) -> String {
    let words = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|w| w.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    match words.char_indices().nth(BRIEF_CHARS) {
        Some((cut, _)) => format!("{}... ({} bytes)", &words[..cut], words.len()),
        None => words,
    }
}

/// How much of a command line an error shows.
const BRIEF_CHARS: usize = 300;
