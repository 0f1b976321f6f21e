//! Tiny hand-assembled guests under the real /dev/kvm: the console, the exit status, what
//! the guest is given at boot, faults (reported with the guest's rip), and the watchdog
//! stopping a guest that never exits to the monitor.

mod common;

use std::time::{Duration, Instant};

use common::{monitor, write_file, Guest};
use vtnt_abi::hvt::{port, BOOT_INFO, CMDLINE, MAGIC};
use vtnt_monitor::{run_with, Config, Ended, Net, Outcome};

/// Runs `g` in-process with the config `tweak` makes; returns the outcome and console.
fn run(g: &Guest, name: &str, tweak: impl FnOnce(&mut Config)) -> (Outcome, Vec<u8>) {
    let mut cfg = Config::new(g.write(name));
    tweak(&mut cfg);
    let mut out = Vec::new();
    let o = run_with(&cfg, &mut out).unwrap();
    (o, out)
}

fn words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn hello_prints_and_exits_with_its_status() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    g.puts(b"hello\n").exit(3);
    let (o, out) = run(&g, "hello", |_| {});
    assert_eq!(o.ended, Ended::Exit(3));
    assert_eq!(out, b"hello\n");
    assert_eq!(o.stats.exits_by_port.puts, 1);
    assert_eq!(o.stats.exits_by_port.exit, 1);
    assert_eq!(o.stats.exits, 2);

    let path = g.write("hello-bin");
    let t = Instant::now();
    // (A timeout of u64::MAX seconds is "forever", not an overflow.)
    let r = monitor()
        .arg(&path)
        .args(["--stats", "--timeout", &u64::MAX.to_string()])
        .output()
        .unwrap();
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{stderr}");
    assert_eq!(r.stdout, b"hello\n");
    // --stats: one JSON line, nothing else.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(r#"{"type":"monitor","open_kvm_us":"#),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#""exits":2,"exits_by_port":{"puts":1,"#),
        "{stderr}"
    );
    eprintln!("hello: spawn to exit {took:?}; {stderr}");
}

#[test]
fn image_pages_come_from_the_file_and_writes_stay_private() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    // Three pages of data make the image's first pages (the code's too) whole pages of
    // the file, which the monitor maps from it rather than copies.
    let data = g.data(&[0x11; 0x3000]);
    let word = (data + 0x1000) & !0xfff;
    let puts = g.words(&[word, 8]);
    g.load_rax(word)
        .sub_rax(1)
        .store_rax(word)
        .call(port::PUTS, puts)
        .exit(0);
    let image = g.write("cow");
    let before = std::fs::read(&image).unwrap();
    for _ in 0..2 {
        let mut out = Vec::new();
        let o = run_with(&Config::new(&image), &mut out).unwrap();
        assert_eq!(o.ended, Ended::Exit(0));
        assert_eq!(out, (0x1111_1111_1111_1111u64 - 1).to_le_bytes());
    }
    assert_eq!(std::fs::read(&image).unwrap(), before);
}

#[test]
fn the_guest_gets_its_boot_information_registers_and_modules() {
    vtnt_testkit::require_kvm!();
    let cmdline = "job=trace target=192.0.2.1 --fast";
    let module_a = b"first module\n".to_vec();
    let module_b: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    let mem: u64 = 16 << 20;
    let last = mem - 8;

    let mut g = Guest::new();
    let regs = g.words(&[0, 0, 0]);
    let p_regs = g.words(&[regs, 24]);
    let p_info = g.words(&[BOOT_INFO, 88]);
    let p_cmd = g.words(&[CMDLINE, cmdline.len() as u64]);
    let p_table = g.words(&[0, 32]);
    let p_mod = g.words(&[0, module_a.len() as u64]);
    let p_last = g.words(&[last, 8]);
    g.store_rdi(regs)
        .store_rsp(regs + 8)
        .raw(&[0x9c, 0x58]) // pushfq; pop rax
        .store_rax(regs + 16)
        .call(port::PUTS, p_regs)
        .call(port::PUTS, p_info)
        .call(port::PUTS, p_cmd)
        // The module table's address is in BootInfo.modules (offset 56).
        .load_rax(BOOT_INFO + 56)
        .store_rax(p_table)
        .call(port::PUTS, p_table)
        .load_rax(BOOT_INFO + 56)
        .deref_rax()
        .store_rax(p_mod)
        .call(port::PUTS, p_mod)
        // The last word of guest memory is mapped and writable.
        .load_rax(regs)
        .store_rax(last)
        .call(port::PUTS, p_last)
        .exit(0);
    let image_end = common::LOAD + g.elf().len() as u64 + 0x1_0000;
    let a = write_file("module-a", &module_a);
    let b = write_file("module-b", &module_b);
    let (o, out) = run(&g, "bootinfo", |c| {
        c.cmdline = cmdline.into();
        c.modules = vec![a, b];
        c.mac = [2, 0, 0, 0xaa, 0xbb, 0xcc];
        c.net = Some(Net::Udp {
            local: "127.0.0.1:0".parse().unwrap(),
            remote: "127.0.0.1:9".parse().unwrap(),
        });
        c.mac2 = [2, 0, 0, 0xdd, 0xee, 0xff];
        c.net2 = Some(Net::Udp {
            local: "127.0.0.1:0".parse().unwrap(),
            remote: "127.0.0.1:9".parse().unwrap(),
        });
    });
    assert_eq!(o.ended, Ended::Exit(0));
    let (regs, rest) = out.split_at(24);
    let regs = words(regs);
    assert_eq!(regs[..2], [BOOT_INFO, 0x8_0000], "rdi, rsp at entry");
    // (Under PVM, ring 3 runs on the host's own user mode, so `pushfq` shows the host's
    // IF = 1, IOPL = 0 whatever the monitor set; under hardware KVM it shows IOPL = 3.)
    assert_eq!(regs[2] & 0x2, 0x2, "rflags bit 1");
    let (info, rest) = rest.split_at(88);
    let info = words(info);
    assert_eq!(info[0], MAGIC);
    assert_eq!(info[1], mem);
    assert_eq!((info[2], info[3]), (CMDLINE, cmdline.len() as u64));
    let tsc_hz = info[4];
    assert!((100_000_000..100_000_000_000).contains(&tsc_hz), "{tsc_hz}");
    assert_eq!(info[5].to_le_bytes(), [2, 0, 0, 0xaa, 0xbb, 0xcc, 0, 0]);
    assert_eq!(info[6], 2, "networks");
    assert_eq!(info[10].to_le_bytes(), [2, 0, 0, 0xdd, 0xee, 0xff, 0, 0]);
    let (table_addr, count, used_end) = (info[7], info[8], info[9]);
    assert_eq!(count, 2);
    let (cmd, rest) = rest.split_at(cmdline.len());
    assert_eq!(cmd, cmdline.as_bytes());
    let (table, rest) = rest.split_at(32);
    let table = words(table);
    let first = image_end.next_multiple_of(4096);
    assert_eq!(
        table,
        [
            first,
            module_a.len() as u64,
            first + 4096,
            module_b.len() as u64
        ]
    );
    assert_eq!(
        table_addr,
        first + 4096 + 8192,
        "the table follows the modules"
    );
    assert_eq!(used_end, table_addr + 4096);
    let (module, rest) = rest.split_at(module_a.len());
    assert_eq!(module, module_a);
    assert_eq!(words(rest), [BOOT_INFO]);
}

#[test]
fn a_guest_that_halts_is_reported_as_a_fault_at_its_rip() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    g.puts(b"about to halt\n");
    let at = g.here();
    g.hlt();
    let (o, out) = run(&g, "hlt", |_| {});
    assert_eq!(out, b"about to halt\n");
    let Ended::Fault(what) = &o.ended else {
        panic!("{:?}", o.ended)
    };
    assert!(
        what.contains(&format!("at rip 0x{at:x} (rsp 0x80000)")),
        "{what}"
    );
    assert_eq!(o.ended.exit_code(), 126);

    let r = monitor().arg(g.write("hlt-bin")).output().unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(126), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("vtnt-monitor: error: guest fault: ")
            && stderr.contains(&format!("at rip 0x{at:x}")),
        "{stderr}"
    );
}

/// A bad-hypercall case: its name, the guest code, how the fault message starts.
type Case = (&'static str, Box<dyn Fn(&mut Guest)>, &'static str);

#[test]
fn bad_hypercalls_are_guest_faults() {
    vtnt_testkit::require_kvm!();
    let cases: Vec<Case> = vec![
        (
            "puts-outside",
            Box::new(|g| {
                let p = g.words(&[0xffff_fff0, 64]);
                g.call(port::PUTS, p);
            }),
            "PUTS of 64 bytes at 0xfffffff0, outside guest memory",
        ),
        (
            "args-outside",
            Box::new(|g| {
                g.call(port::EXIT, 0xffff_fffc);
            }),
            "EXIT with its arguments at 0xfffffffc, outside guest memory",
        ),
        (
            "unknown-port",
            Box::new(|g| {
                g.call(0x600, 0x1000);
            }),
            "an out to port 0x600, which is no hypercall",
        ),
        (
            "big-status",
            Box::new(|g| {
                g.exit(300);
            }),
            "EXIT with status 300",
        ),
        (
            "byte-out",
            Box::new(|g| {
                // mov edx, 0x500; out dx, al
                g.raw(&[0xba, 0x00, 0x05, 0x00, 0x00, 0xee]);
            }),
            "an out of 1 bytes to port 0x500",
        ),
        (
            "in",
            Box::new(|g| {
                // mov edx, 0x500; in eax, dx
                g.raw(&[0xba, 0x00, 0x05, 0x00, 0x00, 0xed]);
            }),
            "an in of 4 bytes from port 0x500",
        ),
        (
            "big-frame",
            Box::new(|g| {
                let w = g.words(&[0x10_0000, 1515, 0, 0]);
                g.call(port::NET_WRITE, w);
            }),
            "NET_WRITE of a 1515-byte frame",
        ),
    ];
    for (name, build, expected) in cases {
        let mut g = Guest::new();
        build(&mut g);
        g.exit(0);
        let (o, _) = run(&g, name, |_| {});
        match &o.ended {
            Ended::Fault(what) => {
                assert!(what.starts_with(expected), "{name}: {what}");
                assert!(what.contains(" at rip 0x"), "{name}: {what}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn without_a_network_net_calls_fail_and_poll_sleeps() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    let frame = g.data(&[0xffu8; 60]);
    let w = g.words(&[frame, 60, 7, 0]);
    let r = g.words(&[0x10_0000, 4096, 7, 7, 7, 0]);
    let p = g.words(&[50_000_000, 7]);
    let show = g.words(&[w, 96]); // the three structures, back to back
    g.call(port::NET_WRITE, w)
        .call(port::NET_READ, r)
        .call(port::POLL, p)
        .call(port::PUTS, show)
        .exit(0);
    let t = Instant::now();
    let (o, out) = run(&g, "nonet", |_| {});
    let took = t.elapsed();
    assert_eq!(o.ended, Ended::Exit(0));
    let v = words(&out);
    assert_eq!(v[2], 1, "NET_WRITE ret");
    assert_eq!(&v[6..9], [0, 0, 0], "NET_READ len, frames, more");
    assert_eq!(v[11], 0, "POLL ready");
    assert!(took >= Duration::from_millis(50), "{took:?}");
}

#[test]
fn the_watchdog_stops_a_guest_that_spins_natively() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    g.puts(b"spinning\n").spin();
    let t = Instant::now();
    let (o, out) = run(&g, "spin", |c| c.timeout = Duration::from_secs(1));
    let took = t.elapsed();
    assert_eq!(o.ended, Ended::TimedOut);
    assert_eq!(out, b"spinning\n");
    assert!(
        (Duration::from_secs(1)..Duration::from_millis(1500)).contains(&took),
        "{took:?}"
    );

    let t = Instant::now();
    let r = monitor()
        .args(["--timeout", "1"])
        .arg(g.write("spin-bin"))
        .output()
        .unwrap();
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(124), "{stderr}");
    assert_eq!(
        stderr,
        "vtnt-monitor: error: the guest did not exit within 1 s\n"
    );
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

#[test]
fn the_watchdog_bounds_a_long_poll() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    let p = g.words(&[u64::MAX, 0]);
    g.call(port::POLL, p).exit(0);
    let t = Instant::now();
    let (o, _) = run(&g, "longpoll", |c| c.timeout = Duration::from_secs(1));
    assert_eq!(o.ended, Ended::TimedOut);
    let took = t.elapsed();
    assert!(
        (Duration::from_secs(1)..Duration::from_millis(1500)).contains(&took),
        "{took:?}"
    );
}

#[test]
fn the_binary_drops_root_and_confines_itself_with_seccomp_while_the_guest_runs() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    // Wait 2 s (no network: POLL just sleeps), then exit 7.
    let p = g.words(&[2_000_000_000, 0]);
    g.call(port::POLL, p).exit(7);
    let image = g.write("jailed");
    let status_of = |extra: &[&str]| {
        let child = monitor()
            .args(extra)
            .arg(&image)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        };
        let (seccomp, uid, caps) = (field("Seccomp:"), field("Uid:"), field("CapEff:"));
        let out = child.wait_with_output().unwrap();
        (
            (seccomp, uid, caps),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // Mode 2: a filter; and the guest still runs to its own exit under it.
    let ((seccomp, uid, caps), code, stderr) = status_of(&[]);
    assert_eq!(
        (seccomp, code, stderr),
        (Some("2".into()), Some(7), String::new())
    );
    let ((seccomp, root_uid, _), _, _) = status_of(&["--no-seccomp"]);
    assert_eq!(seccomp, Some("0".into()));
    // started as root, it runs the guest as nobody, without a capability
    if root_uid.as_deref() == Some("0 0 0 0") {
        assert_eq!(uid.as_deref(), Some("65534 65534 65534 65534"));
        assert_eq!(caps.as_deref(), Some("0000000000000000"));
    }
}
