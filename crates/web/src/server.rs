//! The accept loop and what one client may take: connections in all and per address
//! (semaphores), a request head's size and the time to send it (hyper's buffer and
//! header timer: a slowloris is cut off), bodies ([`crate::Limits::body_bytes`]), event
//! streams per address ([`Counter`]), and queries (a pool of store connections, each
//! query interrupted at [`crate::Limits::query_time`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use crate::error::io;
use crate::{Error, Result};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;
use vtnt_store::Store;

use crate::Config;

/// A count per client address, each unit held by a [`Slot`] until it is dropped.
#[derive(Default, Clone)]
pub struct Counter(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One unit of a [`Counter`].
pub struct Slot(Counter, IpAddr);

impl Counter {
    /// A unit for `ip`, unless it holds `max` already.
    pub fn take(&self, ip: IpAddr, max: usize) -> Option<Slot> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot(self.clone(), ip))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = (self.0).0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// The client's address, as a request extension.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// Store connections for queries: at most `limits.queries` at once.
pub struct Pool {
    path: std::path::PathBuf,
    idle: Mutex<Vec<Store>>,
    permits: Semaphore,
}

/// Why a query gave no answer.
#[derive(Debug)]
pub enum QueryError {
    /// The store's own error (bad input the store caught, or SQL).
    Store(vtnt_store::StoreError),
    /// It ran past the limit and was interrupted.
    Timeout,
}

impl Pool {
    pub fn new(path: &std::path::Path, queries: usize) -> Pool {
        Pool {
            path: path.to_path_buf(),
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(queries.max(1)),
        }
    }

    /// Runs `f` on a store connection of its own (a blocking thread), interrupting it
    /// after `limit`.
    pub async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        limit: std::time::Duration,
        f: impl FnOnce(&Store) -> vtnt_store::Result<T> + Send + 'static,
    ) -> Result<T, QueryError> {
        let start = tokio::time::Instant::now();
        let _permit = tokio::time::timeout(limit, self.permits.acquire())
            .await
            .map_err(|_| QueryError::Timeout)?
            .map_err(|_| QueryError::Timeout)?;
        let store = match self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            Some(s) => s,
            None => Store::open_existing(&self.path).map_err(QueryError::Store)?,
        };
        let interrupt = store.interrupt_handle();
        let pool = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            let out = f(&store);
            pool.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(store);
            out
        });
        tokio::pin!(task);
        let left = limit.saturating_sub(start.elapsed());
        let joined = match tokio::time::timeout(left, &mut task).await {
            Ok(j) => j,
            Err(_) => {
                interrupt.interrupt();
                let _ = task.await;
                return Err(QueryError::Timeout);
            }
        };
        match joined {
            Ok(r) => r.map_err(QueryError::Store),
            Err(e) => Err(QueryError::Store(vtnt_store::StoreError::Invalid(format!(
                "the query's thread failed: {e}"
            )))),
        }
    }
}

/// A server bound to its address, not yet serving.
pub struct Bound {
    listener: std::net::TcpListener,
    config: Config,
}

impl Bound {
    /// Checks `config` and binds its address: a port in use is an error naming it.
    pub fn bind(config: Config) -> Result<Bound> {
        config.check()?;
        let listener = std::net::TcpListener::bind(config.listen).map_err(io(format!(
            "listening on {}: the address is taken or not ours (another `vtnt serve` there?)",
            config.listen
        )))?;
        listener
            .set_nonblocking(true)
            .map_err(io(format!("listening on {}", config.listen)))?;
        Ok(Bound { listener, config })
    }

    /// How it is to be served.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The address it listens on (a port of 0 made concrete).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.listener.local_addr().unwrap_or(self.config.listen)
    }
}

/// Serves `app` on `bound`'s listener until the process ends, within its limits.
pub async fn run(bound: Bound, app: axum::Router) -> Result<()> {
    let Bound { listener, config } = bound;
    let limits = config.limits.clone();
    let listener =
        TcpListener::from_std(listener).map_err(io(format!("listening on {}", config.listen)))?;
    let all = Arc::new(Semaphore::new(limits.connections));
    let per_client = Counter::default();
    loop {
        let permit = all.clone().acquire_owned().await.map_err(|e| {
            Error::Server(format!(
                "the connection limit of {}: {e}",
                limits.connections
            ))
        })?;
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // (out of descriptors: wait a moment, the loop goes on)
                tracing::warn!(error = %e, "accepting a connection");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = per_client.take(peer.ip(), limits.connections_per_client) else {
            drop(tcp);
            continue;
        };
        let app = app.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
                req.extensions_mut().insert(Peer(peer));
                app.clone().oneshot(req.map(axum::body::Body::new))
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.header_time)
                .max_buf_size(limits.header_bytes.max(8192))
                .max_headers(64);
            let conn = http.serve_connection(TokioIo::new(tcp), svc);
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
            drop((slot, permit));
        });
    }
}
