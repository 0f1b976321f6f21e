//! `vtnt serve`: the results store and a fleet's live events as pages and JSON
//! (vtnt-web, docs/serve.md); `vtnt serve token`: a tenant's token for them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use vtnt_fleet::auth::Role;
use vtnt_fleet::{broker, Connect};
use vtnt_web::auth::{self, TenantKey};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    pub token: Option<TokenCommand>,
    /// The address to listen on (loopback; another needs --public).
    #[arg(long, default_value = "127.0.0.1:8472")]
    pub listen: SocketAddr,
    /// Serve other hosts too (with --listen on a non-loopback address; tenants' keys
    /// required).
    #[arg(long)]
    pub public: bool,
    /// The store (default: as `vtnt import`'s).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// A benchmark report directory to serve (read-only) under /reports/.
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
    /// A tenant to serve (repeat); its tokens are checked against its key. None: tenant
    /// `local`, unauthenticated, on loopback only.
    #[arg(long = "tenant", value_name = "NAME")]
    pub tenants: Vec<String>,
    /// Each --tenant's nkey seed file, in order (default with --fleet: the fleet's
    /// keys/tenant-NAME.nk).
    #[arg(long = "key", value_name = "FILE")]
    pub keys: Vec<PathBuf>,
    /// Follow this host's fleet (`vtnt fleet up --name NAME`): its URL and CA.
    #[arg(long, value_name = "NAME", conflicts_with = "nats")]
    pub fleet: Option<String>,
    /// Follow the fleet at this NATS URL (with --key per tenant).
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// The CA (PEM) that signed the NATS server's certificate.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Event streams one client address may hold open.
    #[arg(long, default_value_t = 4)]
    pub streams_per_client: usize,
    /// Seconds one query may run.
    #[arg(long, default_value_t = 5.0)]
    pub query_time: f64,
}

#[derive(clap::Subcommand, Debug)]
pub enum TokenCommand {
    /// Print a token proving TENANT (signed with its nkey seed), for `Authorization:
    /// Bearer` or the login page.
    Token {
        #[arg(long)]
        tenant: String,
        /// The tenant's nkey seed file (`vtnt fleet up` writes keys/tenant-NAME.nk).
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// The fleet whose key file to use when no --key is given.
        #[arg(long, value_name = "NAME", default_value = broker::DEFAULT_NAME)]
        fleet: String,
        /// How long it is valid, hours.
        #[arg(long, default_value_t = 12)]
        hours: u64,
    },
}

/// The key file of `tenant`: the given one, else the local fleet's.
fn key_of(given: Option<&PathBuf>, fleet: Option<&str>, tenant: &str) -> anyhow::Result<PathBuf> {
    match (given, fleet) {
        (Some(k), _) => Ok(k.clone()),
        (None, Some(f)) => Ok(vtnt_fleet::auth::key_file(
            &broker::state_dir(f),
            &Role::Tenant(tenant.into()),
        )),
        (None, None) => anyhow::bail!("--tenant {tenant}: give its --key FILE (or --fleet NAME)"),
    }
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(TokenCommand::Token {
        tenant,
        key,
        fleet,
        hours,
    }) = &a.token
    {
        let key = key_of(key.as_ref(), Some(fleet), tenant)?;
        out!("{}", auth::make_token(tenant, &key, hours * 3600)?);
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::ensure!(
        a.keys.len() <= a.tenants.len(),
        "{} --key for {} --tenant: one key per tenant, in order",
        a.keys.len(),
        a.tenants.len()
    );
    anyhow::ensure!(
        a.query_time > 0.0 && a.query_time <= 600.0,
        "--query-time: 0 to 600 seconds"
    );
    let following = a.fleet.is_some() || a.nats.is_some();
    anyhow::ensure!(
        !following || !a.tenants.is_empty(),
        "--fleet/--nats: name the tenants to follow (--tenant NAME)"
    );
    let mut tenants = Vec::new();
    let mut connects = Vec::new();
    for (i, t) in a.tenants.iter().enumerate() {
        let key = key_of(a.keys.get(i), a.fleet.as_deref(), t)?;
        tenants.push(TenantKey::from_file(t, &key)?);
        let role = Role::Tenant(t.clone());
        let c = match (&a.fleet, &a.nats) {
            (Some(f), _) => Some(Connect::local(f, role)?),
            (None, Some(u)) => Some(Connect::open(u, role)),
            _ => None,
        };
        if let Some(mut c) = c {
            c.nkey = Some(key);
            if a.tls_ca.is_some() {
                c.tls_ca = a.tls_ca.clone();
            }
            connects.push(c);
        }
    }
    let store = crate::store::StoreArgs {
        store: a.store.clone(),
        tenant: vtnt_store::Tenant::LOCAL.into(),
    }
    .path()?;
    let config = vtnt_web::Config {
        listen: a.listen,
        public: a.public,
        store,
        reports: a.reports,
        tenants,
        fleet: following.then_some(connects),
        limits: vtnt_web::Limits {
            streams_per_client: a.streams_per_client,
            query_time: std::time::Duration::from_secs_f64(a.query_time),
            ..vtnt_web::Limits::default()
        },
    };
    let bound = vtnt_web::server::Bound::bind(config)?;
    // the address first, on its own line: scripts and tests read it
    out!("http://{}/", bound.local_addr());
    vtnt_web::serve(bound)?;
    Ok(ExitCode::SUCCESS)
}
