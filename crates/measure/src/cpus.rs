//! CPUs split between one part of a measurement that runs alone and everything else:
//! the last CPU this process may use for the part alone (a network function, the lab's
//! emulator), the others for the rest (the bench, its drivers, the runtimes it starts,
//! which inherit the CPUs of the thread that starts them). Without the split, whatever
//! a runtime burns (a guest's vCPU, a busy tender) delays the part being measured on a
//! small host, and that delay is counted as the runtime's.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::error::{Error, IoContext, Result};

/// This thread's CPUs, split (see the module's doc).
#[derive(Debug, Clone)]
pub struct Split {
    alone: CpuSet,
    rest: CpuSet,
    /// This thread's CPUs before.
    before: CpuSet,
    /// The CPU alone and the others, by number.
    last: usize,
    others: Vec<usize>,
}

impl Split {
    /// Splits this thread's CPUs; at least two are needed.
    pub fn new() -> Result<Split> {
        let mine =
            sched_getaffinity(Pid::from_raw(0)).doing(|| "reading this thread's CPUs".into())?;
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| mine.is_set(c).unwrap_or(false))
            .collect();
        let Some((&last, others)) = cpus.split_last().filter(|(_, r)| !r.is_empty()) else {
            return Err(Error::Unavailable(format!(
                "a split of the CPUs needs 2 CPUs at least; this process may use {cpus:?}"
            )));
        };
        let (mut alone, mut rest) = (CpuSet::new(), CpuSet::new());
        alone.set(last).doing(|| format!("CPU {last}"))?;
        for &c in others {
            rest.set(c).doing(|| format!("CPU {c}"))?;
        }
        Ok(Split {
            alone,
            rest,
            before: mine,
            last,
            others: others.to_vec(),
        })
    }

    /// The CPU of the part alone.
    pub fn alone(&self) -> &CpuSet {
        &self.alone
    }

    /// Puts this thread on the others' CPUs: the threads and processes it starts from
    /// now on inherit them.
    pub fn enter_rest(&self) -> Result<()> {
        sched_setaffinity(Pid::from_raw(0), &self.rest).doing(|| "pinning this thread".into())
    }

    /// Gives this thread back the CPUs it had.
    pub fn leave(&self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.before);
    }

    /// `"CPU 1 alone, CPU 0 for the rest"`.
    pub fn describe(&self) -> String {
        let others: Vec<String> = self.others.iter().map(usize::to_string).collect();
        format!(
            "CPU {} alone, CPU {} for the rest",
            self.last,
            others.join(",")
        )
    }
}

/// Puts every thread of the processes `pids` on `cpus` (a thread or process that ended
/// meanwhile is skipped).
pub fn pin_tasks(pids: impl IntoIterator<Item = u32>, cpus: &CpuSet) -> Result<()> {
    for p in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            match sched_setaffinity(Pid::from_raw(tid), cpus) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(e) => return Err(e).doing(|| format!("pinning thread {tid} of process {p}")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_leaves_one_cpu_alone_and_gives_the_thread_its_cpus_back() {
        let Ok(split) = Split::new() else {
            return; // a one-CPU host: nothing to split
        };
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        split.enter_rest().unwrap();
        let now = sched_getaffinity(Pid::from_raw(0)).unwrap();
        assert!(!now.is_set(split.last).unwrap());
        split.leave();
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        assert!(split
            .describe()
            .starts_with(&format!("CPU {} alone", split.last)));
    }
}
