//! The fleet-wide rate limit: at most so many probes per second toward one prefix (a /24
//! of IPv4, a /48 of IPv6) and toward one destination address, summed over every job of
//! every agent (`vtnt fleet rate-limit set`, docs/fleet.md "Etiquette").
//!
//! An agent does not see a job's probes (they leave from a container, a VM or a
//! unikernel), but it sets the job's rate (`spec.engine.pps`) before it starts. So a job
//! takes a *rate lease* on every prefix and destination of its targets: a share of that
//! key's limit, the limit minus the other live leases' sum. A job's pps bounds its rate
//! toward any one prefix or destination from above (all its probes together are paced at
//! it), so the job is given the least of its keys' shares, leases that on every key, and
//! every key stays under its limit however its probes are spread over its targets.
//!
//! The limits are the last message on [`LIMIT_SUBJECT`] (the operator's) of the fleet's
//! stream [`STREAM`] (made by `vtnt fleet up`); each key's leases are the last message on
//! its own subject ([`lease_subject`], the agents'), written against the sequence it was
//! read at (`Nats-Expected-Last-Subject-Sequence`): of two agents leasing at once one
//! wins, the other reads again and gets what is left. A job's keys are leased one after
//! the other in a fixed order, each at most the share granted so far, then lowered to the
//! least ([`acquire`]): between the two a key holds more than the job uses, never less,
//! so the limit holds at every moment. A lease is renewed every [`crate::quota::RENEW`]
//! while its job runs and no longer counts [`LEASE`] after its last renewal: a dead
//! agent's share is lost to the others for at most that long. A key's subject not written
//! for [`KEEP`] (its leases long expired) is dropped by the stream.
//!
//! With no limit set there is no lease: a job runs at its own pps, as its policy caps it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use async_nats::jetstream;
use serde::{Deserialize, Serialize};

use crate::error::{bail, ResultExt};
use crate::Fleet;

/// The fleet's stream of rate limits and leases.
pub const STREAM: &str = "VTNT_RATE";
/// The subject of the operator's limits.
pub const LIMIT_SUBJECT: &str = "vtnt.rate.limit";
/// How long a lease counts without being renewed.
pub const LEASE: Duration = crate::quota::LEASE;
/// How long a key's leases are kept after their last write.
pub const KEEP: Duration = Duration::from_secs(3600);
/// The most keys (prefixes and destinations) one job leases.
pub const MAX_KEYS: usize = 1024;
/// The per-prefix limit `vtnt fleet rate-limit set` sets when given none.
pub const DEFAULT_PER_PREFIX: u32 = 100;
/// The per-destination limit `vtnt fleet rate-limit set` sets when given none.
pub const DEFAULT_PER_DESTINATION: u32 = 20;
/// How long a job in wait mode waits for a share before it is refused.
pub const WAIT: Duration = Duration::from_secs(60);
/// How often a waiting job asks again.
pub const RETRY: Duration = Duration::from_millis(500);

/// The subject of a key's leases, `vtnt.rate.lease.<key>`.
pub fn lease_subject(key: &str) -> String {
    format!("vtnt.rate.lease.{key}")
}

/// The fleet's limits, probes per second; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub per_prefix: Option<u32>,
    pub per_destination: Option<u32>,
}

/// One job's share of a key's limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub node: String,
    /// It no longer counts after this (µs since the epoch, the agent's clock).
    pub until_us: u64,
    pub pps: u32,
}

/// A key's leases, by job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leases {
    pub jobs: BTreeMap<String, Share>,
}

impl Leases {
    /// As of `now_us`: the leases still renewed.
    pub fn at(mut self, now_us: u64) -> Leases {
        self.jobs.retain(|_, s| s.until_us > now_us);
        self
    }

    /// What is left of `limit` for `job`: the limit minus the other jobs' leases.
    pub fn free(&self, limit: u32, job: &str) -> u32 {
        let others: u64 = self
            .jobs
            .iter()
            .filter(|(j, _)| *j != job)
            .map(|(_, s)| u64::from(s.pps))
            .sum();
        u64::from(limit).saturating_sub(others) as u32
    }
}

/// The keys a job toward `targets` leases under `limits`, each with its limit, in the
/// order they are leased: `p4-a-b-c-0` for an IPv4 /24, `p6-<three groups>` for an IPv6
/// /48, `d4-a-b-c-d` and `d6-<eight groups>` for a destination.
pub fn keys(targets: &[IpAddr], limits: &Limits) -> BTreeMap<String, u32> {
    let join = |parts: &mut dyn Iterator<Item = String>| parts.collect::<Vec<_>>().join("-");
    let mut keys = BTreeMap::new();
    for t in targets {
        let (prefix, dest) = match t {
            IpAddr::V4(a) => {
                let o = a.octets();
                (
                    format!("p4-{}-{}-{}-0", o[0], o[1], o[2]),
                    format!("d4-{}", join(&mut o.iter().map(u8::to_string))),
                )
            }
            IpAddr::V6(a) => {
                let s = a.segments();
                (
                    format!("p6-{}", join(&mut s[..3].iter().map(|g| format!("{g:x}")))),
                    format!("d6-{}", join(&mut s.iter().map(|g| format!("{g:x}")))),
                )
            }
        };
        if let Some(l) = limits.per_prefix {
            keys.insert(prefix, l);
        }
        if let Some(l) = limits.per_destination {
            keys.insert(dest, l);
        }
    }
    keys
}

/// The key's readable name in a refusal: `p4-192-0-2-0` is "prefix 192.0.2.0/24".
fn named(key: &str) -> String {
    let (kind, rest) = key.split_at(3);
    let v4 = || rest.replace('-', ".");
    let v6 = || rest.replace('-', ":");
    match kind {
        "p4-" => format!("prefix {}/24", v4()),
        "p6-" => format!("prefix {}::/48", v6()),
        "d4-" => format!("destination {}", v4()),
        _ => format!("destination {}", v6()),
    }
}

/// The stream, created unless it exists (`vtnt fleet up`).
pub(crate) async fn create(fleet: &Fleet) -> crate::Result<jetstream::stream::Stream> {
    crate::ensure_stream(
        &fleet.shared,
        jetstream::stream::Config {
            name: STREAM.into(),
            subjects: vec!["vtnt.rate.>".into()],
            max_messages_per_subject: 1,
            max_age: KEEP,
            num_replicas: fleet.num_replicas,
            ..Default::default()
        },
    )
    .await
    .nats("the rate limit's stream")
}

/// The stream as `fleet`'s user reaches it; `None` on a fleet made by an older `vtnt
/// fleet up`, which has no rate limit.
async fn stream(fleet: &Fleet) -> crate::Result<Option<jetstream::stream::Stream>> {
    crate::existing(&fleet.shared, STREAM).await
}

/// The stream, which the operator's commands need.
async fn needed(fleet: &Fleet) -> crate::Result<jetstream::stream::Stream> {
    match stream(fleet).await? {
        Some(st) => Ok(st),
        None => bail!(
            Invalid,
            "the fleet has no rate-limit stream {STREAM}: it was made by an older `vtnt fleet up`; run `vtnt fleet up` again"
        ),
    }
}

/// The fleet's limits now.
pub async fn limits(fleet: &Fleet) -> crate::Result<Limits> {
    let st = needed(fleet).await?;
    Ok(crate::cas::last_json::<Limits>(&st, LIMIT_SUBJECT)
        .await?
        .0
        .unwrap_or_default())
}

/// Checks a limit given on the command line: a whole number of probes per second from 1,
/// or `unlimited`.
pub fn parse_limit(s: &str) -> Result<Option<u32>, String> {
    match s {
        "unlimited" => Ok(None),
        n => match n.parse::<u32>() {
            Ok(0) => Err(format!(
                "`{s}`: a rate limit of 0 would stop every probe; at least 1 (probes per second), or `unlimited`"
            )),
            Ok(v) => Ok(Some(v)),
            Err(_) => Err(format!(
                "`{s}`: a whole number of probes per second (at least 1), or `unlimited`"
            )),
        },
    }
}

/// `vtnt fleet rate-limit set` (the operator's key): sets the limits given (`Some(None)`:
/// no limit), keeps the others; the limits now. A limit of 0 is refused.
pub fn set(
    c: &crate::Connect,
    per_prefix: Option<Option<u32>>,
    per_destination: Option<Option<u32>>,
) -> crate::Result<Limits> {
    if per_prefix == Some(Some(0)) || per_destination == Some(Some(0)) {
        bail!(
            Invalid,
            "rate limit: 0 probes per second would stop every probe; at least 1, or unlimited"
        );
    }
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet rate-limit set").await?;
        let mut l = limits(&fleet).await?;
        if let Some(v) = per_prefix {
            l.per_prefix = v;
        }
        if let Some(v) = per_destination {
            l.per_destination = v;
        }
        fleet
            .shared
            .publish(
                LIMIT_SUBJECT,
                serde_json::to_vec(&l).parse("encoding the limits")?.into(),
            )
            .await
            .nats("storing the rate limits")?
            .await
            .nats("storing the rate limits")?;
        Ok(l)
    })
}

/// `vtnt fleet rate-limit show`: the limits now.
pub fn show(c: &crate::Connect) -> crate::Result<Limits> {
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet rate-limit show").await?;
        limits(&fleet).await
    })
}

/// Changes `key`'s leases with `change` (given them as of now), written against the
/// sequence read, again while another writer comes first; what `change` returned.
async fn update<T>(
    fleet: &Fleet,
    st: &jetstream::stream::Stream,
    key: &str,
    mut change: impl FnMut(&mut Leases) -> T,
) -> crate::Result<T> {
    use crate::cas::Step;
    let subject = lease_subject(key);
    let what = format!("{}'s rate leases", named(key));
    let (out, _) = crate::cas::update(&fleet.shared, st, &subject, &what, |read| {
        let leases: Leases = match read {
            Some(b) => serde_json::from_slice(b).parse(|| format!("the message on {subject}"))?,
            None => Leases::default(),
        };
        let mut leases = leases.at(crate::now_us());
        let before = leases.clone();
        let out = change(&mut leases);
        // nothing changed (a refusal holding nothing, a lease already gone): no write
        Ok(if leases == before {
            Step::Keep(out)
        } else {
            Step::Write(
                serde_json::to_vec(&leases).parse("encoding the leases")?,
                out,
            )
        })
    })
    .await?;
    Ok(out)
}

/// A job's rate leases, held while it runs.
#[derive(Debug, Clone, Default)]
pub struct Held {
    /// The keys leased (none: no limit applies).
    pub keys: Vec<String>,
    /// The job's rate, its share of every key.
    pub pps: u32,
}

/// Job `job` on `node`, toward `targets` at `asked` pps, takes its rate leases: the rate
/// it may use (at most `asked`) and its leases, or the refusal naming the key whose limit
/// is all leased to others (nothing is held then). A job delivered again takes over its
/// own leases.
pub async fn acquire(
    fleet: &Fleet,
    job: &str,
    node: &str,
    targets: &[IpAddr],
    asked: u32,
) -> crate::Result<Result<Held, String>> {
    let Some(st) = stream(fleet).await? else {
        return Ok(Ok(Held {
            keys: Vec::new(),
            pps: asked,
        }));
    };
    let limits = crate::cas::last_json::<Limits>(&st, LIMIT_SUBJECT)
        .await?
        .0
        .unwrap_or_default();
    let keys = keys(targets, &limits);
    if keys.is_empty() {
        return Ok(Ok(Held {
            keys: Vec::new(),
            pps: asked,
        }));
    }
    if keys.len() > MAX_KEYS {
        return Ok(Err(format!(
            "rate limit: the job's targets span {} prefixes and destinations, a job leases at most {MAX_KEYS}: split it",
            keys.len()
        )));
    }
    let mut held = Held {
        keys: Vec::new(),
        pps: asked,
    };
    for (key, limit) in &keys {
        let want = held.pps;
        let got = update(fleet, &st, key, |l| {
            let got = want.min(l.free(*limit, job));
            if got == 0 {
                l.jobs.remove(job);
            } else {
                l.jobs.insert(job.to_string(), share(node, got));
            }
            got
        })
        .await;
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                release(fleet, job, &held.keys).await?;
                return Err(e);
            }
        };
        if got == 0 {
            release(fleet, job, &held.keys).await?;
            return Ok(Err(format!(
                "rate limit: {} may receive {limit} probes per second from the whole fleet, all of it leased to other jobs now",
                named(key)
            )));
        }
        held.keys.push(key.clone());
        held.pps = got;
    }
    // the keys leased before the least share: lowered to it
    for key in &held.keys {
        update(fleet, &st, key, |l| {
            if let Some(s) = l.jobs.get_mut(job) {
                s.pps = s.pps.min(held.pps);
            }
        })
        .await?;
    }
    Ok(Ok(held))
}

fn share(node: &str, pps: u32) -> Share {
    Share {
        node: node.to_string(),
        until_us: crate::now_us() + LEASE.as_micros() as u64,
        pps,
    }
}

/// Renews job `job`'s leases on `keys` (while it runs, every [`crate::quota::RENEW`]).
pub async fn renew(fleet: &Fleet, job: &str, keys: &[String]) -> crate::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let st = needed(fleet).await?;
    for key in keys {
        update(fleet, &st, key, |l| {
            if let Some(s) = l.jobs.get_mut(job) {
                s.until_us = crate::now_us() + LEASE.as_micros() as u64;
            }
        })
        .await?;
    }
    Ok(())
}

/// Job `job` ended: its leases on `keys` returned.
pub async fn release(fleet: &Fleet, job: &str, keys: &[String]) -> crate::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let st = needed(fleet).await?;
    for key in keys {
        update(fleet, &st, key, |l| {
            l.jobs.remove(job);
        })
        .await?;
    }
    Ok(())
}

/// The leases on `key` now (live ones), as the operator reads them.
pub async fn leases(fleet: &Fleet, key: &str) -> crate::Result<Leases> {
    let st = needed(fleet).await?;
    Ok(crate::cas::last_json::<Leases>(&st, &lease_subject(key))
        .await?
        .0
        .unwrap_or_default()
        .at(crate::now_us()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(pps: u32, until_us: u64) -> Share {
        Share {
            node: "n".into(),
            until_us,
            pps,
        }
    }

    #[test]
    fn a_share_is_the_limit_minus_the_other_live_leases() {
        let mut l = Leases::default();
        l.jobs.insert("a".into(), lease(30, 100));
        l.jobs.insert("b".into(), lease(50, 100));
        l.jobs.insert("dead".into(), lease(90, 10));
        let l = l.at(50);
        assert_eq!(l.free(100, "c"), 20);
        // a job's own lease (delivered again) is not counted against it
        assert_eq!(l.free(100, "a"), 50);
        assert_eq!(l.free(60, "c"), 0);
        assert_eq!(Leases::default().free(100, "c"), 100);
    }

    #[test]
    fn leases_taken_one_after_another_never_pass_the_limit() {
        let mut l = Leases::default();
        let mut granted = Vec::new();
        for j in 0..100 {
            let got = 37u32.min(l.free(100, &j.to_string()));
            if got > 0 {
                l.jobs.insert(j.to_string(), lease(got, u64::MAX));
            }
            granted.push(got);
        }
        assert_eq!(granted[..4], [37, 37, 26, 0]);
        assert_eq!(l.jobs.values().map(|s| s.pps).sum::<u32>(), 100);
    }

    #[test]
    fn a_jobs_keys_are_its_prefixes_and_destinations() {
        let t: Vec<IpAddr> = ["192.0.2.1", "192.0.2.9", "198.51.100.7", "2001:db8:1:2::5"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let both = Limits {
            per_prefix: Some(100),
            per_destination: Some(10),
        };
        let k = keys(&t, &both);
        assert_eq!(
            k.keys().collect::<Vec<_>>(),
            [
                "d4-192-0-2-1",
                "d4-192-0-2-9",
                "d4-198-51-100-7",
                "d6-2001-db8-1-2-0-0-0-5",
                "p4-192-0-2-0",
                "p4-198-51-100-0",
                "p6-2001-db8-1",
            ]
        );
        assert_eq!(k["p4-192-0-2-0"], 100);
        assert_eq!(k["d4-192-0-2-1"], 10);
        assert_eq!(named("p4-192-0-2-0"), "prefix 192.0.2.0/24");
        assert_eq!(named("p6-2001-db8-1"), "prefix 2001:db8:1::/48");
        assert_eq!(named("d4-192-0-2-1"), "destination 192.0.2.1");
        let prefixes = Limits {
            per_prefix: Some(5),
            per_destination: None,
        };
        assert_eq!(keys(&t, &prefixes).len(), 3);
        assert!(keys(&t, &Limits::default()).is_empty());
    }

    #[test]
    fn a_limit_of_zero_or_a_negative_is_refused() {
        assert_eq!(parse_limit("100"), Ok(Some(100)));
        assert_eq!(parse_limit("unlimited"), Ok(None));
        let zero = parse_limit("0").unwrap_err();
        assert!(zero.contains("0 would stop every probe"), "{zero}");
        let neg = parse_limit("-5").unwrap_err();
        assert!(neg.contains("a whole number of probes per second"), "{neg}");
    }
}
