//! The unikernel on the emulated MPLS Internet (`vtnt lab`): trace, ping and TNT jobs run
//! in a microVM (QEMU, KVM where it works, else TCG) attached to the lab's VM front must give the results the
//! native `vtnt` gives from inside the lab's namespace: the same hops, labels, quoted
//! TTLs and TNT annotations; RTTs, timestamps, IP IDs and the source address aside. A
//! guest whose address the lab's VM front leases by DHCP (`ip=dhcp`) gets the results a
//! statically addressed one gets, from its leased address.
//!
//! Needs root, qemu-system-x86_64 and iproute2 (skipped through vtnt-testkit
//! otherwise). Builds the native `vtnt` and the unikernel with cargo (the workspace's
//! `CARGO_TARGET_DIR`, through `vtnt-xtask`), boots the latter under the installed
//! `vtnt-monitor` (`cargo xtask dist`), starts its own lab under a unique name and always
//! takes it down. VMs run one at a time.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde_json::Value;
use vtnt_unikernel::accel;
use vtnt_unikernel::launch::{run_job, JobNet, RunOutcome, RunSpec, Vmm};
use vtnt_unikernel::qemu::{Accel, Machine};
use vtnt_unikernel::GuestStatus;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The native `vtnt`, built once per test binary.
fn vtnt() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = vtnt_xtask::cargo::command()
            .args(["build", "-p", "vtnt"])
            .output()
            .expect("running cargo");
        let bin = vtnt_xtask::cargo::target_dir().join("debug").join("vtnt");
        if !out.status.success() {
            // A workspace mid-edit elsewhere must not hide this crate's results.
            assert!(
                bin.is_file(),
                "cargo build -p vtnt:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!(
                "WARNING: cargo build -p vtnt failed; using the existing {}",
                bin.display()
            );
        }
        bin
    })
}

fn image() -> &'static vtnt_xtask::kernel::Image {
    static IMAGE: OnceLock<vtnt_xtask::kernel::Image> = OnceLock::new();
    IMAGE.get_or_init(|| vtnt_xtask::kernel::build(&[]).unwrap_or_else(|e| panic!("{e:#}")))
}

/// A lab of our own, taken down on drop.
struct Lab {
    name: String,
}

impl Lab {
    fn up(tag: &str) -> Lab {
        let name = format!("vtk-{tag}-{}", std::process::id());
        let out = Command::new(vtnt())
            .args(["lab", "up", "--name", &name])
            .output()
            .expect("vtnt lab up");
        let lab = Lab { name };
        assert!(
            out.status.success(),
            "vtnt lab up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    /// `vtnt <words>` inside the lab: its stdout lines.
    fn native(&self, words: &str) -> Vec<String> {
        let mut args = vec!["lab", "exec", "--name", &self.name, "--"];
        let bin = vtnt().display().to_string();
        args.push(&bin);
        args.extend(words.split_whitespace());
        let out = Command::new(vtnt())
            .args(&args)
            .output()
            .expect("vtnt lab exec");
        assert!(
            out.status.success(),
            "native vtnt {words}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }

    /// Destinations the truth reaches over more than one (ECMP) path, with the routers'
    /// addresses at each TTL of every path.
    fn ecmp(&self) -> Vec<(String, Vec<Vec<String>>)> {
        let out = Command::new(vtnt())
            .args(["lab", "truth", "--json", "--name", &self.name])
            .output()
            .expect("vtnt lab truth");
        let truth: Value = serde_json::from_slice(&out.stdout).expect("truth JSON");
        let mut v = Vec::new();
        for d in truth["destinations"].as_array().into_iter().flatten() {
            let paths = d["forward_paths"].as_array().cloned().unwrap_or_default();
            if paths.len() < 2 {
                continue;
            }
            let mut by_ttl: Vec<Vec<String>> = Vec::new();
            for p in &paths {
                for (i, hop) in p.as_array().into_iter().flatten().enumerate() {
                    if by_ttl.len() <= i {
                        by_ttl.push(Vec::new());
                    }
                    by_ttl[i].push(hop["addr"].as_str().unwrap_or("").to_string());
                }
            }
            v.push((d["dst"].as_str().unwrap_or("").to_string(), by_ttl));
        }
        v
    }

    /// The job `spec` in a microVM on the lab, with the first free slot's static address,
    /// under the default VMM (the monitor wherever KVM works: checked).
    fn vm(&self, spec: &str, memory_mib: u32) -> RunOutcome {
        self.vm_with(spec, memory_mib, false, Accel::Auto, Vmm::Auto)
    }

    /// The job `spec` in a microVM on the lab under `vmm` and `accel`, its address leased
    /// by DHCP if `dhcp`.
    fn vm_with(
        &self,
        spec: &str,
        memory_mib: u32,
        dhcp: bool,
        accel: Accel,
        vmm: Vmm,
    ) -> RunOutcome {
        let _guard = serial();
        let mut run = RunSpec::new(
            vtnt_jobspec::decode(spec).unwrap_or_else(|e| panic!("{spec}: {e}")),
            JobNet::Lab {
                name: self.name.clone(),
            },
        );
        run.accel = accel;
        run.vmm = vmm;
        run.machine = Machine::Microvm;
        run.memory_mib = memory_mib;
        run.timeout = Duration::from_secs(120);
        run.image = Some(image().path.clone());
        run.dhcp = dhcp;
        run.hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string());
        let out = run_job(&run).unwrap_or_else(|e| panic!("{e}"));
        if vmm == Vmm::Auto && accel == Accel::Auto && accel::kvm_kind().is_some() {
            assert_eq!(
                out.vmm,
                Vmm::Monitor,
                "KVM works here, so the default VMM must be vtnt-monitor (installed by \
                 `cargo xtask dist`)"
            );
        }
        assert_eq!(
            out.status,
            GuestStatus::Exited(0),
            "{spec}:\n{}\n{}\n{}",
            out.diagnostics.join("\n"),
            out.json_lines.join("\n"),
            out.vmm_stderr
        );
        out
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(vtnt())
            .args(["lab", "down", "--name", &self.name])
            .output();
    }
}

/// Removes what legitimately differs between two runs: times, RTTs, IP IDs, the source.
fn normalise(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in [
                "src",
                "start",
                "start_time",
                "stop_time",
                "tx",
                "rx",
                "rtt",
                "rtt_us",
                "reply_ipid",
                "min",
                "max",
                "avg",
                "stddev",
            ] {
                m.remove(k);
            }
            m.values_mut().for_each(normalise);
        }
        Value::Array(a) => a.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// The objects of a result stream, normalised, traces and pings sorted by destination.
fn objects(lines: &[String]) -> Vec<Value> {
    let mut v: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    v.iter_mut().for_each(normalise);
    let key = |o: &Value| {
        (
            o["type"] != "cycle-start",
            o["type"] == "cycle-stop",
            o["dst"].to_string(),
            o["userid"].to_string(),
        )
    };
    v.sort_by_key(key);
    v
}

/// Where the lab balances load (ECMP), the path depends on the source address, which
/// differs between the namespace (the vantage point) and the guest: there each hop must
/// lie on one of the truth's paths, and the rest of the object must agree.
fn ecmp_aside(objs: &mut [Value], ecmp: &[(String, Vec<Vec<String>>)], who: &str) {
    for o in objs.iter_mut() {
        let Some((dst, by_ttl)) = ecmp.iter().find(|(d, _)| o["dst"] == d.as_str()) else {
            continue;
        };
        for h in o["hops"].as_array().into_iter().flatten() {
            let ttl = h["probe_ttl"].as_u64().unwrap_or(0) as usize;
            let addr = h["addr"].as_str().unwrap_or("");
            let on_path = addr == dst
                || by_ttl
                    .get(ttl.wrapping_sub(1))
                    .is_some_and(|a| a.iter().any(|x| x == addr));
            assert!(
                on_path,
                "{who}: {addr} at TTL {ttl} towards {dst} is on no path of the truth"
            );
        }
        if let Value::Object(m) = o {
            m.remove("hops");
            m.remove("tnt");
        }
    }
}

fn assert_same(
    native: &[String],
    vm: &RunOutcome,
    what: &str,
    ecmp: &[(String, Vec<Vec<String>>)],
) {
    let (mut a, mut b) = (objects(native), objects(&vm.json_lines));
    ecmp_aside(&mut a, ecmp, "native");
    ecmp_aside(&mut b, ecmp, "microVM");
    assert_eq!(
        a.len(),
        b.len(),
        "{what}: native\n{}\nvm\n{}",
        native.join("\n"),
        vm.json_lines.join("\n")
    );
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y, "{what}: native vs microVM differ");
    }
    // Field order too (both come from the same writer): the object headers' keys.
    let headers = |lines: &[String]| {
        let mut v: Vec<Vec<String>> = lines
            .iter()
            .map(|l| {
                let head = l.split("\"hops\"").next().unwrap_or("");
                head.split('"')
                    .skip(1)
                    .step_by(2)
                    .filter(|k| head.contains(&format!("\"{k}\":")))
                    .map(String::from)
                    .collect()
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(
        headers(native),
        headers(&vm.json_lines),
        "{what}: key order"
    );
}

#[test]
fn trace_ping_and_tnt_on_the_lab_equal_native() {
    vtnt_testkit::require_root!(vtnt_unikernel::qemu::QEMU, "ip");
    let lab = Lab::up("eq");
    let dsts =
        "203.0.113.2 203.0.113.10 203.0.113.18 203.0.113.26 203.0.113.34 203.0.113.42 203.0.113.50";
    let list = dsts.replace(' ', ",");
    let ecmp = lab.ecmp();

    let native = lab.native(&format!("trace -P icmp-paris -q 1 -w 1 --seed 3 {dsts}"));
    let vm = lab.vm(&format!("vtnt-job=1 kind=trace trace.method=icmp-paris trace.attempts=1 trace.wait=1s seed=3 targets={list}"), 16);
    assert!(
        vm.json_lines.iter().any(|l| l.contains("\"mpls_labels\"")),
        "labels seen:\n{}",
        vm.json_lines.join("\n")
    );
    assert_same(&native, &vm, "trace", &ecmp);
    assert!(vm.timings.guest_first_probe_us.is_some_and(|t| t > 0));
    assert!(vm.timings.spawn_to_first_probe.is_some());

    let native = lab.native("ping -c 3 -i 0.1 --seed 5 203.0.113.10 192.0.2.1");
    let vm = lab.vm("vtnt-job=1 kind=ping ping.count=3 ping.interval=100ms seed=5 targets=203.0.113.10,192.0.2.1", 16);
    assert_same(&native, &vm, "ping", &ecmp);

    // TNT over both families: two destinations' IPv6 twins beside the IPv4 ones (the
    // guest takes its slot's twin, `ip6=`), under each VMM
    let dsts46 = format!("{dsts} 2001:db8:64::cb00:710a 2001:db8:64::cb00:7122");
    let native = lab.native(&format!("tnt --seed 9 {dsts46}"));
    let tnt = format!(
        "vtnt-job=1 kind=tnt seed=9 targets={}",
        dsts46.replace(' ', ",")
    );
    // Under vtnt-monitor where KVM works (said loudly where it does not), and under QEMU
    // with TCG so that both boot paths (hvt and PVH) stay covered.
    let mut passes = vec![(Vmm::Qemu, Accel::Tcg)];
    match vtnt_testkit::missing_kvm() {
        None => passes.insert(0, (Vmm::Monitor, Accel::Auto)),
        Some(why) => vtnt_testkit::skip_or_fail(
            "trace_ping_and_tnt_on_the_lab_equal_native (the monitor's pass)",
            &why,
            Some(vtnt_testkit::Allowed::NoKvm),
        ),
    }
    // The initial traces compare; which hops are pinged and traced to depends on the
    // paths, which ECMP makes differ between the two sources: those records must be there.
    let initial = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| {
                !l.contains(", \"tnt\":{\"role\":\"ping\"")
                    && !l.contains(", \"tnt\":{\"role\":\"reveal\"")
            })
            .cloned()
            .collect()
    };
    for (vmm, accel) in passes {
        let mut vm = lab.vm_with(&tnt, 16, false, accel, vmm);
        for role in ["initial", "ping", "reveal"] {
            assert!(
                vm.json_lines
                    .iter()
                    .any(|l| l.contains(&format!(", \"tnt\":{{\"role\":\"{role}\""))),
                "{role} records:\n{}",
                vm.json_lines.join("\n")
            );
        }
        vm.json_lines = initial(&vm.json_lines);
        assert_same(
            &initial(&native),
            &vm,
            &format!("tnt under {}", vm.vmm.name()),
            &ecmp,
        );
    }
}

#[test]
fn long_target_lists_travel_as_a_boot_module() {
    vtnt_testkit::require_root!(vtnt_unikernel::qemu::QEMU, "ip");
    let lab = Lab::up("mod");
    let dsts: Vec<String> = (0..21)
        .map(|i| format!("203.0.113.{}", 2 + 8 * (i % 7)))
        .collect();
    let vm = lab.vm(
        &format!(
            "vtnt-job=1 kind=ping ping.count=1 pps=200 targets={}",
            dsts.join(",")
        ),
        16,
    );
    assert!(vm.cmdline.ends_with("targets=@module"), "{}", vm.cmdline);
    let pings = vm
        .json_lines
        .iter()
        .filter(|l| l.starts_with("{\"type\":\"ping\""))
        .count();
    assert_eq!(pings, 21, "{}", vm.json_lines.join("\n"));
}

#[test]
fn tnt_completes_in_2_mib_under_the_monitor() {
    vtnt_testkit::require_root!("ip");
    vtnt_testkit::require_kvm!();
    tnt_completes_in(&Lab::up("ram2"), 2, Vmm::Monitor);
}

/// A two-target TNT job completes in `mib` of guest memory under `vmm`.
fn tnt_completes_in(lab: &Lab, mib: u32, vmm: Vmm) {
    let job = "vtnt-job=1 kind=tnt targets=203.0.113.26,203.0.113.42";
    let vm = lab.vm_with(job, mib, false, Accel::Auto, vmm);
    let traces = vm
        .json_lines
        .iter()
        .filter(|l| l.contains(", \"tnt\":{\"role\":\"initial\""))
        .count();
    assert_eq!(traces, 2, "{} MiB under {}", mib, vm.vmm.name());
}

#[test]
fn tnt_completes_in_4_mib_under_qemu() {
    vtnt_testkit::require_root!(vtnt_unikernel::qemu::QEMU, "ip");
    tnt_completes_in(&Lab::up("ram"), 4, Vmm::Qemu);
}

#[test]
fn ping_with_a_dhcp_lease_equals_ping_with_a_static_address() {
    vtnt_testkit::require_root!(vtnt_unikernel::qemu::QEMU, "ip");
    let lab = Lab::up("dhcp");
    // an IPv6 target too: the leased guest takes the twin of its lease by DHCPv6
    // (`ip6=auto`, the front's RA says M=1), the static one its slot's twin
    let job = "vtnt-job=1 kind=ping ping.count=3 ping.interval=100ms seed=5 targets=203.0.113.10,192.0.2.1,2001:db8:64::cb00:710a";
    let fixed = lab.vm(job, 16);
    let leased = lab.vm_with(job, 16, true, Accel::Auto, Vmm::Auto);
    assert!(
        leased.cmdline.contains(" ip=dhcp ip6=auto ") && !leased.cmdline.contains("gw="),
        "{}",
        leased.cmdline
    );
    let ip6 = leased
        .diagnostics
        .iter()
        .find(|l| l.starts_with("{\"type\":\"ip6\""))
        .unwrap_or_else(|| panic!("no ip6 line:\n{}", leased.diagnostics.join("\n")));
    let ip6: Value = serde_json::from_str(ip6).expect("ip6 line is JSON");
    assert_eq!(
        ip6["ip"], "2001:db8:64::c000:282/120",
        "the lease's twin: {ip6}"
    );
    assert_eq!(ip6["how"], "dhcpv6", "{ip6}");
    let dhcp = leased
        .diagnostics
        .iter()
        .find(|l| l.starts_with("{\"type\":\"dhcp\""))
        .unwrap_or_else(|| panic!("no dhcp line:\n{}", leased.diagnostics.join("\n")));
    let lease: Value = serde_json::from_str(dhcp).expect("dhcp line is JSON");
    // The first address of the lab's pool (docs/lab.md), the lab's gateway as router.
    assert_eq!(lease["ip"], "192.0.2.130/24", "{dhcp}");
    assert_eq!(lease["gw"], "192.0.2.1", "{dhcp}");
    assert_eq!(lease["server"], "192.0.2.1", "{dhcp}");
    let srcs = |out: &RunOutcome| -> Vec<String> {
        out.json_lines
            .iter()
            .filter(|l| l.starts_with("{\"type\":\"ping\""))
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("JSON")["src"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    };
    let twin = "2001:db8:64::c000:20a";
    assert_eq!(srcs(&fixed), ["192.0.2.10", "192.0.2.10", twin]);
    assert_eq!(
        srcs(&leased),
        ["192.0.2.130", "192.0.2.130", "2001:db8:64::c000:282"]
    );
    let (a, b) = (objects(&fixed.json_lines), objects(&leased.json_lines));
    assert_eq!(
        a,
        b,
        "static vs DHCP:\n{}\n{}",
        fixed.json_lines.join("\n"),
        leased.json_lines.join("\n")
    );
    for o in &b[1..b.len() - 1] {
        assert_eq!(o["statistics"]["replies"], 3, "{o}");
    }
}

#[test]
fn vms_started_together_hold_different_slots() {
    vtnt_testkit::require_root!("ip");
    let lab = Lab::up("slots");
    let (a, held_a) = vtnt_unikernel::lab::free_slot(&lab.name).expect("a slot");
    let (b, _held_b) = vtnt_unikernel::lab::free_slot(&lab.name).expect("a second slot");
    assert_ne!(a.address, b.address);
    assert_ne!(a.local, b.local);
    drop(held_a);
    let (c, _held_c) = vtnt_unikernel::lab::free_slot(&lab.name).expect("the first slot again");
    assert_eq!(c.address, a.address);
}
