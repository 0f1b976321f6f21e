//! The pages and their JSON: each view is one handler that computes one serialisable
//! answer and gives it as JSON under `/api/t/<tenant>/...` or as a page under
//! `/t/<tenant>/...` (the same value, so a page never shows what its JSON lacks). The
//! tenant in the path must be the one the request proves ([`crate::auth`]): none is 401,
//! another is 403.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, State as AxState};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use vtnt_store::query::{Filter, RunRow, TraceRow};
use vtnt_store::questions::{LsrCount, TunnelCount};
use vtnt_store::{Store, Tenant};

use crate::auth::{self, TenantKey};
use crate::live::LiveEvent;
use crate::server::{Counter, Peer, Pool, QueryError};
use crate::{html, Config};

/// Traces one list shows at most.
pub const TRACES_SHOWN: u32 = 500;
/// Jobs the fleet page lists.
pub const JOBS_SHOWN: u32 = 50;

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

    fn keys(&self) -> &[TenantKey] {
        &self.0.config.tenants
    }

    /// Runs a query within the limits.
    async fn query<T: Send + 'static>(
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
    fn of(uri: &Uri) -> Want {
        match uri.path().starts_with("/api/") {
            true => Want::Json,
            false => Want::Page,
        }
    }

    /// `v` as JSON, or as the page `render` makes of it.
    fn give<T: Serialize>(self, v: &T, render: impl FnOnce(&T) -> String) -> Response {
        match self {
            Want::Json => Json(v).into_response(),
            Want::Page => Html(render(v)).into_response(),
        }
    }

    fn fail(self, f: Fail) -> Response {
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
fn who(state: &State, headers: &HeaderMap) -> Result<Tenant, Fail> {
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
fn allowed(state: &State, headers: &HeaderMap, path_tenant: &str) -> Result<Tenant, Fail> {
    let t = who(state, headers)?;
    if t.as_str() != path_tenant {
        return Err(Fail(
            StatusCode::FORBIDDEN,
            format!("tenant {t} may not see tenant {path_tenant}'s data"),
        ));
    }
    Ok(t)
}

pub fn router(state: State) -> Router {
    let mut r = Router::new()
        .route("/", get(index))
        .route("/login", get(login_page).post(login))
        .route("/logout", get(logout))
        .route("/static/{file}", get(static_file))
        .route("/api/whoami", get(whoami))
        .route("/reports", get(crate::reports::index))
        .route("/reports/", get(crate::reports::index))
        .route("/api/reports", get(crate::reports::index))
        .route("/reports/{*path}", get(crate::reports::file))
        .route("/t/{tenant}/events", get(crate::live::events));
    for base in ["/t/{tenant}", "/api/t/{tenant}"] {
        r = r
            .route(&format!("{base}/"), get(fleet))
            .route(&format!("{base}/fleet"), get(fleet))
            .route(&format!("{base}/campaigns"), get(campaigns))
            .route(&format!("{base}/campaigns/{{run}}"), get(campaign))
            .route(&format!("{base}/traces"), get(traces))
            .route(&format!("{base}/paths/{{id}}"), get(path))
            .route(&format!("{base}/questions"), get(questions))
            .route(&format!("{base}/questions/{{name}}"), get(question))
            .route(&format!("{base}/diff"), get(diff));
    }
    r.fallback(|uri: Uri| async move {
        Want::of(&uri).fail(Fail(
            StatusCode::NOT_FOUND,
            format!("{}: no such page (docs/serve.md lists them)", uri.path()),
        ))
    })
    .layer(axum::extract::DefaultBodyLimit::max(
        state.0.config.limits.body_bytes,
    ))
    .with_state(state)
}

async fn index(AxState(state): AxState<State>, headers: HeaderMap) -> Response {
    match who(&state, &headers) {
        Ok(t) => Redirect::to(&format!("/t/{t}/")).into_response(),
        Err(_) => Redirect::to("/login").into_response(),
    }
}

async fn whoami(AxState(state): AxState<State>, headers: HeaderMap) -> Response {
    match who(&state, &headers) {
        Ok(t) => Json(serde_json::json!({ "tenant": t })).into_response(),
        Err(f) => f.into_response(),
    }
}

async fn login_page() -> Html<String> {
    Html(html::login(None))
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /login` (form field `token`): checks the token and keeps it in a cookie.
async fn login(
    AxState(state): AxState<State>,
    form: Result<axum::Form<LoginForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let form = match form {
        Ok(axum::Form(f)) => f,
        Err(e) => return (e.status(), Html(html::login(Some(&e.body_text())))).into_response(),
    };
    let tenant = match auth::verify(form.token.trim(), state.keys()) {
        Ok(t) => t,
        Err(why) => {
            return (StatusCode::UNAUTHORIZED, Html(html::login(Some(why)))).into_response()
        }
    };
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        auth::COOKIE,
        form.token.trim()
    );
    (
        [(header::SET_COOKIE, cookie)],
        Redirect::to(&format!("/t/{tenant}/")),
    )
        .into_response()
}

async fn logout() -> Response {
    let cookie = format!("{}=; Path=/; Max-Age=0", auth::COOKIE);
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}

async fn static_file(Path(file): Path<String>) -> Response {
    match html::asset(&file) {
        Some((mime, body)) => ([(header::CONTENT_TYPE, mime)], body).into_response(),
        None => Fail(
            StatusCode::NOT_FOUND,
            format!("/static/{file}: no such file"),
        )
        .into_response(),
    }
}

/// The fleet page: the tenant's nodes (from the fleet, when the server follows one), its
/// newest jobs with their outcomes and times, and what the store holds.
#[derive(Debug, Serialize)]
pub struct FleetView {
    pub tenant: Tenant,
    pub counts: BTreeMap<String, u64>,
    /// `None`: this server follows no fleet.
    pub nodes: Option<Vec<vtnt_fleet::controller::NodeView>>,
    pub nodes_error: Option<String>,
    pub jobs: Vec<vtnt_store::views::JobRow>,
}

async fn fleet(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path(tenant): Path<String>,
) -> Response {
    let want = Want::of(&uri);
    let t = match allowed(&state, &headers, &tenant) {
        Ok(t) => t,
        Err(f) => return want.fail(f),
    };
    let q = t.clone();
    let stored = state
        .query(move |s| Ok((s.counts(&q)?, s.jobs(&q, JOBS_SHOWN)?)))
        .await;
    let (counts, jobs) = match stored {
        Ok(v) => v,
        Err(f) => return want.fail(f),
    };
    let (nodes, nodes_error) = crate::live::nodes(&state, &t).await;
    let v = FleetView {
        tenant: t,
        counts,
        nodes,
        nodes_error,
        jobs,
    };
    want.give(&v, html::fleet)
}

/// A handler's answer: the tenant checked, then `f`'s query, then the page.
async fn view<T: Serialize + Send + 'static>(
    state: &State,
    headers: &HeaderMap,
    uri: &Uri,
    tenant: &str,
    f: impl FnOnce(&Store, &Tenant) -> vtnt_store::Result<Option<T>> + Send + 'static,
    render: impl FnOnce(&Tenant, &T) -> String,
) -> Response {
    let want = Want::of(uri);
    let t = match allowed(state, headers, tenant) {
        Ok(t) => t,
        Err(f) => return want.fail(f),
    };
    let q = t.clone();
    match state.query(move |s| f(s, &q)).await {
        Ok(Some(v)) => want.give(&v, |v| render(&t, v)),
        Ok(None) => want.fail(Fail(
            StatusCode::NOT_FOUND,
            format!("{}: tenant {t} has nothing there", uri.path()),
        )),
        Err(f) => want.fail(f),
    }
}

async fn campaigns(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path(tenant): Path<String>,
) -> Response {
    view(
        &state,
        &headers,
        &uri,
        &tenant,
        |s, t| s.runs(t).map(Some),
        |t, v: &Vec<RunRow>| html::campaigns(t, v.as_slice()),
    )
    .await
}

async fn campaign(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path((tenant, run)): Path<(String, String)>,
) -> Response {
    view(
        &state,
        &headers,
        &uri,
        &tenant,
        move |s, t| s.campaign(t, &run),
        html::campaign,
    )
    .await
}

/// A filter from the query string (400 naming the problem).
fn filter(q: Result<Query<Filter>, QueryRejection>) -> Result<Filter, Fail> {
    let Query(f) = q.map_err(|e| Fail(StatusCode::BAD_REQUEST, e.body_text()))?;
    f.check()
        .map_err(|e| Fail(StatusCode::BAD_REQUEST, e.to_string()))?;
    Ok(f)
}

/// A list of traces, the first [`TRACES_SHOWN`] of those a filter selects.
#[derive(Debug, Serialize)]
pub struct TracesView {
    pub filter: Filter,
    pub limit: u32,
    pub traces: Vec<TraceRow>,
}

async fn traces(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path(tenant): Path<String>,
    q: Result<Query<Filter>, QueryRejection>,
) -> Response {
    let f = match filter(q) {
        Ok(f) => f,
        Err(e) => return Want::of(&uri).fail(e),
    };
    view(
        &state,
        &headers,
        &uri,
        &tenant,
        move |s, t| {
            let traces = s.traces_limited(t, &f, TRACES_SHOWN)?;
            Ok(Some(TracesView {
                filter: f,
                limit: TRACES_SHOWN,
                traces,
            }))
        },
        html::traces,
    )
    .await
}

async fn path(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path((tenant, id)): Path<(String, String)>,
) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return Want::of(&uri).fail(Fail(
            StatusCode::BAD_REQUEST,
            format!("trace `{id}`: a trace is named by its number"),
        ));
    };
    view(
        &state,
        &headers,
        &uri,
        &tenant,
        move |s, t| s.trace_path(t, id),
        html::path,
    )
    .await
}

/// The researchers' questions, by the name of their page.
pub const QUESTIONS: &[(&str, &str)] = &[
    ("tunnels-per-as", "Tunnels per AS of their ingress"),
    ("tunnels-per-vendor", "Tunnels per vendor of their ingress"),
    (
        "classes-per-vantage-point",
        "Tunnel classes per vantage point",
    ),
    ("revealed-lsrs-per-as", "Revealed LSRs per AS"),
];

/// One question's answer.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Tunnels(Vec<TunnelCount>),
    Lsrs(Vec<LsrCount>),
}

#[derive(Debug, Serialize)]
pub struct QuestionView {
    pub question: String,
    pub filter: Filter,
    pub answer: Answer,
}

async fn questions(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path(tenant): Path<String>,
) -> Response {
    let want = Want::of(&uri);
    match allowed(&state, &headers, &tenant) {
        Ok(t) => {
            let names: Vec<&str> = QUESTIONS.iter().map(|q| q.0).collect();
            want.give(&names, |_| html::questions(&t))
        }
        Err(f) => want.fail(f),
    }
}

async fn question(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path((tenant, name)): Path<(String, String)>,
    q: Result<Query<Filter>, QueryRejection>,
) -> Response {
    let want = Want::of(&uri);
    if !QUESTIONS.iter().any(|q| q.0 == name) {
        let names: Vec<&str> = QUESTIONS.iter().map(|q| q.0).collect();
        return want.fail(Fail(
            StatusCode::NOT_FOUND,
            format!("question `{name}`: one of {}", names.join(", ")),
        ));
    }
    let f = match filter(q) {
        Ok(f) => f,
        Err(e) => return want.fail(e),
    };
    view(
        &state,
        &headers,
        &uri,
        &tenant,
        move |s, t| {
            let answer = match name.as_str() {
                "tunnels-per-as" => Answer::Tunnels(s.tunnels_per_as(t, &f)?),
                "tunnels-per-vendor" => Answer::Tunnels(s.tunnels_per_vendor(t, &f)?),
                "classes-per-vantage-point" => Answer::Tunnels(s.classes_per_vantage_point(t, &f)?),
                _ => Answer::Lsrs(s.revealed_lsrs_per_as(t, &f)?),
            };
            Ok(Some(QuestionView {
                question: name,
                filter: f,
                answer,
            }))
        },
        html::question,
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffQuery {
    a: String,
    b: String,
}

async fn diff(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path(tenant): Path<String>,
    q: Result<Query<DiffQuery>, QueryRejection>,
) -> Response {
    let want = Want::of(&uri);
    let Query(d) = match q {
        Ok(d) => d,
        Err(e) => {
            return want.fail(Fail(
                StatusCode::BAD_REQUEST,
                format!("{} (give ?a=RUN&b=RUN)", e.body_text()),
            ))
        }
    };
    view(
        &state,
        &headers,
        &uri,
        &tenant,
        move |s, t| s.diff(t, &d.a, &d.b).map(Some),
        html::diff,
    )
    .await
}

/// The tenant a request proves (of the path's tenant, when given), for the other
/// modules' handlers.
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
