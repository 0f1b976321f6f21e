//! Network namespaces of our own for tests and benchmarks: [`NetNs`] creates one (loopback
//! up) and deletes it on drop, even when a test fails; [`Chain`] builds a line of Linux
//! routers joined by veth pairs; [`Bump`] puts a bridging network function between a
//! sender and a receiver; [`which`] finds the host tools, [`is_root`] is `vtnt-linux`'s. Everything sent inside stays inside: no test here or that
//! uses this crate reaches beyond the namespaces it made. Needs root and iproute2.

mod bump;

pub use bump::Bump;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
pub use vtnt_linux::is_root;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A failed setup step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// A setup command failed.
    #[error("`{command}` failed: {stderr}")]
    Setup { command: String, stderr: String },
}

/// The first `program` on `PATH` (or `program` itself when it contains a `/` and is a
/// file), also looking in /usr/sbin and /sbin, where root's tools live even when `PATH`
/// leaves them out. The one lookup every crate uses to find the host tools it runs.
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A name unique to this process: `<prefix>-<pid>-<n>` (at most 15 bytes are used by
/// interface names derived from it, so keep prefixes short).
pub fn unique_name(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Runs `ip ARGS...`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<Output, Error> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| Error::Spawn {
            program: "ip".into(),
            source,
        })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(Error::Setup {
            command: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates namespace `name` with loopback up and ICMP rate limiting off.
    pub fn create(name: &str) -> Result<NetNs, Error> {
        ip(&["netns", "add", name])?;
        let ns = NetNs {
            name: name.to_string(),
        };
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        ns.sysctl("net.ipv4.icmp_ratelimit", "0")?;
        ns.sysctl("net.ipv4.icmp_msgs_per_sec", "100000")?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets a sysctl inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), Error> {
        let out = self.exec("sysctl", &["-qw", &format!("{key}={value}")])?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Setup {
                command: format!("sysctl {key}={value} in {}", self.name),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Runs `ip ARGS...` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<Output, Error> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Adds TAP device `ifname` with address `cidr` (e.g. `192.0.2.1/24`), up.
    pub fn add_tap(&self, ifname: &str, cidr: &str) -> Result<(), Error> {
        self.ip(&["tuntap", "add", "dev", ifname, "mode", "tap"])?;
        self.ip(&["addr", "add", cidr, "dev", ifname])?;
        self.ip(&["link", "set", ifname, "up"])?;
        Ok(())
    }

    /// Joins this namespace's `a_if` to `other`'s `b_if` with a veth pair, both ends up
    /// and without addresses.
    pub fn veth(&self, a_if: &str, other: &NetNs, b_if: &str) -> Result<(), Error> {
        self.ip(&[
            "link",
            "add",
            a_if,
            "type",
            "veth",
            "peer",
            "name",
            b_if,
            "netns",
            other.name(),
        ])?;
        self.ip(&["link", "set", a_if, "up"])?;
        other.ip(&["link", "set", b_if, "up"])?;
        Ok(())
    }

    /// Joins this namespace's `a_if` (address `a_cidr`) to `other`'s `b_if` (address
    /// `b_cidr`) with a veth pair, both ends up.
    pub fn link(
        &self,
        a_if: &str,
        a_cidr: &str,
        other: &NetNs,
        b_if: &str,
        b_cidr: &str,
    ) -> Result<(), Error> {
        self.veth(a_if, other, b_if)?;
        self.ip(&["addr", "add", a_cidr, "dev", a_if])?;
        other.ip(&["addr", "add", b_cidr, "dev", b_if])?;
        Ok(())
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output, Error> {
        self.command(program)
            .args(args)
            .output()
            .map_err(|source| Error::Spawn {
                program: program.into(),
                source,
            })
    }

    /// A command that will run inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A line of Linux routers: `vantage — r1 — … — rN — target`, each link a /30 from
/// 100.64.0.0/24 (link k: 100.64.0.4k+1 on the left, .4k+2 on the right), forwarding on,
/// ICMP rate limiting off, static routes both ways. No node has a default route: toward the
/// target, 100.64.0.0/10 leads to the next node, so nothing can leave the chain.
#[derive(Debug)]
pub struct Chain {
    /// Vantage point, routers in order, target.
    pub nodes: Vec<NetNs>,
}

impl Chain {
    /// Builds a chain with `routers` routers (1..=60) between vantage and target.
    pub fn build(prefix: &str, routers: usize) -> Result<Chain, Error> {
        assert!((1..=60).contains(&routers), "1..=60 routers");
        let tag = unique_name(prefix);
        let mut nodes = Vec::new();
        for i in 0..routers + 2 {
            nodes.push(NetNs::create(&format!("{tag}-{i}"))?);
        }
        let chain = Chain { nodes };
        let last = routers + 1;
        for k in 0..=routers {
            let (l, r) = (&chain.nodes[k], &chain.nodes[k + 1]);
            l.link(
                "east",
                &format!("{}/30", Self::left(k)),
                r,
                "west",
                &format!("{}/30", Self::right(k)),
            )?;
        }
        for (i, ns) in chain.nodes.iter().enumerate() {
            if i > 0 && i < last {
                ns.sysctl("net.ipv4.ip_forward", "1")?;
            }
            if i < last {
                ns.ip(&["route", "add", "100.64.0.0/10", "via", &Self::right(i)])?;
            }
            // the links further left than this node's own left link go back through it
            for j in 0..i.saturating_sub(1) {
                let net = format!("100.64.0.{}/30", 4 * j);
                ns.ip(&["route", "add", &net, "via", &Self::left(i - 1)])?;
            }
        }
        Ok(chain)
    }

    /// Left address of link `k` (the side nearer the vantage point).
    pub fn left(k: usize) -> String {
        format!("100.64.0.{}", 4 * k + 1)
    }
    /// Right address of link `k`.
    pub fn right(k: usize) -> String {
        format!("100.64.0.{}", 4 * k + 2)
    }
    /// The vantage point.
    pub fn vantage(&self) -> &NetNs {
        &self.nodes[0]
    }
    /// The target's address.
    pub fn target(&self) -> String {
        Self::right(self.nodes.len() - 2)
    }
}
