//! Density under a budget (the paper's Fig. 8): instances started 0.1 s apart inside one
//! budget cgroup, each running the density job (a one-hop trace, then a 10 s hold); an
//! instance counts when it exits with status 0 before its deadline. The budget group's
//! memory use and CPU share are sampled every 250 ms for the timelines.
//!
//! Budgets (cgroup v1):
//! - memory: `memory.limit_in_bytes` (1 GiB by default) on the group; the OOM killer
//!   picks victims inside it;
//! - CPU: the paper's "4 cores at 25 %" on a 16-core host is a quarter of the machine;
//!   here `cpuset.cpus` = one core and `cpu.cfs_quota_us` = 50 % of it
//!   (`cfs_period_us` 100 ms), a quarter of this 2-core machine, and an instance must
//!   finish within `deadline_factor` times its unconstrained duration.

use std::time::{Duration, Instant};

use vtnt_job::JobSpec;
use vtnt_measure::cgroup::Cgroup;
use vtnt_runtimes::instance::{Deployed, Instance};
use vtnt_runtimes::InstanceSpec;

use crate::results::{DensityResult, Sample};

/// The budget of one density run.
#[derive(Debug, Clone, serde::Serialize)]
pub enum Budget {
    Memory { bytes: u64 },
    Cpu { cpus: String, quota_pct: u32 },
}

impl Budget {
    pub fn describe(&self) -> String {
        match self {
            Budget::Memory { bytes } => format!("memory.limit_in_bytes = {} MiB", bytes >> 20),
            Budget::Cpu { cpus, quota_pct } => {
                format!("cpuset.cpus = {cpus}, cpu quota {quota_pct} % of one core")
            }
        }
    }
}

/// How a density run goes.
#[derive(Debug, Clone)]
pub struct DensityOptions {
    pub budget: Budget,
    /// Instances started at most.
    pub max: u32,
    pub stagger: Duration,
    /// An instance failing to finish within this after its start does not count.
    pub deadline: Duration,
}

struct Slot {
    inst: Instance,
    index: u32,
    started: Instant,
    done: Option<bool>,
}

/// Runs one density experiment with `deployed`.
pub fn run(
    deployed: &Deployed,
    job: &JobSpec,
    opts: &DensityOptions,
) -> anyhow::Result<DensityResult> {
    let parent = Cgroup::create(&format!("vtnt/{}", vtnt_runtimes::paths::unique("density")))?;
    match &opts.budget {
        Budget::Memory { bytes } => {
            parent.set("memory", "memory.limit_in_bytes", &bytes.to_string())?
        }
        Budget::Cpu { cpus, quota_pct } => {
            parent.set("cpuset", "cpuset.cpus", cpus)?;
            parent.set("cpu", "cpu.cfs_period_us", "100000")?;
            parent.set("cpu", "cpu.cfs_quota_us", &(quota_pct * 1000).to_string())?;
        }
    }
    let mut res = DensityResult {
        budget: opts.budget.describe(),
        ..Default::default()
    };
    let t0 = Instant::now();
    let mut slots: Vec<Slot> = Vec::new();
    let mut next_start = t0;
    let mut last_cpu = (t0, parent.cpu_secs());
    let mut last_sample = t0 - Duration::from_secs(1);
    let mut launching = true;
    loop {
        let now = Instant::now();
        if launching && now >= next_start {
            if (slots.len() as u32) < opts.max {
                let index = slots.len() as u32;
                let spec = InstanceSpec {
                    index,
                    cgroup_parent: Some(parent.rel().to_string()),
                    sample_every: None,
                    ..InstanceSpec::new(job.clone())
                };
                match deployed.start(&spec) {
                    Ok(inst) => slots.push(Slot {
                        inst,
                        index,
                        started: Instant::now(),
                        done: None,
                    }),
                    Err(e) => {
                        res.first_failure
                            .get_or_insert(format!("start of instance {index}: {e:#}"));
                        launching = false;
                    }
                }
                next_start += opts.stagger;
            } else {
                launching = false;
            }
        }
        for s in slots.iter_mut().filter(|s| s.done.is_none()) {
            let late = s.started.elapsed() > opts.deadline;
            if s.inst.exited() || late {
                let out = s.inst.wait(Duration::from_secs(1));
                let ok = !late && out.as_ref().is_ok_and(|o| o.ok());
                if !ok && res.first_failure.is_none() {
                    res.first_failure = Some(match out {
                        _ if late => format!(
                            "instance {} missed its {:.0} s deadline",
                            s.index,
                            opts.deadline.as_secs_f64()
                        ),
                        Ok(o) => format!(
                            "instance {} exited with {:?}: {}",
                            s.index,
                            o.code,
                            vtnt_measure::proc::tail(&o.stderr, 300)
                        ),
                        Err(e) => format!("instance {}: {e:#}", s.index),
                    });
                }
                s.done = Some(ok);
            }
        }
        if now.duration_since(last_sample) >= Duration::from_millis(250) {
            let cpu = parent.cpu_secs();
            let dt = now.duration_since(last_cpu.0).as_secs_f64().max(1e-3);
            res.timeline.push(Sample {
                t: now.duration_since(t0).as_secs_f64(),
                mem_mib: parent.read_u64("memory", "memory.usage_in_bytes") as f64 / 1048576.0,
                cpu_pct: 100.0 * (cpu - last_cpu.1) / dt,
                running: slots.iter().filter(|s| s.done.is_none()).count() as u32,
            });
            last_cpu = (now, cpu);
            last_sample = now;
        }
        if !launching && slots.iter().all(|s| s.done.is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    res.started = slots.len() as u32;
    res.completed = slots.iter().filter(|s| s.done == Some(true)).count() as u32;
    res.failed = res.started - res.completed;
    res.capped = res.completed == opts.max;
    res.oom_kills = parent.oom_kills();
    drop(slots);
    Ok(res)
}
