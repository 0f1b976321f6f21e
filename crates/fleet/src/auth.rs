//! Who may do what on a fleet's broker, and in which NATS account. `vtnt fleet up` writes
//! nats-server's `accounts` (this module's [`accounts`]): one for the fleet itself
//! ([`FLEET_ACCOUNT`]: agents, the operator, the work queue, the nodes' heartbeats, the
//! images) and one per tenant ([`tenant_account`]: that tenant's results stream, and
//! nothing else). What crosses between them is an explicit service export and import:
//!
//! - a tenant's jobs (`vtnt.wq.<t>.*`) and large target lists (`vtnt.data.<t>.>`) go from
//!   its account to the fleet's, and JetStream's acknowledgements come back; it reads its
//!   own target lists' stream back (info, a message by subject: a split campaign's list,
//!   [`crate::campaign`]), no other tenant's;
//! - its results (`vtnt.results.<t>.>`) go from the fleet's account, where the agents
//!   publish them, to its account, where its stream stores them;
//! - the info of the nodes' stream is imported into every tenant's account under
//!   [`FLEET_API`] (its own JetStream keeps `$JS.API`);
//! - the info and message reads of a tenant's quota stream (`VTNT_QUOTA_<t>`,
//!   [`crate::quota`]) are imported into that tenant's account alone, under
//!   [`FLEET_API`]: it reads its limits and use and writes neither;
//! - a tenant's backlog requests (`vtnt.backlog.<t>`, [`crate::backlog`]) go from its
//!   account to the fleet's, where an agent counts that tenant's jobs only. The work
//!   queue's own info is not exported: its subject filter is the requester's to choose,
//!   and `vtnt.wq.>` would list every tenant's jobs;
//! - the nodes' heartbeats (`vtnt.nodes.*`, [`crate::HEARTBEATS`]) are a stream export of the
//!   fleet's account, imported by every tenant's under the same subjects: a tenant may
//!   subscribe to them (`vtnt serve`'s live node list), and what it publishes there stays
//!   in its own account (it may not, and nobody in the fleet's would hear it).
//!
//! Why accounts: in one account, whatever a user publishes may carry any reply subject,
//! and JetStream (an API answer, a publish acknowledgement, a pull consumer's deliveries)
//! and every responder answer there, unchecked by the permissions; a tenant could so write
//! into another's results stream. Across accounts a reply only reaches the requester's own
//! account. Everything a tenant could subscribe to, capture in a stream, mirror or source
//! is in its own account, which holds only its own data.
//!
//! Discard mode needs the server's "no responders" answer, which nats-server 2.9 does not
//! give across a service import (measured with 2.9.10: the request waits out its
//! timeout). So each tenant has a second user, in the fleet's account, whose only right is
//! to send discard-mode requests under its own name (`vtnt.deploy.<t>.*`) and to receive
//! the answers on its own inbox; its seed is the second line of the tenant's key file. An
//! agent answers a request only on the inbox of the tenant the subject names (the reply
//! subject is the requester's choice), so no answer lands anywhere else.
//!
//! The fleet's streams are made by `vtnt fleet up` with a setup user of each account
//! ([`Role::Setup`], keys that stay on the broker's host); no other user may create,
//! update, delete or purge a stream, or create one with subjects, a mirror or sources of
//! its choosing. Within the allow-lists below:
//!
//! - a tenant reads and writes its measurements' definitions (`VTNT_MEAS_<t>`, in its
//!   account);
//! - a tenant reads only its own results stream (`VTNT_RESULTS_<t>`: info, consumers of its
//!   own, their messages), submits only under its own name, reads the nodes' heartbeats,
//!   asks for its own backlog, and receives only on its own inbox prefix (`_INBOX_T.<t>`);
//! - agents take jobs (the work-queue consumers, the discard subjects, the large target
//!   lists), answer requests, heartbeat, store results for any tenant and keep the
//!   tenants' quota use (`vtnt.quota.*.use`) and the rate limit's leases
//!   (`vtnt.rate.lease.>`, [`crate::rate`]); they read no results back (those are in the
//!   tenants' accounts), and read the images' object store, the opt-out list
//!   ([`crate::optout`]) and the rate limits, which the operator writes;
//! - the operator writes the images, the opt-out list, the tenants' quota limits
//!   (`vtnt.quota.*.limit`) and the fleet's rate limits (`vtnt.rate.limit`).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{ensure, ResultExt};
use crate::Error;
use serde_json::{json, Value};

use crate::{data_stream, results_stream, HEARTBEATS, IMAGES_BUCKET, JOBS_STREAM, NODES_STREAM};

/// The fleet's own account.
pub const FLEET_ACCOUNT: &str = "VTNT";
/// Where a tenant's account finds the fleet's streams' info (imported from the fleet's
/// `$JS.API`).
pub const FLEET_API: &str = "$JS.FLEET.API";

/// Tenant `t`'s account.
pub fn tenant_account(t: &str) -> String {
    format!("TENANT_{t}")
}

/// How much a tenant's account may store (its results) at most, bytes; less where the
/// disk has less room ([`tenant_store_bytes`]).
pub const TENANT_STORE_BYTES: u64 = 16 << 30;

/// What each of `tenants` tenants' accounts may store, given `free` bytes free on the
/// store's disk: nats-server reserves an account's limit against its own (75 % of the
/// disk's free space when it starts) and will not start when they exceed it, so the
/// tenants share half of the free space, [`TENANT_STORE_BYTES`] each at most.
pub fn tenant_store_bytes(free: u64, tenants: usize) -> u64 {
    (free / 2 / tenants.max(1) as u64).min(TENANT_STORE_BYTES)
}
/// The streams of a tenant's account: its results, its measurements' definitions
/// ([`crate::measurement`]) and its campaigns' target lists ([`crate::campaign`]), made
/// by `vtnt fleet up`.
pub const TENANT_STREAMS: u64 = 3;
/// How many consumers a tenant's account may hold at once (each `vtnt fleet results` makes
/// one, gone once idle).
pub const TENANT_CONSUMERS: u64 = 256;

/// Who connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Agent,
    Tenant(String),
    Operator,
    /// `vtnt fleet up` making the streams of the fleet's account (`None`) or of a
    /// tenant's.
    Setup(Option<String>),
}

impl Role {
    /// The name of its key file under a fleet's `keys/`.
    pub fn key_name(&self) -> String {
        match self {
            Role::Agent => "agent".into(),
            Role::Tenant(t) => format!("tenant-{t}"),
            Role::Operator => "operator".into(),
            Role::Setup(None) => "setup".into(),
            Role::Setup(Some(t)) => format!("setup-{t}"),
        }
    }

    /// The prefix of its reply subjects: a tenant's are its own (in its account, and for
    /// its discard-mode requests in the fleet's).
    pub fn inbox_prefix(&self) -> String {
        match self {
            Role::Agent => "_INBOX_AGENT".into(),
            Role::Tenant(t) => format!("_INBOX_T.{t}"),
            Role::Operator => "_INBOX_OPERATOR".into(),
            Role::Setup(_) => "_INBOX_SETUP".into(),
        }
    }

    /// How many seeds its key file holds: a tenant's second is its requests' user.
    fn seeds(&self) -> usize {
        match self {
            Role::Tenant(_) => 2,
            _ => 1,
        }
    }
}

/// A tenant's discard-mode requests' user, in the fleet's account.
fn requester(t: &str) -> Value {
    json!({
        "publish": {"allow": [crate::deploy_subject(t, "*")]},
        "subscribe": {"allow": [format!("{}.>", Role::Tenant(t.into()).inbox_prefix())]},
    })
}

/// A tenant in its own account: its jobs, its results stream, the fleet's streams' info.
fn tenant(t: &str) -> Value {
    let r = results_stream(t);
    let m = crate::measurement::stream_name(t);
    let l = crate::campaign::stream_name(t);
    json!({
        "publish": {"allow": [
            crate::wq_subject(t, "*"),
            // its measurements' definitions ([`crate::measurement`])
            crate::measurement::subject(t, "*"),
            format!("$JS.API.STREAM.INFO.{m}"),
            format!("$JS.API.STREAM.MSG.GET.{m}"),
            // its campaigns' target lists, kept as long as they run ([`crate::campaign`])
            format!("vtnt.lists.{t}.>"),
            format!("$JS.API.STREAM.INFO.{l}"),
            format!("$JS.API.STREAM.MSG.GET.{l}"),
            format!("$JS.API.STREAM.PURGE.{l}"),
            crate::data_subject(t, ">", None),
            format!("$JS.API.STREAM.INFO.{r}"),
            format!("$JS.API.CONSUMER.CREATE.{r}"),
            format!("$JS.API.CONSUMER.CREATE.{r}.>"),
            format!("$JS.API.CONSUMER.INFO.{r}.>"),
            format!("$JS.API.CONSUMER.DELETE.{r}.>"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{r}.>"),
            // acknowledgements of its own durable consumers (the results store's feed)
            format!("$JS.ACK.{r}.>"),
            format!("{FLEET_API}.STREAM.INFO.{NODES_STREAM}"),
            format!("{FLEET_API}.STREAM.MSG.GET.{NODES_STREAM}"),
            // its quota, read-only ([`crate::quota`])
            format!("{FLEET_API}.STREAM.INFO.{}", crate::quota::stream_name(t)),
            format!("{FLEET_API}.STREAM.MSG.GET.{}", crate::quota::stream_name(t)),
            // its large target lists, read-only ([`crate::campaign`])
            format!("{FLEET_API}.STREAM.INFO.{}", data_stream(t)),
            format!("{FLEET_API}.STREAM.MSG.GET.{}", data_stream(t)),
            crate::backlog_subject(t),
        ]},
        "subscribe": {"allow": [format!("{}.>", Role::Tenant(t.into()).inbox_prefix()), HEARTBEATS]},
    })
}

/// What reading the images' object store takes: its stream's info, its messages (the
/// objects' metadata), and an ordered consumer of an object's chunks.
fn read_images() -> Vec<String> {
    let s = format!("OBJ_{IMAGES_BUCKET}");
    vec![
        format!("$JS.API.STREAM.INFO.{s}"),
        format!("$JS.API.STREAM.MSG.GET.{s}"),
        format!("$JS.API.DIRECT.GET.{s}.>"),
        format!("$JS.API.CONSUMER.CREATE.{s}"),
        format!("$JS.API.CONSUMER.CREATE.{s}.>"),
        format!("$JS.API.CONSUMER.DELETE.{s}.>"),
        format!("$JS.FC.{s}.>"),
    ]
}

/// The agents: jobs (both modes, the tenants' large target lists), heartbeats, results
/// for every tenant, the images.
fn agent(tenants: &[String]) -> Value {
    let (jobs, nodes) = (JOBS_STREAM, NODES_STREAM);
    let mut allow: Vec<String> = vec![
        "vtnt.results.>".into(),
        HEARTBEATS.into(),
        // the tenants' use of their quotas, which the agents keep ([`crate::quota`])
        crate::quota::use_subject("*"),
        // the rate limit's leases ([`crate::rate`])
        crate::rate::lease_subject(">"),
        // the running jobs' progress ([`crate::progress`])
        crate::progress::subject("*", "*"),
        format!("$JS.API.STREAM.INFO.{jobs}"),
        format!("$JS.API.STREAM.INFO.{nodes}"),
        // its heartbeat read back, for its clock's offset ([`crate::clock`])
        format!("$JS.API.STREAM.MSG.GET.{nodes}"),
        format!("$JS.API.CONSUMER.CREATE.{jobs}.>"),
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{jobs}.>"),
        format!("$JS.API.CONSUMER.INFO.{jobs}.>"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{jobs}.>"),
        format!("$JS.ACK.{jobs}.>"),
    ];
    for t in tenants {
        let d = data_stream(t);
        allow.extend([
            format!("$JS.API.STREAM.INFO.{d}"),
            format!("$JS.API.STREAM.MSG.GET.{d}"),
            format!("$JS.API.STREAM.PURGE.{d}"),
        ]);
        allow.extend(read_stream(&crate::quota::stream_name(t)));
    }
    allow.extend(read_images());
    allow.extend(read_stream(crate::optout::STREAM));
    allow.extend(read_stream(crate::rate::STREAM));
    allow.extend(read_stream(crate::progress::STREAM));
    json!({
        "publish": {"allow": allow},
        "subscribe": {"allow": [
            crate::deploy_subject("*", "*"),
            crate::backlog_subject("*"),
            format!("{}.>", Role::Agent.inbox_prefix()),
        ]},
        // answers to discard-mode and backlog requests, on the requester's inbox only
        // (checked by the agent: `agent::reply_to`, `backlog::asked`)
        "allow_responses": true,
    })
}

/// What reading stream `s`'s messages takes: its info and a message got by subject or
/// sequence (the opt-out list, [`crate::optout`]; a tenant's quota).
fn read_stream(s: &str) -> [String; 2] {
    [
        format!("$JS.API.STREAM.INFO.{s}"),
        format!("$JS.API.STREAM.MSG.GET.{s}"),
    ]
}

/// The operator: the images' object store (made by `vtnt fleet up`), written and read;
/// the opt-out list, written and read; the tenants' quotas' limits, written, and their
/// use, read.
fn operator(tenants: &[String]) -> Value {
    let mut allow = read_images();
    allow.extend(read_stream(crate::optout::STREAM));
    allow.extend(read_stream(crate::rate::STREAM));
    allow.extend([
        crate::rate::LIMIT_SUBJECT.to_string(),
        format!("$JS.API.STREAM.PURGE.OBJ_{IMAGES_BUCKET}"),
        format!("$O.{IMAGES_BUCKET}.>"),
        crate::optout::SUBJECT.to_string(),
        crate::quota::limit_subject("*"),
    ]);
    for t in tenants {
        allow.extend(read_stream(&crate::quota::stream_name(t)));
    }
    json!({
        "publish": {"allow": allow},
        "subscribe": {"allow": [format!("{}.>", Role::Operator.inbox_prefix())]},
    })
}

/// A setup user: JetStream's API in its own account.
fn setup() -> Value {
    json!({
        "publish": {"allow": ["$JS.API.>"]},
        "subscribe": {"allow": [format!("{}.>", Role::Setup(None).inbox_prefix())]},
    })
}

/// The key file of `role` under a fleet's directory.
pub fn key_file(fleet_dir: &Path, role: &Role) -> PathBuf {
    fleet_dir
        .join("keys")
        .join(format!("{}.nk", role.key_name()))
}

/// nats-server's `accounts` for the agents, the operator and `tenants` (see the module's
/// docs): each user's public key and permissions, the exports and imports, each tenant's
/// account storing `tenant_store` bytes at most. A role's keys are made (seeds in a file
/// only root reads) unless they exist, so a broker started again keeps its users' keys.
pub fn accounts(fleet_dir: &Path, tenants: &[String], tenant_store: u64) -> crate::Result<Value> {
    for t in tenants {
        crate::check_token("--tenant", t)?;
    }
    let public = |role: &Role| -> crate::Result<Vec<String>> {
        Ok(keys(fleet_dir, role)?
            .iter()
            .map(nkeys::KeyPair::public_key)
            .collect())
    };
    let user = |nkey: &str, permissions: Value| json!({"nkey": nkey, "permissions": permissions});
    let mut fleet_users = vec![
        user(&public(&Role::Agent)?[0], agent(tenants)),
        user(&public(&Role::Operator)?[0], operator(tenants)),
        user(&public(&Role::Setup(None))?[0], setup()),
    ];
    let everyone: Vec<String> = tenants.iter().map(|t| tenant_account(t)).collect();
    let mut exports: Vec<Value> = [
        format!("$JS.API.STREAM.INFO.{NODES_STREAM}"),
        format!("$JS.API.STREAM.MSG.GET.{NODES_STREAM}"),
    ]
    .into_iter()
    .map(|s| json!({"service": s, "accounts": everyone}))
    .collect();
    exports.push(json!({"stream": HEARTBEATS, "accounts": everyone}));
    let mut imports = Vec::new();
    let mut out = serde_json::Map::new();
    for t in tenants {
        let account = tenant_account(t);
        let keys = public(&Role::Tenant(t.clone()))?;
        fleet_users.push(user(&keys[1], requester(t)));
        let to_fleet = [
            crate::wq_subject(t, "*"),
            crate::data_subject(t, ">", None),
            crate::backlog_subject(t),
        ];
        let mut t_imports: Vec<Value> = to_fleet
            .iter()
            .map(|s| json!({"service": {"account": FLEET_ACCOUNT, "subject": s}}))
            .collect();
        exports.extend(
            to_fleet
                .iter()
                .map(|s| json!({"service": s, "accounts": [account]})),
        );
        for s in ["STREAM.INFO.", "STREAM.MSG.GET."].map(|verb| format!("{verb}{NODES_STREAM}")) {
            t_imports.push(json!({
                "service": {"account": FLEET_ACCOUNT, "subject": format!("$JS.API.{s}")},
                "to": format!("{FLEET_API}.{s}"),
            }));
        }
        // its quota's stream and its large target lists' (a split campaign's list, which
        // the tenant's controller deals: `crate::campaign`), read-only, to its account
        // alone
        for s in read_stream(&crate::quota::stream_name(t))
            .into_iter()
            .chain(read_stream(&data_stream(t)))
        {
            exports.push(json!({"service": s, "accounts": [account]}));
            t_imports.push(json!({
                "service": {"account": FLEET_ACCOUNT, "subject": s},
                "to": s.replacen("$JS.API", FLEET_API, 1),
            }));
        }
        t_imports.push(json!({"stream": {"account": FLEET_ACCOUNT, "subject": HEARTBEATS}}));
        let results = format!("vtnt.results.{t}.>");
        imports.push(json!({"service": {"account": account, "subject": results}}));
        out.insert(
            account,
            json!({
                "jetstream": {
                    "max_mem": 64 << 20,
                    "max_file": tenant_store,
                    "max_streams": TENANT_STREAMS,
                    "max_consumers": TENANT_CONSUMERS,
                },
                "users": [
                    user(&keys[0], tenant(t)),
                    user(&public(&Role::Setup(Some(t.clone())))?[0], setup()),
                ],
                "exports": [{"service": results, "accounts": [FLEET_ACCOUNT]}],
                "imports": t_imports,
            }),
        );
    }
    out.insert(
        FLEET_ACCOUNT.into(),
        json!({"jetstream": "enabled", "users": fleet_users, "exports": exports, "imports": imports}),
    );
    Ok(Value::Object(out))
}

/// The key pairs of `role` (made and written unless its file holds them; a file with
/// fewer seeds than the role has, from an older broker, keeps its first ones).
fn keys(fleet_dir: &Path, role: &Role) -> crate::Result<Vec<nkeys::KeyPair>> {
    let file = key_file(fleet_dir, role);
    let mut seeds = match std::fs::read_to_string(&file) {
        Ok(_) => read_seeds(&file)?,
        Err(_) => Vec::new(),
    };
    if seeds.len() >= role.seeds() {
        return seeds
            .iter()
            .map(|s| {
                nkeys::KeyPair::from_seed(s)
                    .map_err(|e| Error::Auth(format!("{}: {e}", file.display())))
            })
            .collect();
    }
    let had = seeds.len();
    while seeds.len() < role.seeds() {
        seeds.push(
            nkeys::KeyPair::new_user()
                .seed()
                .map_err(|e| Error::Auth(format!("making a key for {}: {e}", role.key_name())))?,
        );
    }
    if had > 0 {
        std::fs::remove_file(&file).io(|| format!("replacing {}", file.display()))?;
    }
    write_secret(&file, &seeds.join("\n"))?;
    keys(fleet_dir, role)
}

/// Writes `text` to `path` readable by its owner only (the directory made if need be).
fn write_secret(path: &Path, text: &str) -> crate::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).io(|| format!("creating {}", d.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .io(|| format!("creating {}", path.display()))?;
    writeln!(f, "{text}").io(|| format!("writing {}", path.display()))
}

/// The seeds in a key file, one a line: the user's, then (a tenant's key made by `vtnt
/// fleet up`) its discard-mode requests' user.
pub fn read_seeds(path: &Path) -> crate::Result<Vec<String>> {
    let text = std::fs::read_to_string(path).io(|| format!("--nkey {}", path.display()))?;
    let seeds: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    ensure!(!seeds.is_empty(), Auth, "--nkey {}: empty", path.display());
    for (i, s) in seeds.iter().enumerate() {
        nkeys::KeyPair::from_seed(s).map_err(|e| {
            Error::Auth(format!(
                "--nkey {}: line {} is not an nkey seed ({e})",
                path.display(),
                i + 1
            ))
        })?;
    }
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(p: &Value, what: &str) -> Vec<String> {
        p[what]["allow"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn no_user_but_setup_may_make_or_change_a_stream() {
        let writes = [
            "CREATE",
            "UPDATE",
            "DELETE",
            "PURGE",
            "MSG.DELETE",
            "LIST",
            "NAMES",
        ];
        for (who, p) in [
            ("tenant", tenant("a")),
            ("requester", requester("a")),
            ("agent", agent(&["a".into()])),
            ("operator", operator(&["a".into()])),
        ] {
            let publish = allowed(&p, "publish");
            for s in &publish {
                let api = s.strip_prefix("$JS.API.STREAM.").unwrap_or("");
                let purges_own = s == "$JS.API.STREAM.PURGE.VTNT_DATA_a"
                    || s == "$JS.API.STREAM.PURGE.VTNT_LISTS_a"
                    || s == "$JS.API.STREAM.PURGE.OBJ_vtnt-images";
                assert!(
                    purges_own || !writes.iter().any(|w| api.starts_with(w)),
                    "{who} may publish {s}"
                );
                assert!(
                    s != "$JS.API.>" && s != ">" && !s.starts_with("$KV"),
                    "{who}: {s}"
                );
            }
        }
    }

    #[test]
    fn a_tenant_acts_under_its_own_name_only() {
        let publish = allowed(&tenant("a"), "publish");
        assert!(publish.contains(&"vtnt.wq.a.*".to_string()));
        assert!(publish.contains(&"$JS.API.CONSUMER.MSG.NEXT.VTNT_RESULTS_a.>".to_string()));
        // every wildcard it may publish to is under its own name
        assert!(
            publish.iter().all(|s| !s.ends_with(".>")
                || s.contains("VTNT_RESULTS_a.")
                || s.starts_with("vtnt.data.a.")
                || s.starts_with("vtnt.lists.a.")),
            "{publish:?}"
        );
        // its own inbox, and the heartbeats every tenant hears (imported, read-only)
        assert_eq!(
            allowed(&tenant("a"), "subscribe"),
            ["_INBOX_T.a.>", HEARTBEATS]
        );
        assert!(!publish.iter().any(|s| s.starts_with("vtnt.nodes")));
        // its quota: read, never written; only the operator sets limits, only agents
        // count the use
        assert!(
            !publish.iter().any(|s| s.starts_with("vtnt.quota")),
            "{publish:?}"
        );
        assert!(publish.contains(&"$JS.FLEET.API.STREAM.MSG.GET.VTNT_QUOTA_a".to_string()));
        assert!(allowed(&operator(&["a".into()]), "publish")
            .iter()
            .all(|s| !s.starts_with("vtnt.quota") || s == "vtnt.quota.*.limit"));
        assert_eq!(allowed(&requester("a"), "publish"), ["vtnt.deploy.a.*"]);
        assert_eq!(allowed(&requester("a"), "subscribe"), ["_INBOX_T.a.>"]);
        let agent = allowed(&agent(&["a".into()]), "publish");
        assert!(
            agent.iter().all(|s| !s.contains("VTNT_RESULTS")),
            "{agent:?}"
        );
    }

    #[test]
    fn an_agent_reads_the_heartbeats_back_and_writes_only_its_own_kind() {
        let publish = allowed(&agent(&["a".into()]), "publish");
        // its stored heartbeat, read back by sequence for its clock's offset
        assert!(publish.contains(&format!("$JS.API.STREAM.MSG.GET.{NODES_STREAM}")));
        assert!(publish.contains(&HEARTBEATS.to_string()));
        // and nothing that changes the stream
        assert!(!publish.iter().any(|s| s.starts_with("$JS.API.STREAM.")
            && s.contains(NODES_STREAM)
            && !s.contains(".INFO.")
            && !s.contains(".MSG.GET.")));
    }

    #[test]
    fn keys_are_made_once_and_kept_and_accounts_hold_each_tenant() {
        let dir = std::env::temp_dir().join(format!("vtnt-auth-{}", std::process::id()));
        let first = accounts(&dir, &["a".into()], 1 << 30).unwrap();
        let again = accounts(&dir, &["a".into(), "b".into()], 1 << 30).unwrap();
        assert_eq!(
            first[FLEET_ACCOUNT]["users"][0]["nkey"],
            again[FLEET_ACCOUNT]["users"][0]["nkey"]
        );
        assert_eq!(first["TENANT_a"]["users"], again["TENANT_a"]["users"]);
        assert_eq!(again["TENANT_b"]["jetstream"]["max_streams"], 3);
        assert_eq!(again["TENANT_b"]["jetstream"]["max_file"], 1 << 30);
        assert_eq!(tenant_store_bytes(100 << 30, 2), TENANT_STORE_BYTES);
        assert_eq!(tenant_store_bytes(20 << 30, 4), 5 << 29);
        // agent, operator, setup, and each tenant's requester
        assert_eq!(again[FLEET_ACCOUNT]["users"].as_array().unwrap().len(), 5);
        let b = key_file(&dir, &Role::Tenant("b".into()));
        let seeds = read_seeds(&b).unwrap();
        assert_eq!(seeds.len(), 2);
        assert!(seeds.iter().all(|s| s.starts_with("SU")), "{seeds:?}");
        // a tenant key of one seed (an older broker's) keeps it and gains the second
        std::fs::remove_file(&b).unwrap();
        write_secret(&b, &seeds[0]).unwrap();
        accounts(&dir, &["b".into()], 1 << 30).unwrap();
        let kept = read_seeds(&b).unwrap();
        assert_eq!((kept.len(), &kept[0]), (2, &seeds[0]));
        assert!(accounts(&dir, &["a.b".into()], 1 << 30).is_err());
        std::fs::write(&b, "not a seed\n").unwrap();
        let e = read_seeds(&b).unwrap_err().to_string();
        assert!(e.contains("line 1 is not an nkey seed"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
