//! The package on hardware-style KVM: a Linux guest under QEMU's TCG with AMD-V exposed
//! (`-cpu EPYC,+svm`), whose own kernel's `kvm_amd` is then the KVM (nested SVM, nested
//! paging), where this project's hosts only have PVM. The guest is Debian's kernel (the
//! full-VM runtime's cached rootfs has it and its modules: no download) with an
//! initramfs of busybox (Debian's static build), the modules KVM and TAP devices need,
//! iproute2's `ip`, and the package's files as `dpkg-deb -x` lays them out at their
//! installed paths, with the shared libraries its `vtnt` links. There, as root:
//!
//! - `kvm_amd` runs with nested paging (NPT) and `vtnt-monitor` boots the unikernel
//!   (hypercalls, exits) three times, its statistics printed (docs/benchmarks.md);
//! - `vtnt run --runtime microvm` on a TAP device picks `vtnt-monitor` by default, after
//!   checking once that it boots a test guest here (`vtnt_unikernel::monitor::boots`), and its
//!   trace of the TAP's address finds what `vtnt trace` finds natively; its report says
//!   `accelerator KVM (vtnt-monitor)`;
//! - with that check's cached answer made "no", the same run goes to QEMU instead (which
//!   the guest lacks, so it fails saying so): the default is the check's.
//!
//! An initramfs rather than a Debian root: no block device, initrd or systemd to boot
//! under TCG (the whole guest takes ~10 s), and the package's maintainer scripts are the
//! clean-root test's; what is new here is the KVM under the package's binaries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{package, run, text, Dir};

/// The modules loaded, each after its dependencies (`modules.dep`).
const MODULES: [&str; 2] = ["kvm-amd", "tun"];
/// The guest's TAP device: its address (the gateway) and the microVM's.
const GATEWAY: &str = "192.0.2.1";
const GUEST: &str = "192.0.2.2/24";
/// How long the guest may take (it takes ~10 s on an idle 2-core host).
const TIMEOUT: Duration = Duration::from_secs(180);

/// What the guest runs: each step's exit status, stdout and stderr on its second serial
/// port, between `== NAME exit=N`, `-- stdout` and `-- stderr` lines.
const STEPS: &str = r#"
step() {
  name=$1; shift
  "$@" > /tmp/out 2> /tmp/err; code=$?
  echo "== $name exit=$code"
  echo "-- stdout"; cat /tmp/out
  echo "-- stderr"; cat /tmp/err
}
for m in $MODULES; do step "insmod-$m" insmod /lib/modules/$m.ko; done
mount -t tmpfs cgroup /sys/fs/cgroup
for c in memory cpu cpuacct cpuset; do
  mkdir /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
done
/usr/sbin/ip link set lo up
step npt cat /sys/module/kvm_amd/parameters/npt
step tap sh -c "/usr/sbin/ip tuntap add dev vtap0 mode tap && /usr/sbin/ip addr add $GATEWAY/24 dev vtap0 && /usr/sbin/ip link set vtap0 up"
for i in 1 2 3; do
  step monitor-$i /usr/lib/vtnt/vtnt-monitor --stats --cmdline "-- boot" /usr/lib/vtnt/vtnt-unikernel.elf
done
step native vtnt trace --quiet $GATEWAY
step microvm vtnt run --runtime microvm --net tap:vtap0,ip=$GUEST,gw=$GATEWAY -- trace $GATEWAY
step checked cat /tmp/vtnt-monitor-boots
echo "$(cat /proc/sys/kernel/random/boot_id) no" > /tmp/vtnt-monitor-boots
step fallback vtnt run --runtime microvm --net tap:vtap0,ip=$GUEST,gw=$GATEWAY -- trace $GATEWAY
echo "== done exit=0"
"#;

/// PID 1: mounts, then the steps in a child shell (the monitor refuses a parent that is
/// PID 1: it takes it for its starter gone), then power off.
const INIT: &str = "#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
sh /steps.sh > /dev/ttyS1 2>&1
poweroff -f
";

/// One step's result.
#[derive(Debug, Default)]
struct Step {
    exit: i32,
    stdout: String,
    stderr: String,
}

#[test]
fn the_package_runs_microvms_under_vtnt_monitor_on_hardware_style_kvm() {
    let test = vtnt_testkit::test_name!();
    let tools = ["qemu-system-x86_64", "busybox", "debootstrap", "ldd", "ip"];
    if let Some(why) = vtnt_testkit::missing_root_or(&tools) {
        vtnt_testkit::skip_or_fail(test, &why, None);
        return;
    }
    let Some(pkg) = package(test) else { return };
    let rootfs = vtnt_runtimes::debian::vm_rootfs(false)
        .unwrap_or_else(|e| panic!("{:#}", anyhow::Error::new(e)));
    let dir = Dir::new("nested");
    let started = Instant::now();
    let kernel = initramfs(
        &pkg.deb,
        &rootfs,
        &dir.0.join("root"),
        &dir.0.join("initrd"),
    );
    let made = started.elapsed();
    let out = boot(&kernel, &dir.0.join("initrd"), &dir.0);
    let steps = parse(&out);
    eprintln!(
        "nested KVM: initramfs {made:?}, the guest {:?} ({})",
        started.elapsed() - made,
        kernel.display()
    );
    let step = |name: &str| -> &Step {
        steps
            .get(name)
            .unwrap_or_else(|| panic!("the guest did not run {name}:\n{out}"))
    };
    for m in MODULES {
        assert_eq!(step(&format!("insmod-{m}")).exit, 0, "insmod {m}:\n{out}");
    }
    assert_eq!(step("tap").exit, 0, "the TAP device:\n{out}");
    // kvm_amd runs its guests with nested paging (NPT), as on an AMD host
    assert!(
        ["Y", "1"].contains(&step("npt").stdout.trim()),
        "kvm_amd's npt:\n{out}"
    );

    // (a) the monitor boots the unikernel on this KVM
    for i in 1..=3 {
        let s = step(&format!("monitor-{i}"));
        assert_eq!(s.exit, 0, "vtnt-monitor:\n{out}");
        assert!(s.stdout.contains("\"reason\":\"ok\""), "{}", s.stdout);
        let stats = s
            .stderr
            .lines()
            .find(|l| l.starts_with("{\"type\":\"monitor\""))
            .unwrap_or_else(|| panic!("no statistics line:\n{}", s.stderr));
        eprintln!("nested KVM: vtnt-monitor boot {i}: {stats}");
    }

    // (b, c) vtnt run picks the monitor by default, on KVM, and traces as natively
    let native = step("native");
    let vm = step("microvm");
    assert_eq!(native.exit, 0, "native trace:\n{out}");
    assert_eq!(vm.exit, 0, "microvm run:\n{out}");
    assert!(
        vm.stderr.contains("accelerator KVM (vtnt-monitor)"),
        "{}",
        vm.stderr
    );
    let (n, v) = (path(&native.stdout), path(&vm.stdout));
    assert_eq!(n, v, "the microVM's trace differs from the native one");
    assert_eq!(n.0, "COMPLETED");
    assert_eq!(n.1, [(GATEWAY.to_string(), 1, 3, 3)]);
    // the monitor was checked once on this (non-PVM) KVM, and passed
    assert!(step("checked").stdout.trim().ends_with(" yes"), "{out}");
    // and with that check's answer "no", QEMU is the VMM
    let fallback = step("fallback");
    assert_ne!(fallback.exit, 0);
    assert!(
        fallback.stderr.contains("qemu-system-x86_64: not found"),
        "{}",
        fallback.stderr
    );
}

/// A trace's stop reason and its hops' (address, probe TTL, ICMP type, ICMP code).
type TracePath = (String, Vec<(String, u64, u64, u64)>);

fn path(stdout: &str) -> TracePath {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("{\"type\":\"trace\""))
        .unwrap_or_else(|| panic!("no trace record in:\n{stdout}"));
    let t: serde_json::Value = serde_json::from_str(line).unwrap();
    let hops = t["hops"].as_array().cloned().unwrap_or_default();
    let n = |h: &serde_json::Value, k: &str| h[k].as_u64().unwrap_or(u64::MAX);
    let hops = hops
        .iter()
        .map(|h| {
            let addr = h["addr"].as_str().unwrap_or_default().to_string();
            (
                addr,
                n(h, "probe_ttl"),
                n(h, "icmp_type"),
                n(h, "icmp_code"),
            )
        })
        .collect();
    (t["stop_reason"].as_str().unwrap_or_default().into(), hops)
}

/// Lays out the guest's root at `root` and packs it into `initrd` (newc cpio, as the
/// kernel unpacks it); returns the kernel to boot.
fn initramfs(deb: &Path, rootfs: &Path, root: &Path, initrd: &Path) -> PathBuf {
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(root));
    for d in ["bin", "proc", "sys", "dev", "tmp", "lib/modules"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let busybox = vtnt_netns::which("busybox").unwrap();
    let bytes = std::fs::read(&busybox).unwrap();
    if let Err(e) = vtnt_artifacts::elf::check(&bytes) {
        panic!(
            "{} is {e}: the guest needs Debian's busybox-static",
            busybox.display()
        );
    }
    put(&root.join("bin/busybox"), &bytes, 0o755);
    // iproute2's ip (vtnt reads `ip -j`), at the front of the guest's PATH
    let ip = vtnt_netns::which("ip").unwrap();
    let ip_bytes = std::fs::read(&ip).unwrap();
    put(&root.join("usr/sbin/ip"), &ip_bytes, 0o755);
    for program in [root.join("usr/bin/vtnt"), ip] {
        vtnt_runtimes::debian::add_libraries(&program, root)
            .unwrap_or_else(|e| panic!("{:#}", anyhow::Error::new(e)));
    }
    let (kernel, modules) = kernel_and_modules(rootfs);
    let mut names = Vec::new();
    for m in modules {
        let name = m.file_stem().unwrap().to_string_lossy().into_owned();
        std::fs::copy(&m, root.join(format!("lib/modules/{name}.ko"))).unwrap();
        names.push(name);
    }
    let steps = STEPS
        .replace("$MODULES", &names.join(" "))
        .replace("$GATEWAY", GATEWAY)
        .replace("$GUEST", GUEST);
    put(&root.join("steps.sh"), steps.as_bytes(), 0o644);
    put(&root.join("init"), INIT.as_bytes(), 0o755);
    let list = run(Command::new("find").arg(".").current_dir(root)).stdout;
    let mut cpio = Command::new("busybox")
        .args(["cpio", "-o", "-H", "newc", "-R", "0:0"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(initrd).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut cpio.stdin.take().unwrap(), &list).unwrap();
    assert!(cpio.wait().unwrap().success(), "busybox cpio");
    kernel
}

fn put(path: &Path, bytes: &[u8], mode: u32) {
    vtnt_runtimes::debian::put_file(path, bytes, mode)
        .unwrap_or_else(|e| panic!("{:#}", anyhow::Error::new(e)));
}

/// The rootfs's kernel and the modules [`MODULES`] need, each after what it depends on.
fn kernel_and_modules(rootfs: &Path) -> (PathBuf, Vec<PathBuf>) {
    let boot = std::fs::read_dir(rootfs.join("boot")).unwrap();
    let kernel = boot
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("vmlinuz-")
        })
        .unwrap_or_else(|| panic!("no vmlinuz-* in {}/boot", rootfs.display()));
    let version = kernel.file_name().unwrap().to_string_lossy()["vmlinuz-".len()..].to_string();
    let dir = rootfs.join("lib/modules").join(version);
    let dep = std::fs::read_to_string(dir.join("modules.dep")).unwrap();
    let mut order: Vec<PathBuf> = Vec::new();
    for want in MODULES {
        let line = dep
            .lines()
            .find(|l| {
                l.split(':')
                    .next()
                    .is_some_and(|m| m.ends_with(&format!("/{want}.ko")))
            })
            .unwrap_or_else(|| panic!("{want}.ko is not in {}/modules.dep", dir.display()));
        let (module, deps) = line.split_once(':').unwrap();
        // modules.dep lists a module's dependencies so that they load last to first
        for m in deps.split_whitespace().rev().chain([module]) {
            let p = dir.join(m);
            if !order.contains(&p) {
                order.push(p);
            }
        }
    }
    (kernel, order)
}

/// Boots the guest and returns what it wrote on its second serial port.
fn boot(kernel: &Path, initrd: &Path, dir: &Path) -> String {
    let (console, results) = (dir.join("console.log"), dir.join("results.log"));
    let mut qemu = Command::new("qemu-system-x86_64")
        .args([
            "-accel",
            "tcg",
            "-cpu",
            "EPYC,+svm",
            "-m",
            "1024",
            "-smp",
            "1",
        ])
        .args([
            "-nodefaults",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-serial")
        .arg(format!("file:{}", results.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting qemu-system-x86_64");
    let started = Instant::now();
    let status = loop {
        if let Some(st) = qemu.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > TIMEOUT {
            let _ = qemu.kill();
            let _ = qemu.wait();
            panic!(
                "the guest ran past {TIMEOUT:?}; its console:\n{}\nits steps:\n{}",
                read(&console),
                read(&results)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut qemu.stderr.take().unwrap(), &mut err);
    let out = read(&results);
    assert!(
        status.success() && out.contains("== done"),
        "qemu {status}: {err}\nthe guest's console:\n{}\nits steps:\n{out}",
        read(&console)
    );
    out
}

/// A file the guest wrote through a serial port (its line ends are `\r\n`).
fn read(p: &Path) -> String {
    text(&std::fs::read(p).unwrap_or_default()).replace('\r', "")
}

/// The steps by name.
fn parse(out: &str) -> BTreeMap<String, Step> {
    let mut steps = BTreeMap::new();
    let mut current: Option<(String, Step, u8)> = None;
    for line in out.lines() {
        if let Some((name, exit)) = line
            .strip_prefix("== ")
            .and_then(|l| l.rsplit_once(" exit="))
        {
            if let Some((n, s, _)) = current.take() {
                steps.insert(n, s);
            }
            let exit = exit.parse().unwrap_or(-1);
            current = Some((
                name.to_string(),
                Step {
                    exit,
                    ..Default::default()
                },
                0,
            ));
        } else if let Some((_, s, part)) = current.as_mut() {
            match line {
                "-- stdout" => *part = 1,
                "-- stderr" => *part = 2,
                _ if *part == 1 => s.stdout += &format!("{line}\n"),
                _ if *part == 2 => s.stderr += &format!("{line}\n"),
                _ => {}
            }
        }
    }
    if let Some((n, s, _)) = current {
        steps.insert(n, s);
    }
    steps
}
