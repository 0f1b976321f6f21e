//! The store's schema and its migrations. `schema_version` holds one row per migration
//! applied; opening a store applies the missing ones in order, each in a transaction, and
//! refuses a store whose version is newer than this build knows. docs/store.md documents
//! every table and column; a change to the schema is a new entry of [`MIGRATIONS`] (never
//! an edit of an old one) and a new section there.

use rusqlite::Connection;

use crate::error::{Result, StoreError};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Migration `i` takes a store from version `i` to `i + 1`: its SQL, then what Rust fills.
type Fill = fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>;
const MIGRATIONS: &[(&str, Option<Fill>)] = &[
    (V1, None),
    (V2, None),
    // version 4 rebuilds `run_paths` and files every path: version 3 leaves it empty
    (V3, None),
    (V4, Some(crate::summary::file_all_paths)),
];

/// Version 1: the store's own facts, runs, nodes, jobs, the records (traces with hops, pings with replies), TNT's
/// findings (tunnels, their LSRs, signatures) and the AS annotations.
const V1: &str = "
CREATE TABLE store_info (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('cli', 'import', 'fleet')),
    command TEXT,
    created_us INTEGER NOT NULL,
    UNIQUE (tenant, key)
);
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    location TEXT,
    public_addr TEXT,
    image_sha256 TEXT,
    clock_offset_ms REAL,
    clock_sync TEXT,
    first_seen_us INTEGER NOT NULL,
    last_seen_us INTEGER NOT NULL,
    UNIQUE (tenant, name)
);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    run_id INTEGER NOT NULL REFERENCES runs (id),
    key TEXT NOT NULL,
    node_id INTEGER NOT NULL REFERENCES nodes (id),
    kind TEXT,
    runtime TEXT,
    location TEXT,
    status TEXT,
    error TEXT,
    exit_code INTEGER,
    records_declared INTEGER,
    delivery INTEGER,
    queue_ms REAL,
    exec_ms REAL,
    total_ms REAL,
    public_addr TEXT,
    image_sha256 TEXT,
    clock_offset_ms REAL,
    clock_sync TEXT,
    vtnt TEXT,
    file TEXT,
    created_us INTEGER NOT NULL,
    UNIQUE (tenant, key)
);
CREATE INDEX jobs_run ON jobs (run_id);
CREATE INDEX jobs_node ON jobs (node_id);
CREATE TABLE traces (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    job_id INTEGER NOT NULL REFERENCES jobs (id),
    idx INTEGER NOT NULL,
    digest BLOB NOT NULL,
    role TEXT,
    method TEXT NOT NULL,
    src TEXT NOT NULL,
    dst TEXT NOT NULL,
    dst_n INTEGER,
    start_us INTEGER NOT NULL,
    stop_reason TEXT NOT NULL,
    stop_data INTEGER NOT NULL,
    firsthop INTEGER NOT NULL,
    hop_count INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    userid INTEGER NOT NULL,
    probes INTEGER,
    anchor TEXT,
    egress TEXT,
    trigger TEXT,
    reveal_method TEXT,
    reveal_step INTEGER,
    UNIQUE (tenant, digest)
);
CREATE INDEX traces_dst ON traces (tenant, dst_n);
CREATE INDEX traces_start ON traces (tenant, start_us);
CREATE INDEX traces_job ON traces (job_id, idx);
CREATE TABLE hops (
    trace_id INTEGER NOT NULL REFERENCES traces (id),
    i INTEGER NOT NULL,
    probe_ttl INTEGER NOT NULL,
    probe_id INTEGER NOT NULL,
    addr TEXT NOT NULL,
    rtt_us INTEGER NOT NULL,
    reply_ttl INTEGER NOT NULL,
    reply_size INTEGER NOT NULL,
    icmp_type INTEGER,
    icmp_code INTEGER,
    q_ttl INTEGER,
    labels TEXT,
    uturn INTEGER,
    frpla INTEGER,
    rtla INTEGER,
    PRIMARY KEY (trace_id, i)
) WITHOUT ROWID;
CREATE TABLE pings (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    job_id INTEGER NOT NULL REFERENCES jobs (id),
    idx INTEGER NOT NULL,
    digest BLOB NOT NULL,
    purpose TEXT,
    method TEXT NOT NULL,
    src TEXT NOT NULL,
    dst TEXT NOT NULL,
    dst_n INTEGER,
    start_us INTEGER NOT NULL,
    sent INTEGER NOT NULL,
    replies INTEGER NOT NULL,
    userid INTEGER NOT NULL,
    UNIQUE (tenant, digest)
);
CREATE INDEX pings_dst ON pings (tenant, dst_n);
CREATE INDEX pings_job ON pings (job_id, idx);
CREATE TABLE ping_replies (
    ping_id INTEGER NOT NULL REFERENCES pings (id),
    i INTEGER NOT NULL,
    from_addr TEXT NOT NULL,
    seq INTEGER NOT NULL,
    rtt_us INTEGER NOT NULL,
    reply_ttl INTEGER NOT NULL,
    reply_size INTEGER NOT NULL,
    icmp_type INTEGER,
    icmp_code INTEGER,
    PRIMARY KEY (ping_id, i)
) WITHOUT ROWID;
CREATE TABLE tunnels (
    id INTEGER PRIMARY KEY,
    trace_id INTEGER NOT NULL REFERENCES traces (id),
    i INTEGER NOT NULL,
    class TEXT NOT NULL,
    evidence TEXT,
    trigger TEXT,
    ingress TEXT,
    egress TEXT,
    lsrs TEXT NOT NULL,
    lsr_count INTEGER NOT NULL,
    hidden_estimate INTEGER,
    revelation TEXT,
    revelation_reason TEXT,
    revelation_method TEXT,
    revelation_steps INTEGER,
    revelation_traces INTEGER,
    revelation_probes INTEGER,
    cached INTEGER,
    note TEXT,
    UNIQUE (trace_id, i)
);
CREATE INDEX tunnels_class ON tunnels (class);
CREATE TABLE lsrs (
    tunnel_id INTEGER NOT NULL REFERENCES tunnels (id),
    pos INTEGER NOT NULL,
    addr TEXT,
    revealed INTEGER NOT NULL,
    method TEXT,
    step INTEGER,
    PRIMARY KEY (tunnel_id, pos)
) WITHOUT ROWID;
CREATE TABLE signatures (
    job_id INTEGER NOT NULL REFERENCES jobs (id),
    addr TEXT NOT NULL,
    te INTEGER,
    er INTEGER,
    vendor TEXT NOT NULL,
    PRIMARY KEY (job_id, addr)
) WITHOUT ROWID;
CREATE TABLE addresses (
    addr TEXT PRIMARY KEY,
    addr_n INTEGER,
    asn TEXT
) WITHOUT ROWID;
CREATE INDEX addresses_asn ON addresses (asn);
CREATE TABLE as_segments (
    first_n INTEGER PRIMARY KEY,
    last_n INTEGER NOT NULL,
    origin TEXT NOT NULL
);
CREATE TABLE as_source (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    file TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    prefixes INTEGER NOT NULL,
    loaded_us INTEGER NOT NULL
);
";

/// A summary table of [`crate::summary`]: a job's distinct tunnels (their identity and
/// ingress vendor) and `last`, the column that differs, with its indexes.
macro_rules! groups_table {
    ($name:literal, $last:literal) => {
        concat!(
            "CREATE TABLE ",
            $name,
            " (
                job_id INTEGER NOT NULL REFERENCES jobs (id),
                tenant TEXT NOT NULL,
                class TEXT NOT NULL,
                ingress TEXT,
                egress TEXT,
                lsrs TEXT NOT NULL,
                vendor TEXT,
                ",
            $last,
            "
            );
            CREATE INDEX ",
            $name,
            "_tenant ON ",
            $name,
            " (tenant, class);
            CREATE INDEX ",
            $name,
            "_job ON ",
            $name,
            " (job_id);
            "
        )
    };
}

/// Version 2 (issue 41): the summary rows of [`crate::summary`], filled for every job
/// already stored.
const V2: &str = concat!(
    groups_table!("tunnel_groups", "observations INTEGER NOT NULL"),
    groups_table!("lsr_groups", "addr TEXT NOT NULL"),
    crate::summary::fill_sql!("1")
);

/// The `run_paths` table of [`crate::summary`], with `extra` columns before its key.
macro_rules! run_paths_table {
    ($extra:literal) => {
        concat!(
            "
CREATE TABLE run_paths (
    run_id INTEGER NOT NULL REFERENCES runs (id),
    node_id INTEGER NOT NULL REFERENCES nodes (id),
    dst TEXT NOT NULL,
    start_us INTEGER NOT NULL,
    trace_id INTEGER NOT NULL REFERENCES traces (id),
    path TEXT NOT NULL,
    tunnels TEXT NOT NULL,",
            $extra,
            "
    PRIMARY KEY (run_id, node_id, dst)
) WITHOUT ROWID;
"
        )
    };
}

/// Version 3 (issue 41): `run_paths`, filled by version 4 ([`V4`]).
const V3: &str = run_paths_table!("");

/// Version 4 (issue 41): `run_paths` with each pair's `digest` (of its path and tunnels)
/// and an index of the run's pairs with their digests in key order, which the diff scans
/// instead of the rows ([`crate::summary::file_paths`] fills it).
const V4: &str = concat!(
    "DROP TABLE run_paths;",
    run_paths_table!("\n    digest INTEGER NOT NULL,"),
    "CREATE INDEX run_paths_digest ON run_paths (run_id, node_id, dst, digest);"
);

/// The tables a tenant's rows live in, in the order an export or a listing names them;
/// `tenant_filter` is the SQL condition (on alias `x`) that keeps one tenant's rows.
pub const TABLES: &[(&str, &str)] = &[
    ("runs", "x.tenant = ?1"),
    ("nodes", "x.tenant = ?1"),
    ("jobs", "x.tenant = ?1"),
    ("traces", "x.tenant = ?1"),
    (
        "hops",
        "x.trace_id IN (SELECT id FROM traces WHERE tenant = ?1)",
    ),
    ("pings", "x.tenant = ?1"),
    (
        "ping_replies",
        "x.ping_id IN (SELECT id FROM pings WHERE tenant = ?1)",
    ),
    (
        "tunnels",
        "x.trace_id IN (SELECT id FROM traces WHERE tenant = ?1)",
    ),
    (
        "lsrs",
        "x.tunnel_id IN (SELECT t.id FROM tunnels t JOIN traces r ON r.id = t.trace_id \
         WHERE r.tenant = ?1)",
    ),
    (
        "signatures",
        "x.job_id IN (SELECT id FROM jobs WHERE tenant = ?1)",
    ),
    (
        "addresses",
        "x.addr IN (SELECT addr FROM hops h JOIN traces r ON r.id = h.trace_id \
         WHERE r.tenant = ?1 UNION SELECT l.addr FROM lsrs l JOIN tunnels t ON \
         t.id = l.tunnel_id JOIN traces r ON r.id = t.trace_id WHERE r.tenant = ?1)",
    ),
];

/// Brings `conn` to [`SCHEMA_VERSION`]; `path` names the store in errors. Each step reads
/// the version inside its own write transaction, so two processes opening a new store at
/// once apply each migration once.
pub fn migrate(conn: &mut Connection, path: &str, vtnt: &str) -> Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
             version INTEGER PRIMARY KEY,
             applied_us INTEGER NOT NULL,
             vtnt TEXT NOT NULL
         )",
    )
    .map_err(StoreError::sql(format!("{path}: creating schema_version")))?;
    loop {
        let what = format!("{path}: migrating the schema");
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(StoreError::sql(&what))?;
        let found: i64 = tx
            .query_row(
                "SELECT coalesce(max(version), 0) FROM schema_version",
                [],
                |r| r.get(0),
            )
            .map_err(StoreError::sql(format!("{path}: reading schema_version")))?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_string(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        let Some((sql, fill)) = MIGRATIONS.get(found as usize) else {
            return Ok(());
        };
        let what = format!("{path}: migrating to schema version {}", found + 1);
        tx.execute_batch(sql).map_err(StoreError::sql(&what))?;
        if let Some(fill) = fill {
            fill(&tx).map_err(StoreError::sql(&what))?;
        }
        tx.execute(
            "INSERT INTO schema_version (version, applied_us, vtnt) VALUES (?1, ?2, ?3)",
            rusqlite::params![found + 1, crate::now_us(), vtnt],
        )
        .map_err(StoreError::sql(&what))?;
        tx.commit().map_err(StoreError::sql(&what))?;
    }
}
