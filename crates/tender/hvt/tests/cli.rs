//! The `vtnt-monitor` command on bad input: each gives one clear line on stderr and exit
//! status 125, never a panic. All of these fail before KVM is opened, so they run on any
//! host.

mod common;

use std::path::Path;

use common::{monitor, write_file, Guest};

/// Runs the monitor with `args`; asserts exit 125 and one `vtnt-monitor: error:` line,
/// and returns that line.
fn fails(args: &[&str]) -> String {
    let r = monitor().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(r.status.code(), Some(125), "{args:?}: {stderr}");
    assert!(r.stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("vtnt-monitor: error: ") && !stderr.contains("panicked"),
        "{args:?}: {stderr}"
    );
    stderr.trim_end().to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn images_that_are_not_vtnt_kernels_are_refused_clearly() {
    let empty = write_file("empty", b"");
    assert_eq!(
        fails(&[s(&empty)]),
        format!("vtnt-monitor: error: {}: not an ELF file", empty.display())
    );
    let script = write_file("script", b"#!/bin/sh\necho hi\n");
    assert!(fails(&[s(&script)]).ends_with(": not an ELF file"));

    let good = Guest::new().elf();
    let mut arm = good.clone();
    arm[18] = 183; // EM_AARCH64
    let arm = write_file("arm", &arm);
    assert!(fails(&[s(&arm)]).contains(": not an x86_64 ELF executable"));

    let mut no_note = good.clone();
    no_note[0xbc] = b'x'; // the note's name
    let no_note = write_file("no-note", &no_note);
    assert!(fails(&[s(&no_note)]).ends_with(
        ": no vTNT 64-bit entry note (an image built before the monitor existed, or not vtnt-kernel)"
    ));

    let mut big = good.clone();
    big[64 + 40..64 + 48].copy_from_slice(&(3u64 << 20).to_le_bytes()); // p_memsz
    let big = write_file("big", &big);
    assert!(fails(&["--mem-mib", "2", s(&big)]).ends_with(
        ": segment at 0x100000 of 3145728 bytes does not fit in 2 MiB of guest memory (use --mem-mib)"
    ));

    let line = fails(&["/nonexistent/vtnt.elf"]);
    assert!(
        line.contains("cannot read the image /nonexistent/vtnt.elf"),
        "{line}"
    );
}

#[test]
fn bad_options_are_refused_clearly() {
    let img = Guest::new().write("options");
    let img = s(&img);
    let line = fails(&[]);
    assert!(line.contains("<IMAGE>"), "{line}");
    let long = "x".repeat(8193);
    assert_eq!(
        fails(&[img, "--cmdline", &long]),
        "vtnt-monitor: error: the command line is 8193 bytes long, more than the 8192 the guest can be given"
    );
    for mem in ["0", "3", "8192", "lots"] {
        let line = fails(&["--mem-mib", mem, img]);
        assert!(line.contains("mem-mib"), "{line}");
    }
    for net in [
        "bogus",
        "udp=1.2.3.4:5",
        "udp=a,b",
        "tap=",
        "tap=a-very-long-interface-name",
    ] {
        let line = fails(&["--net", net, img]);
        assert!(line.contains("--net"), "{line}");
    }
    assert!(fails(&["--mac", "52:54:00:12:34", img]).contains("not a MAC address"));
    let tap = ["--net", "tap=vtnt-no-such0"];
    assert_eq!(
        fails(
            &[tap, tap, tap]
                .concat()
                .into_iter()
                .chain([img])
                .collect::<Vec<_>>()
        ),
        "vtnt-monitor: error: a VM has at most 2 networks: --net and --mac are given once or twice"
    );
    assert!(fails(&["--timeout", "0", img]).contains("--timeout"));
    assert!(fails(&["--module", "/nonexistent/module", img])
        .contains("cannot read the module /nonexistent/module"));
    let fat = write_file("fat-module", &vec![0u8; 1 << 20]);
    assert!(fails(&["--mem-mib", "2", "--module", s(&fat), img]).contains("do not fit"));
    assert!(fails(&["--bogus", img]).contains("--bogus"));
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let net = format!("udp={},127.0.0.1:9", taken.local_addr().unwrap());
    let line = fails(&["--net", &net, img]);
    assert!(line.contains(&format!("{net}: cannot bind: ")), "{line}");
    let line = fails(&["--net", "tap=vtnt-no-such0", img]);
    assert!(line.contains("tap=vtnt-no-such0: "), "{line}");
}

#[test]
fn help_and_version_succeed() {
    let r = monitor().arg("--help").output().unwrap();
    assert_eq!(r.status.code(), Some(0));
    let help = String::from_utf8_lossy(&r.stdout);
    for opt in [
        "--mem-mib",
        "--net",
        "--mac",
        "--module",
        "--timeout",
        "--stats",
        "--cmdline",
    ] {
        assert!(help.contains(opt), "{help}");
    }
    let r = monitor().arg("--version").output().unwrap();
    assert_eq!(r.status.code(), Some(0));
}

/// When `/dev/kvm` is missing or refused, the one line says which: run the monitor with
/// /dev hidden under a tmpfs in a mount namespace of its own, and as user `nobody`.
#[test]
fn a_missing_or_refused_dev_kvm_is_named() {
    vtnt_testkit::require_root!("unshare", "setpriv");
    let img = Guest::new().write("no-kvm");
    let bin = env!("CARGO_BIN_EXE_vtnt-monitor");
    let r = std::process::Command::new("unshare")
        .args([
            "--mount",
            "sh",
            "-c",
            "mount -t tmpfs none /dev && exec \"$0\" \"$1\"",
        ])
        .args([bin, s(&img)])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&r.stderr),
        "vtnt-monitor: error: /dev/kvm does not exist: this host has no KVM (load kvm_intel, kvm_amd or kvm_pvm)\n"
    );

    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata("/dev/kvm") else {
        return; // nothing to refuse
    };
    if meta.permissions().mode() & 0o006 != 0 {
        return; // everyone may open it here
    }
    let r = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            bin,
        ])
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&r.stderr),
        "vtnt-monitor: error: permission denied opening /dev/kvm (run as root or join the group that owns it)\n"
    );
}
