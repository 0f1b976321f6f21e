//! Every key the configuration file takes, in one table: its section and name, whether it
//! is a list, its environment variable, and what it sets: the default of command-line
//! options (found by their clap id in the commands named) or a setting of this process
//! (exclusion lists, where installed files and images are). The table is the schema: the
//! file is checked against it, `vtnt config show` and the sample are printed from it, and
//! an option's help is the key's documentation.

/// What a key sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sets {
    /// The default of option `arg` (its clap id) of each command in `commands` and of
    /// their subcommands that have it (`""`: the top level's global options).
    Options {
        commands: &'static [&'static str],
        arg: &'static str,
    },
    /// More exclusion lists for every probe this host makes (`vtnt_job`).
    Exclude,
    /// The directory searched first for installed files (`vtnt_artifacts`).
    LibDir,
    /// The image cache (`vtnt_runtimes::paths`).
    CacheDir,
}

/// A key's environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Env {
    /// `VTNT_<SECTION>_<KEY>`, upper case, `-` as `_` ([`Key::env`]).
    Rule,
    /// A variable vtnt read before it had a configuration file.
    Named(&'static str),
    /// None: consent to public targets is given per run or by root's file, never by a
    /// variable that every child process and script inherits.
    None,
}

/// One key of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub section: &'static str,
    pub name: &'static str,
    /// A list (`["a", "b"]`; in its variable, comma-separated).
    pub list: bool,
    pub env: Env,
    pub sets: Sets,
    /// What it means, when its options' help does not say it (a key that sets no
    /// option, or several options each with its own help).
    pub doc: &'static str,
    /// A value to show in the sample, as TOML, for a key without a built-in default.
    pub example: &'static str,
}

impl Key {
    /// `section.name`.
    pub fn path(&self) -> String {
        format!("{}.{}", self.section, self.name)
    }

    /// The environment variable, if the key has one.
    pub fn env(&self) -> Option<String> {
        match self.env {
            Env::Rule => Some(
                format!("VTNT_{}_{}", self.section, self.name)
                    .to_ascii_uppercase()
                    .replace('-', "_"),
            ),
            Env::Named(n) => Some(n.to_string()),
            Env::None => None,
        }
    }

    /// Whether the key turns on public probing: only a file owned by root may set it
    /// (`config/file.rs`).
    pub fn public(&self) -> bool {
        self.name == "allow-public"
    }
}

/// The commands that probe from this host with their own options.
const PROBE: &[&str] = &["trace", "ping", "tnt"];
/// The fleet's client commands (not `up` and `down`, whose TLS files are the server's).
const FLEET: &[&str] = &[
    "fleet submit",
    "fleet status",
    "fleet results",
    "fleet replay",
    "fleet images",
    "fleet quota",
];

const fn opt(
    section: &'static str,
    name: &'static str,
    commands: &'static [&'static str],
    arg: &'static str,
) -> Key {
    Key {
        section,
        name,
        list: false,
        env: Env::Rule,
        sets: Sets::Options { commands, arg },
        doc: "",
        example: "",
    }
}

/// With `example` for the sample.
const fn ex(k: Key, example: &'static str) -> Key {
    Key { example, ..k }
}

const fn list(k: Key) -> Key {
    Key { list: true, ..k }
}

/// Consent to public targets: no variable ([`Env::None`]).
const fn consent(k: Key) -> Key {
    Key {
        env: Env::None,
        ..k
    }
}

/// The connection keys of a fleet client section (`[fleet]`, `[agent]`).
macro_rules! connect {
    ($section:literal, $commands:expr, $who:literal) => {
        [
            ex(
                opt($section, "url", $commands, "nats"),
                "\"tls://broker.example:4222\"",
            ),
            ex(
                opt($section, "nkey", $commands, "nkey"),
                concat!("\"/etc/vtnt/", $who, ".nk\""),
            ),
            ex(
                opt($section, "creds", $commands, "creds"),
                concat!("\"/etc/vtnt/", $who, ".creds\""),
            ),
            ex(
                opt($section, "tls-ca", $commands, "tls_ca"),
                "\"/etc/vtnt/tls/ca.pem\"",
            ),
            ex(
                opt($section, "tls-cert", $commands, "tls_cert"),
                concat!("\"/etc/vtnt/tls/", $who, ".pem\""),
            ),
            ex(
                opt($section, "tls-key", $commands, "tls_key"),
                concat!("\"/etc/vtnt/tls/", $who, ".key\""),
            ),
            ex(
                opt($section, "js-domain", $commands, "js_domain"),
                "\"hub\"",
            ),
        ]
    };
}

const FLEET_CONNECT: [Key; 7] = connect!("fleet", FLEET, "tenant");
const AGENT_CONNECT: [Key; 7] = connect!("agent", &["agent"], "agent");

const OTHERS: [Key; 45] = [
    opt("probe", "pps", PROBE, "pps"),
    opt("probe", "window", PROBE, "window"),
    consent(opt("probe", "allow-public", PROBE, "allow_public")),
    Key {
        section: "probe",
        name: "exclude",
        list: true,
        env: Env::Rule,
        sets: Sets::Exclude,
        doc: "Exclusion lists (prefixes never to probe, one per line, `#` comments) for every \
              probe this host makes: `vtnt trace`, `ping`, `tnt`, `job`, `run`, the daemon's \
              commands and the agent's jobs, on top of /etc/vtnt/exclude.conf and every \
              --exclude. Lists add up: a flag never drops one.",
        example: "",
    },
    ex(opt("daemon", "port", &["daemon"], "port"), "31337"),
    ex(
        opt("daemon", "listen", &["daemon"], "listen"),
        "\"127.0.0.1\"",
    ),
    ex(
        opt("daemon", "unix", &["daemon"], "unix"),
        "\"/run/vtnt-daemon/control.sock\"",
    ),
    opt("daemon", "protocol", &["daemon"], "protocol"),
    opt("daemon", "pps", &["daemon"], "pps"),
    opt("daemon", "window", &["daemon"], "window"),
    ex(
        opt("daemon", "client-window", &["daemon"], "client_window"),
        "500",
    ),
    opt("daemon", "max-clients", &["daemon"], "max_clients"),
    opt("daemon", "client-queue", &["daemon"], "client_queue"),
    opt("daemon", "client-buffer", &["daemon"], "client_buffer"),
    opt("daemon", "stall-timeout", &["daemon"], "stall_timeout"),
    consent(opt("daemon", "allow-public", &["daemon"], "allow_public")),
    opt("broker", "name", &["fleet up", "fleet down"], "name"),
    opt("broker", "listen", &["fleet up"], "listen"),
    opt("broker", "port", &["fleet up"], "port"),
    list(opt("broker", "tenants", &["fleet up"], "tenants")),
    ex(
        opt("broker", "tls-cert", &["fleet up"], "tls_cert"),
        "\"/etc/vtnt/tls/server.pem\"",
    ),
    ex(
        opt("broker", "tls-key", &["fleet up"], "tls_key"),
        "\"/etc/vtnt/tls/server.key\"",
    ),
    ex(
        opt("broker", "tls-ca", &["fleet up"], "tls_ca"),
        "\"/etc/vtnt/tls/ca.pem\"",
    ),
    opt("broker", "tls-verify", &["fleet up"], "tls_verify"),
    Key {
        doc: "The tenant these commands act for (its key: nkey, or the local fleet's).",
        ..opt(
            "fleet",
            "tenant",
            &[
                "fleet submit",
                "fleet status",
                "fleet results",
                "fleet replay",
            ],
            "tenant",
        )
    },
    ex(opt("agent", "node", &["agent"], "node"), "\"paris-1\""),
    ex(opt("agent", "location", &["agent"], "location"), "\"fr\""),
    opt("agent", "slots", &["agent"], "slots"),
    list(opt("agent", "runtimes", &["agent"], "runtimes")),
    opt("agent", "lab", &["agent"], "lab"),
    ex(opt("agent", "net", &["agent"], "net"), "\"host\""),
    consent(opt("agent", "allow-public", &["agent"], "allow_public")),
    opt("agent", "heartbeat-ms", &["agent"], "heartbeat_ms"),
    opt("agent", "timeout", &["agent"], "timeout"),
    opt("agent", "bandwidth-mbps", &["agent"], "bandwidth_mbps"),
    ex(
        opt("agent", "images-from", &["agent"], "images_from"),
        "\"nats\"",
    ),
    ex(
        list(opt("agent", "tags", &["agent"], "tags")),
        "[\"ixp\", \"ipv6\"]",
    ),
    ex(opt("agent", "asn", &["agent"], "asn"), "64500"),
    ex(opt("agent", "country", &["agent"], "country"), "\"FR\""),
    ex(
        opt("agent", "public-address", &["agent"], "public_address"),
        "\"203.0.113.7\"",
    ),
    ex(
        opt("agent", "contact", &["agent"], "contact"),
        "\"vtnt measurement; ops@example.org\"",
    ),
    Key {
        section: "artifacts",
        name: "lib-dir",
        list: false,
        env: Env::Named(vtnt_artifacts::LIB_DIR_ENV),
        sets: Sets::LibDir,
        doc: "A directory of installed files (the static vtnt, vtnt-monitor, the unikernel's \
              images, with their artifacts.toml), searched before <the executable's \
              directory>/../lib/vtnt, /usr/local/lib/vtnt and /usr/lib/vtnt. VTNT_LIB_DIR, \
              when set, is searched alone (docs/install.md).",
        example: "\"/opt/vtnt/lib/vtnt\"",
    },
    Key {
        section: "artifacts",
        name: "cache-dir",
        list: false,
        env: Env::Named(vtnt_runtimes::paths::CACHE_DIR_ENV),
        sets: Sets::CacheDir,
        doc: "The image cache: the runtimes' images as built or copied from the installed \
              files.",
        example: "",
    },
    opt("log", "level", &[""], "log_level"),
    opt("log", "format", &[""], "log_format"),
];

/// The sections, in the order the sample and `vtnt config show` list them, each with
/// what it is for.
pub const SECTIONS: [(&str, &str); 7] = [
    ("probe", "vtnt trace, ping and tnt on this host"),
    (
        "daemon",
        "vtnt daemon: scamper's control socket (docs/scamper.md)",
    ),
    (
        "broker",
        "vtnt fleet up and down: the fleet's NATS server (docs/fleet.md)",
    ),
    (
        "fleet",
        "the fleet's clients: vtnt fleet submit, status, results, replay, images",
    ),
    (
        "agent",
        "vtnt agent: a fleet node (its own connection: it is not a tenant)",
    ),
    (
        "artifacts",
        "where vtnt finds its installed files and keeps its images",
    ),
    (
        "log",
        "the long-running commands' logs (agent, daemon, fleet up --foreground, the lab daemons)",
    ),
];

/// Every key, sections in [`SECTIONS`]' order.
pub fn all() -> Vec<Key> {
    let mut keys: Vec<Key> = FLEET_CONNECT
        .iter()
        .chain(&OTHERS)
        .chain(&AGENT_CONNECT)
        .copied()
        .collect();
    let rank = |k: &Key| SECTIONS.iter().position(|(s, _)| *s == k.section);
    keys.sort_by_key(rank);
    keys
}

/// The key `section.name`, if there is one.
pub fn find(section: &str, name: &str) -> Option<Key> {
    all()
        .into_iter()
        .find(|k| k.section == section && k.name == name)
}
