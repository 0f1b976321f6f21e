//! Tunnel classification of one path: explicit and opaque tunnels from RFC 4950 labels,
//! implicit tunnels from rising quoted TTLs or u-turn runs, and the invisible-tunnel
//! candidates that revelation then tests, found by TNT's triggers in TNT's order
//! (MTTL, DUP_IP, RTLA, FRPLA) or, in brute-force mode, on every hop pair.
//!
//! Rules (see `shared/notes/tnt.md`):
//! - labelled time-exceeded: top LSE-TTL `<= 1` or `== 255` -> explicit LSR, otherwise
//!   the egress of an opaque tunnel (the only visible hop of it); the last hop of an
//!   explicit run quoting explicit null, or a shallower stack than the LSRs before it (a
//!   service label alone), is the egress, not an LSR;
//! - no labels, quoted TTL `> 1` and `!= 255` -> implicit LSR; the j-th LSR of a tunnel
//!   quotes TTL j, so a run starting at quoted TTL q also holds the q-1 hops before it as
//!   LSRs, and the hop before those is the ingress;
//! - a run of consecutive u-turns (not explained by RTLA) shaped like an LSP's (positive,
//!   falling by 2 per hop to 2: an LSR's time exceeded travels on to the egress and back) whose
//!   sum reaches the threshold marks implicit LSRs; the hops around the run are ingress
//!   and egress (with `uturn_shape` off, any run of non-zero u-turns whose absolute sum
//!   reaches it, as before: replies returning over ECMP branches of unequal length make
//!   such runs on MPLS-free paths);
//! - a hop outside visible tunnels is an invisible-tunnel egress candidate, its previous
//!   hop the ingress, when: it is an opaque egress (MTTL), it repeats the previous address
//!   (DUP_IP: ingress two hops back, UHP), its RTLA >= threshold, or its FRPLA >=
//!   threshold.

use alloc::vec::Vec;

use crate::analysis::{frpla, initial_ttl, rtla, uturn, Thresholds};
use crate::path::{Path, PathHop};

/// The four classes of the TNT taxonomy, invisible split into PHP and UHP (the one
/// vocabulary shared with the lab's ground truth, from `vtnt-record`).
pub use vtnt_record::TunnelClass;

/// Role of a hop in a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Role {
    Ingress,
    Lsr,
    Egress,
}

impl Role {
    /// Tag in the text dump.
    pub const fn tag(self) -> &'static str {
        match self {
            Role::Ingress => "ING",
            Role::Lsr => "LSR",
            Role::Egress => "EGR",
        }
    }
}

/// What made TNT suspect a hidden tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum Trigger {
    /// Labelled egress with LSE-TTL neither 1 nor 255 (opaque tunnel).
    Mttl,
    /// The same address at two consecutive TTLs (UHP).
    DupIp,
    /// Return tunnel length analysis.
    Rtla,
    /// Forward/return path length asymmetry.
    Frpla,
    /// Brute-force mode: every hop pair is tested.
    BruteForce,
    /// A hop whose own replies cannot show a tunnel ending at it (see
    /// `ClassifyOptions::blind_spots`).
    Blind,
}

impl Trigger {
    /// Tag in the text dump (`sc_tnt`'s spellings).
    pub const fn tag(self) -> &'static str {
        match self {
            Trigger::Mttl => "MTTL",
            Trigger::DupIp => "DUPIP",
            Trigger::Rtla => "RTLA",
            Trigger::Frpla => "FRPLA",
            Trigger::BruteForce => "BRTF",
            Trigger::Blind => "BLIND",
        }
    }
}

/// What showed a visible tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Evidence {
    /// RFC 4950 label stacks.
    Labels,
    /// Quoted TTLs above 1.
    Qttl,
    /// A run of u-turns.
    Uturn,
}

impl Evidence {
    /// Tag in the text dump.
    pub const fn tag(self) -> &'static str {
        match self {
            Evidence::Labels => "LBL",
            Evidence::Qttl => "QTTL",
            Evidence::Uturn => "UTURN",
        }
    }
}

/// A tunnel seen in the path itself (explicit, implicit, opaque); indices are path slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisibleTunnel {
    pub class: TunnelClass,
    pub evidence: Evidence,
    pub ingress: Option<usize>,
    pub egress: Option<usize>,
    pub lsrs: Vec<usize>,
    /// UHP explicit tunnels: the earlier slot where the egress also answered (as the
    /// last label-switching hop, LSE-TTL 1).
    pub egress_repeat: Option<usize>,
    /// Opaque tunnels: LSRs hidden, estimated as `255 - LSE-TTL` of the egress.
    pub hidden_estimate: Option<u8>,
}

/// A suspected invisible (or opaque) tunnel to reveal; indices are path slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub trigger: Trigger,
    /// Slot of the hop revelation starts from: the ingress, or the hop before it when
    /// the ingress did not answer (`anchor_is_ingress == false`).
    pub anchor: usize,
    pub anchor_is_ingress: bool,
    /// Slot of the hop whose address is traced to (the egress, or for DUP_IP the hop
    /// after the missing egress).
    pub egress: usize,
    /// First TTL of revelation traces: anchor TTL - 2, at least 1 (a blind spot's: the
    /// anchor's TTL, see docs/tnt.md).
    pub start_ttl: u8,
    /// Index in [`Classification::tunnels`] of the opaque tunnel an MTTL candidate tests.
    pub opaque: Option<usize>,
    /// Hops this candidate was moved back from the one its trigger fired on (see
    /// `TntConfig::walk_back`); 0 for a trigger's own pair.
    pub walked_back: u8,
    /// Hops this candidate was moved on from the one its trigger fired on (see
    /// `TntConfig::walk_forward`); 0 for a trigger's own pair.
    pub walked_forward: u8,
}

/// Per-hop numbers, `0` where they do not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HopMetrics {
    pub frpla: i16,
    pub rtla: i16,
    pub uturn: i16,
}

/// FRPLA, RTLA and u-turn of one hop (time-exceeded replies only; RTLA and u-turn need
/// the echo-reply TTL).
pub fn hop_metrics(hop: &PathHop) -> HopMetrics {
    if !hop.is_time_exceeded() {
        return HopMetrics::default();
    }
    let te = hop.reply_ttl;
    HopMetrics {
        frpla: frpla(hop.ttl, te),
        rtla: hop.er.map_or(0, |er| rtla(te, er)),
        uturn: hop.er.map_or(0, |er| uturn(te, er)),
    }
}

/// What a hop's FRPLA is measured against when slot `anchor` is its ingress: the
/// anchor's positive FRPLA with `frpla_relative`, else 0.
pub(crate) fn frpla_base(path: &Path, anchor: usize, opts: &ClassifyOptions) -> i16 {
    if opts.frpla_relative {
        path.get(anchor).map_or(0, |a| hop_metrics(a).frpla.max(0))
    } else {
        0
    }
}

/// Everything the path shows by itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Classification {
    pub tunnels: Vec<VisibleTunnel>,
    pub candidates: Vec<Candidate>,
}

impl Classification {
    /// Memberships `(tunnel index, role)` of slot `i`.
    pub fn roles(&self, i: usize) -> impl Iterator<Item = (usize, Role)> + '_ {
        self.tunnels.iter().enumerate().flat_map(move |(t, tun)| {
            let r = if tun.ingress == Some(i) {
                Some(Role::Ingress)
            } else if tun.egress == Some(i) || tun.egress_repeat == Some(i) {
                Some(Role::Egress)
            } else if tun.lsrs.contains(&i) {
                Some(Role::Lsr)
            } else {
                None
            };
            r.map(|r| (t, r))
        })
    }
    fn has_role(&self, i: usize, role: Role) -> bool {
        self.roles(i).any(|(_, r)| r == role)
    }
    fn in_tunnel(&self, i: usize) -> bool {
        self.roles(i).next().is_some()
    }
}

/// A time exceeded from a router whose signature is `<64,64>` or `<128,128>` (see
/// `ClassifyOptions::blind_spots`).
fn blind(hop: &PathHop) -> bool {
    let te = initial_ttl(hop.reply_ttl);
    hop.er.is_some_and(|er| initial_ttl(er) == te && te != 255)
}

fn label_class(hop: &PathHop) -> Option<TunnelClass> {
    if !hop.is_time_exceeded() {
        return None;
    }
    hop.top_lse_ttl.map(|t| {
        if t <= 1 || t == 255 {
            TunnelClass::Explicit
        } else {
            TunnelClass::Opaque
        }
    })
}

fn rising_qttl(hop: &PathHop) -> Option<u8> {
    if hop.is_time_exceeded() && hop.top_lse_ttl.is_none() {
        hop.qttl.filter(|&q| q > 1 && q != 255)
    } else {
        None
    }
}

/// How [`classify()`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassifyOptions {
    pub thresholds: Thresholds,
    /// Make every hop pair outside visible tunnels a candidate (trigger
    /// [`Trigger::BruteForce`] when no regular trigger fires); `sc_tnt -b`.
    pub brute_force: bool,
    /// FRPLA accumulates along a path: every hop after an invisible tunnel inherits the
    /// hidden return hops. With this on (default), a hop triggers FRPLA only when its
    /// FRPLA exceeds its ingress's (positive) FRPLA by the threshold, so each tunnel is
    /// tested once. `sc_tnt` needs no such rule because it only tests the first tunnel.
    pub frpla_relative: bool,
    /// A u-turn run marks an implicit tunnel only when shaped like an LSP's: every
    /// u-turn positive, each 2 below the one before and the last 2 (the j-th of n LSRs
    /// turns around `2 (n - j)` hops). Off: any run of non-zero u-turns counts by its
    /// absolute sum.
    pub uturn_shape: bool,
    /// The last labelled hop of an explicit tunnel is the egress when its label says so:
    /// it quotes explicit null (0, IPv6 2; UHP's penultimate hop swaps to it, so only the
    /// egress receives it), or a stack shallower than the LSRs before it (a service label
    /// alone: the penultimate hop popped the transport label). Off: it counts as an LSR
    /// and the hop after it as the egress, as for PHP.
    pub egress_label: bool,
    /// Test the hop pair before a hop whose TTL signature is `<64,64>` or `<128,128>`
    /// (trigger [`Trigger::Blind`]): such routers push their own replies with the return
    /// LSP's no-propagate setting and answer time exceeded and echo alike, so when the
    /// return path is a tunnel too, neither FRPLA nor RTLA can show a tunnel ending at
    /// them. Off: only TNT's triggers (and brute force) make candidates.
    pub blind_spots: bool,
}

impl Default for ClassifyOptions {
    fn default() -> Self {
        ClassifyOptions {
            thresholds: Thresholds::default(),
            brute_force: false,
            frpla_relative: true,
            uturn_shape: true,
            egress_label: true,
            blind_spots: true,
        }
    }
}

/// Classifies `path`.
pub fn classify(path: &Path, opts: &ClassifyOptions) -> Classification {
    let th = &opts.thresholds;
    let brute_force = opts.brute_force;
    let mut c = Classification::default();
    let n = path.len();
    let labelled = |i: usize| path.get(i).and_then(label_class);
    let free = |c: &Classification, i: usize| path.get(i).is_some() && !c.in_tunnel(i);

    // 1. Explicit tunnels: runs of explicit-labelled hops, unanswered slots allowed inside.
    let mut i = 0;
    while i < n {
        if labelled(i) != Some(TunnelClass::Explicit) {
            i += 1;
            continue;
        }
        let mut lsrs = Vec::from([i]);
        let mut j = i + 1;
        while j < n {
            match labelled(j) {
                Some(TunnelClass::Explicit) => {
                    lsrs.push(j);
                    j += 1;
                }
                None if path.get(j).is_none() => {
                    let next = (j..n).find(|&k| path.get(k).is_some());
                    if next.is_some_and(|k| labelled(k) == Some(TunnelClass::Explicit)) {
                        j = next.unwrap_or(n);
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        let last = *lsrs.last().unwrap_or(&i);
        let ingress = i
            .checked_sub(1)
            .filter(|&k| path.get(k).is_some() && labelled(k).is_none());
        // UHP egress: the last router answers twice, first as an LSR (LSE-TTL 1), then,
        // having popped, with the label it received (LSE-TTL 2) and quoted TTL 1.
        let same = |a: usize, b: usize| match (path.get(a), path.get(b)) {
            (Some(x), Some(y)) => x.addr == y.addr,
            _ => false,
        };
        let explicit_null = |k: usize| {
            path.get(k)
                .and_then(|h| h.top_label)
                .is_some_and(|l| l == 0 || l == 2)
        };
        // Stack depths tell the egress from the egress of an LSP this one rides (LDP over
        // RSVP-TE), which quotes one label fewer than the hops inside it, or label 0 on
        // top: the tunnel's own egress quotes no deeper a stack than any LSR before it.
        let depth = |k: usize| path.get(k).map_or(0, |h| h.label_depth);
        let earlier = lsrs[..lsrs.len() - 1].iter().map(|&k| depth(k)).min();
        let null_egress = explicit_null(last) && earlier.is_none_or(|d| depth(last) <= d);
        let shallower = earlier.is_some_and(|d| depth(last) < d);
        let (egress, next) = if labelled(last + 1).is_some() && same(last, last + 1) {
            lsrs.pop();
            (Some(last + 1), last + 2)
        } else if opts.egress_label && (null_egress || shallower) && lsrs.len() > 1 {
            // UHP with explicit null, or a service label left alone by PHP: the last
            // labelled hop is the egress
            lsrs.pop();
            (Some(last), last + 1)
        } else {
            let e = Some(last + 1).filter(|&k| path.get(k).is_some() && labelled(k).is_none());
            (e, last + 1)
        };
        let egress_repeat = (next == last + 2).then_some(last);
        c.tunnels.push(VisibleTunnel {
            class: TunnelClass::Explicit,
            evidence: Evidence::Labels,
            ingress,
            egress,
            egress_repeat,
            lsrs,
            hidden_estimate: None,
        });
        i = next;
    }

    // 2. Opaque tunnels: the labelled hop is the egress, the hop before it the ingress.
    for i in 0..n {
        if labelled(i) != Some(TunnelClass::Opaque) || c.in_tunnel(i) {
            continue;
        }
        let lse = path.get(i).and_then(|h| h.top_lse_ttl).unwrap_or(255);
        let ingress = i
            .checked_sub(1)
            .filter(|&k| path.get(k).is_some() && labelled(k).is_none());
        c.tunnels.push(VisibleTunnel {
            class: TunnelClass::Opaque,
            evidence: Evidence::Labels,
            ingress,
            egress: Some(i),
            egress_repeat: None,
            lsrs: Vec::new(),
            hidden_estimate: Some(255 - lse),
        });
    }

    // 3. Implicit tunnels by quoted TTL: runs of q, q+1, q+2... from the start quoted TTL q.
    let mut i = 0;
    while i < n {
        let Some(q0) = path.get(i).and_then(rising_qttl) else {
            i += 1;
            continue;
        };
        if c.in_tunnel(i) {
            i += 1;
            continue;
        }
        let mut end = i;
        while let Some(q) = path.get(end + 1).and_then(rising_qttl) {
            let prev = path.get(end).and_then(|h| h.qttl).unwrap_or(0);
            if q != prev.wrapping_add(1) || c.in_tunnel(end + 1) {
                break;
            }
            end += 1;
        }
        // The q0 - 1 slots before the run are LSRs quoting TTLs 1..q0-1 (only q0 - 1 = 1
        // is distinguishable from a plain router: quoted TTL 1).
        let mut first = i;
        while first > 0 && i - (first - 1) < q0 as usize {
            let k = first - 1;
            let ok = match path.get(k) {
                Some(h) => !c.in_tunnel(k) && labelled(k).is_none() && h.is_time_exceeded(),
                None => false,
            };
            if !ok {
                break;
            }
            first = k;
        }
        let lsrs: Vec<usize> = (first..=end).filter(|&k| path.get(k).is_some()).collect();
        let ingress = first
            .checked_sub(1)
            .filter(|&k| free(&c, k) || c.has_role(k, Role::Egress));
        let egress = Some(end + 1).filter(|&k| path.get(k).is_some() && labelled(k).is_none());
        c.tunnels.push(VisibleTunnel {
            class: TunnelClass::Implicit,
            evidence: Evidence::Qttl,
            ingress,
            egress,
            egress_repeat: None,
            lsrs,
            hidden_estimate: None,
        });
        i = end + 1;
    }

    // 4. Implicit tunnels by u-turn runs among hops not yet in a tunnel.
    let u = |i: usize| -> i16 {
        match path.get(i) {
            Some(h) if h.is_time_exceeded() && h.top_lse_ttl.is_none() => {
                let m = hop_metrics(h);
                let rtla_explains = h
                    .er
                    .is_some_and(|er| initial_ttl(h.reply_ttl) == 255 && initial_ttl(er) != 255);
                if rtla_explains {
                    0
                } else {
                    m.uturn
                }
            }
            _ => 0,
        }
    };
    // with the shape rule, a run starts at a positive u-turn and goes on while each is
    // 2 below the one before
    let starts = |i: usize| u(i) > 0 || (!opts.uturn_shape && u(i) != 0);
    let goes_on = |prev: i16, next: i16| {
        if opts.uturn_shape {
            next > 0 && next == prev - 2
        } else {
            next != 0
        }
    };
    let mut i = 0;
    while i < n {
        if !starts(i) || c.in_tunnel(i) {
            i += 1;
            continue;
        }
        let mut end = i;
        let mut sum = u(i).unsigned_abs();
        while end + 1 < n && goes_on(u(end), u(end + 1)) && !c.in_tunnel(end + 1) {
            end += 1;
            sum += u(end).unsigned_abs();
        }
        // the last LSR turns around at the egress: 1 hop there, 1 back
        let ends_at_egress = !opts.uturn_shape || u(end) == 2;
        if sum >= th.uturn as u16 && ends_at_egress {
            let ingress = i.checked_sub(1).filter(|&k| path.get(k).is_some());
            let egress = Some(end + 1).filter(|&k| path.get(k).is_some());
            c.tunnels.push(VisibleTunnel {
                class: TunnelClass::Implicit,
                evidence: Evidence::Uturn,
                ingress,
                egress,
                egress_repeat: None,
                lsrs: (i..=end).collect(),
                hidden_estimate: None,
            });
        }
        i = end + 1;
    }

    // 5. Invisible-tunnel candidates.
    for i in 0..n {
        let Some(hop) = path.get(i) else { continue };
        let opaque = c
            .tunnels
            .iter()
            .position(|t| t.class == TunnelClass::Opaque && t.egress == Some(i));
        if opaque.is_none() && c.has_role(i, Role::Lsr) {
            continue;
        }
        let prev = i.checked_sub(1).and_then(|k| path.get(k));
        let dup = prev.is_some_and(|p| p.addr == hop.addr);
        if dup && (c.has_role(i - 1, Role::Egress) || c.has_role(i - 1, Role::Lsr)) {
            continue;
        }
        let ingress = if dup {
            i.checked_sub(2)
        } else {
            i.checked_sub(1)
        };
        let Some(ingress) = ingress else { continue };
        if opaque.is_none() && c.has_role(ingress, Role::Lsr) {
            continue;
        }
        let (anchor, anchor_is_ingress) = match path.get(ingress) {
            Some(_) => (ingress, true),
            None => match ingress.checked_sub(1).filter(|&k| path.get(k).is_some()) {
                Some(k) => (k, false),
                None => continue,
            },
        };
        let Some(anchor_hop) = path.get(anchor) else {
            continue;
        };
        if anchor_hop.addr == hop.addr {
            continue;
        }
        let start_ttl = anchor_hop.ttl.saturating_sub(2).max(1);
        let trigger = if opaque.is_some() {
            Some(Trigger::Mttl)
        } else if c.has_role(i, Role::Egress) || !hop.is_time_exceeded() {
            None
        } else if dup {
            Some(Trigger::DupIp)
        } else if path
            .get(i + 1)
            .is_some_and(|h| h.addr == hop.addr && h.is_time_exceeded())
        {
            None
        } else {
            let m = hop_metrics(hop);
            let base = frpla_base(path, anchor, opts);
            if m.rtla >= th.rtla {
                Some(Trigger::Rtla)
            } else if m.frpla - base >= th.frpla {
                Some(Trigger::Frpla)
            } else if opts.blind_spots && blind(hop) {
                Some(Trigger::Blind)
            } else if brute_force {
                Some(Trigger::BruteForce)
            } else {
                None
            }
        };
        if let Some(trigger) = trigger {
            // a blind spot is tested on a hunch, from the anchor itself: the two hops
            // before it cost about 40% of its probes and found nothing more (issue 45)
            let start_ttl = match trigger {
                Trigger::Blind => anchor_hop.ttl.max(1),
                _ => start_ttl,
            };
            c.candidates.push(Candidate {
                trigger,
                anchor,
                anchor_is_ingress,
                egress: i,
                start_ttl,
                opaque,
                walked_back: 0,
                walked_forward: 0,
            });
        }
    }
    c
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
