//! The network function: connection tracking in front of the compiled rules, driven
//! like the other sans-IO engines (`vtnt-forward`'s `Forwarder`): the driver hands in
//! the time and each IPv4 datagram with the interfaces it came in by and leaves by, and
//! gets back what to do with it, and for a REJECT the reply to send back out of the
//! interface it came in by.
//!
//! ```text
//! let mut fw = Firewall::new(&rules, Config::default())?;
//! let wan = fw.add_interface("eth0", Some(wan_addr));
//! let lan = fw.add_interface("eth1", Some(lan_addr));
//! loop {
//!     for each datagram from `wan` to be routed to `lan` at `now`:
//!         match fw.handle_packet(now, Hook::Forward, wan, lan, &datagram, &mut reply) {
//!             Outcome::Accept => send(lan, datagram),
//!             Outcome::Reject(n) => send(wan, &reply[..n]),
//!             Outcome::Drop => {}
//!         }
//!     if now >= fw.poll_timeout() { fw.handle_timeout(now) }
//! }
//! ```
//!
//! A packet costs a connection lookup (one hash probe), then the rules with the state it
//! was found in: with an `ESTABLISHED` accept on top (the usual rule set) an
//! established packet is decided by the state shortcut without touching the tables.
//! New rules replace the old at once and entirely ([`Firewall::replace_rules`]): a
//! ruleset that does not compile, or needs more memory than allowed, leaves the old one
//! in place; connections survive a replacement, as Linux's do.

use alloc::string::String;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use vtnt_record::Instant;

use crate::classify::{Classifier, CompileError, Options};
use crate::conntrack::{Ct, CtConfig, CtStats};
use crate::packet::{Headers, IfId, Packet};
use crate::reject;
use crate::rule::{Action, CtState, Hook, Ruleset};
use crate::BATCH;

/// A datagram of a batch: its bytes, its headers if well-formed, where its reply and
/// outcome go.
type Pending<'a, R> = (&'a [u8], Option<Headers>, &'a mut R, &'a mut Outcome);

/// Settings of a [`Firewall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Config {
    pub conntrack: CtConfig,
    pub compile: Options,
}

/// What to do with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Send it on.
    Accept,
    /// Drop it (a DROP, a REJECT with no reply due, or a malformed packet).
    Drop,
    /// Drop it and send back the `n` bytes of reply written to the reply buffer.
    Reject(usize),
}

/// Counters since the firewall was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub accepted: u64,
    pub dropped: u64,
    pub rejected: u64,
    /// Bytes that are no well-formed IPv4 datagram (dropped).
    pub malformed: u64,
    pub conntrack: CtStats,
}

/// The firewall. See the module documentation.
#[derive(Debug)]
pub struct Firewall {
    rules: Classifier,
    ct: Ct,
    /// Interfaces by id: name and the firewall's address there.
    ifaces: Vec<(String, Option<Ipv4Addr>)>,
    options: Options,
    stats: Stats,
    now: Instant,
}

impl Firewall {
    pub fn new(rules: &Ruleset, config: Config) -> Result<Firewall, CompileError> {
        Ok(Firewall {
            rules: Classifier::compile(rules, &config.compile)?,
            ct: Ct::new(config.conntrack),
            ifaces: Vec::new(),
            options: config.compile,
            stats: Stats::default(),
            now: Instant::ZERO,
        })
    }

    /// Registers an interface (`addr`: the firewall's address there, the source of its
    /// ICMP errors) and returns the id packets on it carry.
    pub fn add_interface(&mut self, name: &str, addr: Option<Ipv4Addr>) -> IfId {
        let id = self.rules.interface(name);
        let i = usize::from(id.0);
        if self.ifaces.len() <= i {
            self.ifaces.resize(i + 1, (String::new(), None));
        }
        self.ifaces[i] = (name.into(), addr);
        id
    }

    /// Compiles `rules` and, when that succeeds, uses them from the next packet on.
    pub fn replace_rules(&mut self, rules: &Ruleset) -> Result<(), CompileError> {
        let mut next = Classifier::compile(rules, &self.options)?;
        for (name, _) in &self.ifaces {
            next.interface(name);
        }
        self.rules = next;
        Ok(())
    }

    pub fn classifier(&self) -> &Classifier {
        &self.rules
    }

    /// What to do with `packet` (an IPv4 datagram) entering `hook` at `now` from
    /// `in_if` to `out_if` ([`IfId::NONE`] where there is none); a REJECT's reply is
    /// written to `reply` (576 bytes always suffice). Never panics, whatever the bytes.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        hook: Hook,
        in_if: IfId,
        out_if: IfId,
        packet: &[u8],
        reply: &mut [u8],
    ) -> Outcome {
        self.now = self.now.max(now);
        match Headers::parse(packet) {
            Ok(h) => self.decide(hook, in_if, out_if, &h, packet, reply),
            Err(_) => self.malformed(),
        }
    }

    /// [`Firewall::handle_packet`] for each of `packets` in turn, with the same
    /// outcomes (into `outcomes`; a REJECT's reply into the matching `replies` entry,
    /// packets past the shorter of the two are left alone), all from `in_if` to `out_if`: the headers are parsed
    /// first and the rules' lookups prepared together ([`Classifier::prepare`]), so the
    /// cache misses of a batch of new connections overlap. Connection tracking still
    /// sees the packets one by one, so a batch holding two packets of one new
    /// connection decides the second as established, as one by one would.
    pub fn handle_batch<R: AsMut<[u8]>>(
        &mut self,
        now: Instant,
        hook: Hook,
        (in_if, out_if): (IfId, IfId),
        packets: &[&[u8]],
        replies: &mut [R],
        outcomes: &mut [Outcome],
    ) {
        self.now = self.now.max(now);
        let blank = Packet {
            src: Ipv4Addr::UNSPECIFIED,
            dst: Ipv4Addr::UNSPECIFIED,
            proto: 0,
            sport: 0,
            dport: 0,
            tcp_flags: 0,
            fragment: false,
            in_if,
            out_if,
            state: CtState::New,
        };
        let results = replies.iter_mut().zip(outcomes.iter_mut());
        let mut results = packets.iter().zip(results);
        loop {
            let mut batch: [Option<Pending<R>>; BATCH] = [const { None }; BATCH];
            let mut parsed = [blank; BATCH];
            let (mut taken, mut n) = (0, 0);
            for (slot, (bytes, (reply, outcome))) in batch.iter_mut().zip(results.by_ref()) {
                let h = Headers::parse(bytes).ok();
                if let Some(h) = &h {
                    parsed[n] = Packet::new(h, in_if, out_if, CtState::New);
                    n += 1;
                }
                *slot = Some((*bytes, h, reply, outcome));
                taken += 1;
            }
            if taken == 0 {
                return;
            }
            self.rules.prepare(hook, &parsed[..n]);
            for (bytes, h, reply, outcome) in batch.into_iter().flatten() {
                *outcome = match h {
                    Some(h) => self.decide(hook, in_if, out_if, &h, bytes, reply.as_mut()),
                    None => self.malformed(),
                };
            }
        }
    }

    /// Tracks and classifies one parsed datagram.
    fn decide(
        &mut self,
        hook: Hook,
        in_if: IfId,
        out_if: IfId,
        h: &Headers,
        packet: &[u8],
        reply: &mut [u8],
    ) -> Outcome {
        let track = self.ct.track(self.now, h, packet);
        let p = Packet::new(h, in_if, out_if, track.state);
        let outcome = match self.rules.classify(hook, &p).action {
            Action::Accept => {
                self.ct.confirm(self.now, &track);
                Outcome::Accept
            }
            Action::Drop => Outcome::Drop,
            Action::Reject(with) => {
                let from = self.ifaces.get(usize::from(in_if.0)).and_then(|i| i.1);
                match reject::reply(with, h, packet, from, reply) {
                    Some(n) => Outcome::Reject(n),
                    None => Outcome::Drop,
                }
            }
        };
        self.count(outcome)
    }

    fn count(&mut self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Accept => self.stats.accepted += 1,
            Outcome::Drop => self.stats.dropped += 1,
            Outcome::Reject(_) => self.stats.rejected += 1,
        }
        outcome
    }

    fn malformed(&mut self) -> Outcome {
        self.stats.malformed += 1;
        Outcome::Drop
    }

    /// When the next connection may expire, if any is tracked.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.ct.next_deadline()
    }

    /// Removes the connections whose time is up.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.ct.expire(self.now);
    }

    pub fn stats(&self) -> Stats {
        Stats {
            conntrack: self.ct.stats(),
            ..self.stats
        }
    }
}
