//! `iptables-save` output: `*table` blocks ending in `COMMIT`, `:CHAIN POLICY [p:b]`
//! declarations and `[p:b] -A CHAIN options` rules, tokenized as `iptables-restore`
//! does (blanks separate, double quotes group). Of the tables only `filter` may hold
//! rules. The options: `-s`/`-d` (prefixes, dotted masks, comma lists, `!`), `-p`,
//! `-i`/`-o` (`+` wildcards), the tcp/udp/icmp matches (`--sport`, `--dport`,
//! `--tcp-flags`, `--syn`, `--icmp-type`), `-m multiport --sports/--dports`,
//! `-m conntrack --ctstate`, `-m state --state`, `-m comment`, and `-j ACCEPT|DROP|
//! REJECT [--reject-with ...]|RETURN|CHAIN`, `-g CHAIN`. Anything else is an error
//! at its column.

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::values;
use super::{Budget, ParseError, Pos, What};
use crate::rule::{
    Action, ChainId, Hook, IcmpType, Match, PortRange, Prefix, Rule, Ruleset, StateSet, Target,
    TcpFlags,
};

struct Tok<'a> {
    text: Cow<'a, str>,
    pos: Pos,
}

/// Splits a line as iptables-restore does.
fn tokenize(line: &str, n: u32) -> Result<Vec<Tok<'_>>, What> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' || b[i] == b'\t' || b[i] == b'\r' {
            i += 1;
            continue;
        }
        let pos = Pos {
            line: n,
            col: i as u32 + 1,
        };
        if b[i] == b'"' {
            let mut s = String::new();
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err(What::Quote),
                    Some(b'"') => break,
                    Some(b'\\') if matches!(b.get(i + 1), Some(b'"' | b'\\')) => {
                        s.push(char::from(b[i + 1]));
                        i += 2;
                    }
                    Some(_) => {
                        let ch = line[i..].chars().next().unwrap_or(' ');
                        s.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
            i += 1;
            out.push(Tok {
                text: Cow::Owned(s),
                pos,
            });
        } else {
            let start = i;
            while i < b.len() && !matches!(b[i], b' ' | b'\t' | b'\r') {
                i += 1;
            }
            out.push(Tok {
                text: Cow::Borrowed(&line[start..i]),
                pos,
            });
        }
    }
    Ok(out)
}

/// A jump or goto waiting for its chain to be declared (resolved at `COMMIT`).
struct Pending {
    chain: ChainId,
    rule: usize,
    target: String,
    goto: bool,
    pos: Pos,
}

struct Parser<'f> {
    file: &'f str,
    rs: Ruleset,
    declared: Vec<bool>,
    pending: Vec<Pending>,
}

pub(super) fn parse(file: &str, text: &str, budget: &mut Budget) -> Result<Ruleset, ParseError> {
    let mut p = Parser {
        file,
        rs: Ruleset::filter(),
        declared: alloc::vec![false; 3],
        pending: Vec::new(),
    };
    let mut table: Option<(String, Pos)> = None;
    let mut filter_seen = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i as u32 + 1;
        let toks = tokenize(raw, n).map_err(|w| {
            let col = raw.find('"').map_or(1, |c| c as u32 + 1);
            Pos { line: n, col }.err(file, w)
        })?;
        let Some(first) = toks.first() else { continue };
        let at = first.pos;
        let word: &str = &first.text;
        if word.starts_with('#') {
            continue;
        }
        let in_filter = table.as_ref().is_some_and(|(t, _)| t == "filter");
        match word {
            w if w.starts_with('*') => {
                if let Some((t, _)) = &table {
                    return Err(at.err(file, What::NoCommit(t.clone())));
                }
                let name = &w[1..];
                if name == "filter" {
                    if filter_seen {
                        return Err(at.err(file, What::Twice("*filter".into())));
                    }
                    filter_seen = true;
                }
                table = Some((name.to_string(), at));
            }
            "COMMIT" => match table.take() {
                Some((t, _)) if t == "filter" => p.resolve()?,
                Some(_) => {}
                None => {
                    return Err(at.err(
                        file,
                        What::Expected {
                            expected: "a `*table` line before",
                            found: "`COMMIT`".into(),
                        },
                    ))
                }
            },
            _ if table.is_none() => {
                return Err(at.err(
                    file,
                    What::Expected {
                        expected: "a `*table` line",
                        found: alloc::format!("`{word}`"),
                    },
                ))
            }
            w if w.starts_with(':') => {
                if in_filter {
                    p.declare(&toks)?;
                }
            }
            _ => {
                // `[packets:bytes]` counters before the rule (iptables-save -c)
                let skip = usize::from(word.starts_with('['));
                let rest = &toks[skip..];
                let Some(cmd) = rest.first() else { continue };
                if !matches!(&*cmd.text, "-A" | "--append") {
                    return Err(cmd.pos.err(
                        file,
                        What::Expected {
                            expected: "`-A CHAIN` (iptables-save's rule form)",
                            found: alloc::format!("`{}`", cmd.text),
                        },
                    ));
                }
                if let Some((t, _)) = table.as_ref().filter(|_| !in_filter) {
                    return Err(cmd.pos.err(file, What::Table(t.clone())));
                }
                budget.rule().map_err(|w| cmd.pos.err(file, w))?;
                p.rule(rest, budget)?;
            }
        }
    }
    if let Some((t, at)) = table {
        return Err(at.err(file, What::NoCommit(t)));
    }
    Ok(p.rs)
}

impl Parser<'_> {
    fn err(&self, pos: Pos, what: What) -> ParseError {
        pos.err(self.file, what)
    }
    fn bad(&self, t: &Tok, what: &'static str) -> ParseError {
        t.pos.bad(self.file, what, &t.text)
    }

    /// `:NAME POLICY [p:b]`.
    fn declare(&mut self, toks: &[Tok]) -> Result<(), ParseError> {
        let t = &toks[0];
        let name = &t.text[1..];
        if name.is_empty() || name.len() > 28 || name.starts_with('-') {
            return Err(self.bad(t, "chain name"));
        }
        let policy = toks.get(1).ok_or_else(|| {
            self.err(
                t.pos,
                What::Expected {
                    expected: "a policy after the chain name",
                    found: "the end of the line".into(),
                },
            )
        })?;
        let builtin = Hook::ALL.into_iter().find(|h| h.chain_name() == name);
        match (builtin, &*policy.text) {
            (Some(_), "ACCEPT" | "DROP") | (None, "-") => {}
            (Some(_), _) => return Err(self.bad(policy, "policy (ACCEPT or DROP)")),
            (None, "ACCEPT" | "DROP") => {
                return Err(self.err(
                    t.pos,
                    What::Unsupported(alloc::format!(
                        "built-in chain `{name}` in the filter table"
                    )),
                ))
            }
            (None, _) => return Err(self.bad(policy, "policy (`-` for a user chain)")),
        }
        let id = match self.rs.chain_by_name(name) {
            Some(id) if self.declared[id.0 as usize] => {
                return Err(self.err(t.pos, What::DuplicateChain(name.into())))
            }
            Some(id) => id,
            None => {
                self.rs.chains.push(crate::rule::Chain {
                    name: name.into(),
                    hook: None,
                    policy: Action::Accept,
                    rules: Vec::new(),
                    line: 0,
                });
                self.declared.push(false);
                ChainId(self.rs.chains.len() as u32 - 1)
            }
        };
        self.declared[id.0 as usize] = true;
        let c = self.rs.chain_mut(id);
        c.line = t.pos.line;
        if builtin.is_some() {
            c.policy = if &*policy.text == "DROP" {
                Action::Drop
            } else {
                Action::Accept
            };
        }
        Ok(())
    }

    fn resolve(&mut self) -> Result<(), ParseError> {
        for p in core::mem::take(&mut self.pending) {
            let Some(t) = self.rs.chain_by_name(&p.target).filter(|t| t.0 >= 3) else {
                return Err(self.err(p.pos, What::UnknownChain(p.target)));
            };
            let r = &mut self.rs.chain_mut(p.chain).rules[p.rule];
            r.target = if p.goto {
                Target::Goto(t)
            } else {
                Target::Jump(t)
            };
        }
        Ok(())
    }

    /// `-A CHAIN options...` (`toks[0]` is `-A`).
    fn rule(&mut self, toks: &[Tok], budget: &mut Budget) -> Result<(), ParseError> {
        let name = toks.get(1).ok_or_else(|| {
            self.err(
                toks[0].pos,
                What::Expected {
                    expected: "a chain after `-A`",
                    found: "the end of the line".into(),
                },
            )
        })?;
        let chain = self
            .rs
            .chain_by_name(&name.text)
            .filter(|c| self.declared[c.0 as usize])
            .ok_or_else(|| self.err(name.pos, What::UnknownChain(name.text.to_string())))?;
        let mut r = Rule::new(Target::Continue);
        r.line = name.pos.line;
        let mut opts = RuleOpts::default();
        let mut i = 2;
        while i < toks.len() {
            i = self.option(toks, i, &mut r, &mut opts, budget)?;
        }
        if let Some(rw) = opts.reject_with {
            match r.target {
                Target::Verdict(Action::Reject(_)) => {
                    r.target = Target::Verdict(Action::Reject(rw.0))
                }
                _ => {
                    return Err(self.err(
                        rw.1,
                        What::Needs("`--reject-with` needs `-j REJECT`".into()),
                    ))
                }
            }
        }
        let index = self.rs.chain(chain).rules.len();
        if let Some((target, goto, pos)) = opts.jump {
            self.pending.push(Pending {
                chain,
                rule: index,
                target,
                goto,
                pos,
            });
        }
        self.rs.chain_mut(chain).rules.push(r);
        Ok(())
    }
}

/// What one rule's options have set so far beyond the rule itself.
#[derive(Default)]
struct RuleOpts {
    modules: Vec<String>,
    negate: Option<Pos>,
    seen: Vec<&'static str>,
    jump: Option<(String, bool, Pos)>,
    reject_with: Option<(crate::rule::RejectWith, Pos)>,
}

impl Parser<'_> {
    /// Reads the option at `toks[i]` into `r`; returns the index after it.
    fn option(
        &mut self,
        toks: &[Tok],
        i: usize,
        r: &mut Rule,
        o: &mut RuleOpts,
        budget: &mut Budget,
    ) -> Result<usize, ParseError> {
        let t = &toks[i];
        let opt: &str = &t.text;
        if opt == "!" {
            if o.negate.is_some() {
                return Err(self.err(t.pos, What::Twice("!".into())));
            }
            o.negate = Some(t.pos);
            return Ok(i + 1);
        }
        let arg = |k: usize| -> Result<&Tok, ParseError> {
            toks.get(i + k).ok_or_else(|| {
                self.err(
                    t.pos,
                    What::Expected {
                        expected: "a value after the option",
                        found: "the end of the line".into(),
                    },
                )
            })
        };
        let neg = o.negate.take().is_some();
        // options `!` may not negate
        let plain = |p: &Self| -> Result<(), ParseError> {
            match neg {
                true => Err(p.err(
                    t.pos,
                    What::Unsupported(alloc::format!("`!` before `{opt}`")),
                )),
                false => Ok(()),
            }
        };
        let key: &'static str = match opt {
            "-s" | "--source" | "--src" => "-s",
            "-d" | "--destination" | "--dst" => "-d",
            "-p" | "--protocol" => "-p",
            "-i" | "--in-interface" => "-i",
            "-o" | "--out-interface" => "-o",
            "-m" | "--match" => "-m",
            "--sport" | "--source-port" => "--sport",
            "--dport" | "--destination-port" => "--dport",
            "--sports" | "--source-ports" => "--sports",
            "--dports" | "--destination-ports" => "--dports",
            "--icmp-type" => "--icmp-type",
            "--ctstate" => "--ctstate",
            "--state" => "--state",
            "--tcp-flags" => "--tcp-flags",
            "--syn" => "--syn",
            "--comment" => "--comment",
            "-j" | "--jump" => "-j",
            "-g" | "--goto" => "-g",
            "--reject-with" => "--reject-with",
            "-c" | "--set-counters" => "-c",
            _ if opt.starts_with('-') => {
                return Err(self.err(t.pos, What::Option(opt.to_string())));
            }
            _ => {
                return Err(self.err(
                    t.pos,
                    What::Expected {
                        expected: "an option",
                        found: alloc::format!("`{opt}`"),
                    },
                ))
            }
        };
        // Options that set the same field cannot both be given.
        let field = match key {
            "-m" | "--comment" | "-c" => None,
            "--sport" | "--sports" => Some("--sport"),
            "--dport" | "--dports" => Some("--dport"),
            "--tcp-flags" | "--syn" => Some("--tcp-flags"),
            "--ctstate" | "--state" => Some("--ctstate"),
            "-j" | "-g" => Some("-j"),
            k => Some(k),
        };
        if let Some(f) = field {
            if o.seen.contains(&f) {
                return Err(self.err(t.pos, What::Twice(opt.to_string())));
            }
            o.seen.push(f);
        }
        let module = |o: &RuleOpts, m: &str| o.modules.iter().any(|x| x == m);
        let proto_is = |r: &Rule, p: u8| r.proto == Match::Is(p);
        match key {
            "-s" | "-d" => {
                let v = arg(1)?;
                let mut ps = Vec::new();
                for part in v.text.split(',') {
                    ps.push(values::prefix(part).map_err(|w| self.bad(v, w))?);
                }
                let m = match (ps.len(), neg) {
                    (1, false) => Match::Is(ps[0]),
                    (1, true) => Match::Not(ps[0]),
                    (_, true) => {
                        return Err(self.err(
                            t.pos,
                            What::Unsupported("`!` with several addresses".into()),
                        ))
                    }
                    _ => {
                        budget
                            .charge(ps.len() * core::mem::size_of::<Prefix>() + 24)
                            .map_err(|w| self.err(v.pos, w))?;
                        Match::In(self.rs.add_set(ps))
                    }
                };
                if key == "-s" {
                    r.src = m;
                } else {
                    r.dst = m;
                }
                Ok(i + 2)
            }
            "-p" => {
                let v = arg(1)?;
                let p = values::protocol(&v.text).map_err(|w| self.bad(v, w))?;
                r.proto = match (p, neg) {
                    (None, false) => Match::Any,
                    (None, true) => {
                        return Err(self.bad(v, "protocol (`! -p all` matches nothing)"))
                    }
                    (Some(p), false) => Match::Is(p),
                    (Some(p), true) => Match::Not(p),
                };
                Ok(i + 2)
            }
            "-i" | "-o" => {
                let v = arg(1)?;
                let name: &str = &v.text;
                let (base, wild) = match name.strip_suffix('+') {
                    Some(b) => (b, true),
                    None => (name, false),
                };
                if name.is_empty() || name.len() > 15 || base.contains(['/', ' ']) {
                    return Err(self.bad(v, "interface name"));
                }
                let m = match (wild && base.is_empty(), neg) {
                    (true, false) => Match::Any,
                    (true, true) => return Err(self.bad(v, "interface (`! -i +` matches nothing)")),
                    (false, n) => {
                        let id = self.rs.iface(base, wild);
                        if n {
                            Match::Not(id)
                        } else {
                            Match::Is(id)
                        }
                    }
                };
                if key == "-i" {
                    r.in_if = m;
                } else {
                    r.out_if = m;
                }
                Ok(i + 2)
            }
            "-m" => {
                plain(self)?;
                let v = arg(1)?;
                let m: &str = &v.text;
                let ok = match m {
                    "tcp" => proto_is(r, 6),
                    "udp" => proto_is(r, 17),
                    "icmp" => proto_is(r, 1),
                    "multiport" => proto_is(r, 6) || proto_is(r, 17),
                    "conntrack" | "state" | "comment" => true,
                    _ => return Err(self.err(v.pos, What::Match(m.to_string()))),
                };
                if !ok {
                    let p = if m == "icmp" {
                        "-p icmp"
                    } else {
                        "-p tcp` or `-p udp"
                    };
                    return Err(
                        self.err(v.pos, What::Needs(alloc::format!("`-m {m}` needs `{p}`")))
                    );
                }
                o.modules.push(m.to_string());
                Ok(i + 2)
            }
            "--sport" | "--dport" | "--sports" | "--dports" => {
                let multi = key.ends_with('s');
                let needs = if multi {
                    "multiport"
                } else if proto_is(r, 6) {
                    "tcp"
                } else {
                    "udp"
                };
                if !(proto_is(r, 6) || proto_is(r, 17)) || (multi && !module(o, needs)) {
                    let what = if multi {
                        "`-m multiport` after `-p tcp` or `-p udp`"
                    } else {
                        "`-p tcp` or `-p udp`"
                    };
                    return Err(
                        self.err(t.pos, What::Needs(alloc::format!("`{opt}` needs {what}")))
                    );
                }
                let v = arg(1)?;
                let mut rs = Vec::new();
                for part in v.text.split(',') {
                    rs.push(values::port_range_colon(part).map_err(|w| self.bad(v, w))?);
                    if !multi && rs.len() > 1 {
                        return Err(self.bad(v, "port (a list needs `-m multiport --dports`)"));
                    }
                }
                let m = match (rs.len(), neg) {
                    (1, false) => Match::Is(rs[0]),
                    (1, true) => Match::Not(rs[0]),
                    (_, n) => {
                        budget
                            .charge(rs.len() * core::mem::size_of::<PortRange>() + 24)
                            .map_err(|w| self.err(v.pos, w))?;
                        let id = self.rs.add_set(rs);
                        if n {
                            Match::NotIn(id)
                        } else {
                            Match::In(id)
                        }
                    }
                };
                if key.starts_with("--s") {
                    r.sport = m;
                } else {
                    r.dport = m;
                }
                Ok(i + 2)
            }
            "--icmp-type" => {
                if !proto_is(r, 1) {
                    return Err(
                        self.err(t.pos, What::Needs("`--icmp-type` needs `-p icmp`".into()))
                    );
                }
                let v = arg(1)?;
                let ty: Option<IcmpType> =
                    values::icmp_type(&v.text).map_err(|w| self.bad(v, w))?;
                r.icmp = match (ty, neg) {
                    (None, false) => Match::Any,
                    (None, true) => return Err(self.bad(v, "ICMP type (`! any` matches nothing)")),
                    (Some(t), false) => Match::Is(t),
                    (Some(t), true) => Match::Not(t),
                };
                Ok(i + 2)
            }
            "--ctstate" | "--state" => {
                let m = if key == "--ctstate" {
                    "conntrack"
                } else {
                    "state"
                };
                if !module(o, m) {
                    return Err(
                        self.err(t.pos, What::Needs(alloc::format!("`{opt}` needs `-m {m}`")))
                    );
                }
                let v = arg(1)?;
                let mut set = StateSet::default();
                for s in v.text.split(',') {
                    set = set.with(values::ct_state(s).map_err(|w| self.bad(v, w))?);
                }
                r.state = Some(if neg { set.complement() } else { set });
                Ok(i + 2)
            }
            "--tcp-flags" | "--syn" => {
                if !proto_is(r, 6) {
                    return Err(
                        self.err(t.pos, What::Needs(alloc::format!("`{opt}` needs `-p tcp`")))
                    );
                }
                let (mask, comp, next) = if key == "--syn" {
                    (0x17, 0x02, i + 1)
                } else {
                    let (m, c) = (arg(1)?, arg(2)?);
                    let mask = values::tcp_flags(&m.text).map_err(|w| self.bad(m, w))?;
                    let comp = values::tcp_flags(&c.text).map_err(|w| self.bad(c, w))?;
                    (mask, comp, i + 3)
                };
                r.tcp_flags = Some(TcpFlags {
                    mask,
                    comp: comp & mask,
                    invert: neg,
                });
                Ok(next)
            }
            "--comment" => {
                plain(self)?;
                if !module(o, "comment") {
                    return Err(
                        self.err(t.pos, What::Needs("`--comment` needs `-m comment`".into()))
                    );
                }
                arg(1)?;
                Ok(i + 2)
            }
            "-c" => {
                plain(self)?;
                arg(2)?;
                Ok(i + 3)
            }
            "-j" | "-g" => {
                plain(self)?;
                let v = arg(1)?;
                let name: &str = &v.text;
                r.target = match (key, name) {
                    ("-j", "ACCEPT") => Target::Verdict(Action::Accept),
                    ("-j", "DROP") => Target::Verdict(Action::Drop),
                    ("-j", "REJECT") => Target::Verdict(Action::Reject(Default::default())),
                    ("-j", "RETURN") => Target::Return,
                    (_, n)
                        if n.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                            && self.rs.chain_by_name(n).is_none() =>
                    {
                        return Err(self.err(v.pos, What::Target(n.to_string())))
                    }
                    (_, n) => {
                        o.jump = Some((n.to_string(), key == "-g", v.pos));
                        Target::Continue
                    }
                };
                Ok(i + 2)
            }
            "--reject-with" => {
                plain(self)?;
                let v = arg(1)?;
                let rw = values::reject_with(&v.text).map_err(|w| self.bad(v, w))?;
                if rw == crate::rule::RejectWith::TcpReset && !proto_is(r, 6) {
                    return Err(self.err(
                        v.pos,
                        What::Needs("`--reject-with tcp-reset` needs `-p tcp`".into()),
                    ));
                }
                o.reject_with = Some((rw, v.pos));
                Ok(i + 2)
            }
            _ => Err(self.err(t.pos, What::Option(opt.to_string()))),
        }
    }
}
