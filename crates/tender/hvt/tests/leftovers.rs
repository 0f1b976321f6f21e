//! Nothing outlives its supervisor: a monitor whose parent dies (killed, so it cleans up
//! nothing) stops its VM and exits at once, whatever its guest is doing.

mod common;

use std::time::{Duration, Instant};

use common::{monitor, Guest};

#[test]
fn a_monitor_dies_with_its_parent() {
    vtnt_testkit::require_kvm!();
    let mut g = Guest::new();
    g.puts(b"spinning\n").spin();
    let image = g.write("orphan");
    let program = monitor().get_program().to_owned();
    // a parent that starts the monitor (a spinning guest, a minute of watchdog), says its
    // pid, and waits
    let mut parent = std::process::Command::new("sh")
        .arg("-c")
        .arg("\"$0\" --timeout 60 \"$1\" >/dev/null & echo $!; wait")
        .arg(&program)
        .arg(&image)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists();
    // the guest is running (the monitor has entered it, its console line printed)
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(), "the monitor ended before its parent");
    parent.kill().unwrap();
    parent.wait().unwrap();
    let t = Instant::now();
    while alive() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // (a zombie until init reaps it: gone or dead is what counts)
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let dead = state.is_empty() || state.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
    assert!(dead, "the monitor outlived its parent: {state}");
}
