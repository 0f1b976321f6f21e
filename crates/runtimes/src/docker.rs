//! The `docker` runtimes on Debian's `docker.io` engine.
//!
//! **Images.** Made without an engine, as rootfs tarballs that deploy imports with
//! `docker import` (no registry is reachable): [`Flavor::Debian`] is a debootstrap minbase
//! rootfs plus `/usr/local/bin/vtnt` (the paper's Debian-based image), [`Flavor::Scratch`]
//! holds only `/vtnt`. Both are served gzip-compressed (as a registry serves layers);
//! their size is the uncompressed tarball, which is what `docker images` reports.
//!
//! **Engine.** Docker cannot put a container into a named network namespace
//! (`--network` takes bridge/host/none/container:), so vTNT runs *its own* engine inside
//! the lab's namespace: `containerd` and `dockerd` started through `nsenter
//! --net=/run/netns/<lab>`, with their own socket, exec root and state
//! (`/run/vtnt/deploy/docker-<lab>/`) and data roots
//! (`/var/lib/vtnt/deploy/{docker,containerd}-<lab>`, removed when it stops; both in the
//! scope's directories for an agent, `crate::scope`), no bridge
//! and no iptables. Containers run with `--network host`, i.e. in the lab's namespace,
//! with only `CAP_NET_RAW`. An engine already serving that socket is reused and left
//! running; one we started is stopped when its [`Engine`] is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Context, Error, IoContext, Result};

use crate::cgroup::Cgroup;
use crate::proc::Supervised;
pub use crate::runtime::Flavor;
use crate::runtime::{BuildOptions, ImageInfo, Runtime};
use crate::spec::InstanceSpec;
use crate::{debian, paths};

/// How long `docker rm -f` may take before [`Client::remove`] gives up on it.
pub const REMOVE_TIMEOUT: Duration = Duration::from_secs(60);

impl Flavor {
    fn file(self) -> &'static str {
        match self {
            Flavor::Debian => "vtnt-docker-debian.tar.gz",
            Flavor::Scratch => "vtnt-docker-scratch.tar.gz",
        }
    }
    fn entrypoint(self) -> &'static str {
        match self {
            Flavor::Debian => "/usr/local/bin/vtnt",
            Flavor::Scratch => "/vtnt",
        }
    }
}

/// Builds the rootfs tarball of `flavor` in the image cache.
pub fn build_image(opts: &BuildOptions, flavor: Flavor) -> Result<ImageInfo> {
    let bin = paths::static_vtnt()?;
    let image = paths::CachedImage::new(paths::images_dir()?.join(flavor.file()));
    let dst = &image.path;
    if image.stale(opts.rebuild, &bin)? {
        let tmp = paths::TempDir::new("docker-build")?;
        let root = tmp.path().join("rootfs");
        match flavor {
            Flavor::Debian => {
                let base = debian::minbase(opts.rebuild)?;
                debian::link_tree(&base, &root)?;
                let vtnt = std::fs::read(&bin).doing(|| "reading the static vtnt".into())?;
                debian::put_file(&root.join("usr/local/bin/vtnt"), &vtnt, 0o755)?;
            }
            Flavor::Scratch => {
                for d in ["proc", "dev", "sys", "etc", "tmp"] {
                    std::fs::create_dir_all(root.join(d))
                        .doing(|| format!("creating {}", root.join(d).display()))?;
                }
                std::fs::copy(&bin, root.join("vtnt"))
                    .doing(|| "copying vtnt into the rootfs".into())?;
            }
        }
        let tar = tmp.path().join("rootfs.tar");
        tar_rootfs(&root, &tar)?;
        let raw = paths::file_size(&tar)?;
        paths::run_cmd(Command::new("gzip").arg("-6").arg(&tar))?;
        let tmp_dst = dst.with_extension("part");
        std::fs::rename(tar.with_extension("tar.gz"), &tmp_dst)
            .or_else(|_| std::fs::copy(tar.with_extension("tar.gz"), &tmp_dst).map(|_| ()))
            .doing(|| format!("moving the gzipped tarball to {}", tmp_dst.display()))?;
        std::fs::rename(&tmp_dst, dst)
            .doing(|| format!("moving {} to {}", tmp_dst.display(), dst.display()))?;
        image.record(raw, &bin)?;
    }
    Ok(ImageInfo {
        runtime: if flavor == Flavor::Debian {
            Runtime::Docker
        } else {
            Runtime::DockerScratch
        },
        download_bytes: paths::file_size(dst)?,
        size_bytes: image.size()?,
        path: image.path,
        size_note: "uncompressed image (rootfs tarball); download is gzip".into(),
        pin: None,
    })
}

/// Writes the tree `root` as a tarball of its contents (`docker import`'s input).
pub fn tar_rootfs(root: &Path, tar: &Path) -> Result<()> {
    paths::run_cmd(
        Command::new("tar")
            .arg("-C")
            .arg(root)
            .arg("--numeric-owner")
            .arg("-cf")
            .arg(tar)
            .arg("."),
    )?;
    Ok(())
}

/// Talks to one engine (Debian's `docker` client, `-H unix://...`).
#[derive(Debug, Clone)]
pub struct Client {
    docker: PathBuf,
    host: String,
    pids: Vec<u32>,
}

impl Client {
    /// `docker -H <this engine>`, for commands of the caller's own (`vtnt bench net`'s
    /// endpoint containers).
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.docker);
        c.arg("-H").arg(&self.host);
        c
    }

    /// The engine's own processes (dockerd, containerd), for memory and CPU.
    pub fn engine_pids(&self) -> Vec<u32> {
        self.pids.clone()
    }

    /// `docker import` of a fetched rootfs tarball as a fresh tag; returns the tag.
    pub fn load(&self, tarball: &Path, flavor: Flavor) -> Result<String> {
        let tag = format!("vtnt-runtime:{}", paths::unique("img"));
        let change = format!("ENTRYPOINT [\"{}\"]", flavor.entrypoint());
        paths::run_cmd(
            self.command()
                .arg("import")
                .arg("--change")
                .arg(change)
                .arg(tarball)
                .arg(&tag),
        )
        .during(|| "docker import".into())?;
        Ok(tag)
    }

    /// `docker rmi`, ignoring failures.
    pub fn remove_image(&self, tag: &str) {
        let _ = self.command().args(["rmi", "-f", tag]).output();
    }

    /// `docker run` of `image` with the job's words, in the lab's namespace (the engine's),
    /// under the instance's cgroup.
    pub fn start(
        &self,
        image: &str,
        name: &str,
        spec: &InstanceSpec,
        cgroup: &Cgroup,
    ) -> Result<Supervised> {
        // The client stays outside the instance's group: it only relays the container's
        // output to us (a controller would not keep one per container); the container is
        // placed in the group by `--cgroup-parent`, and what the engine spends for it is
        // counted as the engine's (`Deployed::daemon_pids`).
        let mut cmd = self.command();
        cmd.args([
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "host",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "NET_RAW",
        ]);
        let job = crate::guest::guest_job(&spec.job, "-");
        if job.targets.is_some() {
            // the target list comes on standard input
            cmd.arg("--interactive");
        }
        if let Some(scope) = paths::scope() {
            // found and removed by whoever cleans the scope up after its owner died
            cmd.arg("--label").arg(paths::scope_label(scope));
        }
        cmd.arg("--hostname")
            .arg("vtnt")
            .arg("--cgroup-parent")
            .arg(format!("/{}", cgroup.rel()))
            .arg(image)
            .args(&job.args);
        let input = job.input()?;
        Ok(Supervised::spawn_with_input(
            cmd,
            &format!("docker container {name}"),
            input,
        )?)
    }

    /// `docker inspect`'s view of container `name` (status, exit code, pid), or why there
    /// is none: says, when a `docker run` client hangs, whether the job did too.
    pub fn state(&self, name: &str) -> String {
        let fmt = "{{.State.Status}} exit={{.State.ExitCode}} pid={{.State.Pid}}";
        match self.command().args(["inspect", "-f", fmt, name]).output() {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => format!("docker inspect: {e}"),
        }
    }

    /// `docker rm -f`, ignoring failures (the container may be gone already), given up
    /// after [`REMOVE_TIMEOUT`] with a warning: Debian's dockerd 20.10 can deadlock in
    /// libnetwork when many containers exit at once, and a removal then never returns.
    pub fn remove(&self, name: &str) {
        let Ok(mut child) = self
            .command()
            .args(["rm", "-f", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        else {
            return;
        };
        let until = Instant::now() + REMOVE_TIMEOUT;
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() > until {
                let _ = child.kill();
                tracing::warn!(
                    container = %name,
                    seconds = REMOVE_TIMEOUT.as_secs(),
                    "docker rm -f: no answer from the engine in time; the container is left behind"
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.wait();
    }
}

/// An engine in a lab's namespace (or this process's own); stopped on drop if we started
/// it.
pub struct Engine {
    lab: String,
    client: Client,
    started: Vec<Child>,
    dir: PathBuf,
    /// Its data roots (docker's, containerd's).
    roots: [PathBuf; 2],
}

fn ns_inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Engine {
    /// Finds or starts the engine in lab `lab`'s namespace, or with `None` in this
    /// process's own (`--net host`; named after the namespace's inode, so engines of
    /// different namespaces never meet).
    pub fn start(lab: Option<&str>) -> Result<Engine> {
        let docker = ["/usr/bin/docker"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .map_or_else(|| paths::need("docker", "docker.io"), Ok)?;
        let dockerd = paths::need("dockerd", "docker.io")?;
        let containerd = paths::need("containerd", "containerd")?;
        let nsenter = paths::need("nsenter", "util-linux")?;
        let (lab, netns) = match lab {
            Some(lab) => {
                let netns = PathBuf::from("/run/netns").join(lab);
                if !netns.exists() {
                    return Err(Error::Lab(format!(
                        "lab `{lab}` is not running (no {}): `vtnt lab up --name {lab}`",
                        netns.display()
                    )));
                }
                (lab.to_string(), netns)
            }
            None => {
                // this thread's namespace (a thread may have joined another than the
                // process's first)
                let netns = PathBuf::from("/proc/thread-self/ns/net");
                let ino = ns_inode(&netns).map_or(0, |(_, ino)| ino);
                (format!("host-{ino}"), netns)
            }
        };
        let lab = lab.as_str();
        let dir = paths::run_dir()?.join(format!("docker-{lab}"));
        let roots = data_roots(&paths::work_dir()?, lab);
        std::fs::create_dir_all(&dir).doing(|| format!("creating {}", dir.display()))?;
        let sock = dir.join("docker.sock");
        let host = format!("unix://{}", sock.display());
        let mut client = Client {
            docker,
            host,
            pids: Vec::new(),
        };
        // Reuse a live engine of ours if it sits in the lab's namespace.
        if let Some(pid) = read_pid(&dir.join("dockerd.pid")) {
            let same_ns =
                ns_inode(&PathBuf::from(format!("/proc/{pid}/ns/net"))) == ns_inode(&netns);
            if same_ns
                && client
                    .command()
                    .arg("version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            {
                client.pids = [Some(pid), read_pid(&dir.join("containerd.pid"))]
                    .into_iter()
                    .flatten()
                    .collect();
                return Ok(Engine {
                    lab: lab.to_string(),
                    client,
                    started: Vec::new(),
                    dir,
                    roots,
                });
            }
            return Err(Error::Runtime(format!("a vtnt docker engine (pid {pid}) runs outside lab `{lab}`'s namespace; stop it first (kill {pid})")));
        }
        let log = std::fs::File::create(dir.join("engine.log"))
            .doing(|| format!("creating {}", dir.join("engine.log").display()))?;
        let cfg = dir.join("containerd.toml");
        std::fs::write(
            &cfg,
            format!(
                "version = 2\nroot = \"{root}\"\nstate = \"{d}/containerd-state\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"{d}/containerd.sock\"\n[ttrpc]\n  address = \"{d}/containerd.sock.ttrpc\"\n",
                d = dir.display(),
                root = roots[1].display()
            ),
        )
        .doing(|| format!("writing {}", cfg.display()))?;
        let mut engine = Engine {
            lab: lab.to_string(),
            client,
            started: Vec::new(),
            dir: dir.clone(),
            roots: roots.clone(),
        };
        let spawn = |prog: &Path, args: Vec<String>| -> Result<Child> {
            use std::os::unix::process::CommandExt;
            Command::new(&nsenter)
                .arg(format!("--net={}", netns.display()))
                .arg(prog)
                .args(args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().doing(|| "duplicating engine.log".into())?)
                .stderr(log.try_clone().doing(|| "duplicating engine.log".into())?)
                .process_group(0)
                .spawn()
                .doing(|| format!("starting {}", prog.display()))
        };
        let ctd = spawn(
            &containerd,
            vec!["--config".into(), cfg.display().to_string()],
        )?;
        std::fs::write(dir.join("containerd.pid"), ctd.id().to_string())
            .doing(|| format!("writing {}", dir.join("containerd.pid").display()))?;
        engine.client.pids.push(ctd.id());
        engine.started.push(ctd);
        wait_for(
            || dir.join("containerd.sock").exists(),
            Duration::from_secs(30),
        )
        .during(|| "containerd did not create its socket (see engine.log)".into())?;
        let dd = spawn(
            &dockerd,
            [
                format!("--host={}", engine.client.host),
                format!("--data-root={}", roots[0].display()),
                format!("--exec-root={}/exec", dir.display()),
                format!("--pidfile={}/dockerd.pid", dir.display()),
                format!("--containerd={}/containerd.sock", dir.display()),
                "--bridge=none".into(),
                "--iptables=false".into(),
                "--ip-masq=false".into(),
                "--exec-opt=native.cgroupdriver=cgroupfs".into(),
                "--log-level=warn".into(),
            ]
            .to_vec(),
        )?;
        engine.client.pids.push(dd.id());
        engine.started.push(dd);
        let c = engine.client.clone();
        wait_for(
            || {
                c.command()
                    .arg("version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            },
            Duration::from_secs(60),
        )
        .during(|| {
            format!(
                "dockerd did not answer on {} (see {}/engine.log)",
                engine.client.host,
                dir.display()
            )
        })?;
        Ok(engine)
    }

    pub fn lab(&self) -> &str {
        &self.lab
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Whether this engine was started by us (and will be stopped on drop).
    pub fn owned(&self) -> bool {
        !self.started.is_empty()
    }
}

/// Persistent state of one lab's engine: `<work>/docker-<lab>` and
/// `<work>/containerd-<lab>`, in a work directory (removed when the engine we started
/// stops: every deploy imports its image again anyway).
fn data_roots(work: &Path, lab: &str) -> [PathBuf; 2] {
    ["docker", "containerd"].map(|what| work.join(format!("{what}-{lab}")))
}

fn read_pid(p: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

fn wait_for(mut f: impl FnMut() -> bool, timeout: Duration) -> Result<()> {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if f() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(Error::Runtime(format!(
        "timed out after {} s",
        timeout.as_secs()
    )))
}

/// What a stopped engine leaves: its sockets and pid files in `dir`, the namespace mount
/// dockerd leaves (ours: unmounted), its data roots `roots`, `dir` itself.
fn remove_state(dir: &Path, roots: &[PathBuf]) {
    for f in [
        "dockerd.pid",
        "containerd.pid",
        "docker.sock",
        "containerd.sock",
        "containerd.sock.ttrpc",
    ] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    // dockerd leaves its namespace bind mount (exec/netns/default) behind: ours, unmount
    unmount_below(&dir.join("exec"));
    for d in roots.iter().chain([&dir.to_path_buf()]) {
        if !mounted_below(d) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Stops every engine under `run` (a scope's run directory, whose owner died): its
/// containers labelled [`paths::scope_label`] of `scope` removed, dockerd then
/// containerd stopped (SIGTERM, SIGKILL after 10 s), their state removed (their data
/// roots under `work`, the scope's work directory); how many containers it removed.
pub fn clean_scope(run: &Path, work: &Path, scope: &str) -> usize {
    let Ok(dirs) = std::fs::read_dir(run) else {
        return 0;
    };
    let mut removed = 0;
    for d in dirs.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        let Some(lab) = name.strip_prefix("docker-") else {
            continue;
        };
        let dir = d.path();
        let client = Client {
            docker: paths::which("docker").unwrap_or_else(|| PathBuf::from("docker")),
            host: format!("unix://{}", dir.join("docker.sock").display()),
            pids: Vec::new(),
        };
        if let Some(dockerd) = read_pid(&dir.join("dockerd.pid")) {
            let out = client
                .command()
                .args(["ps", "-aq", "--filter"])
                .arg(format!("label={}", paths::scope_label(scope)))
                .output();
            for id in out.iter().flat_map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .into_owned()
                    .split_whitespace()
                    .map(String::from)
                    .collect::<Vec<_>>()
            }) {
                client.remove(&id);
                removed += 1;
            }
            stop_pid(dockerd);
        }
        if let Some(containerd) = read_pid(&dir.join("containerd.pid")) {
            stop_pid(containerd);
        }
        remove_state(&dir, &data_roots(work, lab));
    }
    removed
}

/// Stops `pid` (not our child: a dead process's engine): SIGTERM, then its process group
/// SIGKILLed after 10 s.
fn stop_pid(pid: u32) {
    crate::proc::kill_pid(pid, libc::SIGTERM);
    let t = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::proc::kill_group(pid, libc::SIGKILL);
}

/// Whether anything is still mounted at or below `dir` (then it is left alone).
pub(crate) fn mounted_below(dir: &Path) -> bool {
    let d = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| {
        m.lines().any(|l| {
            l.split_whitespace()
                .nth(4)
                .is_some_and(|mp| mp.starts_with(&d))
        })
    })
}

/// Unmounts everything mounted at or below `dir`, deepest first.
pub(crate) fn unmount_below(dir: &Path) {
    let d = dir.display().to_string();
    let mut mps: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
        .filter(|mp| mp.starts_with(&d))
        .collect();
    mps.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for mp in mps {
        let _ = Command::new("umount")
            .arg(&mp)
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.started.is_empty() {
            return;
        }
        // dockerd first (it stops its containers and unmounts), then containerd.
        for mut child in self.started.drain(..).rev() {
            crate::proc::kill_pid(child.id(), libc::SIGTERM);
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(20) {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if child.try_wait().ok().flatten().is_none() {
                crate::proc::kill_group(child.id(), libc::SIGKILL);
                let _ = child.wait();
            }
        }
        remove_state(&self.dir, &self.roots);
    }
}
