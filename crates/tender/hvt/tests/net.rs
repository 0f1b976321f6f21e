//! The guest's NICs under the real /dev/kvm: frames a guest sends arrive byte for byte on
//! the network it names, and frames sent to it reach it through POLL and NET_READ in
//! `vtnt_abi::hvt`'s buffer format (a frame that does not fit is kept for the next call;
//! an oversized one is dropped), on a second network as on the first. Over UDP on
//! 127.0.0.1, and over a TAP device inside a network namespace of the test's own.

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::{monitor, Guest};
use vtnt_abi::hvt::port;

/// A UDP socket on 127.0.0.1 for the test's end, and a free port for the monitor's.
fn sockets() -> (UdpSocket, u16) {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let free = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    (peer, port)
}

fn net_arg(local: u16, peer: &UdpSocket) -> String {
    format!(
        "udp=127.0.0.1:{local},127.0.0.1:{}",
        peer.local_addr().unwrap().port()
    )
}

/// Appends to `g`: POLL (up to `wait_ns`) and NET_READ of network `net` (at most `cap`
/// bytes a call) until `want` frames have come, all into one buffer; then PUTS of that
/// buffer and EXIT with the number of frames. With `resend`, each round first repeats
/// that NET_WRITE.
fn receive(g: &mut Guest, net: u64, want: i8, cap: u64, wait_ns: u64, resend: Option<u64>) {
    // The buffer: free guest memory above the image.
    let buf = 0x20_0000;
    let poll = g.words(&[wait_ns, 0]);
    let total = g.words(&[0]);
    let status = g.words(&[0]);
    let read = g.words(&[buf, cap, 0, 0, 0, net]);
    let puts = g.words(&[buf, 0]);
    let top = g.here();
    if let Some(w) = resend {
        g.call(port::NET_WRITE, w);
    }
    g.call(port::POLL, poll)
        .call(port::NET_READ, read)
        .load_rax(read + 16) // len
        .add_rax_to(read) // data += len
        .load_rax(read + 24) // frames
        .add_rax_to(total)
        .cmp_imm8(total, want)
        .jb(top)
        .load_rax(read)
        .sub_rax(u32::try_from(buf).unwrap())
        .store_rax(puts + 8)
        .call(port::PUTS, puts)
        .load_rax(total)
        .store_rax(status)
        .call(port::EXIT, status);
}

#[test]
fn frames_the_guest_writes_arrive_byte_for_byte_on_the_network_it_names() {
    vtnt_testkit::require_kvm!();
    let (peer, local) = sockets();
    let (peer2, local2) = sockets();
    let small: Vec<u8> = (0..60u8).collect();
    let full: Vec<u8> = (0..vtnt_abi::hvt::FRAME_MAX)
        .map(|i| (i * 13) as u8)
        .collect();
    let mut g = Guest::new();
    let a = g.data(&small);
    let b = g.data(&full);
    // `small` on network 0, `full` on network 1, then one on a network not given.
    let wa = g.words(&[a, small.len() as u64, 7, 0]);
    let wb = g.words(&[b, full.len() as u64, 7, 1]);
    let wc = g.words(&[a, small.len() as u64, 7, 2]);
    let status = g.words(&[99]);
    // Exit with the sum of the calls' `ret` (1: the first two sent, the third not).
    g.call(port::NET_WRITE, wa)
        .call(port::NET_WRITE, wb)
        .call(port::NET_WRITE, wc)
        .load_rax(wa + 16)
        .store_rax(status)
        .load_rax(wb + 16)
        .add_rax_to(status)
        .load_rax(wc + 16)
        .add_rax_to(status)
        .call(port::EXIT, status);
    let r = monitor()
        .arg(g.write("net-write"))
        .args(["--net", &net_arg(local, &peer)])
        .args(["--net", &net_arg(local2, &peer2)])
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let mut buf = [0u8; 4096];
    let (n, from) = peer.recv_from(&mut buf).unwrap();
    assert_eq!(from.port(), local);
    assert_eq!(&buf[..n], small);
    let (n, from) = peer2.recv_from(&mut buf).unwrap();
    assert_eq!(from.port(), local2);
    assert_eq!(&buf[..n], full);
    // Nothing else came on either network.
    for p in [&peer, &peer2] {
        p.set_nonblocking(true).unwrap();
        assert!(p.recv(&mut buf).is_err());
    }
}

#[test]
fn frames_sent_to_the_guest_arrive_through_poll_and_net_read_on_the_second_network() {
    vtnt_testkit::require_kvm!();
    // Network 0 is given but stays silent: POLL wakes for network 1's frames.
    let (idle, idle_local) = sockets();
    let (peer, local) = sockets();
    let mut g = Guest::new();
    // First a "ready" frame, so the test knows the monitor's socket is there.
    let ready = g.data(b"ready");
    let w = g.words(&[ready, 5, 0, 1]);
    g.call(port::NET_WRITE, w);
    // 200 bytes a call: the two 100-byte frames (102 bytes each in the buffer) need two.
    receive(&mut g, 1, 2, 200, 5_000_000_000, None);
    let child = monitor()
        .arg(g.write("net-read"))
        .args(["--stats", "--net", &net_arg(idle_local, &idle)])
        .args(["--net", &net_arg(local, &peer)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 64];
    let (n, monitor_addr) = peer.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"ready");
    peer.connect(monitor_addr).unwrap();
    let one: Vec<u8> = (0..100u8).collect();
    let two: Vec<u8> = (0..99u8).map(|i| 255 - i).collect(); // odd: padded
    peer.send(&one).unwrap();
    peer.send(&[0xee; 2000]).unwrap(); // longer than any frame: dropped
    peer.send(&two).unwrap();
    let r = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    let frames: Vec<&[u8]> = vtnt_abi::hvt::frames(&r.stdout).collect();
    assert_eq!(frames, [&one[..], &two[..]]);
    assert_eq!(r.stdout.len(), 2 * 102);
    let reads: u64 = stderr
        .split(r#""net_read":"#)
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(reads >= 2, "{stderr}");
}

#[test]
fn a_tap_device_carries_frames_both_ways() {
    vtnt_testkit::require_kvm!();
    vtnt_testkit::require_root!("ip", "sysctl");
    let ns = vtnt_netns::NetNs::create(&vtnt_netns::unique_name("vmon")).unwrap();
    // No IPv6 chatter on the TAP: the only frame the guest gets is the ARP reply.
    ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
    ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
        .unwrap();
    ns.add_tap("vtap0", "192.0.2.1/24").unwrap();

    // An ARP request from 52:54:00:12:34:56 (192.0.2.2) for 192.0.2.1.
    let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&mac);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    arp.extend_from_slice(&mac);
    arp.extend_from_slice(&[192, 0, 2, 2, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1]);
    arp.resize(60, 0);
    let mut g = Guest::new();
    let a = g.data(&arp);
    let w = g.words(&[a, arp.len() as u64, 0, 0]);
    // The TAP's queue starts a moment after the monitor attaches (the kernel's link
    // watch), dropping what the host sends until then: ask again every 100 ms.
    receive(&mut g, 0, 1, 4096, 100_000_000, Some(w));
    let image = g.write("tap");
    let r = ns
        .command(env!("CARGO_BIN_EXE_vtnt-monitor"))
        .args(["--timeout", "10", "--net", "tap=vtap0"])
        .arg(&image)
        .output()
        .unwrap();
    let frames: Vec<&[u8]> = vtnt_abi::hvt::frames(&r.stdout).collect();
    assert!(
        !frames.is_empty() && r.status.code() == Some(frames.len() as i32),
        "{:?}: {}",
        r.status,
        String::from_utf8_lossy(&r.stderr)
    );
    for reply in frames {
        assert_eq!(&reply[..6], mac, "to the guest");
        assert_eq!(&reply[12..14], [0x08, 0x06], "ARP");
        assert_eq!(&reply[20..22], [0, 2], "a reply");
        assert_eq!(&reply[28..32], [192, 0, 2, 1], "from 192.0.2.1");
    }
}
