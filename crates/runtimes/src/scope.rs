//! What the instances of a process in a scope ([`crate::paths::enter_scope`]: an agent's,
//! `agent-<node>`) leave on the host when that process dies without dropping its guards
//! (SIGKILL, a crash, the host's OOM killer), and [`clean`], which removes all of it.
//! Whoever comes next runs it: the dead process's watchdog, or the next process of the
//! same scope as it starts. Every runtime's leftovers are found the same way:
//!
//! - processes: every instance's cgroup is under the scope's (`vtnt/<scope>`), whatever
//!   runs in it: the native process, runc's and Docker's containers (`cgroupsPath`,
//!   `--cgroup-parent`), QEMU, `vtnt-monitor`, the spt guest. The scope's group is frozen,
//!   every process in it killed, and the groups removed;
//! - runc's state (`<run>/<scope>/runc`): each container deleted;
//! - the Docker engine the scope started (`<run>/<scope>/docker-*`): its containers
//!   labelled with the scope removed, its dockerd and containerd stopped (they run in
//!   process groups of their own, outside the instances' cgroups);
//! - directories: `<run>/<scope>` and `<work>/<scope>` (deployed images, bundles, the
//!   VM's target disks, the engine's data), once nothing is mounted below them.

use crate::error::{Error, IoContext, Result};
use std::path::Path;

use crate::cgroup::Cgroup;
use crate::paths;

/// What [`clean`] found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// Processes killed.
    pub processes: usize,
    /// Containers removed (Docker's, runc's).
    pub containers: usize,
    /// Whether the scope's cgroups were there.
    pub cgroups: bool,
    /// Directories removed.
    pub dirs: usize,
}

impl Cleaned {
    /// Whether there was nothing to clean.
    pub fn is_empty(&self) -> bool {
        *self == Cleaned::default()
    }
}

impl std::fmt::Display for Cleaned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "processes={} containers={} cgroups={} dirs={}",
            self.processes,
            self.containers,
            if self.cgroups { "removed" } else { "none" },
            self.dirs
        )
    }
}

/// Removes everything scope `name` left on this host (see the module's docs). Not to be
/// run while a live process works in that scope: its instances would be killed.
pub fn clean(name: &str) -> Result<Cleaned> {
    let run = paths::run_base().join(name);
    let work = paths::work_base().join(name);
    let mut done = Cleaned {
        containers: runc_containers(&run.join("runc")),
        ..Cleaned::default()
    };
    done.containers += crate::docker::clean_scope(&run, &work, name);
    if let Some(group) = Cgroup::existing(&paths::scoped_cgroup(Some(name))) {
        done.processes = group.kill_all(std::time::Duration::from_secs(10));
        done.cgroups = true;
        // dropping it removes the groups, children first
    }
    for dir in [run, work] {
        if dir.exists() {
            crate::docker::unmount_below(&dir);
            if crate::docker::mounted_below(&dir) {
                return Err(Error::Scope(format!(
                    "{}: something is still mounted below it",
                    dir.display()
                )));
            }
            std::fs::remove_dir_all(&dir).doing(|| format!("removing {}", dir.display()))?;
            done.dirs += 1;
        }
    }
    Ok(done)
}

/// Deletes every container in runc's state directory `root` (`runc delete --force`: killed
/// if it still runs); how many there were.
fn runc_containers(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten().filter(|e| e.path().is_dir()) {
        crate::runc::destroy(&e.file_name().to_string_lossy(), root);
        n += 1;
    }
    n
}
