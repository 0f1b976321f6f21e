//! The package in a clean Debian root: the runtimes' cached debootstrap minbase, copied,
//! with `/proc`, `/dev`, `/sys` and a `/run` of its own mounted (the root is a mount point
//! of its own, which `ip netns exec` needs), the package installed with apt; everything
//! then runs there through `chroot`, where there is neither a checkout nor cargo.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{package, text};

/// The root, its mounts undone and its files removed on drop; the files only if no
/// mount is left under it (removing through a bind of `/dev` or `/sys` would reach the
/// host's).
struct Root {
    dir: PathBuf,
}

impl Root {
    /// A copy of `base` at `dir`, mounted for use.
    fn new(base: &Path, dir: PathBuf) -> Root {
        let _ = std::fs::remove_dir_all(&dir);
        sh(Command::new("cp").arg("-a").arg(base).arg(&dir));
        let root = Root { dir };
        let d = root.dir.display().to_string();
        std::fs::copy("/etc/resolv.conf", root.dir.join("etc/resolv.conf")).expect("resolv.conf");
        for args in [
            vec!["--bind", &d, &d],
            vec!["--make-private", &d],
            vec!["-t", "proc", "proc", &format!("{d}/proc")],
            vec!["--rbind", "/dev", &format!("{d}/dev")],
            vec!["--make-rslave", &format!("{d}/dev")],
            vec!["--rbind", "/sys", &format!("{d}/sys")],
            vec!["--make-rslave", &format!("{d}/sys")],
            vec!["-t", "tmpfs", "tmpfs", &format!("{d}/run")],
        ] {
            sh(Command::new("mount").args(&args));
        }
        root
    }

    /// `sh -c script` in the root, as root, with a clean environment.
    fn sh(&self, script: &str) -> Output {
        Command::new("chroot")
            .arg(&self.dir)
            .args(["/bin/sh", "-c", script])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", "/root")
            .env("LC_ALL", "C")
            .output()
            .expect("chroot")
    }

    /// [`Root::sh`], which must succeed; its stdout.
    fn ok(&self, script: &str) -> String {
        let out = self.sh(script);
        assert!(
            out.status.success(),
            "in the clean root: {script}\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Whether anything is mounted under the root.
    fn mounted(&self) -> bool {
        let d = self.dir.display().to_string();
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .any(|m| m == d || m.starts_with(&format!("{d}/")))
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-R").arg(&self.dir).output();
        if self.mounted() {
            eprintln!(
                "left {} in place: something is still mounted under it",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs a host command that must succeed.
fn sh(cmd: &mut Command) -> Output {
    super::run(cmd)
}

/// A command run in the root at the end (a lab down, a fleet down), whatever happens.
struct Finally<'a>(&'a Root, String);

impl Drop for Finally<'_> {
    fn drop(&mut self) {
        let _ = self.0.sh(&self.1);
    }
}

/// A process in the root, killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn in_a_clean_root_the_package_runs_without_a_checkout_or_cargo() {
    let test = vtnt_testkit::test_name!();
    if let Some(why) = vtnt_testkit::missing_root_or(&["debootstrap", "chroot", "mount"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let Some(pkg) = package(test) else { return };
    let base = vtnt_runtimes::debian::minbase(false)
        .unwrap_or_else(|e| panic!("{:#}", anyhow::Error::new(e)));
    let work = vtnt_runtimes::paths::work_dir().expect("the work directory");
    let root = Root::new(&base, work.join(vtnt_runtimes::paths::unique("clean-root")));
    std::fs::copy(&pkg.deb, root.dir.join("tmp/vtnt.deb")).expect("copying the package");

    // nothing of the build is there
    let checkout = vtnt_xtask::cargo::workspace();
    root.ok(&format!(
        "! command -v cargo && ! command -v rustc && test ! -e {}",
        checkout.display()
    ));
    eprintln!("clean root: installing the package");
    root.ok(
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         /tmp/vtnt.deb nats-server >/dev/null",
    );

    // its manual and completion where man and bash-completion look (man-db's index is
    // not rebuilt: man finds a page by its name without it)
    root.ok(
        "echo 'man-db man-db/auto-update boolean false' | debconf-set-selections && \
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
         man-db bash-completion >/dev/null",
    );
    let page = root.ok("MANWIDTH=80 man vtnt-trace");
    assert!(
        page.contains("vtnt-trace - ") && page.contains("--pps"),
        "{page}"
    );
    let completed = root.ok(
        "bash -c '. /usr/share/bash-completion/bash_completion; __load_completion vtnt; \
         COMP_WORDS=(vtnt tr); COMP_CWORD=1; _vtnt vtnt tr vtnt; echo \"${COMPREPLY[@]}\"'",
    );
    assert_eq!(completed.trim(), "trace");

    // a first trace as a user: the package's capability, the policy's loopback
    root.ok("useradd -m alice");
    let trace = root.ok("su alice -c 'vtnt trace 127.0.0.1'");
    assert!(trace.contains("\"addr\":\"127.0.0.1\""), "{trace}");

    // the unikernel from the package's files, on a lab
    let lab = format!("vtcr{}", std::process::id());
    root.ok(&format!("vtnt lab up --name {lab} >/dev/null"));
    let _lab_down = Finally(&root, format!("vtnt lab down --name {lab}"));
    let job = "-- trace -q 1 203.0.113.10";
    let spt = root.sh(&format!("vtnt run --lab {lab} --runtime spt {job}"));
    assert!(spt.status.success(), "spt: {}", text(&spt.stderr));
    assert!(text(&spt.stdout).contains("\"addr\":\"203.0.113.10\""));
    let vm = root.sh(&format!("vtnt run --lab {lab} --runtime microvm {job}"));
    let timings = text(&vm.stderr);
    assert!(vm.status.success(), "microvm: {timings}");
    assert!(text(&vm.stdout).contains("\"addr\":\"203.0.113.10\""));
    if vtnt_testkit::missing_kvm().is_none() {
        assert!(timings.contains("(vtnt-monitor)"), "{timings}");
    }

    // an agent, started, takes a job and returns its result at once: the job is
    // submitted as soon as the broker knows a node that runs spt
    let fleet = format!("vtcr{}", std::process::id());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    root.ok(&format!(
        "vtnt fleet up --name {fleet} --port {port} >/dev/null"
    ));
    let _fleet_down = Finally(&root, format!("vtnt fleet down --name {fleet}"));
    let started = Instant::now();
    let agent = Command::new("chroot")
        .arg(&root.dir)
        .args(["vtnt", "agent", "--fleet", &fleet, "--node", "n1"])
        .args(["--location", "fr", "--runtimes", "spt", "--lab", &lab])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the agent");
    let _agent = Running(agent);
    let within = |what: &str, out: &Output| {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what}: {}",
            text(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    loop {
        let out = root.sh(&format!(
            "vtnt fleet submit --fleet {fleet} --runtime spt --mode wait {job}"
        ));
        if out.status.success() {
            break;
        }
        within("no agent came up", &out);
    }
    let submitted = started.elapsed();
    let took = loop {
        let out = root.sh(&format!("vtnt fleet results --fleet {fleet}"));
        if text(&out.stderr).contains(" records, queue ") {
            break started.elapsed();
        }
        within("no result from the agent", &out);
    };
    eprintln!(
        "the agent took a job {submitted:?} after it started, its result came after {took:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}
