//! Changes to a running lab (`vtnt lab change`): the daemon's control socket, the
//! client that sends it one change and waits until it is applied, and the changes log.
//!
//! The socket is `control` in the lab's state directory, a Unix stream socket only root
//! may connect to (mode 0600, in root's directory). A client sends one change as a line
//! of text ([`vtnt_lab::Change`], at most [`MAX_CHANGE_BYTES`]); the daemon reads it
//! between packets (for at most [`READ_TIMEOUT`], one client at a time), applies it,
//! appends it to the log and answers one line: `ok {record as JSON}` once the lab runs
//! the changed network, or `error: why` with nothing changed.
//!
//! The log, `changes.jsonl` in the state directory, has one JSON object per applied
//! change, appended in order ([`ChangeRecord`]):
//! `{"seq":1,"unix_us":1796000000123456,"change":"link-down r2 r3","lsps_down":[]}`.
//! It starts empty with the daemon; an event source can read it or watch it grow. The
//! running topology ([`crate::running_topology`], `vtnt lab truth --name`) is the
//! topology file with the log's changes applied in order.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use vtnt_lab::{Change, Lab, Topology, MAX_CHANGE_BYTES};

use crate::state::{check_name, state_dir};
use crate::Error;

/// The control socket's name in the state directory.
pub const CONTROL_SOCKET: &str = "control";
/// The changes log's name in the state directory.
pub const CHANGES_LOG: &str = "changes.jsonl";
/// How long the daemon waits for a connected client's change (and to send the answer):
/// the packets wait as long at most.
pub const READ_TIMEOUT: Duration = Duration::from_millis(200);
/// How long a client waits for the daemon's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes of an answer a client reads.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// One applied change, a line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRecord {
    /// 1 for the lab's first change, then one more for each.
    pub seq: u64,
    /// When the daemon applied it, microseconds since the UNIX epoch.
    pub unix_us: u64,
    /// The change as `vtnt lab change` takes it.
    pub change: String,
    /// Every LSP of the topology down once it applied, by name.
    pub lsps_down: Vec<String>,
}

/// The daemon's end: the listening socket, the log, the sequence number.
pub struct Control {
    listener: UnixListener,
    log: PathBuf,
    seq: u64,
}

impl Control {
    /// Binds `control` in `dir` (root only) and starts an empty log.
    pub fn bind(dir: &Path) -> Result<Control, Error> {
        let path = dir.join(CONTROL_SOCKET);
        let _ = fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .map_err(|e| Error::msg(format!("control socket {}: {e}", path.display())))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let log = dir.join(CHANGES_LOG);
        fs::write(&log, "")?;
        Ok(Control {
            listener,
            log,
            seq: 0,
        })
    }

    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.listener)
    }

    /// Serves every client waiting: reads its change, applies it to `lab`, logs it and
    /// answers. A client that sends nothing in time or hangs up is dropped. Whether a
    /// change was applied.
    pub fn serve(&mut self, lab: &mut Lab) -> bool {
        let mut applied = false;
        while let Ok((stream, _)) = self.listener.accept() {
            let answer = match read_change(&stream) {
                Ok(c) => match lab.apply(&c) {
                    Ok(()) => {
                        applied = true;
                        self.log(lab, &c)
                    }
                    Err(e) => {
                        tracing::info!(change = %c, error = %e, "change refused");
                        format!("error: {e}")
                    }
                },
                Err(e) => format!("error: {e}"),
            };
            let mut stream = stream;
            let _ = stream.write_all(format!("{answer}\n").as_bytes());
        }
        applied
    }

    /// Logs `c`, which `lab` has applied: the answer line.
    fn log(&mut self, lab: &Lab, c: &Change) -> String {
        self.seq += 1;
        let record = ChangeRecord {
            seq: self.seq,
            unix_us: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
            change: c.to_string(),
            lsps_down: lab
                .topology()
                .lsps_down()
                .iter()
                .map(|l| l.name.clone())
                .collect(),
        };
        let line = serde_json::to_string(&record).unwrap_or_default();
        let logged = fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        match logged {
            Ok(()) => {
                tracing::info!(seq = record.seq, change = %c, "change applied");
                format!("ok {line}")
            }
            Err(e) => {
                tracing::error!(change = %c, error = %e, "change applied but not logged");
                format!(
                    "error: the change was applied but {} could not be written: {e}",
                    self.log.display()
                )
            }
        }
    }
}

/// One change line from a client, within [`READ_TIMEOUT`] and [`MAX_CHANGE_BYTES`].
fn read_change(stream: &UnixStream) -> Result<Change, String> {
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(READ_TIMEOUT)))
        .and_then(|()| stream.set_write_timeout(Some(READ_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    BufReader::new(stream.take(MAX_CHANGE_BYTES as u64 + 1))
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("reading the change: {e}"))?;
    if line.len() > MAX_CHANGE_BYTES {
        return Err(format!("a change is at most {MAX_CHANGE_BYTES} bytes"));
    }
    let text = std::str::from_utf8(&line).map_err(|_| "the change is not UTF-8".to_string())?;
    text.parse()
        .map_err(|e: vtnt_lab::ChangeError| e.to_string())
}

/// Sends `change` to lab `name`'s daemon and waits until it is applied: its log record,
/// or the daemon's reason for refusing it.
pub fn change(name: &str, change: &Change) -> Result<ChangeRecord, Error> {
    check_name(name).map_err(Error::msg)?;
    let path = state_dir(name).join(CONTROL_SOCKET);
    let mut s = UnixStream::connect(&path).map_err(|e| {
        Error::msg(format!(
            "lab `{name}` takes no changes ({}: {e}); is it running (`vtnt lab up --name {name}`) and are you root?",
            path.display()
        ))
    })?;
    s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    s.set_write_timeout(Some(ANSWER_TIMEOUT))?;
    s.write_all(format!("{change}\n").as_bytes())?;
    let mut answer = String::new();
    BufReader::new(s.take(MAX_ANSWER_BYTES))
        .read_line(&mut answer)
        .map_err(|e| Error::msg(format!("lab `{name}` did not answer the change: {e}")))?;
    let answer = answer.trim_end();
    if let Some(record) = answer.strip_prefix("ok ") {
        return serde_json::from_str(record)
            .map_err(|e| Error::msg(format!("lab `{name}`: a bad answer ({e}): {record}")));
    }
    match answer.strip_prefix("error: ") {
        Some(why) => Err(Error::msg(format!(
            "lab `{name}` refused `{change}`: {why}"
        ))),
        None if answer.is_empty() => Err(Error::msg(format!(
            "lab `{name}` closed the control socket without answering"
        ))),
        None => Err(Error::msg(format!("lab `{name}`: a bad answer: {answer}"))),
    }
}

/// The changes applied to lab `name` so far, in order (its log).
pub fn log(name: &str) -> Result<Vec<ChangeRecord>, Error> {
    check_name(name).map_err(Error::msg)?;
    read_log(&state_dir(name).join(CHANGES_LOG))
}

/// The records of the log at `path` (none when it does not exist: a lab started before
/// changes were).
pub(crate) fn read_log(path: &Path) -> Result<Vec<ChangeRecord>, Error> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| Error::msg(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// `topo` with the log's changes applied in order.
pub(crate) fn replay(
    mut topo: Topology,
    log: &[ChangeRecord],
    path: &Path,
) -> Result<Topology, Error> {
    for r in log {
        let at = |e: vtnt_lab::ChangeError| {
            Error::msg(format!(
                "{}: change {} `{}`: {e}",
                path.display(),
                r.seq,
                r.change
            ))
        };
        let c: Change = r.change.parse().map_err(at)?;
        topo = topo.apply(&c).map_err(at)?;
    }
    Ok(topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vtnt-changes-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A client's line through a real socket to a daemon end serving a lab.
    fn send(dir: &Path, control: &mut Control, lab: &mut Lab, text: &[u8]) -> String {
        let mut s = UnixStream::connect(dir.join(CONTROL_SOCKET)).unwrap();
        s.write_all(text).unwrap();
        control.serve(lab);
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn the_socket_applies_logs_and_refuses_with_reasons() {
        let dir = tmp("socket");
        let mut control = Control::bind(&dir).unwrap();
        let mode = fs::metadata(dir.join(CONTROL_SOCKET))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut lab = Lab::new(Topology::reference());
        let a = send(&dir, &mut control, &mut lab, b"link-down e2 e3\n");
        assert!(a.starts_with("ok {\"seq\":1,"), "{a}");
        assert!(a.contains("\"lsps_down\":[\"explicit\"]"), "{a}");
        let a = send(&dir, &mut control, &mut lab, b"link-down e2 nowhere\n");
        assert_eq!(a, "error: no router is named \"nowhere\"\n");
        let a = send(&dir, &mut control, &mut lab, b"reboot everything\n");
        assert!(a.starts_with("error: bad change"), "{a}");
        // (one byte past the limit: all of it read, so the answer is not lost to a reset)
        let long = vec![b'x'; MAX_CHANGE_BYTES + 1];
        let a = send(&dir, &mut control, &mut lab, &long);
        assert!(a.starts_with("error: a change is at most"), "{a}");
        let a = send(&dir, &mut control, &mut lab, b"link-up e3 e2\n");
        assert!(a.starts_with("ok {\"seq\":2,"), "{a}");

        let log = read_log(&dir.join(CHANGES_LOG)).unwrap();
        let changes: Vec<&str> = log.iter().map(|r| r.change.as_str()).collect();
        assert_eq!(changes, ["link-down e2 e3", "link-up e3 e2"]);
        assert_eq!(log[0].lsps_down, ["explicit"]);
        assert!(log[1].unix_us >= log[0].unix_us);
        let replayed = replay(Topology::reference(), &log[..1], &dir).unwrap();
        assert_eq!(replayed.links_down().len(), 1);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_silent_client_does_not_hold_the_daemon() {
        let dir = tmp("silent");
        let mut control = Control::bind(&dir).unwrap();
        let mut lab = Lab::new(Topology::reference());
        let s = UnixStream::connect(dir.join(CONTROL_SOCKET)).unwrap();
        let t = std::time::Instant::now();
        control.serve(&mut lab);
        assert!(t.elapsed() < READ_TIMEOUT * 3);
        drop(s);
        assert!(read_log(&dir.join(CHANGES_LOG)).unwrap().is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
