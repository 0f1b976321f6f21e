//! Targets from the command line and from target files: what counts as an address or a
//! host name, name resolution (in parallel, each name with a deadline), and the probing
//! policy (`vtnt-policy`) applied to every target before any probe.

use std::fmt;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use vtnt_engine::Policy;
use vtnt_linux::RouteSources;

use crate::lookup::Lookups;
use crate::Error;

/// Host names resolved at once.
const RESOLVERS: usize = 64;
/// Every lookup must have answered this long after the first started; the rest are given
/// up (their threads left behind), so a list of unresolvable names delays probing by this
/// much at most, not by the resolver's timeout per name.
const LOOKUP_DEADLINE: Duration = Duration::from_secs(10);
/// Characters of a bad target shown in a message (a 10 MB line is not echoed whole).
const SHOWN: usize = 60;

/// A target that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTarget {
    /// `FILE:LINE` for target files, `argument N` on the command line.
    pub place: String,
    pub text: String,
    pub reason: String,
}

impl fmt::Display for BadTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: String = self.text.chars().take(SHOWN).collect();
        let more = if shown.len() < self.text.len() {
            "…"
        } else {
            ""
        };
        write!(
            f,
            "{}: target `{}{more}`: {}",
            self.place,
            shown.escape_debug(),
            self.reason
        )
    }
}

/// What a target's text is, before any lookup.
enum Text {
    Addr(IpAddr),
    Name,
}

/// Sorts `text` into an address, a host name worth asking DNS about, or an error: text
/// that only looks like a mistyped address or prefix never reaches DNS.
fn classify(text: &str) -> Result<Text, String> {
    if let Ok(a) = text.parse::<IpAddr>() {
        return Ok(Text::Addr(a));
    }
    if text.contains('/') {
        return Err("a prefix is not a target: give addresses".into());
    }
    if text.contains(':') || text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err("not a valid IP address".into());
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let name = text.strip_suffix('.').unwrap_or(text);
    if name.len() <= 253 && name.split('.').all(label_ok) {
        Ok(Text::Name)
    } else {
        Err("not an address or host name".into())
    }
}

/// Looks up `names` with [`RESOLVERS`] threads; a name still unanswered at
/// [`LOOKUP_DEADLINE`] is reported as timed out.
fn resolve_all(names: Vec<String>) -> Vec<Result<IpAddr, String>> {
    let n = names.len();
    if n == 0 {
        return Vec::new();
    }
    if n > RESOLVERS {
        crate::say!(
            "vtnt: resolving {n} host names (at most {} s)",
            LOOKUP_DEADLINE.as_secs()
        );
    }
    let deadline = std::time::Instant::now() + LOOKUP_DEADLINE;
    let pool = Lookups::new(RESOLVERS.min(n), |(_, name): &(usize, String)| lookup(name));
    for job in names.into_iter().enumerate() {
        pool.ask(job);
    }
    let mut out: Vec<Option<Result<IpAddr, String>>> = vec![None; n];
    for _ in 0..n {
        let Some(((i, _), r)) = pool.answer_by(deadline) else {
            break;
        };
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err("host name lookup timed out".into())))
        .collect()
}

fn lookup(name: &str) -> Result<IpAddr, String> {
    (name, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host name ({e})"))?
        .find(|a| a.is_ipv4())
        .map(|a| a.ip())
        .ok_or_else(|| "host name has no IPv4 address".to_string())
}

/// The `(place, text)` of every non-empty line of a target file (`#` starts a comment).
/// Lines that are not UTF-8 come back with a `None` text.
fn file_lines(path: &Path) -> crate::Result<Vec<(String, Option<String>)>> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::io(format!("reading target file {}", path.display()), e))?;
    let mut out = Vec::new();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let place = format!("{}:{}", path.display(), n + 1);
        match std::str::from_utf8(line) {
            Ok(l) => {
                let t = l.split('#').next().unwrap_or("").trim();
                if !t.is_empty() {
                    out.push((place, Some(t.to_string())));
                }
            }
            Err(_) => out.push((place, None)),
        }
    }
    Ok(out)
}

/// Resolves every target of the command line and of the target file and checks each
/// against `policy` for a run at `pps` and, with `routes`, that the kernel gives it a
/// source address (a route, and not a broadcast one). Good targets come back in order;
/// bad ones are listed with their place so the caller can report them and probe the rest.
pub fn collect(
    args: &[String],
    file: Option<&Path>,
    policy: &Policy,
    pps: u32,
    mut routes: Option<&mut RouteSources>,
) -> crate::Result<(Vec<IpAddr>, Vec<BadTarget>)> {
    let mut items: Vec<(String, Option<String>)> = args
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("argument {}", i + 1), Some(a.clone())))
        .collect();
    if let Some(path) = file {
        items.extend(file_lines(path)?);
    }
    let mut results: Vec<Option<Result<IpAddr, String>>> = Vec::with_capacity(items.len());
    let mut names = Vec::new();
    for (_, text) in &items {
        results.push(match text.as_deref().map(classify) {
            None => Some(Err("the line is not UTF-8 text".into())),
            Some(Ok(Text::Addr(a))) => Some(Ok(a)),
            Some(Ok(Text::Name)) => {
                names.push(text.clone().unwrap_or_default());
                None
            }
            Some(Err(e)) => Some(Err(e)),
        });
    }
    let mut resolved = resolve_all(names).into_iter();
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for ((place, text), r) in items.into_iter().zip(results) {
        let r = r.unwrap_or_else(|| {
            resolved
                .next()
                .unwrap_or_else(|| Err("not resolved".into()))
        });
        let routed = |a: IpAddr, routes: Option<&mut RouteSources>| match (a, routes) {
            (a, Some(r)) => r.source(a).map(|_| a).map_err(|e| e.0.to_string()),
            (a, None) => Ok(a),
        };
        match r.and_then(|a| {
            policy
                .check_target(a, pps)
                .map_err(|e| e.to_string())
                .and_then(|()| routed(a, routes.as_deref_mut()))
        }) {
            Ok(a) => good.push(a),
            Err(reason) => bad.push(BadTarget {
                place,
                text: text.unwrap_or_default(),
                reason,
            }),
        }
    }
    Ok((good, bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str, body: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("vtnt-targets-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("t.txt");
        std::fs::write(&f, body).unwrap();
        f
    }

    #[test]
    fn bad_lines_are_reported_with_their_line_and_the_rest_kept() {
        let f = tmp(
            "lines",
            b"192.0.2.1\n\n# comment\nnot a host!\n8.8.8.8\n203.0.113.7 # x\n",
        );
        let p = Policy::default();
        let (good, bad) = collect(&["198.51.100.3".into()], Some(&f), &p, 20, None).unwrap();
        assert_eq!(good.len(), 3);
        assert_eq!(bad.len(), 2);
        assert!(bad[0].place.ends_with("t.txt:4"), "{}", bad[0]);
        assert!(bad[1].reason.contains("--allow-public"), "{}", bad[1]);
        let public = Policy {
            allow_public: true,
            ..Policy::default()
        };
        let (good, bad) = collect(&["8.8.8.8".into()], None, &public, 20, None).unwrap();
        assert_eq!((good.len(), bad.len()), (1, 0));
        std::fs::remove_dir_all(f.parent().unwrap()).unwrap();
    }

    #[test]
    fn mistyped_addresses_and_prefixes_never_reach_dns() {
        for t in [
            "300.1.2.3",
            "203.0.113.0/24",
            "1.2.3",
            "1::2::3",
            "a b",
            "-x.example",
            "x..y",
        ] {
            assert!(classify(t).is_err(), "{t}");
        }
        assert!(matches!(classify("example.org"), Ok(Text::Name)));
        assert!(matches!(classify("localhost"), Ok(Text::Name)));
        let long = "a".repeat(10 << 20);
        assert!(classify(&long).is_err());
    }

    #[test]
    fn hostile_files_give_one_clear_line_each() {
        let mut body = b"203.0.113.1\n\x00\x01\n\xff\xfe\n".to_vec();
        body.extend(std::iter::repeat_n(b'9', 10 << 20));
        body.extend(b"\n203.0.113.2\r\n");
        let f = tmp("hostile", &body);
        let (good, bad) = collect(&[], Some(&f), &Policy::default(), 20, None).unwrap();
        assert_eq!(good.len(), 2, "{bad:?}");
        assert_eq!(bad.len(), 3);
        assert!(bad[1].reason.contains("UTF-8"));
        let shown = bad[2].to_string();
        assert!(shown.len() < 200, "a 10 MB line is not echoed whole");
        std::fs::remove_dir_all(f.parent().unwrap()).unwrap();
    }
}
