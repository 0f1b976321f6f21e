//! A fleet tenant's results into the store (`vtnt fleet store`; `vtnt serve` calls
//! [`feed`] too). The tenant's results stream (`VTNT_RESULTS_<tenant>`, subjects
//! `vtnt.results.<tenant>.<job>.r` for records and `.s` for the job's summary,
//! docs/fleet.md) is read through a durable pull consumer named after the store
//! (`vtnt-store-<store id>`), so the server remembers how far this store got: a store
//! that was down catches up from there, and two stores reading one stream each get every
//! message. A batch is filed (one transaction per job in it) before it is acknowledged
//! (ack-all on its last message): a store that dies in between is sent the batch again,
//! and the record digest stores nothing twice.
//!
//! Each record's provenance comes from its message: the job id (its run and job), the
//! `Vtnt-Index` header (its place in the job), `Vtnt-Node` and `Vtnt-Clock-Sync`; the
//! summary adds the job's status, runtime, location and times. The provenance headers
//! (docs/fleet.md, Provenance) `Vtnt-Source`, `Vtnt-Image-Sha256` and
//! `Vtnt-Clock-Offset-Us` (and `Vtnt-Location`) are read when an agent sends them
//! ([`node_of`]). A message that is not a record or a summary is
//! acknowledged and reported (stream sequence, subject, why), never retried forever.

use std::collections::BTreeMap;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use futures::StreamExt;
use vtnt_fleet::{Connect, JobSummary};
use vtnt_formats::Item;

use crate::{IngestReport, JobInfo, NodeInfo, Provenance, RunInfo, Source, Store, Tenant};

/// The vantage point a record's headers (`header` looks one up) name, with the
/// provenance they carry: `Vtnt-Source` is the node's public address, the broker's
/// clock minus the node's (`Vtnt-Clock-Offset-Us`) its clock offset, in ms; `None`
/// without `Vtnt-Node`.
fn node_of(header: impl Fn(&str) -> Option<String>) -> Option<NodeInfo> {
    Some(NodeInfo {
        name: header("Vtnt-Node")?,
        location: header("Vtnt-Location"),
        public_addr: header("Vtnt-Source"),
        image_sha256: header("Vtnt-Image-Sha256"),
        clock_offset_ms: header("Vtnt-Clock-Offset-Us")
            .and_then(|v| v.parse::<i64>().ok())
            .map(|us| us as f64 / 1e3),
        clock_sync: header("Vtnt-Clock-Sync"),
    })
}

/// How to read the stream.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    pub tenant: Tenant,
    /// Keep reading as results come (until the process is stopped); otherwise stop once
    /// the stream has nothing more for this store.
    pub follow: bool,
    /// Messages per batch (and transaction).
    pub batch: usize,
}

/// What a feed stored.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FeedReport {
    /// Messages read (records and summaries).
    pub messages: u64,
    pub stored: IngestReport,
    pub summaries: u64,
    /// Messages that were neither, each with its stream sequence and why.
    pub rejected: Vec<String>,
}

/// The durable consumer's name for `store`.
pub fn consumer_name(store: &Store) -> crate::Result<String> {
    Ok(format!("vtnt-store-{}", store.id()?))
}

/// Reads `o.tenant`'s results stream into `store` through `c` (the tenant's
/// credentials); `progress` hears after every batch.
pub fn feed(
    c: &Connect,
    store: &mut Store,
    o: &FeedOptions,
    mut progress: impl FnMut(&FeedReport),
) -> crate::Result<FeedReport> {
    let durable = consumer_name(store)?;
    let tenant = o.tenant.as_str();
    vtnt_fleet::block_on(async {
        let (_client, fleet) = c.fleet("vtnt fleet store").await?;
        let name = vtnt_fleet::results_stream(tenant);
        let mut report = FeedReport::default();
        let stream = loop {
            match vtnt_fleet::existing(&fleet.js, &name).await? {
                Some(s) => break s,
                None if o.follow => tokio::time::sleep(Duration::from_secs(2)).await,
                // no job of the tenant has stored a result yet
                None => return Ok(report),
            }
        };
        let mut consumer = stream
            .get_or_create_consumer(
                &durable,
                pull::Config {
                    durable_name: Some(durable.clone()),
                    filter_subject: format!("vtnt.results.{tenant}.>"),
                    deliver_policy: DeliverPolicy::All,
                    ack_policy: AckPolicy::All,
                    ack_wait: Duration::from_secs(60),
                    ..Default::default()
                },
            )
            .await
            .map_err(nats(|| format!("the store's consumer {durable} on {name}")))?;
        loop {
            let mut batch = consumer
                .batch()
                .max_messages(o.batch)
                .expires(Duration::from_secs(1))
                .messages()
                .await
                .map_err(nats(|| format!("reading {name}")))?;
            let mut msgs = Vec::new();
            while let Some(m) = batch.next().await {
                msgs.push(m.map_err(nats(|| format!("reading {name}")))?);
            }
            let Some(last) = msgs.last() else {
                let info = consumer
                    .info()
                    .await
                    .map_err(nats(|| format!("the store's consumer {durable} on {name}")))?;
                if !o.follow && info.num_pending == 0 {
                    return Ok(report);
                }
                continue;
            };
            let pending = last.info().map_or(1, |i| i.pending);
            file(store, &o.tenant, &msgs, &mut report)?;
            last.double_ack()
                .await
                .map_err(nats(|| format!("acknowledging a batch of {name}")))?;
            progress(&report);
            if !o.follow && pending == 0 {
                return Ok(report);
            }
        }
    })
}

/// A NATS client's error as the fleet's [`vtnt_fleet::Error::Nats`], naming what was
/// being done.
fn nats<E: Into<vtnt_fleet::BoxError>>(
    what: impl FnOnce() -> String,
) -> impl FnOnce(E) -> crate::StoreError {
    move |e| {
        vtnt_fleet::Error::Nats {
            what: what(),
            source: e.into(),
        }
        .into()
    }
}

/// One job's messages of a batch.
#[derive(Default)]
struct JobMessages {
    records: Vec<(i64, Item)>,
    summary: Option<JobSummary>,
    node: Option<NodeInfo>,
}

/// Files a batch: every job's records and summary in a transaction of its own.
fn file(
    store: &mut Store,
    tenant: &Tenant,
    msgs: &[async_nats::jetstream::Message],
    report: &mut FeedReport,
) -> crate::Result<()> {
    let mut jobs: BTreeMap<String, JobMessages> = BTreeMap::new();
    for m in msgs {
        report.messages += 1;
        let seq = m.info().map_or(0, |i| i.stream_sequence);
        let mut reject = |why: String| {
            report
                .rejected
                .push(format!("message {seq} ({}): {why}", m.subject))
        };
        let parts: Vec<&str> = m.subject.split('.').collect();
        let ["vtnt", "results", t, job, kind] = parts[..] else {
            reject("not a results subject".into());
            continue;
        };
        if t != tenant.as_str() {
            reject(format!("tenant {t} is not {tenant}"));
            continue;
        }
        let header = |k: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(k))
                .map(|v| v.as_str().to_string())
        };
        let entry = jobs.entry(job.to_string()).or_default();
        match kind {
            "r" => {
                let item = std::str::from_utf8(&m.payload)
                    .map_err(|e| e.to_string())
                    .and_then(|text| {
                        vtnt_formats::parse_json_line(text, 1).map_err(|e| e.kind.to_string())
                    });
                let index = header("Vtnt-Index").and_then(|i| i.parse::<i64>().ok());
                match (item, index) {
                    (Ok(item @ (Item::Record(_) | Item::Annotated(..))), Some(i)) => {
                        entry.records.push((i, item))
                    }
                    (Ok(_), Some(_)) => reject("not a trace or ping".into()),
                    (Ok(_), None) => reject("no Vtnt-Index header".into()),
                    (Err(why), _) => reject(why),
                }
                if let Some(node) = node_of(header) {
                    entry.node = Some(node);
                }
            }
            "s" => match serde_json::from_slice::<JobSummary>(&m.payload) {
                Ok(s) => {
                    report.summaries += 1;
                    entry.summary = Some(s);
                }
                Err(e) => reject(format!("summary: {e}")),
            },
            _ => reject(format!("unknown kind `{kind}`")),
        }
    }
    for (job, msgs) in jobs {
        let p = provenance(tenant, &job, &msgs);
        let mut ingest = store.ingest(&p)?;
        for (i, item) in &msgs.records {
            if let Err(why) = ingest.item(Some(*i), item)? {
                report
                    .rejected
                    .push(format!("job {job}, record {i}: {why}"));
            }
        }
        let r = ingest.commit()?;
        report.stored.traces += r.traces;
        report.stored.pings += r.pings;
        report.stored.known += r.known;
    }
    Ok(())
}

/// A fleet job's run, node and job rows.
fn provenance(tenant: &Tenant, job: &str, m: &JobMessages) -> Provenance {
    let s = m.summary.as_ref();
    let mut node = m.node.clone().unwrap_or_default();
    if let Some(s) = s {
        node.name = s.node.clone();
        node.location = node.location.or(Some(s.location.clone()));
        node.clock_sync = node.clock_sync.or(Some(s.clock_sync.clone()));
        // a job without records: its summary's provenance
        node.public_addr = node.public_addr.or(s.source.map(|a| a.to_string()));
        node.image_sha256 = node.image_sha256.or(s.image_sha256.clone());
        node.clock_offset_ms = node
            .clock_offset_ms
            .or(s.clock.map(|c| c.offset_us as f64 / 1e3));
    }
    if node.name.is_empty() {
        node.name = "unknown".into();
    }
    let kind = m.records.first().map(|(_, item)| match item {
        Item::Annotated(..) => "tnt",
        Item::Record(vtnt_formats::Record::Trace(_)) => "trace",
        _ => "ping",
    });
    Provenance {
        tenant: tenant.clone(),
        run: RunInfo {
            key: job.to_string(),
            name: job.to_string(),
            source: Source::Fleet,
            command: None,
        },
        job: JobInfo {
            key: job.to_string(),
            kind: kind.map(String::from),
            runtime: s.map(|s| s.runtime.clone()),
            location: s.map(|s| s.location.clone()),
            status: s.map(|s| crate::ingest::word(&s.status)),
            error: s.and_then(|s| s.error.clone()),
            exit_code: s.and_then(|s| s.code.map(i64::from)),
            records_declared: s.map(|s| s.records as i64),
            delivery: s.map(|s| s.delivery as i64),
            queue_ms: s.map(|s| s.timings.queue_ms),
            exec_ms: s.map(|s| s.timings.exec_ms),
            total_ms: s.map(|s| s.timings.total_ms),
            vtnt: None,
            file: None,
        },
        node,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_provenance_headers_fill_its_node() {
        let headers = [
            ("Vtnt-Node", "p1"),
            ("Vtnt-Clock-Sync", "yes"),
            ("Vtnt-Source", "192.0.2.2"),
            ("Vtnt-Image-Sha256", "ab"),
            ("Vtnt-Clock-Offset-Us", "-1500"),
        ];
        let get = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let n = node_of(get).unwrap();
        assert_eq!(n.name, "p1");
        assert_eq!(n.public_addr.as_deref(), Some("192.0.2.2"));
        assert_eq!(n.image_sha256.as_deref(), Some("ab"));
        assert_eq!(n.clock_offset_ms, Some(-1.5));
        assert_eq!(n.clock_sync.as_deref(), Some("yes"));
        assert_eq!(n.location, None);
        assert!(node_of(|_| None).is_none());
    }
}
