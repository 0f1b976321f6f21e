//! Where a figure comes from: the machine, the software and the command that produced
//! it ([`Provenance`]), recorded in every benchmark report so that each figure in
//! docs/benchmarks.md can be traced to its conditions.

use std::process::Command;

use serde::Serialize;

/// The conditions of one benchmark run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// `vtnt` version (the workspace's).
    pub vtnt_version: String,
    /// The commit that built vtnt's installed files (`git describe --always --dirty`, as
    /// their manifest says: `vtnt_artifacts::built_commit`), or `unknown`.
    pub commit: String,
    /// The command line that ran the benchmark.
    pub command: String,
    /// UTC, RFC 3339, to the second.
    pub date: String,
    /// `uname -r`.
    pub kernel: String,
    /// `model name` of /proc/cpuinfo, and how many CPUs this process may use.
    pub cpu_model: String,
    pub cpus: usize,
    /// MemTotal, MiB.
    pub memory_mib: u64,
    /// First line of each tool's version output, `missing` when not installed: QEMU,
    /// Docker's engine (dockerd: the `docker` client on PATH may be another version),
    /// containerd, runc, scamper, Firecracker.
    pub tools: Vec<(String, String)>,
}

/// The tools whose versions a report names, with the argument that prints it.
const TOOLS: [(&str, &str); 6] = [
    ("qemu-system-x86_64", "--version"),
    ("dockerd", "--version"),
    ("containerd", "--version"),
    ("runc", "--version"),
    ("scamper", "-v"),
    ("firecracker", "--version"),
];

impl Provenance {
    /// Reads this machine's conditions now; `commit`: what built this vtnt, if known.
    pub fn now(commit: Option<String>) -> Provenance {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Provenance {
            vtnt_version: env!("CARGO_PKG_VERSION").to_string(),
            commit: commit.unwrap_or_else(|| "unknown".into()),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            date: first_line(Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]))
                .unwrap_or_default(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            cpu_model: field(&cpuinfo, "model name").unwrap_or_else(|| "unknown".into()),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_mib: field(&meminfo, "MemTotal")
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kib| kib >> 10),
            tools: TOOLS
                .iter()
                .map(|(tool, arg)| {
                    let v =
                        first_line(Command::new(tool).arg(arg)).unwrap_or_else(|| "missing".into());
                    (tool.to_string(), v)
                })
                .collect(),
        }
    }

    /// The conditions as markdown lines (`- key: value`).
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "- vtnt {} (commit {}), run {}\n- command: `{}`\n- host: {}, {} CPUs, {} MiB, Linux {}\n",
            self.vtnt_version,
            self.commit,
            self.date,
            self.command,
            self.cpu_model,
            self.cpus,
            self.memory_mib,
            self.kernel
        );
        for (tool, v) in &self.tools {
            s.push_str(&format!("- {tool}: {v}\n"));
        }
        s
    }
}

/// The value of `key` in a `key : value` file such as /proc/cpuinfo.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// The first non-empty line a command prints (stdout, else stderr), if it runs at all.
fn first_line(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    let text = if out.stdout.iter().any(|b| !b.is_ascii_whitespace()) {
        out.stdout
    } else {
        out.stderr
    };
    String::from_utf8_lossy(&text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_first_lines() {
        let cpuinfo = "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\nflags\t: x\n";
        assert_eq!(
            field(cpuinfo, "model name").as_deref(),
            Some("Some CPU @ 2.0GHz")
        );
        assert_eq!(field(cpuinfo, "missing"), None);
        assert_eq!(
            first_line(Command::new("sh").args(["-c", "echo; echo ' v1.2 '; echo x"])).as_deref(),
            Some("v1.2")
        );
        assert_eq!(
            first_line(Command::new("sh").args(["-c", "echo only-stderr >&2"])).as_deref(),
            Some("only-stderr")
        );
        assert_eq!(first_line(&mut Command::new("vtnt-no-such-tool")), None);
    }

    #[test]
    fn this_machine_is_described() {
        let p = Provenance::now(Some("48faf41".into()));
        assert!(p.cpus > 0 && p.memory_mib > 0, "{p:?}");
        assert!(!p.kernel.is_empty() && p.date.ends_with('Z'), "{p:?}");
        assert_eq!(p.tools.len(), TOOLS.len());
        let md = p.markdown();
        assert!(
            md.contains(&p.commit) && md.contains("qemu-system-x86_64: "),
            "{md}"
        );
    }
}
