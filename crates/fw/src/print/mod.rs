//! A [`Ruleset`] written back as `iptables-save` output ([`iptables_save`]), in the
//! form iptables-save itself prints (so a file we write and one iptables wrote after
//! loading it compare line by line), or as an nft ruleset ([`nft`]) for `nft -f`.
//! [`nft_sets`] writes it as nft with sets, the fast path an nft user would write.
//! What a syntax cannot say (a negated set in iptables) is an error naming the rule.
//! (Writing into a `String` cannot fail, hence the ignored `fmt::Result`s.)

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use crate::parse::icmp_type_name;
mod sets;
pub use sets::nft_sets;

use crate::rule::{
    Action, Chain, CtState, IcmpType, Match, PortRange, Prefix, RejectWith, Rule, Ruleset,
    StateSet, Target, TcpFlags,
};

/// What a syntax cannot express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {index} of chain `{chain}` (line {line}): {what} cannot be written as {syntax}")]
pub struct PrintError {
    pub chain: String,
    pub index: usize,
    pub line: u32,
    pub what: &'static str,
    pub syntax: &'static str,
}

fn join<T>(items: &[T], sep: &str, f: impl Fn(&T) -> String) -> String {
    let mut s = String::new();
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(sep);
        }
        s.push_str(&f(x));
    }
    s
}

fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        51 => "ah".into(),
        132 => "sctp".into(),
        n => alloc::format!("{n}"),
    }
}

/// iptables' order of state names.
const STATE_ORDER: [CtState; 5] = [
    CtState::Invalid,
    CtState::New,
    CtState::Related,
    CtState::Established,
    CtState::Untracked,
];

fn flag_names(bits: u8, upper: bool) -> String {
    let mut names = alloc::vec::Vec::new();
    for &(n, b) in crate::parse::TCP_FLAGS {
        if bits & b != 0 {
            names.push(if upper {
                n.to_ascii_uppercase()
            } else {
                n.into()
            });
        }
    }
    match names.is_empty() {
        true => {
            if upper {
                "NONE".into()
            } else {
                "0x0".into()
            }
        }
        false => names.join(","),
    }
}

/// The chains' names as iptables has them: a base chain is its hook's built-in chain
/// (an nft base chain may be called anything); a user chain's name must be one iptables
/// takes and not a built-in chain's or a target's.
fn ipt_names(rs: &Ruleset) -> Result<Vec<String>, PrintError> {
    let err = |c: &Chain, what| PrintError {
        chain: c.name.clone(),
        index: 0,
        line: c.line,
        what,
        syntax: "iptables-save",
    };
    let reserved = [
        "INPUT", "FORWARD", "OUTPUT", "ACCEPT", "DROP", "REJECT", "RETURN",
    ];
    rs.chains
        .iter()
        .map(|c| match c.hook {
            Some(h) => Ok(h.chain_name().into()),
            None if reserved.contains(&c.name.as_str()) => Err(err(
                c,
                "a user chain with a built-in chain's or a target's name",
            )),
            None if c.name.is_empty()
                || c.name.len() > 28
                || c.name.starts_with(['-', '!', '[', ':', '*', '#'])
                || c.name.contains(|ch: char| ch.is_whitespace() || ch == '"') =>
            {
                Err(err(c, "a chain name iptables does not take"))
            }
            None => Ok(c.name.clone()),
        })
        .collect()
}

/// `rs` as `iptables-save` would print its filter table.
pub fn iptables_save(rs: &Ruleset) -> Result<String, PrintError> {
    let names = ipt_names(rs)?;
    let mut out = String::new();
    let _ = writeln!(out, "*filter");
    for (c, name) in rs.chains.iter().zip(&names) {
        let policy = match (c.hook, c.policy) {
            (None, _) => "-",
            (Some(_), Action::Drop) => "DROP",
            (Some(_), _) => "ACCEPT",
        };
        let _ = writeln!(out, ":{name} {policy} [0:0]");
    }
    for (c, name) in rs.chains.iter().zip(&names) {
        for (i, r) in c.rules.iter().enumerate() {
            let line = ipt_rule(rs, &names, c, name, i, r)?;
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(out, "COMMIT");
    Ok(out)
}

fn ipt_rule(
    rs: &Ruleset,
    names: &[String],
    c: &Chain,
    name: &str,
    index: usize,
    r: &Rule,
) -> Result<String, PrintError> {
    let err = |what| PrintError {
        chain: c.name.clone(),
        index,
        line: r.line,
        what,
        syntax: "iptables-save",
    };
    let mut s = alloc::format!("-A {name}");
    let bang = |neg: bool| if neg { "! " } else { "" };
    let addr = |s: &mut String, opt: &str, m: &Match<Prefix>| -> Result<(), PrintError> {
        match *m {
            Match::Any => {}
            Match::Is(p) | Match::Not(p) => {
                let _ = write!(s, " {}{opt} {p}", bang(matches!(m, Match::Not(_))));
            }
            Match::In(id) => {
                let _ = write!(
                    s,
                    " {opt} {}",
                    join(rs.set::<Prefix>(id), ",", |p| alloc::format!("{p}"))
                );
            }
            Match::NotIn(_) => return Err(err("a negated address set")),
        }
        Ok(())
    };
    addr(&mut s, "-s", &r.src)?;
    addr(&mut s, "-d", &r.dst)?;
    for (opt, m) in [("-i", &r.in_if), ("-o", &r.out_if)] {
        match *m {
            Match::Any => {}
            Match::Is(i) | Match::Not(i) => {
                let f = &rs.ifaces[i.0 as usize];
                let plus = if f.wildcard { "+" } else { "" };
                let _ = write!(
                    s,
                    " {}{opt} {}{plus}",
                    bang(matches!(m, Match::Not(_))),
                    f.name
                );
            }
            _ => return Err(err("an interface set")),
        }
    }
    let proto = match r.proto {
        Match::Any => None,
        Match::Is(p) => Some(p),
        Match::Not(p) => {
            let _ = write!(s, " ! -p {}", proto_name(p));
            None
        }
        _ => return Err(err("a protocol set")),
    };
    if let Some(p) = proto {
        let _ = write!(s, " -p {}", proto_name(p));
    }
    let single = |m: &Match<PortRange>| matches!(m, Match::Any | Match::Is(_) | Match::Not(_));
    let module = match proto {
        Some(6) => "tcp",
        _ => "udp",
    };
    if single(&r.sport)
        && single(&r.dport)
        && (!r.sport.is_any() || !r.dport.is_any() || r.tcp_flags.is_some())
    {
        let _ = write!(s, " -m {module}");
        for (opt, m) in [("--sport", &r.sport), ("--dport", &r.dport)] {
            if let Match::Is(p) | Match::Not(p) = *m {
                let _ = write!(s, " {}{opt} {p}", bang(matches!(m, Match::Not(_))));
            }
        }
    } else if r.tcp_flags.is_some() {
        let _ = write!(s, " -m tcp");
    }
    if let Some(TcpFlags { mask, comp, invert }) = r.tcp_flags {
        let _ = write!(
            s,
            " {}--tcp-flags {} {}",
            bang(invert),
            flag_names(mask, true),
            flag_names(comp, true)
        );
    }
    if !single(&r.sport) || !single(&r.dport) {
        let _ = write!(s, " -m multiport");
        for (opt, m) in [("--sports", &r.sport), ("--dports", &r.dport)] {
            let list = |v: &[PortRange]| join(v, ",", |p| alloc::format!("{p}"));
            match *m {
                Match::Any => {}
                Match::Is(p) => {
                    let _ = write!(s, " {opt} {p}");
                }
                Match::Not(p) => {
                    let _ = write!(s, " ! {opt} {p}");
                }
                Match::In(id) => {
                    let _ = write!(s, " {opt} {}", list(rs.set::<PortRange>(id)));
                }
                Match::NotIn(id) => {
                    let _ = write!(s, " ! {opt} {}", list(rs.set::<PortRange>(id)));
                }
            }
        }
    }
    match r.icmp {
        Match::Any => {}
        Match::Is(t) | Match::Not(t) => {
            let code = t.code.map(|c| alloc::format!("/{c}")).unwrap_or_default();
            let _ = write!(
                s,
                " -m icmp {}--icmp-type {}{code}",
                bang(matches!(r.icmp, Match::Not(_))),
                t.ty
            );
        }
        _ => return Err(err("an ICMP type set")),
    }
    if let Some(st) = r.state {
        let names = STATE_ORDER
            .iter()
            .filter(|x| st.contains(**x))
            .map(|x| x.name());
        let list: alloc::vec::Vec<_> = names.collect();
        if list.is_empty() {
            return Err(err("an empty state set"));
        }
        let _ = write!(s, " -m conntrack --ctstate {}", list.join(","));
    }
    match r.target {
        Target::Verdict(Action::Accept) => s.push_str(" -j ACCEPT"),
        Target::Verdict(Action::Drop) => s.push_str(" -j DROP"),
        Target::Verdict(Action::Reject(rw)) => {
            let _ = write!(s, " -j REJECT --reject-with {}", reject_name(rw));
        }
        Target::Return => s.push_str(" -j RETURN"),
        Target::Jump(t) => {
            let _ = write!(s, " -j {}", names[t.0 as usize]);
        }
        Target::Goto(t) => {
            let _ = write!(s, " -g {}", names[t.0 as usize]);
        }
        Target::Continue => {}
    }
    Ok(s)
}

fn reject_name(rw: RejectWith) -> &'static str {
    match rw {
        RejectWith::NetUnreachable => "icmp-net-unreachable",
        RejectWith::HostUnreachable => "icmp-host-unreachable",
        RejectWith::PortUnreachable => "icmp-port-unreachable",
        RejectWith::ProtoUnreachable => "icmp-proto-unreachable",
        RejectWith::NetProhibited => "icmp-net-prohibited",
        RejectWith::HostProhibited => "icmp-host-prohibited",
        RejectWith::AdminProhibited => "icmp-admin-prohibited",
        RejectWith::TcpReset => "tcp-reset",
    }
}

/// nft's text of a value: a prefix without `/32`, a port range with `-`.
fn nft_prefix(p: &Prefix) -> String {
    match p.len() {
        32 => alloc::format!("{}", p.addr()),
        _ => alloc::format!("{p}"),
    }
}
fn nft_ports(p: &PortRange) -> String {
    match p.lo == p.hi {
        true => alloc::format!("{}", p.lo),
        false => alloc::format!("{}-{}", p.lo, p.hi),
    }
}
fn nft_icmp(t: &IcmpType) -> String {
    icmp_type_name(t.ty).map_or_else(|| alloc::format!("{}", t.ty), String::from)
}

/// ` KEY [!= ]VALUE` for one field.
fn nft_field<T: crate::rule::Element + Copy>(
    rs: &Ruleset,
    s: &mut String,
    key: &str,
    m: &Match<T>,
    f: impl Fn(&T) -> String,
) {
    let (neg, text) = match *m {
        Match::Any => return,
        Match::Is(x) => (false, f(&x)),
        Match::Not(x) => (true, f(&x)),
        Match::In(id) => (
            false,
            alloc::format!("{{ {} }}", join(rs.set::<T>(id), ", ", &f)),
        ),
        Match::NotIn(id) => (
            true,
            alloc::format!("{{ {} }}", join(rs.set::<T>(id), ", ", &f)),
        ),
    };
    let _ = write!(s, " {key} {}{text}", if neg { "!= " } else { "" });
}

/// A name as nft reads it: a word as it is, anything else quoted; `None` when it holds
/// what no nft string can (a quote, a line end).
fn nft_name(name: &str) -> Option<String> {
    let word = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    match word {
        true => Some(name.into()),
        false if name.contains(['"', '\n', '\r']) => None,
        false => Some(alloc::format!("\"{name}\"")),
    }
}

fn nft_rule(rs: &Ruleset, c: &Chain, index: usize, r: &Rule) -> Result<String, PrintError> {
    let err = |what| PrintError {
        chain: c.name.clone(),
        index,
        line: r.line,
        what,
        syntax: "nft",
    };
    // interface names go in quotes, where `*` would make a wildcard
    for m in [&r.in_if, &r.out_if] {
        let ids: &[crate::rule::Iface] = match m {
            Match::Any => &[],
            Match::Is(i) | Match::Not(i) => core::slice::from_ref(i),
            Match::In(s) | Match::NotIn(s) => rs.set(*s),
        };
        if ids.iter().any(|i| {
            rs.ifaces[i.0 as usize]
                .name
                .contains(['"', '*', '\\', '\n'])
        }) {
            return Err(err("an interface name with a quote, `*` or backslash"));
        }
    }
    let mut s = String::new();
    let ifname = |i: &crate::rule::Iface| {
        let f = &rs.ifaces[i.0 as usize];
        alloc::format!("\"{}{}\"", f.name, if f.wildcard { "*" } else { "" })
    };
    nft_field(rs, &mut s, "iifname", &r.in_if, ifname);
    nft_field(rs, &mut s, "oifname", &r.out_if, ifname);
    nft_field(rs, &mut s, "ip saddr", &r.src, nft_prefix);
    nft_field(rs, &mut s, "ip daddr", &r.dst, nft_prefix);
    let implied =
        !r.sport.is_any() || !r.dport.is_any() || !r.icmp.is_any() || r.tcp_flags.is_some();
    if !implied {
        nft_field(rs, &mut s, "meta l4proto", &r.proto, |p| proto_name(*p));
    }
    let l4 = match r.proto {
        Match::Is(6) => "tcp",
        _ => "udp",
    };
    nft_field(
        rs,
        &mut s,
        &alloc::format!("{l4} sport"),
        &r.sport,
        nft_ports,
    );
    nft_field(
        rs,
        &mut s,
        &alloc::format!("{l4} dport"),
        &r.dport,
        nft_ports,
    );
    if let Some(TcpFlags { mask, comp, invert }) = r.tcp_flags {
        let bars = |b: u8| flag_names(b, false).replace(',', "|");
        let op = if invert { "!=" } else { "==" };
        let _ = write!(s, " tcp flags & ({}) {op} {}", bars(mask), bars(comp));
    }
    match r.icmp {
        Match::Is(IcmpType {
            ty,
            code: Some(code),
        }) => {
            let _ = write!(
                s,
                " icmp type {} icmp code {code}",
                nft_icmp(&IcmpType { ty, code: None })
            );
        }
        Match::Not(IcmpType { code: Some(_), .. }) => {
            return Err(err("a negated ICMP type and code"))
        }
        Match::In(id) | Match::NotIn(id)
            if rs.set::<IcmpType>(id).iter().any(|t| t.code.is_some()) =>
        {
            return Err(err("a set of ICMP types with codes"))
        }
        _ => nft_field(rs, &mut s, "icmp type", &r.icmp, nft_icmp),
    }
    if let Some(StateSet(bits)) = r.state {
        let names: alloc::vec::Vec<String> = CtState::ALL
            .iter()
            .filter(|x| bits & x.bit() != 0)
            .map(|x| x.name().to_ascii_lowercase())
            .collect();
        let _ = write!(s, " ct state {{ {} }}", names.join(", "));
    }
    let verdict = match r.target {
        Target::Verdict(Action::Accept) => "accept".into(),
        Target::Verdict(Action::Drop) => "drop".into(),
        Target::Verdict(Action::Reject(RejectWith::TcpReset)) => "reject with tcp reset".into(),
        Target::Verdict(Action::Reject(rw)) => {
            let name = reject_name(rw)
                .trim_start_matches("icmp-")
                .replace("proto-", "prot-");
            alloc::format!("reject with icmp {name}")
        }
        Target::Return => "return".into(),
        Target::Jump(t) | Target::Goto(t) => {
            let name =
                nft_name(&rs.chain(t).name).ok_or_else(|| err("a chain name with a quote"))?;
            let verb = if matches!(r.target, Target::Jump(_)) {
                "jump"
            } else {
                "goto"
            };
            alloc::format!("{verb} {name}")
        }
        Target::Continue => "counter".into(),
    };
    let _ = write!(s, " {verdict}");
    Ok(String::from(s.trim_start()))
}

/// `rs` as an nft ruleset: one `table ip filter` with every chain.
pub fn nft(rs: &Ruleset) -> Result<String, PrintError> {
    nft_table(rs, "", |c| {
        (c.rules.iter().enumerate())
            .map(|(i, r)| nft_rule(rs, c, i, r))
            .collect()
    })
}

/// One `table ip filter` holding `sets` (declarations) and every chain, each chain's
/// rules the lines `rules` gives for it.
fn nft_table(
    rs: &Ruleset,
    sets: &str,
    mut rules: impl FnMut(&Chain) -> Result<Vec<String>, PrintError>,
) -> Result<String, PrintError> {
    let mut out = String::new();
    let _ = writeln!(out, "table ip filter {{");
    out.push_str(sets);
    for c in &rs.chains {
        let name = nft_name(&c.name).ok_or_else(|| PrintError {
            chain: c.name.clone(),
            index: 0,
            line: c.line,
            what: "a chain name with a quote",
            syntax: "nft",
        })?;
        let _ = writeln!(out, "\tchain {name} {{");
        if let Some(h) = c.hook {
            let policy = if c.policy == Action::Drop {
                "drop"
            } else {
                "accept"
            };
            let hook = h.chain_name().to_ascii_lowercase();
            let _ = writeln!(
                out,
                "\t\ttype filter hook {hook} priority filter; policy {policy};"
            );
        }
        for line in rules(c)? {
            let _ = writeln!(out, "\t\t{line}");
        }
        let _ = writeln!(out, "\t}}");
    }
    let _ = writeln!(out, "}}");
    Ok(out)
}
