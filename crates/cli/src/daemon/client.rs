//! One client of the daemon as its loop sees it: the connection (non-blocking), the
//! protocol session, the commands it has waiting and running, and the bytes not yet
//! written to it, with what that costs it: past `--client-buffer` of unwritten output the
//! client is slowed (nothing more is read from it and none of its commands starts), and a
//! client that takes none of its output for `--stall-timeout` is dropped.

use std::collections::{BTreeMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use vtnt_daemon::{Session, MAX_LINE};
use vtnt_job::Job;

use super::task::Task;

/// A client's connection.
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    pub fn set_nonblocking(&self) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_nonblocking(true),
            Conn::Unix(s) => s.set_nonblocking(true),
        }
    }
    pub fn shutdown(&self) {
        let _ = match self {
            Conn::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Conn::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Conn::Tcp(s) => s.as_fd(),
            Conn::Unix(s) => s.as_fd(),
        }
    }
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(b),
            Conn::Unix(s) => s.read(b),
        }
    }
    pub fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(b),
            Conn::Unix(s) => s.write(b),
        }
    }
}

/// What the daemon bounds per client.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Unwritten output past which the client is slowed.
    pub buffer: usize,
    /// How long output may wait with none of it taken before the client is dropped.
    pub stall: Duration,
}

/// Why a client is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gone {
    /// It closed its side (or reading failed).
    Left,
    /// It took none of its output for the stall timeout.
    Stalled(usize),
    /// Writing to it failed.
    Broken(String),
}

pub struct Client {
    pub name: String,
    pub conn: Conn,
    pub session: Session,
    /// Accepted commands waiting for a place in the window.
    pub queue: VecDeque<(u32, Job)>,
    /// Started commands, in the order they take turns at the probe budget.
    pub running: VecDeque<Task>,
    /// Tasks whose traces wait for their names: records held, and whether the task ended.
    pub naming: BTreeMap<u32, (usize, bool)>,
    out: Vec<u8>,
    /// Since when output has waited with none of it taken.
    waiting: Option<Instant>,
    pub gone: Option<Gone>,
}

impl Client {
    pub fn new(name: String, conn: Conn, session: Session) -> Client {
        Client {
            name,
            conn,
            session,
            queue: VecDeque::new(),
            running: VecDeque::new(),
            naming: BTreeMap::new(),
            out: Vec::new(),
            waiting: None,
            gone: None,
        }
    }

    /// Past its output buffer: nothing is read from it and none of its commands starts.
    pub fn slowed(&self, limits: &Limits) -> bool {
        self.out.len() > limits.buffer
    }

    /// Whether to read from it now.
    pub fn wants_input(&self, limits: &Limits) -> bool {
        self.gone.is_none()
            && !self.session.is_closed()
            && !self.slowed(limits)
            && self.session.unread() < 2 * MAX_LINE
    }

    pub fn wants_output(&self) -> bool {
        self.gone.is_none() && !self.out.is_empty()
    }

    /// Moves what the session has to say into the client's output, so that a flood of
    /// lines answered `ERR` slows the client as results do.
    pub fn pending_output(&mut self) {
        self.out.extend(self.session.take_output());
    }

    /// Reads what the client sent, once.
    pub fn read(&mut self) {
        let mut buf = [0u8; 4096];
        match self.conn.read(&mut buf) {
            Ok(0) => self.gone = Some(Gone::Left),
            Ok(n) => self.session.receive(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(_) => self.gone = Some(Gone::Left),
        }
    }

    /// Takes the session's output and writes what the connection takes now; drops a
    /// client whose output has waited too long.
    pub fn write(&mut self, limits: &Limits) {
        self.out.extend(self.session.take_output());
        if self.gone.is_some() {
            return;
        }
        let mut progress = false;
        while !self.out.is_empty() {
            match self.conn.write(&self.out) {
                Ok(0) => break,
                Ok(n) => {
                    self.out.drain(..n);
                    progress = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.gone = Some(Gone::Broken(e.to_string()));
                    return;
                }
            }
        }
        let now = Instant::now();
        self.waiting = match (self.out.is_empty(), self.waiting) {
            (true, _) => None,
            (false, Some(_)) if progress => Some(now),
            (false, None) => Some(now),
            (false, w) => w,
        };
        if self.waiting.is_some_and(|w| now >= w + limits.stall) {
            self.gone = Some(Gone::Stalled(self.out.len()));
        }
    }

    /// When [`Client::write`] must look again, to drop it if nothing moves.
    pub fn stall_deadline(&self, limits: &Limits) -> Option<Instant> {
        self.waiting.map(|w| w + limits.stall)
    }

    /// Everything written and nothing more to come: close it.
    pub fn finished(&self) -> bool {
        self.session.is_closed() && self.out.is_empty() && self.running.is_empty()
    }

    /// Logs why the client is gone; `running`, `queued`: its commands cut.
    pub fn report_gone(&self, running: usize, queued: usize) {
        let client = self.name.as_str();
        match &self.gone {
            Some(Gone::Left) | None => tracing::info!(client, running, queued, "client left"),
            Some(Gone::Stalled(n)) => tracing::warn!(
                client,
                running,
                queued,
                unread = n,
                "client dropped: it took none of its output"
            ),
            Some(Gone::Broken(e)) => tracing::warn!(
                client,
                running,
                queued,
                error = %e,
                "client dropped: writing to it failed"
            ),
        }
    }

    /// Writes what is left, for up to `within` (the daemon is stopping).
    pub fn flush(&mut self, within: Duration) {
        self.out.extend(self.session.take_output());
        let until = Instant::now() + within;
        while self.gone.is_none() && !self.out.is_empty() && Instant::now() < until {
            let before = self.out.len();
            self.write(&Limits {
                buffer: usize::MAX,
                stall: within,
            });
            if self.out.len() == before {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
