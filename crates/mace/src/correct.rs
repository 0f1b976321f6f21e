//! The correction itself: each of the runtime's probe records is matched to the host's
//! stamps of the same probe (the n-th record of a key to the n-th probe with that key
//! the host saw leave) and its RTT split into the network's share and the runtime's:
//! `overhead = rtt_runtime - (t_host_recv - t_host_send)`, `rtt_corrected = t_host_recv
//! - t_host_send`. Where that cannot be done the result says why instead of a number.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::key::Key;
use crate::pair::Pairing;

/// One probe as the runtime (the tool inside the container or VM) recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolProbe {
    pub key: Key,
    /// Its RTT as the runtime measured it; `None` if it saw no reply.
    pub rtt_ns: Option<u64>,
}

/// The correction of one runtime probe record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Correction {
    Corrected {
        /// The runtime's RTT (what scamper reports as `rtt`).
        raw_ns: u64,
        /// The RTT on the host side of the runtime's device: the corrected RTT.
        wire_ns: u64,
        /// `raw_ns - wire_ns`: what the virtualisation added (negative only if the two
        /// clocks run at different rates or a stamp is wrong).
        overhead_ns: i64,
    },
    /// The runtime saw no reply: nothing to correct.
    NoReply,
    /// The host never saw this probe leave.
    NotSeenOnHost,
    /// The runtime saw a reply but the host side did not (a capture drop).
    NoHostReply,
    /// A reply on the host side fitted this probe and another: no attribution.
    Ambiguous,
}

/// The correction of each of `runtime`'s records (in their order) from `pairing`.
pub fn correct(pairing: &Pairing, runtime: &[ToolProbe]) -> Vec<Correction> {
    let mut host: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, p) in pairing.probes.iter().enumerate() {
        host.entry(p.probe.key).or_default().push(i);
    }
    let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
    runtime
        .iter()
        .map(|r| {
            let nth = seen.entry(r.key).or_default();
            let at = host.get(&r.key).and_then(|v| v.get(*nth)).copied();
            *nth += 1;
            let Some(raw_ns) = r.rtt_ns else {
                return Correction::NoReply;
            };
            let Some(stamps) = at.map(|i| pairing.probes[i]) else {
                return Correction::NotSeenOnHost;
            };
            match stamps.wire_rtt_ns() {
                Some(wire_ns) => Correction::Corrected {
                    raw_ns,
                    wire_ns,
                    overhead_ns: raw_ns as i64 - wire_ns as i64,
                },
                None if stamps.contested => Correction::Ambiguous,
                None => Correction::NoHostReply,
            }
        })
        .collect()
}
