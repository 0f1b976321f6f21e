//! The emulated MPLS Internet and its ground truth, sans-IO.
//!
//! A [`Topology`] (TOML, see `docs/lab.md` and `topologies/reference.toml`) describes
//! routers with vendor profiles, point-to-point links with delays and IGP costs, hosts,
//! vantage points, LSPs and static routes. [`Lab`] runs it: IPv4 and IPv6 packets in
//! from a vantage point (every lab address has an IPv6 twin, [`addr::to_v6`]), the
//! network's answers out, due when the one-way delays they crossed have passed. No sockets, threads or clocks: the caller hands in the time (the
//! engines' [`Instant`]). [`Truth`] says what a traceroute should infer: paths, tunnels
//! and their classes, vendor signatures; the [`oracle`] says what exhaustive probing
//! can observe of each tunnel. [`generate`] makes random topologies with a chosen mix.
//!
//! ```
//! use vtnt_lab::{Lab, Port, Topology};
//! use vtnt_record::Instant;
//! use vtnt_wire::build::{icmp_echo, Echo, Ip};
//!
//! let mut lab = Lab::new(Topology::reference());
//! let dst = lab.truth().by_name("explicit").unwrap().dst;
//! let ip = Ip { src: "192.0.2.2".parse().unwrap(), dst, ttl: 3, tos: 0, ipid: 1 };
//! let mut probe = [0u8; 64];
//! let n = icmp_echo(&mut probe, &ip, &Echo { icmp_type: 8, ident: 1, seq: 1, payload: &[0; 8], checksum: None }).unwrap();
//! lab.handle_packet(Instant::ZERO, Port(0), &probe[..n]);
//! let due = lab.poll_timeout().unwrap();
//! let mut buf = [0u8; 1500];
//! let (port, len) = lab.poll_transmit(due, &mut buf).unwrap();
//! let reply = vtnt_wire::reply::parse(&buf[..len]).unwrap();
//! assert_eq!(port, Port(0));
//! assert_eq!(reply.src.to_string(), "100.64.2.2"); // e2, the first LSR, answers TTL 3
//! ```
//!
//! A running lab changes with [`Lab::apply`]: a link down or up, an LSP rerouted, down
//! or back ([`Change`]); routing and the truth follow.
//!
//! Modules: [`addr`] (prefixes, lab ranges), [`profile`] (vendors), `topology` (file,
//! validation, changes), [`limits`] (the largest topology the lab takes), `net` (the built network)
//! with `net::routing` (distances through biconnected parts, next hops, ECMP, LSP pushes,
//! derived per packet), `vantage` (ports), `lab` (the API) with `lab::forward` (TTL and
//! label mechanics, replies) and `lab::family` (the IPv4 and IPv6 header fields a walk
//! reads, the answers built in the packet's family), [`truth`], [`oracle`] (what
//! probing shows of each tunnel, from emulated traces), [`tracer`], [`generate`]. No two
//! import each other in a circle (`crates/cli/tests/architecture.rs` checks it).

mod lab;
mod net;
mod topology;
mod vantage;

pub mod addr;
pub mod generate;
pub mod limits;
pub mod oracle;
pub mod profile;
pub mod tracer;
pub mod truth;

pub use generate::{generate, GenOptions};
pub use lab::{Lab, Stats};
pub use net::{Pop, ReplyFrom, Revelation, TunnelClass};
pub use oracle::{oracle, Observation, Oracle, OracleOptions};
pub use profile::Vendor;
pub use topology::{
    to_toml, Change, ChangeError, HostDef, LinkDef, LinkDown, LspDef, LspDown, RouteDef, RouterDef,
    Topology, TopologyDef, TopologyError, VantagePointDef, MAX_CHANGE_BYTES, REFERENCE_TOML,
};
pub use truth::Truth;
pub use vantage::{vantage_points, Port, VantagePoint};
pub use vtnt_record::Instant;
