//! The results store: every trace, ping and TNT finding vTNT produces, in one SQLite
//! database with a documented, versioned schema (docs/store.md), per tenant.
//!
//! - [`Store`]: opens (and migrates, [`schema`]) a store file; the default path is
//!   [`default_path`].
//! - [`Ingest`]: one write transaction that files records under a run, a job and a node
//!   ([`Provenance`]); a record already stored (same tenant, same scamper-JSON line) is
//!   counted, not stored again. [`Recorder`] buffers records as a measurement writes
//!   them and files them a batch at a time.
//! - [`import`]: warts and scamper-JSON files (gzip too), each file in one transaction:
//!   a corrupt file stores nothing and the error names the file and the position.
//! - [`pfx2as`]: CAIDA's prefix-to-AS files, longest-prefix match; every address the
//!   store holds carries its AS.
//! - [`query`], [`questions`], [`diff`]: typed, serde-serialisable answers, every one
//!   scoped to one [`Tenant`]: records by target, prefix, tunnel class, vendor, node and
//!   time; tunnels per AS and per vendor, tunnel classes per vantage point, revealed LSRs
//!   per AS, and what changed between two campaigns; [`views`]: one campaign's progress
//!   and findings, one path hop by hop (the pages of `vtnt serve`).
//! - [`export`]: a table as CSV (or Parquet, feature `parquet`), one tenant's rows.
//! - `feed` (feature `fleet`): a tenant's results stream of a fleet, through a durable
//!   JetStream consumer (a store that was down catches up; nothing is stored twice).
//!
//! ```
//! use vtnt_store::{Store, Tenant, query::Filter};
//! let store = Store::open_in_memory().unwrap();
//! let t = Tenant::new("lab").unwrap();
//! assert!(store.traces(&t, &Filter::default()).unwrap().is_empty());
//! ```
//!
//! Imports: `vtnt-formats` (the records and their readers), `vtnt-record`, `vtnt-policy`
//! (prefixes); with `fleet`, `vtnt-fleet` for its connection and stream names.

mod annotation;
pub mod diff;
mod error;
pub mod export;
#[cfg(feature = "fleet")]
pub mod feed;
pub mod import;
mod ingest;
mod paths;
pub mod pfx2as;
pub mod query;
pub mod questions;
mod recorder;
pub mod schema;
mod summary;
pub mod views;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use sha2::Digest;

pub use error::{Position, Result, StoreError};
pub use ingest::{Ingest, IngestReport, JobInfo, NodeInfo, Provenance, RunInfo, Source};
pub use recorder::Recorder;

/// The tenant whose rows a request may see: 1 to 64 letters, digits, `-` or `_` (a fleet
/// tenant's name). The command line's own runs and imports use [`Tenant::LOCAL`] unless
/// told otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Tenant(String);

impl Tenant {
    /// The tenant of the command line's runs and imports by default.
    pub const LOCAL: &'static str = "local";

    /// A tenant by name; the error says what a name may hold.
    pub fn new(name: &str) -> Result<Tenant> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(Tenant(name.to_string()))
        } else {
            Err(StoreError::Invalid(format!(
                "tenant `{name}`: use 1 to 64 letters, digits, `-` or `_`"
            )))
        }
    }

    /// [`Tenant::LOCAL`].
    pub fn local() -> Tenant {
        Tenant(Tenant::LOCAL.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An open store.
pub struct Store {
    conn: Connection,
    /// The file, as errors name it (`:memory:` for a store in memory).
    path: String,
}

/// How long a writer waits for another process's write to end before giving up.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Store {
    /// Opens the store at `path`, creating it (not its directory) when absent, and brings
    /// its schema to this build's version.
    pub fn open(path: &Path) -> Result<Store> {
        Store::with_flags(path, OpenFlags::default())
    }

    /// Opens an existing store at `path` (a query on a store that was never written
    /// fails, rather than making an empty one).
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Invalid(format!(
                "{}: no store there (nothing stored yet: `vtnt import FILE`, or a `vtnt \
                 trace|ping|tnt` run, fills it)",
                path.display()
            )));
        }
        Store::with_flags(
            path,
            OpenFlags::default().difference(OpenFlags::SQLITE_OPEN_CREATE),
        )
    }

    fn with_flags(path: &Path, flags: OpenFlags) -> Result<Store> {
        let name = path.display().to_string();
        let conn = Connection::open_with_flags(path, flags)
            .map_err(StoreError::sql(format!("opening {name}")))?;
        Store::setup(conn, name, true)
    }

    /// A store in memory (tests, examples).
    pub fn open_in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().map_err(StoreError::sql("opening a store"))?;
        Store::setup(conn, ":memory:".into(), false)
    }

    fn setup(mut conn: Connection, path: String, wal: bool) -> Result<Store> {
        let what = format!("{path}: setting it up");
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(StoreError::sql(&what))?;
        // WAL: readers never wait for a writer (a web page during an import); NORMAL
        // syncs at checkpoints, so a commit costs no fsync and a power cut loses at most
        // the last commits, never the database.
        if wal {
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(StoreError::sql(&what))?;
        }
        // (and the log is cut back to 64 MiB after a checkpoint: a large import leaves no
        // log of its size behind)
        conn.execute_batch(
            "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
             PRAGMA journal_size_limit = 67108864;",
        )
        .map_err(StoreError::sql(&what))?;
        schema::migrate(
            &mut conn,
            &path,
            concat!("vtnt-store ", env!("CARGO_PKG_VERSION")),
        )?;
        Ok(Store { conn, path })
    }

    /// The store's file, as errors name it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// A handle that stops this store's running query from another thread (it then
    /// fails as interrupted): how a server bounds a query's time.
    pub fn interrupt_handle(&self) -> rusqlite::InterruptHandle {
        self.conn.get_interrupt_handle()
    }

    /// Moves everything the write-ahead log holds into the database file and empties the
    /// log (before copying the file, or measuring it).
    pub fn checkpoint(&self) -> Result<()> {
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .map_err(StoreError::sql(format!("{}: checkpointing", self.path)))
    }

    /// The store's own identity (made the first time it is asked for): what names it to
    /// others, such as its durable consumer on a fleet's results stream.
    pub fn id(&self) -> Result<String> {
        let what = format!("{}: its id", self.path);
        let seed = format!("{} {} {}", self.path, std::process::id(), now_us());
        let fresh = import::hex(&sha2::Sha256::digest(seed.as_bytes())[..8]);
        self.conn
            .execute(
                "INSERT INTO store_info (key, value) VALUES ('id', ?1) ON CONFLICT DO NOTHING",
                [fresh],
            )
            .map_err(StoreError::sql(&what))?;
        self.conn
            .query_row("SELECT value FROM store_info WHERE key = 'id'", [], |r| {
                r.get(0)
            })
            .map_err(StoreError::sql(&what))
    }
}

/// Where the store is when no `--store` says: `$VTNT_STORE` when set, else
/// `/var/lib/vtnt/results.sqlite` for root and `$XDG_DATA_HOME/vtnt/results.sqlite`
/// (`~/.local/share/vtnt/results.sqlite`) for other users. `None`: `VTNT_STORE` is `off`
/// (or empty), or no home directory is known.
pub fn default_path() -> Option<PathBuf> {
    match std::env::var_os("VTNT_STORE") {
        Some(v) if v.is_empty() || v == "off" => return None,
        Some(v) => return Some(PathBuf::from(v)),
        None => {}
    }
    if vtnt_linux::is_root() {
        return Some(PathBuf::from("/var/lib/vtnt/results.sqlite"));
    }
    let data = match std::env::var_os("XDG_DATA_HOME") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".local/share")
        }
    };
    Some(data.join("vtnt/results.sqlite"))
}

/// Microseconds since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// An IPv4 address as the number the store indexes it by (`None` for IPv6).
pub(crate) fn addr_n(a: IpAddr) -> Option<i64> {
    match a {
        IpAddr::V4(v4) => Some(i64::from(u32::from(v4))),
        IpAddr::V6(_) => None,
    }
}
