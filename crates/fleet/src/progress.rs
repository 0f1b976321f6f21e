//! A wait-mode job's progress, so that a job delivered again (its agent died, the broker
//! restarted) probes only the targets whose results are not stored yet.
//!
//! Every record of a job has its place (`Vtnt-Index`, [`Places`]): a target's first
//! record takes the target's place in the job's list, any other record (a second round
//! of a held job, a record toward no target of the list) a place from the list's length
//! on, in the order they come. A record stored under its place is so the same message
//! (`Nats-Msg-Id: <job>.<place>`) whichever delivery probed it, and the server's
//! deduplication keeps one.
//!
//! While the job runs, its agent stores which targets' records the server has
//! acknowledged ([`Done`]) on `vtnt.progress.<tenant>.<job>` of the fleet's stream
//! [`STREAM`] (the last message per subject), at most one write in flight; a delivery
//! after the first reads it and runs the job on the other targets only. What the job was
//! doing when its agent died (targets probed but not yet recorded, and the records of
//! the last round trip) is probed again: their records, if stored twice, are one message.
//! Once the job's summary is stored its progress is emptied (an empty message, which
//! says nothing is done), and a subject not written for [`KEEP`] is dropped by the
//! stream. Jobs that repeat (`every=`) or whose targets ride in a module are run whole
//! again.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use async_nats::jetstream;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::ResultExt;
use crate::Fleet;

/// The fleet's stream of jobs' progress.
pub const STREAM: &str = "VTNT_PROGRESS";
/// How long a job's progress is kept after its last write: as long as a job's long
/// target list ([`crate::DATA_MAX_AGE`]), without which it cannot run again.
pub const KEEP: Duration = crate::DATA_MAX_AGE;

/// The subject of `tenant`'s job `job`'s progress.
pub fn subject(tenant: &str, job: &str) -> String {
    format!("vtnt.progress.{tenant}.{job}")
}

/// The stream, created unless it exists (`vtnt fleet up`).
pub(crate) async fn create(fleet: &Fleet) -> crate::Result<()> {
    crate::ensure_stream(
        &fleet.shared,
        jetstream::stream::Config {
            name: STREAM.into(),
            subjects: vec!["vtnt.progress.>".into()],
            max_messages_per_subject: 1,
            max_age: KEEP,
            num_replicas: fleet.num_replicas,
            ..Default::default()
        },
    )
    .await
    .nats("the jobs' progress stream")?;
    Ok(())
}

/// The targets of a job's list whose records are stored, by their place in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Done {
    bits: Vec<u8>,
}

/// [`Done`] as it is stored: the list's length and the bits, base64.
#[derive(Serialize, Deserialize)]
struct Stored {
    targets: u64,
    done: String,
}

impl Done {
    /// None done of a list of `targets`.
    pub fn new(targets: usize) -> Done {
        Done {
            bits: vec![0; targets.div_ceil(8)],
        }
    }

    pub fn set(&mut self, place: usize) {
        if let Some(b) = self.bits.get_mut(place / 8) {
            *b |= 1 << (place % 8);
        }
    }

    pub fn contains(&self, place: usize) -> bool {
        self.bits
            .get(place / 8)
            .is_some_and(|b| b & (1 << (place % 8)) != 0)
    }

    /// How many are done.
    pub fn count(&self) -> u64 {
        self.bits.iter().map(|b| u64::from(b.count_ones())).sum()
    }

    fn encode(&self, targets: usize) -> Vec<u8> {
        serde_json::to_vec(&Stored {
            targets: targets as u64,
            done: base64::engine::general_purpose::STANDARD.encode(&self.bits),
        })
        .unwrap_or_default()
    }

    /// A stored progress of a list of `targets`; `None` when it is not one (another
    /// list's length, bits that do not decode).
    fn decode(payload: &[u8], targets: usize) -> Option<Done> {
        let s: Stored = serde_json::from_slice(payload).ok()?;
        let bits = base64::engine::general_purpose::STANDARD
            .decode(s.done)
            .ok()?;
        (s.targets == targets as u64 && bits.len() == targets.div_ceil(8)).then_some(Done { bits })
    }
}

/// Where a job's records go ([`Places::place`]): each target's first record to the
/// target's place in the list, every other one from the list's length on.
#[derive(Debug)]
pub struct Places {
    /// Each target's places not yet taken (a target listed twice has two).
    free: HashMap<IpAddr, VecDeque<usize>>,
    next_other: u64,
}

impl Places {
    /// The places of `list`'s targets, but for those `done` already.
    pub fn new(list: &[IpAddr], done: &Done) -> Places {
        let mut free: HashMap<IpAddr, VecDeque<usize>> = HashMap::new();
        for (i, t) in list.iter().enumerate().filter(|(i, _)| !done.contains(*i)) {
            free.entry(*t).or_default().push_back(i);
        }
        Places {
            free,
            next_other: list.len() as u64,
        }
    }

    /// The place of `record` (a scamper JSON line), and the target's place in the list
    /// when it is that target's first record.
    pub fn place(&mut self, record: &str) -> (u64, Option<usize>) {
        let target = record_dst(record)
            .and_then(|d| self.free.get_mut(&d))
            .and_then(VecDeque::pop_front);
        match target {
            Some(i) => (i as u64, Some(i)),
            None => {
                self.next_other += 1;
                (self.next_other - 1, None)
            }
        }
    }
}

/// The `dst` of a scamper JSON record.
fn record_dst(record: &str) -> Option<IpAddr> {
    #[derive(Deserialize)]
    struct Dst<'a> {
        #[serde(borrow)]
        dst: Option<&'a str>,
    }
    serde_json::from_str::<Dst>(record).ok()?.dst?.parse().ok()
}

/// The stream as the agent reaches it; `None` on a fleet made by an older `vtnt fleet
/// up`, whose jobs are run whole again.
async fn stream(fleet: &Fleet) -> crate::Result<Option<jetstream::stream::Stream>> {
    crate::existing(&fleet.shared, STREAM).await
}

/// What an earlier delivery of `tenant`'s job `job`, whose list holds `targets`, stored
/// of its progress (none done when nothing was, or on a fleet without the stream).
pub async fn read(fleet: &Fleet, tenant: &str, job: &str, targets: usize) -> crate::Result<Done> {
    use jetstream::stream::LastRawMessageErrorKind;
    let Some(st) = stream(fleet).await? else {
        return Ok(Done::new(targets));
    };
    match st
        .get_last_raw_message_by_subject(&subject(tenant, job))
        .await
    {
        Ok(m) => Ok(Done::decode(&m.payload, targets).unwrap_or_else(|| Done::new(targets))),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(Done::new(targets)),
        Err(e) => Err(e).nats(|| format!("reading job {job}'s progress")),
    }
}

/// Stores job `job`'s progress `done` (of a list of `targets`).
pub async fn write(
    fleet: &Fleet,
    tenant: &str,
    job: &str,
    done: &Done,
    targets: usize,
) -> crate::Result<()> {
    fleet
        .shared
        .publish(subject(tenant, job), done.encode(targets).into())
        .await
        .nats(|| format!("storing job {job}'s progress"))?
        .await
        .nats(|| format!("storing job {job}'s progress"))?;
    Ok(())
}

/// Empties job `job`'s progress: its summary is stored.
pub async fn clear(fleet: &Fleet, tenant: &str, job: &str) -> crate::Result<()> {
    fleet
        .shared
        .publish(subject(tenant, job), bytes::Bytes::new())
        .await
        .nats(|| format!("emptying job {job}'s progress"))?
        .await
        .nats(|| format!("emptying job {job}'s progress"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(s: &str) -> Vec<IpAddr> {
        s.split_whitespace().map(|a| a.parse().unwrap()).collect()
    }

    fn rec(dst: &str) -> String {
        format!(r#"{{"type":"trace","version":"0.1","dst":"{dst}","hops":[]}}"#)
    }

    #[test]
    fn a_targets_first_record_takes_its_place_and_others_follow_the_list() {
        let list = addrs("192.0.2.1 192.0.2.2 192.0.2.1");
        let mut p = Places::new(&list, &Done::new(list.len()));
        assert_eq!(p.place(&rec("192.0.2.2")), (1, Some(1)));
        assert_eq!(p.place(&rec("192.0.2.1")), (0, Some(0)));
        assert_eq!(p.place(&rec("192.0.2.1")), (2, Some(2)), "listed twice");
        assert_eq!(p.place(&rec("192.0.2.1")), (3, None), "a second round");
        assert_eq!(p.place(&rec("198.51.100.7")), (4, None), "toward no target");
        assert_eq!(p.place("not json"), (5, None));
    }

    #[test]
    fn a_resumed_delivery_places_the_targets_left_where_the_first_would_have() {
        let list = addrs("192.0.2.1 192.0.2.2 192.0.2.3");
        let mut done = Done::new(list.len());
        done.set(1);
        let mut p = Places::new(&list, &done);
        assert_eq!(p.place(&rec("192.0.2.3")), (2, Some(2)));
        assert_eq!(
            p.place(&rec("192.0.2.2")),
            (3, None),
            "done before: not its place"
        );
        assert_eq!(p.place(&rec("192.0.2.1")), (0, Some(0)));
    }

    #[test]
    fn progress_round_trips_and_another_lists_is_none() {
        let mut d = Done::new(1000);
        for i in [0, 7, 8, 999] {
            d.set(i);
        }
        d.set(1000); // past the list: ignored
        assert_eq!(d.count(), 4);
        assert!(d.contains(999) && !d.contains(998) && !d.contains(5000));
        let bytes = d.encode(1000);
        assert_eq!(Done::decode(&bytes, 1000), Some(d));
        assert_eq!(Done::decode(&bytes, 999 - 7), None);
        assert_eq!(Done::decode(b"{\"targets\":8,\"done\":\"!!\"}", 8), None);
        assert_eq!(Done::decode(b"garbage", 8), None);
        assert_eq!(Done::decode(b"", 8), None, "emptied");
    }
}
