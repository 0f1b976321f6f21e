//! Routing events from a real BGP speaker: what a BIRD 2 (the lab's vantage router of
//! `vtnt lab up --bgp`, or any BIRD) has learned, read on its control socket, turned into
//! typed route changes: a prefix announced, withdrawn, or its AS path or next hop
//! changed, each with the time it was seen (docs/fleet.md, "Routing events").
//!
//! Sans-IO first: [`parse_reply`] splits a reply of BIRD's socket protocol (the one
//! `birdc` speaks: `DDDD-text` lines, a line starting with a space continuing the code
//! before it, `DDDD text` ending the reply, codes 8xxx and 9xxx errors), [`parse_routes`]
//! reads `show route all`'s lines into a [`RouteTable`], [`diff`] compares two tables.
//! None of them panics on any text. Then the I/O: [`BirdSocket`] (one connection, one
//! request at a time) and [`RouteWatch`], which polls every period (at most
//! [`MAX_POLL_PERIOD`]) and keeps the last table.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime};

use crate::{Error, Result};

/// The longest period [`RouteWatch`] takes: a change is seen within it.
pub const MAX_POLL_PERIOD: Duration = Duration::from_millis(500);
/// The shortest, so that polling stays cheap for BIRD.
pub const MIN_POLL_PERIOD: Duration = Duration::from_millis(10);
/// How long a request may wait for BIRD's reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes of one reply read (a full Internet table is about 100 MiB of
/// `show route all`; the lab's is a few KiB).
const MAX_REPLY_BYTES: usize = 256 << 20;

/// An IPv4 or IPv6 prefix as BIRD prints it (`203.0.113.0/29`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoutePrefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl FromStr for RoutePrefix {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<RoutePrefix, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}` is not a prefix (no `/`)"))?;
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{s}`: `{a}` is not an address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = l
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("`{s}`: `{l}` is not a length of 0..={max}"))?;
        Ok(RoutePrefix { addr, len })
    }
}

impl fmt::Display for RoutePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The best route BIRD has for one prefix: what a change of it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub prefix: RoutePrefix,
    /// The protocol it came from (the BGP session's name).
    pub protocol: String,
    /// `BGP.as_path`, nearest AS first (an AS set's members in order); empty for a route
    /// that is not BGP's.
    pub as_path: Vec<u32>,
    /// `BGP.next_hop`, else the `via` gateway; `None` for a route without one.
    pub next_hop: Option<IpAddr>,
}

/// Every prefix's best route.
pub type RouteTable = BTreeMap<RoutePrefix, Route>;

/// What changed for one prefix between two tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteChange {
    /// A prefix that had no route has one.
    Announced { route: Route },
    /// A prefix has no route any more; its last one.
    Withdrawn { last: Route },
    /// A prefix's AS path or next hop changed.
    Changed { before: Route, after: Route },
}

impl RouteChange {
    pub fn prefix(&self) -> RoutePrefix {
        match self {
            RouteChange::Announced { route } => route.prefix,
            RouteChange::Withdrawn { last } => last.prefix,
            RouteChange::Changed { after, .. } => after.prefix,
        }
    }
}

/// A change and when it was seen (the poll that saw it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEvent {
    pub seen: SystemTime,
    pub change: RouteChange,
}

/// What BIRD's output could not be read as, or BIRD's own error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A reply without its final line (`DDDD text`).
    #[error("the reply ends without its final line")]
    Unfinished,
    /// A line that is neither `DDDD-text`, `DDDD text` nor ` text`.
    #[error("line {line}: `{text}` is not a line of BIRD's socket protocol")]
    BadLine { line: usize, text: String },
    /// BIRD answered with an error (codes 8000 and up).
    #[error("BIRD answered {code}: {message}")]
    Bird { code: u16, message: String },
    /// A line of `show route all` that does not read as a route or one of its
    /// attributes.
    #[error("line {line}: {why}: `{text}`")]
    BadRoute {
        line: usize,
        text: String,
        why: String,
    },
}

/// One reply: its lines with their codes, the final line's code and text last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub lines: Vec<(u16, String)>,
}

/// Whether `line` ends a reply (`DDDD` then a space, or `DDDD` alone).
fn is_final(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() >= 4 && b[..4].iter().all(u8::is_ascii_digit) && (b.len() == 4 || b[4] == b' ')
}

/// Splits one reply of BIRD's socket protocol (after the greeting) into coded lines;
/// a final code of 8000 and up is BIRD's error.
pub fn parse_reply(text: &str) -> std::result::Result<Reply, ParseError> {
    let mut lines = Vec::new();
    let mut code: Option<u16> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let bad = || ParseError::BadLine {
            line: n,
            text: line.chars().take(200).collect(),
        };
        let b = line.as_bytes();
        if let Some(rest) = line.strip_prefix(' ') {
            let c = code.ok_or_else(bad)?;
            lines.push((c, rest.to_string()));
            continue;
        }
        if b.len() < 4 || !b[..4].iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        let c: u16 = line[..4].parse().map_err(|_| bad())?;
        let rest = line.get(5..).unwrap_or("").to_string();
        match b.get(4) {
            Some(b'-') => {
                code = Some(c);
                lines.push((c, rest));
            }
            Some(b' ') | None => {
                if c >= 8000 {
                    return Err(ParseError::Bird {
                        code: c,
                        message: rest.trim().to_string(),
                    });
                }
                lines.push((c, rest));
                return Ok(Reply { lines });
            }
            Some(_) => return Err(bad()),
        }
    }
    Err(ParseError::Unfinished)
}

/// The routes of a `show route all` reply, the best one per prefix (marked `*`, else
/// the first listed).
pub fn parse_routes(reply: &Reply) -> std::result::Result<RouteTable, ParseError> {
    let mut table = RouteTable::new();
    // the route being read: whether it is the best, the route
    let mut current: Option<(bool, Route)> = None;
    let mut last_prefix: Option<RoutePrefix> = None;
    for (i, (_, text)) in reply.lines.iter().enumerate() {
        let n = i + 1;
        let bad = |why: &str| ParseError::BadRoute {
            line: n,
            text: text.chars().take(200).collect(),
            why: why.to_string(),
        };
        if text.is_empty() || (text.starts_with("Table ") && text.ends_with(':')) {
            continue;
        }
        if let Some(attr) = text.strip_prefix('\t') {
            let Some((_, route)) = current.as_mut() else {
                return Err(bad("an attribute before any route"));
            };
            if let Some(v) = attr.strip_prefix("BGP.as_path:") {
                route.as_path = v
                    .split_whitespace()
                    .map(|t| t.trim_matches(|c| c == '{' || c == '}'))
                    .filter(|t| !t.is_empty())
                    .map(|t| {
                        t.parse::<u32>()
                            .map_err(|_| bad("an AS number that is not one"))
                    })
                    .collect::<std::result::Result<_, _>>()?;
            } else if let Some(v) = attr.strip_prefix("BGP.next_hop:") {
                // `BGP.next_hop: 2001:db8::1 fe80::1`: the global address first
                let a = v.split_whitespace().next().unwrap_or("");
                route.next_hop = Some(
                    a.parse()
                        .map_err(|_| bad("a next hop that is not an address"))?,
                );
            } else if let Some(v) = attr.strip_prefix("via ") {
                if route.next_hop.is_none() {
                    let a = v.split_whitespace().next().unwrap_or("");
                    route.next_hop = Some(
                        a.parse()
                            .map_err(|_| bad("a gateway that is not an address"))?,
                    );
                }
            }
            continue;
        }
        // a route: `NET  TYPE [PROTO TIME ...] * (PREF) [ASn i]`, NET left blank for the
        // prefix's second and later routes
        keep(&mut table, current.take());
        let mut words = text.split_whitespace().peekable();
        let prefix = if text.starts_with(' ') {
            last_prefix.ok_or_else(|| bad("a route without its network"))?
        } else {
            let w = words.next().unwrap_or("");
            w.parse::<RoutePrefix>().map_err(|e| bad(&e))?
        };
        let _kind = words.next().ok_or_else(|| bad("no route type"))?;
        let protocol = words
            .next()
            .and_then(|w| w.strip_prefix('['))
            .filter(|w| !w.is_empty())
            .ok_or_else(|| bad("no `[protocol` after the route type"))?
            .to_string();
        let rest: Vec<&str> = words.collect();
        let close = rest
            .iter()
            .position(|w| w.ends_with(']'))
            .ok_or_else(|| bad("no `]` closing the protocol's bracket"))?;
        let best = rest.get(close + 1) == Some(&"*");
        last_prefix = Some(prefix);
        current = Some((
            best,
            Route {
                prefix,
                protocol,
                as_path: Vec::new(),
                next_hop: None,
            },
        ));
    }
    keep(&mut table, current);
    Ok(table)
}

/// Puts the route just read in `table` if it is the best or the prefix's first.
fn keep(table: &mut RouteTable, read: Option<(bool, Route)>) {
    if let Some((best, route)) = read {
        if best || !table.contains_key(&route.prefix) {
            table.insert(route.prefix, route);
        }
    }
}

/// What changed from `before` to `after`, in prefix order, all seen at `seen`. A route
/// whose protocol alone changed is not a change.
pub fn diff(before: &RouteTable, after: &RouteTable, seen: SystemTime) -> Vec<RouteEvent> {
    let mut out = Vec::new();
    let event = |change| RouteEvent { seen, change };
    for (p, old) in before {
        match after.get(p) {
            None => out.push(event(RouteChange::Withdrawn { last: old.clone() })),
            Some(new) if new.as_path != old.as_path || new.next_hop != old.next_hop => {
                out.push(event(RouteChange::Changed {
                    before: old.clone(),
                    after: new.clone(),
                }))
            }
            Some(_) => {}
        }
    }
    for (p, new) in after {
        if !before.contains_key(p) {
            out.push(event(RouteChange::Announced { route: new.clone() }));
        }
    }
    out.sort_by_key(|e| e.change.prefix());
    out
}

/// One connection to a BIRD's control socket.
pub struct BirdSocket {
    path: PathBuf,
    reader: BufReader<UnixStream>,
}

impl BirdSocket {
    /// Connects and reads BIRD's greeting (`0001 BIRD 2.0.12 ready.`).
    pub fn connect(path: &Path) -> Result<BirdSocket> {
        let io = |what: &str, source| Error::Io {
            what: format!("{what} BIRD's control socket {}", path.display()),
            source,
        };
        let stream = UnixStream::connect(path).map_err(|e| io("connecting to", e))?;
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| io("setting a timeout on", e))?;
        let mut s = BirdSocket {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
        };
        let greeting = s.read_reply()?;
        parse_reply(&greeting).map_err(|e| s.invalid("its greeting", &e))?;
        Ok(s)
    }

    fn invalid(&self, what: &str, e: &ParseError) -> Error {
        Error::Invalid(format!(
            "BIRD's control socket {}: {what}: {e}",
            self.path.display()
        ))
    }

    /// Reads lines up to a reply's final one (bounded in size and time).
    fn read_reply(&mut self) -> Result<String> {
        let mut text = String::new();
        loop {
            let start = text.len();
            let n = self
                .reader
                .read_line(&mut text)
                .map_err(|source| Error::Io {
                    what: format!("reading BIRD's control socket {}", self.path.display()),
                    source,
                })?;
            if n == 0 {
                return Err(Error::Invalid(format!(
                    "BIRD's control socket {}: closed in the middle of a reply",
                    self.path.display()
                )));
            }
            if is_final(text[start..].trim_end_matches('\n')) {
                return Ok(text);
            }
            if text.len() > MAX_REPLY_BYTES {
                return Err(Error::Invalid(format!(
                    "BIRD's control socket {}: a reply longer than {MAX_REPLY_BYTES} bytes",
                    self.path.display()
                )));
            }
        }
    }

    /// Sends one command (`show route all`) and reads its reply; BIRD's error is an
    /// error naming the command.
    pub fn request(&mut self, command: &str) -> Result<Reply> {
        self.reader
            .get_mut()
            .write_all(format!("{command}\n").as_bytes())
            .map_err(|source| Error::Io {
                what: format!("writing to BIRD's control socket {}", self.path.display()),
                source,
            })?;
        let text = self.read_reply()?;
        parse_reply(&text).map_err(|e| self.invalid(&format!("`{command}`"), &e))
    }

    /// Every prefix's best route now.
    pub fn routes(&mut self) -> Result<RouteTable> {
        let reply = self.request("show route all")?;
        parse_routes(&reply).map_err(|e| self.invalid("`show route all`", &e))
    }
}

/// Polls a BIRD's routes and reports what changed since the last poll (the first poll
/// reports every route as announced). A connection that breaks is made again at the
/// next poll.
pub struct RouteWatch {
    path: PathBuf,
    period: Duration,
    socket: Option<BirdSocket>,
    table: RouteTable,
}

impl RouteWatch {
    /// A watch of the BIRD at `socket` (nothing is read yet), polled every `period`
    /// ([`MIN_POLL_PERIOD`]..=[`MAX_POLL_PERIOD`]).
    pub fn new(socket: &Path, period: Duration) -> Result<RouteWatch> {
        if !(MIN_POLL_PERIOD..=MAX_POLL_PERIOD).contains(&period) {
            return Err(Error::Invalid(format!(
                "a routing event poll period of {period:?}: use {MIN_POLL_PERIOD:?} to {MAX_POLL_PERIOD:?}"
            )));
        }
        Ok(RouteWatch {
            path: socket.to_path_buf(),
            period,
            socket: None,
            table: RouteTable::new(),
        })
    }

    /// The table as of the last poll.
    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    /// Reads the routes once: what changed since the last poll.
    pub fn poll(&mut self) -> Result<Vec<RouteEvent>> {
        let socket = match self.socket.as_mut() {
            Some(s) => s,
            None => self.socket.insert(BirdSocket::connect(&self.path)?),
        };
        let table = socket.routes();
        let seen = SystemTime::now();
        let table = table.inspect_err(|_| self.socket = None)?;
        let events = diff(&self.table, &table, seen);
        self.table = table;
        Ok(events)
    }

    /// Polls every period until something changes or `within` has passed (then the
    /// answer is empty).
    pub fn next_events(&mut self, within: Duration) -> Result<Vec<RouteEvent>> {
        let deadline = Instant::now() + within;
        loop {
            let started = Instant::now();
            let events = self.poll()?;
            if !events.is_empty() || started >= deadline {
                return Ok(events);
            }
            let next = (started + self.period).min(deadline);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/bird")
            .join(name);
        std::fs::read_to_string(&p).unwrap()
    }

    fn table(name: &str) -> RouteTable {
        parse_routes(&parse_reply(&fixture(name)).unwrap()).unwrap()
    }

    fn p(s: &str) -> RoutePrefix {
        s.parse().unwrap()
    }

    #[test]
    fn show_route_all_reads_prefixes_paths_and_next_hops() {
        let t = table("show-route-all-two.txt");
        assert_eq!(
            t.keys().map(|k| k.to_string()).collect::<Vec<_>>(),
            ["198.51.100.0/29", "203.0.113.0/29"]
        );
        let r = &t[&p("203.0.113.0/29")];
        assert_eq!(r.protocol, "lab");
        assert_eq!(r.as_path, [64500]);
        assert_eq!(r.next_hop, Some("169.254.179.1".parse().unwrap()));
        let c = table("show-route-all-changed.txt");
        assert_eq!(c[&p("198.51.100.0/29")].as_path, [64500, 64510]);
        assert_eq!(
            c[&p("203.0.113.0/29")].next_hop,
            Some("169.254.179.3".parse().unwrap())
        );
        assert!(table("show-route-all-empty.txt").is_empty());
    }

    #[test]
    fn changes_are_typed_withdrawn_announced_and_changed() {
        let at = SystemTime::UNIX_EPOCH;
        let two = table("show-route-all-two.txt");
        let one = table("show-route-all-one.txt");
        let gone = diff(&two, &one, at);
        assert_eq!(gone.len(), 1);
        assert!(
            matches!(&gone[0].change, RouteChange::Withdrawn { last } if last.prefix == p("203.0.113.0/29"))
        );
        let back = diff(&one, &two, at);
        assert!(
            matches!(&back[..], [RouteEvent { change: RouteChange::Announced { route }, .. }] if route.prefix == p("203.0.113.0/29"))
        );
        let changed = diff(&two, &table("show-route-all-changed.txt"), at);
        assert_eq!(changed.len(), 2);
        for e in &changed {
            let RouteChange::Changed { before, after } = &e.change else {
                panic!("{e:?}")
            };
            assert!(before.as_path != after.as_path || before.next_hop != after.next_hop);
        }
        assert!(diff(&two, &two, at).is_empty());
        assert_eq!(diff(&RouteTable::new(), &two, at).len(), 2);
    }

    #[test]
    fn bird_errors_and_broken_replies_are_named() {
        assert_eq!(
            parse_reply(&fixture("not-found.txt")),
            Err(ParseError::Bird {
                code: 8001,
                message: "Network not found".into()
            })
        );
        assert!(matches!(
            parse_reply(&fixture("syntax-error.txt")),
            Err(ParseError::Bird { code: 9001, .. })
        ));
        let two = fixture("show-route-all-two.txt");
        assert_eq!(
            parse_reply(two.trim_end().trim_end_matches("0000")),
            Err(ParseError::Unfinished)
        );
        assert!(matches!(
            parse_reply("hello\n0000 \n"),
            Err(ParseError::BadLine { line: 1, .. })
        ));
        let bad = two.replace("198.51.100.0/29", "198.51.100.0/33");
        let e = parse_routes(&parse_reply(&bad).unwrap()).unwrap_err();
        assert!(e.to_string().contains("not a length"), "{e}");
        let bad = two.replace("BGP.as_path: 64500", "BGP.as_path: 64500 AS9");
        let e = parse_routes(&parse_reply(&bad).unwrap()).unwrap_err();
        assert!(e.to_string().contains("AS number"), "{e}");
    }

    #[test]
    fn a_second_route_of_a_prefix_counts_only_when_it_is_the_best() {
        // BIRD leaves the network blank on a prefix's later routes
        let text = "1007-Table master4:\n 203.0.113.0/29       unicast [a 00:00:01] (100) [AS64499i]\n \tvia 10.0.0.9 on e0\n1012-\tBGP.as_path: 64499\n1007-                     unicast [b 00:00:02] * (100) [AS64500i]\n \tvia 10.0.0.1 on e1\n1012-\tBGP.as_path: 64500 64501\n0000 \n";
        let t = parse_routes(&parse_reply(text).unwrap()).unwrap();
        let r = &t[&p("203.0.113.0/29")];
        assert_eq!(
            (r.protocol.as_str(), &r.as_path[..]),
            ("b", &[64500, 64501][..])
        );
        assert_eq!(r.next_hop, Some("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn the_poll_period_is_bounded() {
        let s = Path::new("/nonexistent/bird.ctl");
        assert!(RouteWatch::new(s, Duration::from_secs(1)).is_err());
        assert!(RouteWatch::new(s, Duration::from_millis(1)).is_err());
        let mut w = RouteWatch::new(s, MAX_POLL_PERIOD).unwrap();
        let e = w.poll().unwrap_err().to_string();
        assert!(e.contains("/nonexistent/bird.ctl"), "{e}");
    }

    /// Arbitrary text (the fixtures mutated, and noise) never makes the parsers panic.
    #[test]
    fn no_text_makes_the_parsers_panic() {
        let seeds: Vec<String> = [
            "show-route-all-two.txt",
            "show-route-all-changed.txt",
            "show-route-all-empty.txt",
            "not-found.txt",
        ]
        .iter()
        .map(|f| fixture(f))
        .collect();
        let alphabet: Vec<char> = "0123456789 -\t\n/:.*[](){}ASviaTableBGP.as_path:next_hop\u{e9}"
            .chars()
            .collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n.max(1) as u64) as usize
        };
        for i in 0..100_000 {
            let mut text: Vec<char> = if i % 10 == 0 {
                Vec::new()
            } else {
                seeds[rand(seeds.len())].chars().collect()
            };
            for _ in 0..1 + rand(8) {
                match rand(4) {
                    0 if !text.is_empty() => {
                        let at = rand(text.len());
                        text.remove(at);
                    }
                    1 if !text.is_empty() => {
                        let at = rand(text.len());
                        text[at] = alphabet[rand(alphabet.len())];
                    }
                    2 if !text.is_empty() => {
                        let at = rand(text.len());
                        text.truncate(at);
                    }
                    _ => {
                        let at = rand(text.len() + 1);
                        for _ in 0..rand(12) {
                            text.insert(at, alphabet[rand(alphabet.len())]);
                        }
                    }
                }
            }
            let text: String = text.into_iter().collect();
            if let Ok(reply) = parse_reply(&text) {
                let _ = parse_routes(&reply);
            }
        }
    }
}
