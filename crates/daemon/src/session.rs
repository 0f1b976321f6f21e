//! One client of the control socket: its mode (interactive, attached, done), the lines
//! it sent, its tasks (queued, running) and what goes back to it, in order.

use std::collections::BTreeMap;

use vtnt_formats::{Annotate, Cycle, Record};

use crate::attach::Attach;
use crate::encode::Encoder;
use crate::words::split_words;

/// Longest line a client may send (scamper reads whole lines of any length; a limit keeps
/// a client that never sends a newline from growing the daemon without end).
pub const MAX_LINE: usize = 8192;

/// The measurement commands of an attached session (scamper's `trace` and `ping`, and
/// TNT).
pub const JOB_COMMANDS: [&str; 3] = ["trace", "ping", "tnt"];

/// The generation of scamper's control protocol a session speaks. Nothing a client sends
/// tells them apart (both attach with `attach`), so the daemon is told which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// scamper since 20230224 (read from 20260420's source): the `DATA` block that ends
    /// a task carries its id, `DATA <length> id-N`; libscamperctrl and its Python module
    /// (`ScamperCtrl`) wait for it.
    Current,
    /// scamper 20211212 (Debian 12's): `DATA <length>` alone; its `sc_attach` refuses
    /// anything after the length.
    Scamper20211212,
}

impl Protocol {
    /// The scamper version whose protocol this is, for `get version`.
    pub fn version(self) -> &'static str {
        match self {
            Protocol::Current => "20260420",
            Protocol::Scamper20211212 => "20211212",
        }
    }
}

/// What a session needs to know about the daemon and the client.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The cycle's list name unless the client names it (scamper: the socket path and a
    /// count for a unix-domain client, the client's address and port for TCP).
    pub list_name: String,
    pub hostname: Option<String>,
    /// Seconds since the UNIX epoch, when the client attaches.
    pub start_time: u32,
    /// The daemon's `-p`, for `get pps`.
    pub pps: u32,
    /// The daemon's window, for `get window`.
    pub window: u32,
    /// Commands the client may have waiting to start; one more is refused.
    pub queue: u32,
    pub protocol: Protocol,
    /// The vTNT build (`0.1.0 (commit 1a2b3c4d)`) that `get version` and the cycle
    /// ([`vtnt_formats::Cycle::vtnt`]) name.
    pub vtnt: String,
}

/// A line the driver acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A measurement command's words: [`Session::accept`] or [`Session::refuse`] it.
    Measure(Vec<String>),
    /// `halt N` of a task the client has: stop it, then [`Session::halted`].
    Halt(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Interactive,
    Attached,
    /// `done` received: results still to come, then the cycle stop.
    Done,
    Closed,
}

/// An accepted command.
#[derive(Debug, Default)]
struct Task {
    started: bool,
    /// Its latest object, held back to go out tagged when the task ends.
    held: Option<Vec<u8>>,
}

/// One client's conversation.
pub struct Session {
    info: SessionInfo,
    mode: Mode,
    /// Bytes received that do not end a line yet.
    input: Vec<u8>,
    /// The rest of an over-long line is being skipped.
    skipping: bool,
    out: Vec<u8>,
    attach: Option<(Attach, Encoder)>,
    next_id: u32,
    tasks: BTreeMap<u32, Task>,
    /// Accepted tasks not started yet.
    queued: u32,
    /// A measurement command was handed out and is neither accepted nor refused yet.
    pending: bool,
}

impl Session {
    pub fn new(info: SessionInfo) -> Session {
        Session {
            info,
            mode: Mode::Interactive,
            input: Vec::new(),
            skipping: false,
            out: Vec::new(),
            attach: None,
            next_id: 1,
            tasks: BTreeMap::new(),
            queued: 0,
            pending: false,
        }
    }

    /// Bytes from the client.
    pub fn receive(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// Bytes received and not yet worked through.
    pub fn unread(&self) -> usize {
        self.input.len()
    }

    /// Works through the complete lines received, answering all but the lines the driver
    /// acts on; returns the next of those, `None` when no complete line is left. A
    /// [`Command::Measure`] must be accepted or refused before the next call.
    pub fn next_command(&mut self) -> Option<Command> {
        assert!(!self.pending, "a command is waiting for accept or refuse");
        while self.mode != Mode::Closed {
            let Some(end) = self.input.iter().position(|&b| b == b'\n') else {
                if self.input.len() > MAX_LINE {
                    self.input.clear();
                    if !self.skipping {
                        self.skipping = true;
                        self.line_out(&format!("ERR line longer than {MAX_LINE} bytes"));
                    }
                }
                return None;
            };
            let line: Vec<u8> = self.input.drain(..=end).collect();
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if line.len() > MAX_LINE + 1 {
                self.line_out(&format!("ERR line longer than {MAX_LINE} bytes"));
                continue;
            }
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line
                .iter()
                .any(|&b| !(b == b'\t' || (b' '..=b'~').contains(&b)))
            {
                self.line_out("ERR invalid character in line");
                continue;
            }
            // (printable ASCII only, checked above)
            let line = String::from_utf8_lossy(line).into_owned();
            if let Some(c) = self.handle_line(&line) {
                self.pending = matches!(c, Command::Measure(_));
                return Some(c);
            }
        }
        None
    }

    /// Answers one line; the lines the driver acts on are returned instead.
    fn handle_line(&mut self, line: &str) -> Option<Command> {
        let words = match split_words(line) {
            Ok(w) if w.is_empty() => return None,
            Ok(w) => w,
            Err(why) => {
                self.line_out(&format!("ERR {why}"));
                return None;
            }
        };
        let first = words[0].to_ascii_lowercase();
        match self.mode {
            Mode::Interactive => self.interactive(&first, &words[1..]),
            Mode::Attached if first == "done" && words.len() == 1 => {
                self.line_out("OK");
                self.mode = Mode::Done;
                self.maybe_end();
            }
            Mode::Attached if first == "halt" => return self.halt(&words[1..]),
            Mode::Attached if JOB_COMMANDS.contains(&first.as_str()) => {
                if self.queued >= self.info.queue {
                    self.line_out(&format!(
                        "ERR command not accepted: {} commands of this client wait to start, \
                         the most it may queue (the daemon's --client-queue); send the next \
                         after MORE",
                        self.queued
                    ));
                    return None;
                }
                return Some(Command::Measure(words));
            }
            Mode::Attached => self.line_out(&format!(
                "ERR command not accepted: unknown command '{}' (trace, ping, tnt, halt, done)",
                words[0]
            )),
            Mode::Done => self.line_out("ERR command not accepted: the session is done"),
            Mode::Closed => {}
        }
        None
    }

    /// `halt N`, answered as scamper does when N is not a task of this client.
    fn halt(&mut self, args: &[String]) -> Option<Command> {
        let [n] = args else {
            self.line_out("ERR usage: halt [id]");
            return None;
        };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            self.line_out("ERR usage: halt [id]");
            return None;
        }
        match n.parse::<u32>() {
            Ok(id) if id > 0 && self.tasks.contains_key(&id) => Some(Command::Halt(id)),
            Ok(id) if id > 0 => {
                self.line_out(&format!("ERR no task id-{id}"));
                None
            }
            _ => {
                self.line_out("ERR halt number invalid");
                None
            }
        }
    }

    fn interactive(&mut self, first: &str, args: &[String]) {
        match first {
            "attach" => match Attach::parse(args) {
                Ok(a) => self.attach(a),
                Err(line) => self.line_out(&line),
            },
            "get" => match args.first().map(|a| a.to_ascii_lowercase()).as_deref() {
                Some("version") => self.line_out(&format!(
                    "OK version {} (vtnt {})",
                    self.info.protocol.version(),
                    self.info.vtnt
                )),
                Some("pps") => self.line_out(&format!("OK pps {}", self.info.pps)),
                Some("window") => self.line_out(&format!(
                    "OK window {}/{}",
                    self.tasks.len(),
                    self.info.window
                )),
                _ => self.line_out("ERR usage: get [version | pps | window]"),
            },
            "help" => self.line_out(
                "OK commands: attach [format warts|json] [priority N] [name S] [list_id N] \
                 [cycle_id N], get [version|pps|window], help, exit; once attached: trace ..., \
                 ping ..., tnt ..., halt N, done",
            ),
            "exit" => self.mode = Mode::Closed,
            _ => self.line_out(&format!("ERR unhandled command '{first}'")),
        }
    }

    /// Attached: `OK`, `MORE`, and the cycle's header objects.
    fn attach(&mut self, a: Attach) {
        self.line_out("OK");
        self.line_out("MORE");
        self.mode = Mode::Attached;
        let enc = Encoder::new(a.format);
        self.attach = Some((a, enc));
        let cycle = self.cycle(0);
        if let Some((_, enc)) = &mut self.attach {
            let objects = enc.cycle_start(&cycle);
            self.objects_out(objects, None);
        }
    }

    /// The session's cycle (scamper's defaults: list id 0, cycle id 1).
    fn cycle(&self, stop_time: u32) -> Cycle {
        let a = self.attach.as_ref().map(|(a, _)| a);
        Cycle {
            list_name: a
                .and_then(|a| a.name.clone())
                .unwrap_or_else(|| self.info.list_name.clone()),
            list_id: a.map_or(0, |a| a.list_id),
            id: a.map_or(1, |a| a.cycle_id),
            hostname: self.info.hostname.clone(),
            start_time: self.info.start_time,
            stop_time,
            vtnt: Some(self.info.vtnt.clone()),
        }
    }

    /// Accepts the command [`Session::next_command`] returned: `OK id-N`; it waits to
    /// start ([`Session::started`]). Returns N.
    pub fn accept(&mut self) -> u32 {
        assert!(self.pending, "no command to accept");
        self.pending = false;
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        self.tasks.insert(id, Task::default());
        self.queued += 1;
        self.line_out(&format!("OK id-{id}"));
        id
    }

    /// Refuses the command [`Session::next_command`] returned, saying why (scamper:
    /// `ERR command not accepted: REASON`).
    pub fn refuse(&mut self, why: &str) {
        assert!(self.pending, "no command to refuse");
        self.pending = false;
        let why = why.replace(['\n', '\r'], " ");
        self.line_out(&format!("ERR command not accepted: {why}"));
    }

    /// Task `id` started probing: as scamper does, `MORE` once none of the client's
    /// commands waits to start.
    pub fn started(&mut self, id: u32) {
        let Some(t) = self.tasks.get_mut(&id) else {
            return;
        };
        if !std::mem::replace(&mut t.started, true) {
            self.queued = self.queued.saturating_sub(1);
            if self.queued == 0 && self.mode == Mode::Attached {
                self.line_out("MORE");
            }
        }
    }

    /// A record of task `id`, sent as `DATA`. With JSON, `ann` adds its fields (TNT's
    /// annotations); with warts they go in a list object before the record. Today's
    /// protocol tags the last object of a task with its id, so each object is held back
    /// until the next one or the task's end shows whether it is the last.
    pub fn result(&mut self, id: u32, record: &Record, ann: &dyn Annotate) {
        let Some((_, enc)) = &mut self.attach else {
            return;
        };
        let objects = enc.record(record, ann);
        let Ok(objects) = objects else {
            return self.objects_out(objects, None);
        };
        for o in objects {
            let task = self.tasks.get_mut(&id);
            match (self.info.protocol, task) {
                (Protocol::Current, Some(t)) => {
                    if let Some(before) = t.held.replace(o) {
                        self.data_out(&before, None);
                    }
                }
                _ => self.data_out(&o, None),
            }
        }
    }

    /// Task `id` has ended (its records given to [`Session::result`]): its last object
    /// goes out, tagged; after `done` the last task ends the session.
    pub fn finished(&mut self, id: u32) {
        let Some(t) = self.tasks.remove(&id) else {
            return;
        };
        if !t.started {
            self.queued = self.queued.saturating_sub(1);
        }
        if let Some(o) = t.held {
            self.data_out(&o, Some(id));
        }
        self.maybe_end();
    }

    /// Task `id` was halted (`halt N`): `OK halted N`, and it ends.
    pub fn halted(&mut self, id: u32) {
        self.line_out(&format!("OK halted {id}"));
        self.finished(id);
    }

    /// Commands accepted and not finished.
    pub fn outstanding(&self) -> u32 {
        self.tasks.len() as u32
    }

    /// The client's share of the daemon against other clients' (`attach priority`).
    pub fn priority(&self) -> u32 {
        self.attach.as_ref().map_or(1, |(a, _)| a.priority)
    }

    /// Ends the session now (the daemon is stopping, or cut the client's tasks): every
    /// task ends, an attached session gets its cycle stop.
    pub fn end(&mut self) {
        if matches!(self.mode, Mode::Attached | Mode::Done) {
            let ids: Vec<u32> = self.tasks.keys().copied().collect();
            self.mode = Mode::Done;
            for id in ids {
                self.finished(id);
            }
            self.maybe_end();
        }
        self.mode = Mode::Closed;
    }

    /// After `done` with nothing outstanding: the cycle stop, then the end.
    fn maybe_end(&mut self) {
        if self.mode != Mode::Done || !self.tasks.is_empty() {
            return;
        }
        let stop = self.cycle(now_unix());
        if let Some((_, enc)) = &mut self.attach {
            let objects = enc.cycle_stop(&stop);
            self.objects_out(objects, None);
        }
        self.mode = Mode::Closed;
    }

    /// The session is over: send what [`Session::take_output`] holds, then close.
    pub fn is_closed(&self) -> bool {
        self.mode == Mode::Closed
    }

    /// Whether the client has attached.
    pub fn attached(&self) -> bool {
        self.attach.is_some()
    }

    /// What to send to the client now.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    fn line_out(&mut self, line: &str) {
        self.out.extend_from_slice(line.as_bytes());
        self.out.push(b'\n');
    }

    /// One `DATA` per object; an encoder error is an `ERR` line instead (nothing
    /// half-written goes out).
    fn objects_out(&mut self, objects: Result<Vec<Vec<u8>>, String>, id: Option<u32>) {
        match objects {
            Ok(objects) => objects.iter().for_each(|o| self.data_out(o, id)),
            Err(e) => self.line_out(&format!("ERR could not encode a result: {e}")),
        }
    }

    fn data_out(&mut self, body: &[u8], id: Option<u32>) {
        let head = match (self.info.protocol, id) {
            (Protocol::Current, Some(id)) => format!("DATA {} id-{id}\n", body.len()),
            _ => format!("DATA {}\n", body.len()),
        };
        self.out.extend_from_slice(head.as_bytes());
        self.out.extend_from_slice(body);
    }
}

fn now_unix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

#[cfg(test)]
mod tests;
