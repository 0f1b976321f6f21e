//! The router and the pages' handlers: each view is one handler that computes one
//! serialisable answer ([`crate::views`]) and gives it as JSON under `/api/t/<tenant>/...`
//! or as a page under `/t/<tenant>/...` ([`crate::state::Want`]). The tenant in the path
//! must be the one the request proves ([`crate::state::allowed`]).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State as AxState};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use vtnt_store::query::{Filter, RunRow};
use vtnt_store::{Store, Tenant};

use crate::state::{allowed, who, Fail, State, Want};
use crate::views::{Answer, FleetView, QuestionView, TracesView, QUESTIONS};
use crate::{auth, html};

/// Traces one list shows at most.
pub const TRACES_SHOWN: u32 = 500;
/// Jobs the fleet page lists.
pub const JOBS_SHOWN: u32 = 50;

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
