//! `vtnt serve`: the results store and a fleet's live events as small server-rendered
//! pages, every one also JSON at `/api/...`, per authenticated tenant (docs/serve.md).
//!
//! The modules in layers, each naming only those below it (no circle;
//! `crates/cli/tests/architecture.rs` checks it), and [`serve`] here puts them together:
//!
//! - [`server`]: the accept loop and what one client may take (connections, header size
//!   and time, SSE streams, query time); it serves whatever router it is given.
//! - [`auth`]: tenants' tokens, signed with their fleet nkeys.
//! - `views`: what the pages show, each a serialisable value (its JSON), and the live
//!   events.
//! - `html`: the views' markup and their SVG (paths, bars).
//! - `state`: what every handler shares, the tenant a request proves, the answer as JSON
//!   or a page.
//! - [`live`]: a fleet's results into the store and its events to the pages (SSE).
//! - [`reports`]: a benchmark report directory, read-only.
//! - `routes`: the router and the pages' handlers.
//! - [`bench`]: every page's load time (`vtnt bench serve`), a client of [`serve`].
//!
//! Imports: `vtnt-store` (every answer), `vtnt-fleet` (the connection, streams and keys).

pub mod auth;
pub mod bench;
mod error;
mod html;
pub mod live;
pub mod reports;
mod routes;
pub mod server;
mod state;
mod views;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use error::{Error, Result};
pub use server::Bound;

/// Serves `bound` until the process ends, on a runtime of its own: the shared state, the
/// fleet followed for each tenant, and the router, in the accept loop.
pub fn serve(bound: Bound) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(error::io("starting the server's runtime"))?;
    rt.block_on(async move {
        let state = state::State::new(bound.config().clone());
        live::start(&state);
        server::run(bound, routes::router(state)).await
    })
}

/// What one client may take.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once (all clients); more wait in the listen queue.
    pub connections: usize,
    /// Connections open at once from one address.
    pub connections_per_client: usize,
    /// Event streams (SSE) open at once from one address.
    pub streams_per_client: usize,
    /// A request's head (request line and headers), bytes.
    pub header_bytes: usize,
    /// How long a client may take to send a request's head.
    pub header_time: Duration,
    /// A request's body, bytes.
    pub body_bytes: usize,
    /// How long one query may run before it is interrupted (503).
    pub query_time: Duration,
    /// Queries running at once (each holds a store connection).
    pub queries: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 256,
            connections_per_client: 32,
            streams_per_client: 4,
            header_bytes: 16 << 10,
            header_time: Duration::from_secs(5),
            body_bytes: 4 << 10,
            query_time: Duration::from_secs(5),
            queries: 4,
        }
    }
}

/// How `vtnt serve` runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Serve on an address other than loopback (and only then).
    pub public: bool,
    pub store: PathBuf,
    /// A benchmark report directory to serve under `/reports/`.
    pub reports: Option<PathBuf>,
    /// The tenants and their keys; none: tenant `local`, unauthenticated, loopback only.
    pub tenants: Vec<auth::TenantKey>,
    /// The fleet to follow, one connection per tenant (its key); `None`: the store only.
    pub fleet: Option<Vec<vtnt_fleet::Connect>>,
    pub limits: Limits,
}

impl Config {
    /// Checks what the configuration promises before anything listens.
    pub fn check(&self) -> Result<()> {
        if !self.listen.ip().is_loopback() {
            if !self.public {
                return Err(Error::Invalid(format!(
                    "--listen {}: not a loopback address; give --public to serve other hosts",
                    self.listen
                )));
            }
            if self.tenants.is_empty() {
                return Err(Error::Invalid(
                    "--public: other hosts are served only with tenants' keys (--tenant T --key FILE)"
                        .into(),
                ));
            }
        }
        if !self.store.exists() {
            return Err(Error::Invalid(format!(
                "{}: no store there (`vtnt import FILE`, a `vtnt trace|ping|tnt` run or `vtnt \
                 fleet store` fills one)",
                self.store.display()
            )));
        }
        if let Some(r) = self.reports.as_ref().filter(|r| !r.is_dir()) {
            return Err(Error::Invalid(format!(
                "--reports {}: not a directory",
                r.display()
            )));
        }
        Ok(())
    }
}
