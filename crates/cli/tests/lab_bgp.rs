//! Routing events from a real BGP speaker, end to end (root, Debian's BIRD 2): a lab of
//! `topologies/cases/bgp.toml` started with `vtnt lab up --bgp`; the vantage point's
//! border router (a BIRD) learns the LAN prefix of both destinations from the lab's (a
//! BIRD in AS 64500); `vtnt lab change link-down r1 r2` cuts `far` off (the truth says
//! `unreachable`) and `vtnt_fleet::bgp::RouteWatch` on the vantage router's socket sees
//! the withdrawal of exactly `far`'s prefix within seconds; `link-up` brings its
//! announcement back. A BIRD killed is restarted by the lab; `vtnt lab down` leaves no
//! BIRD and no BGP namespace. Without BIRD, `lab up --bgp` says what to install.

mod lab_common;

use std::path::Path;
use std::time::{Duration, Instant};

use lab_common::{destination, vtnt, Lab};
use vtnt_fleet::bgp::{RouteChange, RouteEvent, RouteWatch};

const TOPOLOGY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../topologies/cases/bgp.toml"
);
const NEAR: &str = "198.51.100.0/29";
const FAR: &str = "203.0.113.0/29";

fn applied(lab: &Lab, words: &[&str]) {
    let mut args = vec!["lab", "change", "--name", &lab.name];
    args.extend_from_slice(words);
    let out = vtnt(&args);
    assert!(
        out.status.success(),
        "{words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls until the table holds `want` (sorted prefixes), or fails after `within`;
/// polls that fail (a BIRD restarting) are retried.
fn wait_table(w: &mut RouteWatch, want: &[&str], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let ok = w.poll().is_ok();
        let have: Vec<String> = w.table().keys().map(|p| p.to_string()).collect();
        if ok && have == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the vantage router has {have:?}, not {want:?}, after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The events of the first poll that sees a change, and how long after `since`.
fn next_change(w: &mut RouteWatch, since: Instant) -> (Vec<RouteEvent>, Duration) {
    let events = w.next_events(Duration::from_secs(5)).expect("polling BIRD");
    (events, since.elapsed())
}

fn unreachable(lab: &Lab, name: &str) -> bool {
    destination(&lab.truth(), name)["unreachable"] == true
}

#[test]
fn a_destination_cut_off_is_withdrawn_through_the_speaker_and_comes_back() {
    vtnt_testkit::require_root!("ip", "bird", "birdc");
    let name = format!("vt-bgp-{}", std::process::id());
    let out = vtnt(&["lab", "up", "--bgp", "--name", &name, TOPOLOGY]);
    let lab = Lab { name };
    assert!(
        out.status.success(),
        "lab up --bgp: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("BGP:"));
    let state = vtnt_lab_linux::bgp_state(&lab.name).expect("bgp.json");
    assert_eq!((state.lab_as, state.vantage_as), (64500, 64501));
    assert_eq!(state.announced, [NEAR, FAR]);

    // the session comes up and both prefixes are learned, from the lab's AS alone
    let mut w = RouteWatch::new(&state.vantage_socket, Duration::from_millis(100)).unwrap();
    let started = Instant::now();
    wait_table(&mut w, &[NEAR, FAR], Duration::from_secs(15));
    println!(
        "session up and both prefixes learned {:?} after lab up",
        started.elapsed()
    );
    for r in w.table().values() {
        assert_eq!(r.as_path, [64500], "{r:?}");
        assert_eq!(r.next_hop, Some(state.lab_address.into()), "{r:?}");
    }

    // a link down cuts `far` off: its prefix, and only it, is withdrawn
    let t = Instant::now();
    applied(&lab, &["link-down", "r1", "r2"]);
    assert!(unreachable(&lab, "far") && !unreachable(&lab, "near"));
    let (events, took) = next_change(&mut w, t);
    println!("withdrawal seen {took:?} after `vtnt lab change link-down r1 r2` was sent");
    assert!(took < Duration::from_secs(5));
    let [RouteEvent {
        change: RouteChange::Withdrawn { last },
        ..
    }] = &events[..]
    else {
        panic!("expected one withdrawal, got {events:?}")
    };
    assert_eq!(last.prefix.to_string(), FAR);
    assert_eq!(
        vtnt_lab_linux::bgp_state(&lab.name).unwrap().announced,
        [NEAR]
    );

    // undone: announced again
    let t = Instant::now();
    applied(&lab, &["link-up", "r1", "r2"]);
    assert!(!unreachable(&lab, "far"));
    let (events, took) = next_change(&mut w, t);
    println!("announcement seen {took:?} after `vtnt lab change link-up r1 r2` was sent");
    let [RouteEvent {
        change: RouteChange::Announced { route },
        ..
    }] = &events[..]
    else {
        panic!("expected one announcement, got {events:?}")
    };
    assert_eq!(
        (route.prefix.to_string(), &route.as_path[..]),
        (FAR.to_string(), &[64500][..])
    );

    // a BIRD killed is started again by the lab, and learns the routes again
    let pid_file = Path::new(&state.vantage_socket).with_extension("pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap()
        .success());
    wait_table(&mut w, &[NEAR, FAR], Duration::from_secs(15));
    let again = std::fs::read_to_string(&pid_file).unwrap();
    assert_ne!(pid, again, "the vantage BIRD was not restarted");

    // down: no BIRD of the lab left, no BGP namespace
    let name = lab.name.clone();
    drop(lab);
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains(&format!("{name}.bgp")), "{left}");
    let pid: i32 = again.trim().parse().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.contains(") Z"),
        "the vantage BIRD (pid {pid}) outlived the lab"
    );
}

#[test]
fn without_bird_lab_up_bgp_says_what_to_install_and_leaves_nothing() {
    vtnt_testkit::require_root!("ip");
    let name = format!("vt-nobird-{}", std::process::id());
    // a PATH with `ip` and without `bird`
    let bin = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&bin).unwrap();
    let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("ip");
    std::os::unix::fs::symlink(ip, bin.join("ip")).unwrap();
    let out = std::process::Command::new(lab_common::VTNT)
        .args(["lab", "up", "--bgp", "--name", &name, TOPOLOGY])
        .env("PATH", &bin)
        .output()
        .unwrap();
    let lab = Lab { name };
    let _ = std::fs::remove_dir_all(&bin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("`bird` was not found") && err.contains("bird2"),
        "{err}"
    );
    assert!(vtnt_lab_linux::status(Some(&lab.name)).unwrap().is_empty());
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&left.stdout).contains(&lab.name));
}
