//! The daemon's one loop, on one thread: it accepts clients, reads their lines into their
//! sessions, starts their commands as the window frees (clients take turns, weighted by
//! their `attach priority`: [`Turns`]), drives every started command's prober on one set
//! of raw sockets, giving the probe budget out by the same kind of turns, and writes each
//! client's output as its connection takes it. No thread per client or command: what a
//! client can make the daemon hold is its queue (`--client-queue`), its running commands
//! (within `--window`) and its unwritten output (`--client-buffer`, then it is slowed;
//! `--stall-timeout`, then it is dropped). The PTR look-ups of `trace -O ptr` run on one
//! pool of threads, started with the first such command.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use nix::poll::{PollFd, PollFlags};
use vtnt_daemon::{Command, Session, SessionInfo, Turns};
use vtnt_engine::{Instant, Prober};
use vtnt_formats::NoAnnotations;
use vtnt_linux::{Clock, RawSockets, Sent};

use super::budget::Budget;
use super::client::{Client, Conn, Limits};
use super::task::{Outcome, Task};
use super::{command, DaemonArgs, UnixSocket};
use crate::names::Names;
use crate::output;

/// Where clients connect.
pub struct Listeners {
    pub tcp: Option<TcpListener>,
    pub unix: Option<UnixSocket>,
}

/// Whose a record waiting for its names is: a client's key and a task's id.
type Tag = (u64, u32);

/// The longest part of a command a log event quotes, bytes. (Commands are logged at
/// debug: at info, a daemon whose stderr nobody reads would stop at the first full pipe
/// under a client's thousands of commands; clients coming and going are info.)
const LOGGED_COMMAND: usize = 200;

/// Lines worked through per client, and commands started, per turn of the loop: checking
/// and starting a command reads the host's addresses and routes, so a client that sends
/// a thousand at once must not hold the loop (and every other client's probes) for the
/// time they all take. What is left waits for the next turn, which comes at once.
const PER_TURN: usize = 16;

struct Daemon<'a> {
    args: &'a DaemonArgs,
    limits: Limits,
    clients: BTreeMap<u64, Client>,
    next_key: u64,
    unix_clients: u64,
    /// Turns at the probe budget.
    rate: Turns<u64>,
    /// Turns at the window.
    slots: Turns<u64>,
    /// Commands started and not finished, all clients together.
    running: usize,
    budget: Budget,
    names: Option<Names<Tag>>,
    sockets: RawSockets,
    clock: Clock,
    /// A probe the kernel had no room for, sent before any other.
    unsent: Option<(Tag, Vec<u8>)>,
    /// Commands accepted so far (the seed offset of the next).
    commands: u64,
    /// Work was left for the next turn: do not sleep.
    busy: bool,
}

/// Serves until `stop` is set; then ends every session and closes.
pub fn run(
    args: &DaemonArgs,
    listeners: Listeners,
    sockets: RawSockets,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let mut d = Daemon {
        args,
        limits: Limits {
            buffer: args.client_buffer,
            stall: Duration::from_secs_f64(args.stall_timeout),
        },
        clients: BTreeMap::new(),
        next_key: 0,
        unix_clients: 0,
        rate: Turns::new(),
        slots: Turns::new(),
        running: 0,
        budget: Budget::new(args.pps),
        names: None,
        sockets,
        clock: Clock::new(),
        unsent: None,
        commands: 0,
        busy: false,
    };
    let mut probe = vec![0u8; 2048];
    let mut rx = vec![0u8; 65536];
    while !stop.load(Ordering::SeqCst) {
        let (readable, accepting) = d.wait(&listeners)?;
        if accepting {
            d.accept(&listeners);
        }
        let now = d.clock.now();
        d.receive(&mut rx)?;
        for k in readable {
            if let Some(c) = d.clients.get_mut(&k) {
                c.read();
            }
        }
        d.busy = false;
        let keys: Vec<u64> = d.clients.keys().copied().collect();
        for &k in &keys {
            d.commands_of(k);
        }
        d.start(now);
        for t in d.tasks() {
            t.handle_timeout(now);
        }
        d.send(now, &mut probe)?;
        d.collect();
        for c in d.clients.values_mut() {
            c.write(&d.limits);
        }
        d.close_finished();
    }
    d.stop();
    Ok(())
}

impl Daemon<'_> {
    /// Every started command of every client.
    fn tasks(&mut self) -> impl Iterator<Item = &mut Task> {
        self.clients.values_mut().flat_map(|c| c.running.iter_mut())
    }

    /// Sleeps until a client or a packet needs the loop, or a prober's, the budget's or
    /// a stall's deadline; returns the clients to read from and whether a listener has a
    /// client waiting.
    fn wait(&mut self, listeners: &Listeners) -> anyhow::Result<(Vec<u64>, bool)> {
        let now = self.clock.now();
        let mut wake = now + Duration::from_secs(1);
        let mut due = self.unsent.is_some();
        for c in self.clients.values() {
            for t in &c.running {
                match t.poll_timeout() {
                    Some(t) if t <= now => due = true,
                    Some(t) => wake = wake.min(t),
                    None => {}
                }
            }
        }
        if due {
            // a probe is due: at the budget's next token (or at once, for a prober's own
            // pacer or a full kernel queue, after a moment)
            let next = self
                .budget
                .wait(now)
                .unwrap_or(now + Duration::from_millis(1));
            wake = wake.min(next);
        }
        if self.names.as_ref().is_some_and(|n| n.holding()) {
            wake = wake.min(now + Duration::from_millis(50));
        }
        let stall = self
            .clients
            .values()
            .filter_map(|c| c.stall_deadline(&self.limits))
            .min();
        let mut wait = wake.as_micros().saturating_sub(now.as_micros());
        if self.busy {
            wait = 0;
        }
        if let Some(s) = stall {
            let left = s.saturating_duration_since(std::time::Instant::now());
            wait = wait.min(left.as_micros() as u64 + 1_000);
        }
        let in_flags = PollFlags::POLLIN;
        let mut fds = Vec::new();
        let listening: Vec<_> = [
            listeners.tcp.as_ref().map(|l| l.as_fd()),
            listeners.unix.as_ref().map(|u| u.listener.as_fd()),
        ]
        .into_iter()
        .flatten()
        .collect();
        for fd in &listening {
            fds.push(PollFd::new(*fd, in_flags));
        }
        for fd in self.sockets.receivers() {
            fds.push(PollFd::new(fd, in_flags));
        }
        let first_client = fds.len();
        let mut keys = Vec::new();
        for (k, c) in &self.clients {
            let mut flags = PollFlags::empty();
            if c.wants_input(&self.limits) {
                flags |= PollFlags::POLLIN;
            }
            if c.wants_output() {
                flags |= PollFlags::POLLOUT;
            }
            if !flags.is_empty() {
                fds.push(PollFd::new(c.conn.fd(), flags));
                keys.push(*k);
            }
        }
        let ts = nix::sys::time::TimeSpec::from_duration(Duration::from_micros(wait));
        match nix::poll::ppoll(&mut fds, Some(ts), None) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("waiting for clients and replies"),
        }
        let ready = |f: &PollFd| {
            f.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        let accepting = fds[..listening.len()].iter().any(ready);
        let readable = fds[first_client..]
            .iter()
            .zip(&keys)
            .filter(|(f, k)| ready(f) && self.clients[k].wants_input(&self.limits))
            .map(|(_, k)| *k)
            .collect();
        Ok((readable, accepting))
    }

    /// Takes every client waiting at the listeners; past `--max-clients` one is told so
    /// and closed.
    fn accept(&mut self, listeners: &Listeners) {
        loop {
            let (conn, name) = if let Some(Ok((s, peer))) =
                listeners.tcp.as_ref().map(|l| l.accept())
            {
                (Conn::Tcp(s), peer.to_string())
            } else if let Some(Ok((s, _))) = listeners.unix.as_ref().map(|u| u.listener.accept()) {
                let u = listeners
                    .unix
                    .as_ref()
                    .map(|u| u.path.display().to_string());
                let name = format!("{}:{}", u.unwrap_or_default(), self.unix_clients);
                self.unix_clients += 1;
                (Conn::Unix(s), name)
            } else {
                return;
            };
            if conn.set_nonblocking().is_err() {
                continue;
            }
            if self.clients.len() as u64 >= self.args.max_clients {
                tracing::warn!(
                    client = %name,
                    clients = self.clients.len(),
                    "client refused: too many clients (--max-clients)"
                );
                let mut conn = conn;
                let _ = conn.write(
                    format!(
                        "ERR too many clients: {} connected, the most this daemon serves \
                         (--max-clients)\n",
                        self.clients.len()
                    )
                    .as_bytes(),
                );
                conn.shutdown();
                continue;
            }
            let session = Session::new(SessionInfo {
                list_name: name.clone(),
                hostname: output::hostname(),
                start_time: output::unix_now(),
                pps: self.args.pps,
                window: self.args.window,
                queue: self.args.client_queue,
                protocol: self.args.protocol.into(),
                vtnt: crate::VERSION.into(),
            });
            tracing::info!(client = %name, "client connected");
            self.clients
                .insert(self.next_key, Client::new(name, conn, session));
            self.next_key += 1;
        }
    }

    /// Works through the lines client `k` sent, while it is not slowed: measurement
    /// commands are checked and queued, `halt` stops a task.
    fn commands_of(&mut self, k: u64) {
        let Some(c) = self.clients.get_mut(&k) else {
            return;
        };
        for turn in 0.. {
            if c.slowed(&self.limits) || c.gone.is_some() {
                break;
            }
            if turn == PER_TURN {
                self.busy = true;
                break;
            }
            let Some(cmd) = c.session.next_command() else {
                break;
            };
            match cmd {
                Command::Measure(words) => match command(&words, self.args, self.commands) {
                    Ok(job) => {
                        self.commands += 1;
                        let id = c.session.accept();
                        tracing::debug!(
                            client = %c.name,
                            id,
                            command = %quoted(&words),
                            "command accepted"
                        );
                        c.queue.push_back((id, job));
                    }
                    Err(e) => {
                        let e = format!("{e:#}");
                        tracing::debug!(client = %c.name, command = %quoted(&words), error = %e, "command refused");
                        c.session.refuse(&e);
                    }
                },
                Command::Halt(id) => {
                    c.queue.retain(|(q, _)| *q != id);
                    if let Some(i) = c.running.iter().position(|t| t.id == id) {
                        if let Some(mut t) = c.running.remove(i) {
                            t.halt(self.clock.now());
                            deliver(c, &mut self.names, k, &mut t);
                            self.running -= 1;
                        }
                    }
                    c.naming.remove(&id);
                    tracing::debug!(client = %c.name, id, "command halted");
                    c.session.halted(id);
                }
            }
            c.pending_output();
        }
        let weight = c.session.priority();
        self.rate.insert(k, weight);
        self.slots.insert(k, weight);
    }

    /// Starts waiting commands while the window has room, clients taking turns, none
    /// past its own share (`--client-window`).
    fn start(&mut self, now: Instant) {
        let own = self.args.client_window() as usize;
        for turn in 0.. {
            if self.running >= self.args.window as usize {
                break;
            }
            if turn == PER_TURN {
                self.busy = true;
                break;
            }
            let (clients, limits, running) = (&mut self.clients, &self.limits, &mut self.running);
            let took = self.slots.next(|k| {
                let Some(c) = clients.get_mut(&k) else {
                    return false;
                };
                if c.gone.is_some() || c.slowed(limits) || c.running.len() >= own {
                    return false;
                }
                let Some((id, job)) = c.queue.pop_front() else {
                    return false;
                };
                c.session.started(id);
                match Task::start(id, &job, now) {
                    Ok(t) => {
                        c.running.push_back(t);
                        *running += 1;
                    }
                    Err(e) => {
                        tracing::warn!(client = %c.name, id, error = %format!("{e:#}"), "command failed to start");
                        c.session.finished(id);
                    }
                }
                true
            });
            if took.is_none() {
                break;
            }
        }
    }

    /// Sends the probes that are due while the budget has room, clients taking turns
    /// (and each client's commands taking turns within its own).
    fn send(&mut self, now: Instant, buf: &mut [u8]) -> anyhow::Result<()> {
        if let Some((tag, pkt)) = self.unsent.take() {
            self.transmit(now, tag, &pkt)?;
        }
        while self.unsent.is_none() && self.budget.wait(now).is_none() {
            let clients = &mut self.clients;
            let mut sent = None;
            self.rate.next(|k| {
                let Some(c) = clients.get_mut(&k) else {
                    return false;
                };
                for _ in 0..c.running.len() {
                    let Some(t) = c.running.front_mut() else {
                        return false;
                    };
                    let (id, len) = (t.id, t.poll_transmit(now, buf));
                    c.running.rotate_left(1);
                    if let Some(len) = len {
                        sent = Some(((k, id), len));
                        return true;
                    }
                }
                false
            });
            let Some((tag, len)) = sent else {
                break;
            };
            self.budget.charge(now);
            self.transmit(now, tag, &buf[..len])?;
        }
        Ok(())
    }

    /// Sends one probe of task `tag`: kept for later when the kernel has no room, handed
    /// back to the task when the kernel refuses it.
    fn transmit(&mut self, now: Instant, tag: Tag, pkt: &[u8]) -> anyhow::Result<()> {
        match self.sockets.send(pkt).context("sending probes")? {
            Sent::Yes => {}
            Sent::NoRoom => self.unsent = Some((tag, pkt.to_vec())),
            Sent::Refused(errno) => {
                let task = self
                    .clients
                    .get_mut(&tag.0)
                    .and_then(|c| c.running.iter_mut().find(|t| t.id == tag.1));
                if let Some(t) = task {
                    t.handle_send_error(now, pkt, errno as i32);
                }
            }
        }
        Ok(())
    }

    /// Hands every prober the transmit stamps and the packets that came in.
    fn receive(&mut self, rx: &mut [u8]) -> anyhow::Result<()> {
        let (sockets, clock, clients) = (&mut self.sockets, &self.clock, &mut self.clients);
        sockets.recv_tx_stamps(clock, |at, probe| {
            for t in clients.values_mut().flat_map(|c| c.running.iter_mut()) {
                t.handle_transmitted(at, probe);
            }
        })?;
        sockets.recv_all(clock, rx, |at, pkt| {
            for t in clients.values_mut().flat_map(|c| c.running.iter_mut()) {
                t.handle_packet(at, pkt);
            }
        })?;
        Ok(())
    }

    /// Passes finished measurements to their sessions; ends the tasks that are idle.
    fn collect(&mut self) {
        for (&k, c) in self.clients.iter_mut() {
            let mut ended = Vec::new();
            let mut running = std::mem::take(&mut c.running);
            running.retain_mut(|t| {
                deliver(c, &mut self.names, k, t);
                let idle = t.is_idle();
                if idle {
                    ended.push(t.id);
                }
                !idle
            });
            c.running = running;
            self.running -= ended.len();
            for id in ended {
                end_task(c, id);
            }
        }
        let Some(names) = &mut self.names else {
            return;
        };
        for ((k, id), r) in names.ready() {
            named(&mut self.clients, k, id, &r);
        }
    }

    /// Closes clients whose session is over and output written, and drops those gone
    /// (left, stalled or broken), cutting their commands.
    fn close_finished(&mut self) {
        let done: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, c)| c.gone.is_some() || c.finished())
            .map(|(k, _)| *k)
            .collect();
        for k in done {
            let Some(c) = self.clients.remove(&k) else {
                continue;
            };
            if c.gone.is_some() {
                c.report_gone(c.running.len(), c.queue.len());
            } else {
                tracing::info!(client = %c.name, "client finished: its session is over");
            }
            self.running -= c.running.len();
            self.rate.remove(k);
            self.slots.remove(k);
            c.conn.shutdown();
        }
    }

    /// The daemon stops: running commands are cut (what they finished goes out), every
    /// session ends with its cycle stop, and what is left to write gets up to 2 s.
    fn stop(mut self) {
        tracing::info!(
            clients = self.clients.len(),
            "stopping: ending every client's session"
        );
        self.collect();
        if let Some(names) = self.names.take() {
            for ((k, id), r) in names.rest(false) {
                named(&mut self.clients, k, id, &r);
            }
        }
        let until = std::time::Instant::now() + Duration::from_secs(2);
        for c in self.clients.values_mut() {
            c.running.clear();
            c.session.end();
            c.flush(until.saturating_duration_since(std::time::Instant::now()));
            c.conn.shutdown();
        }
    }
}

/// Passes what task `t` of client `c` (key `k`) finished to its session (a trace that
/// waits for its names to the look-up pool).
fn deliver(c: &mut Client, names: &mut Option<Names<Tag>>, k: u64, t: &mut Task) {
    while let Some(o) = t.poll_output() {
        match o {
            Outcome::Record(r) if t.names => {
                names.get_or_insert_with(Names::start).hold((k, t.id), r);
                c.naming.entry(t.id).or_default().0 += 1;
            }
            Outcome::Record(r) => c.session.result(t.id, &r, &NoAnnotations),
            Outcome::Tnt(r) => match &r.trace {
                Some(_) => {
                    vtnt_formats::tnt_records(&r, |rec, ann| c.session.result(t.id, rec, ann))
                }
                None => tracing::warn!(
                    client = %c.name,
                    id = t.id,
                    target = %r.target,
                    error = %r.error.as_ref().map(|e| e.to_string()).unwrap_or_default(),
                    "tnt: no trace"
                ),
            },
        }
    }
}

/// Task `id` of `c` probes no more: it ends, once its records have their names.
fn end_task(c: &mut Client, id: u32) {
    tracing::debug!(client = %c.name, id, "command finished");
    match c.naming.get_mut(&id) {
        Some((held, ended)) if *held > 0 => *ended = true,
        _ => {
            c.naming.remove(&id);
            c.session.finished(id);
        }
    }
}

/// A record of task `id` of client `k` has its names.
fn named(clients: &mut BTreeMap<u64, Client>, k: u64, id: u32, r: &vtnt_formats::Record) {
    let Some(c) = clients.get_mut(&k) else {
        return;
    };
    c.session.result(id, r, &NoAnnotations);
    if let Some((held, ended)) = c.naming.get_mut(&id) {
        *held -= 1;
        if *held == 0 && *ended {
            c.naming.remove(&id);
            c.session.finished(id);
        }
    }
}

/// A command's words as one string, cut to [`LOGGED_COMMAND`] bytes.
fn quoted(words: &[String]) -> String {
    let mut s = words.join(" ");
    if s.len() > LOGGED_COMMAND {
        let mut end = LOGGED_COMMAND;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

impl From<super::ProtocolArg> for vtnt_daemon::Protocol {
    fn from(p: super::ProtocolArg) -> Self {
        match p {
            super::ProtocolArg::Current => vtnt_daemon::Protocol::Current,
            super::ProtocolArg::V20211212 => vtnt_daemon::Protocol::Scamper20211212,
        }
    }
}
