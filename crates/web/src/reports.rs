//! A benchmark report directory (`--reports DIR`), read-only: `/reports/` lists its
//! files, `/reports/<path>` gives one (markdown as a page, plots and tables as they are).
//! A path is a relative path of plain names under the directory: `..`, absolute paths,
//! hidden names and anything that leads outside it (a symbolic link) are refused.

use std::path::{Component, Path as FsPath, PathBuf};

use axum::extract::{Path, State as AxState};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::state::{self, Fail, State};
use crate::views::Listing;

/// The largest file served.
const MAX_FILE: u64 = 64 << 20;
/// Files a listing shows at most.
const MAX_LISTED: usize = 2000;

/// The report directory, after the request's token is checked.
fn root(state: &State, headers: &HeaderMap) -> Result<PathBuf, Fail> {
    state::authorised(state, headers, None)?;
    let dir = state.0.config.reports.as_ref().ok_or_else(|| {
        Fail(
            StatusCode::NOT_FOUND,
            "this server has no report directory (--reports DIR)".into(),
        )
    })?;
    dir.canonicalize()
        .map_err(|e| Fail(StatusCode::INTERNAL_SERVER_ERROR, format!("--reports: {e}")))
}

/// `/reports/`, `/api/reports`: the files.
pub async fn index(AxState(state): AxState<State>, headers: HeaderMap, uri: Uri) -> Response {
    let dir = match root(&state, &headers) {
        Ok(d) => d,
        Err(f) => return state::fail(&uri, f),
    };
    let mut files = Vec::new();
    walk(&dir, &dir, &mut files, 0);
    files.sort();
    state::give(&uri, &Listing { files }, crate::html::reports)
}

fn walk(root: &FsPath, dir: &FsPath, out: &mut Vec<String>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if out.len() >= MAX_LISTED || depth > 8 {
            return;
        }
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(root, &e.path(), out, depth + 1);
        } else if ft.is_file() {
            if let Ok(rel) = e.path().strip_prefix(root) {
                out.push(rel.to_string_lossy().to_string());
            }
        }
    }
}

/// The file `rel` names under `dir` (canonical), or why not.
pub fn resolve(dir: &FsPath, rel: &str) -> Result<PathBuf, String> {
    let p = FsPath::new(rel);
    let plain = !rel.is_empty()
        && !rel.contains('\0')
        && p.components().all(|c| match c {
            Component::Normal(n) => !n.to_string_lossy().starts_with('.'),
            _ => false,
        });
    if !plain {
        return Err(format!(
            "`{rel}`: not a plain path under the report directory"
        ));
    }
    let full = dir
        .join(p)
        .canonicalize()
        .map_err(|_| format!("`{rel}`: no such file"))?;
    if !full.starts_with(dir) || !full.is_file() {
        return Err(format!("`{rel}`: no such file"));
    }
    Ok(full)
}

fn mime(p: &FsPath) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "jpg" | "jpeg" => "image/jpeg",
        "json" | "jsonl" => "application/json",
        "csv" => "text/csv; charset=utf-8",
        "txt" | "log" | "dat" | "md" => "text/plain; charset=utf-8",
        "html" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// `/reports/<path>`: one file; markdown as a page (`?raw` for its text).
pub async fn file(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    uri: Uri,
    Path(rel): Path<String>,
) -> Response {
    let dir = match root(&state, &headers) {
        Ok(d) => d,
        Err(f) => return state::fail(&uri, f),
    };
    let full = match resolve(&dir, &rel) {
        Ok(f) => f,
        Err(why) => {
            let status = match why.ends_with("no such file") {
                true => StatusCode::NOT_FOUND,
                false => StatusCode::BAD_REQUEST,
            };
            return state::fail(&uri, Fail(status, why));
        }
    };
    let size = std::fs::metadata(&full).map(|m| m.len()).unwrap_or(0);
    if size > MAX_FILE {
        return state::fail(
            &uri,
            Fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("`{rel}`: {size} bytes, more than this server serves"),
            ),
        );
    }
    let body = match tokio::fs::read(&full).await {
        Ok(b) => b,
        Err(e) => return state::fail(&uri, Fail(StatusCode::NOT_FOUND, format!("`{rel}`: {e}"))),
    };
    let markdown = full.extension().is_some_and(|e| e == "md") && uri.query() != Some("raw");
    if markdown {
        let text = String::from_utf8_lossy(&body);
        return axum::response::Html(crate::html::markdown(&rel, &text)).into_response();
    }
    (
        [
            (header::CONTENT_TYPE, mime(&full)),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_the_directory() {
        let dir = std::env::temp_dir().join(format!("vtnt-web-reports-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.md"), "# a").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("out")).unwrap();
        let dir = dir.canonicalize().unwrap();
        assert!(resolve(&dir, "sub/a.md").is_ok());
        for bad in [
            "../x",
            "sub/../../etc/passwd",
            "/etc/passwd",
            ".hidden",
            "a\0b",
            "",
        ] {
            assert!(
                resolve(&dir, bad).unwrap_err().contains("plain path"),
                "{bad}"
            );
        }
        assert!(resolve(&dir, "out").unwrap_err().contains("no such file"));
        assert!(resolve(&dir, "sub").unwrap_err().contains("no such file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
