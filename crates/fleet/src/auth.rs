//! Who may do what on a fleet's broker. Three kinds of users, each with its own nkey:
//! agents (one key, `agent`, for every node), tenants (`tenant-<name>`) and the
//! operator (`operator`, who puts the images). The permissions `vtnt fleet up` writes
//! into nats-server's configuration are allow-lists:
//!
//! - a tenant publishes jobs only under its own name (`vtnt.wq.<tenant>.*`,
//!   `vtnt.deploy.<tenant>.*`), so an agent can take the tenant from the subject; it reads
//!   and creates only its own results stream (`VTNT_RESULTS_<tenant>`) through the
//!   JetStream API, reads the nodes' heartbeats and the work queue's counts, and receives
//!   only on its own inbox prefix (`_INBOX_T.<tenant>`), so no other tenant's replies or
//!   deliveries reach it;
//! - agents take jobs (the work-queue consumers, the discard subjects), answer requests,
//!   heartbeat, and store results for any tenant; they cannot read results back. They
//!   read the images' object store (`vtnt-images`), which only the operator writes.
//!
//! One NATS account holds everything: discard needs the server's "no responders" answer,
//! which nats-server 2.9 does not give across an account's service import (measured: the
//! request timed out after 10 s), so accounts per tenant would cost the discard mode its
//! point. Isolation comes from the permissions above instead.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Value};

/// Who connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Agent,
    Tenant(String),
    Operator,
}

/// What reading the images' object store takes: its stream's info, its messages (the
/// objects' metadata), and an ordered consumer of an object's chunks.
fn read_images() -> Vec<String> {
    let s = format!("OBJ_{}", crate::IMAGES_BUCKET);
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

impl Role {
    /// The name of its key file under a fleet's `keys/`.
    pub fn key_name(&self) -> String {
        match self {
            Role::Agent => "agent".into(),
            Role::Tenant(t) => format!("tenant-{t}"),
            Role::Operator => "operator".into(),
        }
    }

    /// The prefix of its reply subjects: a tenant's are its own.
    pub fn inbox_prefix(&self) -> String {
        match self {
            Role::Agent => "_INBOX_AGENT".into(),
            Role::Tenant(t) => format!("_INBOX_T.{t}"),
            Role::Operator => "_INBOX_OPERATOR".into(),
        }
    }

    /// Its permissions, in nats-server's configuration.
    pub fn permissions(&self) -> Value {
        match self {
            Role::Agent => {
                let jobs = crate::JOBS_STREAM;
                let nodes = crate::NODES_STREAM;
                let mut allow: Vec<String> = [
                    "vtnt.results.>".to_string(),
                    "vtnt.nodes.*".into(),
                    "$JS.API.INFO".into(),
                    format!("$JS.API.STREAM.INFO.{jobs}"),
                    format!("$JS.API.STREAM.CREATE.{jobs}"),
                    format!("$JS.API.STREAM.INFO.{nodes}"),
                    format!("$JS.API.STREAM.CREATE.{nodes}"),
                    format!("$JS.API.CONSUMER.CREATE.{jobs}.>"),
                    format!("$JS.API.CONSUMER.DURABLE.CREATE.{jobs}.>"),
                    format!("$JS.API.CONSUMER.INFO.{jobs}.>"),
                    format!("$JS.API.CONSUMER.MSG.NEXT.{jobs}.>"),
                    format!("$JS.ACK.{jobs}.>"),
                ]
                .into();
                allow.extend(read_images());
                json!({
                    "publish": {"allow": allow},
                    "subscribe": {"allow": ["vtnt.deploy.*.*", format!("{}.>", self.inbox_prefix())]},
                    "allow_responses": true,
                })
            }
            Role::Tenant(t) => {
                let r = crate::results_stream(t);
                let jobs = crate::JOBS_STREAM;
                let nodes = crate::NODES_STREAM;
                json!({
                    "publish": {"allow": [
                        format!("vtnt.wq.{t}.*"), format!("vtnt.deploy.{t}.*"), "$JS.API.INFO",
                        format!("$JS.API.STREAM.INFO.{jobs}"),
                        format!("$JS.API.STREAM.INFO.{nodes}"),
                        format!("$JS.API.STREAM.MSG.GET.{nodes}"),
                        format!("$JS.API.STREAM.INFO.{r}"),
                        format!("$JS.API.STREAM.CREATE.{r}"),
                        format!("$JS.API.CONSUMER.CREATE.{r}"),
                        format!("$JS.API.CONSUMER.CREATE.{r}.>"),
                        format!("$JS.API.CONSUMER.INFO.{r}.>"),
                        format!("$JS.API.CONSUMER.DELETE.{r}.>"),
                        format!("$JS.API.CONSUMER.MSG.NEXT.{r}.>"),
                        format!("$JS.ACK.{r}.>"),
                        format!("$JS.FC.{r}.>"),
                    ]},
                    "subscribe": {"allow": [format!("{}.>", self.inbox_prefix())]},
                })
            }
            Role::Operator => {
                let b = crate::IMAGES_BUCKET;
                let s = format!("OBJ_{b}");
                let mut allow = read_images();
                allow.extend([
                    "$JS.API.INFO".to_string(),
                    format!("$JS.API.STREAM.CREATE.{s}"),
                    format!("$JS.API.STREAM.PURGE.{s}"),
                    format!("$O.{b}.>"),
                ]);
                json!({
                    "publish": {"allow": allow},
                    "subscribe": {"allow": [format!("{}.>", self.inbox_prefix())]},
                })
            }
        }
    }
}

/// The key file of `role` under a fleet's directory.
pub fn key_file(fleet_dir: &Path, role: &Role) -> PathBuf {
    fleet_dir
        .join("keys")
        .join(format!("{}.nk", role.key_name()))
}

/// The users of nats-server's configuration for the agents, the operator and `tenants`: each user's
/// public key and permissions. A role's key is made (a seed in a file only root reads)
/// unless it exists, so a broker started again keeps its users' keys.
pub fn users(fleet_dir: &Path, tenants: &[String]) -> anyhow::Result<Vec<Value>> {
    let roles = [Role::Agent, Role::Operator]
        .into_iter()
        .chain(tenants.iter().cloned().map(Role::Tenant));
    let mut users = Vec::new();
    for role in roles {
        if let Role::Tenant(t) = &role {
            crate::check_token("--tenant", t)?;
        }
        let file = key_file(fleet_dir, &role);
        let key = match std::fs::read_to_string(&file) {
            Ok(seed) => nkeys::KeyPair::from_seed(seed.trim())
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?,
            Err(_) => {
                let key = nkeys::KeyPair::new_user();
                write_secret(&file, &key.seed().map_err(|e| anyhow::anyhow!("{e}"))?)?;
                key
            }
        };
        users.push(json!({"nkey": key.public_key(), "permissions": role.permissions()}));
    }
    Ok(users)
}

/// Writes `text` to `path` readable by its owner only (the directory made if need be).
fn write_secret(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    writeln!(f, "{text}").with_context(|| format!("writing {}", path.display()))
}

/// The seed in a key file, for `async_nats::ConnectOptions::nkey`.
pub fn read_seed(path: &Path) -> anyhow::Result<String> {
    let seed = std::fs::read_to_string(path)
        .with_context(|| format!("--nkey {}", path.display()))?
        .trim()
        .to_string();
    nkeys::KeyPair::from_seed(&seed)
        .map_err(|e| anyhow::anyhow!("--nkey {}: not an nkey seed ({e})", path.display()))?;
    Ok(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(role: &Role, what: &str) -> Vec<String> {
        role.permissions()[what]["allow"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_tenant_publishes_and_reads_under_its_own_name_only() {
        let a = Role::Tenant("a".into());
        let publish = allowed(&a, "publish");
        assert!(publish.contains(&"vtnt.wq.a.*".to_string()));
        assert!(publish.contains(&"$JS.API.CONSUMER.MSG.NEXT.VTNT_RESULTS_a.>".to_string()));
        // every wildcard it may publish to is its own results stream's
        assert!(
            publish
                .iter()
                .all(|s| !s.ends_with(".>") || s.contains("VTNT_RESULTS_a.")),
            "{publish:?}"
        );
        assert_eq!(allowed(&a, "subscribe"), ["_INBOX_T.a.>"]);
        let agent = allowed(&Role::Agent, "publish");
        assert!(
            agent.iter().all(|s| !s.contains("VTNT_RESULTS")),
            "{agent:?}"
        );
    }

    #[test]
    fn keys_are_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("vtnt-auth-{}", std::process::id()));
        let first = users(&dir, &["a".into()]).unwrap();
        let again = users(&dir, &["a".into(), "b".into()]).unwrap();
        assert_eq!(first[..], again[..3]);
        assert_eq!(again.len(), 4);
        let seed = read_seed(&key_file(&dir, &Role::Tenant("b".into()))).unwrap();
        assert!(seed.starts_with("SU"), "{seed}");
        assert!(users(&dir, &["a.b".into()]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
