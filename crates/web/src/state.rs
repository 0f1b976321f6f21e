//! What every handler shares and how a request is answered: the server's [`State`] (the
//! configuration, the store's connection pool, each tenant's live events), the tenant a
//! request proves ([`who`], [`allowed`]: none is 401, another's is 403, per
//! [`crate::auth`]), and the answer as JSON under `/api/...` or as a page ([`Want`]), a
//! failure included ([`Fail`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::Extension;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use tokio::sync::broadcast;
use vtnt_store::{Store, Tenant};

use crate::auth::{self, TenantKey};
use crate::server::{Counter, Peer, Pool, QueryError};
use crate::views::LiveEvent;
use crate::{html, Config};

/// What every handler shares.
#[derive(Clone)]
pub struct State(pub Arc<Inner>);

pub struct Inner {
    pub config: Config,
    pub pool: Arc<Pool>,
    pub streams: Counter,
    /// Per tenant: its live events and its fleet connection (once made).
    pub live: HashMap<String, Live>,
}

pub struct Live {
    pub events: broadcast::Sender<LiveEvent>,
    pub fleet: tokio::sync::RwLock<Option<Arc<vtnt_fleet::Fleet>>>,
}

impl State {
    pub fn new(config: Config) -> State {
        let tenants: Vec<Tenant> = match config.tenants.is_empty() {
            true => vec![Tenant::local()],
            false => config.tenants.iter().map(|k| k.tenant.clone()).collect(),
        };
        let live = tenants
            .into_iter()
            .map(|t| {
                let live = Live {
                    events: broadcast::channel(256).0,
                    fleet: tokio::sync::RwLock::new(None),
                };
                (t.as_str().to_string(), live)
            })
            .collect();
        State(Arc::new(Inner {
            pool: Arc::new(Pool::new(&config.store, config.limits.queries)),
            streams: Counter::default(),
            live,
            config,
        }))
    }

    pub fn keys(&self) -> &[TenantKey] {
        &self.0.config.tenants
    }

    /// Runs a query within the limits.
    pub async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> vtnt_store::Result<T> + Send + 'static,
    ) -> Result<T, Fail> {
        self.0
            .pool
            .run(self.0.config.limits.query_time, f)
            .await
            .map_err(|e| match e {
                QueryError::Timeout => Fail(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "the query ran past {} s and was stopped; narrow it (a filter)",
                        self.0.config.limits.query_time.as_secs_f64()
                    ),
                ),
                QueryError::Store(vtnt_store::StoreError::Invalid(m)) => {
                    Fail(StatusCode::BAD_REQUEST, m)
                }
                QueryError::Store(e) => Fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            })
    }
}

/// A request refused or failed: its status and what to say.
#[derive(Debug)]
pub struct Fail(pub StatusCode, pub String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

/// JSON or a page, by the path (`/api/...`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Json,
    Page,
}

impl Want {
    pub fn of(uri: &Uri) -> Want {
        match uri.path().starts_with("/api/") {
            true => Want::Json,
            false => Want::Page,
        }
    }

    /// `v` as JSON, or as the page `render` makes of it.
    pub fn give<T: Serialize>(self, v: &T, render: impl FnOnce(&T) -> String) -> Response {
        match self {
            Want::Json => Json(v).into_response(),
            Want::Page => Html(render(v)).into_response(),
        }
    }

    pub fn fail(self, f: Fail) -> Response {
        match self {
            Want::Json => f.into_response(),
            Want::Page => (f.0, Html(html::error(f.0, &f.1))).into_response(),
        }
    }
}

/// The token a request carries: `Authorization: Bearer`, else the cookie.
fn token(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get(header::AUTHORIZATION) {
        return v.to_str().ok()?.strip_prefix("Bearer ").map(str::trim);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(auth::COOKIE)?.strip_prefix('='))
}

/// The tenant the request proves (401 when none).
pub fn who(state: &State, headers: &HeaderMap) -> Result<Tenant, Fail> {
    if state.keys().is_empty() {
        return Ok(Tenant::local());
    }
    let t = token(headers).ok_or_else(|| {
        Fail(
            StatusCode::UNAUTHORIZED,
            "no token: log in at /login, or send `Authorization: Bearer TOKEN` (`vtnt serve \
             token` makes one)"
                .into(),
        )
    })?;
    auth::verify(t, state.keys()).map_err(|why| Fail(StatusCode::UNAUTHORIZED, why.into()))
}

/// The tenant of the path, if the request proves it (403 for another's).
pub fn allowed(state: &State, headers: &HeaderMap, path_tenant: &str) -> Result<Tenant, Fail> {
    let t = who(state, headers)?;
    if t.as_str() != path_tenant {
        return Err(Fail(
            StatusCode::FORBIDDEN,
            format!("tenant {t} may not see tenant {path_tenant}'s data"),
        ));
    }
    Ok(t)
}

/// The tenant a request proves (of the path's tenant, when given).
pub fn authorised(
    state: &State,
    headers: &HeaderMap,
    tenant: Option<&str>,
) -> Result<Tenant, Fail> {
    match tenant {
        Some(t) => allowed(state, headers, t),
        None => who(state, headers),
    }
}

/// The client's address.
pub fn peer(p: &Option<Extension<Peer>>) -> std::net::IpAddr {
    p.as_ref().map_or(
        std::net::Ipv4Addr::LOCALHOST.into(),
        |Extension(Peer(a))| a.ip(),
    )
}

/// Fails a request as JSON or as a page, by its path.
pub fn fail(uri: &Uri, f: Fail) -> Response {
    Want::of(uri).fail(f)
}

/// Gives `v` as JSON or the page `render` makes of it, by the path.
pub fn give<T: Serialize>(uri: &Uri, v: &T, render: impl FnOnce(&T) -> String) -> Response {
    Want::of(uri).give(v, render)
}
