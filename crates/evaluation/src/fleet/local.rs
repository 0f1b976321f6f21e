//! A fleet on this host, for the benchmarks: a broker of its own (`vtnt fleet up` on a
//! free port, one tenant), agent processes of this executable, and their teardown (the
//! agents SIGTERMed, then killed, the broker stopped) when it is dropped.

use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use vtnt_fleet::auth::Role;
use vtnt_fleet::{broker, controller, Connect};

pub struct LocalFleet {
    pub broker: broker::Broker,
    pub tenant: String,
    agents: Vec<Child>,
}

impl LocalFleet {
    /// A broker named `<prefix><pid>` listening on `listen`, with `tenant` as its tenant.
    pub fn up(prefix: &str, listen: IpAddr, tenant: &str) -> anyhow::Result<LocalFleet> {
        let name = format!("{prefix}{}", std::process::id());
        let port = std::net::TcpListener::bind((listen, 0))
            .and_then(|l| l.local_addr())
            .context("finding a free port")?
            .port();
        let broker = broker::up(&broker::UpOptions {
            listen,
            tenants: vec![tenant.to_string()],
            ..broker::UpOptions::new(&name, port)
        })?;
        Ok(LocalFleet {
            broker,
            tenant: tenant.to_string(),
            agents: Vec::new(),
        })
    }

    /// The tenant's connection, as this host reaches the broker.
    pub fn tenant(&self) -> anyhow::Result<Connect> {
        Ok(Connect::local(
            &self.broker.name,
            Role::Tenant(self.tenant.clone()),
        )?)
    }

    /// An agent's connection, as this host reaches the broker.
    pub fn agent(&self) -> anyhow::Result<Connect> {
        Ok(Connect::local(&self.broker.name, Role::Agent)?)
    }

    /// Starts `cmd` (an agent), its output discarded; stopped on drop.
    pub fn spawn(&mut self, mut cmd: Command, node: &str) -> anyhow::Result<()> {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting agent {node}"))?;
        self.agents.push(child);
        Ok(())
    }

    /// Waits until `n` nodes are up.
    pub fn wait_up(&self, n: usize, within: Duration) -> anyhow::Result<()> {
        let c = self.tenant()?;
        let until = Instant::now() + within;
        loop {
            let up = controller::status(&c, &self.tenant)?
                .nodes
                .iter()
                .filter(|v| v.status == "up")
                .count();
            if up >= n {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < until,
                "only {up} of {n} agents came up within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LocalFleet {
    fn drop(&mut self) {
        for a in &self.agents {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(a.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let until = Instant::now() + Duration::from_secs(20);
        for a in &mut self.agents {
            while Instant::now() < until && matches!(a.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = a.kill();
            let _ = a.wait();
        }
        let _ = broker::down(&self.broker.name);
    }
}
