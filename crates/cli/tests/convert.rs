//! `vtnt convert` on files Debian's scamper wrote: warts to JSON equals what
//! sc_warts2json prints; corrupt input fails with a position and leaves no output file.

use std::process::Command;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("vtnt-convert-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn scamper_warts_converts_to_what_sc_warts2json_prints() {
    if Command::new("scamper").arg("-v").output().is_err() {
        eprintln!("SKIP: scamper is not installed");
        return;
    }
    let warts = tmp("loop.warts");
    let st = Command::new("scamper")
        .args(["-c", "trace -P icmp-paris -q 1 -w 1", "-O", "warts", "-o"])
        .arg(&warts)
        .args(["-i", "127.0.0.1"])
        .status()
        .unwrap();
    if !st.success() {
        eprintln!("SKIP: scamper cannot probe here (needs root)");
        return;
    }
    let json = tmp("loop.json");
    let o = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .arg("convert")
        .arg(&warts)
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs = Command::new("sc_warts2json")
        .arg(&warts)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&json).unwrap(),
        String::from_utf8_lossy(&theirs.stdout)
    );
    // and back: JSON -> warts -> JSON is stable
    let back = tmp("back.warts");
    let o = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .arg("convert")
        .arg(&json)
        .arg(&back)
        .output()
        .unwrap();
    assert!(o.status.success());
    let again = Command::new("sc_warts2json")
        .arg(&back)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert_eq!(again.stdout, theirs.stdout);
}

#[test]
fn corrupt_input_fails_and_leaves_no_file() {
    let bad = tmp("bad.warts");
    std::fs::write(
        &bad,
        [0x12, 0x05, 0x00, 0x06, 0xff, 0xff, 0xff, 0xff, 1, 2, 3],
    )
    .unwrap();
    let out = tmp("bad.json");
    let o = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .arg("convert")
        .arg(&bad)
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("byte 4"), "{err}");
    assert!(!out.exists());
    let o = Command::new(env!("CARGO_BIN_EXE_vtnt"))
        .arg("convert")
        .arg(tmp("missing.warts"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.warts"));
}
