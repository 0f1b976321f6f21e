//! `nft list ruleset` output (what `nft -f` reads): `table ip|inet NAME { ... }` blocks
//! with named sets and chains. A base chain (`type filter hook input|forward|output
//! priority P; policy accept|drop;`) is entered by its hook, at most one per hook; other
//! chains are reached by `jump`/`goto`. Rules match on `ip saddr|daddr`, `ip protocol`,
//! `meta l4proto`, `iifname`/`oifname` (`"eth*"` wildcards), `tcp|udp sport|dport`,
//! `tcp flags`, `icmp type|code`, `ct state`, each with `!=` and with anonymous
//! (`{ 22, 80-90 }`) or named (`@set`) sets, and end in `accept`, `drop`, `reject [with
//! ...]`, `jump`, `goto` or `return`; `counter` and `comment` are passed over. Tables of
//! families other than `ip` and `inet`, and filter chains on other hooks, may exist
//! only empty. Anything else is an error at its column.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::values;
use super::{Budget, ParseError, Pos, What};
use crate::rule::{
    Action, Chain, ChainId, Element, Hook, IcmpType, Iface, Match, PortRange, Prefix, RejectWith,
    Rule, Ruleset, StateSet, Target, TcpFlags,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Word,
    Str,
    Sym,
    /// The end of a line.
    Eol,
}

#[derive(Debug, Clone, Copy)]
struct Tok<'a> {
    kind: Kind,
    text: &'a str,
    pos: Pos,
}

fn word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'-' | b'/' | b'*' | b'+')
}

fn lex(text: &str) -> Result<Vec<Tok<'_>>, (Pos, What)> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let (mut i, mut line, mut line_start) = (0, 1u32, 0);
    while i < b.len() {
        let pos = Pos {
            line,
            col: (i - line_start) as u32 + 1,
        };
        let c = b[i];
        let (kind, len) = match c {
            b'\n' => (Kind::Eol, 1),
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' => match text[i + 1..].find(['"', '\n']) {
                Some(e) if b[i + 1 + e] == b'"' => (Kind::Str, e + 2),
                _ => return Err((pos, What::Quote)),
            },
            b'!' | b'=' if b.get(i + 1) == Some(&b'=') => (Kind::Sym, 2),
            _ if word_char(c) => (
                Kind::Word,
                b[i..].iter().take_while(|&&c| word_char(c)).count(),
            ),
            _ if c.is_ascii() => (Kind::Sym, 1),
            _ => {
                let ch = text[i..].chars().next().unwrap_or(' ');
                return Err((
                    pos,
                    What::Bad {
                        what: "character",
                        text: ch.to_string(),
                    },
                ));
            }
        };
        let t = &text[i..i + len];
        out.push(Tok {
            kind,
            text: if kind == Kind::Str {
                &t[1..t.len() - 1]
            } else {
                t
            },
            pos,
        });
        i += len;
        if kind == Kind::Eol {
            line += 1;
            line_start = i;
        }
    }
    Ok(out)
}

/// The element type of a named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetType {
    Addr,
    Service,
    Proto,
    Ifname,
    Icmp,
}

/// A field's value as written: one value, an anonymous set, or a named set.
enum Val<'a> {
    One(Tok<'a>),
    Set(Vec<Tok<'a>>),
    Named(Tok<'a>),
}

/// A pending jump or goto: chain, rule index, where its target is named, the name,
/// goto or not.
type Pending = (ChainId, usize, Pos, String, bool);

struct Table {
    chains: BTreeMap<String, ChainId>,
    sets: BTreeMap<String, (SetType, crate::rule::SetId)>,
    /// Jumps and gotos to resolve when the table ends (chains may come later).
    pending: Vec<Pending>,
}

struct Parser<'a, 'b> {
    file: &'a str,
    toks: Vec<Tok<'a>>,
    at: usize,
    rs: Ruleset,
    budget: &'b mut Budget,
}

pub(super) fn parse(file: &str, text: &str, budget: &mut Budget) -> Result<Ruleset, ParseError> {
    let toks = lex(text).map_err(|(p, w)| p.err(file, w))?;
    let mut p = Parser {
        file,
        toks,
        at: 0,
        rs: Ruleset::default(),
        budget,
    };
    p.file_items()?;
    Ok(p.rs)
}

impl<'a> Parser<'a, '_> {
    fn err(&self, pos: Pos, what: What) -> ParseError {
        pos.err(self.file, what)
    }
    fn end_pos(&self) -> Pos {
        self.toks.last().map_or(Pos { line: 1, col: 1 }, |t| t.pos)
    }
    fn peek(&self) -> Option<Tok<'a>> {
        self.toks.get(self.at).copied()
    }
    fn next(&mut self) -> Option<Tok<'a>> {
        let t = self.peek();
        self.at += usize::from(t.is_some());
        t
    }
    fn found(t: Option<Tok>) -> String {
        match t {
            None => "the end of the file".into(),
            Some(t) if t.kind == Kind::Eol => "the end of the line".into(),
            Some(t) => alloc::format!("`{}`", t.text),
        }
    }
    fn expected(&self, expected: &'static str, t: Option<Tok>) -> ParseError {
        let pos = t.map_or(self.end_pos(), |t| t.pos);
        self.err(
            pos,
            What::Expected {
                expected,
                found: Self::found(t),
            },
        )
    }
    /// The next token, which must be a word (or a string when `string`).
    fn word(&mut self, expected: &'static str) -> Result<Tok<'a>, ParseError> {
        match self.next() {
            Some(t) if t.kind == Kind::Word || t.kind == Kind::Str => Ok(t),
            t => Err(self.expected(expected, t)),
        }
    }
    fn sym(&mut self, s: &'static str) -> Result<Tok<'a>, ParseError> {
        match self.next() {
            Some(t) if t.kind == Kind::Sym && t.text == s => Ok(t),
            t => Err(self.expected(s, t)),
        }
    }
    fn at_sym(&self, s: &str) -> bool {
        self.peek()
            .is_some_and(|t| t.kind == Kind::Sym && t.text == s)
    }
    /// Skips line ends and `;`.
    fn blank(&mut self) {
        while self
            .peek()
            .is_some_and(|t| t.kind == Kind::Eol || (t.kind == Kind::Sym && t.text == ";"))
        {
            self.at += 1;
        }
    }
    fn at_end_of_statement(&self) -> bool {
        match self.peek() {
            None => true,
            Some(t) => {
                t.kind == Kind::Eol || (t.kind == Kind::Sym && (t.text == ";" || t.text == "}"))
            }
        }
    }
    fn unsupported(&self, t: Tok, what: &str) -> ParseError {
        self.err(
            t.pos,
            What::Unsupported(alloc::format!("{what} `{}`", t.text)),
        )
    }

    fn file_items(&mut self) -> Result<(), ParseError> {
        loop {
            self.blank();
            let Some(t) = self.next() else { return Ok(()) };
            match (t.kind, t.text) {
                (Kind::Word, "table") => self.table()?,
                (Kind::Word, "flush") => {
                    let w = self.word("`ruleset`")?;
                    if w.text != "ruleset" {
                        return Err(self.unsupported(w, "command `flush`"));
                    }
                }
                (Kind::Word, _) => {
                    return Err(
                        self.unsupported(t, "command (only `table NAME { ... }` blocks are read)")
                    )
                }
                _ => return Err(self.expected("`table`", Some(t))),
            }
        }
    }

    fn table(&mut self) -> Result<(), ParseError> {
        let first = self.word("a table family or name")?;
        let (family, name) = match first.text {
            "ip" | "inet" | "ip6" | "arp" | "bridge" | "netdev" => {
                (first, self.word("a table name")?)
            }
            _ => (
                Tok {
                    text: "ip",
                    ..first
                },
                first,
            ),
        };
        self.sym("{")?;
        let supported = matches!(family.text, "ip" | "inet");
        let mut table = Table {
            chains: BTreeMap::new(),
            sets: BTreeMap::new(),
            pending: Vec::new(),
        };
        loop {
            self.blank();
            let Some(t) = self.next() else {
                return Err(self.expected("`}` closing the table", None));
            };
            match (t.kind, t.text) {
                (Kind::Sym, "}") => break,
                (Kind::Word, "set") => self.set(&mut table)?,
                (Kind::Word, "chain") => self.chain(&mut table, name, family, supported)?,
                (Kind::Word, "comment") => {
                    self.word("a comment")?;
                }
                _ => return Err(self.unsupported(t, "table item")),
            }
        }
        for (chain, rule, pos, target, goto) in table.pending {
            let Some(&t) = table.chains.get(&target) else {
                return Err(self.err(pos, What::UnknownChain(target)));
            };
            self.rs.chain_mut(chain).rules[rule].target = if goto {
                Target::Goto(t)
            } else {
                Target::Jump(t)
            };
        }
        Ok(())
    }

    fn set(&mut self, table: &mut Table) -> Result<(), ParseError> {
        let name = self.word("a set name")?;
        self.sym("{")?;
        let mut ty = None;
        let mut id = None;
        loop {
            self.blank();
            let Some(t) = self.next() else {
                return Err(self.expected("`}` closing the set", None));
            };
            match (t.kind, t.text) {
                (Kind::Sym, "}") => break,
                (Kind::Word, "type") => {
                    let w = self.word("a set type")?;
                    ty = Some(match w.text {
                        "ipv4_addr" => SetType::Addr,
                        "inet_service" => SetType::Service,
                        "inet_proto" => SetType::Proto,
                        "ifname" => SetType::Ifname,
                        "icmp_type" => SetType::Icmp,
                        _ => return Err(self.unsupported(w, "set type")),
                    });
                    if !self.at_end_of_statement() {
                        let t = self.peek().unwrap_or(w);
                        return Err(self.unsupported(t, "set type part"));
                    }
                }
                (Kind::Word, "flags") => {
                    for f in self.comma_words()? {
                        if !matches!(f.text, "interval" | "constant") {
                            return Err(self.unsupported(f, "set flag"));
                        }
                    }
                }
                (Kind::Word, "elements") => {
                    self.sym("=")?;
                    let Some(ty) = ty else {
                        return Err(self.expected("`type` before the elements", Some(t)));
                    };
                    let Val::Set(items) = self.value()? else {
                        return Err(self.expected("`{` with the elements", self.peek()));
                    };
                    id = Some(self.store(ty, &items)?);
                }
                (Kind::Word, "size" | "comment" | "policy") => {
                    self.word("a value")?;
                }
                (Kind::Word, "auto-merge") => {}
                _ => return Err(self.unsupported(t, "set property")),
            }
        }
        let Some(ty) = ty else {
            return Err(self.expected("a `type` in the set", Some(name)));
        };
        let id = match id {
            Some(id) => id,
            None => self.store(ty, &[])?,
        };
        table.sets.insert(name.text.into(), (ty, id));
        Ok(())
    }

    /// Words separated by commas, up to the end of the statement.
    fn comma_words(&mut self) -> Result<Vec<Tok<'a>>, ParseError> {
        let mut out = alloc::vec![self.word("a value")?];
        while self.at_sym(",") {
            self.at += 1;
            out.push(self.word("a value after `,`")?);
        }
        Ok(out)
    }

    /// `{ a, b, ... }`, `@name` or one value.
    fn value(&mut self) -> Result<Val<'a>, ParseError> {
        if self.at_sym("{") {
            self.at += 1;
            let mut items = Vec::new();
            loop {
                self.blank();
                match self.next() {
                    Some(t) if t.kind == Kind::Sym && t.text == "}" => break,
                    Some(t) if t.kind == Kind::Word || t.kind == Kind::Str => items.push(t),
                    t => return Err(self.expected("a set element or `}`", t)),
                }
                self.blank();
                if self.at_sym(",") {
                    self.at += 1;
                }
            }
            return Ok(Val::Set(items));
        }
        if self.at_sym("@") {
            self.at += 1;
            return Ok(Val::Named(self.word("a set name after `@`")?));
        }
        if let Some(t) = self.peek().filter(|t| t.kind == Kind::Sym && t.text == "$") {
            return Err(self.unsupported(t, "variable"));
        }
        Ok(Val::One(self.word("a value")?))
    }

    /// Elements of a set of type `ty` into the ruleset.
    fn store(&mut self, ty: SetType, items: &[Tok]) -> Result<crate::rule::SetId, ParseError> {
        Ok(match ty {
            SetType::Addr => {
                let v = self.items(items, |p, t| p.addrs(t))?;
                self.add(v, t_pos(items))?
            }
            SetType::Service => {
                let v = self.items(items, |p, t| p.ports(t))?;
                self.add(v, t_pos(items))?
            }
            SetType::Proto => {
                let v = self.items(items, |p, t| p.proto(t).map(|x| alloc::vec![x]))?;
                self.add(v, t_pos(items))?
            }
            SetType::Ifname => {
                let v = self.items(items, |p, t| Ok(alloc::vec![p.ifname(t)?]))?;
                self.add(v, t_pos(items))?
            }
            SetType::Icmp => {
                let v = self.items(items, |p, t| p.icmp(t).map(|x| alloc::vec![x]))?;
                self.add(v, t_pos(items))?
            }
        })
    }

    fn items<T>(
        &mut self,
        items: &[Tok],
        f: impl Fn(&mut Self, &Tok) -> Result<Vec<T>, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        let mut out = Vec::new();
        for t in items {
            out.extend(f(self, t)?);
        }
        Ok(out)
    }

    fn add<T: Element>(&mut self, v: Vec<T>, pos: Pos) -> Result<crate::rule::SetId, ParseError> {
        self.budget
            .charge(v.len() * core::mem::size_of::<T>() + 24)
            .map_err(|w| self.err(pos, w))?;
        Ok(self.rs.add_set(v))
    }

    fn bad(&self, t: &Tok, what: &'static str) -> ParseError {
        t.pos.bad(self.file, what, t.text)
    }
    /// An address, prefix or `a-b` range, as prefixes.
    fn addrs(&self, t: &Tok) -> Result<Vec<Prefix>, ParseError> {
        match t.text.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (
                    values::prefix(a).map_err(|w| self.bad(t, w))?,
                    values::prefix(b).map_err(|w| self.bad(t, w))?,
                );
                if a.len() != 32 || b.len() != 32 || a.bits() > b.bits() {
                    return Err(self.bad(t, "address range"));
                }
                Ok(crate::rule::range_prefixes(a.bits(), b.bits()))
            }
            None => Ok(alloc::vec![
                values::prefix(t.text).map_err(|w| self.bad(t, w))?
            ]),
        }
    }
    fn ports(&self, t: &Tok) -> Result<Vec<PortRange>, ParseError> {
        Ok(alloc::vec![
            values::port_range_dash(t.text).map_err(|w| self.bad(t, w))?
        ])
    }
    fn proto(&self, t: &Tok) -> Result<u8, ParseError> {
        match values::protocol(t.text).map_err(|w| self.bad(t, w))? {
            Some(p) => Ok(p),
            None => Err(self.bad(t, "protocol")),
        }
    }
    fn ifname(&mut self, t: &Tok) -> Result<Iface, ParseError> {
        let (base, wild) = match t.text.strip_suffix('*') {
            Some(b) => (b, true),
            None => (t.text, false),
        };
        if t.text.is_empty() || t.text.len() > 15 || base.contains(['*', '/', ' ']) {
            return Err(self.bad(t, "interface name"));
        }
        Ok(self.rs.iface(base, wild))
    }
    fn icmp(&self, t: &Tok) -> Result<IcmpType, ParseError> {
        let ty = values::nft_icmp_type(t.text).map_err(|w| self.bad(t, w))?;
        Ok(IcmpType { ty, code: None })
    }

    /// A field's match from its operator and value(s), `conv` reading one element.
    fn field<T: Element + Copy>(
        &mut self,
        table: &Table,
        ty: SetType,
        conv: impl Fn(&mut Self, &Tok) -> Result<Vec<T>, ParseError>,
    ) -> Result<Match<T>, ParseError> {
        let neg = self.operator();
        let (items, pos) = match self.value()? {
            Val::Named(n) => {
                return match table.sets.get(n.text) {
                    Some(&(t, id)) if t == ty => {
                        Ok(if neg { Match::NotIn(id) } else { Match::In(id) })
                    }
                    Some(_) => Err(self.err(
                        n.pos,
                        What::Needs(alloc::format!("set `@{}` holds another type", n.text)),
                    )),
                    None => Err(self.err(n.pos, What::UnknownSet(n.text.into()))),
                };
            }
            Val::One(t) => (self.items(&[t], &conv)?, t.pos),
            Val::Set(ts) => (self.items(&ts, &conv)?, t_pos(&ts)),
        };
        Ok(match (items.len(), neg) {
            (1, false) => Match::Is(items[0]),
            (1, true) => Match::Not(items[0]),
            (_, n) => {
                let id = self.add(items, pos)?;
                if n {
                    Match::NotIn(id)
                } else {
                    Match::In(id)
                }
            }
        })
    }

    /// `!=` (true), `==` or nothing.
    fn operator(&mut self) -> bool {
        match self.peek() {
            Some(t) if t.kind == Kind::Sym && t.text == "!=" => {
                self.at += 1;
                true
            }
            Some(t) if t.kind == Kind::Sym && t.text == "==" => {
                self.at += 1;
                false
            }
            _ => false,
        }
    }

    /// `chain NAME { ... }` in table `tname` (the chain is called `TABLE.NAME` when
    /// another table has a chain of that name already).
    fn chain(
        &mut self,
        table: &mut Table,
        tname: Tok,
        family: Tok,
        supported: bool,
    ) -> Result<(), ParseError> {
        let name = self.word("a chain name")?;
        self.sym("{")?;
        if table.chains.contains_key(name.text) {
            return Err(self.err(name.pos, What::DuplicateChain(name.text.into())));
        }
        let full = match self.rs.chain_by_name(name.text) {
            Some(_) => alloc::format!("{}.{}", tname.text, name.text),
            None => name.text.to_string(),
        };
        self.rs.chains.push(Chain {
            name: full,
            hook: None,
            policy: Action::Accept,
            rules: Vec::new(),
            line: name.pos.line,
        });
        let id = ChainId(self.rs.chains.len() as u32 - 1);
        table.chains.insert(name.text.into(), id);
        // A base chain this engine does not evaluate: (what, where).
        let mut foreign: Option<(String, Pos)> = None;
        loop {
            self.blank();
            let Some(t) = self.peek() else {
                return Err(self.expected("`}` closing the chain", None));
            };
            match (t.kind, t.text) {
                (Kind::Sym, "}") => {
                    self.at += 1;
                    break;
                }
                (Kind::Word, "type") => {
                    self.at += 1;
                    let ty = self.word("a chain type")?;
                    let h = self.word("`hook`")?;
                    if h.text != "hook" {
                        return Err(self.expected("`hook`", Some(h)));
                    }
                    let hook = self.word("a hook")?;
                    // `[device NAME] priority P [+|- N]` (the priority orders base
                    // chains on one hook, and there may be only one here)
                    if self.peek().is_some_and(|t| t.text == "device") {
                        self.at += 1;
                        self.word("a device name")?;
                    }
                    let p = self.word("`priority`")?;
                    if p.text != "priority" {
                        return Err(self.expected("`priority`", Some(p)));
                    }
                    self.word("a priority")?;
                    if self.peek().is_some_and(|t| matches!(t.text, "+" | "-")) {
                        self.at += 1;
                        self.word("a number")?;
                    }
                    if !self.at_end_of_statement() {
                        return Err(self.expected("`;` after the priority", self.peek()));
                    }
                    let ours = match hook.text {
                        "input" => Some(Hook::Input),
                        "forward" => Some(Hook::Forward),
                        "output" => Some(Hook::Output),
                        _ => None,
                    };
                    match (ty.text, ours, supported) {
                        ("filter", Some(h), true) => self.rs.chain_mut(id).hook = Some(h),
                        _ => {
                            let what = match supported {
                                true => {
                                    alloc::format!("a `{}` chain on hook `{}`", ty.text, hook.text)
                                }
                                false => alloc::format!(
                                    "family `{}` (IPv4 `ip` and `inet` only)",
                                    family.text
                                ),
                            };
                            foreign = Some((what, ty.pos));
                        }
                    }
                }
                (Kind::Word, "policy") => {
                    self.at += 1;
                    let p = self.word("a policy")?;
                    let policy = match p.text {
                        "accept" => Action::Accept,
                        "drop" => Action::Drop,
                        _ => return Err(self.bad(&p, "policy (accept or drop)")),
                    };
                    if policy == Action::Drop {
                        if let Some((what, pos)) = &foreign {
                            return Err(self.err(*pos, What::Unsupported(what.clone())));
                        }
                    }
                    self.rs.chain_mut(id).policy = policy;
                }
                (Kind::Word, "comment") => {
                    self.at += 1;
                    self.word("a comment")?;
                }
                _ => {
                    if let Some((what, pos)) = &foreign {
                        return Err(self.err(*pos, What::Unsupported(what.clone())));
                    }
                    if !supported {
                        let what =
                            alloc::format!("family `{}` (IPv4 `ip` and `inet` only)", family.text);
                        return Err(self.err(family.pos, What::Unsupported(what)));
                    }
                    self.budget.rule().map_err(|w| t.pos.err(self.file, w))?;
                    let (rule, jump) = self.rule(table)?;
                    let index = self.rs.chain(id).rules.len();
                    if let Some((tok, goto)) = jump {
                        let tok: Tok = tok;
                        table
                            .pending
                            .push((id, index, tok.pos, tok.text.to_string(), goto));
                    }
                    self.rs.chain_mut(id).rules.push(rule);
                }
            }
        }
        Ok(())
    }

    /// Sets the rule's protocol to `p`, which an expression implies.
    fn imply(&self, r: &mut Rule, p: u8, t: Tok) -> Result<(), ParseError> {
        match r.proto {
            Match::Any => {
                r.proto = Match::Is(p);
                Ok(())
            }
            Match::Is(q) if q == p => Ok(()),
            _ => Err(self.err(
                t.pos,
                What::Needs(alloc::format!(
                    "`{}` conflicts with the protocol matched before",
                    t.text
                )),
            )),
        }
    }

    /// One rule, up to the end of its line. Returns it and a pending jump or goto.
    #[allow(clippy::type_complexity)]
    fn rule(&mut self, table: &Table) -> Result<(Rule, Option<(Tok<'a>, bool)>), ParseError> {
        let first = self.peek().map_or(Pos::default(), |t| t.pos);
        let mut r = Rule::new(Target::Continue);
        r.line = first.line;
        let mut jump = None;
        let mut verdict: Option<Tok> = None;
        let mut icmp_type: Option<(Match<IcmpType>, Tok)> = None;
        while !self.at_end_of_statement() {
            let t = self.word("an expression or statement")?;
            if let Some(v) = verdict {
                if t.text != "comment" {
                    return Err(self.err(
                        t.pos,
                        What::Needs(alloc::format!(
                            "nothing may follow `{}` but a comment",
                            v.text
                        )),
                    ));
                }
            }
            match t.text {
                "ip" => {
                    let f = self.word("`saddr`, `daddr` or `protocol`")?;
                    match f.text {
                        "saddr" => r.src = self.field(table, SetType::Addr, |p, t| p.addrs(t))?,
                        "daddr" => r.dst = self.field(table, SetType::Addr, |p, t| p.addrs(t))?,
                        "protocol" => {
                            r.proto = self.field(table, SetType::Proto, |p, t| {
                                p.proto(t).map(|x| alloc::vec![x])
                            })?
                        }
                        _ => return Err(self.unsupported(f, "expression `ip`")),
                    }
                }
                "meta" => {
                    let f = self.word("a meta key")?;
                    match f.text {
                        "l4proto" => {
                            r.proto = self.field(table, SetType::Proto, |p, t| {
                                p.proto(t).map(|x| alloc::vec![x])
                            })?
                        }
                        "iifname" | "iif" => {
                            r.in_if = self.field(table, SetType::Ifname, |p, t| {
                                Ok(alloc::vec![p.ifname(t)?])
                            })?
                        }
                        "oifname" | "oif" => {
                            r.out_if = self.field(table, SetType::Ifname, |p, t| {
                                Ok(alloc::vec![p.ifname(t)?])
                            })?
                        }
                        "nfproto" => {
                            let neg = self.operator();
                            let v = self.word("`ipv4`")?;
                            if v.text != "ipv4" || neg {
                                return Err(self.unsupported(v, "protocol family (IPv4 only)"));
                            }
                        }
                        _ => return Err(self.unsupported(f, "expression `meta`")),
                    }
                }
                "iifname" | "iif" => {
                    r.in_if =
                        self.field(table, SetType::Ifname, |p, t| Ok(alloc::vec![p.ifname(t)?]))?
                }
                "oifname" | "oif" => {
                    r.out_if =
                        self.field(table, SetType::Ifname, |p, t| Ok(alloc::vec![p.ifname(t)?]))?
                }
                "tcp" | "udp" => {
                    self.imply(&mut r, if t.text == "tcp" { 6 } else { 17 }, t)?;
                    let f = self.word("`sport`, `dport` or `flags`")?;
                    match f.text {
                        "sport" => {
                            r.sport = self.field(table, SetType::Service, |p, t| p.ports(t))?
                        }
                        "dport" => {
                            r.dport = self.field(table, SetType::Service, |p, t| p.ports(t))?
                        }
                        "flags" if t.text == "tcp" => r.tcp_flags = Some(self.tcp_flags()?),
                        _ => return Err(self.unsupported(f, "expression")),
                    }
                }
                "icmp" => {
                    self.imply(&mut r, 1, t)?;
                    let f = self.word("`type` or `code`")?;
                    match f.text {
                        "type" => {
                            let m = self.field(table, SetType::Icmp, |p, t| {
                                p.icmp(t).map(|x| alloc::vec![x])
                            })?;
                            r.icmp = m;
                            icmp_type = Some((m, f));
                        }
                        "code" => {
                            let neg = self.operator();
                            let v = self.word("an ICMP code")?;
                            let code = v
                                .text
                                .parse::<u8>()
                                .map_err(|_| self.bad(&v, "ICMP code"))?;
                            match icmp_type {
                                Some((Match::Is(ty), _)) if !neg => {
                                    r.icmp = Match::Is(IcmpType {
                                        code: Some(code),
                                        ..ty
                                    })
                                }
                                _ => {
                                    return Err(self.err(
                                        f.pos,
                                        What::Unsupported(
                                            "`icmp code` but after one `icmp type` (not negated)"
                                                .into(),
                                        ),
                                    ))
                                }
                            }
                        }
                        _ => return Err(self.unsupported(f, "expression `icmp`")),
                    }
                }
                "ct" => {
                    let f = self.word("`state`")?;
                    if f.text != "state" {
                        return Err(self.unsupported(f, "expression `ct`"));
                    }
                    let neg = self.operator();
                    let words = match self.at_sym("{") {
                        true => match self.value()? {
                            Val::Set(ts) => ts,
                            _ => Vec::new(),
                        },
                        false => self.comma_words()?,
                    };
                    let mut set = StateSet::default();
                    for w in &words {
                        set = set.with(values::ct_state(w.text).map_err(|e| self.bad(w, e))?);
                    }
                    r.state = Some(if neg { set.complement() } else { set });
                }
                "counter" => {
                    // `counter [packets N bytes M]`: what it counted does not matter
                    if self.peek().is_some_and(|t| t.text == "packets") {
                        for want in ["packets", "a number", "bytes", "a number"] {
                            let w = self.word("counter values")?;
                            let ok = match want {
                                "a number" => w.text.parse::<u64>().is_ok(),
                                k => w.text == k,
                            };
                            if !ok {
                                return Err(self.bad(&w, "counter value"));
                            }
                        }
                    }
                }
                "comment" => {
                    self.word("a comment")?;
                }
                "accept" | "drop" | "return" => {
                    r.target = match t.text {
                        "accept" => Target::Verdict(Action::Accept),
                        "drop" => Target::Verdict(Action::Drop),
                        _ => Target::Return,
                    };
                    verdict = Some(t);
                }
                "reject" => {
                    r.target = Target::Verdict(Action::Reject(self.reject()?));
                    verdict = Some(t);
                }
                "jump" | "goto" => {
                    let c = self.word("a chain name")?;
                    jump = Some((c, t.text == "goto"));
                    verdict = Some(t);
                }
                "ip6" => return Err(self.unsupported(t, "IPv6 expression")),
                "th" | "sctp" | "dccp" | "udplite" | "icmpv6" | "ether" | "vlan" | "arp" => {
                    return Err(self.unsupported(t, "expression"))
                }
                _ => return Err(self.unsupported(t, "statement")),
            }
        }
        Ok((r, jump))
    }

    /// After `reject`: nothing, `with tcp reset`, `with icmp [type] X`, `with icmpx [type] X`.
    fn reject(&mut self) -> Result<RejectWith, ParseError> {
        if self.peek().is_none_or(|t| t.text != "with") {
            return Ok(RejectWith::PortUnreachable);
        }
        self.at += 1;
        let kind = self.word("`tcp`, `icmp` or `icmpx`")?;
        let mut v = self.word("a REJECT type")?;
        match kind.text {
            "tcp" if v.text == "reset" => return Ok(RejectWith::TcpReset),
            "icmp" | "icmpx" if v.text == "type" => v = self.word("a REJECT type")?,
            "icmp" | "icmpx" => {}
            _ => return Err(self.unsupported(kind, "REJECT kind")),
        }
        values::nft_reject(v.text).map_err(|w| self.bad(&v, w))
    }

    /// After `tcp flags`: `syn`, `== syn`, `!= syn`, `syn / fin,syn,rst,ack`,
    /// `& (fin|syn|rst|ack) == syn`.
    fn tcp_flags(&mut self) -> Result<TcpFlags, ParseError> {
        let flag_list = |p: &mut Self, sep: &'static str| -> Result<u8, ParseError> {
            let mut bits = 0;
            loop {
                let w = p.word("a TCP flag")?;
                bits |= values::tcp_flags(w.text).map_err(|e| p.bad(&w, e))?;
                if !p.at_sym(sep) {
                    return Ok(bits);
                }
                p.at += 1;
            }
        };
        if self.at_sym("&") {
            self.at += 1;
            let paren = self.at_sym("(");
            if paren {
                self.at += 1;
            }
            let mask = flag_list(self, "|")?;
            if paren {
                self.sym(")")?;
            }
            let invert = match self.next() {
                Some(t) if t.kind == Kind::Sym && t.text == "==" => false,
                Some(t) if t.kind == Kind::Sym && t.text == "!=" => true,
                t => return Err(self.expected("`==` or `!=`", t)),
            };
            let comp = flag_list(self, "|")?;
            return Ok(TcpFlags {
                mask,
                comp: comp & mask,
                invert,
            });
        }
        let op = self.peek().filter(|t| t.kind == Kind::Sym).map(|t| t.text);
        let (invert, exact) = match op {
            Some("!=") => (true, true),
            Some("==") => (false, true),
            _ => (false, false),
        };
        if exact {
            self.at += 1;
        }
        let comp = flag_list(self, ",")?;
        if self.peek().is_some_and(|t| t.text == "/") {
            self.at += 1;
            let mask = flag_list(self, ",")?;
            return Ok(TcpFlags {
                mask,
                comp: comp & mask,
                invert,
            });
        }
        // `tcp flags syn`: that flag set; `== syn`: exactly these flags.
        let mask = if exact { 0xff } else { comp };
        Ok(TcpFlags { mask, comp, invert })
    }
}

/// The position of the first of `items` (a set's, for errors about all of it).
fn t_pos(items: &[Tok]) -> Pos {
    items.first().map_or(Pos::default(), |t| t.pos)
}
