//! The Debian package (`cargo xtask deb`), built once from an install tree of its own:
//!
//! - it holds the files docs/install.md lists and declares what it needs; unpacked into a
//!   directory with the capability its postinst sets, its `vtnt` finds its artifacts
//!   beside itself, and an unprivileged user traces, pings and runs TNT through a chain of
//!   routers in namespaces the test makes; without the capability the same user is refused
//!   with the reason;
//! - installed with apt into a clean Debian root (the cached debootstrap minbase of the
//!   runtimes, copied; no checkout, no cargo), an unprivileged user traces, and root runs
//!   a lab, `vtnt run --runtime spt` and `--runtime microvm` (under `vtnt-monitor` where
//!   `/dev/kvm` works), and an agent that takes a queued job and returns its result
//!   within 5 s of starting (clean_root.rs).
//!
//! Needs root (namespaces, the root's mounts) and the Debian mirror (apt, as
//! scripts/setup.sh).

#[path = "package/clean_root.rs"]
mod clean_root;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use vtnt_xtask::{deb, dist};

/// A directory removed on drop, readable by all (the unprivileged user runs from it).
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vtnt-package-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        chmod(&d, 0o755);
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The package, built once per test binary into `target/package-test/` (none when a
/// tool it needs is missing: the test skips through vtnt-testkit).
fn package(test: &str) -> Option<&'static Path> {
    if let Some(why) = vtnt_testkit::missing_tools(&["dpkg-deb", "objcopy", "readelf"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return None;
    }
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    let pkg = DEB.get_or_init(|| {
        let tree = dist::build(&dist::Options {
            out: Some(vtnt_xtask::cargo::target_dir().join("package-test/dist")),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{e:#}"));
        deb::build(&tree).unwrap_or_else(|e| panic!("{e:#}"))
    });
    Some(pkg)
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `dpkg-deb -f DEB FIELD`.
fn field(deb: &Path, name: &str) -> String {
    text(&run(Command::new("dpkg-deb").arg("-f").arg(deb).arg(name)).stdout)
        .trim()
        .to_string()
}

#[test]
fn the_package_holds_the_tree_and_lets_a_user_trace_without_root() {
    let Some(pkg) = package(vtnt_testkit::test_name!()) else {
        return;
    };
    let dir = Dir::new("unpacked");
    assert_eq!(
        pkg.file_name().and_then(|n| n.to_str()),
        Some(deb::file_name(vtnt_artifacts::VERSION).as_str())
    );

    // what it holds
    let listing = text(&run(Command::new("dpkg-deb").arg("-c").arg(pkg)).stdout);
    let files: Vec<&str> = listing
        .lines()
        .filter(|l| !l.starts_with('d'))
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    let mut expected: Vec<String> = [
        "./usr/bin/vtnt",
        "./usr/lib/vtnt/artifacts.toml",
        "./lib/systemd/system/vtnt-agent.service",
        "./lib/systemd/system/vtnt-daemon.service",
        "./etc/default/vtnt",
        "./usr/share/doc/vtnt/copyright",
        "./usr/share/doc/vtnt/README.md",
        "./usr/share/doc/vtnt/install.md",
    ]
    .map(String::from)
    .to_vec();
    expected
        .extend(vtnt_artifacts::Artifact::ALL.map(|a| format!("./usr/lib/vtnt/{}", a.file_name())));
    let mut got: Vec<String> = files.iter().map(|f| f.to_string()).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "{listing}");
    assert!(listing.contains("-rwxr-xr-x root/root"), "{listing}");

    // what it declares
    let depends = field(pkg, "Depends");
    assert!(depends.contains("libc6 (>= 2."), "{depends}");
    assert!(depends.ends_with("libcap2-bin"), "{depends}");
    assert_eq!(field(pkg, "Recommends"), "iproute2");
    let suggests = field(pkg, "Suggests");
    for p in [
        "qemu-system-x86",
        "runc",
        "docker.io",
        "nats-server",
        "scamper",
    ] {
        assert!(suggests.contains(p), "{suggests}");
    }
    let control = dir.0.join("control");
    run(Command::new("dpkg-deb").arg("-e").arg(pkg).arg(&control));
    assert_eq!(
        std::fs::read_to_string(control.join("conffiles")).unwrap(),
        "/etc/default/vtnt\n"
    );
    let postinst = std::fs::read_to_string(control.join("postinst")).unwrap();
    let setcap = postinst
        .lines()
        .find_map(|l| l.trim().strip_prefix("if ! setcap "))
        .and_then(|l| l.strip_suffix("; then"))
        .expect("the postinst's setcap line");
    let (caps, path) = setcap.split_once(' ').expect("setcap CAPS FILE");
    assert_eq!((caps, path), ("cap_net_raw+ep", "/usr/bin/vtnt"));

    if let Some(why) =
        vtnt_testkit::missing_root_or(&["ip", "setcap", "setpriv", "systemd-analyze"])
    {
        vtnt_testkit::skip_or_fail(vtnt_testkit::test_name!(), &why, None);
        return;
    }
    // unpacked into a root of its own, the postinst's capability set as it sets it
    let root = dir.0.join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(pkg).arg(&root));
    chmod(&root, 0o755);
    let vtnt = root.join(path.trim_start_matches('/'));
    run(Command::new("setcap").arg(caps).arg(&vtnt));
    let plain = dir.0.join("vtnt-without-capability");
    std::fs::copy(&vtnt, &plain).unwrap();

    let chain = vtnt_netns::Chain::build("vtdeb", 2).expect("namespaces");
    let target = chain.target();
    let user = |bin: &Path, args: &[&str]| -> Output {
        chain
            .vantage()
            .command("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin)
            .args(args)
            .env("VTNT_CACHE_DIR", dir.0.join("cache"))
            .env_remove("VTNT_LIB_DIR")
            .output()
            .expect("setpriv")
    };
    for (job, answered) in [
        (
            vec!["trace", "-P", "icmp-paris", "-w", "1", &target],
            "addr",
        ),
        (vec!["ping", "-c", "2", "-i", "0.2", &target], "from"),
        (vec!["tnt", "-w", "1", &target], "addr"),
    ] {
        let out = user(&vtnt, &job);
        assert!(
            out.status.success(),
            "{job:?} as nobody: {}",
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains(&format!("\"{answered}\":\"{target}\"")),
            "{job:?}: {stdout}"
        );
    }
    let out = user(&plain, &["trace", &target]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("raw sockets need root or CAP_NET_RAW"),
        "{}",
        text(&out.stderr)
    );
    // its units are what systemd reads (ExecStart at the unpacked binary)
    let units = dir.0.join("units");
    std::fs::create_dir_all(&units).unwrap();
    let mut verify = Command::new("systemd-analyze");
    verify.args(["verify", "--man=no"]);
    for unit in ["vtnt-agent.service", "vtnt-daemon.service"] {
        let text = std::fs::read_to_string(root.join("lib/systemd/system").join(unit)).unwrap();
        let here = text.replace("/usr/bin/vtnt", &vtnt.display().to_string());
        std::fs::write(units.join(unit), here).unwrap();
        verify.arg(units.join(unit));
    }
    let out = run(&mut verify);
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    // its artifacts are found beside it, checked
    std::fs::create_dir_all(dir.0.join("cache")).unwrap();
    chmod(&dir.0.join("cache"), 0o777);
    let out = user(&vtnt, &["image", "build", "spt", "--print-path"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
