//! The fleet's opt-out list: the prefixes whose operators asked not to be probed, kept by
//! the fleet's operator in one place and applied by every agent to every job it takes
//! (`vtnt fleet opt-out add|remove|list`, docs/fleet.md "Etiquette").
//!
//! The list is one message, the last on [`SUBJECT`] in the fleet's stream [`STREAM`]
//! (made by `vtnt fleet up`; its history kept, [`HISTORY`] versions), in the exclusion
//! list's own format (one IPv4 prefix a line). Its revision is the message's stream
//! sequence. Every change is written against the revision it was read at (JetStream's
//! `Nats-Expected-Last-Subject-Sequence`), so two operators editing at once never lose
//! one's change: the second reads again and applies its change to the first's list.
//!
//! Agents read the last version before they take their first job, then every
//! [`POLL`]: a change reaches every agent within that and a round trip, however many
//! agents there are, and an agent whose connection was lost catches up on its next read.
//! The agent's heartbeat names the revision it applies and when it applied it. A list an
//! agent cannot read (not the format above, or larger than [`MAX_PREFIXES`]) makes it
//! refuse every job until a readable one comes: an agent never probes on a list it could
//! not apply. A job already running when a change arrives runs to its end (its probes
//! were checked against the list it started with); the agent's `--timeout` bounds it.

use std::time::Duration;

use async_nats::jetstream;
use vtnt_policy::PrefixSet;

use crate::error::{bail, ResultExt};
use crate::{Connect, Error, Fleet};

/// The fleet's stream of opt-out lists.
pub const STREAM: &str = "VTNT_OPTOUT";
/// The subject of the list.
pub const SUBJECT: &str = "vtnt.optout";
/// The versions the stream keeps (who changed what, when: `nats stream get`).
pub const HISTORY: i64 = 64;
/// How often an agent reads the list.
pub const POLL: Duration = Duration::from_secs(1);
/// The most prefixes a list holds (a message of at most a megabyte, nats-server's
/// default largest payload, at 18 bytes a prefix).
pub const MAX_PREFIXES: usize = 50_000;

/// A version of the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Version {
    /// The message's stream sequence; 0: no list was ever written.
    pub revision: u64,
    pub prefixes: PrefixSet,
}

/// What a change does to the list.
#[derive(Debug, Clone)]
pub enum Change {
    Add(PrefixSet),
    /// Each prefix removed exactly (a wider one holding it stays).
    Remove(PrefixSet),
}

/// The stream, created unless it exists (`vtnt fleet up`).
pub(crate) async fn create(fleet: &Fleet) -> crate::Result<()> {
    crate::ensure_stream(
        &fleet.shared,
        jetstream::stream::Config {
            name: STREAM.into(),
            subjects: vec![SUBJECT.into()],
            max_messages_per_subject: HISTORY,
            num_replicas: fleet.num_replicas,
            // a list is at most MAX_PREFIXES lines
            max_message_size: (MAX_PREFIXES * 20) as i32,
            ..Default::default()
        },
    )
    .await
    .nats("the opt-out list's stream")?;
    Ok(())
}

/// Reads a list's text: [`PrefixSet::parse`]'s format, at most [`MAX_PREFIXES`].
pub fn parse(text: &str) -> crate::Result<PrefixSet> {
    let set = PrefixSet::parse(text).map_err(|e| Error::Invalid(format!("opt-out list: {e}")))?;
    if set.len() > MAX_PREFIXES {
        bail!(
            Invalid,
            "opt-out list: {} prefixes, at most {MAX_PREFIXES}",
            set.len()
        );
    }
    Ok(set)
}

/// The list's text: one prefix a line, in address order.
pub fn text(set: &PrefixSet) -> String {
    set.iter().map(|p| format!("{p}\n")).collect()
}

/// The stream, which reading and writing the list need.
async fn stream(fleet: &Fleet) -> crate::Result<jetstream::stream::Stream> {
    match crate::existing(&fleet.shared, STREAM).await? {
        Some(st) => Ok(st),
        None => bail!(
            Invalid,
            "the fleet has no opt-out stream {STREAM}: it was made by an older `vtnt fleet up`; run `vtnt fleet up` again"
        ),
    }
}

/// A version's prefixes from its message (none when none was written).
fn decode(body: Option<&[u8]>) -> crate::Result<PrefixSet> {
    let Some(body) = body else {
        return Ok(PrefixSet::default());
    };
    let text =
        std::str::from_utf8(body).map_err(|_| Error::Invalid("opt-out list: not UTF-8".into()))?;
    parse(text)
}

/// The last version of the list (revision 0 and no prefixes when none was written).
pub async fn read(fleet: &Fleet) -> crate::Result<Version> {
    let read = crate::cas::last(&stream(fleet).await?, SUBJECT).await?;
    Ok(Version {
        revision: read.as_ref().map_or(0, |(_, seq)| *seq),
        prefixes: decode(read.as_ref().map(|(b, _)| b.as_ref()))?,
    })
}

/// Applies `change` to the last version and writes the result against it (the
/// operator's key); tries again, from a fresh read, when another writer came between.
/// The new version.
pub fn update(connect: &Connect, change: &Change) -> crate::Result<Version> {
    crate::block_on(async {
        let (_client, fleet) = connect.fleet("vtnt fleet opt-out").await?;
        let st = stream(&fleet).await?;
        let (prefixes, revision) =
            crate::cas::update(&fleet.shared, &st, SUBJECT, "the opt-out list", |read| {
                let prefixes = apply(&decode(read)?, change)?;
                Ok(crate::cas::Step::Write(
                    text(&prefixes).into_bytes(),
                    prefixes,
                ))
            })
            .await?;
        Ok(Version { revision, prefixes })
    })
}

/// The last version (the operator's key, or an agent's).
pub fn show(connect: &Connect) -> crate::Result<Version> {
    crate::block_on(async {
        let (_client, fleet) = connect.fleet("vtnt fleet opt-out").await?;
        read(&fleet).await
    })
}

/// What an agent applies: the last version it read and when, or why it could not read
/// the last one (then it takes no job).
#[derive(Debug, Clone, Default)]
pub struct Held {
    pub version: Version,
    /// When this agent applied it, µs since the epoch (0: never).
    pub applied_us: u64,
    pub unreadable: Option<String>,
}

impl Held {
    /// The prefixes no job may probe, or why no job may run.
    pub fn exclusions(&self) -> Result<&PrefixSet, String> {
        match &self.unreadable {
            None => Ok(&self.version.prefixes),
            Some(why) => Err(format!(
                "refused: this agent cannot read the fleet's opt-out list, so it probes nothing ({why})"
            )),
        }
    }

    /// Takes what a read gave; whether it changed what the agent applies. A broker that
    /// did not answer changes nothing: the agent keeps the last version it read.
    pub fn take(&mut self, read: crate::Result<Version>) -> bool {
        match read {
            Ok(v) if v != self.version || self.unreadable.is_some() || self.applied_us == 0 => {
                *self = Held {
                    version: v,
                    applied_us: crate::now_us(),
                    unreadable: None,
                };
                true
            }
            Ok(_) => false,
            Err(Error::Invalid(why)) => {
                let changed = self.unreadable.as_deref() != Some(why.as_str());
                self.unreadable = Some(why);
                changed
            }
            Err(_) => false,
        }
    }
}

fn apply(list: &PrefixSet, change: &Change) -> crate::Result<PrefixSet> {
    let out: PrefixSet = match change {
        Change::Add(add) => list.iter().chain(add.iter()).copied().collect(),
        Change::Remove(gone) => {
            if let Some(p) = gone.iter().find(|p| !list.iter().any(|q| q == *p)) {
                bail!(
                    Invalid,
                    "{p} is not on the opt-out list (remove takes prefixes as listed)"
                );
            }
            list.iter()
                .filter(|p| !gone.iter().any(|q| q == *p))
                .copied()
                .collect()
        }
    };
    if out.len() > MAX_PREFIXES {
        bail!(
            Invalid,
            "the opt-out list would hold {} prefixes, at most {MAX_PREFIXES}",
            out.len()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> PrefixSet {
        parse(text).unwrap()
    }

    #[test]
    fn adding_folds_covered_prefixes_and_removing_takes_exact_entries() {
        let l = apply(
            &set("192.0.2.0/25\n"),
            &Change::Add(set("192.0.2.0/24\n198.51.100.7/32")),
        )
        .unwrap();
        assert_eq!(text(&l), "192.0.2.0/24\n198.51.100.7/32\n");
        let l = apply(&l, &Change::Remove(set("198.51.100.7/32"))).unwrap();
        assert_eq!(text(&l), "192.0.2.0/24\n");
        let e = apply(&l, &Change::Remove(set("192.0.2.0/25"))).unwrap_err();
        assert!(
            format!("{e}").contains("192.0.2.0/25 is not on the opt-out list"),
            "{e}"
        );
    }

    #[test]
    fn a_list_names_its_bad_line_and_is_bounded() {
        let e = parse("192.0.2.0/24\nnot-a-prefix\n").unwrap_err();
        assert!(format!("{e}").contains("line 2"), "{e}");
        let many: String = (0..=MAX_PREFIXES as u32)
            .map(|i| format!("{}/32\n", std::net::Ipv4Addr::from(0x6440_0000 + i)))
            .collect();
        let e = parse(&many).unwrap_err();
        assert!(format!("{e}").contains("at most 50000"), "{e}");
    }

    #[test]
    fn an_agent_applies_new_versions_refuses_on_an_unreadable_one_and_keeps_its_list_when_the_broker_is_away(
    ) {
        let mut h = Held::default();
        assert!(h.take(Ok(Version::default())), "the first read is applied");
        assert!(!h.take(Ok(Version::default())));
        let v = Version {
            revision: 3,
            prefixes: set("192.0.2.0/24"),
        };
        assert!(h.take(Ok(v.clone())));
        assert_eq!(h.exclusions().unwrap(), &v.prefixes);
        let away = Error::TimedOut("no answer".into());
        assert!(!h.take(Err(away)));
        assert_eq!(h.exclusions().unwrap(), &v.prefixes);
        assert!(h.take(Err(Error::Invalid("opt-out list: line 2: bad".into()))));
        let e = h.exclusions().unwrap_err();
        assert!(e.contains("probes nothing (opt-out list: line 2"), "{e}");
        assert!(h.take(Ok(v)), "readable again");
        assert!(h.exclusions().is_ok());
    }

    #[test]
    fn the_text_reads_back_as_the_same_list() {
        let l = set("# a comment\n203.0.113.0/24\n\n192.0.2.128/25\n");
        assert_eq!(parse(&text(&l)).unwrap(), l);
    }
}
