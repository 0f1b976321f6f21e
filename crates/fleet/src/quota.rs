//! Per-tenant quotas: how many of a tenant's jobs may run at once and how many probes its
//! jobs may send per (UTC) day, set by the operator (`vtnt fleet quota set`) and enforced
//! by the agents, which run every job and belong to the operator, so a tenant speaking
//! raw NATS gets around nothing; the controller's commands check first and refuse
//! before placing anything ([`check`]).
//!
//! Each tenant has a stream of its own in the fleet's account, `VTNT_QUOTA_<t>`
//! ([`stream_name`], made by `vtnt fleet up`), the last message per subject kept:
//! `vtnt.quota.<t>.limit` ([`Limits`], which the operator alone may publish) and
//! `vtnt.quota.<t>.use` ([`Usage`], which the agents alone may publish). The tenant's
//! account imports that stream's info and message reads only ([`crate::auth`]): it reads
//! its quota, it writes nothing of it. Every change of the use is written against the
//! sequence it was read at (`Nats-Expected-Last-Subject-Sequence`, JetStream's
//! compare-and-set), so of two agents admitting jobs at once one wins and the other
//! reads again: the limits hold across agents.
//!
//! A running job holds a lease in the use record that its agent renews every
//! [`RENEW`]; a lease not renewed for [`LEASE`] (its agent died) no longer counts, so a
//! dead agent's slot comes back. A job's probes are an upper bound computed from its spec
//! ([`probe_bound`]), charged when it starts; once it ends they are settled to what its
//! records say it sent ([`sent_probes`]).

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream;
use serde::{Deserialize, Serialize};
use vtnt_jobspec::{JobKind, JobSpec};

use crate::error::ResultExt;
use crate::{Error, Fleet};

/// How long a running job's lease counts without being renewed.
pub const LEASE: Duration = Duration::from_secs(10);
/// How often an agent renews its running jobs' leases.
pub const RENEW: Duration = Duration::from_secs(3);
/// Microseconds in a day: the probes' count starts again at each UTC midnight.
const DAY_US: u64 = 86_400_000_000;

/// Tenant `t`'s quota stream (in the fleet's account).
pub fn stream_name(t: &str) -> String {
    format!("VTNT_QUOTA_{t}")
}

/// The subject of tenant `t`'s limits.
pub fn limit_subject(t: &str) -> String {
    format!("vtnt.quota.{t}.limit")
}

/// The subject of tenant `t`'s use.
pub fn use_subject(t: &str) -> String {
    format!("vtnt.quota.{t}.use")
}

/// A tenant's limits; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub concurrent_jobs: Option<u64>,
    pub probes_per_day: Option<u64>,
}

impl Limits {
    fn any(&self) -> bool {
        self.concurrent_jobs.is_some() || self.probes_per_day.is_some()
    }
}

/// A running job's hold on one of its tenant's concurrent jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub node: String,
    /// It no longer counts after this (µs since the epoch, the agent's clock).
    pub until_us: u64,
    /// The probes charged for it at its start.
    pub probes: u64,
}

/// What a tenant uses: its running jobs (by id) and the probes of the day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The UTC day (days since the epoch) `probes` counts.
    pub day: u64,
    pub probes: u64,
    pub jobs: BTreeMap<String, Lease>,
}

impl Usage {
    /// As of `now_us`: the probes of today only, the leases still renewed.
    pub fn at(mut self, now_us: u64) -> Usage {
        let today = now_us / DAY_US;
        if self.day != today {
            self.day = today;
            self.probes = 0;
        }
        self.jobs.retain(|_, l| l.until_us > now_us);
        self
    }
}

/// A tenant's limits and use, as `vtnt fleet quota show` prints them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quota {
    pub tenant: String,
    pub limits: Limits,
    /// Jobs running now (leases renewed).
    pub jobs_running: u64,
    /// Probes charged today (UTC).
    pub probes_today: u64,
}

/// The most probes a job sends: per target, a ping's count, a trace's attempts at each
/// TTL from its first to its last (and once more with the gap limit's last try), a TNT
/// job's first trace (its revelation traces and pings come on top, counted from its
/// records when it ends); all of it once more per repetition of a held job.
pub fn probe_bound(spec: &JobSpec) -> u64 {
    let trace = |attempts: u8, first_ttl: u8, max_ttl: u8, last_ditch: bool| {
        let ttls = u64::from(max_ttl.saturating_sub(first_ttl)) + 1;
        u64::from(attempts) * (ttls + u64::from(last_ditch))
    };
    let per_target = match &spec.kind {
        JobKind::Ping(p) => u64::from(p.count),
        JobKind::Trace(t) => trace(t.attempts, t.first_ttl, t.max_ttl, t.last_ditch),
        JobKind::Tnt(c) => {
            let t = &c.trace;
            trace(t.attempts, t.first_ttl, t.max_ttl, t.last_ditch)
        }
        JobKind::Micro(_) => 0,
    };
    let runs = match spec.every.as_micros() {
        0 => 1,
        every => 1 + (spec.hold.as_micros() / every) as u64,
    };
    per_target * spec.target_list().len() as u64 * runs
}

/// The probes a job's scamper JSON records say it sent: each trace's `probe_count`, each
/// ping's `ping_sent`.
pub fn sent_probes<'a>(records: impl Iterator<Item = &'a str>) -> u64 {
    let field = |line: &str, key: &str| -> u64 {
        line.find(key)
            .map(|i| &line[i + key.len()..])
            .map(|rest| {
                rest.trim_start()
                    .bytes()
                    .take_while(u8::is_ascii_digit)
                    .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
            })
            .unwrap_or(0)
    };
    records
        .map(|l| field(l, "\"probe_count\":") + field(l, "\"ping_sent\":"))
        .sum()
}

/// Tenant `t`'s quota stream as `fleet`'s user reaches it (the fleet's API for a tenant),
/// created unless it exists.
pub async fn stream(fleet: &Fleet, t: &str) -> crate::Result<jetstream::stream::Stream> {
    crate::ensure_stream(
        &fleet.shared,
        jetstream::stream::Config {
            name: stream_name(t),
            num_replicas: fleet.num_replicas,
            subjects: vec![format!("vtnt.quota.{t}.*")],
            max_messages_per_subject: 1,
            ..Default::default()
        },
    )
    .await
    .nats(|| format!("tenant {t}'s quota stream"))
}

/// Tenant `t`'s limits and use now.
pub async fn read(fleet: &Fleet, t: &str) -> crate::Result<Quota> {
    let st = stream(fleet, t).await?;
    let (limits, _) = crate::cas::last_json::<Limits>(&st, &limit_subject(t)).await?;
    let (usage, _) = crate::cas::last_json::<Usage>(&st, &use_subject(t)).await?;
    let usage = usage.unwrap_or_default().at(crate::now_us());
    Ok(Quota {
        tenant: t.to_string(),
        limits: limits.unwrap_or_default(),
        jobs_running: usage.jobs.len() as u64,
        probes_today: usage.probes,
    })
}

/// The refusal of `jobs` more jobs sending up to `probes` probes under `q`, naming the
/// quota, its limit and the use; `None` when they fit.
pub fn exceeded(q: &Quota, jobs: u64, probes: u64) -> Option<String> {
    let t = &q.tenant;
    if let Some(limit) = q.limits.concurrent_jobs {
        if q.jobs_running + jobs > limit {
            return Some(format!(
                "quota exceeded: tenant {t} may run {limit} job(s) at once, {} run(s) now and {jobs} more asked",
                q.jobs_running
            ));
        }
    }
    if let Some(limit) = q.limits.probes_per_day {
        if q.probes_today + probes > limit {
            return Some(format!(
                "quota exceeded: tenant {t} may send {limit} probes per day (UTC), {} sent or reserved today and up to {probes} more asked",
                q.probes_today
            ));
        }
    }
    None
}

/// The controller's check before it places `jobs` jobs of tenant `t` sending up to
/// `probes` probes in all: an [`Error::Quota`] naming the quota, limit and use when they
/// do not fit now. The agents enforce the limits again as each job starts.
pub async fn check(fleet: &Fleet, t: &str, jobs: u64, probes: u64) -> crate::Result<()> {
    match exceeded(&read(fleet, t).await?, jobs, probes) {
        Some(why) => Err(Error::Quota(why)),
        None => Ok(()),
    }
}

/// `vtnt fleet quota set` (the operator's key): sets the limits given (`Some(None)`: no
/// limit), keeps the others; the limits now.
pub fn set(
    c: &crate::Connect,
    t: &str,
    concurrent_jobs: Option<Option<u64>>,
    probes_per_day: Option<Option<u64>>,
) -> crate::Result<Limits> {
    crate::check_token("the tenant", t)?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet quota set").await?;
        let st = stream(&fleet, t).await?;
        let (old, _) = crate::cas::last_json::<Limits>(&st, &limit_subject(t)).await?;
        let mut l = old.unwrap_or_default();
        if let Some(v) = concurrent_jobs {
            l.concurrent_jobs = v;
        }
        if let Some(v) = probes_per_day {
            l.probes_per_day = v;
        }
        fleet
            .shared
            .publish(
                limit_subject(t),
                serde_json::to_vec(&l).parse("encoding the limits")?.into(),
            )
            .await
            .nats(|| format!("storing tenant {t}'s limits"))?
            .await
            .nats(|| format!("storing tenant {t}'s limits"))?;
        Ok(l)
    })
}

/// `vtnt fleet quota show`: tenant `t`'s limits and use (as the operator, or as `t`).
pub fn show(c: &crate::Connect, t: &str) -> crate::Result<Quota> {
    crate::check_token("the tenant", t)?;
    crate::block_on(async {
        let (_, fleet) = c.fleet("vtnt fleet quota show").await?;
        read(&fleet, t).await
    })
}

/// Changes tenant `t`'s use with `change` (given the limits and the use as of now; an
/// `Err` leaves it as it is), written against the sequence read, again while another
/// writer comes first. Nothing is written for a tenant without limits.
async fn update(
    fleet: &Fleet,
    t: &str,
    mut change: impl FnMut(&Limits, &mut Usage) -> Result<(), String>,
) -> crate::Result<Result<(), String>> {
    use crate::cas::Step;
    let st = stream(fleet, t).await?;
    let (limits, _) = crate::cas::last_json::<Limits>(&st, &limit_subject(t)).await?;
    let limits = limits.unwrap_or_default();
    if !limits.any() {
        return Ok(Ok(()));
    }
    let what = format!("tenant {t}'s use");
    let (out, _) = crate::cas::update(&fleet.shared, &st, &use_subject(t), &what, |read| {
        let usage: Usage = match read {
            Some(b) => {
                serde_json::from_slice(b).parse(|| format!("the message on {}", use_subject(t)))?
            }
            None => Usage::default(),
        };
        let mut usage = usage.at(crate::now_us());
        Ok(match change(&limits, &mut usage) {
            Err(why) => Step::Keep(Err(why)),
            Ok(()) => Step::Write(
                serde_json::to_vec(&usage).parse("encoding the use")?,
                Ok(()),
            ),
        })
    })
    .await?;
    Ok(out)
}

/// An agent's admission of job `job` of tenant `t` on `node`, sending up to `probes`:
/// its lease taken and its probes charged, or the refusal (`quota exceeded: ...`). A job
/// delivered again (its first agent died) takes over its own lease and is charged again.
pub async fn admit(
    fleet: &Fleet,
    t: &str,
    job: &str,
    node: &str,
    probes: u64,
) -> crate::Result<Result<(), String>> {
    update(fleet, t, |limits, usage| {
        let q = Quota {
            tenant: t.to_string(),
            limits: *limits,
            jobs_running: usage.jobs.keys().filter(|j| *j != job).count() as u64,
            probes_today: usage.probes,
        };
        if let Some(why) = exceeded(&q, 1, probes) {
            return Err(why);
        }
        usage.probes += probes;
        usage.jobs.insert(
            job.to_string(),
            Lease {
                node: node.to_string(),
                until_us: crate::now_us() + LEASE.as_micros() as u64,
                probes,
            },
        );
        Ok(())
    })
    .await
}

/// Renews job `job`'s lease (while it runs, every [`RENEW`]).
pub async fn renew(fleet: &Fleet, t: &str, job: &str) -> crate::Result<()> {
    update(fleet, t, |_, usage| {
        if let Some(l) = usage.jobs.get_mut(job) {
            l.until_us = crate::now_us() + LEASE.as_micros() as u64;
        }
        Ok(())
    })
    .await
    .map(|_| ())
}

/// Job `job` ended: its lease returned, its charge settled to `sent` probes when known
/// (`None`: the charge stays).
pub async fn release(fleet: &Fleet, t: &str, job: &str, sent: Option<u64>) -> crate::Result<()> {
    update(fleet, t, |_, usage| {
        if let Some(l) = usage.jobs.remove(job) {
            if let Some(sent) = sent {
                usage.probes = (usage.probes + sent).saturating_sub(l.probes);
            }
        }
        Ok(())
    })
    .await
    .map(|_| ())
}

/// A limit on the command line: a number, or `unlimited`.
pub fn parse_limit(s: &str) -> Result<Option<u64>, String> {
    match s {
        "unlimited" => Ok(None),
        n => n
            .parse()
            .map(Some)
            .map_err(|_| format!("`{s}`: a whole number, or `unlimited`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(words: &str) -> JobSpec {
        let w: Vec<String> = words.split_whitespace().map(String::from).collect();
        vtnt_job::parse_words(&w, vtnt_job::Vantage::Lab)
            .expect("a job")
            .spec
    }

    #[test]
    fn a_jobs_probes_are_bounded_by_its_spec() {
        assert_eq!(probe_bound(&spec("ping -c 3 192.0.2.1 192.0.2.2")), 6);
        // 2 attempts at TTLs 1..=30
        assert_eq!(probe_bound(&spec("trace -q 2 -m 30 192.0.2.1")), 60);
        assert_eq!(probe_bound(&spec("trace -q 1 -f 5 -m 14 192.0.2.1")), 10);
    }

    #[test]
    fn the_records_say_what_was_sent() {
        let recs = [
            r#"{"type":"trace", "probe_count":7, "x":1}"#,
            r#"{"type":"ping", "ping_sent":3, "probe_size":84}"#,
            r#"{"type":"cycle-start"}"#,
        ];
        assert_eq!(sent_probes(recs.into_iter()), 10);
    }

    #[test]
    fn use_counts_today_and_live_leases_only() {
        let now = 3 * DAY_US + 1000;
        let mut u = Usage {
            day: 2,
            probes: 50,
            ..Default::default()
        };
        for (j, until) in [("live", now + 1), ("dead", now - 1)] {
            u.jobs.insert(
                j.into(),
                Lease {
                    node: "n".into(),
                    until_us: until,
                    probes: 1,
                },
            );
        }
        let u = u.at(now);
        assert_eq!((u.day, u.probes), (3, 0));
        assert_eq!(u.jobs.keys().collect::<Vec<_>>(), ["live"]);
    }

    #[test]
    fn a_refusal_names_the_quota_its_limit_and_the_use() {
        let q = Quota {
            tenant: "t".into(),
            limits: Limits {
                concurrent_jobs: Some(2),
                probes_per_day: Some(100),
            },
            jobs_running: 2,
            probes_today: 90,
        };
        let why = exceeded(&q, 1, 0).unwrap();
        assert!(
            why.contains("quota exceeded: tenant t may run 2 job(s) at once, 2 run(s) now"),
            "{why}"
        );
        let q = Quota {
            jobs_running: 0,
            ..q
        };
        let why = exceeded(&q, 1, 11).unwrap();
        assert!(
            why.contains(
                "may send 100 probes per day (UTC), 90 sent or reserved today and up to 11 more"
            ),
            "{why}"
        );
        assert_eq!(exceeded(&q, 1, 10), None);
        assert_eq!(parse_limit("unlimited"), Ok(None));
        assert_eq!(parse_limit("5"), Ok(Some(5)));
        assert!(parse_limit("x").is_err());
    }
}
