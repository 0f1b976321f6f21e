//! The mapping table: which instance flow owns which public identity.
//!
//! A mapping ties an instance's flow `(instance, protocol, destination, identity)` to a
//! public identity unique among live mappings for `(protocol, destination)`, the fields a
//! reply brings back (an ICMP error quotes them; the destination answers to them). The
//! instance's own identity is kept when no other live mapping holds it; on a conflict the
//! next free value of a fixed walk over all 65,536 (odd stride, so every value comes up
//! once) is taken instead, and kept for the mapping's life, so a Paris flow stays one flow.
//!
//! Both directions find a mapping with one hash lookup (hashbrown, `no_std`, with the
//! small multiply-rotate hasher below: keys are a few integers). A reply's fields come
//! from the network, but only instances' probes insert keys, so a fixed hash seed gives
//! an outsider no way to crowd a bucket.
//!
//! Expiry is lazy: each mapping has one entry in `expiry`, at the deadline it had when the
//! entry was made; traffic only moves `last_used`. A due entry whose mapping was used
//! since is put back at its new deadline, so a probe costs no reordering of the timers.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use core::hash::{BuildHasherDefault, Hasher};
use core::net::IpAddr;
use core::time::Duration;

use hashbrown::HashMap;

use vtnt_record::Instant;
use vtnt_wire::proto;

use crate::InstanceId;

/// What a reply is matched by: protocol, destination of the probes, public identity.
pub(crate) type PublicKey = (u8, IpAddr, u16);

/// The instance's side of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct InnerKey {
    pub instance: InstanceId,
    pub proto: u8,
    pub dst: IpAddr,
    pub id: u16,
}

#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    pub inner: InnerKey,
    pub public_id: u16,
    last_used: Instant,
    /// The deadline of this mapping's entry in `expiry`.
    deadline: Instant,
}

/// Why no mapping could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full;

/// Step of the walk over identities on a conflict (odd: visits all 65,536).
const STRIDE: u16 = 0x9e37;

/// FxHash's step (rustc's hasher) with a final rotation, so that hashbrown's bucket
/// (low bits) and tag (high bits) both depend on every word.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v.into());
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(v.into());
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v.into());
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

type Map<K> = HashMap<K, usize, BuildHasherDefault<Fx>>;

#[derive(Debug)]
pub(crate) struct Table {
    slots: Vec<Option<Mapping>>,
    free: Vec<usize>,
    by_inner: Map<InnerKey>,
    by_public: Map<PublicKey>,
    expiry: BTreeSet<(Instant, usize)>,
    idle: Duration,
    max: usize,
}

impl Table {
    pub fn new(idle: Duration, max: usize) -> Table {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            by_inner: Map::default(),
            by_public: Map::default(),
            expiry: BTreeSet::new(),
            idle,
            max,
        }
    }

    pub fn len(&self) -> usize {
        self.by_inner.len()
    }

    /// The public identity of `key`'s flow, made now if it has none; refreshes its idle
    /// timer. `Ok((id, true))` when a new mapping had to take another identity.
    pub fn outbound(&mut self, now: Instant, key: InnerKey) -> Result<(u16, bool), Full> {
        if let Some(&i) = self.by_inner.get(&key) {
            let m = self.slots[i]
                .as_mut()
                .expect("indexed slot holds a mapping");
            m.last_used = now;
            return Ok((m.public_id, false));
        }
        if self.len() >= self.max {
            return Err(Full);
        }
        let free = |id: u16| {
            (id != 0 || matches!(key.proto, proto::ICMP | proto::ICMPV6))
                && !self.by_public.contains_key(&(key.proto, key.dst, id))
        };
        let public_id = (0..=u16::MAX)
            .map(|k| key.id.wrapping_add(k.wrapping_mul(STRIDE)))
            .find(|&id| free(id))
            .ok_or(Full)?;
        let deadline = now + self.idle;
        let m = Mapping {
            inner: key,
            public_id,
            last_used: now,
            deadline,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(m);
                i
            }
            None => {
                self.slots.push(Some(m));
                self.slots.len() - 1
            }
        };
        self.by_inner.insert(key, i);
        self.by_public.insert((key.proto, key.dst, public_id), i);
        self.expiry.insert((deadline, i));
        Ok((public_id, public_id != key.id))
    }

    /// The mapping a reply with these fields belongs to.
    pub fn inbound(&self, key: PublicKey) -> Option<&Mapping> {
        let &i = self.by_public.get(&key)?;
        self.slots[i].as_ref()
    }

    /// When the next mapping may expire (it may have been used since: then nothing
    /// expires and a later deadline follows).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.expiry.first().map(|&(t, _)| t)
    }

    /// Removes the mappings idle for `idle` by `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(&(t, i)) = self.expiry.first() {
            if t > now {
                break;
            }
            let m = self.slots[i].as_mut().expect("timed slot holds a mapping");
            let due = m.last_used + self.idle;
            if due > now {
                self.expiry.remove(&(t, i));
                m.deadline = due;
                self.expiry.insert((due, i));
            } else {
                self.remove(i);
                n += 1;
            }
        }
        n
    }

    /// Removes every mapping of `instance` (a walk over the table: instances come and
    /// go far more rarely than probes).
    pub fn remove_instance(&mut self, instance: InstanceId) {
        let slots: Vec<usize> = self
            .by_inner
            .iter()
            .filter(|(k, _)| k.instance == instance)
            .map(|(_, &i)| i)
            .collect();
        for i in slots {
            self.remove(i);
        }
    }

    fn remove(&mut self, i: usize) {
        let Some(m) = self.slots[i].take() else {
            return;
        };
        self.by_inner.remove(&m.inner);
        self.by_public
            .remove(&(m.inner.proto, m.inner.dst, m.public_id));
        self.expiry.remove(&(m.deadline, i));
        self.free.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use core::net::Ipv4Addr;

    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));

    fn key(instance: u32, proto: u8, id: u16) -> InnerKey {
        InnerKey {
            instance: InstanceId(instance),
            proto,
            dst: DST,
            id,
        }
    }

    #[test]
    fn keeps_free_identities_and_moves_conflicting_ones() {
        let mut t = Table::new(Duration::from_secs(10), 100);
        let now = Instant::from_millis(1);
        assert_eq!(
            t.outbound(now, key(1, proto::UDP, 0x8001)),
            Ok((0x8001, false))
        );
        let (moved, rewritten) = t.outbound(now, key(2, proto::UDP, 0x8001)).unwrap();
        assert!(rewritten && moved != 0x8001);
        assert_eq!(
            t.outbound(now, key(2, proto::UDP, 0x8001)),
            Ok((moved, false))
        );
        // Another protocol or destination is another space.
        assert_eq!(
            t.outbound(now, key(2, proto::TCP, 0x8001)),
            Ok((0x8001, false))
        );
        assert_eq!(
            t.inbound((proto::UDP, DST, moved)).unwrap().inner,
            key(2, proto::UDP, 0x8001)
        );
        // Port 0 is never handed out, ICMP ident 0 is.
        assert_ne!(t.outbound(now, key(3, proto::UDP, 0)).unwrap().0, 0);
        assert_eq!(t.outbound(now, key(3, proto::ICMP, 0)), Ok((0, false)));
    }

    #[test]
    fn idle_mappings_expire_used_ones_stay_and_the_table_is_bounded() {
        let mut t = Table::new(Duration::from_secs(10), 2);
        let t0 = Instant::from_millis(1000);
        t.outbound(t0, key(1, proto::ICMP, 1)).unwrap();
        t.outbound(t0, key(1, proto::ICMP, 2)).unwrap();
        assert_eq!(t.outbound(t0, key(1, proto::ICMP, 3)), Err(Full));
        let t5 = t0 + Duration::from_secs(5);
        t.outbound(t5, key(1, proto::ICMP, 2)).unwrap();
        let t10 = t0 + Duration::from_secs(10);
        assert_eq!(t.next_deadline(), Some(t10));
        assert_eq!(t.expire(t10), 1);
        assert_eq!(t.len(), 1);
        assert_eq!(t.next_deadline(), Some(t5 + Duration::from_secs(10)));
        assert!(t.outbound(t10, key(1, proto::ICMP, 3)).is_ok());
        t.remove_instance(InstanceId(1));
        assert_eq!((t.len(), t.next_deadline()), (0, None));
    }
}
