//! One client of the control socket: its mode (interactive, attached, done), the lines
//! it sent, and what goes back to it, in order.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

use vtnt_formats::{Annotate, Cycle, JsonWriter, Record, WartsWriter};

use crate::uuencode;
use crate::words::split_words;

/// The scamper version a `get version` reports: the release whose protocol this is.
pub const VERSION: &str = "20211212";

/// Longest line a client may send (scamper reads whole lines of any length; a limit keeps
/// a client that never sends a newline from growing the daemon without end).
pub const MAX_LINE: usize = 8192;

/// The measurement commands of an attached session (scamper's `trace` and `ping`, and
/// TNT).
pub const JOB_COMMANDS: [&str; 3] = ["trace", "ping", "tnt"];

/// How results are sent (`attach format ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Each object uuencoded warts (scamper's default).
    Warts,
    /// Each object one scamper-JSON line.
    Json,
}

/// What a session needs to know about the daemon and the client.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The cycle's list name (scamper: the socket path and a count for a unix-domain
    /// client, the client's address and port for TCP).
    pub list_name: String,
    pub hostname: Option<String>,
    /// Seconds since the UNIX epoch, when the client attaches.
    pub start_time: u32,
    /// The daemon's `-p`, for `get pps`.
    pub pps: u32,
    /// Commands this session may have outstanding before it stops asking for more.
    pub window: u32,
    /// The vTNT build (`0.1.0 (commit 1a2b3c4d)`) that `get version` and the cycle
    /// ([`vtnt_formats::Cycle::vtnt`]) name.
    pub vtnt: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Interactive,
    Attached,
    /// `done` received: results still to come, then the cycle stop.
    Done,
    Closed,
}

/// A `Write` whose bytes the session takes out after each object.
#[derive(Clone, Default)]
struct Sink(Rc<RefCell<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

enum Encoder {
    Warts(WartsWriter<Sink>),
    Json(JsonWriter<Sink>),
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
    sink: Sink,
    encoder: Option<(Format, Encoder)>,
    next_id: u32,
    outstanding: u32,
    /// A `MORE` is due once a command finishes.
    owe_more: bool,
    /// A command was handed out and is neither accepted nor refused yet.
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
            sink: Sink::default(),
            encoder: None,
            next_id: 1,
            outstanding: 0,
            owe_more: false,
            pending: false,
        }
    }

    /// Bytes from the client.
    pub fn receive(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// Works through the complete lines received, answering all but measurement
    /// commands; returns the words of the next measurement command (the caller must
    /// [`Session::accept`] or [`Session::refuse`] it before calling again), `None` when
    /// no complete line is left.
    pub fn next_command(&mut self) -> Option<Vec<String>> {
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
            if let Some(words) = self.handle_line(&line) {
                self.pending = true;
                return Some(words);
            }
        }
        None
    }

    /// Answers one line; the words of a measurement command are returned instead.
    fn handle_line(&mut self, line: &str) -> Option<Vec<String>> {
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
            Mode::Attached if first == "done" => {
                self.line_out("OK");
                self.mode = Mode::Done;
                self.maybe_end();
            }
            Mode::Attached if JOB_COMMANDS.contains(&first.as_str()) => return Some(words),
            Mode::Attached => self.line_out(&format!(
                "ERR command not accepted: unknown command '{}' (trace, ping, tnt, done)",
                words[0]
            )),
            Mode::Done => self.line_out("ERR command not accepted: the session is done"),
            Mode::Closed => {}
        }
        None
    }

    fn interactive(&mut self, first: &str, args: &[String]) {
        match first {
            "attach" => self.attach(args),
            "get" => match args.first().map(|a| a.to_ascii_lowercase()).as_deref() {
                Some("version") => {
                    self.line_out(&format!("OK version {VERSION} (vtnt {})", self.info.vtnt))
                }
                Some("pps") => self.line_out(&format!("OK pps {}", self.info.pps)),
                Some("window") => self.line_out(&format!(
                    "OK window {}/{}",
                    self.outstanding, self.info.window
                )),
                _ => self.line_out("ERR usage: get [version | pps | window]"),
            },
            "help" => self.line_out(
                "OK commands: attach [format warts|json], get [version|pps|window], help, \
                 exit; once attached: trace ..., ping ..., tnt ..., done",
            ),
            "exit" => self.mode = Mode::Closed,
            _ => self.line_out(&format!("ERR unhandled command '{first}'")),
        }
    }

    /// `attach [format warts|json] [priority N]`.
    fn attach(&mut self, args: &[String]) {
        let mut format = None;
        let mut priority = None;
        let mut it = args.iter();
        while let Some(p) = it.next() {
            let key = p.to_ascii_lowercase();
            let slot = match key.as_str() {
                "format" => &mut format,
                "priority" => &mut priority,
                _ => return self.line_out(&format!("ERR command attach param '{p}' failed")),
            };
            match it.next() {
                Some(v) if slot.is_none() => *slot = Some(v.to_ascii_lowercase()),
                _ => return self.line_out(&format!("ERR command attach param '{p}' failed")),
            }
        }
        if priority.is_some_and(|p| p.parse::<u32>().is_err()) {
            return self.line_out("ERR invalid priority");
        }
        let format = match format.as_deref() {
            None | Some("warts") => Format::Warts,
            Some("json") => Format::Json,
            Some(_) => return self.line_out("ERR format must be warts or json"),
        };
        self.line_out("OK");
        self.line_out("MORE");
        self.mode = Mode::Attached;
        let sink = self.sink.clone();
        let cycle = self.cycle(0);
        let enc = match format {
            Format::Warts => {
                let mut w = WartsWriter::new(sink);
                let r = w.cycle_start(&cycle).map_err(|e| e.to_string());
                self.objects_out(format, r);
                Encoder::Warts(w)
            }
            Format::Json => {
                let mut w = JsonWriter::new(sink);
                let r = w.cycle_start(&cycle).map_err(|e| e.to_string());
                self.objects_out(format, r);
                Encoder::Json(w)
            }
        };
        self.encoder = Some((format, enc));
    }

    /// The session's cycle (scamper's: list id 0, cycle id 1).
    fn cycle(&self, stop_time: u32) -> Cycle {
        Cycle {
            list_name: self.info.list_name.clone(),
            list_id: 0,
            id: 1,
            hostname: self.info.hostname.clone(),
            start_time: self.info.start_time,
            stop_time,
            vtnt: Some(self.info.vtnt.clone()),
        }
    }

    /// Accepts the command [`Session::next_command`] returned: `OK id-N`, and `MORE`
    /// while fewer than the window's commands are outstanding. Returns N.
    pub fn accept(&mut self) -> u32 {
        assert!(self.pending, "no command to accept");
        self.pending = false;
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding += 1;
        self.line_out(&format!("OK id-{id}"));
        if self.outstanding < self.info.window {
            self.line_out("MORE");
        } else {
            self.owe_more = true;
        }
        id
    }

    /// Refuses the command [`Session::next_command`] returned, saying why (scamper:
    /// `ERR command not accepted`; the reason is ours).
    pub fn refuse(&mut self, why: &str) {
        assert!(self.pending, "no command to refuse");
        self.pending = false;
        let why = why.replace(['\n', '\r'], " ");
        self.line_out(&format!("ERR command not accepted: {why}"));
    }

    /// A finished record of an accepted command, sent as `DATA`. With JSON, `ann` adds
    /// its fields (TNT's annotations); warts has no place for them.
    pub fn result(&mut self, record: &Record, ann: &dyn Annotate) {
        let Some((format, enc)) = &mut self.encoder else {
            return;
        };
        let format = *format;
        let r = match enc {
            Encoder::Warts(w) => match vtnt_formats::TntFields::from_annotate(record, ann) {
                Some(f) => w.write_annotated(record, &f),
                None => w.write(record),
            }
            .map_err(|e| e.to_string()),
            Encoder::Json(w) => w.write_annotated(record, ann).map_err(|e| e.to_string()),
        };
        self.objects_out(format, r);
    }

    /// An accepted command has ended (its records, if any, given to
    /// [`Session::result`]): a `MORE` that was held back goes out, and after `done` the
    /// last one ends the session.
    pub fn finished(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.mode == Mode::Attached && std::mem::take(&mut self.owe_more) {
            self.line_out("MORE");
        }
        self.maybe_end();
    }

    /// Commands accepted and not finished.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// Ends the session now (the daemon is stopping): an attached one gets its cycle
    /// stop.
    pub fn end(&mut self) {
        if matches!(self.mode, Mode::Attached | Mode::Done) {
            self.outstanding = 0;
            self.mode = Mode::Done;
            self.maybe_end();
        }
        self.mode = Mode::Closed;
    }

    /// After `done` with nothing outstanding: the cycle stop, then the end.
    fn maybe_end(&mut self) {
        if self.mode != Mode::Done || self.outstanding > 0 {
            return;
        }
        let stop = self.cycle(now_unix());
        if let Some((format, enc)) = &mut self.encoder {
            let format = *format;
            let r = match enc {
                Encoder::Warts(w) => w.cycle_stop(&stop).map_err(|e| e.to_string()),
                Encoder::Json(w) => w.cycle_stop(&stop).map_err(|e| e.to_string()),
            };
            self.objects_out(format, r);
        }
        self.mode = Mode::Closed;
    }

    /// The session is over: send what [`Session::take_output`] holds, then close.
    pub fn is_closed(&self) -> bool {
        self.mode == Mode::Closed
    }

    /// Whether the client has attached.
    pub fn attached(&self) -> bool {
        self.encoder.is_some()
    }

    /// What to send to the client now.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    fn line_out(&mut self, line: &str) {
        self.out.extend_from_slice(line.as_bytes());
        self.out.push(b'\n');
    }

    /// Frames what the encoder wrote into the sink as one `DATA` per object; an encoder
    /// error is reported as an `ERR` line instead (nothing half-written goes out).
    fn objects_out(&mut self, format: Format, written: Result<(), String>) {
        let bytes = std::mem::take(&mut *self.sink.0.borrow_mut());
        if let Err(e) = written {
            return self.line_out(&format!("ERR could not encode a result: {e}"));
        }
        for object in objects(format, &bytes) {
            let body = match format {
                Format::Warts => uuencode::encode(object).into_bytes(),
                Format::Json => object.to_vec(),
            };
            self.out
                .extend_from_slice(format!("DATA {}\n", body.len()).as_bytes());
            self.out.extend_from_slice(&body);
        }
    }
}

/// Splits what an encoder wrote into its objects: warts objects by their headers' length
/// (8 bytes: magic, type, body length), JSON by lines (each with its newline).
fn objects(format: Format, bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = match format {
            Format::Warts if rest.len() >= 8 => {
                let body = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
                (8 + body).min(rest.len())
            }
            Format::Warts => rest.len(),
            Format::Json => rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| i + 1),
        };
        let (object, after) = rest.split_at(len);
        out.push(object);
        rest = after;
    }
    out
}

fn now_unix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtnt_formats::{Item, NoAnnotations, WartsReader};

    fn session(window: u32) -> Session {
        Session::new(SessionInfo {
            list_name: "/run/vtnt.sock:0".into(),
            hostname: Some("vm".into()),
            start_time: 1_795_677_211,
            pps: 100,
            window,
            vtnt: "0.1.0 (commit 1a2b3c4d)".into(),
        })
    }

    /// Feeds `text`, refusing nothing: every command is accepted.
    fn say(s: &mut Session, text: &str) -> (String, Vec<Vec<String>>) {
        s.receive(text.as_bytes());
        let mut cmds = Vec::new();
        while let Some(w) = s.next_command() {
            s.accept();
            cmds.push(w);
        }
        (String::from_utf8(s.take_output()).unwrap(), cmds)
    }

    /// A ping as `vtnt ping -c 1 127.0.0.1` printed it.
    fn ping() -> Record {
        let line = r#"{"type":"ping", "version":"0.4", "method":"icmp-echo", "src":"127.0.0.1", "dst":"127.0.0.1", "start":{"sec":1795677856,"usec":456357}, "ping_sent":1, "probe_size":84, "userid":0, "ttl":64, "wait":1, "timeout":1, "responses":[{"from":"127.0.0.1", "seq":0, "reply_size":84, "reply_ttl":64, "reply_proto":"icmp", "tx":{"sec":1795677856, "usec":456729}, "rx":{"sec":1795677856, "usec":456739}, "rtt":0.010, "probe_ipid":58609, "reply_ipid":381, "icmp_type":0, "icmp_code":0}],"statistics":{"replies":1, "loss":0, "min":0.010, "max":0.010, "avg":0.010, "stddev":0.000}}"#;
        match vtnt_formats::parse_json_line(line, 1).unwrap() {
            Item::Record(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// The warts bytes of every `DATA` block in `text`, checking each length.
    fn data_blocks(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut lines = text.split_inclusive('\n');
        while let Some(l) = lines.next() {
            let Some(n) = l.strip_prefix("DATA ") else {
                continue;
            };
            let mut left: usize = n.trim().parse().unwrap();
            while left > 0 {
                let l = lines.next().expect("DATA shorter than its length");
                left -= l.len();
                let v: Vec<u8> = l.trim_end().bytes().map(|c| (c - b' ') & 0x3f).collect();
                for g in v[1..].chunks(4) {
                    out.extend([
                        (g[0] << 2) | (g[1] >> 4),
                        (g[1] << 4) | (g[2] >> 2),
                        (g[2] << 6) | g[3],
                    ]);
                }
                let keep = out.len() - v[1..].len() / 4 * 3 + usize::from(v[0]);
                out.truncate(keep);
            }
        }
        out
    }

    #[test]
    fn interactive_commands_answer_as_scamper_does() {
        let mut s = session(10);
        let (out, cmds) = say(
            &mut s,
            "get version\r\nget pps\nget window\n\nbogus 1\ndone\ntrace 192.0.2.1\nhelp\n\x01\n",
        );
        assert!(cmds.is_empty());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0], "OK version 20211212 (vtnt 0.1.0 (commit 1a2b3c4d))",
            "{out}"
        );
        assert_eq!(
            lines[1..6],
            [
                "OK pps 100",
                "OK window 0/10",
                "ERR unhandled command 'bogus'",
                "ERR unhandled command 'done'",
                "ERR unhandled command 'trace'",
            ]
        );
        assert!(lines[6].starts_with("OK commands: attach"), "{out}");
        assert_eq!(lines[7], "ERR invalid character in line");
        assert!(!s.is_closed());
        let (out, _) = say(&mut s, "exit\nget pps\n");
        assert_eq!(out, "");
        assert!(s.is_closed());
    }

    #[test]
    fn bad_attach_parameters_are_refused_like_scamper() {
        let mut s = session(10);
        let (out, _) = say(
            &mut s,
            "attach bogus 1\nattach format\nattach format text\nattach priority x\n",
        );
        assert_eq!(
            out,
            "ERR command attach param 'bogus' failed\nERR command attach param 'format' failed\n\
             ERR format must be warts or json\nERR invalid priority\n"
        );
        assert!(!s.attached());
    }

    #[test]
    fn an_attached_warts_session_streams_objects_sc_attach_can_decode() {
        let mut s = session(10);
        let (out, _) = say(&mut s, "attach priority 1\n");
        assert!(out.starts_with("OK\nMORE\nDATA "), "{out}");
        assert_eq!(
            out.matches("DATA ").count(),
            2,
            "the list and the cycle start"
        );
        let mut all = out;
        let (out, cmds) = say(&mut s, "trace -q 1 192.0.2.9\nbogus\ndone\n");
        assert_eq!(cmds, [["trace", "-q", "1", "192.0.2.9"]]);
        assert_eq!(
            out,
            "OK id-1\nMORE\nERR command not accepted: unknown command 'bogus' (trace, ping, tnt, done)\nOK\n"
        );
        assert!(!s.is_closed(), "a result is outstanding");
        s.result(&ping(), &NoAnnotations);
        s.finished();
        assert!(s.is_closed());
        let out = String::from_utf8(s.take_output()).unwrap();
        assert_eq!(
            out.matches("DATA ").count(),
            2,
            "the ping and the cycle stop"
        );
        assert!(!out.contains("MORE"), "no MORE after done");
        all.push_str(&out);
        let items: Vec<Item> = WartsReader::new(&data_blocks(&all)[..])
            .map(|i| i.unwrap())
            .collect();
        assert_eq!(items.len(), 3, "{items:?}");
        let Item::CycleStart(c) = &items[0] else {
            panic!("{items:?}")
        };
        assert_eq!((c.list_name.as_str(), c.id), ("/run/vtnt.sock:0", 1));
        assert_eq!(c.vtnt.as_deref(), Some("0.1.0 (commit 1a2b3c4d)"));
        assert_eq!(items[1], Item::Record(ping()));
        assert!(matches!(items[2], Item::CycleStop(_)));
    }

    #[test]
    fn a_full_window_holds_more_back_until_a_command_finishes() {
        let mut s = session(1);
        say(&mut s, "attach\n");
        s.receive(b"ping 192.0.2.9\nping 8.8.8.8\n");
        assert!(s.next_command().is_some());
        assert_eq!(s.accept(), 1);
        assert_eq!(s.take_output(), b"OK id-1\n");
        assert!(s.next_command().is_some());
        s.refuse("8.8.8.8 needs\n--allow-public");
        assert_eq!(
            String::from_utf8(s.take_output()).unwrap(),
            "ERR command not accepted: 8.8.8.8 needs --allow-public\n"
        );
        s.finished();
        assert_eq!(s.take_output(), b"MORE\n");
        s.end();
        let out = String::from_utf8(s.take_output()).unwrap();
        assert!(out.starts_with("DATA ") && s.is_closed(), "{out}");
    }

    #[test]
    fn json_objects_are_sent_as_lines() {
        let mut s = session(10);
        let (out, _) = say(&mut s, "attach format json\n");
        let line = r#"{"type":"cycle-start", "list_name":"/run/vtnt.sock:0", "id":1, "hostname":"vm", "start_time":1795677211, "vtnt":"0.1.0 (commit 1a2b3c4d)"}"#;
        assert_eq!(out, format!("OK\nMORE\nDATA {}\n{line}\n", line.len() + 1));
        s.end();
        let out = String::from_utf8(s.take_output()).unwrap();
        assert!(out.contains(r#"{"type":"cycle-stop""#), "{out}");
    }

    #[test]
    fn long_lines_are_refused_once_and_skipped() {
        let mut s = session(10);
        s.receive(&vec![b'a'; MAX_LINE + 10]);
        assert!(s.next_command().is_none());
        s.receive(&vec![b'a'; MAX_LINE + 10]);
        assert!(s.next_command().is_none());
        s.receive(b"aaa\nget pps\n");
        assert!(s.next_command().is_none());
        assert_eq!(
            String::from_utf8(s.take_output()).unwrap(),
            format!("ERR line longer than {MAX_LINE} bytes\nOK pps 100\n")
        );
    }
}
