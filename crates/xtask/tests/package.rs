//! The Debian package (`cargo xtask deb`), built once from an install tree of its own:
//!
//! - it holds the files docs/install.md lists and declares what it needs; unpacked into a
//!   directory with the capability its postinst sets, its `vtnt` finds its artifacts
//!   beside itself, and an unprivileged user traces, pings and runs TNT through a chain of
//!   routers in namespaces the test makes; without the capability the same user is refused
//!   with the reason; its man pages render and its bash completion completes;
//! - the tree's notices name every crate whose source the tree's binaries name (their
//!   panic locations), under that binary;
//! - installed with apt into a clean Debian root (the cached debootstrap minbase of the
//!   runtimes, copied; no checkout, no cargo), an unprivileged user traces, and root runs
//!   a lab, `vtnt run --runtime spt` and `--runtime microvm` (under `vtnt-monitor` where
//!   `/dev/kvm` works), and an agent that takes a queued job and returns its result
//!   within 5 s of starting, and `man` and bash completion find the package's pages
//!   and script (clean_root.rs);
//! - installed in a Linux guest whose KVM is hardware-style (AMD SVM, nested under QEMU's
//!   TCG), `vtnt-monitor` boots the unikernel and `vtnt run --runtime microvm` picks it
//!   by default and traces as natively (nested_kvm.rs).
//!
//! Needs root (namespaces, the root's mounts) and the Debian mirror (apt, as
//! scripts/setup.sh).

#[path = "package/clean_root.rs"]
mod clean_root;
#[path = "package/nested_kvm.rs"]
mod nested_kvm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use vtnt_xtask::programs;
use vtnt_xtask::{deb, dist, share};

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

/// The install tree and the package made from it.
struct Package {
    tree: dist::Dist,
    deb: PathBuf,
}

/// The package, built once per test binary into `target/package-test/` (none when a
/// tool it needs is missing: the test skips through vtnt-testkit).
fn package(test: &str) -> Option<&'static Package> {
    if let Some(why) = vtnt_testkit::missing_tools(&["dpkg-deb", "objcopy", "readelf", "gzip"]) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return None;
    }
    static PACKAGE: OnceLock<Package> = OnceLock::new();
    let pkg = PACKAGE.get_or_init(|| {
        let tree = dist::build(&dist::Options {
            out: Some(vtnt_xtask::cargo::target_dir().join("package-test/dist")),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{e:#}"));
        let deb = deb::build(&tree).unwrap_or_else(|e| panic!("{e:#}"));
        Package { tree, deb }
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
    let Some(Package { tree, deb: pkg }) = package(vtnt_testkit::test_name!()) else {
        return;
    };
    let pkg = pkg.as_path();
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
        "./usr/bin/vtnt-agent",
        "./usr/lib/vtnt/artifacts.toml",
        "./lib/systemd/system/vtnt-agent.service",
        "./lib/systemd/system/vtnt-daemon.service",
        "./etc/default/vtnt",
        "./usr/share/doc/vtnt/copyright",
        "./usr/share/doc/vtnt/README.md.gz",
        "./usr/share/doc/vtnt/install.md.gz",
        "./usr/share/doc/vtnt/THIRD-PARTY-NOTICES.gz",
        "./usr/share/bash-completion/completions/vtnt",
        "./usr/share/zsh/vendor-completions/_vtnt",
        "./usr/share/fish/vendor_completions.d/vtnt.fish",
        "./usr/share/lintian/overrides/vtnt",
    ]
    .map(String::from)
    .to_vec();
    expected
        .extend(vtnt_artifacts::Artifact::ALL.map(|a| format!("./usr/lib/vtnt/{}", a.file_name())));
    // a page per subcommand, as the tree has them, compressed
    let pages = std::fs::read_dir(tree.share().join(share::MAN1)).unwrap();
    let pages: Vec<String> = pages
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        pages.len() > 30 && pages.contains(&"vtnt-trace.1".into()),
        "{pages:?}"
    );
    expected.extend(pages.iter().map(|p| format!("./usr/share/man/man1/{p}.gz")));
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

    if let Some(why) = vtnt_testkit::missing_root_or(&[
        "ip",
        "setcap",
        "setpriv",
        "systemd-analyze",
        "man",
        "bash",
        "zcat",
    ]) {
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
    let usr_share = root.join("usr/share");
    installed_pages_and_completion_work(&usr_share);
    // the notices the package carries are the tree's
    let notices = run(Command::new("zcat").arg(usr_share.join("doc/vtnt/THIRD-PARTY-NOTICES.gz")));
    let tree_notices = std::fs::read(tree.share().join(share::NOTICES)).unwrap();
    assert!(
        notices.stdout == tree_notices,
        "the package's notices differ from the tree's"
    );

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
        let bin = format!("{}/", root.join("usr/bin").display());
        let here = text.replace("/usr/bin/", &bin);
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

/// The installed man page renders (from its compressed file) and the installed bash
/// completion script completes subcommands and options.
fn installed_pages_and_completion_work(usr_share: &Path) {
    let page = usr_share.join("man/man1/vtnt-trace.1.gz");
    let out = run(Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "80"));
    let man = text(&out.stdout);
    assert!(
        out.stderr.is_empty(),
        "man -l {}: {}",
        page.display(),
        text(&out.stderr)
    );
    assert!(
        man.contains("vtnt-trace - ") && man.contains("--pps"),
        "{man}"
    );
    let script = usr_share.join("bash-completion/completions/vtnt");
    let complete = |words: &str, cword: usize| {
        let out = run(Command::new("bash").arg("-c").arg(format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _vtnt vtnt \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[@]}}\"",
            script.display()
        )));
        text(&out.stdout)
    };
    assert_eq!(complete("vtnt tr", 1).trim(), "trace");
    assert!(complete("vtnt trace --p", 2).contains("--pps"));
}

/// Every crate whose source a binary of the tree names (`NAME-VERSION/src/...`: the
/// panic locations that stay in a stripped binary, under cargo's registry or, in the
/// unikernel's images, remapped to start at the crate) is listed in the tree's notices
/// under that binary's file name. (The standard library's own dependencies, under
/// `/rust/deps/`, are the notices' "Rust's standard library".)
#[test]
fn the_notices_name_every_crate_the_tree_s_binaries_carry() {
    let Some(Package { tree, .. }) = package(vtnt_testkit::test_name!()) else {
        return;
    };
    let notices = std::fs::read_to_string(tree.share().join(share::NOTICES)).unwrap();
    // "  name version: licence [vtnt, vtnt-monitor]"
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in notices
        .lines()
        .filter(|l| l.starts_with("  ") && l.ends_with(']'))
    {
        let (Some((krate, _)), Some((_, labels))) = (line.split_once(':'), line.rsplit_once('['))
        else {
            continue;
        };
        for label in labels.trim_end_matches(']').split(", ") {
            listed
                .entry(label.to_string())
                .or_default()
                .insert(krate.trim().to_string());
        }
    }
    let lock = std::fs::read_to_string(vtnt_xtask::cargo::workspace().join("Cargo.lock")).unwrap();
    let lock = lock_packages(&lock);
    let mut checked = 0;
    for b in programs::builds() {
        for (_, program) in &b.programs {
            let bin = std::fs::read(tree.root.join(program.path())).unwrap();
            let named = crates_named_in(&bin, &lock);
            let name = program.file_name();
            let missing: Vec<&String> = named
                .iter()
                .filter(|c| !listed.get(name).is_some_and(|l| l.contains(*c)))
                .collect();
            assert!(
                missing.is_empty(),
                "{name} names crates its notices do not list under it: {missing:?}"
            );
            // the check sees something in each binary
            assert!(!named.is_empty(), "{name} names no crate's source");
            eprintln!("{name}: {} crates named, each in the notices", named.len());
            checked += 1;
        }
    }
    // every artifact of lib/vtnt, and bin/'s two commands (vtnt, vtnt-agent)
    assert_eq!(checked, vtnt_artifacts::Artifact::ALL.len() + 2);
}

/// `NAME-VERSION` -> `NAME VERSION` of every package in `Cargo.lock`.
fn lock_packages(lock: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut name = None;
    for line in lock.lines() {
        let value = |l: &str, key: &str| {
            l.strip_prefix(key)
                .map(|v| v.trim_matches([' ', '=', '"']).to_string())
        };
        if let Some(n) = value(line, "name = ") {
            name = Some(n);
        } else if let (Some(v), Some(n)) = (value(line, "version = "), name.take()) {
            out.insert(format!("{n}-{v}"), format!("{n} {v}"));
        }
    }
    out
}

/// The crates of `lock` whose source directory (`NAME-VERSION/src/`) `bin` names.
fn crates_named_in(bin: &[u8], lock: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in bin.windows(5).enumerate().filter(|(_, w)| *w == b"/src/") {
        // the word before "/src/": a crate directory, maybe glued to the string before it
        let start = bin[..i]
            .iter()
            .rposition(|b| !(b.is_ascii_alphanumeric() || b"_.-+".contains(b)))
            .map_or(0, |p| p + 1);
        // the standard library's own dependencies (`/rust/deps/miniz_oxide-0.8.9/src/`),
        // which the notices name as the standard library's
        if bin[..start].ends_with(b"/rust/deps/") {
            continue;
        }
        let Ok(word) = std::str::from_utf8(&bin[start..i]) else {
            continue;
        };
        // the longest NAME-VERSION the word ends with
        if let Some(k) = lock
            .iter()
            .filter(|(dir, _)| word.ends_with(dir.as_str()))
            .max_by_key(|(dir, _)| dir.len())
        {
            found.insert(k.1.clone());
        }
    }
    found
}
