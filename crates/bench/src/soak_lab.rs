//! `soak --lab`: the real `vtnt trace` binary against a real lab (`vtnt lab up` with the
//! reference topology: a namespace, a TUN, the emulated routers and their ICMP rate limits),
//! campaign after campaign, each with a wall-clock deadline. A run still going at its
//! deadline is killed (its process group) and counted as not ended; a run that ended must
//! have written one trace per target into a committed output file.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use vtnt_lab::{Lab, Topology};

/// What to soak.
#[derive(Debug, Clone, Serialize)]
pub struct LabSoakOptions {
    pub runs: usize,
    /// Traces per run (the lab's destinations repeated).
    pub targets: usize,
    pub pps: u32,
    /// Wall-clock seconds after which a run still going did not end.
    pub deadline_secs: u64,
    /// The `vtnt` binary to soak.
    pub vtnt: PathBuf,
}

/// One campaign.
#[derive(Debug, Clone, Serialize)]
pub struct LabSoakRun {
    pub ended: bool,
    /// Exit code when it ended by itself.
    pub exit: Option<i32>,
    /// Traces in the output file.
    pub traces: usize,
    pub wall_secs: f64,
}

/// Every campaign of a soak.
#[derive(Debug, Clone, Serialize)]
pub struct LabSoakReport {
    pub options: LabSoakOptions,
    pub runs: Vec<LabSoakRun>,
}

impl LabSoakReport {
    /// Runs that did not end, or ended without every trace.
    pub fn failed(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| !r.ended || r.exit != Some(0) || r.traces != self.options.targets)
            .count()
    }

    /// The table docs/benchmarks.md quotes.
    pub fn to_markdown(&self) -> String {
        let o = &self.options;
        let (median, max) = crate::soak::median_max(self.runs.iter().map(|r| r.wall_secs));
        let ended = self.runs.iter().filter(|r| r.ended).count();
        let complete = self
            .runs
            .iter()
            .filter(|r| r.exit == Some(0) && r.traces == o.targets)
            .count();
        format!(
            "Soak (real lab): {} runs of `vtnt trace -P icmp-paris -q 1 -w 1 --pps {}` over {} targets, deadline {} s (wall)\n\n\
             | runs | ended | did not end | complete (exit 0, every trace) | median run time | max run time |\n\
             |---:|---:|---:|---:|---:|---:|\n\
             | {} | {ended} | {} | {complete} | {median:.1} s | {max:.1} s |\n",
            o.runs,
            o.pps,
            o.targets,
            o.deadline_secs,
            self.runs.len(),
            self.runs.len() - ended,
        )
    }
}

/// A lab taken down when dropped.
struct LabGuard<'a> {
    vtnt: &'a Path,
    name: String,
}

impl Drop for LabGuard<'_> {
    fn drop(&mut self) {
        let _ = Command::new(self.vtnt)
            .args(["lab", "down", "--name", &self.name])
            .output();
    }
}

/// Runs the soak in a lab of its own.
pub fn soak_lab(o: &LabSoakOptions) -> anyhow::Result<LabSoakReport> {
    let dir = std::env::temp_dir().join(format!("vtnt-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dsts: Vec<String> = Lab::new(Topology::reference())
        .truth()
        .destinations
        .iter()
        .map(|d| d.dst.to_string())
        .collect();
    if dsts.is_empty() {
        bail!("the reference topology has no destination");
    }
    let mut list = String::new();
    for i in 0..o.targets {
        list.push_str(&dsts[i % dsts.len()]);
        list.push('\n');
    }
    let targets = dir.join("targets.txt");
    std::fs::write(&targets, list)?;
    let name = format!("vtnt-soak-{}", std::process::id());
    let up = Command::new(&o.vtnt)
        .args(["lab", "up", "--name", &name])
        .output()
        .context("starting the lab")?;
    let _lab = LabGuard {
        vtnt: &o.vtnt,
        name: name.clone(),
    };
    if !up.status.success() {
        bail!(
            "vtnt lab up: {}",
            String::from_utf8_lossy(&up.stderr).trim()
        );
    }
    let mut runs = Vec::with_capacity(o.runs);
    for k in 0..o.runs {
        let out = dir.join(format!("run-{k}.json"));
        runs.push(run_once(o, &name, &targets, &out)?);
        let _ = std::fs::remove_file(&out);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(LabSoakReport {
        options: o.clone(),
        runs,
    })
}

fn run_once(
    o: &LabSoakOptions,
    lab: &str,
    targets: &Path,
    out: &Path,
) -> anyhow::Result<LabSoakRun> {
    let started = Instant::now();
    let mut child = Command::new(&o.vtnt)
        .args(["lab", "exec", "--name", lab, "--"])
        .arg(&o.vtnt)
        .args(["trace", "-P", "icmp-paris", "-q", "1", "-w", "1", "--pps"])
        .arg(o.pps.to_string())
        .arg("--targets")
        .arg(targets)
        .arg("-o")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting vtnt trace in the lab")?;
    let deadline = started + Duration::from_secs(o.deadline_secs);
    let exit = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status.code().unwrap_or(-1));
        }
        if Instant::now() >= deadline {
            // the whole group: `lab exec` and the vtnt it started
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let traces = std::fs::read_to_string(out)
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("{\"type\":\"trace\""))
                .count()
        })
        .unwrap_or(0);
    Ok(LabSoakRun {
        ended: exit.is_some(),
        exit,
        traces,
        wall_secs: started.elapsed().as_secs_f64(),
    })
}
