//! The topology file's schema: what a `.toml` topology may say, field by field. Names are
//! kebab-case and unknown fields are rejected; defaults are given per field. The
//! fully commented sample is `topologies/reference.toml`, the prose `docs/lab.md`.

use serde::{Deserialize, Serialize};

use crate::net::{Pop, ReplyFrom};
use crate::profile::Vendor;

/// A whole topology file, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TopologyDef {
    /// Name of the topology (shown by `vtnt lab status`).
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Where probes come from; the first is port 0, the next port 1, ...
    #[serde(rename = "vantage-point", default)]
    pub vantage_points: Vec<VantagePointDef>,
    #[serde(rename = "router", default)]
    pub routers: Vec<RouterDef>,
    #[serde(rename = "link", default)]
    pub links: Vec<LinkDef>,
    #[serde(rename = "host", default)]
    pub hosts: Vec<HostDef>,
    #[serde(rename = "lsp", default)]
    pub lsps: Vec<LspDef>,
    #[serde(rename = "route", default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteDef>,
}

/// A vantage point: a LAN on one router. The TUN front takes `address`; VMs get other
/// addresses of the same prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VantagePointDef {
    pub name: String,
    /// The vantage point's address and the length of its LAN prefix, `"192.0.2.2/24"`.
    pub address: String,
    /// The router's address on that LAN.
    pub gateway: String,
    /// The router the LAN hangs off.
    pub router: String,
    /// One-way delay between the vantage point and its router, milliseconds.
    #[serde(default = "default_vp_delay")]
    pub delay_ms: f64,
}

/// A router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RouterDef {
    pub name: String,
    /// Vendor profile: cisco, huawei, h3c, juniper, junose, linux, mikrotik, nokia, brocade.
    pub vendor: Vendor,
    /// Optional loopback address (a /32 of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback: Option<String>,
    /// A silent router forwards but never sends anything of its own.
    #[serde(default, skip_serializing_if = "is_false")]
    pub silent: bool,
    /// ICMP messages per second this router sends at most (token bucket, burst = rate);
    /// 0 = unlimited.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub icmp_rate: u32,
    /// Initial TTLs `[time exceeded, echo reply]` instead of the vendor's: a router of
    /// that vendor whose signature is outside TNT's table or another vendor's (the
    /// vendor still decides how it pushes its own traffic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<[u8; 2]>,
    /// The address its ICMP errors (time exceeded, unreachable) come from.
    #[serde(default, skip_serializing_if = "ReplyFrom::is_incoming")]
    pub reply_from: ReplyFrom,
    /// An IPv4-only router, as the LSRs of a 6PE core (RFC 4798) are: its addresses have
    /// no IPv6 twins, it routes no IPv6, and it answers a labelled IPv6 packet it expires
    /// from its IPv4-mapped address (`::ffff:a.b.c.d`), along the LSP (docs/lab.md).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ipv4_only: bool,
}

/// A point-to-point link between two routers: a /30 or /31.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LinkDef {
    pub a: String,
    pub b: String,
    /// The link's prefix, `/30` or `/31`.
    pub prefix: String,
    /// `a`'s address; default: first usable address (.1 of a /30, .0 of a /31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_address: Option<String>,
    /// `b`'s address; default: the other usable address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_address: Option<String>,
    /// One-way delay a -> b in milliseconds.
    #[serde(default = "default_link_delay")]
    pub delay_ms: f64,
    /// One-way delay b -> a; default `delay-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_back_ms: Option<f64>,
    /// IGP cost a -> b.
    #[serde(default = "default_cost")]
    pub cost: u32,
    /// IGP cost b -> a; default `cost` (set it to make forward and return paths differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_back: Option<u32>,
}

/// A destination host on a LAN of one router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HostDef {
    pub name: String,
    /// The host's address and its LAN prefix length, `"203.0.113.10/30"`.
    pub address: String,
    /// The router's address on that LAN.
    pub gateway: String,
    pub router: String,
    /// One-way delay between host and router, milliseconds.
    #[serde(default = "default_host_delay")]
    pub delay_ms: f64,
    /// Initial TTL of everything the host sends.
    #[serde(default = "default_host_ttl")]
    pub ttl: u8,
    /// TCP ports that answer SYN with SYN-ACK; others answer RST.
    #[serde(default = "default_tcp_open")]
    pub tcp_open: Vec<u16>,
    /// A silent host answers nothing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub silent: bool,
}

/// A label switched path from an ingress LER to an egress LER.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LspDef {
    pub name: String,
    pub ingress: String,
    pub egress: String,
    /// Routers from ingress to egress (RSVP-TE style); default the IGP shortest path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Vec<String>>,
    /// Follow every equal-cost IGP path from ingress to egress, as LDP does (at most
    /// eight, in interface order), each with labels of its own; the ingress picks one
    /// per flow, as IP ECMP does. Not with `path`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ecmp: bool,
    /// Ingress copies IP-TTL into the LSE-TTL (`true`) or sets 255 (`false`).
    #[serde(default = "yes")]
    pub ttl_propagate: bool,
    #[serde(default = "default_pop")]
    pub pop: Pop,
    /// LSRs quote the received label stack in time exceeded (RFC 4950).
    #[serde(default = "yes")]
    pub rfc4950: bool,
    /// Whether traffic to the LSP routers' own addresses is label switched too (LDP
    /// labels every IGP prefix). `false`: a trace to the egress is IP-routed and shows
    /// every LSR (DPR works). `true`: only backward recursive revelation (BRPR) works.
    #[serde(default)]
    pub internal_labelled: bool,
    /// LSRs send their time exceeded on along the LSP to its end first (RFC 3032 2.3.2).
    #[serde(default)]
    pub icmp_tunnelling: bool,
    /// UHP egress that forwards a packet arriving with IP-TTL 1 without decrementing it
    /// (the next hop then shows twice: invisible UHP).
    #[serde(default, skip_serializing_if = "is_false")]
    pub egress_forwards_ttl1: bool,
    /// UHP with a label of the egress's own. Default (`false`): the penultimate hop swaps
    /// to IPv4 explicit null (label 0), as UHP is deployed, and the egress quotes label 0
    /// when the LSE-TTL expires there; with `true` it quotes an ordinary label, like any
    /// LSR (a traceroute cannot tell it from one).
    #[serde(default, skip_serializing_if = "is_false")]
    pub non_null_uhp: bool,
    /// Host LANs on the egress are label switched over the whole LSP even with
    /// `internal-labelled = false` (customer prefixes whose BGP next hop is the egress).
    /// `false`: only with `internal-labelled`, as the egress's other prefixes.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub egress_lans_labelled: bool,
    /// The ingress pushes a service (VPN) label of the egress's under the transport label
    /// on traffic that rides the whole LSP: LSRs quote a stack of two, and with PHP the
    /// egress receives the service label alone.
    #[serde(default, skip_serializing_if = "is_false")]
    pub vpn_label: bool,
    /// LDP over RSVP-TE: the name of another LSP whose routers, ingress to egress, are
    /// consecutive LSRs of this one. Where this LSP's traffic crosses them it rides that
    /// LSP: its ingress pushes its own label on top, its LSRs quote both labels (and the
    /// service label), and its penultimate hop (PHP) or egress (UHP) pops its label before
    /// this LSP's is looked at again. Both agree on `ttl-propagate` and `rfc4950`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
}

/// A static route: `router` sends traffic for `prefix` to its neighbour `via`, whatever
/// the IGP says, and pushes no LSP for it. Two routers pointing a prefix at each other
/// make a forwarding loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RouteDef {
    pub router: String,
    /// One of the topology's prefixes (a link, a LAN or a loopback), not connected to
    /// `router`.
    pub prefix: String,
    /// A router `router` has a link to.
    pub via: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}
fn is_true(b: &bool) -> bool {
    *b
}
fn is_zero(n: &u32) -> bool {
    *n == 0
}
fn yes() -> bool {
    true
}
fn default_pop() -> Pop {
    Pop::Php
}
fn default_vp_delay() -> f64 {
    0.05
}
fn default_link_delay() -> f64 {
    1.0
}
fn default_host_delay() -> f64 {
    0.5
}
fn default_cost() -> u32 {
    10
}
fn default_host_ttl() -> u8 {
    64
}
fn default_tcp_open() -> Vec<u16> {
    vec![80]
}

/// Byte spans of each object in the file, to turn an object index into a line number.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Spans {
    #[serde(rename = "vantage-point", default)]
    pub vantage_points: Vec<toml::Spanned<toml::Table>>,
    #[serde(rename = "router", default)]
    pub routers: Vec<toml::Spanned<toml::Table>>,
    #[serde(rename = "link", default)]
    pub links: Vec<toml::Spanned<toml::Table>>,
    #[serde(rename = "host", default)]
    pub hosts: Vec<toml::Spanned<toml::Table>>,
    #[serde(rename = "lsp", default)]
    pub lsps: Vec<toml::Spanned<toml::Table>>,
    #[serde(rename = "route", default)]
    pub routes: Vec<toml::Spanned<toml::Table>>,
}
