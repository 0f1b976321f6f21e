//! Changes to a running topology: a link taken down or brought back up, an LSP rerouted
//! over an explicit path, taken down or restored. A [`Change`] is applied to a
//! [`Topology`](super::Topology) and gives a new one (the old one is left as it was when
//! the change is refused); its routing, LSP paths and truth follow.
//!
//! What happens to LSPs, as LDP and RSVP-TE do it:
//! - an LSP without `path` (LDP, or RSVP-TE with a dynamic path) follows the IGP: after a
//!   link goes down its path is the new shortest one; with no path left from its ingress
//!   to its egress (or one with no LSR between them) it is down until one comes back;
//! - an LSP with an explicit `path` (RSVP-TE, strict hops) that crosses a link going down
//!   is torn down: the head end does not move a pinned path by itself (no secondary path
//!   or fast reroute is modelled); it is up again when the link is, or once
//!   `lsp-reroute` gives it a path that holds;
//! - traffic the ingress pushed onto a down LSP is routed as plain IP along the IGP;
//! - an LSP riding another one (`over`) that can no longer ride it (the outer one down
//!   or moved off its path) is label switched hop by hop along its own path;
//! - a static route whose link to `via` is down, or to a down link's prefix, is
//!   withdrawn.
//!
//! A change is text, one line: `link-down A B`, `link-up A B`, `lsp-reroute NAME
//! R1,R2,...`, `lsp-down NAME`, `lsp-up NAME` (docs/lab.md, "Changes at run time").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::file::{LspDef, TopologyDef};
use super::validate::{self, Lines};
use super::TopologyError;
use crate::addr::Prefix;
use crate::net::Net;

/// Most bytes of a change's text (`lsp-reroute` with a long path included).
pub const MAX_CHANGE_BYTES: usize = 4096;
/// Most routers an `lsp-reroute` path names (as an LSP's path in a topology).
const MAX_PATH: usize = 200;

/// One change to a running topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Every link joining routers `a` and `b` goes down.
    LinkDown { a: String, b: String },
    /// The links joining `a` and `b` come back up.
    LinkUp { a: String, b: String },
    /// LSP `lsp` is signalled again along `path` (its ingress and egress may be left
    /// out at the ends): an explicit path from now on, up again if it was down.
    LspReroute { lsp: String, path: Vec<String> },
    /// LSP `lsp` is torn down.
    LspDown { lsp: String },
    /// LSP `lsp` is back as the topology defines it: its own path (or the IGP's), up.
    LspUp { lsp: String },
}

/// A change that cannot be applied; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// The text is not a change.
    #[error("bad change: {0} (link-down A B | link-up A B | lsp-reroute NAME R1,R2,... | lsp-down NAME | lsp-up NAME)")]
    Syntax(String),
    #[error("no router is named {0:?}")]
    UnknownRouter(String),
    #[error("no LSP is named {0:?}")]
    UnknownLsp(String),
    #[error("no link joins {0:?} and {1:?}")]
    NoSuchLink(String, String),
    /// A valid change the topology's state refuses (a reroute over a down link, a link
    /// already down...): the message says why.
    #[error("{0}")]
    Refused(String),
    /// The changed topology does not resolve (a reroute whose path makes no LSP).
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

impl FromStr for Change {
    type Err = ChangeError;
    fn from_str(s: &str) -> Result<Change, ChangeError> {
        if s.len() > MAX_CHANGE_BYTES {
            return Err(ChangeError::Syntax(format!(
                "longer than {MAX_CHANGE_BYTES} bytes"
            )));
        }
        let words: Vec<&str> = s.split_whitespace().collect();
        let name = |w: &str| w.to_string();
        Ok(match words[..] {
            ["link-down", a, b] => Change::LinkDown {
                a: name(a),
                b: name(b),
            },
            ["link-up", a, b] => Change::LinkUp {
                a: name(a),
                b: name(b),
            },
            ["lsp-reroute", lsp, path] => {
                let path: Vec<String> = path.split(',').map(name).collect();
                if path.iter().any(String::is_empty) {
                    return Err(ChangeError::Syntax(
                        "an empty router name in the path".into(),
                    ));
                }
                if path.len() > MAX_PATH {
                    return Err(ChangeError::Syntax(format!(
                        "a path of more than {MAX_PATH} routers"
                    )));
                }
                Change::LspReroute {
                    lsp: name(lsp),
                    path,
                }
            }
            ["lsp-down", lsp] => Change::LspDown { lsp: name(lsp) },
            ["lsp-up", lsp] => Change::LspUp { lsp: name(lsp) },
            [] => return Err(ChangeError::Syntax("empty".into())),
            _ => return Err(ChangeError::Syntax(format!("`{}`", s.escape_debug()))),
        })
    }
}

impl fmt::Display for Change {
    /// The text [`Change::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::LinkDown { a, b } => write!(f, "link-down {a} {b}"),
            Change::LinkUp { a, b } => write!(f, "link-up {a} {b}"),
            Change::LspReroute { lsp, path } => write!(f, "lsp-reroute {lsp} {}", path.join(",")),
            Change::LspDown { lsp } => write!(f, "lsp-down {lsp}"),
            Change::LspUp { lsp } => write!(f, "lsp-up {lsp}"),
        }
    }
}

/// A link the changes took down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkDown {
    pub a: String,
    pub b: String,
    pub prefix: String,
}

/// An LSP of the topology that is down, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LspDown {
    pub name: String,
    pub reason: String,
}

/// Where a topology stands relative to its definition: what the changes applied so far
/// set, and the LSPs that are down as a result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct State {
    /// Indices in the definition's links.
    links_down: BTreeSet<usize>,
    /// LSP name to its explicit path, ingress to egress.
    rerouted: BTreeMap<String, Vec<String>>,
    /// LSPs taken down by `lsp-down`.
    lsps_off: BTreeSet<String>,
    /// Every LSP down, derived when the changed topology is resolved.
    lsps_down: Vec<LspDown>,
}

impl State {
    pub fn links_down(&self, def: &TopologyDef) -> Vec<LinkDown> {
        self.links_down
            .iter()
            .map(|&i| LinkDown {
                a: def.links[i].a.clone(),
                b: def.links[i].b.clone(),
                prefix: def.links[i].prefix.clone(),
            })
            .collect()
    }
    pub fn lsps_down(&self) -> &[LspDown] {
        &self.lsps_down
    }
}

/// The state after `change`, and the network it makes: refused (and nothing changed)
/// when a name is unknown, the change makes no difference, or a reroute leaves its LSP
/// without a path that holds.
pub(crate) fn apply(
    def: &TopologyDef,
    state: &State,
    change: &Change,
    file: &str,
    vm_lan: Option<Prefix>,
) -> Result<(State, Net), ChangeError> {
    let mut st = state.clone();
    update(def, &mut st, change)?;
    let (net, down) = resolve(def, &st, file, vm_lan)?;
    if let Change::LspReroute { lsp, .. } = change {
        if let Some(d) = down.iter().find(|d| &d.name == lsp) {
            return Err(ChangeError::Refused(format!(
                "LSP {lsp:?} cannot take that path: {}",
                d.reason
            )));
        }
    }
    st.lsps_down = down;
    Ok((st, net))
}

/// The links of `def` joining `a` and `b` (either way round).
fn links_between(def: &TopologyDef, a: &str, b: &str) -> Vec<usize> {
    def.links
        .iter()
        .enumerate()
        .filter(|(_, l)| (l.a == a && l.b == b) || (l.a == b && l.b == a))
        .map(|(i, _)| i)
        .collect()
}

fn router<'a>(def: &TopologyDef, name: &'a str) -> Result<&'a str, ChangeError> {
    if def.routers.iter().any(|r| r.name == name) {
        Ok(name)
    } else {
        Err(ChangeError::UnknownRouter(name.to_string()))
    }
}

fn lsp<'a>(def: &'a TopologyDef, name: &str) -> Result<&'a LspDef, ChangeError> {
    def.lsps
        .iter()
        .find(|l| l.name == name)
        .ok_or_else(|| ChangeError::UnknownLsp(name.to_string()))
}

/// The settings `change` makes, checked against the definition and the state.
fn update(def: &TopologyDef, st: &mut State, change: &Change) -> Result<(), ChangeError> {
    let refused = |m: String| Err(ChangeError::Refused(m));
    match change {
        Change::LinkDown { a, b } | Change::LinkUp { a, b } => {
            let (a, b) = (router(def, a)?, router(def, b)?);
            let links = links_between(def, a, b);
            if links.is_empty() {
                return Err(ChangeError::NoSuchLink(a.into(), b.into()));
            }
            let down = matches!(change, Change::LinkDown { .. });
            let already = links.iter().all(|i| st.links_down.contains(i) == down);
            if already {
                let state = if down { "down" } else { "up" };
                return refused(format!("the link {a}-{b} is already {state}"));
            }
            for i in links {
                if down {
                    st.links_down.insert(i);
                } else {
                    st.links_down.remove(&i);
                }
            }
        }
        Change::LspReroute { lsp: name, path } => {
            let l = lsp(def, name)?;
            let mut full: Vec<String> = Vec::with_capacity(path.len() + 2);
            if path.first() != Some(&l.ingress) {
                full.push(l.ingress.clone());
            }
            full.extend(path.iter().cloned());
            if full.last() != Some(&l.egress) {
                full.push(l.egress.clone());
            }
            for r in &full {
                router(def, r)?;
            }
            for w in full.windows(2) {
                let links = links_between(def, &w[0], &w[1]);
                if links.is_empty() {
                    return Err(ChangeError::NoSuchLink(w[0].clone(), w[1].clone()));
                }
                if links.iter().all(|i| st.links_down.contains(i)) {
                    return refused(format!(
                        "LSP {name:?} cannot take that path: the link {}-{} is down",
                        w[0], w[1]
                    ));
                }
            }
            st.lsps_off.remove(name);
            st.rerouted.insert(name.clone(), full);
        }
        Change::LspDown { lsp: name } => {
            lsp(def, name)?;
            if !st.lsps_off.insert(name.clone()) {
                return refused(format!("LSP {name:?} is already down"));
            }
        }
        Change::LspUp { lsp: name } => {
            lsp(def, name)?;
            let was_off = st.lsps_off.remove(name);
            let was_moved = st.rerouted.remove(name).is_some();
            if !was_off && !was_moved {
                return refused(format!(
                    "LSP {name:?} is up as defined already (only an LSP taken down or rerouted comes back)"
                ));
            }
        }
    }
    Ok(())
}

/// The definition as the state changes it, with the LSPs in `down` (and those the
/// state takes down) left out and those in `unridden` riding nothing; and the LSPs the
/// state takes down, with why.
fn effective(
    def: &TopologyDef,
    st: &State,
    down: &[LspDown],
    unridden: &BTreeSet<String>,
) -> (TopologyDef, Vec<LspDown>) {
    let up = |a: &str, b: &str| {
        links_between(def, a, b)
            .iter()
            .any(|i| !st.links_down.contains(i))
    };
    let mut out = def.clone();
    out.links = def
        .links
        .iter()
        .enumerate()
        .filter(|(i, _)| !st.links_down.contains(i))
        .map(|(_, l)| l.clone())
        .collect();
    // a static route over a down link, or to a down link's prefix, is withdrawn
    out.routes.retain(|r| {
        up(&r.router, &r.via)
            && !st
                .links_down
                .iter()
                .any(|&i| def.links[i].prefix == r.prefix)
    });
    let mut taken = Vec::new();
    out.lsps = Vec::with_capacity(def.lsps.len());
    for l in &def.lsps {
        if down.iter().any(|d| d.name == l.name) {
            continue;
        }
        if st.lsps_off.contains(&l.name) {
            taken.push(LspDown {
                name: l.name.clone(),
                reason: "taken down (lsp-down)".into(),
            });
            continue;
        }
        let mut l = l.clone();
        if let Some(p) = st.rerouted.get(&l.name) {
            l.path = Some(p.clone());
            l.ecmp = false;
        }
        if let Some(w) = l
            .path
            .iter()
            .flat_map(|p| p.windows(2))
            .find(|w| !up(&w[0], &w[1]))
        {
            taken.push(LspDown {
                name: l.name.clone(),
                reason: format!(
                    "its explicit path crosses the down link {}-{} (RSVP-TE does not move a \
                     pinned path; lsp-reroute does)",
                    w[0], w[1]
                ),
            });
            continue;
        }
        if unridden.contains(&l.name) {
            l.over = None;
        }
        out.lsps.push(l);
    }
    (out, taken)
}

/// The network `def` changed by `st` makes, and every LSP down. An LSP the changed
/// topology cannot make (no path left, none with an LSR) is down with the reason the
/// validation gives; one that cannot ride its `over` LSP any more rides nothing.
fn resolve(
    def: &TopologyDef,
    st: &State,
    file: &str,
    vm_lan: Option<Prefix>,
) -> Result<(Net, Vec<LspDown>), TopologyError> {
    let mut down: Vec<LspDown> = Vec::new();
    let mut unridden: BTreeSet<String> = BTreeSet::new();
    // each round takes one more LSP down or off its outer LSP: at most two per LSP
    loop {
        let (eff, taken) = effective(def, st, &down, &unridden);
        let e = match validate::resolve(&eff, file, &Lines::default(), vm_lan) {
            Ok(net) => {
                let mut all = taken;
                all.extend(down);
                all.sort_by(|x, y| x.name.cmp(&y.name));
                return Ok((net, all));
            }
            Err(e) => e,
        };
        let TopologyError::Invalid {
            object, message, ..
        } = &e
        else {
            return Err(e);
        };
        let Some(l) = eff
            .lsps
            .iter()
            .find(|l| *object == format!("[[lsp]] {:?}", l.name))
        else {
            return Err(e);
        };
        if l.over.is_some() {
            unridden.insert(l.name.clone());
        } else {
            down.push(LspDown {
                name: l.name.clone(),
                reason: message.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_read_back_as_written() {
        for s in [
            "link-down e2 e3",
            "link-up e2 e3",
            "lsp-reroute core r1,r5,r6,r4",
            "lsp-down core",
            "lsp-up core",
        ] {
            let c: Change = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
        assert_eq!(
            "  link-down\ta  b \n"
                .parse::<Change>()
                .unwrap()
                .to_string(),
            "link-down a b"
        );
    }

    #[test]
    fn bad_text_is_a_syntax_error() {
        for s in [
            "",
            "link-down a",
            "link-down a b c",
            "link-sideways a b",
            "lsp-reroute x a,,b",
            "lsp-reroute x",
        ] {
            assert!(
                matches!(s.parse::<Change>(), Err(ChangeError::Syntax(_))),
                "{s:?}"
            );
        }
        let long = format!("lsp-down {}", "x".repeat(MAX_CHANGE_BYTES));
        assert!(matches!(
            long.parse::<Change>(),
            Err(ChangeError::Syntax(_))
        ));
        let many = format!("lsp-reroute x {}", vec!["r"; MAX_PATH + 1].join(","));
        assert!(matches!(
            many.parse::<Change>(),
            Err(ChangeError::Syntax(_))
        ));
    }
}
