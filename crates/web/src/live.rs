//! A fleet, live: for each tenant the server follows, its results stream is filed into
//! the store ([`vtnt_store::feed::feed`], following, on a thread of its own: the store
//! catches up through its durable consumer) and read a second time as it grows (an
//! ephemeral consumer delivering only new messages, pushed by JetStream as they arrive)
//! into the tenant's events, which the pages receive as server-sent events
//! (`/t/<tenant>/events`): `job` (a job's summary: node, status, wait or discard, times),
//! `result` (a record: job, node, target), `stored` (what the store filed) and `node` (a
//! node's heartbeat, heard on `vtnt.nodes.*`, which the fleet exports to every tenant).
//! Each client reads the tenant's events from a bounded broadcast ring
//! ([`crate::state`]): a client too slow for it misses the oldest and is told how many
//! (`lagged`), so no client holds an unbounded buffer.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use axum::extract::{Extension, Path, State as AxState};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::broadcast;
use vtnt_fleet::controller::NodeView;
use vtnt_fleet::Connect;
use vtnt_store::Tenant;

use crate::server::Peer;
use crate::state::{self, Fail, State};
use crate::views::LiveEvent;

/// Starts following the fleet for every tenant (nothing without `--fleet`).
pub fn start(state: &State) {
    let Some(connects) = state.0.config.fleet.clone() else {
        return;
    };
    for c in connects {
        let vtnt_fleet::auth::Role::Tenant(t) = c.role.clone() else {
            continue;
        };
        let Ok(tenant) = Tenant::new(&t) else {
            continue;
        };
        store_thread(state, c.clone(), tenant.clone());
        let state = state.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = follow(&state, &c, &tenant).await {
                    tracing::warn!(tenant = %tenant, error = %vtnt_fleet::chain(&e), "following the fleet");
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
    }
}

/// Files the tenant's results into the store, following, restarted after an error.
/// A NATS client's error as the fleet's [`vtnt_fleet::Error::Nats`], naming what was
/// being done.
fn nats<E: Into<vtnt_fleet::BoxError>>(what: String) -> impl FnOnce(E) -> crate::Error {
    move |e| {
        vtnt_fleet::Error::Nats {
            what,
            source: e.into(),
        }
        .into()
    }
}

fn store_thread(state: &State, c: Connect, tenant: Tenant) {
    let path = state.0.config.store.clone();
    let Some(events) = state.0.live.get(tenant.as_str()).map(|l| l.events.clone()) else {
        return;
    };
    std::thread::spawn(move || loop {
        let r = vtnt_store::Store::open(&path).and_then(|mut store| {
            let o = vtnt_store::feed::FeedOptions {
                tenant: tenant.clone(),
                follow: true,
                batch: 200,
            };
            vtnt_store::feed::feed(&c, &mut store, &o, |r| {
                let _ = events.send(LiveEvent::Stored {
                    messages: r.messages,
                    traces: r.stored.traces,
                    pings: r.stored.pings,
                });
            })
        });
        if let Err(e) = r {
            tracing::warn!(tenant = %tenant, error = %vtnt_fleet::chain(&e), "storing the fleet's results");
        }
        std::thread::sleep(Duration::from_secs(2));
    });
}

/// Connects as the tenant and turns every new message of its results stream into an
/// event, until the connection fails.
async fn follow(state: &State, c: &Connect, tenant: &Tenant) -> crate::Result<()> {
    let Some(live) = state.0.live.get(tenant.as_str()) else {
        return Ok(());
    };
    let (client, fleet) = c.fleet("vtnt serve").await?;
    let fleet = Arc::new(fleet);
    *live.fleet.write().await = Some(fleet.clone());
    let heartbeats = client
        .subscribe(vtnt_fleet::HEARTBEATS)
        .await
        .map_err(nats(format!("hearing {}", vtnt_fleet::HEARTBEATS)))?;
    let events = live.events.clone();
    let hearing = tokio::spawn(heartbeats.for_each(move |m| {
        // (a heartbeat that does not parse is no node)
        if let Ok(info) = serde_json::from_slice(&m.payload) {
            let _ = events.send(LiveEvent::Node(NodeView::new(info, 0)));
        }
        futures::future::ready(())
    }));
    let r = results(live, &fleet, tenant).await;
    hearing.abort();
    r
}

/// Turns every new message of the tenant's results stream into an event.
async fn results(
    live: &state::Live,
    fleet: &vtnt_fleet::Fleet,
    tenant: &Tenant,
) -> crate::Result<()> {
    let name = vtnt_fleet::results_stream(tenant.as_str());
    let stream = loop {
        match vtnt_fleet::existing(&fleet.js, &name).await? {
            Some(s) => break s,
            // (no job of the tenant has stored a result yet: its stream comes with the first)
            None => tokio::time::sleep(Duration::from_secs(2)).await,
        }
    };
    let consumer = stream
        .create_consumer(pull::Config {
            filter_subject: format!("vtnt.results.{tenant}.>"),
            deliver_policy: DeliverPolicy::New,
            ack_policy: AckPolicy::None,
            inactive_threshold: Duration::from_secs(60),
            ..Default::default()
        })
        .await
        .map_err(nats(format!("following {name}")))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(nats(format!("reading {name}")))?;
    while let Some(m) = messages.next().await {
        let m = m.map_err(nats(format!("reading {name}")))?;
        if let Some(e) = event(&m) {
            let _ = live.events.send(e);
        }
    }
    Ok(())
}

/// The event of one results message (`None`: neither a record nor a summary).
fn event(m: &async_nats::jetstream::Message) -> Option<LiveEvent> {
    let parts: Vec<&str> = m.subject.split('.').collect();
    let ["vtnt", "results", _, job, kind] = parts[..] else {
        return None;
    };
    match kind {
        "s" => serde_json::from_slice(&m.payload).ok().map(LiveEvent::Job),
        "r" => {
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
            Some(LiveEvent::Result {
                job: job.to_string(),
                node: m
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Vtnt-Node"))
                    .map(|v| v.as_str().to_string()),
                record: text("type"),
                dst: text("dst"),
            })
        }
        _ => None,
    }
}

/// The fleet's nodes as the tenant sees them; `(None, None)` without a fleet.
pub async fn nodes(state: &State, t: &Tenant) -> (Option<Vec<NodeView>>, Option<String>) {
    if state.0.config.fleet.is_none() {
        return (None, None);
    }
    let fleet = match state.0.live.get(t.as_str()) {
        Some(l) => l.fleet.read().await.clone(),
        None => None,
    };
    let Some(fleet) = fleet else {
        return (
            Some(Vec::new()),
            Some("not connected to the fleet yet".into()),
        );
    };
    match tokio::time::timeout(
        Duration::from_secs(2),
        vtnt_fleet::controller::nodes(&fleet),
    )
    .await
    {
        Ok(Ok(n)) => (Some(n), None),
        Ok(Err(e)) => (Some(Vec::new()), Some(format!("{e:#}"))),
        Err(_) => (
            Some(Vec::new()),
            Some("the fleet did not answer in 2 s".into()),
        ),
    }
}

/// `GET /t/<tenant>/events`: the tenant's live events as server-sent events, at most
/// [`crate::Limits::streams_per_client`] streams per client address (429 past them).
pub async fn events(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    peer: Option<Extension<Peer>>,
    Path(tenant): Path<String>,
) -> Response {
    let t = match state::authorised(&state, &headers, Some(&tenant)) {
        Ok(t) => t,
        Err(f) => return state::fail(&uri, f),
    };
    let ip = state::peer(&peer);
    let max = state.0.config.limits.streams_per_client;
    let Some(slot) = state.0.streams.take(ip, max) else {
        return state::fail(
            &uri,
            Fail(
                StatusCode::TOO_MANY_REQUESTS,
                format!("{ip} has {max} event streams open already"),
            ),
        );
    };
    let Some(live) = state.0.live.get(t.as_str()) else {
        return state::fail(
            &uri,
            Fail(StatusCode::NOT_FOUND, format!("no events of {t}")),
        );
    };
    let rx = live.events.subscribe();
    let stream = futures::stream::unfold((rx, slot), |(mut rx, slot)| async move {
        let ev = match rx.recv().await {
            Ok(e) => Event::default()
                .event(e.name())
                .json_data(&e)
                .unwrap_or_else(|_| Event::default().comment("unserialisable")),
            // (a client too slow for the events: told how many it missed)
            Err(broadcast::error::RecvError::Lagged(n)) => {
                Event::default().event("lagged").data(n.to_string())
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok::<_, Infallible>(ev), (rx, slot)))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
