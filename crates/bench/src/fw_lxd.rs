//! LXD for `vtnt bench fw --runtimes lxd` (issue 39): Debian's `lxd` (5.0) as a daemon of
//! the bench's own, in the NF namespace, for one sweep.
//!
//! LXD is no runtime of `vtnt run` (no driver of `vtnt-runtimes`), so this module is the
//! bench's alone: [`Lxd::start`] starts `lxd` with a state directory of its own
//! (`LXD_DIR`, a temporary directory under `vtnt-runtimes`' work directory, never
//! `/var/lib/lxd`) and a `dir` storage pool, no network of its own (no `lxdbr0`, no
//! dnsmasq); [`Lxd::import`] makes an image locally (no image server is reachable) as a
//! unified tarball, `metadata.yaml` beside `rootfs/`; [`Lxd::create`] makes a privileged
//! container whose init is the given command (`raw.lxc`'s `lxc.init.cmd`: nothing else
//! runs in it) with the NF namespace's veths as its NICs, LXD's own way (`nictype:
//! physical`: LXD moves them into the container when it starts and gives them back when
//! it stops). Dropping the [`Lxd`] deletes its containers and images, shuts the daemon down
//! and removes its state directory (also when the sweep fails or is interrupted: the
//! sweep's guards are dropped), and the empty `lxc.pivot` groups LXD leaves in the cgroup
//! hierarchies.
//!
//! **The daemon's namespaces.** LXD checks a physical NIC's parent in `/sys/class/net`,
//! which lists the devices of the network namespace that mounted that sysfs, and LXC
//! finds the cgroup hierarchies under `/sys/fs/cgroup`. `ip netns exec` gives a fresh
//! sysfs but hides the hierarchies (LXC then fails with "Failed to setup cgroup limits");
//! `nsenter --net` keeps them but shows the host's devices ("Parent device 'a0' doesn't
//! exist"). So the daemon runs in the NF's network namespace and a mount namespace of its
//! own (a slave of this one), where `/sys` is a sysfs of the NF namespace with this host's
//! cgroup hierarchies moved back under it ([`enter`]). What LXD mounts stays in that
//! namespace, which ends with the daemon.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use vtnt_runtimes::paths;

/// How long the daemon may take to answer, and to shut down.
const DAEMON_WAIT: Duration = Duration::from_secs(30);

/// `lxd init --preseed`: a `dir` storage pool and a default profile with only its root
/// disk (no network: the containers get the NF namespace's veths).
const PRESEED: &str = "storage_pools:
- name: default
  driver: dir
profiles:
- name: default
  devices:
    root:
      path: /
      pool: default
      type: disk
";

/// What LXD needs here that is missing, if anything: Debian's lxd (`lxd` and its
/// client `lxc`, package lxd-client), and tar for images.
pub fn missing() -> Option<String> {
    [("lxd", "lxd"), ("lxc", "lxd-client"), ("tar", "tar")]
        .iter()
        .find(|(p, _)| paths::which(p).is_none())
        .map(|(p, pkg)| format!("`{p}` (Debian package {pkg})"))
}

/// Talks to one daemon: `lxc` (or `lxd`'s own subcommands) with its `LXD_DIR`.
#[derive(Debug, Clone)]
pub struct Client {
    dir: PathBuf,
}

impl Client {
    /// `program ARGS` against this daemon, unstarted (the client's own configuration in
    /// the daemon's directory too, not in the user's home).
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("LXD_DIR", &self.dir)
            .env("LXD_CONF", self.dir.join("client"))
            .stdin(Stdio::null());
        cmd
    }

    /// `lxc ARGS`: its standard output, or an error with its own words.
    pub fn lxc(&self, args: &[&str]) -> anyhow::Result<String> {
        run(
            self.command("lxc").args(args),
            &format!("lxc {}", args.join(" ")),
        )
    }

    /// Starts container `name`; the pid (in this namespace) of its init.
    pub fn start(&self, name: &str) -> anyhow::Result<u32> {
        // the last start's console log: wait_loaded must not read it again
        let _ = std::fs::remove_file(self.dir.join("logs").join(name).join("console.log"));
        self.lxc(&["start", name])?;
        let state = self.lxc(&["query", &format!("/1.0/instances/{name}/state")])?;
        let v: serde_json::Value = serde_json::from_str(&state)
            .with_context(|| format!("lxc query of {name}'s state: {state}"))?;
        match v["pid"].as_u64() {
            Some(pid @ 1..) => Ok(pid as u32),
            _ => bail!(
                "container {name} has no init process ({}): {}",
                v["status"],
                self.console(name)
            ),
        }
    }

    /// What container `name`'s init wrote since it started: its console log, which LXC
    /// writes as it goes (`lxc console --show-log` answered once per start here, then
    /// "open : no such file or directory").
    pub fn console(&self, name: &str) -> String {
        let log = self.dir.join("logs").join(name).join("console.log");
        std::fs::read(&log).map_or_else(
            |e| format!("(no console log {}: {e})", log.display()),
            |b| String::from_utf8_lossy(&b).into_owned(),
        )
    }

    /// Whether container `name` runs.
    pub fn running(&self, name: &str) -> bool {
        self.lxc(&["query", &format!("/1.0/instances/{name}/state")])
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .is_some_and(|v| v["status"] == "Running")
    }

    /// Stops container `name` at once (its init killed: LXD then gives its NICs back).
    pub fn stop(&self, name: &str) {
        let _ = self.lxc(&["stop", "--force", name]);
    }

    /// `lxc exec NAME -- PROGRAM`, unstarted: `program` run in container `name`.
    pub fn exec(&self, name: &str, program: &str) -> Command {
        let mut cmd = self.command("lxc");
        cmd.args(["exec", name, "--", program]);
        cmd
    }

    /// Gives container `name` the file or directory `source` read-only at `path` (a disk
    /// device `device`, replaced if it was there).
    pub fn bind(&self, name: &str, device: &str, source: &Path, path: &str) -> anyhow::Result<()> {
        let _ = self.lxc(&["config", "device", "remove", name, device]);
        let source = format!("source={}", source.display());
        let path = format!("path={path}");
        self.lxc(&[
            "config",
            "device",
            "add",
            name,
            device,
            "disk",
            &source,
            &path,
            "readonly=true",
        ])?;
        Ok(())
    }
}

/// Runs `cmd`; its standard output, or an error naming `what` with its standard error.
fn run(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("running {what} (Debian package lxd)"))?;
    if !out.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A daemon of our own, in a network namespace; stopped and removed on drop.
pub struct Lxd {
    client: Client,
    daemon: Option<Child>,
    /// How long it took to answer, and the image import.
    pub started_in: Duration,
    // removed last (field order), once the daemon is gone
    _dir: paths::TempDir,
}

impl Lxd {
    /// Starts `lxd` in network namespace `netns` (`/run/netns/NETNS`) with a state
    /// directory of its own, and waits until it answers with its storage pool made.
    pub fn start(netns: &str) -> anyhow::Result<Lxd> {
        if let Some(what) = missing() {
            bail!("LXD: missing {what}");
        }
        let t = Instant::now();
        let dir = paths::TempDir::new("lxd")?;
        let stash = dir.path().join("cgroup");
        std::fs::create_dir(&stash).with_context(|| format!("creating {}", stash.display()))?;
        let log = dir.path().join("lxd.log");
        let out = std::fs::File::create(dir.path().join("daemon.out"))
            .context("creating the daemon's output file")?;
        let client = Client {
            dir: dir.path().to_path_buf(),
        };
        let mut cmd = client.command("lxd");
        cmd.args(["--group", "root", "--logfile"])
            .arg(&log)
            .stdout(out.try_clone()?)
            .stderr(out)
            // Ctrl-C's SIGINT is the bench's to handle: the daemon is stopped by drop
            .process_group(0);
        let netns = PathBuf::from("/run/netns").join(netns);
        enter::netns_with_sysfs(&mut cmd, &netns, &stash)?;
        let daemon = cmd.spawn().context("starting lxd (Debian package lxd)")?;
        let mut lxd = Lxd {
            client,
            daemon: Some(daemon),
            started_in: Duration::ZERO,
            _dir: dir,
        };
        let wait = format!("--timeout={}", DAEMON_WAIT.as_secs());
        run(
            lxd.client.command("lxd").args(["waitready", &wait]),
            "lxd waitready",
        )
        .with_context(|| {
            format!(
                "LXD did not start: {}",
                std::fs::read_to_string(&log).unwrap_or_default().trim()
            )
        })?;
        let mut init = lxd
            .client
            .command("lxd")
            .args(["init", "--preseed"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running lxd init")?;
        use std::io::Write;
        init.stdin
            .take()
            .context("lxd init's stdin")?
            .write_all(PRESEED.as_bytes())
            .context("writing lxd init's preseed")?;
        let out = init.wait_with_output().context("lxd init")?;
        if !out.status.success() {
            bail!(
                "lxd init --preseed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        lxd.started_in = t.elapsed();
        Ok(lxd)
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Imports an image made here under alias `alias`: empty mount points, `files`
    /// (each a host file and its path in the rootfs, copied with its mode) and `links`
    /// (each a symbolic link's target and its path).
    pub fn import(
        &self,
        alias: &str,
        files: &[(&Path, &str)],
        links: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let build = self.client.dir.join("image");
        let _ = std::fs::remove_dir_all(&build);
        let root = build.join("rootfs");
        for d in ["dev", "proc", "sys", "tmp", "run", "etc", "usr"] {
            std::fs::create_dir_all(root.join(d))
                .with_context(|| format!("creating {}", root.join(d).display()))?;
        }
        for (src, dst) in files {
            let to = root.join(dst.trim_start_matches('/'));
            std::fs::copy(src, &to)
                .with_context(|| format!("copying {} into the image", src.display()))?;
        }
        for (target, at) in links {
            let at = root.join(at.trim_start_matches('/'));
            std::os::unix::fs::symlink(target, &at)
                .with_context(|| format!("linking {} to {target}", at.display()))?;
        }
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        std::fs::write(
            build.join("metadata.yaml"),
            format!(
                "architecture: x86_64\ncreation_date: {created}\nproperties:\n  description: vtnt bench fw ({alias})\n  os: none\n"
            ),
        )
        .context("writing the image's metadata.yaml")?;
        let tar = self.client.dir.join("image.tar");
        run(
            Command::new("tar")
                .arg("-C")
                .arg(&build)
                .arg("--numeric-owner")
                .arg("-cf")
                .arg(&tar)
                .args(["metadata.yaml", "rootfs"]),
            "tar of the LXD image",
        )?;
        let _ = std::fs::remove_dir_all(&build);
        let tar_arg = tar.display().to_string();
        let imported = self
            .client
            .lxc(&["image", "import", &tar_arg, "--alias", alias]);
        let _ = std::fs::remove_file(&tar);
        imported?;
        Ok(())
    }

    /// Makes container `name` of image `alias`, privileged, whose init is `init` (words
    /// without spaces: LXC splits `lxc.init.cmd` at them), with only the capabilities
    /// `caps` if given (LXC's names: `net_raw`; else LXD's privileged set), and the
    /// network devices `nics` of the daemon's namespace as its NICs of the same names.
    pub fn create(
        &self,
        name: &str,
        alias: &str,
        init: &[&str],
        caps: Option<&[&str]>,
        nics: &[&str],
    ) -> anyhow::Result<()> {
        if let Some(w) = init.iter().find(|w| w.contains(char::is_whitespace)) {
            bail!("an LXD init word with a space: {w:?}");
        }
        let mut raw = format!("raw.lxc=lxc.init.cmd = {}", init.join(" "));
        if let Some(caps) = caps {
            raw.push_str(&format!(
                "\nlxc.cap.drop =\nlxc.cap.keep = {}",
                caps.join(" ")
            ));
        }
        let c = &self.client;
        c.lxc(&[
            "init",
            alias,
            name,
            "--config",
            "security.privileged=true",
            "--config",
            &raw,
        ])?;
        for nic in nics {
            let parent = format!("parent={nic}");
            let inside = format!("name={nic}");
            c.lxc(&[
                "config",
                "device",
                "add",
                name,
                nic,
                "nic",
                "nictype=physical",
                &parent,
                &inside,
            ])?;
        }
        Ok(())
    }

    /// The names listed by `lxc KIND list` (containers, or images' fingerprints).
    fn names(&self, kind: &[&str], column: &str) -> Vec<String> {
        let mut args = kind.to_vec();
        args.extend(["list", "--format", "csv", "--columns", column]);
        self.client
            .lxc(&args)
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }
}

impl Drop for Lxd {
    fn drop(&mut self) {
        let Some(mut daemon) = self.daemon.take() else {
            return;
        };
        for name in self.names(&[], "n") {
            let _ = self.client.lxc(&["delete", "--force", &name]);
        }
        for image in self.names(&["image"], "F") {
            let _ = self.client.lxc(&["image", "delete", &image]);
        }
        let wait = format!("--timeout={}", DAEMON_WAIT.as_secs());
        let _ = run(
            self.client.command("lxd").args(["shutdown", &wait]),
            "lxd shutdown",
        );
        let t = Instant::now();
        while daemon.try_wait().ok().flatten().is_none() && t.elapsed() < DAEMON_WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        if daemon.try_wait().ok().flatten().is_none() {
            vtnt_measure::proc::kill_group(daemon.id(), libc::SIGKILL);
            let _ = daemon.wait();
        }
        // LXC's group for its monitors, left in every hierarchy (empty: removable)
        if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
            for h in hierarchies.flatten() {
                let _ = std::fs::remove_dir(h.path().join("lxc.pivot"));
            }
        }
    }
}

/// The daemon's namespaces (see the module's docs): the only `unsafe` here, system calls
/// between fork and exec.
mod enter {
    #![allow(unsafe_code)]

    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::Command;

    use anyhow::Context;
    use nix::mount::{mount, MsFlags};
    use nix::sched::{setns, unshare, CloneFlags};

    /// Makes `cmd` run in the network namespace `netns` (a file such as
    /// `/run/netns/NS`) and a new mount namespace, a slave of this one, whose `/sys` is a
    /// sysfs of `netns` with this host's cgroup hierarchies under `/sys/fs/cgroup`
    /// (moved there through `stash`, an empty directory).
    pub fn netns_with_sysfs(cmd: &mut Command, netns: &Path, stash: &Path) -> anyhow::Result<()> {
        let ns = std::fs::File::open(netns)
            .with_context(|| format!("opening {} (the NF namespace)", netns.display()))?;
        let stash = CString::new(stash.as_os_str().as_bytes()).context("the stash's path")?;
        let none: Option<&CStr> = None;
        let enter = move || -> std::io::Result<()> {
            setns(&ns, CloneFlags::CLONE_NEWNET)?;
            unshare(CloneFlags::CLONE_NEWNS)?;
            // nothing mounted from here on reaches this host's namespace
            mount(none, c"/", none, MsFlags::MS_REC | MsFlags::MS_SLAVE, none)?;
            let cgroup = c"/sys/fs/cgroup";
            mount(
                Some(cgroup),
                stash.as_c_str(),
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )?;
            mount(
                Some(c"sysfs"),
                c"/sys",
                Some(c"sysfs"),
                MsFlags::empty(),
                none,
            )?;
            mount(Some(stash.as_c_str()), cgroup, none, MsFlags::MS_MOVE, none)?;
            Ok(())
        };
        // SAFETY: between fork and exec the closure makes system calls only (setns,
        // unshare, mount), on a descriptor and C strings made before the fork; it does
        // not allocate, and its errors are errno values.
        unsafe {
            cmd.pre_exec(enter);
        }
        Ok(())
    }
}
