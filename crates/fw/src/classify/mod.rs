//! The compiled classifier: a [`Ruleset`] turned into per-chain hash tables whose
//! per-packet cost depends on the number of tables, not of rules (`tuples`), plus a
//! state shortcut: when the rules before the first one that looks at anything but the
//! connection state already decide a state (the usual `ESTABLISHED,RELATED -j ACCEPT`
//! on top), a packet in that state is decided without a lookup.
//!
//! Why tuple space search (docs/fw.md has the long form). Decision trees (HiCuts,
//! HyperCuts) copy every rule whose field spans a cut into each child, and firewall sets
//! are full of wildcards, so their memory grows far faster than the rule count and a
//! million-rule tree cannot be built in the 2 s the issue allows. Bit vectors (Lucent)
//! need N bits per elementary interval per field: ~250 GB per field at a million rules.
//! Tuple tables build in one pass of hash inserts and take 60-75 bytes per rule; a
//! lookup probes one table per tuple, so merging tuples (TupleMerge) keeps 14-27 tables
//! at any size where one per tuple had 90-540. Measured with `vtnt bench fw-classify`
//! (the `fw` family, new connections without locality): 53 ns at 10 rules, 173 at 1,000,
//! 186 at 100,000, 699 at 1,000,000 (one table per tuple: 57, 290, 505, 1,250; rule by
//! rule: 59 and 3,185 at 10 and 1,000); with locality 39-141 ns; established packets
//! through [`crate::Firewall`] ~62 ns at every size.
//!
//! Compiling is all or nothing: the memory it needs is estimated from the entry count
//! before anything large is allocated and checked against [`Options::max_bytes`], and a
//! failed compile leaves nothing behind, so a firewall keeps its old rules.

mod cond;
mod expand;
mod tuples;

use alloc::vec::Vec;

use crate::check::Invalid;
use crate::linear::MAX_DEPTH;
use crate::packet::{IfId, Packet};
use crate::rule::{Action, ChainId, CtState, Hook, Rule, Ruleset, Target};
use crate::{RuleRef, Verdict};

use cond::{Conds, Ifaces};
use expand::Plan;
pub use expand::EXPAND_MAX;
pub use tuples::Strategy;
use tuples::{Key, Tables};

/// Packets [`Classifier::prepare`] warms the caches for at once: enough lookups in
/// flight to hide memory latency, few enough that their lines stay in cache until used.
pub const BATCH: usize = 32;

/// How to compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub strategy: Strategy,
    /// The most memory the compiled rules may take (and the compile, at its peak).
    pub max_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            strategy: Strategy::default(),
            max_bytes: usize::MAX,
        }
    }
}

/// Peak bytes per entry while compiling: the entries as expanded and as laid out (28
/// bytes each), the table each went to, and hash slots (24 bytes and a control byte at
/// hashbrown's 7/8 load, doubled for the power-of-two slack). Measured peaks stay below
/// it (docs/fw.md).
pub const PEAK_BYTES_PER_ENTRY: usize = 28 + 28 + 4 + 64;
/// Bytes per rule beside its entries: its target.
const BYTES_PER_RULE: usize = core::mem::size_of::<Target>();

/// Why rules could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("line {line}: {0}", line = .0.line())]
    Invalid(#[from] Invalid),
    #[error(
        "the rules need about {need} bytes compiled ({entries} entries), more than the {limit} bytes allowed"
    )]
    TooLarge {
        need: usize,
        limit: usize,
        entries: usize,
    },
}

/// What a compile made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    pub chains: usize,
    pub rules: usize,
    /// Rules expanded into hashable entries (a set of n values makes n).
    pub entries: usize,
    /// Hash tables over all chains.
    pub tables: usize,
    /// Hash buckets over all tables.
    pub buckets: usize,
    /// The most entries any bucket holds.
    pub largest_bucket: u32,
    /// Heap bytes the compiled classifier holds.
    pub bytes: usize,
    /// States the state shortcut decides in the FORWARD chain.
    pub forward_shortcuts: usize,
}

#[derive(Debug)]
struct Compiled {
    tables: Tables,
    targets: Vec<Target>,
    policy: Action,
}

/// A ruleset compiled for classification. See the module documentation.
#[derive(Debug)]
pub struct Classifier {
    chains: Vec<Compiled>,
    hooks: [Option<u32>; 3],
    /// Per hook, per [`CtState`]: the verdict every packet in that state gets.
    shortcuts: [[Option<Verdict>; 5]; 3],
    conds: Conds,
    ifs: Ifaces,
    stats: Stats,
}

/// Whether a rule looks at nothing but the connection state.
fn state_only(r: &Rule) -> bool {
    let mut bare = r.clone();
    (bare.state, bare.target, bare.line) = (None, Target::Continue, 0);
    bare == Rule::new(Target::Continue)
}

/// The verdict a base chain gives every packet in `state`, when its rules decide that
/// before any rule that looks at more than the state.
fn shortcut(rs: &Ruleset, chain: ChainId, state: CtState) -> Option<Verdict> {
    let c = rs.chain(chain);
    for (i, r) in c.rules.iter().enumerate() {
        if r.state.is_some_and(|s| !s.contains(state)) || r.target == Target::Continue {
            continue;
        }
        return match (state_only(r), r.target) {
            (true, Target::Verdict(action)) => Some(Verdict {
                action,
                rule: Some(RuleRef {
                    chain,
                    index: i as u32,
                }),
            }),
            _ => None,
        };
    }
    Some(Verdict {
        action: c.policy,
        rule: None,
    })
}

impl Classifier {
    /// Compiles `rs` (checked first).
    pub fn compile(rs: &Ruleset, opts: &Options) -> Result<Classifier, CompileError> {
        rs.check()?;
        let entries: usize = rs
            .chains
            .iter()
            .flat_map(|c| &c.rules)
            .filter(|r| r.target != Target::Continue)
            .map(|r| Plan::new(rs, r).count())
            .fold(0, usize::saturating_add);
        let need = entries
            .saturating_mul(PEAK_BYTES_PER_ENTRY)
            .saturating_add(rs.rule_count() * BYTES_PER_RULE);
        if need > opts.max_bytes {
            return Err(CompileError::TooLarge {
                need,
                limit: opts.max_bytes,
                entries,
            });
        }
        let mut conds = Conds::default();
        let mut chains = Vec::with_capacity(rs.chains.len());
        for c in &rs.chains {
            let mut list = Vec::new();
            for (i, r) in c.rules.iter().enumerate() {
                if r.target != Target::Continue {
                    Plan::new(rs, r).emit(rs, i as u32, &mut conds, &mut list);
                }
            }
            chains.push(Compiled {
                tables: Tables::build(list, opts.strategy),
                targets: c.rules.iter().map(|r| r.target).collect(),
                policy: c.policy,
            });
        }
        let mut hooks = [None; 3];
        let mut shortcuts = [[None; 5]; 3];
        for h in Hook::ALL {
            if let Some(id) = rs.hook_chain(h) {
                hooks[h as usize] = Some(id.0);
                for s in CtState::ALL {
                    shortcuts[h as usize][s as usize] = shortcut(rs, id, s);
                }
            }
        }
        let mut cl = Classifier {
            chains,
            hooks,
            shortcuts,
            conds,
            ifs: Ifaces::new(rs.ifaces.clone()),
            stats: Stats::default(),
        };
        cl.stats = cl.measure(rs);
        if cl.stats.bytes > opts.max_bytes {
            return Err(CompileError::TooLarge {
                need: cl.stats.bytes,
                limit: opts.max_bytes,
                entries,
            });
        }
        Ok(cl)
    }

    fn measure(&self, rs: &Ruleset) -> Stats {
        let ts = || self.chains.iter().map(|c| &c.tables);
        Stats {
            chains: self.chains.len(),
            rules: rs.rule_count(),
            entries: ts().map(Tables::entries).sum(),
            tables: ts().map(|t| t.tables.len()).sum(),
            buckets: ts().flat_map(|t| &t.tables).map(|t| t.buckets()).sum(),
            largest_bucket: ts().map(Tables::largest_bucket).max().unwrap_or(0),
            bytes: ts().map(Tables::bytes).sum::<usize>()
                + self
                    .chains
                    .iter()
                    .map(|c| c.targets.capacity() * BYTES_PER_RULE)
                    .sum::<usize>()
                + self.conds.bytes()
                + self.ifs.bytes(),
            forward_shortcuts: self.shortcuts[Hook::Forward as usize]
                .iter()
                .filter(|v| v.is_some())
                .count(),
        }
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The tuples of the tables of `chain` (source length, destination length,
    /// protocol or not, port prefix lengths) and the entries' buckets they hold, in
    /// lookup order: what `vtnt fw check` shows.
    pub fn tables(&self, chain: ChainId) -> impl Iterator<Item = ([u8; 5], usize)> + '_ {
        self.chains
            .get(chain.0 as usize)
            .into_iter()
            .flat_map(|c| &c.tables.tables)
            .map(|t| {
                let u = t.tuple;
                (
                    [u.src, u.dst, u8::from(u.proto), u.sport, u.dport],
                    t.buckets(),
                )
            })
    }

    /// The id packets use for interface `name` (registered when new). Register in the
    /// same order on a [`crate::Linear`] to get the same ids.
    pub fn interface(&mut self, name: &str) -> IfId {
        self.ifs.id(name)
    }

    /// The names registered, by id.
    pub fn interfaces(&self) -> &[alloc::string::String] {
        self.ifs.names()
    }

    /// The verdict for `p` at `hook`, its connection state taken as given (the
    /// stateless classification; [`crate::Firewall`] tracks connections for it).
    pub fn classify(&self, hook: Hook, p: &Packet) -> Verdict {
        let Some(base) = self.hooks[hook as usize] else {
            return Verdict {
                action: Action::Accept,
                rule: None,
            };
        };
        if let Some(v) = self.shortcuts[hook as usize][p.state as usize] {
            return v;
        }
        self.walk(base, p)
    }

    /// The verdicts for `packets` at `hook`, into `verdicts` (as long as `packets`):
    /// the same as [`Classifier::classify`] on each in turn, but each group of
    /// [`BATCH`] is first prepared ([`Classifier::prepare`]) so that the cache misses of
    /// its lookups overlap.
    pub fn classify_batch(&self, hook: Hook, packets: &[Packet], verdicts: &mut [Verdict]) {
        for (ps, vs) in packets.chunks(BATCH).zip(verdicts.chunks_mut(BATCH)) {
            self.prepare(hook, ps);
            for (p, v) in ps.iter().zip(vs) {
                *v = self.classify(hook, p);
            }
        }
    }

    /// Warms the caches for classifying `packets` at `hook` next, and decides nothing:
    /// each stage of the lookup (the Bloom filter words of every table of the hook's
    /// chain, then the hash slots they let through) is read for all packets before the
    /// next, so their memory latencies overlap. Packets whose state the state shortcut
    /// decides are skipped. For a batch of up to [`BATCH`]; more are taken in groups.
    pub fn prepare(&self, hook: Hook, packets: &[Packet]) {
        let Some(base) = self.hooks[hook as usize] else {
            return;
        };
        let tables = &self.chains[base as usize].tables;
        let mut keys = [Key {
            a: 0,
            b: 0,
            fragment: false,
        }; BATCH];
        let mut passed = [0u64; BATCH];
        for ps in packets.chunks(BATCH) {
            let mut n = 0;
            for p in ps {
                if self.shortcuts[hook as usize][p.state as usize].is_none() {
                    keys[n] = Key::new(p);
                    n += 1;
                }
            }
            core::hint::black_box(tables.touch(&keys[..n], &mut passed[..n]));
        }
    }

    /// The verdict without the state shortcut: every packet through the tables.
    pub fn classify_tables(&self, hook: Hook, p: &Packet) -> Verdict {
        match self.hooks[hook as usize] {
            Some(base) => self.walk(base, p),
            None => Verdict {
                action: Action::Accept,
                rule: None,
            },
        }
    }

    fn walk(&self, base: u32, p: &Packet) -> Verdict {
        let k = Key::new(p);
        let mut stack = [(0u32, 0u32); MAX_DEPTH];
        let mut depth = 0;
        let (mut chain, mut from) = (base, 0u32);
        loop {
            let c = &self.chains[chain as usize];
            let hit = c.tables.first_match(&k, from, p, &self.conds, &self.ifs);
            match hit.map(|i| (i, c.targets[i as usize])) {
                Some((i, Target::Verdict(action))) => {
                    return Verdict {
                        action,
                        rule: Some(RuleRef {
                            chain: ChainId(chain),
                            index: i,
                        }),
                    }
                }
                Some((i, Target::Jump(t))) if depth < MAX_DEPTH => {
                    stack[depth] = (chain, i + 1);
                    depth += 1;
                    (chain, from) = (t.0, 0);
                }
                Some((_, Target::Goto(t))) => (chain, from) = (t.0, 0),
                Some((i, Target::Continue)) => from = i + 1,
                // Return, the end of a chain, or (never, the depth being checked) a
                // jump past the deepest nesting.
                _ if depth > 0 => {
                    depth -= 1;
                    (chain, from) = stack[depth];
                }
                _ => {
                    return Verdict {
                        action: self.chains[base as usize].policy,
                        rule: None,
                    }
                }
            }
        }
    }
}
