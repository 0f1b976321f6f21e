//! The unikernel booted for real under QEMU, with the accelerator `vtnt_unikernel::accel`
//! picks (KVM where our image boots under it, of either kind, else TCG), plus one boot
//! forced onto TCG so both paths stay covered: on microvm, q35 and pc; its error paths
//! (malformed command line, malformed job spec, no NIC, no ARP answer, no DHCP answer,
//! watchdog); and a
//! ping job end to end over a TAP device in a network namespace created (and deleted) by
//! the test, printed as scamper JSON. (Trace, ping and TNT against the lab: tests/lab.rs.)
//!
//! Needs qemu-system-x86_64 (skipped through vtnt-testkit when missing) and, for the
//! network tests, root and iproute2. Every packet stays in the test's own namespace
//! (192.0.2.0/24). VMs run one at a time (TCG is CPU-hungry), with generous timeouts.
//! Each boot test prints the accelerator it ran under.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use vtnt_unikernel::accel::{self, Accelerator};
use vtnt_unikernel::netns::{self, NetNs};
use vtnt_unikernel::qemu::{self, Accel, Machine, NetBackend, VmConfig};
use vtnt_unikernel::{GuestStatus, Outcome};
use vtnt_xtask::kernel::{self, Image};

const GUEST_NET: &str = "ip=192.0.2.10/24 gw=192.0.2.1";

/// The image, built once per test binary (the kernel as it is in this checkout, through
/// `vtnt-xtask`); `None` (the test skips, through vtnt-testkit)
/// when QEMU is missing.
fn image() -> Option<&'static Image> {
    if let Some(why) = vtnt_testkit::missing_tools(&[qemu::QEMU]) {
        let current = std::thread::current();
        vtnt_testkit::skip_or_fail(current.name().unwrap_or("qemu"), &why, None);
        return None;
    }
    static IMAGE: OnceLock<Image> = OnceLock::new();
    Some(IMAGE.get_or_init(|| kernel::build(&[]).unwrap_or_else(|e| panic!("{e:#}"))))
}

/// One VM at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn vm(img: &Image, machine: Machine, cmdline: &str) -> VmConfig {
    let mut cfg = VmConfig::new(img.path.clone(), machine, cmdline);
    cfg.accel = Accel::Auto;
    cfg.timeout = Duration::from_secs(60);
    cfg
}

fn run(cfg: &VmConfig) -> Outcome {
    let _guard = serial();
    qemu::run(cfg).unwrap_or_else(|e| panic!("{e}"))
}

fn boot_on(machine: Machine, accel: Accel) -> Option<Outcome> {
    let img = image()?;
    let mut cfg = vm(img, machine, "console=ttyS0 -- boot");
    cfg.accel = accel;
    let out = run(&cfg);
    eprintln!("{}: booted under {}", machine.name(), out.accel);
    let console = out.console();
    assert!(
        out.line_with("vtnt-kernel 0.1.0 booting (pvh").is_some(),
        "no banner:\n{console}"
    );
    assert!(
        out.json_u64("boot", "tsc_hz")
            .is_some_and(|hz| hz > 1_000_000),
        "no clock:\n{console}"
    );
    assert!(
        out.json_u64("ready", "ready_us").is_some(),
        "no ready line:\n{console}"
    );
    assert_eq!(
        out.status,
        GuestStatus::Exited(0),
        "{console}\n{}",
        out.stderr
    );
    assert_eq!(out.vmm_code, Some(1), "QEMU status is (0 << 1) | 1");
    Some(out)
}

/// The stripped image stays within its budget (`IMAGE_BUDGET`, docs/benchmarks.md,
/// "Unikernel budgets"): it had grown past it unnoticed when only the benchmark looked.
#[test]
fn the_stripped_image_fits_its_budget() {
    let Some(img) = image() else { return };
    let budget = vtnt_unikernel::image::IMAGE_BUDGET;
    assert!(
        img.size <= budget,
        "the stripped image is {} bytes, over its {budget}",
        img.size
    );
}

#[test]
fn boots_on_microvm() {
    boot_on(Machine::Microvm, Accel::Auto);
}

#[test]
fn boots_on_q35() {
    boot_on(Machine::Q35, Accel::Auto);
}

#[test]
fn boots_on_pc() {
    boot_on(Machine::Pc, Accel::Auto);
}

#[test]
fn boots_under_tcg_when_forced() {
    if let Some(out) = boot_on(Machine::Microvm, Accel::Tcg) {
        assert_eq!(out.accel, Accelerator::Tcg);
    }
}

/// On a host with KVM the unikernel boots under it, with the CPU model of the host's
/// kind (`-cpu host` on VMX/SVM, `host,-arch-capabilities` under PVM).
#[test]
fn boots_under_kvm_where_the_host_has_it() {
    vtnt_testkit::require_kvm!();
    let Some(kind) = accel::kvm_kind() else {
        return;
    };
    if let Some(out) = boot_on(Machine::Microvm, Accel::Kvm) {
        assert_eq!(out.accel, kind);
        assert!(out.accel.is_kvm());
        assert!(
            qemu::probe(&image().expect("built above").path, kind),
            "the probe disagrees with the boot"
        );
    }
}

#[test]
fn boots_under_firecracker_where_it_is_installed() {
    vtnt_testkit::skip_if!(
        vtnt_unikernel::firecracker::binary()
            .is_none()
            .then(|| "no `firecracker` binary on PATH".to_string()),
        Some(vtnt_testkit::Allowed::NoFirecracker)
    );
    vtnt_testkit::require_kvm!();
    let Some(img) = image() else { return };
    let out = vtnt_unikernel::firecracker::run(&vtnt_unikernel::firecracker::FcConfig::new(
        img.path.clone(),
        "-- boot",
    ))
    .expect("firecracker runs");
    assert_eq!(out.status, GuestStatus::Exited(0), "{}", out.console());
}

#[test]
fn boots_in_4_mib() {
    let Some(img) = image() else { return };
    let mut cfg = vm(img, Machine::Microvm, "-- boot");
    cfg.memory_mib = 4;
    let out = run(&cfg);
    assert_eq!(out.status, GuestStatus::Exited(0), "{}", out.console());
}

#[test]
fn malformed_cmdline_is_an_error() {
    let Some(img) = image() else { return };
    let out = run(&vm(
        img,
        Machine::Microvm,
        "ip=banana -- vtnt-job=1 kind=ping targets=192.0.2.1",
    ));
    assert!(
        out.line_with("vtnt: error: command line: bad option `ip=banana`")
            .is_some(),
        "{}",
        out.console()
    );
    assert_eq!(out.status, GuestStatus::Exited(2));
    assert_eq!(out.vmm_code, Some(5));
}

#[test]
fn malformed_job_spec_is_an_error() {
    let Some(img) = image() else { return };
    let cases = [
        (
            "-- frobnicate 192.0.2.1",
            "vtnt: error: job spec must start with `vtnt-job=1`",
        ),
        (
            "-- vtnt-job=1 kind=trace trace.wait=5 targets=192.0.2.1",
            "vtnt: error: job spec: key `trace.wait`: `5` is not a duration",
        ),
        (
            "-- vtnt-job=1 kind=ping targets=@module",
            "vtnt: error: job spec says targets=@module but no boot module was given",
        ),
    ];
    for (cmdline, error) in cases {
        let out = run(&vm(img, Machine::Microvm, cmdline));
        assert!(
            out.line_with(error).is_some(),
            "{cmdline}:\n{}",
            out.console()
        );
        assert_eq!(out.status, GuestStatus::Exited(2), "{cmdline}");
    }
}

#[test]
fn missing_nic_is_an_error() {
    let Some(img) = image() else { return };
    for machine in [Machine::Microvm, Machine::Q35] {
        let out = run(&vm(
            img,
            machine,
            &format!("{GUEST_NET} -- vtnt-job=1 kind=ping ping.count=1 targets=192.0.2.1"),
        ));
        assert!(
            out.line_with("vtnt: error: no virtio-net device found")
                .is_some(),
            "{machine:?}:\n{}",
            out.console()
        );
        assert_eq!(out.status, GuestStatus::Exited(3), "{machine:?}");
    }
}

/// A namespace with `vtap0` at 192.0.2.1/24 (Linux answers ARP and echo there).
fn lab() -> NetNs {
    assert!(
        netns::is_root(),
        "the network tests need root (network namespaces, TAP)"
    );
    let ns = NetNs::create(&netns::unique_name("vtnt-kt")).unwrap_or_else(|e| panic!("{e}"));
    ns.add_tap("vtap0", "192.0.2.1/24")
        .unwrap_or_else(|e| panic!("{e}"));
    ns
}

fn net_vm(img: &Image, ns: &NetNs, machine: Machine, cmdline: &str) -> VmConfig {
    let mut cfg = vm(img, machine, cmdline);
    cfg.net = Some(NetBackend::Tap {
        ifname: "vtap0".into(),
    });
    cfg.netns = Some(ns.name().to_string());
    cfg
}

fn ping_on(machine: Machine) {
    let Some(img) = image() else { return };
    let ns = lab();
    let out = run(&net_vm(
        img,
        &ns,
        machine,
        &format!(
            "console=ttyS0 {GUEST_NET} epoch_us=1795312150000000 -- vtnt-job=1 kind=ping ping.count=3 ping.interval=100ms targets=192.0.2.1"
        ),
    ));
    let console = out.console();
    let pings: Vec<&String> = out
        .lines
        .iter()
        .filter(|l| l.starts_with("{\"type\":\"ping\", \"version\":\"0.4\""))
        .collect();
    assert_eq!(pings.len(), 1, "{machine:?}:\n{console}\n{}", out.stderr);
    let p = pings[0];
    assert!(
        p.contains("\"src\":\"192.0.2.10\", \"dst\":\"192.0.2.1\""),
        "{p}"
    );
    assert!(p.contains("\"ping_sent\":3"), "{p}");
    assert!(
        p.contains("\"statistics\":{\"replies\":3, \"loss\":0"),
        "{p}"
    );
    assert!(
        p.contains("\"start\":{\"sec\":17953121"),
        "epoch_us makes real timestamps: {p}"
    );
    for seq in 0..3 {
        assert!(
            p.contains(&format!("{{\"from\":\"192.0.2.1\", \"seq\":{seq}, ")),
            "{p}"
        );
    }
    // the image names its own build (docs/scamper.md)
    let build = format!(", \"vtnt\":\"{} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(
        out.line_with("{\"type\":\"cycle-start\"")
            .is_some_and(|l| l.contains(&build)),
        "{console}"
    );
    assert!(
        out.line_with("{\"type\":\"cycle-stop\"").is_some(),
        "{console}"
    );
    assert!(
        out.json_u64("first-probe", "guest_us")
            .is_some_and(|t| t > 0),
        "{console}"
    );
    assert_eq!(out.status, GuestStatus::Exited(0), "{console}");
}

#[test]
fn ping_over_tap_on_microvm() {
    ping_on(Machine::Microvm);
}

#[test]
fn ping_over_tap_on_q35() {
    ping_on(Machine::Q35);
}

#[test]
fn ping_over_tap_on_pc() {
    ping_on(Machine::Pc);
}

/// `ip6=auto` on a real IPv6 LAN: Debian's dnsmasq is the router on the TAP's host side,
/// first with a SLAAC prefix (`ra-only`: A=1, M=0), then with a stateful DHCPv6 range
/// (M=1). Each time the guest configures itself (the modified EUI-64 of its MAC under the
/// prefix; the address in dnsmasq's lease file) and pings the router's global address.
#[test]
fn ip6_auto_takes_slaac_or_dhcpv6_from_dnsmasq() {
    let Some(img) = image() else { return };
    vtnt_testkit::require_tools!("dnsmasq");
    let ns = lab();
    // the router's only link-local address (dnsmasq advertises from it) is there before
    // the TAP has a carrier (none is made when QEMU brings it up), so that the guest's
    // first solicitation is answered rather than its second, four seconds later
    ns.ip(&["link", "set", "vtap0", "addrgenmode", "none"])
        .unwrap_or_else(|e| panic!("{e}"));
    for a in ["fe80::1/64", "2001:db8:77::1/64"] {
        ns.ip(&["-6", "addr", "add", a, "dev", "vtap0", "nodad"])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let leases = std::env::temp_dir().join(format!("{}.leases", ns.name()));
    for (range, how) in [
        ("2001:db8:77::,ra-only,64", "slaac"),
        ("2001:db8:77::100,2001:db8:77::1ff,64,1h", "dhcpv6"),
    ] {
        let _ = std::fs::remove_file(&leases);
        let mut dnsmasq = ns
            .command("dnsmasq")
            .args(["--keep-in-foreground", "--conf-file=/dev/null", "--port=0"])
            .args([
                "--user=root",
                "--pid-file",
                "--interface=vtap0",
                "--bind-interfaces",
            ])
            .args(["--enable-ra", &format!("--dhcp-range={range}")])
            .arg(format!("--dhcp-leasefile={}", leases.display()))
            .spawn()
            .expect("dnsmasq starts");
        let out = run(&net_vm(
            img,
            &ns,
            Machine::Microvm,
            &format!(
                "console=ttyS0 {GUEST_NET} ip6=auto -- vtnt-job=1 kind=ping ping.count=2 ping.interval=100ms targets=2001:db8:77::1"
            ),
        ));
        let lease = std::fs::read_to_string(&leases).unwrap_or_default();
        let _ = dnsmasq.kill();
        let _ = dnsmasq.wait();
        let console = out.console();
        let line = out
            .line_with("{\"type\":\"ip6\"")
            .unwrap_or_else(|| panic!("{how}: no ip6 line:\n{console}"));
        let field = |l: &str, key: &str| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v[key].as_str().unwrap_or_default().to_string()
        };
        assert_eq!(field(line, "how"), how, "{console}");
        let (addr, len) = field(line, "ip")
            .split_once('/')
            .map(|(a, l)| (a.parse::<std::net::Ipv6Addr>().unwrap(), l.to_string()))
            .unwrap();
        assert_eq!(
            len, "64",
            "the on-link prefix of the advertisement: {console}"
        );
        assert_eq!(addr.segments()[..4], [0x2001, 0xdb8, 0x77, 0], "{console}");
        let mac = field(out.line_with("{\"type\":\"nic\"").unwrap(), "mac");
        let m: Vec<u8> = mac
            .split(':')
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect();
        let eui64 = [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
        if how == "slaac" {
            assert_eq!(addr.octets()[8..], eui64, "{console}");
        } else {
            assert!(
                lease
                    .lines()
                    .any(|l| l.split_whitespace().nth(2) == Some(&addr.to_string())),
                "the address dnsmasq leased: {lease}\n{console}"
            );
        }
        let ping = out
            .line_with("{\"type\":\"ping\", \"version\":\"0.4\"")
            .unwrap_or_else(|| panic!("{how}: no ping:\n{console}"));
        assert!(
            ping.contains(&format!("\"src\":\"{addr}\", \"dst\":\"2001:db8:77::1\"")),
            "{ping}"
        );
        assert!(
            ping.contains("\"statistics\":{\"replies\":2, \"loss\":0"),
            "{ping}"
        );
        assert_eq!(out.status, GuestStatus::Exited(0), "{console}");
    }
    let _ = std::fs::remove_file(&leases);
}

#[test]
fn silent_gateway_is_an_arp_error() {
    let Some(img) = image() else { return };
    let ns = lab();
    let out = run(&net_vm(
        img,
        &ns,
        Machine::Microvm,
        "ip=192.0.2.10/24 gw=192.0.2.99 -- vtnt-job=1 kind=ping ping.count=1 targets=198.51.100.1",
    ));
    assert!(
        out.line_with("vtnt: error: no ARP reply from 192.0.2.99")
            .is_some(),
        "{}",
        out.console()
    );
    assert_eq!(out.status, GuestStatus::Exited(4));
}

#[test]
fn no_dhcp_server_is_a_dhcp_error() {
    let Some(img) = image() else { return };
    // The guest's frames go to a UDP socket of ours on 127.0.0.1 that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let remote = silent.local_addr().expect("addr").port();
    let local = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port();
    let mut cfg = vm(
        img,
        Machine::Microvm,
        "ip=dhcp -- vtnt-job=1 kind=ping ping.count=1 targets=198.51.100.1",
    );
    cfg.net = Some(NetBackend::Netdev {
        netdev: format!(
            "dgram,id=d0,local.type=inet,local.host=127.0.0.1,local.port={local},remote.type=inet,remote.host=127.0.0.1,remote.port={remote}"
        ),
        id: "d0".into(),
    });
    let out = run(&cfg);
    let console = out.console();
    let errors: Vec<&String> = out
        .lines
        .iter()
        .filter(|l| l.starts_with("vtnt: error: "))
        .collect();
    assert_eq!(
        errors,
        ["vtnt: error: no DHCP lease within 5 s: no server answered"],
        "{console}"
    );
    assert_eq!(out.status, GuestStatus::Exited(8), "{console}");
    // Given up at the 5 s deadline (guest time), not at the 60 s watchdog.
    let exit_us = out.json_u64("exit", "guest_us").expect("exit line");
    assert!(
        (5_000_000..10_000_000).contains(&exit_us),
        "gave up at {exit_us} us:\n{console}"
    );
    let mut buf = [0u8; 2048];
    silent.set_nonblocking(true).expect("nonblocking");
    assert!(
        silent.recv_from(&mut buf).is_ok(),
        "the guest sent no DHCP DISCOVER"
    );
}

#[test]
fn watchdog_stops_a_long_job() {
    let Some(img) = image() else { return };
    let ns = lab();
    let out = run(&net_vm(
        img,
        &ns,
        Machine::Microvm,
        &format!(
            "{GUEST_NET} watchdog=1 -- vtnt-job=1 kind=ping ping.count=100 ping.interval=500ms targets=192.0.2.1"
        ),
    ));
    assert!(
        out.line_with("vtnt: error: watchdog").is_some(),
        "{}",
        out.console()
    );
    assert_eq!(out.status, GuestStatus::Exited(5));
}

#[test]
fn host_timeout_kills_the_vm() {
    let Some(img) = image() else { return };
    // 1 MiB of RAM: the kernel (loaded at 1 MiB) has no memory to run in; the host must
    // give up at its timeout rather than hang.
    let mut cfg = vm(img, Machine::Microvm, "-- boot");
    cfg.memory_mib = 1;
    cfg.timeout = Duration::from_secs(3);
    let out = run(&cfg);
    assert!(
        matches!(out.status, GuestStatus::TimedOut | GuestStatus::Vanished),
        "{:?}",
        out.status
    );
}
