//! `vtnt trace -O ptr`: the reverse DNS name of every address that answered a trace
//! (the destination's too, as scamper looks it up), through this host's resolver:
//! getnameinfo(3), so /etc/hosts and the servers of /etc/resolv.conf, which `ip netns
//! exec NS` replaces with /etc/netns/NS/resolv.conf.
//!
//! Look-ups run on a pool of threads while probing goes on; the probing loop only hands
//! over finished traces and takes back those whose names are in, never waiting. A trace
//! waits for its names at most [`WAIT`] after it finished; a name not in by then, or
//! that the resolver does not know, stays empty. Records leave in the order they came,
//! each with the tag it came with (whose it is: `vtnt daemon` runs one pool for the
//! commands of all its clients).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use vtnt_formats::Record;
use vtnt_job::lookup::Lookups;

/// How long a finished trace waits for its names.
pub const WAIT: Duration = Duration::from_secs(3);
/// Look-ups at once.
const THREADS: usize = 16;

/// The PTR name of `addr`, if the resolver has one.
fn ptr(addr: &IpAddr) -> Option<String> {
    dns_lookup::lookup_addr(addr).ok()
}

/// Finished records waiting for their hops' names, each with a tag `T`.
pub struct Names<T = ()> {
    pool: Lookups<IpAddr, Option<String>>,
    /// Every address asked for: `None` while its look-up runs.
    known: HashMap<IpAddr, Option<Option<String>>>,
    /// Records in the order they finished, with when their wait ends.
    held: VecDeque<(Instant, T, Record)>,
}

impl<T> Names<T> {
    /// Starts the look-up threads.
    pub fn start() -> Names<T> {
        Names {
            pool: Lookups::new(THREADS, ptr),
            known: HashMap::new(),
            held: VecDeque::new(),
        }
    }

    /// Takes a finished record: the addresses of a trace's hops not asked for yet are
    /// looked up, and the record is held until [`Names::ready`] gives it back.
    pub fn hold(&mut self, tag: T, r: Record) {
        if let Record::Trace(t) = &r {
            for h in &t.hops {
                if let Entry::Vacant(e) = self.known.entry(h.addr) {
                    e.insert(None);
                    self.pool.ask(h.addr);
                }
            }
        }
        self.held.push_back((Instant::now() + WAIT, tag, r));
    }

    /// The records at the front whose names are all in or whose wait is over, with
    /// their names; never waits.
    pub fn ready(&mut self) -> Vec<(T, Record)> {
        while let Some((a, name)) = self.pool.answer_now() {
            self.known.insert(a, Some(name));
        }
        let mut out = Vec::new();
        while let Some((until, _, r)) = self.held.front() {
            if !self.named(r) && Instant::now() < *until {
                break;
            }
            if let Some((_, tag, r)) = self.held.pop_front() {
                out.push((tag, self.fill(r)));
            }
        }
        out
    }

    /// Every record still held, once its names are in or its wait is over (`wait`
    /// false: at once, with the names that came).
    pub fn rest(mut self, wait: bool) -> Vec<(T, Record)> {
        let mut out = self.ready();
        while let Some((until, _, _)) = self.held.front() {
            if !wait {
                break;
            }
            match self.pool.answer_by(*until) {
                Some((a, name)) => {
                    self.known.insert(a, Some(name));
                }
                None => {
                    if let Some((_, tag, r)) = self.held.pop_front() {
                        out.push((tag, self.fill(r)));
                    }
                }
            }
            out.extend(self.ready());
        }
        let held = std::mem::take(&mut self.held);
        out.extend(held.into_iter().map(|(_, tag, r)| (tag, self.fill(r))));
        out
    }

    /// Whether records wait for their names.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether every hop address of `r` has its answer.
    fn named(&self, r: &Record) -> bool {
        match r {
            Record::Trace(t) => t
                .hops
                .iter()
                .all(|h| matches!(self.known.get(&h.addr), Some(Some(_)))),
            Record::Ping(_) => true,
        }
    }

    /// `r` with the names known so far and its PTR flag set.
    fn fill(&self, mut r: Record) -> Record {
        if let Record::Trace(t) = &mut r {
            t.ptr = true;
            for h in &mut t.hops {
                h.name = self.known.get(&h.addr).cloned().flatten().flatten();
            }
        }
        r
    }
}
