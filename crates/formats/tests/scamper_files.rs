//! Files written by Debian's scamper: generated here on loopback and in a chain of
//! network namespaces this test creates (and removes), read by our warts reader and
//! re-emitted by our JSON writer. The check is line-by-line string equality with what
//! `sc_warts2json` prints for the same file. Needs root and scamper; skips otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::*;
use vtnt_formats::*;

/// Our reading of `file`, printed by our JSON writer; unsupported records are returned
/// separately.
fn ours(file: &Path) -> (String, Vec<WartsError>) {
    let bytes = std::fs::read(file).unwrap();
    let mut w = JsonWriter::new(Vec::new());
    let mut errs = Vec::new();
    for item in read_warts(&bytes) {
        match item {
            Ok(i) => w.write_item(&i).unwrap(),
            Err(e) => errs.push(e),
        }
    }
    (String::from_utf8(w.into_inner()).unwrap(), errs)
}

fn check(file: &Path) {
    let (json, errs) = ours(file);
    assert!(errs.is_empty(), "{}: {errs:?}", file.display());
    assert_same_lines(
        &json,
        &sc_tool("sc_warts2json", file),
        &file.display().to_string(),
    );
    // And the records survive our warts writer: scamper prints the same again.
    let mut w = WartsWriter::new(Vec::new());
    for item in read_warts(&std::fs::read(file).unwrap()) {
        w.write_item(&item.unwrap()).unwrap();
    }
    let again = file.with_extension("rewritten.warts");
    std::fs::write(&again, w.into_inner()).unwrap();
    assert_same_lines(&json, &sc_tool("sc_warts2json", &again), "rewritten by us");
}

fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start scamper")
}

fn finish(children: Vec<(PathBuf, Child)>) -> Vec<PathBuf> {
    children
        .into_iter()
        .map(|(p, c)| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "scamper for {}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            p
        })
        .collect()
}

#[test]
fn loopback_files_read_like_sc_warts2json() {
    vtnt_testkit::require_root!("scamper", "sc_warts2json");
    let dir = scratch("loopback");
    let runs = [
        ("t-icmp", "trace -P icmp-paris -q 1 -w 1"),
        ("t-udp", "trace -P udp-paris -q 2 -w 1"),
        ("t-tcp", "trace -P tcp -q 1 -w 1 -g 2"),
        ("p-icmp", "ping -c 3 -i 0.2"),
        ("p-udp", "ping -c 2 -P udp -i 0.2"),
        ("p-tcp", "ping -c 2 -P tcp-syn -i 0.2"),
        ("t-classic-udp", "trace -P udp -q 1 -w 1"),
    ];
    let children = runs
        .iter()
        .map(|(name, cmd)| {
            let p = dir.join(format!("{name}.warts"));
            let mut c = Command::new("scamper");
            c.args(["-O", "warts", "-o"])
                .arg(&p)
                .args(["-c", cmd, "-i", "127.0.0.1"]);
            (p, spawn(c))
        })
        .collect();
    for p in finish(children) {
        if p.to_string_lossy().contains("classic") {
            // Not a vTNT method: one Unsupported error, the cycle records still read.
            let (json, errs) = ours(&p);
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert!(matches!(
                errs[0].kind,
                WartsErrorKind::Unsupported {
                    what: "trace method",
                    ..
                }
            ));
            assert_eq!(json.lines().count(), 2, "cycle start and stop remain");
        } else {
            check(&p);
        }
    }
}

#[test]
fn namespace_files_read_like_sc_warts2json() {
    vtnt_testkit::require_root!("scamper", "sc_warts2json", "ip");
    let lab = match Lab::new() {
        Ok(l) => l,
        Err(e) => {
            let why = format!("cannot build network namespaces: {e}");
            vtnt_testkit::skip_or_fail(vtnt_testkit::test_name!(), &why, None);
            return;
        }
    };
    let dir = scratch("netns");
    let runs = [
        ("icmp", "trace -P icmp-paris -q 2 -w 1", "203.0.113.2"),
        ("udp", "trace -P udp-paris -q 1 -w 1", "203.0.113.2"),
        ("tcp", "trace -P tcp -q 1 -w 1 -d 80", "203.0.113.2"),
        (
            "gaplimit",
            "trace -P icmp-paris -q 1 -w 1 -g 2",
            "203.0.113.99",
        ),
        ("unreach", "trace -P udp-paris -q 1 -w 1", "203.0.113.88"),
        ("loop", "trace -P udp-paris -q 1 -w 1", "203.0.113.77"),
        (
            "hoplimit",
            "trace -P icmp-paris -q 1 -w 1 -m 2",
            "203.0.113.2",
        ),
        (
            "firsthop",
            "trace -P icmp-paris -q 1 -w 1 -f 2",
            "203.0.113.2",
        ),
        ("ping", "ping -c 3 -i 0.2", "203.0.113.2"),
        ("ping-ttl", "ping -c 2 -m 2 -i 0.2", "203.0.113.2"),
        ("ping-udp", "ping -c 2 -P udp -i 0.2", "203.0.113.2"),
        (
            "ping-tcp",
            "ping -c 2 -P tcp-syn -d 80 -i 0.2",
            "203.0.113.2",
        ),
        ("ping-lost", "ping -c 2 -i 0.2", "203.0.113.99"),
        // IPv6: scamper's records of every method vTNT has, read and written back
        ("v6-icmp", "trace -P icmp-paris -q 2 -w 1", "2001:db8:3::2"),
        ("v6-udp", "trace -P udp-paris -q 1 -w 1", "2001:db8:3::2"),
        ("v6-tcp", "trace -P tcp -q 1 -w 1 -d 80", "2001:db8:3::2"),
        (
            "v6-unreach",
            "trace -P udp-paris -q 1 -w 1",
            "2001:db8:3::88",
        ),
        ("v6-ping", "ping -c 2 -i 0.2", "2001:db8:3::2"),
        ("v6-ping-udp", "ping -c 2 -P udp -i 0.2", "2001:db8:3::2"),
        (
            "v6-ping-tcp",
            "ping -c 2 -P tcp-syn -d 80 -i 0.2",
            "2001:db8:3::2",
        ),
    ];
    let children = runs
        .iter()
        .map(|(name, cmd, dst)| {
            let p = dir.join(format!("{name}.warts"));
            (p.clone(), spawn(lab.scamper(cmd, dst, &p)))
        })
        .collect();
    let mut files = finish(children);
    // A silent router in the middle: an unresponsive hop between answering ones.
    lab.silence_r2().expect("silence r2");
    let p = dir.join("silent.warts");
    files.extend(finish(vec![(
        p.clone(),
        spawn(lab.scamper("trace -P icmp-paris -q 2 -w 1", "203.0.113.2", &p)),
    )]));
    for f in &files {
        check(f);
    }
    // The stop reasons we asked for really occurred.
    let all: String = files.iter().map(|f| sc_tool("sc_warts2json", f)).collect();
    for reason in ["COMPLETED", "GAPLIMIT", "UNREACH", "LOOP", "HOPLIMIT"] {
        assert!(
            all.contains(&format!("\"stop_reason\":\"{reason}\"")),
            "no {reason} trace"
        );
    }
    assert!(
        all.contains("\"icmp_type\":11"),
        "time-exceeded hops present"
    );
    assert!(all.contains("\"tcp_flags\":20"), "TCP RST replies present");
    // IPv6: time exceeded (ICMPv6 type 3) and port unreachable (1, 4) from the hops
    assert!(
        all.contains("\"dst\":\"2001:db8:3::2\""),
        "IPv6 records present"
    );
    assert!(
        all.contains("\"addr\":\"2001:db8:1::2\"") && all.contains("\"icmp_type\":3"),
        "IPv6 time-exceeded hops present"
    );
    drop(lab);
}
