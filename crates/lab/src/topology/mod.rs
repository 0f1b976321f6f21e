//! Topology files: parse (TOML, unknown fields rejected), validate, resolve into the
//! network the emulator runs, and write back as TOML (the generator does).
//!
//! Every error names the file, the line and the object:
//! `reference.toml:42: [[lsp]] "core": router "r99" is not defined`.

mod change;
mod file;
mod validate;

use std::path::Path;

pub use change::{Change, ChangeError, LinkDown, LspDown, MAX_CHANGE_BYTES};
pub use file::{HostDef, LinkDef, LspDef, RouteDef, RouterDef, TopologyDef, VantagePointDef};

use crate::limits::{self, TooLarge};
use crate::net::Net;

/// The reference topology shipped with the lab (`topologies/reference.toml`).
pub const REFERENCE_TOML: &str = include_str!("../../../../topologies/reference.toml");

/// A topology that failed to load; the message says where and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io { file: String, message: String },
    /// TOML syntax, a wrong type or an unknown field.
    #[error("{file}:{line}: {message}")]
    Syntax {
        file: String,
        line: usize,
        message: String,
    },
    /// The topology is well-formed TOML but does not make a network.
    #[error("{file}:{line}: {object}: {message}")]
    Invalid {
        file: String,
        line: usize,
        object: String,
        message: String,
    },
    /// The topology is larger than the lab takes ([`crate::limits`]); nothing was built.
    #[error("{file}: {limit}")]
    TooLarge { file: String, limit: TooLarge },
}

impl TopologyError {
    /// The line the error points at (0 when not known).
    pub fn line(&self) -> usize {
        match self {
            TopologyError::Io { .. } | TopologyError::TooLarge { .. } => 0,
            TopologyError::Syntax { line, .. } | TopologyError::Invalid { line, .. } => *line,
        }
    }
}

/// A validated topology: its definition (as written), the changes applied to it since
/// ([`Topology::apply`]), and the network they make.
#[derive(Debug, Clone)]
pub struct Topology {
    def: TopologyDef,
    file: String,
    /// The VM LAN [`Topology::with_vm_lan`] added, kept through changes.
    vm_lan: Option<crate::addr::Prefix>,
    changes: change::State,
    pub(crate) net: Net,
}

impl Topology {
    /// Parses and validates topology text; `file` names it in errors. Text longer than
    /// [`limits::MAX_TOPOLOGY_BYTES`] is refused unread, a topology with more objects
    /// than [`crate::limits`] allows once parsed, before anything else.
    pub fn parse(text: &str, file: &str) -> Result<Topology, TopologyError> {
        let too_large = |limit| TopologyError::TooLarge {
            file: file.to_string(),
            limit,
        };
        limits::check("bytes of topology", text.len(), limits::MAX_TOPOLOGY_BYTES)
            .map_err(too_large)?;
        let def: TopologyDef = toml::from_str(text).map_err(|e| syntax(text, file, &e))?;
        check_counts(&def).map_err(too_large)?;
        let net = validate::resolve(&def, file, &validate::Lines::of(text), None)?;
        Ok(Topology {
            def,
            file: file.to_string(),
            vm_lan: None,
            changes: change::State::default(),
            net,
        })
    }

    /// Reads, parses and validates a topology file.
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let file = path.display().to_string();
        let io = |e: std::io::Error| TopologyError::Io {
            file: file.clone(),
            message: e.to_string(),
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        limits::check(
            "bytes of topology",
            usize::try_from(len).unwrap_or(usize::MAX),
            limits::MAX_TOPOLOGY_BYTES,
        )
        .map_err(|limit| TopologyError::TooLarge {
            file: file.clone(),
            limit,
        })?;
        let text = std::fs::read_to_string(path).map_err(io)?;
        Topology::parse(&text, &file)
    }

    /// Validates a definition built in code (the generator's); errors carry line 0.
    pub fn from_def(def: TopologyDef) -> Result<Topology, TopologyError> {
        let file = format!("<{}>", def.name);
        let net = validate::resolve(&def, &file, &validate::Lines::default(), None)?;
        Ok(Topology {
            def,
            file,
            vm_lan: None,
            changes: change::State::default(),
            net,
        })
    }

    /// The same network with `lan` routed to the first vantage point as its LAN is: the
    /// VM fronts put guests there when the vantage LAN is too small for them. The
    /// router answers for the LAN's host 1 (the guests' gateway, on-link); anything else
    /// in it goes to the vantage point's port, past the same hops as the vantage point's
    /// own address. Fails when `lan` overlaps a prefix of the topology or is smaller
    /// than a /30. Changes applied before are forgotten: add the LAN first.
    pub fn with_vm_lan(self, lan: crate::addr::Prefix) -> Result<Topology, TopologyError> {
        let net = validate::resolve(
            &self.def,
            &self.file,
            &validate::Lines::default(),
            Some(lan),
        )?;
        Ok(Topology {
            net,
            vm_lan: Some(lan),
            changes: change::State::default(),
            ..self
        })
    }

    /// The topology after `change` (docs/lab.md, "Changes at run time"): routing, LSP
    /// paths and the truth follow it; LSPs that lose their path go down
    /// ([`Topology::lsps_down`] says why). Refused, with nothing changed, for an unknown
    /// router, LSP or link, a change that changes nothing, or a reroute over a missing or
    /// down link or onto a path that makes no LSP. A change that leaves destinations
    /// unreachable is applied: the truth says which.
    pub fn apply(&self, change: &Change) -> Result<Topology, ChangeError> {
        let (changes, net) =
            change::apply(&self.def, &self.changes, change, &self.file, self.vm_lan)?;
        Ok(Topology {
            def: self.def.clone(),
            file: self.file.clone(),
            vm_lan: self.vm_lan,
            changes,
            net,
        })
    }

    /// The links the changes applied so far took down, in the definition's order.
    pub fn links_down(&self) -> Vec<LinkDown> {
        self.changes.links_down(&self.def)
    }

    /// The LSPs of the definition that are down after the changes, by name.
    pub fn lsps_down(&self) -> &[LspDown] {
        self.changes.lsps_down()
    }

    /// The same topology with the LSPs named in `lsps` made 6PE cores (RFC 4798): the
    /// routers strictly between their ingress and egress (on every path of an `ecmp`
    /// one) IPv4 only, and, where no LSP goes back from an egress to its ingress, a
    /// return LSP `NAME-6pe-back` with the same settings along the reversed path, since
    /// a 6PE core carries IPv6 labelled both ways or its answers die in it. Fails on an
    /// unknown name. Changes and a VM LAN added before are forgotten.
    pub fn with_6pe_cores(self, lsps: &[&str]) -> Result<Topology, TopologyError> {
        let mut def = self.def.clone();
        let net = &self.net;
        for &name in lsps {
            let Some(k) = def.lsps.iter().position(|l| l.name == name) else {
                return Err(TopologyError::Invalid {
                    file: self.file.clone(),
                    line: 0,
                    object: "6PE core".into(),
                    message: format!("no LSP is named {name:?}"),
                });
            };
            for l in net.lsps.iter().filter(|l| l.name == name) {
                for &r in &l.path[1..l.egress_index()] {
                    let rname = net.router_name(r);
                    def.routers
                        .iter_mut()
                        .filter(|d| d.name == rname)
                        .for_each(|d| d.ipv4_only = true);
                }
            }
            let l = def.lsps[k].clone();
            if !def
                .lsps
                .iter()
                .any(|b| b.ingress == l.egress && b.egress == l.ingress)
            {
                def.lsps.push(LspDef {
                    name: format!("{name}-6pe-back"),
                    ingress: l.egress.clone(),
                    egress: l.ingress.clone(),
                    path: l.path.clone().map(|mut p| {
                        p.reverse();
                        p
                    }),
                    over: None,
                    ..l
                });
            }
        }
        let net = validate::resolve(&def, &self.file, &validate::Lines::default(), None)?;
        Ok(Topology {
            def,
            net,
            file: self.file,
            vm_lan: None,
            changes: change::State::default(),
        })
    }

    /// The shipped reference topology (`topologies/reference.toml`).
    pub fn reference() -> Topology {
        match Topology::parse(REFERENCE_TOML, "topologies/reference.toml") {
            Ok(t) => t,
            // The file is compiled in and checked by the unit tests.
            Err(e) => unreachable!("the shipped reference topology is invalid: {e}"),
        }
    }

    /// The definition as written (changes applied since are not in it).
    pub fn def(&self) -> &TopologyDef {
        &self.def
    }
    pub fn name(&self) -> &str {
        &self.def.name
    }
    /// Where the topology came from (a path, or `<name>` for generated ones).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The topology as TOML text that [`Topology::parse`] reads back to the same network.
    pub fn to_toml(&self) -> String {
        to_toml(&self.def)
    }
}

/// Writes a definition as TOML.
pub fn to_toml(def: &TopologyDef) -> String {
    toml::to_string(def).unwrap_or_else(|e| format!("# cannot serialise topology: {e}\n"))
}

fn syntax(text: &str, file: &str, e: &toml::de::Error) -> TopologyError {
    let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(0);
    TopologyError::Syntax {
        file: file.to_string(),
        line,
        message: e.message().to_string(),
    }
}

/// 1-based line number of byte offset `at`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(at)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The counts of a parsed topology.
pub(crate) fn check_counts(def: &TopologyDef) -> Result<(), TooLarge> {
    limits::check("routers", def.routers.len(), limits::MAX_ROUTERS)?;
    limits::check("links", def.links.len(), limits::MAX_LINKS)?;
    limits::check("hosts", def.hosts.len(), limits::MAX_HOSTS)?;
    limits::check(
        "vantage points",
        def.vantage_points.len(),
        limits::MAX_VANTAGE_POINTS,
    )?;
    limits::check("LSPs", def.lsps.len(), limits::MAX_LSPS)?;
    limits::check("static routes", def.routes.len(), limits::MAX_ROUTES)
}
