//! Probes the kernel refuses to send: in a namespace of our own whose only route to the
//! target is an `unreachable` route (so the probing policy lets it through: no default
//! route leads there), every sendto fails with EHOSTUNREACH and nothing leaves. `vtnt trace`
//! and `vtnt tnt` must say so and fail, not report a silent GAPLIMIT.

mod lab_common;

use vtnt_netns::NetNs;

fn refused_everywhere(command: &str) {
    let ns = NetNs::create(&vtnt_netns::unique_name("vt-nr")).expect("namespace");
    // -S: with no usable route the kernel has no source address to offer either; the
    // address must be the namespace's own (vTNT does not spoof).
    ns.ip(&["addr", "add", "192.0.2.1/32", "dev", "lo"])
        .unwrap();
    ns.ip(&["route", "add", "unreachable", "203.0.113.0/24"])
        .unwrap();
    let out = ns
        .exec(
            lab_common::VTNT,
            &[
                command,
                "-S",
                "192.0.2.1",
                "-w",
                "1",
                "-O",
                "json",
                "203.0.113.9",
            ],
        )
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{command} must fail: {stderr}");
    assert!(
        stderr.contains("probes could not be sent: No route to host"),
        "{command}: {stderr}"
    );
    assert!(
        stderr.contains("no probe could be sent"),
        "{command}: {stderr}"
    );
}

#[test]
fn trace_with_no_route_fails_and_says_why() {
    vtnt_testkit::require_root!("ip");
    refused_everywhere("trace");
}

#[test]
fn tnt_with_no_route_fails_and_says_why() {
    vtnt_testkit::require_root!("ip");
    refused_everywhere("tnt");
}
