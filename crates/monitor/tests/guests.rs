//! Guests run under the real /dev/kvm: console, exit status, faults, the watchdog.

mod common;

use std::time::Instant;

use common::{monitor, Guest};
use vtnt_monitor::{run_with, Config, Ended};

#[test]
fn hello_prints_and_exits_with_its_status() {
    require_kvm!();
    let mut g = Guest::new();
    g.puts(b"hello\n").exit(3);
    let path = g.write("hello");
    let mut out = Vec::new();
    let o = run_with(&Config::new(&path), &mut out).unwrap();
    assert_eq!(o.ended, Ended::Exit(3));
    assert_eq!(out, b"hello\n");
    assert_eq!(o.stats.exits_by_port.puts, 1);
    assert_eq!(o.stats.exits_by_port.exit, 1);
    assert_eq!(o.stats.exits, 2);

    let t = Instant::now();
    let r = monitor().arg(&path).output().unwrap();
    eprintln!("hello: spawn to exit {:?}", t.elapsed());
    assert_eq!(
        r.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(r.stdout, b"hello\n");
    assert!(r.stderr.is_empty());
}
