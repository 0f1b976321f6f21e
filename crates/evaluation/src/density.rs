//! Density under a budget (the paper's Fig. 8), measured as concurrency: how many
//! instances can be alive and working at once inside one budget cgroup.
//!
//! The ramp starts an instance every `stagger` (the paper's 0.1 s; later when
//! `max_pending` started instances have not printed their result yet), each running the
//! density job (a one-hop trace, then a hold that outlasts the ramp, during which a job
//! with `every=` traces again every `every`), and keeps every instance alive until the
//! ramp ends. An instance is *working* once its trace result has appeared on its output.
//! The ramp ends at the first failure: an instance that cannot start, that exits while it
//! should hold (the OOM killer's victims included), that prints no result within
//! `deadline`, or, with `every=`, prints nothing for `every` + `deadline` once working (it
//! no longer keeps up); or, for the memory budget, when the group's
//! memory plus the growth of the runtime's daemons (Docker's engine and shims, which
//! live outside the group) exceeds the budget. The density is the highest number alive
//! and working at once before that failure.
//!
//! A ramp that ends without a failure is *capped* and says why ([`DensityResult::cap`]):
//! the ramp's own limit, a slot limit of the lab's network (a limit of ours, not the
//! runtime's), or the host running short of memory. [`DensityResult::check`] refuses a
//! result at its limit that does not say so.
//!
//! Budgets (cgroup v1):
//! - memory: `memory.limit_in_bytes` (1 GiB by default) on the group; the OOM killer
//!   picks victims inside it;
//! - CPU: the paper's "4 cores at 25 %" on a 16-core host is a quarter of the machine;
//!   here `cpuset.cpus` = one core and `cpu.cfs_quota_us` = 50 % of it
//!   (`cfs_period_us` 100 ms), a quarter of this 2-core machine; an instance must print
//!   its result within `deadline` (a multiple of its unconstrained duration).
//!
//! The group's memory, CPU share, instances alive and working, and the daemons' memory
//! growth are sampled every 250 ms for the timelines.
//!
//! Daemons are charged to either budget: in the memory budget their memory growth, in
//! the CPU budget their CPU use (a front forwarding the unikernels' probes, Docker's
//! shims relaying output): the ramp fails once the group and the daemons together have
//! used more than the quota over the last [`CPU_WINDOW`].

use std::time::{Duration, Instant};

use vtnt_job::JobSpec;
use vtnt_measure::cgroup::Cgroup;
use vtnt_runtimes::instance::{Deployed, Instance};
use vtnt_runtimes::InstanceSpec;

use crate::results::{DaemonShare, DensityResult, Sample};

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
    /// The ramp's limit: instances started at most (far above what runtimes reach).
    pub max: u32,
    pub stagger: Duration,
    /// Instances started and not yet working at most: the next waits for one to work,
    /// so that slow starters (a VM boots for seconds) are not started by the dozen before
    /// the first can show whether it fits.
    pub max_pending: u32,
    /// An instance that has printed no result this long after its start fails.
    pub deadline: Duration,
}

/// The ramp stops before the host itself runs short: below this much available memory
/// (or a tenth of the total, whichever is more), the run ends capped.
const HOST_RESERVE_MIB: u64 = 2048;

/// The window over which the CPU budget's use, daemons included, is compared with its
/// quota (the group alone cannot pass it: the kernel throttles it).
const CPU_WINDOW: Duration = Duration::from_secs(5);

struct Slot {
    inst: Instance,
    index: u32,
    started: Instant,
    /// When its result appeared.
    working: Option<Instant>,
    /// Where its output was last read ([`Instance::new_records`]) and the records (rounds)
    /// seen so far.
    seen: usize,
    rounds: u64,
}

/// The daemons a runtime's instances need, outside the budget group: their memory
/// growth since the ramp began is charged to the memory budget, their CPU time reported.
struct Daemons<'a> {
    deployed: &'a Deployed,
    pss0_kib: u64,
    cpu0: f64,
}

impl Daemons<'_> {
    fn totals(&self) -> (u64, f64) {
        let pids = self.deployed.daemon_pids();
        (
            pids.iter().map(|&p| vtnt_measure::proc::pss_kib(p)).sum(),
            pids.iter().map(|&p| vtnt_measure::proc::cpu_secs(p)).sum(),
        )
    }

    /// Memory growth (MiB) and CPU seconds since the start.
    fn growth(&self) -> (f64, f64) {
        let (pss, cpu) = self.totals();
        (
            pss.saturating_sub(self.pss0_kib) as f64 / 1024.0,
            (cpu - self.cpu0).max(0.0),
        )
    }
}

/// Runs one density ramp with `deployed`; `job` is the density job (its hold must
/// outlast the ramp: `vtnt_job::MAX_HOLD`).
pub fn run(
    deployed: &Deployed,
    job: &JobSpec,
    opts: &DensityOptions,
) -> anyhow::Result<DensityResult> {
    let parent = Cgroup::create(&format!("vtnt/{}", vtnt_runtimes::paths::unique("density")))?;
    let (mem_limit_mib, cpu_limit_pct) = match &opts.budget {
        Budget::Memory { bytes } => {
            parent.set("memory", "memory.limit_in_bytes", &bytes.to_string())?;
            (Some(*bytes as f64 / 1048576.0), None)
        }
        Budget::Cpu { cpus, quota_pct } => {
            parent.set("cpuset", "cpuset.cpus", cpus)?;
            parent.set("cpu", "cpu.cfs_period_us", "100000")?;
            parent.set("cpu", "cpu.cfs_quota_us", &(quota_pct * 1000).to_string())?;
            (None, Some(f64::from(*quota_pct)))
        }
    };
    let (limit, limit_reason) = match deployed.capacity() {
        Some((n, why)) if n < opts.max => (n, why),
        _ => (
            opts.max,
            format!("the ramp's limit of {} instances", opts.max),
        ),
    };
    let mut daemons = Daemons {
        deployed,
        pss0_kib: 0,
        cpu0: 0.0,
    };
    (daemons.pss0_kib, daemons.cpu0) = daemons.totals();
    let has_daemons = !deployed.daemon_pids().is_empty();
    let mut res = DensityResult {
        budget: opts.budget.describe(),
        every_s: job.every.as_secs_f64(),
        limit,
        ..Default::default()
    };
    let t0 = Instant::now();
    let mut slots: Vec<Slot> = Vec::new();
    let mut next_start = t0;
    let mut last_cpu = (t0, parent.cpu_secs());
    let mut last_sample = t0 - Duration::from_secs(1);
    let mut daemon_mib = 0.0;
    let mut daemon_cpu = 0.0;
    let mut daemon_mib_at_peak = 0.0;
    // (when, group CPU s, daemons' CPU s) over the last CPU_WINDOW
    let mut cpu_window: std::collections::VecDeque<(Instant, f64, f64)> = Default::default();
    loop {
        let now = Instant::now();
        if res.first_failure.is_some() {
            break;
        }
        if vtnt_measure::stop::interrupted() {
            stop_all(slots);
            anyhow::bail!("interrupted");
        }
        let pending = slots.iter().filter(|s| s.working.is_none()).count() as u32;
        if (slots.len() as u32) < limit && now >= next_start && pending < opts.max_pending {
            if let Some(low) = host_memory_low() {
                res.cap = Some(low);
                break;
            }
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
                    working: None,
                    seen: 0,
                    rounds: 0,
                }),
                Err(e) => {
                    let e = anyhow::Error::new(e);
                    res.first_failure = Some(format!("start of instance {index}: {e:#}"));
                    break;
                }
            }
            next_start = now.max(next_start) + opts.stagger;
        }
        for s in slots.iter_mut() {
            if s.working.is_none() {
                s.rounds += s.inst.new_records(&mut s.seen) as u64;
                if s.rounds > 0 {
                    s.working = Some(Instant::now());
                }
            }
            if s.inst.exited() {
                res.first_failure = Some(exited(s));
                break;
            }
            if s.working.is_none() && s.started.elapsed() > opts.deadline {
                res.first_failure = Some(format!(
                    "instance {} printed no result within its {:.0} s deadline",
                    s.index,
                    opts.deadline.as_secs_f64()
                ));
                break;
            }
        }
        if res.first_failure.is_some() {
            break;
        }
        let working = slots.iter().filter(|s| s.working.is_some()).count() as u32;
        let full = slots.len() as u32 == limit && working == limit;
        if full || now.duration_since(last_sample) >= Duration::from_millis(250) {
            if let Some(why) = behind(&mut slots, job.every, now) {
                res.first_failure = Some(why);
                break;
            }
            let cpu = parent.cpu_secs();
            let dt = now.duration_since(last_cpu.0).as_secs_f64().max(1e-3);
            let daemon_cpu_before = daemon_cpu;
            if has_daemons {
                (daemon_mib, daemon_cpu) = daemons.growth();
            }
            let mem_mib = parent.read_u64("memory", "memory.usage_in_bytes") as f64 / 1048576.0;
            res.timeline.push(Sample {
                t: now.duration_since(t0).as_secs_f64(),
                mem_mib,
                cpu_pct: 100.0 * (cpu - last_cpu.1) / dt,
                running: slots.len() as u32,
                working,
                daemon_mib,
                daemon_cpu_pct: 100.0 * (daemon_cpu - daemon_cpu_before) / dt,
            });
            last_cpu = (now, cpu);
            cpu_window.push_back((now, cpu, daemon_cpu));
            while cpu_window.len() > 2 && now.duration_since(cpu_window[1].0) >= CPU_WINDOW {
                cpu_window.pop_front();
            }
            if let (Some(quota), Some(&(then, cpu0, d0))) =
                (cpu_limit_pct.filter(|_| has_daemons), cpu_window.front())
            {
                let span = now.duration_since(then).as_secs_f64();
                let (group, own) = (
                    100.0 * (cpu - cpu0) / span,
                    100.0 * (daemon_cpu - d0) / span,
                );
                if span >= CPU_WINDOW.as_secs_f64() && group + own > quota {
                    res.first_failure = Some(format!(
                        "the budget is full with the daemons' share: {group:.0} % of a core in the group + {own:.0} % in the daemons > {quota:.0} % over {span:.0} s"
                    ));
                    break;
                }
            }
            last_sample = now;
            if let Some(limit_mib) = mem_limit_mib.filter(|_| has_daemons) {
                if mem_mib + daemon_mib > limit_mib {
                    res.first_failure = Some(format!(
                        "the budget is full with the daemons' share: {mem_mib:.0} MiB in the group + {daemon_mib:.0} MiB of daemon growth > {limit_mib:.0} MiB"
                    ));
                    break;
                }
            }
        }
        if working > res.peak {
            res.peak = working;
            daemon_mib_at_peak = daemon_mib;
        }
        if full {
            res.cap = Some(limit_reason.clone());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    res.started = slots.len() as u32;
    res.oom_kills = parent.oom_kills();
    let mut ttw: Vec<f64> = slots
        .iter()
        .filter_map(|s| s.working.map(|w| w.duration_since(s.started).as_secs_f64()))
        .collect();
    ttw.sort_by(f64::total_cmp);
    res.median_time_to_result_s = ttw.get(ttw.len() / 2).copied().unwrap_or(0.0);
    if has_daemons {
        let (_, cpu) = daemons.growth();
        let per = |x: f64| {
            if res.peak > 0 {
                x / f64::from(res.peak)
            } else {
                0.0
            }
        };
        res.daemons = Some(DaemonShare {
            rule: match mem_limit_mib {
                Some(_) => "memory growth charged to the budget; CPU reported".into(),
                None => format!(
                    "CPU charged to the budget (group + daemons over {} s); memory reported",
                    CPU_WINDOW.as_secs()
                ),
            },
            mem_mib_at_peak: daemon_mib_at_peak,
            mem_mib_per_instance: per(daemon_mib_at_peak),
            cpu_secs: cpu,
            cpu_secs_per_instance: if res.started > 0 {
                cpu / f64::from(res.started)
            } else {
                0.0
            },
        });
    }
    stop_all(slots);
    res.check()?;
    Ok(res)
}

/// With `every` (a job that keeps working while it holds): the first working instance
/// whose next round is more than a round late (its rounds are due `every` apart from its
/// first result), said as the ramp's failure. Lateness accumulates once the budget cannot
/// run every round, so this finds an overload however slight, given time.
fn behind(slots: &mut [Slot], every: Duration, now: Instant) -> Option<String> {
    if every.is_zero() {
        return None;
    }
    for s in slots.iter_mut() {
        let Some(first) = s.working else { continue };
        s.rounds += s.inst.new_records(&mut s.seen) as u64;
        let late =
            now.duration_since(first).as_secs_f64() - (s.rounds + 2) as f64 * every.as_secs_f64();
        if late > 0.0 {
            return Some(format!(
                "instance {} fell behind: {} rounds in {:.1} s, one every {:.0} s due",
                s.index,
                s.rounds,
                now.duration_since(first).as_secs_f64(),
                every.as_secs_f64()
            ));
        }
    }
    None
}

/// Why an instance that should still hold has exited.
fn exited(s: &mut Slot) -> String {
    match s.inst.wait(Duration::from_secs(2)) {
        Ok(o) => format!(
            "instance {} exited during the ramp ({}){}",
            s.index,
            match o.code {
                Some(c) => format!("status {c}"),
                // the OOM killer's SIGKILL, mostly: the run's oom_kills says
                None => "killed by a signal".into(),
            },
            match vtnt_measure::proc::tail(&o.stderr, 300).trim() {
                "" => String::new(),
                t => format!(": {t}"),
            }
        ),
        Err(e) => format!(
            "instance {} exited during the ramp: {:#}",
            s.index,
            anyhow::Error::new(e)
        ),
    }
}

/// `Some(why)` when the host has less memory available than the ramp leaves it.
fn host_memory_low() -> Option<String> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| -> Option<u64> {
        info.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let (avail, total) = (kib("MemAvailable:")? >> 10, kib("MemTotal:")? >> 10);
    let reserve = HOST_RESERVE_MIB.max(total / 10);
    (avail < reserve).then(|| {
        format!("the host's available memory fell to {avail} MiB (the ramp leaves {reserve} MiB)")
    })
}

/// Destroys every instance, a few at a time (a container's removal takes a while), and
/// containers one at a time: Debian's dockerd 20.10 deadlocked in libnetwork (its
/// controller's and a network's locks, taken in both orders) when eight removals of
/// host-network containers ran at once after a 298-container ramp.
fn stop_all(slots: Vec<Slot>) {
    let mut slots = slots;
    let docker = slots.first().is_some_and(|s| {
        matches!(
            s.inst.runtime,
            vtnt_runtimes::Runtime::Docker | vtnt_runtimes::Runtime::DockerScratch
        )
    });
    let streams = if docker { 1 } else { 8 };
    let per = slots.len().div_ceil(streams).max(1);
    std::thread::scope(|scope| {
        while !slots.is_empty() {
            let chunk: Vec<Slot> = slots.drain(..per.min(slots.len())).collect();
            scope.spawn(move || drop(chunk));
        }
    });
}
