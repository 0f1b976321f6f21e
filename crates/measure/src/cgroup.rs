//! cgroup v1 groups of our own (this host has the hybrid layout: v1 `memory`, `cpu`,
//! `cpuacct`, `cpuset` under `/sys/fs/cgroup/<controller>/`): one [`Cgroup`] per instance
//! (what it costs) or per density run (the budget). Processes enter through
//! [`Cgroup::wrap`] (a `sh` that writes its pid to `cgroup.procs`, then execs), runc
//! through `cgroupsPath`, Docker through `--cgroup-parent`. Where the `freezer`
//! controller is mounted the group is made there too, so that [`Cgroup::kill_all`] stops
//! everything inside at once (no process forks away while its siblings are killed) and
//! then kills it (v1 has no `cgroup.kill`). On drop, whatever is still inside is killed
//! and the directories are removed, children first.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};

/// The controllers we use.
pub const CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "cpuset"];
/// The controller that stops a group's processes, used where it is mounted.
const FREEZER: &str = "freezer";
const ROOT: &str = "/sys/fs/cgroup";

/// The controllers a group is made in: [`CONTROLLERS`], and the freezer where mounted.
fn controllers() -> Vec<&'static str> {
    let mut v = CONTROLLERS.to_vec();
    if Path::new(ROOT).join(FREEZER).join("cgroup.procs").exists() {
        v.push(FREEZER);
    }
    v
}

/// A group at the same relative path in every controller of [`CONTROLLERS`].
#[derive(Debug)]
pub struct Cgroup {
    rel: String,
    owned: bool,
}

/// Whether the v1 controllers we need are mounted.
pub fn available() -> bool {
    CONTROLLERS
        .iter()
        .all(|c| Path::new(ROOT).join(c).join("cgroup.procs").exists())
}

impl Cgroup {
    /// Creates `rel` (e.g. `vtnt/bench-1/inst-3`) in every controller; cpuset's
    /// `cpus`/`mems` are inherited from the parent.
    pub fn create(rel: &str) -> Result<Cgroup> {
        if !available() {
            return Err(Error::Unavailable(format!(
                "cgroup v1 controllers {CONTROLLERS:?} are not all mounted under {ROOT}"
            )));
        }
        let rel = rel.trim_matches('/').to_string();
        for c in controllers() {
            let mut p = PathBuf::from(ROOT).join(c);
            for part in rel.split('/') {
                let parent = p.clone();
                p.push(part);
                if !p.exists() {
                    std::fs::create_dir(&p).doing(|| format!("creating cgroup {}", p.display()))?;
                    if c == "cpuset" {
                        for f in ["cpuset.cpus", "cpuset.mems"] {
                            let v = std::fs::read_to_string(parent.join(f)).unwrap_or_default();
                            std::fs::write(p.join(f), v.trim())
                                .doing(|| format!("writing {}/{f}", p.display()))?;
                        }
                    }
                }
            }
        }
        Ok(Cgroup { rel, owned: true })
    }

    /// The group `rel` if it exists (one a process that died left), owned: dropping it
    /// kills what is inside and removes it.
    pub fn existing(rel: &str) -> Option<Cgroup> {
        let rel = rel.trim_matches('/').to_string();
        controllers()
            .iter()
            .any(|c| Path::new(ROOT).join(c).join(&rel).is_dir())
            .then_some(Cgroup { rel, owned: true })
    }

    /// Every `cgroup.procs` a process writes its pid to to join this group.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        controllers()
            .iter()
            .map(|c| self.dir(c).join("cgroup.procs"))
            .collect()
    }

    /// The relative path (`vtnt/...`), as runc's `cgroupsPath` and Docker's
    /// `--cgroup-parent` take it (with a leading `/`).
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The directory of `controller`.
    pub fn dir(&self, controller: &str) -> PathBuf {
        PathBuf::from(ROOT).join(controller).join(&self.rel)
    }

    /// Writes `value` to `<controller>/<file>`.
    pub fn set(&self, controller: &str, file: &str, value: &str) -> Result<()> {
        let p = self.dir(controller).join(file);
        std::fs::write(&p, value).doing(|| format!("writing {value} to {}", p.display()))
    }

    /// Reads a number from `<controller>/<file>` (0 when unreadable).
    pub fn read_u64(&self, controller: &str, file: &str) -> u64 {
        std::fs::read_to_string(self.dir(controller).join(file))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// A command that joins this group (every controller) and then runs `program`.
    pub fn wrap(&self, program: &str) -> Command {
        let words = self.wrapper();
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]).arg(program);
        cmd
    }

    /// The words of a command prefix that joins this group and then execs the words that
    /// follow it (what [`Cgroup::wrap`] runs; `vtnt-unikernel` puts a VMM under it).
    pub fn wrapper(&self) -> Vec<String> {
        let files: Vec<String> = self
            .procs_files()
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        [
            "env",
            &format!("VTNT_CGROUP_PROCS={}", files.join(" ")),
            "sh",
            "-c",
            r#"for f in $VTNT_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; exec "$@""#,
            "sh",
        ]
        .map(String::from)
        .to_vec()
    }

    /// Every pid inside this group or a group below it (the memory controller's view).
    pub fn pids(&self) -> Vec<u32> {
        self.pids_in("memory")
    }

    /// Every pid inside this group or a group below it, as `controller` sees them.
    fn pids_in(&self, controller: &str) -> Vec<u32> {
        let mut v = Vec::new();
        for d in subdirs(&self.dir(controller)) {
            if let Ok(s) = std::fs::read_to_string(d.join("cgroup.procs")) {
                v.extend(s.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// CPU time used by the group and its children, in seconds (`cpuacct.usage`).
    pub fn cpu_secs(&self) -> f64 {
        self.read_u64("cpuacct", "cpuacct.usage") as f64 / 1e9
    }

    /// How many times the memory limit was hit.
    pub fn mem_failcnt(&self) -> u64 {
        self.read_u64("memory", "memory.failcnt")
    }

    /// OOM kills in this group and the groups below it (v1 `memory.oom_control`,
    /// kernels >= 4.13, counts a kill in the victim's own group).
    pub fn oom_kills(&self) -> u64 {
        subdirs(&self.dir("memory"))
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("memory.oom_control")).ok())
            .filter_map(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("oom_kill ")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                })
            })
            .sum()
    }

    /// Peak memory charged to the group, bytes.
    pub fn mem_peak(&self) -> u64 {
        self.read_u64("memory", "memory.max_usage_in_bytes")
    }

    /// Kills every process inside (SIGKILL) and waits up to `wait` for them to go; how
    /// many it killed. With the freezer, the group is frozen first (none runs, so none
    /// forks), every process in it is killed, and it is thawed (a frozen process dies as
    /// it thaws); without, it kills until the group is empty.
    pub fn kill_all(&self, wait: Duration) -> usize {
        let deadline = Instant::now() + wait;
        let freezer = self.dir(FREEZER);
        let frozen = freezer.join("freezer.state").exists() && self.freeze(&freezer, deadline);
        let mut killed = std::collections::BTreeSet::new();
        loop {
            let mut pids = self.pids();
            if freezer.exists() {
                pids.extend(self.pids_in(FREEZER));
            }
            if pids.is_empty() || Instant::now() >= deadline {
                break;
            }
            for p in pids {
                crate::proc::kill_pid(p, libc::SIGKILL);
                killed.insert(p);
            }
            if frozen {
                let _ = std::fs::write(freezer.join("freezer.state"), "THAWED");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if frozen {
            let _ = std::fs::write(freezer.join("freezer.state"), "THAWED");
        }
        killed.len()
    }

    /// Freezes the group (and those below it) in `freezer`, waiting until the kernel says
    /// it is frozen (or `deadline`); whether it is.
    fn freeze(&self, freezer: &Path, deadline: Instant) -> bool {
        let state = freezer.join("freezer.state");
        if std::fs::write(&state, "FROZEN").is_err() {
            return false;
        }
        while Instant::now() < deadline {
            if std::fs::read_to_string(&state).is_ok_and(|s| s.trim() == "FROZEN") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

/// `dir` and every directory below it, deepest last.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        self.kill_all(Duration::from_secs(5));
        for c in controllers() {
            let base = self.dir(c);
            let mut dirs = subdirs(&base);
            dirs.reverse();
            for d in dirs {
                for _ in 0..20 {
                    if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}
